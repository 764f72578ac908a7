"""Losses and GAE against values computed by hand, eagerly and compiled."""

import numpy as np
import pytest
import tensorflow as tf

from rl.algos.grad_comp.dqn import dqn_td_loss, huber
from rl.algos.grad_comp.gae import gae_advantages
from rl.algos.grad_comp.ppo import ppo_clip_loss

MODES = {"eager": lambda f: f, "tf.function": tf.function}


def rows(*values):
    return tf.constant([values], tf.float32)


@pytest.mark.parametrize("mode", MODES)
def test_gae_terminal_step_is_not_bootstrapped(mode):
    # gamma 0.9, lambda 0.8; the episode terminates at t=2.
    # deltas: 1 + .9*1 - .5 = 1.4, 2 + .9*1.5 - 1 = 2.35, 3 + 0 - 1.5 = 1.5
    # A_2 = 1.5, A_1 = 2.35 + .72*1.5 = 3.43, A_0 = 1.4 + .72*3.43 = 3.8696
    gae = MODES[mode](lambda *a: gae_advantages(*a, gamma=0.9, lam=0.8))
    adv, ret = gae(
        rows(1, 2, 3),
        rows(0.5, 1.0, 1.5),
        rows(1.0, 1.5, 2.0),
        tf.constant([[False, False, True]]),
        tf.constant([[False, False, False]]),
    )
    np.testing.assert_allclose(adv.numpy(), [[3.8696, 3.43, 1.5]], rtol=1e-5)
    np.testing.assert_allclose(ret.numpy(), [[4.3696, 4.43, 3.0]], rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_gae_truncated_step_bootstraps_and_cuts_the_chain(mode):
    # Truncated at t=1: delta_1 bootstraps from V(final obs) = 1.5 but A_1
    # does not chain into the next episode's A_2.
    # A_2 = 3 + .9*2 - 1.5 = 3.3, A_1 = 2 + .9*1.5 - 1 = 2.35,
    # A_0 = 1.4 + .72*2.35 = 3.092
    gae = MODES[mode](lambda *a: gae_advantages(*a, gamma=0.9, lam=0.8))
    adv, _ = gae(
        rows(1, 2, 3),
        rows(0.5, 1.0, 1.5),
        rows(1.0, 1.5, 2.0),
        tf.constant([[False, False, False]]),
        tf.constant([[False, True, False]]),
    )
    np.testing.assert_allclose(adv.numpy(), [[3.092, 2.35, 3.3]], rtol=1e-5)


def test_gae_batch_rows_are_independent():
    rewards = tf.constant([[1.0, 0.0], [0.0, 1.0]])
    zeros = tf.zeros([2, 2])
    no = tf.zeros([2, 2], tf.bool)
    adv, _ = gae_advantages(rewards, zeros, zeros, no, no, gamma=0.5, lam=1.0)
    np.testing.assert_allclose(adv.numpy(), [[1.0, 0.0], [0.5, 1.0]])


def test_gae_rejects_wrong_rank():
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        gae_advantages(
            tf.zeros([3]),
            tf.zeros([3]),
            tf.zeros([3]),
            tf.zeros([3], tf.bool),
            tf.zeros([3], tf.bool),
            0.9,
            0.9,
        )


@pytest.mark.parametrize("mode", MODES)
def test_ppo_clip_loss_positive_advantages(mode):
    loss_fn = MODES[mode](
        lambda lp: ppo_clip_loss(
            log_probs=lp,
            old_log_probs=tf.zeros([2]),
            advantages=tf.ones([2]),
            values=tf.constant([1.0, 2.0]),
            returns=tf.constant([2.0, 2.0]),
            entropy=tf.constant([0.5, 0.7]),
            clip_ratio=0.2,
            value_coef=0.5,
            entropy_coef=0.01,
        )
    )
    # ratios 1.5 and 0.5: min(1.5, 1.2) = 1.2, min(0.5, 0.8) = 0.5
    loss, extras = loss_fn(tf.math.log([1.5, 0.5]))
    assert extras["policy_loss"].numpy() == pytest.approx(-0.85, abs=1e-6)
    assert extras["value_loss"].numpy() == pytest.approx(0.25, abs=1e-6)
    assert extras["entropy"].numpy() == pytest.approx(0.6, abs=1e-6)
    assert loss.numpy() == pytest.approx(-0.85 + 0.125 - 0.006, abs=1e-6)
    kl = ((0.5 - np.log(1.5)) + (-0.5 - np.log(0.5))) / 2
    assert extras["approx_kl"].numpy() == pytest.approx(kl, abs=1e-6)
    assert extras["clip_fraction"].numpy() == pytest.approx(1.0)


def test_ppo_clip_loss_negative_advantages_take_the_pessimistic_side():
    # A = -1: min(-1.5, -1.2) = -1.5, min(-0.5, -0.8) = -0.8 -> loss 1.15
    loss, extras = ppo_clip_loss(
        tf.math.log([1.5, 0.5]),
        tf.zeros([2]),
        -tf.ones([2]),
        tf.zeros([2]),
        tf.zeros([2]),
        tf.zeros([2]),
        clip_ratio=0.2,
        value_coef=0.0,
        entropy_coef=0.0,
    )
    assert extras["policy_loss"].numpy() == pytest.approx(1.15, abs=1e-6)
    assert loss.numpy() == pytest.approx(1.15, abs=1e-6)


def test_ppo_value_clip_takes_the_larger_error():
    # old V 0, new V 2, target 3, clip 0.5: max((2-3)^2, (0.5-3)^2) = 6.25
    _, extras = ppo_clip_loss(
        tf.zeros([1]),
        tf.zeros([1]),
        tf.zeros([1]),
        tf.constant([2.0]),
        tf.constant([3.0]),
        tf.zeros([1]),
        0.2,
        1.0,
        0.0,
        old_values=tf.zeros([1]),
        value_clip=0.5,
    )
    assert extras["value_loss"].numpy() == pytest.approx(0.5 * 6.25)


Q_TM1 = tf.constant([[1.0, 2.0], [3.0, 4.0]])
ACTIONS = tf.constant([0, 1])
REWARDS = tf.constant([1.0, 1.0])
DISCOUNTS = tf.constant([0.9, 0.0])  # the second transition terminated
Q_T_TARGET = tf.constant([[2.0, 5.0], [1.0, 1.0]])
Q_T_ONLINE = tf.constant([[3.0, 1.0], [0.0, 0.0]])


@pytest.mark.parametrize("mode", MODES)
def test_dqn_td_loss(mode):
    # targets 1 + .9*5 = 5.5 and 1 + 0; TD errors 4.5 and -3;
    # Huber(4.5) = 4.0, Huber(3) = 2.5
    loss, extras = MODES[mode](dqn_td_loss)(Q_TM1, ACTIONS, REWARDS, DISCOUNTS, Q_T_TARGET)
    np.testing.assert_allclose(extras["td_error"].numpy(), [4.5, -3.0])
    assert loss.numpy() == pytest.approx(3.25)


@pytest.mark.parametrize("mode", MODES)
def test_double_dqn_selects_with_online_evaluates_with_target(mode):
    # online argmax at s' is action 0 -> target Q 2: 1 + .9*2 = 2.8
    loss, extras = MODES[mode](dqn_td_loss)(
        Q_TM1, ACTIONS, REWARDS, DISCOUNTS, Q_T_TARGET, Q_T_ONLINE
    )
    np.testing.assert_allclose(extras["td_error"].numpy(), [1.8, -3.0], rtol=1e-6)
    assert loss.numpy() == pytest.approx((1.3 + 2.5) / 2)


def test_dqn_loss_gradient_flows_only_through_q_tm1():
    q_tm1 = tf.Variable(Q_TM1)
    q_t = tf.Variable(Q_T_TARGET)
    with tf.GradientTape() as tape:
        loss, _ = dqn_td_loss(q_tm1, ACTIONS, REWARDS, DISCOUNTS, q_t)
    grad_q_tm1, grad_q_t = tape.gradient(loss, [q_tm1, q_t])
    assert grad_q_t is None
    # d/dq Huber: clipped TD error, averaged: -(1)/2 and -(-1)/2
    np.testing.assert_allclose(grad_q_tm1.numpy(), [[-0.5, 0.0], [0.0, 0.5]])


def test_huber():
    np.testing.assert_allclose(huber(tf.constant([0.5, -2.0]), 1.0).numpy(), [0.125, 1.5])


def test_categorical_log_prob_and_entropy_match_tfp_and_hand_values():
    import tensorflow_probability as tfp

    from rl.algos.grad_comp.ppo import categorical_log_prob_and_entropy

    # softmax([0, log 3]) = [1/4, 3/4]: log p(1) = log 3/4, H = -(1/4 log 1/4 + 3/4 log 3/4).
    logits = tf.constant([[0.0, np.log(3.0)], [2.0, -1.0]], tf.float32)
    actions = tf.constant([1, 0])
    log_probs, entropy = categorical_log_prob_and_entropy(logits, actions)
    np.testing.assert_allclose(log_probs[0], np.log(0.75), rtol=1e-6)
    np.testing.assert_allclose(entropy[0], -(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), rtol=1e-6)
    wide = tf.random.stateless_normal([64, 5], seed=[1, 2], stddev=4.0)
    picks = tf.random.stateless_uniform([64], seed=[3, 4], maxval=5, dtype=tf.int32)
    reference = tfp.distributions.Categorical(logits=wide)
    ours = categorical_log_prob_and_entropy(wide, picks)
    np.testing.assert_allclose(ours[0], reference.log_prob(picks), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[1], reference.entropy(), rtol=1e-5, atol=1e-6)
