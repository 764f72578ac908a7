"""What PPO, A2C and VPG share: GAE on each rollout, then gradient steps on minibatches of it.

The actors record each action's behaviour log-prob; values of the rollout are
computed in the update, in one batched pass with the pre-update critic. The whole
update (GAE, every epoch and minibatch) is one compiled call. A learner here names
its loss (``_minibatch_loss``) and, when it takes more than one gradient step per
rollout, its epochs and minibatches (PPO).
"""

from typing import Dict, Tuple

from rl import registry
from rl._tf import tf
from rl.agents.learner import run_gradient_steps
from rl.agents.rollouts import RolloutLearner, flat
from rl.hparams.base import HParams


class PolicyGradientLearner(RolloutLearner):
    """On-policy rollouts, GAE advantages, and a policy-gradient loss on minibatches."""

    on_policy = True

    def __init__(self, hp: HParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        batch = hp.num_envs * hp.rollout_steps
        _, minibatches = self.epochs_and_minibatches()
        if batch % minibatches:
            raise ValueError(
                f"num_envs * rollout_steps = {batch} must be divisible by "
                f"num_minibatches = {minibatches}"
            )
        self.check_divisible(
            "the minibatch, num_envs * rollout_steps / num_minibatches", batch // minibatches
        )
        self.gae = registry.grad_comp.get("gae")

    def epochs_and_minibatches(self) -> Tuple[int, int]:
        """Passes over each rollout, and minibatches per pass: one step on the whole rollout."""
        return 1, 1

    def _update_step(self, batch: Dict[str, tf.Tensor], learning_rate: tf.Tensor):
        """GAE, then epochs x minibatches gradient steps on a [T, N] rollout."""
        hp = self.hp
        self.optimizer.learning_rate.assign(learning_rate)
        # The rollout's shape is known when the update is traced: static shapes let
        # graph optimisation fold the shape arithmetic of every gradient step.
        steps, envs = batch["rewards"].shape
        size = steps * envs

        obs = flat(batch["obs"])
        values = self.model.value(obs)
        next_values = self.model.value(flat(batch["next_obs"]))
        advantages, returns = self.gae(
            batch["rewards"],
            tf.reshape(values, [steps, envs]),
            tf.reshape(next_values, [steps, envs]),
            batch["terminated"],
            batch["truncated"],
            hp.gamma,
            hp.gae_lambda,
        )
        data = {
            "obs": obs,
            "actions": flat(batch["actions"]),
            "old_log_probs": flat(batch["log_prob"]),
            "advantages": flat(advantages),
            "returns": flat(returns),
            "old_values": values,
        }
        epochs, minibatches = self.epochs_and_minibatches()
        minibatch_size = size // minibatches
        # One permutation per epoch, each from its own seed (argsort of
        # uniforms: XLA compiles it).
        orders = tf.stack(
            [
                tf.argsort(tf.random.stateless_uniform([size], self.next_seed()))
                for _ in range(epochs)
            ]
        )

        indices = tf.reshape(orders, [epochs * minibatches, minibatch_size])

        def gradient_step(i):
            index = indices[i]  # minibatch i % minibatches of epoch i // minibatches
            return self._minibatch_step({k: tf.gather(v, index) for k, v in data.items()})

        metrics = run_gradient_steps(epochs * minibatches, gradient_step, self.metrics)
        metrics.update(self._after_gradient_steps(data))
        metrics["explained_variance"] = 1.0 - (
            tf.math.reduce_variance(data["returns"] - values)
            / (tf.math.reduce_variance(data["returns"]) + 1e-8)
        )
        return self._update_outputs(metrics)

    def _after_gradient_steps(self, data: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """More learning on the whole rollout after the gradient steps; its metrics."""
        del data
        return {}

    def _minibatch_step(self, data: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        if self.hp.normalize_advantages:  # over the whole minibatch, before any split
            mean, variance = tf.nn.moments(data["advantages"], axes=[0])
            data = {**data, "advantages": (data["advantages"] - mean) / (tf.sqrt(variance) + 1e-8)}
        mean_loss, grad_norm, extras = self.minimize(self._minibatch_loss, data)
        return {"loss": mean_loss, "grad_norm": grad_norm, **extras}

    def _minibatch_loss(self, data: Dict[str, tf.Tensor]):
        """The grad_comp's per-example loss [B] and extras on (a slice of) one minibatch."""
        raise NotImplementedError
