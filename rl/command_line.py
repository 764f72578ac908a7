"""What rl's argparse commands share: bad input is one line on stderr and exit code 2.

``python -m rl.envs.check``, ``python -m rl.tournament`` and ``python -m rl.search``
parse their flags with ``OneLineParser`` and report input errors with ``fail``, as
train.py does (rl/cli/).
"""

import argparse
import math
import sys
from typing import NoReturn

from rl.errors import one_line
from rl.registry import did_you_mean

EXIT_BAD_INPUT = 2


def fail(prog: str, message: str) -> NoReturn:
    """``<prog>: error: <message>`` on stderr, one line (control characters escaped),
    then exit code 2.

    Args:
      prog: the command, as its usage names it.
      message: what was wrong with the input.
    """
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr, flush=True)
    sys.exit(EXIT_BAD_INPUT)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr (no usage block), exit code 2, and
    name the nearest flags for an unknown one. Flags are taken whole, as train.py's are:
    an abbreviation (``--num_worker``) is an unknown flag, not a guess."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(self.prog, message)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            ours = [flag for action in self._actions for flag in action.option_strings]
            unknown = [e.split("=", 1)[0] for e in extras if e.startswith("--")]
            hint = did_you_mean(unknown[0], ours, cutoff=0.6) if unknown else ""
            self.error(f"unrecognized arguments: {' '.join(extras)}; {hint}".rstrip("; "))
        return parsed


class InRange:
    """An argparse ``type``: a finite number of ``kind`` (int or float) in [low, high].

    Every numeric flag of rl's commands reads through one, so each declares its range
    (as hparams fields do) and nan, inf and out-of-range values are refused in one line.

    Attributes:
      kind: ``int`` or ``float``.
      low: the smallest value accepted.
      high: the largest value accepted.
    """

    def __init__(self, kind: type, low: float, high: float):
        self.kind, self.low, self.high = kind, low, high

    def __call__(self, text: str):
        try:
            value = self.kind(text)
        except ValueError:
            what = "an integer" if self.kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"must be a number in [{self.low}, {self.high}], got {value}"
            )
        if value < self.low:
            raise argparse.ArgumentTypeError(f"must be at least {self.low}, got {value}")
        if value > self.high:
            raise argparse.ArgumentTypeError(f"must be at most {self.high}, got {value}")
        return value


def int_in_range(low: int, high: int) -> InRange:
    """An argparse ``type``: an integer in [low, high].

    Args:
      low: the smallest value accepted.
      high: the largest value accepted.
    """
    return InRange(int, low, high)


def float_in_range(low: float, high: float) -> InRange:
    """An argparse ``type``: a finite number in [low, high] (nan and inf are refused).

    Args:
      low: the smallest value accepted.
      high: the largest value accepted.
    """
    return InRange(float, low, high)
