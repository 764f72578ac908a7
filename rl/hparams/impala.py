"""IMPALA hyperparameters and the named IMPALA sets."""

import dataclasses

from rl import registry
from rl.fields import bounded, named, one_of, positive
from rl.hparams.base import BASELINES_RMSPROP_EPSILON, HParams, ReturnNormalization, RewardSettings
from rl.models.settings import ModelSettings


@dataclasses.dataclass(frozen=True)
class IMPALAHParams(HParams, ModelSettings, ReturnNormalization, RewardSettings):
    """IMPALA (Espeholt et al. 2018): an actor-critic whose V-trace targets correct for
    actors acting with older weights; Discrete and Box actions."""

    # The learner (rl/agents/impala.py), its model and its loss.
    agent: str = one_of("impala", ("impala",))
    model: str = named("actor_critic", "models", ("actor_critic",))
    grad_comp: str = named("vtrace", "grad_comp", ("vtrace",))
    # mu is the log-prob the actor recorded: actions must be sampled from the policy
    # itself for it to be the behaviour's.
    act_select: str = named("sample", "act_select", ("sample",))
    rollout_steps: int = bounded(20, 1, 100_000)  # steps per env between updates
    gradient_steps: int = bounded(1, 1, 10_000)  # gradient steps on each rollout
    # Weight of the value loss (v_s - V)^2 / 2: the IMPALA paper's baseline cost.
    value_coef: float = bounded(0.5, 0)
    entropy_coef: float = bounded(0.01, 0)  # weight of the entropy bonus
    vtrace_lambda: float = bounded(1.0, 0, 1)  # V-trace lambda (1: the paper's eq. 1)
    clip_rho_threshold: float = positive(1.0)  # rho bar: truncates the TD errors' weights
    clip_c_threshold: float = positive(1.0)  # c bar: truncates the traces
    clip_pg_rho_threshold: float = positive(1.0)  # truncates the policy gradient's weights


@registry.hparams.register
def impala_base() -> IMPALAHParams:
    """`IMPALAHParams` defaults; the base the IMPALA sets build on."""
    return IMPALAHParams()


@registry.hparams.register
def impala_cartpole() -> IMPALAHParams:
    """IMPALA on CartPole (in one process: A2C with V-trace targets): A2C's settings, 8 envs x 5
    steps, RMSprop."""
    # A2C's CartPole settings (rl/hparams/a2c.py: RMSprop, 8 envs x 5 steps) with
    # V-trace targets. Seeds 0-9 end at 500 in one process and seeds 0-5 with two
    # actor processes. Adam with 16 x 25 rollouts, tuned on a slower host, ended at
    # 500 for only 5 of 10 seeds here: its runs reach 500 and fall away again.
    return impala_base().replace(
        env="CartPole-v1",
        num_envs=8,
        rollout_steps=5,
        optimizer="rmsprop",
        rmsprop_epsilon=BASELINES_RMSPROP_EPSILON,
        learning_rate=7e-4,
        entropy_coef=0.0,
        gamma=0.99,
        max_grad_norm=0.5,
        jit_compile=False,
        train_steps=300_000,
        eval_interval=20_000,
        checkpoint_interval=50_000,
    )


@registry.hparams.register
def impala_tiny() -> IMPALAHParams:
    """A few seconds of IMPALA on CartPole, for tests."""
    return impala_cartpole().replace(
        num_envs=2,
        rollout_steps=16,
        hidden_sizes=(16,),
        train_steps=256,
        eval_interval=128,
        eval_episodes=2,
        checkpoint_interval=128,
    )
