"""The study behind a search: where it is kept, how a search resumes, and the trial loop.

A search's trials live in an Optuna study, by default in ``<output_dir>/study.db``
(SQLite). The study records what every trial measures (the hparams set, the resolved
hparams it starts from, the space; ``study_record``): a rerun with other settings is
refused, one with the same settings continues until ``trials`` trials are done.

Done means COMPLETE, PRUNED, or FAIL because training failed (train.py's exit code, a
sampled combination the hparams refuse). A trial stopped because the search stopped --
Ctrl-C, SIGTERM, or a kill -9 of the search, found on the next start as a trial still
RUNNING -- is marked FAIL without a failure and its params are queued again
(``enqueue_trial``) as a new trial with a new run folder; the stopped trial's folder
stays as it was, never counted as a result. So is, once, a trial whose train.py was
killed by a signal from outside (the OOM killer, a kill -9). Only one search runs in an
output folder at a time (``search.lock``), so on start every RUNNING trial of its own
folder is stale.
"""

import dataclasses
import json
import math
import os
import re
import signal
import socket
import sys
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from rl import files
from rl.errors import RunConflictError, SystemUnavailableError
from rl.hparams.base import HParams, HParamsError
from rl.hparams.resolve import resolve_hparams
from rl.logbook import JsonLinesError
from rl.registry import UnknownNameError
from rl.run_folder import check_output_dir, foreign_names
from rl.search.space import SearchSpace, overrides_text, space_to_json
from rl.search.trials import ROOT, RayTrialProcess, TrialProcess, train_command
from rl.slots import Slots
from rl.workers import ray_actors

STUDY_FILE = "study.db"
LOCK_FILE = "search.lock"
LOG_DIR = "logs"
TRIAL_FOLDER = re.compile(r"trial_(\d+)")
DEFAULT_STUDY_NAME = "rl_search"
OBJECTIVE = "return_mean of the final evaluation"
SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "asha", "none")
SYSTEMS = ("local", "ray")
DEFAULT_STARTUP_TRIALS = 5  # Optuna's MedianPruner default
ASHA_REDUCTION_FACTOR = 3

# Attributes: the study's record; each trial's run folder (relative to the search's, so
# a search folder can be moved), the search folder and host that ran it, why it failed,
# and which trial it repeats.
RECORD = "rl.search"
RUN_FOLDER = "run_folder"
OUTPUT_DIR = "output_dir"
HOST = "host"
FAILURE = "failure"
RETRY_OF = "retry_of"
STOPPED = "stopped"  # why a trial that is not a result stopped, when not with the search

STOP_GRACE_SECONDS = 120.0  # a stopped train.py's time to checkpoint before SIGKILL
PRUNED, INTERRUPTED = "pruned", "interrupted"


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """What one ``python -m rl.search`` command asks for.

    Attributes:
        hparams: the registered hparams set every trial starts from.
        base: that set resolved with ``fixed_overrides``, ``train_steps`` and ``seed``.
        space: the checked search space.
        output_dir: the search's folder (absolute).
        trials: how many done trials the study should hold.
        fixed_overrides: ``--hparam_override`` text every trial shares.
        train_steps: ``--train_steps`` passed to every trial, or None.
        seed: ``--seed`` passed to every trial, or None (the set's seed).
        parallel: trials running at once.
        system: "local" (subprocesses here) or "ray" (each in a Ray actor).
        storage: an Optuna storage URL; None: SQLite in ``output_dir/study.db``.
        study_name: the study's name in the storage.
        sampler: one of SAMPLERS.
        pruner: one of PRUNERS.
        pruner_startup_trials: median: completed trials before any pruning.
        pruner_warmup_steps: median: steps before a trial can be pruned; asha: the first
            rung's step (0: Optuna's "auto").
        plugins: ``--plugins`` modules every trial's train.py imports.
        workdir: the folder trials run in (the search's: plugins found there are found).
        copies: each trial trains this many copies (train.py ``--copies``) and scores the
            interquartile mean of their evaluations; 1: one run.
        copies_parallel: how many of a trial's copies train at once.
    """

    hparams: str
    base: HParams
    space: SearchSpace
    output_dir: str
    trials: int
    fixed_overrides: str = ""
    train_steps: Optional[int] = None
    seed: Optional[int] = None
    parallel: int = 1
    system: str = "local"
    storage: Optional[str] = None
    study_name: str = DEFAULT_STUDY_NAME
    sampler: str = "tpe"
    pruner: str = "median"
    pruner_startup_trials: int = DEFAULT_STARTUP_TRIALS
    pruner_warmup_steps: int = 0
    plugins: Tuple[str, ...] = ()
    workdir: str = ROOT
    copies: int = 1
    copies_parallel: int = 1


