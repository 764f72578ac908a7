"""Summaries and eval lines that reach disk only together with a checkpoint.

A run killed at any moment resumes from its last checkpoint and redoes the
steps after it. If their records were already on disk they would appear
twice, and if records were written only after the checkpoint a kill in
between would lose them. So records are held in memory, staged next to the
checkpoint before it is saved, and committed once it is:

  stage(S):   <output_dir>/.staged-S/{tb events, eval.jsonl}
  (checkpoint S is saved)
  commit(S):  events moved into tb/, lines appended to eval.jsonl
  recover(R): at start-up, staged records of checkpoint R (saved, not yet
              committed) are committed; any others are dropped, and so are
              committed records past R (a run resumed from an older
              checkpoint redoes those steps).

Every step is atomic (rename, truncate) or idempotent (only lines past the
last logged step are appended), so TensorBoard steps never go backwards or
double. Each record keeps the wall time at which it was logged, not the time
its checkpoint was written.
"""

import contextlib
import functools
import glob
import json
import os
import re
import shutil
import struct
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
from tensorboard.compat.proto import (
    event_pb2,
    summary_pb2,
    tensor_pb2,
    tensor_shape_pb2,
    types_pb2,
)
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.scalar import metadata as scalar_metadata
from tensorboard.plugins.text import metadata as text_metadata
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util

from rl.errors import RunConflictError
from rl.files import write_atomically, write_text_atomic

EVAL_FILE = "eval.jsonl"
# The whole evaluation record as a TensorBoard text event, beside its eval/* scalars:
# eval.jsonl is rebuilt from it exactly when lines of it are lost.
EVAL_RECORD_TAG = "eval/record"
STAGED_PREFIX = ".staged-"
# Committed event files: events.out.tfevents.<commit step, 15 digits>.<ns>.<i>.rl.v2
COMMITTED_EVENTS = re.compile(r"events\.out\.tfevents\.(\d{15})\.\d+\.\d+\.rl\.v2")
# The writer named in an event file's first record: how many events follow it.
EVENT_COUNT_PREFIX = "rl events: "


class JsonLinesError(ValueError):
    """A complete line of a JSON-lines log (eval.jsonl, a snapshot's resumes.jsonl)
    that is not one of its records."""


class EventFileError(ValueError):
    """An event file that is cut short or damaged; one line naming it and where."""


