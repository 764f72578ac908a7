"""DQN's switches towards Rainbow: C51's projection and loss, importance weights,
dueling and noisy Q-networks, prioritised replay in the learner; hand-computed."""

import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.agents.base import Agent, act_and_observe
from rl.algos.grad_comp.dqn import categorical_projection, categorical_td_loss
from rl.envs import make_vec_env
from rl.hparams.base import HParamsError, from_dict
from rl.hparams.resolve import validate_hparams
from rl.memory.replay import importance_weights
from rl.models.networks import NoisyDense, QNetwork

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {"eager": lambda f: f, "tf.function": tf.function}
SUPPORT = tf.constant([0.0, 1.0, 2.0])


@pytest.mark.unit
@pytest.mark.parametrize("mode", MODES)
def test_categorical_projection_splits_each_atom_between_its_neighbours(mode):
    landed = tf.constant([[0.5, 1.0, 3.0], [-1.0, 1.25, 1.75]])
    probs = tf.constant([[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]])
    projected = MODES[mode](categorical_projection)(landed, probs, SUPPORT)
    # 0.5 -> half to 0, half to 1; 1.0 -> all to 1; 3.0 clipped to 2. Row 2: -1 clipped
    # to 0; 1.25 -> 3/4 to 1, 1/4 to 2; 1.75 -> 1/4 to 1, 3/4 to 2.
    np.testing.assert_allclose(projected, [[0.1, 0.4, 0.5], [0.5, 0.25, 0.25]], atol=1e-6)


def logits_of(*rows):
    return tf.math.log(tf.constant(rows, tf.float32))


@pytest.mark.unit
@pytest.mark.parametrize("mode", MODES)
def test_c51_loss_is_the_cross_entropy_to_the_projected_target(mode):
    logits_tm1 = tf.zeros([1, 2, 3])  # uniform: Q(s, .) = 1
    # Action 0 uniform (mean 1), action 1 [0.1, 0.1, 0.8] (mean 1.7): a* = 1.
    logits_t = logits_of([[1 / 3, 1 / 3, 1 / 3], [0.1, 0.1, 0.8]])
    loss, extras = MODES[mode](categorical_td_loss)(
        logits_tm1, tf.constant([1]), tf.constant([0.5]), tf.constant([0.5]), logits_t, SUPPORT
    )
    # r + 0.5 z = [0.5, 1.0, 1.5]: 0.1 -> 0.05/0.05, 0.1 -> z1, 0.8 -> 0.4/0.4.
    # Projected [0.05, 0.55, 0.4]; against a uniform prediction the loss is log 3.
    np.testing.assert_allclose(loss, [np.log(3.0)], rtol=1e-6)
    np.testing.assert_allclose(extras["q_taken"], [1.0], rtol=1e-6)
    np.testing.assert_allclose(extras["target"], [0.55 + 0.8], rtol=1e-6)
    np.testing.assert_allclose(extras["td_error"], [0.35], rtol=1e-5)


@pytest.mark.unit
def test_c51_double_q_takes_the_selectors_action():
    logits_t = logits_of([[1 / 3, 1 / 3, 1 / 3], [0.1, 0.1, 0.8]])
    _, extras = categorical_td_loss(
        tf.zeros([1, 2, 3]),
        tf.constant([0]),
        tf.constant([0.5]),
        tf.constant([0.5]),
        logits_t,
        SUPPORT,
        q_t_selector=tf.constant([[1.0, 0.0]]),  # the online net prefers action 0
    )
    # Uniform on [0.5, 1, 1.5] -> [1/6, 2/3, 1/6]: mean 1.
    np.testing.assert_allclose(extras["target"], [1.0], rtol=1e-6)


@pytest.mark.unit
def test_c51_gradient_flows_only_through_the_predicted_logits():
    logits_tm1 = tf.Variable(tf.zeros([1, 2, 3]))
    logits_t = tf.Variable(tf.zeros([1, 2, 3]))
    with tf.GradientTape(persistent=True) as tape:
        loss, _ = categorical_td_loss(
            logits_tm1, tf.constant([1]), tf.constant([0.5]), tf.constant([0.5]), logits_t, SUPPORT
        )
    assert tape.gradient(loss, logits_t) is None
    grad = tape.gradient(loss, logits_tm1).numpy()
    assert np.all(grad[0, 0] == 0) and np.any(grad[0, 1] != 0)  # only the action taken


