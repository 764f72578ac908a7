"""Off-policy actor-critics for Box actions: TD3 and DDPG (deterministic), SAC (stochastic).

Each update is a burst of gradient steps on batches from the replay feed
(off_policy.py), in one compiled call. A gradient step pulls the critics towards
the target the grad_comp builds (rl/algos/grad_comp/actor_critic_q.py), then steps
the policy (TD3: every ``policy_delay`` critic steps) and moves the target networks
by Polyak averaging. Critics and policy have optimizers of their own; SAC adds its
temperature's. Before ``learning_starts`` the actors play uniform actions.

What both learners do alike (their replay, targets and optimizers, the critics'
step) is written once, as functions of the learner, below them; the burst around
the gradient steps and the targets' sync are the base Learner's.
"""

import functools
from typing import Callable, Dict, List

import numpy as np

from rl._tf import tf
from rl.agents.learner import Learner
from rl.agents.off_policy import ReplayFeed, divergence_warnings
from rl.agents.optimizers import build_optimizer
from rl.algos.schedules import warmup_schedule

METRICS = ("loss", "actor_loss", "q_mean", "target_mean", "grad_norm")


class TD3Learner(Learner):
    """TD3 (Fujimoto et al. 2018) and, with one critic, no delay and no smoothing, DDPG
    (Lillicrap et al. 2016)."""

    metrics = METRICS

    def __init__(self, hp, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        build_replay_targets_and_optimizers(self, observation_space, action_space)

    @classmethod
    def exploration_schedule(cls, hp):
        return uniform_until_learning_starts(hp)

    def warnings(self, metrics: Dict[str, float]) -> List[str]:
        return divergence_warnings(
            metrics, self.memory.replay.max_abs_reward, self.hp.gamma, self.env_steps
        )

    def scheduled_optimizers(self) -> List:
        return [self.optimizer, self.actor_optimizer]

    def learn(self, batch: Dict[str, tf.Tensor], updates_before: tf.Tensor):
        """``gradient_steps`` steps over [G, B, ...] batches."""
        return self.burst(batch, updates_before, self._gradient_step, self.metrics)

    def _gradient_step(self, data: Dict[str, tf.Tensor], done: tf.Tensor):
        hp = self.hp
        next_actions = self._smoothed_target_actions(data["next_obs"])
        targets = self.losses.target(
            data["rewards"],
            data["discounts"],
            self.target_model.critics(data["next_obs"], next_actions),
        )
        loss, grad_norm, extras = step_critics(self, data, targets)

        def actor_step():
            actor_loss, _, _ = self.minimize(
                self._actor_loss,
                {"obs": data["obs"]},
                variables=self.model.policy_variables(),
                optimizer=self.actor_optimizer,
            )
            with tf.control_dependencies([actor_loss]):
                synced = self.sync_target(hp.target_update_tau)
            with tf.control_dependencies([synced]):
                return tf.identity(actor_loss)

        def actor_loss_only():  # the policy waits (TD3's delay): reported, not stepped
            loss, _ = self._actor_loss({"obs": data["obs"]})
            return tf.reduce_mean(loss)

        actor_loss = tf.cond(tf.equal(done % hp.policy_delay, 0), actor_step, actor_loss_only)
        return {
            "loss": loss,
            "actor_loss": actor_loss,
            "q_mean": extras["q_mean"],
            "target_mean": extras["target"],
            "grad_norm": grad_norm,
        }

    def _actor_loss(self, d):
        q = self.model.critics(d["obs"], self.model.action(d["obs"]))
        return self.losses.actor(q[0])

    def _smoothed_target_actions(self, next_obs: tf.Tensor) -> tf.Tensor:
        """mu'(s') plus clipped Gaussian noise (TD3's target smoothing), within the bounds."""
        hp = self.hp
        actions = self.target_model.action(next_obs)
        if hp.target_noise == 0:
            return actions
        scale, shift = self.model.head.scale_and_shift()
        scale = tf.constant(scale.reshape(-1), tf.float32)
        noise = tf.random.stateless_normal(tf.shape(actions), self.next_seed()) * hp.target_noise
        noise = tf.clip_by_value(noise, -hp.target_noise_clip, hp.target_noise_clip)
        low, high = shift.reshape(-1) - scale, shift.reshape(-1) + scale
        return tf.clip_by_value(actions + noise * scale, low, high)

    def checkpoint_items(self):
        return {**super().checkpoint_items(), "actor_optimizer": self.actor_optimizer}


class SACLearner(Learner):
    """Soft Actor-Critic (Haarnoja et al. 2018) with twin critics and a tuned temperature."""

    metrics = (*METRICS, "alpha", "entropy")

    def __init__(self, hp, observation_space, action_space):
        self.log_alpha = tf.Variable(np.log(hp.initial_alpha).astype(np.float32), name="log_alpha")
        size = int(np.prod(action_space.shape))
        self.target_entropy = float(-size if hp.target_entropy is None else hp.target_entropy)
        super().__init__(hp, observation_space, action_space)
        build_replay_targets_and_optimizers(self, observation_space, action_space)
        self.alpha_optimizer = build_optimizer(hp, hp.learning_rate)
        self.alpha_optimizer.build([self.log_alpha])

    @classmethod
    def exploration_schedule(cls, hp):
        return uniform_until_learning_starts(hp)

    def warnings(self, metrics: Dict[str, float]) -> List[str]:
        return divergence_warnings(
            metrics, self.memory.replay.max_abs_reward, self.hp.gamma, self.env_steps
        )

    def scheduled_optimizers(self) -> List:
        return [self.optimizer, self.actor_optimizer, self.alpha_optimizer]

    def learn(self, batch: Dict[str, tf.Tensor], updates_before: tf.Tensor):
        """``gradient_steps`` steps over [G, B, ...] batches."""
        return self.burst(batch, updates_before, self._gradient_step, self.metrics)

    def _gradient_step(self, data: Dict[str, tf.Tensor], done: tf.Tensor):
        del done
        alpha = tf.exp(self.log_alpha)
        next_actions, next_log_probs = self.model.sample_with_log_prob(
            data["next_obs"], self._noise(data["actions"])
        )
        targets = self.losses.target(
            data["rewards"],
            data["discounts"],
            self.target_model.critics(data["next_obs"], next_actions),
            next_log_probs,
            alpha,
        )
        loss, grad_norm, extras = step_critics(self, data, targets)

        def actor_loss_fn(d):
            actions, log_probs = self.model.sample_with_log_prob(d["obs"], d["noise"])
            q = self.model.critics(d["obs"], actions)
            actor_loss, actor_extras = self.losses.actor(log_probs, q, alpha)
            return actor_loss, {**actor_extras, "log_prob": log_probs}

        with tf.control_dependencies([loss]):  # the policy is judged by the stepped critics
            noise = self._noise(data["actions"])
        actor_loss, _, actor_extras = self.minimize(
            actor_loss_fn,
            {"obs": data["obs"], "noise": noise},
            variables=self.model.policy_variables(),
            optimizer=self.actor_optimizer,
        )
        if self.hp.learn_alpha:
            # Linear in log pi: the batch mean (summed over replicas) is all it needs.
            mean_log_prob = tf.reshape(actor_extras["log_prob"], [1])
            with tf.GradientTape() as tape:
                alpha_loss, _ = self.losses.temperature(
                    self.log_alpha, mean_log_prob, self.target_entropy
                )
                alpha_loss = tf.reduce_mean(alpha_loss)
            grads = tape.gradient(alpha_loss, [self.log_alpha])
            self.alpha_optimizer.apply_gradients(zip(grads, [self.log_alpha]))
        with tf.control_dependencies([actor_loss]):
            synced = self.sync_target(self.hp.target_update_tau)
        with tf.control_dependencies([synced]):
            return {
                "loss": tf.identity(loss),
                "actor_loss": actor_loss,
                "q_mean": extras["q_mean"],
                "target_mean": extras["target"],
                "grad_norm": grad_norm,
                "alpha": tf.exp(self.log_alpha),
                "entropy": actor_extras["entropy"],
            }

    def _noise(self, actions: tf.Tensor) -> tf.Tensor:
        """Standard normal noise shaped like a batch of actions, from the update's stream."""
        return tf.random.stateless_normal(tf.shape(actions), self.next_seed())

    def checkpoint_items(self):
        return {
            **super().checkpoint_items(),
            "actor_optimizer": self.actor_optimizer,
            "log_alpha": self.log_alpha,
            "alpha_optimizer": self.alpha_optimizer,
        }


# --- what TD3 and SAC do alike ------------------------------------------------------
def build_replay_targets_and_optimizers(learner: Learner, observation_space, action_space):
    """Sets up what TD3 and SAC build alike after the model: the replay feed, the target
    networks (a copy of the model), the critics' and the policy's optimizers."""
    hp = learner.hp
    learner.check_divisible("batch_size", hp.batch_size)
    learner.memory = ReplayFeed(hp, observation_space, action_space)
    learner.losses = learner.grad_comp
    learner.build_target()
    learner.optimizer, learner.actor_optimizer = critic_and_policy_optimizers(hp, learner.model)


def critic_and_policy_optimizers(hp, model) -> tuple:
    """The critics' optimizer (the learner's ``optimizer``) and the policy's, built."""
    critic_optimizer = build_optimizer(hp, hp.learning_rate)
    critic_optimizer.build(model.critic_variables())
    policy_optimizer = build_optimizer(hp, hp.learning_rate)
    policy_optimizer.build(model.policy_variables())
    return critic_optimizer, policy_optimizer


def uniform_until_learning_starts(hp) -> Callable[[int], float]:
    """epsilon 1 (uniform actions, the act_select's other half) until learning starts."""
    return functools.partial(warmup_schedule, hp.learning_starts)


def step_critics(learner: Learner, data: Dict[str, tf.Tensor], targets: tf.Tensor):
    """One step of the critics towards ``targets`` [B]; the mean loss, grad norm, extras."""

    def loss_fn(d):
        return learner.losses.critic(learner.model.critics(d["obs"], d["actions"]), d["targets"])

    return learner.minimize(
        loss_fn,
        {"obs": data["obs"], "actions": data["actions"], "targets": targets},
        variables=learner.model.critic_variables(),
        optimizer=learner.optimizer,
    )
