"""train.py's main: which job the parsed flags ask for, and the Ctrl-C outside a run.

--list prints the registered names; otherwise the early checks run (before TensorFlow
loads), then one of: --copies N (rl/cli/copies.py), --training=false
(rl/cli/testing.py), or training one run (rl/cli/training.py).
"""

import os
import signal
import sys
import warnings
from typing import List

from absl import logging as absl_logging

from rl import _tf
from rl.cli import checks, copies, testing, training
from rl.cli.flag_table import FLAGS, PROG, fail, show_tensorflow_logs
from rl.processes import interrupt_early


def main(argv: List[str]) -> int:
    """Runs train.py after absl parsed the flags."""
    signal.signal(signal.SIGINT, interrupt_early)
    try:
        return train_or_test(argv)
    except KeyboardInterrupt:
        # A Ctrl-C outside the run's own handlers (while TensorFlow loads or the run is
        # built, or as it closes); within them the run handles it (rl/experiment.py).
        print(
            f"{PROG}: stopped by signal {int(signal.SIGINT)} (Ctrl-C) outside training; the "
            "run folder keeps what was saved: rerun the same command to resume",
            file=sys.stderr,
        )
        return 128 + signal.SIGINT


def train_or_test(argv: List[str]) -> int:
    """What train.py does with the parsed flags; returns its exit code."""
    if len(argv) > 1:
        fail(f"unexpected arguments {' '.join(argv[1:])!r}; flags look like --name=value")
    say_gymnasium_warnings_once()
    if FLAGS.list:
        from rl import catalog  # late: it loads Gymnasium

        checks.load_plugins()  # so their names are listed too
        print(catalog.list_all(gymnasium=True))
        return 0
    checked = checks.check_early()
    if show_tensorflow_logs():
        os.environ[_tf.TF_LOGS_VARIABLE] = "1"
    else:
        absl_logging.set_verbosity(absl_logging.WARNING)
    if FLAGS.training and FLAGS.copies > 1:
        runs = copies.checked_copies()  # bad input is refused before TensorFlow loads
        # Copies side by side train in a train.py each: this process needs no TensorFlow,
        # and without its threads the fork of each copy is safe (preexec_fn).
        if FLAGS.copies_parallel == 1:
            _tf.import_tensorflow_quietly()
        return copies.run_copies(runs)
    if not FLAGS.training:
        _tf.import_tensorflow_quietly()
        return testing.run_test()
    system = training.make_system()
    launcher = training.start_actors(system, checked)  # before TensorFlow's import
    _tf.import_tensorflow_quietly()
    return training.run_training(checked, system, launcher)


def say_gymnasium_warnings_once() -> None:
    """Gymnasium's warnings (an outdated env id, a Box cast to float32) as ``rl: warning:``
    lines, each once: it warns in colour, with its own source line, at every env made."""
    shown = set()
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if f"{os.sep}gymnasium{os.sep}" not in filename:
            return default(message, category, filename, lineno, file, line)
        from rl.envs.check import warning_text  # late: it loads Gymnasium (loaded by now)

        text = warning_text(message)
        if text.startswith("ERROR: "):
            # Only an async vector env's copy that raised logs these (a traceback among
            # them) before the error is raised here again, where rl reports it in one line.
            return
        if text not in shown:
            shown.add(text)
            print(f"rl: warning: {text}", file=sys.stderr, flush=True)

    warnings.showwarning = show
