"""The command line of train.py: flags, their checks and one-line errors.

Every user mistake (unknown name, bad override or flag value, missing flag,
conflicting output_dir, unreadable checkpoint) ends as one line on stderr and
exit code 2, raised before anything is written.
"""

import dataclasses
import difflib
import json
import math
import os
import re
import signal
import sys
import warnings
from typing import Any, Callable, Dict, List, NoReturn, Optional

from absl import flags
from absl import logging as absl_logging

from rl import _tf, plugins, registry, seeding, slots
from rl.best import BEST, CHECKPOINT_CHOICES, LATEST
from rl.errors import USER_ERRORS, EnvError, EnvServerError, PluginError, one_line
from rl.files import read_json_object, set_aside, write_text_atomic
from rl.hparams.base import int_field_range
from rl.processes import (
    MAX_ROUNDS_AHEAD,
    OFF_POLICY_ROUNDS_AHEAD,
    ON_POLICY_ROUNDS_AHEAD,
    WORKER_TIMEOUT_SECONDS,
    interrupt_early,
    tf_thread_share,
)
from rl.snapshot import FLAGS_FILE, SNAPSHOT_DIR

FLAGS = flags.FLAGS
PROG = "train.py"
# Exit codes of a run that failed (2 is bad input); each failure kind of a training
# result (rl/experiment.py) has its own.
EXIT_NON_FINITE = 3  # training produced a non-finite loss or weights
EXIT_WORKERS = 4  # actor processes failed more often than --worker_restarts allows
EXIT_ENV_SERVER = 5  # a grpc:// env server went away (or its env raised) during training
EXIT_ENV = 6  # the env raised (being made, in a step or an evaluation) or an async copy hung
EXIT_FILES = 7  # a file of the run could not be written (a full disk, a file for a folder)
FAILURE_EXITS = {
    "non_finite": EXIT_NON_FINITE,
    "workers": EXIT_WORKERS,
    "env_server": EXIT_ENV_SERVER,
    "env": EXIT_ENV,
    "files": EXIT_FILES,
}


TRAINING, TEST, BOTH = "training", "test", "both"  # the modes that read a flag

# The most --cpu_replicas: logical CPU devices only test the multi-device code path (the
# CPU's cores are shared by all of them), and TensorFlow's set-up grows with their number:
# 4096 took 24 s and 1.1 GB here, 100000 spun for minutes.
MAX_CPU_REPLICAS = 64
# The most --worker_restarts in one --worker_restart_window: a restart takes about a
# second, so more could not happen in any window; it only guards against typos.
MAX_WORKER_RESTARTS = 10_000
MAX_RESTART_WINDOW = 7 * 24 * 3600.0  # seconds: a week, longer than any run's restarts


def hparam_range(name: str) -> Dict[str, int]:
    """absl bounds of a flag that sets hparam ``name``: the range its field declares."""
    low, high = int_field_range(name)
    return {"lower_bound": low, "upper_bound": high}


class FiniteFloatParser(flags.FloatParser):
    """absl's float parser with both bounds, refusing nan too (nan < low is False).

    Not ``DEFINE_float`` with a ``register_validator(math.isfinite)``: that is as much
    code, states the range twice (the bounds and the validator's message), and gives nan
    another message than inf or an out-of-range value; here all three say "is not a
    number in the range [low, high]", as --help does.
    """

    def is_outside_bounds(self, val: float) -> bool:
        return math.isnan(val) or super().is_outside_bounds(val)


def define_finite_float(
    name: str, default: float, help: str, lower_bound: float, upper_bound: float
) -> None:
    """``flags.DEFINE_float`` whose value must be a finite number in the bounds."""
    flags.DEFINE(
        FiniteFloatParser(lower_bound, upper_bound),
        name,
        default,
        help,
        serializer=flags.ArgumentSerializer(),
    )


@dataclasses.dataclass(frozen=True)
class Flag:
    """One of train.py's flags: how absl defines it, and who reads it.

    Attributes:
        name: the flag's name.
        define: absl's definer (``flags.DEFINE_string``, ...).
        default: its default.
        help: its --help text.
        mode: TRAINING or TEST when only that mode reads it (the other refuses it), else BOTH.
        system: the --sys target that alone reads it, if one (others refuse it).
        tracking: only --tracking mlflow reads it (without it the flag is refused).
        workers: only actor processes read it (refused with --num_workers 0).
        to_copies: --copies N passes it on to each copy's train.py (the ones that are
            each copy's own, or this process's, are not).
        options: more arguments for ``define`` (``lower_bound``, ``enum_values``).
    """

    name: str
    define: Callable[..., Any]
    default: Any
    help: str
    mode: str = BOTH
    system: Optional[str] = None
    tracking: bool = False
    workers: bool = False
    to_copies: bool = True
    options: Dict[str, Any] = dataclasses.field(default_factory=dict)


