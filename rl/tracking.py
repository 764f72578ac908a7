"""Optional experiment tracking: a copy of a run's committed records in MLflow.

TensorBoard (tb/) and eval.jsonl stay the run's own record, always written. A
tracker sends only what they hold once a checkpoint's records are committed
(rl/logbook.py), so a run killed at any moment and resumed never sends a step
twice or loses one. ``Experiment`` calls:

  start(R)        once the run folder is prepared (R: the restored step, 0 for
                  a new run): opens the MLflow run named in tracking.json, or a
                  new one, and sends every committed record not sent yet
  committed(S)    after checkpoint S is saved and its records committed: the same
  finish(status)  at the end of training: the snapshot, hparams.json,
                  eval.jsonl, the latest policy artefact and the best evaluation's
                  (best/ckpt-<N>/: its policy/ and best.json); the run's status

tracking.json in the run folder (rl/files.py's atomic writer, after each send):

  {"uri", "experiment_id", "run_id",
   "sent": {metric: last step sent}, "read_from": commit step of the newest events read}

What is sent is read back from the committed files with the wall times they
were logged at, so records sent again (a kill between sending and writing
tracking.json) are identical points, which MLflow's SQL stores keep once. A
metric is never sent for a step at or before the last one sent for it: a run
that falls back to an older checkpoint leaves MLflow's earlier values of the
steps it redoes. Any MLflow error, an unreachable server included, prints one
warning and switches tracking off for the rest of the process; training goes
on, and a later resume sends what was missed.

MLflow is imported only when an ``MLflowTracking`` starts.
"""

import contextlib
import json
import logging
import os
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol

from rl.best import POLICY_FOLDER, current_best, policy_folder
from rl.best import RECORD_FILE as BEST_RECORD_FILE
from rl.errors import error_line
from rl.files import lock_exclusively, read_json_object, set_aside, write_text_atomic
from rl.hparams.resolve import HPARAMS_FILE
from rl.logbook import EVAL_FILE, committed_event_files, read_eval_records, scalar_events
from rl.policy import artefact_dir, policy_steps
from rl.run_folder import say
from rl.snapshot import SNAPSHOT_DIR, read_snapshot
from rl.version import __version__

TRACKING_FILE = "tracking.json"
# The default store: one SQLite file beside the run folder, shared by the runs there
# (as `tensorboard --logdir runs` reads them all); artefacts go in a folder beside it.
DEFAULT_STORE = "mlruns.db"
ARTIFACTS_DIR = "mlartifacts"
# Sent from eval.jsonl (its exact values) rather than from tb/ (float32).
EVAL_METRICS = ("eval/return_mean", "eval/return_std", "eval/length_mean")
# MLflow's limits (mlflow.utils.validation): value lengths and entities per log_batch.
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
PARAMS_OR_TAGS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
# MLflow retries an HTTP request 7 times with a 120 s timeout (minutes against a dead
# server); training waits for each call, so unless the user set them, fewer and shorter.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
# Loggers silenced during MLflow calls: only rl's own lines reach the terminal.
QUIET_LOGGERS = ("mlflow", "alembic", "urllib3", "sqlalchemy")
# MLflow run statuses for how training ended.
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"


class Tracker(Protocol):
    """What ``Experiment`` calls; none of it may raise or stop training."""

    def start(self, output_dir: str, restored_step: int) -> None:
        """The run folder is prepared; ``restored_step`` is 0 for a new run."""

    def committed(self, step: int) -> None:
        """Checkpoint ``step`` is saved and the records it covers are committed."""

    def finish(self, status: str) -> None:
        """Training ended: FINISHED, FAILED (non-finite, workers) or KILLED (a signal)."""


class NoTracking:
    """``--tracking none``: TensorBoard and eval.jsonl only."""

    def start(self, output_dir: str, restored_step: int) -> None:
        del output_dir, restored_step

    def committed(self, step: int) -> None:
        del step

    def finish(self, status: str) -> None:
        del status


