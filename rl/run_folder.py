"""A run's output folder: its hparams, snapshot, checkpoints and logbook.

Output folder:
    hparams.json       resolved hparams (restarting checks against it)
    checkpoints/       tf.train.CheckpointManager (model, optimizer, counters,
                       RNG states, target net, replay buffer), and beside each
                       ckpt-<N> the separately saved state of that step
                       (``<name>-<N>.npz``, e.g. a large replay buffer)
    best/              the best evaluation's checkpoint and policy artefact (rl/best.py)
    eval.jsonl         one line per evaluation
    tb/                TensorBoard events
    snapshot/          reproducibility snapshot (rl/snapshot.py)
    train.lock         held by the process training the run (one writer at a time)

The checks that run before anything is built (``check_output_dir``,
``check_resume``, ``read_eval_file``) are plain functions that need no
TensorFlow (train.py runs them before it loads it); ``RunFolder`` holds
the path, the tf.train checkpoint with its manager, the separately saved state
and the logbook, and restores and saves them together.
"""

from __future__ import annotations

import collections
import errno
import gc
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time
from typing import (
    Any,
    BinaryIO,
    Dict,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)

from rl import snapshot
from rl._tf import (  # a stand-in: TensorFlow loads with the first checkpoint, after the checks
    tf,
    writes_as_oserror,
)
from rl.analysis import SUMMARY_NAME, copy_dirs
from rl.errors import CheckpointError, RunConflictError, error_line
from rl.files import (
    ATOMIC_TEMP,
    checkpoint_name,
    lock_exclusively,
    lock_holder,
    named_step,
    set_aside,
    write_text_atomic,
)
from rl.hparams.base import RESUMABLE_FIELDS, HParams, differences
from rl.hparams.resolve import HPARAMS_FILE, load_run_hparams
from rl.logbook import EVAL_FILE, JsonLinesError, Logbook, read_eval_records

CHECKPOINT_DIR = "checkpoints"
RUN_LOCK_FILE = "train.lock"
WRITE_CHECK_PREFIX = ".rl-write-check-"  # check_output_dir's probe folders
UNREADABLE_DIR = "unreadable"  # inside checkpoints/: unreadable checkpoints moved aside
CHECKPOINT_INDEX = "checkpoint"  # tf.train.CheckpointManager's list of checkpoints

# What a kill can leave half-written in a run folder, by folder: the next run that writes
# the folder removes them (RunFolder.prepare). Names are matched whole, so no file of the
# user's goes. Elsewhere: policies/ckpt-<N>.partial (rl/policy.py, tidy_policies) and
# .staged-<N>[.tmp] (rl/logbook.py, Logbook.recover).
TEMPORARY_NAMES = {
    "": (  # hparams.json, eval.jsonl, test.json, tracking.json; the snapshot's build
        ATOMIC_TEMP,
        re.compile(re.escape(snapshot.BUILD_PREFIX) + r"\d+-[0-9a-f]{8}"),
        re.compile(re.escape(WRITE_CHECK_PREFIX) + r"[a-z0-9_]{8}"),  # tempfile.mkdtemp's
    ),
    CHECKPOINT_DIR: (  # the index and separate state files (a replay), and TensorFlow's:
        ATOMIC_TEMP,
        re.compile(r"ckpt-\d+_temp"),  # the folder a checkpoint is written in
        re.compile(r"checkpoint\.tmp[0-9a-f]{32}"),  # CheckpointManager's index
    ),
    snapshot.SNAPSHOT_DIR: (ATOMIC_TEMP,),  # resumes.jsonl
    "tb": (ATOMIC_TEMP,),  # event files rebuilt from eval.jsonl
    "videos": (ATOMIC_TEMP,),
}


# A --copies folder's own files (summary.json, curves.png, test_summary.json).
COPIES_TEMPORARY_NAMES = {"": (ATOMIC_TEMP,)}


