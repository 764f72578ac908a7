"""DQN's learner: replay, a target network, and bursts of gradient steps.

Replay lives in NumPy (rl/memory); one update samples ``gradient_steps``
batches at once and runs all of those gradient steps, with the target
network's syncs, in a single compiled call. Exploration is a pure function
of the env step the actor passes in.
"""

import functools
from typing import Dict

from rl._tf import tf
from rl.agents.learner import run_gradient_steps
from rl.agents.off_policy import ReplayLearner, soft_update
from rl.algos.schedules import apex_epsilons, linear_schedule
from rl.hparams.dqn import DQNHParams

METRICS = ("loss", "q_mean", "target_mean", "grad_norm")
LOSS_INPUTS = ("obs", "actions", "rewards", "discounts", "next_obs")


class DQNLearner(ReplayLearner):
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
        self._compiled_update = self.compile_update(self._update_step)

    @classmethod
    def exploration_schedule(cls, hp: DQNHParams):
        if hp.apex_exploration:
            return functools.partial(apex_epsilons, hp.num_envs)
        return functools.partial(
            linear_schedule, hp.epsilon_start, hp.epsilon_end, hp.epsilon_decay_steps
        )

    def update_info(self, steps: int) -> Dict[str, float]:
        return {"epsilon": self.exploration(self.hp, steps)}

    def _sync_target(self, tau: float) -> tf.Tensor:
        """target <- tau * online + (1 - tau) * target; returns True (for tf.cond)."""
        return soft_update(self.target_model.variables, self.model.variables, tau)

    def _update_step(
        self, batch: Dict[str, tf.Tensor], learning_rate: tf.Tensor, done_before: tf.Tensor
    ):
        """``gradient_steps`` steps over [G, B, ...] batches; syncs the target."""
        hp = self.hp
        self.optimizer.learning_rate.assign(learning_rate)

        def gradient_step(g):
            data = {name: batch[name][g] for name in LOSS_INPUTS}
            mean_loss, grad_norm, extras = self.minimize(self._loss, data)
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
                    "q_mean": extras["q_taken"],
                    "target_mean": extras["target"],
                }

        metrics = run_gradient_steps(tf.shape(batch["actions"])[0], gradient_step, METRICS)
        return self._update_outputs(metrics)

    def _loss(self, data: Dict[str, tf.Tensor]):
        """The TD loss [B] and its extras on (a slice of) one batch."""
        hp = self.hp
        loss, extras = self.grad_comp(
            q_tm1=self.model(data["obs"]),
            a_tm1=data["actions"],
            r_t=data["rewards"],
            discount_t=data["discounts"],
            q_t_target=self.target_model(data["next_obs"]),
            q_t_online=self.model(data["next_obs"]) if hp.double_q else None,
            huber_delta=hp.huber_delta,
        )
        return loss, {"q_taken": extras["q_taken"], "target": extras["target"]}

    def checkpoint_items(self):
        return {**super().checkpoint_items(), "target_model": self.target_model}
