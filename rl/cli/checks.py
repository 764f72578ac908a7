"""The early checks of train.py's flags: every mistake refused in one line (exit 2)
before TensorFlow loads, so it answers in well under a second.

``check_early`` runs them all and gives a training run's ``CheckedRun``
(rl/early_checks.py); the flag checks of one mode, --sys, --tracking and the worker flags
are here, and the loading of --plugins (or those a resumed run recorded).
"""

import os
from typing import List

from rl import plugins, registry, slots
from rl.cli.flag_table import (
    FLAGS,
    SYSTEM_FLAGS,
    TEST_ONLY,
    TRACKING_FLAGS,
    TRAINING_ONLY,
    WORKER_FLAGS,
    fail,
    system_options,
)
from rl.errors import USER_ERRORS, PluginError
from rl.files import read_json_object
from rl.snapshot import FLAGS_FILE, SNAPSHOT_DIR


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