def leftover_temporaries(
    output_dir: str, names: Mapping[str, Tuple[re.Pattern, ...]] = TEMPORARY_NAMES
) -> List[str]:
    """What kills left half-written in a run folder (``names``, by subfolder), and the
    data files of a checkpoint whose ``.index`` a kill kept TensorFlow from writing (it
    renames the data into place first); writes nothing.

    Returns:
        Paths of files and folders, sorted.
    """
    found = []
    for folder, patterns in names.items():
        where = os.path.join(output_dir, folder)
        names = os.listdir(where) if os.path.isdir(where) else []
        found += [os.path.join(where, n) for n in names if any(p.fullmatch(n) for p in patterns)]
    folder = os.path.join(output_dir, CHECKPOINT_DIR)
    indexed = set(checkpoint_steps(folder))
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        data = re.fullmatch(r"ckpt-(\d+)\.data-\d{5}-of-\d{5}", name)
        if data and int(data.group(1)) not in indexed:
            found.append(os.path.join(folder, name))
    return sorted(found)


def remove_temporaries(paths: Sequence[str]) -> None:
    """Deletes what ``leftover_temporaries`` found: files, and folders with their files."""
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)


# Fields that shape what a checkpoint holds: which agent and network, the
# weights' shapes (hidden_sizes; env: observation and action spaces) and the
# replay's capacity. Checkpoints saved with other values cannot be restored, so
# not even --allow_hparam_change resumes such a run. (activation is not here: a
# run resumes with another; an hparams class adds its own, e.g. DQN's num_envs.)
CHECKPOINT_SHAPE_FIELDS = frozenset(
    {"agent", "model", "torso", "hidden_sizes", "env", "buffer_size"}
)


def checkpoint_shape_fields(hp: HParams) -> frozenset:
    """CHECKPOINT_SHAPE_FIELDS plus what the agent's hparams class adds (DQN's
    replay file is laid out by num_envs)."""
    return CHECKPOINT_SHAPE_FIELDS | frozenset(type(hp).checkpoint_shape_fields)


class SeparateState(Protocol):
    """State saved beside each checkpoint in its own file, not inside it.

    ``save`` must write the whole file or nothing (rl/files.py's atomic writers).
    """

    def save(self, path: str) -> None: ...

    def load(self, path: str) -> None: ...


def changes_text(changed: Dict[str, Tuple[Any, Any]]) -> str:
    """``differences``' result as "field: old -> new, ..." for a message."""
    return ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())


def say(text: str) -> None:
    """A notice for the person running the experiment, on stderr."""
    print(f"rl: {text}", file=sys.stderr, flush=True)


# --- checks before anything is built ------------------------------------------
def check_output_dir(output_dir: str, flag: str = "--output_dir") -> None:
    """Refuses an output folder that is a file or one this process cannot write.

    Tries a real write (a probe folder, removed at once) in output_dir, or in
    its nearest existing parent if it does not exist yet: permission bits say
    nothing for root, nor for read-only or virtual file systems.

    Args:
        output_dir: the folder to write in (it may not exist yet).
        flag: the option that named it, for the message (export.py: --export_dir).

    Raises:
        RunConflictError: naming the path and what is wrong.
    """
    existing = os.path.abspath(output_dir)
    while not os.path.exists(existing):
        if os.path.islink(existing):  # a link that leads nowhere: no folder can be made there
            raise RunConflictError(
                f"{flag} {output_dir}: {existing} is a symbolic link that cannot be followed "
                f"({link_trouble(existing)}); name a folder, or a link to one"
            )
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise RunConflictError(
            f"{flag} {output_dir}: {existing} is a file, not a folder; name a folder"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=WRITE_CHECK_PREFIX, dir=existing))
    except OSError as e:
        raise RunConflictError(
            f"{flag} {output_dir}: cannot write in {existing} ({e.strerror}); "
            "name a folder you can write"
        ) from None


def link_trouble(path: str) -> str:
    """Why the symbolic link ``path`` cannot be followed, in the OS's words."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return f"its target {os.readlink(path)} does not exist"
        return e.strerror or type(e).__name__
    return "it can be followed now"


def read_eval_file(output_dir: str) -> List[Dict[str, Any]]:
    """The records of a run's eval.jsonl; a damaged line raises RunConflictError."""
    try:
        return read_eval_records(os.path.join(output_dir, EVAL_FILE))
    except JsonLinesError as e:
        raise RunConflictError(str(e)) from None


