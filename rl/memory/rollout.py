"""Placeholder rollout buffer (replaced by the memory helper's)."""

from typing import Dict, Mapping

import numpy as np

from rl.memory.spec import FieldSpec


class RolloutBuffer:
    def __init__(self, specs: Mapping[str, FieldSpec], steps: int, num_envs: int):
        self.specs = dict(specs)
        self.steps = steps
        self.arrays = {
            n: np.zeros((steps, num_envs, *s.shape), s.dtype) for n, s in self.specs.items()
        }
        self.count = 0

    def add(self, **fields: np.ndarray) -> None:
        for name, array in self.arrays.items():
            array[self.count] = fields[name]
        self.count += 1

    def __len__(self) -> int:
        return self.count

    @property
    def full(self) -> bool:
        return self.count == self.steps

    def data(self) -> Dict[str, np.ndarray]:
        return self.arrays

    def clear(self) -> None:
        self.count = 0
