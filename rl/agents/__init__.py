"""agents: Agent = Model + Algo, one module per algorithm family.

``base.py`` holds the Agent (a learner and its actors), ``actor.py`` acting, and
``learner.py`` what every learner shares (model, optimizer, counters, publishing,
checkpoint items). Each algorithm's learner subclasses ``Learner`` once and reads
top to bottom in its own module: ``ppo.py``, ``a2c.py`` (A2C and VPG),
``impala.py``, ``dqn.py``, ``continuous.py`` (SAC, TD3 and DDPG). What they
compose lives in ``rollouts.py`` (the rollout, GAE, minibatches) and
``off_policy.py`` (the replay feed, target syncs).
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
registry.agents.declare("td3", "rl.agents.continuous:TD3Learner")
registry.agents.declare("ddpg", "rl.agents.continuous:TD3Learner")
