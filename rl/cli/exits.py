"""How a run that failed ends: its exit code by failure kind, and its one line.

Bad input exits 2 (``fail`` in rl/cli/flag_table.py); a failure during training or
testing has an exit code of its own kind (``FAILURE_EXITS``) and a ``stopped:`` line; a
training run's result is its closing JSON line on stdout (``ClosingLine``).
"""

import json
import math
import sys
from typing import Any, Dict, NoReturn

from rl.cli.flag_table import PROG

# Exit codes of a run that failed (2 is bad input); each failure kind of a training
# result (rl/experiment.py) has its own.
EXIT_NON_FINITE = 3  # training produced a non-finite loss or weights
EXIT_WORKERS = 4  # actor processes failed more often than --worker_restarts allows
EXIT_ENV_SERVER = 5  # a grpc:// env server went away (or its env raised) during training
EXIT_ENV = 6  # the env raised (being made, in a step or an evaluation) or an async copy hung
EXIT_FILES = 7  # a file of the run could not be written (a full disk, a file for a folder)
FAILURE_EXITS = {
    "non_finite": EXIT_NON_FINITE,
    "workers": EXIT_WORKERS,
    "env_server": EXIT_ENV_SERVER,
    "env": EXIT_ENV,
    "files": EXIT_FILES,
}


def stopped(message: str) -> None:
    """The one stderr line of a run that failed (its exit code says how)."""
    print(f"{PROG}: stopped: {message}", file=sys.stderr, flush=True)


def stop_outside_training(error: Exception, written: str, context: str = "") -> NoReturn:
    """Ends the process for a failure outside training, where there is no result to print:
    one line, the exit code of its kind.

    Args:
        error: an EnvError, EnvServerError or OSError (a kind of ``FAILURE_KINDS``).
        written: what that left on disk ("nothing was written").
        context: what failed, before the error ("cannot test runs/x: ").
    """
    from rl.experiment import failure_kind, failure_text  # late: it loads TensorFlow (loaded)

    stopped(f"{context}{failure_text(error)}; {written}")
    sys.exit(FAILURE_EXITS[failure_kind(error)])


class ClosingLine:
    """train.py's closing JSON line, printed once: by the run's end, or by a second signal
    that ends the process at once (``Experiment.on_stop_now``), whichever comes first."""

    def __init__(self):
        self.printed = False

    def print(self, result: Dict[str, Any]) -> None:
        if not self.printed:
            print(result_json(result), flush=True)
            self.printed = True  # after: a signal in between may repeat it, not lose it


def result_json(result: Dict[str, Any]) -> str:
    """A training result as one line of JSON: its numbers, texts and nulls. A non-finite
    number (the loss of the update that stopped training) is null, as JSON has no NaN;
    the result's ``failure`` names it."""
    plain = (int, float, str, type(None))
    return json.dumps(
        {
            k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in result.items()
            if isinstance(v, plain)
        }
    )