class Logbook:
    """Held records of one run folder."""

    def __init__(self, output_dir: str):
        """Records nothing until stage/commit.

        Args:
          output_dir: the run folder (tb/ and eval.jsonl go inside).
        """
        self.output_dir = output_dir
        self.tb_dir = os.path.join(output_dir, "tb")
        # (kind, tag, value, step, wall time): turned into TensorBoard events when
        # staged, so logging in the training loop is a tuple append (~20 us less
        # per scalar than building the protobuf here).
        self._records: List[Tuple[str, str, Any, int, float]] = []
        self._gif: Optional[Tuple[str, str, Any, int, float]] = None
        self._eval_lines: List[Dict[str, Any]] = []
        # check_records' reading: (restored step, eval.jsonl's records, tb/'s), by step.
        self._checked: Optional[Tuple[int, Dict[int, Any], Dict[int, Any]]] = None

    def scalar(self, tag: str, value: float, step: int) -> None:
        """A float for TensorBoard's Scalars tab, stamped with the time now."""
        self._records.append(("scalar", tag, float(value), int(step), time.time()))

    def text(self, tag: str, text: str, step: int) -> None:
        """Markdown text for TensorBoard's Text tab, stamped with the time now."""
        self._records.append(("text", tag, text, int(step), time.time()))

    def gif(self, tag: str, data: bytes, step: int, width: int, height: int) -> None:
        """An animated GIF for TensorBoard's Images tab (only the latest is kept).

        Args:
          tag: summary name.
          data: a complete GIF file.
          step: the step to file it under.
          width: GIF width in pixels.
          height: GIF height in pixels.

        Raises:
          ValueError: if ``data`` is not a GIF or the size is not positive.
        """
        if not data.startswith((b"GIF87a", b"GIF89a")):
            raise ValueError("data is not a GIF file (missing GIF87a/GIF89a header)")
        if width <= 0 or height <= 0:
            raise ValueError(f"width and height must be positive, got {width}x{height}")
        self._gif = ("gif", tag, (width, height, data), int(step), time.time())

    def eval_line(self, record: Dict[str, Any]) -> None:
        """An evaluation result (must hold ``step``, ``return_mean``, ``return_std``
        and ``lengths``): a line of eval.jsonl and its TensorBoard events, stamped now."""
        self._eval_lines.append(record)
        self._records.extend(eval_summaries(record, time.time()))

    def _staged_dir(self, step: int) -> str:
        return os.path.join(self.output_dir, f"{STAGED_PREFIX}{step}")

    def stage(self, step: int) -> None:
        """Writes held records beside checkpoint ``step`` (before it is saved)."""
        staged = self._staged_dir(step)
        building = staged + ".tmp"
        shutil.rmtree(building, ignore_errors=True)
        os.makedirs(building)
        records = self._records + ([self._gif] if self._gif is not None else [])
        events = [summary_event(*record) for record in records]
        if events:
            os.makedirs(os.path.join(building, "tb"))
            write_event_file(os.path.join(building, "tb", "events.out.tfevents.staged"), events)
        with open(os.path.join(building, EVAL_FILE), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in self._eval_lines)
        shutil.rmtree(staged, ignore_errors=True)
        os.replace(building, staged)
        self._records, self._gif, self._eval_lines = [], None, []

    def commit(self, step: int) -> None:
        """Moves the records staged for checkpoint ``step`` into place."""
        staged = self._staged_dir(step)
        if not os.path.isdir(staged):
            return
        os.makedirs(self.tb_dir, exist_ok=True)
        # TensorBoard reads a run's event files in name order: name them by step.
        for i, path in enumerate(sorted(glob.glob(os.path.join(staged, "tb", "*tfevents*")))):
            name = f"events.out.tfevents.{step:015d}.{time.time_ns()}.{i}.rl.v2"
            os.replace(path, os.path.join(self.tb_dir, name))
        staged_eval = os.path.join(staged, EVAL_FILE)
        if os.path.exists(staged_eval):
            self._append_new_eval_lines(staged_eval)
        shutil.rmtree(staged)

    def _append_new_eval_lines(self, staged_eval: str) -> None:
        path = os.path.join(self.output_dir, EVAL_FILE)
        last = last_logged_step(path)
        with open(staged_eval, encoding="utf-8") as f:
            new = [l for l in f if l.strip() and json.loads(l)["step"] > last]
        if new:
            drop_cut_last_line(path)
            with open(path, "a", encoding="utf-8") as f:
                f.writelines(new)
                f.flush()
                os.fsync(f.fileno())

    def check_records(self, restored_step: int, evaluations: Optional[int]) -> None:
        """Before anything is written: refuses a folder whose evaluation records cannot
        be made whole again (``recover`` rebuilds what can be).

        Each evaluation is both a line of eval.jsonl and events in tb/, committed
        together, so one side rebuilds the other. Event files are only ever written
        whole, so a damaged one lost records (losses, returns) nothing else holds.

        Args:
          restored_step: the restored checkpoint's step.
          evaluations: how many evaluations the checkpoint covers (None: a checkpoint
            from before it counted them).

        Raises:
          RunConflictError: naming the file, what is lost and the fix.
        """
        logged, in_events = self._records_to_keep(restored_step)
        self._checked = (restored_step, logged, in_events)  # recover's to rebuild from
        eval_path = os.path.join(self.output_dir, EVAL_FILE)
        found = len(set(logged) | set(in_events))
        if evaluations is not None and found < evaluations:
            raise RunConflictError(
                f"{eval_path} and {self.tb_dir} hold {found} of the {evaluations} evaluation "
                f"records that checkpoint {restored_step} covers, and the others are in "
                "neither: put the files back from a copy, or use another --output_dir"
            )
        only_means = sorted(s for s in set(in_events) - set(logged) if in_events[s] is None)
        if only_means:
            raise RunConflictError(
                f"{eval_path} lacks the evaluation records of {steps_text(only_means)}, "
                f"which {self.tb_dir} holds only as means (written before {EVAL_RECORD_TAG}): "
                "put the file back from a copy, or use another --output_dir"
            )

    def _records_to_keep(
        self, restored_step: int
    ) -> Tuple[Dict[int, Dict[str, Any]], Dict[int, Optional[Dict[str, Any]]]]:
        """The evaluation records that a recovery to ``restored_step`` keeps, by step:
        eval.jsonl's, and tb/'s (a record, or None where only its scalars are there).
        Records staged for the restored checkpoint count: recovery commits them.

        Raises:
          RunConflictError: an event file is damaged, or eval.jsonl has a bad line.
        """
        eval_path = os.path.join(self.output_dir, EVAL_FILE)
        staged = self._staged_dir(restored_step)
        try:
            logged = {
                r["step"]: r
                for r in read_eval_records(eval_path)
                + read_eval_records(os.path.join(staged, EVAL_FILE))
                if r["step"] <= restored_step
            }
            event_files = [p for s, p in committed_event_files(self.tb_dir) if s <= restored_step]
            event_files += sorted(glob.glob(os.path.join(staged, "tb", "*tfevents*")))
            in_events: Dict[int, Optional[Dict[str, Any]]] = {}
            for path in event_files:
                for step, record in eval_records_in_events(path).items():
                    if step <= restored_step and in_events.get(step) is None:
                        in_events[step] = record
        except JsonLinesError as e:
            raise RunConflictError(str(e)) from None
        except EventFileError as e:
            raise RunConflictError(
                f"{e}: the records after that point are lost and cannot be rebuilt; delete "
                "the file to resume without them (its evaluation records are rebuilt from "
                f"{EVAL_FILE}), or use another --output_dir"
            ) from None
        return logged, in_events

    def recover(self, restored_step: int, fell_back: bool = False) -> List[str]:
        """At start-up: commits what checkpoint ``restored_step`` staged, drops the rest,
        and rebuilds the evaluation records one side lacks from the other.

        Committed records past ``restored_step`` are dropped too: the resumed
        run logs those steps again (it fell back to an older checkpoint).
        ``check_records`` has settled that nothing lost is left unrebuilt.

        Args:
          restored_step: the step of the restored checkpoint, 0 for a new run.
          fell_back: newer checkpoints could not be read; the line that says so says
            that their training is redone, so dropping its records goes unsaid here.

        Returns:
          One line for each change to committed records: what and why.
        """
        eval_path = os.path.join(self.output_dir, EVAL_FILE)
        notices = []
        cut = drop_cut_last_line(eval_path)
        if cut:
            notices.append(cut)
        for path in glob.glob(os.path.join(self.output_dir, STAGED_PREFIX + "*")):
            name = os.path.basename(path)[len(STAGED_PREFIX) :]
            if name == str(restored_step):
                self.commit(restored_step)
            else:
                shutil.rmtree(path, ignore_errors=True)
        dropped = False
        for step, path in committed_event_files(self.tb_dir):
            if step > restored_step:
                os.remove(path)
                dropped = True
        if (drop_eval_lines_after(eval_path, restored_step) or dropped) and not fell_back:
            notices.append(f"dropped the records past step {restored_step}: they are redone")
        return notices + self._rebuild_eval_records(restored_step)

    def _rebuild_eval_records(self, restored_step: int) -> List[str]:
        """Writes the evaluation records that eval.jsonl or tb/ lacks from the other."""
        eval_path = os.path.join(self.output_dir, EVAL_FILE)
        if self._checked is not None and self._checked[0] == restored_step:
            _, logged, in_events = self._checked  # what recovery keeps: read once, in the check
        else:
            logged, in_events = self._records_to_keep(restored_step)
        notices = []
        to_log = sorted(set(in_events) - set(logged))
        if to_log:
            records = {**logged, **{s: in_events[s] for s in to_log}}
            text = "".join(json.dumps(records[s]) + "\n" for s in sorted(records))
            write_text_atomic(eval_path, text)
            notices.append(
                f"rebuilt the evaluation records of {steps_text(to_log)} in {eval_path} "
                f"from {self.tb_dir}, which holds them"
            )
        to_events = sorted(set(logged) - set(in_events))
        if to_events:
            os.makedirs(self.tb_dir, exist_ok=True)
            for step in to_events:
                # One file per record, named by its step: a later fall-back to an older
                # checkpoint drops exactly the ones past it.
                name = f"events.out.tfevents.{step:015d}.{time.time_ns()}.0.rl.v2"
                events = [summary_event(*r) for r in eval_summaries(logged[step], time.time())]
                write_event_file_atomic(os.path.join(self.tb_dir, name), events)
            notices.append(
                f"rebuilt the evaluation events of {steps_text(to_events)} in "
                f"{self.tb_dir} from {eval_path}, which holds them"
            )
        return notices


