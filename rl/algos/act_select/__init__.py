"""act_select: turning model outputs into actions (greedy, sampling, epsilon).

Pure functions with one shared signature, registered by name; randomness comes
in as an explicit stateless seed from the agent's generator.
"""

from rl.algos.act_select import discrete  # noqa: F401  (registers)
