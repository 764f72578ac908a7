"""A2C and VPG: on each full rollout, GAE, then one plain policy-gradient step on all of it.

A2C (Mnih et al. 2016, synchronous): short rollouts from many env copies,
n-step returns (gae_lambda 1) with a learned baseline. VPG (REINFORCE with a
learned baseline, as in OpenAI Spinning Up) is the same learner with its sets'
switch on: long rollouts, one policy step per batch, then ``value_steps`` steps
fitting the baseline alone, with their own optimizer. The update is one compiled call.
"""

from typing import Dict

from rl._tf import tf
from rl.agents.learner import Learner, run_gradient_steps
from rl.agents.optimizers import build_optimizer
from rl.agents.rollouts import (
    RolloutMemory,
    advantages_over_rollout,
    epochs_of_minibatches,
    explained_variance,
    standardized,
)
from rl.hparams.a2c import A2CHParams

METRICS = ("loss", "policy_loss", "value_loss", "entropy", "grad_norm")


class A2CLearner(Learner):
    """One policy-gradient step on each whole rollout, acted with the newest weights;
    then, if ``value_steps`` > 0 (VPG), that many steps of the baseline alone."""

    actor_extras = ("log_prob",)
    on_policy = True
    metrics = METRICS  # what the policy step reports

    def __init__(self, hp: A2CHParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        self.memory = RolloutMemory(observation_space, action_space, hp.rollout_steps, hp.num_envs)
        self.check_divisible("num_envs * rollout_steps", hp.num_envs * hp.rollout_steps)
        self.value_optimizer = None
        if hp.value_steps:
            self.value_variables = self.model.value_net.trainable_variables
            # Its own optimizer: the policy's Adam moments must not see the value steps.
            self.value_optimizer = build_optimizer(hp, hp.value_learning_rate)
            self.value_optimizer.build(self.value_variables)

    def learn(self, batch: Dict[str, tf.Tensor], updates_before: tf.Tensor):
        """GAE, one policy-gradient step on the [T, N] rollout, then VPG's baseline steps."""
        del updates_before
        hp = self.hp
        data = advantages_over_rollout(self.model.value, batch, hp.gamma, hp.gae_lambda)
        # One epoch of one minibatch: the whole rollout, in the shuffled order its
        # loss has always been summed in (one seed from the update's stream).
        metrics = epochs_of_minibatches(data, [self.next_seed()], 1, self._policy_step, METRICS)
        if self.value_optimizer is not None:
            metrics.update(self._baseline_steps(data))
        metrics["explained_variance"] = explained_variance(data["returns"], data["old_values"])
        return metrics

    def _policy_step(self, data: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        if self.hp.normalize_advantages:  # over the whole rollout, before any split
            data = {**data, "advantages": standardized(data["advantages"])}
        mean_loss, grad_norm, extras = self.minimize(self._loss, data)
        return {"loss": mean_loss, "grad_norm": grad_norm, **extras}

    def _loss(self, data: Dict[str, tf.Tensor]):
        """The policy gradient's per-example loss [B] and extras on (a slice of) the rollout."""
        hp = self.hp
        head = self.model.head
        policy = self.model.policy(data["obs"])
        return self.grad_comp(
            log_probs=head.log_prob(policy, data["actions"]),
            advantages=data["advantages"],
            values=self.model.value(data["obs"]),
            returns=data["returns"],
            entropy=head.entropy(policy),
            value_coef=hp.value_coef,
            entropy_coef=hp.entropy_coef,
        )

    def _baseline_steps(self, data: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """VPG: ``value_steps`` steps of the baseline alone towards the rollout's returns."""

        def baseline_loss(data):
            return 0.5 * tf.square(self.model.value(data["obs"]) - data["returns"]), {}

        def value_step(i):
            del i
            loss, _, _ = self.minimize(
                baseline_loss,
                {"obs": data["obs"], "returns": data["returns"]},
                variables=self.value_variables,
                optimizer=self.value_optimizer,
            )
            return {"baseline_loss": loss}

        return run_gradient_steps(self.hp.value_steps, value_step, ("baseline_loss",))

    def checkpoint_items(self):
        items = super().checkpoint_items()
        if self.value_optimizer is not None:
            items["value_optimizer"] = self.value_optimizer
        return items
