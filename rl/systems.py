"""--sys targets: where a run executes.

A system prepares the devices before anything is built (``setup``), owns the
``tf.distribute`` strategy scope in which the agent's variables are built
(``scope``), says over how many replicas an update is spread
(``replica_count``), and starts the actor processes that feed the learner
with --num_workers (``actor_launcher``). ``local`` runs in this process on a visible GPU if there
is one and the CPU otherwise, with TensorFlow's default strategy; ``mirrored``
spreads each update over several devices (``tf.distribute.MirroredStrategy``:
the visible GPUs, or N logical CPU devices with ``--cpu_replicas N``);
``tpu`` over a Cloud TPU's cores (``TPUStrategy``, ``--tpu NAME``); ``ray``
runs the learner here and its actor processes as Ray actors. Learners split
each batch over the replicas through ``Learner.minimize``.

Naming a system loads no TensorFlow: only its methods do.
"""

import os
from typing import Any, ContextManager, Dict, Optional

from rl import registry
from rl._tf import tf  # a stand-in: naming a --sys target loads no TensorFlow
from rl.errors import SystemUnavailableError, error_line
from rl.network import unreachable_reason
from rl.workers import pool, ray_actors


class System:
    """What every --sys target provides; ``LocalSystem`` is the reference."""

    name = "system"

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        """Args:
        options: target-specific settings from flags (``ray_address``, ...).
        """
        self.options = dict(options or {})

    @classmethod
    def check_options(cls, options: Dict[str, Any]) -> None:
        """Refuses ``options`` this target cannot run with, where seeing it needs no
        TensorFlow: train.py calls it before TensorFlow loads (and before the run's one
        System is made). Nothing by default.

        Raises:
            SystemUnavailableError: an option the target needs is missing.
        """

    def setup(self) -> Dict[str, str]:
        """Configures devices before anything is built; returns a description for logs."""
        raise NotImplementedError

    def scope(self) -> ContextManager[Any]:
        """The context in which the agent's variables are built (a strategy's scope)."""
        raise NotImplementedError

    def close(self) -> None:
        """Releases what ``setup`` took (a local Ray it started). Nothing by default."""

    @property
    def replica_count(self) -> int:
        """How many copies of the model an update runs on at once."""
        raise NotImplementedError

    def workers_output(self, log_dir: str) -> str:
        """Where a user reads the actors' output, for train.py's last line when they fail.

        Args:
            log_dir: the folder the run gave its launcher (``actor_launcher``).
        """
        return log_dir

    def actor_launcher(self, count: int):
        """The one way a run's actor processes (--num_workers) start: a launcher that
        starts ``count`` of them now, for the run's pool (rl/workers/pool.py) to spawn
        its workers from, for as long as the run lasts (the run closes it).

        train.py calls this before it imports TensorFlow, so that the actors' start-up
        overlaps that import; a ``Run`` made without a launcher calls it as it is built,
        before ``setup``.

        Args:
            count: how many actors (the run's ``CheckedRun.num_workers``).

        Returns:
            An object with ``spawn(spec) -> (process, Link)`` (rl/workers/link.py),
            ``prepare(count)``, which may start the hosts of ``count`` workers at once
            before their ``spawn`` calls, ``log_dir``, where workers write their output
            (None: this process's stderr), and ``close()``, which stops what it
            started and no worker took.

        Raises:
            SystemUnavailableError: the system cannot be reached (Ray's address).
        """
        raise NotImplementedError


@registry.systems.register("local")
class LocalSystem(System):
    """This process: the first visible GPU, else the CPU; TensorFlow's default strategy."""

    name = "local"

    def setup(self) -> Dict[str, str]:
        """Configures devices and returns a description for logs."""
        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            # Share the GPU with other processes instead of claiming all memory.
            tf.config.experimental.set_memory_growth(gpu, True)
        device = "GPU:0" if gpus else "CPU:0"
        return {"sys": "local", "device": device, "gpus": str(len(gpus))}

    def scope(self) -> ContextManager[Any]:
        """The default strategy's scope: variables are placed as without any strategy."""
        return tf.distribute.get_strategy().scope()

    @property
    def replica_count(self) -> int:
        return 1

    def actor_launcher(self, count: int):
        """Actor processes on this machine, joined to the learner by socket pairs: the
        first ``count`` start now, the ones that replace them as they are spawned."""
        launcher = pool.ProcessLauncher(None)
        launcher.start_early(count)
        return launcher


