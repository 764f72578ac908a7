"""Whole train.py runs, each a fresh process timed as a user sees it: one run of a set,
and a round of this checkout's run beside a --baseline checkout's."""

import os
from typing import Dict, List, Optional, Tuple

from scripts.bench import children


def run_once(
    hparams: str,
    seed: int,
    train_steps: Optional[int],
    output_dir: str,
    extra: List[str],
    checkout: str = children.ROOT,
) -> Dict[str, object]:
    """Runs train.py once and returns the row's numbers.

    Args:
      hparams: registered hparams set.
      seed: run seed.
      train_steps: env steps (None: the set's own budget).
      output_dir: a fresh folder for the run.
      extra: more train.py flags.
      checkout: the rl checkout whose train.py runs, in that folder (so it imports its
        own rl): this one, or a --baseline.
    """
    command = children.train_command(
        "--hparams", hparams, "--seed", str(seed), "--output_dir", output_dir, *extra,
        checkout=checkout,
    )  # fmt: skip
    if train_steps is not None:
        command += ["--train_steps", str(train_steps)]
    wall, stdout = children.timed_run(command, cwd=checkout)
    # Imported here, after the timed run: the peer and cost processes (this same
    # script) must not pay for rl's imports.
    from rl.logbook import EVAL_FILE, read_eval_records

    try:
        result = children.last_json_line(stdout)
        evals = read_eval_records(os.path.join(output_dir, EVAL_FILE))
        return {
            "hparams": hparams,
            "seed": seed,
            "steps": result["step"],
            "wall_s": wall,
            "steps_per_s": result["steps_per_second"],
            "final_return": evals[-1]["return_mean"],
            "eval_returns": evals[-1]["returns"],
            "evals": evals,
        }
    except (KeyError, IndexError, TypeError, ValueError, OSError) as e:
        if checkout == children.ROOT:
            raise  # this checkout's own output: a bug, with its traceback
        children.fail(
            f"--baseline {checkout}: the results of {children.describe_command(command)} cannot be "
            f"read ({type(e).__name__}: {e}); its train.py reports in another form than "
            "this checkout's, so give a later commit"
        )


def first_step_reaching(evals: List[dict], target: float) -> Optional[int]:
    """The env step of the first evaluation whose mean return reached ``target``; None if
    none did.

    Args:
      evals: a run's evaluation records, oldest first.
      target: the return counted as solved.
    """
    for record in evals:
        if record["return_mean"] >= target:
            return record["step"]
    return None


def checkout_runs(
    name: str,
    turn: int,
    seed: int,
    train_steps: Optional[int],
    extra: List[str],
    tmp: str,
    baseline: Optional[str],
) -> List[Tuple[str, dict]]:
    """One run of ``name`` by this checkout ("rl") and, with a --baseline, one by it
    ("base"), as [(side, run_once row)] in that order; a baseline that trains another
    number of steps ends the process (exit 2).

    Args:
      name: the hparams set.
      turn: the index of this round: the two checkouts take turns going first, so
        neither always follows the same run (the peer's, or the other checkout's).
      seed: the runs' seed.
      train_steps: env steps (None: the set's own budget).
      extra: more train.py flags.
      tmp: a folder for the run folders.
      baseline: the other checkout, or None.
    """
    sides = [("rl", children.ROOT)] + ([("base", baseline)] if baseline else [])
    rows = {}
    for side, checkout in sides if turn % 2 == 0 else sides[::-1]:
        folder = os.path.join(tmp, f"{name}-{seed}-{side}")
        rows[side] = run_once(name, seed, train_steps, folder, extra, checkout)
    if baseline and rows["base"]["steps"] != rows["rl"]["steps"]:
        children.fail(
            f"--baseline {baseline} trained {name} for {rows['base']['steps']} env steps and "
            f"this checkout for {rows['rl']['steps']}: the set differs between them; give "
            "--train_steps to compare equal budgets"
        )
    return [(side, rows[side]) for side, _ in sides]
