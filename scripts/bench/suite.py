"""The classic suite: every registered classic-control and Box2D set trained over 10 seeds
(5 on MountainCar and in the long cells; train.py --copies), its statistics beside RL
Baselines3 Zoo's published value; a result file per set (<set>.json), a table (suite.md),
learning curves per env and the performance profile, kept across runs of some of the
sets (--only). It resumes set by set and seed by seed."""

import datetime
import json
import os
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from rl import registry
from rl.files import read_json_object, write_text_atomic
from scripts.bench import children, columns, peer_settings, scores

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


# Seeds per cell (a set on its env): 10 in the core cells, 5 on MountainCar and in the long
# cells; --suite_seeds N gives every cell N instead. One place: planned_seeds.
CORE_SEEDS, FEW_SEEDS = 10, 5
FEW_SEED_ENVS = ("MountainCar-v0", "MountainCarContinuous-v0")
# The long cells: one copy takes over 10 minutes on the 2-core host, by the median wall
# seconds in docs/results/<set>.json of 2026-11 (sac_lunar_lander_continuous recorded none:
# its copies ran for hours, across sessions). A declared list, so the plan does not move
# with the next measurement.
LONG_SETS = (
    "ppo_lunar_lander_continuous",  # 749 s
    "ddpg_lunar_lander_continuous",  # 1331 s
    "td3_lunar_lander_continuous",  # 1559 s
    "sac_lunar_lander_continuous",  # not recorded, hours
    "ddpg_mountain_car_continuous",  # 1758 s
    "td3_mountain_car_continuous",  # 2064 s
)
RESULTS_NAME = "results"  # <output_dir>/results/<set>.json unless --results_dir
PROFILE_NAME = "profile.png"


def planned_seeds(name: str, env: str, override: Optional[int] = None) -> int:
    """How many seeds (copies) the suite trains of set ``name`` on ``env``.

    Args:
      name: the set.
      env: its env.
      override: --suite_seeds, if given: every cell gets it.
    """
    if override is not None:
        return override
    return FEW_SEEDS if env in FEW_SEED_ENVS or name in LONG_SETS else CORE_SEEDS


def copy_finished(run_dir: str, train_steps: int) -> bool:
    """Whether the copy in ``run_dir`` has evaluated at ``train_steps`` (its last
    evaluation), so the suite need not start it again."""
    from rl import analysis  # heavy, see the top

    try:
        records = analysis.read_eval_log(run_dir)
    except (OSError, ValueError):  # not started, or cut by a kill: train.py resumes it
        return False
    return bool(records) and records[-1]["step"] >= train_steps


def remaining_copies(set_dir: str, copies: int, train_steps: int) -> List[int]:
    """The indices of the copies (run_<i>) of ``set_dir`` that still have to train, of
    ``copies`` in all.

    Args:
      set_dir: the set's --copies folder.
      copies: how many copies the suite wants.
      train_steps: the set's budget.
    """
    return [
        i
        for i in range(copies)
        if not copy_finished(os.path.join(set_dir, f"run_{i}"), train_steps)
    ]


def existing_copies(set_dir: str) -> int:
    """How many run_<i> copies ``set_dir`` holds (0 for no folder)."""
    from rl import analysis  # heavy, see the top

    return len(analysis.copy_dirs(set_dir)) if os.path.isdir(set_dir) else 0


