"""act_select rules: the NumPy (host) and TensorFlow (graph) forms choose alike."""

import numpy as np
import pytest
import tensorflow as tf

from rl import registry
from rl.algos.act_select.discrete import categorical, epsilon_greedy, greedy

PREFS = np.array([[0.0, 3.0, 1.0], [2.0, -1.0, 0.0]], np.float32)
SEED = tf.constant([1, 2], tf.int32)


def host(rule, prefs, epsilon=0.0, seed=0):
    return rule.host(prefs, np.random.default_rng(seed), epsilon)


def graph(rule, prefs, epsilon=0.0, seed=SEED):
    return rule.graph(tf.constant(prefs), seed, epsilon).numpy()


def test_greedy_is_argmax_in_both_forms():
    np.testing.assert_array_equal(host(greedy, PREFS), [1, 0])
    np.testing.assert_array_equal(graph(greedy, PREFS), [1, 0])
    assert host(greedy, PREFS).dtype == np.int32


@pytest.mark.parametrize("form", [host, graph])
def test_categorical_matches_softmax_frequencies(form):
    # softmax([log .2, log .8]) = [.2, .8]; 20,000 draws: std of the mean 0.003.
    logits = np.log(np.array([[0.2, 0.8]] * 20_000, np.float32))
    sample = form(categorical, logits)
    assert abs(sample.mean() - 0.8) < 0.01
    # Three actions: softmax([0, log 2, log 5]) = [1/8, 2/8, 5/8].
    logits3 = np.log(np.array([[1.0, 2.0, 5.0]] * 40_000, np.float32))
    counts = np.bincount(form(categorical, logits3), minlength=3) / 40_000
    np.testing.assert_allclose(counts, [0.125, 0.25, 0.625], atol=0.01)


def test_categorical_is_seeded():
    logits = np.zeros((1000, 4), np.float32)
    np.testing.assert_array_equal(
        host(categorical, logits, seed=3), host(categorical, logits, seed=3)
    )
    assert (host(categorical, logits, seed=3) != host(categorical, logits, seed=4)).any()
    other = tf.constant([3, 4], tf.int32)
    np.testing.assert_array_equal(graph(categorical, logits), graph(categorical, logits))
    assert (graph(categorical, logits) != graph(categorical, logits, seed=other)).any()


@pytest.mark.parametrize("form", [host, graph])
def test_epsilon_greedy_extremes_and_rate(form):
    big = np.tile(PREFS, [5000, 1])
    np.testing.assert_array_equal(form(epsilon_greedy, big, 0.0), np.tile([1, 0], 5000))
    uniform = form(epsilon_greedy, big, 1.0)
    assert set(np.unique(uniform)) == {0, 1, 2}
    greedy_share = (form(epsilon_greedy, big, 0.3) == np.tile([1, 0], 5000)).mean()
    # greedy with prob 0.7, plus 1/3 of the random picks: 0.7 + 0.1 = 0.8
    assert abs(greedy_share - 0.8) < 0.02


def test_every_registered_rule_has_both_forms_returning_int32_actions():
    for name in registry.act_select.names():
        rule = registry.act_select.get(name)
        assert host(rule, PREFS, 0.5).dtype == np.int32, name
        assert graph(rule, PREFS, 0.5).dtype == np.int32, name
