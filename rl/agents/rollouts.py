"""What the rollout learners (PPO, A2C, VPG, IMPALA) compose: the rollout and GAE over it.

The actors record each action's behaviour log-prob beside the transition, and the
rollout keeps ``next_obs`` so that a truncated episode bootstraps from the value of
the observation it was cut at. Once ``rollout_steps`` steps of every env copy are in,
the learner takes the whole rollout into its compiled update. The functions below are
the pieces of that update PPO, A2C and VPG share: GAE with the pre-update critic,
shuffled minibatches over epochs, and standardised advantages.
"""

from typing import Callable, Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np

from rl._tf import tf
from rl.agents.learner import Batch, run_gradient_steps
from rl.algos.grad_comp.gae import gae_advantages
from rl.memory.rollout import RolloutBuffer
from rl.memory.spec import FieldSpec, transition_specs


class RolloutMemory:
    """The [T, N] rollout of ``rollout_steps`` vectorised steps of ``num_envs`` copies.

    A learner's ``Memory`` (rl/agents/learner.py): an update is due when it is full.
    """

    feedback = ()  # the update returns nothing to the rollout

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        rollout_steps: int,
        num_envs: int,
    ):
        """Allocates the rollout.

        Args:
            observation_space: the env's observation space (rl.envs wrappers applied).
            action_space: the env's action space.
            rollout_steps: vectorised steps per rollout (T).
            num_envs: env copies (N).
        """
        specs = transition_specs(
            observation_space, action_space, extras={"log_prob": (np.float32, ())}
        )
        specs["next_obs"] = FieldSpec("next_obs", specs["obs"].dtype, specs["obs"].shape)
        self.buffer = RolloutBuffer(specs, rollout_steps, num_envs)

    # --- the Memory interface -----------------------------------------------------
    def record(self, step: Dict[str, np.ndarray], episode_goes_on=None) -> None:
        del episode_goes_on  # each step keeps its own next_obs
        self.buffer.add(**step)

    def round_steps(self) -> int:
        return self.buffer.steps  # a round is a rollout

    def rollout_size(self) -> int:
        return self.buffer.num_envs * self.buffer.steps

    def pending_steps(self) -> int:
        return len(self.buffer) * self.buffer.num_envs

    def end_streams(self, env_ids: Sequence[int]) -> None:
        del env_ids  # each step keeps its own next_obs: nothing joins across the reset

    def separate_state(self) -> Dict[str, object]:
        return {}

    # --- what the update takes ----------------------------------------------------
    def next_batch(self, steps: int) -> Optional[Batch]:
        """The whole rollout once it is full (the memory starts the next), else None.

        The learning-rate schedule is read where the rollout began, whatever its length.
        """
        if not self.full:
            return None
        first_step = steps - self.pending_steps()
        return Batch(self.take(), first_step, {})

    def learned(self, batch: Batch, feedback: Dict[str, np.ndarray]) -> None:
        del batch, feedback  # nothing comes back to a rollout

    @property
    def full(self) -> bool:
        """Whether the rollout is complete: an update is due."""
        return self.buffer.full

    def __len__(self) -> int:
        return len(self.buffer)

    def data(self) -> Dict[str, np.ndarray]:
        """The [T, N, ...] arrays (views: copy them before the next ``record``)."""
        return self.buffer.data()

    def take(self) -> Dict[str, tf.Tensor]:
        """The full rollout as tensors; the memory starts the next one."""
        batch = {name: tf.constant(array) for name, array in self.buffer.data().items()}
        self.buffer.clear()
        return batch

    def specs(self) -> Dict[str, tf.TensorSpec]:
        """What ``take`` returns, for tracing the update before the first rollout."""
        return {
            name: tf.TensorSpec(array.shape, tf.as_dtype(array.dtype))
            for name, array in self.buffer.data().items()
        }