def steps_text(steps: List[int]) -> str:
    """Steps for a one-line message ("step 5", "steps 5, 10"): all of a few, the
    ends of many."""
    if len(steps) == 1:
        return f"step {steps[0]}"
    if len(steps) <= 6:
        return f"steps {', '.join(map(str, steps))}"
    return f"steps {', '.join(map(str, steps[:3]))}, ... {steps[-1]} ({len(steps)} records)"


def eval_summaries(
    record: Dict[str, Any], wall_time: float
) -> List[Tuple[str, str, Any, int, float]]:
    """The TensorBoard records of one evaluation: its means and the whole record."""
    step = int(record["step"])
    return [
        ("scalar", "eval/return_mean", float(record["return_mean"]), step, wall_time),
        ("scalar", "eval/return_std", float(record["return_std"]), step, wall_time),
        ("scalar", "eval/length_mean", float(np.mean(record["lengths"])), step, wall_time),
        ("text", EVAL_RECORD_TAG, json.dumps(record), step, wall_time),
    ]


SCALAR_SHAPE = tensor_shape_pb2.TensorShapeProto()
METADATA_MAKERS = {
    "scalar": scalar_metadata.create_summary_metadata,
    "text": text_metadata.create_summary_metadata,
    "gif": image_metadata.create_summary_metadata,
}


