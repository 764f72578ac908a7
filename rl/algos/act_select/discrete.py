"""Action selection for discrete action spaces.

Every function has one signature, so an hparam can swap them by name:
``fn(preferences [B, A], seed [2] int32/int64, epsilon scalar) -> actions [B]
int32``. ``preferences`` are logits for a policy or Q-values for a value
method; ``seed`` is a stateless [2] int32 seed drawn from the caller's
``tf.random.Generator`` (never the global RNG), so acting is reproducible and
checkpointable; ``epsilon`` is the exploration rate where one applies.
"""

import tensorflow as tf
import tensorflow_probability as tfp

from rl import registry


@registry.act_select.register("greedy")
def greedy(preferences: tf.Tensor, seed: tf.Tensor, epsilon: tf.Tensor = 0.0) -> tf.Tensor:
    """argmax_a preferences[b, a]. ``seed`` and ``epsilon`` are unused."""
    del seed, epsilon
    return tf.argmax(preferences, axis=-1, output_type=tf.int32)


@registry.act_select.register("categorical")
def categorical(preferences: tf.Tensor, seed: tf.Tensor, epsilon: tf.Tensor = 0.0) -> tf.Tensor:
    """Samples a ~ Categorical(logits=preferences). ``epsilon`` is unused."""
    del epsilon
    distribution = tfp.distributions.Categorical(logits=preferences, dtype=tf.int32)
    return distribution.sample(seed=seed)


@registry.act_select.register("epsilon_greedy")
def epsilon_greedy(preferences: tf.Tensor, seed: tf.Tensor, epsilon: tf.Tensor = 0.0) -> tf.Tensor:
    """With probability epsilon a uniform random action, else the argmax."""
    explore_seed, action_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    batch = tf.shape(preferences)[0]
    num_actions = tf.shape(preferences)[-1]
    explore = tf.random.stateless_uniform([batch], explore_seed) < epsilon
    random_actions = tf.random.stateless_uniform(
        [batch], action_seed, minval=0, maxval=num_actions, dtype=tf.int32
    )
    return tf.where(explore, random_actions, greedy(preferences, seed))
