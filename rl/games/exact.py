"""Tic-tac-toe solved: perfect play, and a policy's exact results over the whole game tree.

Tic-tac-toe has 5,478 legal positions, so nothing about it needs sampling:
- ``PerfectPlayer`` (registered as ``perfect`` in rl/games/players.py) plays by negamax: among the moves
  with the best game-theoretic value, one uniformly at random. It never loses.
- ``exact_results`` walks every line of play of a deterministic player (a greedy
  policy artefact) against an opponent whose move probabilities are known (random,
  one-step look-ahead, perfect) and returns its win, draw and loss probabilities;
  ``losing_lines`` counts the opponent's move sequences that beat it, so 0 means no
  opponent can ever win against it.

``python -m rl.games.exact RUN_DIR...`` prints these for a run's checkpoints: the
expected losses per 1,000 games against the random and look-ahead players (seats
alternating, as in tournaments) without the noise of 1,000 sampled games.

Positions are tuples of 9 cells (0 empty, 1 the first player's stone, 2 the
second's), cell ``a`` at row ``a // 3``, column ``a % 3``, as PettingZoo's move
numbers and observation layout have it (``tests/test_games.py`` checks
``features`` against PettingZoo's observations).
"""

import functools
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rl import command_line, registry
from rl.games.artefact import ArtefactPlayer
from rl.games.spec import check_game_name
from rl.policy import PolicyArtefactError, artefact_dir, policy_steps, select_steps

GAME = "tictactoe"
Position = Tuple[int, ...]
START: Position = (0,) * 9
LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),  # rows
    (0, 3, 6), (1, 4, 7), (2, 5, 8),  # columns
    (0, 4, 8), (2, 4, 6),  # diagonals
)  # fmt: skip
WIN, DRAW, LOSS = np.eye(3)  # a result as (win, draw, loss) probabilities
SCORE = np.array([1.0, 0.5, 0.0])  # a result's expected score, as tournaments count


def winner(position: Position) -> int:
    """1 or 2 if that player has three in a row, else 0."""
    for a, b, c in LINES:
        if position[a] and position[a] == position[b] == position[c]:
            return position[a]
    return 0


def to_move(position: Position) -> int:
    """1 or 2: whose turn it is (the first player when the stone counts are equal)."""
    return 1 if position.count(1) == position.count(2) else 2


def is_over(position: Position) -> bool:
    return bool(winner(position)) or 0 not in position


def play(position: Position, move: int) -> Position:
    """The position after the player to move puts a stone on cell ``move``."""
    return position[:move] + (to_move(position),) + position[move + 1 :]


def features_and_mask(position: Position) -> Tuple[np.ndarray, np.ndarray]:
    """What the player to move sees, as rl.games.spec.features_and_mask gives it:
    (float32 [18], the [3, 3, 2] planes of its own and its opponent's stones flattened;
    bool [9], the empty cells)."""
    cells = np.array(position)
    mover = to_move(position)
    planes = np.stack([cells == mover, cells == 3 - mover], axis=-1).astype(np.float32)
    return planes.reshape(-1), cells == 0


def position_from_features(features: np.ndarray) -> Position:
    """The position a player to move sees in its features (whose turn follows from the
    stone counts)."""
    planes = np.asarray(features).reshape(9, 2) > 0.5
    own, other = planes[:, 0], planes[:, 1]
    mover = 1 if own.sum() == other.sum() else 2
    return tuple(int(mover if o else (3 - mover if t else 0)) for o, t in zip(own, other))


@functools.lru_cache(maxsize=None)
def value(position: Position) -> int:
    """The game-theoretic value for the player to move: 1 a win, 0 a draw, -1 a loss."""
    if winner(position):
        return -1  # the player who just moved has won
    if 0 not in position:
        return 0
    return max(-value(play(position, m)) for m in range(9) if position[m] == 0)


def best_moves(position: Position) -> List[int]:
    """The moves that keep the game-theoretic value, ascending."""
    moves = [m for m in range(9) if position[m] == 0]
    target = max(-value(play(position, m)) for m in moves)
    return [m for m in moves if -value(play(position, m)) == target]


