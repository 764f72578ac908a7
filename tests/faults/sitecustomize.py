"""A kill -9 at a chosen file event of one checkpoint save, for tests/test_kills.py.

On PYTHONPATH only in that test's train.py processes, where Python imports it at start-up.
It installs an audit hook (``sys.addaudithook``) that watches the file events under the
run folder ``RL_FAULT_DIR`` from the first of the save of checkpoint ``RL_FAULT_STEP``
(the logbook staging its records, ``.staged-<step>.tmp``), or of its policy artefact's
export alone (``policies/ckpt-<step>.partial``: a re-export), to the rename that completes
that artefact (``policies/ckpt-<step>.partial`` -> ``policies/ckpt-<step>``):

- with ``RL_FAULT_AT`` = n, the process kills itself (SIGKILL) just before the n-th of
  them (from 0) happens;
- without it, each is written as a line to the file ``RL_FAULT_LOG`` (a counting run).

TensorFlow's own writes (the checkpoint's files and index, the SavedModel's) happen in
C++, where audit hooks see nothing: the nearest events a kill can come at are the
Python ones before and after them.
"""

import os
import signal
import sys

# Audit events that write, with the index of their path argument (and of the target's).
WRITES = {
    "open": 0,
    "os.rename": 0,
    "os.replace": 0,
    "os.mkdir": 0,
    "os.remove": 0,
    "os.rmdir": 0,
    "os.truncate": 0,
    "shutil.rmtree": 0,
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def writes(event, args):
    """Whether an "open" event opens for writing (by mode or by flags); other events do."""
    if event != "open":
        return True
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return bool(isinstance(flags, int) and flags & WRITE_FLAGS)


def as_path(value):
    """An absolute path, or None for what is not a path (a file descriptor)."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return os.path.abspath(os.fsdecode(value))
    return None


def install(run_dir, step, kill_at, log_path):
    last = os.path.join(run_dir, "policies", f"ckpt-{step}.partial")
    starts = (os.path.join(run_dir, f".staged-{step}.tmp"), last)
    state = {"seen": 0, "on": False, "done": False}
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND) if log_path else None

    def hook(event, args):
        if event not in WRITES or state["done"]:
            return
        path = as_path(args[0]) if args else None
        if path is None or not (path == run_dir or path.startswith(run_dir + os.sep)):
            return
        if not state["on"]:
            if path not in starts:
                return
            state["on"] = True
        if not writes(event, args):
            return
        n = state["seen"]
        state["seen"] += 1
        if n == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if event in ("os.rename", "os.replace") and path == last:
            state["done"] = True
        if log is not None:
            target = as_path(args[1]) if event in ("os.rename", "os.replace") else None
            shown = os.path.relpath(path, run_dir)
            if target is not None:
                shown += " -> " + os.path.relpath(target, run_dir)
            os.write(log, f"{n} {event} {shown}\n".encode())

    sys.addaudithook(hook)


if os.environ.get("RL_FAULT_DIR"):
    install(
        os.path.abspath(os.environ["RL_FAULT_DIR"]),
        int(os.environ["RL_FAULT_STEP"]),
        int(os.environ.get("RL_FAULT_AT", "-1")),
        os.environ.get("RL_FAULT_LOG"),
    )
