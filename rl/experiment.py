"""An experiment: one agent trained, evaluated and checkpointed in one folder.

``train.py`` is a thin layer over this class; notebooks use it directly:

    exp = rl.Experiment(hparams="ppo_cartpole", output_dir="runs/x")
    result = exp.train()          # resumes from runs/x if it holds a run
    exp.evaluate(episodes=10)

This module holds the training loop; the output folder (hparams, snapshot,
checkpoints, resume checks) is ``rl/run_folder.py`` and evaluation is
``rl/evaluation.py``, so a loop fed by remote actors can reuse both.

Summaries and eval lines reach disk together with the checkpoint that covers
them (rl/logbook.py), so a run killed at any moment and resumed never logs a
step twice or loses one: TensorBoard steps neither go backwards nor double.
"""

from __future__ import annotations

import collections
import math
import os
import signal
import sys
import tempfile
import threading
import time
from typing import Any, BinaryIO, Callable, Dict, List, NoReturn, Optional, Union

import numpy as np

from rl import catalog, registry, seeding, video  # noqa: F401  (catalog fills the registries)
from rl._tf import tf
from rl.agents.base import Agent, NonFiniteError
from rl.agents.experience import ExperienceSource, OwnActor
from rl.best import (
    BEST,
    LATEST,
    BestRecord,
    drop_earlier_bests,
    is_better,
    restore_best,
    tidy_best,
    write_best,
)
from rl.counters import Counters
from rl.early_checks import CheckedRun, check_run
from rl.envs.env_errors import make_vec_env_naming_errors
from rl.envs.make import episode_cap
from rl.errors import (  # noqa: F401  (CheckpointError, RunConflictError: re-exported)
    CheckpointError,
    EnvError,
    EnvServerError,
    RunConflictError,
    error_line,
)
from rl.evaluation import EvaluationStopped, Evaluator
from rl.hparams.base import HParams, HParamsError
from rl.hparams.resolve import HPARAMS_FILE, load_run_hparams
from rl.logbook import EVAL_FILE, read_eval_records, recent_scalars
from rl.policy import (
    RUN_DIR_VARIABLE,
    artefact_dir,
    export_missing_policy,
    tidy_policies,
    write_policy_artefact,
)
from rl.processes import EARLY_INTERRUPT, STOP_ASKED, WorkerSettings
from rl.run_folder import (  # noqa: F401  (re-exported: older callers import them from here)
    CHECKPOINT_DIR,
    CHECKPOINT_INDEX,
    CHECKPOINT_SHAPE_FIELDS,
    UNREADABLE_DIR,
    RunFolder,
    check_output_dir,
    check_resume,
    checkpoint_step,
    checkpoint_steps,
    fallback_notice,
    listed_checkpoints,
    lock_run_folder,
    move_aside,
    read_eval_file,
    say,
    write_checkpoint_index,
)
from rl.systems import System
from rl.tracking import FAILED, FINISHED, KILLED, NoTracking, Tracker
from rl.workers.experience import WorkerPool
from rl.workers.pool import RoundAbandoned, WorkerFailure

# After a signal, how long training may go on to finish the rollout under way (a clean
# point to checkpoint at). Past it the run stops without a checkpoint, as a kill would,
# keeping the last one: a run ends well within 10 s of SIGTERM (the save, the clean-up and
# the interpreter's exit with TensorFlow loaded, 3-4 s on a loaded 2-core machine, take the
# rest), however slow its env or long its rollouts, or hung its workers.
SIGNAL_GRACE_SECONDS = 3.0


def build_envs_and_agent(hp: HParams, num_envs: Optional[int] = None):
    """The training envs and the agent; any mismatch becomes one HParamsError.

    Built before anything is written, so e.g. a Box-action env for a
    discrete agent or an unknown activation leaves no files behind.

    Args:
        hp: the run's hparams.
        num_envs: env copies to build here (default ``hp.num_envs``; one when
            actor processes step them and this process only reads the spaces).
    """
    # What the env raises in training is an EnvError naming it (rl/envs/make.py).
    envs = make_vec_env_naming_errors(
        hp.env,
        num_envs or hp.num_envs,
        "training",
        hp.vectorization,
        max_episode_steps=hp.max_episode_steps,
    )
    try:
        agent = Agent(hp, envs.single_observation_space, envs.single_action_space)
    except (ValueError, TypeError) as e:
        envs.close()
        raise HParamsError(
            f"cannot build agent '{hp.agent}' on env '{hp.env}': {error_line(e)}"
        ) from e
    return envs, agent


