"""What every replay-based learner shares: the replay, when updates are due, target syncs.

An update is a burst: every ``train_interval`` env steps (once ``learning_starts``
have been seen) it samples ``gradient_steps`` batches of ``batch_size`` at once
and runs all of those gradient steps in one compiled call, so the number of
calls into TensorFlow per env step is 1 / train_interval whatever the burst.
DQN (``dqn.py``) and the continuous-control learners (``continuous.py``: SAC,
TD3, DDPG) add their networks and gradient step.
"""

from typing import Dict, List, Optional, Sequence

import numpy as np

from rl import seeding
from rl._tf import tf
from rl.agents.learner import Learner
from rl.algos.schedules import linear_schedule
from rl.envs import atari
from rl.memory.replay import Replay, importance_weights
from rl.memory.spec import transition_specs

BATCH_FIELDS = ("obs", "actions", "rewards", "discounts", "next_obs")


class ReplayLearner(Learner):
    """A learner fed from a replay in bursts of gradient steps (see the module docstring)."""

    def __init__(self, hp, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        self.check_divisible("batch_size", hp.batch_size)
        self.replay = Replay(
            transition_specs(observation_space, action_space),
            capacity=hp.buffer_size,
            num_envs=hp.num_envs,
            seed=seeding.derived_seed(hp.seed, seeding.REPLAY),
            n_step=hp.n_step,
            gamma=hp.gamma,
            # Stacked frames (Atari) are stored once each, not once per stack.
            frame_stack=atari.frames_per_observation(hp.env),
            priority_exponent=self.priority_exponent(hp),
        )
        # Prioritised: batches carry importance "weights" and the compiled update
        # returns the sampled transitions' new priorities [G, B] last.
        self.prioritized = self.replay.tree is not None

    @classmethod
    def priority_exponent(cls, hp) -> float:
        """alpha of prioritised replay; 0 (the default) samples uniformly."""
        del hp
        return 0.0

    def record(self, step: Dict[str, np.ndarray], episode_goes_on=None) -> None:
        self.replay.add(**step, episode_goes_on=episode_goes_on)

    def break_streams(self, env_ids) -> None:
        super().break_streams(env_ids)
        self.replay.end_streams(env_ids)

    def update(self) -> Optional[Dict[str, float]]:
        hp = self.hp
        steps = self.env_steps
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
        learning_rate = self.learning_rate(steps)
        # Gradient steps so far: updates x gradient_steps (one place for the count).
        done_before = self.counters["updates"] * hp.gradient_steps
        batch = {name: tf.constant(sample.batch[name]) for name in BATCH_FIELDS}
        replay_size = len(self.replay)
        more = {}
        if self.prioritized:
            beta = linear_schedule(hp.importance_exponent, 1.0, hp.train_steps, steps)
            batch["weights"] = tf.constant(
                importance_weights(sample.probabilities, replay_size, beta)
            )
            more["importance_exponent"] = beta
        outputs = self._compiled_update(
            batch, tf.constant(learning_rate, tf.float32), tf.constant(done_before, tf.int64)
        )
        if self.prioritized:
            *outputs, priorities = outputs
        result = self._finish_update(
            outputs,
            learning_rate=learning_rate,
            replay_size=float(replay_size),
            **more,
            **self.update_info(steps),
        )
        if self.prioritized:  # only finite updates reach here
            # A transition drawn twice in one burst keeps its last step's priority.
            self.replay.update_priorities(sample.indices, priorities.numpy() + hp.priority_epsilon)
        return result

    def warm_up(self) -> None:
        hp = self.hp
        fields = self.replay.batch_fields((hp.gradient_steps, hp.batch_size))
        batch = {name: tf.TensorSpec(*fields[name]) for name in BATCH_FIELDS}
        if self.prioritized:
            batch["weights"] = tf.TensorSpec((hp.gradient_steps, hp.batch_size), tf.float32)
        self._compiled_update.get_concrete_function(
            batch, tf.TensorSpec((), tf.float32), tf.TensorSpec((), tf.int64)
        )

    def update_info(self, steps: int) -> Dict[str, float]:
        """Values logged with each update beside its metrics (e.g. DQN's epsilon)."""
        del steps
        return {}

    def warnings(self, metrics: Dict[str, float]) -> List[str]:
        """Q-values far outside what the rewards seen allow: |Q| <= max|r| / (1 - gamma).

        Targets are built only from rewards in the replay, so a mean beyond
        twice that bound means the values diverge (e.g. too high a learning
        rate), even while the loss stays finite.
        """
        bound = self.replay.max_abs_reward / max(1.0 - self.hp.gamma, 1e-6)
        q_mean = metrics.get("q_mean", 0.0)
        if abs(q_mean) > 2.0 * bound + 1.0:
            return [
                f"q_mean {q_mean:.4g} at step {self.env_steps} is far outside what the rewards "
                f"allow (|Q| <= max|r| / (1 - gamma) = {bound:.4g}): the values diverge"
            ]
        return []

    def separate_state(self) -> Dict[str, object]:
        return {"replay": self.replay} if self.hp.checkpoint_replay else {}


def soft_update(targets: Sequence[tf.Variable], onlines: Sequence[tf.Variable], tau) -> tf.Tensor:
    """target <- tau * online + (1 - tau) * target, pairwise; returns True (for tf.cond)."""
    for target, online in zip(targets, onlines):
        target.assign(tau * online + (1.0 - tau) * target)
    return tf.constant(True)
