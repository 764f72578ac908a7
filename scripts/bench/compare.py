"""--compare A B: two folders of result files (docs/results, a suite's <output_dir>/results,
another checkout's docs/results) set by set: the probability that B improves on A, with
its 95% stratified bootstrap interval (rliable), and each side's IQM and seeds, so a
change to a loss or a default is judged on its seeds before it lands."""

from typing import Dict, List, Sequence

from scripts.bench import children, columns, scores

COMPARE_HEADER = (
    f"{'set':<30} {'env':<25} {'A seeds':>7} {'A IQM':>8} {'B seeds':>7} {'B IQM':>8} "
    f"{'P(B > A)':>8} {'95% CI':>14}"
)


def compare_rows(before: Sequence[dict], after: Sequence[dict]) -> List[Dict[str, object]]:
    """One row per set with per-seed final returns in both A (``before``) and B
    (``after``), by set name: each side's seeds and IQM, and the probability of
    improvement of B over A with its interval.

    Args:
      before: A's result files (scores.read_results).
      after: B's.
    """
    from rl import analysis  # heavy: NumPy, rliable

    a_by_set = {r["set"]: r for r in before if r.get("final_returns")}
    rows = []
    for b in sorted(after, key=lambda r: r["set"]):
        a = a_by_set.get(b["set"])
        if a is None or not b.get("final_returns"):
            continue
        poi, (low, high) = scores.probability_of_improvement(a["final_returns"], b["final_returns"])
        rows.append(
            {
                "set": b["set"],
                "env": b.get("env", ""),
                "a_seeds": len(a["final_returns"]),
                "a_iqm": analysis.interquartile_mean(a["final_returns"]),
                "b_seeds": len(b["final_returns"]),
                "b_iqm": analysis.interquartile_mean(b["final_returns"]),
                "poi": poi,
                "poi_ci95": [low, high],
            }
        )
    return rows


def format_compare_row(row: Dict[str, object]) -> str:
    """One printed line of --compare."""
    low, high = row["poi_ci95"]
    return (
        f"{row['set']:<30} {row['env']:<25} {row['a_seeds']:>7} {row['a_iqm']:>8.1f} "
        f"{row['b_seeds']:>7} {row['b_iqm']:>8.1f} {row['poi']:>8.2f} "
        f"{f'[{low:.2f}, {high:.2f}]':>14}"
    )


def run_compare(
    folders: Sequence[str], before: Sequence[dict], after: Sequence[dict]
) -> List[Dict[str, object]]:
    """Prints the comparison of the sets in both folders; returns its rows (exit 2 when
    they share no set).

    Args:
      folders: A and B as given, for the messages.
      before: A's result files with per-seed final returns.
      after: B's.
    """
    rows = compare_rows(before, after)
    if not rows:
        children.fail(
            f"--compare {folders[0]} {folders[1]}: no set has per-seed final returns in both; "
            "compare two folders of results of the same sets"
        )
    print(f"A: {folders[0]}\nB: {folders[1]}")
    columns.print_header(COMPARE_HEADER)
    for row in rows:
        print(format_compare_row(row))
    return rows
