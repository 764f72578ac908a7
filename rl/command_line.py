"""What rl's argparse commands share: bad input is one line on stderr and exit code 2.

``python -m rl.envs.check``, ``python -m rl.tournament`` and ``python -m rl.search``
parse their flags with ``OneLineParser`` and report input errors with ``fail``, as
train.py does (rl/cli.py).
"""

import argparse
import sys
from typing import Callable, NoReturn

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


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``low``.

    Args:
      low: the smallest value accepted.
    """

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return read
