"""Shared test set-up: quiet TensorFlow, a repo-root import path."""

import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture(autouse=True)
def _no_run_dir_from_an_earlier_test(monkeypatch):
    """Each test starts without RL_RUN_DIR (self-play envs look for a run's policies there)."""
    monkeypatch.delenv("RL_RUN_DIR", raising=False)
