"""Schedules: pure functions of the step counter, so their position is
restored with the counter and never stored twice."""

import numpy as np


def linear_schedule(start: float, end: float, duration: int, step: int) -> float:
    """Goes linearly from ``start`` at step 0 to ``end`` at ``duration``, then stays.

    Args:
        start: value at step 0.
        end: value from ``duration`` on.
        duration: steps of the ramp (<= 0 means ``end`` at once).
        step: the current step.
    """
    if duration <= 0 or step >= duration:
        return end  # exactly: start + 1 * (end - start) can round away from it
    fraction = min(max(step / duration, 0.0), 1.0)
    return start + fraction * (end - start)


def constant_schedule(value: float, step: int) -> float:
    """``value`` at every step.

    Args:
        value: the value.
        step: the current step (unused).
    """
    del step
    return value


def apex_epsilons(num_actors: int, step: int) -> np.ndarray:
    """Ape-X's fixed exploration per actor (Horgan et al. 2018): epsilon_i = 0.4^(1 + 7 i / (N - 1)).

    Args:
        num_actors: N; actor i explores with epsilon_i (0.4 for a single actor).
        step: the current step (unused: the values stay fixed).

    Returns:
        [N] float32, from 0.4 for actor 0 down to 0.4^8 for actor N - 1.
    """
    del step
    i = np.arange(num_actors)
    return (0.4 ** (1 + 7 * i / max(num_actors - 1, 1))).astype(np.float32)


def warmup_schedule(warmup_steps: int, step: int) -> float:
    """1.0 before ``warmup_steps``, then 0.0: uniform actions until learning starts.

    Args:
        warmup_steps: the first step at which the value is 0.
        step: the current step.
    """
    return 1.0 if step < warmup_steps else 0.0
