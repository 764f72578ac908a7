"""linear_schedule on hand-computed values."""

import pytest

from rl.algos.schedules import linear_schedule


@pytest.mark.parametrize(
    "step, expected",
    [
        (0, 1.0),  # start
        (25, 0.75),  # a quarter of the way: 1 - 25/100
        (50, 0.5),  # middle
        (99, 0.01),
        (100, 0.0),  # end
        (101, 0.0),  # past the end it stays at end
        (10**9, 0.0),
        (-1, 1.0),  # before step 0 it stays at start
        (-(10**9), 1.0),
    ],
)
def test_decreasing_ramp(step, expected):
    assert linear_schedule(1.0, 0.0, 100, step) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "step, expected",
    [(-3, 2.0), (0, 2.0), (1, 4.0), (2, 6.0), (3, 8.0), (4, 10.0), (5, 10.0)],
)
def test_increasing_ramp(step, expected):
    # 2 -> 10 over 4 steps: +2 per step; these are exact in binary floating point.
    assert linear_schedule(2.0, 10.0, 4, step) == expected


def test_epsilon_like_ramp_between_arbitrary_values():
    # 1.0 -> 0.05 over 10_000 steps; at 5_000: 1.0 + 0.5 * (0.05 - 1.0) = 0.525.
    assert linear_schedule(1.0, 0.05, 10_000, 5_000) == pytest.approx(0.525, abs=1e-12)
    # at 2_000: 1.0 + 0.2 * (-0.95) = 0.81.
    assert linear_schedule(1.0, 0.05, 10_000, 2_000) == pytest.approx(0.81, abs=1e-12)


@pytest.mark.parametrize("duration", [0, -1, -100])
@pytest.mark.parametrize("step", [-5, 0, 1, 1_000])
def test_no_ramp_gives_end_at_once(duration, step):
    assert linear_schedule(1.0, 0.1, duration, step) == 0.1


def test_constant_schedule_stays_put():
    assert [linear_schedule(3.0, 3.0, 10, s) for s in (-1, 0, 5, 10, 11)] == [3.0] * 5
