"""The classic suite: every registered classic-control and Box2D set trained over several
seeds (train.py --copies), its IQM beside RL Baselines3 Zoo's published value; a table
(suite.md) and learning curves per env, kept across runs of some of the sets (--only)."""

import os
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from rl import registry
from rl.files import read_json_object, write_text_atomic
from scripts.bench import children, columns

# rl.catalog and rl.analysis are imported where used: they load NumPy and more, which
# the peer and cost processes (this same script) must not pay for in their wall time.

CLASSIC_ENVS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "LunarLander-v3",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
    "LunarLanderContinuous-v3",
)
# RL Baselines3 Zoo's published mean return (benchmark.md, mean of its runs) and the env
# steps it trained for, by (agent, env). Its LunarLander values are for v2; v3 fixes
# bugs in the same task.
RL_ZOO: Dict[Tuple[str, str], Tuple[float, int]] = {
    ("ppo", "CartPole-v1"): (500.0, 100_000),
    ("dqn", "CartPole-v1"): (500.0, 50_000),
    ("a2c", "CartPole-v1"): (500.0, 500_000),
    ("ppo", "Acrobot-v1"): (-73.5, 1_000_000),
    ("dqn", "Acrobot-v1"): (-76.6, 100_000),
    ("a2c", "Acrobot-v1"): (-83.4, 500_000),
    ("ppo", "MountainCar-v0"): (-110.4, 1_000_000),
    ("dqn", "MountainCar-v0"): (-100.8, 120_000),
    ("a2c", "MountainCar-v0"): (-111.3, 1_000_000),
    ("ppo", "LunarLander-v3"): (242.0, 1_000_000),
    ("dqn", "LunarLander-v3"): (154.0, 100_000),
    ("a2c", "LunarLander-v3"): (156.0, 200_000),
    ("ppo", "Pendulum-v1"): (-172.0, 100_000),
    ("a2c", "Pendulum-v1"): (-163.0, 1_000_000),
    ("sac", "Pendulum-v1"): (-157.0, 20_000),
    ("td3", "Pendulum-v1"): (-152.0, 20_000),
    ("ddpg", "Pendulum-v1"): (-152.0, 20_000),
    ("sac", "LunarLanderContinuous-v3"): (260.0, 500_000),
    ("td3", "LunarLanderContinuous-v3"): (208.0, 300_000),
    ("ddpg", "LunarLanderContinuous-v3"): (230.0, 300_000),
    ("ppo", "LunarLanderContinuous-v3"): (270.9, 1_000_000),
    ("td3", "MountainCarContinuous-v0"): (93.5, 300_000),
    ("ddpg", "MountainCarContinuous-v0"): (93.5, 300_000),
}


def classic_sets() -> List[Tuple[str, str, str, int]]:
    """(set, agent, env, train_steps) of every registered set on a classic env, by env.

    Bases and test fixtures (``*_base``, ``*_tiny``) are left out; a new set joins by
    being registered.
    """
    from rl import catalog  # noqa: F401  (registers every set; heavy, see the top)

    found = []
    for name in registry.hparams.names():
        hp = registry.hparams.get(name)()
        if hp.env in CLASSIC_ENVS and not name.endswith(("_base", "_tiny")):
            found.append((name, hp.agent, hp.env, hp.train_steps))
    return sorted(found, key=lambda row: (CLASSIC_ENVS.index(row[2]), row[0]))


SUITE_HEADER = (
    f"{'set':<30} {'env':<25} {'steps':>9} {'runs':>4} {'IQM':>8} {'95% CI':>19} "
    f"{'RL-Zoo':>8} {'at steps':>9} {'wall s':>7}"
)


def suite_selection(only: Sequence[str]) -> List[Tuple[str, str, str, int]]:
    """The classic sets to train now: every one, or the --only ones (exit 2 for a name that
    is not a classic set)."""
    sets = classic_sets()
    names = [name for name, _, _, _ in sets]
    for name in only:
        if name not in names:
            children.fail(
                f"--only {name}: not a set of the classic suite: {registry.did_you_mean(name, names)}"
                f"valid: {', '.join(names)}"
            )
    return [row for row in sets if not only or row[0] in only]


