"""--sys targets: where a run executes.

A system prepares the devices before anything is built (``setup``), owns the
``tf.distribute`` strategy scope in which the agent's variables are built
(``scope``), says over how many replicas an update is spread
(``replica_count``), and starts the actors that feed the learner
(``launch_actors``). ``local`` runs in this process on a visible GPU if there
is one and the CPU otherwise, with TensorFlow's default strategy. Multi-device,
TPU and Ray targets are planned as further systems here.

Naming a system loads no TensorFlow: only its methods do.
"""

from typing import Any, Callable, ContextManager, Dict, List

from rl import registry


class System:
    """What every --sys target provides; ``LocalSystem`` is the reference."""

    name = "system"

    def setup(self) -> Dict[str, str]:
        """Configures devices before anything is built; returns a description for logs."""
        raise NotImplementedError

    def scope(self) -> ContextManager[Any]:
        """The context in which the agent's variables are built (a strategy's scope)."""
        raise NotImplementedError

    @property
    def replica_count(self) -> int:
        """How many copies of the model an update runs on at once."""
        raise NotImplementedError

    def launch_actors(self, num_workers: int, run_actor: Callable[[int], None]) -> List[Any]:
        """Starts the actors that step envs and send transitions to the learner.

        Args:
            num_workers: how many actors to start outside the training loop;
                0: the training loop acts itself, in this process.
            run_actor: ``run_actor(worker_index)`` runs one actor until it is stopped.

        Returns:
            Handles of the started actors (empty when the loop acts itself).
        """
        raise NotImplementedError


@registry.systems.register("local")
class LocalSystem(System):
    """This process: the first visible GPU, else the CPU; TensorFlow's default strategy."""

    name = "local"

    def setup(self) -> Dict[str, str]:
        """Configures devices and returns a description for logs."""
        from rl._tf import tf  # here, so naming a --sys target does not load TensorFlow

        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            # Share the GPU with other processes instead of claiming all memory.
            tf.config.experimental.set_memory_growth(gpu, True)
        device = "GPU:0" if gpus else "CPU:0"
        return {"sys": "local", "device": device, "gpus": str(len(gpus))}

    def scope(self) -> ContextManager[Any]:
        """The default strategy's scope: variables are placed as without any strategy."""
        from rl._tf import tf

        return tf.distribute.get_strategy().scope()

    @property
    def replica_count(self) -> int:
        return 1

    def launch_actors(self, num_workers: int, run_actor: Callable[[int], None]) -> List[Any]:
        """Starts nothing: the training loop acts in this process.

        Actors in worker processes (each with its own envs and generator,
        receiving weights from the learner and sending transitions back) are
        the subject of the workers issue; until then ``num_workers > 0`` is refused.
        """
        del run_actor
        if num_workers > 0:
            raise NotImplementedError(
                f"--sys local runs no separate actors (asked for {num_workers}): "
                "the training loop acts in this process; use num_workers=0"
            )
        return []
