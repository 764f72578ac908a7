"""SAC, TD3 and DDPG: losses on hand-computed values (eagerly and compiled), the policies'
NumPy and TensorFlow forms agreeing, and the uniform-or-sample act_select."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.algos.act_select.rules import uniform_or_sample_graph, uniform_or_sample_host
from rl.algos.grad_comp.actor_critic_q import (
    clipped_double_q_target,
    critic_loss,
    deterministic_actor_loss,
    sac_actor_loss,
    sac_temperature_loss,
)

pytestmark = pytest.mark.unit

MODES = {"eager": lambda f: f, "tf.function": tf.function}
REWARDS = tf.constant([1.0, -1.0])
DISCOUNTS = tf.constant([0.9, 0.0])  # the second episode terminated
NEXT_Q = tf.constant([[2.0, 7.0], [4.0, 3.0]])  # [C=2, B=2]


@pytest.mark.parametrize("mode", MODES)
def test_td3_target_takes_the_smaller_critic(mode):
    # min over critics: [2, 3]; 1 + .9 * 2 = 2.8; -1 + 0 * 3 = -1
    y = MODES[mode](clipped_double_q_target)(REWARDS, DISCOUNTS, NEXT_Q)
    np.testing.assert_allclose(y.numpy(), [2.8, -1.0], rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_sac_target_subtracts_the_entropy_term(mode):
    # soft value: min Q - alpha * log pi = [2 - .5 * -1, 3 - .5 * 2] = [2.5, 2]
    # y = [1 + .9 * 2.5, -1 + 0] = [3.25, -1]
    y = MODES[mode](clipped_double_q_target)(
        REWARDS, DISCOUNTS, NEXT_Q, tf.constant([-1.0, 2.0]), tf.constant(0.5)
    )
    np.testing.assert_allclose(y.numpy(), [3.25, -1.0], rtol=1e-6)


def test_ddpg_target_with_one_critic():
    y = clipped_double_q_target(REWARDS, DISCOUNTS, tf.constant([[2.0, 7.0]]))
    np.testing.assert_allclose(y.numpy(), [2.8, -1.0], rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_critic_loss_sums_each_critics_squared_error(mode):
    q = tf.constant([[3.0, 0.0], [2.0, -2.0]])  # [C, B]
    y = tf.constant([2.0, -1.0])
    # example 0: .5 * ((3-2)^2 + (2-2)^2) = .5; example 1: .5 * (1 + 1) = 1
    loss, extras = MODES[mode](critic_loss)(q, y)
    np.testing.assert_allclose(loss.numpy(), [0.5, 1.0])
    np.testing.assert_allclose(extras["q_mean"].numpy(), [2.5, -1.0])
    np.testing.assert_allclose(extras["td_error"].numpy(), [-1.0, -1.0])  # y - Q_1


def test_critic_gradient_does_not_reach_the_target():
    q = tf.Variable([[3.0], [1.0]])
    y = tf.Variable([2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(critic_loss(q, y)[0])
    grad_q, grad_y = tape.gradient(loss, [q, y])
    assert grad_y is None
    np.testing.assert_allclose(grad_q.numpy(), [[1.0], [-1.0]])  # Q_c - y


@pytest.mark.parametrize("mode", MODES)
def test_sac_actor_loss(mode):
    # alpha * log pi - min_c Q: [.2 * -1 - 1, .2 * .5 - (-2)] = [-1.2, 2.1]
    loss, extras = MODES[mode](sac_actor_loss)(
        tf.constant([-1.0, 0.5]), tf.constant([[1.0, -2.0], [4.0, 0.0]]), tf.constant(0.2)
    )
    np.testing.assert_allclose(loss.numpy(), [-1.2, 2.1], rtol=1e-6)
    np.testing.assert_allclose(extras["entropy"].numpy(), [1.0, -0.5])


def test_temperature_rises_when_entropy_is_below_the_target():
    log_alpha = tf.Variable(0.0)
    # entropy -log pi = -1 per example, target -(-2)... target_entropy = 0: below the target.
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(sac_temperature_loss(log_alpha, tf.constant([1.0, 1.0]), 0.0)[0])
    # d/dlog_alpha of -log_alpha * (1 + 0) = -1: a gradient step raises log alpha.
    np.testing.assert_allclose(tape.gradient(loss, log_alpha).numpy(), -1.0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(sac_temperature_loss(log_alpha, tf.constant([-3.0, -3.0]), 1.0)[0])
    np.testing.assert_allclose(tape.gradient(loss, log_alpha).numpy(), 2.0)  # lowers it


def test_deterministic_actor_loss_is_minus_q():
    loss, _ = deterministic_actor_loss(tf.constant([1.5, -2.0]))
    np.testing.assert_allclose(loss.numpy(), [-1.5, 2.0])


def test_losses_reject_disagreeing_shapes():
    with pytest.raises(ValueError, match="next_q"):
        clipped_double_q_target(REWARDS, DISCOUNTS, tf.zeros([2, 3]))
    with pytest.raises(ValueError, match="targets"):
        critic_loss(tf.zeros([2, 3]), tf.zeros([2, 1]))


BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
OBS = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)


def build(name, **changes):
    hp = registry.hparams.get(name)().replace(hidden_sizes=(8,), **changes)
    return registry.models.get(hp.model)(hp, OBS, BOX, seed=0)


@pytest.mark.parametrize("hparams", ["sac_tiny", "td3_tiny"])
def test_host_policy_matches_tensorflow(hparams):
    model = build(hparams)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    arrays = [v.numpy() for v in model.acting_variables()]
    host = model.host_network()(obs, arrays)
    policy = model.policy(tf.constant(obs))
    np.testing.assert_allclose(host.mode(), model.head.mode(policy).numpy(), atol=1e-5)
    actions = host.sample(np.random.default_rng(1))
    np.testing.assert_allclose(
        host.log_prob(actions),
        model.head.log_prob(policy, tf.constant(actions)).numpy(),
        rtol=1e-4,
        atol=1e-4,
    )


def test_td3_mode_is_mu_within_the_bounds_and_noise_is_the_set_fraction():
    model = build("td3_tiny", exploration_noise=0.1)
    mu = model.action(tf.random.normal([64, 3])).numpy()
    assert np.all(mu >= BOX.low) and np.all(mu <= BOX.high)
    # the half-ranges are 2 and 0.5: stds 0.2 and 0.05
    np.testing.assert_allclose(np.exp(model.log_std.numpy()), [0.2, 0.05], rtol=1e-6)
    assert all(v is not model.log_std for v in model.trainable_variables)  # not trained


def test_sac_reparameterised_log_prob_matches_the_distribution():
    model = build("sac_tiny")
    obs = tf.random.normal([6, 3], seed=1)
    actions, log_probs = model.sample_with_log_prob(obs, tf.random.normal([6, 2], seed=2))
    assert np.all(actions.numpy() >= BOX.low) and np.all(actions.numpy() <= BOX.high)
    expected = model.head.log_prob(model.policy(obs), actions)
    np.testing.assert_allclose(log_probs.numpy(), expected.numpy(), rtol=1e-3, atol=1e-3)


def test_sac_policy_gradient_reaches_the_policy_through_the_action():
    model = build("sac_tiny")
    obs = tf.random.normal([4, 3], seed=3)
    with tf.GradientTape() as tape:
        actions, log_probs = model.sample_with_log_prob(obs, tf.random.normal([4, 2], seed=4))
        loss = tf.reduce_mean(sac_actor_loss(log_probs, model.critics(obs, actions), 0.1)[0])
    grads = tape.gradient(loss, model.policy_variables())
    assert all(g is not None and np.any(g.numpy() != 0) for g in grads)


def test_models_refuse_an_unbounded_or_discrete_action_space():
    hp = registry.hparams.get("sac_tiny")()
    for space in (gym.spaces.Discrete(3), gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)):
        with pytest.raises(ValueError, match="needs a Box action space with finite bounds"):
            registry.models.get(hp.model)(hp, OBS, space, seed=0)


@pytest.mark.parametrize("epsilon", [0.0, 1.0])
def test_uniform_or_sample_host_and_graph_agree_on_what_they_do(epsilon):
    model = build("sac_tiny")
    obs = np.zeros((4000, 3), np.float32)
    arrays = [v.numpy() for v in model.acting_variables()]
    host = uniform_or_sample_host(
        model.host_network()(obs, arrays), np.random.default_rng(0), epsilon
    )
    graph = uniform_or_sample_graph(
        model.policy(tf.constant(obs)), model.head, tf.constant([1, 2]), epsilon
    ).numpy()
    for actions in (host, graph):
        assert actions.shape == (4000, 2) and actions.dtype == np.float32
        assert np.all(actions >= BOX.low) and np.all(actions <= BOX.high)
        if epsilon == 1.0:  # uniform over [-2, 2] x [0, 1]: means 0 and .5
            np.testing.assert_allclose(actions.mean(axis=0), [0.0, 0.5], atol=0.05)
    if epsilon == 0.0:  # samples around the policy's (shared) mode
        mode = model.head.mode(model.policy(tf.constant(obs[:1]))).numpy()[0]
        np.testing.assert_allclose(np.median(host, axis=0), np.median(graph, axis=0), atol=0.15)
        np.testing.assert_allclose(np.median(host, axis=0), mode, atol=0.12)


def test_ornstein_uhlenbeck_noise_by_hand_and_restarts_per_env_copy():
    from rl.algos.noise import OrnsteinUhlenbeckNoise

    noise = OrnsteinUhlenbeckNoise(theta=0.5, sigma=2.0, dt=0.25)
    draws = np.random.default_rng(7).standard_normal((3, 2, 1))
    rng = np.random.default_rng(7)
    x1 = noise(rng, (2, 1))
    np.testing.assert_allclose(x1, 2.0 * 0.5 * draws[0], rtol=1e-6)  # sigma sqrt(dt) z
    x2 = noise(rng, (2, 1))
    np.testing.assert_allclose(x2, x1 - 0.5 * x1 * 0.25 + 1.0 * draws[1], rtol=1e-5)
    noise.reset(np.array([True, False]))  # copy 0's episode ended
    x3 = noise(rng, (2, 1))
    np.testing.assert_allclose(x3[0], 1.0 * draws[2, 0], rtol=1e-5)
    np.testing.assert_allclose(x3[1], x2[1] - 0.5 * x2[1] * 0.25 + draws[2, 1], rtol=1e-5)


def test_ddpg_with_ornstein_uhlenbeck_noise_acts_mu_plus_the_scaled_process():
    from rl.agents.base import Agent
    from rl.envs import make_vec_env

    hp = registry.hparams.get("ddpg_tiny")().replace(
        noise_process="ornstein_uhlenbeck", exploration_noise=0.3, learning_starts=0
    )
    envs = make_vec_env(hp.env, 2)
    agent = Agent(hp, envs.single_observation_space, envs.single_action_space)
    actor = agent.actor
    obs, _ = envs.reset(seed=0)
    mu = agent.model.action(tf.constant(obs)).numpy()
    state_rng = np.random.default_rng(0)
    state_rng.bit_generator.state = actor.rng.bit_generator.state
    actions, _ = actor.act(obs, step=10)
    # The act_select's own draws come first (its Gaussian has std ~0), then the process.
    policy = actor.host_policy(obs, actor._arrays)
    sampled = registry.act_select.get(hp.act_select).host(policy, state_rng, 0.0)
    np.testing.assert_allclose(sampled, mu, atol=1e-5)
    process = 0.3 * np.sqrt(1e-2) * state_rng.standard_normal(mu.shape)
    np.testing.assert_allclose(actions, np.clip(mu + process * 2.0, -2, 2), atol=1e-5)
    envs.close()
