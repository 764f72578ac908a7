"""The command line of train.py: flags, their checks and one-line errors.

Every user mistake (unknown name, bad override or flag value, missing flag,
conflicting output_dir, unreadable checkpoint) ends as one line on stderr and
exit code 2, raised before anything is written.
"""

import json
import os
import sys
from typing import List, NoReturn

from absl import flags
from absl import logging as absl_logging

FLAGS = flags.FLAGS
PROG = "train.py"


def define_flags() -> None:
    """Defines train.py's flags (once per process)."""
    flags.DEFINE_string("sys", "local", "Where to run: a registered --sys target.")
    flags.DEFINE_string("hparams", None,
                                            "Registered hparams set, e.g. ppo_cartpole "
                                            "(default: the run in --output_dir).")
    flags.DEFINE_string("hparam_override", "",
                                            'Overrides, e.g. "learning_rate=1e-3,hidden_sizes=[128,128]".')
    flags.DEFINE_string("env", None, "Registered env name or Gymnasium id "
                                            "(overrides the hparams' env).")
    flags.DEFINE_string("output_dir", None, "Folder for checkpoints, logs, videos.")
    flags.DEFINE_integer("train_steps", None, "Total env steps (overrides hparams).",
                                              lower_bound=1)
    flags.DEFINE_integer("eval_episodes", None,
                                              "Greedy episodes per evaluation (overrides hparams).",
                                              lower_bound=0)
    flags.DEFINE_integer("seed", None, "Random seed (overrides hparams).",
                                              lower_bound=0)
    flags.DEFINE_bool("list", False, "Print every registered name by kind and exit.")
    flags.DEFINE_bool("allow_hparam_change", False,
                                        "Resume a run in --output_dir with hparams that differ "
                                        "from its hparams.json (the old file is kept).")


def fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2."""
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def parse_flags_or_exit(argv: List[str]) -> List[str]:
    """absl's parser, with bad flags turned into one line and exit code 2."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        fail(str(e).splitlines()[0])


def user_errors() -> tuple:
    """Exception types that mean bad input (reported as one line, exit 2)."""
    from rl.experiment import CheckpointError, RunConflictError
    from rl.hparams.base import HParamsError
    from rl.registry import UnknownNameError
    return (UnknownNameError, HParamsError, RunConflictError, CheckpointError)


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow with its C++ start-up chatter sent to /dev/null.

    TF 2.21 logs CUDA probing through absl before TF_CPP_MIN_LOG_LEVEL is
    read; on a CPU machine that buries our one-line errors. Python errors
    still show: stderr is restored before any exception propagates. Set
    RL_TF_LOGS=1 to see the chatter.
    """
    if os.environ.get("RL_TF_LOGS"):
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow as tf
        tf.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def main(argv: List[str]) -> int:
    """Runs train.py after absl parsed the flags."""
    if len(argv) > 1:
        fail(f"unexpected arguments {' '.join(argv[1:])!r}; flags look like --name=value")
    import_tensorflow_quietly()
    absl_logging.set_verbosity(absl_logging.WARNING)
    from rl import catalog, registry
    if FLAGS.list:
        print(catalog.list_all())
        return 0
    errors = user_errors()
    try:
        registry.systems.get(FLAGS.sys)
    except errors as e:
        fail(str(e))
    if not FLAGS.output_dir:
        fail("--output_dir is required, e.g. --output_dir runs/ppo_cartpole")
    from rl.experiment import Experiment, load_run_hparams
    try:
        if FLAGS.hparams is None and load_run_hparams(FLAGS.output_dir) is None:
            fail("--hparams is required for a new run, e.g. --hparams ppo_cartpole "
                      "(list them with --list)")
        experiment = Experiment(
                hparams=FLAGS.hparams, output_dir=FLAGS.output_dir,
                overrides=FLAGS.hparam_override, env=FLAGS.env, seed=FLAGS.seed,
                train_steps=FLAGS.train_steps, eval_episodes=FLAGS.eval_episodes,
                allow_hparam_change=FLAGS.allow_hparam_change, sys_name=FLAGS.sys,
                argv=sys.argv)
    except errors as e:
        fail(str(e))
    if experiment.restored_from:
        print(f"rl: resuming from {experiment.restored_from}", file=sys.stderr)
    try:
        result = experiment.train()
    finally:
        experiment.close()
    print(json.dumps({k: v for k, v in result.items()
                                        if isinstance(v, (int, float, str, type(None)))}))
    if result["interrupted"]:
        return 128 + int(result["interrupted"])
    return 0
