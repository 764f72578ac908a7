"""One way for a test to wait for a state: poll a condition, never sleep a fixed time; a
process whose stderr a test polls; and the processes of a run, found by its folder or run to
their end as a user runs train.py."""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_for(
    condition, what: str, timeout: float = 120.0, process=None, details=None, interval: float = 0.02
):
    """Polls ``condition`` until it returns something truthy, and returns that.

    Fails, naming ``what``, when ``timeout`` seconds pass first or when ``process`` (a
    ``subprocess.Popen``) ends first: a run that died should fail at once, not at the timeout.

    Args:
        condition: a function of no arguments.
        what: the state waited for, as the failure names it ("no {what} after 120 s").
        timeout: seconds.
        process: a process whose end means the state will not come.
        details: a function of no arguments giving text for the failure (a run's stderr).
        interval: seconds between polls.
    """
    deadline = time.monotonic() + timeout
    while True:
        # Whether the process had ended is read before the condition: a state reached
        # just before it exits is still found.
        ended = process is not None and process.poll() is not None
        value = condition()
        if value:
            return value
        if ended:
            failure = f"the process ended (exit {process.returncode}) before {what}"
        elif time.monotonic() >= deadline:
            failure = f"no {what} after {timeout:g} s"
        else:
            time.sleep(interval)
            continue
        raise AssertionError(failure + (f": {details()}" if details is not None else ""))


def pids_naming(text: str) -> list:
    """Pids of processes whose command line holds ``text`` (Linux /proc): a run's
    train.py and its copies, found by their folder."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def start_logged(command: list, stderr_path, env=None, cwd=None) -> subprocess.Popen:
    """Starts ``command`` with its stderr in the file ``stderr_path`` (for ``wait_for`` to
    read while it runs) and its stdout in a pipe (text)."""
    with open(stderr_path, "w") as stderr:
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=cwd, env=env
        )


def run_train_py(*args: str, timeout: float = 300, cwd=ROOT, **options):
    """``train.py`` with ``args``, run to its end as a user runs it; its output captured.

    Args:
        timeout: seconds.
        cwd: the folder it runs in (the checkout; a user's project for --plugins).
        options: more ``subprocess.run`` arguments (``env``, ``preexec_fn``).
    """
    command = [sys.executable, os.path.join(ROOT, "train.py"), *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=cwd, **options
    )


def idle_for_a_second(pid) -> bool:
    """Whether process ``pid`` used (almost) no CPU time over the next second."""

    def cpu_ticks():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().split(") ")[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks

    before = cpu_ticks()
    time.sleep(1.0)
    return cpu_ticks() - before <= os.sysconf("SC_CLK_TCK") // 50  # 20 ms
