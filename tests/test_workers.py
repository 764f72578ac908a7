"""--num_workers: actor processes feeding one learner, their faults, and their stopping."""

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types

import numpy as np
import pytest
from conftest import shared_folder
from polling import idle_for_a_second, start_logged, wait_for

import rl
from rl.workers.messages import Chunk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")
# Long enough that the run is still going when a test acts on it: slow_cartpole
# steps take 2 ms, so 2 workers x 1 env make about 1,000 env steps/s.
LONG_RUN = [
    "--hparams",
    "ppo_tiny",
    "--env",
    "slow_cartpole",
    "--train_steps",
    "60000",
    "--eval_episodes",
    "0",
    "--hparam_override",
    "checkpoint_interval=100000",
    "--num_workers",
    "2",
]


def run(*args, timeout=300, env=None):
    return subprocess.run(
        [sys.executable, TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


def start(*args):
    return subprocess.Popen(
        [sys.executable, TRAIN, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def child_pids(parent_pid, *markers):
    """Live processes whose parent is ``parent_pid`` and whose command line holds a marker."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == parent_pid and state != "Z" and any(m in cmdline for m in markers):
            pids.append(int(entry))
    return pids


def worker_pids(learner_pid):
    """Live actor processes whose parent is ``learner_pid`` (read from /proc)."""
    return child_pids(learner_pid, b"rl.workers.process")


def both_workers(proc, out):
    """The pids of ``proc``'s two actor processes once both work for the run, else None.

    They start before the learner imports TensorFlow and wait; each opens its log in
    ``out``/workers when the learner gives it its spec.
    """
    logs = [os.path.join(out, "workers", f"worker_{i}.log") for i in (0, 1)]
    pids = worker_pids(proc.pid)
    return pids if len(pids) == 2 and all(map(os.path.exists, logs)) else None


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def chunk(worker, n, fresh, first_obs):
    steps = 2
    obs = np.arange(first_obs, first_obs + steps * n, dtype=np.float32).reshape(steps, n, 1)
    done = np.zeros((steps, n), bool)
    done[1, 0] = True
    returns = np.where(done, 10.0 + worker, 0.0)
    return Chunk(
        worker=worker,
        round=0,
        version=3,
        fresh_start=fresh,
        steps={"obs": obs, "rewards": np.ones((steps, n), np.float32)},
        episode_done=done,
        episode_return=returns,
        episode_length=np.where(done, 7, 0),
        seconds=0.1,
    )


@pytest.mark.process
def test_actor_processes_import_no_tensorflow():
    code = (
        "import sys, rl.workers.process, rl.workers.messages, rl.envs; "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.unit
def test_a_round_is_every_workers_chunk_side_by_side_in_worker_order():
    from rl.workers.experience import MergedRound

    merged = MergedRound([chunk(0, 1, False, 0.0), chunk(1, 2, True, 100.0)])
    assert merged.fresh_envs == [1, 2]  # worker 1's envs are the run's env copies 1 and 2
    step, (returns, lengths) = merged.next_step()
    np.testing.assert_array_equal(step["obs"][:, 0], [0.0, 100.0, 101.0])
    assert len(returns) == 0 and not merged.exhausted
    step, (returns, lengths) = merged.next_step()
    np.testing.assert_array_equal(step["obs"][:, 0], [1.0, 102.0, 103.0])
    np.testing.assert_array_equal(returns, [10.0, 11.0])  # env 0 and env 1 ended
    np.testing.assert_array_equal(lengths, [7, 7])
    assert merged.exhausted


@pytest.mark.unit
def test_each_round_acts_with_the_weights_its_grant_carried():
    # Grants that reach a worker together still give each round the weights sent with
    # it, so the policy lag follows the round, not timing, and a seed gives one run.
    import threading
    from multiprocessing import Pipe

    import gymnasium as gym

    from rl import registry
    from rl.agents.actor import PolicySnapshot
    from rl.workers.messages import STOP, Grant, WorkerSpec
    from rl.workers.process import play

    hp = registry.hparams.get("dqn_tiny")().replace(num_envs=1)
    env = gym.make(hp.env)
    learner = registry.agents.get("dqn")(hp, env.observation_space, env.action_space)
    weights = learner.publish().arrays
    spec = WorkerSpec(
        index=0,
        env=hp.env,
        env_ids=(0, 1),
        vectorization="sync",
        seed=0,
        policy=learner.model.host_network(),
        hparams=hp,
        spaces=(env.observation_space, env.action_space),
        extras=(),
        exploration=learner.exploration_schedule(hp),
        round_steps=3,
        start_step=0,
        total_envs=1,
        first_round=0,
        snapshot=PolicySnapshot(0, weights),
        restart=0,
        parent_pid=0,
    )
    ours, theirs = Pipe()
    for version in (1, 2, 3):
        ours.send(Grant(PolicySnapshot(version, weights)))
    worker = threading.Thread(target=play, args=(spec, theirs))
    worker.start()
    versions = [ours.recv().version for _ in range(3)]
    ours.send(STOP)
    worker.join(timeout=30)
    assert versions == [1, 2, 3]


def spec_for(env, index=0):
    """A WorkerSpec whose env is all a test gets to (the worker fails before the rest)."""
    from rl.agents.actor import PolicySnapshot
    from rl.hparams.resolve import resolve_hparams
    from rl.workers.messages import WorkerSpec

    return WorkerSpec(
        index=index, env=env, env_ids=(0, 1), vectorization="sync", seed=0, policy=None,
        hparams=resolve_hparams("ppo_tiny"), spaces=(None, None), extras=(), exploration=None,
        round_steps=1, start_step=0, total_envs=1, first_round=0,
        snapshot=PolicySnapshot(0, ()), restart=0, parent_pid=0,
    )  # fmt: skip


@pytest.mark.process
def test_a_process_started_early_becomes_a_worker_and_writes_to_its_log(tmp_path):
    from rl.workers import pool
    from rl.workers.messages import ErrorReport

    launcher = pool.ProcessLauncher(str(tmp_path / "workers"))
    launcher.start_early(2)
    early = launcher.waiting_early()
    try:
        process, link = launcher.spawn(spec_for("no_such_env"))
        assert process.pid == early[0] and launcher.waiting_early() == early[1:]
        # The env cannot be made: the worker says so, and its traceback is in its log.
        report = link.conn.recv()
        assert isinstance(report, ErrorReport) and "no_such_env" in report.message
        assert process.wait(timeout=60) != 0
        assert "Traceback" in (tmp_path / "workers" / "worker_0.log").read_text()
        link.close()
    finally:
        launcher.close()  # the one nobody took exits
    assert launcher.waiting_early() == []
    assert not alive(early[1])


@pytest.mark.process
def test_a_process_that_died_before_it_was_taken_is_replaced(tmp_path):
    from rl.workers import pool
    from rl.workers.messages import ErrorReport

    launcher = pool.ProcessLauncher(str(tmp_path / "workers"))
    launcher.start_early(1)
    (dead,) = launcher.waiting_early()
    os.kill(dead, signal.SIGKILL)
    wait_for(lambda: launcher.early[0][0].poll() is not None, "the early process to die")
    try:
        process, link = launcher.spawn(spec_for("no_such_env"))
        assert process.pid != dead and launcher.waiting_early() == []
        assert isinstance(link.conn.recv(), ErrorReport)  # the fresh one runs (and reports)
        process.wait(timeout=60)
        link.close()
    finally:
        launcher.close()


@pytest.mark.unit
def test_ray_actors_started_early_are_the_ones_the_pool_prepares():
    # The pool's prepare(count) tops up to count: it starts no second set beside them.
    from collections import deque

    from rl.workers.ray_actors import RayLauncher

    launcher = object.__new__(RayLauncher)  # no Ray: only the bookkeeping is under test
    launcher.pending = deque()
    started = []
    launcher._start_actor = lambda: started.append(len(started)) or started[-1]
    launcher.prepare(2)  # train.py, before TensorFlow
    launcher.prepare(2)  # ActorPool.start
    assert started == [0, 1] and list(launcher.pending) == [0, 1]
    launcher.prepare(3)
    assert len(started) == 3


@pytest.mark.unit
def test_a_worker_takes_the_learners_environment_of_when_it_becomes_one(monkeypatch, tmp_path):
    # A process started early began before the learner set the run's variables
    # (RL_RUN_DIR: self-play envs find the run's policies there).
    from multiprocessing import Pipe

    from rl.workers import pool, process

    ours, theirs = Pipe()
    launcher = pool.ProcessLauncher(None)
    launcher.early = [(_PipeLauncher._Idle(), ours)]
    monkeypatch.delenv("RL_RUN_DIR", raising=False)
    began = dict(os.environ)  # the environment the early process started with
    monkeypatch.setenv("RL_RUN_DIR", str(tmp_path))
    launcher.spawn(spec_for("CartPole-v1", index=1))
    monkeypatch.delenv("RL_RUN_DIR")
    try:
        os.environ.clear()
        os.environ.update(began)
        setup, spec = process.receive_spec(theirs)  # what the worker does first
        process.take_setup(setup)
        assert setup.output is None  # no log_dir: the learner's own output
        assert os.environ["RL_RUN_DIR"] == str(tmp_path)
        assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == ROOT
    finally:
        os.environ.clear()
        os.environ.update(began)
    assert spec.index == 1 and launcher.waiting_early() == []


@pytest.mark.unit
def test_a_ray_actor_takes_the_learners_rl_variables_and_keeps_its_nodes_own():
    from rl.workers import process
    from rl.workers.messages import ProcessSetup

    began = dict(os.environ)  # take_setup changes os.environ itself: restored below
    try:
        os.environ["PATH"] = "/node/bin"
        os.environ["RL_RUN_DIR"] = "/stale/run"  # from the environment Ray started with
        os.environ["RL_TF_LOGS"] = ""
        os.environ.pop("RL_PLUGINS", None)
        setup = ProcessSetup(
            {"RL_RUN_DIR": "/runs/now", "RL_PLUGINS": "my_rl.envs"}, None, rl_variables_only=True
        )
        process.take_setup(setup)
        assert os.environ["PATH"] == "/node/bin"
        assert os.environ["RL_RUN_DIR"] == "/runs/now"
        assert os.environ["RL_PLUGINS"] == "my_rl.envs"
        assert "RL_TF_LOGS" not in os.environ  # the learner has none: neither does its actor
    finally:
        os.environ.clear()
        os.environ.update(began)


STOP_AT_TENSORFLOW = """
import json
import sys

from absl import flags

from rl import _tf
from rl.cli import flag_table, jobs, training

flag_table.define_flags()
flags.FLAGS(["train.py", *sys.argv[1:]])
systems, launchers = [], []  # the run's one system and its actors, as jobs.main makes them
make_system, start_actors = training.make_system, training.start_actors
training.make_system = lambda: systems.append(make_system()) or systems[-1]
training.start_actors = lambda *args: launchers.append(start_actors(*args)) or launchers[-1]


def report_and_stop():
    (system,) = systems
    (early,) = launchers
    local = early.waiting_early() if hasattr(early, "waiting_early") else []
    started = {"local": local, "ray": len(early.pending) if hasattr(early, "pending") else 0}
    print(json.dumps(started), flush=True)
    raise SystemExit(0)


_tf.import_tensorflow_quietly = report_and_stop
jobs.main(["train.py"])
"""


@pytest.mark.process
@pytest.mark.parametrize("sys_name", ["local", "ray"])
def test_train_starts_workers_before_it_imports_tensorflow(tmp_path, sys_name):
    # Their start-up then runs beside the learner's import; ones the run never takes
    # exit with it.
    if sys_name == "ray":
        pytest.importorskip("ray")
    out = subprocess.run(
        [sys.executable, "-c", STOP_AT_TENSORFLOW, "--hparams", "ppo_tiny", "--sys", sys_name,
         "--num_workers", "2", "--output_dir", str(tmp_path / "run")],
        capture_output=True, text=True, cwd=ROOT, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    started = json.loads(out.stdout.splitlines()[-1])
    if sys_name == "local":
        assert len(started["local"]) == 2 and started["ray"] == 0
        gone = lambda: not any(alive(pid) for pid in started["local"])  # noqa: E731
        wait_for(gone, "the early workers to exit", timeout=60)
    else:
        assert started == {"local": [], "ray": 2}
    assert not (tmp_path / "run").exists()


class _PipeLauncher:
    """Starts no process: keeps each worker's end of its pipe to read what was sent."""

    class _Idle:
        pid, returncode = 0, 0

        def poll(self):
            return None

        def kill(self):
            pass

        def wait(self, timeout=None):
            return 0

    def __init__(self):
        self.ends = []

    def prepare(self, count):
        pass

    def close(self):
        pass

    def spawn(self, spec):
        from multiprocessing import Pipe

        from rl.workers.link import Link

        ours, theirs = Pipe()
        self.ends.append(theirs)
        link = Link(ours, f"worker {spec}")
        link.send(spec)
        return self._Idle(), link


def pipe_pool(**options):
    """(an ActorPool of workers that are pipes nobody reads, unless a test does; their
    _PipeLauncher), with no restart allowed."""
    from rl.workers.pool import ActorPool

    launcher = _PipeLauncher()
    # An index stands in for the spec.
    pool = ActorPool(
        lambda index, first, snapshot, restart: index,
        max_restarts=0,
        restart_window=60.0,
        say=print,
        launcher=launcher,
        **options,
    )
    return pool, launcher


@pytest.mark.unit
@pytest.mark.parametrize("ahead", [1, 3])
def test_workers_start_with_the_rounds_the_first_take_would_grant(ahead):
    # So they play while the learner traces its update (Learner.warm_up).
    from rl.agents.actor import PolicySnapshot
    from rl.workers.messages import STOP, Grant

    pool, launcher = pipe_pool(num_workers=2, ahead=ahead)
    pool.start(PolicySnapshot(0, ()))
    pool.close()  # sends STOP after what it sent before
    for index, end in enumerate(launcher.ends):
        received = [end.recv()]
        while received[-1] != STOP:
            received.append(end.recv())
        # The spec carries the weights; each grant says they are unchanged.
        assert received == [index, *[Grant(None)] * ahead, STOP]


def pool_whose_starts_fail(failures: int, good_first: int, max_restarts: int):
    """(a one-worker ActorPool, its launcher, the lines it says): after ``good_first``
    starts that work, ``failures`` fail as they start, as a Ray actor placed on a node
    that is gone and not yet known to be does (seen with scripts/check_cluster.sh)."""
    from rl.workers.pool import ActorPool, WorkerFailure

    class FailingStarts(_PipeLauncher):
        def spawn(self, spec):
            if len(self.ends) >= good_first and self.failures:
                self.failures -= 1
                raise WorkerFailure(f"Ray worker {spec} died as it started: ActorDiedError")
            return super().spawn(spec)

    said = []
    launcher = FailingStarts()
    launcher.failures = failures
    pool = ActorPool(
        lambda index, first, snapshot, restart: index, num_workers=1, ahead=1,
        max_restarts=max_restarts, restart_window=60.0, say=said.append, launcher=launcher,
    )  # fmt: skip
    return pool, launcher, said


@pytest.mark.unit
def test_a_replacement_that_fails_as_it_starts_is_one_more_failure_and_is_replaced_again():
    # On a Ray cluster that lost a node, a worker's replacement can be placed on that node
    # before Ray knows it is gone (seen with scripts/check_cluster.sh): it was the run's end.
    from rl.agents.actor import PolicySnapshot
    from rl.workers.pool import WorkerFailure

    pool, launcher, said = pool_whose_starts_fail(failures=1, good_first=1, max_restarts=2)
    pool.start(PolicySnapshot(0, ()))
    pool._restart(pool.slots[0], "its node was lost", grace=0.0)
    assert len(launcher.ends) == 2 and pool.total_restarts == 2
    assert said == [
        "worker 0 failed (its node was lost); restarting it in 0.5 s "
        "(restart 1 of this worker, 1 in the last 60 s)",
        "worker 0 failed (Ray worker 0 died as it started: ActorDiedError); restarting it in "
        "1.0 s (restart 2 of this worker, 2 in the last 60 s)",
    ]
    # Such failures count against --worker_restarts like any other.
    launcher.failures = 5
    with pytest.raises(WorkerFailure, match="3 worker failures within 60 s, more than the 2 "):
        pool._restart(pool.slots[0], "its node was lost again", grace=0.0)
    pool.close()


@pytest.mark.unit
def test_a_first_start_that_fails_is_one_failure_and_is_replaced():
    # A rerun right after a node was lost: Ray can still place an actor on it.
    from rl.agents.actor import PolicySnapshot

    pool, launcher, said = pool_whose_starts_fail(failures=1, good_first=0, max_restarts=1)
    pool.start(PolicySnapshot(0, ()))
    assert len(launcher.ends) == 1 and pool.total_restarts == 1
    assert said == [
        "worker 0 failed (Ray worker 0 died as it started: ActorDiedError); restarting it in "
        "0.5 s (restart 1 of this worker, 1 in the last 60 s)"
    ]
    pool.close()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """``finished(*args)``: (the output_dir, the stdout) of ``train.py --seed 3 *args`` run
    to its end once for every test that asks for it, under -n 2 too; ``copy=1``: a second
    run of the same command. Read-only: a test that changes a run copies its folder."""

    def finished_run(*args, copy=0):
        key = hashlib.sha1(repr((args, copy)).encode()).hexdigest()[:12]
        with shared_folder(tmp_path_factory, f"workers_run_{key}") as (folder, fill):
            if fill:
                proc = run("--output_dir", str(folder / "run"), "--seed", "3", *args)
                assert proc.returncode == 0, proc.stderr
                (folder / "stdout").write_text(proc.stdout)
        return str(folder / "run"), (folder / "stdout").read_text()

    return finished_run


@pytest.mark.process
@pytest.mark.parametrize("hparams, steps", [("ppo_tiny", "1024"), ("dqn_tiny", "256")])
def test_workers_train_checkpoint_and_resume_with_another_worker_count(
    tmp_path, finished, hparams, steps
):
    # The first run is the one the tests below compare (a copy of it is resumed).
    first, stdout = finished("--hparams", hparams, "--train_steps", steps, "--num_workers", "2")
    assert json.loads(stdout.splitlines()[-1])["step"] == int(steps)
    out = str(tmp_path / "run")
    shutil.copytree(first, out)
    more = int(steps) + 256
    second = run("--output_dir", out, "--train_steps", str(more), "--num_workers", "1")
    assert second.returncode == 0, second.stderr
    assert "resuming from" in second.stderr
    assert json.loads(second.stdout.splitlines()[-1])["step"] == more
    with open(os.path.join(out, "eval.jsonl")) as f:
        logged = [json.loads(line)["step"] for line in f]
    assert logged == list(range(128, more + 1, 128))  # nothing logged twice or lost
    from rl.logbook import recent_scalars

    scalars = recent_scalars(os.path.join(out, "tb"))
    assert "workers/policy_lag" in scalars and "workers/steps_per_second/worker_1" in scalars
    # An on-policy learner's actors always act with the newest weights.
    if hparams == "ppo_tiny":
        assert set(scalars["workers/policy_lag"]) == {0.0}
    assert scalars["workers/restarts"][-1] == 0.0


def trained(out, *args):
    """What a finished train.py run learned: its evaluation returns, and every value of
    its last checkpoint (weights, optimizer slots, the act stream's state) by name."""
    import tensorflow as tf  # only to read checkpoints: the runs are subprocesses

    with open(os.path.join(out, "eval.jsonl")) as f:
        returns = [json.loads(line)["returns"] for line in f]
    reader = tf.train.load_checkpoint(os.path.join(out, "checkpoints"))
    names = [name for name in reader.get_variable_to_shape_map() if "save_counter" not in name]
    return returns, {name: reader.get_tensor(name) for name in sorted(names)}


def assert_same_run(a, b):
    (returns_a, values_a), (returns_b, values_b) = a, b
    assert returns_a == returns_b
    assert values_a.keys() == values_b.keys() and any("act_stream" in n for n in values_a)
    for name, value in values_a.items():
        np.testing.assert_array_equal(value, values_b[name], err_msg=name)


def run_to_end(out, *args):
    done = run("--output_dir", out, "--seed", "3", *args)
    assert done.returncode == 0, done.stderr
    return trained(out)


@pytest.mark.process
@pytest.mark.parametrize("hparams", ["ppo_tiny", "a2c_tiny"])
def test_an_on_policy_run_with_2_workers_is_the_run_with_none(finished, hparams):
    # Each worker draws its rows of the run's act stream and computes its rows as the
    # learner's own actor would: the runs are the same to the bit.
    args = ["--hparams", hparams, "--train_steps", "1024"]
    alone = trained(finished(*args)[0])
    assert len(alone[0]) == 8
    assert_same_run(alone, trained(finished(*args, "--num_workers", "2")[0]))


@pytest.mark.unit
def test_workers_play_the_rounds_ahead_asked_else_the_learners_own():
    from rl.workers.experience import rounds_ahead_for

    assert [rounds_ahead_for(True, None), rounds_ahead_for(False, None)] == [1, 3]
    assert [rounds_ahead_for(False, 1), rounds_ahead_for(True, 4)] == [1, 4]


@pytest.mark.process
@pytest.mark.parametrize(
    "hparams, sys_name",
    [
        ("dqn_tiny", "local"),
        ("sac_tiny", "local"),
        ("td3_tiny", "local"),
        ("impala_tiny", "local"),
        ("dqn_tiny", "ray"),  # Ray actors are granted their rounds by the same pool
    ],
)
def test_an_off_policy_run_with_2_workers_one_round_ahead_is_the_run_with_none(
    request, finished, hparams, sys_name
):
    # A round is one burst (train_interval // num_envs steps), and one actor acts a whole
    # burst with one set of weights: workers granted one round at a time act each round
    # with the weights the learner's own actor would have. IMPALA too: its learner waits
    # for its rounds in order, as the run without workers does.
    args = ["--hparams", hparams, "--hparam_override", "num_envs=2"]  # sac/td3_tiny have 1
    alone = trained(finished(*args)[0])
    assert len(alone[0]) >= 2
    if sys_name == "ray":
        out = request.getfixturevalue("ray_run")["out"]  # RAY_RUN: these args on Ray
    else:
        out = finished(*args, "--num_workers", "2", "--worker_rounds_ahead", "1")[0]
    assert_same_run(alone, trained(out))
    with open(os.path.join(out, "snapshot", "flags.json")) as f:
        assert json.load(f)["worker_rounds_ahead"] == 1  # recorded as the other flags


@pytest.mark.process
def test_a_run_with_workers_resumes_its_act_stream_as_a_run_without(tmp_path):
    # Stopped at half and resumed. A resumed run resets its envs, so it is not the
    # uninterrupted run; with workers it is the run without them, stopped and resumed
    # alike: the checkpoint holds the act stream as the workers left it.
    args = ["--hparams", "ppo_tiny", "--hparam_override", "anneal_learning_rate=false"]
    runs = []
    for workers in ("0", "2"):
        out = str(tmp_path / f"workers_{workers}")
        run_to_end(out, *args, "--train_steps", "512", "--num_workers", workers)
        runs.append(run_to_end(out, *args, "--train_steps", "1024", "--num_workers", workers))
    assert len(runs[0][0]) == 8
    assert_same_run(*runs)


@pytest.mark.process
@pytest.mark.parametrize("hparams", ["impala_tiny", "dqn_tiny"])
def test_an_off_policy_run_with_workers_is_the_same_run_for_a_seed(finished, hparams):
    # Off-policy actors play rounds ahead with older weights than one actor would, so the
    # run differs from the run without workers; which weights each round used must still
    # not depend on how fast the processes happened to be.
    # (dqn_tiny's first is the run test_workers_train_checkpoint_and_resume... resumes)
    args = ["--hparams", hparams, "--train_steps", "256", "--num_workers", "2"]
    runs = [trained(finished(*args, copy=copy)[0]) for copy in (0, 1)]
    assert_same_run(*runs)


@pytest.mark.unit
@pytest.mark.timeout(60)  # a send that blocks would hang it: fail soon instead
def test_a_worker_that_stops_reading_cannot_block_the_learner():
    # Weights far bigger than a socket's buffer, granted to a worker that never reads:
    # the send waits on the worker's link, and the learner's hang timeout still runs.
    from rl.agents.actor import PolicySnapshot
    from rl.workers.pool import WorkerFailure

    pool, launcher = pipe_pool(num_workers=1, ahead=1, worker_timeout=0.5)
    pool.start(PolicySnapshot(0, ()))  # grants round 0
    launcher.ends[0].send(chunk(worker=0, n=1, fresh=True, first_obs=0))  # round 0
    big = PolicySnapshot(1, (np.zeros(8 * 2**20, np.float32),))  # 32 MiB
    assert pool.take_round(big)[0].round == 0
    # Round 1 is granted with the new weights, which the worker never reads.
    with pytest.raises(WorkerFailure, match=r"worker 0 failed \(sent nothing for 0.5 s\)"):
        pool.take_round(big)
    pool.close()


@pytest.mark.unit
@pytest.mark.timeout(60)
def test_a_learner_asked_to_give_up_stops_waiting_for_a_silent_worker():
    # A signal stops the run within seconds although the hang timeout is far away.
    from rl.agents.actor import PolicySnapshot
    from rl.workers.pool import RoundAbandoned

    asked = threading.Event()
    pool, launcher = pipe_pool(num_workers=1, ahead=1, worker_timeout=3600, give_up=asked.is_set)
    pool.start(PolicySnapshot(0, ()))
    launcher.ends[0].send(chunk(worker=0, n=1, fresh=True, first_obs=0))  # round 0 only
    assert pool.take_round(PolicySnapshot(0, ()))[0].round == 0
    threading.Timer(0.5, asked.set).start()
    with pytest.raises(RoundAbandoned):
        pool.take_round(PolicySnapshot(0, ()))  # round 1 never comes
    pool.close()


@contextlib.contextmanager
def a_run_with_worker_1_stopped(tmp_path, *args):
    """train.py with two workers, worker 1 stopped by SIGSTOP once both work for the run;
    yields (the process, the workers' pids, its stderr file). No process outlives it."""
    out = str(tmp_path / "run")
    log = tmp_path / "train.err"
    command = [sys.executable, TRAIN, *args, "--num_workers", "2", "--output_dir", out]
    proc = start_logged(command, log, cwd=ROOT)
    pids = []
    try:
        pids = wait_for(lambda: both_workers(proc, out), "two workers", process=proc)
        os.kill(pids[1], signal.SIGSTOP)
        yield proc, pids, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.process
def test_sigterm_stops_a_run_waiting_for_a_stopped_worker_within_seconds(tmp_path):
    args = ["--hparams", "ppo_tiny", "--train_steps", "200000", "--eval_episodes", "0"]
    with a_run_with_worker_1_stopped(tmp_path, *args) as (proc, pids, log):  # hang timeout 300 s
        # The learner then waits for worker 1's round: it stops using the CPU.
        wait_for(lambda: idle_for_a_second(proc.pid), "the learner waiting", process=proc)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        proc.communicate(timeout=120)
        seconds = time.monotonic() - sent
    stderr = log.read_text()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert seconds < 10, (seconds, stderr)  # the promise: no run outlives SIGTERM by more
    assert "Traceback" not in stderr
    assert not alive(pids[1])  # killed although stopped
    print(f"SIGTERM to the end: {seconds:.1f} s")


@pytest.mark.process
def test_a_worker_stopped_by_sigstop_is_killed_and_replaced_and_training_finishes(tmp_path):
    # 23 rounds of 256 steps: worker 1 cannot have played its share before it is stopped.
    args = ["--hparams", "dqn_cartpole", "--train_steps", "6000", "--eval_episodes", "0"]
    # 10 s: short, yet more than a healthy worker takes to start on a busy machine.
    args += ["--worker_timeout", "10"]
    with a_run_with_worker_1_stopped(tmp_path, *args) as (proc, pids, log):
        stopped = time.monotonic()
        restart = "worker 1 failed (sent nothing for 10 s); restarting it"
        wait_for(lambda: restart in log.read_text(), "the restart line", process=proc)
        restarted = time.monotonic()
        stdout, _ = proc.communicate(timeout=600)
        ended = time.monotonic()
    stderr = log.read_text()
    assert proc.returncode == 0, stderr
    assert json.loads(stdout.splitlines()[-1])["step"] == 6000
    assert not alive(pids[1])  # killed although stopped, and reaped
    print(f"SIGSTOP to restart {restarted - stopped:.1f} s, to the end {ended - stopped:.1f} s")


@pytest.mark.process
def test_a_killed_worker_is_restarted_and_training_goes_on(tmp_path):
    out = str(tmp_path / "run")
    # 64 rounds of 32 steps (2 s at least): the kill comes as the first are played.
    proc = start(*LONG_RUN, "--output_dir", out, "--train_steps", "2048")
    try:
        pids = wait_for(lambda: both_workers(proc, out), "two workers", process=proc)
        os.kill(pids[0], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "failed (killed by signal 9); restarting it" in stderr
    assert json.loads(stdout.splitlines()[-1])["step"] == 2048


@pytest.mark.process
def test_an_env_that_raises_restarts_its_worker_then_the_budget_stops_the_run(tmp_path):
    # flaky_cartpole at 1 crash in 2,000 steps; seed 0's first comes at step ~480, after
    # ppo_tiny's checkpoints at 128-384.
    common = [
        "--hparams",
        "ppo_tiny",
        "--env",
        "flaky_cartpole?failure_rate=0.0005",
        "--eval_episodes",
        "0",
        "--seed",
        "0",
        "--num_workers",
        "2",
        "--train_steps",
        "1024",
    ]
    allowed = run(*common, "--output_dir", str(tmp_path / "a"))
    assert allowed.returncode == 0, allowed.stderr
    assert "failed (SimulatorCrash: flaky_cartpole: the simulator crashed" in allowed.stderr
    assert json.loads(allowed.stdout.splitlines()[-1])["step"] == 1024

    out = str(tmp_path / "b")
    stopped = run(*common, "--output_dir", out, "--worker_restarts", "0")
    assert stopped.returncode == 4, stopped.stderr
    lines = [l for l in stopped.stderr.splitlines() if l.startswith("train.py: stopped:")]
    assert len(lines) == 1 and "more than the 0 allowed (--worker_restarts)" in lines[0]
    assert lines[0].endswith(f"the workers' output is in {os.path.join(out, 'workers')}")
    kept = json.loads(stopped.stdout.splitlines()[-1])["step"]
    # The last checkpoint is kept.
    index = os.path.join(out, "checkpoints", "checkpoint")
    assert os.path.exists(index)
    with (
        open(os.path.join(out, "workers", "worker_0.log")) as f0,
        open(os.path.join(out, "workers", "worker_1.log")) as f1,
    ):
        assert "SimulatorCrash" in f0.read() + f1.read()
    assert kept < 1024


@pytest.mark.process
def test_ctrl_c_saves_one_checkpoint_and_stops_every_worker(tmp_path):
    out = str(tmp_path / "run")
    proc = start(*LONG_RUN, "--output_dir", out)
    try:
        pids = wait_for(lambda: both_workers(proc, out), "two workers", process=proc)
        # The workers start inside train(), after its signal handlers are in place.
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGINT, stderr
    step = json.loads(stdout.splitlines()[-1])["step"]
    assert step < 60000
    assert os.path.exists(os.path.join(out, "checkpoints", f"ckpt-{step}.index"))
    assert not any(alive(pid) for pid in pids)


@pytest.mark.process
@pytest.mark.parametrize("when", ["at start-up", "while training"])
def test_kill_9_of_the_learner_leaves_no_actor_process(tmp_path, when):
    # At start-up: as soon as both exist, while the learner still imports TensorFlow
    # and they wait for their specs (or still import).
    out = str(tmp_path / "run")
    proc = start(*LONG_RUN, "--output_dir", out)

    def workers():
        pids = worker_pids(proc.pid)
        return pids if len(pids) == 2 else None

    try:
        ready = workers if when == "at start-up" else lambda: both_workers(proc, out)
        pids = wait_for(ready, "two workers", process=proc)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        proc.kill()
    wait_for(lambda: not any(alive(pid) for pid in pids), "the workers to exit", timeout=30)


@pytest.mark.process
def test_bad_worker_counts_are_one_line_and_write_nothing(tmp_path):
    out = tmp_path / "run"
    proc = run("--hparams", "ppo_tiny", "--output_dir", str(out), "--num_workers", "3")
    assert proc.returncode == 2
    assert (
        "train.py: error: --num_workers 3 must divide num_envs=2 (each worker steps an equal "
        "share of the env copies): valid: 1, 2" in proc.stderr
    )
    assert not out.exists()
    proc = run("--hparams", "ppo_tiny", "--output_dir", str(out), "--num_workers", "-1")
    assert proc.returncode == 2 and "num_workers" in proc.stderr
    assert not out.exists()


# dqn_tiny on two Ray actors granted one round at a time (as the off-policy comparison
# above runs it without them: its --seed and num_envs too).
RAY_RUN = ["--hparams", "dqn_tiny", "--hparam_override", "num_envs=2", "--sys", "ray",
           "--num_workers", "2", "--worker_rounds_ahead", "1"]  # fmt: skip


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory):
    """``train.py --seed 3 RAY_RUN`` run once, where `ray start --head` left a cluster's
    address behind: {"out", "returncode", "stdout", "stderr", "daemons": the pids of the
    local Ray daemons it started}."""
    pytest.importorskip("ray")
    with shared_folder(tmp_path_factory, "workers_ray_run") as (folder, fill):
        if fill:
            # `ray start --head` writes its address to $RAY_TMPDIR/ray/ray_current_cluster,
            # and the file stays when that cluster dies unstopped.
            ray_tmp = tempfile.mkdtemp(prefix="rl-ray-", dir="/tmp")  # short socket paths
            os.makedirs(os.path.join(ray_tmp, "ray"))
            with open(os.path.join(ray_tmp, "ray", "ray_current_cluster"), "w") as f:
                f.write("127.0.0.1:1\n")
            env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
            env["RAY_TMPDIR"] = ray_tmp
            command = [sys.executable, TRAIN, "--output_dir", str(folder / "run"), "--seed", "3",
                       *RAY_RUN]  # fmt: skip
            daemons = set()
            try:
                with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
                    proc = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT, env=env)
                # This run's own Ray daemons (other tests may run a Ray of their own meanwhile).
                while proc.poll() is None:
                    daemons.update(child_pids(proc.pid, b"raylet", b"gcs_server"))
                    time.sleep(0.1)
            finally:
                shutil.rmtree(ray_tmp, ignore_errors=True)
            ended = {"returncode": proc.returncode, "daemons": sorted(daemons)}
            (folder / "ended.json").write_text(json.dumps(ended))
    return {
        **json.loads((folder / "ended.json").read_text()),
        "out": str(folder / "run"),
        "stdout": (folder / "stdout").read_text(),
        "stderr": (folder / "stderr").read_text(),
    }


@pytest.mark.process
def test_ray_actors_run_the_same_actor_code_and_ray_stops_with_the_run(ray_run):
    # (that code gives the run without workers: the off-policy comparison above)
    assert ray_run["returncode"] == 0, ray_run["stderr"]
    assert json.loads(ray_run["stdout"].splitlines()[-1])["step"] == 256
    # None of the local Ray's start-up notes reach the user.
    assert "Started a local Ray instance" not in ray_run["stderr"]
    assert "Token authentication is enabled" not in ray_run["stderr"]
    with open(os.path.join(ray_run["out"], "snapshot", "flags.json")) as f:
        recorded = json.load(f)
    assert recorded["device"]["sys"] == "ray" and recorded["num_workers"] == 2
    daemons = ray_run["daemons"]
    assert daemons, "the run started no local Ray of its own"
    wait_for(lambda: not any(alive(pid) for pid in daemons), "its local Ray to stop", timeout=30)


@pytest.mark.process
def test_without_an_address_a_local_ray_starts_even_where_ray_start_left_one(ray_run):
    # ray_run's RAY_TMPDIR holds a dead cluster's address. Joining it was refused
    # ("num_cpus and num_gpus must not be provided"), exit 2.
    assert ray_run["returncode"] == 0, ray_run["stderr"]
    assert json.loads(ray_run["stdout"].splitlines()[-1])["step"] == 256
    assert ray_run["daemons"], "the run joined a cluster instead of starting its own"


@pytest.mark.process
def test_an_unreachable_ray_address_is_one_line_and_writes_nothing(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "run"
    args = ["--hparams", "ppo_tiny", "--output_dir", str(out), "--num_workers", "2"]
    proc = run("--sys", "ray", "--ray_address", "127.0.0.1:1", *args)
    assert proc.returncode == 2
    assert error_line(proc) == (
        "train.py: error: --sys ray cannot reach the Ray cluster at 127.0.0.1:1: "
        "nothing listens at 127.0.0.1:1"
    )
    proc = run("--ray_address", "127.0.0.1:1", *args)
    assert proc.returncode == 2 and "--ray_address is for --sys ray" in error_line(proc)
    assert not out.exists()


@pytest.mark.process
def test_a_cluster_with_token_authentication_is_joined_with_its_token_or_refused_in_one_line(
    tmp_path,
):
    # Ray 2.60's `ray start` turns token authentication on where ~/.ray/auth_token exists
    # (a local --sys ray run leaves one). A client that is refused retries for 20 s,
    # printing a line each time, and failed with "Failed to connect to Ray cluster".
    pytest.importorskip("ray")
    import secrets
    import shutil
    import signal
    import socket
    import tempfile

    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(16))
    unset = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["HOME"] = str(home)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray_tmp = tempfile.mkdtemp(prefix="rl-ray-", dir="/tmp")  # Ray's socket paths stay short
    head = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "ray"), "start", "--head", "--block",
         f"--port={port}", "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={ray_tmp}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        from rl.network import unreachable_reason

        address = f"127.0.0.1:{port}"
        wait_for(lambda: unreachable_reason(address, timeout=1) is None, "ray start", timeout=60)
        out = tmp_path / "run"
        args = ["--sys", "ray", "--ray_address", address, "--hparams", "ppo_tiny",
                "--num_workers", "1", "--output_dir", str(out)]  # fmt: skip
        # As Ray documents it: token mode, the cluster's token in ~/.ray/auth_token.
        joined = run(*args, env={**env, "RAY_AUTH_MODE": "token"})
        assert joined.returncode == 0, joined.stderr
        assert json.loads(joined.stdout.splitlines()[-1])["step"] == 256
        shutil.rmtree(out)
        # Without token mode Ray offers no token to a named address, and is refused (two
        # tries instead of Ray's twenty, a second apart).
        refused = run(*args, env={**env, "RAY_NUM_REDIS_GET_RETRIES": "2"})
        assert refused.returncode == 2
        assert refused.stderr == (
            f"train.py: error: --sys ray cannot reach the Ray cluster at {address}: it uses "
            "token authentication; set RAY_AUTH_MODE=token and put the cluster's token "
            "(`ray get-auth-token` on its head node) in ~/.ray/auth_token or RAY_AUTH_TOKEN\n"
        )  # one line: Ray's line per try is held back
        assert not out.exists()
    finally:
        # With --block the cluster's daemons share its process group (SIGTERM: 30 s).
        os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=60)
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.unit
def test_a_refused_ray_client_is_told_where_the_token_goes(monkeypatch):
    ray = pytest.importorskip("ray")
    from rl.workers.ray_actors import _token_refusal

    retries = "[W gcs_client.cc:210] ... Unauthenticated: RPC error: InvalidAuthToken: ..."
    failed = ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")
    put = (
        "put the cluster's token (`ray get-auth-token` on its head node) in ~/.ray/auth_token "
        "or RAY_AUTH_TOKEN"
    )
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert _token_refusal(retries, failed) == (
        "it refused this machine's token (~/.ray/auth_token, RAY_AUTH_TOKEN or "
        f"RAY_AUTH_TOKEN_PATH); {put}"
    )
    # Token mode with no token anywhere: Ray stops before it connects.
    no_token = ray.exceptions.AuthenticationError("no authentication token was found")
    assert _token_refusal("", no_token) == (
        f"RAY_AUTH_MODE=token here, and this machine has no token; {put}"
    )
    for mode in ("disabled", ""):
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
        assert _token_refusal(retries, failed) == (
            f"it uses token authentication; set RAY_AUTH_MODE=token and {put}"
        )
    monkeypatch.delenv("RAY_AUTH_MODE")
    assert _token_refusal(retries, failed).startswith("it uses token authentication; set")
    assert _token_refusal("[W] version mismatch", failed) is None  # Ray's own words then


@pytest.mark.unit
def test_a_local_ray_gets_the_actors_environment_as_it_starts_and_the_learner_keeps_its_own(
    monkeypatch,
):
    # Set in the environment a local Ray's daemons inherit, not as a runtime_env (with
    # one, Ray starts every actor through its runtime-env agent: twice as slow here).
    ray = pytest.importorskip("ray")
    from rl.workers import ray_actors

    seen = {}

    def init(**kwargs):
        seen.update(kwargs, environ={k: os.environ.get(k) for k in ("PYTHONPATH", "RL_TF_LOGS")})

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(
        ray, "get_runtime_context", lambda: types.SimpleNamespace(gcs_address="here:1")
    )
    monkeypatch.setattr(ray_actors, "_started_here", False)
    monkeypatch.setenv("PYTHONPATH", "/users/own/envs")
    monkeypatch.delenv("RL_TF_LOGS", raising=False)
    assert ray_actors.connect(None, local_cpus=3) == "here:1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(rl.__file__)))
    assert seen["environ"] == {
        "PYTHONPATH": f"{root}{os.pathsep}/users/own/envs",  # rl first, the user's path kept
        "RL_TF_LOGS": "",
    }
    assert "runtime_env" not in seen and seen["num_cpus"] == 3
    assert os.environ["PYTHONPATH"] == "/users/own/envs" and "RL_TF_LOGS" not in os.environ
    assert ray_actors._started_here


def error_line(proc):
    lines = [l for l in proc.stderr.splitlines() if l.startswith("train.py: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@dataclasses.dataclass
class SpecStandIn:
    """What RayLauncher.spawn reads of a WorkerSpec (picklable, as the spec is sent)."""

    index: int
    parent_pid: int


@pytest.mark.unit
def test_ray_actors_connecting_in_any_order_each_get_their_own_spec(monkeypatch):
    # prepare() starts every actor at once; each connection is filed under the token its
    # actor sends first, so spawn() gives each spec to the actor it took. Ray's side is
    # faked (no local Ray starts): clients stand in for the actors.
    ray = pytest.importorskip("ray")
    import socket
    import threading
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    from rl.workers.ray_actors import RayLauncher, _StartingActor

    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: ref)  # the pid
    launcher = RayLauncher(None)
    address = launcher.address
    tokens = ["a", "b", "c"]
    launcher.pending.extend(_StartingActor(None, 100 + i, None, t) for i, t in enumerate(tokens))

    def within_10_s(connect):
        """What ``connect()`` returns or raises; fails the test if the launcher never answers."""
        outcome = {}

        def run():
            try:
                outcome["value"] = connect()
            except Exception as e:
                outcome["error"] = e

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(timeout=10)
        assert outcome, "the launcher stopped accepting connections"
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    # Before any actor: a probe that hangs up at once, a stranger without the key, and a
    # peer that says nothing (and holds up no one).
    socket.create_connection(address).close()
    silent = socket.create_connection(address)
    with pytest.raises(AuthenticationError):
        within_10_s(lambda: Client(address, authkey=b"wrong"))
    clients = {}
    for token in reversed(tokens):  # the last prepared connects first
        clients[token] = within_10_s(lambda: Client(address, authkey=launcher.authkey))
        clients[token].send(token)
    monkeypatch.setenv("RL_RUN_DIR", "/runs/x")  # set by the Experiment before its pool starts
    for index, token in enumerate(tokens):
        worker, link = launcher.spawn(SpecStandIn(index, 1))
        assert worker.pid == 100 + index
        # rl's variables of now, and only those (a cluster node keeps its own PATH, HOME).
        setup = clients[token].recv()
        assert setup.rl_variables_only and setup.output is None
        assert setup.environ["RL_RUN_DIR"] == "/runs/x"
        assert all(name.startswith("RL_") for name in setup.environ)
        # parent_pid 0: a Ray actor does not watch its parent process.
        assert clients[token].recv() == SpecStandIn(index, 0)
        link.send("grant")
        assert clients[token].recv() == "grant"
        link.close()
    within_10_s(launcher.close)  # the silent peer does not hold it up either
    launcher.acceptor.join(timeout=10)
    assert not launcher.acceptor.is_alive()
    assert launcher.listener.fileno() == -1 and launcher.connections == {}
    silent.close()


@pytest.mark.unit
def test_a_ray_actor_that_dies_as_it_starts_is_a_worker_failure_not_a_traceback(monkeypatch):
    # Ray's answer for an actor that died is faked: no local Ray starts.
    ray = pytest.importorskip("ray")
    from rl.workers.pool import WorkerFailure
    from rl.workers.ray_actors import RayLauncher, _StartingActor

    def died(*args, **kwargs):
        raise ray.exceptions.RayActorError()

    monkeypatch.setattr(ray, "get", died)
    launcher = RayLauncher(None)
    launcher.pending.append(_StartingActor(actor=None, pid=None, ref=None, token="t"))
    spec = SpecStandIn(3, 1)
    with pytest.raises(WorkerFailure, match="Ray worker 3 died as it started: RayActorError"):
        launcher.spawn(spec)
    launcher.close()


@pytest.mark.unit
def test_a_ray_actor_that_fails_before_connecting_back_is_reported_at_once(monkeypatch):
    ray = pytest.importorskip("ray")
    from rl.workers.pool import WorkerFailure
    from rl.workers.ray_actors import RayLauncher, _StartingActor

    def get(ref, timeout=None):
        if ref == "run":  # the actor's run() raised: it never connects
            raise ray.exceptions.RayActorError()
        return ref

    monkeypatch.setattr(ray, "get", get)
    monkeypatch.setattr(ray, "wait", lambda refs, timeout=None: (refs, []))
    launcher = RayLauncher(None)
    launcher.pending.append(_StartingActor(actor=None, pid=7, ref="run", token="t"))
    # Not the 60 s connect timeout: within the first short wait.
    with pytest.raises(WorkerFailure, match="worker 2 failed before connecting back"):
        launcher.spawn(SpecStandIn(2, 1))
    launcher.close()


@pytest.mark.process
def test_with_workers_the_learner_traces_its_update_before_the_first_round(tmp_path):
    # Experiment calls Learner.warm_up as the workers start: the first update reuses the
    # trace made before any round arrived.
    from rl.experiment import Experiment

    exp = Experiment("ppo_tiny", str(tmp_path / "run"), verbose=False, num_workers=1)
    traces_at_first_round = []
    take_round = None

    def watch_take_round(snapshot):
        if not traces_at_first_round:
            update = exp.learner._compiled_update
            traces_at_first_round.append(update.experimental_get_tracing_count())
        return take_round(snapshot)

    start = exp.experience.start

    def start_and_watch():
        nonlocal take_round
        start()
        take_round = exp.experience.pool.take_round
        exp.experience.pool.take_round = watch_take_round

    exp.experience.start = start_and_watch
    try:
        exp.train(exp.learner.rollout_size())
    finally:
        exp.close()
    assert traces_at_first_round == [1]
    assert exp.learner._compiled_update.experimental_get_tracing_count() == 1


@pytest.mark.process
def test_a_run_that_cannot_be_built_stops_the_actors_it_started(tmp_path, monkeypatch):
    # A Run made from Python starts its actor processes as it is built (before the agent):
    # if building fails after that, none of them may outlive it.
    from rl import experiment, systems

    launchers = []
    start = systems.LocalSystem.actor_launcher

    started = []  # the actor processes, as Popen objects

    def recorded(self, count):
        launchers.append(start(self, count))
        started.extend(process for process, _ in launchers[-1].early)
        return launchers[-1]

    def broken_agent(*args, **kwargs):
        raise RuntimeError("the agent cannot be built")

    monkeypatch.setattr(systems.LocalSystem, "actor_launcher", recorded)
    monkeypatch.setattr(experiment, "build_envs_and_agent", broken_agent)
    with pytest.raises(RuntimeError, match="the agent cannot be built"):
        experiment.Experiment("ppo_tiny", str(tmp_path / "run"), verbose=False, num_workers=2)
    (launcher,) = launchers
    assert launcher.waiting_early() == []  # close() stopped the two it started
    left = [process.pid for process in started if process.poll() is None]
    assert len(started) == 2 and left == [], f"actor processes left running: {left}"
