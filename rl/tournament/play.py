"""Playing a tournament's games, in this process, a worker process or a Ray task.

``play_chunk`` plays a list of games of one pair and returns their records (one
JSON-ready dict per game). A process keeps the players and game envs it built
(``_CACHE``), so a worker loads each policy artefact once, not once per game. A
game uses only its own seed: the env is reset with it and both players draw from
one generator made from it.

A player returning an illegal move forfeits the game (``illegal`` names it).
"""

import dataclasses
import signal
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rl import registry
from rl.games.players import Player
from rl.games.spec import check_game_name, features_and_mask, make_game
from rl.tournament.schedule import ARTEFACT, Entrant, GameKey, first_mover, game_seed

MAX_MOVES = 10_000  # a game longer than this is a bug in the game, not a draw


@dataclasses.dataclass(frozen=True)
class GameResult:
    """What happened in one game, by seat (0 moved first).

    Attributes:
        returns: the seats' summed rewards.
        moves: moves made.
        illegal: the seat that made an illegal move (and lost), or None.
    """

    returns: Tuple[float, float]
    moves: int
    illegal: Optional[int]


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Games of one pair to play in one go.

    Attributes:
        game: the game's name.
        a: the pair's first entrant (names in sorted order).
        b: the pair's second entrant.
        indices: the games' indices within the pair.
        seed: the tournament seed.
    """

    game: str
    a: Entrant
    b: Entrant
    indices: Tuple[int, ...]
    seed: int


def play_game(env, spec, seated: Sequence[Player], seed: int) -> GameResult:
    """Plays one game of an AEC env, ``seated[0]`` moving first.

    Args:
        env: a PettingZoo AEC env of the game (reset here).
        spec: its GameSpec.
        seated: the two players, in move order.
        seed: resets the env and seeds the players' generator.
    """
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    first = env.agent_selection
    seat_of = {agent: (0 if agent == first else 1) for agent in env.possible_agents}
    returns = [0.0, 0.0]
    for moves in range(MAX_MOVES):
        mover = env.agent_selection
        if env.terminations[mover] or env.truncations[mover]:
            return GameResult((returns[0], returns[1]), moves, None)
        seat = seat_of[mover]
        features, mask = features_and_mask(spec, env.observe(mover))
        move = seated[seat].act(features, mask, rng)
        if not (isinstance(move, (int, np.integer)) and 0 <= move < len(mask) and mask[move]):
            lost = [0.0, 0.0]
            lost[seat], lost[1 - seat] = -1.0, 1.0
            return GameResult((lost[0], lost[1]), moves, seat)
        env.step(int(move))
        for agent, reward in env.rewards.items():
            returns[seat_of[agent]] += float(reward)
    raise RuntimeError(f"game {spec.name!r} did not end within {MAX_MOVES} moves")


def game_record(key: GameKey, seed: int, first: str, result: GameResult) -> Dict[str, Any]:
    """The games.jsonl line of one game (a JSON-ready dict).

    ``winner`` is the name with the higher return (the illegal mover's opponent), or
    None for a draw.
    """
    second = key.b if first == key.a else key.a
    by_name = {first: result.returns[0], second: result.returns[1]}
    winner = None
    if by_name[first] != by_name[second]:
        winner = first if by_name[first] > by_name[second] else second
    return {
        "pair": [key.a, key.b],
        "index": key.index,
        "seed": seed,
        "first": first,
        "winner": winner,
        "returns": {key.a: by_name[key.a], key.b: by_name[key.b]},
        "moves": result.moves,
        "illegal": None if result.illegal is None else (first, second)[result.illegal],
    }


def build_player(entrant: Entrant, game: str) -> Player:
    """The Player of an entrant, built for ``game``."""
    if entrant.kind == ARTEFACT:
        from rl.games.artefact import ArtefactPlayer  # late: loads gymnasium and the policy

        return ArtefactPlayer(entrant.source, name=entrant.name, game=game)
    return registry.players.get(entrant.source)(check_game_name(game))


class PlayerCache:
    """The players and envs one process has built, by entrant and game."""

    def __init__(self):
        self.players: Dict[Tuple[Entrant, str], Player] = {}
        self.envs: Dict[str, Any] = {}

    def player(self, entrant: Entrant, game: str) -> Player:
        if (entrant, game) not in self.players:
            self.players[(entrant, game)] = build_player(entrant, game)
        return self.players[(entrant, game)]

    def env(self, game: str):
        if game not in self.envs:
            self.envs[game] = make_game(game)
        return self.envs[game]


def play_chunk(chunk: Chunk, cache: PlayerCache) -> List[Dict[str, Any]]:
    """Plays a chunk's games; returns their records in index order."""
    spec = check_game_name(chunk.game)
    env = cache.env(chunk.game)
    by_name = {
        chunk.a.name: cache.player(chunk.a, chunk.game),
        chunk.b.name: cache.player(chunk.b, chunk.game),
    }
    records = []
    for index in chunk.indices:
        key = GameKey(chunk.a.name, chunk.b.name, index)
        seed = game_seed(chunk.seed, key)
        first = first_mover(chunk.seed, key)
        second = chunk.b.name if first == chunk.a.name else chunk.a.name
        result = play_game(env, spec, (by_name[first], by_name[second]), seed)
        records.append(game_record(key, seed, first, result))
    return records


_CACHE = PlayerCache()  # this process's players, for worker processes and Ray tasks


def play_chunk_here(chunk: Chunk) -> List[Dict[str, Any]]:
    """``play_chunk`` with this process's cache: what a worker process or Ray task runs."""
    return play_chunk(chunk, _CACHE)


class WorkerDied(RuntimeError):
    """A worker process ended without being asked to (kill -9, the OOM killer)."""


class WorkerHung(RuntimeError):
    """A worker process (or Ray task) owed games for --worker_timeout seconds."""


def serve_chunks(conn) -> None:
    """A worker process: plays each chunk ``conn`` brings and sends back its records, or
    the exception that stopped it; ends at None or when the parent's end closes (a
    chunk is at most a few seconds of play, so an orphan ends soon after its parent).

    Args:
      conn: this worker's end of a pipe to the parent.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group; the parent stops us
    while True:
        try:
            chunk = conn.recv()
        except EOFError:  # the parent is gone
            return
        if chunk is None:
            return
        try:
            result = play_chunk_here(chunk)
        except Exception as error:  # reported by the parent as a failed game
            result = error
        try:
            conn.send(result)
        except OSError:  # the parent is gone
            return
