"""--sys targets: mirrored == local on one update, and the one-line refusals."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import shared_folder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")

# The end of each snippet below: ``result(name)`` of every set named on its command line,
# a JSON line each; one that raises prints its traceback instead, so the others still run.
EACH_SET = textwrap.dedent(
    """
    for name in sys.argv[1:]:
        try:
            print(json.dumps({{"hparams": name, **{result}(name)}}), flush=True)
        except Exception:
            print(json.dumps({{"hparams": name, "error": traceback.format_exc()}}), flush=True)
    """
)


# Runs in a fresh process: logical devices must be made before TensorFlow starts.
# Two learners with the same seed, one under the default strategy and one under
# MirroredStrategy over 2 logical CPUs, observe the same steps and update once.
ONE_UPDATE = textwrap.dedent(
    """
    import json, sys, traceback
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from rl import catalog, registry
    from rl.agents.actor import act_and_observe
    from rl.agents.base import build_agent
    from rl.envs import make_vec_env

    def one_update(name):
        # Several replicas turn XLA off (Learner.compile_update); so does the local side here,
        # since XLA draws other stateless random numbers (SAC's noise) than TensorFlow's kernels.
        hp = registry.hparams.get(name)().replace(jit_compile=False)
        envs = make_vec_env(hp.env, hp.num_envs)
        spaces = (envs.single_observation_space, envs.single_action_space)
        local = build_agent(hp, *spaces)
        with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
            mirrored = registry.agents.get(hp.agent)(hp, *spaces)
        assert mirrored.strategy.num_replicas_in_sync == 2

        class Both:
            def observe(self, **step):
                local.learner.observe(**step)
                mirrored.observe(**step)

        obs, _ = envs.reset(seed=0)
        for t in range(100_000):
            obs, _ = act_and_observe(local.actor, Both(), envs, obs, t * hp.num_envs)
            a, b = local.learner.update(), mirrored.update()
            assert (a is None) == (b is None)
            if a is not None:
                break
        before = [v.numpy() for v in registry.agents.get(hp.agent)(hp, *spaces).model.trainable_variables]
        diffs = [float(np.max(np.abs(x.numpy() - y.numpy())))
                 for x, y in zip(local.learner.model.trainable_variables, mirrored.model.trainable_variables)]
        moved = [float(np.max(np.abs(x.numpy() - w))) for x, w in zip(local.learner.model.trainable_variables, before)]
        return {"local": a, "mirrored": b, "max_diff": max(diffs), "max_move": max(moved)}

    """
) + EACH_SET.format(result="one_update")


# One set per learner kind (prioritised replay included), for the update-level tests.
UPDATE_SETS = [
    "ppo_tiny",
    "dqn_tiny",
    "rainbow_tiny",
    "impala_tiny",
    "vpg_tiny",
    "sac_tiny",
    "td3_tiny",
]


def run_update_snippet(code: str, folder) -> dict:
    """Runs ``code`` (one of the snippets above) for every set of UPDATE_SETS in one fresh
    Python (TensorFlow loads once, not once per set); what it printed for each set, by set.
    Kept in ``folder/results.json`` so that each test worker reads one run."""
    results = folder / "results.json"
    if not results.exists():
        proc = subprocess.run(
            [sys.executable, "-c", code, *UPDATE_SETS],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        by_set = {}
        for line in proc.stdout.splitlines():
            if line.startswith('{"hparams": '):
                printed = json.loads(line)
                by_set[printed.pop("hparams")] = printed
        results.write_text(json.dumps(by_set))
    return json.loads(results.read_text())


def result_for(results: dict, hparams: str) -> dict:
    """What the snippet printed for ``hparams``; fails with its traceback if it raised."""
    assert hparams in results, f"the snippet printed nothing for {hparams}"
    assert "error" not in results[hparams], results[hparams]["error"][-3000:]
    return results[hparams]


@pytest.fixture(scope="module")
def one_updates(tmp_path_factory):
    """ONE_UPDATE's result for each set of UPDATE_SETS."""
    with shared_folder(tmp_path_factory, "systems_one_update") as (folder, _):
        return run_update_snippet(ONE_UPDATE, folder)


@pytest.fixture(scope="module")
def xla_updates(tmp_path_factory):
    """XLA_UPDATE's result for each set of UPDATE_SETS."""
    with shared_folder(tmp_path_factory, "systems_xla_update") as (folder, _):
        return run_update_snippet(XLA_UPDATE, folder)


