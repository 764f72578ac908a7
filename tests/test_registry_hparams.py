"""Registries and typed hparams: lookups, duplicates, overrides, errors."""

import dataclasses
import json
import os
import re

import pytest

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.envs.make import check_env_name
from rl.fields import MAX_SEED
from rl.hparams.base import (
    HParamsError,
    apply_overrides,
    check_ranges,
    declared_limits,
    from_dict,
    split_overrides,
)
from rl.registry import Registry, UnknownNameError, did_you_mean, snake_case

pytestmark = pytest.mark.unit


def test_snake_case_keys_and_explicit_names():
    reg = Registry("thing")

    @reg.register
    class MyFancyThing:
        pass

    @reg.register("short")
    def long_function_name():
        pass

    assert reg.names() == ["my_fancy_thing", "short"]
    assert reg.get("my_fancy_thing") is MyFancyThing
    assert snake_case("PPOAgent") == "ppo_agent"
    assert snake_case("A2CAgent") == "a2c_agent"
    assert snake_case("camelCase") == "camel_case"


def test_registering_a_name_twice_raises():
    reg = Registry("thing")
    reg.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(lambda: 2)
    # A declared name says where it points, for register and declare alike.
    reg.declare("b", "some.module:thing")
    for again in (lambda: reg.declare("b", "other:thing"), lambda: reg.register("b")(len)):
        with pytest.raises(ValueError, match=r"'b' is already registered \(by some.module:thing\)"):
            again()


def test_unknown_name_lists_closest_matches_and_how_to_list_all():
    with pytest.raises(UnknownNameError) as info:
        registry.hparams.get("ppo_cartpol")
    message = str(info.value)
    assert "did you mean 'ppo_cartpole'" in message
    assert "--list" in message
    assert "\n" not in message


def test_did_you_mean_names_the_close_candidates_closest_first():
    names = ["zzz", "dqn_cartpole", "ppo_cartpole"]
    # difflib ratios against "ppo_cartpol": ppo_cartpole 2*11/23 = 0.96,
    # dqn_cartpole 2*8/23 = 0.70 (the common "_cartpol"), zzz 0.
    assert did_you_mean("ppo_cartpol", names) == "did you mean 'ppo_cartpole', 'dqn_cartpole'? "
    assert did_you_mean("ppo_cartpol", names, cutoff=0.8) == "did you mean 'ppo_cartpole'? "
    assert did_you_mean("ppo_cartpol", names, count=1) == "did you mean 'ppo_cartpole'? "
    assert did_you_mean("qqqq", names) == ""
    assert did_you_mean("x", []) == ""


def test_registry_hparam_and_env_mistakes_share_one_hint_form():
    with pytest.raises(UnknownNameError) as registry_error:
        registry.hparams.get("ppo_cartpol")
    with pytest.raises(HParamsError) as field_error:
        registry.hparams.get("ppo_tiny")().replace(learning_rat=1.0)
    with pytest.raises(UnknownNameError) as env_error:
        check_env_name("CartPole-v7")
    # Whatever else is close, the closest comes first, every name is quoted,
    # and the hint ends with "? " before the valid names.
    for error, pattern in [
        (registry_error, r"unknown hparams 'ppo_cartpol': did you mean 'ppo_cartpole'"),
        (field_error, r"unknown hparam 'learning_rat': did you mean 'learning_rate'"),
        (env_error, r"unknown env 'CartPole-v7': did you mean 'CartPole-v1'"),
    ]:
        assert re.match(pattern + r"(, '[^']+')*\? valid: ", str(error.value)), error.value


def test_every_kind_is_registered():
    assert {"ppo", "dqn"} <= set(registry.agents.names())
    assert {"actor_critic", "q_network"} <= set(registry.models.names())
    assert {"greedy", "sample", "epsilon_greedy"} <= set(registry.act_select.names())
    assert {"ppo_clip", "dqn_td", "gae"} <= set(registry.grad_comp.names())
    assert {
        "ppo_cartpole",
        "dqn_cartpole",
        "ppo_acrobot",
        "dqn_acrobot",
        "ppo_tiny",
        "dqn_tiny",
    } <= set(registry.hparams.names())
    assert "local" in registry.systems.names()
    listing = catalog.list_all()
    assert "hparams:" in listing and "  ppo_cartpole" in listing


