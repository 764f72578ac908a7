"""memory: where transitions wait between acting and learning (replay buffers)."""

from rl.memory.replay import ReplayBuffer

__all__ = ["ReplayBuffer"]
