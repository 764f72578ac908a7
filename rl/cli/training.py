"""train.py training one run: its system, its Experiment, and its exit code.

The run's ``CheckedRun`` comes from the early checks (rl/cli/checks.py), made before
TensorFlow loaded; a failure ends with the exit code of its kind (rl/cli/exits.py).
"""

import sys

from rl import registry
from rl.cli.exits import (
    FAILURE_EXITS,
    ClosingLine,
    stop_outside_training,
    stopped,
)
from rl.cli.flag_table import FLAGS, fail, our_flags, system_options
from rl.errors import USER_ERRORS, EnvError
from rl.processes import WorkerSettings


def make_system():
    """The run's one --sys target, from the flags; the run closes it."""
    return registry.systems.get(FLAGS.sys)(system_options())


def start_actors(system, checked):
    """The run's actor processes, started now (``System.actor_launcher``) so that their
    start-up overlaps TensorFlow's import; None without --num_workers. A system that
    cannot be reached (Ray's address) ends the process (exit 2)."""
    if not checked.num_workers:
        return None
    try:
        return system.actor_launcher(checked.num_workers)
    except USER_ERRORS as e:
        fail(str(e))


def build_experiment(checked, system, launcher=None):
    """The checked run built on the run's system (``Run``, rl/experiment.py); bad input
    ends the process (exit 2).

    Args:
        checked: the run's ``CheckedRun`` from the early checks.
        system: the run's --sys target (``make_system``).
        launcher: its actor processes (``start_actors``); None: the run starts them.
    """
    # Late, both: the experiment loads TensorFlow, which the early checks do without,
    # and the tracking module MLflow's client.
    from rl.experiment import Run
    from rl.tracking import make_tracker

    try:
        return Run(
            checked,
            system,
            launcher=launcher,
            workers=WorkerSettings(
                restarts=FLAGS.worker_restarts,
                restart_window=FLAGS.worker_restart_window,
                timeout=FLAGS.worker_timeout,
                rounds_ahead=FLAGS.worker_rounds_ahead,
            ),
            tracker=make_tracker(FLAGS.tracking, FLAGS.tracking_uri, FLAGS.tracking_experiment),
            render=FLAGS.render,
            argv=sys.argv,
            flags=our_flags(),
        )
    except USER_ERRORS as e:
        fail(str(e))
    except EnvError as e:  # it raised while being made
        stop_outside_training(e, "nothing was written")


def run_training(checked, system, launcher=None) -> int:
    """Trains the checked run on ``system`` (with the actors of ``launcher``, if started
    already); returns train.py's exit code."""
    experiment = build_experiment(checked, system, launcher)
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
