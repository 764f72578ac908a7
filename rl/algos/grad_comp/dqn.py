"""DQN's TD loss (Mnih et al. 2015) with double-Q (van Hasselt et al. 2016), and C51's
distributional loss (Bellemare et al. 2017).

Each loss is a pure function of tensors (``dqn_td_loss``, ``categorical_td_loss``) and,
below it, the registered entry the DQN learner calls (``dqn_td``, ``categorical_td``):
the loss on a ``QBatch`` (q_batch.py) with the hparams it reads, and the priority a
prioritised replay ranks the transitions by.
"""

from typing import Dict, Optional, Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs, check_leading
from rl.algos.grad_comp.q_batch import QBatch


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


def dqn_td(batch: QBatch, hp) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """``dqn_td_loss`` on a batch, Huber at ``hp.huber_delta``; priority |td_error|.

    Args:
        batch: the transitions and the networks.
        hp: the run's hparams (``huber_delta``).
    """
    loss, extras = dqn_td_loss(
        q_tm1=batch.q_tm1,
        a_tm1=batch.a_tm1,
        r_t=batch.r_t,
        discount_t=batch.discount_t,
        q_t_target=batch.q_t_target,
        q_t_online=batch.q_t_online,
        huber_delta=hp.huber_delta,
    )
    return loss, {**extras, "priority": tf.abs(extras["td_error"])}


def huber(x: tf.Tensor, delta: float) -> tf.Tensor:
    """Elementwise Huber: x^2/2 for |x| <= delta, delta*(|x| - delta/2) beyond."""
    abs_x = tf.abs(x)
    quadratic = tf.minimum(abs_x, delta)
    return 0.5 * tf.square(quadratic) + delta * (abs_x - quadratic)


def categorical_projection(
    target_values: tf.Tensor, probabilities: tf.Tensor, support: tf.Tensor
) -> tf.Tensor:
    """Projects a distribution on ``target_values`` onto the fixed ``support``.

    Each atom's probability is split between the two support points around its
    value (clipped to the support's range), in proportion to closeness
    (Bellemare et al. 2017, Algorithm 1): the weight of source atom j on support
    point i is max(0, 1 - |clip(Tz_j) - z_i| / dz), which keeps mass and mean.

    Args:
        target_values: [B, N] where each atom lands (r + discount * z).
        probabilities: [B, N] the atoms' probabilities.
        support: [N] evenly spaced values z_0 < ... < z_{N-1}.

    Returns:
        [B, N] probabilities on ``support``.
    """
    check_inputs("categorical_projection", 2, {"target_values": target_values})
    check_leading(
        "categorical_projection", {"target_values": target_values}, {"probabilities": probabilities}
    )
    spacing = support[1] - support[0]
    landed = tf.clip_by_value(target_values, support[0], support[-1])
    # [B, target i, source j]
    closeness = 1.0 - tf.abs(landed[:, None, :] - support[None, :, None]) / spacing
    return tf.reduce_sum(tf.clip_by_value(closeness, 0.0, 1.0) * probabilities[:, None, :], -1)


def categorical_td_loss(
    logits_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    logits_t_target: tf.Tensor,
    support: tf.Tensor,
    q_t_selector: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """C51's loss (Bellemare et al. 2017): cross-entropy between the return
    distribution of (s, a) and the projected r + discount * Z_target(s', a*).

    a* = argmax_a of ``q_t_selector`` (double-Q: the online network's expected
    Q-values at s'), or of the target network's expected Q-values.

    Args:
        logits_tm1: [B, A, N] online logits at s.
        a_tm1: [B] int actions taken at s.
        r_t: [B] rewards (n-step returns).
        discount_t: [B] gamma^n * (1 - terminated).
        logits_t_target: [B, A, N] target-network logits at s'.
        support: [N] the atoms' values.
        q_t_selector: [B, A] values that choose a*; None: the target's own.

    Returns:
        The loss [B] and extras, each [B]: td_error (the expected target minus
        the expected Q(s, a)), q_taken, target.

    Raises:
        ValueError: ranks or shapes disagree.
    """
    check_inputs("categorical_td_loss", 1, {"a_tm1": a_tm1, "r_t": r_t, "discount_t": discount_t})
    check_inputs(
        "categorical_td_loss", 3, {"logits_tm1": logits_tm1, "logits_t_target": logits_t_target}
    )
    check_leading("categorical_td_loss", {"logits_tm1": logits_tm1}, {"a_tm1": a_tm1})
    target_probs = tf.nn.softmax(logits_t_target, axis=-1)
    if q_t_selector is None:
        q_t_selector = tf.reduce_sum(target_probs * support, -1)
    best_next = tf.argmax(q_t_selector, axis=-1, output_type=tf.int32)
    landed = r_t[:, None] + discount_t[:, None] * support[None, :]
    projected = tf.stop_gradient(
        categorical_projection(landed, tf.gather(target_probs, best_next, batch_dims=1), support)
    )
    logits_taken = tf.gather(logits_tm1, tf.cast(a_tm1, tf.int32), batch_dims=1)
    loss = -tf.reduce_sum(projected * tf.nn.log_softmax(logits_taken, -1), -1)
    q_taken = tf.reduce_sum(tf.nn.softmax(logits_taken, -1) * support, -1)
    target = tf.reduce_sum(projected * support, -1)
    return loss, {"td_error": target - q_taken, "q_taken": q_taken, "target": target}


def categorical_td(batch: QBatch, hp) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """``categorical_td_loss`` on a batch's logits; priority the loss (as in Rainbow).

    Args:
        batch: the transitions and the networks (a head of ``num_atoms`` atoms).
        hp: the run's hparams (the atoms' support is the model's).
    """
    del hp  # the support (num_atoms, v_min, v_max) is the model's
    loss, extras = categorical_td_loss(
        logits_tm1=batch.logits_tm1,
        a_tm1=batch.a_tm1,
        r_t=batch.r_t,
        discount_t=batch.discount_t,
        logits_t_target=batch.logits_t_target,
        support=batch.support,
        q_t_selector=batch.q_t_selector,
    )
    return loss, {**extras, "priority": loss}
