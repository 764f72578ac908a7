"""V-trace (rl/algos/grad_comp/vtrace.py) against values computed by hand, eagerly and compiled."""

import math

import numpy as np
import pytest
import tensorflow as tf

from rl.algos.grad_comp.gae import gae_advantages
from rl.algos.grad_comp.vtrace import vtrace_loss, vtrace_targets

pytestmark = pytest.mark.unit

MODES = {"eager": lambda f: f, "tf.function": tf.function}
INF = 1e9  # a threshold that clips nothing


def column(*values):
    """One trajectory, time-major: [T, 1]."""
    return tf.constant([[v] for v in values], tf.float32)


def flags(*values):
    return tf.constant([[v] for v in values])


def log_ratios(*ratios):
    """Behaviour and target log-probs [T, 1] whose pi / mu are ``ratios``."""
    behaviour = column(*[-1.0] * len(ratios))
    return behaviour, behaviour + column(*[math.log(r) for r in ratios])


# One trajectory with no episode end, gamma 0.9:
#   V = [.5, 1, 1.5], V(x') = [1, 1.5, 2], r = [1, 2, 3]
#   TD errors r + .9 V(x') - V: [1.4, 2.35, 3.3]; pi / mu = [2, .5, 1]
REWARDS, VALUES, NEXT_VALUES = (1, 2, 3), (0.5, 1.0, 1.5), (1.0, 1.5, 2.0)
RATIOS = (2.0, 0.5, 1.0)


def targets(mode, rho_bar, c_bar, pg_bar, lam=1.0):
    behaviour, target = log_ratios(*RATIOS)
    fn = MODES[mode](
        lambda *a: vtrace_targets(
            *a,
            lam=lam,
            clip_rho_threshold=rho_bar,
            clip_c_threshold=c_bar,
            clip_pg_rho_threshold=pg_bar,
        )
    )
    vs, pg, ratios = fn(
        behaviour,
        target,
        column(*REWARDS),
        column(*VALUES),
        column(*NEXT_VALUES),
        column(0.9, 0.9, 0.9),
        flags(False, False, False),
    )
    np.testing.assert_allclose(ratios.numpy()[:, 0], RATIOS, rtol=1e-6)
    return vs.numpy()[:, 0], pg.numpy()[:, 0]


@pytest.mark.parametrize("mode", MODES)
def test_vtrace_hand_computed_with_the_papers_thresholds(mode):
    # rho = c = min(1, pi/mu) = [1, .5, 1].
    # deltas = rho * TD = [1.4, 1.175, 3.3]
    # v - V: t2 = 3.3; t1 = 1.175 + .9*.5*3.3 = 2.66; t0 = 1.4 + .9*1*2.66 = 3.794
    # pg: t0 = 1 * (1 + .9*(1 + 2.66) - .5) = 3.794; t1 = .5 * (2 + .9*(1.5 + 3.3) - 1)
    #     = 2.66; t2 = 1 * (3 + .9*2 - 1.5) = 3.3 (the last step bootstraps V(x'))
    vs, pg = targets(mode, 1.0, 1.0, 1.0)
    np.testing.assert_allclose(vs, [4.294, 3.66, 4.8], rtol=1e-5)
    np.testing.assert_allclose(pg, [3.794, 2.66, 3.3], rtol=1e-5)