class MLflowTracking:
    """``--tracking mlflow``: one MLflow run per rl run, continued on resume."""

    def __init__(self, uri: Optional[str] = None, experiment: Optional[str] = None):
        """Reads and writes nothing yet.

        Args:
            uri: any MLflow tracking URI; None: the one in the run's tracking.json,
                else ``sqlite:///<parent of the run folder>/mlruns.db``.
            experiment: the MLflow experiment of a new MLflow run; None: the
                run's ``--hparams`` set name (from its snapshot), else ``rl``.
        """
        self.uri = uri
        self.experiment = experiment
        self.folder = ""
        self.state: Dict[str, Any] = {}
        self._client = None
        self._off = False

    # --- the Tracker calls: each guarded -------------------------------------------
    def start(self, output_dir: str, restored_step: int) -> None:
        self.folder = output_dir
        self._guarded("cannot import MLflow", import_mlflow)
        self._guarded("cannot open the MLflow run", self._open, restored_step)

    def committed(self, step: int) -> None:
        del step  # everything committed so far is sent
        self._guarded("cannot send metrics", self._send_committed)

    def finish(self, status: str) -> None:
        self._guarded("cannot send the run's files", self._finish, status)

    def _guarded(self, what: str, action: Callable[..., None], *args: Any) -> None:
        """Runs ``action``; its first failure is one warning and tracking stops."""
        if self._off:
            return
        try:
            with quiet_mlflow():
                action(*args)
        except Exception as e:  # noqa: BLE001  (MLflow, requests, SQLAlchemy, OSError, ...)
            self._off = True
            say(
                f"warning: MLflow tracking is off for the rest of this run ({what}: "
                f"{clip(error_line(e), 300)}); training goes on, and a resume sends what was missed"
            )

    # --- opening the MLflow run ------------------------------------------------------
    def _open(self, restored_step: int) -> None:
        saved = self._read_state()
        uri = self.uri or (saved or {}).get("uri") or default_uri(self.folder)
        with store_lock(uri):
            self._open_run(saved, uri, restored_step)
        self._send_committed()

    def _open_run(self, saved: Optional[Dict[str, Any]], uri: str, restored_step: int) -> None:
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(tracking_uri=uri)
        run = self._existing_run(saved, uri)
        if run is None:
            run = self._new_run(uri)
            self.state = {
                "uri": uri,
                "experiment_id": run.info.experiment_id,
                "run_id": run.info.run_id,
                "sent": {},
                "read_from": -1,
            }
            self._write_state()  # first: a kill from here on continues this MLflow run
        else:
            self.state = saved
            if restored_step < saved["read_from"]:
                say(
                    f"MLflow run {run.info.run_id} keeps its metrics past step {restored_step} "
                    "(MLflow cannot delete them): the redone steps are not sent again"
                )
            self._client.update_run(run.info.run_id, status="RUNNING")
        self._log_params(run.data.params)

    def _read_state(self) -> Optional[Dict[str, Any]]:
        """tracking.json, or None (no file, or one that is not what this module wrote)."""
        path = os.path.join(self.folder, TRACKING_FILE)
        if not os.path.exists(path):
            return None
        try:
            state = read_json_object(path)
            if not (
                isinstance(state.get("uri"), str)
                and isinstance(state.get("run_id"), str)
                and isinstance(state.get("sent"), dict)
                and isinstance(state.get("read_from"), int)
            ):
                raise ValueError("fields missing")
        except (OSError, ValueError) as e:
            kept = set_aside(path)  # it may be the only record of the old MLflow run's id
            say(
                f"{path} cannot be read ({error_line(e)}): this run goes to a new MLflow run "
                f"(the file is kept as {os.path.basename(kept)})"
            )
            return None
        return state

    def _write_state(self) -> None:
        write_text_atomic(
            os.path.join(self.folder, TRACKING_FILE), json.dumps(self.state, indent=2) + "\n"
        )

    def _existing_run(self, saved: Optional[Dict[str, Any]], uri: str):
        """The MLflow run that tracking.json names in ``uri``, or None for a new one."""
        from mlflow.exceptions import MlflowException

        if saved is None:
            return None
        if saved["uri"] != uri:
            say(
                f"tracking to a new MLflow run in {uri}; this run's earlier one is "
                f"{saved['run_id']} in {saved['uri']}"
            )
            return None
        try:
            run = self._client.get_run(saved["run_id"])
        except MlflowException as e:
            if e.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            run = None
        if run is None or run.info.lifecycle_stage == "deleted":
            say(f"MLflow run {saved['run_id']} is gone from {uri}: this run goes to a new one")
            return None
        return run

    def _new_run(self, uri: str):
        snapshot = read_snapshot(self.folder)
        name = self.experiment or snapshot["flags"].get("hparams") or "rl"
        found = self._client.get_experiment_by_name(name)
        if found is not None:
            experiment_id = found.experiment_id
        else:
            experiment_id = self._create_experiment(name, uri)
        return self._client.create_run(
            experiment_id,
            run_name=os.path.basename(os.path.abspath(self.folder)),
            tags=run_tags(self.folder, snapshot),
        )

    def _create_experiment(self, name: str, uri: str) -> str:
        from mlflow.exceptions import MlflowException

        try:
            return self._client.create_experiment(name, artifact_location=artifact_location(uri))
        except MlflowException:
            found = self._client.get_experiment_by_name(name)  # another run made it first
            if found is None:
                raise
            return found.experiment_id

    def _log_params(self, logged: Dict[str, str]) -> None:
        """The hparams as params; MLflow params never change, so a value that differs
        from the logged one (a resume with a longer train_steps) is the tag ``hparam.<name>``."""
        from mlflow.entities import Param, RunTag

        params = flat_params(read_json_object(os.path.join(self.folder, HPARAMS_FILE)))
        new = [Param(k, v) for k, v in params.items() if k not in logged]
        changed = [RunTag(f"hparam.{k}", v) for k, v in params.items() if logged.get(k, v) != v]
        for i in range(0, len(new), PARAMS_OR_TAGS_PER_BATCH):
            self._client.log_batch(
                self.state["run_id"], params=new[i : i + PARAMS_OR_TAGS_PER_BATCH]
            )
        for i in range(0, len(changed), PARAMS_OR_TAGS_PER_BATCH):
            self._client.log_batch(
                self.state["run_id"], tags=changed[i : i + PARAMS_OR_TAGS_PER_BATCH]
            )

    # --- metrics -----------------------------------------------------------------
    def _send_committed(self) -> None:
        """Sends the committed records past what tracking.json says was sent."""
        from mlflow.entities import Metric

        sent = dict(self.state["sent"])
        read_from = newest = self.state["read_from"]
        metrics: List[Metric] = []
        eval_times: Dict[int, int] = {}  # step -> when its evaluation was logged (ms)
        for commit_step, path in committed_event_files(os.path.join(self.folder, "tb")):
            if commit_step < read_from:  # == is read again: a commit may repeat its step
                continue
            newest = max(newest, commit_step)
            for tag, step, value, millis in scalar_events(path):
                if tag in EVAL_METRICS:
                    eval_times.setdefault(step, millis)
                elif step > sent.get(tag, -1):
                    metrics.append(Metric(tag, value, millis, step))
                    sent[tag] = step
        for record in read_eval_records(os.path.join(self.folder, EVAL_FILE)):
            step = record["step"]
            if step <= sent.get(EVAL_METRICS[0], -1):
                continue
            lengths = record["lengths"]
            values = (record["return_mean"], record["return_std"], sum(lengths) / len(lengths))
            millis = eval_times.get(step, int(time.time() * 1000))
            for key, value in zip(EVAL_METRICS, values):
                metrics.append(Metric(key, float(value), millis, step))
                sent[key] = step
        for i in range(0, len(metrics), METRICS_PER_BATCH):
            self._client.log_batch(self.state["run_id"], metrics=metrics[i : i + METRICS_PER_BATCH])
        self.state.update(sent=sent, read_from=newest)
        self._write_state()

    # --- the end ---------------------------------------------------------------------
    def _finish(self, status: str) -> None:
        run_id = self.state["run_id"]
        self._client.log_artifacts(run_id, os.path.join(self.folder, SNAPSHOT_DIR), SNAPSHOT_DIR)
        for name in (HPARAMS_FILE, EVAL_FILE):
            if os.path.exists(os.path.join(self.folder, name)):
                self._client.log_artifact(run_id, os.path.join(self.folder, name))
        steps = policy_steps(self.folder)
        if steps:
            latest = artefact_dir(self.folder, steps[-1])
            self._client.log_artifacts(run_id, latest, os.path.relpath(latest, self.folder))
        best = current_best(self.folder)
        if best is not None:  # its policy and record, as the run folder holds them
            into = os.path.relpath(best, self.folder)
            self._client.log_artifact(run_id, os.path.join(best, BEST_RECORD_FILE), into)
            self._client.log_artifacts(
                run_id, policy_folder(best), os.path.join(into, POLICY_FOLDER)
            )
        self._client.set_terminated(run_id, status)


