"""--sys ray: actor processes as Ray actors, running the same code as local ones.

A Ray actor connects back to the learner over TCP (Python's
multiprocessing.connection, with a random key per run), receives its
WorkerSpec and plays rounds exactly as ``python -m rl.workers.process``
does; Ray only places and starts it. Ray core only: no RLlib.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import secrets
import socket
import struct
import subprocess
import sys
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from typing import Any, Deque, Dict, Optional

from rl.errors import SystemUnavailableError, error_line
from rl.network import unreachable_reason
from rl.processes import RL_ROOT, captured_stderr
from rl.workers import process
from rl.workers.link import Link
from rl.workers.messages import RL_VARIABLE_PREFIX, ProcessSetup, WorkerSpec
from rl.workers.pool import WorkerFailure, python_path_with_rl

CONNECT_TIMEOUT_SECONDS = 60.0
# A connecting actor proves the key and names itself at once; a peer silent this long
# (a port scanner, a stranger) is dropped, so it cannot hold up the actors behind it.
HANDSHAKE_SECONDS = 10.0
_started_here = False  # this process started a local Ray (and so stops it)


def connect(address: Optional[str], local_cpus: int) -> str:
    """Attaches to the Ray cluster at ``address``, or starts a local Ray; returns a description.

    Args:
        address: host:port, "auto", or None for a local Ray.
        local_cpus: CPUs a local Ray offers its actors.

    Raises:
        SystemUnavailableError: Ray is not installed or the address cannot be reached.
    """
    global _started_here
    try:
        import ray
    except ImportError as e:
        raise SystemUnavailableError(
            "--sys ray needs Ray: pip install 'rl[ray]' (Ray core, ray[default])"
        ) from e
    if ray.is_initialized():
        return ray.get_runtime_context().gcs_address
    runtime_env = {"env_vars": {"PYTHONPATH": RL_ROOT, "RL_TF_LOGS": ""}}
    try:
        if address:
            if address != "auto" and unreachable_reason(address, timeout=5) is not None:
                raise ConnectionError(f"nothing listens at {address}")
            # Ray's core logs each failed attempt to stderr (twenty lines over 20 s when
            # the cluster refuses this client's token): held back, shown if Ray connects.
            try:
                with captured_stderr() as ray_log:
                    ray.init(
                        address=address,
                        runtime_env=runtime_env,
                        log_to_driver=False,
                        # A cluster's warnings may matter; its notes do not.
                        logging_level=logging.WARNING,
                    )
            except (ConnectionError, ray.exceptions.AuthenticationError) as e:
                raise ConnectionError(_token_refusal(ray_log.text, e) or str(e)) from e
            sys.stderr.write(ray_log.text)
        else:
            # A local Ray's processes inherit this environment as they start, so its
            # workers need no runtime_env, which would make Ray start each actor
            # through its runtime-env agent: eight took 6.4 s to start here, not 2.8.
            # rl's folder goes first; the user's path (plugins, own envs) stays after it.
            with _environ({**runtime_env["env_vars"], "PYTHONPATH": python_path_with_rl()}):
                ray.init(
                    # "local": a Ray of its own even where `ray start` left a cluster's
                    # address in Ray's temp folder (ray_current_cluster), which Ray
                    # would otherwise try to join, and refuse num_cpus for.
                    address="local",
                    num_cpus=local_cpus,
                    include_dashboard=False,
                    log_to_driver=False,
                    # Its notes on a Ray that lives and dies with this run (token
                    # authentication on, "Started a local Ray instance") are not rl's output.
                    logging_level=logging.ERROR,
                )
            _started_here = True
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise SystemUnavailableError(f"--sys ray cannot reach {where}: {e}") from e
    return ray.get_runtime_context().gcs_address


RAY_AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"
RAY_TOKEN_PLACES = "~/.ray/auth_token, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH"


def _token_refusal(ray_log: str, error: Exception) -> Optional[str]:
    """What to do when a Ray cluster refused this client's authentication, else None.

    Args:
        ray_log: what Ray's core wrote to stderr while connecting.
        error: what ``ray.init`` raised.
    """
    import ray

    where = (
        "the cluster's token (`ray get-auth-token` on its head node) in ~/.ray/auth_token "
        "or RAY_AUTH_TOKEN"
    )
    mode = os.environ.get(RAY_AUTH_MODE_VARIABLE)
    if "InvalidAuthToken" in ray_log or "Unauthenticated" in ray_log:
        if mode is not None and mode.lower() == "token":
            return f"it refused this machine's token ({RAY_TOKEN_PLACES}); put {where}"
        # Ray offers a token to an address it is given only when told to (its rule: a
        # token kept here, perhaps a local Ray's, is not sent to any host named).
        return f"it uses token authentication; set {RAY_AUTH_MODE_VARIABLE}=token and put {where}"
    if isinstance(error, ray.exceptions.AuthenticationError):  # token mode, and no token
        return f"{RAY_AUTH_MODE_VARIABLE}=token here, and this machine has no token; put {where}"
    return None


@contextlib.contextmanager
def _environ(variables: Dict[str, str]):
    """Sets environment variables for the duration of the block, then restores them."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def rl_variables() -> Dict[str, str]:
    """This process's ``RL_*`` environment variables."""
    return {
        name: value for name, value in os.environ.items() if name.startswith(RL_VARIABLE_PREFIX)
    }


