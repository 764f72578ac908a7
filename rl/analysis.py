"""Aggregating evaluation logs across independent training copies, and plotting them.

Every run writes `<run_dir>/eval.jsonl`, one JSON object per evaluation with at least
`step` and `return_mean`. `--copies N` puts N runs in `<output_dir>/run_0 .. run_{N-1}`.
This module reads those logs, summarises the final returns across copies (mean, std,
interquartile mean with a bootstrap confidence interval, following Agarwal et al. 2021,
"Deep Reinforcement Learning at the Edge of the Statistical Precipice"), and draws
learning curves.

It imports neither TensorFlow nor pyplot: matplotlib is imported only when plotting, and
drawn through the Agg canvas directly, so no display or global backend is needed.
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import Callable

import numpy as np

from rl.files import write_bytes_atomic
from rl.logbook import EVAL_FILE, read_eval_records

EVAL_LOG_NAME = EVAL_FILE  # one name for the file, from rl/logbook.py
SUMMARY_NAME = "summary.json"
CURVES_NAME = "curves.png"
# Image files a plot may be written to, by suffix (all encoded by matplotlib's Agg
# canvas). Nothing else: a plot must never replace a run's log or other data.
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")
# Fields the analysis needs; the writer logs more (return_std, episodes, wall_time, ...).
REQUIRED_FIELDS = ("step", "return_mean")
_COPY_DIR_PATTERN = re.compile(r"run_(\d+)")


def read_eval_log(run_dir: str) -> list[dict]:
    """Reads `<run_dir>/eval.jsonl` into a list of records, in file order.

    The logbook's reader does the parsing (a last line cut short by a kill is
    skipped, any other damaged line raises); this adds what the analysis needs.

    Args:
      run_dir: directory of one training run.

    Returns:
      One dict per evaluation line; each has at least the keys in `REQUIRED_FIELDS`.

    Raises:
      FileNotFoundError: if the log does not exist (the message names its path).
      ValueError: if a line is damaged or lacks the required fields (the message
        names the file and the line or record).
    """
    path = os.path.join(run_dir, EVAL_LOG_NAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no evaluation log at {path}")
    records = read_eval_records(path)
    for number, record in enumerate(records, 1):
        _check_record(record, path, number)
    return records


def _check_record(record: object, path: str, line_number: int) -> None:
    """Raises ValueError unless `record` is a dict holding `REQUIRED_FIELDS`.

    Args:
      record: one parsed line of an eval log.
      path: the log's path, for the error message.
      line_number: 1-based line number, for the error message.
    """
    if not isinstance(record, dict):
        raise ValueError(
            f"{path}, line {line_number}: expected a JSON object, got {type(record).__name__}"
        )
    missing = [k for k in REQUIRED_FIELDS if k not in record]
    if missing:
        raise ValueError(f"{path}, line {line_number}: missing field(s) {missing}")


def interquartile_mean(values: np.ndarray) -> float:
    """Mean of the middle 50% of `values` (IQM; Agarwal et al. 2021).

    Exact choice for sizes not divisible by 4: each sorted value carries probability
    mass 1/n, and is weighted by how much of that mass falls inside the quantile range
    [0.25, 0.75]; the result is the weighted mean. For n divisible by 4 this is the plain
    25%-trimmed mean (scipy.stats.trim_mean(values, 0.25)); otherwise the boundary values
    count fractionally, where trim_mean would drop floor(n/4) values from each side.
    E.g. n=5: weights (0, 0.3, 0.4, 0.3, 0); n=3: (1/6, 2/3, 1/6); n<=2: the mean.

    Args:
      values: 1-D array of scores, at least one.

    Returns:
      The interquartile mean.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"expected a non-empty 1-D array, got shape {values.shape}")
    weights = _middle_half_weights(values.size)
    return float(np.sort(values) @ weights / (2 * values.size))


def _middle_half_weights(n: int) -> np.ndarray:
    """Integer weights of n sorted values in the mean over the quantile range [0.25, 0.75].

    In units of 1/(4n) both the values' mass edges (4i) and the quartiles (n, 3n) are
    whole numbers, so the weights are exact integers summing to 2n; dividing only the
    weighted sum keeps, e.g., the IQM of a constant array equal to that constant.

    Args:
      n: number of values, at least one.

    Returns:
      [n] non-negative integer weights summing to 2n.
    """
    lower_edges = 4 * np.arange(n)
    overlap = np.minimum(lower_edges + 4, 3 * n) - np.maximum(lower_edges, n)
    return np.clip(overlap, 0, None)


