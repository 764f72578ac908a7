"""--tracking mlflow: train.py runs copied to an MLflow store, read back with MlflowClient.

Faults go through train.py as a subprocess: kill -9 and resume, an unreachable
server, a store that breaks mid-run, MLflow missing, bad flags.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from polling import wait_for

import rl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")
EVAL_KEYS = ("eval/return_mean", "eval/return_std", "eval/length_mean")
WARNING = "MLflow tracking is off for the rest of this run"

# MLflow's SQL store, read back in this process, trips a SQLAlchemy deprecation.
pytestmark = [
    pytest.mark.process,
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy"),
]
needs_mlflow = pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None, reason="MLflow comes with the tracking extra"
)


def train(*args, cwd=ROOT, env=None):
    return subprocess.run(
        [sys.executable, TRAIN, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
        env=env,
    )


def start_training(*args):
    return subprocess.Popen(
        [sys.executable, TRAIN, *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def error_line(proc):
    lines = [l for l in proc.stderr.splitlines() if l.startswith("train.py: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def tracking_state(out):
    """tracking.json, or None while there is none."""
    path = out / "tracking.json"
    return json.loads(path.read_text()) if path.exists() else None


def wait_for_sent_step(proc, out, step):
    """Polls until the MLflow copy holds the records of a checkpoint at or past ``step``."""

    def sent():
        state = tracking_state(out)
        return state is not None and state["read_from"] >= step

    wait_for(sent, f"checkpoint at or past step {step} sent", timeout=180, process=proc)


def client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def history(mlflow, run_id, key):
    """(step, value) of a metric, in step order (duplicates kept)."""
    return sorted((m.step, m.value) for m in mlflow.get_metric_history(run_id, key))


def eval_records(out):
    return [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]


def train_scalars(out):
    """{tag: [(step, value)]} of the train/ scalars in tb/, as TensorBoard reads them."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    acc = event_accumulator.EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    return {
        tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
        for tag in acc.Tags()["tensors"]
        if tag.startswith("train/")
    }


def assert_metrics_match_the_run_folder(mlflow, run_id, out):
    """Every evaluation and train scalar of the folder is in MLflow once, at its step."""
    records = eval_records(out)
    expected = {
        "eval/return_mean": [(r["step"], r["return_mean"]) for r in records],
        "eval/return_std": [(r["step"], r["return_std"]) for r in records],
        "eval/length_mean": [(r["step"], sum(r["lengths"]) / len(r["lengths"])) for r in records],
    }
    for key in EVAL_KEYS:
        assert history(mlflow, run_id, key) == expected[key], key
    scalars = train_scalars(out)
    assert "train/loss" in scalars and "train/episode_return" in scalars
    for tag, points in scalars.items():
        sent = history(mlflow, run_id, tag)
        assert [s for s, _ in sent] == [s for s, _ in points], tag  # no step twice, none lost
        assert [v for _, v in sent] == pytest.approx([v for _, v in points], rel=1e-6), tag


def artefact_paths(mlflow, run_id, path=None):
    found = []
    for info in mlflow.list_artifacts(run_id, path):
        found += artefact_paths(mlflow, run_id, info.path) if info.is_dir else [info.path]
    return found


