"""agents: Agent = Model + Algo, one module per algorithm family.

``base.py`` holds what all agents share (acting, counters, checkpoint items,
policy export); ``ppo.py`` and ``dqn.py`` add their memory and update step.
"""

from rl import registry

# Imported on first lookup (rl/registry.py): naming them does not load TensorFlow.
registry.agents.declare("ppo", "rl.agents.ppo:PPOLearner")
registry.agents.declare("dqn", "rl.agents.dqn:DQNLearner")
registry.agents.declare("qrdqn", "rl.agents.dqn:DQNLearner")  # with num_quantiles
registry.agents.declare("impala", "rl.agents.impala:IMPALALearner")
registry.agents.declare("a2c", "rl.agents.a2c:A2CLearner")
registry.agents.declare("vpg", "rl.agents.a2c:A2CLearner")  # with value_steps
registry.agents.declare("sac", "rl.agents.continuous:SACLearner")
registry.agents.declare("td3", "rl.agents.continuous:DeterministicActorCriticLearner")
registry.agents.declare("ddpg", "rl.agents.continuous:DeterministicActorCriticLearner")