@registry.systems.register("ray")
class RaySystem(LocalSystem):
    """Actor processes as Ray actors, anywhere on a Ray cluster; the learner runs here.

    ``--ray_address`` (or RAY_ADDRESS) attaches to a running cluster; without
    one a local Ray starts for the run and stops with it. Only Ray core is used.
    """

    name = "ray"

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        """Args:
        options: ``ray_address`` (None: RAY_ADDRESS, else a local Ray).
        """
        super().__init__(options)
        self.address = self.options.get("ray_address") or os.environ.get("RAY_ADDRESS")

    def setup(self) -> Dict[str, str]:
        """Connects to Ray (or starts it here), then prepares the learner's device."""
        description = super().setup()
        # Connected already if the run's actors started (``actor_launcher``).
        description.update(sys="ray", ray=ray_actors.connect(self.address, local_ray_cpus(0)))
        return description

    def close(self) -> None:
        super().close()
        ray_actors.disconnect()

    def workers_output(self, log_dir: str) -> str:
        del log_dir  # Ray keeps each actor's output in its own session logs
        return (
            "Ray's worker logs (session_latest/logs/worker-*.err in Ray's temp folder, "
            "/tmp/ray unless set, on the node that ran each actor)"
        )

    def actor_launcher(self, count: int):
        """Connects to Ray (or starts it, with a CPU for each of ``count`` actors) and
        starts the actors: their start-up (a Ray worker importing Ray and rl, seconds
        each) overlaps what the learner does next."""
        ray_actors.connect(self.address, local_ray_cpus(count))
        # Ray actors running the actor-process code, connected back to this learner over TCP.
        launcher = ray_actors.RayLauncher(None)
        launcher.prepare(count)
        return launcher


def local_ray_cpus(num_workers: int) -> int:
    """CPUs a local Ray offers: one per worker (and one for the learner) even on a
    smaller machine.

    Each worker asks Ray for one, and local actor processes share the cores anyway.
    """
    return max(os.cpu_count() or 1, num_workers + 1)


@registry.systems.register("mirrored")
class MirroredSystem(LocalSystem):
    """Each update split over several devices of this machine (MirroredStrategy).

    The replicas are the visible GPUs, or, with ``cpu_replicas`` N, N logical
    CPU devices: the same code path on any machine, which is how it is tested.
    """

    name = "mirrored"

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        self.strategy = None

    def setup(self) -> Dict[str, str]:
        cpu_replicas = int(self.options.get("cpu_replicas") or 0)
        if cpu_replicas:
            cpu = tf.config.list_physical_devices("CPU")[0]
            try:
                tf.config.set_logical_device_configuration(
                    cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_replicas
                )
            except RuntimeError as e:  # TensorFlow's devices were set up before
                raise SystemUnavailableError(f"--cpu_replicas cannot split the CPU now: {e}")
            devices = [f"/cpu:{i}" for i in range(cpu_replicas)]
        else:
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                raise SystemUnavailableError(
                    "--sys mirrored found no GPU; use --sys local, or add --cpu_replicas N "
                    "to split the CPU into N devices"
                )
            for gpu in gpus:
                tf.config.experimental.set_memory_growth(gpu, True)
            devices = [f"/gpu:{i}" for i in range(len(gpus))]
        self.strategy = tf.distribute.MirroredStrategy(devices)
        return {"sys": "mirrored", "devices": ",".join(devices)}

    def scope(self) -> ContextManager[Any]:
        return self.strategy.scope()

    @property
    def replica_count(self) -> int:
        return self.strategy.num_replicas_in_sync


@registry.systems.register("tpu")
class TPUSystem(MirroredSystem):
    """Each update split over a Cloud TPU's cores (TPUStrategy); actors run on the host.

    ``tpu`` names the TPU (a name, a grpc:// address, or "local" on a TPU VM).
    Updates must compile with XLA: static shapes, no host callbacks in the step.
    """

    name = "tpu"

    @classmethod
    def check_options(cls, options: Dict[str, Any]) -> None:
        if not options.get("tpu"):
            raise SystemUnavailableError(
                "--sys tpu needs --tpu: the TPU's name, its grpc:// address, or local on a TPU VM"
            )

    def setup(self) -> Dict[str, str]:
        self.check_options(self.options)
        tpu = self.options["tpu"]
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
            for job in resolver.cluster_spec().jobs:  # none on a TPU VM ("local")
                for address in resolver.cluster_spec().job_tasks(job):
                    reason = unreachable_reason(address, TPU_CONNECT_TIMEOUT_SECONDS)
                    if reason:
                        raise ConnectionError(f"nothing answers at {address} ({reason})")
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            self.strategy = tf.distribute.TPUStrategy(resolver)
        except Exception as e:  # the resolver's and runtime's errors have no common base
            raise SystemUnavailableError(
                f"--sys tpu cannot reach TPU {tpu!r}: {error_line(e)}"
            ) from None
        return {"sys": "tpu", "tpu": tpu, "replicas": str(self.replica_count)}


# How long a TPU worker's address may take to accept a connection. TensorFlow's own
# connect waits without end for an address where nothing listens.
TPU_CONNECT_TIMEOUT_SECONDS = 10.0
