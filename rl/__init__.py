"""rl: a modular reinforcement-learning codebase on TensorFlow 2.

Layout (see docs/ARCHITECTURE.md): ``agents/`` (Agent = Model + Algo),
``algos/act_select`` and ``algos/grad_comp`` (pure functions), ``models/``,
``hparams/``, ``envs/``, ``memory/``; ``experiment.py`` runs training,
evaluation and checkpoints; ``registry.py`` maps names to all of these.

``rl.Experiment`` is loaded lazily so that light modules (``rl.snapshot``,
``rl.analysis``) import without TensorFlow.
"""

import os

# TensorFlow's C++ info logs (CUDA probing on CPU machines) are noise here.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"


def __getattr__(name):
    if name in ("Experiment", "load"):
        from rl import experiment

        return getattr(experiment, name)
    raise AttributeError(f"module 'rl' has no attribute '{name}'")
