"""Typed, frozen hyperparameters and the ``--hparam_override`` parser.

Hyperparameters are frozen dataclasses: every field has a declared type and a
default, a typo (``hp.hiden_sizes = 3`` or ``hp.replace(hiden_sizes=3)``)
raises instead of creating a new field, and a set is built from its base with
``replace``. Frozen also means nothing can stash runtime state (epsilon,
counters) in them. See docs/ARCHITECTURE.md for why not a mutable HParams.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import types
import typing
from typing import Any, Dict, List, Optional, Tuple


class HParamsError(ValueError):
    """A bad override or hparams file; ``str()`` is one readable line."""


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
    }
)


@dataclasses.dataclass(frozen=True)
class HParams:
    """Fields every agent shares. Agent-specific sets subclass this."""

    agent: str = ""  # registered agent name, e.g. "ppo"
    model: str = ""  # registered model name, e.g. "mlp_actor_critic"
    act_select: str = ""  # registered act_select used while training
    eval_act_select: str = "greedy"  # act_select for evaluation and test
    grad_comp: str = ""  # registered loss, e.g. "ppo_clip"
    env: str = "CartPole-v1"  # registered env name or any Gymnasium id
    num_envs: int = 8  # environment copies stepped together
    vectorization: str = "sync"  # "sync" (one process) or "async" (subprocesses)
    seed: int = 0  # seeds the agent's generator and the environments
    hidden_sizes: Tuple[int, ...] = (64, 64)  # MLP layer widths
    activation: str = "tanh"  # any tf.keras.activations name
    learning_rate: float = 3e-4  # Adam step size at the start
    anneal_learning_rate: bool = False  # linear decay to 0 over train_steps
    gamma: float = 0.99  # discount
    max_grad_norm: Optional[float] = None  # global-norm clip; None: no clip
    jit_compile: bool = True  # XLA-compile the update: ~1.5 s once, faster after
    host_acting: bool = True  # act in NumPy on the host (small models); false: in TF
    train_steps: int = 100_000  # environment steps of the whole run
    eval_interval: int = 10_000  # environment steps between evaluations
    eval_episodes: int = 10  # greedy episodes per evaluation
    checkpoint_interval: int = 10_000  # environment steps between checkpoints
    keep_checkpoints: int = 3  # how many checkpoints stay on disk
    video_interval: int = 0  # steps between recorded eval episodes; 0: never

    def replace(self, **changes: Any) -> "HParams":
        """A copy with ``changes`` applied; unknown names raise HParamsError."""
        names = field_names(self)
        for key in changes:
            if key not in names:
                raise HParamsError(unknown_field_message(key, names))
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON-ready values (tuples become lists)."""
        return {
            f.name: list(v) if isinstance(v, tuple) else v
            for f in dataclasses.fields(self)
            for v in [getattr(self, f.name)]
        }


def field_names(hp: HParams) -> List[str]:
    return [f.name for f in dataclasses.fields(hp)]


def unknown_field_message(key: str, names: List[str]) -> str:
    matches = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(matches)}? " if matches else ""
    return f"unknown hparam '{key}': {hint}valid: {', '.join(sorted(names))}"


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(name: str, value: Any, tp: Any) -> Any:
    """Checks ``value`` against the declared type ``tp`` and converts it.

    ints are accepted where floats are declared and lists where tuples are;
    nothing else is converted (a bool is not an int here).

    Args:
        name: the field, for error messages.
        value: a Python value, e.g. from ``ast.literal_eval`` or JSON.
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
            return float(value)
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp in (bool, str):
        if isinstance(value, tp):
            return value
    else:
        raise HParamsError(f"hparam '{name}' has an unsupported type {tp}")
    raise HParamsError(f"hparam '{name}' expects {_type_name(tp)}, got {value!r}")


def split_overrides(text: str) -> List[str]:
    """Splits ``a=1,b=[1,2],c='x,y'`` on the commas outside brackets/quotes."""
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
    return [p.strip() for p in parts if p.strip()]


def parse_value(raw: str, tp: Any) -> Any:
    """Reads a Python literal; bare words are strings where a str is declared."""
    lowered = raw.lower()
    if lowered in ("true", "false") and bool in _flat_types(tp):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        if str in _flat_types(tp):
            return raw
        raise


def _flat_types(tp: Any) -> Tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def apply_overrides(hp: HParams, text: Optional[str]) -> HParams:
    """Applies ``"lr=1e-3,num_envs=16,hidden_sizes=[128,128]"`` to ``hp``.

    Args:
        hp: the hparams to start from.
        text: comma-separated ``name=value`` pairs; values are Python literals.

    Raises:
        HParamsError: for a malformed pair, an unknown name or a wrong type.
    """
    if not text:
        return hp
    hints = typing.get_type_hints(type(hp))
    changes: Dict[str, Any] = {}
    for pair in split_overrides(text):
        if "=" not in pair:
            raise HParamsError(
                f"bad override '{pair}': expected name=value, e.g. "
                "'learning_rate=1e-3,hidden_sizes=[128,128]'"
            )
        name, raw = (s.strip() for s in pair.split("=", 1))
        if name not in hints:
            raise HParamsError(unknown_field_message(name, field_names(hp)))
        try:
            value = parse_value(raw, hints[name])
        except (ValueError, SyntaxError):
            raise HParamsError(
                f"hparam '{name}' expects {_type_name(hints[name])}, could not read {raw!r}"
            ) from None
        changes[name] = coerce(name, value, hints[name])
    return hp.replace(**changes)


def from_dict(cls: type, values: Dict[str, Any]) -> HParams:
    """Rebuilds hparams of class ``cls`` from ``to_dict`` output, type-checked."""
    hints = typing.get_type_hints(cls)
    names = list(hints)
    unknown = [k for k in values if k not in hints]
    if unknown:
        raise HParamsError(unknown_field_message(unknown[0], names))
    return cls(**{k: coerce(k, v, hints[k]) for k, v in values.items()})


def differences(old: HParams, new: HParams) -> Dict[str, Tuple[Any, Any]]:
    """Fields whose values differ, as name -> (old, new)."""
    a, b = old.to_dict(), new.to_dict()
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
