"""DQN's TD loss (Mnih et al. 2015), with double-Q (van Hasselt et al. 2016)."""

from typing import Dict, Optional, Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs, check_leading


def dqn_td_loss(
    q_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    q_t_target: tf.Tensor,
    q_t_online: Optional[tf.Tensor] = None,
    huber_delta: float = 1.0,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Per-example Huber loss between Q(s, a) and r + discount * Q_target(s', a*).

    a* = argmax_a Q_target(s', a), or argmax_a Q_online(s', a) for double-Q.
    The discount is gamma^n where the episode went on or was truncated and 0
    where it terminated, so a time-limit cut is bootstrapped; with n-step
    returns ``r_t`` is the discounted n-step sum.

    Args:
        q_tm1: [B, A] online Q-values at s.
        a_tm1: [B] int actions taken at s.
        r_t: [B] rewards (n-step returns).
        discount_t: [B] gamma^n * (1 - terminated).
        q_t_target: [B, A] target-network Q-values at s'.
        q_t_online: [B, A] online Q-values at s'; given -> double-Q target.
        huber_delta: where the Huber loss turns from quadratic to linear.

    Returns:
        The loss [B] and extras, each [B]: td_error (target - Q(s, a); what
        prioritised replay ranks by), q_taken, target.

    Raises:
        ValueError: ranks or shapes disagree.
    """
    check_inputs("dqn_td_loss", 1, {"a_tm1": a_tm1, "r_t": r_t, "discount_t": discount_t})
    check_inputs(
        "dqn_td_loss", 2, {"q_tm1": q_tm1, "q_t_target": q_t_target, "q_t_online": q_t_online}
    )
    check_leading("dqn_td_loss", {"q_tm1": q_tm1}, {"a_tm1": a_tm1})
    selector = q_t_target if q_t_online is None else q_t_online
    best_next = tf.argmax(selector, axis=-1, output_type=tf.int32)
    next_value = tf.gather(q_t_target, best_next, batch_dims=1)
    target = tf.stop_gradient(r_t + discount_t * next_value)
    q_taken = tf.gather(q_tm1, tf.cast(a_tm1, tf.int32), batch_dims=1)
    td_error = target - q_taken
    return huber(td_error, huber_delta), {
        "td_error": td_error,
        "q_taken": q_taken,
        "target": target,
    }


def huber(x: tf.Tensor, delta: float) -> tf.Tensor:
    """Elementwise Huber: x^2/2 for |x| <= delta, delta*(|x| - delta/2) beyond."""
    abs_x = tf.abs(x)
    quadratic = tf.minimum(abs_x, delta)
    return 0.5 * tf.square(quadratic) + delta * (abs_x - quadratic)
