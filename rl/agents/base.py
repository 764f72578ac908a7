"""What every agent shares: a model, an algo, random streams and an optimizer.

An agent is used as ``act`` -> env step -> ``observe`` -> ``update``; the
plain-Python loop around it lives in ``rl/experiment.py``. Each update is one
compiled call (all epochs/gradient steps inside) that also returns the new
weights the act_select reads, so acting with ``host_acting`` (the default) is
NumPy on the host: no call into TensorFlow per environment step. With
``host_acting=False`` acting is one compiled call per vectorised env step.
"""

import json
import math
from typing import Dict, List, Optional, Tuple

import gymnasium as gym
import keras
import numpy as np

from rl import registry, seeding
from rl._tf import tf
from rl.algos import make_algo
from rl.counters import Counters
from rl.envs import num_actions
from rl.hparams.base import HParams


class NonFiniteError(ArithmeticError):
    """An update produced a non-finite loss or weights; ``str()`` is one line."""


class RandomStream(tf.train.experimental.PythonState):
    """A NumPy generator whose state travels inside tf.train checkpoints."""

    def __init__(self, generator: np.random.Generator):
        self.generator = generator

    def serialize(self) -> bytes:
        return json.dumps(self.generator.bit_generator.state).encode()

    def deserialize(self, data: bytes) -> None:
        self.generator.bit_generator.state = json.loads(data)


class Agent(tf.Module):
    """Model + Algo, with the state that must be checkpointed alongside."""

    # Registered names each hparams field may take for this agent (e.g. the
    # losses its update step can call); fields not listed take any name.
    fitting_components: Dict[str, Tuple[str, ...]] = {}

    def __init__(self, hp: HParams, observation_space: gym.Space, action_space: gym.Space):
        """Builds model, algo, optimizer and random streams from ``hp``.

        Args:
            hp: the agent's hparams.
            observation_space: a (flattened) Box space from rl.envs.
            action_space: the env's action space.
        """
        super().__init__(name=hp.agent)
        self.hp = hp
        self.obs_shape: Tuple[int, ...] = tuple(observation_space.shape)
        self.num_actions = num_actions(action_space)
        input_size = int(np.prod(self.obs_shape))
        self.model = registry.models.get(hp.model)(hp, input_size, self.num_actions, seed=hp.seed)
        self.algo = make_algo(hp.act_select, hp.eval_act_select, hp.grad_comp)
        # One stream per purpose (rl/seeding.py): acting while training, the
        # update's own draws, and compute_action() for API users. Evaluation
        # brings its own, so evaluating never moves the training streams.
        self.act_stream = RandomStream(seeding.stream(hp.seed, seeding.ACT))
        self.generator = tf.random.Generator.from_seed(
            seeding.derived_seed(hp.seed, seeding.UPDATE)
        )
        self._api_rng = seeding.stream(hp.seed, seeding.API)
        self.optimizer = keras.optimizers.Adam(learning_rate=hp.learning_rate)
        # Built now so checkpoints restore into existing slots.
        self.optimizer.build(self.model.trainable_variables)
        self.counters = Counters(env_steps=0, updates=0)
        self._preference_variables = self.model.preference_variables()
        self._host_weights: List[np.ndarray] = []
        self.refresh_host_weights()
        if not hp.host_acting:
            # Concrete functions: calling them skips tf.function's dispatch.
            self._act_in_graph = {
                explore: tf.function(
                    self._select_in_graph(explore), autograph=False
                ).get_concrete_function(
                    tf.TensorSpec([None, *self.obs_shape], tf.float32),
                    tf.TensorSpec([2], tf.int32),
                    tf.TensorSpec([], tf.float32),
                )
                for explore in (True, False)
            }

    # --- acting ------------------------------------------------------------
    def next_seed(self) -> tf.Tensor:
        """A fresh stateless seed [2] int32 from the update's generator (in graph)."""
        return tf.cast(self.generator.make_seeds(1)[:, 0], tf.int32)

    def _select_in_graph(self, explore: bool):
        select = self.algo.act_select if explore else self.algo.eval_act_select

        def act(obs: tf.Tensor, seed: tf.Tensor, epsilon: tf.Tensor) -> tf.Tensor:
            return select.graph(self.model.preferences(obs), seed, epsilon)

        return act

    def refresh_host_weights(self) -> None:
        """Copies the weights acting reads to the host (after a restore)."""
        if self.hp.host_acting:
            self._host_weights = [v.numpy() for v in self._preference_variables]

    @property
    def env_steps(self) -> int:
        """Environment steps observed so far, all copies together."""
        return self.counters["env_steps"]

    def exploration_rate(self) -> float:
        """epsilon for act_selects that use one; 0 unless the agent has a schedule."""
        return 0.0

    def act(
        self, obs: np.ndarray, explore: bool = True, rng: Optional[np.random.Generator] = None
    ) -> np.ndarray:
        """Actions for a batch of observations.

        Args:
            obs: [N, *obs_shape] observations (one per env copy).
            explore: True: the training act_select; False: the evaluation one.
            rng: where the act_select's randomness comes from; default: the
                training acting stream (checkpointed).

        Returns:
            [N] int32 actions.
        """
        rng = self.act_stream.generator if rng is None else rng
        select = self.algo.act_select if explore else self.algo.eval_act_select
        epsilon = self.exploration_rate() if explore else 0.0
        obs = np.asarray(obs, np.float32)
        if self.hp.host_acting:
            preferences = self.model.host_preferences(obs, self._host_weights)
            return select.host(preferences, rng, epsilon)
        seed = rng.integers(0, 2**31 - 1, size=2, dtype=np.int32)
        actions = self._act_in_graph[explore](
            tf.constant(obs), tf.constant(seed), tf.constant(epsilon, tf.float32)
        )
        return actions.numpy()

    def compute_action(self, obs, explore: bool = False):
        """Actions for one observation or a batch (for notebooks and serving).

        Sampling (``explore=True``) draws from a stream of its own, so calls
        made while training never change the run.

        Args:
            obs: one observation shaped like the env's, or a batch [N, ...].
            explore: sample with the training act_select instead of greedy.

        Returns:
            An int for a single observation, else an [N] int32 array.
        """
        obs = np.asarray(obs, np.float32)
        single = obs.shape == self.obs_shape
        if not single and obs.shape[1:] != self.obs_shape:
            raise ValueError(
                f"observation shape {obs.shape} is neither "
                f"{self.obs_shape} nor [N, *{self.obs_shape}]"
            )
        actions = self.act(obs[None] if single else obs, explore=explore, rng=self._api_rng)
        return int(actions[0]) if single else actions

    # --- learning ----------------------------------------------------------
    def observe(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        next_obs: np.ndarray,
    ) -> None:
        """Records one vectorised step of N transitions.

        Args:
            obs: [N, ...] observations acted on.
            actions: [N] actions taken.
            rewards: [N] rewards.
            terminated: [N] the episode reached a terminal state.
            truncated: [N] the episode was cut (time limit); bootstrapped.
            next_obs: [N, ...] true next observations (final ones at episode ends).
        """
        raise NotImplementedError

    def update(self) -> Optional[Dict[str, float]]:
        """Learns if enough has been observed; returns metrics, or None if not."""
        raise NotImplementedError

    def warnings(self, metrics: Dict[str, float]) -> List[str]:
        """Signs in an update's metrics that learning went wrong while staying finite."""
        del metrics
        return []

    def pending_steps(self) -> int:
        """Env steps observed but held outside checkpoints (e.g. a partial rollout).

        Evaluations and checkpoints wait until this is 0, so a resumed run
        never loses or repeats learning.
        """
        return 0

    def _update_outputs(self, metrics: Dict[str, tf.Tensor]):
        """What every compiled update returns: its metrics, whether all weights
        are finite, and the new values of the weights acting reads."""
        finite = tf.reduce_all(
            [tf.reduce_all(tf.math.is_finite(v)) for v in self.model.trainable_variables]
        )
        weights = (
            [v.read_value() for v in self._preference_variables] if self.hp.host_acting else []
        )
        return metrics, finite, weights

    def _finish_update(self, outputs, **more: float) -> Dict[str, float]:
        """Takes a compiled update's outputs: host weights, the finite check, metrics.

        Raises:
            NonFiniteError: a loss or a weight is NaN or infinite; the agent's
                weights are then unusable and must not be saved.
        """
        metrics, finite, weights = outputs
        self.counters.add("updates")
        result = {k: float(v) for k, v in metrics.items()}
        bad = sorted(k for k, v in result.items() if not math.isfinite(v))
        if bad or not bool(finite):
            what = f"non-finite {', '.join(bad)}" if bad else "non-finite weights"
            raise NonFiniteError(
                f"{what} in update {self.counters['updates']} at step {self.env_steps}"
            )
        self._host_weights = [w.numpy() for w in weights]
        result.update(more)
        return result

    def current_learning_rate(self) -> float:
        """The learning rate for the data being learned from now.

        Annealing counts the steps before the pending data (a PPO rollout's
        first step), so the last update of a run does not get a rate of ~0.
        """
        if not self.hp.anneal_learning_rate:
            return self.hp.learning_rate
        start = self.env_steps - self.pending_steps()
        remaining = 1.0 - start / max(self.hp.train_steps, 1)
        return self.hp.learning_rate * max(remaining, 0.0)

    # --- saving ------------------------------------------------------------
    def checkpoint_items(self) -> Dict[str, tf.Module]:
        """Everything a resumed run needs, by checkpoint key."""
        return {
            "model": self.model,
            "optimizer": self.optimizer,
            "generator": self.generator,
            "act_stream": self.act_stream,
            "counters": self.counters,
        }

    def policy_module(self) -> "GreedyPolicy":
        """The greedy policy as a tf.Module, ready for ``tf.saved_model.save``."""
        return GreedyPolicy(self.model, self.algo.eval_act_select.graph, self.obs_shape)


