"""From a set name, overrides and flags to checked hparams, without TensorFlow.

``train.py`` resolves the hparams before it loads TensorFlow, so an unknown
name or a bad value is reported in well under a second.
"""

from typing import Any, Dict, Tuple, Union

from rl import registry
from rl.hparams.base import HParams, HParamsError, apply_overrides, check_ranges, from_dict


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
    included. Loads no TensorFlow: train.py calls it first, so a mistake is
    reported at once; whether the components fit the agent is checked when the
    agent is built (``check_fits``)."""
    check_ranges(hp)


def check_fits(hp: HParams, fitting_components: Dict[str, Tuple[str, ...]]) -> None:
    """Refuses registered components that the agent's update cannot use.

    Args:
        hp: resolved hparams.
        fitting_components: the agent class's field -> names that fit.
    """
    for field, fitting in fitting_components.items():
        if getattr(hp, field) not in fitting:
            raise HParamsError(
                f"hparam '{field}' of agent '{hp.agent}' must be one of "
                f"{', '.join(fitting)}, got {getattr(hp, field)!r}"
            )