def check_suite_folder(output_dir: str, selected: Sequence[str]) -> None:
    """Ends the process (exit 2) unless ``output_dir`` can take the suite: a folder (or
    none yet) whose set folders are folders and whose earlier results read."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        children.fail(f"--output_dir {output_dir} is a file; name a folder for the suite's runs")
    for name, agent, env, steps in classic_sets():
        set_dir = os.path.join(output_dir, name)
        if os.path.exists(set_dir) and not os.path.isdir(set_dir):
            children.fail(f"{set_dir} is a file; move it away, the runs of {name} go there")
        if name not in selected:
            suite_row(output_dir, name, agent, env, steps)  # reads, so damage shows now


def run_suite(
    output_dir: str, seeds: int, parallel: int, sets: Sequence[Tuple[str, str, str, int]]
) -> List[dict]:
    """Trains ``sets`` ``seeds`` times each (``--copies``), printing their rows; then
    writes the table and plots of every classic set with results in ``output_dir``.

    Each set's copies go to ``output_dir/<set>``; a rerun resumes or skips what is done,
    and a run of some sets (--only) keeps the others' rows in suite.md and the plots.

    Args:
      output_dir: where the runs, plots and suite.md go (an absolute path: train.py runs
        from ROOT).
      seeds: copies per set (seeds derived from the set's seed, as --copies does).
      parallel: copies trained at once (--copies_parallel).
      sets: (set, agent, env, train_steps) of the sets to train now.

    Returns:
      the rows of every set in suite.md.
    """
    columns.print_header(SUITE_HEADER)
    parallel = min(parallel, seeds)  # train.py refuses more at once than there are copies
    try:
        for name, agent, env, steps in sets:
            command = children.train_command(
                "--hparams", name, "--copies", str(seeds),
                "--copies_parallel", str(parallel), "--output_dir", os.path.join(output_dir, name),
            )  # fmt: skip
            children.timed_run(command)
            print(format_suite_row(suite_row(output_dir, name, agent, env, steps)), flush=True)
    finally:  # the sets done so far (and earlier) keep their rows if one fails
        rows = write_suite_files(output_dir)
    return rows


def suite_row(output_dir: str, name: str, agent: str, env: str, steps: int) -> Optional[dict]:
    """A set's row from its copies' summary.json and eval logs in ``output_dir/<name>``;
    None before its copies have all finished once. Unreadable results end the process."""
    from rl import analysis  # heavy, see the top

    set_dir = os.path.join(output_dir, name)
    path = os.path.join(set_dir, analysis.SUMMARY_NAME)
    if not os.path.exists(path):
        return None
    try:
        summary = read_json_object(path)
        # The copies as this folder holds them (summary.json names them by the path given).
        run_dirs = [os.path.join(set_dir, os.path.basename(r["run_dir"])) for r in summary["runs"]]
        walls = [analysis.read_eval_log(d)[-1].get("wall_time") for d in run_dirs]
        iqm, ci = summary["final_return_iqm"], summary["final_return_iqm_ci"]
        finals = [r["final_return"] for r in summary["runs"]]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        children.fail(
            f"the results of {name} in {set_dir} cannot be read ({type(e).__name__}: {e}); "
            f"rerun it with --only {name} to rewrite them"
        )
    walls = [w for w in walls if w is not None]
    zoo_value, zoo_steps = RL_ZOO.get((agent, env), (None, None))
    return {
        "set": name, "agent": agent, "env": env, "steps": steps, "runs": len(run_dirs),
        "iqm": iqm, "ci": ci, "finals": finals, "rl_zoo": zoo_value, "rl_zoo_steps": zoo_steps,
        "wall_s": statistics.median(walls) if walls else None, "run_dirs": run_dirs,
    }  # fmt: skip


def format_suite_row(row: dict) -> str:
    """One printed line of the suite's table."""
    low, high = row["ci"]
    zoo_value, zoo_steps = row["rl_zoo"], row["rl_zoo_steps"]
    return (
        f"{row['set']:<30} {row['env']:<25} {row['steps']:>9,} {row['runs']:>4} "
        f"{row['iqm']:>8.1f} {f'[{low:.1f}, {high:.1f}]':>19} "
        f"{columns.cell(zoo_value, 8)} {columns.cell(zoo_steps or None, 9, ',')} "
        f"{columns.cell(row['wall_s'], 7, '.0f')}"
    )


def write_suite_files(output_dir: str) -> List[dict]:
    """suite.md and one curve plot per env (curves_<env>.png) of every classic set with
    results in ``output_dir``; returns their rows (nothing is written without one)."""
    from rl import analysis  # heavy, see the top

    rows = [suite_row(output_dir, *found) for found in classic_sets()]
    rows = [row for row in rows if row is not None]
    if not rows:
        return rows
    for env in CLASSIC_ENVS:
        groups = {row["set"]: row["run_dirs"] for row in rows if row["env"] == env}
        if groups:
            analysis.plot_curves(groups, os.path.join(output_dir, f"curves_{env}.png"), env)
    write_text_atomic(os.path.join(output_dir, "suite.md"), suite_markdown(rows))
    return rows


def suite_markdown(rows: Sequence[dict]) -> str:
    """The suite's table in Markdown, for docs/benchmarks.md."""
    lines = [
        "| set | env | steps | runs | IQM [95% CI] | RL-Zoo (steps) | median wall s |",
        "|---|---|---:|---:|---|---|---:|",
    ]
    for row in rows:
        low, high = row["ci"]
        zoo = f"{row['rl_zoo']:g} ({row['rl_zoo_steps']:,})" if row["rl_zoo"] is not None else "-"
        wall = f"{row['wall_s']:.0f}" if row["wall_s"] is not None else "-"
        lines.append(
            f"| `{row['set']}` | {row['env']} | {row['steps']:,} | {row['runs']} | "
            f"{row['iqm']:.1f} [{low:.1f}, {high:.1f}] | {zoo} | {wall} |"
        )
    return "\n".join(lines) + "\n"