def test_hparam_sets_are_fresh_frozen_objects():
    a = registry.hparams.get("ppo_cartpole")()
    b = registry.hparams.get("ppo_cartpole")()
    assert a == b and a is not b
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.hiden_sizes = (3,)  # a typo must not create a field
    with pytest.raises(HParamsError, match="did you mean 'hidden_sizes'"):
        a.replace(hiden_sizes=(3,))


def test_sets_build_on_their_base():
    base = registry.hparams.get("ppo_base")()
    cartpole = registry.hparams.get("ppo_cartpole")()
    assert cartpole.value_coef == base.value_coef  # kept from the base
    assert cartpole.learning_rate != base.learning_rate  # changed by the set


def test_overrides_are_parsed_with_types():
    hp = registry.hparams.get("ppo_cartpole")()
    hp = apply_overrides(
        hp,
        "learning_rate=1e-3, num_envs=16,hidden_sizes=[128,128],"
        "activation=relu,normalize_advantages=false,value_clip=0.2,gamma=1",
    )
    assert hp.learning_rate == 1e-3 and hp.num_envs == 16
    assert hp.hidden_sizes == (128, 128)
    assert hp.activation == "relu"
    assert hp.normalize_advantages is False
    assert hp.value_clip == 0.2  # Optional[float] default None is overridable
    assert hp.gamma == 1.0 and isinstance(hp.gamma, float)
    assert apply_overrides(hp, "value_clip=None").value_clip is None