# train.py's flags, once: --help, the mode, --sys and --tracking checks and what
# --copies passes to each copy all read this table.
FLAG_TABLE = (
    Flag("sys", flags.DEFINE_string, "local", "Where to run: a registered --sys target."),
    Flag(
        "ray_address",
        flags.DEFINE_string,
        None,
        "With --sys ray: the cluster to attach to (host:port or auto; default the "
        "RAY_ADDRESS variable, else a local Ray for this run).",
        system="ray",
    ),
    Flag(
        "tpu",
        flags.DEFINE_string,
        None,
        "With --sys tpu: the Cloud TPU's name or grpc://address ('local' on a TPU VM).",
        system="tpu",
    ),
    Flag(
        "cpu_replicas",
        flags.DEFINE_integer,
        None,
        "With --sys mirrored: split the CPU into N logical devices, one replica each "
        "(without it the replicas are the visible GPUs).",
        system="mirrored",
        options={"lower_bound": 2, "upper_bound": MAX_CPU_REPLICAS},
    ),
    Flag(
        "hparams",
        flags.DEFINE_string,
        None,
        "Registered hparams set, e.g. ppo_cartpole (default: the run in --output_dir).",
        mode=TRAINING,
    ),
    Flag(
        "hparam_override",
        flags.DEFINE_string,
        "",
        'Overrides, e.g. "learning_rate=1e-3,hidden_sizes=[128,128]".',
        mode=TRAINING,
    ),
    Flag(
        "env",
        flags.DEFINE_string,
        None,
        "Registered env name, Gymnasium id, or grpc://host:port/ID of an env server "
        "(overrides the hparams' env).",
        mode=TRAINING,
    ),
    Flag(
        "plugins",
        flags.DEFINE_multi_string,
        [],
        "Python modules to import first (repeatable), e.g. my_pkg.my_rl: they register "
        "agents, models, losses, envs or hparam sets. A resumed run reloads its own.",
    ),
    Flag(
        "output_dir",
        flags.DEFINE_string,
        None,
        "Folder for checkpoints, logs, videos.",
        to_copies=False,  # each copy has its run_<i>
    ),
    Flag(
        "train_steps",
        flags.DEFINE_integer,
        None,
        "Total env steps (overrides hparams).",
        mode=TRAINING,
        options=hparam_range("train_steps"),
    ),
    Flag(
        "eval_episodes",
        flags.DEFINE_integer,
        None,
        "Episodes per evaluation, acted with the hparams' eval_act_select (greedy unless "
        "the set says otherwise); 0: no evaluation (overrides hparams).",
        mode=TRAINING,
        options=hparam_range("eval_episodes"),
    ),
    Flag(
        "seed",
        flags.DEFINE_integer,
        None,
        "Random seed (overrides hparams).",
        mode=TRAINING,
        to_copies=False,  # each copy has its own, derived from this one
        options=hparam_range("seed"),
    ),
    Flag(
        "list",
        flags.DEFINE_bool,
        False,
        "Print every registered name by kind and exit.",
        to_copies=False,
    ),
    Flag(
        "allow_hparam_change",
        flags.DEFINE_bool,
        False,
        "Resume a run in --output_dir with hparams that differ "
        "from its hparams.json (the old file is kept).",
        mode=TRAINING,
    ),
    Flag(
        "training",
        flags.DEFINE_bool,
        True,
        "false: load the latest checkpoint in --output_dir (or the best, --checkpoint) "
        "and run --test_episodes evaluation episodes into test.json; nothing "
        "is trained or overwritten.",
        to_copies=False,  # copies train
    ),
    Flag(
        "checkpoint",
        flags.DEFINE_enum,
        LATEST,
        "Which checkpoint --training=false tests: latest, or best (that of the run's "
        "best evaluation, best/ckpt-<step>/).",
        mode=TEST,
        to_copies=False,
        options={"enum_values": list(CHECKPOINT_CHOICES)},
    ),
    Flag(
        "test_episodes",
        flags.DEFINE_integer,
        10,
        "Episodes of --training=false.",
        mode=TEST,
        to_copies=False,
        options={**hparam_range("eval_episodes"), "lower_bound": 1},  # as many as evaluations
    ),
    Flag(
        "copies",
        flags.DEFINE_integer,
        1,
        "Train N independent copies into --output_dir/run_<i>: run_0 with --seed (the run "
        "without --copies), the others with seeds derived from it; then "
        "write summary.json and curves.png (N at most 1000: all are checked before the "
        "first trains). Rerun with a larger N to grow the folder: finished copies are kept, "
        "the new ones train.",
        mode=TRAINING,
        to_copies=False,  # a copy is one run
        options={"lower_bound": 1, "upper_bound": slots.MAX_COPIES},
    ),
    Flag(
        "copies_parallel",
        flags.DEFINE_integer,
        1,
        "How many copies run at once (each in its own process when > 1).",
        mode=TRAINING,
        to_copies=False,
        options={"lower_bound": 1, "upper_bound": slots.MAX_COPIES},
    ),
    Flag(
        "num_workers",
        flags.DEFINE_integer,
        0,
        "Actor processes stepping the env copies (num_envs is shared among them) "
        "and feeding the learner in this process; 0: this process acts and learns.",
        mode=TRAINING,
        # Each worker steps at least one of the num_envs copies.
        options={**hparam_range("num_envs"), "lower_bound": 0},
    ),
    Flag(
        "worker_restarts",
        flags.DEFINE_integer,
        5,
        "With --num_workers: failed workers restarted within --worker_restart_window "
        "seconds before training stops (keeping its last checkpoint).",
        mode=TRAINING,
        options={"lower_bound": 0, "upper_bound": MAX_WORKER_RESTARTS},
        workers=True,
    ),
    Flag(
        "worker_restart_window",
        define_finite_float,
        300.0,
        "Seconds over which --worker_restarts counts failures.",
        mode=TRAINING,
        options={"lower_bound": 1.0, "upper_bound": MAX_RESTART_WINDOW},
        workers=True,
    ),
    Flag(
        "worker_timeout",
        define_finite_float,
        WORKER_TIMEOUT_SECONDS,
        "With --num_workers: a worker that sends nothing for this many seconds while it "
        "owes a round (hung, or stopped by SIGSTOP) is killed and restarted.",
        mode=TRAINING,
        options={"lower_bound": 1.0, "upper_bound": 86400.0},
        workers=True,
    ),
    Flag(
        "worker_rounds_ahead",
        flags.DEFINE_integer,
        None,
        "With --num_workers: rounds each worker may play beyond the one the learner "
        "learns from. Default: the learner's own choice, "
        f"{ON_POLICY_ROUNDS_AHEAD} on-policy (PPO, A2C, VPG), {OFF_POLICY_ROUNDS_AHEAD} "
        "off-policy (the DQN family, SAC, TD3, DDPG, IMPALA: actors act on older weights "
        f"and wait less). With {ON_POLICY_ROUNDS_AHEAD} a seed gives the run without workers "
        "where rl/agents/experience.py says so.",
        mode=TRAINING,
        options={"lower_bound": 1, "upper_bound": MAX_ROUNDS_AHEAD},
        workers=True,
    ),
    Flag(
        "record_video",
        flags.DEFINE_bool,
        False,
        "Record evaluation episodes (every hparams.video_interval "
        "steps; 0: every evaluation) and test episodes to "
        "--output_dir/videos as MP4 and GIF.",
    ),
    Flag(
        "render",
        flags.DEFINE_bool,
        False,
        "Show evaluation/test episodes on screen; without a display, says so once and carries on.",
        to_copies=False,  # not N windows at once
    ),
    # Experiment tracking besides TensorBoard (rl/tracking.py; make_tracker refuses others).
    Flag(
        "tracking",
        flags.DEFINE_enum,
        "none",
        "Also copy the run to an experiment tracker: mlflow (one MLflow run per run, "
        "continued on resume; the tracking extra). TensorBoard is always written.",
        mode=TRAINING,
        options={"enum_values": ["none", "mlflow"]},
    ),
    Flag(
        "tracking_uri",
        flags.DEFINE_string,
        None,
        "With --tracking mlflow: any MLflow tracking URI (default: the run's own, else "
        "sqlite:///<parent of --output_dir>/mlruns.db).",
        mode=TRAINING,
        tracking=True,
    ),
    Flag(
        "tracking_experiment",
        flags.DEFINE_string,
        None,
        "With --tracking mlflow: the MLflow experiment of a new run (default: the --hparams name).",
        mode=TRAINING,
        tracking=True,
    ),
)

