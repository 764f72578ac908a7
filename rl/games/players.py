"""Players of the games in rl.games.spec: the ``Player`` interface and scripted players.

A player sees what ``features_and_mask`` gives for its turn and returns a legal
move. Scripted players are registered in ``registry.players`` by name; the
registered object is a factory ``(GameSpec) -> Player`` that raises ValueError
for a game the player cannot play (``always_rock`` plays rock-paper-scissors
only). They are opponents for training (rl/games/versus.py) and entrants of
tournaments (rl/tournament).

Every random choice a player makes is drawn from the ``rng`` it is handed, so a
game seeded once plays the same whoever runs it.

One-step look-ahead reads the board from the features. PettingZoo lays out
both board games as [rows, cols, 2], channel 0 the stones of the player to move
and channel 1 its opponent's. Tic-tac-toe is 3 x 3 with move ``a`` on cell
``(a // 3, a % 3)``; connect four is 6 x 7 with row 0 at the top, move ``c``
drops a stone into column ``c`` onto its lowest empty row.
"""

import dataclasses
from typing import Callable, Protocol, Tuple

import numpy as np

from rl import registry
from rl.games.spec import GameSpec

DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # row, column, two diagonals


class Player(Protocol):
    """Anything that plays a game: a name and ``act``."""

    name: str

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        """A legal move.

        Args:
            features: float32 [num_features], the game's view for the player to move.
            mask: bool [num_actions], True for the legal moves (at least one).
            rng: the generator to draw any random choice from.
        """
        ...


PlayerFactory = Callable[[GameSpec], Player]


def legal_moves(mask: np.ndarray) -> np.ndarray:
    """The indices of the legal moves, ascending: int [L].

    Args:
        mask: bool [num_actions].

    Raises:
        ValueError: if no move is legal (the game is over; nobody should be asked).
    """
    moves = np.flatnonzero(np.asarray(mask, bool))
    if moves.size == 0:
        raise ValueError("no legal move: the game is over")
    return moves


def random_legal(mask: np.ndarray, rng: np.random.Generator) -> int:
    """A legal move chosen uniformly.

    Args:
        mask: bool [num_actions].
        rng: the generator to draw from.
    """
    return int(rng.choice(legal_moves(mask)))


# --- boards ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Grid:
    """A board game of k in a row on a grid.

    Attributes:
        rows: board height.
        cols: board width.
        k: stones in a row that win.
        gravity: a move names a column and the stone drops to its lowest empty row
            (connect four); without it a move names the cell ``(a // cols, a % cols)``.
    """

    rows: int
    cols: int
    k: int
    gravity: bool


GRIDS = {
    "tictactoe": Grid(rows=3, cols=3, k=3, gravity=False),
    "connect_four": Grid(rows=6, cols=7, k=4, gravity=True),
}


