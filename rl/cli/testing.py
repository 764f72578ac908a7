"""train.py --training=false: a trained run (or every --copies copy) tested from its
latest or best checkpoint into test.json, nothing else written.
"""

import json
import os
import sys
from typing import Any, Dict

from rl.best import BEST
from rl.cli.exits import stop_outside_training
from rl.cli.flag_table import FLAGS, PROG, fail, system_options
from rl.errors import USER_ERRORS, EnvError, EnvServerError
from rl.files import set_aside, write_text_atomic


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
