"""Search spaces: which hparams a search samples, and from what.

A space maps field names to one distribution each, written as in YAML::

    learning_rate: {log_uniform: [1e-5, 1e-2]}
    num_epochs: {int: [2, 10]}
    activation: {categorical: [tanh, relu]}

``check_space`` reads such a mapping against an hparams object before any trial starts:
every field must exist, a range must suit the field's type and lie inside the limits
declared with the field, and each categorical value must be of the field's type and
within its limits. Numbers given as text (YAML reads ``1e-5`` as a string) are read by
the ``--hparam_override`` parser, as are lists written as text (``"[64,64]"``).

Nothing here imports Optuna: a ``Dimension`` only calls the ``suggest_*`` methods of the
trial it is given.
"""

import copy
import dataclasses
import json
import os
import types
import typing
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from rl import registry
from rl.hparams.base import (
    HParams,
    HParamsError,
    check_ranges,
    coerce,
    field_names,
    format_value,
    parse_value,
    type_name,
    unknown_field_message,
)
from rl.registry import UnknownNameError

UNIFORM, LOG_UNIFORM, INT, LOG_INT, CATEGORICAL = (
    "uniform",
    "log_uniform",
    "int",
    "log_int",
    "categorical",
)
KINDS = (UNIFORM, LOG_UNIFORM, INT, LOG_INT, CATEGORICAL)
FLOAT_KINDS = (UNIFORM, LOG_UNIFORM)
INT_KINDS = (INT, LOG_INT)
SPACE_FILE_ENDINGS = (".yaml", ".yml", ".json")


