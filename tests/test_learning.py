"""Learning thresholds: the shipped hparam sets must solve their task."""

import json

from rl.experiment import Experiment


def test_ppo_cartpole_reaches_475_within_100k_steps(tmp_path):
    exp = Experiment("ppo_cartpole", str(tmp_path / "run"), seed=0, verbose=False)
    result = exp.train()
    exp.close()
    assert result["step"] == 100_000  # 400-step rollouts divide the budget
    evals = [json.loads(l) for l in (tmp_path / "run" / "eval.jsonl").read_text().splitlines()]
    assert evals[-1]["step"] == 100_000
    assert evals[-1]["return_mean"] >= 475, [e["return_mean"] for e in evals]
