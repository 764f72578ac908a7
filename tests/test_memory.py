"""Memory from specs: the stream replay and the rollout buffer, on hand-listed transitions."""

import gymnasium as gym
import numpy as np
import pytest

from rl.memory.replay import Replay, ReplayFileError, SumTree
from rl.memory.rollout import RolloutBuffer
from rl.memory.spec import FieldSpec, transition_specs

pytestmark = pytest.mark.unit

SPECS = transition_specs(gym.spaces.Box(-1e9, 1e9, (1,), np.float32), gym.spaces.Discrete(2))


def add(replay, obs, next_obs, rewards=None, terminated=(), truncated=()):
    """One vector step; obs/next_obs are lists of scalars (one per env)."""
    n = len(obs)
    replay.add(
        obs=np.array(obs, np.float32).reshape(n, 1),
        actions=np.zeros(n, np.int32),
        rewards=np.array(rewards if rewards is not None else obs, np.float32),
        terminated=np.array([i in terminated for i in range(n)]),
        truncated=np.array([i in truncated for i in range(n)]),
        next_obs=np.array(next_obs, np.float32).reshape(n, 1),
    )


def pairs(replay, draws=4000):
    """The set of (obs, next_obs, reward, discount) a replay samples."""
    batch = replay.sample((draws,)).batch
    return {
        (float(o), float(n), round(float(r), 6), round(float(d), 6))
        for o, n, r, d in zip(
            batch["obs"][:, 0], batch["next_obs"][:, 0], batch["rewards"], batch["discounts"]
        )
    }


def test_next_obs_is_the_next_frame_and_the_final_one_at_episode_ends():
    replay = Replay(SPECS, capacity=100, num_envs=1, seed=0, gamma=0.5)
    # Episode 1: 0 -> 1 -> 2 (terminated, final obs 2); episode 2 starts at 10.
    add(replay, [0], [1])
    add(replay, [1], [2], terminated=[0])
    add(replay, [10], [11], truncated=[0])
    add(replay, [20], [21])
    assert len(replay) == 4
    assert pairs(replay) == {
        (0.0, 1.0, 0.0, 0.5),
        (1.0, 2.0, 1.0, 0.0),  # terminated: no bootstrap
        (10.0, 11.0, 10.0, 0.5),  # truncated: bootstrapped from the true final obs
        (20.0, 21.0, 20.0, 0.5),
    }
    # Two frames per episode start + one per step: 0,1,2 | 10,11 | 20,21.
    assert replay.count.tolist() == [7]


def test_vector_envs_keep_their_own_streams():
    replay = Replay(SPECS, capacity=100, num_envs=2, seed=0, gamma=0.5)
    add(replay, [0, 100], [1, 101], terminated=[1])
    add(replay, [1, 200], [2, 201])
    assert pairs(replay) == {
        (0.0, 1.0, 0.0, 0.5),
        (1.0, 2.0, 1.0, 0.5),
        (100.0, 101.0, 100.0, 0.0),
        (200.0, 201.0, 200.0, 0.5),
    }


def test_wrap_around_never_samples_an_overwritten_transition():
    replay = Replay(SPECS, capacity=4, num_envs=1, seed=0, gamma=0.5)
    for t in range(10):
        add(replay, [t], [t + 1])
    # The ring holds frames 7..10: transitions 7->8, 8->9, 9->10.
    assert len(replay) == 3
    assert {p[:2] for p in pairs(replay)} == {(7.0, 8.0), (8.0, 9.0), (9.0, 10.0)}


def test_n_step_returns_across_a_termination_and_a_truncation():
    replay = Replay(SPECS, capacity=100, num_envs=1, seed=0, n_step=3, gamma=0.5)
    # Episode A: rewards 1, 2, 4, 8 (terminated at the 4th step), obs 0..3, final 4.
    for t, r in enumerate([1, 2, 4, 8]):
        add(replay, [t], [t + 1], rewards=[r], terminated=[0] if t == 3 else [])
    # Episode B: rewards 1, 1 (truncated at the 2nd), obs 10, 11, final 12.
    add(replay, [10], [11], rewards=[1])
    add(replay, [11], [12], rewards=[1], truncated=[0])
    got = pairs(replay)
    assert got == {
        (0.0, 3.0, 1 + 0.5 * 2 + 0.25 * 4, 0.125),  # 3 steps, bootstrapped
        (1.0, 4.0, 2 + 0.5 * 4 + 0.25 * 8, 0.0),  # reaches the termination
        (2.0, 4.0, 4 + 0.5 * 8, 0.0),
        (3.0, 4.0, 8.0, 0.0),
        (10.0, 12.0, 1 + 0.5 * 1, 0.25),  # truncation: bootstrapped after 2 steps
        (11.0, 12.0, 1.0, 0.5),
    }


