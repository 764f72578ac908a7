"""The seams: actor and learner, spaces and policy heads, gradient steps, policy artefacts."""

import json
import os

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401
from rl.agents.actor import Actor, PolicySnapshot
from rl.agents.base import Agent, act_and_observe
from rl.agents.dqn import DQNLearner
from rl.agents.learner import run_gradient_steps
from rl.agents.optimizers import FusedAdam, build_optimizer
from rl.envs import make_vec_env
from rl.experiment import Experiment
from rl.hparams.a2c import a2c_base
from rl.hparams.ppo import ppo_base
from rl.policy import PolicyArtefactError, load_policy, policy_steps, read_artefact


def build(name, **changes):
    hp = registry.hparams.get(name)().replace(**changes)
    envs = make_vec_env(hp.env, hp.num_envs)
    return Agent(hp, envs.single_observation_space, envs.single_action_space), envs


def fill_rollout(agent, envs, shift=0.0):
    """Steps until the PPO rollout is full; the recorded log-probs are moved by ``shift``."""
    obs, _ = envs.reset(seed=0)
    while not agent.learner.memory.full:
        actions, extras = agent.actor.act(obs)
        next_obs, rewards, terminated, truncated, _ = envs.step(agent.actor.to_env(actions))
        agent.learner.observe(
            obs=obs,
            actions=actions,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            next_obs=next_obs,
            log_prob=extras["log_prob"] + shift,
        )
        obs = next_obs


@pytest.mark.unit
def test_ppo_learns_from_the_log_probs_its_actors_recorded():
    # With a learning rate too small to move the policy, the ratio is exactly
    # pi / recorded: recorded log-probs 1 nat too low make every ratio e > 1.2.
    for shift, clipped in ((0.0, 0.0), (-1.0, 1.0)):
        agent, envs = build("ppo_tiny", learning_rate=1e-12, anneal_learning_rate=False)
        fill_rollout(agent, envs, shift)
        metrics = agent.learner.update()
        assert metrics["clip_fraction"] == pytest.approx(clipped), shift
        envs.close()


@pytest.mark.unit
def test_the_learner_publishes_versioned_weights_and_actors_act_on_what_they_loaded():
    agent, envs = build("ppo_tiny")
    first = agent.learner.publish()
    assert first.version == 0
    stale = agent.make_actor(np.random.default_rng(0), explore=False)
    fill_rollout(agent, envs)
    agent.learner.update()
    new = agent.learner.publish()
    assert new.version == 1 and stale.version == 0
    obs = np.random.default_rng(1).normal(size=(256, 4)).astype(np.float32)
    before = stale.act(obs)[0]
    stale.load(new)
    assert stale.version == 1
    assert (stale.act(obs)[0] != before).any()  # the new weights choose otherwise somewhere
    replay = Actor(agent.model, registry.act_select.get("greedy"), np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="load a PolicySnapshot first"):
        replay.act(obs)
    replay.load(PolicySnapshot(7, new.arrays))
    np.testing.assert_array_equal(replay.act(obs)[0], stale.act(obs)[0])
    envs.close()


