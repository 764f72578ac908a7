"""act_select: turning model outputs into actions (greedy, sampling, epsilon).

Pure functions with one shared signature, registered by name; randomness comes
in as an explicit stateless seed from the agent's generator.
"""

from rl import registry

# Imported on first lookup (rl/registry.py): naming them does not load TensorFlow.
registry.act_select.declare("greedy", "rl.algos.act_select.discrete:greedy")
registry.act_select.declare("categorical", "rl.algos.act_select.discrete:categorical")
registry.act_select.declare("epsilon_greedy", "rl.algos.act_select.discrete:epsilon_greedy")
