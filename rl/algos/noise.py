"""Temporally correlated exploration noise for deterministic policies (NumPy, no TF).

DDPG (Lillicrap et al. 2016) explored with an Ornstein-Uhlenbeck process; TD3's
authors found plain Gaussian noise as good. An actor adds one process per env
copy and action dimension to mu(s) and restarts a copy's process at 0 when its
episode ends (``Actor.episodes_ended``).
"""

from typing import Optional

import numpy as np


class OrnsteinUhlenbeckNoise:
    """x <- x - theta x dt + sigma sqrt(dt) N(0, 1), per env copy and action dimension.

    In units of the action range's half (the actor scales it onto the bounds).
    """

    def __init__(self, theta: float, sigma: float, dt: float):
        self.theta, self.sigma, self.dt = theta, sigma, dt
        self.state: Optional[np.ndarray] = None

    def __call__(self, rng: np.random.Generator, shape) -> np.ndarray:
        """The next value of every process, [N, D] (a new shape starts them at 0)."""
        if self.state is None or self.state.shape != tuple(shape):
            self.state = np.zeros(shape, np.float64)
        drift = -self.theta * self.state * self.dt
        self.state = self.state + drift + self.sigma * np.sqrt(self.dt) * rng.standard_normal(shape)
        return self.state.astype(np.float32)

    def reset(self, done: np.ndarray) -> None:
        """Restarts the processes of the env copies whose episode ended."""
        if self.state is not None:
            self.state[np.asarray(done, bool)] = 0.0
