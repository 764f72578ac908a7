"""Typed, frozen hyperparameters and the ``--hparam_override`` parser.

Hyperparameters are frozen dataclasses: every field has a declared type and a
default, a typo (``hp.hiden_sizes = 3`` or ``hp.replace(hiden_sizes=3)``)
raises instead of creating a new field, and a set is built from its base with
``replace``. Frozen also means nothing can stash runtime state (epsilon,
counters) in them. See docs/concepts/architecture.md for why not a mutable HParams.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any, Dict, List, Optional, Tuple

from rl import registry
from rl.errors import HParamsError
from rl.fields import (
    DEFAULT_MAX_EPISODE_STEPS,
    MAX_SEED,
    MAX_STEPS,
    Limits,
    bounded,
    named,
    one_of,
    positive,
)

# RMSprop's epsilon under the root as TF1 and OpenAI Baselines' A2C had it, and as rl's
# RMSprop ran before ``rmsprop_epsilon`` existed (the default, 1e-10, steps as SB3's
# PyTorch RMSprop). The sets that keep it did better with it than with the default
# (docs/benchmarks.md): a2c_cartpole holds 500, a2c_acrobot matches RL-Zoo;
# impala_cartpole keeps TF1's form, as IMPALA had it.
BASELINES_RMSPROP_EPSILON = 1e-5


# Fields that may differ when a run is resumed: how long and how often things
# happen. (A learning-rate annealed over train_steps follows the new budget.)
RESUMABLE_FIELDS = frozenset(
    {
        "train_steps",
        "eval_interval",
        "eval_episodes",
        "checkpoint_interval",
        "keep_checkpoints",
        "video_interval",
        "max_episode_steps",  # lowered to resume a run whose episodes ran too long
    }
)


@dataclasses.dataclass(frozen=True)
class HParams:
    """Fields every agent shares. Agent-specific sets subclass this.

    A subclass that only changes a field's default keeps the base's limits.
    """

    # Beyond run_folder.CHECKPOINT_SHAPE_FIELDS, what a class's checkpoints are laid out
    # by (a class attribute, not a field: it has no annotation).
    checkpoint_shape_fields = ()

    agent: str = named("", "agents")  # registered agent name, e.g. "ppo"
    model: str = named("", "models")  # registered model name, e.g. "actor_critic"
    act_select: str = named("", "act_select")  # registered act_select used while training
    eval_act_select: str = named("greedy", "act_select")  # act_select for evaluation and test
    # Uniform actions in this fraction of evaluation and test steps, for an eval_act_select
    # that takes an epsilon (Atari DQN: 0.05, so that a greedy policy cannot stall forever).
    eval_epsilon: float = bounded(0.0, 0, 1)
    grad_comp: str = named("", "grad_comp")  # registered loss, e.g. "ppo_clip"
    env: str = named("CartPole-v1", "envs")  # registered env name or any Gymnasium id
    # Episodes of an env without a time limit of its own are truncated at this many steps
    # (gymnasium's TimeLimit), so no policy can loop for ever; an env's own limit is kept.
    max_episode_steps: int = bounded(DEFAULT_MAX_EPISODE_STEPS, 1, MAX_STEPS)
    num_envs: int = bounded(8, 1, 4096)  # environment copies stepped together
    vectorization: str = one_of(
        "sync", ("sync", "async")
    )  # "sync": one process; "async": subprocesses
    seed: int = bounded(0, 0, MAX_SEED)  # seeds the agent's generator and the environments
    optimizer: str = one_of("adam", ("adam", "rmsprop"))  # rmsprop: A2C's, no momentum
    # RMSprop's epsilon, added under the root: g / sqrt(v + eps). 1e-10 steps as PyTorch's
    # RMSprop with 1e-5 added to the root (SB3's A2C): the same floor, within sqrt(2).
    # 1e-5 is TF1's and OpenAI Baselines' A2C: a floor of 3.2e-3 on the root.
    rmsprop_epsilon: float = bounded(1e-10, 1e-12, 1.0)
    learning_rate: float = positive(3e-4)  # the optimizer's step size at the start
    anneal_learning_rate: bool = False  # linear decay to 0 over train_steps
    gamma: float = bounded(0.99, 0, 1)  # discount
    max_grad_norm: Optional[float] = positive(None)  # global-norm clip; None: no clip
    jit_compile: bool = True  # XLA-compile the update: ~1.5 s once, faster after
    host_acting: bool = True  # act in NumPy on the host (MLP torsos); false: in TensorFlow
    train_steps: int = bounded(100_000, 1, MAX_STEPS)  # environment steps of the whole run
    eval_interval: int = bounded(10_000, 1, MAX_STEPS)  # environment steps between evaluations
    eval_episodes: int = bounded(10, 0, 100_000)  # episodes per evaluation (eval_act_select)
    checkpoint_interval: int = bounded(10_000, 1, MAX_STEPS)  # env steps between checkpoints
    keep_checkpoints: int = bounded(3, 1, 1000)  # how many checkpoints stay on disk
    video_interval: int = bounded(0, 0, MAX_STEPS)  # steps between recorded eval episodes; 0: never

    def check_consistency(self) -> None:
        """Raises HParamsError when fields that must agree do not (one class's rules)."""

    def replace(self, **changes: Any) -> "HParams":
        """A copy with ``changes`` applied; unknown names raise HParamsError."""
        names = field_names(self)
        for key in changes:
            if key not in names:
                raise HParamsError(unknown_field_message(key, names))
        derived = derived_field_names(type(self))
        hp = dataclasses.replace(self, **{k: v for k, v in changes.items() if k not in derived})
        check_derived_fields(hp, changes)
        return hp

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON-ready values (tuples become lists); derived fields are left out."""
        return {
            f.name: list(v) if isinstance(v, tuple) else v
            for f in dataclasses.fields(self)
            if f.init
            for v in [getattr(self, f.name)]
        }


@dataclasses.dataclass(frozen=True)
class RewardSettings:
    """How PPO, A2C, VPG, IMPALA and the DQN family see rewards and episode ends;
    evaluation returns and the logged episode returns are always the env's own."""

    reward_scale: float = positive(1.0)  # rewards are multiplied by this before learning
    # Learn from sign(reward) in {-1, 0, 1} (Atari's usual clipping: one scale for every
    # game), applied before reward_scale and normalize_rewards.
    sign_rewards: bool = False
    # Atari: a lost life ends the episode for learning (no bootstrap across it), as SB3's
    # and CleanRL's EpisodicLifeEnv do; the game, logged returns and evaluation go on.
    life_loss_terminal: bool = False


@dataclasses.dataclass(frozen=True)
class ReturnNormalization:
    """Rollout learners (PPO, A2C, VPG, IMPALA) only: a replay would keep rewards
    divided by statistics that have moved on since."""

    # Rewards divided by the running std of the discounted return and clipped (as SB3's
    # VecNormalize does); the statistics are saved in checkpoints.
    normalize_rewards: bool = False
    reward_clip: float = bounded(10.0, 0.1, 1e6)  # normalised rewards stay within +-this


def field_names(hp: HParams) -> List[str]:
    return [f.name for f in dataclasses.fields(hp)]


def derived_field_names(cls: type) -> Tuple[str, ...]:
    """Fields a class computes from its other fields (declared ``init=False``, set in
    ``__post_init__``), e.g. DQN's grad_comp, which follows from its Q-head."""
    return tuple(f.name for f in dataclasses.fields(cls) if not f.init)


def check_derived_fields(hp: HParams, values: Dict[str, Any]) -> None:
    """Derived fields given in ``values`` (an override, an older hparams.json) must
    equal what ``hp`` derives.

    Raises:
        HParamsError: naming the field, its derived value and the one given.
    """
    for key in derived_field_names(type(hp)):
        if key in values and values[key] != getattr(hp, key):
            raise HParamsError(
                f"hparam '{key}' follows from the other fields ({getattr(hp, key)!r} here) "
                f"and cannot be set to {_shorten(repr(values[key]))}: change the fields it "
                "follows from"
            )


def unknown_field_message(key: str, names: List[str]) -> str:
    hint = registry.did_you_mean(key, names, cutoff=0.5)
    return f"unknown hparam {key!r}: {hint}valid: {', '.join(sorted(names))}"  # repr: one line


MAX_OVERRIDE_CHARS = 4000  # far more than every field at once needs


def type_name(tp: Any) -> str:
    """A declared type in words: "int", "float or None", "list of int"."""
    options = [o for o in _flat_types(tp) if o is not type(None)]
    if len(options) < len(_flat_types(tp)):
        return f"{type_name(options[0])} or None"
    if typing.get_origin(tp) is tuple:
        return f"list of {type_name(typing.get_args(tp)[0])}"
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def format_value(value: Any) -> str:
    """A value in override syntax: ``true``, ``None``, ``[64,64]``, ``relu``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return str(value)


def coerce(name: str, value: Any, tp: Any) -> Any:
    """Checks ``value`` against the declared type ``tp`` and converts it.

    ints are accepted where floats are declared and lists where tuples are;
    nothing else is converted (a bool is not an int here).

    Args:
        name: the field, for error messages.
        value: a Python value, e.g. from JSON or ``parse_value``.
        tp: the field's type annotation.

    Raises:
        HParamsError: if the value does not fit.
    """
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return coerce(name, value, option)
            except HParamsError:
                pass
    elif origin is tuple:
        args = typing.get_args(tp)
        if isinstance(value, (list, tuple)):
            element = args[0]
            return tuple(coerce(name, v, element) for v in value)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:  # an int beyond float range
                pass
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp in (bool, str):
        if isinstance(value, tp):
            return value
    else:
        raise HParamsError(f"hparam '{name}' has an unsupported type {tp}")
    raise HParamsError(f"hparam '{name}' expects {type_name(tp)}, got {_shorten(repr(value))}")


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _split_top_level(text: str) -> List[str]:
    """Splits on the commas outside brackets and quotes, keeping empty parts."""
    parts, depth, quote, current = [], 0, None, []
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def split_overrides(text: str) -> List[str]:
    """Splits ``a=1,b=[1,2],c='x,y'`` on the commas outside brackets/quotes."""
    return [p.strip() for p in _split_top_level(text) if p.strip()]


# Plain decimal numbers, with optional fraction, exponent and 1_000-style
# underscores; nothing float() would also take ("nan", "inf", " 1").
_NUMBER = re.compile(
    r"[+-]?(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d(?:_?\d)*)?"
)
_WHOLE = re.compile(r"[+-]?\d(?:_?\d)*")
_WORD = re.compile(r"[^\s'\"()\[\]{},=]+")  # a bare string: no spaces, quotes, brackets


def _parse_scalar(raw: str, tp: Any) -> Any:
    """One int, float, bool or str written in override syntax; ValueError says why not."""
    if tp is bool:
        if raw.lower() not in ("true", "false"):
            raise ValueError("not true or false")
        return raw.lower() == "true"
    if tp is str:
        if not raw.isprintable():  # keeps names, and errors quoting them, on one line
            raise ValueError("not printable text")
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"" and raw[0] not in raw[1:-1]:
            return raw[1:-1]
        if not _WORD.fullmatch(raw):
            raise ValueError("not a bare word or quoted text")
        return raw
    if tp not in (int, float):
        raise HParamsError(f"unsupported hparam type {tp}")
    if not _NUMBER.fullmatch(raw):
        raise ValueError("not a number")
    if tp is int and _WHOLE.fullmatch(raw):
        return int(raw)
    number = float(raw)
    if not math.isfinite(number):
        raise ValueError("not finite")
    if tp is int and not number.is_integer():
        raise ValueError("not a whole number")
    return int(number) if tp is int else number


def parse_value(raw: str, tp: Any) -> Any:
    """Reads one override value as the declared type ``tp``.

    Accepted: numbers (a whole number like ``1e6`` where an int is declared;
    no nan or inf), ``true``/``false``, ``None``/``null`` for Optional types,
    bare words or quoted text for strings, flat ``[a, b]`` or ``(a, b)`` for
    tuples.

    Args:
        raw: the text after ``name=``.
        tp: the field's type annotation.

    Raises:
        ValueError: saying why ``raw`` is not such a value.
    """
    raw = raw.strip()
    options = [o for o in _flat_types(tp) if o is not type(None)]
    if len(options) < len(_flat_types(tp)) and raw.lower() in ("none", "null"):
        return None
    if len(options) != 1:
        raise HParamsError(f"unsupported hparam type {tp}")
    tp = options[0]
    if typing.get_origin(tp) is not tuple:
        return _parse_scalar(raw, tp)
    if len(raw) < 2 or raw[0] + raw[-1] not in ("[]", "()"):
        raise ValueError("not a [list]")
    if any(char in "()[]{}" for char in raw[1:-1]):
        raise ValueError("lists cannot be nested")
    items = [item.strip() for item in _split_top_level(raw[1:-1])]
    if items[-1] == "":  # "[]" and a trailing comma, as in "(64,)"
        items.pop()
    if "" in items:
        raise ValueError("an empty item")
    element = typing.get_args(tp)[0]
    return tuple(_parse_scalar(item, element) for item in items)


def _flat_types(tp: Any) -> Tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _example(name: str, tp: Any, current: Any) -> str:
    if current is None:  # an Optional field left off: show a real value
        inner = [o for o in _flat_types(tp) if o is not type(None)][0]
        current = {int: 1, float: 1.0, str: "name"}.get(inner, current)
    return f"{name}={format_value(current)}"


def apply_overrides(hp: HParams, text: Optional[str]) -> HParams:
    """Applies ``"lr=1e-3,num_envs=16,hidden_sizes=[128,128]"`` to ``hp``.

    Ranges are not checked here (see check_ranges).

    Args:
        hp: the hparams to start from.
        text: comma-separated ``name=value`` pairs; see parse_value.

    Raises:
        HParamsError: for a malformed pair, an unknown name, a name given twice or a
            value that is not of the field's type.
    """
    if not text:
        return hp
    if len(text) > MAX_OVERRIDE_CHARS:
        raise HParamsError(
            f"hparam overrides are {len(text)} characters long; "
            f"at most {MAX_OVERRIDE_CHARS} are read"
        )
    hints = typing.get_type_hints(type(hp))
    changes: Dict[str, Any] = {}
    for pair in split_overrides(text):
        if "=" not in pair:
            raise HParamsError(
                f"bad override {_shorten(repr(pair))}: expected name=value, e.g. "
                "'learning_rate=1e-3,hidden_sizes=[128,128]'"
            )
        name, raw = (s.strip() for s in pair.split("=", 1))
        if name not in hints:
            raise HParamsError(unknown_field_message(_shorten(name), field_names(hp)))
        if name in changes:  # as the env's ?k=v arguments: a repeat is a mistake, not an update
            raise HParamsError(f"hparam '{name}' is overridden twice; give it once")
        try:
            changes[name] = parse_value(raw, hints[name])
        except ValueError as e:
            raise HParamsError(
                f"hparam '{name}' expects {type_name(hints[name])}, e.g. "
                f"{_example(name, hints[name], getattr(hp, name))}; got {_shorten(repr(raw))} ({e})"
            ) from None
    return hp.replace(**changes)


def declared_limits(cls: type, name: str) -> Optional[Limits]:
    """The limits declared with field ``name``, in ``cls`` or the nearest base."""
    for klass in cls.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and "limits" in field.metadata:
            return field.metadata["limits"]
    return None


def int_field_range(name: str) -> Tuple[int, int]:
    """(low, high) that the integer field ``name`` of HParams declares: the range of a
    command-line flag that sets it (train.py's --seed, rl.search's --train_steps).

    Args:
        name: a field of HParams with both limits declared.
    """
    limits = declared_limits(HParams, name)
    return int(limits.low), int(limits.high)


def check_ranges(hp: HParams) -> None:
    """Checks every field's type and the limits declared with it.

    Args:
        hp: the hparams to check.

    Raises:
        HParamsError: naming the first bad field and its valid values.
        UnknownNameError: for a field naming something not registered.
    """
    hints = typing.get_type_hints(type(hp))
    for field in dataclasses.fields(hp):
        value = coerce(field.name, getattr(hp, field.name), hints[field.name])
        limits = declared_limits(type(hp), field.name)
        if limits is not None and value is not None:
            _check_value(field.name, value, limits)


def _check_value(name: str, value: Any, limits: Limits) -> None:
    if limits.kind == "envs":
        from rl.envs.make import check_env_name  # late: rl.envs.make imports Gymnasium

        check_env_name(value)
    elif limits.kind is not None:
        registry.ALL[limits.kind].check(value)  # imports nothing: no TensorFlow
    if limits.choices and value not in limits.choices:
        valid = ", ".join(repr(c) for c in limits.choices)
        raise HParamsError(f"hparam '{name}' must be one of {valid}, got {_shorten(repr(value))}")
    if limits.kind is not None or limits.choices:
        return
    if isinstance(value, tuple):
        if limits.max_items is not None and len(value) > limits.max_items:
            raise HParamsError(
                f"hparam '{name}' holds at most {limits.max_items} items, got {len(value)}"
            )
        for item in value:
            _check_number(f"each item of hparam '{name}'", item, limits)
    else:
        _check_number(f"hparam '{name}'", value, limits)


def _check_number(label: str, value: float, limits: Limits) -> None:
    if not math.isfinite(value):
        raise HParamsError(f"{label} must be finite, got {value}")
    above_low = limits.low is None or (
        value > limits.low if limits.open_low else value >= limits.low
    )
    if above_low and (limits.high is None or value <= limits.high):
        return
    low, high = _readable(limits.low), _readable(limits.high)
    if limits.high is None:
        valid = f"{'>' if limits.open_low else '>='} {low}"
    else:
        valid = f"in {'(' if limits.open_low else '['}{low}, {high}]"
    raise HParamsError(f"{label} must be {valid}, got {_shorten(repr(value))}")


def _readable(limit: Optional[float]) -> str:
    """Large ints with underscores, as the parser also reads them: 100_000_000."""
    return f"{limit:_}" if isinstance(limit, int) and abs(limit) >= 10_000 else str(limit)


def from_dict(cls: type, values: Dict[str, Any]) -> HParams:
    """Rebuilds hparams of class ``cls`` from ``to_dict`` output, type-checked.

    Ranges are checked later, with every other source, by check_ranges.
    """
    hints = typing.get_type_hints(cls)
    names = list(hints)
    unknown = [k for k in values if k not in hints]
    if unknown:
        raise HParamsError(unknown_field_message(_shorten(str(unknown[0])), names))
    derived = derived_field_names(cls)
    hp = cls(**{k: coerce(k, v, hints[k]) for k, v in values.items() if k not in derived})
    check_derived_fields(hp, values)  # older hparams.json files hold them
    return hp


def differences(old: HParams, new: HParams) -> Dict[str, Tuple[Any, Any]]:
    """Fields whose values differ, as name -> (old, new)."""
    a, b = old.to_dict(), new.to_dict()
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
