"""Networks built from plain tf.Variables, shaped by the env's spaces.

Plain variables inside ``tf.Module`` keep ``trainable_variables``,
checkpoints and SavedModel export exact and dependency-free (Keras 3 layers
inside a tf.Module are not listed by ``trainable_variables``).

A network = a torso (``mlp`` or ``nature_cnn``, from ModelSettings) + a head
sized by the action space. Each network names the variables acting reads
(``acting_variables``); with an MLP torso it also computes its policy in
NumPy from copies of them (``host_network``), so a small model acts on the
host without a call into TensorFlow per env step.
"""

from typing import List, Sequence, Tuple

import gymnasium as gym
import numpy as np

from rl._tf import tf
from rl.algos.normalization import VARIANCE_EPSILON
from rl.models.distributions import ActionHead, action_head
from rl.models.host import (
    ILLEGAL_SCORE,
    MIN_LOG_STD,
    HostPolicy,
    QHeadLayout,
    masked_actions,
    mlp_forward,
)
from rl.models.settings import ModelSettings, QHeadSettings


class Dense(tf.Module):
    """y = x @ w + b, orthogonally initialised (Saxe et al. 2014)."""

    def __init__(self, input_size: int, output_size: int, gain: float, seed: int, name: str):
        super().__init__(name=name)
        init = tf.keras.initializers.Orthogonal(gain=gain, seed=seed)
        self.w = tf.Variable(init([input_size, output_size]), name="w")
        self.b = tf.Variable(tf.zeros([output_size]), name="b")

    def __call__(self, x: tf.Tensor, noise_seed=None) -> tf.Tensor:
        del noise_seed  # no noise
        return tf.matmul(x, self.w) + self.b


def _scaled_noise(size: int, seed: tf.Tensor) -> tf.Tensor:
    """f(e) = sign(e) sqrt(|e|) of standard normal draws: factorised noise's factors."""
    noise = tf.random.stateless_normal([size], seed)
    return tf.sign(noise) * tf.sqrt(tf.abs(noise))


class NoisyDense(tf.Module):
    """y = x @ (w_mu + w_sigma * e_w) + b_mu + b_sigma * e_b with factorised Gaussian
    noise e_w = f(e_in) f(e_out)^T, e_b = f(e_out) (Fortunato et al. 2018).

    ``w`` and ``b`` (not trained) hold one draw of the noisy weights: what acting
    reads, so a noisy network acts on the host like any MLP. Training calls pass a
    stateless seed and draw fresh noise; ``resample`` redraws ``w`` and ``b``.
    """

    def __init__(self, input_size: int, output_size: int, sigma0: float, seed: int, name: str):
        super().__init__(name=name)
        bound = float(1.0 / np.sqrt(input_size))
        init = tf.keras.initializers.RandomUniform(-bound, bound, seed=seed)
        self.w_mu = tf.Variable(init([input_size, output_size]), name="w_mu")
        self.b_mu = tf.Variable(init([output_size]), name="b_mu")
        self.w_sigma = tf.Variable(
            tf.fill([input_size, output_size], sigma0 * bound), name="w_sigma"
        )
        self.b_sigma = tf.Variable(tf.fill([output_size], sigma0 * bound), name="b_sigma")
        self.w = tf.Variable(self.w_mu, trainable=False, name="w")
        self.b = tf.Variable(self.b_mu, trainable=False, name="b")

    def _noise(self, seed: tf.Tensor):
        seed_in, seed_out = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
        return _scaled_noise(self.w_mu.shape[0], seed_in), _scaled_noise(
            self.w_mu.shape[1], seed_out
        )

    def __call__(self, x: tf.Tensor, noise_seed=None) -> tf.Tensor:
        """With ``noise_seed`` [2], a fresh draw (trainable); without, the acting draw."""
        if noise_seed is None:
            return tf.matmul(x, self.w) + self.b
        noise_in, noise_out = self._noise(noise_seed)
        mean = tf.matmul(x, self.w_mu) + self.b_mu
        # x @ (w_sigma * e_in e_out^T) = ((x * e_in) @ w_sigma) * e_out: no [in, out] noise.
        return mean + (tf.matmul(x * noise_in, self.w_sigma) + self.b_sigma) * noise_out

    def resample(self, seed: tf.Tensor) -> None:
        """Draws the acting weights ``w``, ``b`` afresh."""
        noise_in, noise_out = self._noise(seed)
        self.w.assign(self.w_mu + self.w_sigma * noise_in[:, None] * noise_out[None, :])
        self.b.assign(self.b_mu + self.b_sigma * noise_out)