def bootstrap_ci(
    values: np.ndarray,
    statistic: Callable[[np.ndarray], float] = interquartile_mean,
    confidence: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of `statistic(values)`.

    Resamples `values` with replacement `num_resamples` times, applies `statistic` to
    each resample and returns the (1-confidence)/2 and (1+confidence)/2 quantiles.
    Deterministic for a given seed.

    Args:
      values: 1-D array of samples (e.g. one final return per run), at least one.
      statistic: maps a 1-D array to a float; the IQM by default.
      confidence: coverage of the interval, in (0, 1).
      num_resamples: number of bootstrap resamples, at least 1.
      seed: seed of the numpy Generator used for resampling.

    Returns:
      (low, high) bounds of the interval.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"expected a non-empty 1-D array, got shape {values.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if num_resamples < 1:
        raise ValueError(f"num_resamples must be >= 1, got {num_resamples}")
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, values.size, size=(num_resamples, values.size))
    stats = np.array([statistic(values[row]) for row in indices])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


def find_runs(path: str) -> list[str]:
    """The run directories under `path`: itself, or its `run_<i>` copies.

    Args:
      path: a run directory (holding eval.jsonl) or a `--copies` output directory
        (holding run_0, run_1, ...).

    Returns:
      [path] for a single run; otherwise the copies' paths, ordered by index.

    Raises:
      FileNotFoundError: if `path` is not a directory.
      ValueError: if it holds neither an eval log nor run_<i> copies, or a copy has no
        eval log yet.
    """
    if not os.path.isdir(path):
        raise FileNotFoundError(f"not a directory: {path}")
    if os.path.isfile(os.path.join(path, EVAL_LOG_NAME)):
        return [path]
    run_dirs = copy_dirs(path)
    if not run_dirs:
        raise ValueError(f"{path} holds neither {EVAL_LOG_NAME} nor run_<i>/ copies")
    missing = [d for d in run_dirs if not os.path.isfile(os.path.join(d, EVAL_LOG_NAME))]
    if missing:
        raise ValueError(f"no {EVAL_LOG_NAME} yet in: {', '.join(missing)}")
    return run_dirs


def copy_dirs(path: str) -> list[str]:
    """The `run_<i>` copy directories directly under `path`, by index; empty if none.

    Args:
      path: a directory, typically a `--copies` output directory.
    """
    copies = []
    for name in os.listdir(path):
        match = _COPY_DIR_PATTERN.fullmatch(name)
        if match and os.path.isdir(os.path.join(path, name)):
            copies.append((int(match.group(1)), os.path.join(path, name)))
    # Numeric order, so run_10 comes after run_2.
    return [d for _, d in sorted(copies)]


def _final_eval(run_dir: str) -> dict:
    """The last evaluation record of one run.

    Args:
      run_dir: directory of one training run.

    Returns:
      The last record of its eval log.
    """
    records = read_eval_log(run_dir)
    if not records:
        raise ValueError(f"{os.path.join(run_dir, EVAL_LOG_NAME)} has no evaluations")
    return records[-1]


def summarize_runs(run_dirs: list[str]) -> dict:
    """Final evaluation return of each run, and statistics across runs.

    The final return of a run is `return_mean` on the last line of its eval log, its
    best return the highest `return_mean` of any line (the record of its best/ folder,
    rl/best.py), reported beside the final, never in its place. The std across runs is
    the population std (ddof=0), so one run gives 0 rather than NaN.

    Args:
      run_dirs: directories of independent runs of one configuration, at least one.

    Returns:
      A JSON-serialisable dict with `final_return_mean`, `final_return_std`,
      `final_return_iqm`, `final_return_iqm_ci` ([low, high], 95% percentile bootstrap),
      `num_runs`, and `runs` (a list of {run_dir, final_step, final_return, best_return}).
    """
    if not run_dirs:
        raise ValueError("summarize_runs needs at least one run directory")
    runs = []
    for run_dir in run_dirs:
        last = _final_eval(run_dir)
        runs.append(
            {
                "run_dir": run_dir,
                "final_step": int(last["step"]),
                "final_return": float(last["return_mean"]),
                "best_return": max(float(r["return_mean"]) for r in read_eval_log(run_dir)),
            }
        )
    finals = np.array([r["final_return"] for r in runs])
    low, high = bootstrap_ci(finals)
    return {
        "final_return_mean": float(np.mean(finals)),
        "final_return_std": float(np.std(finals)),
        "final_return_iqm": interquartile_mean(finals),
        "final_return_iqm_ci": [low, high],
        "num_runs": len(runs),
        "runs": runs,
    }