def test_split_keeps_commas_inside_brackets_and_quotes():
    assert split_overrides("a=[1,2],b='x,y',c=3") == ["a=[1,2]", "b='x,y'", "c=3"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("learning_rat=1", "unknown hparam 'learning_rat': did you mean 'learning_rate'"),
        (
            "num_envs=2.5",
            "hparam 'num_envs' expects int, e.g. num_envs=16; got '2.5' (not a whole number)",
        ),
        ("num_envs=true", "hparam 'num_envs' expects int"),
        ("hidden_sizes=[64,'a']", "hparam 'hidden_sizes' expects list of int"),
        ("gamma=abc", "hparam 'gamma' expects float, e.g. gamma=0.98; got 'abc' (not a number)"),
        ("num_envs", "bad override 'num_envs': expected name=value"),
        # Each of these escaped ast.literal_eval as a raw exception.
        (
            "hidden_sizes={[]:1}",
            "hparam 'hidden_sizes' expects list of int, e.g. hidden_sizes=[64,64]",
        ),
        ("act_select={[]}", "hparam 'act_select' expects str, e.g. act_select=sample"),
        ("train_steps=" + "-" * 20_000 + "1", "at most 4000 are read"),
        ("train_steps=" + "+".join(["1"] * 3000), "at most 4000 are read"),
        ("train_steps=1+1", "hparam 'train_steps' expects int"),
        (
            "learning_rate=1e999",
            "hparam 'learning_rate' expects float, e.g. learning_rate=0.001; got '1e999' (not finite)",
        ),
        ("gamma=nan", "hparam 'gamma' expects float"),
        ("gamma=inf", "hparam 'gamma' expects float"),
        ("hidden_sizes=[[64]]", "(lists cannot be nested)"),
        ("hidden_sizes=[64,,64]", "(an empty item)"),
        ("hidden_sizes=64", "(not a [list])"),
        ("normalize_advantages=1", "(not true or false)"),
        ("gamma=None", "hparam 'gamma' expects float"),
        ("max_grad_norm=x", "hparam 'max_grad_norm' expects float or None, e.g. max_grad_norm=0.5"),
        ("value_clip=x", "e.g. value_clip=1.0;"),
        ("env=a b", "hparam 'env' expects str"),
    ],
)
def test_bad_overrides_raise_one_clear_line(text, message):
    hp = registry.hparams.get("ppo_cartpole")()
    with pytest.raises(HParamsError) as info:
        apply_overrides(hp, text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert len(str(info.value)) < 1000  # a long value is not echoed whole


@pytest.mark.parametrize(
    "text, field, value",
    [
        ("train_steps=1e6", "train_steps", 1_000_000),
        ("train_steps=1_000", "train_steps", 1000),
        ("train_steps=2.5e3", "train_steps", 2500),
        ("learning_rate=1e30", "learning_rate", 1e30),  # finite and > 0: a NaN-guard test uses it
        ("learning_rate=.5", "learning_rate", 0.5),
        ("hidden_sizes=(32,)", "hidden_sizes", (32,)),
        ("hidden_sizes=[ 32 , 16 ]", "hidden_sizes", (32, 16)),
        ("hidden_sizes=[]", "hidden_sizes", ()),
        ("max_grad_norm=null", "max_grad_norm", None),
        ("normalize_advantages=True", "normalize_advantages", True),
        ("env='CartPole-v1'", "env", "CartPole-v1"),
        ('env="Acrobot-v1"', "env", "Acrobot-v1"),
        ("seed=2147483647", "seed", 2**31 - 1),
        ("gamma=0", "gamma", 0.0),
    ],
)
def test_plain_literals_of_the_declared_type_are_read(text, field, value):
    from rl.hparams.resolve import resolve_hparams

    hp = resolve_hparams("ppo_cartpole", text)
    assert getattr(hp, field) == value
    assert type(getattr(hp, field)) is type(value)


# Every case the issue names, refused by resolve_hparams with what is valid.
@pytest.mark.parametrize(
    "hparams, override, message",
    [
        ("ppo_tiny", "grad_comp=gae", "hparam 'grad_comp' must be one of 'ppo_clip', got 'gae'"),
        (
            "dqn_tiny",
            "model=actor_critic",
            "hparam 'model' must be one of 'q_network', got 'actor_critic'",
        ),
        ("ppo_tiny", "act_select=greedyy", "unknown act_select 'greedyy'"),
        # PPO's ratio assumes actions sampled from its own policy.
        (
            "ppo_tiny",
            "act_select=greedy",
            "hparam 'act_select' must be one of 'sample', got 'greedy'",
        ),
        (
            "dqn_tiny",
            "act_select=sample",
            "hparam 'act_select' must be one of 'epsilon_greedy', 'greedy', got 'sample'",
        ),
        ("ppo_tiny", "eval_act_select=nope", "unknown act_select 'nope'"),
        ("dqn_tiny", "eval_epsilon=1.5", "hparam 'eval_epsilon' must be in [0, 1], got 1.5"),
        (
            "dqn_tiny",
            "eval_epsilon=0.05",
            "hparam 'eval_epsilon' must be 0 with eval_act_select 'greedy', which takes no "
            "epsilon, got 0.05: set eval_act_select to one that does (epsilon_greedy, "
            "uniform_or_sample)",
        ),
        ("ppo_tiny", "model=nope", "unknown model 'nope'"),
        ("ppo_tiny", "env=NoSuchEnv-v0", "unknown env 'NoSuchEnv-v0'"),
        ("ppo_tiny", "num_envs=0", "hparam 'num_envs' must be in [1, 4096], got 0"),
        ("ppo_tiny", "num_envs=1e11", "hparam 'num_envs' must be in [1, 4096], got 100000000000"),
        (
            "ppo_tiny",
            "vectorization=threads",
            "hparam 'vectorization' must be one of 'sync', 'async', got 'threads'",
        ),
        ("ppo_tiny", "activation=gelu", "hparam 'activation' must be one of 'relu', 'tanh'"),
        (
            "ppo_tiny",
            "hidden_sizes=[0]",
            "each item of hparam 'hidden_sizes' must be in [1, 4096], got 0",
        ),
        (
            "ppo_tiny",
            "hidden_sizes=[64,-1]",
            "each item of hparam 'hidden_sizes' must be in [1, 4096], got -1",
        ),
        (
            "ppo_tiny",
            "hidden_sizes=[8,8,8,8,8,8,8,8,8]",
            "hparam 'hidden_sizes' holds at most 8 items, got 9",
        ),
        ("ppo_tiny", "seed=-1", "hparam 'seed' must be in [0, 2_147_483_647], got -1"),
        (
            "ppo_tiny",
            "seed=2147483648",
            "hparam 'seed' must be in [0, 2_147_483_647], got 2147483648",
        ),
        ("ppo_tiny", "learning_rate=-1", "hparam 'learning_rate' must be > 0, got -1.0"),
        ("ppo_tiny", "learning_rate=0", "hparam 'learning_rate' must be > 0, got 0.0"),
        ("ppo_tiny", "gamma=1.01", "hparam 'gamma' must be in [0, 1], got 1.01"),
        ("ppo_tiny", "max_grad_norm=0", "hparam 'max_grad_norm' must be > 0, got 0.0"),
        (
            "ppo_tiny",
            "train_steps=0",
            "hparam 'train_steps' must be in [1, 1_000_000_000_000], got 0",
        ),
        ("ppo_tiny", "eval_interval=0", "hparam 'eval_interval' must be in [1, "),
        ("ppo_tiny", "eval_episodes=-1", "hparam 'eval_episodes' must be in [0, 100_000], got -1"),
        ("ppo_tiny", "checkpoint_interval=0", "hparam 'checkpoint_interval' must be in [1, "),
        ("ppo_tiny", "keep_checkpoints=0", "hparam 'keep_checkpoints' must be in [1, 1000], got 0"),
        ("ppo_tiny", "video_interval=-5", "hparam 'video_interval' must be in [0, "),
        ("ppo_tiny", "agent=dqn", "hparam 'agent' must be one of 'ppo', got 'dqn'"),
        ("ppo_tiny", "rollout_steps=0", "hparam 'rollout_steps' must be in [1, 100_000], got 0"),
        ("ppo_tiny", "num_epochs=0", "hparam 'num_epochs' must be in [1, 10_000], got 0"),
        (
            "ppo_tiny",
            "num_minibatches=0",
            "hparam 'num_minibatches' must be in [1, 100_000], got 0",
        ),
        ("ppo_tiny", "clip_ratio=0", "hparam 'clip_ratio' must be > 0, got 0.0"),
        ("ppo_tiny", "value_coef=-0.5", "hparam 'value_coef' must be >= 0, got -0.5"),
        ("ppo_tiny", "entropy_coef=-1e-3", "hparam 'entropy_coef' must be >= 0, got -0.001"),
        ("ppo_tiny", "gae_lambda=2", "hparam 'gae_lambda' must be in [0, 1], got 2.0"),
        ("ppo_tiny", "value_clip=-1", "hparam 'value_clip' must be > 0, got -1.0"),
        ("dqn_tiny", "agent=ppo", "hparam 'agent' must be one of 'dqn', got 'ppo'"),
        ("dqn_tiny", "buffer_size=0", "hparam 'buffer_size' must be in [1, 100_000_000], got 0"),
        (
            "dqn_tiny",
            "buffer_size=1e12",
            "hparam 'buffer_size' must be in [1, 100_000_000], got 1000000000000",
        ),
        ("dqn_tiny", "batch_size=0", "hparam 'batch_size' must be in [1, 1_000_000], got 0"),
        ("dqn_tiny", "learning_starts=-1", "hparam 'learning_starts' must be in [0, "),
        ("dqn_tiny", "train_interval=0", "hparam 'train_interval' must be in [1, "),
        ("dqn_tiny", "gradient_steps=0", "hparam 'gradient_steps' must be in [1, 100_000], got 0"),
        ("dqn_tiny", "target_update_interval=0", "hparam 'target_update_interval' must be in [1, "),
        (
            "dqn_tiny",
            "target_update_tau=0",
            "hparam 'target_update_tau' must be in (0, 1], got 0.0",
        ),
        (
            "dqn_tiny",
            "target_update_tau=1.5",
            "hparam 'target_update_tau' must be in (0, 1], got 1.5",
        ),
        ("dqn_tiny", "epsilon_start=1.1", "hparam 'epsilon_start' must be in [0, 1], got 1.1"),
        ("dqn_tiny", "epsilon_end=-0.1", "hparam 'epsilon_end' must be in [0, 1], got -0.1"),
        ("dqn_tiny", "epsilon_decay_steps=0", "hparam 'epsilon_decay_steps' must be in [1, "),
        ("dqn_tiny", "huber_delta=0", "hparam 'huber_delta' must be > 0, got 0.0"),
        ("dqn_tiny", "num_envs=0", "hparam 'num_envs' must be in [1, 4096], got 0"),  # inherited
        ("dqn_tiny", "activation=gelu", "hparam 'activation' must be one of"),  # inherited
    ],
)
def test_names_must_exist_and_values_fit_their_declared_range(hparams, override, message):
    from rl.experiment import build_envs_and_agent
    from rl.hparams.resolve import resolve_hparams

    # Names are checked when resolving; whether they fit the agent, when it is built.
    with pytest.raises((HParamsError, UnknownNameError)) as info:
        build_envs_and_agent(resolve_hparams(hparams, override))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_flags_and_dict_overrides_are_checked_too():
    from rl.hparams.resolve import resolve_hparams

    with pytest.raises(HParamsError, match="hparam 'seed' must be in"):
        resolve_hparams("ppo_tiny", seed=2**31)
    with pytest.raises(HParamsError, match="hparam 'gamma' must be finite, got nan"):
        resolve_hparams("ppo_tiny", {"gamma": float("nan")})
    with pytest.raises(HParamsError, match="hparam 'learning_rate' expects float"):
        resolve_hparams("ppo_tiny", {"learning_rate": 10**400})  # beyond float range
    with pytest.raises(HParamsError, match="hparam 'num_envs' expects int, got 'x'"):
        resolve_hparams(registry.hparams.get("ppo_tiny")().replace(num_envs="x"))


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("seed", -1, "hparam 'seed' must be in"),
        ("learning_rate", float("inf"), "hparam 'learning_rate' must be finite, got inf"),
        ("agent", "dqn", "unknown hparam 'normalize_rewards'"),  # rollout learners' only
    ],
)
def test_a_saved_hparams_json_goes_through_the_same_checks(tmp_path, field, value, message):
    import json

    from rl.experiment import Experiment

    values = registry.hparams.get("ppo_tiny")().to_dict()
    values[field] = value
    (tmp_path / "hparams.json").write_text(json.dumps(values))  # writes NaN/Infinity as JSON does
    with pytest.raises((HParamsError, UnknownNameError)) as info:
        Experiment(hparams=None, output_dir=str(tmp_path))
    assert message in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["hparams.json"]