@pytest.mark.unit
def test_an_actor_refuses_rules_that_do_not_act_on_its_model_and_unknown_extras():
    agent, envs = build("ppo_tiny")
    with pytest.raises(ValueError, match="acts on q_values, but the model gives distribution"):
        Actor(agent.model, registry.act_select.get("epsilon_greedy"), np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown actor extras"):
        Actor(agent.model, registry.act_select.get("sample"), np.random.default_rng(0), ["value"])
    envs.close()


@pytest.mark.unit
def test_exploration_is_a_function_of_the_step_the_actor_is_given():
    hp = registry.hparams.get("dqn_tiny")()
    assert DQNLearner.exploration(hp, 0) == hp.epsilon_start
    assert DQNLearner.exploration(hp, hp.epsilon_decay_steps * 10) == hp.epsilon_end
    agent, envs = build("dqn_tiny")
    obs = np.zeros((4000, 4), np.float32)
    greedy = agent.make_actor(np.random.default_rng(0), explore=False).act(obs)[0]
    at_start = agent.actor.act(obs, step=0)[0]
    late = agent.actor.act(obs, step=10**9)[0]
    # epsilon 1: uniform over 2 actions, half agree with greedy; epsilon_end: nearly all.
    assert abs((at_start == greedy).mean() - 0.5) < 0.05
    assert (late == greedy).mean() == pytest.approx(1 - hp.epsilon_end / 2, abs=0.02)
    envs.close()


@pytest.mark.unit
def test_run_gradient_steps_runs_each_step_once_and_averages():
    counter = tf.Variable(0)

    @tf.function(autograph=False)
    def run(count):
        def step(i):
            counter.assign_add(1)
            return {"index": tf.cast(i, tf.float32)}

        return run_gradient_steps(count, step, ["index"])

    assert float(run(tf.constant(5))["index"]) == pytest.approx(2.0)  # (0+1+2+3+4)/5
    assert int(counter.numpy()) == 5


@pytest.mark.unit
@pytest.mark.parametrize("gradient", [1e-7, 1e-5, 1e-3, 1e-1, 10.0])
def test_rmsprop_steps_as_pytorchs_with_epsilon_added_to_the_root(gradient):
    # Stable-Baselines3's A2C: PyTorch's RMSprop, decay 0.99, epsilon 1e-5 added to the
    # root. Its first step from v = 0 is lr g / (sqrt(0.01 g^2) + 1e-5).
    learning_rate = 1e-3
    torch_step = learning_rate * gradient / (0.1 * gradient + 1e-5)
    weight = tf.Variable([0.0])
    optimizer = build_optimizer(a2c_base(), learning_rate)  # RMSprop, rmsprop_epsilon's default
    optimizer.apply_gradients([(tf.constant([gradient]), weight)])
    step = -float(weight.numpy()[0])
    # sqrt(a^2 + b^2) <= a + b <= sqrt(2) sqrt(a^2 + b^2): never smaller, at most sqrt(2) larger.
    assert torch_step * (1 - 1e-5) <= step <= torch_step * 2**0.5 * (1 + 1e-5)


def _adam_steps(optimizer, weights, gradients, compiled):
    def step(grads):
        optimizer.apply_gradients(zip(grads, weights))

    step = tf.function(step) if compiled else step
    for grads in gradients:
        step([tf.constant(g) for g in grads])
    return [w.numpy() for w in weights]


@pytest.mark.unit
@pytest.mark.parametrize("compiled", [False, True])
def test_fused_adam_takes_keras_adams_steps(compiled):
    rng = np.random.default_rng(0)
    shapes = [(3, 2), (2,)]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    # Gradients over five orders of magnitude, and one of zeros.
    gradients = [
        [(rng.standard_normal(s) * scale).astype(np.float32) for s in shapes]
        for scale in (1e-3, 1.0, 100.0, 0.0, 0.5)
    ]
    stepped = {}
    for name, optimizer in (
        ("keras", keras.optimizers.Adam(learning_rate=0.01)),
        ("fused", build_optimizer(ppo_base(), 0.01)),
    ):
        weights = [tf.Variable(w) for w in start]
        optimizer.build(weights)
        stepped[name] = _adam_steps(optimizer, weights, gradients, compiled)
        assert int(optimizer.iterations.numpy()) == len(gradients)
    assert isinstance(optimizer, FusedAdam)
    for fused, plain, first in zip(stepped["fused"], stepped["keras"], start):
        np.testing.assert_allclose(fused, plain, rtol=1e-6, atol=1e-7)
        assert not np.allclose(fused, first)  # the steps moved the weights


@pytest.mark.unit
def test_fused_adam_resumes_keras_adams_checkpoint_and_skips_unreached_variables(tmp_path):
    # Runs saved before FusedAdam (Keras's Adam) resume with their moments.
    rng = np.random.default_rng(1)
    start = rng.standard_normal((4,)).astype(np.float32)
    gradients = [[rng.standard_normal(4).astype(np.float32)] for _ in range(3)]
    weight = tf.Variable(start)
    plain = keras.optimizers.Adam(learning_rate=0.01)
    plain.build([weight])
    _adam_steps(plain, [weight], gradients[:2], compiled=False)
    path = tf.train.Checkpoint(optimizer=plain, weight=weight).write(str(tmp_path / "ckpt"))
    _adam_steps(plain, [weight], gradients[2:], compiled=False)

    resumed_weight = tf.Variable(np.zeros(4, np.float32))
    fused = build_optimizer(ppo_base(), 0.01)
    fused.build([resumed_weight])
    tf.train.Checkpoint(optimizer=fused, weight=resumed_weight).read(path).assert_consumed()
    assert int(fused.iterations.numpy()) == 2
    _adam_steps(fused, [resumed_weight], gradients[2:], compiled=False)
    np.testing.assert_allclose(resumed_weight.numpy(), weight.numpy(), rtol=1e-6)

    untouched = tf.Variable([1.0, 2.0])
    fused_two = build_optimizer(ppo_base(), 0.01)
    fused_two.build([resumed_weight, untouched])
    fused_two.apply_gradients([(tf.ones(4), resumed_weight), (None, untouched)])
    assert untouched.numpy().tolist() == [1.0, 2.0]


@pytest.mark.slow
def test_gaussian_ppo_acts_stores_and_learns_float_actions_in_the_box():
    agent, envs = build("ppo_pendulum", num_envs=2, rollout_steps=8, num_minibatches=2)
    obs, _ = envs.reset(seed=0)
    actions, extras = agent.actor.act(obs)
    assert actions.dtype == np.float32 and actions.shape == (2, 1)
    assert extras["log_prob"].shape == (2,)
    fill_rollout(agent, envs)
    assert agent.learner.memory.data()["actions"].shape == (8, 2, 1)
    metrics = agent.learner.update()
    assert np.isfinite(metrics["loss"])
    single = agent.compute_action(obs[0])
    assert single.shape == (1,) and -2.0 <= single[0] <= 2.0
    far = agent.compute_action(np.full((3, 3), 50.0, np.float32), explore=True)
    assert far.shape == (3, 1) and (np.abs(far) <= 2.0).all()
    envs.close()


@pytest.mark.slow
def test_tanh_gaussian_head_is_chosen_for_a_bounded_box_and_learns_finitely():
    agent, envs = build(
        "ppo_pendulum",
        num_envs=2,
        rollout_steps=8,
        num_minibatches=2,
        action_distribution="auto",
    )
    assert agent.model.head.kind == "tanh_gaussian"
    fill_rollout(agent, envs)
    assert np.isfinite(agent.learner.update()["loss"])
    envs.close()


@pytest.mark.slow
def test_every_checkpoint_writes_a_policy_artefact_that_loads_alone(tmp_path):
    out = tmp_path / "run"
    exp = Experiment("ppo_tiny", str(out), verbose=False)
    exp.train()
    assert policy_steps(str(out)) == [128, 256]
    path = out / "policies" / "ckpt-256"
    meta = json.loads((path / "policy.json").read_text())
    assert meta["step"] == 256 and meta["hparams"]["agent"] == "ppo"
    actor = load_policy(str(path))
    obs = np.random.default_rng(2).normal(size=(9, 4)).astype(np.float32)
    np.testing.assert_array_equal(actor.act(obs)[0], exp.agent.compute_action(obs))
    loaded = tf.saved_model.load(str(path / "saved_model"))
    np.testing.assert_array_equal(loaded(tf.constant(obs)).numpy(), exp.agent.compute_action(obs))
    # No optimizer slots or critic in it: only the acting weights.
    assert len(read_artefact(str(path))["arrays"]) == len(exp.agent.model.acting_variables())
    # Each SavedModel holds its own checkpoint's weights (one traced module exports all):
    # on 2,000 observations, ckpt-128's acts as its weights.npz does, and not as ckpt-256.
    many = np.random.default_rng(2).normal(size=(2000, 4)).astype(np.float32)
    earlier = out / "policies" / "ckpt-128"
    earlier_actions = tf.saved_model.load(str(earlier / "saved_model"))(tf.constant(many))
    np.testing.assert_array_equal(earlier_actions.numpy(), load_policy(str(earlier)).act(many)[0])
    assert np.any(earlier_actions.numpy() != loaded(tf.constant(many)).numpy())
    exp.close()
    os.remove(path / "weights.npz")
    with pytest.raises(PolicyArtefactError, match="weights.npz is missing"):
        load_policy(str(path))


@pytest.mark.unit
@pytest.mark.parametrize("keep", [0.5, 0.9])  # a cut zip directory, a cut array
def test_a_torn_weights_file_is_a_policy_artefact_error(tmp_path, keep):
    (tmp_path / "policy.json").write_text('{"hparams": {}}')
    np.savez(tmp_path / "weights.npz", np.zeros((64, 64), np.float32))
    data = (tmp_path / "weights.npz").read_bytes()
    (tmp_path / "weights.npz").write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(PolicyArtefactError, match="cannot read the policy artefact"):
        read_artefact(str(tmp_path))  # was zipfile.BadZipFile: a traceback in rl.tournament


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory):
    """A finished dqn_tiny run (checkpoints 128 and 256, replay kept with them) whose
    epsilon goes 1 -> 0 over 512 steps: 0.75 at the step-128 artefact, 0.5 at step 256.
    Read-only."""
    out = tmp_path_factory.mktemp("dqn") / "run"
    overrides = "epsilon_start=1.0,epsilon_end=0.0,epsilon_decay_steps=512"
    exp = Experiment("dqn_tiny", str(out), overrides=overrides, verbose=False)
    exp.train()
    exp.close()
    return out


