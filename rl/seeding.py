"""Independent random streams derived from one run seed.

Every consumer of randomness gets its own stream, so that changing how often
a run evaluates, logs or checkpoints never changes what it learns: the
streams are keyed by purpose (and, for env resets, by step), not drawn one
after another from a shared generator.
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

# Stream keys: the second part of every derived seed. Fixed forever: changing
# one changes every run's results.
TRAIN_ENV_RESET = 0  # training envs, reset at the start of a (resumed) run
EVAL = 1  # evaluation env resets and evaluation act_select draws
ACT = 2  # the act_select while training
UPDATE = 3  # the update's own draws (PPO's minibatch order)
REPLAY = 4  # sampling from a replay buffer
API = 5  # compute_action() called by a user
ACTOR_PROCESS = 6  # the act_select in actor process i once restarted (--num_workers)
COPIES = 7919  # seeds of --copies runs


def derived_seed(*parts: int) -> int:
    """A 31-bit seed from several integers (the run seed, a stream key, a step, ...)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0] & 0x7FFFFFFF)


def stream(seed: int, key: int, *more: int) -> np.random.Generator:
    """A NumPy generator for one purpose of run ``seed`` (``key`` from above)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, key, *more])))


def generator_at(state: Dict[str, Any]) -> np.random.Generator:
    """A generator of ``stream``'s kind continuing from ``state`` (``bit_generator.state``)."""
    generator = np.random.Generator(np.random.PCG64())
    generator.bit_generator.state = state
    return generator


class RowDraws:
    """One actor's rows of a generator that a run's actors share, drawn as one batch.

    Actor processes each act for some rows (env copies) of the run's batch. A draw is
    *per row* when its ``size`` has this actor's row count first: then the whole run's
    batch is drawn and only rows [first:end] are kept. Every actor starting from one
    state thus advances the generator alike, and each row gets the number a single
    actor acting for all rows would give it. The per-row draws are ``gumbel``,
    ``standard_normal``, ``random`` and ``integers`` (with scalar parameters); a draw
    of another size, a scalar draw and any other method go to the generator as they
    are (the same numbers in every actor). An act_select that draws per row through
    another method (``choice``, ``normal``) still gives the same run for a seed and a
    number of actors, but not the single actor's.
    """

    def __init__(self, generator: np.random.Generator, rows: Tuple[int, int], total: int):
        """Args:
        generator: the shared generator (its state is the same in every actor).
        rows: (first, end): this actor's rows of the run's batch.
        total: rows in the run's batch.
        """
        self.generator = generator
        self.first, self.end = rows
        self.total = total

    def _whole(self, size: Optional[Union[int, Sequence[int]]]):
        """The size to draw for the run's batch, or None: ``size`` is not per row."""
        if size is None:
            return None
        shape = (int(size),) if np.ndim(size) == 0 else tuple(size)
        if shape and shape[0] == self.end - self.first:
            return (self.total, *shape[1:])
        return None

    def _draw(self, method, size, *args, **kwargs) -> np.ndarray:
        whole = self._whole(size)
        if whole is None:
            return method(*args, size=size, **kwargs)
        return method(*args, size=whole, **kwargs)[self.first : self.end]

    def gumbel(self, loc=0.0, scale=1.0, size=None) -> np.ndarray:
        return self._draw(self.generator.gumbel, size, loc, scale)

    def standard_normal(self, size=None, dtype=np.float64) -> np.ndarray:
        return self._draw(self.generator.standard_normal, size, dtype=dtype)

    def random(self, size=None, dtype=np.float64) -> np.ndarray:
        return self._draw(self.generator.random, size, dtype=dtype)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False) -> np.ndarray:
        return self._draw(self.generator.integers, size, low, high, dtype=dtype, endpoint=endpoint)

    def __getattr__(self, name: str):
        if name == "generator":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.generator, name)  # other draws and bit_generator, as they are


def copy_seeds(base_seed: int, copies: int) -> List[int]:
    """Seeds of ``--copies`` runs: the base seed itself, then independent streams derived
    from it.

    Copy 0 is the run a user gets without ``--copies``, so the statistics of any number of
    copies include it; adding copies never changes the seeds of the ones before.
    """
    return [base_seed] + [derived_seed(base_seed, COPIES, i) for i in range(1, copies)]