def test_ending_a_stream_mid_episode_bootstraps_its_last_step_and_starts_anew():
    # Env 0 restarts mid-episode (a resumed run or a restarted actor process):
    # 1 -> 2 is cut there and bootstraps from its own next obs 2; the envs' new
    # first obs 50 does not become that transition's next obs. Env 1 goes on.
    replay = Replay(SPECS, capacity=100, num_envs=2, seed=0, n_step=2, gamma=0.5)
    add(replay, [0, 100], [1, 101])
    add(replay, [1, 101], [2, 102])
    replay.end_streams([0])
    add(replay, [50, 102], [51, 103])
    add(replay, [51, 103], [52, 104])
    before = pairs(replay)
    assert before == {
        (0.0, 2.0, 0 + 0.5 * 1, 0.25),
        (1.0, 2.0, 1.0, 0.5),  # truncated by end_streams: one step, bootstrapped
        (50.0, 52.0, 50 + 0.5 * 51, 0.25),
        (100.0, 102.0, 100 + 0.5 * 101, 0.25),
        (101.0, 103.0, 101 + 0.5 * 102, 0.25),
        (102.0, 104.0, 102 + 0.5 * 103, 0.25),
    }
    # Ending both now completes the windows still waiting for a second step.
    replay.end_streams([0, 1])
    replay.end_streams([0])  # a stream already ended stays as it is
    assert len(replay) == 8
    assert pairs(replay) - before == {(51.0, 52.0, 51.0, 0.5), (103.0, 104.0, 103.0, 0.5)}
    Replay(SPECS, capacity=100, num_envs=2, seed=0).end_streams([0, 1])


@pytest.mark.parametrize("goes_on", [True, False])
def test_a_lost_life_is_terminal_while_the_stream_and_its_frame_stacks_go_on(goes_on):
    # One env, frames 0..6, stacks of 2 (the first padded), rewards 1, 2, 4, ...; the
    # step 2 -> 3 costs a life: terminal for learning, but the game (no reset) goes on.
    specs = transition_specs(gym.spaces.Box(-1e9, 1e9, (2, 1), np.float32), gym.spaces.Discrete(2))
    replay = Replay(specs, capacity=100, num_envs=1, seed=0, n_step=2, gamma=0.5, frame_stack=2)

    def stack(t):
        return np.array([[[max(t - 1, 0)], [t]]], np.float32)

    for t in range(6):
        replay.add(
            obs=stack(t),
            actions=np.zeros(1, np.int32),
            rewards=np.array([2.0**t], np.float32),
            terminated=np.array([t == 2]),
            truncated=np.array([False]),
            next_obs=stack(t + 1),
            episode_goes_on=np.array([t == 2 and goes_on]),
        )
    batch = replay.sample((2000,)).batch
    got = {
        (tuple(o[:, 0]), tuple(n[:, 0]), float(r), float(d))
        for o, n, r, d in zip(batch["obs"], batch["next_obs"], batch["rewards"], batch["discounts"])
    }
    after = [(2.0, 3.0), (3.0, 4.0)] if goes_on else [(3.0, 3.0), (3.0, 4.0)]
    assert got == {
        ((0.0, 0.0), (1.0, 2.0), 1 + 0.5 * 2, 0.25),
        ((0.0, 1.0), (2.0, 3.0), 2 + 0.5 * 4, 0.0),  # the window stops at the lost life
        ((1.0, 2.0), (2.0, 3.0), 4.0, 0.0),  # no bootstrap across it
        (after[0], (4.0, 5.0), 8 + 0.5 * 16, 0.25),  # stacked as the agent saw it
        (after[1], (5.0, 6.0), 16 + 0.5 * 32, 0.25),
    }
    # One frame a step after the first: no second copy of frame 3 when the game goes on.
    assert replay.count.tolist() == [7 if goes_on else 8]


def test_unfinished_n_step_windows_wait():
    replay = Replay(SPECS, capacity=100, num_envs=1, seed=0, n_step=3, gamma=0.5)
    add(replay, [0], [1])
    add(replay, [1], [2])
    assert len(replay) == 0
    with pytest.raises(ValueError, match="no complete transition"):
        replay.sample((1,))
    add(replay, [2], [3])
    # rewards 0, 1, 2: 0 + 0.5 * 1 + 0.25 * 2
    assert len(replay) == 1 and pairs(replay, 50) == {(0.0, 3.0, 1.0, 0.125)}