class SpaceError(ValueError):
    """A search space that cannot be used; ``str()`` is one readable line."""


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One searched field and its distribution.

    Attributes:
        name: the hparams field.
        kind: one of KINDS.
        values: (low, high) for the ranges; the choices, typed as the field, for
            categorical.
    """

    name: str
    kind: str
    values: Tuple[Any, ...]

    def choices(self) -> List[Any]:
        """Categorical choices as Optuna stores them: lists become override text."""
        return [format_value(v) if isinstance(v, tuple) else v for v in self.values]

    def suggest(self, trial: Any) -> Any:
        """The value ``trial`` (an ``optuna.Trial``) samples for this field.

        A categorical list choice comes back as override text, e.g. ``"[64,64]"``.
        """
        if self.kind in FLOAT_KINDS:
            low, high = self.values
            return trial.suggest_float(self.name, low, high, log=self.kind == LOG_UNIFORM)
        if self.kind in INT_KINDS:
            low, high = self.values
            return trial.suggest_int(self.name, low, high, log=self.kind == LOG_INT)
        return trial.suggest_categorical(self.name, self.choices())

    def to_json(self) -> Dict[str, List[Any]]:
        """``{kind: [values]}``, as in a space file (lists as lists)."""
        return {self.kind: [list(v) if isinstance(v, tuple) else v for v in self.values]}


SearchSpace = Tuple[Dimension, ...]


# Named spaces: `--space ppo_basic`. Each is a space file's contents as Python values.
NAMED_SPACES: Dict[str, Dict[str, Dict[str, List[Any]]]] = {
    # For the PPO sets on small control tasks (ppo_cartpole, ppo_acrobot).
    "ppo_basic": {
        "learning_rate": {LOG_UNIFORM: [1e-5, 3e-3]},
        "num_epochs": {INT: [2, 10]},
        "clip_ratio": {UNIFORM: [0.1, 0.3]},
        "gae_lambda": {UNIFORM: [0.8, 0.99]},
        "gamma": {UNIFORM: [0.95, 0.999]},
        "entropy_coef": {UNIFORM: [0.0, 0.02]},
        "activation": {CATEGORICAL: ["tanh", "relu"]},
    },
    # For the DQN sets on small control tasks (dqn_cartpole, dqn_acrobot).
    "dqn_basic": {
        "learning_rate": {LOG_UNIFORM: [1e-4, 3e-3]},
        "batch_size": {CATEGORICAL: [32, 64, 128]},
        "target_update_interval": {INT: [100, 2_000]},
        "gamma": {UNIFORM: [0.95, 0.999]},
        "epsilon_end": {UNIFORM: [0.01, 0.1]},
        "epsilon_decay_steps": {INT: [1_000, 30_000]},
        "hidden_sizes": {CATEGORICAL: [[64, 64], [256, 256]]},
    },
}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def read_space(spec: str) -> Tuple[str, Any]:
    """The raw space named by ``spec``: a YAML or JSON file, or a name in NAMED_SPACES.

    Args:
        spec: a file path, or the name of a named space.

    Returns:
        (a label for messages, the file's parsed contents or a copy of the named space).

    Raises:
        SpaceError: for a missing or unreadable file, or an unknown name.
    """
    if os.path.exists(spec) and not os.path.isfile(spec):
        raise SpaceError(f"search space {spec} is not a file")
    if os.path.isfile(spec):
        try:
            with open(spec, encoding="utf-8") as f:
                text = f.read()
            return spec, json.loads(text) if spec.endswith(".json") else _load_yaml(text)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise SpaceError(f"cannot read search space {spec}: {_one_line(e)}") from None
    if spec.endswith(SPACE_FILE_ENDINGS) or os.sep in spec:
        raise SpaceError(f"search space file {spec} does not exist")
    if spec not in NAMED_SPACES:
        names = sorted(NAMED_SPACES)
        raise SpaceError(
            f"unknown search space {spec!r}: {registry.did_you_mean(spec, names)}named spaces: "
            f"{', '.join(names)}; or give a YAML or JSON file"
        )
    return spec, copy.deepcopy(NAMED_SPACES[spec])


def _load_yaml(text: str) -> Any:
    """YAML's value; a syntax error raises ValueError. PyYAML comes with Optuna."""
    try:
        import yaml
    except ImportError:
        raise SpaceError("YAML spaces need PyYAML: pip install -e '.[search]'") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(str(e)) from None


def check_space(raw: Any, hp: HParams, label: str, fixed: Iterable[str] = ()) -> SearchSpace:
    """Reads a raw space against ``hp``'s fields, types and declared limits.

    Args:
        raw: field -> ``{kind: [values]}``, as read by ``read_space``.
        hp: the hparams every trial starts from (its class gives types and limits).
        label: the space's name or file, for messages.
        fixed: fields the search's own ``--hparam_override`` sets; they cannot be searched.

    Returns:
        The dimensions in the order given.

    Raises:
        SpaceError: naming the space, the field and what is wrong.
    """
    if not isinstance(raw, Mapping) or not raw:
        raise SpaceError(
            f"search space {label} must map hparam names to distributions, e.g. "
            f"learning_rate: {{log_uniform: [1e-5, 1e-2]}}; got {_shorten(raw)}"
        )
    fixed = set(fixed)
    hints = typing.get_type_hints(type(hp))
    dimensions = []
    for name, spec in raw.items():
        if not isinstance(name, str) or name not in hints:
            message = unknown_field_message(str(name), field_names(hp))
            raise SpaceError(f"search space {label}: {message}")
        if name in fixed:
            raise SpaceError(
                f"search space {label}: {name!r} is also set by --hparam_override; "
                "search it or fix it, not both"
            )
        try:
            dimensions.append(check_dimension(name, spec, hp, hints[name]))
        except (SpaceError, HParamsError) as e:
            raise SpaceError(f"search space {label}: {name}: {e}") from None
    return tuple(dimensions)


def check_dimension(name: str, spec: Any, hp: HParams, tp: Any) -> Dimension:
    """One field's distribution, read and checked.

    Args:
        name: the field.
        spec: ``{kind: [values]}``.
        hp: the hparams the samples are applied to.
        tp: the field's declared type.

    Raises:
        SpaceError, HParamsError: saying what is wrong (without the field's name).
    """
    if not isinstance(spec, Mapping) or len(spec) != 1:
        raise SpaceError(
            "expected one distribution, e.g. {log_uniform: [1e-5, 1e-2]}, {int: [2, 10]} or "
            f"{{categorical: [tanh, relu]}}; got {_shorten(spec)}"
        )
    ((kind, args),) = spec.items()
    if kind not in KINDS:
        raise SpaceError(
            f"unknown distribution {str(kind)!r}: {registry.did_you_mean(str(kind), KINDS)}"
            f"valid: {', '.join(KINDS)}"
        )
    if not isinstance(args, list):
        raise SpaceError(
            f"{kind} takes a list, e.g. {kind}: {_example(kind)}; got {_shorten(args)}"
        )
    if kind == CATEGORICAL:
        return Dimension(name, kind, _check_choices(name, args, hp, tp))
    return Dimension(name, kind, _check_range(name, kind, args, hp, tp))


def _example(kind: str) -> str:
    return {
        UNIFORM: "[0.9, 0.99]",
        LOG_UNIFORM: "[1e-5, 1e-2]",
        INT: "[2, 10]",
        LOG_INT: "[16, 1024]",
        CATEGORICAL: "[tanh, relu]",
    }[kind]


def _value_types(tp: Any) -> Tuple[Any, ...]:
    """The declared type without None: (float,) for ``Optional[float]``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return tuple(t for t in typing.get_args(tp) if t is not type(None))
    return (tp,)


def _read_value(name: str, value: Any, tp: Any) -> Any:
    """A space value as the type ``tp``: text is read as an override value would be."""
    if isinstance(value, str) and str not in _value_types(tp):
        try:
            return parse_value(value, tp)
        except ValueError as e:
            raise SpaceError(
                f"hparam '{name}' expects {type_name(tp)}, got {_shorten(value)} ({e})"
            ) from None
    return coerce(name, value, tp)


def _check_in_limits(hp: HParams, name: str, value: Any) -> None:
    """The field's declared limits (only its own; other fields are already valid)."""
    check_ranges(hp.replace(**{name: value}))


def _check_range(name: str, kind: str, args: List[Any], hp: HParams, tp: Any) -> Tuple[Any, Any]:
    want = float if kind in FLOAT_KINDS else int
    if want not in _value_types(tp):
        better = {float: "uniform or log_uniform", int: "int or log_int"}.get(
            _value_types(tp)[0], "categorical"
        )
        raise SpaceError(f"{kind} does not suit a field of type {type_name(tp)}; use {better}")
    if len(args) != 2:
        raise SpaceError(f"{kind} takes [low, high], e.g. {_example(kind)}; got {_shorten(args)}")
    low, high = (_read_value(name, v, want) for v in args)
    if not low < high:
        raise SpaceError(f"{kind} [{low}, {high}]: low must be below high")
    if kind in (LOG_UNIFORM, LOG_INT) and low <= 0:
        raise SpaceError(f"{kind} [{low}, {high}]: a log scale needs low > 0")
    for value in (low, high):
        try:
            _check_in_limits(hp, name, value)
        except (HParamsError, UnknownNameError) as e:
            raise SpaceError(f"{kind} [{low}, {high}] reaches outside the field's limits: {e}")
    return low, high


def _check_choices(name: str, args: List[Any], hp: HParams, tp: Any) -> Tuple[Any, ...]:
    if len(args) < 2:
        raise SpaceError(
            f"categorical needs at least two choices, got {_shorten(args)}; "
            "fix a single value with --hparam_override instead"
        )
    choices = []
    for raw in args:
        try:
            value = _read_value(name, raw, tp)
        except (SpaceError, HParamsError) as e:
            raise SpaceError(f"categorical value {_shorten(raw)} is of the wrong type: {e}")
        try:
            _check_in_limits(hp, name, value)
        except (HParamsError, UnknownNameError) as e:
            raise SpaceError(
                f"categorical value {_shorten(raw)} is outside the field's limits: {e}"
            )
        try:
            readable = parse_value(format_value(value), tp) == value
        except ValueError:
            readable = False
        if not readable:
            raise SpaceError(f"categorical value {value!r} cannot be written as an override")
        if value in choices:
            raise SpaceError(f"categorical value {_shorten(raw)} is given twice")
        choices.append(value)
    return tuple(choices)


def overrides_text(params: Mapping[str, Any], fixed: Optional[str] = None) -> str:
    """``--hparam_override`` text: the ``fixed`` text, then sampled ``params`` (as Optuna keeps them).

    Args:
        params: field -> sampled value (list choices already as override text).
        fixed: overrides every trial shares, or None.
    """
    parts = [fixed] if fixed else []
    parts += [f"{name}={format_value(value)}" for name, value in params.items()]
    return ",".join(parts)


def space_to_json(space: SearchSpace) -> Dict[str, Dict[str, List[Any]]]:
    """The space as a space file would hold it (field -> {kind: [values]})."""
    return {d.name: d.to_json() for d in space}


def _shorten(value: Any, limit: int = 60) -> str:
    text = _one_line(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."
