"""Generalized advantage estimation (Schulman et al. 2016, arXiv:1506.02438)."""

from typing import Tuple

from rl._tf import tf
from rl.algos.grad_comp.checks import check_inputs


def gae_advantages(
    rewards: tf.Tensor,
    values: tf.Tensor,
    next_values: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    gamma: float,
    lam: float,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Advantages and value targets for time-major trajectories.

    Time-limit truncation is bootstrapped, termination is not:
        delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
        A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1},  done = term | trunc
    where s'_t is the true next state (the final observation where an episode
    ended), so ``next_values[t, b]`` is V of that state.

    Args:
        rewards: [T, B] rewards r_t.
        values: [T, B] V(s_t).
        next_values: [T, B] V(s'_t).
        terminated: [T, B] bool, the episode ended in a terminal state at t.
        truncated: [T, B] bool, the episode was cut at t (time limit).
        gamma: discount.
        lam: GAE lambda.

    Returns:
        advantages [T, B] and returns (advantages + values) [T, B].

    Raises:
        ValueError: ranks or shapes disagree.
    """
    check_inputs(
        "gae",
        2,
        {
            "rewards": rewards,
            "values": values,
            "next_values": next_values,
            "terminated": terminated,
            "truncated": truncated,
        },
    )
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    not_terminal = 1.0 - tf.cast(terminated, tf.float32)
    not_done = 1.0 - tf.cast(tf.logical_or(terminated, truncated), tf.float32)
    deltas = rewards + gamma * not_terminal * next_values - values
    advantages = tf.scan(
        lambda next_adv, x: x[0] + x[1] * next_adv,
        (deltas, gamma * lam * not_done),
        initializer=tf.zeros_like(deltas[0]),
        reverse=True,
    )
    return advantages, advantages + values
