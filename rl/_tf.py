"""TensorFlow for every module of rl, imported once with its start-up log lines hidden.

Modules of rl write ``from rl._tf import tf`` instead of ``import tensorflow as
tf`` (tests/test_style.py checks), so whichever of them loads first, a user
sees only rl's own output unless RL_TF_LOGS=1 (see rl/__init__.py).
"""

from rl import import_tensorflow_quietly

tf = import_tensorflow_quietly()
