"""Writing a run's eval.jsonl by hand, as train.py writes it, for tests that read logs."""

import json
import os


def record(step: int, return_mean: float) -> dict:
    """One evaluation line's fields."""
    return {
        "step": step,
        "return_mean": return_mean,
        "return_std": 1.0,
        "episodes": 5,
        "wall_time": step / 100.0,
    }


def write_run(run_dir, steps, returns, tail: str = "") -> str:
    """Writes an eval.jsonl with one line per (step, return), then `tail` verbatim."""
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "eval.jsonl"), "w") as f:
        for step, ret in zip(steps, returns):
            f.write(json.dumps(record(step, ret)) + "\n")
        f.write(tail)
    return str(run_dir)
