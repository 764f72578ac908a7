"""One trial: a ``train.py`` subprocess training into its own run folder.

``TrialProcess`` starts ``train.py`` and reads the evaluations its ``eval.jsonl`` holds so
far. With ``--sys ray`` the same class runs inside a Ray actor (``RayTrialProcess`` is
its stand-in here), so the subprocess and its run folder live on the node Ray chose.

The subprocess gets its own session, so Ctrl-C in a terminal reaches the search alone,
which then stops each trial with one SIGTERM (train.py saves a checkpoint and exits).
On Linux it also gets SIGTERM when the process that started it dies, so a search killed
with kill -9 leaves no training behind.
"""

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from rl.processes import RL_ROOT as ROOT
from rl.slots import Child

TRAIN_PY = os.path.join(ROOT, "train.py")
EVAL_FILE = "eval.jsonl"

# A trial's Ray actor answers each call (reading a few files) within this long, or it is
# taken as hung (its node stopped, say) and the trial as failed.
ACTOR_ANSWER_SECONDS = 60.0

# (step, return_mean) of one evaluation.
Evaluation = Tuple[int, float]


def train_command(
    hparams: str,
    run_dir: str,
    overrides: str,
    train_steps: Optional[int] = None,
    seed: Optional[int] = None,
    plugins: Sequence[str] = (),
    copies: int = 1,
    copies_parallel: int = 1,
) -> List[str]:
    """The ``train.py`` command of one trial.

    Args:
        hparams: the registered hparams set.
        run_dir: the trial's run folder.
        overrides: ``--hparam_override`` text (fixed and sampled values).
        train_steps: ``--train_steps``, or None for the set's.
        seed: ``--seed``, or None for the set's.
        plugins: ``--plugins`` modules.
        copies: ``--copies``: above 1, the trial trains that many copies in run_<i>.
        copies_parallel: ``--copies_parallel``: how many of them at once.
    """
    command = [sys.executable, TRAIN_PY, f"--hparams={hparams}", f"--output_dir={run_dir}"]
    command += [f"--plugins={name}" for name in plugins]
    if overrides:
        command.append(f"--hparam_override={overrides}")
    if train_steps is not None:
        command.append(f"--train_steps={train_steps}")
    if seed is not None:
        command.append(f"--seed={seed}")
    if copies > 1:
        command.append(f"--copies={copies}")
        if copies_parallel > 1:
            command.append(f"--copies_parallel={copies_parallel}")
    return command


def read_evaluations(run_dir: str, after_step: int, copies: int = 1) -> List[Evaluation]:
    """The (step, return_mean) of every complete evaluation in the run past ``after_step``.

    With copies, a step counts once every copy has evaluated there, and its value is
    the interquartile mean of the copies' ``return_mean`` (rl/analysis.py, as in the
    copies' summary.json), so the search scores a trial as the benchmark scores a set.

    Args:
        run_dir: the run folder; with copies, the folder holding run_0 .. run_<copies-1>.
        after_step: the last step already read (-1: none).
        copies: 1, or the trial's ``--copies``.
    """
    from rl.logbook import read_eval_records  # late: it loads TensorBoard

    def curve(folder: str) -> Dict[int, float]:
        records = read_eval_records(os.path.join(folder, EVAL_FILE))
        return {int(r["step"]): float(r["return_mean"]) for r in records if "return_mean" in r}

    if copies == 1:
        return [(step, value) for step, value in curve(run_dir).items() if step > after_step]
    from rl.analysis import interquartile_mean  # late: it loads TensorBoard

    curves = [curve(os.path.join(run_dir, f"run_{i}")) for i in range(copies)]
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    return [
        (step, interquartile_mean([c[step] for c in curves])) for step in steps if step > after_step
    ]


class TrialProcess:
    """A running ``train.py`` and the run folder it writes."""

    def __init__(
        self, command: List[str], run_dir: str, log_path: str, workdir: str = ROOT, copies: int = 1
    ):
        """Starts the command; its stdout and stderr go to ``log_path``.

        Args:
            command: from ``train_command``.
            run_dir: the run folder the command trains into.
            log_path: the file the subprocess's output is appended to.
            workdir: the folder it runs in (train.py finds ``--plugins`` there).
            copies: the command's ``--copies`` (1: none), for ``read_evaluations``.
        """
        self.run_dir = run_dir
        self.copies = copies
        self.log_path = log_path
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
        self.process = Child(command, env, cwd=workdir, output=log_path, own_session=True)

    def poll(self, after_step: int) -> Tuple[List[Evaluation], Optional[int]]:
        """The new evaluations and the exit code (None while it runs).

        The exit code is read first, so once it is set every evaluation is in the list.

        Args:
            after_step: the last step already read (-1: none).
        """
        code = self.process.poll()
        return read_evaluations(self.run_dir, after_step, self.copies), code

    def terminate(self) -> None:
        """Asks train.py to stop (SIGTERM: it saves a checkpoint and exits)."""
        self.process.terminate()

    def kill(self) -> None:
        """Stops it and every process it started (a trial's copies) at once (SIGKILL)."""
        self.process.kill()  # its own session: its process group holds the copies too

    def last_line(self) -> str:
        """The last line of its output, e.g. train.py's reason for stopping."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 4096))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in tail.replace("\r", "\n").splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def close(self) -> None:
        """Kills the subprocess if it still runs."""
        self.kill()


class RayTrialProcess:
    """A TrialProcess inside a Ray actor, driven from here with the same methods.

    An actor that dies, or does not answer a call within ``ACTOR_ANSWER_SECONDS``, counts
    as a trial whose train.py failed (exit code 1), with the reason as its last line. It
    asks for a CPU per copy that trains at once.
    """

    def __init__(
        self,
        command: List[str],
        run_dir: str,
        log_path: str,
        workdir: str = ROOT,
        copies: int = 1,
        cpus: int = 1,
    ):
        import ray

        self._ray = ray
        self._error = ""
        actor_class = ray.remote(num_cpus=cpus, max_restarts=0)(TrialProcess)
        self.actor = actor_class.remote(command, run_dir, log_path, workdir, copies)

    def _call(self, method: str, *args):
        if self._error:  # it failed or hung before: no second wait
            return None
        try:
            return self._ray.get(
                getattr(self.actor, method).remote(*args), timeout=ACTOR_ANSWER_SECONDS
            )
        except self._ray.exceptions.GetTimeoutError:
            self._error = (
                f"the Ray actor did not answer {method} within {ACTOR_ANSWER_SECONDS:g} s "
                "(hung, or its node stopped)"
            )
            return None
        except self._ray.exceptions.RayError as e:
            self._error = self._error or f"the Ray actor failed: {' '.join(str(e).split())[:300]}"
            return None

    def poll(self, after_step: int) -> Tuple[List[Evaluation], Optional[int]]:
        result = self._call("poll", after_step)
        return result if result is not None else ([], 1)

    def terminate(self) -> None:
        self._call("terminate")

    def kill(self) -> None:
        self._call("kill")

    def last_line(self) -> str:
        return self._error or self._call("last_line") or ""

    def close(self) -> None:
        """Kills the subprocess, then the actor (a train.py whose actor is killed gets
        SIGTERM: ``Child``'s die-with-parent hook)."""
        self.kill()
        self._ray.kill(self.actor, no_restart=True)