@pytest.mark.parametrize(
    "rho_bar, c_bar, pg_bar, v0, pg0",
    [
        # Nothing clipped: rho_0 = c_0 = 2. v0 - V0 = 2*1.4 + .9*2*2.66 = 7.588;
        # pg0 = 2 * 3.794 = 7.588.
        (INF, INF, INF, 0.5 + 7.588, 7.588),
        # Only rho bar = 1.5: delta_0 = 1.5*1.4 = 2.1, the trace is not cut:
        # v0 - V0 = 2.1 + 4.788 = 6.888; the policy gradient is untouched.
        (1.5, INF, INF, 0.5 + 6.888, 7.588),
        # Only c bar = .8: delta_0 = 2.8 and the trace weight c_0 = .8:
        # v0 - V0 = 2.8 + .9*.8*2.66 = 4.7152.
        (INF, 0.8, INF, 0.5 + 4.7152, 7.588),
        # Only the policy-gradient bar = 1.2: pg0 = 1.2 * 3.794 = 4.5528.
        (INF, INF, 1.2, 0.5 + 7.588, 4.5528),
        # All three: v0 - V0 = 2.1 + .9*.8*2.66 = 4.0152; pg0 = 4.5528.
        (1.5, 0.8, 1.2, 0.5 + 4.0152, 4.5528),
    ],
)
def test_each_threshold_clips_only_its_own_weight(rho_bar, c_bar, pg_bar, v0, pg0):
    vs, pg = targets("eager", rho_bar, c_bar, pg_bar)
    # Steps 1 and 2 have pi/mu <= 1 and are the same under every threshold
    # here (c_2 is never used: nothing follows the last step).
    np.testing.assert_allclose(vs, [v0, 3.66, 4.8], rtol=1e-5)
    np.testing.assert_allclose(pg, [pg0, 2.66, 3.3], rtol=1e-5)


def test_lambda_shortens_the_traces():
    # c = lam * min(1, pi/mu) with lam .5: c_0 = .5, c_1 = .25.
    # v - V: t2 = 3.3; t1 = 1.175 + .9*.25*3.3 = 1.9175; t0 = 1.4 + .9*.5*1.9175 = 2.262875
    vs, pg = targets("eager", 1.0, 1.0, 1.0, lam=0.5)
    np.testing.assert_allclose(vs, [2.762875, 2.9175, 4.8], rtol=1e-5)
    # pg uses the next state's (shorter) target: t0 = 1 + .9*(1 + 1.9175) - .5
    np.testing.assert_allclose(pg, [3.12575, 0.5 * (1 + 0.9 * 4.8), 3.3], rtol=1e-5)


def sum_form(ratios, rewards, values, bootstrap, gamma, lam, rho_bar, c_bar):
    """The paper's eq. 1 written as its sum, for one trajectory with no episode end:
    v_s = V(x_s) + sum_{t>=s} gamma^(t-s) (prod_{s<=i<t} c_i) rho_t (r_t + gamma V(x_{t+1}) - V(x_t)).
    """
    steps = len(rewards)
    later = np.append(values[1:], bootstrap)
    rho = np.minimum(rho_bar, ratios)
    c = lam * np.minimum(c_bar, ratios)
    vs = np.zeros(steps)
    for s in range(steps):
        total = values[s]
        for t in range(s, steps):
            trace = np.prod(c[s:t])
            total += gamma ** (t - s) * trace * rho[t] * (rewards[t] + gamma * later[t] - values[t])
        vs[s] = total
    return vs


@pytest.mark.parametrize("mode", MODES)
def test_vtrace_matches_the_sum_form_on_random_trajectories(mode):
    rng = np.random.default_rng(0)
    steps, envs, gamma, lam = 5, 2, 0.95, 0.9
    behaviour = rng.normal(size=(steps, envs)).astype(np.float32) - 1.0
    target = behaviour + rng.normal(scale=0.7, size=(steps, envs)).astype(np.float32)
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    bootstrap = rng.normal(size=envs).astype(np.float32)
    next_values = np.concatenate([values[1:], bootstrap[None]], 0)
    fn = MODES[mode](
        lambda *a: vtrace_targets(
            *a, lam=lam, clip_rho_threshold=1.3, clip_c_threshold=0.9, clip_pg_rho_threshold=1.1
        )
    )
    vs, pg, _ = fn(
        tf.constant(behaviour),
        tf.constant(target),
        tf.constant(rewards),
        tf.constant(values),
        tf.constant(next_values),
        tf.fill([steps, envs], gamma),
        tf.zeros([steps, envs], tf.bool),
    )
    ratios = np.exp(target.astype(np.float64) - behaviour)
    for b in range(envs):
        expected = sum_form(
            ratios[:, b], rewards[:, b], values[:, b], bootstrap[b], gamma, lam, 1.3, 0.9
        )
        np.testing.assert_allclose(vs.numpy()[:, b], expected, rtol=1e-4, atol=1e-5)
        later = np.append(expected[1:], bootstrap[b])
        pg_expected = np.minimum(1.1, ratios[:, b]) * (rewards[:, b] + gamma * later - values[:, b])
        np.testing.assert_allclose(pg.numpy()[:, b], pg_expected, rtol=1e-4, atol=1e-5)


