"""Schedules: pure functions of the step counter, so their position is
restored with the counter and never stored twice."""


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
