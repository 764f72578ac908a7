"""The actor process: ``python -m rl.workers.process FD`` (started by rl/workers/pool.py).

It reads its setup (a ProcessSetup) and a WorkerSpec from the connection on
file descriptor FD, builds its env copies and its actor, and plays rounds
while it holds grants, sending one Chunk per round. It acts in NumPy
(TensorFlow is not imported) unless the spec asks for a TensorFlow model. It
exits when told to stop, when the learner's connection closes, or when the
learner process is gone (Linux also kills it with the learner: no orphans
after a kill -9). Ctrl-C in a terminal reaches the learner only; the learner
stops its workers.
"""

from __future__ import annotations

import collections
import ctypes
import os
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Deque, Dict, Optional, Tuple

import numpy as np

from rl import plugins, seeding
from rl.agents.actor import Actor, act_and_observe, build_actor
from rl.envs import make_vec_env
from rl.errors import EnvServerError, error_line
from rl.games import registered as game_envs  # noqa: F401  (the games as envs, which a run may act in)
from rl.processes import PR_SET_PDEATHSIG
from rl.workers.messages import (
    ENV_SERVER_GONE,
    RL_VARIABLE_PREFIX,
    STOP,
    Chunk,
    ErrorReport,
    Grant,
    ProcessSetup,
    WorkerSpec,
)


class RoundRecorder:
    """Takes ``observe(**step)`` calls (as a learner does) into [round_steps, n, ...] arrays."""

    def __init__(self, round_steps: int):
        self.round_steps = round_steps
        self.arrays: Dict[str, np.ndarray] = {}
        self.t = 0

    def observe(self, **step: np.ndarray) -> None:
        if not self.arrays:
            self.arrays = {
                name: np.empty((self.round_steps, *np.shape(value)), np.asarray(value).dtype)
                for name, value in step.items()
            }
        for name, value in step.items():
            self.arrays[name][self.t] = value
        self.t += 1


def die_with_parent() -> None:
    """Asks Linux to kill this process when its parent dies (best effort elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def output_to(path: str) -> None:
    """Points this process's stdout and stderr (file descriptors 1 and 2) at ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def receive_spec(conn: Connection) -> Tuple[Optional[ProcessSetup], WorkerSpec]:
    """The learner's first messages: a local process's setup (if sent), then the spec."""
    message = conn.recv()
    setup = None
    if isinstance(message, ProcessSetup):
        setup, message = message, conn.recv()
    return setup, message


def take_setup(setup: ProcessSetup) -> None:
    """Takes on the learner's environment of now (or only its rl variables), and sends
    output to the worker's log."""
    if setup.rl_variables_only:
        for name in [name for name in os.environ if name.startswith(RL_VARIABLE_PREFIX)]:
            del os.environ[name]
    else:
        os.environ.clear()
    os.environ.update(setup.environ)
    if setup.output is not None:
        output_to(setup.output)


def spec_actor(spec: WorkerSpec) -> Actor:
    """The worker's actor: NumPy acting on the HostPolicy sent, or a TensorFlow model of
    the run's kind, drawing its rows from the run's act stream (a restarted worker:
    from a stream of its own, per restart)."""
    if spec.act_stream is not None:
        rng = seeding.RowDraws(seeding.generator_at(spec.act_stream), spec.env_ids, spec.total_envs)
    else:
        rng = seeding.stream(spec.seed, seeding.ACTOR_PROCESS, spec.index, spec.restart)
    return build_actor(
        spec.hparams,
        spec.spaces,
        spec.snapshot,
        rng,
        explore=True,
        host_network=spec.policy,
        extras=spec.extras,
        exploration=spec.exploration,
        env_ids=spec.env_ids,
    )


def play(spec: WorkerSpec, conn: Connection) -> None:
    """Plays granted rounds until told to stop or the learner is gone."""
    first, end = spec.env_ids
    envs = make_vec_env(
        spec.env, end - first, spec.vectorization, max_episode_steps=spec.hparams.max_episode_steps
    )
    try:
        actor = spec_actor(spec)
        start = spec.global_step(spec.first_round, 0)
        # Env copy i of the run gets the seed a single process would give it.
        obs, _ = envs.reset(
            seed=seeding.derived_seed(spec.seed, seeding.TRAIN_ENV_RESET, start) + first
        )
        round_index, fresh = spec.first_round, True
        grants: Deque[Grant] = collections.deque()
        while True:
            while not grants or conn.poll():
                message = conn.recv()
                if message == STOP:
                    return
                assert isinstance(message, Grant), message
                grants.append(message)
            if spec.parent_pid and os.getppid() != spec.parent_pid:
                return  # the learner is gone (outside Linux nothing killed us)
            # Each round acts with the weights its grant carried, never newer ones that
            # arrived early: the policy lag then depends on the round, not on timing,
            # and a seed gives the same run.
            grant = grants.popleft()
            if grant.snapshot is not None:
                actor.load(grant.snapshot)
            began = time.perf_counter()
            chunk, obs = play_round(spec, actor, envs, obs, round_index, fresh)
            chunk.seconds = time.perf_counter() - began
            conn.send(chunk)
            round_index += 1
            fresh = False
    finally:
        envs.close()


def play_round(spec, actor, envs, obs, round_index: int, fresh: bool):
    """``round_steps`` vectorised steps; returns the Chunk and the next observations."""
    steps, n = spec.round_steps, envs.num_envs
    recorder = RoundRecorder(steps)
    done = np.zeros((steps, n), bool)
    returns = np.zeros((steps, n), np.float64)
    lengths = np.zeros((steps, n), np.int64)
    version = actor.version
    for t in range(steps):
        obs, info = act_and_observe(actor, recorder, envs, obs, spec.global_step(round_index, t))
        if "_episode" in info:
            done[t] = info["_episode"]
            returns[t] = np.where(info["_episode"], info["episode"]["r"], 0.0)
            lengths[t] = np.where(info["_episode"], info["episode"]["l"], 0)
    shared = spec.act_stream is not None
    chunk = Chunk(
        spec.index,
        round_index,
        version,
        fresh,
        recorder.arrays,
        done,
        returns,
        lengths,
        seconds=0.0,
        act_stream=actor.rng.bit_generator.state if shared else None,
    )
    return chunk, obs


def error_report(worker: int, error: Exception) -> ErrorReport:
    """What worker ``worker`` says of the ``error`` it stops with: an env server gone is
    its own kind, in the words the learner says it in (as a run without workers does)."""
    if isinstance(error, EnvServerError):
        return ErrorReport(worker, error_line(error), ENV_SERVER_GONE)
    return ErrorReport(worker, error_line(error, typed=True))


def serve(conn: Connection) -> int:
    """Acts for the learner at the other end of ``conn`` until told to stop: takes its
    setup (if sent), loads its --plugins, plays rounds. A local process and a Ray actor
    both run this."""
    try:
        setup, spec = receive_spec(conn)
    except (EOFError, OSError):
        return 0  # the learner ended before it had work for us (or started us early)
    try:
        if setup is not None:
            take_setup(setup)  # a log it cannot open is reported like any failure
        plugins.load_from_environment()  # the learner's --plugins register envs, models, ...
        play(spec, conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return 0  # the learner closed the connection: nothing to report to
    except Exception as error:  # an env or policy failure: the learner restarts us
        try:
            conn.send(error_report(spec.index, error))
        except OSError:
            pass
        raise
    return 0


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv if argv is None else argv
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the learner decides when workers stop
    return serve(Connection(int(argv[1])))


if __name__ == "__main__":
    sys.exit(main())
