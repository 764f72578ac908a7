"""Agents built from every hparam set; checkpoints restore exactly; smoke runs."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from rl import catalog, registry  # noqa: F401
from rl.agents.base import Agent, act_and_observe
from rl.agents.off_policy import ReplayFeed
from rl.envs import make_vec_env
from rl.experiment import Experiment, load


def build(hp, envs):
    return Agent(hp, envs.single_observation_space, envs.single_action_space)


def step_once(agent, envs, obs):
    """One vectorised step through actor, env and learner, as the loop does it."""
    return act_and_observe(agent.actor, agent.learner, envs, obs, agent.env_steps)[0]


@pytest.mark.process
@pytest.mark.parametrize("name", registry.hparams.names())
def test_every_hparam_set_builds_its_agent_and_acts(name):
    hp = registry.hparams.get(name)()
    envs = make_vec_env(hp.env, 2)
    agent = build(hp, envs)
    obs, _ = envs.reset(seed=0)
    for explore in (True, False):
        actor = agent.actor if explore else agent.make_actor(np.random.default_rng(0), False)
        actions = actor.to_env(actor.act(obs, 0)[0])
        assert len(actions) == 2 and all(envs.single_action_space.contains(a) for a in actions)
    assert len(agent.model.trainable_variables) > 0
    envs.close()


def weights(module):
    return [v.numpy().copy() for v in module.variables]


class TinyRun:
    """A tiny set trained once by Experiment (256 steps), and what it held before it closed."""

    def __init__(self, hparams: str, out):
        self.out = out
        first = Experiment(hparams, str(out), verbose=False)
        self.result = first.train()
        self.obs = np.random.default_rng(0).normal(size=(5, *first.agent.obs_shape))
        self.obs = self.obs.astype(np.float32)
        learner = first.agent.learner
        # Loose variables (SAC's temperature) by key.
        self.loose = {
            k: v.numpy()
            for k, v in learner.checkpoint_items().items()
            if isinstance(v, tf.Variable)
        }
        self.weights = weights(learner.model)
        self.optimizers = [k for k in learner.checkpoint_items() if k.endswith("optimizer")]
        self.optimizer_values = [
            v.numpy().copy()
            for k in self.optimizers
            for v in learner.checkpoint_items()[k].variables
        ]
        self.counters = (learner.counters.as_dict(), first.counters.as_dict())
        replay = learner.memory.replay if isinstance(learner.memory, ReplayFeed) else None
        self.replay_size = len(replay) if replay is not None else None
        # Draws from a copy of the state, so the original's next draws stay untouched.
        self.sample = replay.sample((2, 8)).batch if replay is not None else None
        self.target_weights = weights(learner.target_model) if replay is not None else None
        self.actions = [first.agent.actor.act(self.obs, first.step)[0] for _ in range(3)]
        first.close()


def once_per_set(tmp_path_factory, make):
    """``get(hparams)``: ``make(hparams, folder)`` for that set, made at its first call in
    a folder of its own and the same object at every later one."""
    made = {}

    def get(hparams: str):
        if hparams not in made:
            made[hparams] = make(hparams, tmp_path_factory.mktemp(hparams) / "run")
        return made[hparams]

    return get


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """``tiny_runs(hparams)``: that set's TinyRun, trained once for this module's tests
    (the round trip reopens it read-only; the outputs test reads its files)."""
    return once_per_set(tmp_path_factory, TinyRun)


# Every registered fixture set (a run of a few seconds): a new algorithm's `<name>_tiny`
# is tested below once it is registered, with no edit here.
TINY_SETS = [name for name in registry.hparams.names() if name.endswith("_tiny")]


@pytest.mark.unit
def test_every_agent_has_a_tiny_set():
    agents = {registry.hparams.get(name)().agent for name in TINY_SETS}
    missing = sorted(set(registry.agents.names()) - agents)
    assert not missing, f"agents without a registered <name>_tiny set (a test fixture): {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("hparams", TINY_SETS)
def test_checkpoint_round_trip_restores_everything(tiny_runs, hparams):
    first = tiny_runs(hparams)
    second = Experiment(hparams, str(first.out), verbose=False)
    assert second.restored_from.endswith("ckpt-256")
    restored = second.agent.learner
    for a, b in zip(first.weights, weights(restored.model)):
        np.testing.assert_array_equal(a, b)
    restored_opt = [v for k in first.optimizers for v in restored.checkpoint_items()[k].variables]
    assert len(restored_opt) == len(first.optimizer_values)
    for a, b in zip(first.optimizer_values, restored_opt):
        np.testing.assert_array_equal(a, b.numpy())
    assert (restored.counters.as_dict(), second.counters.as_dict()) == first.counters
    for key, value in first.loose.items():
        np.testing.assert_array_equal(value, restored.checkpoint_items()[key].numpy())
    assert second.agent.actor.version == restored.publish().version == first.counters[0]["updates"]
    # The acting stream was restored: the same sampled actions follow.
    for expected in first.actions:
        np.testing.assert_array_equal(expected, second.agent.actor.act(first.obs, second.step)[0])
    if first.sample is not None:
        assert len(restored.memory.replay) == first.replay_size
        for name, value in restored.memory.replay.sample((2, 8)).batch.items():
            np.testing.assert_array_equal(value, first.sample[name])
        for a, b in zip(first.target_weights, weights(restored.target_model)):
            np.testing.assert_array_equal(a, b)
    second.close()


@pytest.mark.slow
@pytest.mark.parametrize("hparams", TINY_SETS)
def test_tiny_runs_write_every_output(tiny_runs, hparams):
    run = tiny_runs(hparams)
    out, result = run.out, run.result
    assert result["step"] == 256
    for key in ("episode_return_mean", "eval_return_mean", "steps_per_second", "loss"):
        assert np.isfinite(result[key]), key
    lines = [json.loads(l) for l in (out / "eval.jsonl").read_text().splitlines()]
    assert [l["step"] for l in lines] == [128, 256]
    for line in lines:
        assert {"step", "return_mean", "return_std", "episodes", "wall_time"} <= set(line)
        assert line["episodes"] == 2
    assert (
        json.loads((out / "hparams.json").read_text())["agent"]
        == registry.hparams.get(hparams)().agent
    )
    assert os.listdir(out / "tb")


@pytest.mark.unit
def test_experiment_train_steps_argument_adds_steps(tmp_path):
    exp = Experiment("ppo_tiny", str(tmp_path / "run"), verbose=False)
    assert exp.train(steps=64)["step"] == 64
    assert exp.train(steps=64)["step"] == 128
    exp.close()


@pytest.mark.unit
def test_policy_export_matches_agent(tmp_path):
    exp = Experiment("ppo_tiny", str(tmp_path / "run"), verbose=False)
    exp.train(steps=64)
    path = str(tmp_path / "policy")
    exp.agent.policy_module().save(path)
    loaded = tf.saved_model.load(path)
    obs = np.random.default_rng(1).normal(size=(7, 4)).astype(np.float32)
    expected = exp.agent.compute_action(obs)
    np.testing.assert_array_equal(loaded(tf.constant(obs)).numpy(), expected)
    out = loaded.signatures["serving_default"](observations=tf.constant(obs))
    np.testing.assert_array_equal(list(out.values())[0].numpy(), expected)
    exp.close()


class SeededRun:
    """``hparams`` trained 1024 steps with seed 3, evaluating every 256: what it learnt."""

    def __init__(self, hparams: str, out):
        exp = Experiment(
            hparams,
            str(out),
            seed=3,
            train_steps=1024,
            overrides="eval_interval=256",
            verbose=False,
        )
        exp.train()
        self.evals = [
            json.loads(l)["returns"] for l in (out / "eval.jsonl").read_text().splitlines()
        ]
        self.weights = weights(exp.agent.model)
        self.iterations = exp.agent.learner.optimizer.iterations.numpy()
        exp.close()


@pytest.fixture(scope="module")
def seeded_runs(tmp_path_factory):
    """``seeded_runs(hparams)``: that set's SeededRun, trained once for this module (the
    reference of the same-seed test and of the evaluation-settings test)."""
    return once_per_set(tmp_path_factory, SeededRun)


@pytest.mark.slow
@pytest.mark.parametrize("hparams", ["ppo_tiny", "dqn_tiny"])
def test_same_seed_gives_identical_runs(seeded_runs, tmp_path, hparams):
    first = seeded_runs(hparams)
    again = SeededRun(hparams, tmp_path / "b")
    assert len(first.evals) == 4 and first.evals == again.evals
    for a, b in zip(first.weights, again.weights):
        np.testing.assert_array_equal(a, b)
    other = Experiment(hparams, str(tmp_path / "c"), seed=4, train_steps=1024, verbose=False)
    other.train()
    assert any((a != b).any() for a, b in zip(first.weights, weights(other.agent.model)))
    other.close()


@pytest.mark.unit
def test_python_api_result_and_compute_action(tmp_path):
    exp = Experiment("ppo_tiny", str(tmp_path / "run"), overrides={"num_envs": 4}, verbose=False)
    result = exp.train(steps=128)
    for key in (
        "step",
        "episode_return_mean",
        "eval_return_mean",
        "loss",
        "policy_loss",
        "value_loss",
        "entropy",
        "steps_per_second",
    ):
        assert key in result, key
    assert result["step"] == 128
    evaluation = exp.evaluate(episodes=3)
    assert evaluation["episodes"] == 3 and len(evaluation["returns"]) == 3
    single = exp.agent.compute_action(np.zeros(4, np.float32))
    assert isinstance(single, int)
    batch = exp.agent.compute_action(np.zeros((5, 4), np.float32))
    assert batch.shape == (5,)
    with pytest.raises(ValueError, match="observation shape"):
        exp.agent.compute_action(np.zeros(3))
    exp.close()


@pytest.mark.unit
def test_load_is_read_only(tmp_path):
    out = tmp_path / "run"
    exp = Experiment("ppo_tiny", str(out), verbose=False)
    exp.train()
    exp.close()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    run = load(str(out))
    assert run.step == 256 and run.restored_from.endswith("ckpt-256")
    run.evaluate(episodes=2)
    with pytest.raises(RuntimeError, match="read-only"):
        run.train()
    run.close()
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert before == after


@pytest.mark.slow
def test_unreadable_latest_checkpoint_falls_back_to_the_previous(tmp_path, capsys):
    out = tmp_path / "run"
    exp = Experiment("ppo_tiny", str(out), overrides="checkpoint_interval=64", verbose=False)
    exp.train()
    exp.close()
    data = sorted((out / "checkpoints").glob("ckpt-256.data-*"))
    assert data
    data[0].write_bytes(b"garbage" * 10)
    again = Experiment("ppo_tiny", str(out), verbose=False)
    assert again.restored_from.endswith("ckpt-192")
    assert again.step == 192
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if "ckpt-256" in line]  # one line for it all
    assert line.startswith("rl: checkpoint ckpt-256 cannot be read (")
    assert f"resuming from the previous checkpoint {again.restored_from}," in line
    again.close()


@pytest.mark.unit
def test_no_readable_checkpoint_is_an_error_naming_the_folder(tmp_path):
    from rl.experiment import CheckpointError

    out = tmp_path / "run"
    exp = Experiment("ppo_tiny", str(out), overrides="keep_checkpoints=1", verbose=False)
    exp.train()
    exp.close()
    for path in (out / "checkpoints").glob("ckpt-*.data-*"):
        path.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="no checkpoint in .*checkpoints can be read"):
        Experiment("ppo_tiny", str(out), overrides="keep_checkpoints=1", verbose=False)


@pytest.mark.slow
@pytest.mark.parametrize("interval, synced", [(4, True), (5, False)])
def test_dqn_target_syncs_every_target_update_interval_gradient_steps(interval, synced):
    hp = registry.hparams.get("dqn_tiny")().replace(
        gradient_steps=4, target_update_interval=interval, learning_starts=0, train_interval=2
    )
    envs = make_vec_env(hp.env, hp.num_envs)
    agent = build(hp, envs)
    obs, _ = envs.reset(seed=0)
    step_once(agent, envs, obs)
    learner = agent.learner
    assert learner.update() is not None
    same = all(
        np.array_equal(a, b) for a, b in zip(weights(learner.model), weights(learner.target_model))
    )
    assert same == synced
    envs.close()


@pytest.mark.slow
@pytest.mark.parametrize("hparams", ["ppo_tiny", "dqn_tiny"])
def test_evaluation_and_logging_settings_leave_training_bit_identical(
    seeded_runs, tmp_path, hparams
):
    # Evaluation, acting and the update draw from separate streams (rl/seeding.py):
    # how often or how long a run evaluates, checkpoints or records must not change
    # what it learns. The reference evaluates every 256 steps and checkpoints every 128.
    reference = seeded_runs(hparams)
    settings = {
        "b": "eval_interval=128,eval_episodes=5,checkpoint_interval=128,keep_checkpoints=5",
        "c": "eval_interval=1024,eval_episodes=1,checkpoint_interval=512,video_interval=256",
    }
    for name, overrides in settings.items():
        exp = Experiment(
            hparams,
            str(tmp_path / name),
            seed=3,
            train_steps=1024,
            overrides=overrides,
            record_video=name == "c",
            verbose=False,
        )
        exp.train()
        learner = exp.agent.learner
        assert learner.optimizer.iterations.numpy() == reference.iterations
        for a, b in zip(reference.weights, weights(learner.model)):
            np.testing.assert_array_equal(a, b)
        exp.close()


@pytest.mark.unit
@pytest.mark.parametrize("hparams", ["ppo_tiny", "dqn_tiny"])
def test_host_and_graph_acting_choose_alike(hparams):
    # The NumPy forward pass on the host matches TensorFlow's: greedy actions are
    # identical and the behaviour log-probs agree to float32 rounding.
    hp = registry.hparams.get(hparams)()
    envs = make_vec_env(hp.env, 2)
    host, graph = build(hp, envs), build(hp.replace(host_acting=False), envs)
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    for explore in (False, True):
        on_host = host.make_actor(np.random.default_rng(1), explore)
        in_graph = graph.make_actor(np.random.default_rng(1), explore)
        assert on_host.on_host and not in_graph.on_host
        actions, extras = on_host.act(obs)
        graph_actions, graph_extras = in_graph.act(obs)
        assert actions.dtype == graph_actions.dtype == np.int32 and actions.shape == (64,)
        if not explore:
            np.testing.assert_array_equal(actions, graph_actions)
        for name in extras:
            np.testing.assert_allclose(
                extras[name],
                graph.learner.model.head.log_prob(
                    graph.learner.model.policy(tf.constant(obs)), tf.constant(actions)
                ).numpy(),
                rtol=1e-5,
                atol=1e-5,
            )
            assert graph_extras[name].shape == (64,)
    envs.close()


@pytest.mark.unit
def test_host_forward_gives_a_row_the_same_bits_in_any_batch():
    # Actor processes act for shares of the run's rows, which must come out as they do in
    # one actor's whole batch: BLAS's x @ w rounds a row differently with the batch size.
    from rl.models.host import QHeadLayout, mlp_forward

    rng = np.random.default_rng(0)
    shapes = [(4, 64), (64,), (64, 64), (64,), (64, 44), (44,)]
    arrays = [rng.normal(size=shape).astype(np.float32) for shape in shapes]
    x = rng.normal(size=(16, 4)).astype(np.float32)
    whole = mlp_forward(x, arrays, "tanh")
    c51 = QHeadLayout(3, dueling=True, support=tuple(np.linspace(-10, 10, 11)))
    q = c51.q_values(whole)
    for first, end in [(0, 8), (8, 16), (0, 1), (5, 6), (3, 12)]:
        part = mlp_forward(x[first:end], arrays, "tanh")
        np.testing.assert_array_equal(part, whole[first:end])
        np.testing.assert_array_equal(c51.q_values(part), q[first:end])


@pytest.mark.unit
@pytest.mark.parametrize("eval_epsilon", [0.0, 0.25, 1.0])
def test_evaluation_acts_uniformly_in_eval_epsilon_of_its_steps(eval_epsilon):
    # 4,000 observations whose greedy action is known: the evaluation actor departs from it
    # in eval_epsilon / 2 of them (a uniform action over CartPole's two is greedy half the
    # time), to within 4 standard deviations; the training actor's schedule is untouched.
    hp = registry.hparams.get("dqn_tiny")().replace(
        eval_act_select="epsilon_greedy", eval_epsilon=eval_epsilon
    )
    envs = make_vec_env(hp.env, 2)
    agent = build(hp, envs)
    obs = np.random.default_rng(0).normal(size=(4000, 4)).astype(np.float32)
    greedy = agent.make_actor(np.random.default_rng(1), explore=False)
    greedy.exploration = lambda step: 0.0
    expected, _ = greedy.act(obs)
    actions, _ = agent.make_actor(np.random.default_rng(1), explore=False).act(obs)
    departed = np.mean(actions != expected)
    rate = eval_epsilon / 2
    assert abs(departed - rate) <= 4 * np.sqrt(rate * (1 - rate) / len(obs)) + 1e-12
    assert agent.actor.exploration(0) == hp.epsilon_start
    envs.close()


@pytest.mark.unit
@pytest.mark.parametrize(
    "activation", ["relu", "tanh", "sigmoid", "elu", "softplus", "silu", "linear"]
)
def test_host_forward_pass_matches_tensorflow_for_every_activation(activation):
    from rl.models.networks import MLP

    mlp = MLP(5, (8, 8), 3, activation, output_gain=1.0, seed=0)
    x = np.random.default_rng(1).normal(scale=3.0, size=(32, 5)).astype(np.float32)
    arrays = [v.numpy() for v in mlp.layer_variables()]
    np.testing.assert_allclose(
        mlp.host_forward(x, arrays), mlp(tf.constant(x)).numpy(), rtol=1e-5, atol=1e-5
    )


@pytest.mark.unit
def test_acting_makes_no_tensorflow_call_per_step_on_the_host(monkeypatch):
    # One env step on the host must not cross into TensorFlow: that call costs
    # 0.2-0.9 ms on the project's machines, against 0.009 ms for the NumPy pass.
    hp = registry.hparams.get("ppo_tiny")()
    envs = make_vec_env(hp.env, 2)
    agent = build(hp, envs)
    assert not hasattr(agent.actor, "_act_in_graph")  # nothing was even traced for acting

    def no_tensorflow(*args, **kwargs):
        raise AssertionError("acting called into TensorFlow")

    for name in ("constant", "convert_to_tensor"):
        monkeypatch.setattr(tf, name, no_tensorflow)
    monkeypatch.setattr(agent.model, "policy", no_tensorflow)
    monkeypatch.setattr(agent.model, "__call__", no_tensorflow, raising=False)
    obs, _ = envs.reset(seed=0)
    for _ in range(10):
        obs = step_once(agent, envs, obs)
    assert agent.compute_action(obs[0]) in (0, 1)
    envs.close()


@pytest.mark.unit
def test_dqn_warns_when_q_values_leave_what_the_rewards_allow():
    hp = registry.hparams.get("dqn_tiny")().replace(gamma=0.99)
    envs = make_vec_env(hp.env, hp.num_envs)
    learner = build(hp, envs).learner
    obs = np.zeros((2, 4), np.float32)
    no = np.zeros(2, bool)
    learner.observe(
        obs=obs,
        actions=np.zeros(2, np.int32),
        rewards=-np.ones(2),
        terminated=no,
        truncated=no,
        next_obs=obs,
    )
    # |r| <= 1 and gamma 0.99: |Q| <= 100; the warning fires beyond twice that.
    assert learner.warnings({"q_mean": -150.0}) == []
    (warning,) = learner.warnings({"q_mean": 1.7e4})
    assert "q_mean 1.7e+04" in warning and "= 100" in warning
    envs.close()