@pytest.mark.parametrize(
    "hparams, expected",
    [
        ("a2c_pendulum", 1e-5),  # RMSprop, before rmsprop_epsilon existed: rl's fixed 1e-5
        ("a2c_cartpole", 1e-5),
        ("ppo_tiny", 1e-10),  # Adam: the field does not act, today's default
    ],
)
def test_a_run_saved_before_rmsprop_epsilon_resumes_with_the_epsilon_it_trained_with(
    tmp_path, hparams, expected
):
    import json

    from rl.hparams.resolve import load_run_hparams

    values = registry.hparams.get(hparams)().to_dict()
    del values["rmsprop_epsilon"]
    (tmp_path / "hparams.json").write_text(json.dumps(values))
    assert load_run_hparams(str(tmp_path)).rmsprop_epsilon == expected


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED_FIELDS = os.path.join(ROOT, "tests", "data", "saved_hparams_fields.json")


def new_agent_message(agent: str, cls: type, fields) -> str:
    """The line a new agent adds to SAVED_FIELDS: the fields its runs save today (each
    agent's own, so another agent's line is no substitute)."""
    line = f"{json.dumps(agent)}: {json.dumps(sorted(fields))},"
    return (
        f"agent '{agent}' has no line in {os.path.relpath(SAVED_FIELDS, ROOT)}: add this one, "
        f"the fields {cls.__name__} saves in hparams.json today:\n {line}"
    )


