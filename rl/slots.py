"""Child processes run N at a time: what ``--copies`` and a search's trials share.

``Child`` starts one command. It gets SIGTERM when this process dies, even by kill -9
(Linux), so a child that checkpoints on SIGTERM (train.py) stops with its work saved.
In a session of its own (``own_session``), Ctrl-C at a terminal reaches only us, and
``kill`` stops the child and every process it started.

``Slots`` keeps up to N jobs running, each started as a slot frees. A stop signal
(those in ``catch``) is passed on as one SIGTERM to each running job, and no more start;
with ``second_signal_kills`` a second one kills them. Jobs asked to stop are waited for,
and killed once they take longer than ``grace_seconds``. ``run_in_slots`` is the plain case: run commands, stop
all on the first killed by a signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable, Dict, List, Optional, Protocol, Sequence

from rl.errors import HParamsError
from rl.processes import die_with_parent_hook

POLL_SECONDS = 0.5
# The most --copies of one run (train.py, and each search trial). Every copy is checked
# and given its folder and seed before the first trains, so 10^8 grew to gigabytes before
# anything ran; a thousand is far beyond a comparison of seeds (Agarwal et al. 2021,
# "Deep RL at the edge of the statistical precipice", report intervals from 10 to 100
# runs) and is checked in seconds.
MAX_COPIES = 1000


def check_copies(copies: int, parallel: Optional[int]) -> None:
    """--copies N with --copies_parallel P agree: P only with N > 1, and P <= N.

    One check for train.py and rl.search, which take both flags.

    Args:
        copies: --copies.
        parallel: --copies_parallel, or None when it was not given.

    Raises:
        HParamsError: one line saying which flag to change.
    """
    if parallel is None:
        return
    if copies <= 1:
        raise HParamsError(
            "--copies_parallel is for --copies N with N > 1; add --copies or remove it"
        )
    if parallel > copies:
        raise HParamsError(
            f"--copies_parallel {parallel} is more than --copies {copies}: at most "
            f"{copies} copies can run at once; lower it"
        )


class Child:
    """One command running as a child process."""

    def __init__(
        self,
        command: List[str],
        environ: Dict[str, str],
        cwd: Optional[str] = None,
        output: Optional[str] = None,
        own_session: bool = False,
    ):
        """Starts the command.

        Args:
            command: the program and its arguments.
            environ: its environment.
            cwd: the folder it runs in; None: ours.
            output: the file its stdout and stderr are appended to; None: ours.
            own_session: start it in a session (and process group) of its own, without
                our stdin: a terminal's Ctrl-C then reaches only us, and ``kill`` reaches
                what it started too.
        """
        self.own_session = own_session
        log = open(output, "ab") if output is not None else None
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL if own_session else None,
                stdout=log,
                stderr=subprocess.STDOUT if log is not None else None,
                env=environ,
                cwd=cwd,
                start_new_session=own_session,
                preexec_fn=die_with_parent_hook(),
            )
        finally:
            if log is not None:
                log.close()

    @property
    def pid(self) -> int:
        return self.process.pid

    def poll(self) -> Optional[int]:
        """Its exit code (-N: killed by signal N); None while it runs."""
        return self.process.poll()

    def terminate(self) -> None:
        """Asks it to stop (SIGTERM: train.py saves a checkpoint and exits)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """Stops it at once (SIGKILL), with its process group when it has its own, and reaps it."""
        # The group only while the child is not reaped, when its pid (the group's id)
        # cannot yet belong to another process.
        if self.process.returncode is None:
            try:
                if self.own_session:
                    os.killpg(self.process.pid, signal.SIGKILL)
                else:
                    self.process.kill()
            except ProcessLookupError:
                pass
        self.process.wait()