@pytest.mark.unit
def test_importance_weights_by_hand():
    probabilities = np.array([[0.1, 0.2, 0.4]])
    np.testing.assert_allclose(importance_weights(probabilities, 10, 1.0), [[1, 0.5, 0.25]])
    np.testing.assert_allclose(
        importance_weights(probabilities, 10, 0.5), [[1, 2**-0.5, 0.5]], rtol=1e-6
    )
    np.testing.assert_array_equal(importance_weights(probabilities, 10, 0.0), [[1, 1, 1]])
    # Each batch of a burst [G, B] is normalised by its own largest weight.
    burst = importance_weights(np.array([[0.1, 0.2], [0.4, 0.4]]), 10, 1.0)
    np.testing.assert_allclose(burst, [[1, 0.5], [1, 1]])


@pytest.mark.unit
def test_noisy_dense_is_factorised_gaussian_noise_around_its_means():
    layer = NoisyDense(3, 2, sigma0=0.5, seed=1, name="noisy")
    x = tf.constant([[1.0, -2.0, 0.5]])
    seed = tf.constant([3, 4])
    seed_in, seed_out = tf.unstack(tf.random.experimental.stateless_split(seed, 2))

    def scaled(size, s):
        e = tf.random.stateless_normal([size], s)
        return tf.sign(e) * tf.sqrt(tf.abs(e))

    e_in, e_out = scaled(3, seed_in), scaled(2, seed_out)
    w = layer.w_mu + layer.w_sigma * e_in[:, None] * e_out[None, :]
    expected = x @ w + layer.b_mu + layer.b_sigma * e_out
    np.testing.assert_allclose(layer(x, seed), expected, rtol=1e-5)
    np.testing.assert_allclose(layer(x, seed), layer(x, seed))  # a seed is one draw
    assert not np.allclose(layer(x, seed), layer(x, tf.constant([5, 6])))
    np.testing.assert_allclose(layer.w_sigma, np.full([3, 2], 0.5 / np.sqrt(3)), rtol=1e-6)
    # Acting reads w, b: a draw set by resample, not trained.
    layer.resample(seed)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5)
    assert [v.name for v in layer.trainable_variables] == sorted(
        ["b_mu:0", "b_sigma:0", "w_mu:0", "w_sigma:0"]
    )
    with tf.GradientTape() as tape:
        out = tf.reduce_sum(layer(x, seed))
    assert np.any(tape.gradient(out, layer.w_sigma).numpy() != 0)


def q_settings(**changes):
    return registry.hparams.get("dqn_tiny")().replace(**changes)


@pytest.mark.unit
@pytest.mark.parametrize(
    "switches",
    [
        {"dueling": True},
        {"num_atoms": 5, "v_min": -1.0, "v_max": 3.0},
        {"dueling": True, "noisy": True, "num_atoms": 5},
    ],
)
def test_q_network_heads_act_the_same_on_the_host_and_in_the_graph(switches):
    obs_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    net = QNetwork(q_settings(**switches), obs_space, gym.spaces.Discrete(3), seed=0)
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    graph = net.policy(tf.constant(obs)).numpy()
    host = net.host_network()(obs, [v.numpy() for v in net.acting_variables()])
    np.testing.assert_allclose(host, graph, rtol=1e-5, atol=1e-5)
    assert graph.shape == (6, 3)


@pytest.mark.unit
def test_dueling_q_is_value_plus_advantage_minus_its_mean():
    net = QNetwork(
        q_settings(dueling=True), gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(3), 0
    )
    obs = tf.constant(np.random.default_rng(1).normal(size=(2, 4)), tf.float32)
    raw = net.q(obs).numpy()  # [value, a0, a1, a2]
    value, advantages = raw[:, :1], raw[:, 1:]
    expected = value + advantages - advantages.mean(1, keepdims=True)
    np.testing.assert_allclose(net(obs), expected, rtol=1e-6)


