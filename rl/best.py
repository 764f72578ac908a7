"""The best evaluation of a run: its checkpoint and policy artefact, kept beside the latest.

At each evaluation during training whose ``return_mean`` beats every earlier one of the
run (strictly: on a tie the earlier evaluation stays the best), the weights just evaluated
are written into one folder, whole or not at all:

    best/ckpt-<step>/
        best.json      the record: {"step": <step>, "return_mean": <R>}
        checkpoint/    ckpt-<step>.index and .data-*: the tf.train checkpoint of that
                       moment (model, optimizer, counters; not the replay)
        policy/        its policy artefact (as policies/ckpt-<step>/, rl/policy.py)

It is built as ``best/ckpt-<step>.partial/`` and renamed into place, so a kill leaves the
previous best intact and a .partial folder that the next start removes. An earlier best is
deleted only once a checkpoint covers the new one: a run resumed from an older checkpoint
redoes the training past it, so a best past the restored step moves to
``best/superseded/`` (as ``tidy_policies`` moves artefacts) and the best before it is
still there. An unreadable best moves to ``best/unreadable/`` with one line.
"""

import dataclasses
import json
import math
import os
import shutil
from typing import List, Optional, Tuple

from rl._tf import writes_as_oserror
from rl.errors import CheckpointError, error_line
from rl.files import (
    checkpoint_name,
    fsync_dir,
    named_step,
    named_steps,
    read_json_object,
    write_text_atomic,
)
from rl.policy import PolicyArtefactError, read_artefact, write_policy_artefact

BEST_DIR = "best"
RECORD_FILE = "best.json"
CHECKPOINT_FOLDER = "checkpoint"
POLICY_FOLDER = "policy"
PARTIAL = ".partial"  # a best being built or deleted
SUPERSEDED_DIR = "superseded"  # bests past the step a run resumed from
UNREADABLE_DIR = "unreadable"

# Which checkpoint a run is loaded from (train.py --checkpoint, Experiment(checkpoint=...)).
LATEST, BEST = "latest", "best"
CHECKPOINT_CHOICES = (LATEST, BEST)


@dataclasses.dataclass(frozen=True)
class BestRecord:
    """The run's best evaluation so far: its step and ``return_mean``."""

    step: int
    return_mean: float


def is_better(return_mean: float, best: Optional[BestRecord]) -> bool:
    """Whether an evaluation's ``return_mean`` makes it the run's new best.

    Higher than the best so far; on a tie the earlier evaluation stays the best. A
    non-finite mean never is.

    Args:
        return_mean: the evaluation's mean return.
        best: the best so far (None: none yet).
    """
    return math.isfinite(return_mean) and (best is None or return_mean > best.return_mean)


def best_folder(output_dir: str, step: int) -> str:
    """The folder of the best evaluation at ``step``."""
    return os.path.join(output_dir, BEST_DIR, checkpoint_name(step))


def checkpoint_prefix(folder: str, step: int) -> str:
    """The tf.train checkpoint inside a best folder (its files add .index, .data-*)."""
    return os.path.join(folder, CHECKPOINT_FOLDER, checkpoint_name(step))


def policy_folder(folder: str) -> str:
    """The policy artefact inside a best folder (``load_policy`` loads it)."""
    return os.path.join(folder, POLICY_FOLDER)


def best_steps(output_dir: str) -> List[int]:
    """Steps of the complete best folders in the run, oldest first."""
    return named_steps(os.path.join(output_dir, BEST_DIR))


# --- writing --------------------------------------------------------------------
def write_best(checkpoint, agent, output_dir: str, record: BestRecord) -> str:
    """Writes the best evaluation's checkpoint, policy artefact and record.

    Args:
        checkpoint: the run's tf.train.Checkpoint, holding the weights just evaluated.
        agent: the rl.agents.base.Agent whose policy was evaluated.
        output_dir: the run folder.
        record: the evaluation's step and return_mean.

    Returns:
        The best folder.

    Raises:
        OSError: a file cannot be written; the previous best is intact.
    """
    step = record.step
    final = best_folder(output_dir, step)
    building = final + PARTIAL
    shutil.rmtree(building, ignore_errors=True)
    os.makedirs(os.path.join(building, CHECKPOINT_FOLDER))
    with writes_as_oserror(f"the best evaluation's checkpoint of step {step} in {output_dir}"):
        # Made now if no save made it yet: restore() makes it and expects a value for it.
        checkpoint.save_counter  # noqa: B018
        checkpoint.write(checkpoint_prefix(building, step))
    write_policy_artefact(agent, output_dir, step, folder=policy_folder(building))
    record_text = json.dumps(dataclasses.asdict(record)) + "\n"
    write_text_atomic(os.path.join(building, RECORD_FILE), record_text)
    if os.path.isdir(final):  # not expected: bests past the restored step were moved aside
        _move_aside([final], SUPERSEDED_DIR, output_dir)
    os.replace(building, final)
    fsync_dir(os.path.dirname(final))
    return final


def drop_earlier_bests(output_dir: str, step: int) -> None:
    """Deletes the bests before the newest one at or before ``step`` (called once a
    checkpoint at ``step`` is saved: a resume can no longer need them)."""
    kept = [s for s in best_steps(output_dir) if s <= step]
    for earlier in kept[:-1]:
        _delete(best_folder(output_dir, earlier))


