"""Running statistics that normalise observations and rewards, in NumPy.

What Stable-Baselines3's ``VecNormalize`` does to an env, done here by the
learner: observations are centred and scaled by their running mean and
standard deviation (inside the model, so checkpoints, policy artefacts and
exports carry the statistics), and rewards are divided by the running
standard deviation of the discounted return. No TensorFlow: actor processes
acting on the host import ``normalize``.
"""

from typing import Dict, Sequence, Tuple

import numpy as np

# Added to variances before the square root: a feature that never changes maps to 0.
VARIANCE_EPSILON = 1e-8


def merge_moments(
    mean: np.ndarray,
    var: np.ndarray,
    count: float,
    batch_mean: np.ndarray,
    batch_var: np.ndarray,
    batch_count: float,
) -> Tuple[np.ndarray, np.ndarray, float]:
    """Mean, (population) variance and count of two sets of samples from theirs
    (the pairwise update of Chan, Golub and LeVeque 1979)."""
    total = count + batch_count
    delta = batch_mean - mean
    new_mean = mean + delta * (batch_count / total)
    squares = (
        var * count + batch_var * batch_count + np.square(delta) * (count * batch_count / total)
    )
    return new_mean, squares / total, total


def normalize(x: np.ndarray, mean: np.ndarray, var: np.ndarray, clip: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps), clipped to [-clip, clip], in float32.

    The same float32 operations as the model's ObservationNormalizer, so acting
    on the host and in TensorFlow see the same inputs.
    """
    x = np.asarray(x, np.float32)
    scaled = (x - mean.astype(np.float32)) / np.sqrt(
        var.astype(np.float32) + np.float32(VARIANCE_EPSILON)
    )
    return np.clip(scaled, -clip, clip).astype(np.float32)


class RunningMeanStd:
    """The mean and variance of every sample seen so far, per feature, in float64.

    Before any sample: mean 0, variance 1 (normalising changes nothing).
    """

    def __init__(self, shape: Sequence[int] = ()):
        self.mean = np.zeros(tuple(shape), np.float64)
        self.var = np.ones(tuple(shape), np.float64)
        self.count = 0.0

    def update(self, batch: np.ndarray) -> None:
        """Adds the samples of ``batch`` [B, *shape]."""
        batch = np.asarray(batch, np.float64)
        if not len(batch):
            return
        batch_mean, batch_var = batch.mean(axis=0), batch.var(axis=0)
        if self.count == 0:
            self.mean, self.var, self.count = batch_mean, batch_var, float(len(batch))
            return
        self.mean, self.var, self.count = merge_moments(
            self.mean, self.var, self.count, batch_mean, batch_var, float(len(batch))
        )

    def state(self) -> Dict[str, object]:
        """JSON-ready; floats are written with repr, so ``load_state`` restores them exactly."""
        return {"mean": self.mean.tolist(), "var": self.var.tolist(), "count": self.count}

    def load_state(self, state: Dict[str, object]) -> None:
        """Restores ``state()``'s values.

        Raises:
            ValueError: the saved statistics have another shape.
        """
        mean = np.asarray(state["mean"], np.float64)
        if mean.shape != self.mean.shape:
            raise ValueError(
                f"saved running statistics have shape {mean.shape}, the run's have "
                f"{self.mean.shape}"
            )
        self.mean, self.var = mean, np.asarray(state["var"], np.float64)
        self.count = float(state["count"])


class ReturnScaler:
    """Rewards divided by the running standard deviation of the discounted return.

    Each env copy keeps its return so far, r_t + gamma * R_{t-1}; every return
    updates the running statistics, then each reward is divided by their
    standard deviation and clipped (as ``VecNormalize`` does; the mean is not
    subtracted, so the sign of a reward never changes).
    """

    def __init__(self, num_envs: int, gamma: float, clip: float):
        self.gamma = gamma
        self.clip = clip
        self.returns = np.zeros(num_envs, np.float64)
        self.stats = RunningMeanStd(())

    def __call__(self, rewards: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Scaled rewards [N] for one vectorised step; ``done`` [N] ends returns."""
        self.returns = self.returns * self.gamma + np.asarray(rewards, np.float64)
        self.stats.update(self.returns)
        scaled = np.asarray(rewards, np.float64) / np.sqrt(self.stats.var + VARIANCE_EPSILON)
        self.returns[np.asarray(done, bool)] = 0.0
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def break_streams(self, env_ids: Sequence[int]) -> None:
        """These env copies start new episodes: their returns so far end."""
        self.returns[list(env_ids)] = 0.0
