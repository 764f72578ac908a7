"""The policy-gradient loss with a learned baseline (Williams 1992; A2C: Mnih et al. 2016)."""

from typing import Dict, Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs


def policy_gradient_loss(
    log_probs: tf.Tensor,
    advantages: tf.Tensor,
    values: tf.Tensor,
    returns: tf.Tensor,
    entropy: tf.Tensor,
    value_coef: float,
    entropy_coef: float,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Per-example loss = -log pi(a|s) A + value_coef * (V - R)^2 / 2 - entropy_coef * H.

    Its gradient is the REINFORCE estimator with ``advantages`` = R - b(s) as
    given (no gradient flows into them). The caller reduces it.

    Args:
        log_probs: [B] log pi(a|s) under the current policy.
        advantages: [B] advantage estimates (returns minus a baseline, or GAE).
        values: [B] V(s) under the current value function.
        returns: [B] value targets.
        entropy: [B] policy entropy at s.
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.

    Returns:
        The loss [B] and its parts, each [B]: policy_loss, value_loss, entropy.

    Raises:
        ValueError: ranks or shapes disagree.
    """
    check_inputs(
        "policy_gradient_loss",
        1,
        {
            "log_probs": log_probs,
            "advantages": advantages,
            "values": values,
            "returns": returns,
            "entropy": entropy,
        },
    )
    policy_loss = -log_probs * tf.stop_gradient(advantages)
    value_loss = 0.5 * tf.square(values - returns)
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}
