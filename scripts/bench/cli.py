"""Speed and learning benchmark: whole train.py runs, one table.

    python scripts/benchmark.py                      # ppo_cartpole, dqn_cartpole
    python scripts/benchmark.py --hparams ppo_cartpole --seeds 0 1 2
    python scripts/benchmark.py --peer --pairs 3     # side by side with Stable-Baselines3
    python scripts/benchmark.py --baseline ../rl-base  # beside an earlier commit's checkout
    python scripts/benchmark.py --suite classic      # every classic set, 10 seeds (5 on some)
    python scripts/benchmark.py --compare docs/results runs/suite/results  # P(B improves on A)
    python scripts/benchmark.py --suite classic --only ppo_cartpole --peer_seeds 10
                                                     # SB3 on the seeds of rl's 10 copies
    python scripts/benchmark.py --remote             # envs over gRPC against in-process

Each run is a fresh `python train.py` process, so wall time includes Python
and TensorFlow start-up, tracing and compilation, as a user sees it. The
table gives wall time, env steps per second in the training loop, the final
evaluation return and the first step at which evaluation reached the target.

With --peer (needs `pip install -e ".[bench]"`), each set is paired with
Stable-Baselines3 on the RL Zoo's settings for the same env: ppo_cartpole with its PPO,
dqn_cartpole with its DQN, sac_pendulum with its SAC (`--hparams sac_pendulum --peer`),
and, to check RL-Zoo's published values on this machine, dqn_mountain_car,
a2c_lunar_lander and a2c_mountain_car. Runs alternate rl, peer, rl, peer, ... (run i of
each side uses seed i); a peer run is a fresh `python scripts/benchmark.py
--_peer_run SET SEED STEPS` process, timed from outside exactly like
train.py, that learns as many env steps as the rl run before it and then
plays 20 greedy episodes. A short process first measures per-call costs of
this machine (a compiled TensorFlow call, a NumPy MLP forward, a CartPole
step), printed above the table. In its per-run rows, steps/s counts the
training call only (rl: Experiment.train with its evaluations; peer: learn);
the summary gives median wall times, their ratio rl/peer, and min/median of
the final evaluations.

With --baseline CHECKOUT, another rl checkout (say `git worktree add ../rl-base REV` of
an earlier commit) runs each set and seed too, with the same Python, before or after
this checkout's run in turn, so a change's effect on speed is read on one host in one
run, not across hosts whose speeds differ by a third. The rl-only table then gives each
run's checkout ("code": rl or base) and each set's ratio of median wall times; with
--peer the summary adds the baseline's median wall time, its ratio to the peer and this
checkout's ratio to it.

With --suite classic --peer_seeds N (the bench extra too), the sets' Stable-Baselines3
peers train instead of rl, on the seeds of rl's `--copies N` of each set, with the set's
budget and evaluations: each seed a `--_peer_seed SET SEED FOLDER` process that writes
<output_dir>/peers/<set>/seed_<S>/evaluations.json when done (scripts/bench/peer_seeds.py
says how it resumes and what peers/<set>/summary.json holds).

Flags it does not know go to the rl runs' train.py (the default table and --peer only;
checks.TRAIN_FLAGS_PASSED lists which). As with train.py, bad input (an unknown name, a number
out of range, a flag of another mode, an output path that cannot be written, a train.py
child's own refusal) ends in one line on stderr and exit code 2, checked before the
per-call costs and the runs.
"""

import argparse
import json
import os
import re
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rl import command_line
from rl.command_line import float_in_range, int_in_range
from rl.fields import MAX_SEED, MAX_STEPS
from rl.files import write_text_atomic
from rl.slots import MAX_COPIES
from scripts.bench import (
    checks,
    children,
    compare,
    costs,
    peer_checkpoints,
    peer_runs,
    peer_seeds,
    peer_settings,
    remote,
    suite,
    tables,
    workers,
)

