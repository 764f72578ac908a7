"""Observation and reward normalisation: the running statistics, the model's normalizer,
acting on the host and in TensorFlow, the learner's timing, checkpoints and train.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401
from rl.agents.actor import act_and_observe
from rl.agents.base import Agent
from rl.algos.normalization import ReturnScaler, RunningMeanStd, normalize
from rl.envs import make_vec_env
from rl.experiment import Experiment
from rl.models.networks import ObservationNormalizer
from rl.policy import load_policy, policy_steps, read_artefact

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.unit
def test_running_moments_of_batches_are_the_moments_of_all_samples():
    stats = RunningMeanStd((1,))
    assert stats.mean.tolist() == [0.0] and stats.var.tolist() == [1.0]  # identity at first
    stats.update(np.array([[1.0], [2.0]]))
    stats.update(np.array([[3.0], [4.0], [5.0]]))
    # 1..5: mean 3, population variance (4 + 1 + 0 + 1 + 4) / 5 = 2.
    assert stats.mean[0] == pytest.approx(3.0) and stats.var[0] == pytest.approx(2.0)
    assert stats.count == 5.0
    copy = RunningMeanStd((1,))
    copy.load_state(json.loads(json.dumps(stats.state())))
    assert (copy.mean, copy.var, copy.count) == (stats.mean, stats.var, stats.count)
    with pytest.raises(ValueError, match=r"shape \(1,\).*\(2,\)"):
        RunningMeanStd((2,)).load_state(stats.state())


@pytest.mark.unit
def test_rewards_are_divided_by_the_running_std_of_discounted_returns():
    scaler = ReturnScaler(num_envs=2, gamma=0.5, clip=10.0)
    # Returns {1, 3}: variance 1, so rewards pass unchanged.
    first = scaler(np.array([1.0, 3.0]), np.array([False, False]))
    np.testing.assert_allclose(first, [1.0, 3.0], rtol=1e-6)
    # Returns 0.5 * 1 + 1 = 1.5 and 0.5 * 3 + 1 = 2.5; all four returns {1, 3, 1.5, 2.5}
    # have mean 2 and variance (1 + 1 + 0.25 + 0.25) / 4 = 0.625.
    second = scaler(np.array([1.0, 1.0]), np.array([True, False]))
    np.testing.assert_allclose(second, [1 / np.sqrt(0.625)] * 2, rtol=1e-6)
    np.testing.assert_allclose(scaler.returns, [0.0, 2.5])  # the first copy's episode ended
    # The sign stays (no mean is subtracted) and big rewards are clipped.
    third = scaler(np.array([-1.0, 0.0]), np.array([False, False]))
    assert third[0] < 0 and third[1] == 0.0
    clipped = ReturnScaler(num_envs=2, gamma=0.5, clip=0.5)
    np.testing.assert_array_equal(clipped(np.array([-1.0, -3.0]), np.zeros(2, bool)), [-0.5, -0.5])
    scaler.break_streams([1])
    assert scaler.returns[1] == 0.0


@pytest.mark.unit
def test_host_and_tensorflow_normalise_alike_and_clip():
    rng = np.random.default_rng(0)
    mean = rng.normal(size=3).astype(np.float32)
    var = rng.uniform(0.01, 4.0, size=3).astype(np.float32)
    var[2] = 0.0  # a feature that never changed
    x = rng.normal(scale=3.0, size=(64, 3)).astype(np.float32)
    x[:, 2] = mean[2]
    x[0, 0] = mean[0] + 100 * np.sqrt(var[0])  # beyond the clip
    layer = ObservationNormalizer((3,), clip=5.0)
    layer.assign(mean, var)
    host = normalize(x, mean, var, 5.0)
    np.testing.assert_allclose(host, layer(tf.constant(x)).numpy(), rtol=1e-6, atol=1e-6)
    assert host[0, 0] == 5.0 and np.all(host[:, 2] == 0.0)
    expected = (x[:, :2] - mean[:2]) / np.sqrt(var[:2])
    inside = np.abs(expected) < 5.0
    np.testing.assert_allclose(host[:, :2][inside], expected[inside], rtol=1e-5)
    np.testing.assert_array_equal(host[:, :2][~inside], 5.0 * np.sign(expected[~inside]))


# One set per model kind: discrete actor-critic, Gaussian actor-critic, Q-network,
# SAC's squashed Gaussian with critics, TD3's deterministic actor with critics.
MODEL_SETS = ("ppo_tiny", "ppo_pendulum", "dqn_tiny", "sac_tiny", "td3_tiny")


def _policy_outputs(policy, head):
    if isinstance(policy, np.ndarray) or tf.is_tensor(policy):
        return np.asarray(policy)  # Q-values
    if isinstance(policy, tf.Module) or hasattr(policy, "batch_shape"):  # a tfp distribution
        return head.mode(policy).numpy()
    return policy.mode()


@pytest.mark.unit
@pytest.mark.parametrize("name", MODEL_SETS)
def test_every_model_kind_acts_alike_on_the_host_and_in_tensorflow_with_statistics(name):
    hp = registry.hparams.get(name)().replace(normalize_observations=True, hidden_sizes=(16,))
    envs = make_vec_env(hp.env, 2)
    agent = Agent(hp, envs.single_observation_space, envs.single_action_space)
    model = agent.learner.model
    size = envs.single_observation_space.shape[0]
    rng = np.random.default_rng(1)
    model.normalizer.assign(rng.normal(size=size), rng.uniform(0.1, 3.0, size=size))
    arrays = tuple(v.numpy() for v in model.acting_variables())
    obs = rng.normal(scale=2.0, size=(8, size)).astype(np.float32)
    host = model.host_network()(obs, arrays)
    graph = model.policy(tf.constant(obs))
    np.testing.assert_allclose(
        _policy_outputs(host, model.head), _policy_outputs(graph, model.head), rtol=1e-4, atol=1e-5
    )
    # The statistics change what the model computes (they are not ignored).
    model.normalizer.assign(np.zeros(size), np.ones(size))
    unnormalised = _policy_outputs(model.policy(tf.constant(obs)), model.head)
    assert not np.allclose(unnormalised, _policy_outputs(graph, model.head))
    envs.close()


@pytest.mark.unit
def test_a_rollout_is_acted_and_learned_with_the_same_statistics_then_they_move_on():
    hp = registry.hparams.get("ppo_tiny")().replace(normalize_observations=True)
    envs = make_vec_env(hp.env, hp.num_envs)
    agent = Agent(hp, envs.single_observation_space, envs.single_action_space)
    learner = agent.learner
    obs, _ = envs.reset(seed=0)
    seen = []
    for _ in range(2):
        rollout_start = len(seen)
        while not learner.memory.full:
            seen.append(obs.copy())
            obs, _ = act_and_observe(agent.actor, learner, envs, obs, 0)
        data = learner.memory.data()
        # The learner's model holds the statistics the actor acted with: it recomputes
        # the recorded log-probs exactly, so PPO's first ratio is 1.
        policy = learner.model.policy(tf.constant(data["obs"].reshape(-1, 4)))
        recomputed = learner.model.head.log_prob(policy, data["actions"].reshape(-1)).numpy()
        np.testing.assert_allclose(recomputed, data["log_prob"].reshape(-1), atol=1e-5)
        assert len(seen) > rollout_start
        learner.update()
        agent.actor.load(learner.publish())
        # After the update: the statistics of every observation so far, in the model
        # and in the published weights.
        everything = np.concatenate(seen)
        snapshot = learner.publish().arrays
        np.testing.assert_allclose(
            learner.model.normalizer.mean.numpy(), everything.mean(0), rtol=1e-5
        )
        np.testing.assert_allclose(
            learner.model.normalizer.var.numpy(), everything.var(0), rtol=1e-4
        )
        np.testing.assert_array_equal(snapshot[0], learner.model.normalizer.mean.numpy())
        np.testing.assert_array_equal(snapshot[1], learner.model.normalizer.var.numpy())
    envs.close()


@pytest.mark.unit
def test_the_learner_stores_scaled_then_normalised_rewards():
    hp = registry.hparams.get("ppo_tiny")().replace(
        normalize_rewards=True, reward_scale=2.0, gamma=0.5
    )
    envs = make_vec_env(hp.env, hp.num_envs)
    learner = Agent(hp, envs.single_observation_space, envs.single_action_space).learner
    zeros = np.zeros((2, 4), np.float32)
    for rewards, done in (([0.5, 1.5], [False, False]), ([0.5, 0.5], [True, False])):
        learner.observe(
            obs=zeros,
            actions=np.zeros(2, np.int64),
            rewards=np.array(rewards),
            terminated=np.array(done),
            truncated=np.array([False, False]),
            next_obs=zeros,
            log_prob=np.zeros(2, np.float32),
        )
    stored = learner.memory.data()["rewards"][:2]
    # Scaled by 2 these are the rewards of the hand-computed ReturnScaler test.
    np.testing.assert_allclose(stored, [[1.0, 3.0], [1 / np.sqrt(0.625)] * 2], rtol=1e-6)
    envs.close()


@pytest.mark.unit
def test_the_learner_stores_the_signs_of_rewards_then_scales_them():
    hp = registry.hparams.get("ppo_tiny")().replace(sign_rewards=True, reward_scale=0.5)
    envs = make_vec_env(hp.env, hp.num_envs)
    learner = Agent(hp, envs.single_observation_space, envs.single_action_space).learner
    zeros = np.zeros((2, 4), np.float32)
    for rewards in ([7.0, -0.25], [0.0, 4.0]):
        learner.observe(
            obs=zeros,
            actions=np.zeros(2, np.int64),
            rewards=np.array(rewards, np.float32),
            terminated=np.zeros(2, bool),
            truncated=np.zeros(2, bool),
            next_obs=zeros,
            log_prob=np.zeros(2, np.float32),
        )
    stored = learner.memory.data()["rewards"][:2]
    np.testing.assert_array_equal(stored, [[0.5, -0.5], [0.0, 0.5]])
    envs.close()


def _train(out, steps, *extra):
    return subprocess.run(
        [
            sys.executable,
            "train.py",
            "--hparams",
            "ppo_tiny",
            "--output_dir",
            str(out),
            "--train_steps",
            str(steps),
            "--hparam_override",
            "normalize_observations=true,normalize_rewards=true",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.process
@pytest.mark.parametrize(
    "first, then",
    [
        ((), ()),
        # Actor processes act with the statistics they receive with the weights; the
        # update split over two replicas assigns mirrored variables.
        (("--num_workers", "2"), ("--sys", "mirrored", "--cpu_replicas", "2")),
    ],
    ids=["local", "workers-then-mirrored"],
)
def test_statistics_survive_a_resume_and_travel_in_policy_artefacts(tmp_path, first, then):
    out = tmp_path / "run"
    started = _train(out, 128, *first)
    assert started.returncode == 0, started.stderr
    resumed = _train(out, 256, *then)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stderr
    run = Experiment(None, str(out), read_only=True, verbose=False)
    learner = run.learner
    # Every observation of the run counted once: restored, then continued.
    assert learner.observation_stats.stats.count == 256
    assert learner.return_scaler.stats.count == 256
    mean = learner.model.normalizer.mean.numpy()
    np.testing.assert_array_equal(mean, learner.observation_stats.stats.mean.astype(np.float32))
    artefact = os.path.join(out, "policies", f"ckpt-{max(policy_steps(str(out)))}")
    np.testing.assert_array_equal(read_artefact(artefact)["arrays"][0], mean)
    actor = load_policy(artefact)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    expected = learner.model.policy(tf.constant(obs)).mode().numpy()
    np.testing.assert_array_equal(actor.act(obs)[0], expected)
    run.close()
    assert "RL_RUN_DIR" not in os.environ  # a later run in this process starts clean


@pytest.mark.process
def test_normalising_image_observations_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "train.py",
            "--hparams",
            "ppo_tiny",
            "--env",
            "catch",
            "--hparam_override",
            "torso=nature_cnn,host_acting=false,normalize_observations=true",
            "--output_dir",
            str(tmp_path / "run"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if "normalize_observations" in line]
    assert lines and "mlp torso" in lines[0], done.stderr
    assert not (tmp_path / "run").exists()
