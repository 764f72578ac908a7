"""hparams: typed hyperparameter classes and the named sets built from them.

A set is a registered zero-argument function returning a fresh frozen
dataclass; sets build on a base set with ``.replace(...)``.
"""

from rl.hparams import a2c, continuous, dqn, impala, ppo, qrdqn  # noqa: F401  (registers)
from rl.hparams.base import HParams, HParamsError, apply_overrides, differences, from_dict

__all__ = ["HParams", "HParamsError", "apply_overrides", "differences", "from_dict"]