def fully_connected(
    input_size: int, output_size: int, gain: float, seed: int, name: str, noisy_sigma0=None
):
    """A Dense layer, or a NoisyDense one when ``noisy_sigma0`` is given."""
    if noisy_sigma0 is None:
        return Dense(input_size, output_size, gain, seed, name)
    return NoisyDense(input_size, output_size, noisy_sigma0, seed, name)


def layer_noise_seeds(noise_seed, count: int):
    """One stateless seed per layer from ``noise_seed`` (None stays None)."""
    if noise_seed is None:
        return [None] * count
    return tf.unstack(tf.random.experimental.stateless_split(noise_seed, count))


def resample_noise(layers, seed: tf.Tensor) -> tf.Tensor:
    """Redraws the acting weights of every NoisyDense in ``layers``; returns True."""
    noisy = [layer for layer in layers if isinstance(layer, NoisyDense)]
    for layer, layer_seed in zip(noisy, layer_noise_seeds(seed, max(len(noisy), 1))):
        layer.resample(layer_seed)
    return tf.constant(True)


class Conv(tf.Module):
    """A VALID 2-D convolution over NHWC inputs, orthogonally initialised."""

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int, seed: int):
        super().__init__(name=f"conv{size}x{size}")
        init = tf.keras.initializers.Orthogonal(gain=2**0.5, seed=seed)
        self.w = tf.Variable(init([size, size, in_channels, out_channels]), name="w")
        self.b = tf.Variable(tf.zeros([out_channels]), name="b")
        self.stride = stride

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.nn.conv2d(x, self.w, self.stride, "VALID") + self.b


def float_observations(obs: tf.Tensor) -> tf.Tensor:
    """Observations as float32: uint8 images are kept as bytes until here, then scaled to [0, 1]."""
    if obs.dtype == tf.uint8:
        return tf.cast(obs, tf.float32) / 255.0
    return tf.cast(obs, tf.float32)


