"""Agents built from every hparam set; checkpoints restore exactly; smoke runs."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401
from rl.envs import make_vec_env
from rl.experiment import Experiment


@pytest.mark.parametrize("name", registry.hparams.names())
def test_every_hparam_set_builds_its_agent_and_acts(name):
    hp = registry.hparams.get(name)()
    envs = make_vec_env(hp.env, 2)
    agent = registry.agents.get(hp.agent)(hp, envs.single_observation_space,
                                          envs.single_action_space)
    obs, _ = envs.reset(seed=0)
    for explore in (True, False):
        actions = agent.act(obs, explore=explore)
        assert actions.shape == (2,) and envs.single_action_space.contains(int(actions[0]))
    assert len(agent.model.trainable_variables) > 0
    envs.close()


def weights(module):
    return [v.numpy().copy() for v in module.variables]


@pytest.mark.parametrize("hparams", ["ppo_tiny", "dqn_tiny"])
def test_checkpoint_round_trip_restores_everything(tmp_path, hparams):
    out = str(tmp_path / "run")
    first = Experiment(hparams, out, verbose=False)
    first.train()
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    saved_weights = weights(first.agent.model)
    saved_opt = [v.numpy().copy() for v in first.agent.optimizer.variables]
    saved_counters = (first.agent.counters.as_dict(), first.counters.as_dict())
    replay = getattr(first.agent, "replay", None)
    saved_replay = ({k: v[:len(replay)].copy() for k, v in replay.storage.items()}
                    if replay is not None else None)
    expected_actions = [first.agent.act(obs) for _ in range(3)]
    first.close()

    second = Experiment(hparams, out, verbose=False)
    assert second.restored_from.endswith("ckpt-256")
    for a, b in zip(saved_weights, weights(second.agent.model)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(saved_opt, second.agent.optimizer.variables):
        np.testing.assert_array_equal(a, b.numpy())
    assert (second.agent.counters.as_dict(), second.counters.as_dict()) == saved_counters
    # The generator state was restored: the same sampled actions follow.
    for expected in expected_actions:
        np.testing.assert_array_equal(expected, second.agent.act(obs))
    if saved_replay is not None:
        assert len(second.agent.replay) == len(replay)
        for k, v in saved_replay.items():
            np.testing.assert_array_equal(v, second.agent.replay.storage[k][:len(v)])
        for a, b in zip(weights(first.agent.target_model), weights(second.agent.target_model)):
            np.testing.assert_array_equal(a, b)
        assert second.agent.exploration_rate() == first.agent.exploration_rate()
    second.close()


@pytest.mark.parametrize("hparams", ["ppo_tiny", "dqn_tiny"])
def test_tiny_runs_write_every_output(tmp_path, hparams):
    out = tmp_path / "run"
    exp = Experiment(hparams, str(out), verbose=False)
    result = exp.train()
    exp.close()
    assert result["step"] == 256
    for key in ("episode_return_mean", "eval_return_mean", "steps_per_second", "loss"):
        assert np.isfinite(result[key]), key
    lines = [json.loads(l) for l in (out / "eval.jsonl").read_text().splitlines()]
    assert [l["step"] for l in lines] == [128, 256]
    for line in lines:
        assert {"step", "return_mean", "return_std", "episodes", "wall_time"} <= set(line)
        assert line["episodes"] == 2
    assert json.loads((out / "hparams.json").read_text())["agent"] == hparams[:3]
    assert os.listdir(out / "tb")


def test_experiment_train_steps_argument_adds_steps(tmp_path):
    exp = Experiment("ppo_tiny", str(tmp_path / "run"), verbose=False)
    assert exp.train(steps=64)["step"] == 64
    assert exp.train(steps=64)["step"] == 128
    exp.close()


def test_policy_export_matches_agent(tmp_path):
    exp = Experiment("ppo_tiny", str(tmp_path / "run"), verbose=False)
    exp.train(steps=64)
    path = str(tmp_path / "policy")
    exp.agent.policy_module().save(path)
    loaded = tf.saved_model.load(path)
    obs = np.random.default_rng(1).normal(size=(7, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded(tf.constant(obs)).numpy(),
                                  exp.agent.act(obs, explore=False))
    out = loaded.signatures["serving_default"](observations=tf.constant(obs))
    np.testing.assert_array_equal(list(out.values())[0].numpy(),
                                  exp.agent.act(obs, explore=False))
    exp.close()
