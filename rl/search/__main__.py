"""Hyperparameter search: ``python -m rl.search`` (docs/guides/search.md).

    python -m rl.search --hparams ppo_cartpole --space ppo_basic --trials 40 \\
        --output_dir runs/search [--parallel N] [--sys local|ray] [--storage URL] \\
        [--sampler tpe|random] [--pruner median|asha|none] [--train_steps N] [--seed S] \\
        [--copies N [--copies_parallel P]]

Each trial trains ``train.py`` into ``<output_dir>/trial_<n>``; rerunning the same command
continues the search. Bad input (an unknown field, a distribution outside a field's
limits, a study started with other settings) is one line on stderr and exit code 2,
before anything is written. Exit codes: 0 done with a complete trial, 1 done without one,
2 bad input, 128 + signal when stopped by one.
"""

import argparse
import os
import shlex
import sys
from typing import List, NoReturn, Optional, Sequence

from rl import command_line, plugins
from rl.command_line import int_in_range
from rl.errors import PluginError, RunConflictError, SystemUnavailableError, UnknownNameError
from rl.fields import MAX_STEPS
from rl.hparams.base import HParamsError, int_field_range, split_overrides
from rl.search.space import NAMED_SPACES, SpaceError, check_space, read_space
from rl.search.trials import ROOT
from rl.slots import MAX_COPIES, check_copies

# The other modules of rl are imported inside the functions: rl.search.study and the
# hparams load Gymnasium and TensorBoard, which --help and a flag mistake answer without.

PROG = "python -m rl.search"
# The most --trials (and trials at once): each is a train.py run with a folder of its own;
# the bound turns a typo into an error instead of a study that never ends.
MAX_TRIALS = 10_000


def fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2 (rl/command_line.py)."""
    command_line.fail(PROG, message)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line's flags; bad ones end the process (exit 2).

    Args:
        argv: the arguments after the program name.
    """
    # late: the study loads Gymnasium and TensorBoard, which --help does without
    from rl.search.study import DEFAULT_STUDY_NAME, PRUNERS, SAMPLERS, SYSTEMS

    parser = command_line.OneLineParser(
        prog=PROG, description="Searches hyperparameters with Optuna; see docs/guides/search.md."
    )
    parser.add_argument(
        "--hparams", required=True, help="registered hparams set, e.g. ppo_cartpole"
    )
    parser.add_argument(
        "--space",
        required=True,
        help=f"a YAML or JSON space file, or a named space ({', '.join(sorted(NAMED_SPACES))})",
    )
    parser.add_argument("--output_dir", required=True, help="the search's folder")
    parser.add_argument(
        "--trials",
        required=True,
        type=int_in_range(1, MAX_TRIALS),
        help="done trials the study should hold",
    )
    parser.add_argument(
        "--parallel", type=int_in_range(1, MAX_TRIALS), default=1, help="trials at once (default 1)"
    )
    parser.add_argument(
        "--sys",
        choices=SYSTEMS,
        default="local",
        help="local: trials as subprocesses here; ray: each in a Ray actor (RAY_ADDRESS, "
        "else a local Ray)",
    )
    parser.add_argument(
        "--storage", help="Optuna storage URL (default: sqlite in OUTPUT_DIR/study.db)"
    )
    parser.add_argument(
        "--study_name", default=DEFAULT_STUDY_NAME, help="the study's name in the storage"
    )
    parser.add_argument("--sampler", choices=SAMPLERS, default="tpe")
    parser.add_argument("--pruner", choices=PRUNERS, default="median")
    parser.add_argument(
        "--pruner_startup_trials",
        type=int_in_range(0, MAX_TRIALS),
        help="median: complete trials before any pruning (default 5)",
    )
    parser.add_argument(
        "--pruner_warmup_steps",
        type=int_in_range(0, MAX_STEPS),
        help="median: env steps before a trial can be pruned (default 0); asha: the first "
        "rung's step (default: Optuna's auto)",
    )
    parser.add_argument(
        "--hparam_override", default="", help="overrides every trial shares, as in train.py"
    )
    parser.add_argument(
        "--train_steps",
        type=int_in_range(*int_field_range("train_steps")),
        help="every trial's --train_steps",
    )
    parser.add_argument(
        "--seed",
        type=int_in_range(*int_field_range("seed")),
        help="every trial's --seed; also seeds the sampler",
    )
    parser.add_argument(
        "--copies",
        type=int_in_range(1, MAX_COPIES),
        default=1,
        help="train each trial as N copies with seeds from its seed (train.py --copies) and "
        "score the interquartile mean of their final evaluations (default 1)",
    )
    parser.add_argument(
        "--copies_parallel",
        type=int_in_range(1, MAX_COPIES),
        help="how many of a trial's copies train at once (default 1; needs --copies)",
    )
    parser.add_argument(
        "--plugins",
        action="append",
        default=[],
        help="module to import first (repeatable), as in train.py; every trial imports it too",
    )
    return parser.parse_args(list(argv))