@pytest.mark.slow
def test_an_exploring_artefact_acts_at_its_own_steps_epsilon(dqn_run):
    out = dqn_run
    early = load_policy(str(out / "policies" / "ckpt-128"), explore=True)
    late = load_policy(str(out / "policies" / "ckpt-256"), explore=True)
    evaluating = load_policy(str(out / "policies" / "ckpt-256"))
    # Held at the artefact's step, whatever step act() is given.
    assert [early.exploration(s) for s in (0, 10**6)] == [0.75, 0.75]
    assert late.exploration(0) == 0.5 and evaluating.exploration(0) == 0.0
    obs = np.random.default_rng(3).normal(size=(4000, 4)).astype(np.float32)
    greedy = evaluating.act(obs)[0]
    # A uniform action differs from the greedy one half the time on CartPole's 2.
    changed = np.mean(late.act(obs)[0] != greedy)
    assert 0.22 < changed < 0.28


@pytest.mark.slow
def test_an_exploring_ddpg_artefact_adds_its_runs_noise_process(tmp_path):
    out = tmp_path / "run"
    exp = Experiment(
        "ddpg_tiny", str(out), overrides="noise_process=ornstein_uhlenbeck", verbose=False
    )
    exp.train()
    exp.close()
    path = str(out / "policies" / f"ckpt-{policy_steps(str(out))[-1]}")
    assert load_policy(path, explore=True).action_noise is not None
    assert load_policy(path).action_noise is None