# --- the experiment ----------------------------------------------------------
class Run:
    """Trains, evaluates and checkpoints one agent in one output folder, from checked input.

    train.py builds one from the early checks' ``CheckedRun`` (made before TensorFlow
    loaded) and the run's ``System``; ``Experiment`` builds one from names and values.
    """

    def __init__(
        self,
        checked: CheckedRun,
        system: System,
        *,
        launcher=None,
        workers: WorkerSettings = WorkerSettings(),
        tracker: Optional[Tracker] = None,
        render: bool = False,
        verbose: bool = True,
        argv: Optional[List[str]] = None,
        flags: Optional[Dict[str, Any]] = None,
    ):
        """Creates output_dir (unless read-only) and builds the agent; checks nothing that
        ``checked`` settled.

        If output_dir holds a run, training resumes from its latest readable checkpoint
        (or ``checked.checkpoint`` is loaded read-only).

        Args:
            checked: the early checks' result (rl/early_checks.py): the hparams, the
                folder's verdict, read-only or not, the worker count, video, checkpoint.
            system: the run's --sys target. The run closes it.
            launcher: its actor processes, started by ``system.actor_launcher`` (train.py
                calls it before TensorFlow loads); None: started here, with
                ``checked.num_workers`` > 0. The run closes it.
            workers: how its actor processes are restarted and fed (--worker_* flags).
            tracker: where committed records are copied besides TensorBoard
                (rl/tracking.py, e.g. ``MLflowTracking()``); None: nowhere.
            render: show evaluation episodes on screen where a display exists.
            verbose: print a progress line while training.
            argv: the command line to record in the snapshot (default sys.argv).
            flags: the flag values to record in the snapshot.
        """
        self.checked = checked
        self.system = system
        # Started before ``setup``: a local Ray starts with a CPU for each actor.
        if launcher is None and checked.num_workers:
            launcher = system.actor_launcher(checked.num_workers)
        self.launcher = launcher
        try:
            self._build(checked, workers, tracker, render, verbose, argv, flags)
        except BaseException:
            if self.launcher is not None:  # no actor outlives a run that could not be built
                self.launcher.close()
            raise

    def _build(
        self,
        checked: CheckedRun,
        workers: WorkerSettings,
        tracker: Optional[Tracker],
        render: bool,
        verbose: bool,
        argv: Optional[List[str]],
        flags: Optional[Dict[str, Any]],
    ) -> None:
        """The rest of ``__init__`` (its arguments), once the actors have started."""
        hp, output_dir, existing = checked.hp, checked.output_dir, checked.existing
        eval_records, read_only = list(checked.eval_records), checked.read_only
        self._lock: Optional[BinaryIO] = None  # the run folder's, once this run writes
        self.workers = workers
        self.hp = hp
        self.verbose = verbose
        viewer = video.ScreenViewer() if render else None
        if render and not viewer.active:
            self._say("no display: episodes are rendered to rgb_array only")
        self.device_info = self.system.setup()
        self.output_dir = output_dir or tempfile.mkdtemp(prefix="rl-run-")
        # Envs that play against this run's own policy artefacts (self-play) find them here;
        # close() restores what was there, so a later run in this process does not see it.
        self._outer_run_dir = os.environ.get(RUN_DIR_VARIABLE)
        os.environ[RUN_DIR_VARIABLE] = os.path.abspath(self.output_dir)
        with self.system.scope():
            self.envs, self.agent = build_envs_and_agent(hp, 1 if checked.num_workers else None)
        self.counters = Counters(episodes=0, evaluations=0)
        self.folder = RunFolder(
            self.output_dir,
            tf.train.Checkpoint(loop_counters=self.counters, **self.agent.checkpoint_items()),
            separate_state=getattr(self.agent, "separate_state", dict)(),
        )
        # The run's best evaluation so far (rl/best.py): set below for a run that trains.
        self._best: Optional[BestRecord] = None
        if checked.checkpoint == BEST:
            self.restored_from, self._best = restore_best(self.folder.checkpoint, self.output_dir)
            unreadable: Dict[str, str] = {}
        else:
            self.restored_from, unreadable = self.folder.restore(has_records=bool(eval_records))
        self.fell_back = bool(unreadable)  # from newer checkpoints that cannot be read
        self.agent.refresh_after_restore()
        self.actor, self.learner = self.agent.actor, self.agent.learner
        self.experience = self._experience_source()
        if read_only and self.restored_from is None:
            raise CheckpointError(f"no checkpoint in {self.folder.checkpoint_dir}")
        # Evaluation acts with an actor of its own (evaluation act_select),
        # given a fresh stream and the latest weights for each evaluation.
        eval_actor = self.agent.make_actor(seeding.stream(hp.seed, seeding.EVAL), explore=False)

        def act_for_evaluation(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            eval_actor.use_stream(rng)
            eval_actor.load(self.learner.publish())
            return eval_actor.to_env(eval_actor.act(obs, self.step)[0])

        self._stop_signal: Optional[int] = None  # a SIGINT or SIGTERM received
        self._signal_time = 0.0  # when (time.monotonic())
        self._old_handlers: Dict[int, Any] = {}  # while this run's are installed
        self._training = False  # in train(), whose signal handling covers its evaluations
        self._started = (time.time(), 0)  # when and at which step the last train() started
        # Given the result when a second signal ends the process during or after train(),
        # which then returns none (train.py prints it as its closing JSON line).
        self.on_stop_now: Optional[Callable[[Dict[str, Any]], None]] = None
        self.evaluator = Evaluator(
            hp.env,
            hp.seed,
            act_for_evaluation,
            viewer=viewer,
            max_episode_steps=hp.max_episode_steps,
            stop=lambda: self._stop_signal is not None,
        )
        # --- everything is checked and built; from here on we write ---
        self.logbook = self.folder.logbook
        if not read_only:
            restored_step = self.step if self.restored_from else 0
            # Checked before anything is written; an older checkpoint did not count them.
            evaluations = self.counters.restored.get("evaluations") if self.restored_from else 0
            self.logbook.check_records(restored_step, evaluations)
            self._lock_folder(existing)
            moved_to = self.folder.prepare(
                hp, existing, list(unreadable), argv, flags, self.device_info
            )
            for notice in self.logbook.recover(restored_step, fell_back=self.fell_back):
                self._say(notice)
            # What recover() rebuilt counts too: an evaluation it put back is not owed.
            eval_records = read_eval_records(os.path.join(self.output_dir, EVAL_FILE))
            self._tidy_artefacts(restored_step, unreadable, moved_to)
        elif unreadable:
            self._say(fallback_notice(unreadable, self.restored_from))
        cap = episode_cap(hp.env, hp.max_episode_steps)
        if cap is not None:  # said once, after the checks: every env copy gets the same cap
            self._say(
                f"warning: env '{hp.env}' has no time limit of its own: its episodes are "
                f"cut at max_episode_steps={cap} (an hparam)"
            )
        # Tracking (rl/tracking.py) copies only committed records: it starts once
        # recover() has settled what is committed, and never stops training.
        self.tracker = tracker if tracker is not None and not read_only else NoTracking()
        self.tracker.start(self.output_dir, self.step if self.restored_from else 0)
        self._recent_returns: collections.deque = collections.deque(maxlen=100)
        self._last_metrics: Dict[str, float] = {}
        # eval.jsonl was read (and checked) above; records past the restored step are redone.
        self._last_eval: Optional[Dict[str, Any]] = last_eval_record(eval_records, self.step)
        self._next_video = 0
        self.failure: Optional[str] = None  # why training stopped early, and what is kept
        self.failure_kind: Optional[str] = None  # one of FAILURE_KINDS
        self._warned = False
        if self.restored_from is None:
            rows = "\n".join(f"| {k} | {v} |" for k, v in hp.to_dict().items())
            self.logbook.text("hparams", f"| hparam | value |\n|---|---|\n{rows}", 0)

    def _tidy_artefacts(
        self, restored_step: int, unreadable: Dict[str, str], moved_to: Optional[str]
    ) -> None:
        """Makes policies/ and best/ agree with the checkpoint restored at ``restored_step``
        and gives it its policy artefact if a kill cut the export; says what it did (a
        fallback from ``unreadable`` checkpoints, moved to ``moved_to``, in one line)."""
        superseded = tidy_policies(self.output_dir, restored_step)
        self._best, superseded_bests, notices = tidy_best(self.output_dir, restored_step)
        if unreadable:
            self._say(
                fallback_notice(
                    unreadable, self.restored_from, moved_to, superseded, superseded_bests
                )
            )
        else:
            for moved in superseded:
                self._say(f"moved the policy {moved} aside: its training is redone")
            for moved in superseded_bests:
                self._say(f"moved the best checkpoint {moved} aside: its training is redone")
        for notice in notices:
            self._say(notice)
        # Only the restored checkpoint can lack its artefact: saves run one at a time,
        # each ending with its export, and restoring reads the newest readable one.
        if self.restored_from and export_missing_policy(self.agent, self.output_dir, restored_step):
            self._say(
                f"re-exported {artefact_dir(self.output_dir, restored_step)} from "
                f"{os.path.basename(self.restored_from)} (a kill had interrupted its export)"
            )

    # --- state ------------------------------------------------------------------
    @property
    def step(self) -> int:
        """Environment steps taken so far (all copies together)."""
        return self.agent.env_steps

    def _warn_once(self, warnings: List[str]) -> None:
        """Prints the first learning warning of the run (a run that diverges
        would repeat it every update)."""
        if warnings and not self._warned:
            self._warned = True
            self._say(f"warning: {warnings[0]}")

    def _say(self, text: str) -> None:
        say(text)

    # --- logging ------------------------------------------------------------
    def save(self) -> str:
        """Saves a checkpoint at the current step with the records it covers,
        then its policy artefact (rl/policy.py)."""
        path = self.folder.save(self.step)
        write_policy_artefact(self.agent, self.output_dir, self.step)
        drop_earlier_bests(self.output_dir, self.step)  # the checkpoint covers the newest
        self.tracker.committed(self.step)  # after the commit: records a kill cannot redo
        return path

    # --- evaluation ---------------------------------------------------------
    def evaluate(
        self, episodes: Optional[int] = None, record: int = 0, video_name: str = "eval"
    ) -> Dict[str, Any]:
        """Runs ``episodes`` evaluation episodes (``eval_act_select``) on separate env copies.

        Args:
            episodes: how many (default hparams.eval_episodes).
            record: record this many of the episodes (the first ones) to
                videos/<video_name>_ep<i>.mp4 and .gif.
            video_name: file name stem of the recordings.

        Returns:
            step, returns, lengths, return_mean, return_std, episodes, and
            videos (paths) when recording.

        Raises:
            EvaluationStopped: SIGINT or SIGTERM came (``interrupted`` says which); the
                evaluation was given up at the step it reached.
        """
        episodes = self.hp.eval_episodes if episodes is None else episodes
        outside_training = not self._training
        if outside_training:
            self._install_signal_handlers()
        try:
            result, gif = self.evaluator.evaluate(
                self.step,
                episodes,
                record=record,
                videos_dir=self.folder.file("videos"),
                video_name=video_name,
            )
        finally:
            if outside_training and self._stop_signal is None:
                self._restore_signal_handlers()
        if gif is not None:
            self.logbook.gif("eval/video", gif.data, self.step, gif.width, gif.height)
        return result

    def _evaluate_and_record(self, start_time: float) -> Dict[str, Any]:
        record = self.checked.record_video and self.step >= self._next_video
        if record:
            self._next_video = (
                next_multiple(self.step, self.hp.video_interval)
                if self.hp.video_interval > 0
                else 0
            )
        result = self.evaluate(record=1 if record else 0, video_name=f"eval_step{self.step:09d}")
        result["wall_time"] = time.time() - start_time
        self._last_eval = result
        self.logbook.eval_line(result)
        self.counters.add("evaluations")  # what the next checkpoint's records must hold
        if is_better(result["return_mean"], self._best):  # written now: these weights
            best = BestRecord(self.step, float(result["return_mean"]))
            write_best(self.folder.checkpoint, self.agent, self.output_dir, best)
            self._best = best
        return result

    def _evaluate_unless_stopped(self, start_time: float) -> None:
        """An evaluation during training; a signal gives it up at once (training then
        stops with a checkpoint at this clean point, with no record of it: the next start
        owes it, ``_evaluation_owed``)."""
        try:
            self._evaluate_and_record(start_time)
        except EvaluationStopped:
            pass

    def _evaluation_owed(self, target: int) -> bool:
        """Whether the restored checkpoint lacks an evaluation a signal gave up: that of
        the last interval it passed, or, once training reached ``target``, the final one.
        It is then made first, with the checkpoint's weights."""
        interval, step = self.hp.eval_interval, self.step
        last_due = step if step >= target else (step // interval) * interval
        last_made = self._last_eval["step"] if self._last_eval is not None else 0
        return self.hp.eval_episodes > 0 and last_due > 0 and last_made < last_due

    # --- training -----------------------------------------------------------
    def _end_step(self, target: int) -> int:
        """Where training to ``target`` stops: a learner that holds rollouts outside
        checkpoints (PPO, A2C, VPG, IMPALA) finishes the one under way."""
        size = self.learner.rollout_size()
        return -(-target // size) * size if size else target

    def train(self, steps: Optional[int] = None) -> Dict[str, Any]:
        """Trains until ``hparams.train_steps`` env steps (or ``steps`` more).

        Evaluates every eval_interval steps, checkpoints every
        checkpoint_interval steps, at the end and on SIGINT/SIGTERM.

        Args:
            steps: train this many more env steps instead of up to train_steps.

        Returns:
            step, episodes, episode_return_mean, eval_return_mean (the last evaluation),
            best_eval_return_mean and best_eval_step (the best one, rl/best.py),
            steps_per_second, the last update's losses, ``interrupted`` (signal number
            or None), and ``failure`` (why training stopped early and which checkpoint
            is kept) with ``failure_kind`` (``FAILURE_KINDS``), else None.
        """
        if self.checked.read_only:
            raise RuntimeError(
                "this experiment was loaded read-only; load it with read_only=False to train"
            )
        hp = self.hp
        target = self.step + steps if steps is not None else hp.train_steps
        start_time = time.time()
        start_step = self.step
        self._started = (start_time, start_step)  # for the result a second signal reports
        finished = start_step >= target
        if finished and self._evaluation_owed(target):  # made below, then committed
            self._say(
                f"{self.output_dir} is finished at step {self.step} but lacks its final "
                "evaluation (a signal gave it up): making it now"
            )
        elif finished:  # nothing to do or rewrite
            if self.verbose:
                self._say(
                    f"{self.output_dir} is finished at step {self.step} of {target}; "
                    "pass a larger --train_steps to train further"
                )
            self.tracker.finish(FINISHED)  # a run tracked only now gets its files too
            return self._finished_result()
        end = self._end_step(target)
        if end != target and not finished and self.verbose:
            self._say(
                f"train_steps={target} is not a multiple of a rollout "
                f"({self.learner.rollout_size()} env steps): "
                f"the run ends at step {end}"
            )
        self._install_signal_handlers()
        self._training = True
        progress = Progress(self, target, enabled=self.verbose)
        try:
            try:
                self.experience.start()
            except WorkerFailure as e:
                self._stop_failed(e)
                return self._result(0.0)
            if self._evaluation_owed(target):
                self._evaluate_unless_stopped(start_time)
            next_eval = next_multiple(self.step, hp.eval_interval)
            next_checkpoint = next_multiple(self.step, hp.checkpoint_interval)
            # Stop only at a clean point (no partial rollout held outside the
            # checkpoint): past the target, or soon after a signal.
            unsaved = False  # stopped by a signal away from a clean point
            while self.learner.pending_steps() > 0 or (
                self.step < target and self._stop_signal is None
            ):
                if self._stop_overdue():
                    unsaved = True
                    self._say_stopped_unsaved(
                        f"the rollout under way did not end within {SIGNAL_GRACE_SECONDS:g} s "
                        "of the signal"
                    )
                    break
                try:
                    ended = self.experience.step()
                    if ended is not None:
                        self._episodes_ended(*ended)
                    step = self.step
                    metrics = self.learner.update()
                except NonFiniteError as e:
                    self._last_metrics = e.metrics  # the result reports the update that failed
                    self._stop_failed(e)
                    break
                except WorkerFailure as e:
                    self._stop_failed(e)
                    break
                except RoundAbandoned:
                    unsaved = True
                    self._say_stopped_unsaved(
                        f"the workers did not deliver their round within {SIGNAL_GRACE_SECONDS:g} "
                        "s of the signal"
                    )
                    break
                if metrics is not None:
                    self.experience.policy_updated()
                    self._last_metrics = metrics
                    self._warn_once(self.learner.warnings(metrics))
                    for name, value in metrics.items():
                        self.logbook.scalar(f"train/{name}", value, step)
                    elapsed = max(time.time() - start_time, 1e-9)
                    self.logbook.scalar(
                        "train/steps_per_second", (step - start_step) / elapsed, step
                    )
                # Wait for a clean point (no partial rollout) past each interval.
                if self.learner.pending_steps() == 0:
                    if step >= next_eval:
                        next_eval = next_multiple(step, hp.eval_interval)
                        if hp.eval_episodes > 0:
                            self._evaluate_unless_stopped(start_time)
                    if step >= next_checkpoint:
                        next_checkpoint = next_multiple(step, hp.checkpoint_interval)
                        self.save()
                progress.maybe_print()
            if self.failure is None and not unsaved:
                if (
                    self._stop_signal is None
                    and hp.eval_episodes > 0
                    and (self._last_eval is None or self._last_eval["step"] != self.step)
                ):
                    self._evaluate_unless_stopped(start_time)
                self.save()
            progress.finish()
        except (EnvServerError, EnvError) as e:
            if self._stop_signal is None:
                self._stop_failed(e)
            else:  # it did not answer after the signal: no clean point to save at
                self._say_stopped_unsaved(error_line(e))
            progress.finish()
        except OSError as e:  # in a step, an evaluation or a save
            self._stop_failed(e)
            progress.finish()
        finally:
            self._training = False
            self.experience.stop()
            if self._stop_signal is None:
                # After a signal the handlers stay until close(): another signal while the
                # process winds down stops it at once, in one line.
                self._restore_signal_handlers()
        # Tracking: the run's files and how training ended.
        self.tracker.finish(FAILED if self.failure else KILLED if self._stop_signal else FINISHED)
        elapsed = max(time.time() - start_time, 1e-9)
        return self._result((self.step - start_step) / elapsed)

    def _stop_failed(self, error: Exception) -> None:
        """Records why training stops early and what of it is on disk: nothing after the
        last checkpoint is saved, so that training is lost."""
        kept = self.folder.latest_checkpoint
        on_disk = (
            f"the last checkpoint, {kept}, is kept" if kept else "no checkpoint was written yet"
        )
        self.failure = f"{failure_text(error)}; {on_disk}"
        self.failure_kind = failure_kind(error)

    def _episodes_ended(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Counts and logs the episodes that ended at the step just observed."""
        self.counters.add("episodes", len(returns))
        step = self.step
        self._recent_returns.extend(float(r) for r in returns)
        self.logbook.scalar("train/episode_return", float(np.mean(returns)), step)
        self.logbook.scalar("train/episode_length", float(np.mean(lengths)), step)

    def _experience_source(self) -> ExperienceSource:
        """The training actor stepping this process's envs, or --num_workers actor processes."""
        if not self.checked.num_workers:
            return OwnActor(self.actor, self.learner, self.envs, self.hp.seed)
        hp, model = self.hp, self.agent.model
        self.launcher.log_dir = self.folder.file("workers")  # known now, after its start
        return WorkerPool(
            hp,
            self.learner,
            act_stream=self.actor.stream,
            host_network=model.host_network() if hp.host_acting else None,
            spaces=(self.envs.single_observation_space, self.envs.single_action_space),
            num_workers=self.checked.num_workers,
            settings=self.workers,
            launcher=self.launcher,
            say=self._say,
            log_scalar=self.folder.logbook.scalar,
            give_up=self._stop_overdue,
        )

    @property
    def interrupted(self) -> Optional[int]:
        """The signal (SIGINT or SIGTERM) that stopped the last train() or evaluate(), if any."""
        return self._stop_signal

    def _finished_result(self) -> Dict[str, Any]:
        """The result of a run that was already finished, from its records.

        Episode returns, steps/s and losses are the last ones in tb/; a value
        with no record is left out rather than reported as 0 or null.
        """
        scalars = recent_scalars(self.logbook.tb_dir)
        returns = scalars.pop("train/episode_return", [])
        scalars.pop("train/episode_length", None)
        result = {
            "step": self.step,
            "episodes": self.counters["episodes"],
            "episode_return_mean": float(np.mean(returns)) if returns else None,
            "eval_return_mean": self._last_eval["return_mean"] if self._last_eval else None,
            **self._best_fields(),
            "steps_per_second": scalars.pop("train/steps_per_second", [None])[-1],
            "interrupted": None,
            "failure": None,
            "failure_kind": None,
            **{
                tag[len("train/") :]: values[-1]
                for tag, values in scalars.items()
                if tag.startswith("train/")
            },
        }
        # A fresh run's keys, always (None without a record); losses only where logged.
        return result

    def _best_fields(self) -> Dict[str, Any]:
        """The best evaluation beside the last one (None without one)."""
        best = self._best
        return {
            "best_eval_return_mean": best.return_mean if best else None,
            "best_eval_step": best.step if best else None,
        }

    def _result(self, steps_per_second: float) -> Dict[str, Any]:
        recent = list(self._recent_returns)
        return {
            "step": self.step,
            "episodes": self.counters["episodes"],
            "episode_return_mean": float(np.mean(recent)) if recent else None,
            "eval_return_mean": (self._last_eval["return_mean"] if self._last_eval else None),
            **self._best_fields(),
            "steps_per_second": steps_per_second,
            "interrupted": self._stop_signal,
            "failure": self.failure,
            "failure_kind": self.failure_kind,
            **self._last_metrics,
        }

    # --- signals --------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        if EARLY_INTERRUPT.is_set():  # a Ctrl-C came earlier, and a library swallowed it
            raise KeyboardInterrupt
        self._restore_signal_handlers()  # a train() after an interrupted one
        self._stop_signal = None
        STOP_ASKED.clear()
        if threading_is_main():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        """The first signal stops training at the next clean point (an evaluation under
        way is given up) with a checkpoint; a second one ends the process at once."""
        del frame
        if self._stop_signal is not None:
            self._stop_now(signum)
        self._stop_signal = signum
        self._signal_time = time.monotonic()
        STOP_ASKED.set()
        then = (
            f"stopping, with a checkpoint if a clean point comes within {SIGNAL_GRACE_SECONDS:g} s"
            if self._training
            else "stopping the evaluation"
        )
        self._say(f"got signal {signum}: {then}")

    def _stop_overdue(self) -> bool:
        """A signal asked the run to stop more than SIGNAL_GRACE_SECONDS ago."""
        return (
            self._stop_signal is not None
            and time.monotonic() - self._signal_time > SIGNAL_GRACE_SECONDS
        )

    def _say_stopped_unsaved(self, why: str) -> None:
        """One line: training stops after a signal without reaching a clean point."""
        kept = self.folder.latest_checkpoint
        self._say(
            f"{why}: stopping without a checkpoint; "
            + (f"the last one, {kept}, is kept" if kept else "none was saved")
        )

    def _stop_now(self, signum: int) -> NoReturn:
        """Ends the process at once with 128 + ``signum``, even in the middle of a save.

        A save never touches earlier checkpoints: TensorFlow writes the new one in
        ``ckpt-<N>_temp/`` and renames its files into place, rl's state files and index
        are replaced atomically, and what a kill leaves half-done is tidied (or moved
        aside as unreadable) at the next start. So the last finished checkpoint stays
        readable and a rerun resumes from it, as after kill -9.
        """
        kept = self.folder.latest_checkpoint
        self._say(
            f"got signal {signum} again: stopping now; "
            + (f"the last checkpoint, {kept}, is kept" if kept else "no checkpoint was saved")
        )
        if self.on_stop_now is not None:
            start_time, start_step = self._started
            result = self._result((self.step - start_step) / max(time.time() - start_time, 1e-9))
            # What is on disk: a rerun resumes from the kept checkpoint's step.
            result.update(step=checkpoint_step(kept) if kept else 0, interrupted=signum)
            self.on_stop_now(result)
        os._exit(128 + signum)  # no clean-up: that is what waiting for the first signal does

    def _restore_signal_handlers(self) -> None:
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        self._old_handlers = {}

    def _lock_folder(self, checked: Optional[HParams]) -> None:
        """Holds the run folder's lock until close() (or until this object is collected),
        taken only now so that bad input found while building writes nothing.

        Raises:
            RunConflictError: another process holds the folder, or wrote its hparams
                since they were checked (it started this run meanwhile).
        """
        try:
            self._lock = lock_run_folder(self.output_dir)
            if load_run_hparams(self.output_dir) != checked:
                raise RunConflictError(
                    f"{self.output_dir} changed while this run was being built (another "
                    f"process wrote its {HPARAMS_FILE}); run the command again"
                )
        except RunConflictError:
            self.close()
            raise

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Closes the environments and stops the workers and what the system started."""
        try:
            self._restore_signal_handlers()
            self.experience.stop()
            if self.launcher is not None:
                self.launcher.close()
            self.envs.close()
            self.evaluator.close()
            self.system.close()
        finally:
            if self._lock is not None:
                self._lock.close()  # the run folder is free for another process
        if self._outer_run_dir is None:
            os.environ.pop(RUN_DIR_VARIABLE, None)
        else:
            os.environ[RUN_DIR_VARIABLE] = self._outer_run_dir


class Experiment(Run):
    """A ``Run`` from names and values, checked here: the Python API (``rl.Experiment``)."""

    def __init__(
        self,
        hparams: Union[str, HParams, None] = "ppo_cartpole",
        output_dir: Optional[str] = None,
        overrides: Union[str, Dict[str, Any], None] = None,
        *,
        env: Optional[str] = None,
        seed: Optional[int] = None,
        train_steps: Optional[int] = None,
        eval_episodes: Optional[int] = None,
        allow_hparam_change: bool = False,
        read_only: bool = False,
        checkpoint: str = LATEST,
        num_workers: int = 0,
        record_video: bool = False,
        sys_name: str = "local",
        sys_options: Optional[Dict[str, Any]] = None,
        workers: WorkerSettings = WorkerSettings(),
        tracker: Optional[Tracker] = None,
        render: bool = False,
        verbose: bool = True,
    ):
        """Checks everything (``check_run``), then builds the run as ``Run`` does.

        Nothing is written until every name and value has been checked. If
        output_dir holds a run, its hparams are used (``hparams=None``) or must
        match, and training resumes from its latest readable checkpoint.

        Args:
            hparams: registered set name or HParams; None: the run in output_dir.
            output_dir: where everything goes; None: a new temporary folder.
            overrides: "a=1,b=[2]" or {"a": 1}.
            env: overrides hparams.env.
            seed: overrides hparams.seed.
            train_steps: overrides hparams.train_steps.
            eval_episodes: overrides hparams.eval_episodes.
            allow_hparam_change: resume a run in output_dir with different hparams.
            read_only: load the run to evaluate/test/export it; nothing in
                output_dir is written (training is refused).
            checkpoint: which checkpoint to load: ``"latest"`` (training resumes from it)
                or ``"best"``, that of the run's best evaluation (rl/best.py), read-only.
            num_workers: actor processes stepping the envs (rl/workers); 0:
                this process acts and learns.
            record_video: record evaluation episodes (see hparams.video_interval).
            sys_name: registered --sys target.
            sys_options: its settings (``ray_address``, ...).
            workers: how actor processes are restarted and fed (``WorkerSettings``).
            tracker: where committed records are copied besides TensorBoard
                (rl/tracking.py, e.g. ``MLflowTracking()``); None: nowhere.
            render: show evaluation episodes on screen where a display exists.
            verbose: print a progress line while training.
        """
        checked = check_run(
            hparams,
            output_dir,
            overrides,
            env=env,
            seed=seed,
            train_steps=train_steps,
            eval_episodes=eval_episodes,
            allow_hparam_change=allow_hparam_change,
            read_only=read_only,
            num_workers=num_workers,
            record_video=record_video,
            checkpoint=checkpoint,
        )
        system = registry.systems.get(sys_name)(sys_options)
        super().__init__(
            checked, system, workers=workers, tracker=tracker, render=render, verbose=verbose
        )


# Why training stops early, by what was raised: a result's ``failure_kind``. An env that
# raised or an env server that failed end training wherever they happen (a step, an
# evaluation), a file that cannot be written (a full disk) too; the others, in a step.
FAILURE_KINDS = (
    ("non_finite", NonFiniteError),
    ("workers", WorkerFailure),
    ("env_server", EnvServerError),
    ("env", EnvError),
    ("files", OSError),
)


def failure_kind(error: Exception) -> str:
    """The ``failure_kind`` of what stopped training: the first of ``FAILURE_KINDS`` it is."""
    return next(kind for kind, kinds in FAILURE_KINDS if isinstance(error, kinds))


def failure_text(error: Exception) -> str:
    """What stopped training, in one line (an OSError says which file)."""
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"cannot write {error.filename}: {error.strerror}"
    return error_line(error)


def last_eval_record(records: List[Dict[str, Any]], step: int) -> Optional[Dict[str, Any]]:
    """The last of a run's evaluation records at or before ``step``, if any."""
    earlier = [r for r in records if r["step"] <= step]
    return earlier[-1] if earlier else None


def threading_is_main() -> bool:
    return threading.current_thread() is threading.main_thread()


def next_multiple(step: int, interval: int) -> int:
    """The first multiple of ``interval`` after ``step``."""
    return (step // interval + 1) * interval


class Progress:
    """A live terminal line: steps, steps/s, recent returns, ETA."""

    def __init__(self, experiment: Run, target: int, enabled: bool):
        self.exp = experiment
        self.target = target
        self.enabled = enabled
        self.start_time = time.time()
        self.start_step = experiment.step
        self.last_print = 0.0
        self.tty = sys.stderr.isatty()
        self.interval = 0.5 if self.tty else 10.0

    def line(self) -> str:
        exp = self.exp
        step = exp.step
        elapsed = max(time.time() - self.start_time, 1e-9)
        rate = (step - self.start_step) / elapsed
        # A rollout may end past the target (a PPO run stops at 500,736 of 500,000).
        eta = max(self.target - step, 0) / rate if rate > 0 else math.inf
        recent = list(exp._recent_returns)[-20:]
        ret = f"{np.mean(recent):8.1f}" if recent else "     n/a"
        ev = f"{exp._last_eval['return_mean']:.1f}" if exp._last_eval else "n/a"
        return (
            f"step {step:>9,}/{self.target:,}  {rate:8.0f} steps/s  "
            f"return(last 20) {ret}  eval {ev}  ETA {format_seconds(eta)}"
        )

    def maybe_print(self) -> None:
        now = time.time()
        if not self.enabled or now - self.last_print < self.interval:
            return
        self.last_print = now
        end = "\r" if self.tty else "\n"
        print(self.line(), end=end, file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.enabled:
            print(self.line(), file=sys.stderr, flush=True)


def format_seconds(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def load(
    output_dir: str, read_only: bool = True, checkpoint: str = LATEST, **kwargs: Any
) -> Experiment:
    """Opens a trained run from its output_dir (its hparams, latest or best checkpoint).

    Args:
        output_dir: the run folder.
        read_only: True: evaluate, test or export only, nothing is written;
            False: ``train()`` continues the run.
        checkpoint: ``"latest"``, or ``"best"``: the checkpoint of the run's best
            evaluation (read-only; a CheckpointError if it has none yet).
        **kwargs: more Experiment arguments (record_video, verbose, ...).
    """
    if not os.path.exists(os.path.join(output_dir, HPARAMS_FILE)):
        raise FileNotFoundError(f"{output_dir} holds no {HPARAMS_FILE}: not a run folder")
    kwargs.setdefault("verbose", False)
    return Experiment(
        hparams=None, output_dir=output_dir, read_only=read_only, checkpoint=checkpoint, **kwargs
    )
