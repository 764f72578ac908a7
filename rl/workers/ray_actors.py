"""--sys ray: actor processes as Ray actors, running the same code as local ones.

A Ray actor connects back to the learner over TCP (Python's
multiprocessing.connection, with a random key per run), receives its
WorkerSpec and plays rounds exactly as ``python -m rl.workers.process``
does; Ray only places and starts it. Ray core only: no RLlib.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import threading
from multiprocessing.connection import Client, Listener
from typing import Optional

import rl
from rl.errors import SystemUnavailableError
from rl.workers import process
from rl.workers.messages import WorkerSpec
from rl.workers.pool import WorkerFailure

CONNECT_TIMEOUT_SECONDS = 60.0
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
    root = os.path.dirname(os.path.dirname(os.path.abspath(rl.__file__)))
    runtime_env = {"env_vars": {"PYTHONPATH": root, "RL_TF_LOGS": ""}}
    try:
        if address:
            host, _, port = address.rpartition(":")
            if address != "auto" and not _reachable(host, port):
                raise ConnectionError(f"nothing listens at {address}")
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
        else:
            ray.init(
                num_cpus=local_cpus,
                include_dashboard=False,
                runtime_env=runtime_env,
                log_to_driver=False,
            )
            _started_here = True
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise SystemUnavailableError(f"--sys ray cannot reach {where}: {e}") from e
    return ray.get_runtime_context().gcs_address


def disconnect() -> None:
    """Stops the local Ray this process started (an attached cluster keeps running)."""
    global _started_here
    if _started_here:
        import ray

        ray.shutdown()
        _started_here = False


def _reachable(host: str, port: str) -> bool:
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
            return True
    except (OSError, ValueError):
        return False


def run_actor(address, authkey: bytes) -> int:
    """What a Ray actor runs: connect to the learner, then play as an actor process does."""
    conn = Client(tuple(address), authkey=authkey)
    spec = conn.recv()
    try:
        process.play(spec, conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return 0
    except Exception as error:
        try:
            conn.send(process.ErrorReport(spec.index, process.one_line(error)))
        except OSError:
            pass
        raise
    return 0


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
        import subprocess

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
    """Starts Ray actors that connect back to a listener of this learner."""

    def __init__(self, log_dir: Optional[str]):
        del log_dir  # Ray keeps each actor's output in its own session logs
        import ray

        self.authkey = secrets.token_bytes(32)
        host = ray.util.get_node_ip_address()
        self.listener = Listener((host, 0), authkey=self.authkey)
        self.remote_class = ray.remote(num_cpus=1, max_restarts=0)(_ActorProcess)

    def spawn(self, spec: WorkerSpec):
        """Starts one Ray actor for ``spec``; returns (RayWorker, connection)."""
        import ray

        # The learner's death reaches a Ray actor as a closed connection (and Ray
        # ends a job's actors with its driver), not as a change of parent process.
        spec = dataclasses.replace(spec, parent_pid=0)
        actor = self.remote_class.remote()
        try:
            # Asked before run: an actor runs one call at a time.
            pid = ray.get(actor.pid.remote(), timeout=CONNECT_TIMEOUT_SECONDS)
        except ray.exceptions.GetTimeoutError:
            ray.kill(actor)
            raise WorkerFailure(
                f"Ray could not start worker {spec.index} within "
                f"{CONNECT_TIMEOUT_SECONDS:.0f} s: the cluster may be short of CPUs "
                "(each worker asks for one)"
            ) from None
        ref = actor.run.remote(self.listener.address, self.authkey)
        accepted = {}

        def accept():
            try:
                accepted["conn"] = self.listener.accept()
            except OSError as e:
                accepted["error"] = e

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        thread.join(CONNECT_TIMEOUT_SECONDS)
        if "conn" not in accepted:
            ray.kill(actor)
            raise WorkerFailure(
                f"Ray actor for worker {spec.index} did not connect back within "
                f"{CONNECT_TIMEOUT_SECONDS:.0f} s (is the cluster short of CPUs?)"
            )
        conn = accepted["conn"]
        conn.send(spec)
        return RayWorker(actor, ref, pid), conn


class _ActorProcess:
    """The Ray actor class (made remote in RayLauncher, so importing this needs no Ray)."""

    def pid(self) -> int:
        return os.getpid()

    def run(self, address, authkey: bytes) -> int:
        return run_actor(address, authkey)
