"""rl: a modular reinforcement-learning codebase on TensorFlow 2.

Layout (see docs/concepts/architecture.md): ``agents/`` (an Agent = a learner, which
owns the model, memory and update, plus actors acting with an act_select),
``algos/act_select`` and ``algos/grad_comp`` (pure functions), ``models/``,
``hparams/``, ``envs/``, ``memory/``; ``experiment.py`` runs the loop,
``run_folder.py`` and ``evaluation.py`` its folder and evaluations;
``registry.py`` maps names to all of these.

``rl.Experiment`` is loaded lazily so that light modules (``rl.snapshot``,
``rl.analysis``) import without TensorFlow.
"""

import contextlib
import os
import sys
from typing import Callable, Dict, Optional

__version__ = "0.1.0"

# Set RL_TF_LOGS=1 (or pass train.py --verbosity=0) to see TensorFlow's own log lines.
TF_LOGS_VARIABLE = "RL_TF_LOGS"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent_hook() -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` that has Linux send the child SIGTERM when this process dies.

    SIGTERM, not SIGKILL: a train.py child saves a checkpoint and stops, so rerunning
    the parent's command resumes it. None where the OS has no such request.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import signal

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


# The sizes of TensorFlow's two thread pools (default: one thread per core each).
TF_THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def tf_thread_share(processes: int) -> Dict[str, str]:
    """The pool sizes for one of ``processes`` TensorFlow processes side by side: the usable
    CPUs divided among them (one pool per core each would oversubscribe the cores); {}
    when the user set either size."""
    if any(name in os.environ for name in TF_THREAD_VARIABLES):
        return {}
    return dict.fromkeys(TF_THREAD_VARIABLES, str(max(1, usable_cpus() // processes)))


class CapturedStderr:
    """What native code wrote to file descriptor 2 inside ``captured_stderr()``.

    Attributes:
        text: the captured text, set when the block ends.
    """

    text = ""


@contextlib.contextmanager
def captured_stderr():
    """Points file descriptor 2 at a temporary file for the block, so that C++ log lines
    (TensorFlow's start-up notices, Ray's connection retries) can be kept out of the
    terminal and read afterwards; yields a ``CapturedStderr``. Python's ``sys.stderr`` is
    flushed first, and descriptor 2 is restored before an exception leaves the block.
    A native crash inside the block takes what it wrote with it.
    """
    import tempfile

    captured = CapturedStderr()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)  # after the sink: a failure to make it leaves nothing open
        try:
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")


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


def __getattr__(name):
    if name in ("Experiment", "load"):
        from rl import experiment

        return getattr(experiment, name)
    raise AttributeError(f"module 'rl' has no attribute '{name}'")