def check_resume(
    output_dir: str, hp: HParams, allow_change: bool, writing: bool = True
) -> Optional[HParams]:
    """Refuses a run whose hparams differ from the ones saved in ``output_dir``, and a
    new run (when ``writing``) in a folder that holds something else.

    Fields in RESUMABLE_FIELDS (how long, how often) may change freely.

    Returns:
        The saved hparams, or None for a new run.
    """
    saved = load_run_hparams(output_dir)
    if saved is None:
        if writing:
            check_new_run_folder(output_dir)
        return None
    changed = {k: v for k, v in differences(saved, hp).items() if k not in RESUMABLE_FIELDS}
    listed = changes_text(changed)
    shape_fields = checkpoint_shape_fields(hp)
    if set(changed) & shape_fields:
        # Its checkpoints cannot be restored into this agent: no flag helps.
        raise RunConflictError(
            f"{output_dir} holds a run with other hparams ({listed}); it cannot be resumed "
            f"with these ({', '.join(sorted(set(changed) & shape_fields))} change "
            "what its checkpoints hold): use another --output_dir"
        )
    if changed and not allow_change:
        raise RunConflictError(
            f"{output_dir} holds a run with other hparams ({listed}); use another "
            "--output_dir, or pass --allow_hparam_change to resume it with these"
        )
    return saved


def check_new_run_folder(output_dir: str) -> None:
    """A new run goes into a new or empty folder: never beside --copies runs (whose
    analysis would then read the wrong run) nor among files it could overwrite.

    Raises:
        RunConflictError: naming what the folder holds.
    """
    if not os.path.isdir(output_dir):
        return
    if copy_dirs(output_dir) or os.path.exists(os.path.join(output_dir, SUMMARY_NAME)):
        raise RunConflictError(
            f"{output_dir} holds --copies runs (run_<i>/): resume them with --copies and "
            "the same --hparams, or use another --output_dir"
        )
    shown = foreign_names(output_dir, ours=(RUN_LOCK_FILE,))
    if shown:
        raise RunConflictError(
            f"{output_dir} holds files that are not a run ({shown}) and no {HPARAMS_FILE}; "
            "use a new or empty --output_dir"
        )


def foreign_names(folder: str, ours: Tuple[str, ...]) -> str:
    """What ``folder`` holds besides the names in ``ours``, for a message ("a, b, c, ...");
    "" when nothing. Hidden names do not count: this project's temporary files (a kill can
    leave one), .DS_Store, .nfs*."""
    others = sorted(n for n in os.listdir(folder) if n not in ours and not n.startswith("."))
    return ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")


def check_copies_folder(output_dir: str, copies: int) -> None:
    """--copies writes run_<i>/ folders and summary.json: never into a single run's folder,
    new copies (no run_<i>/ yet) only into a new or empty folder, and into a folder of
    copies only as many or more (more copies grow it: the ones there resume or are done,
    the new ones train; fewer would leave some out of summary.json).

    Args:
        output_dir: the --copies folder.
        copies: --copies N.

    Raises:
        RunConflictError: the folder is a file or cannot be written, or holds a single
            run, files that are not copies, or more copies than ``copies``.
    """
    check_output_dir(output_dir)
    if os.path.exists(os.path.join(output_dir, HPARAMS_FILE)):
        raise RunConflictError(
            f"{output_dir} holds a single run ({HPARAMS_FILE}), not --copies runs: resume it "
            "without --copies, or use another --output_dir"
        )
    held = copy_dirs(output_dir) if os.path.isdir(output_dir) else []
    if len(held) > copies:
        raise RunConflictError(
            f"{output_dir} holds {len(held)} copies (run_<i>/) and --copies {copies} would "
            f"leave some out of {SUMMARY_NAME}; give --copies {len(held)} or more to resume or "
            "grow them, or use another --output_dir"
        )
    if held or not os.path.isdir(output_dir):
        return  # new, or copies to resume or grow
    shown = foreign_names(output_dir, ours=())
    if shown:
        raise RunConflictError(
            f"{output_dir} holds files that are not --copies runs ({shown}) and no run_<i>/; "
            "use a new or empty --output_dir"
        )


