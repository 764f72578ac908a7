"""What an act_select is: one rule for choosing actions, in two implementations.

A rule acts on what a model's ``policy(obs)`` gives: an action distribution
(a tfp Distribution in TensorFlow, its ``HostDistribution`` twin in NumPy) or
Q-values [B, A]; ``acts_on`` says which. ``host`` runs in NumPy on the
machine that steps the envs: for small models it turns a vectorised env step
into microseconds instead of a call into TensorFlow (0.2-0.9 ms per call on
the project's machines). ``graph`` is the same rule in TensorFlow, for acting
inside a compiled function (large models, accelerators) and for exported
SavedModels. Randomness is passed in explicitly:

    host(policy, rng: np.random.Generator, epsilon: float) -> actions
    graph(policy, head: ActionHead, seed [2] int32 Tensor, epsilon scalar) -> actions
"""

import dataclasses
from typing import Callable, FrozenSet

DISTRIBUTION = "distribution"
Q_VALUES = "q_values"


@dataclasses.dataclass(frozen=True)
class ActSelect:
    """A registered action-selection rule (see the module docstring)."""

    host: Callable  # NumPy: (policy, rng, epsilon) -> actions
    graph: Callable  # TensorFlow: (policy, head, seed, epsilon) -> actions
    acts_on: FrozenSet[str]  # DISTRIBUTION and/or Q_VALUES
    uses_epsilon: bool = False  # whether the epsilon passed in changes what it does
