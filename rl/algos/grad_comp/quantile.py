"""QR-DQN's loss (Dabney et al. 2018, "Distributional Reinforcement Learning with
Quantile Regression"): N quantiles of the return distribution per action, pulled
towards the quantiles of r + discount * Z_target(s', a*) by the quantile Huber loss.

``quantile_td`` is the registered entry the DQN learner calls: the loss on a ``QBatch``
(q_batch.py) with its kappa from the hparams."""

from typing import Dict, Optional, Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs, check_leading
from rl.algos.grad_comp.dqn import huber
from rl.algos.grad_comp.q_batch import QBatch


def quantile_midpoints(num_quantiles: int) -> tf.Tensor:
    """[N] the fractions tau_i = (2i + 1) / 2N that N equally weighted quantiles
    estimate (the paper's tau-hat: the middle of each 1/N slice)."""
    return (tf.range(num_quantiles, dtype=tf.float32) + 0.5) / tf.cast(num_quantiles, tf.float32)


def quantile_huber_loss(quantiles: tf.Tensor, targets: tf.Tensor, kappa: float = 1.0) -> tf.Tensor:
    """The quantile Huber loss of N predicted quantiles against M target samples.

    For u_ij = targets_j - quantiles_i, the loss of quantile i is
    |tau_i - 1{u_ij < 0}| * L_kappa(u_ij) / kappa, with L_kappa the Huber loss at
    threshold kappa; kappa = 0 is plain quantile regression, |tau_i - 1{u < 0}| |u|
    (Dabney et al. 2018, eq. 10). Summed over i, averaged over j, as in the paper.

    Args:
        quantiles: [B, N] predicted quantile values, for fractions quantile_midpoints(N).
        targets: [B, M] samples of the target distribution (no gradient flows to them).
        kappa: the Huber threshold, >= 0.

    Returns:
        The loss [B].

    Raises:
        ValueError: ranks or batch sizes disagree, or kappa < 0.
    """
    check_inputs("quantile_huber_loss", 2, {"quantiles": quantiles})
    check_inputs("quantile_huber_loss", 2, {"targets": targets})
    if not quantiles.shape[:1].is_compatible_with(targets.shape[:1]):
        raise ValueError(
            f"quantile_huber_loss: quantiles has shape {quantiles.shape} but targets has "
            f"{targets.shape}: their batch sizes differ"
        )
    if kappa < 0:
        raise ValueError(f"quantile_huber_loss: kappa must be >= 0, got {kappa}")
    tau = quantile_midpoints(tf.shape(quantiles)[1])
    # [B, predicted i, target j]
    errors = tf.stop_gradient(targets)[:, None, :] - quantiles[:, :, None]
    below = tf.cast(errors < 0, errors.dtype)
    weight = tf.abs(tau[None, :, None] - below)
    scaled = tf.abs(errors) if kappa == 0 else huber(errors, kappa) / kappa
    return tf.reduce_sum(tf.reduce_mean(weight * scaled, axis=2), axis=1)


def quantile_td_loss(
    quantiles_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    quantiles_t_target: tf.Tensor,
    q_t_selector: Optional[tf.Tensor] = None,
    kappa: float = 1.0,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """QR-DQN's loss (Dabney et al. 2018, Algorithm 1): the quantile Huber loss of
    Z(s, a)'s quantiles against r + discount * Z_target(s', a*)'s.

    a* = argmax_a of ``q_t_selector`` (double-Q: the online network's Q-values at
    s'), or of the target network's Q-values, the means of its quantiles. The
    discount is gamma^n where the episode went on or was truncated, 0 where it
    terminated.

    Args:
        quantiles_tm1: [B, A, N] online quantile values at s.
        a_tm1: [B] int actions taken at s.
        r_t: [B] rewards (n-step returns).
        discount_t: [B] gamma^n * (1 - terminated).
        quantiles_t_target: [B, A, N] target-network quantile values at s'.
        q_t_selector: [B, A] values that choose a*; None: the target's own means.
        kappa: the quantile Huber loss's threshold; 0: plain quantile regression.

    Returns:
        The loss [B] and extras, each [B]: td_error (the target's mean minus
        Q(s, a)), q_taken (Q(s, a), the mean of its quantiles), target.

    Raises:
        ValueError: ranks or shapes disagree.
    """
    name = "quantile_td_loss"
    check_inputs(name, 1, {"a_tm1": a_tm1, "r_t": r_t, "discount_t": discount_t})
    check_inputs(
        name, 3, {"quantiles_tm1": quantiles_tm1, "quantiles_t_target": quantiles_t_target}
    )
    check_leading(name, {"quantiles_tm1": quantiles_tm1}, {"a_tm1": a_tm1})
    if q_t_selector is None:
        q_t_selector = tf.reduce_mean(quantiles_t_target, -1)
    best_next = tf.argmax(q_t_selector, axis=-1, output_type=tf.int32)
    next_quantiles = tf.gather(quantiles_t_target, best_next, batch_dims=1)
    targets = tf.stop_gradient(r_t[:, None] + discount_t[:, None] * next_quantiles)
    quantiles_taken = tf.gather(quantiles_tm1, tf.cast(a_tm1, tf.int32), batch_dims=1)
    loss = quantile_huber_loss(quantiles_taken, targets, kappa)
    q_taken = tf.reduce_mean(quantiles_taken, -1)
    target = tf.reduce_mean(targets, -1)
    return loss, {"td_error": target - q_taken, "q_taken": q_taken, "target": target}


def quantile_td(batch: QBatch, hp) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """``quantile_td_loss`` on a batch's quantiles, kappa ``hp.huber_delta``; priority the
    loss (as C51's cross-entropy is in Rainbow).

    Args:
        batch: the transitions and the networks (a head of ``num_quantiles`` quantiles).
        hp: the run's hparams (``huber_delta``).
    """
    loss, extras = quantile_td_loss(
        quantiles_tm1=batch.logits_tm1,
        a_tm1=batch.a_tm1,
        r_t=batch.r_t,
        discount_t=batch.discount_t,
        quantiles_t_target=batch.logits_t_target,
        q_t_selector=batch.q_t_selector,
        kappa=hp.huber_delta,
    )
    return loss, {**extras, "priority": loss}