def _in_use(output_dir: str, holder: str) -> RunConflictError:
    if holder == str(os.getpid()):
        return RunConflictError(
            f"{output_dir} is held by an Experiment in this process: close() it first"
        )
    return RunConflictError(
        f"{output_dir} is being trained by another process (pid {holder}); wait for it to "
        "end or stop it, or use another --output_dir"
    )


def _lock_path(output_dir: str) -> str:
    return os.path.join(output_dir, RUN_LOCK_FILE)


def check_not_in_use(output_dir: str) -> None:
    """Refuses a run folder that another process, or a live Experiment of this one, is
    training (it holds train.lock)."""
    try:
        holder = lock_holder(_lock_path(output_dir))
        if holder == str(os.getpid()):
            gc.collect()  # an Experiment dropped without close() may still hold it
            holder = lock_holder(_lock_path(output_dir))
    except OSError as e:
        raise RunConflictError(f"cannot check {_lock_path(output_dir)}: {e.strerror}") from None
    if holder is not None:
        raise _in_use(output_dir, holder)


LOCK_ATTEMPTS = 5  # another process's probe (check_not_in_use) holds the lock for a moment


def lock_run_folder(output_dir: str) -> BinaryIO:
    """Creates the run folder and holds its lock until the file returned is closed (or
    garbage-collected, or this process ends, even by kill -9): two processes never
    train one run.

    Raises:
        RunConflictError: another process (or an Experiment of this one) holds it.
    """
    path = _lock_path(output_dir)
    try:
        os.makedirs(output_dir, exist_ok=True)
        for attempt in range(LOCK_ATTEMPTS):
            fd = lock_exclusively(path)
            if fd is not None:
                return os.fdopen(fd, "rb")
            holder = lock_holder(path)
            if holder == str(os.getpid()):
                gc.collect()  # an Experiment dropped without close() may still hold it
            elif holder not in (None, "?"):
                break  # a trainer, not a probe
            time.sleep(0.05 * (attempt + 1))
    except OSError as e:
        raise RunConflictError(f"cannot lock {path}: {e.strerror}") from None
    raise _in_use(output_dir, lock_holder(path) or "?")