class Job(Protocol):
    """What ``Slots`` runs: a Child, or anything that stops as one does."""

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class Slots:
    """Keeps up to ``count`` jobs running and passes stop signals on to them."""

    def __init__(
        self,
        count: int,
        catch: Sequence[int] = (signal.SIGTERM,),
        grace_seconds: Optional[float] = None,
        on_signal: Callable[[int], None] = lambda signum: None,
        second_signal_kills: bool = False,
    ):
        """Args:
        count: jobs running at once.
        catch: the signals that stop the jobs (one SIGTERM to each). A signal not
            caught keeps its handler: Ctrl-C in a terminal reaches children of our
            session directly, and ``run`` waits for them.
        grace_seconds: a job asked to stop is killed after this long; None: waited for.
        on_signal: told the first caught signal (to say what happens now).
        second_signal_kills: a second caught signal kills the jobs at once. Off where a
            second SIGTERM can come from our own death (a child of ours that runs jobs
            gets SIGTERM when we die, die_with_parent_hook): the jobs then still
            checkpoint.
        """
        self.count = count
        self.catch = tuple(catch)
        self.grace_seconds = grace_seconds
        self.on_signal = on_signal
        self.second_signal_kills = second_signal_kills
        self.running: List[Job] = []
        self.stop_signal: Optional[int] = None
        self.stopping = False
        self.hurry = False
        self._asked: Dict[int, float] = {}  # id(job) -> when it was asked to stop

    def run(
        self,
        start_next: Callable[[], Optional[Job]],
        check: Callable[[Job], Optional[int]],
        ended: Callable[[Job, int], None],
    ) -> Optional[int]:
        """Runs jobs until ``start_next`` has no more and every job has ended, or a signal
        stopped them.

        Args:
            start_next: starts the next job and returns it; None: none to start now.
            check: a running job's exit code, or None while it runs (called every poll).
            ended: told each job that ended and its exit code, as it ends.

        Returns:
            The signal that stopped the jobs (SIGINT after a Ctrl-C not caught), or None.
        """
        old = {signum: signal.signal(signum, self._on_signal) for signum in self.catch}
        try:
            while True:
                while not self.stopping and len(self.running) < self.count:
                    job = start_next()
                    if job is None:
                        break
                    self.running.append(job)
                if not self.running:
                    break
                if self.stopping:
                    for job in self.running:
                        self.terminate(job)
                # The first to end frees its slot (copies of one set can differ by hours).
                if not self._reap(check, ended):
                    time.sleep(POLL_SECONDS)
        except KeyboardInterrupt:
            # Ctrl-C reached our session's children too: each saves a checkpoint.
            self.stop_signal = signal.SIGINT
            self.running = [job for job in self.running if check(job) is None]
            while self.running:
                time.sleep(POLL_SECONDS)
                self.running = [job for job in self.running if check(job) is None]
        finally:
            for signum, handler in old.items():
                signal.signal(signum, handler)
        return self.stop_signal

    def stop(self) -> None:
        """Asks every running job to stop (SIGTERM) and starts no more."""
        self.stopping = True
        for job in self.running:
            self.terminate(job)

    def terminate(self, job: Job) -> None:
        """Asks one job to stop, once; it is killed if it takes longer than the grace."""
        if id(job) not in self._asked:
            self._asked[id(job)] = time.monotonic()
            job.terminate()

    def _reap(self, check, ended) -> bool:
        """Checks every running job; returns whether one ended."""
        any_ended = False
        for job in list(self.running):
            code = check(job)
            if code is None:
                asked = self._asked.get(id(job))
                if asked is not None and (
                    self.hurry
                    or self.grace_seconds is not None
                    and time.monotonic() - asked > self.grace_seconds
                ):
                    job.kill()
                continue
            self.running = [other for other in self.running if other is not job]
            self._asked.pop(id(job), None)
            any_ended = True
            ended(job, code)
        return any_ended

    def _on_signal(self, signum, frame) -> None:
        del frame
        if self.stop_signal is not None:  # a second signal
            self.hurry = self.second_signal_kills
            return
        self.stop_signal = signum
        self.stopping = True
        self.on_signal(signum)


def run_in_slots(commands: List[List[str]], count: int, environ: Dict[str, str]) -> int:
    """Runs the commands, ``count`` at a time, each as one ends, in our session.

    SIGTERM to this process is passed on to the running commands, which are waited for.
    A command killed by a signal (the OOM killer) stops the others the same way and no
    more start: a set of copies is then incomplete, and a rerun resumes every one.

    Returns:
        the first nonzero exit code, else 0; 130 after Ctrl-C (which each command gets
        too); 143 after SIGTERM; -N when a command was killed by signal N.
    """
    waiting = list(commands)
    slots = Slots(count, catch=(signal.SIGTERM,))
    codes: List[int] = []

    def start_next() -> Optional[Child]:
        return Child(waiting.pop(0), environ) if waiting else None

    def ended(child: Child, code: int) -> None:
        codes.append(code)
        if code < 0:
            slots.stop()

    stopped_by = slots.run(start_next, Child.poll, ended)
    if stopped_by is not None:
        return 128 + stopped_by
    killed = [code for code in codes if code < 0]  # a kill outranks an earlier failure
    return killed[0] if killed else next((code for code in codes if code), 0)
