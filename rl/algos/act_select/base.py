"""What an act_select is: one rule for choosing actions, in two implementations.

``host`` runs in NumPy on the machine that steps the envs: for small models it
turns a vectorised env step into microseconds instead of a call into
TensorFlow (0.2-0.9 ms per call on the project's machines). ``graph`` is the
same rule in TensorFlow, for acting inside a compiled function (large models,
accelerators) and for exported SavedModels. Both take the same arguments,
with randomness passed in explicitly:

    host(preferences [B, A] ndarray, rng: np.random.Generator, epsilon: float) -> [B] int32
    graph(preferences [B, A] Tensor, seed [2] int32 Tensor, epsilon scalar) -> [B] int32
"""

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class ActSelect:
    """A registered action-selection rule (see the module docstring)."""

    host: Callable  # NumPy: (preferences, rng, epsilon) -> actions
    graph: Callable  # TensorFlow: (preferences, seed, epsilon) -> actions