# Flags that only training reads, and only --training=false reads: giving one
# to the other mode is refused rather than silently ignored.
TRAINING_ONLY = tuple(flag.name for flag in FLAG_TABLE if flag.mode == TRAINING)
TEST_ONLY = tuple(flag.name for flag in FLAG_TABLE if flag.mode == TEST)
# Flags that only one --sys target reads, and only --tracking mlflow reads.
SYSTEM_FLAGS = {flag.name: flag.system for flag in FLAG_TABLE if flag.system}
TRACKING_FLAGS = tuple(flag.name for flag in FLAG_TABLE if flag.tracking)
# Flags that only actor processes (--num_workers N) read.
WORKER_FLAGS = tuple(flag.name for flag in FLAG_TABLE if flag.workers)


def define_flags() -> None:
    """Defines train.py's flags (once per process), from ``FLAG_TABLE``."""
    for flag in FLAG_TABLE:
        flag.define(flag.name, flag.default, help=flag.help, **flag.options)


HELP_FLAGS = {"--help", "-h", "-?", "--helpshort", "--helpfull", "--helpxml"}


def fail(message: str) -> NoReturn:
    """One line on stderr (control characters in it escaped), exit code 2."""
    print(f"{PROG}: error: {one_line(message)}", file=sys.stderr, flush=True)
    sys.exit(2)


