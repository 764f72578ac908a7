"""TensorFlow for every module of rl, loaded on first use with its start-up log lines hidden.

Modules of rl write ``from rl._tf import tf`` (and ``keras``) instead of
``import tensorflow as tf``, so whichever of them uses TensorFlow first, a user sees only rl's own
output unless RL_TF_LOGS=1 (``TF_LOGS_VARIABLE``).

``tf`` is a stand-in module that imports TensorFlow when one of its attributes
is first read. Modules that only use TensorFlow inside functions (acting on
the host, action heads, act_select rules) therefore import without it: an
actor process that acts in NumPy never pays TensorFlow's ~2 s and ~400 MB.
"""

import contextlib
import errno
import os
import re
import sys
import types
from typing import Callable, Iterator

from rl.errors import error_line, first_line
from rl.processes import captured_stderr

# Set RL_TF_LOGS=1 (or pass train.py --verbosity=0) to see TensorFlow's own log lines.
TF_LOGS_VARIABLE = "RL_TF_LOGS"


# TensorFlow imports Keras 3, which imports these for its plotting helpers
# (keras.visualization), which rl never calls: about 1 s of every process that
# loads TensorFlow, mostly matplotlib.pyplot.
KERAS_UNUSED_OPTIONAL_IMPORTS = ("matplotlib", "cv2")


@contextlib.contextmanager
def _absent(names):
    """Makes ``import`` of these packages fail inside the block, as if not installed.

    Keras guards the imports with ``except ImportError``; a None entry in
    sys.modules raises it. The entries go afterwards, so rl's own plots and
    Atari preprocessing still import the packages. Ones already imported are
    left alone.
    """
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


def import_tensorflow_quietly():
    """Imports and returns TensorFlow, with its C++ start-up chatter hidden.

    TF 2.21 prints CUDA probing and oneDNN notices through absl before it
    reads TF_CPP_MIN_LOG_LEVEL, so what reaches stderr while it loads is
    captured and dropped (``captured_stderr``); Python errors still show
    (stderr is restored before any exception propagates). Every module of rl
    imports TensorFlow through ``rl._tf``, which calls this. With RL_TF_LOGS=1
    nothing is hidden.
    """
    if "tensorflow" in sys.modules:
        import tensorflow

        return tensorflow
    if os.environ.get(TF_LOGS_VARIABLE):
        with _absent(KERAS_UNUSED_OPTIONAL_IMPORTS):
            import tensorflow

        return tensorflow
    # Later C++ messages (oneDNN fallbacks during training): fatal ones only.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with captured_stderr():  # and dropped
        # TFP's package imported first, while TensorFlow is absent, leaves its
        # experimental and layers subpackages to load on first use: ~0.3 s less before
        # a policy head builds its first distribution. It imports nothing else.
        with _absent(KERAS_UNUSED_OPTIONAL_IMPORTS):
            import tensorflow_probability  # noqa: F401, I001  (before TensorFlow, as said)
            import tensorflow

        tensorflow.config.list_physical_devices()
    return tensorflow


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


def file_system_errors() -> tuple:
    """The ``tf.errors`` a file writer fails with when the file system refuses (TensorFlow
    maps the OS's errno to them): no such folder, a file where a folder belongs
    (FailedPrecondition), no permission or a read-only disk, a full disk or quota
    (ResourceExhausted), a file too large (OutOfRange), a file in the way."""
    e = tf.errors
    return (
        e.NotFoundError,
        e.AlreadyExistsError,
        e.PermissionDeniedError,
        e.FailedPreconditionError,
        e.ResourceExhaustedError,
        e.OutOfRangeError,
    )


@contextlib.contextmanager
def writes_as_oserror(what: str) -> Iterator[None]:
    """TensorFlow's file writers fail with a ``tf.errors.OpError`` (a full disk, a file too
    large) where Python's raise OSError: inside, such a failure of the file system is an
    OSError saying "cannot save WHAT: <the OS's words>", which training reports
    as a file that cannot be written (exit code 7); so is an UnknownError whose message
    gives the OS's words for the error (EIO: "; Input/output error"). Any other OpError
    (a bug, a tensor of the wrong shape) is raised as it is, to end as itself.

    Args:
        what: what was being written ("step 384 in runs/x").
    """
    try:
        yield
    except tf.errors.OpError as e:
        if not refused_by_the_file_system(e):
            raise
        raise OSError(f"cannot save {what}: {file_system_words(e.message) or error_line(e)}") from e


def refused_by_the_file_system(error: Exception) -> bool:
    """Whether a TensorFlow error is the file system's refusal: one of
    ``file_system_errors``, or an UnknownError that gives the OS's words for the error."""
    if isinstance(error, file_system_errors()):
        return True
    return isinstance(error, tf.errors.UnknownError) and names_an_os_error(error.message)


# The OS's descriptions of its errors ("Input/output error"), as strerror gives them.
_OS_ERROR_TEXTS = frozenset(os.strerror(code) for code in errno.errorcode)


def file_system_words(message: str) -> str:
    """What a TensorFlow file writer's error says went wrong, without TensorFlow's inside:
    the OS's words ("File too large", "No space left on device") where it gives them, else
    its first line without the function-node prefix and the ``[Op:SaveV2]`` suffix.

    Args:
        message: the error's message ("{{function_node ...}} <temp file>; File too large
            [Op:SaveV2]").
    """
    line = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", first_line(message))
    line = re.sub(r"\s*\[Op:\w+\]$", "", line)
    words = line.rpartition("; ")[2]
    return words if words in _OS_ERROR_TEXTS else line


def names_an_os_error(message: str) -> bool:
    """Whether a TensorFlow error message is one its file writers give when the OS refused
    ("<file>; Input/output error [Op:SaveV2]"). TensorFlow maps the errno values it has
    no code for, EIO among them, to UnknownError: this tells such a failure of the disk
    from a bug that raised UnknownError."""
    first = first_line(message)
    return any(f"; {text}" in first for text in _OS_ERROR_TEXTS)
