"""Replay that stores each observation once, per env stream, in NumPy.

Each env copy has a ring of frames. A step writes its transition (action,
reward, flags, extras) beside the frame of its observation and writes the
next observation's frame into the following slot, which becomes the next
step's observation; where an episode ended, that slot holds the true final
observation and the next episode starts in the slot after it. So a
transition at frame i always has its next observation at frame i+1, and
``next_obs`` is never a second copy. With ``frame_stack=k`` only the newest
frame of each stacked observation is kept and stacks are rebuilt from the
last k frames of the same episode (repeating its first frame before the
start, as Gymnasium's FrameStackObservation pads): 1M Atari transitions of
84x84x4 uint8 take ~7 GB instead of ~225 GB as float32 (obs, next_obs).

n-step returns come from the same streams at sample time (Sutton & Barto
7.1): for transition i with m = min(n, steps left in its episode),
reward = sum_j<m gamma^j r_{i+j}, discount = gamma^m unless the episode
terminated (0), next_obs = frame i+m. Truncation is bootstrapped. A step that
is terminal for learning only (an Atari life lost: ``episode_goes_on``) ends
n-step sums and bootstrapping there, while its stream and stacks go on.

Sampling is uniform, or proportional to priority^alpha (Schaul et al. 2016)
with a sum tree; ``sample`` returns indices and their probabilities, and
``update_priorities`` takes new priorities for sampled indices.
"""

import dataclasses
import io
import json
import math
from typing import Dict, Mapping, Sequence, Tuple

import numpy as np

from rl.files import write_atomically
from rl.memory.spec import FieldSpec

STEP_FIELDS = ("actions", "rewards", "terminated", "truncated")


class ReplayFileError(ValueError):
    """A replay file that is missing, damaged or saved by another replay; one line."""


@dataclasses.dataclass
class Sample:
    """What ``Replay.sample`` returns.

    Attributes:
        indices: [*batch_shape] int64 transition ids (for ``update_priorities``).
        probabilities: [*batch_shape] the probability each was drawn with.
        batch: obs, actions, rewards (n-step), discounts, next_obs and the
            extras, each [*batch_shape, ...].
    """

    indices: np.ndarray
    probabilities: np.ndarray
    batch: Dict[str, np.ndarray]


def importance_weights(probabilities: np.ndarray, size: int, exponent: float) -> np.ndarray:
    """(size * P(i))^-exponent, each batch (last axis) divided by its largest, so
    weights only ever scale updates down (Schaul et al. 2016, section 3.4).

    Args:
        probabilities: [..., B] the probability each transition was drawn with.
        size: transitions the replay could draw from.
        exponent: beta; 0 gives weights of 1, 1 corrects fully for the bias.
    """
    weights = (size * np.asarray(probabilities, np.float64)) ** -exponent
    return (weights / weights.max(axis=-1, keepdims=True)).astype(np.float32)


class SumTree:
    """Sums of non-negative leaf values in a binary tree: O(log n) updates and draws."""

    def __init__(self, size: int):
        self.leaves = 1 << max(1, math.ceil(math.log2(max(size, 2))))
        self.tree = np.zeros(2 * self.leaves, np.float64)

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def set(self, leaves: np.ndarray, values: np.ndarray) -> None:
        nodes = np.asarray(leaves, np.int64) + self.leaves
        self.tree[nodes] = values
        # Level by level up to the root. A node named twice (two leaves below it) gets
        # the same sum twice: cheaper than np.unique at every level, 2-4x overall.
        for _ in range(self.leaves.bit_length() - 1):
            nodes = nodes // 2
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]

    def get(self, leaves: np.ndarray) -> np.ndarray:
        return self.tree[np.asarray(leaves, np.int64) + self.leaves]

    def find(self, targets: np.ndarray) -> np.ndarray:
        """The leaf whose cumulative range holds each target in [0, total)."""
        nodes = np.ones(len(targets), np.int64)
        targets = targets.astype(np.float64).copy()
        while nodes[0] < self.leaves:
            left = self.tree[2 * nodes]
            right = targets >= left
            targets -= left * right
            nodes = 2 * nodes + right
        return nodes - self.leaves


