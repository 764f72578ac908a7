"""grad_comp: the maths of learning as pure functions, tensors in and out.

Each module holds one loss or estimator, batch first, with shapes in its
docstring; the functions are registered by name and tested on hand-computed
values. Agents call them inside their compiled update step.
"""

from rl.algos.grad_comp import dqn, gae, ppo  # noqa: F401  (registers)