def test_a_field_added_since_runs_were_saved_says_what_those_runs_trained_with():
    # The fields each agent's first saved runs hold. A field added since must say what
    # those runs trained with (FIELDS_ADDED_LATER), or none of them would resume.
    from rl.hparams.resolve import FIELDS_ADDED_LATER, hparams_class, saved_hparams

    with open(SAVED_FIELDS) as f:
        saved_fields = json.load(f)
    for agent in registry.agents.names():
        cls = hparams_class(agent)
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
        assert agent in saved_fields, new_agent_message(agent, cls, fields)
        first = set(saved_fields[agent])
        new = sorted(fields - first - set(FIELDS_ADDED_LATER))
        assert not new, (
            f"{cls.__name__} has fields that runs saved before them lack: {new}; add each to "
            "FIELDS_ADDED_LATER in rl/hparams/resolve.py with what those runs trained with"
        )
        gone = sorted(first - fields)
        assert not gone, (
            f"{cls.__name__} lost fields that saved runs hold: {gone}; saved runs would be "
            "refused (unknown field): keep them, or read them in from_dict"
        )
        # A run saved with only the first fields is read back as the set it trained.
        name = next(n for n in registry.hparams.names() if registry.hparams.get(n)().agent == agent)
        hp = registry.hparams.get(name)()
        values = {k: v for k, v in hp.to_dict().items() if k in first}
        back = saved_hparams(values, "hparams.json")
        later = {k: back.to_dict()[k] for k in FIELDS_ADDED_LATER if k in fields}
        assert back == hp.replace(**later)


def test_an_agent_without_saved_fields_is_told_the_line_to_add():
    from rl.hparams.resolve import hparams_class

    cls = hparams_class("qrdqn")
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    message = new_agent_message("qrdqn", cls, fields)
    line = message.splitlines()[-1]
    assert json.loads("{" + line.rstrip(",") + "}") == {"qrdqn": sorted(fields)}
    assert "num_quantiles" in fields and "grad_comp" not in fields  # its own; not derived