def _eval_curve(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps and mean returns of one run's evaluations.

    Args:
      run_dir: directory of one training run.

    Returns:
      steps: [T] strictly increasing env steps, T >= 1.
      returns: [T] mean evaluation returns.
    """
    records = read_eval_log(run_dir)
    path = os.path.join(run_dir, EVAL_LOG_NAME)
    if not records:
        raise ValueError(f"{path} has no evaluations")
    steps = np.array([r["step"] for r in records])
    returns = np.array([r["return_mean"] for r in records], dtype=np.float64)
    # Interpolation needs increasing steps; a repeated step means two runs shared a dir.
    if np.any(np.diff(steps) <= 0):
        raise ValueError(f"{path}: steps are not strictly increasing")
    return steps, returns


def aligned_curves(run_dirs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Evaluation curves of several runs on one common step grid.

    The grid is the union of all runs' evaluation steps restricted to the range every
    run covers, [max of first steps, min of last steps]; each run is linearly
    interpolated onto it, never extrapolated. So a copy that stopped early cuts the
    group's curve at its last step: every point is an average over all copies. When the
    copies evaluate at the same steps (the usual case) the grid is exactly those steps
    and no value is interpolated.

    Args:
      run_dirs: directories of runs to align, at least one.

    Returns:
      steps: [num_steps] the common grid of env steps, increasing.
      returns: [num_runs, num_steps] each run's mean evaluation return on the grid.

    Raises:
      ValueError: if the runs' step ranges do not overlap.
    """
    if not run_dirs:
        raise ValueError("aligned_curves needs at least one run directory")
    curves = [_eval_curve(d) for d in run_dirs]
    start = max(steps[0] for steps, _ in curves)
    end = min(steps[-1] for steps, _ in curves)
    if start > end:
        raise ValueError(f"the runs' evaluation steps do not overlap: {run_dirs}")
    grid = np.unique(np.concatenate([steps for steps, _ in curves]))
    grid = grid[(grid >= start) & (grid <= end)]
    returns = np.stack([np.interp(grid, steps, rets) for steps, rets in curves])
    return grid, returns


def _render_curves(groups: dict[str, list[str]], title: str, image_format: str) -> bytes:
    """Draws one mean curve with a min-max band per group, as an encoded image.

    Args:
      groups: label -> run directories of that group.
      title: figure title; may be empty.
      image_format: a suffix of `PLOT_SUFFIXES` without its dot ("png", "svg", ...).

    Returns:
      The encoded image.
    """
    # Imported here so reading and summarising logs does not pay for matplotlib.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, run_dirs in groups.items():
        steps, returns = aligned_curves(run_dirs)
        (line,) = axes.plot(steps, returns.mean(axis=0), label=f"{label} (n={len(run_dirs)})")
        axes.fill_between(
            steps,
            returns.min(axis=0),
            returns.max(axis=0),
            color=line.get_color(),
            alpha=0.2,
            linewidth=0,
        )
    axes.set_xlabel("environment steps")
    axes.set_ylabel("evaluation return")
    if title:
        axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(
        title="line: mean, band: min-max over runs", fontsize="small", title_fontsize="small"
    )
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=image_format)
    return buffer.getvalue()


def plot_curves(groups: dict[str, list[str]], path: str, title: str = "") -> None:
    """Plots mean evaluation return against env steps, one line per group, to an image.

    Each line is the mean over the group's runs on their common step grid (see
    `aligned_curves`); the shaded band spans the min to the max over those runs.

    Args:
      groups: label -> run directories of that group; at least one group.
      path: destination image file, written atomically in the format its suffix
        names (one of `PLOT_SUFFIXES`); an earlier plot there is replaced.
      title: figure title; none if empty.

    Raises:
      ValueError: if `path` is not an image file name (see `check_plot_path`).
    """
    if not groups:
        raise ValueError("plot_curves needs at least one group")
    check_plot_path(path)
    image = _render_curves(groups, title, os.path.splitext(path)[1][1:].lower())
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_bytes_atomic(path, image)


def check_plot_path(path: str) -> None:
    """Refuses a plot destination that is a folder or has no image suffix.

    Only image suffixes are accepted, so a plot never replaces a log or any other file
    that is not an earlier image (`--output run/eval.jsonl` would have made it a PNG).

    Args:
      path: where the plot would be written.

    Raises:
      ValueError: naming `path` and the suffixes that are valid.
    """
    valid = f"name an image file ending in {', '.join(PLOT_SUFFIXES)}"
    if os.path.splitext(path)[1].lower() not in PLOT_SUFFIXES:
        raise ValueError(f"cannot plot to {path}: not an image file name; {valid}")
    if os.path.isdir(path):
        raise ValueError(f"cannot plot to {path}: it is a folder; {valid}")


def write_summary(output_dir: str, run_dirs: list[str]) -> dict:
    """Writes `<output_dir>/summary.json` and `<output_dir>/curves.png` for a set of copies.

    Args:
      output_dir: where to write; typically the `--copies` output directory.
      run_dirs: the copies' run directories.

    Returns:
      The `summarize_runs` dict that was written to summary.json.
    """
    summary = summarize_runs(run_dirs)
    text = json.dumps(summary, indent=2) + "\n"
    write_bytes_atomic(os.path.join(output_dir, SUMMARY_NAME), text.encode("utf-8"))
    label = os.path.basename(os.path.normpath(output_dir))
    plot_curves({label: run_dirs}, os.path.join(output_dir, CURVES_NAME), title=label)
    return summary