class Replay:
    """Transitions of ``num_envs`` env streams, each observation stored once."""

    def __init__(
        self,
        specs: Mapping[str, FieldSpec],
        capacity: int,
        num_envs: int,
        seed: int,
        n_step: int = 1,
        gamma: float = 0.99,
        frame_stack: int = 1,
        priority_exponent: float = 0.0,
    ):
        """Allocates the rings (np.zeros: memory is taken as it is written).

        Args:
            specs: obs, actions, rewards, terminated, truncated and extras
                (rl/memory/spec.py); a ``next_obs`` spec is ignored.
            capacity: frames kept over all envs (each episode costs one extra).
            num_envs: env copies adding a step together.
            seed: seeds sampling (its state is saved with the replay).
            n_step: rewards summed into each sampled transition.
            gamma: discount of the n-step sums.
            frame_stack: observations are stacks of this many frames on axis 0.
            priority_exponent: alpha; 0 samples uniformly.
        """
        if capacity < num_envs * max(2, n_step + frame_stack):
            raise ValueError(
                f"replay capacity {capacity} is too small for {num_envs} envs "
                f"(needs >= {num_envs * max(2, n_step + frame_stack)})"
            )
        self.specs = {k: v for k, v in specs.items() if k != "next_obs"}
        self.extras = tuple(k for k in self.specs if k not in ("obs", *STEP_FIELDS))
        self.num_envs, self.n_step, self.gamma = num_envs, n_step, gamma
        self.frame_stack = frame_stack
        self.priority_exponent = priority_exponent
        self.ring = -(-capacity // num_envs)
        self.capacity = capacity
        obs = self.specs["obs"]
        frame_shape = obs.shape[1:] if frame_stack > 1 else obs.shape
        if frame_stack > 1 and (not obs.shape or obs.shape[0] != frame_stack):
            raise ValueError(
                f"frame_stack={frame_stack} needs observations stacked on axis 0, got {obs.shape}"
            )
        shape = (num_envs, self.ring)
        self.frames = np.zeros((*shape, *frame_shape), obs.dtype)
        self.fields = {
            name: np.zeros((*shape, *spec.shape), spec.dtype)
            for name, spec in self.specs.items()
            if name != "obs"
        }
        self.has_transition = np.zeros(shape, bool)
        self.episode_start = np.zeros(shape, np.int64)
        self.count = np.zeros(num_envs, np.int64)  # frames ever written per env
        self.new_episode = np.ones(num_envs, bool)
        self.current_start = np.zeros(num_envs, np.int64)
        self.transitions = 0  # slots holding a transition now
        self.max_abs_reward = 0.0
        self.rng = np.random.default_rng(seed)
        self.tree = SumTree(num_envs * self.ring) if priority_exponent > 0 else None
        self.max_priority = 1.0

    # --- adding -------------------------------------------------------------------
    def _write_frames(self, envs: np.ndarray, frames: np.ndarray, starts: np.ndarray) -> None:
        slots = self.count[envs] % self.ring
        overwritten = self.has_transition[envs, slots]
        self.transitions -= int(overwritten.sum())
        self.has_transition[envs, slots] = False
        if self.tree is not None:
            self.tree.set(envs * self.ring + slots, np.zeros(len(envs)))
        self.frames[envs, slots] = frames
        self.episode_start[envs, slots] = starts
        self.count[envs] += 1

    def _newest(self, obs: np.ndarray) -> np.ndarray:
        return obs[:, -1] if self.frame_stack > 1 else obs

    def add(
        self, obs, actions, rewards, terminated, truncated, next_obs, episode_goes_on=None, **extras
    ) -> None:
        """Adds one vector step: each argument [num_envs, ...].

        Args:
            obs: observations acted on.
            actions: actions taken.
            rewards: rewards received.
            terminated: the episode reached a terminal state.
            truncated: the episode was cut (time limit); bootstrapped.
            next_obs: true next observations (the final ones at episode ends).
            episode_goes_on: None, or [num_envs] bool: terminal for learning only (an
                Atari life lost): the next step's observation continues this stream,
                frame stacks included, instead of starting an episode.
            **extras: the actor's extras named in the specs.
        """
        envs = np.arange(self.num_envs)
        starting = np.flatnonzero(self.new_episode)
        if len(starting):
            self.current_start[starting] = self.count[starting]
            self._write_frames(starting, self._newest(obs[starting]), self.current_start[starting])
        slots = (self.count - 1) % self.ring
        values = {
            "actions": actions,
            "rewards": rewards,
            "terminated": terminated,
            "truncated": truncated,
            **extras,
        }
        for name, array in self.fields.items():
            array[envs, slots] = values[name]
        self.has_transition[envs, slots] = True
        self.transitions += self.num_envs
        if self.tree is not None:
            self.tree.set(envs * self.ring + slots, np.full(self.num_envs, self.max_priority))
        self._write_frames(envs, self._newest(next_obs), self.current_start)
        self.new_episode = np.logical_or(terminated, truncated)
        if episode_goes_on is not None:
            self.new_episode &= ~np.asarray(episode_goes_on, bool)
        self.max_abs_reward = max(self.max_abs_reward, float(np.max(np.abs(rewards))))

    def end_streams(self, envs: Sequence[int]) -> None:
        """Ends the current episode of these env streams without a terminal state.

        For envs that restart mid-episode (a resumed run, an actor process
        restarted): the newest transition of each stream becomes truncated, so
        it bootstraps from its own stored next observation, and the next
        ``add`` starts a new episode instead of reading that observation as
        the new one's first.

        Args:
            envs: indices of the env streams.
        """
        envs = np.asarray(envs, np.int64)
        envs = envs[(self.count[envs] > 0) & ~self.new_episode[envs]]
        if len(envs):
            newest = (self.count[envs] - 2) % self.ring  # the slot before the next frame
            held = self.has_transition[envs, newest]
            self.fields["truncated"][envs[held], newest[held]] = True
        self.new_episode[envs] = True

    # --- reading ------------------------------------------------------------------
    def __len__(self) -> int:
        """Transitions that can be sampled now."""
        return self.transitions - self._unsampleable()

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held (allocated lazily: written pages only are resident)."""
        arrays = [self.frames, self.has_transition, self.episode_start, *self.fields.values()]
        tree = self.tree.tree.nbytes if self.tree is not None else 0
        return sum(a.nbytes for a in arrays) + tree

    def _stack(self, env: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Observations at absolute frame ``index`` of each ``env``, stacks rebuilt."""
        frames = self.frames.reshape(-1, *self.frames.shape[2:])  # flat indexing is faster
        if self.frame_stack == 1:
            return frames[env * self.ring + index % self.ring]
        start = self.episode_start[env, index % self.ring]
        offsets = np.arange(1 - self.frame_stack, 1)
        stacked = np.maximum(index[:, None] + offsets, start[:, None])
        return frames[env[:, None] * self.ring + stacked % self.ring]

    def _windows(self, env: np.ndarray, index: np.ndarray):
        """n-step sums for transitions at ``index``: valid, reward, discount, next index."""
        ring, count = self.ring, self.count[env]
        oldest = count - ring
        flat = env * ring + index % ring
        has_transition = self.has_transition.reshape(-1)
        valid = (index >= oldest) & (index < count) & has_transition[flat]
        if self.frame_stack > 1:
            start = self.episode_start.reshape(-1)[flat]
            valid &= np.maximum(index - self.frame_stack + 1, start) >= oldest
        rewards = self.fields["rewards"].reshape(-1)
        terminated = self.fields["terminated"].reshape(-1)
        if self.n_step == 1:  # every held transition is complete
            discount = np.where(terminated[flat], 0.0, self.gamma)
            return valid, rewards[flat].astype(np.float64), discount, index + 1
        truncated = self.fields["truncated"].reshape(-1)
        reward = np.zeros(len(index), np.float64)
        discount = np.ones(len(index), np.float64)
        steps = np.zeros(len(index), np.int64)
        open_ = valid.copy()  # the window is still collecting steps
        terminal = np.zeros(len(index), bool)
        for j in range(self.n_step):
            at = index + j
            at_flat = env * ring + at % ring
            recorded = (at < count) & has_transition[at_flat]
            # A window that runs into an unrecorded step before n steps or an
            # episode end is not complete yet.
            valid &= ~(open_ & ~recorded)
            open_ &= recorded
            where = np.flatnonzero(open_)
            s = at_flat[where]
            reward[where] += discount[where] * rewards[s]
            discount[where] *= self.gamma
            steps[where] += 1
            ended_term = terminated[s]
            terminal[where] = ended_term
            open_[where[ended_term | truncated[s]]] = False
        discount[terminal] = 0.0
        return valid, reward, discount, index + steps

    def _unsampleable(self) -> int:
        """Transitions held that cannot be sampled yet: unfinished n-step windows
        (newest) and stacks reaching overwritten frames (oldest)."""
        reach = self.n_step + self.frame_stack + 1
        env = np.repeat(np.arange(self.num_envs), 2 * reach)
        near_new = self.count[:, None] - 1 - np.arange(reach)[None, :]
        near_old = self.count[:, None] - self.ring + np.arange(reach)[None, :]
        index = np.concatenate([near_new, near_old], axis=1).reshape(-1)
        keep = index >= np.maximum(self.count[env] - self.ring, 0)
        pairs = np.unique(np.stack([env[keep], index[keep]]), axis=1)
        env, index = pairs
        held = self.has_transition[env, index % self.ring]
        valid, *_ = self._windows(env, index)
        return int((held & ~valid).sum())

    def sample(self, batch_shape: Tuple[int, ...]) -> Sample:
        """Transitions drawn uniformly (or by priority), shaped [*batch_shape, ...].

        Raises:
            ValueError: nothing can be sampled yet.
        """
        size = int(np.prod(batch_shape))
        available = len(self)
        if available <= 0:
            raise ValueError("cannot sample from a replay with no complete transition")
        env, index, reward, discount, next_index = self._draw(size)
        if self.tree is not None:
            leaves = env * self.ring + index % self.ring
            probabilities = self.tree.get(leaves) / self.tree.total
        else:
            probabilities = np.full(size, 1.0 / available)
        flat = env * self.ring + index % self.ring
        batch = {
            "obs": self._stack(env, index),
            "actions": self._flat("actions")[flat],
            "rewards": reward.astype(np.float32),
            "discounts": discount.astype(np.float32),
            "next_obs": self._stack(env, next_index),
        }
        for name in self.extras:
            batch[name] = self._flat(name)[flat]
        ids = env * (1 << 40) + index  # env and absolute frame: stable while held
        return Sample(
            ids.reshape(batch_shape),
            probabilities.reshape(batch_shape),
            {k: v.reshape(*batch_shape, *v.shape[1:]) for k, v in batch.items()},
        )

    def batch_fields(self, batch_shape: Tuple[int, ...]) -> Dict[str, Tuple[tuple, np.dtype]]:
        """(shape, dtype) of each field ``sample(batch_shape)`` returns in its batch.

        Lets a learner compile its update for the batches to come before the
        replay holds any (``Learner.warm_up``).
        """

        def held(name: str) -> Tuple[tuple, np.dtype]:
            spec = self.specs[name]
            return tuple(batch_shape) + tuple(spec.shape), np.dtype(spec.dtype)

        computed = (tuple(batch_shape), np.dtype(np.float32))  # n-step sums, as sample makes
        fields = {
            "obs": held("obs"),
            "actions": held("actions"),
            "rewards": computed,
            "discounts": computed,
            "next_obs": held("obs"),
        }
        fields.update((name, held(name)) for name in self.extras)
        return fields

    def _flat(self, name: str) -> np.ndarray:
        array = self.fields[name]
        return array.reshape(-1, *array.shape[2:])

    def _draw(self, size: int) -> Tuple[np.ndarray, ...]:
        """``size`` valid transitions: env, absolute index, and their n-step
        reward, discount and next index; invalid draws are redrawn."""
        parts = []
        needed = size
        while needed > 0:
            tries = needed + needed // 4 + 8
            if self.tree is not None:
                targets = self.rng.random(tries) * self.tree.total
                leaves = np.minimum(self.tree.find(targets), self.num_envs * self.ring - 1)
                env, slot = leaves // self.ring, leaves % self.ring
                last = self.count[env] - 1
                index = last - (last - slot) % self.ring
            else:
                filled = np.minimum(self.count, self.ring)
                env = self.rng.choice(self.num_envs, tries, p=filled / filled.sum())
                index = self.count[env] - 1 - self.rng.integers(0, filled[env])
            valid, reward, discount, next_index = self._windows(env, index)
            keep = np.flatnonzero(valid)[:needed]
            parts.append((env[keep], index[keep], reward[keep], discount[keep], next_index[keep]))
            needed -= len(keep)
        return tuple(np.concatenate(column) for column in zip(*parts))

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities of sampled transitions (their ids from ``sample``).

        Raises:
            ValueError: no prioritised sampling, lengths differ, or a priority
                is negative or not finite.
        """
        if self.tree is None:
            raise ValueError("update_priorities needs priority_exponent > 0")
        indices = np.asarray(indices, np.int64).reshape(-1)
        priorities = np.asarray(priorities, np.float64).reshape(-1)
        if len(indices) != len(priorities):
            raise ValueError(f"{len(indices)} indices but {len(priorities)} priorities")
        if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
            raise ValueError("priorities must be finite and >= 0")
        env, index = indices >> 40, indices & ((1 << 40) - 1)
        held = (index >= self.count[env] - self.ring) & self.has_transition[env, index % self.ring]
        scaled = priorities[held] ** self.priority_exponent
        self.tree.set(env[held] * self.ring + index[held] % self.ring, scaled)
        if len(scaled):
            self.max_priority = max(self.max_priority, float(scaled.max()))

    # --- saving -------------------------------------------------------------------
    def _signature(self) -> Dict:
        return {
            "capacity": self.capacity,
            "num_envs": self.num_envs,
            "frame_stack": self.frame_stack,
            "fields": {k: [v.dtype.str, list(v.shape)] for k, v in self.specs.items()},
        }

    def save(self, path: str) -> None:
        """Writes the filled part, the sampling stream and priorities to one .npz file."""
        filled = int(min(self.count.max(), self.ring))
        meta = {
            **self._signature(),
            "priority_exponent": self.priority_exponent,
            "transitions": self.transitions,
            "max_abs_reward": self.max_abs_reward,
            "max_priority": self.max_priority,
            "rng": self.rng.bit_generator.state,
        }
        arrays = {
            "frames": self.frames[:, :filled],
            "has_transition": self.has_transition[:, :filled],
            "episode_start": self.episode_start[:, :filled],
            "count": self.count,
            "new_episode": self.new_episode,
            "current_start": self.current_start,
            **{f"field_{k}": v[:, :filled] for k, v in self.fields.items()},
        }
        if self.tree is not None:
            arrays["tree"] = self.tree.tree

        def write(tmp: str) -> None:
            buffer = io.BytesIO()
            np.savez(buffer, meta=np.array(json.dumps(meta)), **arrays)
            with open(tmp, "wb") as f:
                f.write(buffer.getbuffer())

        write_atomically(path, write)

    def load(self, path: str) -> None:
        """Restores what ``save`` wrote.

        Raises:
            ReplayFileError: the file is missing, damaged, or from a replay of
                another shape.
        """
        try:
            with np.load(path, allow_pickle=False) as saved:
                meta = json.loads(str(saved["meta"]))
                arrays = {k: saved[k] for k in saved.files if k != "meta"}
        except FileNotFoundError:
            raise ReplayFileError(f"replay file {path} is missing") from None
        except Exception as e:  # noqa: BLE001  (zip, npy and JSON errors of a damaged file)
            raise ReplayFileError(f"replay file {path} cannot be read ({e})") from None
        ours = self._signature()
        theirs = {k: meta.get(k) for k in ours}
        if theirs != json.loads(json.dumps(ours)):
            changed = [k for k in ours if theirs[k] != json.loads(json.dumps(ours[k]))]
            raise ReplayFileError(
                f"replay file {path} was saved by a replay with other {', '.join(changed)}"
            )
        filled = arrays["frames"].shape[1]
        self.frames[:, :filled] = arrays["frames"]
        self.has_transition[:] = False
        self.has_transition[:, :filled] = arrays["has_transition"]
        self.episode_start[:, :filled] = arrays["episode_start"]
        for name, array in self.fields.items():
            array[:, :filled] = arrays[f"field_{name}"]
        self.count[:] = arrays["count"]
        self.new_episode[:] = arrays["new_episode"]
        self.current_start[:] = arrays["current_start"]
        self.max_priority = float(meta["max_priority"])
        if self.tree is not None:
            if "tree" in arrays and meta.get("priority_exponent") == self.priority_exponent:
                self.tree.tree[:] = arrays["tree"]
            else:  # saved without priorities (or with another alpha): all start equal
                held = np.flatnonzero(self.has_transition.reshape(-1))
                self.tree.set(held, np.full(len(held), self.max_priority))
        self.transitions = int(meta["transitions"])
        self.max_abs_reward = float(meta["max_abs_reward"])
        self.rng.bit_generator.state = meta["rng"]
