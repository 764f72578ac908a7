"""Envs that need memory: what one observation shows is not enough to act well.

- Classic control without its velocities, by RL-Zoo's names (``CartPoleNoVel-v1``,
  ``PendulumNoVel-v1``, ``LunarLanderNoVel-v3``...): the velocity entries are removed from
  the observation, so a policy must infer them from the observations before. RL-Zoo
  (rl_zoo3's ``MaskVelocityWrapper``) multiplies them by 0 and keeps the shape; removing
  them leaves the same information.
- ``cue_recall``: a cue shown at the first step must be named ``delay`` steps later,
  with a known best return (1) and a known best return without memory (1 / cues), so a
  test can tell a policy that remembers from one that cannot.
"""

from typing import Optional, Tuple

import gymnasium as gym
import numpy as np

from rl import registry

# Gymnasium id -> the observation indices that are velocities (as rl_zoo3 masks them).
VELOCITY_INDICES = {
    "CartPole-v1": (1, 3),  # cart velocity, pole angular velocity
    "Pendulum-v1": (2,),  # angular velocity (after cos and sin of the angle)
    "LunarLander-v3": (2, 3, 5),  # horizontal and vertical speed, angular speed
    "LunarLanderContinuous-v3": (2, 3, 5),
    "MountainCar-v0": (1,),
    "MountainCarContinuous-v0": (1,),
    "Acrobot-v1": (4, 5),  # the two joints' angular velocities
}


def no_velocity_name(env_id: str) -> str:
    """RL-Zoo's name for ``env_id`` without velocities: CartPole-v1 -> CartPoleNoVel-v1."""
    base, version = env_id.rsplit("-", 1)
    return f"{base}NoVel-{version}"


def without_entries(env: gym.Env, removed: Tuple[int, ...]) -> gym.Env:
    """``env`` with the ``removed`` entries of its flat Box observation taken out."""
    space = env.observation_space
    kept = np.array([i for i in range(space.shape[0]) if i not in removed])
    smaller = gym.spaces.Box(space.low[kept], space.high[kept], dtype=space.dtype)
    return gym.wrappers.TransformObservation(env, lambda obs: obs[kept], smaller)


def _register_no_velocity(env_id: str) -> None:
    def constructor(render_mode=None) -> gym.Env:
        env = gym.make(env_id, render_mode=render_mode)
        return without_entries(env, VELOCITY_INDICES[env_id])

    constructor.__doc__ = (
        f"{env_id} without its velocity entries {list(VELOCITY_INDICES[env_id])} "
        "(rl/envs/partial.py)."
    )
    registry.envs.register(no_velocity_name(env_id))(constructor)


for _env_id in VELOCITY_INDICES:
    _register_no_velocity(_env_id)


class CueRecall(gym.Env):
    """Name the cue shown at the first step, ``delay`` steps later.

    Observation (float32, ``cues + 1`` entries): at step 0 the one-hot cue, then zeros for
    ``delay`` steps, then at the last step only the final entry, 1: the question. Actions:
    ``cues`` choices, ignored except at the question, where naming the cue earns 1 and
    anything else 0; the episode ends there, after ``delay + 2`` observations. A policy with
    memory can earn 1 every episode; without it, at most ``1 / cues`` on average.
    """

    metadata = {"render_modes": []}

    def __init__(self, cues: int = 2, delay: int = 5, render_mode: Optional[str] = None):
        if cues < 2 or delay < 0:
            raise ValueError(f"cue_recall needs cues >= 2 and delay >= 0, got {cues}, {delay}")
        self.cues, self.delay = cues, delay
        self.observation_space = gym.spaces.Box(0.0, 1.0, (cues + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(cues)
        self.render_mode = render_mode
        self.cue, self.t = 0, 0

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.cues + 1, np.float32)
        if self.t == 0:
            obs[self.cue] = 1.0
        elif self.t == self.delay + 1:
            obs[-1] = 1.0
        return obs

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(self.cues)), 0
        return self._observation(), {}

    def step(self, action):
        asked = self.t == self.delay + 1
        reward = float(asked and int(action) == self.cue)
        self.t += 1
        return self._observation(), reward, asked, False, {}


@registry.envs.register("cue_recall")
def cue_recall(render_mode=None, cues: int = 2, delay: int = 5) -> gym.Env:
    """Name the cue of the first step ``delay`` steps later: best return 1, best without
    memory 1 / cues (rl/envs/partial.py)."""
    return CueRecall(cues, delay, render_mode)
