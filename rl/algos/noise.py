"""Temporally correlated exploration noise for deterministic policies (NumPy, no TF).

DDPG (Lillicrap et al. 2016) explored with an Ornstein-Uhlenbeck process; TD3's
authors found plain Gaussian noise as good. An actor adds one process per env
copy and action dimension to mu(s) and restarts a copy's process at 0 when its
episode ends (``Actor.episodes_ended``).
"""

from typing import Optional

import numpy as np

from rl.hparams.base import HParams
from rl.hparams.continuous import TD3HParams


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


def action_noise_for(hp: HParams) -> Optional[OrnsteinUhlenbeckNoise]:
    """The noise process a training actor adds to its actions; None: none beyond the
    act_select's (only TD3 and DDPG hparams name one)."""
    if not isinstance(hp, TD3HParams) or hp.noise_process != "ornstein_uhlenbeck":
        return None
    return OrnsteinUhlenbeckNoise(hp.ou_theta, hp.exploration_noise, hp.ou_dt)
