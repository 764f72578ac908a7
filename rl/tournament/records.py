"""The tournament folder's record of played games, and the score tables made from it.

``games.jsonl`` holds one JSON line per finished game (``play.game_record``),
appended and fsynced as games finish, so a killed tournament loses only games in
flight. A last line without its newline (a kill cut it) is dropped before
appending; any other line that is not a game record is refused.
``tournament.json`` records the set-up the games belong to.
"""

import json
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from rl.files import read_json_object, write_text_atomic
from rl.logbook import drop_cut_last_line
from rl.tournament.schedule import GameKey, TournamentError

GAMES_FILE = "games.jsonl"
CONFIG_FILE = "tournament.json"
RECORD_FIELDS = ("pair", "index", "winner")


def record_key(record: Dict[str, Any]) -> GameKey:
    """The GameKey of a game record."""
    a, b = record["pair"]
    return GameKey(a, b, int(record["index"]))


def record_problem(record: Any) -> Optional[str]:
    """What is wrong with a parsed games.jsonl line, or None."""
    if not isinstance(record, dict) or any(f not in record for f in RECORD_FIELDS):
        return f"is not a game record (an object with {', '.join(RECORD_FIELDS)})"
    pair = record["pair"]
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(n, str) for n in pair)):
        return "has no pair of two names"
    if not isinstance(record["index"], int) or record["index"] < 0:
        return "has no game index"
    if record["winner"] is not None and record["winner"] not in pair:
        return f"names winner {record['winner']!r}, who is not in its pair"
    return None


def read_games(path: str) -> List[Dict[str, Any]]:
    """The complete game records of a games.jsonl, first of each game only.

    A last line without its newline is skipped (``drop_cut_last_line`` removes it
    before the next append).

    Raises:
        TournamentError: a complete line that is not a game record.
    """
    from rl.logbook import JsonLinesError, parse_json_lines  # late: it loads TensorBoard

    try:
        parsed = parse_json_lines(
            path, record_problem, "delete that line, or use another --output_dir"
        )
    except JsonLinesError as e:
        raise TournamentError(str(e)) from None
    except OSError as e:  # a folder where the file should be, say
        raise TournamentError(
            f"{path} cannot be read ({e.strerror}); use another --output_dir"
        ) from None
    records, seen = [], set()
    for _, record in parsed:
        key = record_key(record)
        if key not in seen:
            seen.add(key)
            records.append(record)
    return records


class GamesFile:
    """Appends game records to games.jsonl, each batch flushed and fsynced."""

    def __init__(self, path: str):
        self.path = path
        cut = drop_cut_last_line(path)  # a kill mid-append: that game is not played yet
        if cut:
            print(f"rl: {cut}: its game is played again", file=sys.stderr, flush=True)

    def append(self, records: Iterable[Dict[str, Any]]) -> None:
        lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
        if not lines:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())


def read_config(folder: str) -> Optional[Dict[str, Any]]:
    """The tournament.json of a folder, or None if it has none.

    Raises:
        TournamentError: the file is not a JSON object.
    """
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.exists(path):
        return None
    try:
        config = read_json_object(path)
    except OSError as e:
        raise TournamentError(
            f"{path} cannot be read ({e.strerror}); use another --output_dir"
        ) from None
    except ValueError as e:
        raise TournamentError(f"{e}; use another --output_dir") from None
    if not isinstance(config.get("players"), dict):
        raise TournamentError(f"{path} is not a tournament's set-up; use another --output_dir")
    return config


def write_config(folder: str, config: Dict[str, Any]) -> None:
    write_text_atomic(os.path.join(folder, CONFIG_FILE), json.dumps(config, indent=2) + "\n")


def score_tables(
    records: Iterable[Dict[str, Any]], names: Sequence[str]
) -> Tuple[np.ndarray, np.ndarray]:
    """Win and draw counts between ``names`` from game records.

    Records of games between players not in ``names`` are left out.

    Args:
        records: game records (``winner`` a name of the pair, or None for a draw).
        names: the players, in table order.

    Returns:
        (wins int [P, P]: games row won against column, draws int [P, P], symmetric).
    """
    index = {name: i for i, name in enumerate(names)}
    count = len(names)
    wins = np.zeros((count, count), np.int64)
    draws = np.zeros((count, count), np.int64)
    for record in records:
        a, b = record["pair"]
        if a not in index or b not in index:
            continue
        i, j = index[a], index[b]
        winner = record["winner"]
        if winner is None:
            draws[i, j] += 1
            draws[j, i] += 1
        elif winner == a:
            wins[i, j] += 1
        else:
            wins[j, i] += 1
    return wins, draws