@pytest.mark.unit
def test_c51_q_values_are_the_means_of_the_atom_distributions():
    net = QNetwork(
        q_settings(num_atoms=3, v_min=0.0, v_max=2.0),
        gym.spaces.Box(-1, 1, (4,), np.float32),
        gym.spaces.Discrete(2),
        0,
    )
    obs = tf.constant(np.random.default_rng(2).normal(size=(2, 4)), tf.float32)
    probs = tf.nn.softmax(tf.reshape(net.q(obs), [2, 2, 3])).numpy()
    np.testing.assert_allclose(net(obs), probs @ np.array([0.0, 1.0, 2.0]), rtol=1e-6)


@pytest.mark.unit
def test_the_loss_follows_from_the_head():
    assert q_settings().grad_comp == "dqn_td"
    assert q_settings(num_atoms=51).grad_comp == "categorical_td"
    assert q_settings(num_atoms=51).replace(num_atoms=1).grad_comp == "dqn_td"
    assert registry.hparams.get("qrdqn_tiny")().grad_comp == "quantile_td"


@pytest.mark.unit
def test_the_loss_cannot_be_set_apart_from_the_head():
    with pytest.raises(HParamsError, match="'grad_comp' follows from the other fields"):
        q_settings(grad_comp="categorical_td")
    assert q_settings(grad_comp="dqn_td") == q_settings()  # what it is anyway
    assert q_settings(num_atoms=5, grad_comp="categorical_td").num_atoms == 5
    saved = q_settings().to_dict()
    assert "grad_comp" not in saved  # derived: not written to hparams.json
    # An older hparams.json names it: read when it agrees, refused when it does not.
    hp_class = type(q_settings())
    assert from_dict(hp_class, {**saved, "grad_comp": "dqn_td"}) == q_settings()
    with pytest.raises(HParamsError, match="'dqn_td' here"):
        from_dict(hp_class, {**saved, "grad_comp": "categorical_td"})


@pytest.mark.unit
@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_atoms": 51, "v_min": 5.0, "v_max": 5.0}, "v_min (5.0) must be below v_max (5.0)"),
        ({"num_quantiles": 8}, "hparam 'num_quantiles' must be in [1, 1]"),
    ],
)
def test_switches_that_disagree_are_refused(changes, message):
    with pytest.raises(HParamsError, match=re.escape(message)):
        validate_hparams(q_settings(**changes))


@pytest.mark.process
def test_train_py_refuses_setting_the_loss_with_one_line_and_exit_2(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "train.py", "--hparams", "dqn_tiny", "--output_dir", str(out)]
        + ["--hparam_override", "grad_comp=categorical_td"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'grad_comp' follows from the other fields" in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.slow
def test_prioritised_updates_weight_the_loss_and_rewrite_the_sampled_priorities():
    hp = registry.hparams.get("rainbow_tiny")().replace(
        learning_starts=0, train_interval=2, gradient_steps=3, batch_size=8
    )
    envs = make_vec_env(hp.env, hp.num_envs)
    agent = Agent(hp, envs.single_observation_space, envs.single_action_space)
    learner = agent.learner
    assert learner.memory.prioritized and learner.memory.replay.priority_exponent == 0.5
    obs, _ = envs.reset(seed=0)
    for _ in range(20):
        obs = act_and_observe(agent.actor, learner, envs, obs, agent.env_steps)[0]
    tree = learner.memory.replay.tree
    before = tree.get(np.arange(learner.memory.replay.num_envs * learner.memory.replay.ring)).copy()
    assert set(np.unique(before)) <= {0.0, 1.0}  # new transitions enter at the max priority
    metrics = learner.update()
    assert metrics is not None and 0.4 < metrics["importance_exponent"] < 1.0
    after = tree.get(np.arange(len(before)))
    changed = np.flatnonzero(after != before)
    assert 0 < len(changed) <= 3 * 8  # exactly the drawn transitions got new priorities
    assert np.all(after[changed] > 0)
    envs.close()