def objective(copies: int) -> str:
    """What a trial's value is, for the study's record and the results."""
    if copies == 1:
        return OBJECTIVE
    return f"interquartile mean over {copies} copies of the final evaluation's return_mean"


def import_optuna():
    """Optuna, quiet: its per-trial log lines and experimental-feature warnings hidden."""
    try:
        import optuna
    except ImportError:
        raise SystemUnavailableError(
            "python -m rl.search needs Optuna: pip install -e '.[search]'"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def storage_url(config: SearchConfig) -> str:
    """The storage URL: ``--storage``, or SQLite in the output folder."""
    return config.storage or f"sqlite:///{os.path.join(config.output_dir, STUDY_FILE)}"


def study_record(config: SearchConfig) -> Dict[str, Any]:
    """What every trial of the study measures; a resumed search must ask for the same.

    The JSON round trip makes it compare equal to the copy the study stores.
    """
    record = {
        "hparams": config.hparams,
        "base": config.base.to_dict(),
        "space": space_to_json(config.space),
        "objective": objective(config.copies),
    }
    return json.loads(json.dumps(record))


def record_differences(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """What differs between two study records, as ``name: old -> new`` texts."""
    changes = []
    if old.get("hparams") != new["hparams"]:
        changes.append(f"--hparams: {old.get('hparams')!r} -> {new['hparams']!r}")
    old_base = old.get("base") if isinstance(old.get("base"), dict) else {}
    for name in sorted(set(old_base) | set(new["base"])):
        if old_base.get(name) != new["base"].get(name):
            changes.append(f"{name}: {old_base.get(name)!r} -> {new['base'].get(name)!r}")
    if old.get("space") != new["space"]:
        changes.append("the search space")
    if old.get("objective") != new["objective"]:
        changes.append(f"the objective: {old.get('objective')!r} -> {new['objective']!r}")
    return changes


def trial_folders(output_dir: str) -> List[str]:
    """The ``trial_<n>`` folders in the output folder, by number."""
    if not os.path.isdir(output_dir):
        return []
    names = [n for n in os.listdir(output_dir) if TRIAL_FOLDER.fullmatch(n)]
    return sorted(
        (n for n in names if os.path.isdir(os.path.join(output_dir, n))),
        key=lambda n: int(n.split("_")[1]),
    )


def load_existing_study(config: SearchConfig):
    """The study a previous search left, or None; creates nothing for the default storage.

    Raises:
        SystemUnavailableError: the storage cannot be opened.
    """
    optuna = import_optuna()
    if config.storage is None and not os.path.exists(os.path.join(config.output_dir, STUDY_FILE)):
        return None
    try:
        return optuna.load_study(study_name=config.study_name, storage=storage_url(config))
    except KeyError:  # no study of that name there
        return None
    except Exception as e:  # SQLAlchemy's and Optuna's storage errors share no base
        hint = (
            "; --storage takes an Optuna (SQLAlchemy) database URL, e.g. "
            "sqlite:///runs/search/study.db or postgresql://user@host/db"
            if config.storage
            else ""
        )
        raise SystemUnavailableError(
            f"cannot open the study storage {storage_url(config)}: {' '.join(str(e).split())}{hint}"
        ) from None


def check_resume(config: SearchConfig, study) -> None:
    """Refuses an output folder whose study or trial folders this search cannot continue.

    Args:
        config: the search asked for.
        study: the study already in the storage, or None.

    Raises:
        RunConflictError: an output folder that is a file or cannot be written, a study
            with other settings, one not made by rl.search, a new study in a folder that
            holds something else (a train.py run, a tournament), or trial folders the
            study does not know (e.g. study.db was deleted).
    """
    check_output_dir(config.output_dir)
    where = f"study {config.study_name!r} in {storage_url(config)}"
    if study is None and os.path.isdir(config.output_dir):
        shown = foreign_names(config.output_dir, ours=(LOCK_FILE, STUDY_FILE))
        if shown:
            raise RunConflictError(
                f"{config.output_dir} holds files ({shown}) but no {where}: it is not this "
                "search's folder; use a new or empty --output_dir"
            )
    if study is not None:
        old = study.user_attrs.get(RECORD)
        if not isinstance(old, dict):
            raise RunConflictError(f"{where} was not made by python -m rl.search; use another")
        changes = record_differences(old, study_record(config))
        if changes:
            raise RunConflictError(
                f"{where} was started with other settings ({'; '.join(changes)}); rerun with "
                "its settings to continue it, or use another --output_dir"
            )
    known = set()
    if study is not None:
        known = {t.user_attrs.get(RUN_FOLDER) for t in study.get_trials(deepcopy=False)}
    strangers = [n for n in trial_folders(config.output_dir) if n not in known]
    if strangers:
        raise RunConflictError(
            f"{os.path.join(config.output_dir, strangers[0])} belongs to no trial of {where}; "
            "move the trial folders away or use another --output_dir"
        )


def lock_output_dir(output_dir: str) -> int:
    """Creates the output folder and holds its lock for this process's life.

    Returns:
        The lock file's descriptor (the lock goes when the process ends, even by kill -9).

    Raises:
        RunConflictError: another search holds it.
    """
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, LOCK_FILE)
    fd = files.lock_exclusively(path)
    if fd is None:
        raise RunConflictError(
            f"another search is running in {output_dir} (it holds {path}); wait for it to end"
        )
    return fd


def make_sampler(config: SearchConfig, trials_before: int = 0):
    """TPE or random, seeded with the trials' seed, so a search is repeatable.

    Args:
        config: the search.
        trials_before: trials the study already holds; a resumed search's sampler is
            seeded past them, or its first random draws would repeat the first trials'.
    """
    optuna = import_optuna()
    seed = config.base.seed + trials_before
    if config.sampler == "tpe":
        # constant_liar: trials running side by side are not sampled at the same point.
        return optuna.samplers.TPESampler(seed=seed, constant_liar=config.parallel > 1)
    return optuna.samplers.RandomSampler(seed=seed)


def make_pruner(config: SearchConfig):
    """Median, successive halving (ASHA) or none, on the evaluation curve."""
    optuna = import_optuna()
    if config.pruner == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=config.pruner_startup_trials,
            n_warmup_steps=config.pruner_warmup_steps,
        )
    if config.pruner == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=config.pruner_warmup_steps or "auto",
            reduction_factor=ASHA_REDUCTION_FACTOR,
        )
    return optuna.pruners.NopPruner()


