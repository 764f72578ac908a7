"""DQN hyperparameters and the named DQN sets."""

import dataclasses
import types

from rl import registry
from rl.fields import MAX_STEPS, bounded, named, one_of, positive
from rl.hparams.base import HParams, HParamsError, RewardSettings
from rl.hparams.replay import ReplaySettings
from rl.models.settings import ModelSettings, QHeadSettings


def td_loss(head: QHeadSettings) -> str:
    """The registered loss a Q-head's outputs call for: QR-DQN's quantile loss for
    quantiles, C51's cross-entropy for atoms, else the TD loss on Q-values."""
    if head.num_quantiles > 1:
        return "quantile_td"
    if head.num_atoms > 1:
        return "categorical_td"
    return "dqn_td"


@dataclasses.dataclass(frozen=True)
class DQNHParams(HParams, ModelSettings, QHeadSettings, ReplaySettings, RewardSettings):
    """DQN and its switches towards Rainbow (Hessel et al. 2018): double_q, dueling,
    noisy, num_atoms (C51), n_step, prioritized_replay. The loss follows from the head.

    A variant with a loss of its own (a subclass) names it in ``loss_name``, keeps its
    loss-only fields, and refuses the switches its loss cannot take in
    ``check_consistency``."""

    # Beyond run_folder.CHECKPOINT_SHAPE_FIELDS: the saved replay is one ring per env copy.
    checkpoint_shape_fields = ("num_envs",)

    # The learner (rl/agents/dqn.py), its model and its action rule; its loss follows
    # from the head (loss_name), so it cannot disagree with num_atoms or num_quantiles.
    agent: str = one_of("dqn", ("dqn",))
    model: str = named("q_network", "models", ("q_network",))
    act_select: str = named("epsilon_greedy", "act_select", ("epsilon_greedy", "greedy"))
    grad_comp: str = dataclasses.field(default="", init=False)  # loss_name(), derived
    num_quantiles: int = bounded(1, 1, 1)  # quantiles are QR-DQN's (agent qrdqn)
    activation: str = "relu"
    num_envs: int = 1
    target_update_interval: int = bounded(500, 1, MAX_STEPS)  # gradient steps between target syncs
    epsilon_start: float = bounded(1.0, 0, 1)  # exploration at step 0
    epsilon_end: float = bounded(0.05, 0, 1)  # exploration after the decay
    epsilon_decay_steps: int = bounded(10_000, 1, MAX_STEPS)  # env steps of linear decay
    # Ape-X exploration instead of the decay: env copy i of num_envs keeps
    # epsilon 0.4^(1 + 7 i / (num_envs - 1)) (with --num_workers, each copy is an actor's).
    apex_exploration: bool = False
    double_q: bool = True  # double-Q target (van Hasselt et al. 2016)
    huber_delta: float = positive(1.0)  # Huber loss threshold (QR-DQN: its kappa)
    # Proportional prioritised replay (Schaul et al. 2016): P(i) ~ (|td_i| + eps)^alpha,
    # updates weighted by (N P(i))^-beta / max, beta annealed to 1 over train_steps.
    prioritized_replay: bool = False
    priority_exponent: float = bounded(0.6, 0, 1)  # alpha
    importance_exponent: float = bounded(0.4, 0, 1)  # beta at step 0
    priority_epsilon: float = positive(1e-6)  # keeps every priority above 0

    def __post_init__(self):
        object.__setattr__(self, "grad_comp", self.loss_name())  # frozen: set once, here

    def loss_name(self) -> str:
        """The registered loss (rl/algos/grad_comp) the learner calls on each batch: the
        one the head calls for (``td_loss``); a variant returns its own."""
        return td_loss(self)

    def check_consistency(self) -> None:
        if self.num_atoms > 1 and not self.v_min < self.v_max:
            raise HParamsError(f"v_min ({self.v_min}) must be below v_max ({self.v_max})")


@registry.hparams.register
def dqn_base() -> DQNHParams:
    """`DQNHParams` defaults; the base the DQN sets build on."""
    return DQNHParams()


