"""search: hyperparameter search over any registered hparams set, with Optuna.

``python -m rl.search`` (docs/guides/search.md) samples hparams from a search space, trains each
sample as a normal ``train.py`` run folder and keeps the study in a database, so a killed
search resumes.

- ``space.py``: search spaces (field -> distribution) read from YAML/JSON or by name, and
  checked against the hparams class before any trial starts; no Optuna import;
- ``trials.py``: one trial's ``train.py`` subprocess and its evaluations, here or in a Ray
  actor;
- ``study.py``: the study, its resume checks and the loop that starts, prunes and
  finishes trials;
- ``report.py``: the trial table, the best hparams and the plots;
- ``__main__.py``: the command line.
"""