class ObservationNormalizer(tf.Module):
    """(obs - mean) / sqrt(var + eps), clipped: observations scaled by running statistics.

    The learner keeps the statistics (rl/algos/normalization.py) and assigns them here
    after each update; they are model variables, so checkpoints, policy artefacts and
    exports carry them, and actors receive them with the weights.
    """

    def __init__(self, shape: Tuple[int, ...], clip: float):
        super().__init__(name="observation_normalizer")
        self.mean = tf.Variable(tf.zeros(shape), trainable=False, name="mean")
        self.var = tf.Variable(tf.ones(shape), trainable=False, name="var")
        self.clip = float(clip)

    def __call__(self, obs: tf.Tensor) -> tf.Tensor:
        scaled = (tf.cast(obs, tf.float32) - self.mean) / tf.sqrt(self.var + VARIANCE_EPSILON)
        return tf.clip_by_value(scaled, -self.clip, self.clip)

    def assign(self, mean: np.ndarray, var: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Takes these statistics; returns them as the float32 arrays now held."""
        mean, var = mean.astype(np.float32), var.astype(np.float32)
        self.mean.assign(mean)
        self.var.assign(var)
        return mean, var


def observation_normalizer(settings: ModelSettings, observation_space: gym.Space):
    """An ObservationNormalizer if ``settings.normalize_observations``, else None.

    Raises:
      ValueError: asked for with image observations (the Nature CNN scales bytes itself).
    """
    if not settings.normalize_observations:
        return None
    if settings.torso != "mlp":
        raise ValueError(
            "normalize_observations is for vector observations and the mlp torso, "
            f"not torso={settings.torso}"
        )
    return ObservationNormalizer(tuple(observation_space.shape), settings.observation_clip)


def observation_clip(normalizer):
    """What a HostPolicy is told of a model's normalizer: its clip, or None without one."""
    return None if normalizer is None else normalizer.clip


def normalizer_variables(normalizer) -> List[tf.Variable]:
    """[mean, var] of an ObservationNormalizer, first among a model's acting variables
    (rl/models/host.py reads them there); [] for None."""
    return [] if normalizer is None else [normalizer.mean, normalizer.var]


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
        noisy_sigma0=None,
        normalizer=None,
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
            noisy_sigma0: given: every layer is a NoisyDense with this initial scale.
            normalizer: an ObservationNormalizer applied to the inputs first (may be
                shared with the model's other networks).
        """
        super().__init__(name=name)
        self.normalizer = normalizer
        self.activation = tf.keras.activations.get(activation)
        self.activation_name = activation
        sizes = [input_size, *hidden_sizes]
        self.hidden = [
            fully_connected(n_in, n_out, 2**0.5, seed + i, f"hidden_{i}", noisy_sigma0)
            for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))
        ]
        self.out = fully_connected(
            sizes[-1], output_size, output_gain, seed + len(sizes), "out", noisy_sigma0
        )

    def __call__(self, x: tf.Tensor, noise_seed=None) -> tf.Tensor:
        """Outputs at ``x``; a ``noise_seed`` [2] draws fresh noise in noisy layers."""
        x = float_observations(x)
        if self.normalizer is not None:
            x = self.normalizer(x)
        x = tf.reshape(x, [tf.shape(x)[0], -1])
        layers = (*self.hidden, self.out)
        seeds = layer_noise_seeds(noise_seed, len(layers))
        for layer, seed in zip(self.hidden, seeds):
            x = self.activation(layer(x, seed))
        return self.out(x, seeds[-1])

    def resample_noise(self, seed: tf.Tensor) -> tf.Tensor:
        """Redraws the acting weights of noisy layers; returns True (for tf.cond)."""
        return resample_noise((*self.hidden, self.out), seed)

    def layer_variables(self) -> List[tf.Variable]:
        """[w0, b0, w1, b1, ..., w_out, b_out]: the order ``host_forward`` reads."""
        return [v for layer in (*self.hidden, self.out) for v in (layer.w, layer.b)]

    def host_forward(self, x: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """The layers in NumPy (rl/models/host.py), from copies of ``layer_variables()``;
        an input normalizer is not applied (HostPolicy applies a model's).

        Args:
            x: [B, ...] inputs.
            arrays: the values of ``layer_variables()``, in that order.
        """
        return mlp_forward(x, arrays, self.activation_name)


class NatureCNN(tf.Module):
    """The DQN torso of Mnih et al. (2015): 32 8x8/4, 64 4x4/2, 64 3x3/1 convolutions
    and a 512-unit layer, ReLU throughout, then a linear output layer.

    Takes [B, H, W, C] images (uint8 or float), or stacks of frames [B, k, H, W] as
    Gymnasium's FrameStackObservation makes them (Atari: k = 4): whichever end axis
    is shorter holds the channels. H and W must be at least 36.
    """

    def __init__(
        self,
        obs_shape: Tuple[int, ...],
        output_size: int,
        output_gain: float,
        seed: int,
        noisy_sigma0=None,
    ):
        super().__init__(name="nature_cnn")
        given = tuple(obs_shape)
        self.frames_first = len(given) == 3 and given[0] < given[-1]
        if self.frames_first:
            obs_shape = (*given[1:], given[0])
        if len(obs_shape) != 3 or min(obs_shape[:2]) < 36:
            raise ValueError(
                f"torso=nature_cnn needs [H, W, C] or [k, H, W] image observations with "
                f"H, W >= 36, got shape {given}"
            )
        self.convs = [
            Conv(obs_shape[-1], 32, 8, 4, seed),
            Conv(32, 64, 4, 2, seed + 1),
            Conv(64, 64, 3, 1, seed + 2),
        ]
        size = np.array(obs_shape[:2])
        for conv in self.convs:
            size = (size - conv.w.shape[0]) // conv.stride + 1
        # With noisy_sigma0 the two fully connected layers are noisy, the convolutions not.
        self.hidden = fully_connected(
            int(np.prod(size)) * 64, 512, 2**0.5, seed + 3, "hidden", noisy_sigma0
        )
        self.out = fully_connected(512, output_size, output_gain, seed + 4, "out", noisy_sigma0)

    def layer_variables(self) -> List[tf.Variable]:
        """Every weight, convolutions first (graph acting loads them in this order)."""
        layers = (*self.convs, self.hidden, self.out)
        return [v for layer in layers for v in (layer.w, layer.b)]

    def __call__(self, x: tf.Tensor, noise_seed=None) -> tf.Tensor:
        if self.frames_first:
            x = tf.transpose(x, [0, 2, 3, 1])  # convolutions read NHWC
        x = float_observations(x)
        for conv in self.convs:
            x = tf.nn.relu(conv(x))
        hidden_seed, out_seed = layer_noise_seeds(noise_seed, 2)
        x = tf.nn.relu(self.hidden(tf.reshape(x, [tf.shape(x)[0], -1]), hidden_seed))
        return self.out(x, out_seed)

    def resample_noise(self, seed: tf.Tensor) -> tf.Tensor:
        """Redraws the acting weights of noisy layers; returns True (for tf.cond)."""
        return resample_noise((self.hidden, self.out), seed)


def build_network(
    settings: ModelSettings,
    obs_shape: Tuple[int, ...],
    output_size: int,
    output_gain: float,
    seed: int,
    name: str,
    noisy_sigma0=None,
    normalizer=None,
):
    """The torso the settings name, with a linear output of ``output_size``
    (noisy fully connected layers with ``noisy_sigma0``; an MLP's inputs through
    ``normalizer`` first)."""
    if settings.torso == "nature_cnn":
        return NatureCNN(obs_shape, output_size, output_gain, seed, noisy_sigma0)
    return MLP(
        int(np.prod(obs_shape)),
        settings.hidden_sizes,
        output_size,
        settings.activation,
        output_gain,
        seed,
        name=name,
        noisy_sigma0=noisy_sigma0,
        normalizer=normalizer,
    )


def illegal_penalty(obs: tf.Tensor, num_actions: int) -> tf.Tensor:
    """[B, A]: 0 for legal moves, ILLEGAL_SCORE for illegal ones (the observations' last
    ``num_actions`` entries, 1 = legal)."""
    return (1.0 - tf.cast(obs[:, -num_actions:], tf.float32)) * ILLEGAL_SCORE


class ActorCritic(tf.Module):
    """Separate policy and value networks: obs [B, ...] -> action distribution, value [B]."""

    outputs = "distribution"  # what its policy gives act_select

    def __init__(
        self,
        settings: ModelSettings,
        observation_space: gym.Space,
        action_space: gym.Space,
        seed: int,
    ):
        super().__init__(name="actor_critic")
        self.head: ActionHead = action_head(action_space, settings.action_distribution)
        self.masked_actions = masked_actions(settings, self.head, observation_space)
        obs_shape = tuple(observation_space.shape)
        self.normalizer = observation_normalizer(settings, observation_space)
        self.policy_net = build_network(
            settings, obs_shape, self.head.num_outputs, 0.01, seed, "policy", None, self.normalizer
        )
        self.value_net = build_network(
            settings, obs_shape, 1, 1.0, seed + 1000, "value", None, self.normalizer
        )
        self.log_std = None
        if self.head.continuous:
            self.log_std = tf.Variable(
                tf.fill([self.head.action_size], float(settings.log_std_init)), name="log_std"
            )

    def policy(self, obs: tf.Tensor):
        """The action distribution at ``obs`` (a tfp Distribution); illegal moves (games)
        have probability 0."""
        outputs = self.policy_net(obs)
        if self.masked_actions:
            outputs = outputs + illegal_penalty(obs, self.masked_actions)
        return self.head.distribution(outputs, self.log_std)

    def value(self, obs: tf.Tensor) -> tf.Tensor:
        """V(obs) [B]."""
        return tf.squeeze(self.value_net(obs), -1)

    def acting_variables(self) -> List[tf.Variable]:
        """What acting reads: the observation statistics, the policy network (not the
        value's) and the log std."""
        extra = [self.log_std] if self.log_std is not None else []
        return normalizer_variables(self.normalizer) + self.policy_net.layer_variables() + extra

    def host_network(self) -> HostPolicy:
        """``policy`` in NumPy, reading copies of ``acting_variables()`` (MLP torso only)."""
        return HostPolicy(
            self.outputs,
            self.head,
            _mlp(self.policy_net).activation_name,
            self.log_std is not None,
            masked_actions=self.masked_actions,
            observation_clip=observation_clip(self.normalizer),
        )


class QNetwork(tf.Module):
    """Observations to Q-values [B, ...] -> [B, A]: one output per action, or the
    mean of a return distribution (C51's atoms, QR-DQN's quantiles); with dueling
    streams and noisy layers as the settings' QHeadSettings fields say."""

    outputs = "q_values"

    def __init__(
        self,
        settings: QHeadSettings,
        observation_space: gym.Space,
        action_space: gym.Space,
        seed: int,
    ):
        super().__init__(name="q_network")
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"a Q-network needs Discrete actions, the env has {action_space}")
        self.head = action_head(action_space)
        self.masked_actions = masked_actions(settings, self.head, observation_space)
        self.layout = QHeadLayout.from_settings(settings, int(action_space.n))
        support = self.layout.support
        self.support = tf.constant(support, tf.float32) if support else None
        self.noisy = settings.noisy
        self.normalizer = observation_normalizer(settings, observation_space)
        self.q = build_network(
            settings,
            tuple(observation_space.shape),
            self.layout.num_outputs,
            1.0,
            seed,
            "q",
            noisy_sigma0=settings.noisy_sigma0 if settings.noisy else None,
            normalizer=self.normalizer,
        )

    def logits(self, obs: tf.Tensor, noise_seed=None) -> tf.Tensor:
        """[B, A, N]: per-action outputs (N = 1), C51's atom logits or QR-DQN's quantile
        values, dueling combined.

        ``noise_seed`` [2] draws fresh noise in noisy layers; without, the acting draw.
        """
        outputs = self.q(obs, noise_seed)
        num_actions, atoms = self.layout.num_actions, self.layout.num_atoms
        if not self.layout.dueling:
            return tf.reshape(outputs, [-1, num_actions, atoms])
        value = outputs[:, None, :atoms]
        advantages = tf.reshape(outputs[:, atoms:], [-1, num_actions, atoms])
        return value + advantages - tf.reduce_mean(advantages, axis=1, keepdims=True)

    def q_values(self, logits: tf.Tensor) -> tf.Tensor:
        """[B, A] from ``logits(...)``: the outputs, or the return distribution's mean."""
        if self.layout.num_quantiles > 1:  # a Q-value is the mean of its quantiles
            return tf.reduce_mean(logits, -1)
        if self.support is None:
            return logits[..., 0]
        return tf.reduce_sum(tf.nn.softmax(logits, -1) * self.support, -1)

    def __call__(self, obs: tf.Tensor, noise_seed=None) -> tf.Tensor:
        """Q-values [B, A]; illegal moves (games) get ILLEGAL_SCORE."""
        q = self.q_values(self.logits(obs, noise_seed))
        return q + illegal_penalty(obs, self.masked_actions) if self.masked_actions else q

    def policy(self, obs: tf.Tensor) -> tf.Tensor:
        """What act_select chooses from: the Q-values [B, A] (noisy: the acting draw)."""
        return self(obs)

    def resample_noise(self, seed: tf.Tensor) -> tf.Tensor:
        """Redraws a noisy network's acting weights; returns True (for tf.cond)."""
        return self.q.resample_noise(seed)

    def acting_variables(self) -> List[tf.Variable]:
        """What acting reads: the observation statistics and every weight of the
        Q-network (noisy: the acting draw)."""
        return normalizer_variables(self.normalizer) + self.q.layer_variables()

    def host_network(self) -> HostPolicy:
        """``policy`` in NumPy, reading copies of ``acting_variables()`` (MLP torso only)."""
        return HostPolicy(
            self.outputs,
            self.head,
            _mlp(self.q).activation_name,
            q_layout=self.layout,
            masked_actions=self.masked_actions,
            observation_clip=observation_clip(self.normalizer),
        )


class QCritics(tf.Module):
    """C critics Q_c(s, a), each an MLP on [flattened obs, action]: -> [C, B]."""

    def __init__(
        self,
        settings: ModelSettings,
        obs_size: int,
        action_size: int,
        count: int,
        seed,
        normalizer=None,
    ):
        super().__init__(name="critics")
        self.normalizer = normalizer  # the policy's: the critics see the same inputs
        self.nets = [
            MLP(
                obs_size + action_size,
                settings.hidden_sizes,
                1,
                settings.activation,
                1.0,
                seed + 100 * c,
                name=f"critic_{c}",
            )
            for c in range(count)
        ]

    def __call__(self, obs: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        batch = tf.shape(obs)[0]
        obs = float_observations(obs)
        if self.normalizer is not None:
            obs = self.normalizer(obs)
        inputs = tf.concat(
            [
                tf.reshape(obs, [batch, -1]),
                tf.reshape(tf.cast(actions, tf.float32), [batch, -1]),
            ],
            axis=-1,
        )
        return tf.stack([tf.squeeze(net(inputs), -1) for net in self.nets])


def _bounded_box(action_space: gym.Space, model: str) -> None:
    space = action_space
    if not (
        isinstance(space, gym.spaces.Box)
        and np.all(np.isfinite(space.low))
        and np.all(np.isfinite(space.high))
    ):
        raise ValueError(f"model {model} needs a Box action space with finite bounds, not {space}")


def policy_and_critics(
    settings, observation_space: gym.Space, action_size: int, outputs_per_action: int, seed
):
    """What SAC's and TD3's models share: (observation normalizer or None, the policy
    MLP with ``outputs_per_action`` x ``action_size`` outputs, the critics), the
    normalizer feeding both networks."""
    normalizer = observation_normalizer(settings, observation_space)
    obs_size = int(np.prod(observation_space.shape))
    policy_net = MLP(
        obs_size,
        settings.hidden_sizes,
        outputs_per_action * action_size,
        settings.activation,
        0.01,
        seed,
        "policy",
        normalizer=normalizer,
    )
    critics = QCritics(
        settings, obs_size, action_size, settings.num_critics, seed + 1000, normalizer
    )
    return normalizer, policy_net, critics


class SquashedGaussianActorQ(tf.Module):
    """SAC's networks: a tanh-squashed Gaussian policy whose network gives the mean and
    the log std per state, and Q-critics. obs [B, ...] -> distribution; (obs, a) -> [C, B]."""

    outputs = "distribution"
    LOG_STD_BOUNDS = (
        MIN_LOG_STD,
        2.0,
    )  # keeps the std in [2e-9, 7.4], as SAC's reference code does

    def __init__(self, settings, observation_space: gym.Space, action_space: gym.Space, seed: int):
        super().__init__(name="squashed_gaussian_q")
        _bounded_box(action_space, "squashed_gaussian_q")
        self.head: ActionHead = action_head(action_space, "tanh_gaussian")
        self.normalizer, self.policy_net, self.critics = policy_and_critics(
            settings, observation_space, self.head.action_size, 2, seed
        )

    def _mean_and_log_std(self, obs: tf.Tensor):
        mean, log_std = tf.split(self.policy_net(obs), 2, axis=-1)
        return mean, tf.clip_by_value(log_std, *self.LOG_STD_BOUNDS)

    def policy(self, obs: tf.Tensor):
        """The action distribution at ``obs`` (a tfp TransformedDistribution)."""
        return self.head.distribution(*self._mean_and_log_std(obs))

    def sample_with_log_prob(self, obs: tf.Tensor, noise: tf.Tensor):
        """Reparameterised actions a = squash(mean + std * noise) [B, D] and log pi(a|s) [B].

        The log-prob is taken before the squash, minus the squash's log-Jacobian,
        which stays finite where the squashed action reaches a bound.
        """
        mean, log_std = self._mean_and_log_std(obs)
        distribution = self.head.distribution(mean, log_std)
        raw = mean + tf.exp(log_std) * tf.reshape(noise, tf.shape(mean))
        log_det = distribution.bijector.forward_log_det_jacobian(raw, event_ndims=1)
        return (
            distribution.bijector.forward(raw),
            distribution.distribution.log_prob(raw) - log_det,
        )

    def policy_variables(self) -> List[tf.Variable]:
        return list(self.policy_net.trainable_variables)

    def critic_variables(self) -> List[tf.Variable]:
        return list(self.critics.trainable_variables)

    def acting_variables(self) -> List[tf.Variable]:
        """What acting reads: the observation statistics and the policy network."""
        return normalizer_variables(self.normalizer) + self.policy_net.layer_variables()

    def host_network(self) -> HostPolicy:
        """``policy`` in NumPy, reading copies of ``acting_variables()``."""
        return HostPolicy(
            self.outputs,
            self.head,
            self.policy_net.activation_name,
            log_std_in_outputs=True,
            log_std_bounds=self.LOG_STD_BOUNDS,
            observation_clip=observation_clip(self.normalizer),
        )


class DeterministicActorQ(tf.Module):
    """TD3's and DDPG's networks: a deterministic policy mu(s) = tanh(net(s)) mapped onto
    the bounds, and Q-critics. Acting adds Gaussian noise of a fixed std to mu(s)
    (``exploration_noise`` times the half-range), which ``policy`` gives as a Gaussian
    whose samples are clipped to the bounds and whose mode is mu(s)."""

    outputs = "distribution"

    def __init__(self, settings, observation_space: gym.Space, action_space: gym.Space, seed: int):
        super().__init__(name="deterministic_actor_q")
        _bounded_box(action_space, "deterministic_actor_q")
        self.head: ActionHead = action_head(action_space, "gaussian")
        self.normalizer, self.policy_net, self.critics = policy_and_critics(
            settings, observation_space, self.head.action_size, 1, seed
        )
        scale, shift = self.head.scale_and_shift()
        self._scale = tf.constant(scale.reshape(-1), tf.float32)
        self._shift = tf.constant(shift.reshape(-1), tf.float32)
        # Not trained: part of the acting weights so actors elsewhere explore alike. With
        # Ornstein-Uhlenbeck noise the actor adds the noise, so the Gaussian's std is ~0.
        std = settings.exploration_noise * scale.reshape(-1)
        if settings.noise_process != "gaussian":
            std = np.full_like(std, np.exp(MIN_LOG_STD))
        self.log_std = tf.Variable(
            np.log(std).astype(np.float32),
            trainable=False,
            name="exploration_log_std",
        )

    def action(self, obs: tf.Tensor) -> tf.Tensor:
        """mu(s) [B, D] within the bounds."""
        return tf.tanh(self.policy_net(obs)) * self._scale + self._shift

    def policy(self, obs: tf.Tensor):
        """N(mu(s), exploration std): what act_select samples from (mode: mu(s))."""
        return self.head.distribution(self.action(obs), self.log_std)

    def policy_variables(self) -> List[tf.Variable]:
        return list(self.policy_net.trainable_variables)

    def critic_variables(self) -> List[tf.Variable]:
        return list(self.critics.trainable_variables)

    def acting_variables(self) -> List[tf.Variable]:
        """What acting reads: the observation statistics, the policy network and the
        exploration log std."""
        return (
            normalizer_variables(self.normalizer)
            + self.policy_net.layer_variables()
            + [self.log_std]
        )

    def host_network(self) -> HostPolicy:
        """``policy`` in NumPy, reading copies of ``acting_variables()``."""
        return HostPolicy(
            self.outputs,
            self.head,
            self.policy_net.activation_name,
            has_log_std=True,
            squash_mean=True,
            observation_clip=observation_clip(self.normalizer),
        )


def _mlp(network) -> MLP:
    """``network`` if it is an MLP; acting on the host runs MLPs only."""
    if not isinstance(network, MLP):
        raise ValueError(
            f"acting on the host runs MLP torsos only, not {type(network).__name__}; "
            "set host_acting=false"
        )
    return network
