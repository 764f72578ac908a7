"""Imports every package that registers something.

Import this module (the experiment and train.py do) before looking names up,
so every registry is complete; nothing else registers by side effect.
"""

from rl import agents, algos, envs, games, hparams, models, systems  # noqa: F401
from rl.games import registered as game_envs  # noqa: F401  (the games as envs)
from rl.registry import ALL
from rl.registry import list_all as list_registered

__all__ = ["ALL", "list_all"]


def list_all(gymnasium: bool = False) -> str:
    """Every registered name by kind; with ``gymnasium``, every Gymnasium id too."""
    text = list_registered()
    return f"{text}\n{envs.make.gymnasium_listing()}" if gymnasium else text
