"""From a set name, overrides and flags to checked hparams, without TensorFlow.

``train.py`` resolves the hparams before it loads TensorFlow, so an unknown
name or a bad value is reported in well under a second.
"""

import os
from typing import Any, Dict, Optional, Union

from rl import registry
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
    """The hparams a previous run saved in ``output_dir``, or None if none.

    Raises:
        HParamsError: naming the file, if it does not hold valid hparams.
    """
    path = os.path.join(output_dir, HPARAMS_FILE)
    if not os.path.exists(path):
        return None
    try:
        values = read_json_object(path)
    except ValueError as e:
        raise HParamsError(str(e)) from None
    if "agent" not in values:
        raise HParamsError(f"{path} does not hold hparams (no 'agent' field)")
    agent = values["agent"]
    if not isinstance(agent, str) or agent not in registry.agents:
        raise HParamsError(
            f"{path}: 'agent' must be one of {', '.join(registry.agents.names())}, got {agent!r}"
        )
    cls = hparams_class(agent)
    try:
        return from_dict(cls, as_trained_before_new_fields(values, cls))
    except HParamsError as e:
        raise HParamsError(f"{path}: {e}") from None


def as_trained_before_new_fields(values: Dict[str, Any], cls: type) -> Dict[str, Any]:
    """A saved hparams.json's values, with fields added since it was written set to what
    its run trained with where that differs from today's default.

    Without this, resuming an older RMSprop run would silently change its optimizer
    (or, for a set that keeps 1e-5, refuse it as a change of hparams).
    """
    if "rmsprop_epsilon" in values:
        return values
    optimizer = values.get("optimizer", cls.__dataclass_fields__["optimizer"].default)
    if optimizer != "rmsprop":
        return values  # the field does not act on Adam: today's default is as good
    # Before the field, rl's RMSprop always ran at Baselines' 1e-5.
    return {**values, "rmsprop_epsilon": BASELINES_RMSPROP_EPSILON}
