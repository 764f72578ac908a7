"""What the replay learners (DQN, SAC, TD3, DDPG) compose: the replay feed.

An update is a burst: every ``train_interval`` env steps (once ``learning_starts``
have been seen) the feed samples ``gradient_steps`` batches of ``batch_size`` at once
and the learner runs all of those gradient steps in one compiled call, so the number
of calls into TensorFlow per env step is 1 / train_interval whatever the burst.
"""

from typing import Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np

from rl import seeding
from rl._tf import tf
from rl.agents.learner import Batch
from rl.algos.schedules import linear_schedule
from rl.envs import atari
from rl.envs.make import split_kwargs
from rl.hparams.base import HParams
from rl.hparams.replay import ReplaySettings
from rl.memory.replay import Replay, importance_weights
from rl.memory.spec import transition_specs

BATCH_FIELDS = ("obs", "actions", "rewards", "discounts", "next_obs")


class ReplayFeed:
    """A learner's replay, and when and what it feeds the update (see the module docstring).

    A learner's ``Memory`` (rl/agents/learner.py).
    """

    def __init__(
        self,
        hp: HParams,
        observation_space: gym.Space,
        action_space: gym.Space,
        priority_exponent: float = 0.0,
    ):
        """Allocates the replay.

        Args:
            hp: the learner's hparams, with the ReplaySettings fields.
            observation_space: the env's observation space (rl.envs wrappers applied).
            action_space: the env's action space.
            priority_exponent: alpha of prioritised replay; 0 samples uniformly.
        """
        if not isinstance(hp, ReplaySettings):
            raise TypeError(f"{type(hp).__name__} has no replay settings (ReplaySettings)")
        self.hp = hp
        self.replay = Replay(
            transition_specs(observation_space, action_space),
            capacity=hp.buffer_size,
            num_envs=hp.num_envs,
            seed=seeding.derived_seed(hp.seed, seeding.REPLAY),
            n_step=hp.n_step,
            gamma=hp.gamma,
            # Stacked frames (Atari) are stored once each, not once per stack.
            frame_stack=atari.frames_per_observation(*split_kwargs(hp.env)),
            priority_exponent=priority_exponent,
        )
        # Prioritised: batches carry importance "weights" and the compiled update
        # returns the sampled transitions' new priorities [G, B] (``learned``).
        self.prioritized = self.replay.tree is not None
        self.feedback = ("priorities",) if self.prioritized else ()

    # --- the Memory interface -----------------------------------------------------
    def record(self, step: Dict[str, np.ndarray], episode_goes_on=None) -> None:
        self.replay.add(**step, episode_goes_on=episode_goes_on)

    def round_steps(self) -> int:
        return max(1, self.hp.train_interval // self.hp.num_envs)  # about one burst's data

    def rollout_size(self) -> int:
        return 0

    def pending_steps(self) -> int:
        return 0

    def end_streams(self, env_ids: Sequence[int]) -> None:
        self.replay.end_streams(env_ids)

    def separate_state(self) -> Dict[str, object]:
        return {"replay": self.replay} if self.hp.checkpoint_replay else {}

    # --- what the update takes ----------------------------------------------------
    def next_batch(self, steps: int) -> Optional[Batch]:
        """A burst's batches if one is due after ``steps`` env steps, else None:
        BATCH_FIELDS [G, B, ...]; prioritised, importance "weights" [G, B] too."""
        hp = self.hp
        # Due when the last observe (num_envs steps) crossed a multiple of
        # train_interval: derived from the counter, so resuming keeps it.
        due = steps // hp.train_interval > (steps - hp.num_envs) // hp.train_interval
        if steps < hp.learning_starts or not due:
            return None
        # The replay must hold learning_starts transitions too: a run resumed
        # without its replay (checkpoint_replay=false) refills it first.
        # Checked only when due: len() scans the ring's edges.
        if len(self.replay) < max(1, min(hp.learning_starts, hp.buffer_size // 2)):
            return None
        sample = self.replay.sample((hp.gradient_steps, hp.batch_size))
        data = {name: tf.constant(sample.batch[name]) for name in BATCH_FIELDS}
        replay_size = len(self.replay)
        info = {"replay_size": float(replay_size)}
        if self.prioritized:
            beta = linear_schedule(hp.importance_exponent, 1.0, hp.train_steps, steps)
            data["weights"] = tf.constant(
                importance_weights(sample.probabilities, replay_size, beta)
            )
            info["importance_exponent"] = beta
        return Batch(data, steps, info, sample.indices)

    def specs(self) -> Dict[str, tf.TensorSpec]:
        """What ``next_batch`` gives as ``data``, for tracing the update before the first."""
        hp = self.hp
        fields = self.replay.batch_fields((hp.gradient_steps, hp.batch_size))
        specs = {name: tf.TensorSpec(*fields[name]) for name in BATCH_FIELDS}
        if self.prioritized:
            specs["weights"] = tf.TensorSpec((hp.gradient_steps, hp.batch_size), tf.float32)
        return specs

    def learned(self, batch: Batch, feedback: Dict[str, np.ndarray]) -> None:
        """The sampled transitions' new priorities [G, B], from a finite update.

        A transition drawn twice in one burst keeps its last step's priority.
        """
        priorities = feedback["priorities"]
        self.replay.update_priorities(batch.indices, priorities + self.hp.priority_epsilon)


def divergence_warnings(
    metrics: Dict[str, float], max_abs_reward: float, gamma: float, step: int
) -> List[str]:
    """Q-values far outside what the rewards seen allow: |Q| <= max|r| / (1 - gamma).

    Targets are built only from rewards in the replay, so a mean beyond twice
    that bound means the values diverge (e.g. too high a learning rate), even
    while the loss stays finite.

    Args:
        metrics: an update's metrics, with "q_mean".
        max_abs_reward: the largest |reward| the replay has held.
        gamma: the discount.
        step: the env step, for the message.
    """
    bound = max_abs_reward / max(1.0 - gamma, 1e-6)
    q_mean = metrics.get("q_mean", 0.0)
    if abs(q_mean) > 2.0 * bound + 1.0:
        return [
            f"q_mean {q_mean:.4g} at step {step} is far outside what the rewards "
            f"allow (|Q| <= max|r| / (1 - gamma) = {bound:.4g}): the values diverge"
        ]
    return []
