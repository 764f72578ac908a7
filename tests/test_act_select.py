"""act_select rules: the NumPy (host) and TensorFlow (graph) forms choose alike."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from rl import registry
from rl.algos.act_select.base import DISTRIBUTION, Q_VALUES
from rl.algos.act_select.rules import epsilon_greedy, greedy, sample
from rl.models.distributions import action_head

pytestmark = pytest.mark.unit

Q = np.array([[0.0, 3.0, 1.0], [2.0, -1.0, 0.0]], np.float32)
SEED = tf.constant([1, 2], tf.int32)


def host(rule, policy, epsilon=0.0, seed=0, head=None):
    if head is not None:
        policy = head.host(policy)
    return rule.host(policy, np.random.default_rng(seed), epsilon)


def graph(rule, policy, epsilon=0.0, seed=SEED, head=None):
    policy = tf.constant(policy)
    if head is not None:
        policy = head.distribution(policy)
    return rule.graph(policy, head, seed, epsilon).numpy()


def categorical(n):
    return action_head(gym.spaces.Discrete(n))


def test_greedy_is_argmax_of_q_values_and_mode_of_a_distribution():
    for form in (host, graph):
        np.testing.assert_array_equal(form(greedy, Q), [1, 0])
        np.testing.assert_array_equal(form(greedy, Q, head=categorical(3)), [1, 0])
    assert host(greedy, Q).dtype == np.int32


@pytest.mark.parametrize("form", [host, graph])
def test_sample_matches_softmax_frequencies(form):
    # softmax([log .2, log .8]) = [.2, .8]; 20,000 draws: std of the mean 0.003.
    logits = np.log(np.array([[0.2, 0.8]] * 20_000, np.float32))
    assert abs(form(sample, logits, head=categorical(2)).mean() - 0.8) < 0.01
    # Three actions: softmax([0, log 2, log 5]) = [1/8, 2/8, 5/8].
    logits3 = np.log(np.array([[1.0, 2.0, 5.0]] * 40_000, np.float32))
    counts = np.bincount(form(sample, logits3, head=categorical(3)), minlength=3) / 40_000
    np.testing.assert_allclose(counts, [0.125, 0.25, 0.625], atol=0.01)


def test_sample_is_seeded():
    logits, head = np.zeros((1000, 4), np.float32), categorical(4)
    np.testing.assert_array_equal(
        host(sample, logits, seed=3, head=head), host(sample, logits, seed=3, head=head)
    )
    assert (host(sample, logits, seed=3, head=head) != host(sample, logits, 0, 4, head)).any()
    other = tf.constant([3, 4], tf.int32)
    np.testing.assert_array_equal(
        graph(sample, logits, head=head), graph(sample, logits, head=head)
    )
    assert (graph(sample, logits, head=head) != graph(sample, logits, 0, other, head)).any()


@pytest.mark.parametrize("form", [host, graph])
def test_epsilon_greedy_extremes_and_rate(form):
    big = np.tile(Q, [5000, 1])
    np.testing.assert_array_equal(form(epsilon_greedy, big, 0.0), np.tile([1, 0], 5000))
    uniform = form(epsilon_greedy, big, 1.0)
    assert set(np.unique(uniform)) == {0, 1, 2}
    greedy_share = (form(epsilon_greedy, big, 0.3) == np.tile([1, 0], 5000)).mean()
    # greedy with prob 0.7, plus 1/3 of the random picks: 0.7 + 0.1 = 0.8
    assert abs(greedy_share - 0.8) < 0.02


def test_every_registered_rule_says_what_it_acts_on_and_returns_int32_for_discrete():
    for name in registry.act_select.names():
        rule = registry.act_select.get(name)
        assert rule.acts_on and rule.acts_on <= {DISTRIBUTION, Q_VALUES}, name
        if Q_VALUES in rule.acts_on:
            assert host(rule, Q, 0.5).dtype == np.int32, name
            assert graph(rule, Q, 0.5).dtype == np.int32, name
        if DISTRIBUTION in rule.acts_on:
            assert host(rule, Q, 0.5, head=categorical(3)).dtype == np.int32, name
            assert graph(rule, Q, 0.5, head=categorical(3)).dtype == np.int32, name


@pytest.mark.parametrize(
    "space", [gym.spaces.Discrete(3), gym.spaces.MultiDiscrete([2, 5])], ids=["discrete", "multi"]
)
def test_uniform_or_sample_at_epsilon_1_covers_every_discrete_choice_evenly(space):
    from rl.algos.act_select.rules import uniform_or_sample

    head = action_head(space)
    logits = np.tile(np.float32([[9.0] + [-9.0] * (head.num_outputs - 1)]), (4000, 1))
    for form in (host, graph):
        actions = form(uniform_or_sample, logits, 1.0, head=head).reshape(4000, -1)
        for dim, n in enumerate(np.atleast_1d(head.nvec or space.n)):
            counts = np.bincount(actions[:, dim], minlength=n)
            assert len(counts) == n  # never outside the choices
            np.testing.assert_allclose(counts / 4000, 1 / n, atol=0.04)


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_epsilon_greedy_explores_evenly_among_the_legal_moves_of_a_masked_row(epsilon):
    # Moves 0, 2 and 3 of 5 legal: exploring rows pick each a third of the time (30,000
    # rows, 4 standard deviations), and never an illegal move.
    q = np.tile(np.where([True, False, True, True, False], [0.0, 0, 9, 0, 0], -1e9), (30_000, 1))
    actions = epsilon_greedy.host(q, np.random.default_rng(0), epsilon)
    assert set(np.unique(actions)) == {0, 2, 3}
    explored = np.bincount(actions, minlength=5) / len(q)
    explored[2] -= 1 - epsilon  # the greedy rows' move
    np.testing.assert_allclose(explored[[0, 2, 3]] / epsilon, [1 / 3] * 3, atol=4 * 0.0039)
