"""rl/seeding.py: actors acting for shares of a batch draw the rows one actor would draw."""

import gymnasium as gym
import numpy as np
import pytest

from rl import seeding
from rl.algos.act_select.rules import epsilon_greedy_host, nth_legal, uniform_or_sample_host
from rl.models.distributions import action_head

pytestmark = pytest.mark.unit

TOTAL = 6
SHARES = [(0, 2), (2, 4), (4, 6)]


def shares_of(draw):
    """``draw(rng)`` by one actor for all rows, and by three actors for two rows each."""
    whole = draw(seeding.stream(5, seeding.ACT))
    parts = []
    for rows in SHARES:
        shared = seeding.RowDraws(seeding.stream(5, seeding.ACT), rows, TOTAL)
        parts.append((draw(shared), shared.bit_generator.state))
    return whole, parts


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.gumbel(size=(n, 3)),
        lambda rng, n: rng.standard_normal((n, 2)),
        lambda rng, n: rng.random(n),
        lambda rng, n: rng.random((n, 2), np.float32),
        lambda rng, n: rng.integers(0, 7, n, dtype=np.int32),
    ],
)
def test_each_actor_draws_its_rows_of_the_whole_batch_and_all_advance_alike(draw):
    def twice(rng):  # a second draw shows the generators stayed in step
        n = TOTAL if isinstance(rng, np.random.Generator) else 2
        return np.concatenate([draw(rng, n), draw(rng, n)])

    whole, parts = shares_of(twice)
    first, second = whole[:TOTAL], whole[TOTAL:]
    for (a, b), (values, _) in zip(SHARES, parts):
        np.testing.assert_array_equal(values, np.concatenate([first[a:b], second[a:b]]))
        assert values.dtype == whole.dtype
    assert parts[0][1] == parts[1][1] == parts[2][1]


def test_a_draw_that_is_not_per_row_is_the_same_in_every_actor():
    whole, parts = shares_of(lambda rng: np.array([rng.random(), *rng.integers(0, 9, 5)]))
    for values, _ in parts:
        np.testing.assert_array_equal(values, whole)


def test_a_shared_generator_continues_from_a_state_it_was_given():
    rng = seeding.stream(5, seeding.ACT)
    rng.random(3)
    state = rng.bit_generator.state
    np.testing.assert_array_equal(seeding.generator_at(state).random(4), rng.random(4))


def acted_in_shares(rule, policy_of_rows, epsilon):
    """``rule``'s actions by one actor for all rows, and by three actors for two rows each;
    ``policy_of_rows(first, end)`` is the policy of those rows."""
    whole = rule(policy_of_rows(0, TOTAL), seeding.stream(5, seeding.ACT), epsilon)
    parts = [
        rule(
            policy_of_rows(*rows),
            seeding.RowDraws(seeding.stream(5, seeding.ACT), rows, TOTAL),
            epsilon,
        )
        for rows in SHARES
    ]
    return whole, np.concatenate(parts)


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_epsilon_greedy_in_shares_equals_one_actor_also_where_moves_are_illegal(epsilon):
    # A masked game's Q-values: some rows' random action lands on an illegal move and is
    # replaced by a pick among the legal ones.
    legal = np.random.default_rng(0).random((TOTAL, 5)) < 0.4
    legal[:, 0] = True
    q = np.where(legal, np.arange(5.0), -1e9)
    whole, shares = acted_in_shares(epsilon_greedy_host, lambda a, b: q[a:b], epsilon)
    np.testing.assert_array_equal(shares, whole)
    assert legal[np.arange(TOTAL), whole].all()


def test_uniform_or_sample_in_shares_equals_one_actor():
    head = action_head(gym.spaces.Discrete(5))
    logits = np.random.default_rng(0).normal(size=(TOTAL, 5))
    whole, shares = acted_in_shares(
        uniform_or_sample_host, lambda a, b: head.host(logits[a:b]), 0.5
    )
    np.testing.assert_array_equal(shares, whole)


def test_nth_legal_picks_evenly_among_the_legal_moves():
    legal = np.array([[True, False, True, True], [False, True, False, False]])
    np.testing.assert_array_equal(nth_legal(legal, np.array([0.0, 0.0])), [0, 1])
    np.testing.assert_array_equal(nth_legal(legal, np.array([0.34, 0.99])), [2, 1])
    np.testing.assert_array_equal(nth_legal(legal, np.array([0.99, 0.5])), [3, 1])


def test_copies_start_with_the_base_seed_and_more_copies_keep_the_seeds_before():
    """Copy 0 is the run without --copies, so ten copies' statistics include the default
    seed; growing 3 copies to 10 trains only the 7 new ones."""
    ten = seeding.copy_seeds(1, 10)
    assert ten[0] == 1
    assert seeding.copy_seeds(1, 3) == ten[:3]
    assert len(set(ten)) == 10
    assert ten[1:] == [seeding.derived_seed(1, seeding.COPIES, i) for i in range(1, 10)]
