"""Errors that mean a run folder cannot be used as asked (reported as one line, exit 2).

Kept apart from rl/experiment.py so train.py can name them without loading TensorFlow.
"""


class RunConflictError(ValueError):
    """output_dir holds a run with other hparams; one readable line."""


class CheckpointError(RuntimeError):
    """No checkpoint in output_dir can be read."""
