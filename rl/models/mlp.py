"""Multi-layer perceptrons built from plain tf.Variables.

Plain variables inside ``tf.Module`` keep ``trainable_variables``,
checkpoints and SavedModel export exact and dependency-free (Keras 3 layers
inside a tf.Module are not listed by ``trainable_variables``).

Each model also computes its ``preferences`` in NumPy from copies of its
weights (``preference_variables`` / ``host_preferences``), so a small model
can act on the host without a call into TensorFlow per env step.
"""

from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from rl._tf import tf
from rl.hparams.base import HParams


class Dense(tf.Module):
    """y = x @ w + b, orthogonally initialised (Saxe et al. 2014)."""

    def __init__(self, input_size: int, output_size: int, gain: float, seed: int, name: str):
        super().__init__(name=name)
        init = tf.keras.initializers.Orthogonal(gain=gain, seed=seed)
        self.w = tf.Variable(init([input_size, output_size]), name="w")
        self.b = tf.Variable(tf.zeros([output_size]), name="b")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.matmul(x, self.w) + self.b


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))  # 1 / (1 + e^-x) without overflow


# NumPy forms of the activations an hparam may name; each matches tf.keras.activations.
HOST_ACTIVATIONS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "softplus": lambda x: np.logaddexp(0.0, x),
    "silu": lambda x: x * _sigmoid(x),
    "linear": lambda x: x,
}


class MLP(tf.Module):
    """Hidden layers with an activation, then a linear output layer."""

    def __init__(
        self,
        input_size: int,
        hidden_sizes: Sequence[int],
        output_size: int,
        activation: str,
        output_gain: float,
        seed: int,
        name: str = "mlp",
    ):
        """Builds the layers.

        Args:
            input_size: features of the (flattened) input.
            hidden_sizes: widths of the hidden layers.
            output_size: width of the output.
            activation: a ``tf.keras.activations`` name ("tanh", "relu", ...).
            output_gain: orthogonal gain of the last layer (small for policies).
            seed: initialisation seed.
            name: module name.
        """
        super().__init__(name=name)
        self.activation = tf.keras.activations.get(activation)
        sizes = [input_size, *hidden_sizes]
        self.hidden = [
            Dense(n_in, n_out, gain=2**0.5, seed=seed + i, name=f"hidden_{i}")
            for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))
        ]
        self.out = Dense(
            sizes[-1], output_size, gain=output_gain, seed=seed + len(sizes), name="out"
        )

        self.activation_name = activation

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.reshape(x, [tf.shape(x)[0], -1])
        for layer in self.hidden:
            x = self.activation(layer(x))
        return self.out(x)

    def layer_variables(self) -> List[tf.Variable]:
        """[w0, b0, w1, b1, ..., w_out, b_out]: the order ``host_forward`` reads."""
        return [v for layer in (*self.hidden, self.out) for v in (layer.w, layer.b)]

    def host_forward(self, x: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """The same function in NumPy, from copies of ``layer_variables()``.

        Args:
            x: [B, ...] float32 inputs.
            arrays: the values of ``layer_variables()``, in that order.
        """
        activation = HOST_ACTIVATIONS[self.activation_name]
        x = x.reshape(len(x), -1)
        for i in range(0, len(arrays) - 2, 2):
            x = activation(x @ arrays[i] + arrays[i + 1])
        return x @ arrays[-2] + arrays[-1]


class ActorCritic(tf.Module):
    """Separate policy and value MLPs: obs [B, ...] -> logits [B, A], value [B]."""

    def __init__(self, hp: HParams, input_size: int, num_actions: int, seed: int):
        super().__init__(name="actor_critic")
        self.policy = MLP(
            input_size,
            hp.hidden_sizes,
            num_actions,
            hp.activation,
            output_gain=0.01,
            seed=seed,
            name="policy",
        )
        self.value = MLP(
            input_size,
            hp.hidden_sizes,
            1,
            hp.activation,
            output_gain=1.0,
            seed=seed + 1000,
            name="value",
        )

    def __call__(self, obs: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        return self.policy(obs), tf.squeeze(self.value(obs), -1)

    def preferences(self, obs: tf.Tensor) -> tf.Tensor:
        """What act_select chooses from: the policy logits."""
        return self.policy(obs)

    def preference_variables(self) -> List[tf.Variable]:
        """The variables ``preferences`` reads (the policy's, not the value's)."""
        return self.policy.layer_variables()

    def host_preferences(self, obs: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """``preferences`` in NumPy from copies of ``preference_variables()``."""
        return self.policy.host_forward(obs, arrays)


class QNetwork(tf.Module):
    """An MLP from observations to one Q-value per action: [B, ...] -> [B, A]."""

    def __init__(self, hp: HParams, input_size: int, num_actions: int, seed: int):
        super().__init__(name="q_network")
        self.q = MLP(
            input_size,
            hp.hidden_sizes,
            num_actions,
            hp.activation,
            output_gain=1.0,
            seed=seed,
            name="q",
        )

    def __call__(self, obs: tf.Tensor) -> tf.Tensor:
        return self.q(obs)

    def preferences(self, obs: tf.Tensor) -> tf.Tensor:
        """What act_select chooses from: the Q-values."""
        return self.q(obs)

    def preference_variables(self) -> List[tf.Variable]:
        """The variables ``preferences`` reads."""
        return self.q.layer_variables()

    def host_preferences(self, obs: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """``preferences`` in NumPy from copies of ``preference_variables()``."""
        return self.q.host_forward(obs, arrays)