def flat(x: tf.Tensor) -> tf.Tensor:
    """[T, N, ...] -> [T * N, ...]; the result's shape is static where x's is."""
    return tf.reshape(x, [-1, *x.shape[2:]])


def advantages_over_rollout(
    value: Callable[[tf.Tensor], tf.Tensor],
    batch: Dict[str, tf.Tensor],
    gamma: float,
    lam: float,
) -> Dict[str, tf.Tensor]:
    """GAE on a [T, N] rollout, with the critic before the update, flattened for minibatches.

    Both value passes are one batched call each; the rollout's shape must be static
    (it is when the update is traced), so graph optimisation folds the shape
    arithmetic of every gradient step.

    Args:
        value: obs [B, ...] -> V(obs) [B], the critic.
        batch: the rollout (``RolloutMemory.take``): obs, actions, rewards, terminated,
            truncated, next_obs, log_prob, each [T, N, ...].
        gamma: the discount.
        lam: GAE's lambda.

    Returns:
        [T * N, ...] obs, actions, old_log_probs, advantages, returns, old_values (V(obs)
        before the update).
    """
    steps, envs = batch["rewards"].shape
    obs = flat(batch["obs"])
    values = value(obs)
    next_values = value(flat(batch["next_obs"]))
    advantages, returns = gae_advantages(
        batch["rewards"],
        tf.reshape(values, [steps, envs]),
        tf.reshape(next_values, [steps, envs]),
        batch["terminated"],
        batch["truncated"],
        gamma,
        lam,
    )
    return {
        "obs": obs,
        "actions": flat(batch["actions"]),
        "old_log_probs": flat(batch["log_prob"]),
        "advantages": flat(advantages),
        "returns": flat(returns),
        "old_values": values,
    }


def minibatch_size(batch: int, minibatches: int) -> int:
    """The size of each of ``minibatches`` equal parts of ``batch`` examples.

    Raises:
        ValueError: if they cannot be equal.
    """
    if batch % minibatches:
        raise ValueError(
            f"num_envs * rollout_steps = {batch} must be divisible by "
            f"num_minibatches = {minibatches}"
        )
    return batch // minibatches


def epochs_of_minibatches(
    data: Dict[str, tf.Tensor],
    seeds: List[tf.Tensor],
    minibatches: int,
    step: Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]],
    names: Sequence[str],
) -> Dict[str, tf.Tensor]:
    """``step`` on each minibatch of each epoch, in one tf.while_loop; the metrics' means.

    Each epoch is one permutation of the data (argsort of uniforms, which XLA
    compiles) cut into ``minibatches`` equal parts.

    Args:
        data: [B, ...] tensors sharing the batch axis; B must be static.
        seeds: one stateless seed [2] per epoch.
        minibatches: parts per epoch; must divide B.
        step: one gradient step on a minibatch; returns scalar metrics.
        names: the metrics to average.
    """
    size = next(iter(data.values())).shape[0]
    orders = tf.stack([tf.argsort(tf.random.stateless_uniform([size], seed)) for seed in seeds])
    indices = tf.reshape(orders, [len(seeds) * minibatches, size // minibatches])

    def gradient_step(i):
        index = indices[i]  # minibatch i % minibatches of epoch i // minibatches
        return step({k: tf.gather(v, index) for k, v in data.items()})

    return run_gradient_steps(len(seeds) * minibatches, gradient_step, names)


def standardized(x: tf.Tensor) -> tf.Tensor:
    """x [B] shifted and scaled to zero mean and unit std over the batch."""
    mean, variance = tf.nn.moments(x, axes=[0])
    return (x - mean) / (tf.sqrt(variance) + 1e-8)


def explained_variance(returns: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
    """1 - Var[R - V] / Var[R] over the batch: 1 when the critic predicts every return."""
    return 1.0 - (
        tf.math.reduce_variance(returns - values) / (tf.math.reduce_variance(returns) + 1e-8)
    )