@pytest.mark.slow
def test_artefacts_of_redone_training_move_aside(tmp_path, capsys):
    out = tmp_path / "run"
    exp = Experiment("ppo_tiny", str(out), overrides="checkpoint_interval=64", verbose=False)
    exp.train()
    exp.close()
    for data in (out / "checkpoints").glob("ckpt-256.data-*"):
        data.write_bytes(b"garbage")
    (out / "policies" / "ckpt-300.partial").mkdir()  # a kill while writing one
    again = Experiment("ppo_tiny", str(out), overrides="checkpoint_interval=64", verbose=False)
    assert again.step == 192
    assert (out / "policies" / "superseded" / "ckpt-256" / "weights.npz").exists()
    assert not (out / "policies" / "ckpt-300.partial").exists()
    assert f"the policy ckpt-256 to {out / 'policies' / 'superseded'}" in capsys.readouterr().err
    again.train()
    assert policy_steps(str(out)) == [64, 128, 192, 256]
    again.close()


@pytest.mark.unit
def test_observation_dtypes_follow_the_space():
    from rl.memory.spec import transition_specs

    image = gym.spaces.Box(0, 255, (40, 40, 1), np.uint8)
    specs = transition_specs(image, gym.spaces.Discrete(3), {"log_prob": (np.float32, ())})
    assert specs["obs"].dtype == np.uint8 and specs["obs"].shape == (40, 40, 1)
    assert specs["log_prob"].shape == ()
    box = transition_specs(gym.spaces.Box(-1, 1, (3,), np.float64), gym.spaces.Box(-1, 1, (2,)))
    assert box["obs"].dtype == np.float32 and box["actions"].shape == (2,)
    multi = transition_specs(gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiDiscrete([2, 3]))
    assert multi["actions"].dtype == np.int32 and multi["actions"].shape == (2,)


