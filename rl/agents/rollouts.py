"""What every rollout-based learner shares: the [T, N] rollout, and one update per rollout.

The actors record each action's behaviour log-prob beside the transition, and the
rollout keeps ``next_obs`` so that a truncated episode bootstraps from the value of
the observation it was cut at. Once ``rollout_steps`` steps of every env copy are in,
the whole rollout goes to the subclass's ``_update_step`` as one compiled call. The
policy-gradient learners (``policy_gradient.py``: PPO, A2C, VPG) and IMPALA
(``impala.py``) add that step.
"""

from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from rl._tf import tf
from rl.agents.learner import Learner
from rl.hparams.base import HParams
from rl.memory.rollout import RolloutBuffer
from rl.memory.spec import FieldSpec, transition_specs


class RolloutLearner(Learner):
    """A learner that learns from whole rollouts (see the module docstring)."""

    actor_extras = ("log_prob",)

    def __init__(self, hp: HParams, observation_space: gym.Space, action_space: gym.Space):
        """Builds the learner (``Learner.__init__``), then its rollout and compiled update.

        Args:
            hp: the agent's hparams, with ``num_envs`` and ``rollout_steps``.
            observation_space: the env's observation space (rl.envs wrappers applied).
            action_space: the env's action space.
        """
        super().__init__(hp, observation_space, action_space)
        specs = transition_specs(
            observation_space, action_space, extras={"log_prob": (np.float32, ())}
        )
        specs["next_obs"] = FieldSpec("next_obs", specs["obs"].dtype, specs["obs"].shape)
        self.rollout = RolloutBuffer(specs, hp.rollout_steps, hp.num_envs)
        self._compiled_update = self.compile_update(self._update_step)

    def record(self, step: Dict[str, np.ndarray], episode_goes_on=None) -> None:
        del episode_goes_on  # each step keeps its own next_obs
        self.rollout.add(**step)

    def round_steps(self) -> int:
        return self.hp.rollout_steps  # a round is a rollout

    def rollout_size(self) -> int:
        return self.hp.num_envs * self.hp.rollout_steps

    def pending_steps(self) -> int:
        return len(self.rollout) * self.hp.num_envs

    def update(self) -> Optional[Dict[str, float]]:
        if not self.rollout.full:
            return None
        # The schedule's step is where the rollout began, whatever its length.
        learning_rate = self.learning_rate(self.env_steps - self.pending_steps())
        batch = {name: tf.constant(array) for name, array in self.rollout.data().items()}
        self.rollout.clear()
        outputs = self._compiled_update(batch, tf.constant(learning_rate, tf.float32))
        return self._finish_update(outputs, learning_rate=learning_rate)

    def warm_up(self) -> None:
        batch = {
            name: tf.TensorSpec(array.shape, tf.as_dtype(array.dtype))
            for name, array in self.rollout.data().items()
        }
        self._compiled_update.get_concrete_function(batch, tf.TensorSpec((), tf.float32))

    def _update_step(self, batch: Dict[str, tf.Tensor], learning_rate: tf.Tensor):
        """The compiled update on a [T, N] rollout; returns what ``_finish_update`` takes."""
        raise NotImplementedError


def flat(x: tf.Tensor) -> tf.Tensor:
    """[T, N, ...] -> [T * N, ...]; the result's shape is static where x's is."""
    return tf.reshape(x, [-1, *x.shape[2:]])
