"""Action selection: sample, greedy, epsilon-greedy, uniform-or-sample.

Each rule is registered once, as an ``ActSelect`` holding its NumPy (host)
and TensorFlow (graph) forms; ``tests/test_act_select.py`` checks they agree.
Randomness comes in explicitly (a ``np.random.Generator`` or a stateless TF
seed drawn from the caller's generator), never from a global RNG.
"""

from __future__ import annotations

import numpy as np

from rl._tf import tf
from rl.algos.act_select.base import DISTRIBUTION, Q_VALUES, ActSelect
from rl.models.host import ILLEGAL_SCORE


# --- sample: a ~ pi(.|s) ------------------------------------------------------------
def sample_host(policy, rng: np.random.Generator, epsilon: float = 0.0) -> np.ndarray:
    """A draw from the action distribution; ``epsilon`` is unused."""
    del epsilon
    return policy.sample(rng)


def sample_graph(policy, head, seed: tf.Tensor, epsilon: tf.Tensor = 0.0) -> tf.Tensor:
    """A draw from the action distribution with a stateless seed."""
    del epsilon
    return head.sample(policy, seed)


# --- greedy: the mode, or argmax_a Q(s, a) -------------------------------------------
def greedy_host(policy, rng: np.random.Generator, epsilon: float = 0.0) -> np.ndarray:
    """The distribution's mode, or the argmax of Q-values; ``rng``/``epsilon`` unused."""
    del rng, epsilon
    if isinstance(policy, np.ndarray):
        return np.argmax(policy, axis=-1).astype(np.int32)
    return policy.mode()


def greedy_graph(policy, head, seed: tf.Tensor, epsilon: tf.Tensor = 0.0) -> tf.Tensor:
    """The distribution's mode, or the argmax of Q-values; ``seed``/``epsilon`` unused."""
    del seed, epsilon
    if isinstance(policy, tf.Tensor):
        return tf.argmax(policy, axis=-1, output_type=tf.int32)
    return head.mode(policy)


# --- epsilon-greedy over Q-values ------------------------------------------------------
# Q-values below this mark illegal moves (a model's action_mask, rl/models/host.py).
ILLEGAL_BELOW = ILLEGAL_SCORE / 2