# dqn_cartpole's fields, which qrdqn_cartpole (another class) shares: one place for both.
CARTPOLE_DQN_SETTINGS = types.MappingProxyType(
    dict(
        env="CartPole-v1",
        num_envs=4,
        hidden_sizes=(256, 256),
        learning_rate=2.3e-3,
        anneal_learning_rate=True,
        gamma=0.99,
        buffer_size=100_000,
        batch_size=64,
        learning_starts=1_000,
        train_interval=256,
        gradient_steps=128,
        target_update_interval=512,
        epsilon_start=1.0,
        epsilon_end=0.04,
        epsilon_decay_steps=16_000,
        train_steps=100_000,
        eval_interval=10_000,
        checkpoint_interval=10_000,
    )
)

# What makes dqn_tiny and qrdqn_tiny (test fixtures) a few seconds long, with 1-step
# returns: one place for both.
TINY_CARTPOLE_DQN_SETTINGS = types.MappingProxyType(
    dict(
        n_step=1,
        num_envs=2,
        hidden_sizes=(16,),
        buffer_size=512,
        batch_size=16,
        learning_starts=64,
        train_interval=16,
        gradient_steps=4,
        epsilon_decay_steps=128,
        train_steps=256,
        eval_interval=128,
        eval_episodes=2,
        checkpoint_interval=128,
    )
)


@registry.hparams.register
def dqn_cartpole() -> DQNHParams:
    """DQN on CartPole: 128 gradient steps every 256 env steps, 3-step returns."""
    # Bursts of 128 gradient steps every 256 env steps, as in RL Baselines3
    # Zoo's CartPole DQN. A target sync every 512 gradient steps and an annealed
    # learning rate steady the end of training. With 1-step targets the ~100 syncs of
    # 100k steps barely carry a return of horizon 1/(1-gamma) = 100 back to the start,
    # so it learnt only at 70k-90k and 2 of 10 seeds ended at 100 and 170; 3-step
    # returns carry it three times as far per sync (CHANGELOG.md).
    return dqn_base().replace(**CARTPOLE_DQN_SETTINGS, n_step=3)


@registry.hparams.register
def dqn_cartpole_50k() -> DQNHParams:
    """`dqn_cartpole` at RL-Zoo's 50k budget with its schedule: 1-step returns, epsilon over 8k
    steps, the target synced after every burst."""
    # RL Baselines3 Zoo's CartPole DQN at its own 50k budget: epsilon falls over
    # 16% of it (8k steps) and the target follows every burst, as SB3 syncs it
    # (every 10 env steps, never inside a burst). dqn_cartpole's schedule ends at
    # 87-91 at 50k; this one's copies at 100k end at 247, 500, 500 (docs/benchmarks.md).
    return (
        dqn_base()
        .replace(**CARTPOLE_DQN_SETTINGS)
        .replace(
            target_update_interval=256,
            epsilon_decay_steps=8_000,
            train_steps=50_000,
        )
    )


@registry.hparams.register
def dqn_acrobot() -> DQNHParams:
    """DQN on Acrobot: 16 gradient steps every 16 env steps."""
    # One gradient step per env step, as in RL Baselines3 Zoo's Acrobot DQN,
    # done 16 at a time: one Python-to-TF call per 16 env steps.
    return dqn_base().replace(
        env="Acrobot-v1",
        num_envs=4,
        hidden_sizes=(256, 256),
        learning_rate=6.3e-4,
        gamma=0.99,
        buffer_size=50_000,
        batch_size=128,
        learning_starts=1_000,
        train_interval=16,
        gradient_steps=16,
        target_update_interval=250,
        epsilon_end=0.1,
        epsilon_decay_steps=12_000,
        train_steps=100_000,
        eval_interval=10_000,
        checkpoint_interval=10_000,
    )


@registry.hparams.register
def dqn_mountain_car() -> DQNHParams:
    """DQN on MountainCar-v0: RL-Zoo's settings (8 gradient steps every 16 env steps, gamma 0.98), a
    plain (not double) target as SB3's, 3-step returns."""
    # RL-Zoo's MountainCar DQN: 120k steps, 256 x 256, lr 4e-3, batch 128, 10k replay,
    # gamma 0.98, 8 gradient steps every 16 env steps, a target copy every 600 env steps
    # (300 gradient steps here, where the interval counts those), epsilon to 0.07 over
    # 20% of the run; SB3's gradient clip at norm 10 and its plain (not double) target:
    # with double-Q seeds 0-2 ended at -196, -111, -154, without at -164, -120, -108
    # (SB3's own DQN: -105, -116, -121; docs/benchmarks.md). Departure: 3-step returns,
    # which carry the flag's news back three times as fast: the suite's seeds end at
    # -96.2, -102.8 and -99.5 with them, at -121.7, -111.7 and -193.6 without.
    return dqn_base().replace(
        env="MountainCar-v0",
        double_q=False,
        n_step=3,
        num_envs=1,
        hidden_sizes=(256, 256),
        learning_rate=4e-3,
        gamma=0.98,
        buffer_size=10_000,
        batch_size=128,
        learning_starts=1_000,
        train_interval=16,
        gradient_steps=8,
        target_update_interval=300,
        max_grad_norm=10.0,
        epsilon_end=0.07,
        epsilon_decay_steps=24_000,
        train_steps=120_000,
        eval_interval=10_000,
        checkpoint_interval=10_000,
    )


