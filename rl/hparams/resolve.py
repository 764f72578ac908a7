"""From a set name, overrides and flags to checked hparams, without TensorFlow.

``train.py`` resolves the hparams before it loads TensorFlow, so an unknown
name or a bad value is reported in well under a second.
"""

import dataclasses
import json
import os
from typing import Any, Callable, Dict, List, Optional, Union

from rl import registry, snapshot
from rl.envs import atari
from rl.files import read_json_object
from rl.hparams.base import (
    BASELINES_RMSPROP_EPSILON,
    HParams,
    HParamsError,
    RewardSettings,
    apply_overrides,
    check_ranges,
    from_dict,
)

HPARAMS_FILE = "hparams.json"  # in a run folder: the resolved hparams of its run


def resolve_hparams(
    hparams: Union[str, HParams], overrides: Union[str, Dict[str, Any], None] = None, **fields: Any
) -> HParams:
    """Named set (or object) + overrides + explicit fields -> checked hparams.

    Args:
        hparams: a registered hparams set name, or an HParams object.
        overrides: "a=1,b=[2,3]" text or a dict of field -> value.
        **fields: further field values (None values are ignored), e.g. the
            ``--env`` and ``--seed`` flags.

    Raises:
        UnknownNameError, HParamsError: for unknown names or bad values.
    """
    hp = registry.hparams.get(hparams)() if isinstance(hparams, str) else hparams
    if isinstance(overrides, dict):
        hp = from_dict(type(hp), {**hp.to_dict(), **overrides})
    else:
        hp = apply_overrides(hp, overrides)
    explicit = {k: v for k, v in fields.items() if v is not None}
    if explicit:
        hp = from_dict(type(hp), {**hp.to_dict(), **explicit})
    validate_hparams(hp)
    return hp


def validate_hparams(hp: HParams) -> None:
    """Checks every field against the limits declared with it, registered names
    included (and, for the model, loss and act_select, the ones the agent's update
    can use). Loads no TensorFlow: train.py calls it first, so a mistake is
    reported at once."""
    check_ranges(hp)
    hp.check_consistency()
    if isinstance(hp, RewardSettings) and hp.life_loss_terminal and not atari.is_atari(hp.env):
        raise HParamsError(
            f"hparam 'life_loss_terminal' needs an Atari game (env ALE/<Game>-v5), whose "
            f"steps say when a life is lost; env {hp.env!r} does not: set it to false"
        )
    if hp.eval_epsilon > 0 and not registry.act_select.get(hp.eval_act_select).uses_epsilon:
        takers = [n for n in registry.act_select.names() if registry.act_select.get(n).uses_epsilon]
        raise HParamsError(
            f"hparam 'eval_epsilon' must be 0 with eval_act_select {hp.eval_act_select!r}, which "
            f"takes no epsilon, got {hp.eval_epsilon:g}: set eval_act_select to one that does "
            f"({', '.join(takers)})"
        )


def hparams_class(agent: str) -> type:
    """The hparams class of a registered agent: the class of its registered sets.

    Each class's ``agent`` field admits only its own agent, so the sets say
    which class an agent's runs are read with, without importing the agent.

    Raises:
        UnknownNameError: for an agent with no registered hparams set.
    """
    for name in registry.hparams.names():
        hp = registry.hparams.get(name)()
        if hp.agent == agent:
            return type(hp)
    registry.agents.check(agent)
    raise HParamsError(f"agent '{agent}' has no registered hparams set to read its runs with")


def load_run_hparams(output_dir: str) -> Optional[HParams]:
    """The hparams a previous run saved in ``output_dir``, or None if none
    (see ``saved_hparams``).

    Raises:
        HParamsError: naming the file, the first problem and the fix.
    """
    path = os.path.join(output_dir, HPARAMS_FILE)
    if not os.path.exists(path):
        return None
    try:
        values = read_json_object(path)
    except ValueError as e:
        raise HParamsError(str(e)) from None
    copy = os.path.join(output_dir, snapshot.SNAPSHOT_DIR, snapshot.HPARAMS_FILE)
    return saved_hparams(values, path, copy)