def make_tracker(kind: str, uri: Optional[str] = None, experiment: Optional[str] = None):
    """The tracker ``kind`` names (``--tracking``).

    Args:
        kind: none or mlflow.
        uri: MLflow's tracking URI (see ``MLflowTracking``).
        experiment: MLflow's experiment name (see ``MLflowTracking``).

    Raises:
        ValueError: an unknown kind, naming the valid ones.
    """
    if kind == "none":
        return NoTracking()
    if kind == "mlflow":
        return MLflowTracking(uri, experiment)
    raise ValueError(f"unknown tracking {kind!r}: valid: none, mlflow")


def import_mlflow() -> None:
    """Imports MLflow's client (about a second) in a step of its own: the import sets
    MLflow's loggers up, and quiet_mlflow silences them from the next step on."""
    for name, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(name, value)
    import mlflow.tracking  # noqa: F401


@contextlib.contextmanager
def quiet_mlflow() -> Iterator[None]:
    """MLflow's, Alembic's and urllib3's log lines and Python warnings held back."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


def default_uri(output_dir: str) -> str:
    """``sqlite:///<parent of output_dir>/mlruns.db``, an absolute path."""
    parent = os.path.dirname(os.path.abspath(output_dir))
    return "sqlite:///" + os.path.join(parent, DEFAULT_STORE)


