"""PPO's learner: GAE rollouts (policy_gradient.py) and epochs of clipped-surrogate steps."""

from typing import Dict, Tuple

from rl._tf import tf
from rl.agents.policy_gradient import PolicyGradientLearner

METRICS = (
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "grad_norm",
)


class PPOLearner(PolicyGradientLearner):
    """Proximal Policy Optimization (Schulman et al. 2017), any action space with a head."""

    fitting_components = {
        "model": ("actor_critic",),
        "grad_comp": ("ppo_clip",),
        # The update's ratio assumes actions sampled from the policy itself.
        "act_select": ("sample",),
    }
    metrics = METRICS  # what each gradient step reports (averaged over the update)

    def epochs_and_minibatches(self) -> Tuple[int, int]:
        return self.hp.num_epochs, self.hp.num_minibatches

    def _minibatch_loss(self, data: Dict[str, tf.Tensor]):
        """The grad_comp's per-example loss [B] and extras on (a slice of) one minibatch."""
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
