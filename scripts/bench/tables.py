"""The two tables of whole runs: the rl-only table (each set and seed, beside a --baseline
checkout if given) and the side-by-side table of rl against its Stable-Baselines3 peer."""

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from scripts.bench import children, columns, costs, peer_runs, peer_settings, runs


def median_wall(rows: Sequence[dict]) -> float:
    """The median whole-process wall time of ``rows``, in seconds.

    Args:
      rows: run rows with "wall_s".
    """
    return statistics.median(r["wall_s"] for r in rows)


def pair_name(hparams: str, algo: str) -> str:
    """The table's name of a pair.

    Args:
      hparams: the rl hparams set.
      algo: the peer algorithm.
    """
    return f"{hparams} vs sb3 {algo}"


def summarise_pair(
    hparams: str,
    algo: str,
    rl_rows: Sequence[dict],
    peer_rows: Sequence[dict],
    base_rows: Sequence[dict] = (),
) -> Dict[str, object]:
    """Medians of one pair's runs and the ratio of median wall times, rl/peer.

    Args:
      hparams: the rl hparams set.
      algo: the peer algorithm.
      rl_rows: run_once rows of the set.
      peer_rows: peer_once rows.
      base_rows: run_once rows of the --baseline checkout, if any: the summary then
        gives its median wall time, its ratio to the peer and rl's ratio to it.
    """
    rl_wall, peer_wall = median_wall(rl_rows), median_wall(peer_rows)
    rl_evals = [r["final_return"] for r in rl_rows]
    peer_evals = [r["final_return"] for r in peer_rows]
    summary = {
        "pair": pair_name(hparams, algo),
        "runs": len(rl_rows),
        "rl_wall_s": rl_wall,
        "peer_wall_s": peer_wall,
        "ratio": rl_wall / peer_wall,
        "rl_eval_min": min(rl_evals),
        "rl_eval_median": statistics.median(rl_evals),
        "peer_eval_min": min(peer_evals),
        "peer_eval_median": statistics.median(peer_evals),
    }
    if base_rows:
        base_wall = median_wall(base_rows)
        summary.update(
            base_wall_s=base_wall,
            base_ratio=base_wall / peer_wall,
            rl_per_base=rl_wall / base_wall,
            base_eval_min=min(r["final_return"] for r in base_rows),
        )
    return summary


RUN_HEADER = (
    f"{'pair':<32} {'run':>3} {'side':<4} {'seed':>4} {'steps':>7} {'wall s':>7} "
    f"{'steps/s':>8} {'final eval':>10} {'episodes':>8}"
)
SUMMARY_HEADER = (
    f"{'pair':<32} {'runs':>4} {'rl s':>6} {'peer s':>6} {'rl/peer':>7} "
    f"{'rl eval min/med':>15} {'peer eval min/med':>17}"
)
# With --baseline: the other checkout's median wall, its ratio to the peer, rl's to it.
BASE_HEADER = f"{'base s':>6} {'base/peer':>9} {'rl/base':>7} {'base eval min':>13}"


def format_run(row: Dict[str, object]) -> str:
    """One per-run line of the side-by-side table.

    Args:
      row: a run_once or peer_once row with pair, run and side added.
    """
    return (
        f"{row['pair']:<32} {row['run']:>3} {row['side']:<4} {row['seed']:>4} "
        f"{row['steps']:>7} {row['wall_s']:>7.1f} {row['steps_per_s']:>8.0f} "
        f"{row['final_return']:>10.1f} {len(row['eval_returns']):>8}"
    )


def format_summary(summary: Dict[str, object]) -> str:
    """One summary line of the side-by-side table.

    Args:
      summary: summarise_pair's result.
    """
    rl_eval = f"{summary['rl_eval_min']:.1f}/{summary['rl_eval_median']:.1f}"
    peer_eval = f"{summary['peer_eval_min']:.1f}/{summary['peer_eval_median']:.1f}"
    line = (
        f"{summary['pair']:<32} {summary['runs']:>4} {summary['rl_wall_s']:>6.1f} "
        f"{summary['peer_wall_s']:>6.1f} {summary['ratio']:>7.2f} "
        f"{rl_eval:>15} {peer_eval:>17}"
    )
    if "base_wall_s" in summary:
        line += (
            f" {summary['base_wall_s']:>6.1f} {summary['base_ratio']:>9.2f} "
            f"{summary['rl_per_base']:>7.2f} {summary['base_eval_min']:>13.1f}"
        )
    return line


