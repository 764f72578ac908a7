"""What every env check returns and the pieces both kinds of check share: the report's
line (``CheckResult``), its statuses, and the guard that turns an escaping error into a
FAIL line. rl/envs/check.py checks single-agent envs and prints the report;
rl/envs/check_parallel.py checks multi-agent ones.
"""

import dataclasses
from typing import Any, Callable, List, Tuple

import gymnasium as gym
import numpy as np

from rl.errors import error_line

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
STATUSES = (PASS, WARN, FAIL)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check's outcome: one line of the report.

    Attributes:
        name: what was checked, e.g. "determinism".
        status: PASS, WARN or FAIL.
        detail: the numbers or the reason, one line.
        notes: further lines printed under it (each of Gymnasium's warnings).
    """

    name: str
    status: str
    detail: str
    notes: Tuple[str, ...] = ()

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")


def guarded(name: str, check: Callable[[], Any]) -> List[CheckResult]:
    """Runs a check, turning what escapes it (a fresh env that cannot be made, say
    an env server that went away) into a FAIL line instead of ending the report.

    Args:
        name: the check's name, for that line.
        check: returns a CheckResult or a list of them.
    """
    try:
        result = check()
    except Exception as error:
        return [CheckResult(name, FAIL, f"the check stopped: {error_line(error, typed=True)}")]
    return list(result) if isinstance(result, list) else [result]


def describe_space(space: gym.Space) -> str:
    """A short description of a space: a Box's shape and dtype (its bounds are
    reported by the observation check), other spaces as Gymnasium prints them.

    Args:
        space: an observation or action space.
    """
    if isinstance(space, gym.spaces.Box):
        return f"Box(shape {space.shape}, {space.dtype})"
    return str(space)


def is_finite(value: Any) -> bool:
    """Whether a number, array or nest of them (dict, tuple, list) holds no NaN or inf.

    Args:
        value: an observation or reward.
    """
    if isinstance(value, dict):
        return all(is_finite(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return all(is_finite(v) for v in value)
    array = np.asarray(value)
    if array.dtype.kind not in "fc":
        return True  # integers, booleans and text cannot be NaN
    return bool(np.isfinite(array).all())


def close_twice(env: Any) -> CheckResult:
    """The close check's verdict on an env that has stepped: close(), then close() again."""
    for attempt in ("close()", "a second close()"):
        try:
            env.close()
        except Exception as error:
            return CheckResult("close", FAIL, f"{attempt} raised {error_line(error, typed=True)}")
    return CheckResult("close", PASS, "close() after a step, then close() again: no error")