def open_study(config: SearchConfig):
    """The study, created with its record if new."""
    optuna = import_optuna()
    study = optuna.create_study(
        study_name=config.study_name,
        storage=storage_url(config),
        sampler=make_sampler(config),
        pruner=make_pruner(config),
        direction="maximize",
        load_if_exists=True,
    )
    if RECORD not in study.user_attrs:
        study.set_user_attr(RECORD, study_record(config))
    trials_before = len(study.get_trials(deepcopy=False))
    if trials_before:
        study.sampler = make_sampler(config, trials_before)
    return study


def counts_as_done(trial) -> bool:
    """COMPLETE, PRUNED, or FAIL because training failed (not because the search stopped)."""
    name = trial.state.name
    return name in ("COMPLETE", "PRUNED") or (name == "FAIL" and FAILURE in trial.user_attrs)


def done_count(study) -> int:
    return sum(counts_as_done(t) for t in study.get_trials(deepcopy=False))


def is_ours(trial, config: SearchConfig) -> bool:
    """Whether a trial was started by a search in this output folder on this host."""
    if config.storage is None:
        return True  # the study lives in the output folder, which one search holds
    return (
        trial.user_attrs.get(HOST) == socket.gethostname()
        and trial.user_attrs.get(OUTPUT_DIR) == config.output_dir
    )


