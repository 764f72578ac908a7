"""Runs are bounded: episodes of an env without a time limit are cut at max_episode_steps,
and SIGINT/SIGTERM stop a run within seconds wherever it is (evaluation included)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
from polling import wait_for

from rl import catalog, video  # noqa: F401  (catalog fills the registries)
from rl.envs.make import bound_episodes, episode_cap, has_episode_limit, make_env
from rl.evaluation import EvaluationStopped, Evaluator
from rl.fields import DEFAULT_MAX_EPISODE_STEPS
from rl.hparams.base import HParamsError
from rl.hparams.resolve import resolve_hparams

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")
WARNING = "has no time limit of its own"
STOP_PROMISE_SECONDS = 10  # the promise: no run outlives SIGTERM by more


def episode_length(env: gym.Env, limit: int = 100_000) -> int:
    """Steps of one episode of ``env`` with action 0 (``limit``: it never ended)."""
    env.reset(seed=0)
    for step in range(1, limit + 1):
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            return step
    return limit


# --- the cap -------------------------------------------------------------------------
@pytest.mark.unit
def test_an_env_without_a_limit_is_cut_at_the_cap_and_truncated_not_terminated():
    env = make_env("endless", max_episode_steps=7)
    env.reset(seed=0)
    ends = [env.step(0)[2:4] for _ in range(7)]
    assert ends == [(False, False)] * 6 + [(False, True)]
    assert episode_length(make_env("endless"), limit=1000) == 1000  # uncapped: endless


@pytest.mark.unit
def test_an_envs_own_limit_is_kept():
    # CartPole's 500 is not shortened, however low the cap.
    assert not isinstance(bound_episodes(gym.make("CartPole-v1"), 3).env, gym.wrappers.TimeLimit)
    assert make_env("CartPole-v1", max_episode_steps=3).spec.max_episode_steps == 500
    # An env ending by itself (its metadata says so) and Gymnasium ids with a limit.
    for name in ("CartPole-v1", "cartpole", "catch", "frozen_lake_short", "tictactoe", "rps"):
        assert episode_cap(name, 3) is None, name
    assert episode_cap("endless", 3) == 3
    assert episode_cap("CliffWalking-v1", 3) == 3  # Gymnasium registers it without a limit
    assert has_episode_limit(gym.wrappers.TimeLimit(make_env("endless"), 5))


@pytest.mark.unit
def test_the_cap_of_a_gymnasium_id_is_read_from_its_registration_without_making_it(
    monkeypatch,
):
    from rl.envs import make

    def made(name, *args, **kwargs):
        raise AssertionError(f"{name} was made")

    monkeypatch.setattr(make, "make_raw_env", made)
    assert episode_cap("CartPole-v1", 3) is None  # registered with max_episode_steps=500
    assert episode_cap("CliffWalking-v1", 3) == 3  # registered without a limit
    assert episode_cap("CliffWalking-v1?max_episode_steps=9", 3) is None  # gym.make's
    with pytest.raises(AssertionError, match="endless was made"):
        episode_cap("endless", 3)  # rl's constructor: made once to find out


@pytest.mark.unit
def test_an_env_server_caps_what_it_serves_at_the_runs_cap_or_its_default():
    import grpc  # late: the env server's dependency

    from rl.envs.remote import env_pb2, env_pb2_grpc, serve
    from rl.envs.remote.client import RemoteEnv

    server, port, _ = serve.start_server(["endless", "CartPole-v1"])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        # The run's cap reaches the server with Make; an env's own limit is kept.
        served = RemoteEnv(f"grpc://127.0.0.1:{port}/endless", None, 40)
        assert episode_length(served) == 40
        served.close()
        stub = env_pb2_grpc.EnvServiceStub(channel)

        def limit(env_id, **cap):
            made = stub.Make(env_pb2.MakeRequest(env_id=env_id, num_envs=1, **cap), timeout=30)
            stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=30)
            return made.max_episode_steps

        assert limit("endless", max_episode_steps=40) == 40
        assert limit("CartPole-v1", max_episode_steps=3) == 500
        # A client from before the field sends none: the default cap, as a run's.
        assert limit("endless") == DEFAULT_MAX_EPISODE_STEPS
        with pytest.raises(grpc.RpcError, match="max_episode_steps must be 1 to") as refused:
            limit("endless", max_episode_steps=0)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()
        server.stop(0).wait(5)


@pytest.mark.unit
def test_max_episode_steps_is_an_hparam_with_a_range():
    hp = resolve_hparams("ppo_tiny", "max_episode_steps=40")
    assert hp.max_episode_steps == 40 and hp.to_dict()["max_episode_steps"] == 40
    assert resolve_hparams("ppo_tiny").max_episode_steps == DEFAULT_MAX_EPISODE_STEPS == 27_000
    with pytest.raises(HParamsError, match="max_episode_steps"):
        resolve_hparams("ppo_tiny", "max_episode_steps=0")


@pytest.mark.unit
def test_evaluation_episodes_are_capped_and_a_stop_gives_the_evaluation_up():
    def act(obs, rng):
        return np.zeros(len(obs), np.int64)

    capped = Evaluator("endless", seed=0, act=act, max_episode_steps=12)
    result, _ = capped.evaluate(step=0, episodes=3)
    capped.close()
    assert result["lengths"] == [12, 12, 12] and result["returns"] == [12.0] * 3

    asked = []
    stopped = Evaluator("endless", seed=0, act=act, stop=lambda: len(asked) > 4 or asked.append(1))
    with pytest.raises(EvaluationStopped):
        stopped.evaluate(step=0, episodes=2)  # uncapped: only the stop ends it
    stopped.close()
    assert len(asked) == 5  # asked before every step, given up at the sixth


@pytest.mark.unit
def test_a_recording_keeps_the_frames_within_its_budget_and_says_so_once(capsys):
    frame = np.zeros((4, 6, 3), np.uint8)  # 72 bytes
    recorder = video.EpisodeRecorder(max_bytes=3 * frame.nbytes)
    for _ in range(5):
        recorder.add_frame(frame)
    assert len(recorder) == 3 and recorder.full
    warning = "rl: warning: the recording stops at frame 3 (0 MiB of frames); the episode goes on"
    assert capsys.readouterr().err == warning + "\n"
    recorder.clear()
    recorder.add_frame(frame)
    assert len(recorder) == 1 and not recorder.full


# --- through train.py ---------------------------------------------------------------
def train(*args, workers=0):
    return [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--env", "endless",
            "--num_workers", str(workers), *args]  # fmt: skip


class Run:
    """train.py as a subprocess whose stderr is read as it comes."""

    def __init__(self, command):
        self.proc = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines = []
        self.stdout = ""  # once it ended
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 180):
        wait_for(lambda: text in self.stderr(), f"'{text}' on stderr", timeout, self.proc,
                 self.stderr)  # fmt: skip

    def end(self, timeout: float):
        """Waits for the process to end; returns (exit code, seconds it took)."""
        start = time.monotonic()
        self.stdout = self.proc.stdout.read()
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code, time.monotonic() - start

    def catches(self, signum: int) -> bool:
        """Whether the process has a handler of its own for ``signum`` (Linux /proc)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            caught = next(line for line in f if line.startswith("SigCgt:")).split()[1]
        return bool(int(caught, 16) >> (signum - 1) & 1)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc_info) -> None:
        if self.proc.poll() is None:  # a failed test leaves no run behind
            self.proc.kill()
            self.proc.wait()

    def stop_with(self, signum: int) -> None:
        """Sends ``signum``; the run must end within STOP_PROMISE_SECONDS, with 128 + ``signum`` and
        no traceback."""
        self.proc.send_signal(signum)
        code, seconds = self.end(timeout=60)
        assert code == 128 + signum, self.stderr()
        assert seconds < STOP_PROMISE_SECONDS, (seconds, self.stderr())
        assert "Traceback" not in self.stderr()


