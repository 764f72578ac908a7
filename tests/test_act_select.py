"""act_select functions: greedy, categorical, epsilon-greedy with explicit seeds."""

import numpy as np
import tensorflow as tf

from rl.algos.act_select.discrete import categorical, epsilon_greedy, greedy

PREFS = tf.constant([[0.0, 3.0, 1.0], [2.0, -1.0, 0.0]])
SEED = tf.constant([1, 2], tf.int32)


def test_greedy_is_argmax():
    np.testing.assert_array_equal(greedy(PREFS, SEED).numpy(), [1, 0])


def test_categorical_matches_softmax_frequencies_and_is_seeded():
    logits = tf.math.log(tf.constant([[0.2, 0.8]] * 20_000))
    sample = categorical(logits, SEED).numpy()
    assert abs(sample.mean() - 0.8) < 0.01
    np.testing.assert_array_equal(sample, categorical(logits, SEED).numpy())
    other = categorical(logits, tf.constant([3, 4], tf.int32)).numpy()
    assert (sample != other).any()


def test_epsilon_greedy_extremes_and_rate():
    big = tf.tile(PREFS, [5000, 1])
    np.testing.assert_array_equal(epsilon_greedy(big, SEED, 0.0).numpy(), np.tile([1, 0], 5000))
    uniform = epsilon_greedy(big, SEED, 1.0).numpy()
    assert set(np.unique(uniform)) == {0, 1, 2}
    greedy_share = (epsilon_greedy(big, SEED, 0.3).numpy() == np.tile([1, 0], 5000)).mean()
    # greedy with prob 0.7, plus 1/3 of the random picks: 0.7 + 0.1 = 0.8
    assert abs(greedy_share - 0.8) < 0.02


def test_generator_driven_seeds_make_acting_reproducible():
    g1, g2 = tf.random.Generator.from_seed(7), tf.random.Generator.from_seed(7)
    a = [categorical(PREFS, tf.cast(g1.make_seeds(1)[:, 0], tf.int32)).numpy() for _ in range(5)]
    b = [categorical(PREFS, tf.cast(g2.make_seeds(1)[:, 0], tf.int32)).numpy() for _ in range(5)]
    np.testing.assert_array_equal(a, b)