# --- the folder ----------------------------------------------------------------
class RunFolder:
    """One run's folder: restores and saves the checkpoint, its separate state
    files and the logbook's records together."""

    def __init__(
        self,
        path: str,
        checkpoint: tf.train.Checkpoint,
        separate_state: Mapping[str, SeparateState],
    ):
        """Reads and writes nothing yet.

        Args:
            path: the run folder.
            checkpoint: everything saved in the tf.train checkpoint.
            separate_state: state saved beside each checkpoint as
                ``checkpoints/<name>-<step>.npz``, by name (names are [a-z_]+).
        """
        for name in separate_state:
            if not re.fullmatch(r"[a-z_]+", name):
                raise ValueError(f"separate state names are [a-z_]+, got {name!r}")
        self.path = path
        self.checkpoint = checkpoint
        self.separate_state = dict(separate_state)
        self.logbook = Logbook(path)
        self.manager: Optional[tf.train.CheckpointManager] = None

    def file(self, *parts: str) -> str:
        """A path inside the run folder."""
        return os.path.join(self.path, *parts)

    @property
    def checkpoint_dir(self) -> str:
        return self.file(CHECKPOINT_DIR)

    def state_file(self, name: str, step: int) -> str:
        """Where the separate state ``name`` of checkpoint ``step`` is saved."""
        return os.path.join(self.checkpoint_dir, f"{name}-{step}.npz")

    @property
    def latest_checkpoint(self) -> Optional[str]:
        """The newest checkpoint saved by this run's manager (None if none)."""
        return self.manager.latest_checkpoint if self.manager else None

    # --- restoring (writes nothing) -------------------------------------------
    def restore(self, has_records: bool) -> Tuple[Optional[str], Dict[str, str]]:
        """Restores the newest readable checkpoint; says nothing (``fallback_notice`` does).

        Checkpoints are found from their files (``ckpt-<N>.index``), so a lost
        or garbled checkpoints/checkpoint index loses nothing. A checkpoint
        whose separate state file is missing or unreadable counts as
        unreadable. Nothing is written.

        Args:
            has_records: eval.jsonl holds records (so the run had checkpoints).

        Returns:
            The restored checkpoint's path (None: a new run) and the newer checkpoints
            that could not be read: path -> why, newest first.
        """
        folder = self.checkpoint_dir
        steps = list(reversed(checkpoint_steps(folder)))
        candidates = [os.path.join(folder, checkpoint_name(n)) for n in steps]
        reasons = []  # why each newer checkpoint cannot be read, said once one can be
        for i, (step, path) in enumerate(zip(steps, candidates)):
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                self._load_separate_state(step)
            except Exception as e:  # noqa: BLE001  (TF raises IndexError, DataLoss, ... on bad files)
                reasons.append(error_line(e))
                continue
            return path, dict(zip(candidates, reasons))
        if candidates:
            names = ", ".join(os.path.basename(path) for path in candidates)
            raise CheckpointError(
                f"no checkpoint in {folder} can be read ({names}; the newest: {reasons[0]}); "
                "put readable ones back from a copy, or train in another --output_dir"
            )
        if has_records or listed_checkpoints(folder):
            # Starting over would drop every record of the run.
            raise CheckpointError(
                f"{self.path} holds a run whose checkpoints ({folder}/ckpt-*) are gone; "
                "use another --output_dir"
            )
        return None, {}

    def _load_separate_state(self, step: int) -> None:
        for name, state in self.separate_state.items():
            path = self.state_file(name, step)
            if not os.path.exists(path):
                raise CheckpointError(f"its {os.path.basename(path)} is missing")
            state.load(path)

    # --- preparing the folder (writes) -------------------------------------------
    def prepare(
        self,
        hp: HParams,
        existing: Optional[HParams],
        unreadable: List[str],
        argv: Optional[List[str]],
        flags: Optional[Dict[str, Any]],
        device_info: Dict[str, str],
    ) -> Optional[str]:
        """Removes what kills left half-written, writes hparams.json and the snapshot,
        tidies checkpoints/ and opens its manager.

        Args:
            hp: the run's resolved hparams.
            existing: the hparams saved in the folder (None: a new run).
            unreadable: checkpoints that ``restore`` could not read.
            argv: the command line to record (default sys.argv).
            flags: the flag values to record.
            device_info: the system's description of its devices.

        Returns:
            The folder the unreadable checkpoints went to; None if there were none.
        """
        remove_temporaries(leftover_temporaries(self.path))
        self._write_hparams_and_snapshot(hp, existing, argv, flags, device_info)
        moved_to = self._tidy_checkpoints(unreadable)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.checkpoint_dir, max_to_keep=hp.keep_checkpoints
        )
        return moved_to

    def _write_hparams_and_snapshot(
        self,
        hp: HParams,
        existing: Optional[HParams],
        argv: Optional[List[str]],
        flags: Optional[Dict[str, Any]],
        device_info: Dict[str, str],
    ) -> None:
        os.makedirs(self.path, exist_ok=True)
        changed = differences(existing, hp) if existing is not None else {}
        if changed:  # a run's hparams never change without a word
            say(
                f"resuming with changed hparams ({changes_text(changed)}); {HPARAMS_FILE} now holds them"
            )
        if set(changed) - RESUMABLE_FIELDS:
            # Keep the old file: nothing already written is lost.
            set_aside(self.file(HPARAMS_FILE))
        write_text_atomic(self.file(HPARAMS_FILE), json.dumps(hp.to_dict(), indent=2) + "\n")
        snapshot.write_snapshot(
            self.path,
            list(argv if argv is not None else sys.argv),
            flags={**(flags or {}), "device": device_info},
            hparams=hp.to_dict(),
            seeds={
                "seed": hp.seed,
                "rule": "one stream per purpose derived from seed (rl/seeding.py): "
                "acting, update, replay, evaluation; env resets from "
                "derived_seed(seed, stream, step)",
            },
        )

    def _tidy_checkpoints(self, unreadable: List[str]) -> Optional[str]:
        """Makes checkpoints/ hold only what CheckpointManager should manage.

        Unreadable checkpoints (with their separate state files) go to
        checkpoints/unreadable/ (so a new save of the same step can replace
        them, and nothing is deleted unseen), state files without their checkpoint
        are deleted, and the index is rebuilt from the files when it does not
        list exactly them (``prepare`` has removed what a kill left mid-save; the rebuild
        is said only when nothing moved aside: moving them changes it, and the fallback's
        one line, ``fallback_notice``, says that).

        Returns:
            The folder the unreadable checkpoints went to; None if there were none.
        """
        folder = self.checkpoint_dir
        moved_to = None
        for path in unreadable:
            step = checkpoint_step(path)
            state_files = [self.state_file(name, step) for name in self.separate_state]
            moved_to = move_aside(
                glob.glob(glob.escape(path) + ".*") + [p for p in state_files if os.path.exists(p)],
                os.path.join(folder, UNREADABLE_DIR),
            )
        self._drop_orphan_state_files()
        steps = checkpoint_steps(folder)
        if steps and listed_checkpoints(folder) != steps:
            write_checkpoint_index(folder, steps)
            if moved_to is None:
                say(f"rebuilt {os.path.join(folder, CHECKPOINT_INDEX)} from the checkpoint files")
        return moved_to

    def _drop_orphan_state_files(self) -> None:
        """Deletes state files whose checkpoint is gone (rotated, or never saved)."""
        if not self.separate_state:
            return
        folder = self.checkpoint_dir
        kept = set(checkpoint_steps(folder))
        for name in self.separate_state:
            for step in state_file_steps(folder, name):
                if step not in kept:
                    os.remove(self.state_file(name, step))

    # --- saving ----------------------------------------------------------------
    def save(self, step: int) -> str:
        """Saves checkpoint ``step`` with the records it covers.

        The order makes a kill at any point harmless: the logbook's records are
        staged, then each separate state file is written (a checkpoint without
        its files would be unreadable; files without their checkpoint are
        deleted when tidying), then the checkpoint, then the records are
        committed and state files of rotated checkpoints deleted.

        Args:
            step: the env step the checkpoint is named after.

        Returns:
            The checkpoint's path.

        Raises:
            OSError: a file cannot be written (a full disk); what was written is what a
                kill at that point leaves.
        """
        with writes_as_oserror(f"step {step} in {self.path}"):
            self.logbook.stage(step)
            latest = self.manager.latest_checkpoint
            if latest is None or named_step(latest) != step:
                if self.separate_state:
                    os.makedirs(self.checkpoint_dir, exist_ok=True)  # the first save comes first
                for name, state in self.separate_state.items():
                    state.save(self.state_file(name, step))
                latest = self.manager.save(checkpoint_number=step)
            self.logbook.commit(step)
        self._drop_orphan_state_files()
        return latest