@functools.lru_cache(maxsize=4096)
def summary_metadata(kind: str, tag: str) -> summary_pb2.SummaryMetadata:
    """The plugin metadata of a ``kind`` summary named ``tag`` (the same for every record
    of a tag; protobuf merges it by copy, so sharing one is safe)."""
    return METADATA_MAKERS[kind](display_name=tag, description="")


def summary_event(kind: str, tag: str, value: Any, step: int, wall_time: float) -> event_pb2.Event:
    """One held record as a TensorBoard Event with its own wall time.

    Args:
      kind: "scalar" (a float), "text" (markdown) or "gif" ((width, height, GIF bytes)).
      tag: summary name.
      value: the record's value, as ``kind`` says.
      step: the step to file it under.
      wall_time: when it was logged (seconds since the epoch).
    """
    if kind == "scalar":
        # What tensor_util.make_tensor_proto(np.float32(value)) gives, at a tenth of its
        # cost: a run stages thousands of scalars at each checkpoint.
        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_FLOAT, tensor_shape=SCALAR_SHAPE, float_val=[value]
        )
    elif kind == "text":
        tensor = tensor_util.make_tensor_proto(value.encode("utf-8"), dtype=np.object_)
    elif kind == "gif":
        # An image summary is [width, height, encoded image]; TensorBoard serves
        # the bytes unchanged, so browsers play a GIF as an animation.
        width, height, data = value
        tensor = tensor_util.make_tensor_proto(
            np.array([str(width).encode(), str(height).encode(), data], dtype=np.object_)
        )
    else:
        raise ValueError(f"unknown record kind {kind!r}: valid: scalar, text, gif")
    metadata = summary_metadata(kind, tag)
    summary = summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=metadata)]
    )
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary)