@pytest.mark.slow
def test_without_checkpoint_replay_a_run_resumes_and_refills_its_replay(tmp_path):
    out = tmp_path / "run"
    overrides = "checkpoint_replay=false,learning_starts=64"
    exp = Experiment("dqn_tiny", str(out), overrides=overrides, train_steps=128, verbose=False)
    exp.train()
    exp.close()
    assert not list((out / "checkpoints").glob("replay-*"))
    again = Experiment("dqn_tiny", str(out), overrides=overrides, verbose=False)
    assert again.step == 128 and len(again.agent.learner.memory.replay) == 0
    updates = again.agent.learner.counters["updates"]
    result = again.train()
    assert result["step"] == 256 and np.isfinite(result["loss"])
    # No update until learning_starts transitions are back (step 192), then every
    # 16 steps: 192, 208, 224, 240, 256.
    assert again.agent.learner.counters["updates"] - updates == 5
    again.close()


@pytest.mark.slow
def test_with_checkpoint_replay_the_replay_file_sits_beside_each_checkpoint(dqn_run):
    names = sorted(p.name for p in (dqn_run / "checkpoints").glob("replay-*"))
    assert names == ["replay-128.npz", "replay-256.npz"]


@pytest.mark.slow
@pytest.mark.parametrize("name, memory", [("ppo_tiny", "buffer"), ("dqn_tiny", "replay")])
def test_a_nature_cnn_learns_from_uint8_images_kept_as_bytes(name, memory):
    changes = {"learning_starts": 0} if name == "dqn_tiny" else {}
    agent, envs = build(
        name, env="catch", torso="nature_cnn", host_acting=False, num_envs=2, **changes
    )
    obs, _ = envs.reset(seed=0)
    assert obs.dtype == np.uint8 and obs.shape == (2, 40, 40, 1)
    learner = agent.learner
    assert getattr(learner.memory, memory).specs["obs"].dtype == np.uint8
    before = [v.numpy().copy() for v in learner.model.trainable_variables]
    metrics = None
    for _ in range(64):
        obs, _ = act_and_observe(agent.actor, learner, envs, obs, agent.env_steps)
        metrics = learner.update() or metrics
    assert metrics is not None and np.isfinite(metrics["loss"])
    after = learner.model.trainable_variables
    assert any((a != b.numpy()).any() for a, b in zip(before, after))
    envs.close()


