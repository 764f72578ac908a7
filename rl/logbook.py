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
              committed) are committed; any others are dropped.

Every step is atomic (rename) or idempotent (only lines past the last
logged step are appended), so TensorBoard steps never go backwards or double.
"""

import glob
import json
import os
import shutil
import time
from typing import Any, Dict, List, Tuple

from rl import video
from rl._tf import tf

EVAL_FILE = "eval.jsonl"
STAGED_PREFIX = ".staged-"


class Logbook:
    """Held records of one run folder."""

    def __init__(self, output_dir: str):
        """Records nothing until stage/commit.

        Args:
          output_dir: the run folder (tb/ and eval.jsonl go inside).
        """
        self.output_dir = output_dir
        self.tb_dir = os.path.join(output_dir, "tb")
        self._scalars: List[Tuple[str, float, int]] = []
        self._texts: List[Tuple[str, str, int]] = []
        self._gifs: List[Tuple[str, bytes, int, int, int]] = []
        self._eval_lines: List[Dict[str, Any]] = []

    def scalar(self, tag: str, value: float, step: int) -> None:
        self._scalars.append((tag, float(value), int(step)))

    def text(self, tag: str, text: str, step: int) -> None:
        self._texts.append((tag, text, int(step)))

    def gif(self, tag: str, data: bytes, step: int, width: int, height: int) -> None:
        """An animated GIF for TensorBoard's Images tab (only the latest is kept)."""
        self._gifs = [(tag, data, int(step), width, height)]

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
        if self._scalars or self._texts or self._gifs:
            writer = tf.summary.create_file_writer(os.path.join(building, "tb"))
            with writer.as_default():
                for tag, value, s in self._scalars:
                    tf.summary.scalar(tag, value, step=s)
                for tag, text, s in self._texts:
                    tf.summary.text(tag, text, step=s)
                for tag, data, s, width, height in self._gifs:
                    video.gif_summary(tag, data, s, width, height)
            writer.close()
        with open(os.path.join(building, EVAL_FILE), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in self._eval_lines)
        shutil.rmtree(staged, ignore_errors=True)
        os.replace(building, staged)
        self._scalars, self._texts, self._gifs, self._eval_lines = [], [], [], []

    def commit(self, step: int) -> None:
        """Moves the records staged for checkpoint ``step`` into place."""
        staged = self._staged_dir(step)
        if not os.path.isdir(staged):
            return
        os.makedirs(self.tb_dir, exist_ok=True)
        # TensorBoard reads a run's event files in name order: name them by
        # step (the writer's names order by wall time, pid and counter).
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
        with open(staged_eval) as f:
            new = [l for l in f if l.strip() and json.loads(l)["step"] > last]
        if new:
            drop_cut_last_line(path)
            with open(path, "a") as f:
                f.writelines(new)
                f.flush()
                os.fsync(f.fileno())

    def recover(self, restored_step: int) -> None:
        """At start-up: commits what checkpoint ``restored_step`` staged, drops the rest."""
        for path in glob.glob(os.path.join(self.output_dir, STAGED_PREFIX + "*")):
            name = os.path.basename(path)[len(STAGED_PREFIX) :]
            if name == str(restored_step):
                self.commit(restored_step)
            else:
                shutil.rmtree(path, ignore_errors=True)


def drop_cut_last_line(path: str) -> None:
    """Truncates a last line that a kill cut short (no trailing newline)."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def read_eval_records(path: str) -> List[Dict[str, Any]]:
    """The complete records of an eval.jsonl; lines cut by a kill are skipped."""
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "step" in record:
                records.append(record)
    return records


def last_logged_step(path: str) -> int:
    """The step of the last complete line of an eval.jsonl (-1 if none)."""
    return max((int(r["step"]) for r in read_eval_records(path)), default=-1)
