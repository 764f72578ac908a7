"""Experience from actor processes (--num_workers): the pool side of rl/agents/experience.py.

``WorkerPool`` starts the workers through the run's System (local processes or Ray
actors), takes one round from every worker at a time and gives the learner that round
one vectorised step at a time (``MergedRound``), in worker order: the learner sees the
[num_envs] steps it would see from its own actor.
"""

from __future__ import annotations

import os
from typing import Callable, List, Optional

import numpy as np

from rl.agents.actor import RandomStream
from rl.agents.experience import EndedEpisodes
from rl.hparams.base import HParams
from rl.processes import OFF_POLICY_ROUNDS_AHEAD, ON_POLICY_ROUNDS_AHEAD, WorkerSettings
from rl.workers.messages import Chunk, WorkerSpec
from rl.workers.pool import ActorPool


def rounds_ahead_for(on_policy: bool, asked: Optional[int]) -> int:
    """Rounds each worker may play beyond the one the learner consumes.

    Args:
        on_policy: the learner's ``on_policy``: its rounds must act with its newest weights.
        asked: --worker_rounds_ahead; None: the learner's own choice (1 on-policy,
            OFF_POLICY_ROUNDS_AHEAD off-policy).
    """
    if asked is not None:
        return asked
    return ON_POLICY_ROUNDS_AHEAD if on_policy else OFF_POLICY_ROUNDS_AHEAD


class MergedRound:
    """One round of every worker as [round_steps, num_envs] steps, read one step at a time."""

    def __init__(self, chunks: List[Chunk]):
        self.steps = {
            name: np.concatenate([c.steps[name] for c in chunks], axis=1)
            for name in chunks[0].steps
        }
        self.done = np.concatenate([c.episode_done for c in chunks], axis=1)
        self.returns = np.concatenate([c.episode_return for c in chunks], axis=1)
        self.lengths = np.concatenate([c.episode_length for c in chunks], axis=1)
        self.fresh_envs: List[int] = []
        first = 0
        for chunk in chunks:
            n = chunk.episode_done.shape[1]
            if chunk.fresh_start:
                self.fresh_envs.extend(range(first, first + n))
            first += n
        self.t = 0

    @property
    def exhausted(self) -> bool:
        return self.t == len(self.done)

    def next_step(self):
        """The next vectorised step's fields, and the returns and lengths of episodes it ended."""
        t, self.t = self.t, self.t + 1
        done = self.done[t]
        return {name: array[t] for name, array in self.steps.items()}, (
            self.returns[t][done],
            self.lengths[t][done],
        )