# --- checkpoint files ------------------------------------------------------------
def checkpoint_steps(folder: str) -> List[int]:
    """Steps of the checkpoints in ``folder``, from their ``ckpt-<N>.index`` files."""
    if not os.path.isdir(folder):
        return []
    found = (re.fullmatch(r"ckpt-(\d+)\.index", name) for name in os.listdir(folder))
    return sorted(int(m.group(1)) for m in found if m)


def checkpoint_step(path: str) -> int:
    """The step a checkpoint is named after: 384 for ``.../checkpoints/ckpt-384``."""
    step = named_step(path)
    if step is None:
        raise ValueError(f"{path} is not named ckpt-<step>")
    return step


def state_file_steps(folder: str, name: str) -> List[int]:
    """Steps of the ``<name>-<N>.npz`` state files in ``folder``."""
    if not os.path.isdir(folder):
        return []
    found = (re.fullmatch(rf"{name}-(\d+)\.npz", entry) for entry in os.listdir(folder))
    return sorted(int(m.group(1)) for m in found if m)


def listed_checkpoints(folder: str) -> Optional[List[int]]:
    """Steps that the checkpoints/checkpoint index lists, or None if it is missing or garbled.

    The index is a text protobuf (``key: value`` lines); it counts as sound
    only if it names a latest checkpoint and a timestamp per listed one
    (without them CheckpointManager would never delete old checkpoints).
    """
    path = os.path.join(folder, CHECKPOINT_INDEX)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    fields: Dict[str, List[str]] = collections.defaultdict(list)
    for line in lines:
        match = re.fullmatch(r'(\w+): (?:"(?:.*/)?ckpt-(\d+)"|(\d+(?:\.\d*)?(?:e[+-]?\d+)?))', line)
        if not match:
            return None
        fields[match.group(1)].append(match.group(2) or match.group(3))
    steps = [int(s) for s in fields.pop("all_model_checkpoint_paths", [])]
    latest = fields.pop("model_checkpoint_path", [])
    timestamps = fields.pop("all_model_checkpoint_timestamps", [])
    fields.pop("last_preserved_timestamp", None)
    if fields or not steps or latest != [str(steps[-1])] or len(timestamps) != len(steps):
        return None
    return steps


