"""The one atomic writer of run files, the one reader of JSON-object files, the one folder
lock, the one way to set a file aside, the one spelling of a checkpoint's name.

Every file a run writes (hparams.json, the checkpoint index, snapshot files,
summaries, curves, videos) is written under a temporary name in its own
folder and renamed into place, so a reader or a resumed run sees the old file
or the new one, never half of one. No TensorFlow here: the snapshot, the
analysis and train.py's early checks use it too.
"""

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from typing import Any, Callable, Dict, List, Optional


def write_atomically(path: str, write: Callable[[str], None]) -> None:
    """Has ``write(tmp_path)`` write the whole file, then renames it to ``path``.

    The temporary name keeps the extension (encoders infer the format from it)
    and is created by ``write`` with ordinary ``open``, so the file gets the
    mode the umask gives (0644 usually; ``mkstemp``'s 0600 would hide run
    files from other users). The data reach the disk before the rename, and the rename after it.

    Args:
        path: the file to (re)place; its folder must exist.
        write: writes the complete file to the path it is given.
    """
    directory, base = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(base)
    tmp = os.path.join(directory, f".{stem}.{secrets.token_hex(6)}.tmp{ext}")  # ATOMIC_TEMP
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fsync_dir(directory)  # the rename itself reaches the disk only with its folder


# The temporary name ``write_atomically`` gives: ``.<stem>.<12 hex digits>.tmp<ext>``. A
# kill between its write and its rename leaves one; the next run of the folder removes it.
ATOMIC_TEMP = re.compile(r"\..+\.[0-9a-f]{12}\.tmp(\.[^.]*)?")


def fsync_dir(directory: str) -> None:
    """Makes renames inside ``directory`` survive a power cut, where the OS allows it.

    Args:
        directory: the folder whose entries changed.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on folders
    finally:
        os.close(fd)


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Writes ``data`` as the whole of ``path`` (see ``write_atomically``)."""

    def write(tmp: str) -> None:
        with open(tmp, "xb") as f:
            f.write(data)

    write_atomically(path, write)


def write_text_atomic(path: str, text: str) -> None:
    """Writes ``text`` as UTF-8, the whole of ``path`` (see ``write_atomically``).

    Undecodable characters carried in from the command line (surrogate
    escapes) are written back as the bytes they came from.
    """
    write_bytes_atomic(path, text.encode("utf-8", errors="surrogateescape"))


# tf.train.CheckpointManager names checkpoint N "ckpt-N"; policies/ and best/ name their
# folders after it, so a step is spelled and read back the same way everywhere.
CHECKPOINT_NAME_PREFIX = "ckpt-"


def checkpoint_name(step: int) -> str:
    """The name of checkpoint ``step``: ``ckpt-384`` for 384."""
    return f"{CHECKPOINT_NAME_PREFIX}{step}"


def named_step(name: str) -> Optional[int]:
    """The step a ``ckpt-<N>`` name or path's last part is named after (384 for
    ``.../checkpoints/ckpt-384``); None for any other name."""
    base = os.path.basename(name)
    digits = base[len(CHECKPOINT_NAME_PREFIX) :]
    if base.startswith(CHECKPOINT_NAME_PREFIX) and digits.isdigit() and digits.isascii():
        return int(digits)
    return None


def named_steps(folder: str) -> List[int]:
    """The steps of the ``ckpt-<N>`` entries of ``folder``, oldest first ([] for no folder)."""
    if not os.path.isdir(folder):
        return []
    return sorted(s for s in map(named_step, os.listdir(folder)) if s is not None)


# The run folder, set by Experiment before it makes envs: envs that play against the run's
# own policy artefacts (self-play, rl/games/selfplay.py) find them there, and MuJoCo's
# log goes there (rl/envs/mujoco_log.py). Worker processes inherit it.
RUN_DIR_VARIABLE = "RL_RUN_DIR"

