"""--sys targets: where a run executes.

A system prepares the devices before anything is built. ``local`` runs in
this process on a visible GPU if there is one and the CPU otherwise.
Multi-device, TPU and Ray targets are planned as further systems here.
"""

from typing import Dict

from rl import registry


@registry.systems.register("local")
class LocalSystem:
    """This process: the first visible GPU, else the CPU."""

    def setup(self) -> Dict[str, str]:
        """Configures devices and returns a description for logs."""
        from rl._tf import tf  # here, so naming a --sys target does not load TensorFlow

        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            # Share the GPU with other processes instead of claiming all memory.
            tf.config.experimental.set_memory_growth(gpu, True)
        device = "GPU:0" if gpus else "CPU:0"
        return {"sys": "local", "device": device, "gpus": str(len(gpus))}