def user_errors() -> tuple:
    """Exception types that mean bad input (one line, exit 2)."""
    return (
        SpaceError,
        HParamsError,
        UnknownNameError,
        RunConflictError,
        SystemUnavailableError,
        PluginError,
    )


def build_config(args: argparse.Namespace):
    """The SearchConfig the flags ask for, with the space checked; nothing is written.

    Raises:
        The user_errors() types.
    """
    # late: the catalog, resolving and the study load Gymnasium (and TensorBoard)
    from rl import catalog  # noqa: F401  (fills the registries)
    from rl.hparams.resolve import resolve_hparams
    from rl.search.study import DEFAULT_STARTUP_TRIALS, SearchConfig

    if args.pruner_startup_trials is not None and args.pruner != "median":
        raise HParamsError(f"--pruner_startup_trials is for --pruner median, not {args.pruner}")
    if args.pruner_warmup_steps is not None and args.pruner == "none":
        raise HParamsError("--pruner_warmup_steps is for --pruner median or asha, not none")
    check_copies(args.copies, args.copies_parallel)  # as train.py checks them
    loaded = plugins.load(args.plugins)  # before the set is looked up: it may be a plugin's
    base = resolve_hparams(
        args.hparams, args.hparam_override, train_steps=args.train_steps, seed=args.seed
    )
    if base.eval_episodes < 1:
        raise HParamsError(
            "a search scores trials by their evaluations: eval_episodes must be at least 1"
        )
    fixed = [pair.split("=", 1)[0].strip() for pair in split_overrides(args.hparam_override)]
    label, raw = read_space(args.space)
    startup = args.pruner_startup_trials
    return SearchConfig(
        hparams=args.hparams,
        base=base,
        space=check_space(raw, base, label, fixed),
        output_dir=os.path.abspath(args.output_dir),
        trials=args.trials,
        fixed_overrides=args.hparam_override,
        train_steps=args.train_steps,
        seed=args.seed,
        parallel=args.parallel,
        system=args.sys,
        storage=args.storage,
        study_name=args.study_name,
        sampler=args.sampler,
        pruner=args.pruner,
        pruner_startup_trials=DEFAULT_STARTUP_TRIALS if startup is None else startup,
        plugins=tuple(loaded),
        workdir=os.getcwd() if loaded else ROOT,  # plugins are found from the user's folder
        pruner_warmup_steps=args.pruner_warmup_steps or 0,
        copies=args.copies,
        copies_parallel=args.copies_parallel or 1,
    )


def run(config, say) -> int:
    """Runs the search in ``config`` and reports it; returns the exit code.

    Raises:
        The user_errors() types, before any trial starts.
    """
    from rl.search import report, study  # late: they load Gymnasium and TensorBoard

    check = study.load_existing_study(config)
    study.check_resume(config, check)
    lock = study.lock_output_dir(config.output_dir)
    try:
        the_study = study.open_study(config)
        study.fail_stale_trials(the_study, config, say)
        if config.system == "ray" and study.done_count(the_study) < config.trials:
            study.connect_ray(config)
        report.write_results(the_study, config)
        stopped_by = study.Search(
            config, the_study, say, on_finish=lambda: report.write_results(the_study, config)
        ).run()
    finally:
        if config.system == "ray":
            study.disconnect_ray()
    best = report.write_results(the_study, config)
    print(report.format_table(report.trial_rows(the_study)), flush=True)
    for line in report.write_plots(the_study, config.output_dir):
        say(line)
    done = study.done_count(the_study)
    say(f"{done} of {config.trials} trials done; results in {config.output_dir}")
    if best is not None:
        print(f"best: trial {best['number']}, {best['objective']} {best['value']:.1f}")
        print(f"--hparam_override {shlex.quote(best['hparam_override'])}", flush=True)
    os.close(lock)
    if stopped_by is not None:
        return 128 + int(stopped_by)
    return 0 if best is not None else 1


def main(argv: Optional[List[str]] = None) -> int:
    """The command line: checks everything, then searches.

    Args:
        argv: the arguments after the program name (default sys.argv[1:]).
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from rl.search.study import say_line  # late: it loads Gymnasium and TensorBoard

    try:
        config = build_config(args)
        return run(config, say_line)
    except user_errors() as e:
        fail(str(e))


if __name__ == "__main__":
    sys.exit(main())
