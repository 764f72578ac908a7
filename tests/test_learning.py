"""Learning thresholds: the shipped hparam sets must solve their task.

Slow (a full 100k-step run each): `python -m pytest -m "not slow" tests` skips them.
"""

import json

import pytest

from rl.experiment import Experiment

pytestmark = pytest.mark.slow


def test_ppo_cartpole_reaches_475_within_100k_steps(tmp_path):
    exp = Experiment("ppo_cartpole", str(tmp_path / "run"), seed=0, verbose=False)
    result = exp.train()
    exp.close()
    assert result["step"] == 100_000  # 400-step rollouts divide the budget
    evals = [json.loads(l) for l in (tmp_path / "run" / "eval.jsonl").read_text().splitlines()]
    assert evals[-1]["step"] == 100_000
    assert evals[-1]["return_mean"] >= 475, [e["return_mean"] for e in evals]


def test_dqn_cartpole_reaches_475_within_100k_steps(tmp_path):
    exp = Experiment("dqn_cartpole", str(tmp_path / "run"), seed=0, verbose=False)
    result = exp.train()
    exp.close()
    assert result["step"] == 100_000
    evals = [json.loads(l) for l in (tmp_path / "run" / "eval.jsonl").read_text().splitlines()]
    assert evals[-1]["step"] == 100_000
    assert evals[-1]["return_mean"] >= 475, [e["return_mean"] for e in evals]