SUITE_HEADER = (
    f"{'set':<30} {'env':<25} {'steps':>9} {'runs':>4} {'IQM':>8} {'95% CI':>19} "
    f"{'solved':>6} {'best IQM':>8} {'RL-Zoo':>8} {'at steps':>9} {'wall s':>7}"
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


def check_suite_folder(
    output_dir: str,
    results_dir: str,
    selected: Sequence[Tuple[str, str, str, int]],
    override: Optional[int],
) -> None:
    """Ends the process (exit 2) unless ``output_dir`` can take the suite: a folder (or
    none yet) whose set folders are folders, hold no more copies than planned (the suite
    grows a set, never shrinks it), and whose earlier results read; and ``results_dir``
    is a folder or none yet."""
    for folder, flag, what in (
        (output_dir, "--output_dir", "the suite's runs"),
        (results_dir, "--results_dir", "the result files"),
    ):
        if os.path.exists(folder) and not os.path.isdir(folder):
            children.fail(f"{flag} {folder} is a file; name a folder for {what}")
    chosen = [name for name, _, _, _ in selected]
    for name, agent, env, steps in classic_sets():
        set_dir = os.path.join(output_dir, name)
        if os.path.exists(set_dir) and not os.path.isdir(set_dir):
            children.fail(f"{set_dir} is a file; move it away, the runs of {name} go there")
        if name not in chosen:
            suite_row(output_dir, name, agent, env, steps)  # reads, so damage shows now
            continue
        planned, held = planned_seeds(name, env, override), existing_copies(set_dir)
        if held > planned:
            children.fail(
                f"{set_dir} holds {held} copies and the suite plans {planned} for {name}: the "
                f"suite grows a set, never shrinks it; give --suite_seeds {held} or more, or "
                "another --output_dir"
            )


def run_suite(
    output_dir: str,
    results_dir: str,
    override: Optional[int],
    parallel: int,
    sets: Sequence[Tuple[str, str, str, int]],
    machine: Optional[Dict[str, float]] = None,
) -> List[dict]:
    """Trains each of ``sets`` over its planned seeds (``--copies``), printing its row and
    writing its result file; then writes the table, curves and profile of every classic
    set with results.

    Each set's copies go to ``output_dir/<set>``; a rerun trains only the copies not yet
    finished (train.py resumes each from its checkpoint) and skips a finished set, so
    the suite can run over several sittings; a run of some sets (--only) keeps the
    others' rows in suite.md and the plots.

    Args:
      output_dir: where the runs, plots and suite.md go (an absolute path: train.py runs
        from ROOT).
      results_dir: where the result files (<set>.json) and the profile go.
      override: --suite_seeds (None: planned_seeds decides per cell).
      parallel: copies trained at once (--copies_parallel).
      sets: (set, agent, env, train_steps) of the sets to train now.
      machine: this machine's per-call costs, recorded in each result file.

    Returns:
      the rows of every set in suite.md.
    """
    columns.print_header(SUITE_HEADER)
    try:
        for name, agent, env, steps in sets:
            copies = planned_seeds(name, env, override)
            set_dir = os.path.join(output_dir, name)
            left = remaining_copies(set_dir, copies, steps)
            row = suite_row(output_dir, name, agent, env, steps)
            if left or row is None or row["runs"] != copies:  # else done in an earlier sitting
                command = children.train_command(
                    "--hparams", name, "--copies", str(copies),
                    "--copies_parallel", str(min(parallel, max(len(left), 1))),
                    "--output_dir", set_dir,
                )  # fmt: skip
                children.timed_run(command)
                row = suite_row(output_dir, name, agent, env, steps)
            write_result_file(results_dir, row, suite_command(name, output_dir, override), machine)
            print(format_suite_row(row), flush=True)
    finally:  # the sets done so far (and earlier) keep their rows if one fails
        rows = write_suite_files(output_dir, results_dir)
    return rows


def suite_command(name: str, output_dir: str, override: Optional[int]) -> str:
    """The command that reproduces one set's result file."""
    shown = os.path.relpath(output_dir, children.ROOT)
    shown = output_dir if shown.startswith("..") else shown
    seeds = f" --suite_seeds {override}" if override is not None else ""
    return f"python scripts/benchmark.py --suite classic --only {name}{seeds} --output_dir {shown}"


def suite_row(output_dir: str, name: str, agent: str, env: str, steps: int) -> Optional[dict]:
    """A set's row from its copies' summary.json, hparams and eval logs in
    ``output_dir/<name>``, with its statistics; None before its copies have all finished
    once. Unreadable results end the process."""
    from rl import analysis  # heavy, see the top
    from rl.hparams.resolve import HPARAMS_FILE  # heavy, see the top

    set_dir = os.path.join(output_dir, name)
    path = os.path.join(set_dir, analysis.SUMMARY_NAME)
    if not os.path.exists(path):
        return None
    try:
        summary = read_json_object(path)
        # The copies as this folder holds them (summary.json names them by the path given).
        run_dirs = [os.path.join(set_dir, os.path.basename(r["run_dir"])) for r in summary["runs"]]
        logs = [analysis.read_eval_log(d) for d in run_dirs]
        seeds = [read_json_object(os.path.join(d, HPARAMS_FILE))["seed"] for d in run_dirs]
        peer_path = os.path.join(
            peer_settings.suite_peer_dir(output_dir, name), peer_settings.PEER_SUMMARY_NAME
        )
        peer = read_json_object(peer_path) if os.path.exists(peer_path) else None
        finals = [float(log[-1]["return_mean"]) for log in logs]
        bests = [max(float(r["return_mean"]) for r in log) for log in logs]
        threshold = scores.solved_threshold(env)
        stats = scores.cell_statistics(finals, bests, threshold, peer)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        children.fail(
            f"the results of {name} in {set_dir} cannot be read ({type(e).__name__}: {e}); "
            f"rerun it with --only {name} to rewrite them"
        )
    walls = [log[-1].get("wall_time") for log in logs]
    walls = [w for w in walls if w is not None]
    zoo_value, zoo_steps = RL_ZOO.get((agent, env), (None, None))
    return {
        "set": name, "agent": agent, "env": env, "steps": steps, "runs": len(run_dirs),
        "seeds": seeds, "finals": finals, "bests": bests, "solved_threshold": threshold,
        "eval_episodes": logs[0][-1].get("episodes"), "peer_runs": peer, **stats,
        "rl_zoo": zoo_value, "rl_zoo_steps": zoo_steps, "walls": walls,
        "wall_s": statistics.median(walls) if walls else None, "run_dirs": run_dirs,
    }  # fmt: skip


def result_record(
    row: dict, command: str, machine: Optional[Dict[str, float]], note: Optional[str]
) -> dict:
    """A set's result file (docs/results/<set>.json): what the page shows and how it was
    made, its per-seed returns in copy order beside its seeds.

    Args:
      row: suite_row's row.
      command: the command that reproduces it.
      machine: this machine's per-call costs (None: not measured).
      note: the earlier file's note, kept (None: none).
    """
    stats = {
        key: row[key]
        for key in ("iqm", "ci95", "best_iqm", "best_ci95", "solved_fraction", "peer_iqm",
                    "peer_ci95", "poi_vs_peer", "poi_vs_peer_ci95")
        if key in row
    }  # fmt: skip
    record = {
        "set": row["set"], "algorithm": row["agent"], "env": row["env"],
        "train_steps": row["steps"], "command": command, "copies": row["runs"],
        "seeds": row["seeds"], "final_returns": row["finals"], "best_returns": row["bests"],
        "eval_episodes": row["eval_episodes"], "solved_threshold": row["solved_threshold"],
        **stats,
        "wall_seconds": [round(w, 1) for w in row["walls"]],
        "median_wall_seconds": None if row["wall_s"] is None else round(row["wall_s"], 1),
    }  # fmt: skip
    if row["rl_zoo"] is not None:
        record["peer"] = {
            "name": "RL-Zoo", "value": row["rl_zoo"], "train_steps": row["rl_zoo_steps"],
            "source": "https://github.com/DLR-RM/rl-baselines3-zoo/blob/master/benchmark.md "
            "(one trained agent)",
        }  # fmt: skip
    if row["peer_runs"] is not None:
        record["peer_runs"] = row["peer_runs"]
    record.update(machine=machine, date=datetime.date.today().isoformat())
    if note:
        record["note"] = note
    return record


def write_result_file(
    results_dir: str, row: dict, command: str, machine: Optional[Dict[str, float]]
) -> None:
    """Writes ``results_dir/<set>.json`` for ``row``, keeping an earlier file's note."""
    path = os.path.join(results_dir, f"{row['set']}.json")
    note = read_json_object(path).get("note") if os.path.exists(path) else None
    os.makedirs(results_dir, exist_ok=True)
    record = result_record(row, command, machine, note)
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")


def format_suite_row(row: dict) -> str:
    """One printed line of the suite's table."""
    low, high = row["ci95"]
    zoo_value, zoo_steps = row["rl_zoo"], row["rl_zoo_steps"]
    solved = row.get("solved_fraction")
    return (
        f"{row['set']:<30} {row['env']:<25} {row['steps']:>9,} {row['runs']:>4} "
        f"{row['iqm']:>8.1f} {f'[{low:.1f}, {high:.1f}]':>19} "
        f"{columns.cell(None if solved is None else f'{solved:.0%}', 6)} "
        f"{row['best_iqm']:>8.1f} "
        f"{columns.cell(zoo_value, 8)} {columns.cell(zoo_steps or None, 9, ',')} "
        f"{columns.cell(row['wall_s'], 7, '.0f')}"
    )


def write_suite_files(output_dir: str, results_dir: str) -> List[dict]:
    """suite.md and one curve plot per env (curves_<env>.png) of every classic set with
    results in ``output_dir``, and the performance profile of ``results_dir``'s result
    files; returns the rows (nothing is written without one)."""
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
    write_profile(results_dir)
    return rows


def write_profile(results_dir: str) -> Optional[str]:
    """Draws the performance profile of the result files in ``results_dir`` into
    ``results_dir/profile.png``; returns its path (None: no cell can be normalised)."""
    curves = scores.profile_curves(scores.read_results(results_dir))
    if not curves:
        return None
    path = os.path.join(results_dir, PROFILE_NAME)
    scores.plot_performance_profile(curves, path)
    return path


def suite_markdown(rows: Sequence[dict]) -> str:
    """The suite's table in Markdown."""
    lines = [
        "| set | env | steps | seeds | IQM [95% CI] | solved | best IQM [95% CI] | "
        "RL-Zoo (steps) | median wall s |",
        "|---|---|---:|---:|---|---:|---|---|---:|",
    ]
    for row in rows:
        low, high = row["ci95"]
        best_low, best_high = row["best_ci95"]
        zoo = f"{row['rl_zoo']:g} ({row['rl_zoo_steps']:,})" if row["rl_zoo"] is not None else "-"
        wall = f"{row['wall_s']:.0f}" if row["wall_s"] is not None else "-"
        solved = row.get("solved_fraction")
        lines.append(
            f"| `{row['set']}` | {row['env']} | {row['steps']:,} | {row['runs']} | "
            f"{row['iqm']:.1f} [{low:.1f}, {high:.1f}] | "
            f"{'-' if solved is None else f'{solved:.0%}'} | "
            f"{row['best_iqm']:.1f} [{best_low:.1f}, {best_high:.1f}] | {zoo} | {wall} |"
        )
    return "\n".join(lines) + "\n"
