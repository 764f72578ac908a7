"""The processes the benchmark starts (train.py, this script's peer and cost modes): their
commands, their wall time and peak memory, their results, and one-line failure."""

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, NoReturn, Tuple

from rl import command_line  # argparse only: no TensorFlow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "train.py")
# The entry point, which runs itself as a child for the peer and the per-call costs.
SCRIPT = os.path.join(ROOT, "scripts", "benchmark.py")
PROG = "benchmark.py"


def fail(message: str) -> NoReturn:
    """One line on stderr and exit code 2, as train.py's bad input (rl/command_line.py)."""
    command_line.fail(PROG, message)


class ChildFailed(RuntimeError):
    """A process this script started (train.py, a peer, the costs) exited with an error.

    Attributes:
      command: its program and arguments.
      code: its exit code.
      stderr: its standard error.
    """

    def __init__(self, command: List[str], code: int, stderr: str):
        super().__init__(f"{describe_command(command)} failed with exit code {code}")
        self.command, self.code, self.stderr = command, code, stderr


def describe_command(command: List[str]) -> str:
    """A child's command as a user would type it: not Python's path, and the script's name
    alone when it is this checkout's (a --baseline's train.py keeps its folder)."""
    script = command[1]
    mine = os.path.dirname(script) in (ROOT, os.path.join(ROOT, "scripts"))
    return " ".join([os.path.basename(script) if mine else script, *command[2:]])


def timed_run(command: List[str], cwd: str = ROOT) -> Tuple[float, str]:
    """Runs a command from ``cwd``; returns its whole-process wall time and stdout.

    Args:
      command: program and arguments.
      cwd: the folder it runs in (another checkout's train.py runs in that checkout).

    Raises:
      ChildFailed: if it exits with an error.
    """
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise ChildFailed(command, proc.returncode, proc.stderr)
    return wall, proc.stdout


def last_json_line(stdout: str) -> Dict[str, object]:
    """The JSON object on the last line of a program's output.

    Args:
      stdout: the program's standard output.
    """
    return json.loads(stdout.strip().splitlines()[-1])


def tree_rss_bytes(root: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc)."""
    parents: Dict[int, int] = {}
    rss: Dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
        rss[int(entry)] = pages * os.sysconf("SC_PAGE_SIZE")
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(rss.get(pid, 0) for pid in tree)


def run_with_peak_memory(command: List[str]) -> Tuple[float, str, int]:
    """Runs a command; returns wall time, stdout and the peak RSS of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_bytes(proc.pid))
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise ChildFailed(command, proc.returncode, stderr.decode(errors="replace"))
    return time.perf_counter() - start, stdout.decode(), peak


def train_command(*args: str, checkout: str = ROOT) -> List[str]:
    """The command that runs ``checkout``'s train.py with ``args`` under this Python.

    Args:
      args: train.py's flags.
      checkout: the rl checkout: this one, or a --baseline.
    """
    return [sys.executable, os.path.join(checkout, "train.py"), *args]


def benchmark_command(*args: str) -> List[str]:
    """The command that runs this benchmark (a hidden mode of it) as a child process.

    Args:
      args: its flags.
    """
    return [sys.executable, SCRIPT, *args]


def scratch_folder() -> tempfile.TemporaryDirectory:
    """A temporary folder for run folders nobody keeps, removed when its block ends."""
    return tempfile.TemporaryDirectory(prefix="rl-bench-")