MOST_RETURN = 1e9  # --target: a finite return, beyond any env's


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's flags, every mode's; a bad value ends in one line and exit 2."""
    parser = command_line.OneLineParser(prog=children.PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--hparams", nargs="+", default=["ppo_cartpole", "dqn_cartpole"])
    parser.add_argument(
        "--seeds", nargs="+", type=int_in_range(0, MAX_SEED), default=[0], help="without --peer"
    )
    parser.add_argument(
        "--train_steps",
        type=int_in_range(1, MAX_STEPS),
        default=None,
        help="env steps of each rl run (default: the set's own; with --workers 20,000); with "
        "--suite --peer_seeds, of each peer seed (a short check: the cells train the set's own)",
    )
    parser.add_argument(
        "--target",
        type=float_in_range(-MOST_RETURN, MOST_RETURN),
        default=475.0,
        help="evaluation return counted as solved",
    )
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument(
        "--peer", action="store_true", help="alternate runs with Stable-Baselines3 (PPO, DQN, SAC)"
    )
    parser.add_argument(
        "--pairs",
        type=int_in_range(1, MAX_COPIES),
        default=3,
        help="with --peer: rl/peer runs per set (seeds 0..N-1)",
    )
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="another rl checkout (a git worktree of an earlier commit) whose train.py also "
        "runs each set and seed (with --peer: each pair), so a change's speed is measured "
        "on one host in one run",
    )
    parser.add_argument(
        "--workers",
        action="store_true",
        help="env steps/s and peak memory against --num_workers (slow, CPU-bound envs)",
    )
    parser.add_argument(
        "--ray", action="store_true", help="with --workers: Ray actors beside processes"
    )
    parser.add_argument(
        "--suite",
        choices=("classic",),
        help="train every classic-control/Box2D set over 10 seeds (5 on MountainCar and in the "
        "long cells); a result file per set with IQMs, intervals and solved seeds",
    )
    parser.add_argument(
        "--suite_seeds",
        type=int_in_range(2, MAX_COPIES),  # a row is over train.py --copies, which needs 2 or more
        default=None,
        help=f"with --suite: runs (copies) of every set (default: {suite.CORE_SEEDS}, and "
        f"{suite.FEW_SEEDS} on MountainCar and in the long cells; scripts/bench/suite.py)",
    )
    parser.add_argument(
        "--suite_parallel",
        type=int_in_range(1, MAX_COPIES),
        default=os.cpu_count() or 1,
        help="with --suite: at once",
    )
    parser.add_argument(
        "--output_dir", default="runs/suite", help="with --suite: where runs and plots go"
    )
    parser.add_argument(
        "--results_dir",
        help="with --suite: where each set's result file (<set>.json) and the performance "
        "profile go (default: <output_dir>/results; docs/results for the docs' page)",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="two folders of result files (docs/results, a suite's <output_dir>/results): "
        "per set in both, the probability that B improves on A, and each one's IQM",
    )
    parser.add_argument(
        "--profile",
        metavar="RESULTS_DIR",
        help="draw the performance profile of a folder of result files into "
        "RESULTS_DIR/profile.png",
    )
    parser.add_argument(
        "--peer_seeds",
        type=int_in_range(1, MAX_COPIES),
        help="with --suite: instead of rl, train each set's Stable-Baselines3 peer (RL-Zoo's "
        "settings, the set's budget and evaluations) on the seeds of rl's N copies, seed by "
        "seed, resuming; then <output_dir>/peers/<set>/summary.json",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        help="with --suite: just these sets (suite.md and the plots keep the other sets' rows)",
    )
    parser.add_argument(
        "--remote",
        action="store_true",
        help="env steps/s over gRPC (unary, streaming) against in-process, and PPO throughput",
    )
    parser.add_argument(
        "--calls",
        type=int_in_range(1, MAX_STEPS),
        default=3000,
        help="with --remote: steps per row",
    )
    # The processes this script starts for the peer and the per-call costs.
    parser.add_argument("--_peer_run", nargs=3, metavar="SET_SEED_STEPS", help=argparse.SUPPRESS)
    parser.add_argument(
        "--peer_checkpoints",
        help="with --_peer_run: save the peer into this folder and resume it from there "
        "(runs of hours that outlive a session); the folder is tied to the set, seed and "
        f"steps of its first run ({peer_checkpoints.PEER_MANIFEST})",
    )
    parser.add_argument(
        "--peer_checkpoint_steps",
        type=int_in_range(1, MAX_STEPS),
        default=peer_runs.PEER_CHECKPOINT_STEPS,
        help="with --peer_checkpoints: env steps between saves",
    )
    parser.add_argument("--_peer_seed", nargs=3, metavar="SET_SEED_FOLDER", help=argparse.SUPPRESS)
    parser.add_argument("--_costs", action="store_true", help=argparse.SUPPRESS)
    return parser


# The flags each mode reads ("table": the rl-only table, no mode flag); a flag given to a
# mode that does not read it is refused rather than dropped.
MODE_FLAGS: Dict[str, Tuple[str, ...]] = {
    "table": ("hparams", "seeds", "train_steps", "target", "json", "baseline"),
    "peer": ("hparams", "pairs", "train_steps", "json", "baseline"),
    "suite": (
        "only",
        "suite_seeds",
        "suite_parallel",
        "peer_seeds",
        "train_steps",
        "output_dir",
        "results_dir",
        "json",
    ),
    "compare": ("json",),
    "profile": (),
    "workers": ("ray", "train_steps", "json"),
    "remote": ("calls", "json"),
    "_peer_run": ("peer_checkpoints", "peer_checkpoint_steps"),
    "_peer_seed": ("train_steps",),
    "_costs": (),
}
# Modes whose rl runs get the flags benchmark.py does not know (they go to train.py).
MODES_PASSING_FLAGS = ("table", "peer")


def mode_name(mode: str) -> str:
    """How a message names ``mode``: its flag, or the rl-only table's description."""
    return "the rl-only table (no mode flag)" if mode == "table" else f"--{mode}"


