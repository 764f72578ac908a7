"""A finished tournament's outputs: payoff.csv, payoff.png, ratings.json, tb/ and a summary.

``standings`` turns the win and draw tables into ratings, intervals and the Nash
mixture; the writers lay them out with the players in rating order (best first).
"""

import csv
import dataclasses
import io
import json
import os
import time
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from rl.files import write_atomically, write_bytes_atomic, write_text_atomic
from rl.tournament import ratings

PAYOFF_CSV = "payoff.csv"
PAYOFF_PNG = "payoff.png"
RATINGS_JSON = "ratings.json"
TB_DIR = "tb"
TB_TAG = "tournament/payoff"
RESAMPLES = 200
LEVEL = 0.95
MAX_ANNOTATED = 30  # more players than this: the heatmap's cells carry no numbers


@dataclasses.dataclass(frozen=True)
class Standings:
    """Everything a tournament's outputs report, players in rating order (best first).

    Attributes:
        names: [P] the players.
        wins: int [P, P], games row won against column.
        draws: int [P, P], symmetric.
        scores: float [P, P], mean score of row against column (NaN on the diagonal).
        elo: float [P], Bradley-Terry Elo (mean 1000).
        interval: float [P, 2], the bootstrap 95% interval of each Elo.
        difference: float [P, P, 2], the bootstrap 95% interval of elo[i] - elo[j].
        nash: float [P], the meta-game's Nash mixture.
    """

    names: List[str]
    wins: np.ndarray
    draws: np.ndarray
    scores: np.ndarray
    elo: np.ndarray
    interval: np.ndarray
    difference: np.ndarray
    nash: np.ndarray

    @property
    def score_vs_nash(self) -> np.ndarray:
        """float [P]: each player's mean score against the Nash mixture (itself: 0.5)."""
        scores = np.where(np.isnan(self.scores), 0.5, self.scores)
        return scores @ self.nash


def standings(names: Sequence[str], wins: np.ndarray, draws: np.ndarray, seed: int) -> Standings:
    """Ratings, bootstrap intervals and Nash mixture of a complete tournament.

    Args:
        names: [P] the players, in table order.
        wins: int [P, P], games row won against column (every pair played).
        draws: int [P, P], symmetric.
        seed: seeds the bootstrap.
    """
    elo = ratings.elo_ratings(wins, draws)
    samples = ratings.bootstrap_elo(wins, draws, RESAMPLES, seed)
    interval = ratings.percentile_interval(samples, LEVEL).T
    difference = np.moveaxis(
        ratings.percentile_interval(samples[:, :, None] - samples[:, None, :], LEVEL), 0, -1
    )
    scores = ratings.mean_scores(wins, draws)
    nash = ratings.meta_game_nash(scores)
    order = sorted(range(len(names)), key=lambda i: (-elo[i], names[i]))
    grid = np.ix_(order, order)
    return Standings(
        names=[names[i] for i in order],
        wins=np.asarray(wins)[grid],
        draws=np.asarray(draws)[grid],
        scores=scores[grid],
        elo=elo[order],
        interval=interval[order],
        difference=difference[grid],
        nash=nash[order],
    )


def payoff_rows(table: Standings) -> List[Dict[str, Any]]:
    """payoff.csv's rows: one per ordered pair of distinct players, row player first."""
    rows = []
    for i, player in enumerate(table.names):
        for j, opponent in enumerate(table.names):
            if i == j:
                continue
            wins, draws, losses = table.wins[i, j], table.draws[i, j], table.wins[j, i]
            rows.append(
                {
                    "player": player,
                    "opponent": opponent,
                    "score": round(float(table.scores[i, j]), 6),
                    "wins": int(wins),
                    "draws": int(draws),
                    "losses": int(losses),
                    "games": int(wins + draws + losses),
                }
            )
    return rows


def payoff_csv(table: Standings) -> str:
    """payoff.csv's text: player, opponent, score, wins, draws, losses, games."""
    out = io.StringIO()
    fields = ["player", "opponent", "score", "wins", "draws", "losses", "games"]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(payoff_rows(table))
    return out.getvalue()


def ratings_record(table: Standings, game: str, games_per_pair: int, seed: int) -> Dict[str, Any]:
    """ratings.json's contents."""
    players = []
    for i, name in enumerate(table.names):
        players.append(
            {
                "name": name,
                "elo": round(float(table.elo[i]), 2),
                "elo_low": round(float(table.interval[i, 0]), 2),
                "elo_high": round(float(table.interval[i, 1]), 2),
                "nash": round(float(table.nash[i]), 6),
                "score_vs_nash": round(float(table.score_vs_nash[i]), 6),
                "games": int(table.wins[i].sum() + table.wins[:, i].sum() + table.draws[i].sum()),
            }
        )
    differences = []
    for i, better in enumerate(table.names):
        for j in range(i + 1, len(table.names)):
            low, high = table.difference[i, j]
            differences.append(
                {
                    "better": better,
                    "worse": table.names[j],
                    "elo": round(float(table.elo[i] - table.elo[j]), 2),
                    "low": round(float(low), 2),
                    "high": round(float(high), 2),
                }
            )
    return {
        "game": game,
        "games_per_pair": games_per_pair,
        "seed": seed,
        "elo": "1000 + 400/ln(10) * Bradley-Terry strength; mean 1000; draws half a win each "
        f"way; Gaussian prior of precision {ratings.PRIOR} on each strength",
        "interval": f"{LEVEL:.0%} bootstrap percentile interval, {RESAMPLES} resamples of each "
        "pair's games",
        "nash": "maximin mixture of the meta-game with payoff mean score - 0.5 (scipy linprog)",
        "players": players,
        "differences": differences,
    }