def disconnect() -> None:
    """Stops the local Ray this process started (an attached cluster keeps running).

    The run's system closes the actors it started early and no worker took, first.
    """
    global _started_here
    if _started_here:
        import ray

        ray.shutdown()
        _started_here = False


def run_actor(address, authkey: bytes, token: str) -> int:
    """What a Ray actor runs: connect to the learner, say which actor it is (``token``),
    then act for it as an actor process does."""
    conn = Client(tuple(address), authkey=authkey)
    conn.send(token)
    return process.serve(conn)


class RayWorker:
    """A Ray actor seen as a process by the pool: ``poll``, ``wait``, ``kill``, ``pid``."""

    def __init__(self, actor, ref, pid: int):
        self.actor, self.ref, self.pid = actor, ref, pid
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        import ray

        if self.returncode is None:
            ready, _ = ray.wait([self.ref], timeout=0)
            if ready:
                try:
                    ray.get(self.ref)
                    self.returncode = 0
                except Exception:  # the actor raised or died: Ray says which
                    self.returncode = 1
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        import ray

        ready, _ = ray.wait([self.ref], timeout=timeout)
        if not ready:
            raise subprocess.TimeoutExpired("ray actor", timeout)
        return self.poll()

    def kill(self) -> None:
        import ray

        ray.kill(self.actor, no_restart=True)
        if self.returncode is None:
            self.returncode = -9


