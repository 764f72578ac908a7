"""A non-finite update stops training: exit 3, one line, no checkpoint replaced."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")


def run(*args):
    return subprocess.run(
        [sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def checkpoint_files(out):
    folder = out / "checkpoints"
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.mark.parametrize("hparams", ["ppo_tiny", "dqn_tiny"])
def test_divergence_exits_3_and_keeps_the_last_finite_checkpoint(tmp_path, hparams):
    out = tmp_path / "run"
    assert run("--hparams", hparams, "--output_dir", str(out)).returncode == 0
    before = checkpoint_files(out)
    proc = run(
        "--hparams",
        hparams,
        "--train_steps",
        "2048",
        "--hparam_override",
        "learning_rate=1e30",
        "--allow_hparam_change",
        "--output_dir",
        str(out),
    )
    assert proc.returncode == 3, proc.stderr
    stopped = [line for line in proc.stderr.splitlines() if line.startswith("train.py: stopped:")]
    assert len(stopped) == 1 and "non-finite" in stopped[0] and "ckpt-256" in stopped[0]
    result = json.loads(proc.stdout.strip().splitlines()[-1])  # stdout stays JSON
    assert "non-finite" in result["failure"]
    assert "Traceback" not in proc.stderr
    # Nothing replaced the finite checkpoint, and every checkpoint left is finite.
    assert checkpoint_files(out) == before
    reader = tf.train.load_checkpoint(str(out / "checkpoints" / "ckpt-256"))
    for name in reader.get_variable_to_shape_map():
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.isfinite(value).all(), name


def test_the_closing_json_reports_the_update_that_failed_not_an_earlier_finite_one(tmp_path):
    # IMPALA's first update at this learning rate is finite, its second is not: the result
    # reported the first one's loss, as if training had ended well.
    proc = run("--hparams", "impala_tiny", "--train_steps", "2048", "--hparam_override",
               "learning_rate=1e30", "--output_dir", str(tmp_path / "run"))  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    [line] = proc.stdout.splitlines()
    result = json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line}"))
    assert "non-finite" in result["failure"] and "loss" in result["failure"]
    named = result["failure"].split("non-finite ")[1].split(" in update")[0].split(", ")
    assert all(result[name] is None for name in named), result  # JSON has no NaN
    assert result["learning_rate"] == 1e30