def write_event_file(path: str, events: List[event_pb2.Event]) -> None:
    """A TensorBoard event file holding ``events`` with their own wall times."""
    # The version record TensorBoard expects first in every event file; it also says how
    # many events follow, so a file cut between two records is found too.
    header = event_pb2.Event(
        wall_time=events[0].wall_time,
        file_version="brain.Event:2",
        source_metadata=event_pb2.SourceMetadata(writer=f"{EVENT_COUNT_PREFIX}{len(events)}"),
    )
    records = [header.SerializeToString()] + [event.SerializeToString() for event in events]
    # An event file is a TFRecord file. TensorFlow's writer checksums in C++, ten times
    # faster than TensorBoard's Python one; processes without TensorFlow use the latter.
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "io"):
        with tf.io.TFRecordWriter(path) as writer:
            for record in records:
                writer.write(record)
        return
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        for record in records:
            writer.write(record)
        f.flush()


def committed_event_files(tb_dir: str) -> List[Tuple[int, str]]:
    """(commit step, path) of the event files in ``tb_dir``, by step."""
    if not os.path.isdir(tb_dir):
        return []
    found = []
    for name in os.listdir(tb_dir):
        match = COMMITTED_EVENTS.fullmatch(name)
        if match:
            found.append((int(match.group(1)), os.path.join(tb_dir, name)))
    return sorted(found)


def recent_scalars(tb_dir: str, limit: int = 100) -> Dict[str, List[float]]:
    """The last ``limit`` values of each scalar in a run's tb/, oldest first.

    Args:
      tb_dir: the run's tb/ folder.
      limit: values kept per tag.
    """
    values: Dict[str, List[float]] = {}
    for _, path in committed_event_files(tb_dir):
        for tag, _, value, _ in scalar_events(path):
            values.setdefault(tag, []).append(value)
    return {tag: vals[-limit:] for tag, vals in values.items()}


def scalar_events(path: str) -> List[Tuple[str, int, float, int]]:
    """(tag, step, value, wall time in ms) of each float scalar in an event file.

    Args:
      path: a committed event file (rl/logbook.py writes only whole files).

    Raises:
      EventFileError: the file is cut short or damaged.
    """
    found = []
    for event in read_events(path):
        for value in event.summary.value:
            if not value.HasField("tensor"):
                continue
            array = tensor_util.make_ndarray(value.tensor)
            if array.ndim == 0 and array.dtype.kind == "f":
                # str: the float32 as written (0.000125, not 0.00012500000593)
                number = float(str(array))
                found.append((value.tag, event.step, number, int(event.wall_time * 1000)))
    return found


def eval_records_in_events(path: str) -> Dict[int, Optional[Dict[str, Any]]]:
    """The evaluations an event file holds, by step: the whole record (its
    ``eval/record`` text), or None where only its ``eval/return_mean`` is there.

    Raises:
      EventFileError: the file is cut short or damaged.
    """
    found: Dict[int, Optional[Dict[str, Any]]] = {}
    for payload in read_event_records(path):
        if b"eval/" not in payload:  # most events are train/ scalars: skip their parsing
            continue
        event = event_pb2.Event.FromString(payload)
        for value in event.summary.value:
            if value.tag == "eval/return_mean":
                found.setdefault(event.step, None)
            elif value.tag == EVAL_RECORD_TAG:
                text = tensor_util.make_ndarray(value.tensor).item().decode("utf-8")
                found[event.step] = json.loads(text)
    return found