@pytest.mark.process
@pytest.mark.parametrize("workers", [0, 1])
def test_a_run_on_an_endless_env_finishes_with_the_cap_said_once(tmp_path, workers):
    out = tmp_path / "run"
    proc = subprocess.run(
        train("--hparam_override", "max_episode_steps=40", "--output_dir", str(out),
              workers=workers),
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(WARNING) == 1, proc.stderr
    assert "max_episode_steps=40" in proc.stderr
    assert json.loads((out / "hparams.json").read_text())["max_episode_steps"] == 40
    # Training episodes (in this process or the worker's) and evaluation's: 40 steps of
    # reward 1.
    assert json.loads(proc.stdout.splitlines()[-1])["episode_return_mean"] == 40.0
    evaluations = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert evaluations and all(e["lengths"] == [40, 40] for e in evaluations)


def wait_for_the_final_evaluation(run: Run, out) -> None:
    """Training ends at its only checkpoint (step 128); then comes the final evaluation,
    whose episodes (capped at a billion steps) do not end."""
    wait_for(lambda: (out / "checkpoints" / "ckpt-128.index").exists(), "checkpoint 128", 180,
             run.proc, run.stderr)  # fmt: skip


def assert_it_resumes_from_checkpoint_128(out) -> None:
    """The run in ``out`` trains on from its checkpoint 128, with a cap its evaluation
    ends at."""
    resumed = subprocess.run(
        train("--train_steps", "160", "--hparam_override", "max_episode_steps=20",
              "--output_dir", str(out)),
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from {out}/checkpoints/ckpt-128" in resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[-1])["step"] == 160


ENDLESS_EVALUATION = [
    "--train_steps", "128", "--hparam_override",
    "max_episode_steps=1000000000,eval_interval=1000000,checkpoint_interval=128",
]  # fmt: skip


def stop_in_the_final_evaluation(out, workers: int = 0) -> None:
    """Trains in ``out`` to checkpoint 128 and stops its endless final evaluation with
    SIGTERM, which must end it within seconds."""
    with Run(train(*ENDLESS_EVALUATION, "--output_dir", str(out), workers=workers)) as run:
        wait_for_the_final_evaluation(run, out)
        run.stop_with(signal.SIGTERM)


@pytest.fixture(scope="module")
def stopped_in_final_evaluation(tmp_path_factory):
    """A run SIGTERM stopped in its final evaluation: checkpoint 128 and no evaluation
    record. Read-only: tests change a copy."""
    out = tmp_path_factory.mktemp("stopped") / "run"
    stop_in_the_final_evaluation(out)
    evals = out / "eval.jsonl"
    assert not evals.exists() or not evals.read_text()  # checkpoint 128, no evaluation
    return out


def copy_of(run, tmp_path):
    """A copy of the run folder ``run`` in ``tmp_path``, for one test to change."""
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return out


@pytest.mark.process
def test_sigterm_during_an_endless_evaluation_stops_within_seconds(
    stopped_in_final_evaluation, tmp_path
):
    assert_it_resumes_from_checkpoint_128(copy_of(stopped_in_final_evaluation, tmp_path))


@pytest.mark.process
def test_sigterm_during_an_endless_evaluation_with_a_worker_stops_within_seconds(tmp_path):
    out = tmp_path / "run"
    stop_in_the_final_evaluation(out, workers=1)
    assert_it_resumes_from_checkpoint_128(out)


@pytest.mark.process
def test_a_final_evaluation_a_signal_gave_up_is_made_when_the_finished_run_is_rerun(
    stopped_in_final_evaluation, tmp_path
):
    out = copy_of(stopped_in_final_evaluation, tmp_path)
    evals = out / "eval.jsonl"
    # The same command (train_steps 128: finished), with a cap the evaluation ends at.
    rerun_command = train("--train_steps", "128", "--output_dir", str(out), "--hparam_override",
                          "max_episode_steps=20,eval_interval=1000000,checkpoint_interval=128")  # fmt: skip
    rerun = subprocess.run(rerun_command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "is finished at step 128 but lacks its final evaluation" in rerun.stderr
    records = [json.loads(line) for line in evals.read_text().splitlines()]
    assert [(r["step"], r["lengths"]) for r in records] == [(128, [20, 20])]
    assert json.loads(rerun.stdout.splitlines()[-1])["eval_return_mean"] == 20.0
    again = subprocess.run(rerun_command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "is finished at step 128 of 128" in again.stderr
    assert len(evals.read_text().splitlines()) == 1  # made once


@pytest.mark.process
def test_sigterm_mid_rollout_of_a_slow_env_stops_within_seconds_keeping_the_checkpoint(tmp_path):
    # A rollout of 4,000 steps of 2 ms each takes 8 s or more: the run stops without
    # finishing the one under way, as a kill would, and keeps its last checkpoint.
    out = tmp_path / "run"

    def command(train_steps):
        return [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--env", "slow_cartpole",
                "--train_steps", str(train_steps), "--output_dir", str(out), "--hparam_override",
                "num_envs=1,rollout_steps=4000,checkpoint_interval=4000,eval_episodes=0"]  # fmt: skip

    first = subprocess.run(command(4000), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    with Run(command(1_000_000)) as run:
        # The first progress line comes after the first step of the next rollout.
        run.wait_for_line("step     4,001/1,000,000")
        run.stop_with(signal.SIGTERM)
    kept = out / "checkpoints" / "ckpt-4000"
    assert (
        "rl: the rollout under way did not end within 3 s of the signal: stopping without a "
        f"checkpoint; the last one, {kept}, is kept\n"
    ) in run.lines, run.stderr()
    assert [p.name for p in (out / "checkpoints").glob("ckpt-*.index")] == ["ckpt-4000.index"]


@pytest.mark.process
def test_a_second_sigint_stops_at_once_in_one_line_and_keeps_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    with Run(train(*ENDLESS_EVALUATION, "--output_dir", str(out))) as run:
        wait_for_the_final_evaluation(run, out)
        run.proc.send_signal(signal.SIGINT)
        run.wait_for_line("got signal 2: stopping, with a checkpoint if a clean point comes")
        run.stop_with(signal.SIGINT)  # while it saves and winds down
    stderr = run.stderr()
    assert "KeyboardInterrupt" not in stderr, stderr
    # Either the second signal found the run still winding down (one line says so), or the
    # run had ended already.
    kept = out / "checkpoints" / "ckpt-128"
    said = f"rl: got signal 2 again: stopping now; the last checkpoint, {kept}, is kept"
    assert [line for line in stderr.splitlines() if "again" in line] in ([], [said]), stderr
    [line] = run.stdout.splitlines()  # the closing JSON line, either way
    assert json.loads(line)["step"] == 128 and json.loads(line)["interrupted"] == 2
    assert_it_resumes_from_checkpoint_128(out)


@pytest.mark.process
def test_a_second_sigint_mid_rollout_still_ends_with_the_closing_json_line(tmp_path):
    # The first signal waits up to 3 s for the rollout under way (8 s of a slow env) to
    # end; the second, within them, ends the process at once, before any checkpoint.
    out = tmp_path / "run"
    command = [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--env", "slow_cartpole",
               "--train_steps", "1000000", "--output_dir", str(out), "--hparam_override",
               "num_envs=1,rollout_steps=4000,checkpoint_interval=4000,eval_episodes=0"]  # fmt: skip
    with Run(command) as run:
        # Training is under way once the run's handlers are (SIGTERM's is the second one).
        wait_for(lambda: run.catches(signal.SIGTERM), "a SIGTERM handler", 180, run.proc,
                 run.stderr)  # fmt: skip
        run.proc.send_signal(signal.SIGINT)
        run.wait_for_line("got signal 2: stopping, with a checkpoint if a clean point comes")
        run.stop_with(signal.SIGINT)
    assert "rl: got signal 2 again: stopping now; no checkpoint was saved\n" in run.lines
    [line] = run.stdout.splitlines()
    result = json.loads(line)
    assert (result["step"], result["interrupted"], result["failure"]) == (0, 2, None)
    assert not list(out.glob("checkpoints/ckpt-*"))


@pytest.mark.process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_test_of_an_endless_run_within_seconds_in_one_line(
    stopped_in_final_evaluation, tmp_path, signum
):
    # Its test episodes (capped at a billion steps, as its training's) do not end.
    endless_run = copy_of(stopped_in_final_evaluation, tmp_path)
    with Run([sys.executable, TRAIN, "--training=false", "--output_dir", str(endless_run)]) as run:
        # The test episodes are under way once the run's handlers are (SIGTERM's is the
        # second one installed; Python has its own for SIGINT from the start).
        wait_for(lambda: run.catches(signal.SIGTERM), "a SIGTERM handler", 180, run.proc,
                 run.stderr)  # fmt: skip
        run.stop_with(signum)
    assert run.lines[-1] == f"train.py: stopped by signal {signum}: no test results written\n"
    assert not (endless_run / "test.json").exists()


def tensorflow_loading(pid: int) -> bool:
    """Whether process ``pid`` has mapped TensorFlow's library (its import is under way:
    the run's own signal handlers come seconds later, once the run is built)."""
    with open(f"/proc/{pid}/maps") as f:
        return "libtensorflow" in f.read()


@pytest.mark.process
def test_a_ctrl_c_while_tensorflow_loads_is_one_line_and_exit_130(tmp_path):
    out = tmp_path / "run"
    with Run(train("--output_dir", str(out))) as run:
        wait_for(lambda: tensorflow_loading(run.proc.pid), "TensorFlow loading", 180, run.proc,
                 run.stderr)  # fmt: skip
        run.stop_with(signal.SIGINT)
    assert run.lines == [
        "train.py: stopped by signal 2 (Ctrl-C) outside training; the run folder keeps what "
        "was saved: rerun the same command to resume\n"
    ], run.stderr()


@pytest.mark.process
def test_a_ctrl_c_that_a_library_swallows_as_the_run_starts_still_stops_it(tmp_path):
    # A bare ``except:`` around an optional import can swallow the KeyboardInterrupt of a
    # Ctrl-C while TensorFlow loads (seen once in ~1400 such runs); the run then trained on
    # to its end. Here a plugin swallows it, deterministically, as the run starts.
    (tmp_path / "swallows_ctrl_c.py").write_text(
        "import os\nimport signal\n\ntry:\n    os.kill(os.getpid(), signal.SIGINT)\n"
        "    sum(range(1000))  # the handler runs here, inside the try\n"
        "except BaseException:\n    pass\n"
    )
    out = tmp_path / "run"
    proc = subprocess.run(
        train("--plugins", "swallows_ctrl_c", "--output_dir", str(out)),
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        "train.py: stopped by signal 2 (Ctrl-C) outside training"
    ), proc.stderr
    assert not (out / "eval.jsonl").exists()  # it did not train


@pytest.mark.process
def test_an_evaluation_a_checkpoint_lacks_is_made_first_when_the_run_resumes(
    stopped_in_final_evaluation, tmp_path
):
    # The state a signal during an evaluation leaves: checkpoint 128, no record of 128.
    out = copy_of(stopped_in_final_evaluation, tmp_path)
    resumed = subprocess.run(
        train("--train_steps", "256", "--output_dir", str(out), "--hparam_override",
              "max_episode_steps=20,eval_interval=128,checkpoint_interval=128,eval_episodes=2"),
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    steps = [json.loads(line)["step"] for line in (out / "eval.jsonl").read_text().splitlines()]
    assert steps == [128, 256]
