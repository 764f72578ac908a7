"""Independent random streams derived from one run seed.

Every consumer of randomness gets its own stream, so that changing how often
a run evaluates, logs or checkpoints never changes what it learns: the
streams are keyed by purpose (and, for env resets, by step), not drawn one
after another from a shared generator.
"""

from typing import List

import numpy as np

# Stream keys: the second part of every derived seed. Fixed forever: changing
# one changes every run's results.
TRAIN_ENV_RESET = 0  # training envs, reset at the start of a (resumed) run
EVAL = 1  # evaluation env resets and evaluation act_select draws
ACT = 2  # the act_select while training
UPDATE = 3  # the update's own draws (PPO's minibatch order)
REPLAY = 4  # sampling from a replay buffer
API = 5  # compute_action() called by a user
ACTOR_PROCESS = 6  # the act_select in actor process i (with --num_workers), per restart
COPIES = 7919  # seeds of --copies runs


def derived_seed(*parts: int) -> int:
    """A 31-bit seed from several integers (the run seed, a stream key, a step, ...)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0] & 0x7FFFFFFF)


def stream(seed: int, key: int, *more: int) -> np.random.Generator:
    """A NumPy generator for one purpose of run ``seed`` (``key`` from above)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, key, *more])))


def copy_seeds(base_seed: int, copies: int) -> List[int]:
    """Seeds of ``--copies`` runs: independent streams derived from the base seed."""
    return [derived_seed(base_seed, COPIES, i) for i in range(copies)]