def board_from_features(grid: Grid, features: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The stones of the player to move and of its opponent.

    Args:
        grid: the game's board.
        features: float32 [rows * cols * 2], PettingZoo's [rows, cols, 2] observation flattened.

    Returns:
        (own, opponent), bool [rows, cols] each.
    """
    planes = np.asarray(features).reshape(grid.rows, grid.cols, 2) > 0.5
    return planes[:, :, 0], planes[:, :, 1]


def landing_cell(grid: Grid, occupied: np.ndarray, move: int) -> Tuple[int, int]:
    """The cell a legal ``move`` puts a stone on.

    Args:
        grid: the game's board.
        occupied: bool [rows, cols], True where any stone is.
        move: a legal move.
    """
    if not grid.gravity:
        return move // grid.cols, move % grid.cols
    empty_rows = np.flatnonzero(~occupied[:, move])
    return int(empty_rows[-1]), move  # row 0 is the top: the stone falls to the largest row


def completes_line(grid: Grid, stones: np.ndarray, cell: Tuple[int, int]) -> bool:
    """Whether a stone on ``cell`` gives ``grid.k`` in a row with ``stones``.

    Args:
        grid: the game's board.
        stones: bool [rows, cols], one player's stones (``cell`` need not be set).
        cell: (row, column) of the new stone.
    """
    row, col = cell
    for dr, dc in DIRECTIONS:
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < grid.rows and 0 <= c < grid.cols and stones[r, c]:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        if run >= grid.k:
            return True
    return False


def winning_moves(grid: Grid, stones: np.ndarray, occupied: np.ndarray, moves) -> np.ndarray:
    """The moves among ``moves`` with which the owner of ``stones`` wins at once: int [W].

    Args:
        grid: the game's board.
        stones: bool [rows, cols], the stones of the player considered.
        occupied: bool [rows, cols], every stone on the board.
        moves: int [L], legal moves.
    """
    return np.array(
        [m for m in moves if completes_line(grid, stones, landing_cell(grid, occupied, int(m)))],
        dtype=np.int64,
    )


# --- scripted players ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RandomPlayer:
    """A uniformly random legal move."""

    name: str = "random"

    def move_probabilities(self, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """float [num_actions]: how likely each move is (rl/games/exact.py reads it)."""
        mask = np.asarray(mask, bool)
        return mask / mask.sum()

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        return random_legal(mask, rng)


@dataclasses.dataclass(frozen=True)
class FirstLegalPlayer:
    """The legal move with the smallest index."""

    name: str = "first_legal"

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        return int(legal_moves(mask)[0])


@dataclasses.dataclass(frozen=True)
class FixedMovePlayer:
    """Always the same move (it must always be legal: rock-paper-scissors)."""

    name: str
    move: int

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        if not mask[self.move]:
            raise ValueError(f"player {self.name!r}: its move {self.move} is not legal")
        return self.move


@dataclasses.dataclass(frozen=True)
class OneStepLookahead:
    """Wins at once if it can, else blocks the opponent's immediate win, else plays at
    random (each choice uniform among the moves that qualify)."""

    grid: Grid
    name: str = "one_step_lookahead"

    def candidates(self, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """int [C]: the moves it chooses among, uniformly."""
        moves = legal_moves(mask)
        own, opponent = board_from_features(self.grid, features)
        occupied = own | opponent
        for stones in (own, opponent):  # my win first, then the opponent's to block
            found = winning_moves(self.grid, stones, occupied, moves)
            if found.size:
                return found
        return moves

    def move_probabilities(self, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """float [num_actions]: how likely each move is (rl/games/exact.py reads it)."""
        probs = np.zeros(len(mask))
        found = self.candidates(features, mask)
        probs[found] = 1.0 / len(found)
        return probs

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        return int(rng.choice(self.candidates(features, mask)))


RPS_MOVES = {"rock": 0, "paper": 1, "scissors": 2}  # PettingZoo rps_v2's action order


def _require_game(player: str, spec: GameSpec, games) -> None:
    if spec.name not in games:
        raise ValueError(f"player {player!r} plays {', '.join(sorted(games))}, not {spec.name!r}")


@registry.players.register("random")
def random_player(spec: GameSpec) -> Player:
    """Uniform over the legal moves; any game."""
    return RandomPlayer()


@registry.players.register("first_legal")
def first_legal(spec: GameSpec) -> Player:
    """The lowest-numbered legal move; any game."""
    return FirstLegalPlayer()


def _always(throw: str) -> PlayerFactory:
    def factory(spec: GameSpec) -> Player:
        _require_game(f"always_{throw}", spec, ("rps",))
        return FixedMovePlayer(f"always_{throw}", RPS_MOVES[throw])

    factory.__doc__ = f"Throws {throw} every time; rock-paper-scissors only."
    return factory


always_rock = registry.players.register("always_rock")(_always("rock"))
always_paper = registry.players.register("always_paper")(_always("paper"))
always_scissors = registry.players.register("always_scissors")(_always("scissors"))


@registry.players.register("one_step_lookahead")
def one_step_lookahead(spec: GameSpec) -> Player:
    """Win now, else block, else random; tic-tac-toe and connect four."""
    _require_game("one_step_lookahead", spec, GRIDS)
    return OneStepLookahead(GRIDS[spec.name])


@registry.players.register("perfect")
def perfect(spec: GameSpec) -> Player:
    """Perfect play by negamax (random among the best moves); tic-tac-toe only."""
    _require_game("perfect", spec, ("tictactoe",))
    # Imported here, not at the top: ``python -m rl.games.exact`` must be its first import.
    from rl.games.exact import PerfectPlayer

    return PerfectPlayer()
