"""The code base stays lint-clean and formatted (ruff.toml)."""

import os
import shutil
import subprocess
import sys

import pytest

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


def test_every_module_imports_as_the_first_import_of_rl():
    # A circular import shows only when a module is imported before the others
    # (`from rl.models.settings import ModelSettings` in a user's script).
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_FIRST],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "", "modules that fail to import first:\n" + proc.stdout
