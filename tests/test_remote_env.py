"""Envs served over gRPC (rl/envs/remote) as users meet them.

Gymnasium's own checker on the clients; served envs equal to local ones step for step
(CartPole over unary calls and a stream, Tuple and Dict observations flattened as
``make_env`` flattens them); train.py on a served env giving the local run's results;
a server killed or restarted under a training run, and no server at start-up; and a
server in a virtualenv of its own (Gymnasium 0.29, no TensorFlow) training a run of the
main one (Gymnasium 1.x).
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from PIL import Image, ImageSequence
from polling import idle_for_a_second, wait_for

from rl.envs import make_env, make_vec_env, true_next_obs
from rl.envs.remote import serve
from rl.envs.remote.client import RemoteEnv, RemoteVectorEnv
from rl.errors import EnvServerError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")
RETRY_VARIABLE = "RL_ENV_SERVER_RETRY_SECONDS"
ANSWER_VARIABLE = "RL_ENV_SERVER_ANSWER_SECONDS"
SESSION_LINE = re.compile(r"session \S+: (\d+) x (\S+)$", re.MULTILINE)


# --- servers and train.py as processes ----------------------------------------------------
class Server(NamedTuple):
    process: subprocess.Popen
    port: int
    log: Path  # the server's stderr: its logging, one line per session made

    def url(self, env_id: str = "CartPole-v1") -> str:
        return f"grpc://127.0.0.1:{self.port}/{env_id}"

    def sessions(self, since: int = 0) -> list:
        """(copies, env id) of each session made after byte ``since`` of the log."""
        text = self.log.read_text()[since:]
        return [(int(n), env_id) for n, env_id in SESSION_LINE.findall(text)]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdout.close()  # the pipe serve.launch read the serving line from


def start_server(folder: Path, env_ids="CartPole-v1", port=0, python=sys.executable, env=None):
    """``python -m rl.envs.remote.serve`` as a user starts it; returns once it serves."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "serve.log"
    try:
        process, port = serve.launch(env_ids, python=python, env=env, port=port, log=str(log))
    except RuntimeError as e:
        raise AssertionError(str(e)) from None
    return Server(process, port, log)


@contextlib.contextmanager
def serving(folder: Path, env_ids="CartPole-v1", **kwargs):
    server = start_server(folder, env_ids, **kwargs)
    try:
        yield server
    finally:
        server.stop()


def client_env(retry_seconds: float = 10) -> dict:
    """train.py's environment: a short retry, so a test that goes wrong fails quickly."""
    return {**os.environ, RETRY_VARIABLE: str(retry_seconds)}


def train(*args, env=None, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env or client_env(),
    )


def start_train(args, stderr_path: Path, env: dict) -> subprocess.Popen:
    """train.py writing its stderr to ``stderr_path`` and its stdout beside it (.out)."""
    with open(stderr_path, "w") as stderr, open(stderr_path.with_suffix(".out"), "w") as stdout:
        return subprocess.Popen(
            [sys.executable, TRAIN, *args],
            stdout=stdout,
            stderr=stderr,
            cwd=ROOT,
            env=env,
        )


def hurt_mid_run(args, tmp_path: Path, env: dict, hurt) -> tuple:
    """train.py with ``args`` (its --output_dir in ``tmp_path``), ``hurt(its process)`` called once it
    wrote its first evaluation; returns (its exit code, its stderr)."""
    out = Path(args[args.index("--output_dir") + 1])
    run = start_train(args, tmp_path / "train.err", env)
    try:
        wait_for(lambda: has_eval_line(out), "evaluation line", process=run)
        hurt(run)
        code = run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return code, (tmp_path / "train.err").read_text()


def served_run(server: Server, out: Path, train_steps: int, *more: str) -> list:
    """train.py's arguments for a ppo_tiny run of ``train_steps`` on ``server``'s CartPole,
    writing to ``out``, with ``more`` flags."""
    return ["--hparams", "ppo_tiny", "--train_steps", str(train_steps), "--env", server.url(),
            *more, "--output_dir", str(out)]  # fmt: skip


def train_lines(stderr: str) -> list:
    """train.py's own lines (its errors and stops), apart from progress and warnings."""
    return [l for l in stderr.splitlines() if l.startswith("train.py:")]


