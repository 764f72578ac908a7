"""``--plugins my_pkg.my_module``: user modules that register agents, models, losses, envs
or hparam sets, so that ``rl`` is extended without editing it.

A plugin is an ordinary module that registers things at import, exactly as rl's
own packages do (``@registry.hparams.register``, ``registry.grad_comp.register``,
``@registry.envs.register``, ...). The modules a run loaded are recorded in its
snapshot (flags.json), loaded again when the run is resumed without the flag, and
passed to worker processes through ``$RL_PLUGINS``.
"""

import importlib
import os
import sys
import traceback
from typing import Iterable, List

from rl.errors import PluginError, error_line

ENV_VARIABLE = "RL_PLUGINS"  # comma-separated; read by worker processes
_loaded: List[str] = []


def load(modules: Iterable[str]) -> List[str]:
    """Imports each module once, in order; returns every plugin loaded so far.

    Raises:
      PluginError: an empty name (``--plugins ""``, an unset shell variable), a name that
        is not a dotted module name (a path: ``../x.py``), or a module
        that cannot be imported or raises while registering (one line naming it and the
        cause).
    """
    if os.getcwd() not in sys.path:
        # As ``python -m`` does: a plugin in the folder the command runs from is found
        # (``python path/to/train.py`` puts only train.py's folder on the path).
        sys.path.append(os.getcwd())
    for name in modules:
        name = name.strip()
        if not name:
            raise PluginError(
                "--plugins was given an empty name; a plugin is a module importable from the "
                "current folder or the Python path, e.g. my_pkg.my_rl"
            )
        if not all(part.isidentifier() for part in name.split(".")):
            raise PluginError(
                f"--plugins {name}: not a module name; a plugin is a module importable from "
                "the current folder or the Python path, named with dots, e.g. my_pkg.my_rl "
                "for my_pkg/my_rl.py"
            )
        if name in _loaded:
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            missing = e.name or name
            inside = name == missing or name.startswith(missing + ".")
            where = "" if inside else f" (it imports {missing!r}, which is missing)"
            raise PluginError(
                f"--plugins {name}: no module named {missing!r}{where}; a plugin is a module "
                "importable from the current folder or the Python path, e.g. my_pkg.my_rl"
            ) from None
        except BaseException as e:
            # A plugin is user code run by rl: sys.exit(), SystemExit or Ctrl-C in it end
            # the command as any bad input does, not with its own exit code or a traceback.
            raise PluginError(f"--plugins {name}: importing it {what_it_did(e)}") from None
        _loaded.append(name)
    os.environ[ENV_VARIABLE] = ",".join(_loaded)
    return list(_loaded)


def load_from_environment() -> List[str]:
    """In a worker process: the plugins its learner loaded ($RL_PLUGINS)."""
    return load(name for name in os.environ.get(ENV_VARIABLE, "").split(",") if name.strip())


def what_it_did(error: BaseException) -> str:
    """How a plugin's import ended, in words, with where: "raised ValueError: bad (m.py:3)",
    "called sys.exit(0) (m.py:3)"."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    where = f"({frame.filename}:{frame.lineno})"
    if isinstance(error, SystemExit):
        return f"called sys.exit({error.code!r}) {where}"
    return f"raised {error_line(error, typed=True)} {where}"
