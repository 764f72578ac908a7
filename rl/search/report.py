"""A search's results: the trial table, the best hparams and two plots.

``write_results`` writes ``trials.csv`` and ``best.json`` (after every finished trial, so
a killed search leaves them current); ``write_plots`` draws ``history.png`` and
``importances.png`` with ``optuna.visualization.matplotlib`` at the end.
"""

import csv
import io
import json
import os
import shlex
from typing import Any, Dict, List, Optional

from rl.files import write_bytes_atomic, write_text_atomic
from rl.search.space import overrides_text
from rl.search.study import FAILURE, RETRY_OF, RUN_FOLDER, STOPPED, SearchConfig, objective

TRIALS_CSV = "trials.csv"
BEST_JSON = "best.json"
HISTORY_PNG = "history.png"
IMPORTANCES_PNG = "importances.png"
COLUMNS = ("number", "state", "value", "last_step", "params", "run_folder", "note")


def trial_note(trial, retried_as: Dict[int, int]) -> str:
    """Why a trial is in its state, in a few words."""
    state = trial.state.name
    notes = []
    if RETRY_OF in trial.user_attrs:
        notes.append(f"retry of trial {trial.user_attrs[RETRY_OF]}")
    if state == "FAIL":
        if FAILURE in trial.user_attrs:
            notes.append(trial.user_attrs[FAILURE])
        else:
            again = retried_as.get(trial.number)
            notes.append(
                trial.user_attrs.get(STOPPED, "stopped with the search")
                + (f"; retried as trial {again}" if again is not None else "")
            )
    elif state == "PRUNED":
        notes.append(f"pruned at step {trial.last_step}")
    elif state == "WAITING":
        notes.append("queued")
    return "; ".join(notes)


def trial_rows(study) -> List[Dict[str, Any]]:
    """One row per trial: number, state, value, last_step, params, run_folder, note.

    ``params`` is the trial's sampled values as ``--hparam_override`` text, ``run_folder``
    its folder relative to the search's.
    """
    trials = study.get_trials(deepcopy=False)
    retried_as = {t.user_attrs[RETRY_OF]: t.number for t in trials if RETRY_OF in t.user_attrs}
    rows = []
    for trial in trials:
        rows.append(
            {
                "number": trial.number,
                "state": trial.state.name,
                "value": trial.value,
                "last_step": trial.last_step,
                "params": overrides_text(trial.params),
                "run_folder": trial.user_attrs.get(RUN_FOLDER, ""),
                "note": trial_note(trial, retried_as),
            }
        )
    return rows


def format_table(rows: List[Dict[str, Any]]) -> str:
    """The rows as an aligned text table (values to one decimal)."""

    def cell(name: str, value: Any) -> str:
        if value is None:
            return "-"
        return f"{value:.1f}" if name == "value" else str(value)

    table = [list(COLUMNS)] + [[cell(c, row[c]) for c in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in table
    )


def best_summary(study, config: SearchConfig) -> Optional[Dict[str, Any]]:
    """The best complete trial and a ready command, or None if no trial completed."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if not complete:
        return None
    best = study.best_trial
    override = overrides_text(best.params, config.fixed_overrides)
    command = ["python", "train.py", "--hparams", config.hparams]
    for name in config.plugins:
        command += ["--plugins", name]
    command += ["--hparam_override", override]
    if config.train_steps is not None:
        command += ["--train_steps", str(config.train_steps)]
    if config.seed is not None:
        command += ["--seed", str(config.seed)]
    if config.copies > 1:  # the same measurement as the trial's: its copies and seeds
        command += ["--copies", str(config.copies)]
    return {
        "number": best.number,
        "value": best.value,
        "objective": objective(config.copies),
        "params": best.params,
        "hparam_override": override,
        "command": shlex.join(command + ["--output_dir", "runs/best"]),
        "run_folder": best.user_attrs.get(RUN_FOLDER, ""),
    }


def write_results(study, config: SearchConfig) -> Optional[Dict[str, Any]]:
    """Writes trials.csv and best.json (removing a best.json no trial supports now).

    Returns:
        The best_summary, or None.
    """
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(trial_rows(study))
    write_text_atomic(os.path.join(config.output_dir, TRIALS_CSV), buffer.getvalue())
    best = best_summary(study, config)
    path = os.path.join(config.output_dir, BEST_JSON)
    if best is not None:
        write_text_atomic(path, json.dumps(best, indent=2) + "\n")
    elif os.path.exists(path):
        os.remove(path)
    return best


def importance_problem(study) -> Optional[str]:
    """Why parameter importances cannot be computed, or None."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if len(complete) < 2:
        return f"they need at least 2 complete trials, the study has {len(complete)}"
    names = set().union(*(t.params for t in complete))
    if not any(len({repr(t.params.get(n)) for t in complete}) > 1 for n in names):
        return "the complete trials' params do not vary"
    return None


def _save_axes(axes, path: str) -> None:
    import matplotlib.pyplot as plt

    figure = axes.figure
    figure.set_size_inches(8, 5)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    write_bytes_atomic(path, buffer.getvalue())


def write_plots(study, output_dir: str) -> List[str]:
    """Draws history.png and importances.png; returns a line for each plot not drawn.

    A plot that cannot be drawn now is removed if an earlier run of the search left one.
    """
    import matplotlib

    matplotlib.use("Agg")
    import optuna
    from optuna.visualization import matplotlib as plots

    skipped = []
    history = os.path.join(output_dir, HISTORY_PNG)
    importances = os.path.join(output_dir, IMPORTANCES_PNG)
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if complete:
        _save_axes(plots.plot_optimization_history(study), history)
    else:
        skipped.append(f"{HISTORY_PNG} not drawn: no trial is complete")
    problem = importance_problem(study)
    if problem is None:
        # PED-ANOVA: Optuna's own code, where its default (fANOVA) needs scikit-learn.
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        try:
            _save_axes(plots.plot_param_importances(study, evaluator=evaluator), importances)
        except (ValueError, RuntimeError) as e:
            problem = " ".join(str(e).split())
    if problem is not None:
        skipped.append(f"{IMPORTANCES_PNG} not drawn: {problem}")
    for path, drawn in ((history, bool(complete)), (importances, problem is None)):
        if not drawn and os.path.exists(path):
            os.remove(path)
    return skipped