def _delete(folder: str) -> None:
    """Renamed first, so a kill part-way leaves a .partial folder, never a torn best."""
    os.replace(folder, folder + PARTIAL)
    shutil.rmtree(folder + PARTIAL)


def _move_aside(folders: List[str], kind: str, output_dir: str) -> str:
    from rl.run_folder import move_aside  # late: run_folder loads TensorBoard and Gymnasium

    return move_aside(folders, os.path.join(output_dir, BEST_DIR, kind))


# --- reading --------------------------------------------------------------------
def read_best(folder: str) -> BestRecord:
    """A best folder's record, once its files are there and its artefact reads.

    Raises:
        CheckpointError: naming the folder and what is wrong with it.
    """
    step = named_step(folder)
    path = os.path.join(folder, RECORD_FILE)
    try:
        saved = read_json_object(path)
    except FileNotFoundError:
        raise CheckpointError(
            f"{folder} is not a best checkpoint ({RECORD_FILE} is missing)"
        ) from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{folder}: cannot read {RECORD_FILE} ({error_line(e)})") from None
    mean = saved.get("return_mean")
    if saved.get("step") != step or not isinstance(mean, (int, float)) or isinstance(mean, bool):
        raise CheckpointError(
            f"{path} must hold the step {step} and a return_mean, not {json.dumps(saved)}"
        )
    if not os.path.exists(checkpoint_prefix(folder, step) + ".index"):
        raise CheckpointError(f"{folder} lacks its checkpoint ({CHECKPOINT_FOLDER}/ckpt-{step})")
    try:
        meta = read_artefact(policy_folder(folder))
    except PolicyArtefactError as e:
        raise CheckpointError(str(e)) from None
    if meta.get("step") != step:
        raise CheckpointError(
            f"{policy_folder(folder)} holds the policy of step {meta.get('step')}"
        )
    return BestRecord(step, float(mean))


def tidy_best(
    output_dir: str, restored_step: int
) -> Tuple[Optional[BestRecord], List[str], List[str]]:
    """Makes best/ agree with the checkpoint a run resumes from; returns its best.

    Half-built or half-deleted folders (a kill) are removed; bests past
    ``restored_step`` come from training that is about to be redone, so they move to
    best/superseded/; an unreadable best moves to best/unreadable/ (the one before it,
    if a kill left one, is the best then); older ones left by a kill are deleted.

    Returns:
        The best's record (None: no best yet), the bests past ``restored_step`` moved to
        best/superseded/ (the caller says so, in the fallback's one line when there is
        one), and a line for each unreadable best moved aside.
    """
    root = os.path.join(output_dir, BEST_DIR)
    if not os.path.isdir(root):
        return None, [], []
    for name in os.listdir(root):
        if name.endswith(PARTIAL):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    steps = best_steps(output_dir)
    notices = []
    later = [best_folder(output_dir, s) for s in steps if s > restored_step]
    if later:
        _move_aside(later, SUPERSEDED_DIR, output_dir)
    best = None
    for step in reversed([s for s in steps if s <= restored_step]):
        folder = best_folder(output_dir, step)
        if best is not None:
            _delete(folder)
            continue
        try:
            best = read_best(folder)
        except CheckpointError as e:
            moved_to = _move_aside([folder], UNREADABLE_DIR, output_dir)
            notices.append(f"moved the unreadable best checkpoint to {moved_to}: {e}")
    return best, later, notices


def current_best(output_dir: str) -> Optional[str]:
    """The run's best folder, as a resume would keep it (None: no best yet): the newest
    at or before the run's newest checkpoint. Reads and writes nothing else."""
    # late: run_folder loads TensorBoard and Gymnasium
    from rl.run_folder import CHECKPOINT_DIR, checkpoint_steps

    saved = checkpoint_steps(os.path.join(output_dir, CHECKPOINT_DIR))
    steps = [s for s in best_steps(output_dir) if saved and s <= saved[-1]]
    return best_folder(output_dir, steps[-1]) if steps else None


def no_best_yet(output_dir: str) -> str:
    """Why a run without a best cannot be loaded from it, in one line."""
    return (
        f"{output_dir} has no best checkpoint yet ({BEST_DIR}/ckpt-<step>/ is written at "
        "each evaluation that beats the run's earlier ones): load the latest checkpoint"
    )


def restore_best(checkpoint, output_dir: str) -> Tuple[str, BestRecord]:
    """Restores the run's best checkpoint into ``checkpoint`` (not the replay).

    Returns:
        The restored checkpoint's path and the best's record.

    Raises:
        CheckpointError: the run has no best, or it cannot be read.
    """
    folder = current_best(output_dir)
    if folder is None:
        raise CheckpointError(no_best_yet(output_dir))
    best = read_best(folder)
    prefix = checkpoint_prefix(folder, best.step)
    try:
        checkpoint.restore(prefix).assert_existing_objects_matched()
    except Exception as e:  # noqa: BLE001  (TF raises IndexError, DataLoss, ... on bad files)
        raise CheckpointError(
            f"the best checkpoint {prefix} cannot be read: {error_line(e)}"
        ) from None
    return prefix, best


def best_policy_dir(output_dir: str) -> str:
    """The policy artefact of the run's best evaluation, for ``rl.policy.load_policy``.

    Raises:
        PolicyArtefactError: the run has no best yet.
    """
    folder = current_best(output_dir)
    if folder is None:
        raise PolicyArtefactError(no_best_yet(output_dir))
    return policy_folder(folder)
