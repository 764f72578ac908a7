"""Step and episode counters kept in Python and saved in checkpoints.

They are read every environment step, where reading a tf.Variable would cost
~20 us; as a ``PythonState`` they still travel inside tf.train checkpoints.
"""

import json
from typing import Dict

from rl._tf import tf


class Counters(tf.train.experimental.PythonState):
    """Named integer counters, e.g. ``Counters(env_steps=0, updates=0)``."""

    def __init__(self, **initial: int):
        self._values: Dict[str, int] = {k: int(v) for k, v in initial.items()}
        # The counters the last restored checkpoint held (an older one may lack some).
        self.restored: Dict[str, int] = {}

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def add(self, name: str, amount: int = 1) -> int:
        """Adds ``amount`` to counter ``name`` and returns the new value."""
        self._values[name] += int(amount)
        return self._values[name]

    def as_dict(self) -> Dict[str, int]:
        return dict(self._values)

    def serialize(self) -> bytes:
        return json.dumps(self._values).encode()

    def deserialize(self, data: bytes) -> None:
        saved = json.loads(data)
        unknown = set(saved) - set(self._values)
        if unknown:
            raise ValueError(f"checkpoint has unknown counters {sorted(unknown)}")
        self.restored = {k: int(v) for k, v in saved.items()}
        self._values.update(self.restored)
