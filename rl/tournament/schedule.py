"""Who plays whom: the entrants, the games of each pair, their seeds and seats.

An entrant is a scripted player (registry.players) or a policy artefact of a run
(``policies/ckpt-<step>/``, named ``<run folder name>@<step>``). Every pair of
entrants plays ``games_per_pair`` games. A game is identified by its pair (the two
names in sorted order) and its index, and everything about it follows from the
tournament seed and that identity: its seed, and who moves first (the players
alternate, starting from a seeded coin, so with an odd count the coin's winner
moves first once more). Results therefore do not depend on which process plays a
game or when, and adding entrants or games never changes the games already
played.
"""

import dataclasses
import hashlib
import os
from typing import Dict, List, Optional, Sequence, Tuple

from rl import registry, seeding
from rl.games.artefact import artefact_game
from rl.games.spec import GameSpec
from rl.policy import (
    PolicyArtefactError,
    artefact_dir,
    policy_steps,
    read_artefact,
    select_steps,
)

SCRIPTED = "scripted"
ARTEFACT = "artefact"


class TournamentError(ValueError):
    """Input a tournament cannot run with (reported as one line, exit code 2)."""


@dataclasses.dataclass(frozen=True)
class Entrant:
    """One player of a tournament.

    Attributes:
        name: its name in the results (unique).
        kind: SCRIPTED or ARTEFACT.
        source: the registered player's name, or the artefact folder.
    """

    name: str
    kind: str
    source: str


@dataclasses.dataclass(frozen=True)
class GameKey:
    """One game: the pair in sorted name order and the game's index within the pair."""

    a: str
    b: str
    index: int


def run_entrants(run_dir: str, spec: GameSpec, every: Optional[int], latest: bool) -> List[Entrant]:
    """The entrants of one run folder: its selected policy artefacts.

    Args:
        run_dir: the run folder.
        spec: the tournament's game; the run must have trained on it.
        every: see ``select_steps``.
        latest: see ``select_steps``.

    Raises:
        TournamentError: not a folder, no artefacts, an unreadable one, or a run of
            another game.
    """
    if not os.path.isdir(run_dir):
        raise TournamentError(f"{run_dir} is not a folder")
    steps = policy_steps(run_dir)
    if not steps:
        raise TournamentError(
            f"{run_dir} holds no policy artefacts (policies/ckpt-<step>/): is it a run folder "
            "with at least one checkpoint?"
        )
    label = os.path.basename(os.path.normpath(os.path.abspath(run_dir)))
    entrants = []
    for step in select_steps(steps, every, latest):
        path = os.path.abspath(artefact_dir(run_dir, step))
        try:
            game = artefact_game(path)  # reads policy.json
            read_artefact(path)  # and the weights
        except PolicyArtefactError as e:
            raise TournamentError(str(e)) from None
        if game != spec.name:
            raise TournamentError(f"{run_dir} is a run of {game}, not {spec.name}")
        entrants.append(Entrant(f"{label}@{step}", ARTEFACT, path))
    return entrants


def scripted_entrant(name: str, spec: GameSpec) -> Entrant:
    """A registered scripted player, checked to play ``spec``'s game.

    Raises:
        UnknownNameError: not a registered player.
        TournamentError: the player does not play this game.
    """
    factory = registry.players.get(name)
    try:
        factory(spec)
    except ValueError as e:
        raise TournamentError(str(e)) from None
    return Entrant(name, SCRIPTED, name)


def check_entrants(entrants: Sequence[Entrant]) -> None:
    """Raises TournamentError for fewer than two entrants or a name used twice."""
    seen = set()
    for entrant in entrants:
        if entrant.name in seen:
            raise TournamentError(
                f"two players are named {entrant.name!r} (two run folders with the same name, "
                "or a player given twice)"
            )
        seen.add(entrant.name)
    if len(entrants) < 2:
        raise TournamentError(f"a tournament needs at least 2 players, got {len(entrants)}")


def pairs(names: Sequence[str]) -> List[Tuple[str, str]]:
    """Every unordered pair of distinct names, each in sorted order, sorted."""
    ordered = sorted(names)
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]


def all_games(names: Sequence[str], games_per_pair: int) -> List[GameKey]:
    """Every game of the tournament, pair by pair."""
    return [GameKey(a, b, k) for a, b in pairs(names) for k in range(games_per_pair)]


def name_number(name: str) -> int:
    """A stable 64-bit number for a name (Python's hash() changes between processes)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")


def game_seed(seed: int, key: GameKey) -> int:
    """The seed of one game (env reset and the players' draws): a 31-bit integer."""
    return seeding.derived_seed(seed, name_number(key.a), name_number(key.b), key.index)


def first_mover(seed: int, key: GameKey) -> str:
    """Who moves first in game ``key``: a and b alternate, from a seeded coin per pair."""
    coin = seeding.derived_seed(seed, name_number(key.a), name_number(key.b)) & 1
    return key.a if (key.index + coin) % 2 == 0 else key.b


def config_record(
    game: str, games_per_pair: int, seed: int, entrants: Sequence[Entrant]
) -> Dict[str, object]:
    """What tournament.json records about a tournament's set-up."""
    return {
        "game": game,
        "games_per_pair": games_per_pair,
        "seed": seed,
        "players": {e.name: {"kind": e.kind, "source": e.source} for e in entrants},
    }


def config_conflict(old: Dict[str, object], new: Dict[str, object]) -> Optional[str]:
    """Why a tournament folder set up as ``old`` cannot continue as ``new``, or None.

    It can if the game and seed are the same and the set of games only grows: every
    old player is still in, and ``games_per_pair`` is not smaller.
    """
    for field in ("game", "seed"):
        if old.get(field) != new.get(field):
            return f"it holds a tournament with {field} {old.get(field)!r}, not {new.get(field)!r}"
    if int(new["games_per_pair"]) < int(old.get("games_per_pair", 0)):
        return (
            f"it holds {old['games_per_pair']} games per pair; --games may grow, not shrink to "
            f"{new['games_per_pair']}"
        )
    missing = sorted(set(old.get("players", {})) - set(new["players"]))
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        return f"its players {shown} are not in this tournament; players may be added, not removed"
    return None
