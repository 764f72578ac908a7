"""Typed fields with their valid ranges, declared where each field is defined.

Hyperparameters (``rl/hparams``) and model settings (``rl/models/settings.py``)
declare their fields with these helpers; ``rl.hparams.base.check_ranges`` reads
the limits back. They live outside ``rl.hparams`` so that model settings can use
them without importing every hparam set (which import model settings).
"""

import dataclasses
from typing import Any, Optional, Tuple

# Limits several fields share. Upper limits on sizes (num_envs, buffer_size,
# widths) turn a typo like 1e11 into an error instead of an out-of-memory crash.
MAX_STEPS = 10**12  # env or gradient steps: far beyond any run, far inside int64
MAX_SEED = 2**31 - 1  # 31 bits, like derived_seed; TF also takes the model's seed + 1000
# The default cap on the episodes of an env without a time limit of its own (the hparam
# max_episode_steps, and an env server's, rl/envs/remote/serve.py): the ALE's 108,000
# frames at 4 frames a step, 30 minutes of play (Machado et al., 2018).
DEFAULT_MAX_EPISODE_STEPS = 27_000
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "softplus", "silu", "linear")


@dataclasses.dataclass(frozen=True)
class Limits:
    """The valid values of one field, declared next to it with a helper below.

    Numbers lie in [low, high] (``(low, high]`` if ``open_low``); for a tuple
    field that holds for each item and ``max_items`` bounds its length. A
    string is a name registered in ``registry.ALL[kind]``, or one of ``choices``, or both.
    """

    low: Optional[float] = None
    high: Optional[float] = None
    open_low: bool = False
    max_items: Optional[int] = None
    choices: Tuple[str, ...] = ()
    kind: Optional[str] = None


def _declare(default: Any, limits: Limits) -> Any:
    return dataclasses.field(default=default, metadata={"limits": limits})


def bounded(
    default: Any, low: float, high: Optional[float] = None, max_items: Optional[int] = None
) -> Any:
    """A field whose value (or each item) lies in [low, high].

    Args:
        default: the field's default.
        low: the smallest valid value.
        high: the largest valid value; None: no upper limit.
        max_items: for a tuple field, the most items it may hold.
    """
    return _declare(default, Limits(low=low, high=high, max_items=max_items))


def positive(default: Any, high: Optional[float] = None) -> Any:
    """A field whose value lies in (0, high]; None stays valid for Optional fields.

    Args:
        default: the field's default.
        high: the largest valid value; None: no upper limit.
    """
    return _declare(default, Limits(low=0, high=high, open_low=True))


def one_of(default: str, choices: Tuple[str, ...]) -> Any:
    """A string field that must be one of ``choices``.

    Args:
        default: the field's default.
        choices: every valid value.
    """
    return _declare(default, Limits(choices=choices))


def named(default: str, kind: str, choices: Tuple[str, ...] = ()) -> Any:
    """A string field naming something registered (``kind`` is a key of registry.ALL).

    Args:
        default: the field's default.
        kind: which registry; "envs" also accepts any Gymnasium id.
        choices: if given, the only registered names valid here (e.g. the losses
            an algorithm's update can call).
    """
    return _declare(default, Limits(choices=choices, kind=kind))
