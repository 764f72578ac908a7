"""IMPALA's learner: rollouts from possibly stale actors, corrected with V-trace.

The actors record each action's behaviour log-prob. With actors in other
processes the policy that acted may lag the learner by several versions;
V-trace's truncated importance weights (pi / mu, with mu read from the
rollout, pi from the current weights) correct for it. With one process
(``--num_workers 0``) the lag is at most the update in between, and this is
A2C with V-trace targets. The whole update is one compiled call.
"""

from typing import Dict

from rl._tf import tf
from rl.agents.learner import Learner, run_gradient_steps
from rl.agents.rollouts import RolloutMemory, flat
from rl.hparams.impala import IMPALAHParams

METRICS = (
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "rho",
    "rho_clipped",
    "grad_norm",
)


class IMPALALearner(Learner):
    """IMPALA (Espeholt et al. 2018): actor-critic learning from V-trace targets."""

    actor_extras = ("log_prob",)  # mu, the behaviour policy's log-prob
    on_policy = False  # with --num_workers its actors run a round ahead; V-trace corrects

    def __init__(self, hp: IMPALAHParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        self.memory = RolloutMemory(observation_space, action_space, hp.rollout_steps, hp.num_envs)
        self.check_divisible("num_envs", hp.num_envs)  # replicas split the env copies

    def learn(self, batch: Dict[str, tf.Tensor], updates_before: tf.Tensor):
        """``gradient_steps`` V-trace steps on a [T, N] rollout, each with the current weights."""
        del updates_before
        return run_gradient_steps(
            self.hp.gradient_steps, lambda _: self._gradient_step(batch), METRICS
        )

    def _gradient_step(self, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        # V(x'_t) is only a target (vtrace stops its gradient): computed before the step.
        steps, envs = tf.shape(batch["rewards"])[0], tf.shape(batch["rewards"])[1]
        next_values = tf.reshape(self.model.value(flat(batch["next_obs"])), [steps, envs])
        data = {**batch, "next_values": next_values}
        # Time-major [T, N]: replicas split the env copies, each keeping whole sequences.
        mean_loss, grad_norm, extras = self.minimize(self._loss, data, batch_axis=1)
        return {"loss": mean_loss, "grad_norm": grad_norm, **extras}

    def _loss(self, data: Dict[str, tf.Tensor]):
        """V-trace's per-example loss [T, N] and extras on (a slice of) the rollout."""
        hp = self.hp
        steps, envs = tf.shape(data["rewards"])[0], tf.shape(data["rewards"])[1]

        def time_major(x):
            return tf.reshape(x, [steps, envs])

        obs = flat(data["obs"])
        head = self.model.head
        policy = self.model.policy(obs)
        return self.grad_comp(
            behaviour_log_probs=data["log_prob"],
            target_log_probs=time_major(head.log_prob(policy, flat(data["actions"]))),
            rewards=data["rewards"],
            values=time_major(self.model.value(obs)),
            next_values=data["next_values"],
            discounts=hp.gamma * (1.0 - tf.cast(data["terminated"], tf.float32)),
            truncated=data["truncated"],
            entropy=time_major(head.entropy(policy)),
            value_coef=hp.value_coef,
            entropy_coef=hp.entropy_coef,
            lam=hp.vtrace_lambda,
            clip_rho_threshold=hp.clip_rho_threshold,
            clip_c_threshold=hp.clip_c_threshold,
            clip_pg_rho_threshold=hp.clip_pg_rho_threshold,
        )