def heatmap_png(table: Standings, title: str) -> Tuple[bytes, int, int]:
    """The payoff heatmap as PNG bytes: rows and columns in rating order, each cell the row
    player's mean score, a colour bar from 0 (loses every game) to 1 (wins every game).

    Returns:
        (PNG bytes, width, height in pixels).
    """
    # Imported here so the tournament's maths does not pay for matplotlib.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = len(table.names)
    size = min(max(4.0, 0.55 * count + 2.5), 30.0)
    figure = Figure(figsize=(size + 1.5, size), dpi=100)
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    masked = np.ma.masked_invalid(table.scores)
    image = axes.imshow(masked, cmap="RdBu", vmin=0.0, vmax=1.0)
    axes.set_facecolor("#d0d0d0")  # the diagonal: a player does not play itself
    labels = [f"{n} ({e:.0f})" for n, e in zip(table.names, table.elo)]
    axes.set_xticks(range(count), table.names, rotation=90)
    axes.set_yticks(range(count), labels)
    axes.set_xlabel("opponent")
    axes.set_ylabel("player (Elo), best first")
    axes.set_title(title)
    if count <= MAX_ANNOTATED:
        for i in range(count):
            for j in range(count):
                if i != j:
                    value = table.scores[i, j]
                    colour = "white" if abs(value - 0.5) > 0.3 else "black"
                    axes.text(
                        j,
                        i,
                        f"{value:.2f}",
                        ha="center",
                        va="center",
                        color=colour,
                        fontsize=8 if count > 12 else 10,
                    )
    bar = figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    bar.set_label("row player's mean score (win 1, draw 0.5, loss 0)")
    figure.tight_layout()
    buffer = io.BytesIO()
    canvas.print_png(buffer)
    width, height = canvas.get_width_height()
    return buffer.getvalue(), width, height


def write_tensorboard_image(folder: str, png: bytes, width: int, height: int, step: int) -> str:
    """The heatmap as an image summary in ``folder/tb`` at ``step`` (games played).

    A rerun at the same step replaces its file; TensorBoard is not needed to write it.
    """
    # Late: the logbook imports TensorBoard's protos (not TensorFlow).
    from rl.logbook import summary_event, write_event_file

    # The logbook's "gif" record is an encoded image summary; TensorBoard serves its bytes
    # unchanged, so a PNG is shown as well.
    event = summary_event("gif", TB_TAG, (width, height, png), step, time.time())
    tb = os.path.join(folder, TB_DIR)
    os.makedirs(tb, exist_ok=True)
    path = os.path.join(tb, f"events.out.tfevents.{step:015d}.tournament.v2")
    write_atomically(path, lambda tmp: write_event_file(tmp, [event]))
    return path


def write_outputs(folder: str, table: Standings, game: str, games_per_pair: int, seed: int) -> None:
    """Writes payoff.csv, payoff.png, ratings.json and the TensorBoard image."""
    write_text_atomic(os.path.join(folder, PAYOFF_CSV), payoff_csv(table))
    record = ratings_record(table, game, games_per_pair, seed)
    write_text_atomic(os.path.join(folder, RATINGS_JSON), json.dumps(record, indent=2) + "\n")
    games = int(table.wins.sum() + table.draws.sum() // 2)
    png, width, height = heatmap_png(
        table, f"{game}: {games_per_pair} games per pair, {games} in all"
    )
    write_bytes_atomic(os.path.join(folder, PAYOFF_PNG), png)
    write_tensorboard_image(folder, png, width, height, games)


def summary(table: Standings) -> str:
    """A plain-text table: rank, player, Elo with its interval, Nash weight."""
    width = max(6, *(len(n) for n in table.names))
    lines = [f"{'#':>3}  {'player':<{width}}  {'elo':>7}  {'95% interval':>17}  {'nash':>6}"]
    for i, name in enumerate(table.names):
        low, high = table.interval[i]
        lines.append(
            f"{i + 1:>3}  {name:<{width}}  {table.elo[i]:7.1f}  [{low:7.1f}, {high:7.1f}]  "
            f"{table.nash[i]:6.3f}"
        )
    return "\n".join(lines)
