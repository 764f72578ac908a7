"""Name -> factory registries, one per kind of thing.

Every agent, model, act_select, grad_comp, hparam set, env constructor and
--sys target is registered under a snake_case name and looked up by that
name. Two ways in, both explicit:

- ``@registry.hparams.register`` on the definition, for light modules that
  are imported by their package's ``__init__.py`` (hparam sets, env
  constructors: no TensorFlow);
- ``registry.agents.declare("ppo", "rl.agents.ppo:PPOLearner")`` in the
  package's ``__init__.py``, for things built on TensorFlow: the name is known
  at once and the module is imported on the first ``get``. Listing names and
  reporting an unknown one therefore never wait for TensorFlow to load.

``rl/catalog.py`` imports every package, so ``from rl import catalog`` fills
every registry and nothing else registers.
"""

from __future__ import annotations

import difflib
import importlib
import re
from typing import Callable, Dict, Iterable, Iterator, List, Optional, TypeVar

from rl.errors import UnknownNameError

T = TypeVar("T")


def snake_case(name: str) -> str:
    """Turns ``CamelCase`` into ``camel_case``; ``PPOAgent`` -> ``ppo_agent``,
    ``A2CAgent`` -> ``a2c_agent``.

    Args:
        name: a class or function name.
    """
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])", "_", name).lower()


def did_you_mean(name: str, candidates: Iterable[str], cutoff: float = 0.4, count: int = 3) -> str:
    """The hint naming the candidates closest to ``name``: ``"did you mean 'a', 'b'? "``,
    or ``""`` when none is close. Every "unknown ..." message builds its hint here.

    Args:
        name: the name that was not found.
        candidates: the valid names.
        cutoff: the least difflib similarity (0 to 1) a candidate needs to be named.
        count: at most this many candidates are named, the closest first.
    """
    matches = difflib.get_close_matches(name, list(candidates), n=count, cutoff=cutoff)
    return f"did you mean {', '.join(repr(m) for m in matches)}? " if matches else ""


class Registry:
    """A mapping from names to registered objects (classes or factories)."""

    def __init__(self, kind: str):
        """Creates an empty registry.

        Args:
            kind: what is registered here, used in error messages ("hparams").
        """
        self.kind = kind
        self._entries: Dict[str, Callable] = {}
        self._declared: Dict[str, str] = {}  # name -> "module:attribute", not yet imported
        self._targets: Dict[str, str] = {}  # every declared name -> "module:attribute"

    def register(self, name_or_obj=None):
        """Registers an object under its snake_case name or a given one.

        Usable as ``@reg.register``, ``@reg.register()`` or
        ``@reg.register("name")``.

        Args:
            name_or_obj: the object itself, a name, or None.

        Raises:
            ValueError: if the name is already registered.
        """

        def add(obj, name: Optional[str]):
            key = name or snake_case(obj.__name__)
            self._refuse_taken(key)
            self._entries[key] = obj
            return obj

        if callable(name_or_obj):
            return add(name_or_obj, None)
        return lambda obj: add(obj, name_or_obj)

    def declare(self, name: str, target: str) -> None:
        """Registers ``name`` for the object at ``"package.module:attribute"``,
        imported on the first ``get``.

        Raises:
            ValueError: if the name is already registered or declared.
        """
        self._refuse_taken(name)
        self._declared[name] = target
        self._targets[name] = target

    def _refuse_taken(self, name: str) -> None:
        """Raises ValueError naming who holds ``name``, if anyone does."""
        if name in self:
            where = self._declared.get(name) or getattr(self._entries[name], "__module__", "")
            raise ValueError(f"{self.kind} '{name}' is already registered (by {where}).")

    def origin(self, name: str) -> str:
        """Where ``name``'s object is defined, ``"package.module:attribute"``, without
        importing it (for generated docs).

        Raises:
            UnknownNameError: as ``get``.
        """
        if name in self._targets:
            return self._targets[name]
        if name in self._entries:
            obj = self._entries[name]
            return f"{obj.__module__}:{obj.__qualname__}"
        raise self._unknown(name)

    def check(self, name: str) -> None:
        """Raises UnknownNameError unless ``name`` is registered (imports nothing)."""
        if name not in self:
            raise self._unknown(name)

    def get(self, name: str):
        """Returns the object registered as ``name``.

        Raises:
            UnknownNameError: naming the closest matches and how to list them all.
        """
        if name in self._entries:
            return self._entries[name]
        if isinstance(name, str) and name in self._declared:
            module, attribute = self._declared.pop(name).split(":")
            self._entries[name] = getattr(importlib.import_module(module), attribute)
            return self._entries[name]
        raise self._unknown(name)

    def _unknown(self, name: str) -> UnknownNameError:
        return UnknownNameError(
            f"unknown {self.kind} {str(name)!r}: {did_you_mean(str(name), self.names())}valid: "
            f"{', '.join(self.names())} (list all with `python train.py --list`)"
        )

    def names(self) -> List[str]:
        return sorted({*self._entries, *self._declared})

    def __contains__(self, name: str) -> bool:
        return isinstance(name, str) and (name in self._entries or name in self._declared)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())  # declared names count before their module is imported


agents = Registry("agent")
models = Registry("model")
act_select = Registry("act_select")
grad_comp = Registry("grad_comp")
hparams = Registry("hparams")
envs = Registry("env")
systems = Registry("sys")
players = Registry("player")

ALL = {
    "agents": agents,
    "models": models,
    "act_select": act_select,
    "grad_comp": grad_comp,
    "hparams": hparams,
    "envs": envs,
    "systems": systems,
    "players": players,
}


def list_all() -> str:
    """Every registered name, grouped by kind, as printable text."""
    lines = []
    for kind, registry in ALL.items():
        lines.append(f"{kind}:")
        lines.extend(f"  {name}" for name in registry.names())
    return "\n".join(lines)
