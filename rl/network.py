"""Whether a network address answers, in the lowest layer: --sys tpu (rl/systems.py) and
Ray's workers (rl/workers/ray_actors.py) both check a cluster's address before a library
that would wait on it without end."""

import socket
from typing import Optional


def unreachable_reason(address: str, timeout: float) -> Optional[str]:
    """Why nothing accepts a TCP connection at ``host:port`` (no host: this machine), or
    None if something does: a TPU worker's or a Ray cluster's address, checked before
    a library that would wait on it without end.

    Args:
        address: ``host:port``.
        timeout: seconds to wait for the connection.
    """
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return None
    except (OSError, ValueError) as e:
        return getattr(e, "strerror", None) or str(e) or type(e).__name__
