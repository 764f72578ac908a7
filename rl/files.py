"""The one atomic writer of run files.

Every file a run writes (hparams.json, the checkpoint index, snapshot files,
summaries, curves, videos) is written under a temporary name in its own
folder and renamed into place, so a reader or a resumed run sees the old file
or the new one, never half of one. No TensorFlow here: the snapshot, the
analysis and train.py's early checks use it too.
"""

import contextlib
import os
import secrets
from typing import Callable


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
    tmp = os.path.join(directory, f".{stem}.{secrets.token_hex(6)}.tmp{ext}")
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
