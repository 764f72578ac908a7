"""V-trace off-policy targets and IMPALA's loss (Espeholt et al. 2018, arXiv:1802.01561).

Time-major [T, B] trajectories acted by a behaviour policy mu (an actor whose
weights may lag the learner's by several versions) are corrected towards the
target policy pi with truncated importance weights (eq. 1):

    rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t)),  c_t = lam * min(c_bar, pi / mu)
    delta_t = rho_t * (r_t + discount_t * V(x'_t) - V(x_t))
    v_t - V(x_t) = delta_t + discount_t * c_t * (v_{t+1} - V(x_{t+1}))

and the policy is improved along the advantage of section 4.2,
``rho_pg_t * (r_t + discount_t * v'_t - V(x_t))`` with v'_t the V-trace target
of the next state.
"""

from typing import Dict, Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs


def vtrace_targets(
    behaviour_log_probs: tf.Tensor,
    target_log_probs: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    next_values: tf.Tensor,
    discounts: tf.Tensor,
    truncated: tf.Tensor,
    lam: float = 1.0,
    clip_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """V-trace value targets v_t and policy-gradient advantages, both without gradient.

    Truncation and termination follow ``gae_advantages``: ``next_values[t]`` is
    V of the true next state x'_t (the final observation where an episode
    ended), a terminal step has discount 0 (no bootstrap), and a time-limit
    step bootstraps from V(x'_t) but does not chain into the next episode.
    Where no episode ended, ``next_values[t]`` is taken to equal
    ``values[t + 1]`` (both V of the same state), and the last step
    bootstraps from ``next_values[T - 1]``.

    Args:
        behaviour_log_probs: [T, B] log mu(a_t|x_t), recorded when acting.
        target_log_probs: [T, B] log pi(a_t|x_t) under the policy being learned.
        rewards: [T, B] rewards r_t.
        values: [T, B] V(x_t).
        next_values: [T, B] V(x'_t).
        discounts: [T, B] gamma, or 0 where the episode terminated at t.
        truncated: [T, B] bool, the episode was cut at t (time limit).
        lam: lambda, mixing the traces' length as in TD(lambda) (1: the paper's eq. 1).
        clip_rho_threshold: rho bar, the truncation of the TD errors' weights.
        clip_c_threshold: c bar, the truncation of the traces.
        clip_pg_rho_threshold: the truncation of the policy-gradient weights.

    Returns:
        vs [T, B] (value targets), pg_advantages [T, B], and the unclipped
        importance ratios pi / mu [T, B]; all with stopped gradients.

    Raises:
        ValueError: ranks or shapes disagree.
    """
    check_inputs(
        "vtrace",
        2,
        {
            "behaviour_log_probs": behaviour_log_probs,
            "target_log_probs": target_log_probs,
            "rewards": rewards,
            "values": values,
            "next_values": next_values,
            "discounts": discounts,
            "truncated": truncated,
        },
    )
    # The targets are constants of the loss: the paper's gradients flow only
    # through log pi in the policy term and through V(x_t) in the value term.
    stop = tf.stop_gradient
    values, next_values = stop(values), stop(next_values)
    ratios = tf.exp(stop(target_log_probs) - stop(behaviour_log_probs))
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    discounts = tf.convert_to_tensor(discounts, tf.float32)
    not_truncated = 1.0 - tf.cast(truncated, tf.float32)

    rhos = tf.minimum(clip_rho_threshold, ratios)
    cs = lam * tf.minimum(clip_c_threshold, ratios)
    deltas = rhos * (rewards + discounts * next_values - values)
    # corrections[t] = v_t - V(x_t), summed backwards like GAE's advantages.
    corrections = tf.scan(
        lambda later, x: x[0] + x[1] * later,
        (deltas, discounts * cs * not_truncated),
        initializer=tf.zeros_like(deltas[0]),
        reverse=True,
    )
    vs = values + corrections
    # v'_t: the next state's V-trace target; after a truncation (and at the
    # rollout's end) only V(x'_t) is known. Terminal steps have discount 0.
    later_corrections = tf.concat([corrections[1:], tf.zeros_like(corrections[:1])], 0)
    next_vs = next_values + not_truncated * later_corrections
    pg_rhos = tf.minimum(clip_pg_rho_threshold, ratios)
    pg_advantages = pg_rhos * (rewards + discounts * next_vs - values)
    return stop(vs), stop(pg_advantages), stop(ratios)


def vtrace_loss(
    behaviour_log_probs: tf.Tensor,
    target_log_probs: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    next_values: tf.Tensor,
    discounts: tf.Tensor,
    truncated: tf.Tensor,
    entropy: tf.Tensor,
    value_coef: float,
    entropy_coef: float,
    lam: float = 1.0,
    clip_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Per-example IMPALA loss = -pg_advantage * log pi + value_coef * value loss - entropy_coef * H.

    The caller reduces it (a mean, or weighted). Gradients reach the policy
    through ``target_log_probs`` and ``entropy`` and the critic through
    ``values``; the V-trace targets are constants.

    Args:
        behaviour_log_probs: [T, B] log mu(a_t|x_t), recorded when acting.
        target_log_probs: [T, B] log pi(a_t|x_t) under the current policy.
        rewards: [T, B] rewards r_t.
        values: [T, B] V(x_t) under the current critic.
        next_values: [T, B] V(x'_t) of the true next states.
        discounts: [T, B] gamma, or 0 where the episode terminated at t.
        truncated: [T, B] bool, the episode was cut at t (time limit).
        entropy: [T, B] policy entropy at x_t.
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        lam: V-trace lambda.
        clip_rho_threshold: rho bar.
        clip_c_threshold: c bar.
        clip_pg_rho_threshold: the policy-gradient weights' truncation.

    Returns:
        The loss [T, B] and its parts, each [T, B]: policy_loss, value_loss,
        entropy, rho (the unclipped pi / mu), rho_clipped (1 where rho > rho bar).

    Raises:
        ValueError: ranks or shapes disagree.
    """
    check_inputs(
        "vtrace_loss",
        2,
        {
            "behaviour_log_probs": behaviour_log_probs,
            "target_log_probs": target_log_probs,
            "rewards": rewards,
            "values": values,
            "next_values": next_values,
            "discounts": discounts,
            "truncated": truncated,
            "entropy": entropy,
        },
    )
    vs, pg_advantages, ratios = vtrace_targets(
        behaviour_log_probs,
        target_log_probs,
        rewards,
        values,
        next_values,
        discounts,
        truncated,
        lam=lam,
        clip_rho_threshold=clip_rho_threshold,
        clip_c_threshold=clip_c_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
    )
    policy_loss = -pg_advantages * target_log_probs
    value_loss = 0.5 * tf.square(vs - values)
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    extras = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "rho": ratios,
        "rho_clipped": tf.cast(ratios > clip_rho_threshold, tf.float32),
    }
    return loss, extras