def parse_flags_or_exit(argv: List[str]) -> List[str]:
    """absl's parser, with bad flags turned into one line and exit code 2."""
    try:
        return FLAGS(argv)
    except flags.UnrecognizedFlagError as e:
        fail(unknown_flag_message(e))
    except flags.Error as e:
        fail(flag_error_message(e))
    except SystemExit as e:
        # absl's --help/--helpshort/--helpfull print the flags, then exit 1; asking
        # for help is not a failure.
        sys.exit(0 if e.code == 1 and HELP_FLAGS & set(argv) else e.code)


def unknown_flag_message(error: flags.UnrecognizedFlagError) -> str:
    """absl's "Unknown command line flag 'x'", with the nearest flags and where all are."""
    ours = [flag.name for flag in FLAGS.get_flags_for_module(__name__)]
    near = difflib.get_close_matches(error.flagname, ours, n=3)
    hint = f"did you mean {', '.join('--' + name for name in near)}? " if near else ""
    return f"unknown flag --{error.flagname}; {hint}{PROG} --help lists the flags"


def flag_error_message(error: flags.Error) -> str:
    """absl's error in one line; for "flag --x=v: <why>", saying what --x takes where
    <why> is Python's own ("invalid literal for int() with base 10: 'v'")."""
    line = str(error)  # whole: a value may hold a newline (fail escapes it)
    if not isinstance(error, flags.IllegalFlagValueError):
        return line
    match = re.match(r"flag --(\w+)=(.*?): ", line, re.DOTALL)
    if match is None or match.group(1) not in FLAGS:
        return line
    parser = FLAGS[match.group(1)].parser
    takes = "true or false" if isinstance(parser, flags.BooleanParser) else parser.syntactic_help
    if not takes or takes in line:
        return line  # absl's own: "0 is not a positive integer"
    return f"{match.group(0)}{match.group(2)!r} is not {takes}"


def check_mode_flags() -> None:
    """Flags given for the other mode end the process (exit 2)."""
    unused = TRAINING_ONLY if not FLAGS.training else TEST_ONLY
    given = [f"--{name}" for name in unused if FLAGS[name].present]
    if given:
        mode = (
            "--training=false (it tests the run's own hparams)"
            if not FLAGS.training
            else "training"
        )
        fail(
            f"{', '.join(given)} cannot be used with {mode}; remove {'it' if len(given) == 1 else 'them'}"
        )


def check_override_flag() -> None:
    """--hparam_override given more than once ends the process (exit 2): absl keeps only
    the last, so the others would be dropped without a word."""
    times = FLAGS["hparam_override"].present
    if times > 1:
        fail(
            f"--hparam_override is given {times} times, and only the last would count; give "
            'it once with the overrides comma-separated, e.g. "learning_rate=1e-3,num_envs=8"'
        )


def check_worker_flags() -> None:
    """Flags for actor processes given without them end the process (exit 2)."""
    given = [f"--{name}" for name in WORKER_FLAGS if FLAGS[name].present]
    if given and FLAGS.num_workers == 0:
        fail(
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for actor processes, "
            "which --num_workers 0 has none of; add --num_workers N or remove "
            f"{'it' if len(given) == 1 else 'them'}"
        )


def system_options() -> dict:
    """The --sys target's settings from its flags."""
    return {name: FLAGS[name].value for name in SYSTEM_FLAGS}


def check_early():
    """Every check that needs no TensorFlow, so mistakes answer in well under a second.

    Returns:
        For one training run, its ``CheckedRun`` (rl/early_checks.py: the resolved
        hparams and the run folder's verdict), which the experiment takes as it is;
        None for --copies N (``checked_copies`` checks each copy) and --training=false
        (the run is only loaded).
    """
    # Late: the catalog and the checks load Gymnasium, which --help does without.
    from rl import catalog  # noqa: F401  (fills the registries)
    from rl.early_checks import check_run

    check_mode_flags()
    check_worker_flags()
    check_override_flag()
    try:
        given_parallel = FLAGS.copies_parallel if FLAGS["copies_parallel"].present else None
        slots.check_copies(FLAGS.copies, given_parallel)
    except USER_ERRORS as e:
        fail(str(e))
    load_plugins()
    checked = None
    try:
        registry.systems.check(FLAGS.sys)
        for flag, target in SYSTEM_FLAGS.items():
            if FLAGS[flag].present and FLAGS.sys != target:
                fail(
                    f"--{flag} is for --sys {target}, not --sys {FLAGS.sys}; "
                    f"remove it or add --sys {target}"
                )
        if FLAGS.training:
            # --sys tpu without --tpu, before TensorFlow loads
            registry.systems.get(FLAGS.sys).check_options(system_options())
        if not FLAGS.output_dir:
            fail("--output_dir is required, e.g. --output_dir runs/ppo_cartpole")
        if FLAGS.training and FLAGS.copies <= 1:
            # A new run's set, or the run already in output_dir, with the changes asked for.
            checked = check_run(
                FLAGS.hparams,
                FLAGS.output_dir,
                FLAGS.hparam_override,
                env=FLAGS.env,
                seed=FLAGS.seed,
                train_steps=FLAGS.train_steps,
                eval_episodes=FLAGS.eval_episodes,
                allow_hparam_change=FLAGS.allow_hparam_change,
                num_workers=FLAGS.num_workers,
                record_video=FLAGS.record_video,
            )
    except USER_ERRORS as e:
        fail(str(e))
    check_tracking()  # last: importing MLflow takes about a second
    return checked


