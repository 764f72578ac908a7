"""PPO's learner: on each full rollout, GAE, then epochs of clipped-surrogate minibatch steps.

The actors sample actions from the policy and record their log-probs; the update
(GAE with the pre-update critic, every epoch and minibatch) is one compiled call.
"""

from typing import Dict

from rl._tf import tf
from rl.agents.learner import Learner
from rl.agents.rollouts import (
    RolloutMemory,
    advantages_over_rollout,
    epochs_of_minibatches,
    explained_variance,
    minibatch_size,
    standardized,
)
from rl.hparams.ppo import PPOHParams

METRICS = (
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "grad_norm",
)


class PPOLearner(Learner):
    """Proximal Policy Optimization (Schulman et al. 2017), any action space with a head."""

    actor_extras = ("log_prob",)
    on_policy = True
    metrics = METRICS  # what each gradient step reports (averaged over the update)

    def __init__(self, hp: PPOHParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        self.memory = RolloutMemory(observation_space, action_space, hp.rollout_steps, hp.num_envs)
        size = minibatch_size(hp.num_envs * hp.rollout_steps, hp.num_minibatches)
        self.check_divisible("the minibatch, num_envs * rollout_steps / num_minibatches", size)

    def learn(self, batch: Dict[str, tf.Tensor], updates_before: tf.Tensor):
        """GAE, then num_epochs x num_minibatches gradient steps on a [T, N] rollout."""
        del updates_before
        hp = self.hp
        data = advantages_over_rollout(self.model.value, batch, hp.gamma, hp.gae_lambda)
        seeds = [self.next_seed() for _ in range(hp.num_epochs)]
        metrics = epochs_of_minibatches(
            data, seeds, hp.num_minibatches, self._gradient_step, self.metrics
        )
        metrics["explained_variance"] = explained_variance(data["returns"], data["old_values"])
        return metrics

    def _gradient_step(self, minibatch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        if self.hp.normalize_advantages:  # over the whole minibatch, before any split
            minibatch = {**minibatch, "advantages": standardized(minibatch["advantages"])}
        mean_loss, grad_norm, extras = self.minimize(self._loss, minibatch)
        return {"loss": mean_loss, "grad_norm": grad_norm, **extras}

    def _loss(self, data: Dict[str, tf.Tensor]):
        """The clipped surrogate's per-example loss [B] and extras on (a slice of) a minibatch."""
        hp = self.hp
        head = self.model.head
        policy = self.model.policy(data["obs"])
        return self.grad_comp(
            log_probs=head.log_prob(policy, data["actions"]),
            old_log_probs=data["old_log_probs"],
            advantages=data["advantages"],
            values=self.model.value(data["obs"]),
            returns=data["returns"],
            entropy=head.entropy(policy),
            clip_ratio=hp.clip_ratio,
            value_coef=hp.value_coef,
            entropy_coef=hp.entropy_coef,
            old_values=data["old_values"] if hp.value_clip is not None else None,
            value_clip=hp.value_clip,
        )
