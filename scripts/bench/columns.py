"""The printed tables' pieces: a header with its rule, and a cell that may be empty."""

from typing import Optional


def print_header(header: str) -> None:
    """Prints a table's header line and a rule of dashes as long as it.

    Args:
      header: the column names, laid out as the rows are.
    """
    print(header)
    print("-" * len(header), flush=True)  # the rows come as runs end


def cell(value: Optional[object], width: int, spec: str = "") -> str:
    """``value`` right-aligned in ``width`` characters, or "-" there if it was not measured.

    Args:
      value: the number (or text) to show; None: not measured.
      width: the column's width.
      spec: the rest of the format spec, e.g. ".0f" or "," (none: ``str`` of the value).
    """
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:>{width}{spec}}"
