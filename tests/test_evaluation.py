"""Evaluation on envs of its own: watched copies step exactly like unwatched ones."""

import numpy as np
import pytest

from rl.envs import make_vec_env
from rl.evaluation import EvalEnvs, Evaluator

pytestmark = pytest.mark.unit


def random_act(obs, rng):
    """A policy that draws from the evaluation's stream: results depend on it."""
    return rng.integers(0, 2, len(obs))


@pytest.mark.parametrize("watched", [0, 1, 3])
def test_eval_envs_step_like_one_vector_env_of_all_copies(watched):
    """Copy i is reset with seed + i whichever group it is in, so recording one
    episode changes no evaluation result."""
    reference = make_vec_env("CartPole-v1", 3)
    envs = EvalEnvs("CartPole-v1", 3, watched)
    expected, _ = reference.reset(seed=11)
    np.testing.assert_array_equal(envs.reset(seed=11), expected)
    actions = np.random.default_rng(0).integers(0, 2, (40, 3))
    for step_actions in actions:  # 40 steps: some copies end and restart
        want = reference.step(step_actions)[:4]
        got = envs.step(step_actions)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)
    frames = envs.frames()
    assert len(frames) == watched
    assert all(f.shape == (400, 600, 3) and f.dtype == np.uint8 for f in frames)
    assert envs.fps() == 50  # CartPole's render_fps
    reference.close()
    envs.close()


def test_recording_changes_no_result_and_writes_the_first_episode(tmp_path):
    evaluator = Evaluator("CartPole-v1", seed=3, act=random_act)
    plain, no_gif = evaluator.evaluate(step=64, episodes=3)
    recorded, gif = evaluator.evaluate(
        step=64, episodes=3, record=1, videos_dir=str(tmp_path), video_name="x"
    )
    assert no_gif is None and "videos" not in plain
    assert recorded.pop("videos") == [str(tmp_path / "x_ep0.mp4"), str(tmp_path / "x_ep0.gif")]
    assert recorded == plain
    assert gif.data.startswith(b"GIF89a") and (gif.width, gif.height) == (300, 200)
    later, _ = evaluator.evaluate(step=128, episodes=3)
    assert later["returns"] != plain["returns"]  # another step: other streams
    evaluator.close()
