"""A uniform replay buffer in NumPy that saves itself in tf.train checkpoints.

Adding and sampling stay in NumPy because they happen every environment step,
where a call into TensorFlow would cost more than the step itself. Sampling
draws ``num_batches`` batches at once so a whole round of gradient steps
crosses into TensorFlow in one call.
"""

import io
import json
from typing import Dict, Tuple

import numpy as np

from rl._tf import tf


class ReplayBuffer(tf.train.experimental.PythonState):
    """Circular storage of (obs, action, reward, terminated, next_obs)."""

    FIELDS = ("obs", "actions", "rewards", "terminated", "next_obs")

    def __init__(self, capacity: int, obs_shape: Tuple[int, ...], seed: int):
        """Allocates empty storage.

        Args:
            capacity: transitions kept; the oldest are overwritten.
            obs_shape: shape of one observation.
            seed: seeds the sampling generator (its state is checkpointed too).
        """
        self.capacity = capacity
        self.storage: Dict[str, np.ndarray] = {
            "obs": np.zeros((capacity, *obs_shape), np.float32),
            "actions": np.zeros((capacity,), np.int32),
            "rewards": np.zeros((capacity,), np.float32),
            "terminated": np.zeros((capacity,), np.bool_),
            "next_obs": np.zeros((capacity, *obs_shape), np.float32),
        }
        self.size = 0
        self.cursor = 0
        self.rng = np.random.default_rng(seed)
        self.max_abs_reward = 0.0  # over everything ever added (bounds sane Q-values)

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        next_obs: np.ndarray,
    ) -> None:
        """Adds a batch of N transitions, one per environment copy.

        Args:
            obs: [N, ...] observations.
            actions: [N] actions taken.
            rewards: [N] rewards received.
            terminated: [N] whether s' is terminal (truncation is not).
            next_obs: [N, ...] true next observations (final ones at episode ends).
        """
        n = len(actions)
        index = (self.cursor + np.arange(n)) % self.capacity
        for name, value in zip(self.FIELDS, (obs, actions, rewards, terminated, next_obs)):
            self.storage[name][index] = value
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = int(min(self.size + n, self.capacity))
        self.max_abs_reward = max(self.max_abs_reward, float(np.max(np.abs(rewards))))

    def sample(self, num_batches: int, batch_size: int) -> Dict[str, np.ndarray]:
        """Uniformly sampled transitions shaped [num_batches, batch_size, ...]."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = self.rng.integers(0, self.size, size=(num_batches, batch_size))
        return {name: array[index] for name, array in self.storage.items()}

    def __len__(self) -> int:
        return self.size

    # tf.train.experimental.PythonState: only the filled part is written.
    def serialize(self) -> bytes:
        buffer = io.BytesIO()
        meta = {
            "size": self.size,
            "cursor": self.cursor,
            "capacity": self.capacity,
            "rng": self.rng.bit_generator.state,
        }
        arrays = {name: array[: self.size] for name, array in self.storage.items()}
        np.savez(buffer, meta=np.array(json.dumps(meta)), **arrays)
        return buffer.getvalue()

    def deserialize(self, data: bytes) -> None:
        with np.load(io.BytesIO(data), allow_pickle=False) as saved:
            meta = json.loads(str(saved["meta"]))
            if meta["capacity"] != self.capacity:
                raise ValueError(
                    f"checkpointed replay capacity {meta['capacity']} differs from "
                    f"buffer_size {self.capacity}"
                )
            for name in self.FIELDS:
                self.storage[name][: meta["size"]] = saved[name]
        self.size, self.cursor = meta["size"], meta["cursor"]
        self.rng.bit_generator.state = meta["rng"]
        held = self.storage["rewards"][: self.size]
        self.max_abs_reward = float(np.max(np.abs(held))) if self.size else 0.0