RECORD_HEADER = struct.Struct("<QI")  # a TFRecord's length and its masked CRC-32C
RECORD_FOOTER = struct.Struct("<I")  # the masked CRC-32C of the record's bytes


def read_events(path: str) -> List[event_pb2.Event]:
    """Every event of an event file (see ``read_event_records``).

    Raises:
      EventFileError: naming the file and how many whole events come before the damage.
    """
    events = []
    for payload in read_event_records(path):
        try:
            events.append(event_pb2.Event.FromString(payload))
        except Exception:  # noqa: BLE001  (protobuf's DecodeError, from a private module)
            raise event_file_error(path, len(events), "damaged") from None
    return events


def declared_event_count(header: bytes) -> Optional[int]:
    """How many events follow the first record of an event file this module wrote; None
    for a file written before it said (or by another writer)."""
    try:
        writer = event_pb2.Event.FromString(header).source_metadata.writer
    except Exception:  # noqa: BLE001  (protobuf's DecodeError; read_events reports it)
        return None
    count = writer[len(EVENT_COUNT_PREFIX) :]
    return int(count) if writer.startswith(EVENT_COUNT_PREFIX) and count.isdigit() else None


def read_event_records(path: str) -> List[bytes]:
    """The records of an event file (a TFRecord file), each checked against its CRCs.

    TensorBoard's loader, and TensorFlow's reader too, stop quietly at a record cut
    within its header; a run folder's checks must know. The records' own CRCs are
    checked by TensorFlow when this process has loaded it (C++, ~50 times faster than
    TensorBoard's Python CRC, which a process without TensorFlow uses).

    Raises:
      EventFileError: naming the file and how many whole records come before the damage.
    """
    with open(path, "rb") as f:
        data = f.read()
    tf = sys.modules.get("tensorflow")
    tf = tf if tf is not None and hasattr(tf, "data") else None
    payloads: List[bytes] = []
    footers: List[int] = []
    offset = 0
    while offset < len(data):
        header_end = offset + RECORD_HEADER.size
        if header_end > len(data):
            raise event_file_error(path, len(payloads), "cut short")
        length, length_crc = RECORD_HEADER.unpack_from(data, offset)
        if tf is None and masked_crc32c(data[offset : offset + 8]) != length_crc:
            raise event_file_error(path, len(payloads), "damaged")
        end = header_end + length + RECORD_FOOTER.size
        if end > len(data):
            garbled = masked_crc32c(data[offset : offset + 8]) != length_crc
            raise event_file_error(path, len(payloads), "damaged" if garbled else "cut short")
        payloads.append(data[header_end : header_end + length])
        footers.append(RECORD_FOOTER.unpack_from(data, end - RECORD_FOOTER.size)[0])
        offset = end
    declared = declared_event_count(payloads[0]) if payloads else None
    if declared is not None and len(payloads) != declared + 1:
        raise event_file_error(path, len(payloads), "cut short")
    if tf is not None:  # it checks the lengths' CRCs too
        try:
            for _ in tf.data.TFRecordDataset(path).batch(4096):
                pass
        except tf.errors.DataLossError:
            whole = 0  # found again one record at a time: only a damaged file pays
            with contextlib.suppress(tf.errors.DataLossError):
                for _ in tf.data.TFRecordDataset(path):
                    whole += 1
            raise event_file_error(path, whole, "damaged") from None
        return payloads
    for whole, (payload, footer) in enumerate(zip(payloads, footers)):
        if masked_crc32c(payload) != footer:
            raise event_file_error(path, whole, "damaged")
    return payloads


def event_file_error(path: str, whole: int, how: str) -> EventFileError:
    return EventFileError(f"event file {path} is {how} after its first {whole} events")