def nth_legal(legal: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """A uniform pick among each row's legal moves.

    Args:
        legal: [R, A] bool, at least one True per row.
        unit: [R] uniforms in [0, 1): row r picks its floor(unit * legal moves)-th legal move.

    Returns:
        [R] int32 action indices.
    """
    count = legal.sum(1)
    k = np.minimum(np.floor(unit * count), count - 1)  # unit just below 1 may round up
    return np.argmax(np.cumsum(legal, 1) > k[:, None], axis=1).astype(np.int32)


def epsilon_greedy_host(q_values: np.ndarray, rng: np.random.Generator, epsilon: float = 0.0):
    """With probability epsilon a uniform random legal action, else the argmax.

    Legal: every action, unless the model masks moves (games), whose Q-values then sit
    at ILLEGAL_SCORE; a random action that lands on one is replaced by a uniform pick
    among the legal ones. Every row draws the same numbers whatever the Q-values, so
    actor processes acting for shares of the rows draw alike (rl/seeding.py RowDraws).
    """
    batch, num_actions = q_values.shape
    unit = rng.random(batch)
    explore = unit < epsilon
    random_actions = rng.integers(0, num_actions, batch, dtype=np.int32)
    legal = q_values > ILLEGAL_BELOW
    redraw = explore & ~legal[np.arange(batch), random_actions]
    if redraw.any():
        redraw &= legal.any(1)  # a row with no legal move keeps its draw
        # An exploring row's unit / epsilon is uniform in [0, 1) and unused: the pick.
        random_actions[redraw] = nth_legal(legal[redraw], unit[redraw] / epsilon)
    return np.where(explore, random_actions, greedy_host(q_values, rng))


def epsilon_greedy_graph(q_values: tf.Tensor, head, seed: tf.Tensor, epsilon: tf.Tensor = 0.0):
    """With probability epsilon a uniform random legal action, else the argmax."""
    explore_seed, action_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    batch = tf.shape(q_values)[0]
    num_actions = tf.shape(q_values)[-1]
    explore = tf.random.stateless_uniform([batch], explore_seed) < epsilon
    random_actions = tf.random.stateless_uniform(
        [batch], action_seed, minval=0, maxval=num_actions, dtype=tf.int32
    )
    legal = q_values > ILLEGAL_BELOW
    # Where the draw is illegal (masked games only): one uniform over the legal moves.
    legal_draw = tf.random.stateless_categorical(
        tf.where(legal, 0.0, ILLEGAL_SCORE),
        1,
        tf.random.experimental.stateless_fold_in(action_seed, 1),
        dtype=tf.int32,
    )[:, 0]
    drawn_legal = tf.gather(legal, random_actions, axis=1, batch_dims=1)
    random_actions = tf.where(drawn_legal, random_actions, legal_draw)
    return tf.where(explore, random_actions, greedy_graph(q_values, head, seed))


# --- uniform-or-sample: uniform over the action space with probability epsilon ----------
def uniform_from_unit(head, unit):
    """Maps uniforms in [0, 1) (NumPy or TF) onto actions uniform over the head's space:
    within a bounded Box's bounds, or over each discrete dimension's choices.

    Raises:
        ValueError: an unbounded Box has no uniform distribution.
    """
    if head.continuous:
        if head.low is None:
            raise ValueError("uniform actions need a bounded Box action space")
        low, high = head.low.astype(np.float32), head.high.astype(np.float32)
        return low + unit * (high - low)
    choices = np.asarray(head.nvec if head.nvec is not None else head.num_outputs, np.float32)
    if isinstance(unit, np.ndarray):
        return np.floor(unit * choices).astype(np.int32)
    return tf.cast(tf.floor(unit * choices), tf.int32)


def uniform_or_sample_host(policy, rng: np.random.Generator, epsilon: float = 0.0):
    """With probability epsilon a uniform action over the space, else a sample.

    Off-policy actor-critics fill their replay with uniform actions before
    learning starts (their exploration schedule gives epsilon 1, then 0).
    """
    samples = policy.sample(rng)
    explore = rng.random(len(samples)) < epsilon
    uniform = uniform_from_unit(policy.head, rng.random(samples.shape, np.float32))
    return np.where(explore.reshape(-1, *[1] * (samples.ndim - 1)), uniform, samples)


def uniform_or_sample_graph(policy, head, seed: tf.Tensor, epsilon: tf.Tensor = 0.0):
    """With probability epsilon a uniform action over the space, else a sample."""
    explore_seed, uniform_seed, sample_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3)
    )
    samples = head.sample(policy, sample_seed)
    batch = tf.shape(samples)[0]
    explore = tf.random.stateless_uniform([batch], explore_seed) < epsilon
    uniform = uniform_from_unit(head, tf.random.stateless_uniform(tf.shape(samples), uniform_seed))
    explore = tf.reshape(
        explore, tf.concat([[batch], tf.ones([tf.rank(samples) - 1], tf.int32)], 0)
    )
    return tf.where(explore, uniform, samples)


# The registered rules (rl/algos/act_select/__init__.py names them).
sample = ActSelect(sample_host, sample_graph, frozenset({DISTRIBUTION}))
greedy = ActSelect(greedy_host, greedy_graph, frozenset({DISTRIBUTION, Q_VALUES}))
epsilon_greedy = ActSelect(
    epsilon_greedy_host, epsilon_greedy_graph, frozenset({Q_VALUES}), uses_epsilon=True
)
uniform_or_sample = ActSelect(
    uniform_or_sample_host, uniform_or_sample_graph, frozenset({DISTRIBUTION}), uses_epsilon=True
)
