"""Replay settings: the fields every replay-based learner shares (DQN, SAC, TD3, DDPG).

Agent hparams classes inherit them beside ModelSettings; a class changes a
default by redeclaring the field with a plain value (the limits stay).
"""

import dataclasses

from rl.fields import MAX_STEPS, bounded, positive


@dataclasses.dataclass(frozen=True)
class ReplaySettings:
    buffer_size: int = bounded(100_000, 1, 10**8)  # replay capacity, in transitions
    batch_size: int = bounded(64, 1, 1_000_000)  # transitions per gradient step
    learning_starts: int = bounded(1_000, 0, MAX_STEPS)  # env steps before the first update
    train_interval: int = bounded(4, 1, MAX_STEPS)  # env steps between updates
    gradient_steps: int = bounded(1, 1, 100_000)  # gradient steps per update
    target_update_tau: float = positive(1.0, 1)  # 1: copy; < 1: Polyak averaging
    n_step: int = bounded(1, 1, 100)  # rewards summed into each target (n-step returns)
    checkpoint_replay: bool = True  # save the replay beside each checkpoint (exact resume)
