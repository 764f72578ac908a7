"""``python -m rl.tournament``: see rl/tournament/cli.py."""

import sys

from rl.tournament.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
