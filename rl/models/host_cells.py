"""Recurrent cells in NumPy: the LSTM and GRU of rl/models/recurrent.py, for acting on
the host from copies of their weights (no TensorFlow, as rl/models/host.py).

A state is a tuple of [B, units] arrays: (h, c) for the LSTM, (h,) for the GRU. ``starts``
[B] (bool) marks the rows whose episode starts at this step: their state is zeroed first.
The gate orders and biases are Keras' (LSTM: i, f, c, o; GRU: z, r, h with the reset gate
applied after the recurrent product, Keras' ``reset_after=True``), so the weights read the
same in both forms and a test can hold each against Keras' own cells.
"""

from typing import Sequence, Tuple

import numpy as np

from rl.models.host import HOST_ACTIVATIONS, rowwise_matmul

State = Tuple[np.ndarray, ...]
_sigmoid = HOST_ACTIVATIONS["sigmoid"]


def reset_rows(state: State, starts: np.ndarray) -> State:
    """``state`` with the rows where an episode starts set to zero."""
    keep = (~np.asarray(starts, bool))[:, None].astype(np.float32)
    return tuple(part * keep for part in state)


def lstm_step(x: np.ndarray, state: State, arrays: Sequence[np.ndarray]) -> State:
    """One LSTM step: (h, c) -> (h', c') at inputs ``x`` [B, D].

    Args:
        x: the step's inputs.
        state: (h, c), each [B, units].
        arrays: kernel [D, 4 units], recurrent kernel [units, 4 units], bias [4 units].
    """
    kernel, recurrent, bias = arrays
    h, c = state
    gates = rowwise_matmul(x, kernel) + rowwise_matmul(h, recurrent) + bias
    i, f, g, o = np.split(gates, 4, axis=-1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c), c


def gru_step(x: np.ndarray, state: State, arrays: Sequence[np.ndarray]) -> State:
    """One GRU step: (h,) -> (h',) at inputs ``x`` [B, D].

    Args:
        x: the step's inputs.
        state: (h,), [B, units].
        arrays: kernel [D, 3 units], recurrent kernel [units, 3 units], bias [2, 3 units]
            (the input's bias, then the recurrent product's).
    """
    kernel, recurrent, bias = arrays
    (h,) = state
    x_z, x_r, x_h = np.split(rowwise_matmul(x, kernel) + bias[0], 3, axis=-1)
    h_z, h_r, h_h = np.split(rowwise_matmul(h, recurrent) + bias[1], 3, axis=-1)
    z, r = _sigmoid(x_z + h_z), _sigmoid(x_r + h_r)
    return (z * h + (1.0 - z) * np.tanh(x_h + r * h_h),)


HOST_CELLS = {"lstm": lstm_step, "gru": gru_step}


def host_core_step(
    kind: str, x: np.ndarray, state: State, starts: np.ndarray, arrays: Sequence[np.ndarray]
) -> Tuple[np.ndarray, State]:
    """A core's step in NumPy: its output (the new h) and its new state; ``kind`` "none"
    passes ``x`` through with the empty state."""
    if kind == "none":
        return x, state
    state = HOST_CELLS[kind](x, reset_rows(state, starts), arrays)
    return state[0], state
