"""rl/slots.py: the slot runner --copies and the search share (their own tests drive it
through train.py and a search: tests/test_run_modes.py, tests/test_search.py)."""

import os
import signal
import sys

import pytest
from polling import wait_for

from rl.slots import Child, Slots

pytestmark = pytest.mark.process


def test_a_job_that_ignores_sigterm_is_killed_once_the_grace_has_passed(tmp_path):
    ready = tmp_path / "ready"
    ignores_sigterm = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(120)\n"
    )
    slots = Slots(1, grace_seconds=0.5)
    commands = [[sys.executable, "-c", ignores_sigterm]]
    codes = []

    def check(child):
        if ready.exists():  # its handler is set: SIGTERM is ignored from here on
            slots.stop()
        return child.poll()

    def start_next():
        return Child(commands.pop(), dict(os.environ)) if commands else None

    assert slots.run(start_next, check, lambda child, code: codes.append(code)) is None
    assert codes == [-signal.SIGKILL]


def test_killing_a_child_in_its_own_session_kills_what_it_started(tmp_path):
    pid_file = tmp_path / "grandchild"
    starts_a_grandchild = (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(g.pid))\n"
        "time.sleep(120)\n"
    )
    child = Child([sys.executable, "-c", starts_a_grandchild], dict(os.environ), own_session=True)
    text = wait_for(lambda: pid_file.exists() and pid_file.read_text(), "the grandchild's pid")
    grandchild = int(text)
    child.kill()
    assert child.poll() == -signal.SIGKILL

    def gone():
        try:
            with open(f"/proc/{grandchild}/stat") as f:
                return f.read().split(")")[-1].split()[0] == "Z"  # a zombie until reaped
        except FileNotFoundError:
            return True

    wait_for(gone, "the grandchild's end", timeout=30)