def make_system():
    """The run's one --sys target, from the flags; the experiment closes it."""
    target = registry.systems.get(FLAGS.sys)
    return target({**system_options(), "num_workers": FLAGS.num_workers})


TRACKING_INSTALL = "pip install -e '.[tracking]' (or pip install 'mlflow-skinny>=3.17,<4')"


def check_tracking() -> None:
    """--tracking's flags agree, and MLflow imports when it is asked for (else exit 2)."""
    given = [name for name in TRACKING_FLAGS if FLAGS[name].present]
    if FLAGS.tracking == "none":
        if given:
            fail(f"--{given[0]} is for --tracking mlflow; remove it or add --tracking mlflow")
        return
    for name in given:
        if not FLAGS[name].value.strip():
            fail(f"--{name} is empty; name one or leave the flag out for the default")
    try:
        import mlflow.tracking  # noqa: F401
    except ImportError as e:
        fail(f"--tracking mlflow needs MLflow, which cannot be imported ({e}): {TRACKING_INSTALL}")


def hparams_from_flags(base=None):
    """The --hparams set (or ``base``) with --hparam_override and the field flags applied.

    Args:
        base: hparams to start from instead of the --hparams set (a saved run's).

    Raises:
        UnknownNameError, HParamsError: as ``resolve_hparams``.
    """
    from rl.hparams.resolve import resolve_hparams  # late: it loads Gymnasium

    return resolve_hparams(
        FLAGS.hparams if base is None else base,
        FLAGS.hparam_override,
        env=FLAGS.env,
        seed=FLAGS.seed,
        train_steps=FLAGS.train_steps,
        eval_episodes=FLAGS.eval_episodes,
    )


def show_tensorflow_logs() -> bool:
    """absl's --verbosity at INFO (0) or above shows TensorFlow's own log lines."""
    return FLAGS["verbosity"].present and FLAGS.verbosity >= 0


def load_plugins() -> None:
    """Imports --plugins, or, without the flag, those the run in --output_dir recorded."""
    modules = FLAGS.plugins
    if not modules and FLAGS.output_dir:
        modules = recorded_plugins(FLAGS.output_dir)
    try:
        plugins.load(modules)
    except PluginError as e:
        fail(str(e))


def recorded_plugins(output_dir: str) -> List[str]:
    """The --plugins a run in ``output_dir`` was started with ([] if none or unreadable)."""
    try:
        recorded = read_json_object(os.path.join(output_dir, SNAPSHOT_DIR, FLAGS_FILE))
    except (OSError, ValueError):
        return []  # no run there, or a damaged snapshot: the run's own checks report it
    recorded = recorded.get("plugins")
    if not isinstance(recorded, list):
        return []
    # Runs before empty names were refused may have recorded one.
    return [name for name in recorded if isinstance(name, str) and name.strip()]


def our_flags() -> Dict[str, Any]:
    """The values of train.py's own flags (for the snapshot)."""
    return {flag.name: flag.value for flag in FLAGS.get_flags_for_module(__name__)}


def main(argv: List[str]) -> int:
    """Runs train.py after absl parsed the flags."""
    signal.signal(signal.SIGINT, interrupt_early)
    try:
        return train_or_test(argv)
    except KeyboardInterrupt:
        # A Ctrl-C outside the run's own handlers (while TensorFlow loads or the run is
        # built, or as it closes); within them the run handles it (rl/experiment.py).
        print(
            f"{PROG}: stopped by signal {int(signal.SIGINT)} (Ctrl-C) outside training; the "
            "run folder keeps what was saved: rerun the same command to resume",
            file=sys.stderr,
        )
        return 128 + signal.SIGINT


