"""Helpers about this process and the processes it starts: the CPUs it may use, a
child that dies with its parent, TensorFlow's thread pools per process side by side,
and native stderr captured for a block.

Low layer: standard library only, so every part of rl (and the tests) can use them
without importing anything else of rl.
"""

import contextlib
import ctypes
import dataclasses
import os
import signal
import sys
import tempfile
import threading
from typing import Callable, Dict, Optional, Type


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# The folder holding rl: a child process with it on PYTHONPATH imports the same rl as
# we do, wherever it is installed or checked out.
RL_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


PR_SET_PDEATHSIG = 1  # linux/prctl.h

# Set while a signal (SIGINT, SIGTERM) has asked this process's run to stop, by the run's
# handler (rl/experiment.py): what waits on another process (an env server's answer)
# gives up then instead of retrying, so the run stops within seconds. Process-wide, as a
# signal is.
STOP_ASKED = threading.Event()

# Set by train.py's Ctrl-C handler from its start until the run's own handlers take over
# (rl/cli/jobs.py installs it, rl/experiment.py reads it): a KeyboardInterrupt that a library
# swallowed while TensorFlow loaded (a bare ``except:`` around an optional import) still
# stops the run once the run's handlers are in place, instead of letting it train on.
EARLY_INTERRUPT = threading.Event()


def interrupt_early(signum, frame) -> None:
    """SIGINT before the run's own handler: remembered, then raised as Python's default does."""
    del signum, frame
    EARLY_INTERRUPT.set()
    raise KeyboardInterrupt


MAX_WAIT_SECONDS = 86400.0  # a day: the most a seconds variable may ask a run to wait


def seconds_variable(
    name: str, default: float, valid: Callable[[float], bool], what: str, error: Type[Exception]
) -> float:
    """The seconds environment variable ``name`` holds, else ``default``.

    Raises:
        error: it is text, or a number ``valid`` refuses (``what`` says which are not).
    """
    value = os.environ.get(name, "")
    try:
        seconds = float(value) if value else default
    except ValueError:
        seconds = float("nan")
    if not valid(seconds):
        raise error(f"${name} must be a number of seconds, {what}, got {value!r}")
    return seconds


def answer_seconds_variable(name: str, default: float, error: Type[Exception]) -> float:
    """``seconds_variable`` for how long to wait for another process's answer: more than
    0 (no wait at all would fail every call), at most a day (nan or inf would wait for
    ever, a stall the user does not see)."""
    return seconds_variable(
        name, default, lambda s: 0 < s <= MAX_WAIT_SECONDS, "more than 0 and at most 86400", error
    )


# An actor process (--num_workers) silent this long while it owes a round is restarted
# (train.py's --worker_timeout; here so the flag reads it without loading the workers).
WORKER_TIMEOUT_SECONDS = 300.0

# Rounds an actor process may play beyond the one the learner is learning from (train.py's
# --worker_rounds_ahead; here so the flag reads them without loading the workers). One
# acts a whole round with the newest weights, as a single actor acts a burst: the run is
# then the run without workers. An off-policy learner's actors get three by default, so
# that a worker a little slower than the others does not hold the rest up; at most 16, as
# more rounds would only queue in memory.
ON_POLICY_ROUNDS_AHEAD = 1
OFF_POLICY_ROUNDS_AHEAD = 3
MAX_ROUNDS_AHEAD = 16


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """How the learner treats its actor processes (train.py's --worker_* flags); how many
    there are is the run's ``CheckedRun.num_workers``.

    Attributes:
        restarts: failed workers restarted within ``restart_window`` seconds before
            training stops.
        restart_window: seconds.
        timeout: a worker silent this long while it owes a round (hung, or stopped) is
            restarted.
        rounds_ahead: rounds each worker may play beyond the one the learner consumes, 1
            to MAX_ROUNDS_AHEAD; None: the learner's own choice (1 on-policy, 3
            off-policy). With 1 a seed gives the run without workers.
    """

    restarts: int = 5
    restart_window: float = 300.0
    timeout: float = WORKER_TIMEOUT_SECONDS
    rounds_ahead: Optional[int] = None

    def __post_init__(self):
        if self.rounds_ahead is not None and not 1 <= self.rounds_ahead <= MAX_ROUNDS_AHEAD:
            raise ValueError(
                f"worker_rounds_ahead must be 1 to {MAX_ROUNDS_AHEAD}, got {self.rounds_ahead}"
            )


def die_with_parent_hook() -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` that has Linux send the child SIGTERM when this process dies.

    SIGTERM, not SIGKILL: a train.py child saves a checkpoint and stops, so rerunning
    the parent's command resumes it. None where the OS has no such request.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


# The sizes of TensorFlow's two thread pools (default: one thread per core each).
TF_THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def tf_thread_share(processes: int) -> Dict[str, str]:
    """The pool sizes for one of ``processes`` TensorFlow processes side by side: the usable
    CPUs divided among them (one pool per core each would oversubscribe the cores); {}
    when the user set either size."""
    if any(name in os.environ for name in TF_THREAD_VARIABLES):
        return {}
    return dict.fromkeys(TF_THREAD_VARIABLES, str(max(1, usable_cpus() // processes)))


class CapturedStderr:
    """What native code wrote to file descriptor 2 inside ``captured_stderr()``.

    Attributes:
        text: the captured text, set when the block ends.
    """

    text = ""


@contextlib.contextmanager
def captured_stderr():
    """Points file descriptor 2 at a temporary file for the block, so that C++ log lines
    (TensorFlow's start-up notices, Ray's connection retries) can be kept out of the
    terminal and read afterwards; yields a ``CapturedStderr``. Python's ``sys.stderr`` is
    flushed first, and descriptor 2 is restored before an exception leaves the block.
    A native crash inside the block takes what it wrote with it.
    """
    captured = CapturedStderr()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)  # after the sink: a failure to make it leaves nothing open
        try:
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")
