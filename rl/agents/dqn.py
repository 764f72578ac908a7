"""DQN's learner: replay, a target network, and bursts of gradient steps.

Replay lives in NumPy (rl/memory); one update samples ``gradient_steps``
batches at once and runs all of those gradient steps, with the target
network's syncs, in a single compiled call. Exploration is a pure function
of the env step the actor passes in.
"""

import functools
from typing import Dict, List, Optional

import numpy as np

from rl import seeding
from rl._tf import tf
from rl.agents.learner import Learner, clip_gradients, run_gradient_steps
from rl.algos.grad_comp.checks import weighted_mean
from rl.algos.schedules import apex_epsilons, linear_schedule
from rl.envs import atari
from rl.hparams.dqn import DQNHParams
from rl.memory.replay import Replay
from rl.memory.spec import transition_specs

METRICS = ("loss", "q_mean", "target_mean", "grad_norm")
BATCH_FIELDS = ("obs", "actions", "rewards", "discounts", "next_obs")


class DQNLearner(Learner):
    """Deep Q-Networks (Mnih et al. 2015), double-Q by default, discrete actions."""

    fitting_components = {
        "model": ("q_network",),
        "grad_comp": ("dqn_td",),
        "act_select": ("epsilon_greedy", "greedy"),
    }

    def __init__(self, hp: DQNHParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        self.target_model = self.build_model()
        self._sync_target(1.0)
        self.replay = Replay(
            transition_specs(observation_space, action_space),
            capacity=hp.buffer_size,
            num_envs=hp.num_envs,
            seed=seeding.derived_seed(hp.seed, seeding.REPLAY),
            n_step=hp.n_step,
            gamma=hp.gamma,
            # Stacked frames (Atari) are stored once each, not once per stack.
            frame_stack=atari.frames_per_observation(hp.env),
        )
        # Explicit tf.while_loop/tf.cond: no autograph transformation needed.
        self._compiled_update = tf.function(
            self._update_step, jit_compile=hp.jit_compile, autograph=False
        )

    @classmethod
    def exploration_schedule(cls, hp: DQNHParams):
        if hp.apex_exploration:
            return functools.partial(apex_epsilons, hp.num_envs)
        return functools.partial(
            linear_schedule, hp.epsilon_start, hp.epsilon_end, hp.epsilon_decay_steps
        )

    def observe(self, **step: np.ndarray) -> None:
        self.replay.add(**step)
        self.counters.add("env_steps", len(step["rewards"]))

    def break_streams(self, env_ids) -> None:
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
        outputs = self._compiled_update(
            {name: tf.constant(sample.batch[name]) for name in BATCH_FIELDS},
            tf.constant(learning_rate, tf.float32),
            tf.constant(done_before, tf.int64),
        )
        return self._finish_update(
            outputs,
            learning_rate=learning_rate,
            epsilon=self.exploration(hp, steps),
            replay_size=float(len(self.replay)),
        )

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

    def _sync_target(self, tau: float) -> tf.Tensor:
        """target <- tau * online + (1 - tau) * target; returns True (for tf.cond)."""
        for target, online in zip(self.target_model.variables, self.model.variables):
            target.assign(tau * online + (1.0 - tau) * target)
        return tf.constant(True)

    def _update_step(
        self, batch: Dict[str, tf.Tensor], learning_rate: tf.Tensor, done_before: tf.Tensor
    ):
        """``gradient_steps`` steps over [G, B, ...] batches; syncs the target."""
        hp = self.hp
        self.optimizer.learning_rate.assign(learning_rate)
        variables = self.model.trainable_variables

        def gradient_step(g):
            obs, next_obs = batch["obs"][g], batch["next_obs"][g]
            with tf.GradientTape() as tape:
                loss, extras = self.grad_comp(
                    q_tm1=self.model(obs),
                    a_tm1=batch["actions"][g],
                    r_t=batch["rewards"][g],
                    discount_t=batch["discounts"][g],
                    q_t_target=self.target_model(next_obs),
                    q_t_online=self.model(next_obs) if hp.double_q else None,
                    huber_delta=hp.huber_delta,
                )
                mean_loss = weighted_mean(loss)
            grads, grad_norm = clip_gradients(tape.gradient(mean_loss, variables), hp.max_grad_norm)
            self.optimizer.apply_gradients(zip(grads, variables))
            done = done_before + tf.cast(g, tf.int64) + 1
            synced = tf.cond(
                tf.equal(done % hp.target_update_interval, 0),
                lambda: self._sync_target(hp.target_update_tau),
                lambda: tf.constant(False),
            )
            with tf.control_dependencies([synced]):  # the sync before the next step
                return {
                    "loss": tf.identity(mean_loss),
                    "grad_norm": grad_norm,
                    "q_mean": tf.reduce_mean(extras["q_taken"]),
                    "target_mean": tf.reduce_mean(extras["target"]),
                }

        metrics = run_gradient_steps(tf.shape(batch["actions"])[0], gradient_step, METRICS)
        return self._update_outputs(metrics)

    def checkpoint_items(self):
        return {**super().checkpoint_items(), "target_model": self.target_model}

    def separate_state(self) -> Dict[str, object]:
        return {"replay": self.replay} if self.hp.checkpoint_replay else {}
