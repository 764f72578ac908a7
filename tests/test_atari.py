"""Atari games: the Machado et al. (2018) preprocessing, frame stacks into the Nature CNN,
frames stored once in replay, and a short run through train.py."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rl import catalog, registry  # noqa: F401  (catalog: every registry complete)
from rl.envs import atari, make_env, make_vec_env
from rl.hparams.base import HParamsError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ale_py") is None, reason="needs ale-py: pip install -e '.[atari]'"
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wrappers(env):
    found = {}
    while hasattr(env, "env"):
        found[type(env).__name__] = env
        env = env.env
    return found, env


@pytest.mark.unit
def test_an_ale_id_gets_sticky_actions_skips_gray_84x84_and_a_stack_of_four():
    env = make_env("ALE/Pong-v5")
    assert env.observation_space.shape == (4, 84, 84)
    assert env.observation_space.dtype == np.uint8
    found, game = wrappers(env)
    assert game.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    assert game._frameskip == 1  # the preprocessing skips (and max-pools) instead
    preprocessing = found["AtariPreprocessing"]
    assert (preprocessing.frame_skip, preprocessing.noop_max) == (4, 30)
    assert preprocessing.terminal_on_life_loss is False
    assert env.action_space.n == 6  # Pong's minimal set, not the full 18
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    env.close()


@pytest.mark.unit
def test_each_lost_life_but_the_last_is_flagged_and_the_game_goes_on():
    env = make_env("ALE/Breakout-v5")
    _, info = env.reset(seed=0)
    assert info["lives"] == 5 and info["life_lost"] is False
    rng = np.random.default_rng(0)
    flagged_at_lives = []
    for _ in range(20_000):  # random play loses Breakout's 5 balls in a few hundred steps
        _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        if info["life_lost"]:
            flagged_at_lives.append(info["lives"])
        if terminated or truncated:
            break
    assert terminated and info["lives"] == 0 and not info["life_lost"]  # the game's end
    assert flagged_at_lives == [4, 3, 2, 1]
    env.close()
    envs = make_vec_env("ALE/Breakout-v5", 2)  # what act_and_observe reads
    envs.reset(seed=0)
    info = envs.step(np.zeros(2, np.int64))[-1]
    assert info["life_lost"].dtype == bool and info["_life_lost"].all()
    envs.close()


@pytest.mark.unit
def test_life_loss_terminal_is_refused_for_an_env_without_lives():
    from rl.hparams.resolve import validate_hparams

    hp = registry.hparams.get("ppo_tiny")().replace(life_loss_terminal=True)
    with pytest.raises(HParamsError, match="'life_loss_terminal' needs an Atari game"):
        validate_hparams(hp)
    validate_hparams(hp.replace(env="ALE/Breakout-v5"))


@pytest.mark.unit
def test_without_ale_py_an_atari_id_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(atari, "installed", lambda: False)
    with pytest.raises(HParamsError, match=r"ale-py is not installed: pip install -e '.\[atari\]'"):
        make_env("ALE/Pong-v5")


@pytest.mark.unit
def test_the_nature_cnn_reads_a_frame_stack_as_channels():
    import tensorflow as tf

    from rl.models.networks import NatureCNN

    frames_first = NatureCNN((4, 84, 84), 6, 1.0, seed=3)
    channels_last = NatureCNN((84, 84, 4), 6, 1.0, seed=3)
    x = np.random.default_rng(0).integers(0, 256, (2, 4, 84, 84), dtype=np.uint8)
    np.testing.assert_allclose(
        frames_first(tf.constant(x)).numpy(),
        channels_last(tf.constant(x.transpose(0, 2, 3, 1))).numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.unit
def test_dqn_stores_each_atari_frame_once():
    env = make_env("ALE/Pong-v5")
    hp = registry.hparams.get("dqn_atari")().replace(env="ALE/Pong-v5", buffer_size=1_000)
    learner = registry.agents.get("dqn")(hp, env.observation_space, env.action_space)
    assert learner.memory.replay.frame_stack == 4
    assert learner.memory.replay.frames.shape[2:] == (84, 84)  # one frame per slot, not four
    env.close()


@pytest.mark.unit
def test_frame_stack_1_gives_one_frame_per_observation_to_the_cnn_and_replay():
    import tensorflow as tf

    from rl.models.networks import NatureCNN

    env = make_env("ALE/Pong-v5?frame_stack=1")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == obs.shape == (1, 84, 84)
    np.testing.assert_array_equal(obs[0], make_env("ALE/Pong-v5").reset(seed=0)[0][-1])
    assert NatureCNN((1, 84, 84), 6, 1.0, seed=3)(tf.constant(obs[None])).shape == (1, 6)
    hp = registry.hparams.get("dqn_atari")().replace(
        env="ALE/Pong-v5?frame_stack=1", buffer_size=1_000
    )
    learner = registry.agents.get("dqn")(hp, env.observation_space, env.action_space)
    assert learner.memory.replay.frame_stack == 1
    env.close()


@pytest.mark.unit
@pytest.mark.parametrize(
    "name, refused",
    [
        ("ALE/Pong-v5?frame_stack=0", "'frame_stack' takes an integer in [1, 16], got 0"),
        (
            "ALE/Pong-v5?frameskip=2",
            "takes no keyword argument 'frameskip': an Atari id takes only frame_stack",
        ),
    ],
)
def test_an_atari_id_takes_only_a_frame_stack_of_1_to_16(name, refused):
    with pytest.raises(HParamsError) as error:
        make_env(name)
    assert refused in str(error.value)


@pytest.mark.process
def test_train_py_runs_dqn_and_ppo_on_an_atari_game(tmp_path):
    for hparams, override in (
        ("dqn_atari", "learning_starts=32,buffer_size=1000,eval_episodes=1,eval_interval=64"),
        ("ppo_atari", "num_envs=2,rollout_steps=32,eval_episodes=1,eval_interval=64"),
    ):
        out = tmp_path / hparams
        proc = subprocess.run(
            [
                sys.executable,
                os.path.join(ROOT, "train.py"),
                "--hparams",
                hparams,
                "--env",
                "ALE/Pong-v5",
                "--train_steps",
                "64",
                "--hparam_override",
                override,
                "--output_dir",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr
        final = json.loads(proc.stdout.splitlines()[-1])
        assert final["step"] == 64 and np.isfinite(final["loss"])
        assert "A.L.E" not in proc.stderr  # no emulator banner per env copy
