"""rl: a modular reinforcement-learning codebase on TensorFlow 2.

Layout (see docs/concepts/architecture.md): ``agents/`` (an Agent = a learner, which
owns the model, memory and update, plus actors acting with an act_select),
``algos/act_select`` and ``algos/grad_comp`` (pure functions), ``models/``,
``hparams/``, ``envs/``, ``memory/``; ``experiment.py`` runs the loop,
``run_folder.py`` and ``evaluation.py`` its folder and evaluations;
``registry.py`` maps names to all of these. The import layers are declared once,
in .importlinter at the repository root (tests/test_layers.py holds them).

This package file is the public face only: no module of rl imports it.
``rl.Experiment`` and ``rl.load`` come from rl/experiment.py on first use, since
that module loads TensorFlow and light modules (``rl.snapshot``, ``rl.analysis``)
must import without it.
"""

from rl.version import __version__

__all__ = ["Experiment", "__version__", "load"]


def __getattr__(name):
    if name in ("Experiment", "load"):
        from rl import experiment  # late: it loads TensorFlow (see above)

        return getattr(experiment, name)
    raise AttributeError(f"module 'rl' has no attribute '{name}'")
