"""Errors that mean a run folder cannot be used as asked (reported as one line, exit 2).

Kept apart from rl/experiment.py so train.py can name them without loading TensorFlow.
"""


class RunConflictError(ValueError):
    """output_dir cannot hold this run (another run's hparams, a damaged run
    file, not a writable folder); one readable line."""


class CheckpointError(RuntimeError):
    """No checkpoint in output_dir can be read."""


class SystemUnavailableError(RuntimeError):
    """A --sys target cannot run here (no devices, an unreachable cluster); one line."""


class EnvServerError(RuntimeError):
    """An env server (rl/envs/remote) cannot be used: unreachable, refused the token,
    lost the session, or its env raised; one line."""


class PluginError(ImportError):
    """A --plugins module that cannot be imported or fails while registering; one line."""
