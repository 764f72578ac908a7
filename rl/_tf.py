"""TensorFlow for every module of rl, loaded on first use with its start-up log lines hidden.

Modules of rl write ``from rl._tf import tf`` (and ``keras``) instead of
``import tensorflow as tf``, so whichever of them uses TensorFlow first, a user sees only rl's own
output unless RL_TF_LOGS=1 (see rl/__init__.py).

``tf`` is a stand-in module that imports TensorFlow when one of its attributes
is first read. Modules that only use TensorFlow inside functions (acting on
the host, action heads, act_select rules) therefore import without it: an
actor process that acts in NumPy never pays TensorFlow's ~2 s and ~400 MB.
"""

import types
from typing import Callable

from rl import import_tensorflow_quietly


class _OnFirstUse(types.ModuleType):
    """A stand-in for a module, which ``load()`` imports when an attribute is first read."""

    def __init__(self, name: str, load: Callable[[], types.ModuleType]):
        super().__init__(name)
        self.__dict__["_load_module"] = load

    def __getattr__(self, name: str):
        module = self.__dict__["_load_module"]()
        # Later reads are plain module lookups, as fast as on the module itself.
        self.__dict__.update(module.__dict__)
        return getattr(module, name)


def _load_keras() -> types.ModuleType:
    import_tensorflow_quietly()  # Keras loads TensorFlow: quietly, first
    import keras

    return keras


tf = _OnFirstUse("tensorflow", import_tensorflow_quietly)
keras = _OnFirstUse("keras", _load_keras)
