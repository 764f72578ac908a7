"""train.py --copies N: N independent runs of one set in run_<i>, with seeds derived from
--seed, one after another or side by side (--copies_parallel), then their summary.

Every copy is checked (``checked_copies``) before the first trains.
"""

import json
import os
import signal
import sys
from typing import Dict, List, NoReturn

from absl import flags

from rl import seeding, slots
from rl.cli.flag_table import FLAG_TABLE, FLAGS, fail, hparams_from_flags
from rl.cli.training import make_system, run_training
from rl.errors import USER_ERRORS
from rl.processes import tf_thread_share


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
                record_video=FLAGS.record_video,
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
