"""QR-DQN: the quantile Huber loss against values computed by hand, eagerly and
compiled; the quantile head."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.algos.grad_comp.quantile import quantile_huber_loss, quantile_midpoints, quantile_td_loss
from rl.models.networks import QNetwork

pytestmark = pytest.mark.unit

MODES = {"eager": lambda f: f, "tf.function": tf.function}

# Two examples of N = 2 quantiles, for fractions tau = (0.25, 0.75), against M = 2
# target samples each.
QUANTILES = tf.constant([[0.0, 2.0], [0.0, 0.0]])
TARGETS = tf.constant([[1.0, 3.0], [0.5, -0.5]])


def test_quantile_midpoints_are_the_middles_of_equal_slices():
    np.testing.assert_allclose(quantile_midpoints(2).numpy(), [0.25, 0.75])
    np.testing.assert_allclose(quantile_midpoints(4).numpy(), [0.125, 0.375, 0.625, 0.875])


@pytest.mark.parametrize("mode", MODES)
def test_kappa_0_is_quantile_regression(mode):
    # rho_tau(u) = |tau - 1{u < 0}| |u|, u_ij = target_j - quantile_i; mean over j,
    # sum over i.
    # Example 0: i=0 (tau .25): u = 1, 3 (both >= 0): .25 * (1 + 3) / 2 = .5
    #            i=1 (tau .75): u = -1, 1: (.25 * 1 + .75 * 1) / 2 = .5   -> 1.0
    # Example 1: i=0: u = .5, -.5: (.25 * .5 + .75 * .5) / 2 = .25
    #            i=1: (.75 * .5 + .25 * .5) / 2 = .25                      -> 0.5
    loss = MODES[mode](lambda q, t: quantile_huber_loss(q, t, kappa=0.0))(QUANTILES, TARGETS)
    np.testing.assert_allclose(loss.numpy(), [1.0, 0.5], rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_kappa_1_weighs_the_huber_loss(mode):
    # |tau - 1{u < 0}| * Huber_1(u) / 1; Huber_1(1) = .5, Huber_1(3) = 2.5, Huber_1(.5) = .125
    # Example 0: i=0: .25 * (.5 + 2.5) / 2 = .375; i=1: (.25 * .5 + .75 * .5) / 2 = .25
    # Example 1: i=0: (.25 * .125 + .75 * .125) / 2 = .0625; i=1: the same  -> .125
    loss = MODES[mode](lambda q, t: quantile_huber_loss(q, t, kappa=1.0))(QUANTILES, TARGETS)
    np.testing.assert_allclose(loss.numpy(), [0.625, 0.125], rtol=1e-6)


def test_kappa_2_divides_the_huber_loss_by_kappa():
    # Huber_2(1) = .5, Huber_2(3) = 2 * (3 - 1) = 4; divided by 2: .25 and 2.
    # Example 0: i=0: .25 * (.25 + 2) / 2 = .28125; i=1: (.25 * .25 + .75 * .25) / 2 = .125
    loss = quantile_huber_loss(QUANTILES[:1], TARGETS[:1], kappa=2.0)
    np.testing.assert_allclose(loss.numpy(), [0.40625], rtol=1e-6)


def test_gradient_is_the_quantile_regression_step_and_spares_the_targets():
    # d rho_tau(u) / d quantile = -(tau - 1{u < 0}), averaged over the targets:
    # i=0: u = 1, 3: -.25; i=1: u = -1, 1: (.25 - .75) / 2 = -.25
    quantiles = tf.Variable(QUANTILES[:1])
    targets = tf.Variable(TARGETS[:1])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(quantile_huber_loss(quantiles, targets, kappa=0.0))
    grad_quantiles, grad_targets = tape.gradient(loss, [quantiles, targets])
    assert grad_targets is None
    np.testing.assert_allclose(grad_quantiles.numpy(), [[-0.25, -0.25]])


# One example, A = 2 actions of N = 2 quantiles; action 0 taken, reward 1, discount .5.
QUANTILES_TM1 = tf.constant([[[0.0, 2.0], [5.0, 5.0]]])
QUANTILES_T_TARGET = tf.constant([[[0.0, 4.0], [1.0, 1.0]]])
ACTIONS = tf.constant([0])
REWARDS = tf.constant([1.0])
DISCOUNTS = tf.constant([0.5])


@pytest.mark.parametrize("mode", MODES)
def test_td_loss_bootstraps_from_the_target_action_with_the_highest_mean(mode):
    # Target means at s': 2 and 1 -> a* = 0; targets 1 + .5 * (0, 4) = (1, 3), against
    # Z(s, 0) = (0, 2): example 0 of test_kappa_1_weighs_the_huber_loss, .625.
    loss, extras = MODES[mode](quantile_td_loss)(
        QUANTILES_TM1, ACTIONS, REWARDS, DISCOUNTS, QUANTILES_T_TARGET
    )
    np.testing.assert_allclose(loss.numpy(), [0.625], rtol=1e-6)
    np.testing.assert_allclose(extras["q_taken"].numpy(), [1.0])
    np.testing.assert_allclose(extras["target"].numpy(), [2.0])
    np.testing.assert_allclose(extras["td_error"].numpy(), [1.0])


@pytest.mark.parametrize("mode", MODES)
def test_td_loss_double_q_selects_with_the_given_values(mode):
    # The online values at s' prefer action 1: targets 1 + .5 * (1, 1) = (1.5, 1.5).
    # i=0 (tau .25): u = 1.5: .25 * Huber_1(1.5) = .25 * 1 = .25
    # i=1 (tau .75): u = -.5: .25 * Huber_1(.5) = .25 * .125 = .03125   -> .28125
    loss, extras = MODES[mode](quantile_td_loss)(
        QUANTILES_TM1,
        ACTIONS,
        REWARDS,
        DISCOUNTS,
        QUANTILES_T_TARGET,
        q_t_selector=tf.constant([[0.0, 1.0]]),
    )
    np.testing.assert_allclose(loss.numpy(), [0.28125], rtol=1e-6)
    np.testing.assert_allclose(extras["target"].numpy(), [1.5])


def test_terminal_step_is_not_bootstrapped():
    # discount 0: every target sample is the reward 1; Z(s, 0) = (0, 2).
    # i=0: u = 1: .25 * .5 = .125; i=1: u = -1: .25 * .5 = .125 -> .25
    loss, extras = quantile_td_loss(
        QUANTILES_TM1, ACTIONS, REWARDS, tf.constant([0.0]), QUANTILES_T_TARGET
    )
    np.testing.assert_allclose(loss.numpy(), [0.25], rtol=1e-6)
    np.testing.assert_allclose(extras["target"].numpy(), [1.0])


def test_ranks_and_batch_sizes_are_checked():
    with pytest.raises(ValueError, match="quantiles must have rank 2"):
        quantile_huber_loss(QUANTILES_TM1, TARGETS)
    with pytest.raises(ValueError, match="batch sizes differ"):
        quantile_huber_loss(QUANTILES, TARGETS[:1])
    with pytest.raises(ValueError, match="kappa must be >= 0"):
        quantile_huber_loss(QUANTILES, TARGETS, kappa=-1.0)
    with pytest.raises(ValueError, match="quantiles_tm1 must have rank 3"):
        quantile_td_loss(QUANTILES, ACTIONS, REWARDS, DISCOUNTS, QUANTILES)
    with pytest.raises(ValueError, match="does not start with a_tm1"):
        quantile_td_loss(
            QUANTILES_TM1, tf.constant([0, 1]), tf.ones(2), tf.ones(2), QUANTILES_T_TARGET
        )


def quantile_network(**changes):
    settings = registry.hparams.get("qrdqn_tiny")().replace(num_quantiles=4, **changes)
    return QNetwork(settings, gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(3), 0)


@pytest.mark.parametrize("dueling", [False, True])
def test_q_values_are_the_means_of_the_quantiles_on_the_host_and_in_the_graph(dueling):
    net = quantile_network(dueling=dueling)
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    quantiles = net.logits(tf.constant(obs)).numpy()
    assert quantiles.shape == (6, 3, 4)
    graph = net.policy(tf.constant(obs)).numpy()
    np.testing.assert_allclose(graph, quantiles.mean(-1), rtol=1e-6)
    host = net.host_network()(obs, [v.numpy() for v in net.acting_variables()])
    np.testing.assert_allclose(host, graph, rtol=1e-5, atol=1e-5)
