"""Schedules on hand-computed values: linear decay and Ape-X's per-actor epsilons."""

import functools

import numpy as np
import pytest

from rl.algos.schedules import apex_epsilons, linear_schedule

pytestmark = pytest.mark.unit


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


def test_apex_epsilons_fall_from_0_4_to_0_4_to_the_8th():
    # N = 8: exponents 1 + 7 i / 7 = 1 + i.
    np.testing.assert_allclose(apex_epsilons(8, 0), [0.4 ** (1 + i) for i in range(8)], rtol=1e-6)
    np.testing.assert_allclose(apex_epsilons(3, 10**6), [0.4, 0.4**4.5, 0.4**8], rtol=1e-6)
    np.testing.assert_allclose(apex_epsilons(1, 0), [0.4])


def test_an_actor_explores_with_the_epsilons_of_its_own_env_copies():
    import gymnasium as gym

    from rl import registry
    from rl.agents.actor import Actor, PolicySnapshot
    from rl.models.distributions import action_head
    from rl.models.host import HostPolicy

    # A Q-network that always prefers action 0: an action 1 comes from exploring
    # (with probability epsilon / 2, two actions).
    policy = HostPolicy("q_values", action_head(gym.spaces.Discrete(2)), "linear")
    arrays = (np.zeros((1, 2), np.float32), np.array([1.0, 0.0], np.float32))
    actor = Actor(
        policy,
        registry.act_select.get("epsilon_greedy"),
        np.random.default_rng(0),
        exploration=functools.partial(apex_epsilons, 8),
        env_ids=(1, 3),  # an actor process stepping the run's env copies 1 and 2
    )
    actor.load(PolicySnapshot(1, arrays))
    draws = np.stack([actor.act(np.zeros((2, 1), np.float32))[0] for _ in range(20000)])
    # Copies 1 and 2 of 8: epsilon 0.4^2 = 0.16 and 0.4^3 = 0.064 (standard errors ~0.002).
    np.testing.assert_allclose(draws.mean(axis=0), [0.16 / 2, 0.064 / 2], atol=0.01)
