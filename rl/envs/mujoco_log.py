"""MuJoCo's warnings: each said once on stderr, all of them logged in the run folder.

Left alone, MuJoCo appends every warning to ``MUJOCO_LOG.TXT`` in the current folder (a
run started in a checkout dirtied it) and prints it at each occurrence (a model's
deprecated attribute once per env copy: four times for one run). Once a MuJoCo env is
made, its warnings go to ``route_warnings``'s handler instead: the log is the run
folder's (``$RL_RUN_DIR``, which the experiment and its worker processes set), or a
temporary folder's where there is no run (an env server, ``rl.envs.check``).
"""

import os
import sys
import tempfile
import time
from typing import Optional, Set

from rl.files import RUN_DIR_VARIABLE

LOG_NAME = "MUJOCO_LOG.TXT"  # MuJoCo's own name for its log
_said: Set[str] = set()
_temporary_folder: Optional[str] = None
_routed = False


def route_warnings() -> None:
    """Hands MuJoCo's warnings to this module (once per process; imports MuJoCo)."""
    global _routed
    if _routed:
        return
    import mujoco  # late: the mujoco extra, loaded only for its envs

    mujoco.set_mju_user_warning(_warn)
    _routed = True


def log_path() -> str:
    """Where MuJoCo's warnings are logged now: the run folder's log, else a temporary one."""
    global _temporary_folder
    run_dir = os.environ.get(RUN_DIR_VARIABLE)
    if run_dir:
        os.makedirs(run_dir, exist_ok=True)  # the first envs are made before its first file
        return os.path.join(run_dir, LOG_NAME)
    if _temporary_folder is None:  # made at the first warning: no warning, no folder
        _temporary_folder = tempfile.mkdtemp(prefix="rl-mujoco-")
    return os.path.join(_temporary_folder, LOG_NAME)


def _warn(message: str) -> None:
    """MuJoCo's warning handler: log it as MuJoCo does (the time, then the warning), and
    say it once. It runs inside MuJoCo's C code, so it must not raise."""
    path = log_path()
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{time.ctime()}\nWARNING: {message}\n\n")
    except OSError as e:
        path = f"not written: {e}"
    text = " ".join(message.split())
    if text not in _said:
        _said.add(text)
        print(f"rl: warning: MuJoCo: {text} (its log: {path})", file=sys.stderr, flush=True)