# JSON from outside (a request, a flag, a file) nested deeper than this is refused: rl's
# own records nest a few levels, and Python's parser raises RecursionError near 1000.
MAX_JSON_DEPTH = 32


class JSONNestingError(ValueError):
    """JSON nested deeper than ``MAX_JSON_DEPTH``; ``str()`` says so."""


def loads_json(text: str) -> Any:
    """``json.loads`` for text from outside: JSON nested deeper than ``MAX_JSON_DEPTH`` is
    a ValueError (``JSONNestingError``), as malformed JSON is, not a RecursionError.

    Raises:
        ValueError: the text is not JSON.
        JSONNestingError: it nests deeper than ``MAX_JSON_DEPTH``.
    """
    too_deep = JSONNestingError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    level, depth = [value], 0
    while True:  # one level of containers at a time: no recursion of our own
        containers = [item for item in level if isinstance(item, (list, dict))]
        if not containers:
            return value
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise too_deep
        level = [
            item
            for container in containers
            for item in (container.values() if isinstance(container, dict) else container)
        ]


def read_json_object(path: str) -> Dict[str, Any]:
    """The JSON object a file holds (hparams.json, a snapshot file, a manifest).

    Callers catch ``ValueError`` and add what the user can do about it.

    Raises:
        OSError: the file cannot be opened (``FileNotFoundError`` if it is missing).
        ValueError: naming the file, if it is not UTF-8 JSON or holds another JSON type.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        value = loads_json(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text; it must hold a JSON object") from None
    except ValueError as e:
        raise ValueError(f"{path} is not JSON ({e}); it must hold a JSON object") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds {json_kind(value)}; it must hold a JSON object")
    return value


def json_kind(value: Any) -> str:
    """What JSON calls the type of a parsed value ("null", "an array", ...)."""
    kinds = {type(None): "null", bool: "a boolean", int: "a number", float: "a number"}
    kinds.update({str: "a string", list: "an array", dict: "an object"})
    return kinds.get(type(value), type(value).__name__)


def lock_exclusively(path: str, wait: bool = False) -> Optional[int]:
    """Opens (creating) ``path`` and takes its exclusive lock, by default without waiting.

    The lock is the kernel's (flock): it goes when the descriptor is closed or the
    process ends, even by kill -9, so a lock file left behind never blocks anyone.
    Nothing is written into the file: taking the lock changes no file's bytes.

    Args:
        path: the lock file.
        wait: wait until another process frees the lock, instead of returning None.

    Returns:
        The descriptor that holds the lock (close it to free the lock), or None when
        another process holds it and ``wait`` is False.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def lock_holder(path: str) -> Optional[str]:
    """The pid of the process holding ``path``'s lock ("?" where the OS does not say);
    None when nobody holds it or there is no such file. Writes nothing."""
    if not os.path.exists(path):
        return None
    fd = os.open(path, os.O_RDONLY)  # flock needs no write access
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _flock_pid(os.fstat(fd)) or "?"
    finally:
        os.close(fd)  # releases the probe's lock, if it got one
    return None


def _flock_pid(stat: os.stat_result) -> Optional[str]:
    """The pid Linux's /proc/locks gives for a flock on this file, from a line such as
    ``1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF`` (device in hex, inode);
    None elsewhere or when no line names the file."""
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for fields in (line.split() for line in lines):
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device:
            return fields[4]
    return None


def set_aside(path: str) -> Optional[str]:
    """Renames ``path`` to ``<stem>.before-<unix time>[-<n>]<ext>`` beside it, so a file
    about to be replaced by a different one is kept.

    Returns:
        The new name, or None when ``path`` does not exist.
    """
    if not os.path.exists(path):
        return None
    stem, ext = os.path.splitext(path)
    stamp = f"{stem}.before-{int(time.time())}"
    kept, n = f"{stamp}{ext}", 1
    while os.path.exists(kept):
        n += 1
        kept = f"{stamp}-{n}{ext}"
    os.replace(path, kept)
    return kept
