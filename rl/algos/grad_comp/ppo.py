"""PPO's clipped surrogate objective (Schulman et al. 2017, arXiv:1707.06347)."""

from typing import Dict, Optional, Tuple

from rl._tf import tf


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
    """PPO loss = -clipped surrogate + value_coef * value loss - entropy_coef * H.

    Args:
        log_probs: [B] log pi(a|s) under the current policy.
        old_log_probs: [B] log pi_old(a|s) from the rollout.
        advantages: [B] advantage estimates (normalise before if wanted).
        values: [B] V(s) under the current value function.
        returns: [B] value targets.
        entropy: [B] policy entropy at s.
        clip_ratio: epsilon of the clipped ratio.
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        old_values: [B] V(s) from the rollout; needed with value_clip.
        value_clip: clip the value change to +-value_clip (None: no clipping).

    Returns:
        The scalar loss and a dict of its parts: policy_loss, value_loss,
        entropy, approx_kl (the (r-1) - log r estimator), clip_fraction.
    """
    for name, x in (
        ("log_probs", log_probs),
        ("old_log_probs", old_log_probs),
        ("advantages", advantages),
        ("values", values),
        ("returns", returns),
        ("entropy", entropy),
    ):
        tf.debugging.assert_rank(x, 1, message=f"ppo_clip_loss: {name} must be [B]")
    log_ratio = log_probs - old_log_probs
    ratio = tf.exp(log_ratio)
    surrogate = ratio * advantages
    clipped = tf.clip_by_value(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio) * advantages
    policy_loss = -tf.reduce_mean(tf.minimum(surrogate, clipped))
    value_error = tf.square(values - returns)
    if value_clip is not None:
        clipped_values = old_values + tf.clip_by_value(values - old_values, -value_clip, value_clip)
        value_error = tf.maximum(value_error, tf.square(clipped_values - returns))
    value_loss = 0.5 * tf.reduce_mean(value_error)
    mean_entropy = tf.reduce_mean(entropy)
    loss = policy_loss + value_coef * value_loss - entropy_coef * mean_entropy
    extras = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": mean_entropy,
        "approx_kl": tf.reduce_mean((ratio - 1.0) - log_ratio),
        "clip_fraction": tf.reduce_mean(tf.cast(tf.abs(ratio - 1.0) > clip_ratio, tf.float32)),
    }
    return loss, extras


def categorical_log_prob_and_entropy(
    logits: tf.Tensor, actions: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """log pi(a|s) and the entropy of pi(.|s) for pi = softmax(logits).

    The same values as TFP's ``Categorical(logits).log_prob(a)`` and
    ``.entropy()`` (tests/test_grad_comp.py compares them), written with two
    core ops so that training does not import TensorFlow Probability (~1 s of
    every run's start-up on the project's machines).

    Args:
        logits: [B, A] unnormalised log-probabilities.
        actions: [B] int actions.

    Returns:
        log_probs [B] and entropy [B].
    """
    tf.debugging.assert_rank(logits, 2, message="logits must be [B, A]")
    log_pi = tf.nn.log_softmax(logits)
    log_probs = tf.gather(log_pi, tf.cast(actions, tf.int32), batch_dims=1)
    entropy = -tf.reduce_sum(tf.exp(log_pi) * log_pi, axis=-1)
    return log_probs, entropy
