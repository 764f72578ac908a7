"""What a DQN-family loss reads from one batch: its transitions and the networks' outputs.

The DQN learner (rl/agents/dqn.py) hands each gradient step's ``QBatch`` and the run's
hparams to the loss ``hp.grad_comp`` names, registered as ``name(batch, hp)`` beside
its maths (``dqn_td`` in dqn.py, ``quantile_td`` in quantile.py). Each such entry takes
what its maths needs from the batch and the hparams, so a new loss of the family is a new
registered function and its hparams class, with no edit to the learner.
"""

import functools
from typing import Dict, Optional, Tuple

from rl._tf import tf


class QBatch:
    """A batch of transitions [B] with the online and target Q-networks.

    Each network output is computed when a loss first reads it, once per gradient step.
    The networks are the learner's Q-models: ``model(obs, noise_seed)`` gives Q-values
    [B, A], ``model.logits(obs, noise_seed)`` the head's raw outputs [B, A, N] (C51's
    logits, QR-DQN's quantiles), ``model.support`` C51's atoms [N] (None without).
    """

    def __init__(
        self,
        data: Dict[str, tf.Tensor],
        online,
        target,
        noise_seeds: Tuple[Optional[tf.Tensor], Optional[tf.Tensor]] = (None, None),
        double_q: bool = True,
    ):
        """Holds one gradient step's inputs.

        Args:
            data: obs, actions, rewards, discounts, next_obs, each [B, ...].
            online: the online Q-network.
            target: the target Q-network.
            noise_seeds: the online and the target network's noise seeds (noisy layers),
                each [2] or None.
            double_q: whether a* at s' is chosen by the online network (``q_t_online``).
        """
        self.data = data
        self.online, self.target = online, target
        self.online_seed, self.target_seed = noise_seeds
        self.double_q = double_q

    @property
    def a_tm1(self) -> tf.Tensor:
        """[B] int actions taken at s."""
        return self.data["actions"]

    @property
    def r_t(self) -> tf.Tensor:
        """[B] rewards (n-step returns)."""
        return self.data["rewards"]

    @property
    def discount_t(self) -> tf.Tensor:
        """[B] gamma^n * (1 - terminated)."""
        return self.data["discounts"]

    @functools.cached_property
    def q_tm1(self) -> tf.Tensor:
        """[B, A] online Q-values at s."""
        return self.online(self.data["obs"], self.online_seed)

    @functools.cached_property
    def logits_tm1(self) -> tf.Tensor:
        """[B, A, N] the online head's outputs at s."""
        return self.online.logits(self.data["obs"], self.online_seed)

    @functools.cached_property
    def q_tm1_target(self) -> tf.Tensor:
        """[B, A] target-network Q-values at s."""
        return self.target(self.data["obs"], self.target_seed)

    @functools.cached_property
    def q_t_target(self) -> tf.Tensor:
        """[B, A] target-network Q-values at s'."""
        return self.target(self.data["next_obs"], self.target_seed)

    @functools.cached_property
    def logits_t_target(self) -> tf.Tensor:
        """[B, A, N] the target head's outputs at s'."""
        return self.target.logits(self.data["next_obs"], self.target_seed)

    @functools.cached_property
    def q_t_online(self) -> Optional[tf.Tensor]:
        """[B, A] online Q-values at s' with double Q (they choose a*); else None."""
        return self.online(self.data["next_obs"], self.online_seed) if self.double_q else None

    @property
    def q_t_selector(self) -> Optional[tf.Tensor]:
        """[B, A] values that choose a* for a loss on the head's outputs: ``q_t_online``;
        without double Q, the target's Q-values where moves are masked (legal moves only:
        games), else None (the loss takes the target's own)."""
        if self.q_t_online is None and self.online.masked_actions:
            return self.q_t_target
        return self.q_t_online

    @property
    def support(self) -> Optional[tf.Tensor]:
        """[N] C51's atoms, or None."""
        return self.online.support