class WorkerPool:
    """Actor processes stepping the run's env copies in rounds, for one learner."""

    def __init__(
        self,
        hp: HParams,
        learner,
        act_stream: RandomStream,
        host_network,
        spaces,
        num_workers: int,
        settings: WorkerSettings,
        launcher,
        say: Callable[[str], None],
        log_scalar: Callable[[str, float, int], None],
        give_up: Callable[[], bool] = lambda: False,
    ):
        """Starts nothing yet (see ``start``).

        Args:
            hp: the run's hparams.
            learner: what observes the rounds (rl/agents/learner.py).
            act_stream: the agent's training-actor stream: the workers start from its
                state and it follows theirs round by round, so checkpoints hold it and
                a resumed run continues it.
            host_network: the HostPolicy the workers act with in NumPy; None: each
                builds a TensorFlow model.
            spaces: (observation space, action space) of one env copy.
            num_workers: actor processes; each steps an equal share of ``hp.num_envs``.
            settings: their restarts (too many end the run with WorkerFailure), timeout
                and rounds ahead (--worker_* flags).
            launcher: what starts the workers (``System.actor_launcher``), the run's
                for as long as it lasts (the run closes it).
            say: prints one line for the user (restarts).
            log_scalar: records (tag, value, step) for TensorBoard (rl/logbook.py).
            give_up: true when waiting for the workers must end (RoundAbandoned): the
                run was asked to stop and they keep it waiting.
        """
        self.hp = hp
        self.learner = learner
        self.act_stream = act_stream
        self.host_network = host_network
        self.spaces = spaces
        self.num_workers = num_workers
        self.settings = settings
        self.launcher = launcher
        self.say = say
        self.log_scalar = log_scalar
        self.give_up = give_up
        # A picklable function the workers evaluate without importing the learner.
        self.exploration = learner.exploration_schedule(hp)
        self.pool: Optional[ActorPool] = None
        self.round: Optional[MergedRound] = None

    def start(self) -> None:
        """Starts the workers, which play their first rounds while the learner traces
        its update (``Learner.warm_up``).

        Raises:
            WorkerFailure: they failed more often than allowed before the first round.
        """
        if self.pool is not None:
            return
        learner = self.learner
        self.pool = ActorPool(
            self._spec_maker(),
            self.num_workers,
            ahead=rounds_ahead_for(learner.on_policy, self.settings.rounds_ahead),
            max_restarts=self.settings.restarts,
            restart_window=self.settings.restart_window,
            say=self.say,
            launcher=self.launcher,
            worker_timeout=self.settings.timeout,
            give_up=self.give_up,
        )
        self.pool.start(learner.publish())
        learner.warm_up()  # traced while the workers start and play their first rounds

    def _spec_maker(self) -> Callable[[int, int, object, int], WorkerSpec]:
        """(worker index, first round, snapshot, restart count) -> its spec, for rounds
        counted from the learner's env steps of now."""
        hp = self.hp
        share = hp.num_envs // self.num_workers
        round_steps = self.learner.round_steps()
        start_step = self.learner.env_steps
        extras = tuple(self.learner.actor_extras)
        act_stream = self.act_stream.generator.bit_generator.state

        def make_spec(index: int, first_round: int, snapshot, restart: int) -> WorkerSpec:
            return WorkerSpec(
                index=index,
                env=hp.env,
                env_ids=(index * share, (index + 1) * share),
                vectorization=hp.vectorization,
                seed=hp.seed,
                policy=self.host_network,
                hparams=hp,
                spaces=self.spaces,
                extras=extras,
                exploration=self.exploration,
                round_steps=round_steps,
                start_step=start_step,
                total_envs=hp.num_envs,
                first_round=first_round,
                snapshot=snapshot,
                restart=restart,
                parent_pid=os.getpid(),
                # A restarted worker's rows of the stream are not the ones it replays.
                act_stream=act_stream if restart == 0 else None,
            )

        return make_spec

    def step(self) -> Optional[EndedEpisodes]:
        """One vectorised step of all env copies, from the workers' current round.

        Raises:
            WorkerFailure: workers failed more often than allowed.
            RoundAbandoned: ``give_up`` turned true while waiting for the workers.
        """
        if self.round is None or self.round.exhausted:
            chunks = self.pool.take_round(self.learner.publish())
            self.round = MergedRound(chunks)
            self._follow_act_stream(chunks)
            self._log(chunks)
            # Envs that were just (re)started do not continue their episodes.
            if self.round.fresh_envs:
                self.learner.break_streams(self.round.fresh_envs)
        step, (returns, lengths) = self.round.next_step()
        self.learner.observe(**step)
        return (returns, lengths) if len(returns) else None

    def _follow_act_stream(self, chunks: List[Chunk]) -> None:
        """Moves the agent's act stream to where the round left the workers' (all alike)."""
        for chunk in chunks:
            if chunk.act_stream is not None:  # not a restarted worker's own stream
                self.act_stream.generator.bit_generator.state = chunk.act_stream
                return

    def policy_updated(self) -> None:
        """Nothing to do now: the next round's grants carry the learner's newest weights."""

    def stop(self) -> None:
        """Stops every worker (none outlives this); a later ``start`` starts new ones."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
            self.round = None

    def _log(self, chunks: List[Chunk]) -> None:
        step, version = self.learner.env_steps, self.learner.publish().version
        for chunk in chunks:
            self.log_scalar(
                f"workers/steps_per_second/worker_{chunk.worker}",
                chunk.episode_done.size / max(chunk.seconds, 1e-9),
                step,
            )
        lag = float(np.mean([version - c.version for c in chunks]))
        self.log_scalar("workers/policy_lag", lag, step)
        self.log_scalar("workers/queued_rounds", float(self.pool.queued()), step)
        self.log_scalar("workers/restarts", float(self.pool.total_restarts), step)
