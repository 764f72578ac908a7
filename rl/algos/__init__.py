"""algos: an Algo is an act_select (how to act) plus a grad_comp (how to learn).

Both halves are pure functions registered by name, in ``act_select/`` and
``grad_comp/``; an agent combines an Algo with a model.
"""

import dataclasses
from typing import Callable

from rl import registry
from rl.algos import act_select, grad_comp  # noqa: F401  (registers)


@dataclasses.dataclass(frozen=True)
class Algo:
    """The two halves of an algorithm, looked up by name."""

    act_select: Callable  # explore-time action selection
    eval_act_select: Callable  # evaluation/test-time action selection
    grad_comp: Callable  # the loss


def make_algo(act_select_name: str, eval_act_select_name: str, grad_comp_name: str) -> Algo:
    """Looks the three functions up; unknown names raise UnknownNameError."""
    return Algo(
        act_select=registry.act_select.get(act_select_name),
        eval_act_select=registry.act_select.get(eval_act_select_name),
        grad_comp=registry.grad_comp.get(grad_comp_name),
    )
