"""The code base stays lint-clean and formatted (ruff.toml), and each module of rl imports
first and registers through its package's list."""

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATHS = ["rl", "tests", "scripts", "train.py", "setup.py"]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff comes with the test extras")
@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff(command):
    proc = subprocess.run(["ruff", *command, *PATHS], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# Imports each module of rl as the first rl import of a fresh process (rl's modules
# are dropped from sys.modules between them; third-party ones stay loaded, so the
# sweep takes seconds). Prints one line per module that fails.
IMPORT_EACH_FIRST = """
import importlib, pkgutil, sys
import rl
names = sorted(m.name for m in pkgutil.walk_packages(rl.__path__, "rl."))
for name in names:
    for loaded in [k for k in sys.modules if k == "rl" or k.startswith("rl.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("rl"):
            continue  # an optional extra that is not installed
        print(name, "->", type(e).__name__, e)
    except Exception as e:
        print(name, "->", type(e).__name__, e)
"""


def output_of_a_fresh_python(script: str) -> str:
    """What ``script`` prints, run by this Python from the repo root (it must not crash)."""
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_every_module_imports_as_the_first_import_of_rl():
    # A circular import shows only when a module is imported before the others
    # (`from rl.models.settings import ModelSettings` in a user's script).
    out = output_of_a_fresh_python(IMPORT_EACH_FIRST)
    assert out == "", "modules that fail to import first:\n" + out


# What rl.catalog registers, then every other module of rl imported in turn; prints each
# name a module adds that the catalog did not have.
REGISTERED_ONLY_BY_IMPORT = """
import importlib, pkgutil
import rl
from rl import catalog, registry

def names():
    return {(kind, name) for kind, reg in registry.ALL.items() for name in reg.names()}

known = names()
for module in sorted(m.name for m in pkgutil.walk_packages(rl.__path__, "rl.")):
    try:
        importlib.import_module(module)
    except ImportError:
        continue  # an optional extra that is not installed
    for kind, name in sorted(names() - known):
        print(f"{module}: {kind} {name!r}")
    known = names()
"""


def test_every_module_that_registers_is_named_in_its_packages_list():
    # A new module whose names are missing from its package's __init__.py list would
    # register only when something happens to import it: its sets would be unknown to
    # train.py and never built by test_every_hparam_set_builds_its_agent_and_acts.
    out = output_of_a_fresh_python(REGISTERED_ONLY_BY_IMPORT)
    assert out == "", (
        "registered only when imported (name the module in its package's __init__.py):\n" + out
    )