@needs_mlflow
def test_a_tracked_run_is_one_mlflow_run_holding_its_hparams_metrics_and_files(tmp_path):
    out, cwd = tmp_path / "runs" / "ppo", tmp_path / "cwd"
    cwd.mkdir()
    proc = train("--hparams", "ppo_tiny", "--output_dir", out, "--tracking", "mlflow", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert WARNING not in proc.stderr
    # The default store: a SQLite file beside the run folder, artefacts beside it.
    mlflow = client(f"sqlite:///{tmp_path / 'runs' / 'mlruns.db'}")
    run = mlflow.get_run(tracking_state(out)["run_id"])
    assert mlflow.get_experiment(run.info.experiment_id).name == "ppo_tiny"
    assert (run.info.status, run.info.run_name) == ("FINISHED", "ppo")
    hparams = json.loads((out / "hparams.json").read_text())
    assert run.data.params == {
        k: v if isinstance(v, str) else json.dumps(v) for k, v in hparams.items()
    }
    snapshot = out / "snapshot"
    tags = run.data.tags
    assert tags["rl.version"] == rl.__version__
    assert tags["rl.command"] == (snapshot / "command.txt").read_text().strip()
    assert tags["rl.sys"] == "local"
    commit = json.loads((snapshot / "git.json").read_text()).get("commit")
    assert tags.get("mlflow.source.git.commit") == commit
    assert_metrics_match_the_run_folder(mlflow, run.info.run_id, out)
    files = artefact_paths(mlflow, run.info.run_id)
    (best,) = os.listdir(out / "best")  # the best evaluation's folder, ckpt-<step>
    for expected in (
        "hparams.json",
        "eval.jsonl",
        "snapshot/command.txt",
        "snapshot/git.json",
        "policies/ckpt-256/policy.json",
        "policies/ckpt-256/weights.npz",
        "policies/ckpt-256/saved_model/saved_model.pb",
        f"best/{best}/best.json",
        f"best/{best}/policy/policy.json",
        f"best/{best}/policy/weights.npz",
    ):
        assert expected in files
    assert os.listdir(cwd) == []  # no ./mlruns in the current folder


@needs_mlflow
def test_kill_9_and_resume_continue_the_same_mlflow_run_without_doubles_or_gaps(tmp_path):
    out, uri = tmp_path / "run", f"sqlite:///{tmp_path / 'mlruns.db'}"
    args = ["--hparams", "ppo_tiny", "--train_steps", 2048, "--output_dir", out]
    args += ["--tracking", "mlflow", "--tracking_uri", uri]
    proc = start_training(*args)
    wait_for_sent_step(proc, out, 512)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.kill()  # SIGKILL, at whatever point training, committing or sending has reached
    proc.wait()
    run_id = tracking_state(out)["run_id"]
    done = train(*args)
    assert done.returncode == 0, done.stderr
    assert "resuming from" in done.stderr and WARNING not in done.stderr
    assert tracking_state(out)["run_id"] == run_id
    mlflow = client(uri)
    run = mlflow.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert [r.info.run_id for r in mlflow.search_runs([run.info.experiment_id])] == [run_id]
    assert eval_records(out)[-1]["step"] == 2048
    assert_metrics_match_the_run_folder(mlflow, run_id, out)


@needs_mlflow
def test_an_unreadable_tracking_file_is_kept_and_the_run_goes_to_a_new_mlflow_run(tmp_path):
    out, uri = tmp_path / "run", f"sqlite:///{tmp_path / 'mlruns.db'}"
    args = ["--hparams", "ppo_tiny", "--output_dir", out, "--tracking", "mlflow"]
    assert train(*args, "--tracking_uri", uri, "--train_steps", 64).returncode == 0
    (out / "tracking.json").write_text('{"uri": "sqlite:///elsewhere.db", "run_id": ')
    proc = train(*args, "--tracking_uri", uri)
    assert proc.returncode == 0, proc.stderr
    assert "tracking.json cannot be read" in proc.stderr
    (kept,) = out.glob("tracking.before-*.json")  # was overwritten
    assert kept.read_text() == '{"uri": "sqlite:///elsewhere.db", "run_id": '
    assert tracking_state(out)["read_from"] == 256


@needs_mlflow
def test_an_unreachable_server_warns_once_and_a_later_run_sends_what_was_missed(tmp_path):
    out = tmp_path / "run"
    # No retries and a short timeout keep the test fast (MLflow: 7 retries, 120 s).
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"}
    args = ["--hparams", "ppo_tiny", "--output_dir", out, "--tracking", "mlflow"]
    proc = train(*args, "--tracking_uri", "http://127.0.0.1:9", env=env)
    assert proc.returncode == 0, proc.stderr
    warnings = [l for l in proc.stderr.splitlines() if "warning" in l.lower()]
    assert len(warnings) == 1 and WARNING in warnings[0], proc.stderr
    assert eval_records(out)[-1]["step"] == 256
    assert tracking_state(out) is None
    # Rerunning the finished run with a store that works copies the whole run.
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    again = train(*args, "--tracking_uri", uri)
    assert again.returncode == 0, again.stderr
    mlflow = client(uri)
    run_id = tracking_state(out)["run_id"]
    assert mlflow.get_run(run_id).info.status == "FINISHED"
    assert_metrics_match_the_run_folder(mlflow, run_id, out)
    assert "policies/ckpt-256/policy.json" in artefact_paths(mlflow, run_id)


@needs_mlflow
def test_a_store_that_breaks_mid_run_warns_once_and_training_finishes(tmp_path):
    out, store = tmp_path / "run", tmp_path / "mlruns.db"
    args = ["--hparams", "ppo_tiny", "--train_steps", 2048, "--output_dir", out]
    proc = subprocess.Popen(
        [sys.executable, TRAIN, *map(str, args), "--tracking", "mlflow"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_sent_step(proc, out, 128)
    assert proc.poll() is None, "the run ended before its store could be broken"
    with open(store, "r+b") as f:  # the database file overwritten in place
        f.write(b"not a database" * 4096)
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0, stderr
    assert stderr.count(WARNING) == 1, stderr
    assert eval_records(out)[-1]["step"] == 2048


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--tracking", "wandb"], "flag --tracking=wandb: value should be one of <none|mlflow>"),
        (["--tracking_uri", "sqlite:///x.db"], "--tracking_uri is for --tracking mlflow"),
        (["--tracking", "mlflow", "--tracking_experiment="], "--tracking_experiment is empty"),
    ],
)
def test_bad_tracking_flags_are_one_line_exit_2_and_write_nothing(tmp_path, args, expected):
    out = tmp_path / "run"
    proc = train("--hparams", "ppo_tiny", "--output_dir", out, *args)
    assert proc.returncode == 2, proc.stderr
    assert expected in error_line(proc)
    assert not out.exists()


def test_tracking_without_mlflow_names_the_install_command(tmp_path):
    fake = tmp_path / "site" / "mlflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'mlflow'\")\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = tmp_path / "run"
    proc = train("--hparams", "ppo_tiny", "--output_dir", out, "--tracking", "mlflow", env=env)
    assert proc.returncode == 2, proc.stderr
    line = error_line(proc)
    assert "--tracking mlflow needs MLflow" in line and "pip install -e '.[tracking]'" in line
    assert not out.exists()