def train_or_test(argv: List[str]) -> int:
    """What train.py does with the parsed flags; returns its exit code."""
    if len(argv) > 1:
        fail(f"unexpected arguments {' '.join(argv[1:])!r}; flags look like --name=value")
    say_gymnasium_warnings_once()
    if FLAGS.list:
        from rl import catalog  # late: it loads Gymnasium

        load_plugins()  # so their names are listed too
        print(catalog.list_all(gymnasium=True))
        return 0
    checked = check_early()
    if show_tensorflow_logs():
        os.environ[_tf.TF_LOGS_VARIABLE] = "1"
    else:
        absl_logging.set_verbosity(absl_logging.WARNING)
    if FLAGS.training and FLAGS.copies > 1:
        copies = checked_copies()  # bad input is refused before TensorFlow loads
        # Copies side by side train in a train.py each: this process needs no TensorFlow,
        # and without its threads the fork of each copy is safe (preexec_fn).
        if FLAGS.copies_parallel == 1:
            _tf.import_tensorflow_quietly()
        return run_copies(copies)
    if not FLAGS.training:
        _tf.import_tensorflow_quietly()
        return run_test()
    system = make_system()
    if FLAGS.num_workers > 0:
        try:
            system.start_actors_early()  # their start-up overlaps TensorFlow's import
        except USER_ERRORS as e:
            fail(str(e))
    _tf.import_tensorflow_quietly()
    return run_training(checked, system)


def say_gymnasium_warnings_once() -> None:
    """Gymnasium's warnings (an outdated env id, a Box cast to float32) as ``rl: warning:``
    lines, each once: it warns in colour, with its own source line, at every env made."""
    shown = set()
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if f"{os.sep}gymnasium{os.sep}" not in filename:
            return default(message, category, filename, lineno, file, line)
        from rl.envs.check import warning_text  # late: it loads Gymnasium (loaded by now)

        text = warning_text(message)
        if text.startswith("ERROR: "):
            # Only an async vector env's copy that raised logs these (a traceback among
            # them) before the error is raised here again, where rl reports it in one line.
            return
        if text not in shown:
            shown.add(text)
            print(f"rl: warning: {text}", file=sys.stderr, flush=True)

    warnings.showwarning = show


def build_experiment(checked, system):
    """An Experiment of the checked run on the run's system; bad input ends the process
    (exit 2).

    Args:
        checked: the run's ``CheckedRun`` from the early checks.
        system: the run's --sys target (``make_system``).
    """
    # Late, both: the experiment loads TensorFlow, which the early checks do without,
    # and the tracking module MLflow's client.
    from rl.experiment import Experiment
    from rl.tracking import make_tracker

    try:
        return Experiment(
            checked=checked,
            system=system,
            record_video=FLAGS.record_video,
            render=FLAGS.render,
            argv=sys.argv,
            flags=our_flags(),
            worker_restarts=FLAGS.worker_restarts,
            worker_restart_window=FLAGS.worker_restart_window,
            worker_timeout=FLAGS.worker_timeout,
            worker_rounds_ahead=FLAGS.worker_rounds_ahead,
            tracker=make_tracker(FLAGS.tracking, FLAGS.tracking_uri, FLAGS.tracking_experiment),
        )
    except USER_ERRORS as e:
        fail(str(e))
    except EnvError as e:  # it raised while being made
        stop_outside_training(e, "nothing was written")


def run_training(checked, system) -> int:
    """Trains the checked run on ``system``; returns train.py's exit code."""
    experiment = build_experiment(checked, system)
    if experiment.restored_from and not experiment.fell_back:  # whose line says it
        print(f"rl: resuming from {experiment.restored_from}", file=sys.stderr)
    # Every ending, a failure's and a second signal's too, leaves its result as one JSON
    # line on stdout.
    closing = ClosingLine()
    experiment.on_stop_now = closing.print
    try:
        result = experiment.train()
    finally:
        experiment.close()
    closing.print(result)
    if result["failure"]:
        kind = result["failure_kind"]
        stopped(f"{result['failure']}; {failure_advice(kind, experiment)}")
        return FAILURE_EXITS[kind]
    if result["interrupted"]:
        return 128 + int(result["interrupted"])
    return 0


class ClosingLine:
    """train.py's closing JSON line, printed once: by the run's end, or by a second signal
    that ends the process at once (``Experiment.on_stop_now``), whichever comes first."""

    def __init__(self):
        self.printed = False

    def print(self, result: Dict[str, Any]) -> None:
        if not self.printed:
            print(result_json(result), flush=True)
            self.printed = True  # after: a signal in between may repeat it, not lose it


def result_json(result: Dict[str, Any]) -> str:
    """A training result as one line of JSON: its numbers, texts and nulls. A non-finite
    number (the loss of the update that stopped training) is null, as JSON has no NaN;
    the result's ``failure`` names it."""
    plain = (int, float, str, type(None))
    return json.dumps(
        {
            k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in result.items()
            if isinstance(v, plain)
        }
    )


