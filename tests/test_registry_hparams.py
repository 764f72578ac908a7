"""Registries and typed hparams: lookups, duplicates, overrides, errors."""

import dataclasses

import pytest

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.hparams.base import HParamsError, apply_overrides, from_dict, split_overrides
from rl.registry import Registry, UnknownNameError, snake_case


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


def test_unknown_name_lists_closest_matches_and_how_to_list_all():
    with pytest.raises(UnknownNameError) as info:
        registry.hparams.get("ppo_cartpol")
    message = str(info.value)
    assert "did you mean 'ppo_cartpole'" in message
    assert "--list" in message
    assert "\n" not in message


def test_every_kind_is_registered():
    assert {"ppo", "dqn"} <= set(registry.agents.names())
    assert {"mlp_actor_critic", "mlp_q"} <= set(registry.models.names())
    assert {"greedy", "categorical", "epsilon_greedy"} <= set(registry.act_select.names())
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
    with pytest.raises(HParamsError, match="did you mean hidden_sizes"):
        a.replace(hiden_sizes=(3,))


def test_sets_build_on_their_base():
    base = registry.hparams.get("ppo_base")()
    cartpole = registry.hparams.get("ppo_cartpole")()
    assert cartpole.clip_ratio == base.clip_ratio
    assert cartpole.learning_rate != base.learning_rate


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
        ("learning_rat=1", "unknown hparam 'learning_rat': did you mean learning_rate"),
        ("num_envs=2.5", "hparam 'num_envs' expects int, got 2.5"),
        ("num_envs=true", "expects int"),
        ("hidden_sizes=[64,'a']", "expects"),
        ("gamma=abc", "hparam 'gamma' expects float, could not read 'abc'"),
        ("num_envs", "bad override 'num_envs': expected name=value"),
    ],
)
def test_bad_overrides_raise_one_clear_line(text, message):
    hp = registry.hparams.get("ppo_cartpole")()
    with pytest.raises(HParamsError) as info:
        apply_overrides(hp, text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "hparams, override, message",
    [
        ("ppo_tiny", "grad_comp=gae", "hparam 'grad_comp' of agent 'ppo' must be one of ppo_clip"),
        (
            "dqn_tiny",
            "model=mlp_actor_critic",
            "hparam 'model' of agent 'dqn' must be one of mlp_q",
        ),
        ("ppo_tiny", "act_select=greedyy", "unknown act_select 'greedyy'"),
        ("ppo_tiny", "num_envs=0", "hparam 'num_envs' must be > 0"),
        ("ppo_tiny", "vectorization=threads", "hparam 'vectorization' must be 'sync' or 'async'"),
    ],
)
def test_names_must_exist_and_fit_the_agent(hparams, override, message):
    from rl.experiment import build_envs_and_agent
    from rl.hparams.resolve import resolve_hparams

    # Names are checked when resolving; whether they fit the agent, when it is built.
    with pytest.raises((HParamsError, UnknownNameError)) as info:
        build_envs_and_agent(resolve_hparams(hparams, override))
    assert message in str(info.value)


def test_to_dict_round_trip():
    hp = registry.hparams.get("dqn_cartpole")()
    assert from_dict(type(hp), hp.to_dict()) == hp