@registry.hparams.register
def dqn_lunar_lander() -> DQNHParams:
    """DQN on LunarLander-v3 (the `box2d` extra): RL-Zoo's settings, 16 gradient steps every 16 env
    steps, the learning rate annealed to 0."""
    # RL-Zoo's LunarLander DQN (100k steps, 256 x 256, lr 6.3e-4, batch 128, 50k replay,
    # 5k steps before learning, target copy every 250, epsilon to 0.1 over 12% of the
    # run, one gradient step per env step), the gradient steps taken 16 at a time.
    # At a constant rate most of ten seeds passed 175 and fell back by the end (final
    # IQM 120); annealed, five of ten end at 200 or more (CHANGELOG.md). Needs box2d.
    return dqn_base().replace(
        env="LunarLander-v3",
        num_envs=4,
        hidden_sizes=(256, 256),
        learning_rate=6.3e-4,
        anneal_learning_rate=True,
        gamma=0.99,
        buffer_size=50_000,
        batch_size=128,
        learning_starts=5_000,
        train_interval=16,
        gradient_steps=16,
        target_update_interval=250,
        epsilon_end=0.1,
        epsilon_decay_steps=12_000,
        train_steps=100_000,
        eval_interval=10_000,
        checkpoint_interval=10_000,
    )


@registry.hparams.register
def dqn_atari() -> DQNHParams:
    """DQN on Atari (`--env ALE/<Game>-v5`): RL-Zoo's settings, Nature CNN, 100k-frame replay."""
    # RL-Zoo's Atari DQN (Nature CNN, 100k replay, lr 1e-4, batch 32, an update every 4
    # steps, a target copy every 1,000 updates, epsilon to 0.01 over the first 10% of
    # 10M frames), on 4 env copies. Frames are stored once each (~0.7 GB for 100k).
    # It learns from what SB3's AtariWrapper gives it: reward signs, and a lost life as
    # a terminal (the replay's frame stacks go on across it, as the game does).
    # The game comes from --env (default Breakout); train_steps counts agent steps.
    return dqn_base().replace(
        env="ALE/Breakout-v5",
        torso="nature_cnn",
        host_acting=False,  # convolutions act in TensorFlow
        # XLA on the CPU spent over 15 minutes on the first CNN update without finishing.
        jit_compile=False,
        num_envs=4,
        learning_rate=1e-4,
        gamma=0.99,
        buffer_size=100_000,
        batch_size=32,
        learning_starts=100_000,
        train_interval=4,
        gradient_steps=1,
        target_update_interval=1_000,
        epsilon_start=1.0,
        epsilon_end=0.01,
        epsilon_decay_steps=250_000,
        # Evaluated as Mnih et al. (2015) did: uniform actions 5% of the time.
        eval_act_select="epsilon_greedy",
        eval_epsilon=0.05,
        sign_rewards=True,
        life_loss_terminal=True,
        train_steps=2_500_000,
        eval_interval=100_000,
        eval_episodes=5,
        checkpoint_interval=100_000,
    )


@registry.hparams.register
def dqn_tiny() -> DQNHParams:
    """A few seconds of DQN on CartPole, for tests."""
    return dqn_base().replace(**CARTPOLE_DQN_SETTINGS).replace(**TINY_CARTPOLE_DQN_SETTINGS)