def stopped(message: str) -> None:
    """The one stderr line of a run that failed (its exit code says how)."""
    print(f"{PROG}: stopped: {message}", file=sys.stderr, flush=True)


def stop_outside_training(error: Exception, written: str, context: str = "") -> NoReturn:
    """Ends the process for a failure outside training, where there is no result to print:
    one line, the exit code of its kind.

    Args:
        error: an EnvError, EnvServerError or OSError (a kind of ``FAILURE_KINDS``).
        written: what that left on disk ("nothing was written").
        context: what failed, before the error ("cannot test runs/x: ").
    """
    from rl.experiment import failure_kind, failure_text  # late: it loads TensorFlow (loaded)

    stopped(f"{context}{failure_text(error)}; {written}")
    sys.exit(FAILURE_EXITS[failure_kind(error)])


def failure_advice(kind: str, experiment) -> str:
    """What to do after a training failure of ``kind`` (a result's ``failure_kind``)."""
    if kind == "non_finite":
        return "try a lower learning_rate or max_grad_norm"
    if kind == "workers":
        output = experiment.system.workers_output(experiment.folder.file("workers"))
        return f"the workers' output is in {output}"
    rerun = "rerun the same command to " + (
        "resume" if experiment.folder.latest_checkpoint else "start again"
    )
    if kind == "env_server":
        return f"{rerun} once the server is back"
    if kind == "files":
        return f"make room or mend {experiment.output_dir}, then {rerun}"
    return rerun


def run_test() -> int:
    """--training=false: evaluation episodes from the latest (or best) checkpoint into
    test.json.

    A --copies folder (run_<i> inside, no hparams.json) tests every copy and
    writes test_summary.json beside them.
    """
    from rl import analysis  # late: it loads TensorBoard

    output_dir = FLAGS.output_dir
    if os.path.exists(os.path.join(output_dir, "hparams.json")):
        run_test_episodes(output_dir)
        return 0
    # Copies with or without evaluations so far (a copy stopped before its first).
    run_dirs = analysis.copy_dirs(output_dir) if os.path.isdir(output_dir) else []
    if not run_dirs or not all(os.path.exists(os.path.join(d, "hparams.json")) for d in run_dirs):
        fail(
            f"cannot test {output_dir}: it holds no trained run (no hparams.json) "
            "and no trained copies (run_<i>/); train one there first"
        )
    results = [run_test_episodes(run_dir) for run_dir in run_dirs]
    means = [r["return_mean"] for r in results]
    summary = {
        "runs": [{"run_dir": d, "return_mean": m} for d, m in zip(run_dirs, means)],
        "return_mean": float(sum(means) / len(means)),
        "return_iqm": analysis.interquartile_mean(means),
        "episodes_per_run": FLAGS.test_episodes,
    }
    path = os.path.join(output_dir, "test_summary.json")
    set_aside(path)  # an earlier test's results are kept
    write_text_atomic(path, json.dumps(summary, indent=2) + "\n")
    print(f"test: {len(run_dirs)} copies, mean return {summary['return_mean']:.1f}; wrote {path}")
    return 0


def run_test_episodes(output_dir: str) -> Dict[str, Any]:
    """Tests one run folder into its test.json; bad input ends the process."""
    # Late, both: they load TensorFlow and Gymnasium.
    from rl.evaluation import EvaluationStopped
    from rl.experiment import Experiment

    try:
        experiment = Experiment(
            hparams=None,
            output_dir=output_dir,
            read_only=True,
            sys_name=FLAGS.sys,
            sys_options=system_options(),
            record_video=FLAGS.record_video,
            render=FLAGS.render,
            verbose=False,
            checkpoint=FLAGS.checkpoint,
        )
    except USER_ERRORS + (FileNotFoundError,) as e:
        fail(f"cannot test {output_dir}: {e}")
    except EnvError as e:  # it raised while being made
        stop_outside_training(e, "test.json was not written", f"cannot test {output_dir}: ")
    path = os.path.join(output_dir, "test.json")
    try:
        result = experiment.evaluate(
            episodes=FLAGS.test_episodes,
            record=FLAGS.test_episodes if FLAGS.record_video else 0,
            video_name=f"test_step{experiment.step:09d}",
        )
        result["checkpoint"] = experiment.restored_from
        set_aside(path)  # an earlier test's results are kept
        write_text_atomic(path, json.dumps(result, indent=2) + "\n")
    except EvaluationStopped:
        signum = int(experiment.interrupted)
        print(f"{PROG}: stopped by signal {signum}: no test results written", file=sys.stderr)
        sys.exit(128 + signum)
    except (EnvError, EnvServerError, OSError) as e:  # the env, its server, a full disk
        stop_outside_training(e, "test.json was not written", f"cannot test {output_dir}: ")
    finally:
        experiment.close()
    which = " (the best evaluation's checkpoint)" if FLAGS.checkpoint == BEST else ""
    print(
        f"test: {result['episodes']} episodes at step {result['step']}{which}: return "
        f"{result['return_mean']:.1f} +- {result['return_std']:.1f} "
        f"(min {min(result['returns']):.1f}, max {max(result['returns']):.1f}); wrote {path}"
    )
    return result