def retry(study, number: int, params: Dict[str, Any]) -> None:
    """Queues ``params`` again as a new trial that records which trial it repeats."""
    if params:
        study.enqueue_trial(params, user_attrs={RETRY_OF: number})


def fail_stale_trials(study, config: SearchConfig, say: Callable[[str], None]) -> None:
    """Marks this folder's trials left RUNNING by a killed search FAIL and queues them again."""
    trial_state = import_optuna().trial.TrialState
    for trial in study.get_trials(deepcopy=False, states=(trial_state.RUNNING,)):
        if not is_ours(trial, config):
            continue
        study.tell(trial.number, state=trial_state.FAIL)
        retry(study, trial.number, trial.params)
        say(
            f"trial {trial.number} was running when the search was stopped: marked failed, "
            "its params are queued again"
        )


@dataclasses.dataclass
class Running:
    """A trial whose train.py runs."""

    trial: Any  # optuna.Trial
    process: Any  # TrialProcess or RayTrialProcess
    final_step: int  # its train_steps: an evaluation there ends the run, pruned or not
    last_step: int = -1
    last_value: Optional[float] = None
    stop: Optional[str] = None  # PRUNED or INTERRUPTED once asked to stop
    unreadable: Optional[str] = None  # why its evaluations cannot be read

    def terminate(self) -> None:
        """Asks train.py to stop; unless it was pruned, it stops with the search."""
        self.stop = self.stop or INTERRUPTED
        self.process.terminate()

    def kill(self) -> None:
        self.process.kill()


