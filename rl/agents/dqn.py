"""DQN's learner: replay, a target network, and bursts of gradient steps.

Replay lives in NumPy (rl/memory); one update samples ``gradient_steps``
batches at once and runs all of those gradient steps, with the target
network's syncs, in a single compiled call. Exploration is a pure function
of the env step the actor passes in.

Rainbow's pieces (Hessel et al. 2018) are switches on the same learner:
``double_q``, ``dueling`` and ``noisy`` (the model), ``num_atoms`` > 1 (C51),
``n_step`` (the replay) and ``prioritized_replay`` (the replay feed's weights
and priorities). QR-DQN (agent qrdqn) is this learner with ``num_quantiles`` > 1.
The loss is the registered one ``hp.grad_comp`` names (derived by the hparams class:
``DQNHParams.loss_name``), called on a ``QBatch``: a new loss of the family needs no
edit here.
"""

import functools
from typing import Dict, List

from rl._tf import tf
from rl.agents.learner import Learner
from rl.agents.off_policy import ReplayFeed, divergence_warnings
from rl.algos.grad_comp.q_batch import QBatch
from rl.algos.schedules import apex_epsilons, linear_schedule
from rl.hparams.dqn import DQNHParams

METRICS = ("loss", "q_mean", "target_mean", "grad_norm")


class DQNLearner(Learner):
    """Deep Q-Networks (Mnih et al. 2015), double-Q by default, discrete actions."""

    def __init__(self, hp: DQNHParams, observation_space, action_space):
        super().__init__(hp, observation_space, action_space)
        self.check_divisible("batch_size", hp.batch_size)
        self.memory = ReplayFeed(
            hp,
            observation_space,
            action_space,
            priority_exponent=hp.priority_exponent if hp.prioritized_replay else 0.0,
        )
        if hp.noisy:  # act with a draw of the noise from the start, not with its mean
            self.model.resample_noise(self.next_seed())
            self.refresh_snapshot()
        self.build_target()

    @classmethod
    def exploration_schedule(cls, hp: DQNHParams):
        if hp.apex_exploration:
            return functools.partial(apex_epsilons, hp.num_envs)
        return functools.partial(
            linear_schedule, hp.epsilon_start, hp.epsilon_end, hp.epsilon_decay_steps
        )

    def logged_beside(self, steps: int) -> Dict[str, float]:
        return {"epsilon": self.exploration(self.hp, steps)}

    def warnings(self, metrics: Dict[str, float]) -> List[str]:
        return divergence_warnings(
            metrics, self.memory.replay.max_abs_reward, self.hp.gamma, self.env_steps
        )

    def learn(self, batch: Dict[str, tf.Tensor], updates_before: tf.Tensor):
        """``gradient_steps`` steps over [G, B, ...] batches; syncs the target every
        ``target_update_interval`` of them. Prioritised: the new priorities [G, B] too."""
        hp = self.hp

        def gradient_step(data, done):
            # Each step draws its own noise: one for the online network, one for the target.
            seeds = (self.next_seed(), self.next_seed()) if hp.noisy else (None, None)
            mean_loss, grad_norm, extras = self.minimize(
                functools.partial(self._loss, noise_seeds=seeds), data, keep=("priority",)
            )
            synced = self.sync_target_every(done, hp.target_update_interval, hp.target_update_tau)
            with tf.control_dependencies([synced]):  # the sync before the next step
                return {
                    "loss": tf.identity(mean_loss),
                    "grad_norm": grad_norm,
                    "q_mean": extras["q_taken"],
                    "target_mean": extras["target"],
                    "priorities": extras["priority"],
                }

        metrics = self.burst(batch, updates_before, gradient_step, METRICS, self.memory.feedback)
        if hp.noisy:  # the published acting weights: a fresh draw from the new weights
            self.model.resample_noise(self.next_seed())
        return metrics

    def _loss(self, data: Dict[str, tf.Tensor], noise_seeds=(None, None)):
        """The loss ``hp.grad_comp`` names [B] (importance-weighted when prioritised) and
        its extras on (a slice of) one batch; "priority" is what the replay ranks it by next."""
        batch = QBatch(data, self.model, self.target_model, noise_seeds, self.hp.double_q)
        loss, extras = self.grad_comp(batch, self.hp)
        if "weights" in data:
            loss = loss * data["weights"]
        return loss, {
            "q_taken": extras["q_taken"],
            "target": extras["target"],
            "priority": tf.stop_gradient(extras["priority"]),
        }