class PerfectPlayer:
    """Negamax play: uniformly among the moves that keep the position's value."""

    name = "perfect"

    def move_probabilities(self, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        moves = best_moves(position_from_features(features))
        probs = np.zeros(len(mask))
        probs[moves] = 1.0 / len(moves)
        return probs

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        return int(rng.choice(best_moves(position_from_features(features))))


# --- a deterministic player's exact results -------------------------------------------

Decide = Callable[[Position], int]


def deciding(player) -> Decide:
    """A deterministic player's move per position, computed once per position.

    ``player.act`` must not depend on its rng (a greedy policy artefact); it is
    handed None so that a player that draws from it fails loudly.
    """
    moves: Dict[Position, int] = {}

    def decide(position: Position) -> int:
        if position not in moves:
            features, mask = features_and_mask(position)
            moves[position] = int(player.act(features, mask, None))
        return moves[position]

    return decide


def exact_results(decide: Decide, opponent, seat: int) -> np.ndarray:
    """(win, draw, loss) probabilities of a deterministic player against ``opponent``.

    Args:
        decide: the player's move per position (``deciding``).
        opponent: has ``move_probabilities(features, mask)`` -> float [9].
        seat: 0 if the player moves first, 1 if second.
    """
    piece = seat + 1

    @functools.lru_cache(maxsize=None)
    def result(position: Position) -> np.ndarray:
        if winner(position):
            return WIN if winner(position) == piece else LOSS
        if 0 not in position:
            return DRAW
        if to_move(position) == piece:
            return result(play(position, decide(position)))
        probs = opponent.move_probabilities(*features_and_mask(position))
        return sum(p * result(play(position, m)) for m, p in enumerate(probs) if p > 0)

    return result(START)


def losing_lines(decide: Decide, seat: int) -> int:
    """How many of the opponent's move sequences end in a loss for a deterministic player
    (0: no opponent can beat it from that seat)."""
    piece = seat + 1

    @functools.lru_cache(maxsize=None)
    def count(position: Position) -> int:
        if winner(position):
            return int(winner(position) != piece)
        if 0 not in position:
            return 0
        if to_move(position) == piece:
            return count(play(position, decide(position)))
        return sum(count(play(position, m)) for m in range(9) if position[m] == 0)

    return count(START)


# --- python -m rl.games.exact ----------------------------------------------------------

PROG = "python -m rl.games.exact"
OPPONENTS = ("random", "one_step_lookahead", "perfect")


def report_rows(paths: Sequence[str]) -> List[Dict[str, object]]:
    """One row per artefact: losses per 1,000 games (seats alternating) against each
    opponent, and the losing lines from either seat."""
    spec = check_game_name(GAME)
    opponents = {name: registry.players.get(name)(spec) for name in OPPONENTS}
    rows = []
    for path in paths:
        decide = deciding(ArtefactPlayer(path, game=GAME))
        row: Dict[str, object] = {"artefact": path}
        for name, opponent in opponents.items():
            results = [exact_results(decide, opponent, seat) for seat in (0, 1)]
            row[name] = 1000 * float(np.mean([r[2] for r in results]))
        row["losing_lines"] = [losing_lines(decide, seat) for seat in (0, 1)]
        rows.append(row)
    return rows


def artefact_paths(run_dir: str, latest: bool) -> List[str]:
    steps = policy_steps(run_dir)
    if not steps:
        command_line.fail(PROG, f"{run_dir} holds no policy artefacts (policies/ckpt-<step>/)")
    return [artefact_dir(run_dir, s) for s in select_steps(steps, None, latest)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = command_line.OneLineParser(
        prog=PROG,
        description="Exact results of tic-tac-toe runs' greedy policies over the whole game "
        "tree: expected losses per 1,000 games against the random, one-step look-ahead and "
        "perfect players, and the opponent's move sequences that beat them.",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="tic-tac-toe run folders")
    parser.add_argument("--latest", action="store_true", help="only each run's newest artefact")
    args = parser.parse_args(argv)
    paths = []
    for run_dir in args.run_dirs:
        if not os.path.isdir(run_dir):
            command_line.fail(PROG, f"{run_dir} is not a folder")
        paths.extend(artefact_paths(run_dir, args.latest))
    try:
        rows = report_rows(paths)
    except (PolicyArtefactError, ValueError) as e:
        command_line.fail(PROG, str(e))
    header = "losses per 1,000 games (seats alternating); lines that beat it (first, second)"
    print(header)
    print(f"{'artefact':<50} {'random':>8} {'look-ahead':>10} {'perfect':>8}  losing lines")
    for row in rows:
        first, second = row["losing_lines"]
        print(
            f"{row['artefact']:<50} {row['random']:>8.2f} {row['one_step_lookahead']:>10.2f} "
            f"{row['perfect']:>8.2f}  {first}, {second}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
