"""Recurrent cores (rl/models/recurrent.py, rl/models/host_cells.py): Keras' cells' maths,
one pass over a sequence equal to stepping through it with resets, no state leaking across
envs or episodes, and the NumPy twins equal to TensorFlow's."""

import numpy as np
import pytest

from rl._tf import tf
from rl.models.host_cells import host_core_step
from rl.models.recurrent import NoCore, RecurrentCore, build_core

T, B, D, UNITS = 7, 3, 5, 4
KINDS = ["lstm", "gru"]


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(T, B, D)).astype(np.float32)
    starts = np.zeros((T, B), bool)
    starts[0] = True  # every env starts an episode at the first step
    starts[3, 0] = starts[5, 2] = True  # env 0 and env 2 start new episodes later
    return xs, starts


def stepped(core, xs, starts, state=None):
    state = core.initial_state(B) if state is None else state
    outputs = []
    for t in range(len(xs)):
        out, state = core.step(tf.constant(xs[t]), state, tf.constant(starts[t]))
        outputs.append(out.numpy())
    return np.stack(outputs), state


def randomised(core, seed=1):
    """Non-zero biases too, so the tests see every term."""
    rng = np.random.default_rng(seed)
    for v in core.layer_variables():
        v.assign(rng.normal(scale=0.5, size=v.shape).astype(np.float32))
    return core


@pytest.mark.unit
@pytest.mark.parametrize("kind", KINDS)
def test_a_cell_computes_what_keras_cell_computes_with_the_same_weights(kind):
    core = randomised(RecurrentCore(kind, D, UNITS, seed=0))
    keras_cell = (tf.keras.layers.LSTMCell if kind == "lstm" else tf.keras.layers.GRUCell)(UNITS)
    x = tf.constant(inputs()[0][0])
    keras_cell.build(x.shape)
    keras_cell.set_weights([v.numpy() for v in core.layer_variables()])
    state = tuple(tf.random.normal([B, UNITS], seed=i) for i in range(2 if kind == "lstm" else 1))
    expected_out, expected_state = keras_cell(x, list(state))
    out, new_state = core.step(x, state, tf.zeros([B], tf.bool))
    np.testing.assert_allclose(out, expected_out, rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(new_state, expected_state):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.unit
@pytest.mark.parametrize("kind", KINDS)
def test_one_pass_over_a_sequence_equals_stepping_through_it_with_resets(kind):
    core = randomised(RecurrentCore(kind, D, UNITS, seed=0))
    xs, starts = inputs()
    expected, expected_state = stepped(core, xs, starts)
    outputs, state = tf.function(core.unroll)(
        tf.constant(xs), core.initial_state(B), tf.constant(starts)
    )
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(state, expected_state):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.unit
@pytest.mark.parametrize("kind", KINDS)
def test_each_envs_state_resets_at_its_own_episode_start_and_no_other(kind):
    core = randomised(RecurrentCore(kind, D, UNITS, seed=0))
    xs, starts = inputs()
    together, _ = stepped(core, xs, starts)
    for env in range(B):
        # The env alone, each of its episodes from a fresh state: what it must get in a batch.
        episode_starts = [t for t in range(T) if starts[t, env]] + [T]
        for begin, end in zip(episode_starts[:-1], episode_starts[1:]):
            alone, _ = stepped(
                core, np.repeat(xs[begin:end, env : env + 1], B, 1), starts[begin:end, [env] * B]
            )
            np.testing.assert_allclose(together[begin:end, env], alone[:, 0], rtol=1e-5, atol=1e-6)
    # A reset that did not happen would change the outputs: the test can fail.
    unreset = starts.copy()
    unreset[3, 0] = False
    assert not np.allclose(stepped(core, xs, unreset)[0][3:, 0], together[3:, 0])


@pytest.mark.unit
@pytest.mark.parametrize("kind", KINDS)
def test_the_numpy_cell_steps_as_the_tensorflow_one(kind):
    core = randomised(RecurrentCore(kind, D, UNITS, seed=0))
    arrays = [v.numpy() for v in core.layer_variables()]
    xs, starts = inputs()
    expected, _ = stepped(core, xs, starts)
    state = tuple(part.numpy() for part in core.initial_state(B))
    for t in range(T):
        out, state = host_core_step(kind, xs[t], state, starts[t], arrays)
        np.testing.assert_allclose(out, expected[t], rtol=1e-5, atol=1e-5)


@pytest.mark.unit
def test_no_core_passes_its_inputs_through_with_an_empty_state():
    core = build_core("none", D, UNITS, seed=0)
    assert isinstance(core, NoCore) and core.output_size == D and core.initial_state(B) == ()
    xs, starts = inputs()
    outputs, state = core.unroll(tf.constant(xs), (), tf.constant(starts))
    np.testing.assert_array_equal(outputs, xs)
    assert state == () and core.layer_variables() == []
    out, state = host_core_step("none", xs[0], (), starts[0], [])
    np.testing.assert_array_equal(out, xs[0])


@pytest.mark.unit
def test_an_unknown_core_is_refused_naming_the_cores():
    with pytest.raises(ValueError, match="core must be one of none, lstm, gru"):
        RecurrentCore("transformer", D, UNITS, seed=0)


@pytest.mark.unit
@pytest.mark.parametrize("kind", KINDS)
def test_a_core_round_trips_through_a_checkpoint_exactly(kind, tmp_path):
    core = randomised(build_core(kind, D, UNITS, seed=0))
    path = tf.train.Checkpoint(core=core).save(str(tmp_path / "ckpt"))
    other = build_core(kind, D, UNITS, seed=9)
    tf.train.Checkpoint(core=other).restore(path).assert_existing_objects_matched()
    for a, b in zip(core.layer_variables(), other.layer_variables()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert len(core.trainable_variables) == 3
