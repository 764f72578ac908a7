"""train.py's flags, once: the table, its parsing, and the one-line refusal of bad input.

``FLAG_TABLE`` holds one ``Flag`` row per flag; ``define_flags`` defines them from it,
and the mode, --sys, --tracking and worker checks (rl/cli/checks.py) and what --copies
passes each copy (rl/cli/copies.py) read it too. ``fail`` is how every user mistake ends:
one line on stderr and exit code 2.
"""

import dataclasses
import difflib
import math
import re
import sys
from typing import Any, Callable, Dict, List, NoReturn, Optional

from absl import flags

from rl import slots
from rl.best import CHECKPOINT_CHOICES, LATEST
from rl.errors import one_line
from rl.hparams.base import int_field_range
from rl.processes import (
    MAX_ROUNDS_AHEAD,
    OFF_POLICY_ROUNDS_AHEAD,
    ON_POLICY_ROUNDS_AHEAD,
    WORKER_TIMEOUT_SECONDS,
)

FLAGS = flags.FLAGS
PROG = "train.py"


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


def system_options() -> dict:
    """The --sys target's settings from its flags."""
    return {name: FLAGS[name].value for name in SYSTEM_FLAGS}


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


def our_flags() -> Dict[str, Any]:
    """The values of train.py's own flags (for the snapshot)."""
    return {flag.name: flag.value for flag in FLAGS.get_flags_for_module(__name__)}