def given_flags(argv: List[str]) -> List[str]:
    """The flags (argparse dests) on the command line, whether or not at their defaults."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS  # so only the flags given are set
    given, _ = parser.parse_known_args(argv)
    return sorted(vars(given))


def chosen_mode(given: Sequence[str]) -> str:
    """The one mode asked for (exit 2 for two), "table" for none."""
    modes = [mode for mode in MODE_FLAGS if mode in given]
    if len(modes) > 1:
        children.fail(
            f"{' and '.join(f'--{m}' for m in modes)} are separate modes; give one of them"
        )
    return modes[0] if modes else "table"


def check_mode_flags(mode: str, given: Sequence[str], extra: List[str]) -> None:
    """Ends the process (exit 2) for a flag ``mode`` does not read, naming the mode that does."""
    for flag in given:
        if flag in MODE_FLAGS or flag in MODE_FLAGS[mode]:
            continue
        readers = [mode_name(m) for m in MODE_FLAGS if flag in MODE_FLAGS[m]]
        children.fail(f"--{flag} is for {' or '.join(readers)}, not {mode_name(mode)}; remove it")
    if extra and mode not in MODES_PASSING_FLAGS:
        children.fail(
            f"unrecognized arguments: {' '.join(extra)} ({mode_name(mode)} passes no flags on "
            "to train.py; see --help)"
        )


def run_peer_process(args: argparse.Namespace) -> int:
    """--_peer_run: one peer run in this process, its result as a JSON line."""
    name, seed, steps = checks.peer_run_args(args._peer_run)
    checks.check_peer_checkpoints(args.peer_checkpoints)
    error = peer_settings.missing_bench_extra("--_peer_run")
    if error:
        children.fail(error)
    result = peer_runs.peer_run(
        name, seed, steps, args.peer_checkpoints, args.peer_checkpoint_steps
    )
    print(json.dumps(result))
    return 0


def run_peer_seed_process(args: argparse.Namespace) -> int:
    """--_peer_seed: one seed of a set's peer in this process (--peer_seeds starts it)."""
    name, seed, folder = checks.peer_seed_args(args._peer_seed)
    error = peer_settings.missing_bench_extra("--_peer_seed")
    if error:
        children.fail(error)
    peer_runs.peer_seed_run(name, seed, folder, args.train_steps)
    return 0


def prepare_peer_seeds(args: argparse.Namespace, given: Sequence[str]) -> Callable[[], object]:
    """--suite classic --peer_seeds N: its inputs checked (exit 2 on a bad one) before any
    training; returns its run."""
    for flag in ("suite_seeds", "suite_parallel"):  # rl's copies only
        if flag in given:
            children.fail(
                f"--{flag} is for rl's copies; with --peer_seeds the peer's seeds train one "
                "at a time: remove it"
            )
    output_dir = os.path.abspath(args.output_dir)
    suite.suite_selection(args.only)  # an --only set outside the suite: exit 2
    classic = [name for name, *_ in suite.classic_sets()]
    names = peer_seeds.peer_seed_sets(args.only, classic)
    # The folder only: rl's rows are not read (the peer's summaries do not need them).
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        children.fail(f"--output_dir {output_dir} is a file; name a folder for the suite's runs")
    peer_seeds.check_peer_seed_sets(names)
    error = peer_settings.missing_bench_extra("--peer_seeds")
    if error:
        children.fail(error)
    peer_seeds.check_peer_seed_folders(output_dir, names, args.peer_seeds, args.train_steps)
    return lambda: peer_seeds.run_peer_seeds(
        output_dir, names, args.peer_seeds, args.train_steps, args.output_dir
    )