class Search:
    """Runs trials until the study holds ``config.trials`` done ones, or a signal comes."""

    def __init__(
        self,
        config: SearchConfig,
        study,
        say: Callable[[str], None],
        on_finish: Callable[[], None] = lambda: None,
    ):
        """Args:
        config: the search.
        study: from ``open_study``.
        say: prints one progress line.
        on_finish: called after each trial ends (the results are written there).
        """
        self.config = config
        self.study = study
        self.say = say
        # Ctrl-C reaches the search alone (each trial has its own session); the trials
        # get one SIGTERM each, and a second signal kills them.
        self.slots = Slots(
            config.parallel,
            catch=(signal.SIGINT, signal.SIGTERM),
            grace_seconds=STOP_GRACE_SECONDS,
            on_signal=self._on_signal,
            second_signal_kills=True,
        )
        self.launch = RayTrialProcess if config.system == "ray" else TrialProcess
        self.state = import_optuna().trial.TrialState
        self.on_finish = on_finish

    def run(self) -> Optional[int]:
        """Runs the loop; returns the signal that stopped it, or None."""
        try:
            return self.slots.run(self._next_trial, self._check, self._ended)
        finally:
            for running in self.slots.running:
                running.process.close()

    def _on_signal(self, signum: int) -> None:
        self.say(
            f"got signal {signum}: stopping the running trials (each saves a checkpoint); "
            "rerun the same command to continue the search"
        )

    def _next_trial(self) -> Optional[Running]:
        """Starts the next trial, if the study needs more than are done and running."""
        done = done_count(self.study)
        while done + len(self.slots.running) < self.config.trials:
            running = self._start_trial()
            if running is not None:
                return running
            done += 1  # refused before it started: done already
        return None

    def _start_trial(self) -> Optional[Running]:
        config = self.config
        trial = self.study.ask()
        params = {d.name: d.suggest(trial) for d in config.space}
        folder = f"trial_{trial.number}"
        run_dir = os.path.join(config.output_dir, folder)
        for key, value in (
            (RUN_FOLDER, folder),
            (OUTPUT_DIR, config.output_dir),
            (HOST, socket.gethostname()),
        ):
            trial.set_user_attr(key, value)  # first, so that a kill leaves them: see is_ours
        sampled = overrides_text(params)
        try:
            hp = resolve_hparams(config.base, sampled)
            if os.path.exists(run_dir):
                raise RunConflictError(f"{run_dir} exists already")
        except (HParamsError, UnknownNameError, RunConflictError) as e:
            self._fail(trial, f"not started: {e}")
            return None
        command = train_command(
            config.hparams,
            run_dir,
            overrides_text(params, config.fixed_overrides),
            config.train_steps,
            config.seed,
            config.plugins,
            config.copies,
            config.copies_parallel,
        )
        log_path = os.path.join(config.output_dir, LOG_DIR, f"trial_{trial.number}.log")
        launch_options = {"copies": config.copies}
        if self.launch is RayTrialProcess:
            launch_options["cpus"] = config.copies_parallel
        process = self.launch(command, run_dir, log_path, config.workdir, **launch_options)
        retry_of = trial.user_attrs.get(RETRY_OF)
        again = f" (trial {retry_of} again)" if retry_of is not None else ""
        self.say(f"trial {trial.number} started{again}: {sampled}")
        return Running(trial, process, final_step=hp.train_steps)

    def _check(self, running: Running) -> Optional[int]:
        """Reports a trial's new evaluations (pruning it if Optuna says so); its exit
        code, or None while it runs."""
        try:
            evaluations, code = running.process.poll(running.last_step)
        except JsonLinesError as e:  # damaged from outside: train.py only appends whole lines
            running.unreadable = f"its evaluations cannot be read: {e}"
            running.process.close()
            return 1
        # The final evaluation is in: the run has finished, whatever the earlier ones that
        # came with it say (evaluations arrive with the checkpoint that covers them).
        finished = bool(evaluations) and evaluations[-1][0] >= running.final_step
        for step, value in evaluations:
            if running.stop == PRUNED:
                break  # the curve ends where it was pruned
            if math.isfinite(value):
                running.trial.report(value, step)
            running.last_step, running.last_value = step, value
            if (
                running.stop is None
                and not finished
                and code is None
                and running.trial.should_prune()
            ):
                running.stop = PRUNED
                self.slots.terminate(running)
        return code

    def _ended(self, running: Running, code: int) -> None:
        if running.unreadable is not None:
            self._fail(running.trial, running.unreadable)
        else:
            self._finish(running, code)
        running.process.close()
        self.on_finish()

    def _finish(self, running: Running, code: int) -> None:
        trial, n = running.trial, running.trial.number
        at = f"at step {running.last_step}: return {running.last_value}"
        if running.stop == PRUNED:
            self.study.tell(trial, state=self.state.PRUNED)
            self.say(f"trial {n} pruned {at}")
        elif code == 0 and running.last_value is not None and not math.isfinite(running.last_value):
            self._fail(trial, f"its final evaluation is {running.last_value}")
        elif code == 0 and running.last_value is not None:
            self.study.tell(trial, running.last_value)
            self.say(f"trial {n} complete {at}")
        elif running.stop == INTERRUPTED:
            self.study.tell(trial, state=self.state.FAIL)
            retry(self.study, n, trial.params)
            self.say(f"trial {n} stopped with the search; its params are queued again")
        elif code < 0 and RETRY_OF not in trial.user_attrs:
            # Killed from outside (the OOM killer, a kill -9): no verdict on its params.
            # Once only: a retry killed again fails, so a search cannot loop for ever.
            trial.set_user_attr(STOPPED, f"killed by signal {-code}")
            self.study.tell(trial, state=self.state.FAIL)
            retry(self.study, n, trial.params)
            self.say(f"trial {n} was killed by signal {-code}; its params are queued again")
        elif code == 0:
            self._fail(trial, "train.py wrote no evaluation")
        else:
            self._fail(trial, f"train.py exited with code {code}: {running.process.last_line()}")

    def _fail(self, trial, reason: str) -> None:
        trial.set_user_attr(FAILURE, reason)
        self.study.tell(trial, state=self.state.FAIL)
        self.say(f"trial {trial.number} failed: {reason}")


def connect_ray(config: SearchConfig) -> None:
    """Attaches to Ray (RAY_ADDRESS) or starts a local Ray with a CPU per copy that trains
    at once."""
    cpus = config.parallel * config.copies_parallel
    ray_actors.connect(os.environ.get("RAY_ADDRESS"), max(os.cpu_count() or 1, cpus))


def disconnect_ray() -> None:
    ray_actors.disconnect()


def say_line(text: str) -> None:
    print(f"rl.search: {text}", file=sys.stderr, flush=True)