def test_frame_stacks_are_rebuilt_exactly_as_gymnasium_stacks_them():
    class Counter(gym.Env):
        """obs = [t * 10 + episode] as a 2x2 image; 5 steps an episode."""

        observation_space = gym.spaces.Box(0, 255, (2, 2), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def __init__(self):
            self.episode, self.t = 0, 0

        def frame(self):
            return np.full((2, 2), self.t * 10 + self.episode, np.uint8)

        def reset(self, seed=None, options=None):
            self.episode += 1
            self.t = 0
            return self.frame(), {}

        def step(self, action):
            self.t += 1
            return self.frame(), float(self.t), self.t == 5, False, {}

    env = gym.wrappers.FrameStackObservation(Counter(), 3)
    specs = transition_specs(env.observation_space, env.action_space)
    replay = Replay(specs, capacity=64, num_envs=1, seed=0, frame_stack=3)
    recorded = {}
    obs, _ = env.reset()
    for _ in range(12):
        next_obs, reward, terminated, truncated, _ = env.step(0)
        replay.add(
            obs=obs[None],
            actions=np.zeros(1, np.int32),
            rewards=np.array([reward], np.float32),
            terminated=np.array([terminated]),
            truncated=np.array([truncated]),
            next_obs=next_obs[None],
        )
        recorded[obs.tobytes()] = next_obs
        obs = env.reset()[0] if terminated else next_obs
    batch = replay.sample((500,)).batch
    assert batch["obs"].dtype == np.uint8 and batch["obs"].shape == (500, 3, 2, 2)
    seen = set()
    for o, n in zip(batch["obs"], batch["next_obs"]):
        np.testing.assert_array_equal(recorded[o.tobytes()], n)
        seen.add(o.tobytes())
    assert len(seen) == 12


def test_a_million_atari_frames_fit_in_about_7_gb():
    specs = transition_specs(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6))
    replay = Replay(specs, capacity=1_000_000, num_envs=8, seed=0, frame_stack=4)
    assert replay.frames.shape == (8, 125_000, 84, 84)
    assert replay.nbytes < 7.5e9
    # float32 obs and next_obs, each a 4-frame stack: the layout this replaces.
    assert 1_000_000 * 2 * 4 * 84 * 84 * 4 > 2.2e11


def test_sum_tree_sums_finds_and_updates_by_hand():
    tree = SumTree(5)  # rounded up to 8 leaves
    tree.set(np.array([0, 1, 2, 3, 4]), np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert tree.total == 15.0
    # Cumulative ranges: [0, 1) leaf 0, [1, 3) leaf 1, [3, 6) leaf 2, [6, 10) 3, [10, 15) 4.
    targets = np.array([0.0, 0.99, 1.0, 2.5, 3.0, 9.99, 10.0, 14.9])
    assert tree.find(targets).tolist() == [0, 0, 1, 1, 2, 3, 4, 4]
    # Two leaves under one parent, and one leaf named twice (the last value counts).
    tree.set(np.array([2, 3, 4, 4]), np.array([0.0, 0.5, 7.0, 6.0]))
    assert tree.get(np.arange(5)).tolist() == [1.0, 2.0, 0.0, 0.5, 6.0]
    assert tree.total == 9.5
    assert tree.tree[2] == 3.5 and tree.tree[3] == 6.0  # the two halves
    assert tree.find(np.array([3.0, 3.4, 3.5])).tolist() == [3, 3, 4]  # leaf 2 is empty


def test_sum_tree_of_many_random_updates_matches_plain_sums():
    rng = np.random.default_rng(0)
    tree, values = SumTree(1000), np.zeros(1000)
    for _ in range(300):
        leaves = rng.integers(0, 1000, rng.integers(1, 65))
        new = rng.random(len(leaves))
        tree.set(leaves, new)
        values[leaves] = new  # numpy's rule for repeated indices, as in the tree
    assert tree.get(np.arange(1000)) == pytest.approx(values)
    assert tree.total == pytest.approx(values.sum(), rel=1e-12)
    targets = rng.random(500) * values.sum()
    expected = np.searchsorted(np.cumsum(values), targets, side="right")
    assert tree.find(targets).tolist() == expected.tolist()


def test_prioritised_sampling_follows_priorities_and_reports_probabilities():
    replay = Replay(SPECS, capacity=100, num_envs=1, seed=0, gamma=0.5, priority_exponent=1.0)
    for t in range(4):
        add(replay, [t], [t + 1])
    first = replay.sample((4,))
    ids = {int(o): i for o, i in zip(first.batch["obs"][:, 0], first.indices)}
    # New transitions share the max priority: uniform so far.
    np.testing.assert_allclose(first.probabilities, 0.25)
    all_ids = replay.sample((2000,))
    by_obs = {int(o): i for o, i in zip(all_ids.batch["obs"][:, 0], all_ids.indices)}
    ids.update(by_obs)
    replay.update_priorities(np.array([ids[0], ids[1], ids[2], ids[3]]), np.array([1.0, 1, 2, 4]))
    draws = replay.sample((40_000,))
    counts = np.bincount(draws.batch["obs"][:, 0].astype(int), minlength=4) / 40_000
    np.testing.assert_allclose(counts, [1 / 8, 1 / 8, 2 / 8, 4 / 8], atol=0.01)
    expected = np.array([1 / 8, 1 / 8, 2 / 8, 4 / 8])[draws.batch["obs"][:, 0].astype(int)]
    np.testing.assert_allclose(draws.probabilities, expected)
    for bad, message in (
        (np.array([1.0, -1.0]), "finite and >= 0"),
        (np.array([1.0, np.nan]), "finite and >= 0"),
        (np.array([1.0]), "2 indices but 1 priorities"),
    ):
        with pytest.raises(ValueError, match=message):
            replay.update_priorities(np.array([ids[0], ids[1]]), bad)


def test_save_and_load_round_trip_exactly(tmp_path):
    replay = Replay(SPECS, capacity=16, num_envs=2, seed=3, n_step=2, priority_exponent=0.6)
    rng = np.random.default_rng(0)
    for t in range(20):
        add(replay, list(rng.normal(size=2)), list(rng.normal(size=2)), terminated=[t % 7 == 0])
    path = str(tmp_path / "replay.npz")
    replay.save(path)
    copy = Replay(SPECS, capacity=16, num_envs=2, seed=99, n_step=2, priority_exponent=0.6)
    copy.load(path)
    assert len(copy) == len(replay) and copy.max_abs_reward == replay.max_abs_reward
    a, b = replay.sample((5, 7)), copy.sample((5, 7))
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.probabilities, b.probabilities)
    for name in a.batch:
        np.testing.assert_array_equal(a.batch[name], b.batch[name])


