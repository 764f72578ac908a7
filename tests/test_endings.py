"""How a failed run ends: one line on stderr, its own exit code, the result JSON on stdout and
the last checkpoint kept, whether the env raised in training, in an evaluation or in a test.

``flaky_cartpole`` (rl/envs/stand_ins.py) draws its crashes from a generator seeded at reset,
not from the actions, so a seeded run crashes at the same step every time.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from rl import cli
from rl.run_folder import checkpoint_steps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")


def run(*args):
    return subprocess.run(
        [sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def own_lines(proc):
    """stderr without the progress lines and rl's notices: the run's ending alone."""
    return [l for l in proc.stderr.splitlines() if not l.startswith(("step ", "rl: "))]


def result(proc):
    """The result JSON, the last line of stdout."""
    return json.loads(proc.stdout.splitlines()[-1])


def flaky(rate):
    return f"flaky_cartpole?failure_rate={rate}"


@pytest.mark.process
def test_an_env_that_raises_in_training_stops_with_exit_6_and_resumes(tmp_path):
    out = tmp_path / "run"
    # Crashes at step 238, after the checkpoint at 128; no evaluation to crash first.
    args = ["--hparams", "ppo_tiny", "--env", flaky(0.004), "--eval_episodes", "0"]
    args += ["--train_steps", "1024", "--output_dir", str(out)]
    proc = run(*args)
    assert proc.returncode == cli.EXIT_ENV == 6, proc.stderr
    kept = out / "checkpoints" / "ckpt-128"
    assert own_lines(proc) == [
        f"train.py: stopped: env '{flaky(0.004)}' raised in step() during training: "
        "SimulatorCrash: flaky_cartpole: the simulator crashed (a simulated fault); "
        f"the last checkpoint, {kept}, is kept; rerun the same command to resume"
    ]
    ended = result(proc)
    assert ended["failure_kind"] == "env" and ended["failure"].startswith(f"env '{flaky(0.004)}'")
    assert 128 < ended["step"] < 256
    assert checkpoint_steps(str(out / "checkpoints")) == [128]
    # The same command resumes from it (and its reset's new seed crashes elsewhere).
    again = run(*args)
    assert again.returncode == 6, again.stderr
    assert f"rl: resuming from {kept}" in again.stderr
    assert len(own_lines(again)) == 1 and result(again)["failure_kind"] == "env"
    assert checkpoint_steps(str(out / "checkpoints")) == [128]


@pytest.mark.process
def test_an_env_that_raises_before_the_first_checkpoint_says_none_was_written(tmp_path):
    out = tmp_path / "run"
    proc = run("--hparams", "ppo_tiny", "--env", flaky(0.01), "--output_dir", str(out))
    assert proc.returncode == 6, proc.stderr
    [line] = own_lines(proc)
    assert line.startswith(f"train.py: stopped: env '{flaky(0.01)}' raised in step() during")
    assert line.endswith("; no checkpoint was written yet; rerun the same command to start again")
    ended = result(proc)
    assert ended["failure_kind"] == "env" and ended["step"] < 128
    assert ended["failure"].endswith("; no checkpoint was written yet")
    assert checkpoint_steps(str(out / "checkpoints")) == []


@pytest.mark.process
def test_an_env_that_raises_in_an_evaluation_or_a_test_stops_with_exit_6(tmp_path):
    out = tmp_path / "run"
    # Training reaches step 256 (its envs crash at 258); the evaluation there crashes.
    proc = run(
        "--hparams", "ppo_tiny", "--env", flaky(0.002), "--hparam_override", "eval_interval=256",
        "--train_steps", "1024", "--output_dir", str(out),
    )  # fmt: skip
    assert proc.returncode == 6, proc.stderr
    kept = out / "checkpoints" / "ckpt-128"
    [line] = own_lines(proc)
    assert line.startswith(f"train.py: stopped: env '{flaky(0.002)}' raised in step() during ")
    assert "during evaluation: SimulatorCrash: " in line
    assert line.endswith(f"the last checkpoint, {kept}, is kept; rerun the same command to resume")
    ended = result(proc)
    assert ended["step"] == 256 and ended["failure_kind"] == "env"
    assert ended["eval_return_mean"] is None  # the evaluation did not finish
    assert checkpoint_steps(str(out / "checkpoints")) == [128]
    assert not (out / "eval.jsonl").exists()
    # Testing the run: the same crash, one line, and no test.json.
    test = run("--training=false", "--test_episodes", "10", "--output_dir", str(out))
    assert test.returncode == 6, test.stderr
    assert own_lines(test) == [
        f"train.py: stopped: cannot test {out}: env '{flaky(0.002)}' raised in step() during "
        "evaluation: SimulatorCrash: flaky_cartpole: the simulator crashed (a simulated fault); "
        "test.json was not written"
    ]
    assert not (out / "test.json").exists()


@pytest.mark.unit
def test_the_exit_code_list_names_every_exit_code_of_train_py():
    with open(os.path.join(ROOT, "docs", "getting-started.md")) as f:
        text = f.read()
    listed = re.search(r"\*\*Exit codes:\*\*(.*?)\n- ", text, re.S).group(1)
    codes = {int(code) for code in re.findall(r"\b(\d+) [a-z]", listed)}
    ours = {value for name, value in vars(cli).items() if name.startswith("EXIT_")}
    assert codes == {0, 2} | ours
    assert set(cli.FAILURE_EXITS.values()) == ours
