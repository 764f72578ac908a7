"""Speed and learning benchmark: whole train.py runs, one table.

The entry point; `python scripts/benchmark.py --help` lists the modes and flags, and
scripts/bench/cli.py says what each mode measures and how.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's rl and scripts.bench, not whichever pip installed

from scripts.bench.cli import main  # noqa: E402  (after this checkout is on the path)

if __name__ == "__main__":
    sys.exit(main())
