"""Action distributions: the action space decides the policy head.

An ``ActionHead`` turns a network's raw outputs into a
``tfp.distributions.Distribution`` in the compiled update (log-probs,
entropies, exports) and into a NumPy twin on the host, where acting happens
without a call into TensorFlow. The twins compute the same numbers
(tests/test_distributions.py compares them with TFP).

    Discrete(n)           -> Categorical(logits [B, n])
    MultiDiscrete(nvec)   -> Independent Categoricals, logits [B, D, max(nvec)]
    Box, unbounded        -> diagonal Gaussian, mean [B, D], state-independent log std [D]
    Box, bounded          -> tanh-squashed Gaussian scaled to [low, high] (or, with
                             ``kind="gaussian"``, a Gaussian whose samples are clipped
                             to the bounds when sent to the env, as SB3 and CleanRL do)
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import gymnasium as gym
import numpy as np

from rl._tf import tf

# Far enough inside (-1, 1) that atanh stays finite in float32 (atanh(1 - 1e-6) ~ 7.25).
TANH_LIMIT = 1.0 - 1e-6
# Logit given to the padding of a MultiDiscrete dimension with fewer choices: probability ~0.
PADDING_LOGIT = -1e9
HEAD_KINDS = ("auto", "gaussian", "tanh_gaussian")


def _tfp():
    # TFP's distributions cost ~1 s of start-up: loaded when a head first builds one
    # (rl/__init__.py imports TFP's package before TensorFlow, which keeps the rest lazy).
    import tensorflow_probability as tfp

    return tfp


@dataclasses.dataclass(frozen=True)
class ActionHead:
    """How a network's outputs become a distribution over one action space.

    Attributes:
        kind: "categorical", "multi_categorical", "gaussian" or "tanh_gaussian".
        num_outputs: width of the network's last layer.
        action_shape: shape of one action.
        action_dtype: int32 for discrete spaces, float32 for Box.
        low: the Box's lower bounds (None if unbounded or discrete).
        high: the Box's upper bounds.
        nvec: choices per MultiDiscrete dimension.
    """

    kind: str
    num_outputs: int
    action_shape: Tuple[int, ...]
    action_dtype: np.dtype
    low: Optional[np.ndarray] = None
    high: Optional[np.ndarray] = None
    nvec: Optional[Tuple[int, ...]] = None

    @property
    def continuous(self) -> bool:
        return self.kind in ("gaussian", "tanh_gaussian")

    @property
    def action_size(self) -> int:
        return int(np.prod(self.action_shape))

    # --- TensorFlow ---------------------------------------------------------
    def distribution(self, outputs: tf.Tensor, log_std: Optional[tf.Tensor] = None):
        """The tfp distribution of actions [B, *action_shape] given outputs [B, num_outputs]."""
        tfd, tfb = _tfp().distributions, _tfp().bijectors
        if self.kind == "categorical":
            return tfd.Categorical(logits=outputs)
        if self.kind == "multi_categorical":
            return tfd.Independent(tfd.Categorical(logits=self._masked_logits(outputs)), 1)
        mean = tf.reshape(outputs, [-1, *self.action_shape])
        base = tfd.Independent(
            tfd.Normal(mean, tf.exp(log_std)), reinterpreted_batch_ndims=len(self.action_shape)
        )
        if self.kind == "gaussian":
            return base
        scale, shift = self.scale_and_shift()
        squash = tfb.Chain(
            [tfb.Shift(shift.astype(np.float32)), tfb.Scale(scale.astype(np.float32)), tfb.Tanh()]
        )
        return tfd.TransformedDistribution(base, squash)

    def log_prob(self, distribution, actions: tf.Tensor) -> tf.Tensor:
        """log pi(a|s) [B]; squashed actions are pulled inside the bounds first."""
        if self.kind == "tanh_gaussian":
            actions = self._inside_bounds(actions)
        return distribution.log_prob(actions)

    def entropy(self, distribution) -> tf.Tensor:
        """Entropy [B]; for the tanh-squashed Gaussian that of the Gaussian before the
        squash (the squashed one has no closed form)."""
        if self.kind == "tanh_gaussian":
            return distribution.distribution.entropy()
        return distribution.entropy()

    def mode(self, distribution) -> tf.Tensor:
        """The most likely action; tanh(mean) for the squashed Gaussian (TFP has no
        mode for a non-affine bijector)."""
        if self.kind == "tanh_gaussian":
            return distribution.bijector.forward(distribution.distribution.mode())
        return distribution.mode()

    def sample(self, distribution, seed: tf.Tensor) -> tf.Tensor:
        """One action per row, drawn with a stateless seed [2] int32."""
        return tf.cast(distribution.sample(seed=seed), self.action_dtype)

    def padding(self) -> np.ndarray:
        """[D, max(nvec)] logits added to a MultiDiscrete head's outputs: 0 for
        real choices, PADDING_LOGIT past a dimension's own count."""
        valid = np.arange(max(self.nvec))[None, :] < np.asarray(self.nvec)[:, None]
        return np.where(valid, 0.0, PADDING_LOGIT).astype(np.float32)

    def scale_and_shift(self) -> Tuple[np.ndarray, np.ndarray]:
        """The affine map from (-1, 1) onto a bounded Box: a = u * scale + shift."""
        return (self.high - self.low) / 2.0, (self.high + self.low) / 2.0

    def _masked_logits(self, outputs):
        padding = self.padding()
        return tf.reshape(outputs, [-1, *padding.shape]) + padding

    def _inside_bounds(self, actions):
        scale, shift = self.scale_and_shift()
        unit = tf.clip_by_value((actions - shift) / scale, -TANH_LIMIT, TANH_LIMIT)
        return tf.cast(unit * scale + shift, tf.float32)

    def to_env_graph(self, actions: tf.Tensor) -> tf.Tensor:
        """``to_env`` in TensorFlow (for exported policies)."""
        if self.kind == "gaussian" and self.low is not None:
            return tf.clip_by_value(
                actions, self.low.astype(np.float32), self.high.astype(np.float32)
            )
        return actions

    # --- NumPy twin -----------------------------------------------------------
    def host(self, outputs: np.ndarray, log_std: Optional[np.ndarray] = None) -> "HostDistribution":
        """The same distribution in NumPy, from host-computed outputs [B, num_outputs]."""
        return HostDistribution(self, outputs, log_std)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """Actions as the env takes them: a plain Gaussian's samples clipped to a bounded Box."""
        if self.kind == "gaussian" and self.low is not None:
            return np.clip(actions, self.low, self.high).astype(self.action_dtype)
        return actions