def evals(out: Path) -> list:
    path = out / "eval.jsonl"
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines()]


def has_eval_line(out: Path) -> bool:
    """Whether eval.jsonl holds a whole line (one being written may be cut short)."""
    path = out / "eval.jsonl"
    return path.exists() and "\n" in path.read_text()


def eval_results(out: Path) -> list:
    """(step, returns, lengths) of each evaluation: what two equal runs share."""
    return [(e["step"], e["returns"], e["lengths"]) for e in evals(out)]


def checkpoint_steps(out: Path) -> list:
    return sorted(
        int(p.name[5 : -len(".index")]) for p in (out / "checkpoints").glob("ckpt-*.index")
    )


def gif_frames(path: Path) -> list:
    with Image.open(path) as gif:
        return [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(gif)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server of CartPole and Pendulum for the tests that do not hurt it."""
    with serving(tmp_path_factory.mktemp("server"), "CartPole-v1,Pendulum-v1") as running:
        yield running


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """train.py runs on local envs, each made once: ``local_run(*args)`` -> its output_dir."""
    done = {}

    def run(*args):
        if args not in done:
            out = tmp_path_factory.mktemp("local") / "run"
            proc = train(*args, "--output_dir", str(out))
            assert proc.returncode == 0, proc.stderr
            done[args] = out
        return done[args]

    return run


# --- 0: the committed generated modules are those env.proto gives --------------------------
@pytest.mark.process
def test_generated_modules_match_env_proto():
    # In a process of its own: protoc's C++ crashes in a process that has loaded
    # TensorFlow's protobuf (as the test session has).
    proc = subprocess.run(
        [sys.executable, "-m", "rl.envs.remote.codegen", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- 1: Gymnasium's env checker passes on served envs ---------------------------------------
@pytest.mark.process
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])  # Discrete and Box actions
def test_gymnasium_env_checker_passes_on_a_served_env(server, env_id):
    env = RemoteEnv(server.url(env_id), render_mode="rgb_array")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its advice (infinite bounds, ...) is the env's own
            check_env(env)  # spaces, seeded reset determinism, step and render
    finally:
        env.close()


# --- 2: served envs equal local ones, step for step -------------------------------------------
def assert_same(local, remote, where: str) -> None:
    """Equal values, types and dtypes, recursively (info dicts, object arrays of finals)."""
    if isinstance(local, dict):
        assert isinstance(remote, dict), f"{where}: {remote!r}"
        skip = {"t", "_t"} if where.endswith("['episode']") else set()  # wall-clock time
        assert set(local) - skip == set(remote) - skip, f"{where}: keys"
        for key in set(local) - skip:
            assert_same(local[key], remote[key], f"{where}[{key!r}]")
    elif isinstance(local, np.ndarray) and local.dtype == object:
        assert isinstance(remote, np.ndarray) and remote.shape == local.shape, where
        for i, (a, b) in enumerate(zip(local, remote)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(local, np.ndarray):
        assert isinstance(remote, np.ndarray), f"{where}: {type(remote)}"
        assert remote.dtype == local.dtype, f"{where}: {remote.dtype} != {local.dtype}"
        np.testing.assert_array_equal(remote, local, err_msg=where)
    else:
        assert type(remote) is type(local) and remote == local, f"{where}: {remote!r} != {local!r}"


def assert_same_vector_runs(local, remote, steps: int, seed: int) -> tuple:
    """Steps both with the same seeded random actions; returns how many episodes were
    terminated and how many truncated."""
    assert remote.single_observation_space == local.single_observation_space
    assert remote.single_action_space == local.single_action_space
    obs_l, info_l = local.reset(seed=seed)
    obs_r, info_r = remote.reset(seed=seed)
    assert_same(obs_l, obs_r, "reset obs")
    assert_same(info_l, info_r, "reset info")
    local.action_space.seed(seed)
    terminated = truncated = 0
    for t in range(steps):
        action = local.action_space.sample()
        got_l, got_r = local.step(action), remote.step(action)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), got_l, got_r):
            assert_same(a, b, f"step {t} {name}")
        next_l, next_r = true_next_obs(got_l[0], got_l[4]), true_next_obs(got_r[0], got_r[4])
        assert_same(next_l, next_r, f"step {t} true_next_obs")
        assert_same(got_l[4], got_r[4], f"step {t} info")
        terminated += int(got_l[2].sum())
        truncated += int(got_l[3].sum())
    return terminated, truncated


@pytest.mark.process
@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_served_cartpole_equals_local_step_for_step(server, stream):
    local = make_vec_env("CartPole-v1", 4)
    if stream:  # what make_vec_env builds, over one bidirectional stream
        remote = gym.wrappers.vector.RecordEpisodeStatistics(
            RemoteVectorEnv(server.url(), 4, stream=True)
        )
    else:
        remote = make_vec_env(server.url(), 4)
    try:
        terminated, _ = assert_same_vector_runs(local, remote, steps=2500, seed=11)
    finally:
        local.close()
        remote.close()
    assert terminated > 300  # many autoresets compared, each with its final obs and statistics


class FrozenOnce(gym.vector.VectorWrapper):
    """Freezes the server (SIGSTOP) as step ``at`` begins; a timer thaws it (SIGCONT)
    ``thaw_after`` seconds later: a server paused for a while, not gone."""

    def __init__(self, env, pid: int, at: int, thaw_after: float):
        super().__init__(env)
        self.pid, self.at, self.thaw_after, self.t = pid, at, thaw_after, 0

    def step(self, actions):
        if self.t == self.at:
            os.kill(self.pid, signal.SIGSTOP)
            threading.Timer(self.thaw_after, os.kill, (self.pid, signal.SIGCONT)).start()
        self.t += 1
        return self.env.step(actions)


@pytest.mark.process
@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_a_server_frozen_within_the_retry_window_is_retried_and_no_step_is_lost_or_repeated(
    tmp_path, monkeypatch, capfd, stream
):
    # Each step waits 1 s for its answer; the server answers again after 3 s, within the
    # 30 s window: the step is retried (the same seq) and the run equals the local one.
    monkeypatch.setenv(ANSWER_VARIABLE, "1")
    monkeypatch.setenv(RETRY_VARIABLE, "30")
    local = make_vec_env("CartPole-v1", 2)
    with serving(tmp_path / "server") as server:
        served = RemoteVectorEnv(server.url(), 2, stream=stream)
        statistics = gym.wrappers.vector.RecordEpisodeStatistics(served)  # as make_vec_env's
        remote = FrozenOnce(statistics, server.process.pid, at=5, thaw_after=3.0)
        try:
            assert_same_vector_runs(local, remote, steps=40, seed=3)
        finally:
            local.close()
            remote.close()
    said = [l for l in capfd.readouterr().err.splitlines() if l.startswith("rl: ")]
    assert said == [
        f"rl: env server {server.url()} stopped answering: no answer to Step within 1 s "
        f"(${ANSWER_VARIABLE}); retrying for up to 30.0 s (${RETRY_VARIABLE})"
    ]


class StructuredObsEnv(gym.Env):
    """A tiny env whose observation is a Dict holding Box, Discrete (start 1), MultiBinary and
    a Tuple of Discrete and MultiDiscrete; episodes end by chance (terminated) or by the
    registered time limit (truncated). ``ordered``: keys in insertion order, not sorted."""

    def __init__(self, ordered: bool = False, render_mode=None):
        items = [
            ("velocity", spaces.Box(-1.0, 1.0, (2,), np.float64)),  # keys not alphabetical
            ("mode", spaces.Discrete(3, start=1)),
            ("bits", spaces.MultiBinary(3)),
            ("pair", spaces.Tuple((spaces.Discrete(4), spaces.MultiDiscrete([3, 2])))),
        ]
        # Gymnasium sorts a dict's keys; a list of pairs keeps their order.
        self.observation_space = spaces.Dict(items if ordered else dict(items))
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _observe(self):
        rng = self.np_random
        return {
            "velocity": rng.uniform(-1.0, 1.0, 2),
            "mode": int(rng.integers(1, 4)),
            "bits": rng.integers(0, 2, 3).astype(np.int8),
            "pair": (int(rng.integers(0, 4)), rng.integers(0, [3, 2]).astype(np.int64)),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {"t": self.t}

    def step(self, action):
        self.t += 1
        obs = self._observe()
        reward = float(action) + float(obs["velocity"][0])
        return obs, reward, bool(self.np_random.random() < 0.1), False, {"t": self.t}


DICT_ID = "RlTests/DictObs-v0"
ORDERED_DICT_ID = "RlTests/OrderedDictObs-v0"


@pytest.fixture(scope="module")
def structured_server():
    """A server in this process (serve.start_server) of Blackjack (a Tuple observation) and
    the Dict-observation envs, registered with Gymnasium here so make_env makes them too."""
    # A string entry point: rl's make refuses a callable one as a "legacy id".
    entry = f"{__name__}:StructuredObsEnv"
    gym.register(DICT_ID, entry_point=entry, max_episode_steps=12)
    gym.register(ORDERED_DICT_ID, entry_point=entry, max_episode_steps=12, kwargs={"ordered": True})
    grpc_server, port, _ = serve.start_server(["Blackjack-v1", DICT_ID, ORDERED_DICT_ID])
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        grpc_server.stop(grace=None)
        for env_id in (DICT_ID, ORDERED_DICT_ID):
            del gym.envs.registry[env_id]


@pytest.mark.unit
@pytest.mark.filterwarnings("ignore:.*precision lowered by casting")  # local and served alike
@pytest.mark.parametrize(
    "env_id",
    [
        "Blackjack-v1",
        DICT_ID,
        # Fails: the client rebuilds the Dict space sorted (codec.decode_space), so it
        # flattens in another order than the server's env and local make_env do.
        ORDERED_DICT_ID,
    ],
)
def test_structured_observations_arrive_flattened_as_make_env_flattens_them(
    structured_server, env_id
):
    url = f"{structured_server}/{env_id}"
    local, remote = make_vec_env(env_id, 3), make_vec_env(url, 3)
    try:
        assert remote.single_observation_space.dtype == np.float32
        terminated, truncated = assert_same_vector_runs(local, remote, steps=300, seed=5)
    finally:
        local.close()
        remote.close()
    assert terminated > 20
    if env_id != "Blackjack-v1":  # which has no time limit
        assert truncated > 5
    # One env, as evaluation and --training=false make it.
    local, remote = make_env(env_id), make_env(url)
    try:
        assert remote.observation_space == local.observation_space
        actions = np.random.default_rng(2)
        for episode in range(5):
            got_l, got_r = local.reset(seed=episode), remote.reset(seed=episode)
            for name, a, b in zip(("obs", "info"), got_l, got_r):
                assert_same(a, b, f"episode {episode} reset {name}")
            done = False
            while not done:
                action = int(actions.integers(0, 2))
                got_l, got_r = local.step(action), remote.step(action)
                names = ("obs", "reward", "terminated", "truncated", "info")
                for name, a, b in zip(names, got_l, got_r):
                    assert_same(a, b, f"episode {episode} {name}")
                done = got_l[2] or got_l[3]
    finally:
        local.close()
        remote.close()


# --- 3: train.py on a served env gives the local run's results ------------------------------
# Two local runs with one seed give identical eval.jsonl (tests/test_agents.py's
# test_same_seed_gives_identical_runs; with workers, tests/test_workers.py), so a run on a
# served env must give exactly the same returns.
RUNS = {
    "ppo": ("--hparams", "ppo_tiny", "--train_steps", "256"),
    "ppo_2_workers": ("--hparams", "ppo_tiny", "--train_steps", "256", "--num_workers", "2"),
    "dqn": ("--hparams", "dqn_tiny", "--train_steps", "256"),
}


@pytest.mark.process
@pytest.mark.parametrize("run", list(RUNS))
def test_train_on_a_served_env_equals_the_local_run(server, local_run, tmp_path, run):
    args = RUNS[run]
    # A PPO run with workers is the run without them, to the bit (tests/test_workers.py's
    # test_an_on_policy_run_with_2_workers_is_the_run_with_none): one local run serves both.
    expected = eval_results(local_run(*RUNS["ppo" if run == "ppo_2_workers" else run]))
    assert [step for step, _, _ in expected] == [128, 256]
    out = tmp_path / "run"
    since = server.log.stat().st_size
    proc = train(*args, "--env", server.url(), "--output_dir", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["step"] == 256
    assert eval_results(out) == expected
    assert json.loads((out / "hparams.json").read_text())["env"] == server.url()
    sessions = server.sessions(since)
    assert sessions and all(env_id == "CartPole-v1" for _, env_id in sessions)
    if "--num_workers" in args:  # each worker steps its share (one copy) in its own session
        assert sum(1 for copies, _ in sessions if copies == 1) >= 2


@pytest.mark.process
def test_a_runs_max_episode_steps_caps_the_served_episodes(tmp_path):
    # endless never ends an episode: only the cap the client sends with Make does.
    out = tmp_path / "run"
    with serving(tmp_path / "server", "endless") as endless:
        proc = train("--hparams", "ppo_tiny", "--train_steps", "128", "--env",
                     endless.url("endless"), "--hparam_override", "max_episode_steps=40",
                     "--output_dir", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [evaluation] = evals(out)
    assert evaluation["lengths"] == [40, 40]
    assert evaluation["returns"] == [40.0, 40.0]


@pytest.mark.process
def test_record_video_frames_come_over_the_wire(server, local_run, tmp_path):
    args = ("--hparams", "ppo_tiny", "--train_steps", "128", "--record_video")
    local = local_run(*args) / "videos"
    out = tmp_path / "run"
    proc = train(*args, "--env", server.url(), "--output_dir", str(out))
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (out / "videos").iterdir())
    assert names == sorted(p.name for p in local.iterdir())
    assert {n.rsplit(".", 1)[1] for n in names} == {"gif", "mp4"}
    assert all((out / "videos" / n).stat().st_size > 0 for n in names)
    for name in (n for n in names if n.endswith(".gif")):
        frames = gif_frames(out / "videos" / name)
        assert len(frames) > 5 and frames[0].ndim == 3
        assert any((a != frames[0]).any() for a in frames)  # the pole moves
        expected = gif_frames(local / name)
        assert len(frames) == len(expected)
        for got, want in zip(frames, expected):
            np.testing.assert_array_equal(got, want)


# --- 4: faults: the server killed or restarted mid-run, no server at start-up ---------------
@pytest.mark.process
def test_server_killed_mid_run_exits_5_keeps_checkpoints_and_resumes(tmp_path):
    out = tmp_path / "run"
    with serving(tmp_path / "server") as first:
        args = served_run(first, out, 2048)
        line, result = ending_when_the_server_is_killed(
            first, args, tmp_path, lambda: has_eval_line(out), "evaluation line"
        )
    assert "is unreachable" in line
    # Nothing is damaged: every record parses, the newest checkpoint is complete and listed.
    assert json.loads((out / "hparams.json").read_text())["env"] == first.url()
    before = (out / "eval.jsonl").read_bytes()
    logged = [e["step"] for e in evals(out)]
    saved = checkpoint_steps(out)
    assert saved and logged and max(logged) <= saved[-1] < 2048
    kept = out / "checkpoints" / f"ckpt-{saved[-1]}"
    assert line.endswith(
        f"the last checkpoint, {kept}, is kept; rerun the same command to resume once the "
        "server is back"
    )
    assert result["failure"] in line
    assert all((out / "checkpoints" / f"ckpt-{s}.data-00000-of-00001").exists() for s in saved)
    index = (out / "checkpoints" / "checkpoint").read_text()
    assert f'model_checkpoint_path: "ckpt-{saved[-1]}"' in index
    assert not list(out.rglob("*_temp*"))
    # The same command against the server restarted (on its port) resumes.
    with serving(tmp_path / "server", port=first.port) as second:
        assert second.url() == first.url()
        rerun = train(*args, env=client_env(retry_seconds=2))
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming from {out / 'checkpoints' / f'ckpt-{saved[-1]}'}" in rerun.stderr
    assert "cannot be read" not in rerun.stderr and "previous checkpoint" not in rerun.stderr
    assert (out / "eval.jsonl").read_bytes().startswith(before)
    assert [e["step"] for e in evals(out)] == list(range(128, 2049, 128))


@pytest.mark.process
def test_server_killed_before_the_first_checkpoint_says_none_was_written(tmp_path):
    out = tmp_path / "run"
    with serving(tmp_path / "server") as server:
        # No checkpoint before the end of a run that cannot end before the kill.
        args = served_run(
            server, out, 100000000, "--hparam_override", "checkpoint_interval=100000000"
        )
        line, result = ending_when_the_server_is_killed(
            server,
            args,
            tmp_path,
            lambda: "step " in (tmp_path / "train.err").read_text(),
            "progress line",
        )
    assert "is unreachable" in line
    assert line.endswith(
        "; no checkpoint was written yet; rerun the same command to start again once the server "
        "is back"
    )
    assert result["interrupted"] is None and result["failure"] in line
    assert checkpoint_steps(out) == []


@pytest.mark.process
def test_server_killed_mid_run_with_workers_exits_5_as_without(tmp_path):
    # The workers' sessions meet the dead server first: each says so in its ErrorReport,
    # and the learner ends with exit 5 and the server's line, not 4 (workers failed).
    out = tmp_path / "run"
    with serving(tmp_path / "server") as server:
        args = served_run(server, out, 100000000, "--num_workers", "2")
        line, result = ending_when_the_server_is_killed(
            server, args, tmp_path, lambda: has_eval_line(out), "evaluation line"
        )
    assert "is unreachable" in line and "--worker_restarts" not in line
    assert line.endswith("is kept; rerun the same command to resume once the server is back")


def ending_when_the_server_is_killed(
    server, args, tmp_path, ready, what, retry_seconds=2, restart=False
):
    """Runs train.py on ``server`` with ``args``, kills the server (kill -9) once ``ready()``
    (``what``, for a failure), and checks the run ends with exit 5 and one line besides
    its progress. Returns that line and the result JSON.

    Args:
        retry_seconds: how long the client retries the server.
        restart: start the server again on its port after the kill.
    """
    run = start_train(args, tmp_path / "train.err", client_env(retry_seconds=retry_seconds))
    try:
        wait_for(ready, what, process=run)
        server.process.kill()
        server.process.wait()
        with (
            serving(tmp_path / "server", port=server.port) if restart else contextlib.nullcontext()
        ):
            code = run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    stderr = (tmp_path / "train.err").read_text()
    assert code == 5, stderr
    [line] = train_lines(stderr)
    assert all(l == line or l.startswith("step ") for l in stderr.splitlines())  # progress
    assert line.startswith(f"train.py: stopped: env server {server.url()} ")
    result = json.loads((tmp_path / "train.out").read_text().splitlines()[-1])
    assert result["failure_kind"] == "env_server"
    return line, result


@pytest.mark.process
def test_server_restarted_within_the_retry_window_loses_the_session(tmp_path):
    out = tmp_path / "run"
    with serving(tmp_path / "server") as first:
        args = served_run(first, out, 2048)
        # The client retries an unreachable server for much longer than a restart takes.
        line, _ = ending_when_the_server_is_killed(
            first, args, tmp_path, lambda: has_eval_line(out), "evaluation line", 60, restart=True
        )
    assert line.startswith(
        f"train.py: stopped: env server {first.url()} restarted and lost this client's session"
    )
    assert checkpoint_steps(out)


@pytest.mark.process
def test_no_server_at_start_up_is_one_line_exit_2_and_writes_nothing(tmp_path):
    # A bound socket that does not listen: connections to its port are refused.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"grpc://127.0.0.1:{closed.getsockname()[1]}/CartPole-v1"
        out = tmp_path / "run"
        proc = train(
            "--hparams", "ppo_tiny", "--env", url, "--output_dir", str(out),
            env=client_env(retry_seconds=1),
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"train.py: error: env server {url} is unreachable (retried for 1 s")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.process
@pytest.mark.parametrize(
    "variables, said",
    [
        # Retried for ever (nan), or reported as a failure to make the env (exit 1).
        ({RETRY_VARIABLE: "nan"}, "$RL_ENV_SERVER_RETRY_SECONDS must be a number of seconds"),
        ({RETRY_VARIABLE: "-5"}, "$RL_ENV_SERVER_RETRY_SECONDS must be a number of seconds"),
        ({RETRY_VARIABLE: "inf"}, "$RL_ENV_SERVER_RETRY_SECONDS must be a number of seconds"),
        # No deadline at all: a frozen server would stall the run for ever.
        ({ANSWER_VARIABLE: "inf"}, "$RL_ENV_SERVER_ANSWER_SECONDS must be a number of seconds"),
        ({ANSWER_VARIABLE: "1e12"}, "$RL_ENV_SERVER_ANSWER_SECONDS must be a number of seconds"),
        ({ANSWER_VARIABLE: "0"}, "$RL_ENV_SERVER_ANSWER_SECONDS must be a number of seconds"),
        ({"RL_ENV_SERVER_CA": "{missing}"}, "$RL_ENV_SERVER_CA {missing} cannot be read"),
        ({"RL_ENV_SERVER_CA": "{text}"}, "$RL_ENV_SERVER_CA {text} holds no PEM certificate"),
    ],
)
def test_bad_client_variables_are_one_line_exit_2(tmp_path, variables, said):
    (tmp_path / "text").write_text("not a certificate\n")
    paths = {"{missing}": str(tmp_path / "missing"), "{text}": str(tmp_path / "text")}
    variables = {k: paths.get(v, v) for k, v in variables.items()}
    for placeholder, path in paths.items():
        said = said.replace(placeholder, path)
    proc = subprocess.run(
        [sys.executable, "-m", "rl.envs.check", "grpcs://127.0.0.1:1/CartPole-v1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, **variables},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith("python -m rl.envs.check: error: ") and said in line, line


@pytest.mark.process
def test_a_frozen_server_is_said_retried_within_the_window_then_exits_5(tmp_path):
    # SIGSTOP: the server's socket still takes connections and requests, nothing answers.
    out = tmp_path / "run"
    with serving(tmp_path / "server") as frozen:
        args = served_run(frozen, out, 100000)
        env = {**client_env(retry_seconds=3), ANSWER_VARIABLE: "2"}
        stopped = []

        def freeze(run):
            del run
            os.kill(frozen.process.pid, signal.SIGSTOP)
            stopped.append(time.monotonic())

        code, stderr = hurt_mid_run(args, tmp_path, env, freeze)
        ended = time.monotonic()
    assert code == 5, stderr
    said = f"rl: env server {frozen.url()} stopped answering: no answer to Step within 2 s "
    assert [l for l in stderr.splitlines() if l.startswith("rl: env server")] == [
        said + f"($RL_ENV_SERVER_ANSWER_SECONDS); retrying for up to 3.0 s (${RETRY_VARIABLE})"
    ]
    [line] = train_lines(stderr)
    assert f"env server {frozen.url()} stopped answering" in line
    assert f"nor while retried for 3 s (${RETRY_VARIABLE})" in line
    assert checkpoint_steps(out)
    print(f"SIGSTOP to exit 5: {ended - stopped[0]:.1f} s")


@pytest.mark.process
def test_sigterm_stops_a_run_waiting_for_a_frozen_server_within_seconds(tmp_path):
    # The default answer deadline and a long retry window: only the signal ends the wait.
    out = tmp_path / "run"
    with serving(tmp_path / "server") as frozen:
        args = served_run(frozen, out, 100000)
        sent = []

        def freeze_then_stop(run):
            os.kill(frozen.process.pid, signal.SIGSTOP)
            # The learner then waits for the server's answer: it stops using the CPU.
            wait_for(lambda: idle_for_a_second(run.pid), "the learner waiting", process=run)
            run.send_signal(signal.SIGTERM)
            sent.append(time.monotonic())

        code, stderr = hurt_mid_run(args, tmp_path, client_env(retry_seconds=600),
                                    freeze_then_stop)  # fmt: skip
        seconds = time.monotonic() - sent[0]
        os.kill(frozen.process.pid, signal.SIGCONT)
    assert code == 128 + signal.SIGTERM, stderr
    assert seconds < 10, (seconds, stderr)  # no run outlives SIGTERM by more
    said = f"rl: env server {frozen.url()} did not answer Step as the run stopped: stopping "
    assert said + "without a checkpoint; the last one, " in stderr, stderr
    assert "Traceback" not in stderr
    assert checkpoint_steps(out)
    print(f"SIGTERM to the end: {seconds:.1f} s")


# --- 5: a server in a virtualenv of its own: Gymnasium 0.29, no TensorFlow ------------------
OLD_GYMNASIUM = (
    "gymnasium==0.29.1",
    "grpcio>=1.85,<1.86",
    "grpcio-health-checking>=1.85,<1.86",
    "protobuf>=7.35,<8",
)
# What pip installs for these, and nothing else (pip and setuptools come with the venv).
OLD_GYMNASIUM_DISTRIBUTIONS = {
    "gymnasium",
    "grpcio",
    "grpcio-health-checking",
    "protobuf",
    "numpy",
    "cloudpickle",
    "typing-extensions",
    "farama-notifications",
    "pip",
    "setuptools",
}
PROBE = "import gymnasium, grpc, google.protobuf, numpy; print(gymnasium.__version__)"


def _probe(python: Path) -> str:
    # -I: neither the working directory nor $PYTHONPATH (this repo) is on its path.
    proc = subprocess.run(
        [str(python), "-I", "-c", PROBE], capture_output=True, text=True, timeout=60
    )
    return proc.stdout.strip() if proc.returncode == 0 else ""


def old_gymnasium_venv() -> Path:
    """A virtualenv with OLD_GYMNASIUM only, cached in ~/.cache/rl-tests under a hash of the
    requirements and this Python; built in a temporary folder and renamed into place, so an
    interrupted build is never reused."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rl-tests"
    key = hashlib.sha256(
        "\n".join([*OLD_GYMNASIUM, sys.version, sys._base_executable]).encode()
    ).hexdigest()[:16]
    venv = cache / f"gymnasium-0.29-{key}"
    if venv.exists():
        if _probe(venv / "bin" / "python") == "0.29.1":
            return venv
        shutil.rmtree(venv)  # its base Python is gone, or it was damaged: build it again
    cache.mkdir(parents=True, exist_ok=True)
    for stale in cache.glob(".build-*"):  # left by a killed build a while ago
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(build / "venv")],
            check=True,
            capture_output=True,
            timeout=300,
        )
        pip = subprocess.run(
            [str(build / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet"]
            + ["--disable-pip-version-check", *OLD_GYMNASIUM],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert pip.returncode == 0, f"pip install {' '.join(OLD_GYMNASIUM)}:\n{pip.stderr}"
        try:
            os.rename(build / "venv", venv)
        except OSError:
            if not venv.exists():  # else another test run built it first: use that one
                raise
    finally:
        shutil.rmtree(build, ignore_errors=True)
    assert _probe(venv / "bin" / "python") == "0.29.1"
    return venv


@pytest.mark.slow  # its first run installs the virtualenv (pip's download cache helps after)
def test_server_in_its_own_gymnasium_0_29_venv_trains_a_gymnasium_1_run(local_run, tmp_path):
    venv = old_gymnasium_venv()
    python = venv / "bin" / "python"
    assert _probe(python) == "0.29.1" and gym.__version__.startswith("1.")
    listed = subprocess.run(
        [str(python), "-I", "-c", "import importlib.metadata as m\n"
         "print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert {n.lower().replace("_", "-") for n in listed} <= OLD_GYMNASIUM_DISTRIBUTIONS
    no_tf = subprocess.run(
        [str(python), "-I", "-c", "import tensorflow"], capture_output=True, text=True
    )
    assert no_tf.returncode == 1 and "No module named 'tensorflow'" in no_tf.stderr
    server_env = {**os.environ, "PYTHONPATH": ROOT}
    with serving(tmp_path / "server", python=str(python), env=server_env) as old:
        # Its Gymnasium is 0.29: CartPole's sutton_barto_reward came with 1.0.
        gym.make("CartPole-v1", sutton_barto_reward=True).close()  # here: Gymnasium 1.x
        # The server checks the arguments against its own Gymnasium's CartPole.
        with pytest.raises(EnvServerError, match="takes no keyword argument 'sutton_barto"):
            RemoteEnv(old.url("CartPole-v1?sutton_barto_reward=true"))
        out = tmp_path / "run"
        args = RUNS["ppo"]
        proc = train(*args, "--env", old.url(), "--output_dir", str(out))
        assert proc.returncode == 0, proc.stderr
        assert old.sessions()
        # Having served the run, it has loaded its extension modules from the venv, and no
        # TensorFlow library at all.
        maps = Path(f"/proc/{old.process.pid}/maps").read_text()
        assert "tensorflow" not in maps
        cygrpc = {l.split()[-1] for l in maps.splitlines() if "cygrpc" in l}
        assert cygrpc and all(p.startswith(os.path.realpath(venv) + "/") for p in cygrpc)
    # CartPole-v1's dynamics and seeding are the same in Gymnasium 0.29.1 and 1.x, and
    # observations cross the wire bit for bit: the run is the local one.
    assert eval_results(out) == eval_results(local_run(*args))