@pytest.mark.parametrize(
    "damage, message",
    [
        ("missing", "is missing"),
        ("truncate", "cannot be read"),
        ("garbage", "cannot be read"),
        ("other", "saved by a replay with other capacity"),
    ],
)
def test_bad_replay_files_are_one_clear_error(tmp_path, damage, message):
    path = tmp_path / "replay.npz"
    replay = Replay(SPECS, capacity=16, num_envs=1, seed=0)
    add(replay, [0], [1])
    if damage == "other":
        Replay(SPECS, capacity=32, num_envs=1, seed=0).save(str(path))
    elif damage != "missing":
        replay.save(str(path))
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"garbage")
    with pytest.raises(ReplayFileError, match=message):
        replay.load(str(path))


def test_rollout_buffer_keeps_the_spec_dtypes_and_checks_fields():
    specs = transition_specs(
        gym.spaces.Box(0, 255, (3, 3, 1), np.uint8),
        gym.spaces.Box(-1, 1, (2,), np.float32),
        {"log_prob": (np.float32, ())},
    )
    specs["next_obs"] = FieldSpec("next_obs", np.dtype(np.uint8), (3, 3, 1))
    buffer = RolloutBuffer(specs, steps=2, num_envs=4)
    step = {name: np.zeros((4, *spec.shape), spec.dtype) for name, spec in specs.items()}
    buffer.add(**step)
    assert len(buffer) == 1 and not buffer.full
    buffer.add(**step)
    assert buffer.full
    data = buffer.data()
    assert data["obs"].dtype == np.uint8 and data["obs"].shape == (2, 4, 3, 3, 1)
    assert data["actions"].shape == (2, 4, 2) and data["log_prob"].shape == (2, 4)
    buffer.clear()
    assert len(buffer) == 0
    with pytest.raises(ValueError, match="log_prob"):
        buffer.add(**{k: v for k, v in step.items() if k != "log_prob"})


def test_batch_fields_are_the_shapes_and_dtypes_that_sample_returns():
    # uint8 stacks of 2 frames, Box actions, an extra, n-step sums: each as sampled.
    specs = transition_specs(
        gym.spaces.Box(0, 255, (2, 3), np.uint8),
        gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        extras={"log_prob": (np.float32, ())},
    )
    replay = Replay(specs, capacity=100, num_envs=2, seed=0, n_step=3, gamma=0.5, frame_stack=2)
    for t in range(6):
        replay.add(
            obs=np.full((2, 2, 3), t, np.uint8),
            actions=np.zeros((2, 2), np.float32),
            rewards=np.ones(2, np.float32),
            terminated=np.array([t == 4, False]),
            truncated=np.zeros(2, bool),
            next_obs=np.full((2, 2, 3), t + 1, np.uint8),
            log_prob=np.zeros(2, np.float32),
        )
    batch = replay.sample((4, 5)).batch
    fields = replay.batch_fields((4, 5))
    assert fields == {name: (array.shape, array.dtype) for name, array in batch.items()}
    assert fields["obs"] == ((4, 5, 2, 3), np.uint8)
