"""The games as envs (rl/games/versus.py), by name, in the env registry.

``<game>``: against the random player; ``<game>_lookahead``: against the one-step
look-ahead player (board games); ``<game>_selfplay[_latest|_prioritised]``: against
the learner's own past policies (rl/games/selfplay.py; uniform over the pool unless
the suffix says otherwise).
"""

import functools

from rl import registry
from rl.games.selfplay import PoolOpponent
from rl.games.versus import VersusEnv

BOARD_GAMES = ("tictactoe", "connect_four")


def game_of_env(env: str):
    """The game a registered game env plays ("tictactoe_selfplay" -> "tictactoe"), or None."""
    for game in sorted(BOARD_GAMES + ("rps",), key=len, reverse=True):
        if env == game or env.startswith(game + "_"):
            return game
    return None


def _scripted(name: str):
    return lambda spec: registry.players.get(name)(spec)


def _versus(game: str, opponent, render_mode=None, loss_reward: float = -1.0) -> VersusEnv:
    return VersusEnv(game, opponent, render_mode=render_mode, loss_reward=loss_reward)


def _register(name: str, game: str, opponent, doc: str) -> None:
    constructor = functools.partial(_versus, game, opponent)
    constructor.__doc__ = doc
    registry.envs.register(name)(constructor)


for _game in BOARD_GAMES + ("rps",):
    _register(_game, _game, _scripted("random"), f"{_game} against the random player")
for _game in BOARD_GAMES:
    _register(
        f"{_game}_lookahead",
        _game,
        _scripted("one_step_lookahead"),
        f"{_game} against the one-step look-ahead player",
    )
    for _suffix, _strategy in (
        ("", "uniform"),
        ("_latest", "latest"),
        ("_prioritised", "prioritised"),
    ):
        _register(
            f"{_game}_selfplay{_suffix}",
            _game,
            functools.partial(PoolOpponent, strategy=_strategy),
            f"{_game} against the learner's past policies ({_strategy}) and scripted players",
        )
