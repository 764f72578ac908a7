"""The learner's side of --num_workers: actor processes started, fed, restarted, stopped.

Rounds are the unit of work. The pool grants each worker rounds ahead of
the one the learner is consuming (``ahead``: 1 for on-policy learners,
which must act with the newest weights; more for off-policy ones, whose
actors then never wait for an update), and ``take_round`` returns round r
from every worker, in worker order. A worker that dies (kill -9, an env
that raises, a hang) is started again with backoff and redoes the rounds it
owes, from freshly reset envs; too many restarts in a window stop the run
with one line. Nothing the learner sends or receives can block it (rl/workers/link.py),
so a worker that stops answering is noticed after ``worker_timeout`` seconds however
it stopped: killed, crashed, or stopped by SIGSTOP (which SIGKILL still ends).
"""

from __future__ import annotations

import collections
import os
import queue
import subprocess
import sys
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from rl.agents.actor import PolicySnapshot
from rl.errors import EnvServerError
from rl.hparams.base import HParams, HParamsError
from rl.processes import RL_ROOT, WORKER_TIMEOUT_SECONDS
from rl.workers.link import CLOSED, Link
from rl.workers.messages import STOP, Chunk, ErrorReport, Grant, ProcessSetup, WorkerSpec

BACKOFF_FIRST_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 10.0
STOP_GRACE_SECONDS = 3.0
# How often the learner, waiting for a round, checks its workers for silence and exits.
CHECK_SECONDS = 1.0
# A worker that exited is restarted once its connection closes; this long after its
# exit if the connection stays open (a child process of its env still holds it).
EXITED_LINGER_SECONDS = 1.0
# Waits for a process after SIGKILL; only a process stuck in the kernel takes longer.
KILL_WAIT_SECONDS = 10.0


class WorkerFailure(RuntimeError):
    """Workers failed more often than allowed; ``str()`` is one line."""


class RoundAbandoned(Exception):
    """The learner stopped waiting for a round: the run was asked to stop (a signal)
    and a hung or restarting worker would keep it waiting."""


def python_path_with_rl() -> str:
    """PYTHONPATH for a child process: rl's folder first, then ours (plugins, own envs)."""
    return os.pathsep.join(filter(None, [RL_ROOT, os.environ.get("PYTHONPATH")]))


def _worker_environment() -> Dict[str, str]:
    """This process's environment, with rl's own folder first on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": python_path_with_rl()}


def _start_process(output: Optional[str] = None) -> Tuple[subprocess.Popen, Connection]:
    """An actor process joined to us by a socket pair, waiting for its setup and spec.

    Args:
        output: the file its stdout and stderr append to from the start (so an
            import that fails is in its log); None: ours, until its setup names one.
    """
    ours, theirs = Pipe(duplex=True)
    log = open(output, "ab") if output is not None else None
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "rl.workers.process", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=_worker_environment(),
            # Ctrl-C in a terminal goes to the learner alone; it stops its workers.
            start_new_session=True,
        )
    finally:
        theirs.close()
        if log is not None:
            log.close()
    return process, ours


class ProcessLauncher:
    """Starts a worker as ``python -m rl.workers.process`` joined by a socket pair."""

    def __init__(self, log_dir: Optional[str]):
        """Args:
        log_dir: where each worker's output goes (worker_<i>.log); None: inherit ours.
            The run sets it once its folder is known (its launcher starts before).
        """
        self.log_dir = log_dir
        # Actor processes started by ``start_early``, not yet given a spec.
        self.early: List[Tuple[subprocess.Popen, Connection]] = []

    def start_early(self, count: int) -> None:
        """Starts ``count`` actor processes now, for the next ``spawn`` calls.

        The run's system calls this (``System.actor_launcher``) before train.py imports
        TensorFlow: the workers' own imports (NumPy, Gymnasium, rl) then run on the other
        core during the learner's, instead of after it. A process nobody takes exits when
        this one does (its connection closes), or at ``close``.
        """
        for _ in range(count):
            self.early.append(_start_process())

    def waiting_early(self) -> List[int]:
        """The pids of processes started early that no worker has taken yet."""
        return [process.pid for process, _ in self.early]

    def spawn(self, spec: WorkerSpec):
        """Starts the worker (or takes one started early), sends it its spec.

        Returns:
            (process, its Link).
        """
        output = None
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
            output = os.path.join(self.log_dir, f"worker_{spec.index}.log")
        process, conn = None, None
        while self.early and process is None:
            process, conn = self.early.pop(0)
            if process.poll() is not None:  # it died waiting: start a fresh one
                conn.close()
                process, conn = None, None
        if process is None:
            process, conn = _start_process(output)
        link = Link(conn, f"worker {spec.index}")
        # The environment of now, not of its start: an early process began before the
        # learner set the run's variables. One that died since (or hangs) is noticed and
        # restarted by the pool as any worker that fails.
        link.send(ProcessSetup(_worker_environment(), output))
        link.send(spec)
        return process, link

    def prepare(self, count: int) -> None:
        """Nothing to start ahead: a local process starts in ``spawn`` without waiting."""
        del count

    def close(self) -> None:
        """Stops early processes that no worker took (they are still waiting for a spec);
        the pool stops the workers."""
        while self.early:
            process, conn = self.early.pop()
            conn.close()  # it reads end-of-file and exits
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class WorkerSlot:
    """One worker's process, connection and bookkeeping."""

    def __init__(self, index: int):
        self.index = index
        self.process = None
        self.link: Optional[Link] = None
        self.granted = 0  # rounds granted so far (round indices below this)
        self.received = 0  # rounds received so far
        self.chunks: Dict[int, Chunk] = {}
        self.sent_version = -1
        self.restarts = 0
        # Since when its silence counts: its last message, or the grant that made it
        # owe a round again (a worker waiting for a grant owes nothing).
        self.last_heard = time.monotonic()
        self.exited_at: Optional[float] = None  # when its process was first seen ended

    @property
    def owes(self) -> bool:
        return self.received < self.granted


