"""Recurrent cores: an LSTM or a GRU between a network's torso and its head.

A core carries a state from one step to the next: a tuple of [B, units] tensors, (h, c)
for the LSTM and (h,) for the GRU. A model without memory has ``NoCore``, whose state is
the empty tuple and whose output is its input, so the code that acts and learns carries
states without asking whether a model is recurrent.

Acting calls ``step`` (one step of a batch of envs); learning calls ``unroll`` over [T, B]
sequences from the state at their start. Both zero the state of the rows whose episode
starts at a step (``starts`` [B] or [T, B], bool) before that step, so one pass over a
sequence that crosses episode ends gives what stepping through it gave.

The cells are small pure functions (``lstm_cell``, ``gru_cell``) with Keras' gate orders
and biases (LSTM: i, f, c, o, the forget gate's bias starting at 1; GRU: z, r, h with the
reset gate after the recurrent product, ``reset_after=True``); their NumPy twins, for
acting on the host, are in rl/models/host_cells.py. As every network here, the weights are
plain ``tf.Variable``s (rl/models/networks.py says why).
"""

from typing import List, Tuple

from rl._tf import tf

CORES = ("none", "lstm", "gru")
GATES = {"lstm": 4, "gru": 3}  # weight blocks per unit

State = Tuple[tf.Tensor, ...]


def lstm_cell(
    x: tf.Tensor, state: State, kernel: tf.Tensor, recurrent: tf.Tensor, bias: tf.Tensor
) -> State:
    """One LSTM step (Hochreiter and Schmidhuber 1997): (h, c) -> (h', c').

    Args:
        x: [B, D] inputs.
        state: (h, c), each [B, units].
        kernel: [D, 4 units]; recurrent: [units, 4 units]; bias: [4 units] (i, f, c, o).
    """
    h, c = state
    i, f, g, o = tf.split(tf.matmul(x, kernel) + tf.matmul(h, recurrent) + bias, 4, axis=-1)
    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(c), c


def gru_cell(
    x: tf.Tensor, state: State, kernel: tf.Tensor, recurrent: tf.Tensor, bias: tf.Tensor
) -> State:
    """One GRU step (Cho et al. 2014), the reset gate applied after the recurrent
    product: (h,) -> (h',).

    Args:
        x: [B, D] inputs.
        state: (h,), [B, units].
        kernel: [D, 3 units]; recurrent: [units, 3 units]; bias: [2, 3 units] (the
            input's, then the recurrent product's; z, r, h in each).
    """
    (h,) = state
    x_z, x_r, x_h = tf.split(tf.matmul(x, kernel) + bias[0], 3, axis=-1)
    h_z, h_r, h_h = tf.split(tf.matmul(h, recurrent) + bias[1], 3, axis=-1)
    z, r = tf.sigmoid(x_z + h_z), tf.sigmoid(x_r + h_r)
    return (z * h + (1.0 - z) * tf.tanh(x_h + r * h_h),)


CELLS = {"lstm": lstm_cell, "gru": gru_cell}


def reset_rows(state: State, starts: tf.Tensor) -> State:
    """``state`` with the rows where an episode starts (``starts`` [B], bool) zeroed."""
    keep = tf.cast(tf.logical_not(starts), tf.float32)[:, None]
    return tuple(part * keep for part in state)


class RecurrentCore(tf.Module):
    """An LSTM or GRU core of ``units`` units over inputs of ``input_size`` features."""

    def __init__(self, kind: str, input_size: int, units: int, seed: int, name: str = "core"):
        super().__init__(name=name)
        if kind not in GATES:
            raise ValueError(f"core must be one of {', '.join(CORES)}, got {kind!r}")
        self.kind, self.units, self.output_size = kind, units, units
        width = GATES[kind] * units
        glorot = tf.keras.initializers.GlorotUniform(seed=seed)
        orthogonal = tf.keras.initializers.Orthogonal(seed=seed + 1)
        self.kernel = tf.Variable(glorot([input_size, width]), name="kernel")
        self.recurrent = tf.Variable(orthogonal([units, width]), name="recurrent_kernel")
        if kind == "lstm":  # the forget gate starts open (Jozefowicz et al. 2015)
            bias = tf.concat([tf.zeros([units]), tf.ones([units]), tf.zeros([2 * units])], 0)
        else:
            bias = tf.zeros([2, width])
        self.bias = tf.Variable(bias, name="bias")

    def initial_state(self, batch_size) -> State:
        """The state before any step: zeros, one [B, units] tensor per part."""
        parts = 2 if self.kind == "lstm" else 1
        return tuple(tf.zeros([batch_size, self.units]) for _ in range(parts))

    def step(self, x: tf.Tensor, state: State, starts: tf.Tensor) -> Tuple[tf.Tensor, State]:
        """One step: the output [B, units] and the next state; rows where ``starts``
        [B] is True begin from a zero state."""
        new = CELLS[self.kind](x, reset_rows(state, starts), self.kernel, self.recurrent, self.bias)
        return new[0], new

    def unroll(self, xs: tf.Tensor, state: State, starts: tf.Tensor) -> Tuple[tf.Tensor, State]:
        """Steps through [T, B, D] inputs from ``state`` (the state at the first step),
        zeroing rows where ``starts`` [T, B] is True; the outputs [T, B, units] and the
        state after the last step. One compiled loop (``tf.scan``), not T unrolled steps."""

        def body(carried, inputs):
            _, state = carried
            x, start = inputs
            return self.step(x, state, start)

        first = (tf.zeros([tf.shape(xs)[1], self.units]), state)
        outputs, states = tf.scan(body, (xs, starts), initializer=first)
        return outputs, tuple(part[-1] for part in states)

    def layer_variables(self) -> List[tf.Variable]:
        """[kernel, recurrent kernel, bias]: the order rl/models/host_cells.py reads."""
        return [self.kernel, self.recurrent, self.bias]


class NoCore(tf.Module):
    """No memory: the output is the input and the state is empty."""

    kind = "none"

    def __init__(self, input_size: int):
        super().__init__(name="no_core")
        self.output_size = input_size

    def initial_state(self, batch_size) -> State:
        del batch_size
        return ()

    def step(self, x: tf.Tensor, state: State, starts: tf.Tensor) -> Tuple[tf.Tensor, State]:
        del starts
        return x, state

    def unroll(self, xs: tf.Tensor, state: State, starts: tf.Tensor) -> Tuple[tf.Tensor, State]:
        del starts
        return xs, state

    def layer_variables(self) -> List[tf.Variable]:
        return []


def build_core(kind: str, input_size: int, units: int, seed: int):
    """The core an hparam names: ``NoCore`` for "none", else a ``RecurrentCore``."""
    if kind == "none":
        return NoCore(input_size)
    return RecurrentCore(kind, input_size, units, seed)
