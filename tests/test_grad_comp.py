"""Losses and GAE against values computed by hand, eagerly and compiled."""

import numpy as np
import pytest
import tensorflow as tf

from rl.algos.grad_comp.dqn import dqn_td_loss, huber
from rl.algos.grad_comp.gae import gae_advantages
from rl.algos.grad_comp.policy_gradient import policy_gradient_loss
from rl.algos.grad_comp.ppo import ppo_clip_loss

pytestmark = pytest.mark.unit

MODES = {"eager": lambda f: f, "tf.function": tf.function}


def column(*values):
    """One trajectory, time-major: [T, 1]."""
    return tf.constant([[v] for v in values], tf.float32)


def flags(*values):
    return tf.constant([[v] for v in values])


@pytest.mark.parametrize("mode", MODES)
def test_gae_terminal_step_is_not_bootstrapped(mode):
    # gamma 0.9, lambda 0.8; the episode terminates at t=2.
    # deltas: 1 + .9*1 - .5 = 1.4, 2 + .9*1.5 - 1 = 2.35, 3 + 0 - 1.5 = 1.5
    # A_2 = 1.5, A_1 = 2.35 + .72*1.5 = 3.43, A_0 = 1.4 + .72*3.43 = 3.8696
    gae = MODES[mode](lambda *a: gae_advantages(*a, gamma=0.9, lam=0.8))
    adv, ret = gae(
        column(1, 2, 3),
        column(0.5, 1.0, 1.5),
        column(1.0, 1.5, 2.0),
        flags(False, False, True),
        flags(False, False, False),
    )
    np.testing.assert_allclose(adv.numpy()[:, 0], [3.8696, 3.43, 1.5], rtol=1e-5)
    np.testing.assert_allclose(ret.numpy()[:, 0], [4.3696, 4.43, 3.0], rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_gae_truncated_step_bootstraps_and_cuts_the_chain(mode):
    # Truncated at t=1: delta_1 bootstraps from V(final obs) = 1.5 but A_1
    # does not chain into the next episode's A_2.
    # A_2 = 3 + .9*2 - 1.5 = 3.3, A_1 = 2 + .9*1.5 - 1 = 2.35,
    # A_0 = 1.4 + .72*2.35 = 3.092
    gae = MODES[mode](lambda *a: gae_advantages(*a, gamma=0.9, lam=0.8))
    adv, _ = gae(
        column(1, 2, 3),
        column(0.5, 1.0, 1.5),
        column(1.0, 1.5, 2.0),
        flags(False, False, False),
        flags(False, True, False),
    )
    np.testing.assert_allclose(adv.numpy()[:, 0], [3.092, 2.35, 3.3], rtol=1e-5)


def test_gae_envs_are_independent():
    # [T=2, B=2]: env 0 gets reward 1 at t=0, env 1 at t=1; gamma 0.5, lambda 1.
    rewards = tf.constant([[1.0, 0.0], [0.0, 1.0]])
    zeros = tf.zeros([2, 2])
    no = tf.zeros([2, 2], tf.bool)
    adv, _ = gae_advantages(rewards, zeros, zeros, no, no, gamma=0.5, lam=1.0)
    np.testing.assert_allclose(adv.numpy(), [[1.0, 0.5], [0.0, 1.0]])


def test_gae_rejects_wrong_rank_and_disagreeing_shapes():
    no = tf.zeros([3, 2], tf.bool)
    with pytest.raises(ValueError, match="gae: rewards must have rank 2"):
        gae_advantages(tf.zeros([3]), tf.zeros([3]), tf.zeros([3]), no, no, 0.9, 0.9)
    with pytest.raises(
        ValueError, match=r"gae: values has shape \(2, 3\) but rewards has \(3, 2\)"
    ):
        gae_advantages(tf.zeros([3, 2]), tf.zeros([2, 3]), tf.zeros([3, 2]), no, no, 0.9, 0.9)


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
    # Per example: policy -1.2 and -0.5; value 0.5 * (1, 0); entropy 0.5, 0.7.
    np.testing.assert_allclose(extras["policy_loss"].numpy(), [-1.2, -0.5], atol=1e-6)
    np.testing.assert_allclose(extras["value_loss"].numpy(), [0.5, 0.0], atol=1e-6)
    np.testing.assert_allclose(extras["entropy"].numpy(), [0.5, 0.7], atol=1e-6)
    np.testing.assert_allclose(loss.numpy(), [-1.2 + 0.25 - 0.005, -0.5 + 0.0 - 0.007], atol=1e-6)
    kl = [0.5 - np.log(1.5), -0.5 - np.log(0.5)]
    np.testing.assert_allclose(extras["approx_kl"].numpy(), kl, atol=1e-6)
    np.testing.assert_allclose(extras["clip_fraction"].numpy(), [1.0, 1.0])


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
    np.testing.assert_allclose(extras["policy_loss"].numpy(), [1.5, 0.8], atol=1e-6)
    assert float(tf.reduce_mean(loss)) == pytest.approx(1.15, abs=1e-6)


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
    np.testing.assert_allclose(extras["value_loss"].numpy(), [0.5 * 6.25])


def test_ppo_value_clip_without_old_values_is_a_clear_error():
    with pytest.raises(ValueError, match="value_clip needs old_values"):
        ppo_clip_loss(*[tf.zeros([1])] * 6, 0.2, 1.0, 0.0, value_clip=0.5)


def test_ppo_rejects_inputs_whose_shapes_disagree():
    # A [B, 1] value beside [B] returns would broadcast into a [B, B] loss.
    args = [tf.zeros([4])] * 6
    args[3] = tf.zeros([4, 1])
    with pytest.raises(ValueError, match="values must have rank 1"):
        ppo_clip_loss(*args, 0.2, 1.0, 0.0)
    args[3] = tf.zeros([3])
    with pytest.raises(ValueError, match=r"values has shape \(3,\) but log_probs has \(4,\)"):
        ppo_clip_loss(*args, 0.2, 1.0, 0.0)


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
    np.testing.assert_allclose(loss.numpy(), [4.0, 2.5])


@pytest.mark.parametrize("mode", MODES)
def test_double_dqn_selects_with_online_evaluates_with_target(mode):
    # online argmax at s' is action 0 -> target Q 2: 1 + .9*2 = 2.8
    loss, extras = MODES[mode](dqn_td_loss)(
        Q_TM1, ACTIONS, REWARDS, DISCOUNTS, Q_T_TARGET, Q_T_ONLINE
    )
    np.testing.assert_allclose(extras["td_error"].numpy(), [1.8, -3.0], rtol=1e-6)
    np.testing.assert_allclose(loss.numpy(), [1.3, 2.5], rtol=1e-6)


def test_dqn_rejects_actions_that_do_not_match_the_batch():
    with pytest.raises(ValueError, match=r"r_t has shape \(2,\) but a_tm1 has \(3,\)"):
        dqn_td_loss(Q_TM1, tf.constant([0, 1, 1]), REWARDS, DISCOUNTS, Q_T_TARGET)
    three_rows = tf.zeros([3, 2])
    with pytest.raises(ValueError, match="q_tm1 has shape \\(3, 2\\), which does not start"):
        dqn_td_loss(three_rows, ACTIONS, REWARDS, DISCOUNTS, three_rows)


def test_dqn_loss_gradient_flows_only_through_q_tm1():
    q_tm1 = tf.Variable(Q_TM1)
    q_t = tf.Variable(Q_T_TARGET)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(dqn_td_loss(q_tm1, ACTIONS, REWARDS, DISCOUNTS, q_t)[0])
    grad_q_tm1, grad_q_t = tape.gradient(loss, [q_tm1, q_t])
    assert grad_q_t is None
    # d/dq Huber: clipped TD error, averaged: -(1)/2 and -(-1)/2
    np.testing.assert_allclose(grad_q_tm1.numpy(), [[-0.5, 0.0], [0.0, 0.5]])


def test_huber():
    np.testing.assert_allclose(huber(tf.constant([0.5, -2.0]), 1.0).numpy(), [0.125, 1.5])


@pytest.mark.parametrize("mode", MODES)
def test_policy_gradient_loss(mode):
    log_probs = tf.math.log(tf.constant([0.5, 0.25]))
    advantages = tf.constant([2.0, -1.0])
    values = tf.constant([1.0, 0.0])
    returns = tf.constant([3.0, -1.0])
    entropy = tf.constant([0.6, 0.4])
    loss, extras = MODES[mode](policy_gradient_loss)(
        log_probs, advantages, values, returns, entropy, value_coef=0.5, entropy_coef=0.1
    )
    # policy: -ln(0.5) * 2 = 1.386294, -ln(0.25) * -1 = -1.386294
    # value: (1 - 3)^2 / 2 = 2, (0 + 1)^2 / 2 = 0.5
    np.testing.assert_allclose(extras["policy_loss"], [1.386294, -1.386294], rtol=1e-6)
    np.testing.assert_allclose(extras["value_loss"], [2.0, 0.5])
    np.testing.assert_allclose(loss, [1.386294 + 1.0 - 0.06, -1.386294 + 0.25 - 0.04], rtol=1e-6)


def test_policy_gradient_is_the_score_times_the_advantage():
    # d/dlogits of -log softmax(logits)[a] * A = -(onehot(a) - softmax(logits)) * A,
    # and the advantage itself gets no gradient.
    logits = tf.Variable([[0.0, tf.math.log(3.0)]])  # probabilities 0.25, 0.75
    advantages = tf.Variable([2.0])
    with tf.GradientTape() as tape:
        log_probs = tf.nn.log_softmax(logits)[:, 0]
        zero = tf.zeros([1])
        loss, _ = policy_gradient_loss(log_probs, advantages, zero, zero, zero, 0.5, 0.0)
    grad_logits, grad_advantages = tape.gradient(loss, [logits, advantages])
    np.testing.assert_allclose(grad_logits, [[-(1 - 0.25) * 2.0, -(0 - 0.75) * 2.0]], rtol=1e-6)
    assert grad_advantages is None


def test_policy_gradient_rejects_disagreeing_shapes():
    b = tf.zeros([4])
    with pytest.raises(ValueError, match="values must have rank 1"):
        policy_gradient_loss(b, b, tf.zeros([4, 1]), b, b, 0.5, 0.0)
    with pytest.raises(ValueError, match="returns has shape"):
        policy_gradient_loss(b, b, b, tf.zeros([3]), b, 0.5, 0.0)