@pytest.mark.unit
def test_host_acting_with_a_cnn_is_refused_with_what_to_set():
    with pytest.raises(ValueError, match="with torso=nature_cnn set host_acting=false"):
        build("ppo_tiny", env="catch", torso="nature_cnn")


class _LifeLosingEnvs:
    """Two CartPole-shaped env copies whose second step costs copy 0 a life (as Atari's
    info says it); no episode ends."""

    def __init__(self):
        self.t = 0

    def step(self, actions):
        self.t += 1
        info = {"life_lost": np.array([self.t == 2, False]), "_life_lost": np.ones(2, bool)}
        zeros = np.zeros((2, 4), np.float32)
        return zeros, np.ones(2, np.float32), np.zeros(2, bool), np.zeros(2, bool), info


def _act_with_lost_lives(hparams, life_loss_terminal):
    agent, envs = build(hparams, num_envs=2, life_loss_terminal=life_loss_terminal)
    envs.close()
    lives = _LifeLosingEnvs()
    obs = np.zeros((2, 4), np.float32)
    for _ in range(3):
        obs, _ = act_and_observe(agent.actor, agent.learner, lives, obs, 0)
    return agent.learner


@pytest.mark.unit
@pytest.mark.parametrize("life_loss_terminal", [False, True])
def test_a_lost_life_ends_an_episode_for_learning_only_when_asked(life_loss_terminal):
    stored = _act_with_lost_lives("ppo_tiny", life_loss_terminal).memory.data()
    assert "life_lost" not in stored  # read by the learner, not kept
    expected = [[False, False], [life_loss_terminal, False], [False, False]]
    np.testing.assert_array_equal(stored["terminated"][:3], expected)


@pytest.mark.unit
@pytest.mark.parametrize("life_loss_terminal", [False, True])
def test_dqn_replays_a_lost_life_as_terminal_and_its_episode_as_going_on(life_loss_terminal):
    replay = _act_with_lost_lives("dqn_tiny", life_loss_terminal).memory.replay
    assert "life_lost" not in replay.fields
    # Each env's transitions sit in slots 0, 1, 2 of its ring.
    expected = [[False, False], [life_loss_terminal, False], [False, False]]
    np.testing.assert_array_equal(replay.fields["terminated"][:, :3].T, expected)
    # One first frame and one frame a step: the stream did not restart at the lost life.
    assert replay.count.tolist() == [4, 4]
    assert replay.episode_start[:, :4].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0]]


def _until_first_update(agent, envs):
    """Acts and observes, as the training loop does, until the first update; its metrics."""
    obs, _ = envs.reset(seed=0)
    step = 0
    while True:
        obs, _ = act_and_observe(agent.actor, agent.learner, envs, obs, step)
        step += envs.num_envs
        metrics = agent.learner.update()
        if metrics is not None:
            return metrics


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["ppo_tiny", "impala_tiny", "dqn_tiny", "rainbow_tiny", "sac_tiny"]
)
def test_warm_up_compiles_the_update_the_first_batch_uses_and_learns_nothing(name):
    agent, envs = build(name)
    cold = _until_first_update(agent, envs)
    cold_weights = [v.numpy() for v in agent.learner.trainable_variables]
    envs.close()

    agent, envs = build(name)
    before = [v.numpy() for v in agent.learner.trainable_variables]
    agent.learner.warm_up()
    update = agent.learner._compiled_update
    assert update.experimental_get_tracing_count() == 1
    # Tracing ran nothing: no weight moved, no update was counted.
    for a, b in zip(before, agent.learner.trainable_variables):
        np.testing.assert_array_equal(a, b.numpy())
    assert agent.learner.counters["updates"] == 0
    warm = _until_first_update(agent, envs)
    # The first batch used that trace, and learned exactly what a cold learner learns.
    assert update.experimental_get_tracing_count() == 1
    assert warm == cold
    for a, b in zip(cold_weights, agent.learner.trainable_variables):
        np.testing.assert_array_equal(a, b.numpy())
    envs.close()
