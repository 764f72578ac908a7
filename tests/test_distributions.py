"""Policy heads: chosen by the action space; NumPy twins agree with TFP."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from rl.models.distributions import TANH_LIMIT, action_head

pytestmark = pytest.mark.unit

RNG = np.random.default_rng(0)
SPACES = {
    "discrete": gym.spaces.Discrete(4),
    "multi_discrete": gym.spaces.MultiDiscrete([3, 2, 4]),
    "box_unbounded": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
    "box_bounded": gym.spaces.Box(
        np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    ),
}


def test_the_space_picks_the_head():
    assert action_head(SPACES["discrete"]).kind == "categorical"
    assert action_head(SPACES["multi_discrete"]).kind == "multi_categorical"
    assert action_head(SPACES["box_unbounded"]).kind == "gaussian"
    assert action_head(SPACES["box_bounded"]).kind == "tanh_gaussian"
    assert action_head(SPACES["box_bounded"], "gaussian").kind == "gaussian"
    assert action_head(SPACES["multi_discrete"]).num_outputs == 3 * 4


@pytest.mark.parametrize(
    "space, kind, message",
    [
        (gym.spaces.Discrete(2), "gaussian", "needs a Box action space"),
        (SPACES["box_unbounded"], "tanh_gaussian", "needs finite bounds"),
        (gym.spaces.MultiBinary(3), "auto", "valid: Discrete, MultiDiscrete, Box"),
        (gym.spaces.Discrete(2), "beta", "valid: auto, gaussian, tanh_gaussian"),
    ],
)
def test_heads_that_do_not_exist_are_clear_errors(space, kind, message):
    with pytest.raises(ValueError, match=message):
        action_head(space, kind)


def outputs_and_log_std(head, batch=64):
    outputs = RNG.normal(size=(batch, head.num_outputs)).astype(np.float32) * 2
    log_std = RNG.normal(size=(head.action_size,)).astype(np.float32) * 0.5
    return outputs, (log_std if head.continuous else None)


@pytest.mark.parametrize("name", SPACES)
def test_host_log_prob_and_mode_match_tfp(name):
    head = action_head(SPACES[name])
    outputs, log_std = outputs_and_log_std(head)
    dist = head.distribution(
        tf.constant(outputs), None if log_std is None else tf.constant(log_std)
    )
    twin = head.host(outputs, log_std)
    actions = twin.sample(RNG)
    assert actions.shape == (64, *head.action_shape) and actions.dtype == head.action_dtype
    # Near a tanh bound float32 atanh (TF) loses digits that float64 (NumPy) keeps.
    np.testing.assert_allclose(
        twin.log_prob(actions),
        head.log_prob(dist, tf.constant(actions)).numpy(),
        rtol=1e-3,
        atol=1e-4,
    )
    np.testing.assert_allclose(twin.mode(), head.mode(dist).numpy(), rtol=1e-5, atol=1e-6)


def test_categorical_log_prob_by_hand():
    # softmax([0, log 3]) = [1/4, 3/4]
    head = action_head(gym.spaces.Discrete(2))
    twin = head.host(np.array([[0.0, np.log(3.0)]]))
    np.testing.assert_allclose(twin.log_prob(np.array([1])), [np.log(0.75)], rtol=1e-6)


def test_multi_categorical_never_samples_padding_and_sums_log_probs():
    head = action_head(SPACES["multi_discrete"])
    outputs = np.zeros((20_000, head.num_outputs), np.float32)
    actions = head.host(outputs).sample(RNG)
    assert (actions < np.array([3, 2, 4])).all()
    # Uniform over 3 x 2 x 4 = 24 joint actions.
    np.testing.assert_allclose(head.host(outputs[:1]).log_prob(actions[:1]), [np.log(1 / 24)])
    assert abs((actions[:, 1] == 1).mean() - 0.5) < 0.02


def test_gaussian_log_prob_by_hand_and_clipping_only_towards_the_env():
    head = action_head(SPACES["box_bounded"], "gaussian")
    twin = head.host(np.array([[0.0, 0.0]]), np.log(np.array([1.0, 2.0])))
    # N(0,1) at 1 and N(0,2) at 0: -0.5 - log sqrt(2 pi) - log 2 - log sqrt(2 pi)
    expected = -0.5 - np.log(2.0) - np.log(2 * np.pi)
    np.testing.assert_allclose(twin.log_prob(np.array([[1.0, 0.0]])), [expected], rtol=1e-6)
    np.testing.assert_array_equal(head.to_env(np.array([[3.0, -1.0]])), [[2.0, 0.0]])


def test_tanh_gaussian_stays_inside_the_bounds_and_is_finite_at_them():
    head = action_head(SPACES["box_bounded"])
    outputs = np.array([[30.0, -30.0]] * 4, np.float32)  # saturated tanh
    twin = head.host(outputs, np.zeros(2, np.float32))
    actions = twin.sample(RNG)
    assert (actions >= head.low).all() and (actions <= head.high).all()
    at_bounds = np.array([[2.0, 0.0]], np.float32)
    assert np.isfinite(twin.log_prob(at_bounds)).all()
    dist = head.distribution(tf.constant(outputs[:1]), tf.zeros(2))
    assert np.isfinite(head.log_prob(dist, tf.constant(at_bounds)).numpy()).all()
    assert TANH_LIMIT < 1.0
    np.testing.assert_allclose(head.host(np.zeros((1, 2))).mode(), [[0.0, 0.5]], atol=1e-7)


@pytest.mark.parametrize("name", ["box_unbounded", "box_bounded"])
def test_gaussian_samples_have_the_right_spread(name):
    head = action_head(SPACES[name], "gaussian")
    twin = head.host(np.zeros((50_000, 2)), np.log(np.array([0.5, 2.0])))
    samples = twin.sample(RNG)
    np.testing.assert_allclose(samples.std(axis=0), [0.5, 2.0], rtol=0.02)
