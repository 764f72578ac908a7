"""Cooperative matrix games: two agents, one simultaneous move, a known best joint action.

Both agents pick one of n actions at once and both receive ``payoff[a_0, a_1]``; the
episode ends after that one move. The two games below are the classic tests of
coordination (Claus and Boutilier 1998, "The Dynamics of Reinforcement Learning in
Cooperative Multiagent Systems"): their best joint action is surrounded by heavy
penalties for miscoordination, so agents that learn each on its own tend to settle on a
safe, worse joint action. A learner that solves them has learnt to coordinate.

The observation is one constant feature (the game has no state to see). PettingZoo's
Parallel API (the ``multiagent`` extra) is the interface; rl/envs/parallel.py names the
games in the env registry.
"""

from typing import Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

AGENTS = ("agent_0", "agent_1")

# Rows: agent_0's action; columns: agent_1's. The best joint action is (0, 0), worth 11;
# a step away from it by one agent costs 30 (the "climb" a greedy learner avoids).
CLIMBING_PAYOFF = ((11.0, -30.0, 0.0), (-30.0, 7.0, 6.0), (0.0, 0.0, 5.0))


def penalty_payoff(penalty: float) -> Tuple[Tuple[float, ...], ...]:
    """The penalty game's payoffs: (0, 0) and (2, 2) are worth 10, and a mix of the two
    (0, 2) or (2, 0) costs ``penalty`` (at most 0); (1, 1), worth 2, is the safe choice."""
    if penalty > 0:
        raise ValueError(f"penalty must be at most 0, got {penalty}")
    return ((10.0, 0.0, penalty), (0.0, 2.0, 0.0), (penalty, 0.0, 10.0))


def best_joint_return(payoff: Tuple[Tuple[float, ...], ...]) -> float:
    """The highest payoff of the game: what the agents get when they coordinate."""
    return float(np.max(payoff))


class MatrixGame(ParallelEnv):
    """A one-move cooperative game over a payoff matrix (see the module docstring)."""

    metadata = {"name": "matrix_game", "render_modes": [], "is_parallelizable": True}

    def __init__(self, payoff: Tuple[Tuple[float, ...], ...], name: str):
        self.payoff = np.asarray(payoff, dtype=np.float32)
        if self.payoff.ndim != 2 or self.payoff.shape[0] != self.payoff.shape[1]:
            raise ValueError(f"payoff must be a square matrix, got shape {self.payoff.shape}")
        self.metadata = {**self.metadata, "name": name}
        self.possible_agents = list(AGENTS)
        self.agents = []
        self.render_mode = None
        actions = self.payoff.shape[0]
        self._observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self._action_space = gym.spaces.Discrete(actions)

    def observation_space(self, agent: str) -> gym.Space:
        return self._observation_space

    def action_space(self, agent: str) -> gym.Space:
        return self._action_space

    def state(self) -> np.ndarray:
        return self._observation()

    def _observation(self) -> np.ndarray:
        return np.ones(1, np.float32)

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None:  # nothing is random; seeded as the API asks
            self._action_space.seed(seed)
        self.agents = list(self.possible_agents)
        return {a: self._observation() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: Dict[str, int]):
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for {', '.join(missing)}")
        reward = float(self.payoff[int(actions[AGENTS[0]]), int(actions[AGENTS[1]])])
        agents, self.agents = self.agents, []
        observations = {a: self._observation() for a in agents}
        rewards = {a: reward for a in agents}
        terminations = {a: True for a in agents}
        truncations = {a: False for a in agents}
        return observations, rewards, terminations, truncations, {a: {} for a in agents}
