"""The checks a run passes before anything is built or written, done once.

train.py runs them before TensorFlow loads (rl/cli/checks.py), so a mistake answers in well
under a second, and builds its run from their result (``Run(checked, system)``,
rl/experiment.py), which then checks nothing again; ``rl.Experiment(...)`` from Python runs
them on its keywords first.
"""

import dataclasses
from typing import Any, Dict, Optional, Tuple, Union

from rl.best import BEST, CHECKPOINT_CHOICES, LATEST
from rl.errors import CheckpointError, HParamsError
from rl.hparams.base import HParams
from rl.hparams.resolve import HPARAMS_FILE, load_run_hparams, resolve_hparams
from rl.run_folder import check_not_in_use, check_output_dir, check_resume, read_eval_file
from rl.workers.pool import check_workers


@dataclasses.dataclass(frozen=True)
class CheckedRun:
    """What the early checks settled about one run: its hparams and its folder's verdict.

    Attributes:
        hp: the resolved hparams (the set or the saved run, overrides and flags applied).
        output_dir: the run folder; None: a new temporary one.
        existing: the hparams of the run already in ``output_dir`` (it resumes), else None.
        eval_records: that run's evaluation records (eval.jsonl, checked); () if none.
        read_only: loaded to evaluate, test or export: nothing in the folder is written.
        num_workers: actor processes stepping the envs (0: this process acts); the one
            place the run's worker count is held.
        record_video: training records evaluation episodes (see hparams.video_interval).
        checkpoint: which checkpoint is loaded: ``"latest"`` (training resumes from it) or
            ``"best"``, that of the run's best evaluation (rl/best.py), read-only.
    """

    hp: HParams
    output_dir: Optional[str]
    existing: Optional[HParams]
    eval_records: Tuple[Dict[str, Any], ...]
    read_only: bool
    num_workers: int
    record_video: bool = False
    checkpoint: str = LATEST


def check_run(
    hparams: Union[str, HParams, None],
    output_dir: Optional[str],
    overrides: Union[str, Dict[str, Any], None] = None,
    *,
    env: Optional[str] = None,
    seed: Optional[int] = None,
    train_steps: Optional[int] = None,
    eval_episodes: Optional[int] = None,
    allow_hparam_change: bool = False,
    read_only: bool = False,
    num_workers: int = 0,
    record_video: bool = False,
    checkpoint: str = LATEST,
) -> CheckedRun:
    """Resolves the hparams and checks the run folder and the worker count (no TensorFlow).

    Args:
        hparams: a registered set name or HParams; None: the run saved in ``output_dir``.
        output_dir: the run folder; None: a new temporary one (nothing to check).
        overrides: "a=1,b=[2]" or {"a": 1}.
        env: overrides hparams.env.
        seed: overrides hparams.seed.
        train_steps: overrides hparams.train_steps.
        eval_episodes: overrides hparams.eval_episodes.
        allow_hparam_change: resume a run in output_dir with different hparams.
        read_only: the run is only loaded; its folder must hold one.
        num_workers: actor processes; they must share the env copies evenly.
        record_video: training records evaluation episodes, so it must make some.
        checkpoint: which checkpoint to load, ``"latest"`` or (read-only) ``"best"``.

    Raises:
        UnknownNameError, HParamsError: a bad name or value, or ``record_video`` with
            no evaluation episodes to record.
        RunConflictError: the folder cannot take this run (another run's hparams, in use
            by another process, not writable, a damaged eval log).
        CheckpointError: ``read_only`` and no run in the folder.
        ValueError: an unknown ``checkpoint``, or ``"best"`` for a run that trains.
    """
    if checkpoint not in CHECKPOINT_CHOICES:
        raise ValueError(f"checkpoint must be one of {CHECKPOINT_CHOICES}, got {checkpoint!r}")
    if checkpoint == BEST and not read_only:
        raise ValueError(
            "checkpoint='best' loads a run read-only (read_only=True); training resumes "
            "from the latest checkpoint"
        )
    if hparams is None:
        saved = load_run_hparams(output_dir) if output_dir is not None else None
        if saved is None:
            raise HParamsError(
                f"--hparams is required for a new run, e.g. --hparams ppo_cartpole (list "
                f"them with --list): {output_dir} holds no {HPARAMS_FILE}"
            )
        hparams = saved
    hp = resolve_hparams(
        hparams,
        overrides,
        env=env,
        seed=seed,
        train_steps=train_steps,
        eval_episodes=eval_episodes,
    )
    check_workers(hp, num_workers)
    if record_video and not read_only:
        check_video(hp)
    existing, eval_records = None, []
    if output_dir is not None:
        existing = check_resume(
            output_dir, hp, allow_hparam_change or read_only, writing=not read_only
        )
        if not read_only:
            check_output_dir(output_dir)
            check_not_in_use(output_dir)
        eval_records = read_eval_file(output_dir)
    if read_only and existing is None:
        raise CheckpointError(f"{output_dir} holds no run to load ({HPARAMS_FILE} missing)")
    return CheckedRun(
        hp,
        output_dir,
        existing,
        tuple(eval_records),
        read_only,
        num_workers,
        record_video,
        checkpoint,
    )


def check_video(hp: HParams) -> None:
    """HParamsError if a training run that records video makes no evaluation episodes:
    they are what it records, so it would record nothing without a word."""
    if hp.eval_episodes == 0:
        raise HParamsError(
            "--record_video records evaluation episodes, which eval_episodes 0 turns off; "
            "give --eval_episodes 1 or more, or record a trained run's test episodes with "
            "--training=false --record_video"
        )
