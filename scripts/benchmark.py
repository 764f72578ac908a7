"""Speed and learning benchmark: whole train.py runs, one table.

    python scripts/benchmark.py                      # ppo_cartpole, dqn_cartpole
    python scripts/benchmark.py --hparams ppo_cartpole --seeds 0 1 2

Each run is a fresh `python train.py` process, so wall time includes Python
and TensorFlow start-up, tracing and compilation, as a user sees it. The
table gives wall time, env steps per second in the training loop, the final
evaluation return and the first step at which evaluation reached the target.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")


def run_once(
    hparams: str, seed: int, train_steps: Optional[int], output_dir: str, extra: List[str]
) -> Dict[str, object]:
    """Runs train.py once and returns the row's numbers.

    Args:
      hparams: registered hparams set.
      seed: run seed.
      train_steps: env steps (None: the set's own budget).
      output_dir: a fresh folder for the run.
      extra: more train.py flags.
    """
    command = [
        sys.executable,
        TRAIN,
        "--hparams",
        hparams,
        "--seed",
        str(seed),
        "--output_dir",
        output_dir,
        *extra,
    ]
    if train_steps:
        command += ["--train_steps", str(train_steps)]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    with open(os.path.join(output_dir, "eval.jsonl")) as f:
        evals = [json.loads(line) for line in f]
    return {
        "hparams": hparams,
        "seed": seed,
        "steps": result["step"],
        "wall_s": wall,
        "steps_per_s": result["steps_per_second"],
        "final_return": evals[-1]["return_mean"],
        "evals": evals,
    }


def first_step_reaching(evals: List[dict], target: float) -> Optional[int]:
    for record in evals:
        if record["return_mean"] >= target:
            return record["step"]
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hparams", nargs="+", default=["ppo_cartpole", "dqn_cartpole"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--train_steps", type=int, default=None)
    parser.add_argument(
        "--target", type=float, default=475.0, help="evaluation return counted as solved"
    )
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args, extra = parser.parse_known_args(argv)
    rows = []
    header = (
        f"{'hparams':<14} {'seed':>4} {'steps':>8} {'wall s':>7} "
        f"{'steps/s':>8} {'final eval':>10} {'solved at':>9}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as tmp:
        for name in args.hparams:
            for seed in args.seeds:
                row = run_once(
                    name, seed, args.train_steps, os.path.join(tmp, f"{name}-{seed}"), extra
                )
                solved = first_step_reaching(row["evals"], args.target)
                row["solved_at"] = solved
                rows.append(row)
                print(
                    f"{name:<14} {seed:>4} {row['steps']:>8} {row['wall_s']:>7.1f} "
                    f"{row['steps_per_s']:>8.0f} {row['final_return']:>10.1f} "
                    f"{solved if solved is not None else '-':>9}",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: v for k, v in r.items() if k != "evals"} for r in rows], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
