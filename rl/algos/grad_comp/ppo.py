"""PPO's clipped surrogate objective (Schulman et al. 2017, arXiv:1707.06347)."""

from typing import Dict, Optional, Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs


def ppo_clip_loss(
    log_probs: tf.Tensor,
    old_log_probs: tf.Tensor,
    advantages: tf.Tensor,
    values: tf.Tensor,
    returns: tf.Tensor,
    entropy: tf.Tensor,
    clip_ratio: float,
    value_coef: float,
    entropy_coef: float,
    old_values: Optional[tf.Tensor] = None,
    value_clip: Optional[float] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Per-example PPO loss = -clipped surrogate + value_coef * value loss - entropy_coef * H.

    The caller reduces it (a mean, or weighted).

    Args:
        log_probs: [B] log pi(a|s) under the current policy.
        old_log_probs: [B] log pi_old(a|s) recorded when acting.
        advantages: [B] advantage estimates (normalise before if wanted).
        values: [B] V(s) under the current value function.
        returns: [B] value targets.
        entropy: [B] policy entropy at s.
        clip_ratio: epsilon of the clipped ratio.
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        old_values: [B] V(s) from before the update; needed with value_clip.
        value_clip: clip the value change to +-value_clip (None: no clipping).

    Returns:
        The loss [B] and its parts, each [B]: policy_loss, value_loss, entropy,
        approx_kl (the (r-1) - log r estimator), clip_fraction (0 or 1).

    Raises:
        ValueError: ranks or shapes disagree, or value_clip without old_values.
    """
    if value_clip is not None and old_values is None:
        raise ValueError("ppo_clip_loss: value_clip needs old_values (V(s) before the update)")
    check_inputs(
        "ppo_clip_loss",
        1,
        {
            "log_probs": log_probs,
            "old_log_probs": old_log_probs,
            "advantages": advantages,
            "values": values,
            "returns": returns,
            "entropy": entropy,
            "old_values": old_values,
        },
    )
    log_ratio = log_probs - old_log_probs
    ratio = tf.exp(log_ratio)
    surrogate = ratio * advantages
    clipped = tf.clip_by_value(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio) * advantages
    policy_loss = -tf.minimum(surrogate, clipped)
    value_error = tf.square(values - returns)
    if value_clip is not None:
        clipped_values = old_values + tf.clip_by_value(values - old_values, -value_clip, value_clip)
        value_error = tf.maximum(value_error, tf.square(clipped_values - returns))
    value_loss = 0.5 * value_error
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    extras = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "approx_kl": (ratio - 1.0) - log_ratio,
        "clip_fraction": tf.cast(tf.abs(ratio - 1.0) > clip_ratio, tf.float32),
    }
    return loss, extras