def _rainbow(hp: DQNHParams) -> DQNHParams:
    """Every switch on (Hessel et al. 2018): double Q, dueling, noisy layers, C51 on 51
    atoms, 3-step returns, proportional prioritised replay (alpha 0.5, beta 0.4 -> 1).

    Departure: the paper acts on noisy weights alone; here uniform actions fade out
    over the first ``learning_starts`` steps (epsilon 1 -> 0), since the acting noise
    is redrawn only after each update.
    """
    return hp.replace(
        double_q=True,
        dueling=True,
        noisy=True,
        num_atoms=51,
        n_step=3,
        prioritized_replay=True,
        priority_exponent=0.5,
        importance_exponent=0.4,
        epsilon_start=1.0,
        epsilon_end=0.0,
        epsilon_decay_steps=hp.learning_starts,
    )


@registry.hparams.register
def rainbow_base() -> DQNHParams:
    """`dqn_base` with every Rainbow switch on: double Q, dueling, noisy, C51 (51 atoms), 3-step
    returns, prioritised replay."""
    return _rainbow(dqn_base())


@registry.hparams.register
def rainbow_cartpole() -> DQNHParams:
    """Rainbow on CartPole: `dqn_cartpole`'s settings with every switch on, returns on [0, 100], 50k
    steps."""
    # dqn_cartpole's settings on half its budget (RL-Zoo's DQN budget: 50k); discounted
    # returns lie in [0, 100] with gamma 0.99.
    return _rainbow(dqn_cartpole()).replace(
        v_min=0.0, v_max=100.0, train_steps=50_000, eval_interval=5_000, checkpoint_interval=5_000
    )


@registry.hparams.register
def rainbow_lunar_lander() -> DQNHParams:
    """Rainbow on LunarLander-v3 (the `box2d` extra): `dqn_lunar_lander` with every switch on,
    returns on [-200, 200]."""
    # dqn_lunar_lander with every switch on; returns on [-200, 200] (a crash costs 100).
    # A constant learning rate, as its three seeds ran (dqn_lunar_lander's anneal is untried here).
    return _rainbow(dqn_lunar_lander()).replace(
        v_min=-200.0, v_max=200.0, anneal_learning_rate=False
    )


@registry.hparams.register
def rainbow_atari() -> DQNHParams:
    """Rainbow on Atari (`--env ALE/<Game>-v5`): `dqn_atari` with every switch on and the paper's
    Atari settings."""
    # dqn_atari's frames and Nature CNN with the paper's Atari settings: Adam 6.25e-5
    # (eps 1.5e-4 in the paper; Adam's default here), 20k steps before learning, a target
    # copy every 8k steps (2k updates), returns on [-10, 10] (reward signs, as dqn_atari;
    # a lost life is terminal in training, as Mnih et al. (2015) trained).
    return _rainbow(dqn_atari()).replace(
        learning_rate=6.25e-5,
        learning_starts=20_000,
        target_update_interval=2_000,
        eval_epsilon=0.001,  # Dopamine's Rainbow evaluation
        epsilon_decay_steps=20_000,
    )


@registry.hparams.register
def rainbow_tiny() -> DQNHParams:
    """A few seconds of Rainbow on CartPole, for tests."""
    return _rainbow(dqn_tiny()).replace(v_min=0.0, v_max=100.0)


@registry.hparams.register
def dqn_tictactoe_selfplay() -> DQNHParams:
    """DQN self-play at tic-tac-toe: past policies (drawn by how often they win, moving at random
    one move in five) and scripted players as opponents, illegal moves masked; ends unbeatable
    (the `games` extra)."""
    # Tic-tac-toe against its own past policies, drawn by how often they beat the
    # learner (prioritised fictitious self-play), and half of the games against the
    # scripted players (rl/games/selfplay.py); pool members move at random one move in
    # five, so their games reach the learner's mistakes and punish them. Illegal moves
    # get Q-values of -1e9 from the observation's legal-move mask, so neither acting nor
    # the targets' max ever picks one. The learning rate decays to 0, so the policy
    # settles. Three seeds end unbeatable (docs/benchmarks.md, "Self-play").
    return dqn_base().replace(
        env="tictactoe_selfplay_prioritised",
        action_mask=True,
        num_envs=4,
        hidden_sizes=(128, 128),
        learning_rate=5e-4,
        anneal_learning_rate=True,
        gamma=0.99,
        buffer_size=200_000,
        batch_size=256,
        learning_starts=2_000,
        train_interval=64,
        gradient_steps=16,
        target_update_interval=1_000,
        epsilon_start=1.0,
        epsilon_end=0.05,
        epsilon_decay_steps=200_000,
        train_steps=1_000_000,
        eval_interval=100_000,
        eval_episodes=50,
        checkpoint_interval=50_000,
    )
