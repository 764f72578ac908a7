"""agents: Agent = Model + Algo, one module per algorithm family.

``base.py`` holds what all agents share (acting, counters, checkpoint items,
policy export); ``ppo.py`` and ``dqn.py`` add their memory and update step.
"""

from rl.agents import dqn, ppo  # noqa: F401  (registers)
from rl.agents.base import Agent, GreedyPolicy

__all__ = ["Agent", "GreedyPolicy"]