def saved_hparams(values: Dict[str, Any], path: str, copy: Optional[str] = None) -> HParams:
    """Hparams that a run saved (its hparams.json, a policy artefact's policy.json).

    They must hold every field, each of its declared type and within its limits: a
    missing field is refused, not filled with today's default (which would change the
    run without a word), and so is anything else wrong.

    Args:
        values: the saved JSON object.
        path: the file they came from, for messages.
        copy: another file of the run that may hold a missing field, named as the fix.

    Raises:
        HParamsError: naming ``path``, the first problem and the fix.
    """
    if "agent" not in values:
        raise HParamsError(f"{path} does not hold hparams (no 'agent' field)")
    agent = values["agent"]
    if not isinstance(agent, str) or agent not in registry.agents:
        raise HParamsError(
            f"{path}: 'agent' must be one of {', '.join(registry.agents.names())}, got {agent!r}"
        )
    cls = hparams_class(agent)
    values = as_trained_before_new_fields(values, cls)
    try:
        hp = from_dict(cls, values)
        missing = missing_fields(cls, values)
        if missing:
            raise HParamsError(missing_field_message(missing[0], cls, copy))
        validate_hparams(hp)
    except HParamsError as e:
        raise HParamsError(f"{path}: {e}") from None
    return hp


def missing_fields(cls: type, values: Dict[str, Any]) -> List[str]:
    """The fields of ``cls`` a saved hparams.json must hold and ``values`` lacks
    (derived fields follow from the others and need not be there)."""
    return [f.name for f in dataclasses.fields(cls) if f.init and f.name not in values]


def missing_field_message(name: str, cls: type, copy: Optional[str]) -> str:
    """What to do about a field that saved hparams lack: put back the value the run
    trained with, which ``copy`` (the run's snapshot/hparams.json) names when it holds it.

    The copy is not taken silently: snapshot/hparams.json is rewritten at each start
    from hparams.json, so it is a copy to restore from, not a second authority.
    """
    try:
        saved = read_json_object(copy) if copy is not None else {}
    except (OSError, ValueError):
        saved = {}
    if name in saved:
        return (
            f"hparam '{name}' is missing; put back \"{name}\": {format_json(saved[name])} as "
            f"{copy} holds it, or use another --output_dir"
        )
    default = cls.__dataclass_fields__[name].default
    return (
        f"hparam '{name}' is missing (today's default {format_json(default)} need not be "
        "what the run trained with); put back the value it trained with, or use another "
        "--output_dir"
    )


def format_json(value: Any) -> str:
    """A value as JSON writes it, for a message that says what to put in a file."""
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _default(cls: type, name: str) -> Any:
    return cls.__dataclass_fields__[name].default


def _cap_before_the_field(values: Dict[str, Any], cls: type) -> Any:
    # Runs before the cap had unbounded episodes; the cap is what keeps a resumed run from
    # looping for ever, and it acts only on envs without a time limit of their own.
    return _default(cls, "max_episode_steps")


def _rmsprop_epsilon_before_the_field(values: Dict[str, Any], cls: type) -> Any:
    # Before the field, rl's RMSprop always ran at Baselines' 1e-5; on Adam it does not act,
    # so today's default is as good.
    optimizer = values.get("optimizer", _default(cls, "optimizer"))
    return BASELINES_RMSPROP_EPSILON if optimizer == "rmsprop" else _default(cls, "rmsprop_epsilon")


# Every field added to an hparams class after runs were first saved, with what a run saved
# before it trained with. A new field needs its entry here, or no run folder of an earlier
# rl resumes (a missing field is refused): tests/test_registry_hparams.py compares the
# classes with tests/data/saved_hparams_fields.json, the fields the first saved runs hold.
FIELDS_ADDED_LATER: Dict[str, Callable[[Dict[str, Any], type], Any]] = {
    "max_episode_steps": _cap_before_the_field,
    "rmsprop_epsilon": _rmsprop_epsilon_before_the_field,
}


def as_trained_before_new_fields(values: Dict[str, Any], cls: type) -> Dict[str, Any]:
    """A saved hparams.json's values, with the ``FIELDS_ADDED_LATER`` it lacks set to what
    its run trained with, which need not be today's default.

    Without this, resuming an older RMSprop run would silently change its optimizer
    (or, for a set that keeps 1e-5, refuse it as a change of hparams).
    """
    values = dict(values)
    for name, trained_with in FIELDS_ADDED_LATER.items():
        if name not in values and name in cls.__dataclass_fields__:
            values[name] = trained_with(values, cls)
    return values
