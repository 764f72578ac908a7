"""The Catch image env: spaces, known trajectories, seeding, rendering, Gymnasium's checker."""

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.envs import check_env_name
from rl.envs.catch import LEFT, RIGHT, STAY, Catch, draw

pytestmark = pytest.mark.unit

SEED_BALL_IN_COLUMN_4 = 0  # seeds pinned from Gymnasium's np_random (PCG64)
SEED_BALL_IN_COLUMN_0 = 11


def run_episode(env, seed, actions):
    """Rewards and terminated flags of ``actions`` after a seeded reset."""
    env.reset(seed=seed)
    rewards, ends = [], []
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        assert truncated is False
        rewards.append(reward)
        ends.append(terminated)
    return rewards, ends


def test_registered_constructor_gives_uint8_images_and_three_actions():
    check_env_name("catch")  # accepted as --env
    env = registry.envs.get("catch")(render_mode=None)
    assert isinstance(env, Catch)
    assert env.observation_space.shape == (40, 40, 1)
    assert env.observation_space.dtype == np.uint8
    assert (env.observation_space.low == 0).all() and (env.observation_space.high == 255).all()
    assert env.action_space.n == 3
    obs, info = env.reset(seed=0)
    assert obs.dtype == np.uint8 and obs.shape == (40, 40, 1) and info == {}
    assert env.observation_space.contains(obs)


def test_seeded_reset_places_the_ball_and_the_paddle():
    env = Catch()
    obs, _ = env.reset(seed=SEED_BALL_IN_COLUMN_4)
    expected = np.zeros((40, 40), dtype=np.uint8)
    expected[0:4, 32:40] = 255  # ball: row 0, column 4 (pixels 4*0.., 8*4..)
    expected[36:40, 16:24] = 255  # paddle: row 9, column 2 (the middle)
    np.testing.assert_array_equal(obs[:, :, 0], expected)
    obs, _ = env.reset(seed=SEED_BALL_IN_COLUMN_0)
    assert (obs[0:4, 0:8] == 255).all() and obs[0:4, 8:].sum() == 0


def test_each_column_is_a_possible_start():
    env = Catch()
    env.reset(seed=123)
    columns = {int(np.flatnonzero(env.reset()[0][0, :, 0])[0]) // 8 for _ in range(200)}
    assert columns == {0, 1, 2, 3, 4}


def test_moving_under_the_ball_catches_it_on_the_ninth_step():
    # Ball in column 4, paddle in column 2: two steps right, then wait.
    rewards, ends = run_episode(Catch(), SEED_BALL_IN_COLUMN_4, [RIGHT, RIGHT] + [STAY] * 7)
    assert rewards == [0.0] * 8 + [1.0]
    assert ends == [False] * 8 + [True]


def test_moving_away_misses_and_the_paddle_stops_at_the_wall():
    env = Catch()
    rewards, ends = run_episode(env, SEED_BALL_IN_COLUMN_4, [LEFT] * 9)
    assert rewards == [0.0] * 8 + [-1.0]
    assert ends == [False] * 8 + [True]
    # Ball in column 0: pressing left from column 2 reaches 0 and stays there.
    rewards, _ = run_episode(env, SEED_BALL_IN_COLUMN_0, [LEFT] * 9)
    assert rewards[-1] == 1.0


def test_staying_in_the_middle_misses_a_ball_at_the_side():
    rewards, ends = run_episode(Catch(), SEED_BALL_IN_COLUMN_0, [STAY] * 9)
    assert rewards[-1] == -1.0 and ends[-1] is True


def test_last_observation_shows_ball_on_the_paddle():
    env = Catch()
    env.reset(seed=SEED_BALL_IN_COLUMN_4)
    for action in [RIGHT, RIGHT] + [STAY] * 7:
        obs, *_ = env.step(action)
    np.testing.assert_array_equal(obs, draw(9, 4, 4))
    assert obs.sum() == 4 * 8 * 255  # ball and paddle share one cell


def test_same_seed_same_episode_and_fresh_arrays():
    a, b = Catch(), Catch()
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    np.testing.assert_array_equal(obs_a, obs_b)
    step_a = a.step(RIGHT)[0]
    np.testing.assert_array_equal(step_a, b.step(RIGHT)[0])
    assert step_a is not obs_a and not np.array_equal(step_a, obs_a)


@pytest.mark.parametrize("action", [3, -1, 1.5])
def test_an_action_outside_the_space_is_refused(action):
    env = Catch()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="not in Discrete"):
        env.step(action)


def test_rgb_array_frames_are_the_image_scaled_up_on_three_channels():
    env = registry.envs.get("catch")(render_mode="rgb_array")
    obs, _ = env.reset(seed=SEED_BALL_IN_COLUMN_4)
    frame = env.render()
    assert frame.shape == (160, 160, 3) and frame.dtype == np.uint8
    for channel in range(3):
        np.testing.assert_array_equal(frame[::4, ::4, channel], obs[:, :, 0])
    assert (frame[0:16, 128:160] == 255).all()  # the ball's cell, 4 times larger
    assert Catch.metadata["render_fps"] > 0
    assert Catch(render_mode=None).render() is None
    with pytest.raises(ValueError, match="render_mode 'human'"):
        Catch(render_mode="human")


@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
def test_gymnasium_env_checker_passes(render_mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Catch is built directly, not by gym.make, so it has no spec for
        # the checker to make copies in other render modes from.
        warnings.filterwarnings("ignore", message=".*not having a spec")
        check_env(Catch(render_mode=render_mode))
