"""Acting in NumPy: a model's policy computed on the host from copies of its weights.

A ``HostPolicy`` is what acting needs to know of a model with an MLP torso:
what its policy gives (an action distribution or Q-values), its action head,
its activation and whether a state-independent log std follows the layers.
It is small, picklable and needs no TensorFlow, so actor processes that act
on the host never import TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from rl.algos.normalization import normalize
from rl.models.distributions import ActionHead, HostDistribution
from rl.models.settings import ModelSettings

# The smallest log std a policy head takes: std 2e-9, "no noise" that log-probs still accept.
MIN_LOG_STD = -20.0


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


def float_observations(x: np.ndarray) -> np.ndarray:
    """uint8 observations scaled to [0, 1] as the networks do; others as they are."""
    return x * np.float32(1 / 255) if x.dtype == np.uint8 else x


def rowwise_matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x @ w for x [B, D], w [D, H], each row a product of its own.

    BLAS's ``x @ w`` rounds a row differently with the batch around it (1 ulp), so actor
    processes acting for a share of the rows would drift from one actor acting for all
    of them; a stack of [1, D] products does not, and costs about the same at acting sizes.
    """
    return (x[:, None, :] @ w)[:, 0, :]


def mlp_forward(x: np.ndarray, arrays: Sequence[np.ndarray], activation: str) -> np.ndarray:
    """An MLP (rl/models/networks.py MLP) in NumPy; each row's result is independent of
    the batch it comes in.

    Args:
        x: [B, ...] inputs; uint8 ones are scaled to [0, 1] as the network does.
        arrays: [w0, b0, w1, b1, ..., w_out, b_out].
        activation: a HOST_ACTIVATIONS name, applied after each hidden layer.
    """
    act = HOST_ACTIVATIONS[activation]
    x = float_observations(x).reshape(len(x), -1)
    for i in range(0, len(arrays) - 2, 2):
        x = act(rowwise_matmul(x, arrays[i]) + arrays[i + 1])
    return rowwise_matmul(x, arrays[-2]) + arrays[-1]


# The logit or Q-value of an illegal move (settings.action_mask): finite, so softmax gives it
# probability 0 without NaNs in log-probs or entropies.
ILLEGAL_SCORE = -1e9


def illegal_penalty(obs: np.ndarray, num_actions: int) -> np.ndarray:
    """[B, A]: 0 for legal moves, ILLEGAL_SCORE for illegal ones, read from the last
    ``num_actions`` entries of flat observations [B, D] (1 = legal)."""
    return (1.0 - obs[:, -num_actions:].astype(np.float32)) * np.float32(ILLEGAL_SCORE)


def masked_actions(settings: ModelSettings, head: ActionHead, observation_space) -> int:
    """A when ``settings.action_mask`` says the observations end with a legal-move mask, else 0.

    Raises:
      ValueError: a mask asked for with other than Discrete actions or flat observations.
    """
    if not settings.action_mask:
        return 0
    if head.kind != "categorical":
        raise ValueError(f"action_mask needs Discrete actions, the env's head is {head.kind}")
    num_actions = head.num_outputs
    if len(observation_space.shape) != 1 or observation_space.shape[0] <= num_actions:
        raise ValueError(
            f"action_mask needs flat observations ending with {num_actions} mask entries, "
            f"got shape {observation_space.shape}"
        )
    # A mask's entries are bounded by [0, 1] (rl/games/versus.py): other features taken
    # for a mask (action_mask on CartPole) would silently forbid moves.
    low = getattr(observation_space, "low", np.zeros(1))[-num_actions:]
    high = getattr(observation_space, "high", np.zeros(1))[-num_actions:]
    if not (np.all(low == 0) and np.all(high == 1)):
        raise ValueError(
            f"action_mask needs observations whose last {num_actions} entries are a 0/1 "
            "legal-move mask (a game env's, bounds [0, 1]); this env's are not: set "
            "action_mask=false"
        )
    return num_actions