def sqlite_file(uri: str) -> Optional[str]:
    """The database file of a ``sqlite:///`` URI, as an absolute path; None for other URIs."""
    prefix = "sqlite:///"
    path = uri[len(prefix) :].split("?")[0] if uri.startswith(prefix) else ""
    return os.path.abspath(path) if path and path != ":memory:" else None


def artifact_location(uri: str) -> Optional[str]:
    """Where a new experiment in ``uri`` keeps artefacts: beside a SQLite file (MLflow
    would use ./mlruns in the current folder); None (the store's default) otherwise."""
    database = sqlite_file(uri)
    return os.path.join(os.path.dirname(database), ARTIFACTS_DIR) if database else None


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Held while a run opens its MLflow run in a SQLite store: runs that start together
    (--copies_parallel) would race to create a new file's tables and experiment."""
    database = sqlite_file(uri)
    if database is None:
        yield
        return
    os.makedirs(os.path.dirname(database), exist_ok=True)
    fd = lock_exclusively(database + ".lock", wait=True)
    try:
        yield
    finally:
        os.close(fd)


def flat_params(hparams: Dict[str, Any], prefix: str = "") -> Dict[str, str]:
    """Hparams as MLflow params: nested dicts as ``a.b``, strings as they are, other
    values as JSON (``[64, 64]``, ``true``, ``null``), cut to MLflow's length limit."""
    params: Dict[str, str] = {}
    for name, value in hparams.items():
        if isinstance(value, dict):
            params.update(flat_params(value, f"{prefix}{name}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            params[prefix + name] = clip(text, MAX_PARAM_VALUE)
    return params


def run_tags(output_dir: str, snapshot: Dict[str, Any]) -> Dict[str, str]:
    """A new MLflow run's tags: rl's version, the snapshot's git commit, command and --sys."""
    git, flags = snapshot["git"], snapshot["flags"]
    tags = {
        "rl.version": __version__,
        "rl.command": snapshot["command"],
        "rl.output_dir": os.path.abspath(output_dir),
        "rl.git_dirty": json.dumps(git.get("dirty")),
    }
    # train.py records --sys; every run records its system's description.
    system = flags.get("sys") or (flags.get("device") or {}).get("sys")
    if system:
        tags["rl.sys"] = system
    if git.get("commit"):
        tags["mlflow.source.git.commit"] = git["commit"]
    return {k: clip(str(v), MAX_TAG_VALUE) for k, v in tags.items()}


def clip(text: str, limit: int) -> str:
    """``text``, or its start and ``...`` within ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
