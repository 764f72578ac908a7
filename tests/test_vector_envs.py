"""vectorization=async: a copy's process that hangs (a real SIGSTOP) ends a train.py run
with one line naming it and exit code 6 within $RL_ENV_ANSWER_SECONDS, a stop signal ends
a run waiting for one within seconds, and the hung copy is killed either way."""

import functools
import json
import os
import re
import signal
import sys
import time

import gymnasium as gym
import pytest
from polling import ROOT, idle_for_a_second, run_train_py, start_logged, wait_for

from rl.envs.watched import ANSWER_VARIABLE, WatchedAsyncVectorEnv
from rl.errors import EnvError

pytestmark = pytest.mark.process

TRAIN = os.path.join(ROOT, "train.py")


def children(pid: int) -> list:
    """The pids of process ``pid``'s children (Linux /proc): an async run's env copies."""
    pids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


def start_async_run(tmp_path, env: dict):
    """A long ppo_tiny run on 2 async CartPole copies, once its first checkpoint is written;
    returns (the run, the pid of one of its copies, stopped by SIGSTOP)."""
    out = tmp_path / "run"
    command = [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--train_steps", "100000",
               "--hparam_override", "vectorization=async", "--output_dir", str(out)]  # fmt: skip
    run = start_logged(command, tmp_path / "train.err", env=env, cwd=ROOT)
    checkpoint = out / "checkpoints" / "checkpoint"
    wait_for(checkpoint.exists, "a checkpoint", process=run)
    [_, copy] = sorted(children(run.pid))  # both copies: the ones that stop are alike
    os.kill(copy, signal.SIGSTOP)
    return run, copy


def ended(run, tmp_path) -> tuple:
    """(stdout, stderr) of ``run`` once it ended (killed if not within a minute)."""
    try:
        stdout, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return stdout, (tmp_path / "train.err").read_text()


def test_a_stopped_copy_ends_the_run_with_exit_6_naming_it_within_the_bound(tmp_path):
    run, copy = start_async_run(tmp_path, {**os.environ, ANSWER_VARIABLE: "3"})
    stopped = time.monotonic()
    stdout, stderr = ended(run, tmp_path)
    seconds = time.monotonic() - stopped
    assert run.returncode == 6, stderr
    [line] = [l for l in stderr.splitlines() if l.startswith("train.py:")]
    kept = tmp_path / "run" / "checkpoints"
    assert line.startswith("train.py: stopped: env 'CartPole-v1' copy 1 of 2 (process "), line
    assert f"(process {copy}) did not answer step() within 3 s ($RL_ENV_ANSWER_SECONDS): " in line
    assert f"it hangs or was stopped; the last checkpoint, {kept}/ckpt-" in line
    assert "Traceback" not in stderr
    result = json.loads(stdout.splitlines()[-1])
    assert result["failure_kind"] == "env" and result["failure"] in line
    assert 3 <= seconds < 3 + 15, seconds  # the bound, and the save-free ending after it
    assert gone(copy)  # SIGKILLed on close: a stopped process ignores SIGTERM


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_run_waiting_for_a_stopped_copy_within_seconds(tmp_path, signum):
    # The default bound (minutes): only the signal ends the wait.
    env = {k: v for k, v in os.environ.items() if k != ANSWER_VARIABLE}
    run, copy = start_async_run(tmp_path, env)
    wait_for(lambda: idle_for_a_second(run.pid), "the run waiting for its copy", process=run)
    run.send_signal(signum)
    sent = time.monotonic()
    _, stderr = ended(run, tmp_path)
    seconds = time.monotonic() - sent
    assert run.returncode == 128 + signum, stderr
    assert seconds < 10, (seconds, stderr)  # no run outlives a signal by more
    assert f"(process {copy}) did not answer step() as the run stopped: stopping without a " \
        "checkpoint; the last one, " in stderr, stderr  # fmt: skip
    assert "Traceback" not in stderr
    assert gone(copy)


@pytest.mark.parametrize("value", ["0", "nan"])  # its range is seconds_variable's, tested there
def test_a_bad_answer_bound_is_one_line_exit_2_and_writes_nothing(tmp_path, value):
    out = tmp_path / "run"
    proc = run_train_py("--hparams", "ppo_tiny", "--hparam_override", "vectorization=async",
                        "--output_dir", str(out), env={**os.environ, ANSWER_VARIABLE: value})  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"train.py: error: ${ANSWER_VARIABLE} must be a number of seconds, more than 0 and at "
        f"most 86400, got {value!r}"
    ]
    assert not out.exists()


def made_forever_in_a_child(parent: int):
    """CartPole, except that in any process but ``parent`` its making never ends."""
    while os.getpid() != parent:
        time.sleep(1)
    return gym.make("CartPole-v1")


def test_a_copy_whose_env_is_never_made_is_named_and_killed(monkeypatch):
    monkeypatch.setenv(ANSWER_VARIABLE, "1")
    maker = functools.partial(made_forever_in_a_child, os.getpid())
    started = time.monotonic()
    with pytest.raises(EnvError) as raised:
        WatchedAsyncVectorEnv([maker, maker], "hangs_when_made")
    assert time.monotonic() - started < 1 + 10  # the bound, and a loaded machine's start
    said = str(raised.value)
    match = re.fullmatch(
        r"env 'hangs_when_made' copy 0 of 2 \(process (\d+)\) \(and 1 more\) was not made "
        r"within 1 s \(\$RL_ENV_ANSWER_SECONDS\): it hangs or was stopped",
        said,
    )
    assert match, said
    assert gone(int(match.group(1)))