def checked_copies() -> list:
    """--copies N: each copy's ``CheckedRun`` (in run_<i>, with its own seed), once every
    one of them can start or resume there; bad input ends the process before anything
    is written."""
    # Late, both: they load Gymnasium and TensorBoard, which --help does without.
    from rl.early_checks import check_run
    from rl.run_folder import check_copies_folder

    output_dir = FLAGS.output_dir
    try:
        if FLAGS.hparams is None:
            fail("--hparams is required with --copies, e.g. --hparams ppo_cartpole")
        hp = hparams_from_flags()
        if hp.eval_episodes == 0:
            fail(
                "--copies compares the copies' final evaluations (summary.json, "
                "curves.png), which eval_episodes 0 turns off; give it at least 1"
            )
        check_copies_folder(output_dir, FLAGS.copies)
        seeds = seeding.copy_seeds(hp.seed, FLAGS.copies)
        return [  # all checked before any is written
            check_run(
                hp.replace(seed=seed),
                os.path.join(output_dir, f"run_{i}"),
                allow_hparam_change=FLAGS.allow_hparam_change,
                num_workers=FLAGS.num_workers,
            )
            for i, seed in enumerate(seeds)
        ]
    except USER_ERRORS as e:
        fail(str(e))


def run_copies(copies: list) -> int:
    """--copies N: N runs in run_<i>, one after another or side by side, then the summary.

    Args:
        copies: the copies' ``CheckedRun``s, from ``checked_copies``.
    """
    # Late, both: they load TensorBoard, which --help does without.
    from rl import analysis
    from rl.run_folder import COPIES_TEMPORARY_NAMES, leftover_temporaries, remove_temporaries

    run_dirs = [copy.output_dir for copy in copies]
    # What a kill left of summary.json or curves.png.
    remove_temporaries(leftover_temporaries(FLAGS.output_dir, COPIES_TEMPORARY_NAMES))
    if FLAGS.copies_parallel > 1:
        code = run_copies_in_processes(run_dirs, [copy.hp.seed for copy in copies])
        if code < 0:
            killed_by(-code)
    else:
        code = 0
        for i, copy in enumerate(copies):
            print(
                f"rl: copy {i + 1}/{FLAGS.copies} (seed {copy.hp.seed}) in {copy.output_dir}",
                file=sys.stderr,
            )
            code = run_training(copy, make_system())
            if code:
                break
    if code:
        return code
    summary = analysis.write_summary(FLAGS.output_dir, run_dirs)
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
    return 0


def killed_by(signum: int) -> NoReturn:
    """Ends this process with the signal that killed one of its copies, so whatever
    started it (a search, a scheduler) sees the kill, not an ordinary failure."""
    print(
        f"rl: a copy was killed by signal {signum}; the others stopped with a checkpoint, "
        "rerun the same command to resume them",
        file=sys.stderr,
        flush=True,
    )
    if signum != signal.SIGKILL:  # whose handler cannot be changed
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    sys.exit(128 + signum)  # a signal that does not end a process by default


def copy_environment(parallel: int) -> Dict[str, str]:
    """The environment of a copy run beside ``parallel - 1`` others: TensorFlow's thread
    pools get this machine's share of CPUs each, unless the user set their sizes.

    Two SAC copies side by side on 2 cores made 112 env steps/s together with one thread
    each, 101 with TensorFlow's default of one per core (which oversubscribes the cores);
    the weights were bit-identical either way (docs/benchmarks.md).
    """
    return {**os.environ, **tf_thread_share(parallel)}


def run_copies_in_processes(run_dirs: List[str], seeds: List[int]) -> int:
    """Runs copies as train.py subprocesses, ``copies_parallel`` at a time."""
    passed = []
    for flag in FLAG_TABLE:
        # Only what the user gave: a copy has the same defaults, and refuses some flags
        # given without others (the worker flags without --num_workers).
        if not flag.to_copies or not FLAGS[flag.name].present:
            continue
        value = FLAGS[flag.name].value
        if flag.define is flags.DEFINE_multi_string:
            passed += [f"--{flag.name}={item}" for item in value]
        else:
            passed.append(f"--{flag.name}={value}")
    commands = [
        [sys.executable, os.path.abspath(sys.argv[0]), *passed, f"--output_dir={run_dir}",
         f"--seed={seed}"]
        for run_dir, seed in zip(run_dirs, seeds)
    ]  # fmt: skip
    return slots.run_in_slots(
        commands, FLAGS.copies_parallel, copy_environment(FLAGS.copies_parallel)
    )
