"""A worker's connection as the learner uses it: sends and receives that never block it.

A worker that stops reading (SIGSTOP, an env step that hangs) lets its socket's buffer
fill, and ``Connection.send`` of a message bigger than the space left then blocks until
the worker reads again, perhaps never; a worker stopped half-way through sending a chunk
blocks ``Connection.recv`` the same way. Waiting until the socket is writable does not
help (it says some bytes fit, not the whole message), and non-blocking writes would need
a framing of our own for partial messages. So each link has a writer thread, which sends
what the learner queues, in order, and a reader thread, which hands each message received
to the learner's inbox: the learner only puts to and takes from queues, and its hang
timeout always runs. ``close`` shuts the socket down, which wakes both threads from a
blocked send or receive even while another process still holds the socket's other end.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
from multiprocessing.connection import Connection
from typing import Any, Callable, Optional

# What the reader hands on last: the worker's end closed, or the link was closed.
CLOSED = "closed"
_END = object()  # tells the writer thread to stop
# What the writer has still queued at ``close`` (a STOP, say) may take this long to go.
DRAIN_SECONDS = 1.0
# Both threads end at once after the shutdown; this bounds the wait if one does not.
THREAD_END_SECONDS = 5.0


class Link:
    """One worker's connection, with a writer thread and (once ``listen`` is called) a
    reader thread."""

    def __init__(self, conn: Connection, name: str):
        """Args:
        conn: the connection to the worker (a socket: a local pair or TCP to a Ray actor).
        name: names the threads ("worker 0").
        """
        self.conn = conn
        self.name = name
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write, name=f"{name} writer", daemon=True)
        self._writer.start()
        self._reader: Optional[threading.Thread] = None

    def send(self, message: Any) -> None:
        """Queues ``message`` for the worker; returns at once."""
        self._outbox.put(message)

    def listen(self, deliver: Callable[[Any], None]) -> None:
        """Hands every message from the worker to ``deliver`` (called on the reader
        thread), and ``CLOSED`` last, when the connection ends."""
        self._reader = threading.Thread(
            target=self._read, args=(deliver,), name=f"{self.name} reader", daemon=True
        )
        self._reader.start()

    def _write(self) -> None:
        while True:
            message = self._outbox.get()
            if message is _END:
                return
            try:
                self.conn.send(message)
            except (OSError, ValueError):
                return  # the worker is gone, or the link closed: the reader says so

    def _read(self, deliver: Callable[[Any], None]) -> None:
        try:
            while True:
                deliver(self.conn.recv())
        except Exception:  # end of file, a reset, a garbled message: each ends the link
            pass
        finally:
            deliver(CLOSED)

    def close(self) -> None:
        """Sends what is queued (for ``DRAIN_SECONDS`` at most), ends both threads, a
        blocked send or receive included, then closes the connection."""
        self._outbox.put(_END)
        self._writer.join(timeout=DRAIN_SECONDS)
        try:
            # On a duplicate of the descriptor: shutdown acts on the socket itself.
            with socket.socket(fileno=os.dup(self.conn.fileno())) as duplicate:
                duplicate.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the other end, or not a socket
        threads = [t for t in (self._writer, self._reader) if t is not None]
        for thread in threads:
            thread.join(timeout=THREAD_END_SECONDS)
        # A thread still in the connection would read a descriptor number that may be
        # reused: the descriptor is then left open rather than closed under it.
        if not any(thread.is_alive() for thread in threads):
            self.conn.close()