def prepare_mode(
    mode: str, args: argparse.Namespace, extra: List[str], given: Sequence[str]
) -> Callable[[], object]:
    """Checks the inputs of ``mode`` (exit 2 on a bad one) before any slow work; returns
    the run of the mode, which gives the report."""
    checks.check_json_path(args.json)
    if mode == "suite" and args.peer_seeds is not None:
        return prepare_peer_seeds(args, given)
    if mode == "suite":
        if args.train_steps is not None:
            children.fail(
                "--train_steps is for the peer's seeds of --suite (with --peer_seeds); rl's "
                "copies train each set's own budget: remove it"
            )
        output_dir = os.path.abspath(args.output_dir)  # train.py runs from ROOT
        results_dir = os.path.abspath(
            args.results_dir or os.path.join(output_dir, suite.RESULTS_NAME)
        )
        sets = suite.suite_selection(args.only)
        suite.check_suite_folder(output_dir, results_dir, sets, args.suite_seeds)
        return lambda: suite.run_suite(
            output_dir, results_dir, args.suite_seeds, args.suite_parallel, sets,
            costs.print_machine_costs(),
        )  # fmt: skip
    if mode == "compare":
        before, after = (checks.check_results_folder(f, "--compare") for f in args.compare)
        return lambda: compare.run_compare(args.compare, before, after)
    if mode == "profile":
        checks.check_results_folder(args.profile)
        return lambda: draw_profile(args.profile)
    if mode == "remote":
        return lambda: remote.run_remote_table(args.calls)
    if mode == "workers":
        train_steps = 20_000 if args.train_steps is None else args.train_steps
        return lambda: workers.run_workers_table(train_steps, args.ray)
    train_flags = checks.parse_train_flags(extra)
    baseline = checks.checked_baseline(args.baseline)
    if mode == "peer":
        error = checks.peer_error(args.hparams, args.pairs)
        if error:
            children.fail(error)
        checks.check_rl_sets(args.hparams, range(args.pairs), args.train_steps, train_flags)
        return lambda: tables.run_peer_report(
            args.hparams, args.pairs, args.train_steps, extra, baseline
        )
    checks.check_rl_sets(args.hparams, args.seeds, args.train_steps, train_flags)
    return lambda: tables.run_table(
        args.hparams, args.seeds, args.train_steps, args.target, extra, baseline
    )


def draw_profile(results_dir: str) -> Dict[str, str]:
    """--profile: draws the performance profile of ``results_dir`` and says where (exit 2
    when no result there can be normalised)."""
    path = suite.write_profile(results_dir)
    if path is None:
        children.fail(
            f"--profile {results_dir}: no result file has per-seed final returns on a classic "
            'env with an RL-Zoo value (its "peer"), so none can be normalised'
        )
    print(f"wrote {path}")
    return {"profile": path}


def report_child_failure(error: children.ChildFailed) -> int:
    """A failed child: its one-line bad-input error (exit 2) becomes this script's one line;
    anything else shows the end of its output and exit code 1. The rows measured before
    it are already printed (and the suite's files written)."""
    lines = [line for line in error.stderr.splitlines() if line.strip()]
    command = children.describe_command(error.command)
    if error.code == 2 and lines:
        message = re.sub(r"^[\w.]+: error: ", "", lines[-1])  # the child's own prefix
        children.fail(f"{command}: {message}")
    print("\n".join(lines[-20:]), file=sys.stderr)
    print(
        f"{children.PROG}: {command} failed with exit code {error.code} (the end of its "
        "output above); the rows measured before it are printed above",
        file=sys.stderr,
    )
    return 1


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the benchmark; returns the exit code (a bad input exits with 2 itself).

    Args:
      argv: the flags (None: this process's command line).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args, extra = build_parser().parse_known_args(argv)
    given = given_flags(argv)
    mode = chosen_mode(given)
    check_mode_flags(mode, given, extra)
    if mode == "_peer_run":
        return run_peer_process(args)
    if mode == "_peer_seed":
        return run_peer_seed_process(args)
    if mode == "_costs":
        print(json.dumps(costs.machine_costs(costs.COST_CALLS)))
        return 0
    run_mode = prepare_mode(mode, args, extra, given)
    try:
        if mode in ("remote", "workers"):
            costs.print_machine_costs()
        report = run_mode()
    except children.ChildFailed as e:
        return report_child_failure(e)
    if args.json:
        write_text_atomic(args.json, json.dumps(report, indent=2))
    return 0
