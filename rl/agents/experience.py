"""Where a learner's experience comes from: one interface, two implementations.

``OwnActor`` (here) is this process's training actor stepping the run's env copies;
``WorkerPool`` (rl/workers/experience.py) is actor processes, local or Ray actors,
stepping them in rounds. The training loop (rl/experiment.py) sees only the interface:

    source.start()                    # reset the envs, or start the workers
    ended = source.step()             # one vectorised step, observed by the learner
    if learner.update() is not None:
        source.policy_updated()       # act with the new weights from now on
    source.stop()                     # end what start began

Both feed the learner the [num_envs] transitions of each step in the same order. With an
on-policy learner (``Learner.on_policy``: PPO, A2C, VPG) acting on the host, a seed gives
the same run to the bit with 0 or N workers: a worker draws its rows of every per-row draw
from the run's act stream as this process's actor would (rl/seeding.py RowDraws), its
policy's rows come out of the NumPy forward as in the whole batch (rl/models/host.py), and
each round brings the stream's state back into the agent's training-actor stream, which
checkpoints hold, so a resumed run continues it with any worker count. What still differs
(each run remains the same for a seed and N):

- off-policy learners (the DQN family, SAC, TD3, DDPG, IMPALA): their workers play up to
  OFF_POLICY_ROUNDS_AHEAD rounds ahead (rl/processes.py), with older weights than one
  actor would have. With --worker_rounds_ahead 1 they play none ahead: a round is one
  burst of the learner (``Learner.round_steps``), which the single actor also acts with
  one set of weights, and the run is the run without workers to the bit when
  ``train_interval`` is a multiple of ``num_envs`` (else updates fall inside rounds, where
  the single actor already acts with the new weights) and ``train_steps`` a multiple of
  ``train_interval`` (else the last round, cut short, still moved the act stream, which the
  last checkpoint holds, by the whole round);
- acting in TensorFlow (``host_acting`` false, CNN torsos): a row's results and stateless
  draws depend on the batch it is in;
- a restarted worker draws from a stream of its own and replays its rounds on fresh envs;
- an act_select that draws per row through other Generator methods than RowDraws handles.
"""

from __future__ import annotations

from typing import Optional, Protocol, Tuple

import numpy as np

from rl import seeding
from rl.agents.actor import Actor, act_and_observe

# (returns, lengths) of the episodes that ended at a step, one entry per episode.
EndedEpisodes = Tuple[np.ndarray, np.ndarray]


class ExperienceSource(Protocol):
    """Steps the run's env copies for a learner and hands it each step's transitions."""

    def start(self) -> None:
        """Readies the env copies for ``step`` (a second call after ``stop`` continues)."""

    def step(self) -> Optional[EndedEpisodes]:
        """One vectorised step of every env copy, given to the learner's ``observe``.

        Returns:
            The returns and lengths of the episodes that ended at this step; None if none did.
        """

    def policy_updated(self) -> None:
        """The learner published new weights: acting uses them from now on."""

    def stop(self) -> None:
        """Ends what ``start`` began; nothing runs afterwards."""


class OwnActor:
    """This process's training actor stepping the env copies itself."""

    def __init__(self, actor: Actor, learner, envs, seed: int):
        """Args:
        actor: the agent's training actor.
        learner: what observes the steps (rl/agents/learner.py).
        envs: the run's ``num_envs`` env copies (rl.envs.make_vec_env).
        seed: the run's seed (the envs' resets derive from it).
        """
        self.actor = actor
        self.learner = learner
        self.envs = envs
        self.seed = seed
        self.obs: Optional[np.ndarray] = None

    def start(self) -> None:
        if self.obs is not None:  # a later train() call continues the episodes under way
            return
        self.obs, _ = self.envs.reset(
            seed=seeding.derived_seed(self.seed, seeding.TRAIN_ENV_RESET, self.learner.env_steps)
        )
        # A resumed learner's replay holds episodes these fresh envs do not continue.
        self.learner.break_streams(range(self.envs.num_envs))

    def step(self) -> Optional[EndedEpisodes]:
        self.obs, info = act_and_observe(
            self.actor, self.learner, self.envs, self.obs, self.learner.env_steps
        )
        if "_episode" in info and info["_episode"].any():
            done = info["_episode"]
            return info["episode"]["r"][done], info["episode"]["l"][done]
        return None

    def policy_updated(self) -> None:
        self.actor.load(self.learner.publish())

    def stop(self) -> None:
        """Nothing to stop: the envs stay as they are for the next ``start``."""