class GreedyPolicy(tf.Module):
    """obs [B, *obs_shape] float32 -> greedy actions [B] int32.

    Saved as a SavedModel, plain TensorFlow loads it and calls
    ``loaded(obs)`` or ``loaded.signatures["serving_default"](observations=obs)``.
    """

    def __init__(self, model: tf.Module, select, obs_shape: Tuple[int, ...]):
        super().__init__(name="greedy_policy")
        self.model = model
        self._select = select
        self.obs_spec = tf.TensorSpec([None, *obs_shape], tf.float32, name="observations")
        self.__call__.get_concrete_function(self.obs_spec)  # trace for export

    @tf.function(autograph=False)
    def __call__(self, observations: tf.Tensor) -> tf.Tensor:
        return self._select(self.model.preferences(observations), tf.zeros([2], tf.int32), 0.0)

    def save(self, path: str) -> None:
        """Writes a SavedModel with a ``serving_default`` signature."""
        signature = self.__call__.get_concrete_function(self.obs_spec)
        tf.saved_model.save(self, path, signatures={"serving_default": signature})


def clip_gradients(grads, max_norm: Optional[float]):
    """Global-norm clipping; returns the clipped grads and the norm before."""
    norm = tf.linalg.global_norm(grads)
    if max_norm is not None:
        grads, _ = tf.clip_by_global_norm(grads, max_norm, use_norm=norm)
    return grads, norm