def write_event_file_atomic(path: str, events: List[event_pb2.Event]) -> None:
    """``write_event_file``, the whole file or nothing (rl/files.py)."""
    write_atomically(path, lambda tmp: write_event_file(tmp, events))


def drop_cut_last_line(path: str) -> Optional[str]:
    """Truncates a last line that a kill cut short (no trailing newline): how every
    JSON-lines log (eval.jsonl, resumes.jsonl, a tournament's games.jsonl) is mended
    before it is appended to; ``parse_json_lines`` skips such a line meanwhile.

    Returns:
      The notice saying what was dropped, for the caller to show, or None: the file
      is whole (or missing).
    """
    if not os.path.exists(path):
        return None
    with open(path, "rb+") as f:
        data = f.read()
        if not data or data.endswith(b"\n"):
            return None
        keep = data.rfind(b"\n") + 1
        f.truncate(keep)
    return (
        f"dropped the last line of {path}, cut short ({len(data) - keep} bytes without a newline)"
    )


def drop_eval_lines_after(path: str, step: int) -> bool:
    """Truncates an eval.jsonl before its first record past ``step``; True if it did.

    Records are appended in step order, so the ones past ``step`` are a tail.
    """
    for start, record in parse_eval_file(path):
        if record["step"] > step:
            with open(path, "rb+") as f:
                f.truncate(start)
            return True
    return False


def parse_eval_file(path: str) -> List[Tuple[int, Dict[str, Any]]]:
    """(start offset, record) of each complete line of an eval.jsonl (see
    ``parse_json_lines``); each record must have an integer ``step``.

    Raises:
      JsonLinesError: naming the file, the line and what a line must hold.
    """
    return parse_json_lines(
        path,
        eval_record_problem,
        "each line must be a JSON object with an integer 'step' "
        "(fix it, or delete it: training on rebuilds it from tb/; or use another --output_dir)",
    )


def parse_json_lines(
    path: str, record_problem: Callable[[Dict[str, Any]], Optional[str]], rule: str
) -> List[Tuple[int, Dict[str, Any]]]:
    """(start offset, record) of each complete line of a JSON-lines log.

    The one reader of the project's JSON-lines logs, so they all treat a kill
    alike: a last line without its newline (cut short) is skipped, and any
    other line that is not a JSON object ``record_problem`` accepts raises.

    Args:
      path: the log; a missing file has no records.
      record_problem: what is wrong with a line's JSON object, or None.
      rule: what every line must be, for the error message.

    Raises:
      JsonLinesError: naming the file, the line and ``rule``.
    """
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    parsed = []
    offset = 0
    # The piece after the last newline is empty, or a line a kill cut short.
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        record, problem = json_object(line)
        problem = problem or record_problem(record)
        if problem:
            raise JsonLinesError(f"{path} line {number} {problem}; {rule}")
        parsed.append((start, record))
    return parsed


def json_object(line: bytes) -> Tuple[Dict[str, Any], Optional[str]]:
    """One complete line's JSON object and None, or ({}, what keeps it from being one)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return {}, "is not UTF-8 text"
    try:
        record = json.loads(text)
    except ValueError:
        return {}, "is not JSON"
    if not isinstance(record, dict):
        return {}, "is not a JSON object"
    return record, None


def eval_record_problem(record: Dict[str, Any]) -> Optional[str]:
    """What is wrong with one eval.jsonl object, or None."""
    step = record.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return f"has step {step!r}, not an integer"
    return None


def read_eval_records(path: str) -> List[Dict[str, Any]]:
    """The complete records of an eval.jsonl (see ``parse_eval_file``)."""
    return [record for _, record in parse_eval_file(path)]


def last_logged_step(path: str) -> int:
    """The step of the last complete line of an eval.jsonl (-1 if none)."""
    return max((int(r["step"]) for r in read_eval_records(path)), default=-1)
