"""Losses of the off-policy actor-critics with Q-critics: DDPG, TD3 and SAC.

DDPG (Lillicrap et al. 2016) learns a deterministic policy mu(s) by ascending
one critic's Q(s, mu(s)); TD3 (Fujimoto et al. 2018) takes the minimum of two
critics in the target, smooths the target action with clipped noise and delays
the policy's steps; SAC (Haarnoja et al. 2018) learns a stochastic policy that
also maximises entropy, with a temperature alpha tuned towards a target entropy.
The critics' regression is shared: every critic is pulled towards one target.

Shapes: B examples, C critics. Every function returns per-example losses [B]
and extras of per-example values; the caller reduces.
"""

import dataclasses
from typing import Callable, Dict, Optional, Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs, check_leading

Losses = Tuple[tf.Tensor, Dict[str, tf.Tensor]]


def clipped_double_q_target(
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    next_q: tf.Tensor,
    next_log_probs: Optional[tf.Tensor] = None,
    alpha=0.0,
) -> tf.Tensor:
    """y = r + discount * (min_c Q'_c(s', a') - alpha * log pi(a'|s')), without gradient.

    With one critic this is DDPG's target; with two and no log-probs, TD3's; with
    log-probs, SAC's soft target. ``discounts`` are gamma^n where the episode went
    on or was truncated and 0 where it terminated.

    Args:
        rewards: [B] (n-step) rewards.
        discounts: [B].
        next_q: [C, B] target critics at (s', a').
        next_log_probs: [B] log pi(a'|s') of the next actions (SAC), or None.
        alpha: the entropy temperature (scalar).

    Returns:
        The target [B].

    Raises:
        ValueError: ranks or shapes disagree.
    """
    check_inputs(
        "clipped_double_q_target",
        1,
        {"rewards": rewards, "discounts": discounts, "next_log_probs": next_log_probs},
    )
    check_inputs("clipped_double_q_target", 2, {"next_q": next_q})
    check_leading("clipped_double_q_target", {"next_q": tf.transpose(next_q)}, {"rewards": rewards})
    next_value = tf.reduce_min(next_q, axis=0)
    if next_log_probs is not None:
        next_value = next_value - alpha * next_log_probs
    return tf.stop_gradient(rewards + discounts * next_value)


def critic_loss(q: tf.Tensor, targets: tf.Tensor) -> Losses:
    """Each critic's squared error to the shared target, summed over critics, halved.

    Args:
        q: [C, B] the critics at the taken (s, a).
        targets: [B] from ``clipped_double_q_target``.

    Returns:
        The loss [B] = 0.5 * sum_c (Q_c(s, a) - y)^2, and extras: q_mean (the
        critics' mean at (s, a)), target, td_error (y - Q_1(s, a)).
    """
    check_inputs("critic_loss", 2, {"q": q})
    check_inputs("critic_loss", 1, {"targets": targets})
    check_leading("critic_loss", {"q": tf.transpose(q)}, {"targets": targets})
    targets = tf.stop_gradient(targets)
    errors = q - targets[None, :]
    return 0.5 * tf.reduce_sum(tf.square(errors), axis=0), {
        "q_mean": tf.reduce_mean(q, axis=0),
        "target": targets,
        "td_error": -errors[0],
    }


def deterministic_actor_loss(q: tf.Tensor) -> Losses:
    """DDPG's and TD3's policy loss: -Q_1(s, mu(s)), whose gradient reaches mu through a.

    Args:
        q: [B] the first critic at (s, mu(s)).
    """
    check_inputs("deterministic_actor_loss", 1, {"q": q})
    return -q, {"actor_q": q}


def sac_actor_loss(log_probs: tf.Tensor, q: tf.Tensor, alpha) -> Losses:
    """SAC's policy loss: alpha * log pi(a|s) - min_c Q_c(s, a), a ~ pi(.|s) reparameterised.

    Args:
        log_probs: [B] log pi(a|s) of the sampled actions.
        q: [C, B] the critics at (s, a).
        alpha: the temperature (scalar; not trained by this loss).
    """
    check_inputs("sac_actor_loss", 1, {"log_probs": log_probs})
    check_inputs("sac_actor_loss", 2, {"q": q})
    check_leading("sac_actor_loss", {"q": tf.transpose(q)}, {"log_probs": log_probs})
    alpha = tf.stop_gradient(alpha)
    return alpha * log_probs - tf.reduce_min(q, axis=0), {"entropy": -log_probs}


def sac_temperature_loss(log_alpha: tf.Tensor, log_probs: tf.Tensor, target_entropy) -> Losses:
    """SAC's temperature loss: -log(alpha) * (log pi(a|s) + target entropy).

    Its gradient lowers alpha while the policy's entropy (-log pi) is above the
    target and raises it below. Trained through log(alpha), so alpha stays positive.

    Args:
        log_alpha: scalar, the trained log temperature.
        log_probs: [B] log pi(a|s) of sampled actions (no gradient reaches the policy).
        target_entropy: the entropy to keep (e.g. -dim(A)).
    """
    check_inputs("sac_temperature_loss", 1, {"log_probs": log_probs})
    return -log_alpha * tf.stop_gradient(log_probs + target_entropy), {}


@dataclasses.dataclass(frozen=True)
class ActorCriticLosses:
    """The losses of one family, registered under one grad_comp name.

    Attributes:
        target: (rewards, discounts, next_q, next_log_probs, alpha) -> y [B].
        critic: (q [C, B], targets [B]) -> per-example loss and extras.
        actor: the policy's loss.
        temperature: SAC's temperature loss, or None.
    """

    target: Callable
    critic: Callable
    actor: Callable
    temperature: Optional[Callable] = None


# The registered grad_comps (rl/algos/grad_comp/__init__.py names them).
deterministic_policy_gradient = ActorCriticLosses(
    clipped_double_q_target, critic_loss, deterministic_actor_loss
)
soft_actor_critic = ActorCriticLosses(
    clipped_double_q_target, critic_loss, sac_actor_loss, sac_temperature_loss
)
