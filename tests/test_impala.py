"""The impala agent: its update corrects for a lagging behaviour policy; train.py runs and resumes it."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401
from rl.agents.impala import IMPALALearner
from rl.algos.grad_comp.vtrace import vtrace_loss
from rl.envs import make_vec_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")


def stale_rollout(learner, rng):
    """A full [T, N] rollout whose behaviour log-probs come from another (older)
    policy: the current one's minus a known offset per step."""
    hp = learner.hp
    steps, envs = hp.rollout_steps, hp.num_envs
    obs = rng.normal(size=(steps + 1, envs, 4)).astype(np.float32)
    actions = rng.integers(0, 2, size=(steps, envs))
    head = learner.model.head
    flat_obs = obs[:-1].reshape(steps * envs, 4)
    current = head.log_prob(learner.model.policy(flat_obs), actions.reshape(-1)).numpy()
    offsets = rng.normal(scale=0.5, size=(steps, envs)).astype(np.float32)
    terminated = np.zeros((steps, envs), bool)
    terminated[3, 0] = True
    truncated = np.zeros((steps, envs), bool)
    truncated[5, 1] = True
    rewards = np.ones((steps, envs), np.float32)
    for t in range(steps):
        learner.observe(
            obs=obs[t],
            actions=actions[t],
            rewards=rewards[t],
            terminated=terminated[t],
            truncated=truncated[t],
            next_obs=obs[t + 1],
            log_prob=current.reshape(steps, envs)[t] - offsets[t],
        )
    return dict(
        obs=obs,
        actions=actions,
        rewards=rewards,
        terminated=terminated,
        truncated=truncated,
        behaviour=current.reshape(steps, envs) - offsets,
        ratios=np.exp(offsets),
    )


@pytest.mark.unit
def test_update_weighs_a_lagging_behaviour_policy_by_pi_over_mu():
    # The rollout's log_prob is the behaviour's mu; pi comes from the weights
    # before the update. The update's metrics must equal vtrace_loss computed
    # here from the same pre-update network, with rho = exp(offsets).
    hp = registry.hparams.get("impala_tiny")().replace(rollout_steps=8, jit_compile=False)
    envs = make_vec_env(hp.env, hp.num_envs)
    learner = IMPALALearner(hp, envs.single_observation_space, envs.single_action_space)
    envs.close()
    data = stale_rollout(learner, np.random.default_rng(0))
    steps, n = hp.rollout_steps, hp.num_envs
    model, head = learner.model, learner.model.head
    obs = data["obs"][:-1].reshape(steps * n, 4)
    policy = model.policy(obs)
    loss, extras = vtrace_loss(
        behaviour_log_probs=tf.constant(data["behaviour"]),
        target_log_probs=tf.reshape(head.log_prob(policy, data["actions"].reshape(-1)), [steps, n]),
        rewards=tf.constant(data["rewards"]),
        values=tf.reshape(model.value(obs), [steps, n]),
        next_values=tf.reshape(model.value(data["obs"][1:].reshape(steps * n, 4)), [steps, n]),
        discounts=hp.gamma * (1.0 - data["terminated"].astype(np.float32)),
        truncated=tf.constant(data["truncated"]),
        entropy=tf.reshape(head.entropy(policy), [steps, n]),
        value_coef=hp.value_coef,
        entropy_coef=hp.entropy_coef,
        lam=hp.vtrace_lambda,
        clip_rho_threshold=hp.clip_rho_threshold,
        clip_c_threshold=hp.clip_c_threshold,
        clip_pg_rho_threshold=hp.clip_pg_rho_threshold,
    )
    before = [v.numpy().copy() for v in model.trainable_variables]
    metrics = learner.update()
    assert metrics is not None and len(learner.memory) == 0
    np.testing.assert_allclose(metrics["rho"], data["ratios"].mean(), rtol=1e-4)
    assert metrics["rho_clipped"] == pytest.approx((data["ratios"] > 1.0).mean())
    assert 0 < metrics["rho_clipped"] < 1  # the case exercises clipping both ways
    np.testing.assert_allclose(metrics["loss"], tf.reduce_mean(loss).numpy(), rtol=1e-4)
    for name in ("policy_loss", "value_loss", "entropy"):
        np.testing.assert_allclose(metrics[name], tf.reduce_mean(extras[name]).numpy(), rtol=1e-4)
    assert any(not np.array_equal(a, b.numpy()) for a, b in zip(before, model.trainable_variables))
    assert learner.publish().version == 1


@pytest.mark.unit
def test_no_update_until_the_rollout_is_full():
    hp = registry.hparams.get("impala_tiny")()
    envs = make_vec_env(hp.env, hp.num_envs)
    learner = IMPALALearner(hp, envs.single_observation_space, envs.single_action_space)
    envs.close()
    obs = np.zeros((hp.num_envs, 4), np.float32)
    no = np.zeros(hp.num_envs, bool)
    for _ in range(hp.rollout_steps - 1):
        learner.observe(
            obs=obs,
            actions=np.zeros(hp.num_envs, np.int64),
            rewards=np.ones(hp.num_envs, np.float32),
            terminated=no,
            truncated=no,
            next_obs=obs,
            log_prob=np.full(hp.num_envs, -0.69, np.float32),
        )
        assert learner.update() is None
    assert learner.pending_steps() == (hp.rollout_steps - 1) * hp.num_envs


def run(*args):
    return subprocess.run(
        [sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=240, cwd=ROOT
    )


def eval_steps(out):
    return [json.loads(l)["step"] for l in (out / "eval.jsonl").read_text().splitlines()]


@pytest.mark.process
def test_train_py_runs_impala_tiny_then_resumes_without_doubling(tmp_path):
    out = tmp_path / "run"
    first = run("--hparams", "impala_tiny", "--output_dir", str(out))
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout.strip().splitlines()[-1])
    assert result["step"] == 256 and result["failure"] is None
    assert np.isfinite(result["loss"]) and "rho" in result
    assert sorted(p.name for p in (out / "checkpoints").glob("*.index")) == [
        "ckpt-128.index",
        "ckpt-256.index",
    ]
    assert json.loads((out / "hparams.json").read_text())["agent"] == "impala"
    assert eval_steps(out) == [128, 256]
    second = run("--hparams", "impala_tiny", "--train_steps", "384", "--output_dir", str(out))
    assert second.returncode == 0, second.stderr
    assert "resuming from" in second.stderr and "ckpt-256" in second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1])["step"] == 384
    assert eval_steps(out) == [128, 256, 384]  # each step once, in order
