"""Plots and tabulates evaluation curves of training runs.

Usage:
  python scripts/plot.py RUN_DIR [RUN_DIR ...] [--output IMAGE] [--title T]
                         [--label NAME ...]

Each RUN_DIR is one line of the plot: a `--copies` output directory (holding run_0,
run_1, ...) is one group of its copies; a directory holding eval.jsonl is a group of one
run. The label is the directory's basename unless `--label` is given once per RUN_DIR.
Prints one table row per group: number of runs, final return mean ± std, and its
interquartile mean with a 95% stratified bootstrap confidence interval (rliable). The plot
goes to `<first RUN_DIR>/curves.png` unless `--output` names another image file (.png, .svg, .pdf,
.jpg, .jpeg, .tif, .tiff or .webp, in that format; any other name is refused, so a plot never
replaces a run's log): never into the current directory, where it would dirty the checkout
that later runs' snapshots record.
"""

from __future__ import annotations

import argparse
import os
import sys

# Runs from a checkout too, without `pip install -e .`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rl import analysis  # noqa: E402
from rl.errors import one_line  # noqa: E402


def _parse_args(argv: list[str]) -> argparse.Namespace:
    """Parses the command line.

    Args:
      argv: arguments without the program name.

    Returns:
      The parsed arguments.
    """
    parser = argparse.ArgumentParser(
        prog="plot.py", description="Compare evaluation curves of training runs."
    )
    parser.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="a run directory or a --copies output directory (one group each)",
    )
    parser.add_argument(
        "--output",
        "--out",
        default=None,
        help="image file to write, by suffix: "
        + ", ".join(analysis.PLOT_SUFFIXES)
        + " (default: curves.png inside the first RUN_DIR)",
    )
    parser.add_argument("--title", default="", help="figure title")
    parser.add_argument(
        "--label",
        action="append",
        default=None,
        help="label of a group; give once per RUN_DIR, in order",
    )
    return parser.parse_args(argv)


def _labels(run_dirs: list[str], labels: list[str] | None) -> list[str]:
    """One distinct label per RUN_DIR: the given ones, or the directories' basenames.

    Args:
      run_dirs: the RUN_DIR arguments.
      labels: the --label arguments, or None.

    Returns:
      The labels, in RUN_DIR order.
    """
    if labels is None:
        labels = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    elif len(labels) != len(run_dirs):
        raise ValueError(
            f"got {len(labels)} --label for {len(run_dirs)} RUN_DIR; give one per RUN_DIR or none"
        )
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ValueError(f"duplicate label(s) {duplicates}; tell them apart with --label")
    return labels


def format_table(rows: list[tuple[str, dict]]) -> str:
    """Formats one line per group of final-return statistics.

    Args:
      rows: (label, summarize_runs dict) per group.

    Returns:
      The table, header included, without a trailing newline.
    """
    header = ("label", "runs", "final return (mean ± std)", "IQM [95% CI]")
    lines = [header]
    for label, s in rows:
        low, high = s["final_return_iqm_ci"]
        lines.append(
            (
                label,
                str(s["num_runs"]),
                f"{s['final_return_mean']:.2f} ± {s['final_return_std']:.2f}",
                f"{s['final_return_iqm']:.2f} [{low:.2f}, {high:.2f}]",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines
    )


def main(argv: list[str]) -> int:
    """Runs the script.

    Args:
      argv: arguments without the program name.

    Returns:
      The exit code: 0 on success, 2 on bad arguments or unreadable runs.
    """
    try:
        args = _parse_args(argv)
    except SystemExit as e:
        # argparse exits on --help (0) and on usage errors (2); return it as a code.
        return e.code if isinstance(e.code, int) else 2
    try:
        labels = _labels(args.run_dirs, args.label)
        groups = {label: analysis.find_runs(d) for label, d in zip(labels, args.run_dirs)}
        rows = [(label, analysis.summarize_runs(dirs)) for label, dirs in groups.items()]
        output = args.output or os.path.join(args.run_dirs[0], analysis.CURVES_NAME)
        analysis.plot_curves(groups, output, title=args.title)
    except (OSError, ValueError) as e:
        print(f"plot.py: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    print(format_table(rows))
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