def test_every_field_declares_its_limits_and_every_set_meets_them():
    classes = {type(registry.hparams.get(name)()) for name in registry.hparams.names()}
    # Every agent's class is reached (each new one joins by registering a set).
    assert {c.__name__ for c in classes} >= {"PPOHParams", "DQNHParams", "A2CHParams", "VPGHParams"}
    for cls in classes:
        for field in dataclasses.fields(cls):
            if field.type not in ("bool", bool):
                assert declared_limits(cls, field.name) is not None, (cls.__name__, field.name)
    for name in registry.hparams.names():
        check_ranges(registry.hparams.get(name)())


def test_every_allowed_activation_is_a_keras_activation():
    import tensorflow as tf

    from rl.fields import ACTIVATIONS

    x = tf.constant([-1.0, 0.0, 2.0])
    for name in ACTIVATIONS:
        assert tf.keras.activations.get(name)(x).shape == (3,)


def test_the_largest_seed_builds_and_runs_an_agent():

    from rl.experiment import build_envs_and_agent
    from rl.hparams.resolve import resolve_hparams

    for name in ("ppo_tiny", "dqn_tiny"):  # ActorCritic seeds its value MLP with seed + 1000
        hp = resolve_hparams(name, seed=MAX_SEED)
        envs, agent = build_envs_and_agent(hp)
        try:
            obs, _ = envs.reset(seed=0)
            actions, _ = agent.actor.act(obs)
            assert actions.shape == (hp.num_envs,)
        finally:
            envs.close()


def test_to_dict_round_trip():
    hp = registry.hparams.get("dqn_cartpole")()
    assert from_dict(type(hp), hp.to_dict()) == hp


def test_env_keyword_arguments_after_a_question_mark_reach_the_constructor():
    import pytest

    from rl.envs import make_env
    from rl.envs.make import split_kwargs
    from rl.hparams.base import HParamsError

    assert split_kwargs("LunarLander-v3?continuous=true&gravity=-9.5&name=x") == (
        "LunarLander-v3",
        {"continuous": True, "gravity": -9.5, "name": "x"},
    )
    assert split_kwargs("grpc://h:1/CartPole-v1?a=1") == ("grpc://h:1/CartPole-v1?a=1", {})
    env = make_env("CartPole-v1?sutton_barto_reward=true")
    env.reset(seed=0)
    assert env.step(0)[1] == 0.0  # Sutton and Barto's reward: 0 per step, -1 at the end
    check_env_name("CartPole-v1?sutton_barto_reward=false")
    env = make_env("CartPole-v1?max_episode_steps=3")  # gym.make's own keyword
    env.reset(seed=0)
    assert [env.step(step % 2)[3] for step in range(3)] == [False, False, True]
    for name, message in [
        ("CartPole-v1?gravity=3", "takes no keyword argument 'gravity': it takes sutton_barto"),
        ("cartpole?x=1", "env 'cartpole' takes no keyword argument 'x': it takes none"),
        ("CartPole-v1?sutton_barto_reward", "'sutton_barto_reward' must be key=value"),
        ("CartPole-v1?a=1&a=2", "keyword argument 'a' is given twice"),
    ]:
        with pytest.raises(HParamsError, match=message):
            check_env_name(name)


def test_flaky_cartpole_takes_a_failure_rate_in_0_to_1():
    from rl.envs import make_env
    from rl.envs.stand_ins import SimulatorCrash

    env = make_env("flaky_cartpole?failure_rate=1")
    env.reset(seed=0)
    with pytest.raises(SimulatorCrash):
        env.step(0)
    with pytest.raises(HParamsError, match=r"refused \{'failure_rate': 2\}: failure_rate must be"):
        make_env("flaky_cartpole?failure_rate=2")


def test_env_keyword_arguments_reach_a_plugins_class_entry_point():
    import gymnasium as gym

    from rl.envs import make_env

    class Sized(gym.Env):  # registered with the class itself, as plugins may do
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
        action_space = gym.spaces.Discrete(2)

        def __init__(self, size=3, render_mode=None):
            self.size = size

    gym.register("TestSized-v0", entry_point=Sized)
    try:
        assert make_env("TestSized-v0?size=4").unwrapped.size == 4
        with pytest.raises(HParamsError, match="takes no keyword argument 'x': it takes size"):
            check_env_name("TestSized-v0?x=1")
    finally:
        del gym.envs.registry["TestSized-v0"]
