"""The code base stays lint-clean and formatted (ruff.toml)."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATHS = ["rl", "tests", "scripts", "train.py", "setup.py"]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff comes with the test extras")
@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff(command):
    proc = subprocess.run(["ruff", *command, *PATHS], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