def write_checkpoint_index(folder: str, steps: List[int]) -> None:
    """Writes the checkpoints/checkpoint index that CheckpointManager reads.

    Args:
        folder: the checkpoints folder.
        steps: the checkpoints to list, oldest first; stamped with their files' times.
    """
    times = [os.path.getmtime(os.path.join(folder, f"{checkpoint_name(n)}.index")) for n in steps]
    lines = [f'model_checkpoint_path: "{checkpoint_name(steps[-1])}"']
    lines += [f'all_model_checkpoint_paths: "{checkpoint_name(n)}"' for n in steps]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in times]
    # Checkpoints newer than this are the ones CheckpointManager rotates.
    lines.append(f"last_preserved_timestamp: {min(times) - 1.0!r}")
    write_text_atomic(os.path.join(folder, CHECKPOINT_INDEX), "\n".join(lines) + "\n")


def fallback_notice(
    unreadable: Dict[str, str],
    used: str,
    moved_to: Optional[str] = None,
    policies: Sequence[str] = (),
    bests: Sequence[str] = (),
) -> str:
    """The one line saying a run falls back to an older checkpoint: which could not be
    read and why, which is used, and what was moved aside.

    Args:
        unreadable: the newer checkpoints that cannot be read: path -> why, newest first.
        used: the checkpoint restored instead.
        moved_to: where the unreadable ones went; None: nothing was moved (read-only).
        policies: the policy artefacts of the training redone, moved aside.
        bests: the best checkpoints (rl/best.py) of the training redone, moved aside.
    """
    names = [os.path.basename(path) for path in unreadable]
    if len(names) == 1:
        said = f"checkpoint {names[0]} cannot be read ({next(iter(unreadable.values()))})"
    else:
        whys = "; ".join(f"{name}: {why}" for name, why in zip(names, unreadable.values()))
        said = f"checkpoints {', '.join(names)} cannot be read ({whys})"
    if moved_to is None:
        return f"{said}; using the previous checkpoint {used}"
    moved = f"moved {' and '.join(names)} to {moved_to}"
    for one, many, paths in (
        ("policy", "policies", policies),
        ("best checkpoint", "best checkpoints", bests),
    ):
        if paths:
            superseded = os.path.join(os.path.dirname(paths[0]), "superseded")
            names = " and ".join(os.path.basename(path) for path in paths)
            moved += f", the {one if len(paths) == 1 else many} {names} to {superseded}"
    return (
        f"{said}; resuming from the previous checkpoint {used}, redoing the training since "
        f"step {checkpoint_step(used)}: {moved}"
    )


def move_aside(paths: List[str], folder: str) -> str:
    """Moves files into ``folder`` without replacing any file already there.

    Returns:
        The folder they went to: ``folder``, or a new ``folder/<time ns>`` on a name clash.
    """
    os.makedirs(folder, exist_ok=True)
    if any(os.path.exists(os.path.join(folder, os.path.basename(p))) for p in paths):
        folder = os.path.join(folder, str(time.time_ns()))
        os.makedirs(folder)
    for path in paths:
        os.replace(path, os.path.join(folder, os.path.basename(path)))
    return folder