class HostDistribution:
    """An ``ActionHead``'s distribution in NumPy: sample, mode and log_prob.

    Computed in float64 and returned as float32, matching TFP to ~1e-6.
    """

    def __init__(self, head: ActionHead, outputs: np.ndarray, log_std: Optional[np.ndarray]):
        self.head = head
        self.outputs = np.asarray(outputs, np.float64)
        self.log_std = None if log_std is None else np.asarray(log_std, np.float64)

    def _logits(self) -> np.ndarray:
        head = self.head
        if head.kind == "categorical":
            return self.outputs
        padding = head.padding()
        return self.outputs.reshape(len(self.outputs), *padding.shape) + padding

    def _mean(self) -> np.ndarray:
        return self.outputs.reshape(len(self.outputs), *self.head.action_shape)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One action per row, drawn from ``rng``."""
        head = self.head
        if not head.continuous:
            # Gumbel-max: argmax(logits + Gumbel noise) is an exact categorical sample.
            logits = self._logits()
            return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1).astype(np.int32)
        mean = self._mean()
        raw = mean + np.exp(self.log_std) * rng.standard_normal(mean.shape)
        return self._squash(raw) if head.kind == "tanh_gaussian" else raw.astype(np.float32)

    def mode(self) -> np.ndarray:
        """The most likely action (tanh of the mean for the squashed Gaussian)."""
        head = self.head
        if not head.continuous:
            return np.argmax(self._logits(), axis=-1).astype(np.int32)
        mean = self._mean()
        return self._squash(mean) if head.kind == "tanh_gaussian" else mean.astype(np.float32)

    def log_prob(self, actions: np.ndarray) -> np.ndarray:
        """log pi(a|s) [B] float32."""
        head = self.head
        if not head.continuous:
            logits = self._logits()
            log_pi = logits - _logsumexp(logits)
            taken = np.take_along_axis(log_pi, np.asarray(actions)[..., None], axis=-1)[..., 0]
            return taken.reshape(len(taken), -1).sum(axis=1).astype(np.float32)
        actions = np.asarray(actions, np.float64)
        log_det = 0.0
        if head.kind == "tanh_gaussian":
            scale, shift = head.scale_and_shift()
            unit = np.clip((actions - shift) / scale, -TANH_LIMIT, TANH_LIMIT)
            actions = np.arctanh(unit)
            # d a / d u = scale * (1 - tanh(u)^2), written stably as TFP's Tanh bijector does.
            log_det = np.log(scale) + 2.0 * (np.log(2.0) - actions - np.logaddexp(0, -2 * actions))
        z = (actions - self._mean()) / np.exp(self.log_std)
        log_density = -0.5 * z**2 - self.log_std - 0.5 * np.log(2 * np.pi) - log_det
        return log_density.reshape(len(z), -1).sum(axis=1).astype(np.float32)

    def _squash(self, raw: np.ndarray) -> np.ndarray:
        head = self.head
        scale, shift = head.scale_and_shift()
        return (np.tanh(raw) * scale + shift).astype(np.float32)


def _logsumexp(x: np.ndarray) -> np.ndarray:
    top = np.max(x, axis=-1, keepdims=True)
    return top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True))


def action_head(space: gym.Space, kind: str = "auto") -> ActionHead:
    """The head for an action space.

    Args:
        space: the env's action space.
        kind: "auto" (categorical heads for discrete spaces; for Box the
            tanh-squashed Gaussian when every bound is finite, else the
            Gaussian), "gaussian" or "tanh_gaussian" (Box only).

    Raises:
        ValueError: for a space or kind that has no head, saying what is supported.
    """
    if kind not in HEAD_KINDS:
        raise ValueError(f"unknown action distribution {kind!r}: valid: {', '.join(HEAD_KINDS)}")
    if isinstance(space, gym.spaces.Discrete):
        if kind != "auto":
            raise ValueError(f"action_distribution={kind} needs a Box action space, not {space}")
        return ActionHead("categorical", int(space.n), (), np.dtype(np.int32))
    if isinstance(space, gym.spaces.MultiDiscrete):
        if kind != "auto" or space.nvec.ndim != 1:
            raise ValueError(f"{space} needs action_distribution=auto and a flat nvec")
        nvec = tuple(int(n) for n in space.nvec)
        return ActionHead(
            "multi_categorical", len(nvec) * max(nvec), (len(nvec),), np.dtype(np.int32), nvec=nvec
        )
    if isinstance(space, gym.spaces.Box):
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        bounded = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
        if kind == "auto":
            kind = "tanh_gaussian" if bounded else "gaussian"
        if kind == "tanh_gaussian" and not bounded:
            raise ValueError(f"action_distribution=tanh_gaussian needs finite bounds, not {space}")
        shape = tuple(space.shape)
        return ActionHead(
            kind,
            int(np.prod(shape)),
            shape,
            np.dtype(np.float32),
            low=low if bounded else None,
            high=high if bounded else None,
        )
    raise ValueError(
        f"no policy head for the action space {space}: valid: Discrete, MultiDiscrete, Box"
    )
