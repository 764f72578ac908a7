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

import functools
import glob
import json
import os
import re
import shutil
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat.proto import (
    event_pb2,
    summary_pb2,
    tensor_pb2,
    tensor_shape_pb2,
    types_pb2,
)
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.scalar import metadata as scalar_metadata
from tensorboard.plugins.text import metadata as text_metadata
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util

EVAL_FILE = "eval.jsonl"
STAGED_PREFIX = ".staged-"
# Committed event files: events.out.tfevents.<commit step, 15 digits>.<ns>.<i>.rl.v2
COMMITTED_EVENTS = re.compile(r"events\.out\.tfevents\.(\d{15})\.\d+\.\d+\.rl\.v2")


class JsonLinesError(ValueError):
    """A complete line of a JSON-lines log (eval.jsonl, a snapshot's resumes.jsonl)
    that is not one of its records."""


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
        """An evaluation result; must hold ``step``."""
        self._eval_lines.append(record)

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

    def recover(self, restored_step: int) -> bool:
        """At start-up: commits what checkpoint ``restored_step`` staged, drops the rest.

        Committed records past ``restored_step`` are dropped too: the resumed
        run logs those steps again (it fell back to an older checkpoint).

        Args:
          restored_step: the step of the restored checkpoint, 0 for a new run.

        Returns:
          Whether committed records past ``restored_step`` were dropped.
        """
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
        return (
            drop_eval_lines_after(os.path.join(self.output_dir, EVAL_FILE), restored_step)
            or dropped
        )


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
    # The version record TensorBoard expects first in every event file.
    header = event_pb2.Event(wall_time=events[0].wall_time, file_version="brain.Event:2")
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
      path: an event file (a committed one: rl/logbook.py writes only whole files).
    """
    found = []
    for event in event_file_loader.EventFileLoader(path).Load():
        for value in event.summary.value:
            if not value.HasField("tensor"):
                continue
            array = tensor_util.make_ndarray(value.tensor)
            if array.ndim == 0 and array.dtype.kind == "f":
                # str: the float32 as written (0.000125, not 0.00012500000593)
                number = float(str(array))
                found.append((value.tag, event.step, number, int(event.wall_time * 1000)))
    return found


def drop_cut_last_line(path: str) -> None:
    """Truncates a last line that a kill cut short (no trailing newline)."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


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
        "(fix or delete that line, or use another --output_dir)",
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
