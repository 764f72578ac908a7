"""A finished ppo_tiny run made by train.py, and what tests that damage a copy of it use.

The fixtures ``trained`` (the run, read-only) and ``run_dir`` (a fresh copy of it per
test) reach every test module through tests/conftest.py.
"""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")
ARGS = ["--hparams", "ppo_tiny", "--train_steps", "384"]  # checkpoints 128, 256, 384


def run(*args, umask=None):
    """train.py with ``args``, from the repository root, as a user runs it."""
    return subprocess.run(
        [sys.executable, TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def error_line(proc):
    """The one "train.py: error:" line of a refused run (asserts there is exactly one)."""
    lines = [l for l in proc.stderr.splitlines() if l.startswith("train.py: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def contents(folder):
    """Every file under ``folder`` with its bytes (to prove nothing was written)."""
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """`train.py` with ARGS, finished. Read-only: tests change a copy (``run_dir``)."""
    out = tmp_path_factory.mktemp("base") / "run"
    proc = run(*ARGS, "--output_dir", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture
def run_dir(trained, tmp_path):
    """A copy of ``trained`` for one test to change."""
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    return out