def test_on_policy_with_lambda_1_equals_gae_lambda_1():
    # pi = mu and lam = 1: v_t is the n-step return bootstrapped at episode
    # ends and at the rollout's end, i.e. GAE(1)'s returns, and the policy
    # gradient's advantage is GAE(1)'s advantage, terminations and
    # truncations included.
    rng = np.random.default_rng(1)
    steps, envs, gamma = 6, 2, 0.9
    rewards = tf.constant(rng.normal(size=(steps, envs)), tf.float32)
    values = tf.constant(rng.normal(size=(steps, envs)), tf.float32)
    next_values = tf.constant(rng.normal(size=(steps, envs)), tf.float32)
    terminated = tf.constant(np.array([[0, 0], [1, 0], [0, 0], [0, 0], [0, 1], [0, 0]], bool))
    truncated = tf.constant(np.array([[0, 0], [0, 0], [0, 1], [0, 0], [0, 0], [0, 0]], bool))
    # Where no episode ended, V(x'_t) is V(x_{t+1}), as in any real rollout.
    done = tf.logical_or(terminated, truncated)[:-1]
    next_values = tf.concat([tf.where(done, next_values[:-1], values[1:]), next_values[-1:]], 0)
    log_probs = tf.constant(rng.normal(size=(steps, envs)), tf.float32)
    discounts = gamma * (1.0 - tf.cast(terminated, tf.float32))
    vs, pg, _ = vtrace_targets(
        log_probs, log_probs, rewards, values, next_values, discounts, truncated, lam=1.0
    )
    advantages, returns = gae_advantages(
        rewards, values, next_values, terminated, truncated, gamma, 1.0
    )
    np.testing.assert_allclose(vs.numpy(), returns.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pg.numpy(), advantages.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_terminated_is_not_bootstrapped_truncated_is_and_both_cut_the_trace(mode):
    # Two envs, the same data but env 0 terminates at t=1 and env 1 is cut
    # by the time limit at t=1, whose final observation has V = 4. pi = mu, gamma .9.
    # Terminated (discount_1 = 0): v - V: t2 = 3.3; t1 = 2 - 1 = 1; t0 = 1.4 + .9*1 = 2.3
    #   pg: t0 = 1 + .9*(1 + 1) - .5 = 2.3; t1 = 1; t2 = 3.3
    # Truncated: t1 = 2 + .9*4 - 1 = 4.6 (no trace into t2); t0 = 1.4 + .9*4.6 = 5.54
    #   pg: t0 = 1 + .9*(1 + 4.6) - .5 = 5.54; t1 = 4.6; t2 = 3.3
    both = lambda *v: tf.constant([[x, x] for x in v], tf.float32)  # noqa: E731
    fn = MODES[mode](lambda *a: vtrace_targets(*a, lam=1.0))
    zeros = tf.zeros([3, 2])
    vs, pg, _ = fn(
        zeros,
        zeros,
        both(1, 2, 3),
        both(0.5, 1.0, 1.5),
        both(1.0, 4.0, 2.0),
        tf.constant([[0.9, 0.9], [0.0, 0.9], [0.9, 0.9]]),
        tf.constant([[False, False], [False, True], [False, False]]),
    )
    np.testing.assert_allclose(vs.numpy()[:, 0], [2.8, 2.0, 4.8], rtol=1e-5)
    np.testing.assert_allclose(pg.numpy()[:, 0], [2.3, 1.0, 3.3], rtol=1e-5)
    np.testing.assert_allclose(vs.numpy()[:, 1], [6.04, 5.6, 4.8], rtol=1e-5)
    np.testing.assert_allclose(pg.numpy()[:, 1], [5.54, 4.6, 3.3], rtol=1e-5)


def loss_inputs():
    behaviour, target = log_ratios(*RATIOS)
    return dict(
        behaviour_log_probs=behaviour,
        target_log_probs=target,
        rewards=column(*REWARDS),
        values=column(*VALUES),
        next_values=column(*NEXT_VALUES),
        discounts=column(0.9, 0.9, 0.9),
        truncated=flags(False, False, False),
        entropy=column(0.5, 0.6, 0.7),
    )


@pytest.mark.parametrize("mode", MODES)
def test_vtrace_loss_hand_computed(mode):
    # Targets from the first test: vs = [4.294, 3.66, 4.8], pg = [3.794, 2.66, 3.3];
    # log pi = -1 + log [2, .5, 1] = [-.306853, -1.693147, -1].
    # policy: -pg * log pi = [1.164200, 4.503771, 3.3]
    # value: .5 * (vs - V)^2 = [7.197218, 3.5378, 5.445]
    # loss = policy + .5 * value - .01 * entropy
    inputs = loss_inputs()
    loss, extras = MODES[mode](lambda: vtrace_loss(**inputs, value_coef=0.5, entropy_coef=0.01))()
    policy = [3.794 * (1 - math.log(2)), 2.66 * (1 + math.log(2)), 3.3]
    value = [0.5 * 3.794**2, 0.5 * 2.66**2, 0.5 * 3.3**2]
    np.testing.assert_allclose(extras["policy_loss"].numpy()[:, 0], policy, rtol=1e-5)
    np.testing.assert_allclose(extras["value_loss"].numpy()[:, 0], value, rtol=1e-5)
    expected = [p + 0.5 * v - 0.01 * h for p, v, h in zip(policy, value, (0.5, 0.6, 0.7))]
    np.testing.assert_allclose(loss.numpy()[:, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(extras["rho"].numpy()[:, 0], RATIOS, rtol=1e-5)
    np.testing.assert_array_equal(extras["rho_clipped"].numpy()[:, 0], [1.0, 0.0, 0.0])


def test_vtrace_loss_gradients_skip_the_targets():
    # d loss / d log pi = -pg (the ratio inside the targets is a constant),
    # d loss / d V = value_coef * (V - vs) (the targets are constants),
    # and nothing flows to the behaviour log-probs or to V(x').
    inputs = {k: tf.Variable(v) if v.dtype == tf.float32 else v for k, v in loss_inputs().items()}
    with tf.GradientTape() as tape:
        loss, _ = vtrace_loss(**inputs, value_coef=0.5, entropy_coef=0.01)
        total = tf.reduce_sum(loss)
    names = ("target_log_probs", "values", "behaviour_log_probs", "next_values", "entropy")
    grads = dict(zip(names, tape.gradient(total, [inputs[n] for n in names])))
    np.testing.assert_allclose(grads["target_log_probs"].numpy()[:, 0], [-3.794, -2.66, -3.3])
    np.testing.assert_allclose(
        grads["values"].numpy()[:, 0], [-0.5 * 3.794, -0.5 * 2.66, -0.5 * 3.3], rtol=1e-5
    )
    np.testing.assert_allclose(grads["entropy"].numpy()[:, 0], [-0.01] * 3)
    assert grads["behaviour_log_probs"] is None and grads["next_values"] is None


def test_shapes_that_disagree_are_a_clear_error():
    inputs = loss_inputs()
    with pytest.raises(
        ValueError, match=r"vtrace_loss: values has shape \(3, 2\) but behaviour_log_probs"
    ):
        vtrace_loss(**{**inputs, "values": tf.zeros([3, 2])}, value_coef=0.5, entropy_coef=0.0)
    with pytest.raises(ValueError, match="vtrace: rewards must have rank 2, got shape"):
        vtrace_targets(
            *[inputs[k] for k in ("behaviour_log_probs", "target_log_probs")],
            tf.zeros([3]),
            *[inputs[k] for k in ("values", "next_values", "discounts", "truncated")],
        )