def run_peer_table(
    hparams: Sequence[str],
    pairs: int,
    train_steps: Optional[int],
    extra: List[str],
    tmp: str,
    baseline: Optional[str] = None,
) -> Tuple[Dict[str, float], List[dict], List[dict]]:
    """Measures the per-call costs, then runs and prints the side-by-side table.

    Args:
      hparams: rl sets, each with a peer in PEERS.
      pairs: rl/peer run pairs per set.
      train_steps: env steps of the rl runs (None: the set's own budget).
      extra: more train.py flags.
      tmp: a folder for the rl runs.
      baseline: another rl checkout (--baseline) whose train.py runs each pair's set and
        seed too, between this checkout's run and the peer's (side "base").
    """
    machine = costs.print_machine_costs()
    columns.print_header(RUN_HEADER)
    rows, summaries = [], []
    for name in hparams:
        algo, pair_rows = peer_settings.PEERS[name].algo, {"rl": [], "base": [], "peer": []}
        for run in range(pairs):
            for side, row in runs.checkout_runs(name, run, run, train_steps, extra, tmp, baseline):
                del row["evals"], row["hparams"]
                pair_rows[side].append(row)
            # The peer learns as many env steps as the rl run took.
            pair_rows["peer"].append(
                peer_runs.peer_once(name, run, int(pair_rows["rl"][-1]["steps"]))
            )
            for side in ("rl", "base", "peer") if baseline else ("rl", "peer"):
                row = pair_rows[side][-1]
                row.update(pair=pair_name(name, algo), run=run + 1, side=side)
                rows.append(row)
                print(format_run(row), flush=True)
        summaries.append(
            summarise_pair(name, algo, pair_rows["rl"], pair_rows["peer"], pair_rows["base"])
        )
    print()
    header = SUMMARY_HEADER + (f" {BASE_HEADER}" if baseline else "")
    columns.print_header(header)
    for summary in summaries:
        print(format_summary(summary))
    return machine, rows, summaries


def run_table(
    hparams: Sequence[str],
    seeds: Sequence[int],
    train_steps: Optional[int],
    target: float,
    extra: List[str],
    baseline: Optional[str] = None,
) -> List[dict]:
    """Runs and prints the rl-only table; returns its rows without the eval records.

    Args:
      hparams: rl sets.
      seeds: seeds of each set.
      train_steps: env steps (None: the set's own budget).
      target: evaluation return counted as solved.
      extra: more train.py flags.
      baseline: another rl checkout (--baseline) that runs each set and seed too: a
        "code" column ("rl" or "base") and, per set, the ratio of median wall times.
    """
    rows = []
    header = (
        f"{'hparams':<14} {'seed':>4} {'steps':>8} {'wall s':>7} "
        f"{'steps/s':>8} {'final eval':>10} {'solved at':>9}"
    ) + (f" {'code':>4}" if baseline else "")
    columns.print_header(header)
    with children.scratch_folder() as tmp:
        for name in hparams:
            for turn, seed in enumerate(seeds):
                for side, row in runs.checkout_runs(
                    name, turn, seed, train_steps, extra, tmp, baseline
                ):
                    solved = runs.first_step_reaching(row["evals"], target)
                    row["solved_at"] = solved
                    if baseline:
                        row["code"] = side
                    rows.append(row)
                    print(
                        f"{name:<14} {seed:>4} {row['steps']:>8} {row['wall_s']:>7.1f} "
                        f"{row['steps_per_s']:>8.0f} {row['final_return']:>10.1f} "
                        f"{columns.cell(solved, 9)}" + (f" {side:>4}" if baseline else ""),
                        flush=True,
                    )
    if baseline:
        print()
        for name in hparams:
            walls = {
                side: median_wall([r for r in rows if r["hparams"] == name and r["code"] == side])
                for side in ("rl", "base")
            }
            print(
                f"{name}: median wall {walls['rl']:.2f} s here, {walls['base']:.2f} s at the "
                f"baseline: rl/base {walls['rl'] / walls['base']:.2f}"
            )
    return [{k: v for k, v in r.items() if k not in ("evals", "eval_returns")} for r in rows]


def run_peer_report(
    hparams: Sequence[str],
    pairs: int,
    train_steps: Optional[int],
    extra: List[str],
    baseline: Optional[str] = None,
) -> Dict[str, object]:
    """--peer: the side-by-side table as the --json report."""
    with children.scratch_folder() as tmp:
        machine, rows, summaries = run_peer_table(hparams, pairs, train_steps, extra, tmp, baseline)
    report = {"costs_ms": machine, "rows": rows, "summaries": summaries}
    return {**report, "baseline": baseline} if baseline else report
