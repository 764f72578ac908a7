"""What travels between the learner and its actor processes.

Learner -> worker: a ``ProcessSetup`` (local processes only) and a
``WorkerSpec`` once, then ``Grant``s (each allows one more round, with newer
weights if there are any) and finally ``STOP``.
Worker -> learner: one ``Chunk`` per round, or an ``ErrorReport`` before it
exits. Everything is plain data (NumPy arrays, dataclasses): no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from rl.agents.actor import PolicySnapshot

STOP = "stop"
RL_VARIABLE_PREFIX = "RL_"  # rl's own environment variables (RL_RUN_DIR, RL_PLUGINS, ...)


@dataclasses.dataclass(frozen=True)
class ProcessSetup:
    """What a local actor process takes on as it becomes a worker.

    Sent rather than given at its start, since a process started early
    (``ProcessLauncher.start_early``) exists before the run folder and before the
    variables the learner sets for its envs (``RL_RUN_DIR`` for self-play).

    A Ray actor, which may run on another machine with its own paths, takes only
    rl's variables (``rl_variables_only``): its other variables stay its node's.

    Attributes:
        environ: the learner's environment now (with rl's folder on PYTHONPATH), or
            its ``RL_*`` variables.
        output: the file its stdout and stderr append to; None: the learner's.
        rl_variables_only: ``environ`` holds the learner's ``RL_*`` variables, which
            replace the process's own; the rest of its environment is kept.
    """

    environ: Dict[str, str]
    output: Optional[str]
    rl_variables_only: bool = False


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything an actor process needs to act for the learner.

    Attributes:
        index: this worker's number, 0..num_workers-1.
        env: the env name (registered or Gymnasium id).
        env_ids: (first, end): the run's env copies this worker steps.
        vectorization: "sync" or "async" (rl.envs.make_vec_env).
        seed: the run's seed.
        policy: a HostPolicy (acting in NumPy), or None: act in TensorFlow
            with a model built from ``hparams`` on ``spaces``.
        hparams: the run's hparams (the act_select, the action noise, a TensorFlow model).
        spaces: (observation space, action space) of one env copy.
        extras: what the learner needs recorded with each action.
        exploration: epsilon as a function of the global env step (picklable).
        round_steps: vectorised steps per round.
        start_step: the learner's env steps when round 0 begins.
        total_envs: env copies over all workers (steps per vectorised step).
        first_round: the round this worker starts with (later after a restart).
        snapshot: the weights to act with until a grant brings newer ones.
        restart: how often this worker was restarted before (seeds its streams).
        parent_pid: the learner's pid: the worker exits when it is gone (0: do not check).
        act_stream: the state of the run's act stream (rl/seeding.py ACT) where round
            ``first_round`` begins: the worker draws its rows of every per-row draw
            from it, as the learner's own actor would (rl/seeding.py RowDraws). None:
            a stream of its own (a restarted worker, whose rounds are replayed anyway).
    """

    index: int
    env: str
    env_ids: Tuple[int, int]
    vectorization: str
    seed: int
    policy: Any
    hparams: Any
    spaces: Tuple[Any, Any]
    extras: Tuple[str, ...]
    exploration: Callable[[int], float]
    round_steps: int
    start_step: int
    total_envs: int
    first_round: int
    snapshot: PolicySnapshot
    restart: int
    parent_pid: int
    act_stream: Optional[Dict[str, Any]] = None

    def global_step(self, round_index: int, t: int) -> int:
        """The run's env steps before vectorised step ``t`` of round ``round_index``."""
        return self.start_step + (round_index * self.round_steps + t) * self.total_envs


@dataclasses.dataclass(frozen=True)
class Grant:
    """Permission to play one more round; ``snapshot`` is None when the weights are unchanged."""

    snapshot: Optional[PolicySnapshot]


@dataclasses.dataclass
class Chunk:
    """One round of one worker: ``round_steps`` vectorised steps of its env copies.

    Attributes:
        worker: the worker's index.
        round: the round's index.
        version: the snapshot version the round acted with.
        fresh_start: the envs were reset at the round's start (the worker's
            first round), so their episodes do not continue the previous ones.
        steps: obs, actions, rewards, terminated, truncated, next_obs (true next
            observations) and the actor's extras, each [round_steps, n, ...].
        episode_done: [round_steps, n] an episode ended at this step.
        episode_return: [round_steps, n] its return where one ended.
        episode_length: [round_steps, n] its length where one ended.
        seconds: wall time the worker took for the round.
        act_stream: the run's act stream's state after the round, which the learner
            keeps (checkpoints hold it); None: the worker draws from a stream of its own.
    """

    worker: int
    round: int
    version: int
    fresh_start: bool
    steps: Dict[str, np.ndarray]
    episode_done: np.ndarray
    episode_return: np.ndarray
    episode_length: np.ndarray
    seconds: float
    act_stream: Optional[Dict[str, Any]] = None


# An ErrorReport's kind when the worker's env server went away (an EnvServerError, after
# the client's retries): the learner ends the run as without workers (exit 5); a restart
# would only meet the same server.
ENV_SERVER_GONE = "env_server"


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    """Why a worker stopped (one line), sent before it exits."""

    worker: int
    message: str  # "Type: its first line"; for ENV_SERVER_GONE, the error's own line
    kind: str = ""  # ENV_SERVER_GONE, or "" for a failure a restart may mend

    @property
    def env_server_gone(self) -> bool:
        return self.kind == ENV_SERVER_GONE
