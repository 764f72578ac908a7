"""Generalized advantage estimation (Schulman et al. 2016, arXiv:1506.02438)."""

from typing import Tuple

from rl._tf import tf


def gae_advantages(
    rewards: tf.Tensor,
    values: tf.Tensor,
    next_values: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    gamma: float,
    lam: float,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Advantages and value targets for a batch of trajectories.

    Time-limit truncation is bootstrapped, termination is not:
        delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
        A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1},  done = term | trunc
    where s'_t is the true next state (the final observation where an episode
    ended), so ``next_values[b, t]`` is V of that state.

    Args:
        rewards: [B, T] rewards r_t.
        values: [B, T] V(s_t).
        next_values: [B, T] V(s'_t).
        terminated: [B, T] bool, the episode ended in a terminal state at t.
        truncated: [B, T] bool, the episode was cut at t (time limit).
        gamma: discount.
        lam: GAE lambda.

    Returns:
        advantages [B, T] and returns (advantages + values) [B, T].
    """
    for name, x in (
        ("rewards", rewards),
        ("values", values),
        ("next_values", next_values),
        ("terminated", terminated),
        ("truncated", truncated),
    ):
        tf.debugging.assert_rank(x, 2, message=f"gae: {name} must be [B, T]")
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    not_terminal = 1.0 - tf.cast(terminated, tf.float32)
    not_done = 1.0 - tf.cast(tf.logical_or(terminated, truncated), tf.float32)
    deltas = rewards + gamma * not_terminal * next_values - values
    # Scan backwards over time: put time first for tf.scan.
    deltas_tb = tf.transpose(deltas)
    chain_tb = tf.transpose(gamma * lam * not_done)
    advantages_tb = tf.scan(
        lambda next_adv, x: x[0] + x[1] * next_adv,
        (deltas_tb, chain_tb),
        initializer=tf.zeros_like(deltas_tb[0]),
        reverse=True,
    )
    advantages = tf.transpose(advantages_tb)
    return advantages, advantages + values
