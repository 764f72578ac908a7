"""The games as envs (rl/games/versus.py), by name, in the env registry.

``<game>``: against the random player; ``<game>_lookahead``: against the one-step
look-ahead player (board games); ``<game>_selfplay[_latest|_prioritised]``: against
the learner's own past policies (rl/games/selfplay.py; uniform over the pool unless
the suffix says otherwise). Keyword arguments (``tictactoe_selfplay?loss_reward=-3``):
``win_reward`` and ``loss_reward`` for every game env (rl/games/versus.py); for the
self-play ones also ``scripted_share`` (the share of games against the scripted
players) and ``member_epsilon`` (how often a Q-network pool member moves at random).
"""

import functools

from rl import registry
from rl.games.selfplay import MEMBER_EPSILON, SCRIPTED_SHARE, PoolOpponent
from rl.games.versus import VersusEnv, is_number

BOARD_GAMES = ("tictactoe", "connect_four")


def game_of_env(env: str):
    """The game a registered game env plays ("tictactoe_selfplay" -> "tictactoe",
    "tictactoe?win_reward=0.1" -> "tictactoe"), or None."""
    env = env.split("?", 1)[0]
    for game in sorted(BOARD_GAMES + ("rps",), key=len, reverse=True):
        if env == game or env.startswith(game + "_"):
            return game
    return None


def _scripted(name: str):
    return lambda spec: registry.players.get(name)(spec)


def _versus(
    game: str, opponent, render_mode=None, loss_reward: float = -1.0, win_reward: float = 1.0
) -> VersusEnv:
    return VersusEnv(game, opponent, render_mode, loss_reward, win_reward)


def _selfplay(
    game: str,
    strategy: str,
    render_mode=None,
    loss_reward: float = -1.0,
    win_reward: float = 1.0,
    scripted_share: float = SCRIPTED_SHARE,
    member_epsilon: float = MEMBER_EPSILON,
) -> VersusEnv:
    for name, value in (("scripted_share", scripted_share), ("member_epsilon", member_epsilon)):
        if not (is_number(value) and 0.0 <= value <= 1.0):
            raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    opponent = functools.partial(
        PoolOpponent,
        strategy=strategy,
        scripted_share=scripted_share,
        member_epsilon=member_epsilon,
    )
    return _versus(game, opponent, render_mode, loss_reward, win_reward)


def _register(name: str, constructor, doc: str) -> None:
    constructor.__doc__ = doc
    registry.envs.register(name)(constructor)


for _game in BOARD_GAMES + ("rps",):
    _register(
        _game,
        functools.partial(_versus, _game, _scripted("random")),
        f"{_game} against the random player",
    )
for _game in BOARD_GAMES:
    _register(
        f"{_game}_lookahead",
        functools.partial(_versus, _game, _scripted("one_step_lookahead")),
        f"{_game} against the one-step look-ahead player",
    )
    for _suffix, _strategy in (
        ("", "uniform"),
        ("_latest", "latest"),
        ("_prioritised", "prioritised"),
    ):
        _register(
            f"{_game}_selfplay{_suffix}",
            functools.partial(_selfplay, _game, _strategy),
            f"{_game} against the learner's past policies ({_strategy}) and scripted players",
        )
