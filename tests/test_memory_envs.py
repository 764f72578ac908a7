"""Envs that need memory (rl/envs/partial.py): classic control without velocities, by
RL-Zoo's names, and cue_recall with its known best returns with and without memory."""

import numpy as np
import pytest

from rl import catalog  # noqa: F401  (fills the registries)
from rl.envs import make_env
from rl.envs.make import make_raw_env
from rl.envs.partial import VELOCITY_INDICES, no_velocity_name
from rl.errors import HParamsError


@pytest.mark.unit
def test_rl_zoos_names_for_the_envs_without_velocities():
    assert no_velocity_name("CartPole-v1") == "CartPoleNoVel-v1"
    assert no_velocity_name("LunarLanderContinuous-v3") == "LunarLanderContinuousNoVel-v3"


@pytest.mark.unit
@pytest.mark.parametrize("env_id", sorted(VELOCITY_INDICES))
def test_an_env_without_velocities_is_the_same_env_with_those_entries_removed(env_id):
    full, masked = make_env(env_id), make_env(no_velocity_name(env_id))
    removed = VELOCITY_INDICES[env_id]
    kept = [i for i in range(full.observation_space.shape[0]) if i not in removed]
    assert masked.observation_space.shape == (len(kept),)
    np.testing.assert_array_equal(masked.observation_space.low, full.observation_space.low[kept])
    full_obs, _ = full.reset(seed=3)
    masked_obs, _ = masked.reset(seed=3)
    full.action_space.seed(3)
    for _ in range(30):  # the same steps, seen with and without the velocities
        np.testing.assert_array_equal(masked_obs, full_obs[kept])
        action = full.action_space.sample()
        full_obs, full_reward, full_end, _, _ = full.step(action)
        masked_obs, masked_reward, masked_end, _, _ = masked.step(action)
        assert (masked_reward, masked_end) == (full_reward, full_end)
        if full_end:
            break


def play_cue_recall(env, policy, episodes):
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        seen, total, ended = [obs], 0.0, False
        while not ended:
            obs, reward, ended, truncated, _ = env.step(policy(seen))
            assert not truncated
            seen.append(obs)
            total += reward
        returns.append(total)
    return returns


@pytest.mark.unit
def test_cue_recall_pays_a_policy_with_memory_1_and_one_without_1_over_cues():
    env = make_env("cue_recall?cues=3&delay=4")
    remembered = play_cue_recall(env, lambda seen: int(np.argmax(seen[0][:3])), 300)
    assert remembered == [1.0] * 300
    # Without memory the question looks the same every episode: one fixed answer is the
    # best a memoryless policy can do, right once in `cues` episodes on average.
    fixed = play_cue_recall(env, lambda seen: 0, 300)
    assert set(fixed) <= {0.0, 1.0}
    assert abs(np.mean(fixed) - 1 / 3) < 0.08


@pytest.mark.unit
def test_cue_recall_shows_the_cue_then_nothing_then_the_question():
    env = make_env("cue_recall?cues=2&delay=2")
    obs, _ = env.reset(seed=1)
    cue = int(np.argmax(obs[:2]))
    assert obs[cue] == 1.0 and obs.sum() == 1.0
    seen, rewards = [], []
    for _ in range(4):  # delay + 1 steps to the question; the answer ends the episode
        obs, reward, ended, _, _ = env.step(cue)
        seen.append(obs)
        rewards.append(reward)
    np.testing.assert_array_equal(seen[0], [0, 0, 0])
    np.testing.assert_array_equal(seen[1], [0, 0, 0])
    np.testing.assert_array_equal(seen[2], [0, 0, 1])  # the question
    assert rewards == [0.0, 0.0, 0.0, 1.0] and ended


@pytest.mark.unit
def test_cue_recall_refuses_fewer_than_two_cues_in_one_line():
    with pytest.raises(HParamsError, match="cue_recall needs cues >= 2"):
        make_raw_env("cue_recall?cues=1")
