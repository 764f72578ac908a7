"""Imports every package that registers something.

Import this module (the experiment and train.py do) before looking names up,
so every registry is complete; nothing else registers by side effect.
"""

from rl import agents, algos, envs, hparams, models, systems  # noqa: F401
from rl.registry import ALL, list_all  # noqa: F401
