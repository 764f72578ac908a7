"""``python -m rl list``: every registered name by kind."""

import sys

from rl import catalog


def main(argv: list) -> int:
    if argv[1:] != ["list"]:
        print("usage: python -m rl list", file=sys.stderr)
        return 2

    print(catalog.list_all(gymnasium=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
