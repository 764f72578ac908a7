"""DQN: uniform replay, a target network and a linear epsilon schedule.

Replay lives in NumPy (rl/memory); one update samples ``gradient_steps``
batches at once and runs all of those gradient steps, with the target
network's syncs, in a single compiled call.
"""

from typing import Dict, List, Optional

import numpy as np

from rl import registry, seeding
from rl._tf import tf
from rl.agents.base import Agent, clip_gradients
from rl.algos.schedules import linear_schedule
from rl.hparams.dqn import DQNHParams
from rl.memory import ReplayBuffer


class DQNAgent(Agent):
    """Deep Q-Networks (Mnih et al. 2015), double-Q by default, discrete actions."""

    fitting_components = {"model": ("mlp_q",), "grad_comp": ("dqn_td",)}

    def __init__(self, hp: DQNHParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        input_size = int(np.prod(self.obs_shape))
        self.target_model = registry.models.get(hp.model)(
            hp, input_size, self.num_actions, seed=hp.seed
        )
        self._sync_target(1.0)
        self.replay = ReplayBuffer(
            hp.buffer_size, self.obs_shape, seed=seeding.derived_seed(hp.seed, seeding.REPLAY)
        )
        self.total_gradient_steps = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="total_gradient_steps"
        )
        # Explicit tf.while_loop/tf.cond: no autograph transformation needed.
        self._compiled_update = tf.function(
            self._update_step, jit_compile=hp.jit_compile, autograph=False
        )

    def exploration_rate(self) -> float:
        hp = self.hp
        return linear_schedule(
            hp.epsilon_start, hp.epsilon_end, hp.epsilon_decay_steps, self.env_steps
        )

    def observe(self, obs, actions, rewards, terminated, truncated, next_obs):
        # Truncated steps are stored as non-terminal: the target bootstraps from
        # next_obs, which is the true final observation.
        del truncated
        self.replay.add(obs, actions, rewards, terminated, next_obs)
        self.counters.add("env_steps", len(actions))

    def update(self) -> Optional[Dict[str, float]]:
        hp = self.hp
        steps = self.env_steps
        # Due when the last observe (num_envs steps) crossed a multiple of
        # train_interval: derived from the counter, so resuming keeps it.
        due = steps // hp.train_interval > (steps - hp.num_envs) // hp.train_interval
        if steps < hp.learning_starts or not due:
            return None
        batch = self.replay.sample(hp.gradient_steps, hp.batch_size)
        learning_rate = self.current_learning_rate()
        # The replay's fields are _update_step's arguments, in order.
        outputs = self._compiled_update(
            *(tf.constant(batch[name]) for name in ReplayBuffer.FIELDS),
            tf.constant(learning_rate, tf.float32),
        )
        return self._finish_update(
            outputs,
            learning_rate=learning_rate,
            epsilon=self.exploration_rate(),
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
        self, obs, actions, rewards, terminated, next_obs, learning_rate
    ) -> Dict[str, tf.Tensor]:
        """``gradient_steps`` steps over [G, B, ...] batches; syncs the target."""
        hp = self.hp
        self.optimizer.learning_rate.assign(learning_rate)
        discounts = hp.gamma * (1.0 - tf.cast(terminated, tf.float32))
        variables = self.model.trainable_variables
        totals = {k: tf.constant(0.0) for k in ("loss", "q_mean", "target_mean", "grad_norm")}

        def gradient_step(g, totals):
            with tf.GradientTape() as tape:
                q_online_next = self.model(next_obs[g]) if hp.double_q else None
                loss, extras = self.algo.grad_comp(
                    q_tm1=self.model(obs[g]),
                    a_tm1=actions[g],
                    r_t=rewards[g],
                    discount_t=discounts[g],
                    q_t_target=self.target_model(next_obs[g]),
                    q_t_online=q_online_next,
                    huber_delta=hp.huber_delta,
                )
            grads, grad_norm = clip_gradients(tape.gradient(loss, variables), hp.max_grad_norm)
            self.optimizer.apply_gradients(zip(grads, variables))
            done = self.total_gradient_steps.assign_add(1)
            synced = tf.cond(
                tf.equal(done % hp.target_update_interval, 0),
                lambda: self._sync_target(hp.target_update_tau),
                lambda: tf.constant(False),
            )
            step_metrics = {"loss": loss, "grad_norm": grad_norm, **extras}
            with tf.control_dependencies([synced]):  # the sync before the next step
                return g + 1, {k: totals[k] + step_metrics[k] for k in totals}

        _, totals = tf.while_loop(lambda g, _: g < tf.shape(actions)[0], gradient_step, (0, totals))

        count = tf.cast(tf.shape(actions)[0], tf.float32)
        return self._update_outputs({k: v / count for k, v in totals.items()})

    def checkpoint_items(self):
        items = super().checkpoint_items()
        items.update(
            target_model=self.target_model,
            replay=self.replay,
            total_gradient_steps=self.total_gradient_steps,
        )
        return items
