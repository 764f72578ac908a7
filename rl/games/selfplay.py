"""Self-play: the opponent is the learner itself, from its own past policy artefacts.

Every checkpoint of a run writes a policy artefact (rl/policy.py); the pool is the
run's artefacts, so it is recorded with the checkpoints (a resumed run's pool is the
artefacts up to the checkpoint it resumed from: ``tidy_policies`` moves later ones
aside). Before the first artefact exists the pool plays as the random player.

Each game draws one opponent:
- with probability ``scripted_share``, one of the scripted players (so the learner
  keeps meeting play unlike its own: random, one-step look-ahead);
- else a pool member: the ``latest``, ``uniform`` over the pool, or ``prioritised``
  by how often it beats the learner (prioritised fictitious self-play: weight
  (1 - learner's mean score against it)^2, scores starting at 0.5).

The run folder comes from ``$RL_RUN_DIR``, which ``Experiment`` sets before making
envs (worker processes inherit it). Pool members act in NumPy: an actor-critic
samples from its policy, a Q-network is greedy but for a random move with probability
``member_epsilon``; both only among legal moves.
"""

import os
from typing import Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from rl import registry
from rl.games.spec import GameSpec, learner_observation
from rl.policy import RUN_DIR_VARIABLE, artefact_dir, load_host_policy, policy_steps

STRATEGIES = ("latest", "uniform", "prioritised")
SCRIPTED_SHARE = 0.5
SCRIPTED = ("random", "one_step_lookahead")
# A greedy Q-network member opens and answers the same way every game, so the learner
# never meets the lines that would punish its mistakes; moving at random now and then,
# members reach them and exploit them greedily (docs/benchmarks.md, "Self-play").
MEMBER_EPSILON = 0.2


class _Member:
    """One pool member: its step, NumPy policy and weights, and the learner's scores."""

    def __init__(self, step: int, policy, arrays, epsilon: float = 0.0):
        self.name = f"self@{step}"
        self.step = step
        self.policy = policy
        self.arrays = arrays
        self.epsilon = epsilon
        self.games = 0
        self.learner_score = 0.0  # sum of the learner's scores (1 win, 0.5 draw, 0 loss)

    def mean_learner_score(self) -> float:
        return (self.learner_score + 0.5) / (self.games + 1)  # starts at 0.5

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        obs = learner_observation(features, mask)[None]
        out = self.policy(obs, self.arrays)
        if self.policy.outputs == "q_values":
            if self.epsilon and rng.random() < self.epsilon:
                return int(rng.choice(np.flatnonzero(mask)))
            return int(np.argmax(out[0]))
        return int(out.sample(rng)[0])


class PoolOpponent:
    """A Player drawing, per game, a scripted player or one of the run's past policies."""

    def __init__(
        self,
        spec: GameSpec,
        strategy: str = "uniform",
        scripted: Sequence[str] = SCRIPTED,
        scripted_share: float = SCRIPTED_SHARE,
        run_dir: Optional[str] = None,
        member_epsilon: float = MEMBER_EPSILON,
    ):
        """Args:
        spec: the game.
        strategy: how a pool member is drawn: latest, uniform or prioritised.
        scripted: registered players that join the draw.
        scripted_share: the probability of drawing one of them.
        run_dir: the run whose artefacts form the pool (default $RL_RUN_DIR).
        member_epsilon: how often a Q-network member plays a random legal move instead
            of its greedy one, so that its games open and go on in every way.
        """
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown self-play strategy {strategy!r}: valid: {', '.join(STRATEGIES)}"
            )
        self.name = f"self_play_{strategy}"
        self.spec = spec
        self.strategy = strategy
        self.scripted = [registry.players.get(name)(spec) for name in scripted]
        self.scripted_share = scripted_share if self.scripted else 0.0
        self.run_dir = run_dir if run_dir is not None else os.environ.get(RUN_DIR_VARIABLE)
        self.member_epsilon = member_epsilon
        self.members: Dict[int, _Member] = {}
        self.current = None
        size = spec.num_features + spec.num_actions
        self._spaces = (
            gym.spaces.Box(0.0, 1.0, (size,), np.float32),
            gym.spaces.Discrete(spec.num_actions),
        )

    def _refresh(self) -> None:
        """Loads artefacts written since the last game (a listdir per game)."""
        if not self.run_dir:
            return
        steps = policy_steps(self.run_dir)
        for step in steps:
            if step not in self.members:
                policy, arrays = load_host_policy(artefact_dir(self.run_dir, step), *self._spaces)
                self.members[step] = _Member(step, policy, arrays, self.member_epsilon)
        # Artefacts moved aside on resume leave the pool.
        for step in set(self.members) - set(steps):
            del self.members[step]

    def pool(self) -> List[Tuple[int, float, int]]:
        """(step, the learner's mean score against it, games) per pool member."""
        return [(m.step, m.mean_learner_score(), m.games) for _, m in sorted(self.members.items())]

    def new_game(self, rng: np.random.Generator) -> None:
        """Draws this game's opponent."""
        self._refresh()
        members = [self.members[s] for s in sorted(self.members)]
        if not members or rng.random() < self.scripted_share:
            fallback = self.scripted or [registry.players.get("random")(self.spec)]
            self.current = fallback[int(rng.integers(len(fallback)))]
            return
        if self.strategy == "latest":
            self.current = members[-1]
        elif self.strategy == "uniform":
            self.current = members[int(rng.integers(len(members)))]
        else:
            weights = np.array([(1.0 - m.mean_learner_score()) ** 2 for m in members]) + 1e-6
            self.current = members[int(rng.choice(len(members), p=weights / weights.sum()))]

    def game_over(self, learner_score: float) -> None:
        """Records the learner's score (1, 0.5, 0) against this game's opponent."""
        if isinstance(self.current, _Member):
            self.current.games += 1
            self.current.learner_score += learner_score

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        if self.current is None:
            self.new_game(rng)
        return self.current.act(features, mask, rng)