class ActorPool:
    """N actor processes feeding one learner, round by round."""

    def __init__(
        self,
        make_spec: Callable[[int, int, PolicySnapshot, int], WorkerSpec],
        num_workers: int,
        ahead: int,
        max_restarts: int,
        restart_window: float,
        say: Callable[[str], None],
        launcher=None,
        worker_timeout: float = WORKER_TIMEOUT_SECONDS,
        give_up: Callable[[], bool] = lambda: False,
    ):
        """Starts nothing yet (see ``start``).

        Args:
            make_spec: (worker index, first round, snapshot, restart count) -> its spec.
            num_workers: how many actor processes.
            ahead: rounds each worker may play beyond the one being consumed
                (1: it always acts with the weights after the latest update).
            max_restarts: restarts allowed within ``restart_window`` seconds
                (over all workers) before the run stops.
            restart_window: seconds.
            say: prints one line for the user (restarts).
            launcher: starts workers (default: local processes); its owner closes it.
            worker_timeout: a worker silent this long while it owes a round is restarted.
            give_up: true when waiting for a round (or a restart's backoff) must end
                with RoundAbandoned.
        """
        self.make_spec = make_spec
        self.give_up = give_up
        self.slots = [WorkerSlot(i) for i in range(num_workers)]
        self.ahead = ahead
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self.say = say
        self.launcher = launcher or ProcessLauncher(None)
        self.worker_timeout = worker_timeout
        self.next_round = 0
        self.recent_restarts: Deque[float] = collections.deque()
        self.total_restarts = 0
        self.snapshot: Optional[PolicySnapshot] = None
        # (slot, link, message) from every worker's reader thread, in arrival order.
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()

    # --- life cycle ------------------------------------------------------------
    def start(self, snapshot: PolicySnapshot) -> None:
        """Starts every worker with these weights, granted the rounds it may play first.

        The grants are those ``take_round(0)`` would make, so the workers play
        while the learner still prepares (``Learner.warm_up``).
        """
        self.snapshot = snapshot
        self.launcher.prepare(len(self.slots))
        for slot in self.slots:
            try:
                self._launch(slot)
            except WorkerFailure as e:  # it failed as it started: replaced as a failed one
                self._replace_until_it_starts(slot, str(e))
            self._grant_ahead_of(slot, self.next_round)

    def _launch(self, slot: WorkerSlot) -> None:
        spec = self.make_spec(slot.index, slot.received, self.snapshot, slot.restarts)
        slot.process, link = self.launcher.spawn(spec)
        slot.link, slot.exited_at = link, None
        link.listen(lambda message: self.inbox.put((slot, link, message)))
        slot.sent_version = self.snapshot.version
        # Rounds granted to the previous process and not received are owed again.
        owed, slot.granted = slot.granted, slot.received
        slot.last_heard = time.monotonic()
        while slot.granted < owed:
            self._grant(slot)

    def close(self) -> None:
        """Stops every worker: asks, waits a little, then kills. No process outlives this."""
        for slot in self.slots:
            if slot.link is not None:
                slot.link.send(STOP)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for slot in self.slots:
            if slot.process is not None:
                self._end_process(slot, grace=deadline - time.monotonic())
            slot.process, slot.link = None, None

    def _end_process(self, slot: WorkerSlot, grace: float) -> Optional[int]:
        """Waits up to ``grace`` seconds for the worker to exit, kills it (a stopped one
        too), closes its link; returns its exit status (None if it would not end)."""
        try:
            slot.process.wait(timeout=max(0.0, grace))
        except subprocess.TimeoutExpired:
            pass
        # Killed even if it exited: a Ray actor holds its CPU until then.
        slot.process.kill()
        try:
            returncode = slot.process.wait(timeout=KILL_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            returncode = None
        if slot.link is not None:
            slot.link.close()
        return returncode

    @property
    def pids(self) -> List[int]:
        return [slot.process.pid for slot in self.slots if slot.process is not None]

    # --- rounds --------------------------------------------------------------------
    def _grant(self, slot: WorkerSlot) -> None:
        newer = self.snapshot if self.snapshot.version != slot.sent_version else None
        if not slot.owes:
            slot.last_heard = time.monotonic()  # idle until now, not silent
        # Queued: a worker that died or hangs is noticed while waiting for its chunk.
        slot.link.send(Grant(newer))
        slot.sent_version = self.snapshot.version
        slot.granted += 1

    def _grant_ahead_of(self, slot: WorkerSlot, r: int) -> None:
        """Grants ``slot`` every round up to ``ahead`` beyond round ``r``."""
        while slot.granted < r + self.ahead:
            self._grant(slot)

    def take_round(self, snapshot: PolicySnapshot) -> List[Chunk]:
        """The next round from every worker, in worker order.

        Args:
            snapshot: the learner's newest weights, sent with the grants made now.

        Raises:
            WorkerFailure: workers failed more than ``max_restarts`` times in the window.
            EnvServerError: a worker's env server went away (its ErrorReport says so).
            RoundAbandoned: ``give_up`` turned true before the round was complete.
        """
        self.snapshot = snapshot
        r = self.next_round
        for slot in self.slots:
            self._grant_ahead_of(slot, r)
        while any(r not in slot.chunks for slot in self.slots):
            if self.give_up():
                # Those that owe this round are taken as hung: killed now, so that close()
                # does not wait for them to answer STOP.
                for slot in self.slots:
                    if r not in slot.chunks:
                        slot.process.kill()
                raise RoundAbandoned
            self._take_messages(timeout=CHECK_SECONDS)
            for slot in self.slots:
                if r not in slot.chunks:
                    self._check(slot)
        self.next_round += 1
        return [slot.chunks.pop(r) for slot in self.slots]

    def _take_messages(self, timeout: float) -> None:
        """Handles every message in the inbox, waiting up to ``timeout`` for the first."""
        try:
            item = self.inbox.get(timeout=timeout)
            while True:
                self._handle(*item)
                item = self.inbox.get_nowait()
        except queue.Empty:
            pass

    def _handle(self, slot: WorkerSlot, link: Link, message: Any) -> None:
        if link is not slot.link:
            return  # from a process already replaced
        slot.last_heard = time.monotonic()
        if message is CLOSED:
            self._restart(slot, None, grace=STOP_GRACE_SECONDS)
        elif isinstance(message, ErrorReport) and message.env_server_gone:
            raise EnvServerError(message.message)  # the run ends as without workers
        elif isinstance(message, ErrorReport):  # it exits after saying why
            self._restart(slot, message.message, grace=STOP_GRACE_SECONDS)
        elif isinstance(message, Chunk):
            slot.chunks[message.round] = message
            slot.received = message.round + 1

    def _check(self, slot: WorkerSlot) -> None:
        """Restarts a worker that owes a round and was silent too long, or that exited."""
        now = time.monotonic()
        if slot.owes and now - slot.last_heard > self.worker_timeout:
            self._restart(slot, f"sent nothing for {self.worker_timeout:g} s", grace=0.0)
        elif slot.process.poll() is not None:
            # Its connection closing (CLOSED, with what it sent before) is the usual sign.
            slot.exited_at = slot.exited_at or now
            if now - slot.exited_at > EXITED_LINGER_SECONDS:
                self._restart(slot, None, grace=0.0)

    def _restart(self, slot: WorkerSlot, why: Optional[str], grace: float) -> None:
        """Replaces a failed worker after a backoff, or stops the run if failures are too many.

        Args:
            slot: the worker.
            why: what went wrong; None: how its process ended.
            grace: seconds it may take to exit by itself (to finish its log) before SIGKILL.
        """
        returncode = self._end_process(slot, grace)
        self._replace_until_it_starts(slot, why or exit_reason(returncode))

    def _replace_until_it_starts(self, slot: WorkerSlot, why: str) -> None:
        """Starts a replacement for ``slot``, which failed (``why``), after a backoff; one
        that fails as it starts (on Ray: placed on a node that is gone and not yet known to
        be) is one more failure for --worker_restarts, and is replaced in turn.

        Raises:
            WorkerFailure: failures are more than ``max_restarts`` in the window.
            RoundAbandoned: ``give_up`` turned true during a backoff.
        """
        while True:
            self._count_failure_and_back_off(slot, why)
            try:
                self._launch(slot)
                return
            except WorkerFailure as e:
                why = str(e)

    def _count_failure_and_back_off(self, slot: WorkerSlot, why: str) -> None:
        """Counts one failure of ``slot``, says so, and waits out the backoff.

        Raises:
            WorkerFailure: that is more failures than ``max_restarts`` in the window.
            RoundAbandoned: ``give_up`` turned true during the backoff.
        """
        now = time.monotonic()
        self.recent_restarts.append(now)
        while self.recent_restarts and now - self.recent_restarts[0] > self.restart_window:
            self.recent_restarts.popleft()
        if len(self.recent_restarts) > self.max_restarts:
            raise WorkerFailure(
                f"worker {slot.index} failed ({why}); that is {len(self.recent_restarts)} "
                f"worker failures within {self.restart_window:.0f} s, more than the "
                f"{self.max_restarts} allowed (--worker_restarts)"
            )
        slot.restarts += 1
        self.total_restarts += 1
        delay = min(
            BACKOFF_FIRST_SECONDS * 2 ** (len(self.recent_restarts) - 1), BACKOFF_MAX_SECONDS
        )
        self.say(
            f"worker {slot.index} failed ({why}); restarting it in {delay:.1f} s "
            f"(restart {slot.restarts} of this worker, {len(self.recent_restarts)} "
            f"in the last {self.restart_window:.0f} s)"
        )
        backoff_end = time.monotonic() + delay
        while time.monotonic() < backoff_end:
            if self.give_up():
                raise RoundAbandoned
            time.sleep(min(CHECK_SECONDS, backoff_end - time.monotonic()))

    def queued(self) -> int:
        """Rounds received and not yet taken, over all workers."""
        return sum(len(slot.chunks) for slot in self.slots)


def exit_reason(returncode: Optional[int]) -> str:
    """A worker's exit status in words: "killed by signal 9", "exit code 1"."""
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def check_workers(hp: HParams, num_workers: int) -> None:
    """Refuses a --num_workers that cannot share the env copies evenly."""
    if num_workers < 0:
        raise HParamsError(f"--num_workers must be >= 0, not {num_workers}")
    if num_workers and hp.num_envs % num_workers:
        fits = [n for n in range(1, hp.num_envs + 1) if hp.num_envs % n == 0]
        raise HParamsError(
            f"--num_workers {num_workers} must divide num_envs={hp.num_envs} (each worker "
            f"steps an equal share of the env copies): valid: {', '.join(map(str, fits))}, "
            "or change num_envs with --hparam_override"
        )
