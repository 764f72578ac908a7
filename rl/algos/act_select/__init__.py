"""act_select: turning a model's policy output into actions (sample, greedy, epsilon).

Rules with one shared signature, registered by name; each says whether it acts
on action distributions or Q-values; randomness comes in as an explicit seed.
"""

from rl import registry

# Imported on first lookup (rl/registry.py): naming them does not load TensorFlow.
registry.act_select.declare("sample", "rl.algos.act_select.rules:sample")
registry.act_select.declare("greedy", "rl.algos.act_select.rules:greedy")
registry.act_select.declare("epsilon_greedy", "rl.algos.act_select.rules:epsilon_greedy")
registry.act_select.declare("uniform_or_sample", "rl.algos.act_select.rules:uniform_or_sample")
