"""algos: the two halves of an algorithm, as functions registered by name.

``act_select/`` is how to act (sample, greedy, epsilon-greedy; NumPy and
TensorFlow forms), ``grad_comp/`` how to learn (pure losses and estimators);
``schedules.py`` holds pure functions of the step. A learner (rl/agents/)
calls its grad_comp in its update; its actors act with an act_select.
"""

from rl.algos import act_select, grad_comp  # noqa: F401  (registers)
