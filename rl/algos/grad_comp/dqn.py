"""DQN's TD loss (Mnih et al. 2015), with double-Q (van Hasselt et al. 2016)."""

from typing import Dict, Optional, Tuple

from rl._tf import tf


def dqn_td_loss(
    q_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    q_t_target: tf.Tensor,
    q_t_online: Optional[tf.Tensor] = None,
    huber_delta: float = 1.0,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Huber loss between Q(s, a) and r + discount * Q_target(s', a*).

    a* = argmax_a Q_target(s', a), or argmax_a Q_online(s', a) for double-Q.
    The discount is gamma where the episode went on or was truncated and 0
    where it terminated, so a time-limit cut is bootstrapped.

    Args:
        q_tm1: [B, A] online Q-values at s.
        a_tm1: [B] int actions taken at s.
        r_t: [B] rewards.
        discount_t: [B] gamma * (1 - terminated).
        q_t_target: [B, A] target-network Q-values at s'.
        q_t_online: [B, A] online Q-values at s'; given -> double-Q target.
        huber_delta: where the Huber loss turns from quadratic to linear.

    Returns:
        The scalar loss and extras: td_error [B], q_mean, target_mean.
    """
    tf.debugging.assert_rank(q_tm1, 2, message="dqn_td_loss: q_tm1 must be [B, A]")
    tf.debugging.assert_rank(a_tm1, 1, message="dqn_td_loss: a_tm1 must be [B]")
    tf.debugging.assert_rank(r_t, 1, message="dqn_td_loss: r_t must be [B]")
    tf.debugging.assert_rank(discount_t, 1, message="dqn_td_loss: discount_t must be [B]")
    tf.debugging.assert_rank(q_t_target, 2, message="dqn_td_loss: q_t_target must be [B, A]")
    selector = q_t_target if q_t_online is None else q_t_online
    best_next = tf.argmax(selector, axis=-1, output_type=tf.int32)
    next_value = tf.gather(q_t_target, best_next, batch_dims=1)
    target = tf.stop_gradient(r_t + discount_t * next_value)
    q_taken = tf.gather(q_tm1, tf.cast(a_tm1, tf.int32), batch_dims=1)
    td_error = target - q_taken
    loss = tf.reduce_mean(huber(td_error, huber_delta))
    return loss, {
        "td_error": td_error,
        "q_mean": tf.reduce_mean(q_taken),
        "target_mean": tf.reduce_mean(target),
    }


def huber(x: tf.Tensor, delta: float) -> tf.Tensor:
    """Elementwise Huber: x^2/2 for |x| <= delta, delta*(|x| - delta/2) beyond."""
    abs_x = tf.abs(x)
    quadratic = tf.minimum(abs_x, delta)
    return 0.5 * tf.square(quadratic) + delta * (abs_x - quadratic)
