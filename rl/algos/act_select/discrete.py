"""Action selection for discrete action spaces: greedy, categorical, epsilon-greedy.

Each rule is registered once, as an ``ActSelect`` holding its NumPy (host) and
TensorFlow (graph) forms; ``tests/test_act_select.py`` checks they agree.
``preferences`` are logits for a policy or Q-values for a value method.
Randomness comes in explicitly (a ``np.random.Generator`` or a stateless
TF seed drawn from the caller's generator), never from a global RNG.
"""

import numpy as np

from rl._tf import tf
from rl.algos.act_select.base import ActSelect


# --- greedy ---------------------------------------------------------------------
def greedy_host(preferences: np.ndarray, rng: np.random.Generator, epsilon: float = 0.0):
    """argmax_a preferences[b, a]; ``rng`` and ``epsilon`` are unused."""
    del rng, epsilon
    return np.argmax(preferences, axis=-1).astype(np.int32)


def greedy_graph(preferences: tf.Tensor, seed: tf.Tensor, epsilon: tf.Tensor = 0.0) -> tf.Tensor:
    """argmax_a preferences[b, a]; ``seed`` and ``epsilon`` are unused."""
    del seed, epsilon
    return tf.argmax(preferences, axis=-1, output_type=tf.int32)


# --- categorical ----------------------------------------------------------------
def categorical_host(preferences: np.ndarray, rng: np.random.Generator, epsilon: float = 0.0):
    """a ~ Categorical(logits=preferences), by the Gumbel-max trick; ``epsilon`` unused.

    argmax(logits + Gumbel noise) is an exact sample of softmax(logits)
    (Gumbel 1954; see Maddison et al. 2014, "A* Sampling").
    """
    del epsilon
    return np.argmax(preferences + rng.gumbel(size=preferences.shape), axis=-1).astype(np.int32)


def categorical_graph(preferences: tf.Tensor, seed: tf.Tensor, epsilon: tf.Tensor = 0.0):
    """a ~ Categorical(logits=preferences), sampled with a stateless seed."""
    del epsilon
    return tf.random.stateless_categorical(preferences, 1, seed, dtype=tf.int32)[:, 0]


# --- epsilon-greedy ---------------------------------------------------------------
def epsilon_greedy_host(preferences: np.ndarray, rng: np.random.Generator, epsilon: float = 0.0):
    """With probability epsilon a uniform random action, else the argmax."""
    batch, num_actions = preferences.shape
    explore = rng.random(batch) < epsilon
    random_actions = rng.integers(0, num_actions, batch, dtype=np.int32)
    return np.where(explore, random_actions, greedy_host(preferences, rng))


def epsilon_greedy_graph(preferences: tf.Tensor, seed: tf.Tensor, epsilon: tf.Tensor = 0.0):
    """With probability epsilon a uniform random action, else the argmax."""
    explore_seed, action_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    batch = tf.shape(preferences)[0]
    num_actions = tf.shape(preferences)[-1]
    explore = tf.random.stateless_uniform([batch], explore_seed) < epsilon
    random_actions = tf.random.stateless_uniform(
        [batch], action_seed, minval=0, maxval=num_actions, dtype=tf.int32
    )
    return tf.where(explore, random_actions, greedy_graph(preferences, seed))


# The registered rules (rl/algos/act_select/__init__.py names them).
greedy = ActSelect(greedy_host, greedy_graph)
categorical = ActSelect(categorical_host, categorical_graph)
epsilon_greedy = ActSelect(epsilon_greedy_host, epsilon_greedy_graph)
