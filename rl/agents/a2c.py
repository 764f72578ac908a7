"""A2C and VPG: GAE rollouts (policy_gradient.py) with one plain policy-gradient step each.

A2C (Mnih et al. 2016, synchronous): short rollouts from many env copies,
n-step returns (gae_lambda 1) with a learned baseline. VPG (REINFORCE with a
learned baseline, as in OpenAI Spinning Up) is the same learner with its sets'
switch on: long rollouts, one policy step per batch, then ``value_steps`` steps
fitting the baseline alone, with their own optimizer.
"""

from typing import Dict

from rl._tf import tf
from rl.agents.learner import run_gradient_steps
from rl.agents.optimizers import build_optimizer
from rl.agents.policy_gradient import PolicyGradientLearner
from rl.hparams.a2c import A2CHParams


class A2CLearner(PolicyGradientLearner):
    """One policy-gradient step on each whole rollout, acted with the newest weights;
    then, if ``value_steps`` > 0 (VPG), that many steps of the baseline alone."""

    fitting_components = {
        "model": ("actor_critic",),
        "grad_comp": ("policy_gradient",),
        # The estimator assumes actions sampled from the policy itself.
        "act_select": ("sample",),
    }
    metrics = ("loss", "policy_loss", "value_loss", "entropy", "grad_norm")

    def __init__(self, hp: A2CHParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        self.value_optimizer = None
        if hp.value_steps:
            self.value_variables = self.model.value_net.trainable_variables
            # Its own optimizer: the policy's Adam moments must not see the value steps.
            self.value_optimizer = build_optimizer(hp, hp.value_learning_rate)
            self.value_optimizer.build(self.value_variables)

    def _minibatch_loss(self, data: Dict[str, tf.Tensor]):
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

    def _after_gradient_steps(self, data: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        if self.value_optimizer is None:
            return {}

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