@pytest.mark.process
@pytest.mark.parametrize("hparams", UPDATE_SETS)
def test_one_update_under_mirrored_matches_local(one_updates, hparams):
    result = result_for(one_updates, hparams)
    assert result["max_move"] > 1e-4  # the update changed the weights
    assert result["max_diff"] < 1e-5, result  # ... the same way on two replicas
    for name, value in result["local"].items():
        assert result["mirrored"][name] == pytest.approx(value, rel=1e-4, abs=1e-5), name


def run(*args):
    return subprocess.run(
        [sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


@pytest.mark.process
def test_train_py_trains_under_mirrored_and_resumes_under_local_and_back(tmp_path):
    out = str(tmp_path / "run")
    mirrored = ["--sys", "mirrored", "--cpu_replicas", "2", "--output_dir", out]
    first = run(*mirrored, "--hparams", "ppo_tiny")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout.splitlines()[-1])["step"] == 256
    # Variables are saved by name, not by device: the run moves between targets.
    second = run("--output_dir", out, "--train_steps", "384")
    assert second.returncode == 0, second.stderr
    assert "resuming from" in second.stderr
    assert json.loads(second.stdout.splitlines()[-1])["step"] == 384
    third = run(*mirrored, "--train_steps", "512")
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout.splitlines()[-1])["step"] == 512


@pytest.mark.process
@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--sys", "mirrored"],
            "--sys mirrored found no GPU; use --sys local, or add --cpu_replicas N",
        ),
        (["--tpu", "my-tpu"], "--tpu is for --sys tpu, not --sys local"),
        (["--cpu_replicas", "2"], "--cpu_replicas is for --sys mirrored, not --sys local"),
        (["--sys", "tpu"], "--sys tpu needs --tpu"),
        (["--sys", "tpu", "--tpu", "no-such-tpu"], "--sys tpu cannot reach TPU 'no-such-tpu'"),
        (["--sys", "mirrored", "--cpu_replicas", "3"], "must be divisible by the 3 replicas"),
        (["--sys", "gpu_cluster"], "unknown"),
    ],
)
def test_a_system_that_cannot_run_is_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "run"
    proc = run("--hparams", "ppo_tiny", "--output_dir", str(out), *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.unit
def test_failed_workers_point_to_where_each_system_keeps_their_output():
    from rl.systems import LocalSystem, RaySystem

    assert LocalSystem().workers_output("/runs/x/workers") == "/runs/x/workers"
    # Ray actors never write the run's workers/ folder (RayLauncher ignores it).
    said = RaySystem().workers_output("/runs/x/workers")
    assert "/runs/x" not in said and "session_latest/logs/worker-*.err" in said


@pytest.mark.process
def test_a_tpu_address_where_nothing_listens_is_one_line_not_a_hang(tmp_path):
    # TensorFlow's connect_to_cluster waits without end for such an address.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free again once closed: nothing listens there
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--output_dir", str(out)]
        + ["--sys", "tpu", "--tpu", f"grpc://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        f"train.py: error: --sys tpu cannot reach TPU 'grpc://127.0.0.1:{port}': "
        f"nothing answers at 127.0.0.1:{port} (Connection refused)"
    )
    assert not out.exists()


# TPUStrategy compiles each replica's part of the update with XLA: static shapes and no
# host callbacks. jit_compile=True on one device proves the same of every update here.
XLA_UPDATE = textwrap.dedent(
    """
    import json, sys, traceback
    from rl import catalog, registry
    from rl.agents.actor import act_and_observe
    from rl.agents.base import build_agent
    from rl.envs import make_vec_env

    def second_update(name):
        hp = registry.hparams.get(name)().replace(jit_compile=True)
        envs = make_vec_env(hp.env, hp.num_envs)
        agent = build_agent(hp, envs.single_observation_space, envs.single_action_space)
        obs, _ = envs.reset(seed=0)
        updates = []
        for t in range(100_000):
            obs, _ = act_and_observe(agent.actor, agent.learner, envs, obs, t * hp.num_envs)
            metrics = agent.learner.update()
            if metrics is not None:
                updates.append(metrics)
                if len(updates) == 2:
                    return metrics

    """
) + EACH_SET.format(result="second_update")


@pytest.mark.process
@pytest.mark.parametrize("hparams", UPDATE_SETS)
def test_every_update_compiles_with_xla(xla_updates, hparams):
    metrics = result_for(xla_updates, hparams)
    assert all(value == value for value in metrics.values()), metrics  # finite, no NaN