class RayLauncher:
    """Starts Ray actors that connect back to a listener of this learner.

    An actor takes seconds to start (a Ray worker process importing Ray and rl),
    so ``prepare`` starts all of a pool's actors at once; one after another,
    eight took 15 s here. Each connects back when it is up and names itself
    with a token, since connections arrive in any order.
    """

    def __init__(self, log_dir: Optional[str]):
        del log_dir  # Ray keeps each actor's output in its own session logs
        import ray

        self.authkey = secrets.token_bytes(32)
        host = ray.util.get_node_ip_address()
        self.listener = socket.create_server((host, 0), backlog=64)
        self.address = self.listener.getsockname()[:2]
        self.remote_class = ray.remote(num_cpus=1, max_restarts=0)(_ActorProcess)
        self.pending: Deque[_StartingActor] = collections.deque()
        self.connections: Dict[str, Connection] = {}
        self.arrived = threading.Condition()
        self.closed = False
        self.acceptor = threading.Thread(target=self._accept_forever, daemon=True)
        self.acceptor.start()

    def _accept_forever(self) -> None:
        """Admits each connection in a thread of its own; only ``close`` ends the loop."""
        while not self.closed:
            try:
                peer, _ = self.listener.accept()
            except OSError:
                continue  # after close(), whose shutdown wakes accept(): the loop ends
            threading.Thread(target=self._admit, args=(peer,), daemon=True).start()

    def _admit(self, peer: socket.socket) -> None:
        """Files an actor's connection under the token it sends first.

        The key is checked as ``multiprocessing.connection.Listener`` checks it, but on
        a socket whose receives and sends time out meanwhile (Listener's would wait for a
        silent peer for ever), and beside the others (a slow peer holds up none of them).
        A connection that fails (a stranger without the key, a peer that hangs up or
        says nothing for ``HANDSHAKE_SECONDS``) is dropped.
        """
        _socket_timeouts(peer, HANDSHAKE_SECONDS)
        conn = Connection(peer.detach())
        try:
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            token = conn.recv()
        except (AuthenticationError, EOFError, OSError):
            token = None
        with self.arrived:
            if not isinstance(token, str) or self.closed:
                conn.close()
                return
            with socket.socket(fileno=os.dup(conn.fileno())) as duplicate:
                _socket_timeouts(duplicate, 0.0)  # from now on the Link's threads wait
            self.connections[token] = conn
            self.arrived.notify_all()

    def _start_actor(self) -> _StartingActor:
        actor = self.remote_class.remote()
        token = secrets.token_hex(8)
        # Asked before run: an actor runs one call at a time.
        pid = actor.pid.remote()
        ref = actor.run.remote(self.address, self.authkey, token)
        return _StartingActor(actor, pid, ref, token)

    def prepare(self, count: int) -> None:
        """Has ``count`` actors started at once (those started early count); the next
        ``spawn`` calls take them in turn."""
        missing = max(0, count - len(self.pending))
        self.pending.extend(self._start_actor() for _ in range(missing))

    def spawn(self, spec: WorkerSpec):
        """Gives ``spec`` to a started actor (or starts one); returns (RayWorker, its Link).

        Raises:
            WorkerFailure: the actor did not start, died, or did not connect back in time.
        """
        import ray

        # The learner's death reaches a Ray actor as a closed connection (and Ray
        # ends a job's actors with its driver), not as a change of parent process.
        spec = dataclasses.replace(spec, parent_pid=0)
        starting = self.pending.popleft() if self.pending else self._start_actor()
        try:
            pid = ray.get(starting.pid, timeout=CONNECT_TIMEOUT_SECONDS)
        except ray.exceptions.GetTimeoutError:
            ray.kill(starting.actor)
            raise WorkerFailure(
                f"Ray could not start worker {spec.index} within "
                f"{CONNECT_TIMEOUT_SECONDS:.0f} s: the cluster may be short of CPUs "
                "(each worker asks for one)"
            ) from None
        except ray.exceptions.RayActorError as e:  # it died before it could say its pid
            raise WorkerFailure(
                f"Ray worker {spec.index} died as it started: {error_line(e, typed=True)}"
            ) from None
        link = Link(self._connection_of(starting, spec.index), f"worker {spec.index}")
        # rl's variables as the learner has them now (RL_RUN_DIR for self-play,
        # RL_PLUGINS, an env server's token): a cluster's actors started without them,
        # and a local Ray's took this process's environment of when Ray started.
        link.send(ProcessSetup(rl_variables(), None, rl_variables_only=True))
        link.send(spec)
        return RayWorker(starting.actor, starting.ref, pid), link

    def _connection_of(self, starting: _StartingActor, index: int) -> Connection:
        """The connection the actor made back, waiting for it while the actor still runs."""
        import ray

        deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS
        while True:
            with self.arrived:
                # In short waits: an actor that fails before connecting says why at once.
                self.arrived.wait_for(lambda: starting.token in self.connections, 1.0)
                conn = self.connections.pop(starting.token, None)
            if conn is not None:
                return conn
            ended, _ = ray.wait([starting.ref], timeout=0)
            if ended:
                try:
                    ray.get(starting.ref)
                    why = "its run ended"
                except Exception as e:  # the actor raised or died: Ray says which
                    why = error_line(e, typed=True)
                raise WorkerFailure(f"Ray worker {index} failed before connecting back ({why})")
            if time.monotonic() > deadline:
                ray.kill(starting.actor)
                raise WorkerFailure(
                    f"Ray actor for worker {index} did not connect back within "
                    f"{CONNECT_TIMEOUT_SECONDS:.0f} s (is the cluster short of CPUs?)"
                )

    def close(self) -> None:
        """Stops the actors prepared and never used, drops unclaimed connections, stops listening."""
        import ray

        if self.closed:
            return
        self.closed = True
        while self.pending:
            ray.kill(self.pending.popleft().actor)
        try:  # wakes the acceptor from accept(); it then sees closed
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.arrived:
            for conn in self.connections.values():
                conn.close()
            self.connections.clear()


def _socket_timeouts(sock: socket.socket, seconds: float) -> None:
    """Sets how long a receive or a send on ``sock`` may wait (0: for ever), at the
    socket's level, where ``Connection``'s reads and writes of its descriptor see it."""
    whole = int(seconds)
    value = struct.pack("ll", whole, int((seconds - whole) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


@dataclasses.dataclass(frozen=True)
class _StartingActor:
    """A Ray actor asked for its pid and to run, not yet given a spec."""

    actor: Any
    pid: Any  # ObjectRef of its process id
    ref: Any  # ObjectRef of its run(): ready when it ends
    token: str


class _ActorProcess:
    """The Ray actor class (made remote in RayLauncher, so importing this needs no Ray)."""

    def pid(self) -> int:
        return os.getpid()

    def run(self, address, authkey: bytes, token: str) -> int:
        return run_actor(address, authkey, token)
