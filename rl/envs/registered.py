"""Named environment constructors: a Gymnasium env plus chosen wrappers.

Each takes ``render_mode`` and returns a ``gym.Env``; the standard observation
wrappers of ``make.py`` are applied on top.
"""

import gymnasium as gym

from rl import registry
from rl.envs.catch import Catch
from rl.envs.stand_ins import (
    FLAKY_FAILURE_RATE,
    SLOW_STEP_SECONDS,
    Endless,
    FlakySteps,
    SlowSteps,
)


@registry.envs.register("cartpole")
def cartpole(render_mode=None) -> gym.Env:
    return gym.make("CartPole-v1", render_mode=render_mode)


@registry.envs.register("acrobot")
def acrobot(render_mode=None) -> gym.Env:
    return gym.make("Acrobot-v1", render_mode=render_mode)


@registry.envs.register("frozen_lake_short")
def frozen_lake_short(render_mode=None) -> gym.Env:
    """Deterministic 4x4 FrozenLake cut at 50 steps; observations one-hot."""
    env = gym.make("FrozenLake-v1", is_slippery=False, render_mode=render_mode)
    return gym.wrappers.TimeLimit(env.unwrapped, max_episode_steps=50)


@registry.envs.register("catch")
def catch(render_mode=None) -> gym.Env:
    """The 10 x 5 Catch grid as 40 x 40 x 1 uint8 images (rl/envs/catch.py); 9 steps an episode."""
    return Catch(render_mode=render_mode)


@registry.envs.register("slow_cartpole")
def slow_cartpole(render_mode=None) -> gym.Env:
    """CartPole-v1 that waits 2 ms per step: a slow simulator (rl/envs/stand_ins.py)."""
    return SlowSteps(gym.make("CartPole-v1", render_mode=render_mode), SLOW_STEP_SECONDS)


@registry.envs.register("flaky_cartpole")
def flaky_cartpole(render_mode=None, failure_rate: float = FLAKY_FAILURE_RATE) -> gym.Env:
    """CartPole-v1 that crashes in 1 step of 10,000 (seeded): a faulty simulator.

    ``flaky_cartpole?failure_rate=0.001`` crashes more often.
    """
    if not 0.0 <= failure_rate <= 1.0:
        raise ValueError(f"failure_rate must be in [0, 1], got {failure_rate}")
    return FlakySteps(gym.make("CartPole-v1", render_mode=render_mode), failure_rate)


@registry.envs.register("endless")
def endless(render_mode=None) -> gym.Env:
    """Episodes that never end by themselves: a simulator without a time limit
    (rl/envs/stand_ins.py); rl cuts them at max_episode_steps."""
    return Endless(render_mode=render_mode)
