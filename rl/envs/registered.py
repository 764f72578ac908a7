"""Named environment constructors: a Gymnasium env plus chosen wrappers.

Each takes ``render_mode`` and returns a ``gym.Env``; the standard observation
wrappers of ``make.py`` are applied on top.
"""

import gymnasium as gym

from rl import registry
from rl.envs.catch import Catch


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