@dataclasses.dataclass(frozen=True)
class QHeadLayout:
    """How a Q-network's outputs become Q-values (rl/models/networks.py QNetwork).

    Attributes:
        num_actions: A.
        dueling: the first N outputs are the value stream, the next A x N advantages.
        support: C51's atom values (N of them); empty: no C51 atoms.
        num_quantiles: QR-DQN's quantiles per action (N of them, equally weighted);
            1 with no support: one output per action (N = 1).
    """

    num_actions: int
    dueling: bool = False
    support: Tuple[float, ...] = ()
    num_quantiles: int = 1

    @classmethod
    def from_settings(cls, settings, num_actions: int) -> "QHeadLayout":
        """The layout QHeadSettings (dueling, num_atoms, v_min, v_max, num_quantiles)
        give A actions."""
        support = ()
        if settings.num_atoms > 1:
            atoms = np.linspace(settings.v_min, settings.v_max, settings.num_atoms)
            support = tuple(float(z) for z in atoms)
        return cls(num_actions, settings.dueling, support, settings.num_quantiles)

    @property
    def num_atoms(self) -> int:
        """N: outputs per action (C51's atoms, QR-DQN's quantiles, or 1)."""
        return len(self.support) or self.num_quantiles

    @property
    def num_outputs(self) -> int:
        return (self.num_actions + int(self.dueling)) * self.num_atoms

    def q_values(self, outputs: np.ndarray) -> np.ndarray:
        """[B, A] Q-values from the network's outputs [B, num_outputs], in NumPy."""
        atoms = self.num_atoms
        if self.dueling:
            advantages = outputs[:, atoms:].reshape(len(outputs), self.num_actions, atoms)
            logits = outputs[:, None, :atoms] + advantages - advantages.mean(1, keepdims=True)
        else:
            logits = outputs.reshape(len(outputs), self.num_actions, atoms)
        if self.num_quantiles > 1:  # a Q-value is the mean of its quantiles
            return logits.mean(-1)
        if not self.support:
            return logits[..., 0]
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        probabilities = shifted / shifted.sum(-1, keepdims=True)
        # A sum per row rather than a BLAS product: the same whatever the batch.
        return (probabilities * np.asarray(self.support, logits.dtype)).sum(-1)


@dataclasses.dataclass(frozen=True)
class HostPolicy:
    """A model's ``policy(obs)`` on the host, from copies of its ``acting_variables()``.

    Attributes:
        outputs: "distribution" (a HostDistribution) or "q_values" ([B, A]).
        head: the model's action head.
        activation: the MLP's activation name.
        has_log_std: the last acting variable is a log std [D], not a layer.
        log_std_in_outputs: the network's outputs are [means, log stds] (SAC), the
            log stds clipped to ``log_std_bounds``.
        squash_mean: the mean is tanh(outputs) mapped onto the Box's bounds (TD3, DDPG).
        q_layout: how Q-network outputs become Q-values (dueling, C51); None: as they are.
        masked_actions: A when the observations end with a legal-move mask (games), else 0.
        observation_clip: the model normalises observations (ObservationNormalizer):
            the first two arrays are their mean and variance, and normalised values
            are clipped to +-this. None: no normalisation.
    """

    outputs: str
    head: ActionHead
    activation: str
    has_log_std: bool = False
    log_std_in_outputs: bool = False
    log_std_bounds: Tuple[float, float] = (MIN_LOG_STD, 2.0)
    squash_mean: bool = False
    q_layout: Optional[QHeadLayout] = None
    masked_actions: int = 0
    observation_clip: Optional[float] = None

    def host_network(self) -> "HostPolicy":
        """Itself: an Actor takes a HostPolicy where it takes a model (actor processes)."""
        return self

    def __call__(self, obs: np.ndarray, arrays: Sequence[np.ndarray]):
        """The policy at ``obs`` [B, ...]: a HostDistribution or Q-values [B, A]."""
        inputs = obs
        if self.observation_clip is not None:
            inputs = normalize(float_observations(obs), arrays[0], arrays[1], self.observation_clip)
            arrays = arrays[2:]
        if self.outputs == "q_values":
            outputs = mlp_forward(inputs, arrays, self.activation)
            q = outputs if self.q_layout is None else self.q_layout.q_values(outputs)
            return q + illegal_penalty(obs, self.masked_actions) if self.masked_actions else q
        if self.log_std_in_outputs:
            means, log_stds = np.split(mlp_forward(inputs, arrays, self.activation), 2, axis=-1)
            return HostDistribution(self.head, means, np.clip(log_stds, *self.log_std_bounds))
        if self.has_log_std:
            outputs = mlp_forward(inputs, arrays[:-1], self.activation)
            if self.squash_mean:
                scale, shift = self.head.scale_and_shift()
                outputs = np.tanh(outputs) * scale.reshape(-1) + shift.reshape(-1)
            return HostDistribution(self.head, outputs, arrays[-1])
        logits = mlp_forward(inputs, arrays, self.activation)
        if self.masked_actions:
            logits = logits + illegal_penalty(obs, self.masked_actions)
        return HostDistribution(self.head, logits, None)
