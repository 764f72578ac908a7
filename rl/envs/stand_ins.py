"""Envs that stand in for troublesome simulators, to measure and test against.

``slow_cartpole`` waits 2 ms per step, like a simulator whose step costs
real time (throughput with --num_workers is measured on it).
``flaky_cartpole`` raises now and then, like a simulator that crashes: its
failures come from a generator seeded at reset, so a seeded run fails at the
same steps every time.
``endless`` never ends an episode, like a simulator without a time limit on
which a policy loops: only rl's cap on episode length (``max_episode_steps``) ends them.
"""

import time
from typing import Optional

import gymnasium as gym
import numpy as np

SLOW_STEP_SECONDS = 0.002
FLAKY_FAILURE_RATE = 1 / 10_000  # per step


class SlowSteps(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Sleeps ``seconds`` in every step."""

    def __init__(self, env: gym.Env, seconds: float):
        # RecordConstructorArgs: ``env.spec`` (and Gymnasium's env checker) needs it.
        gym.utils.RecordConstructorArgs.__init__(self, seconds=seconds)
        super().__init__(env)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


class Endless(gym.Env):
    """One state for ever: observation [0.0], two actions, reward 1 a step, no episode end."""

    metadata = {"render_modes": []}

    def __init__(self, render_mode: Optional[str] = None):
        if render_mode is not None:
            raise ValueError(f"endless: render_mode {render_mode!r}: it renders nothing")
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.render_mode = None

    def reset(self, *, seed: Optional[int] = None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 1.0, False, False, {}


class SimulatorCrash(RuntimeError):
    """What ``FlakySteps`` raises."""


class FlakySteps(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Raises SimulatorCrash in a step with probability ``rate``."""

    def __init__(self, env: gym.Env, rate: float):
        gym.utils.RecordConstructorArgs.__init__(self, rate=rate)
        super().__init__(env)
        self.rate = rate
        self.failures = np.random.default_rng()

    def reset(self, *, seed: Optional[int] = None, options=None):
        if seed is not None:
            self.failures = np.random.default_rng([seed, 1])
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.failures.random() < self.rate:
            raise SimulatorCrash("flaky_cartpole: the simulator crashed (a simulated fault)")
        return self.env.step(action)
