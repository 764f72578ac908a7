"""On-policy rollouts: preallocated [T, N, ...] arrays laid out by field specs."""

from typing import Dict, Mapping

import numpy as np

from rl.memory.spec import FieldSpec


class RolloutBuffer:
    """``steps`` vector steps of ``num_envs`` env copies, one array per field."""

    def __init__(self, specs: Mapping[str, FieldSpec], steps: int, num_envs: int):
        """Allocates the arrays.

        Args:
            specs: the fields and their dtypes and shapes (uint8 images stay uint8).
            steps: vector steps per rollout (T).
            num_envs: env copies (N).
        """
        self.specs = dict(specs)
        self.steps, self.num_envs = steps, num_envs
        self.arrays = {
            name: np.zeros((steps, num_envs, *spec.shape), spec.dtype)
            for name, spec in self.specs.items()
        }
        self.count = 0

    def add(self, **fields: np.ndarray) -> None:
        """Writes one vector step: each field [num_envs, *shape].

        Raises:
            ValueError: a field is missing, unknown or wrongly shaped, or the rollout is full.
        """
        if set(fields) != set(self.arrays):
            missing = sorted(set(self.arrays) - set(fields))
            unknown = sorted(set(fields) - set(self.arrays))
            raise ValueError(f"rollout step: missing fields {missing}, unknown fields {unknown}")
        if self.full:
            raise ValueError(f"the rollout holds {self.steps} steps already: clear it first")
        for name, array in self.arrays.items():
            value = np.asarray(fields[name])
            if value.shape != array.shape[1:]:
                raise ValueError(
                    f"rollout field {name!r} must be shaped {array.shape[1:]}, got {value.shape}"
                )
            array[self.count] = value
        self.count += 1

    def __len__(self) -> int:
        return self.count

    @property
    def full(self) -> bool:
        return self.count == self.steps

    def data(self) -> Dict[str, np.ndarray]:
        """The [T, N, ...] arrays (views: copy them before the next ``add``)."""
        return self.arrays

    def clear(self) -> None:
        self.count = 0
