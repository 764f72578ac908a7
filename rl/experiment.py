"""An experiment: one agent trained, evaluated and checkpointed in one folder.

``train.py`` is a thin layer over this class; notebooks use it directly:

    exp = rl.Experiment(hparams="ppo_cartpole", output_dir="runs/x")
    result = exp.train()          # resumes from runs/x if it holds a run
    exp.evaluate(episodes=10)

Output folder:
    hparams.json       resolved hparams (restarting checks against it)
    checkpoints/       tf.train.CheckpointManager (model, optimizer, counters,
                       RNG states, target net, replay buffer)
    eval.jsonl         one line per evaluation
    tb/                TensorBoard events
    snapshot/          reproducibility snapshot (rl/snapshot.py)

Summaries and eval lines reach disk together with the checkpoint that covers
them (rl/logbook.py), so a run killed at any moment and resumed never logs a
step twice or loses one: TensorBoard steps neither go backwards nor double.
"""

from __future__ import annotations

import collections
import glob
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from rl import catalog, registry, seeding, video  # noqa: F401  (catalog fills the registries)
from rl._tf import tf
from rl.agents.base import Agent, NonFiniteError
from rl.counters import Counters
from rl.envs import make_vec_env, true_next_obs
from rl.errors import CheckpointError, RunConflictError
from rl.files import write_text_atomic
from rl.hparams.base import (
    RESUMABLE_FIELDS,
    HParams,
    HParamsError,
    differences,
)
from rl.hparams.resolve import HPARAMS_FILE, check_fits, load_run_hparams, resolve_hparams
from rl.logbook import (
    EVAL_FILE,
    EvalFileError,
    Logbook,
    read_eval_records,
    recent_scalars,
)

CHECKPOINT_DIR = "checkpoints"
UNREADABLE_DIR = "unreadable"  # inside checkpoints/: unreadable checkpoints moved aside
CHECKPOINT_INDEX = "checkpoint"  # tf.train.CheckpointManager's list of checkpoints

# Fields that shape what a checkpoint holds: which agent and network, the
# weights' shapes (hidden_sizes; env: observation and action spaces) and the
# replay's capacity. Checkpoints saved with other values cannot be restored, so
# not even --allow_hparam_change resumes such a run. (activation and num_envs
# are not here: a run resumes with other values of them.)
CHECKPOINT_SHAPE_FIELDS = frozenset({"agent", "model", "hidden_sizes", "env", "buffer_size"})


# --- small file helpers ----------------------------------------------------
def check_output_dir(output_dir: str) -> None:
    """Refuses an output_dir that is a file or a folder this process cannot write.

    Tries a real write (a probe folder, removed at once) in output_dir, or in
    its nearest existing parent if it does not exist yet: permission bits say
    nothing for root, nor for read-only or virtual file systems.

    Raises:
        RunConflictError: naming the path and what is wrong.
    """
    existing = os.path.abspath(output_dir)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise RunConflictError(
            f"--output_dir {output_dir}: {existing} is a file, not a folder; "
            "name a folder (new or holding a run)"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rl-write-check-", dir=existing))
    except OSError as e:
        raise RunConflictError(
            f"--output_dir {output_dir}: cannot write in {existing} ({e.strerror}); "
            "name a folder you can write"
        ) from None


def read_eval_file(output_dir: str) -> List[Dict[str, Any]]:
    """The records of a run's eval.jsonl; a damaged line raises RunConflictError."""
    try:
        return read_eval_records(os.path.join(output_dir, EVAL_FILE))
    except EvalFileError as e:
        raise RunConflictError(str(e)) from None


def check_resume(output_dir: str, hp: HParams, allow_change: bool) -> Optional[HParams]:
    """Refuses a run whose hparams differ from the ones saved in ``output_dir``.

    Fields in RESUMABLE_FIELDS (how long, how often) may change freely.

    Returns:
        The saved hparams, or None for a new run.
    """
    saved = load_run_hparams(output_dir)
    if saved is None:
        return None
    changed = {k: v for k, v in differences(saved, hp).items() if k not in RESUMABLE_FIELDS}
    listed = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
    if set(changed) & CHECKPOINT_SHAPE_FIELDS:
        # Its checkpoints cannot be restored into this agent: no flag helps.
        raise RunConflictError(
            f"{output_dir} holds a run with other hparams ({listed}); it cannot be resumed "
            f"with these ({', '.join(sorted(set(changed) & CHECKPOINT_SHAPE_FIELDS))} change "
            "what its checkpoints hold): use another --output_dir"
        )
    if changed and not allow_change:
        raise RunConflictError(
            f"{output_dir} holds a run with other hparams ({listed}); use another "
            "--output_dir, or pass --allow_hparam_change to resume it with these"
        )
    return saved


def build_envs_and_agent(hp: HParams):
    """The training envs and the agent; any mismatch becomes one HParamsError.

    Built before anything is written, so e.g. a Box-action env for a
    discrete agent or an unknown activation leaves no files behind.
    """
    check_fits(hp, registry.agents.get(hp.agent).fitting_components)
    envs = make_vec_env(hp.env, hp.num_envs, hp.vectorization)
    try:
        agent = Agent(hp, envs.single_observation_space, envs.single_action_space)
    except (ValueError, TypeError) as e:
        envs.close()
        raise HParamsError(
            f"cannot build agent '{hp.agent}' on env '{hp.env}': {first_line(e)}"
        ) from e
    return envs, agent


def first_line(error: BaseException) -> str:
    """An exception as one line: its message's first line, or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- the experiment ----------------------------------------------------------
class Experiment:
    """Trains, evaluates and checkpoints one agent in one output folder."""

    def __init__(
        self,
        hparams: Union[str, HParams, None] = "ppo_cartpole",
        output_dir: Optional[str] = None,
        overrides: Union[str, Dict[str, Any], None] = None,
        env: Optional[str] = None,
        seed: Optional[int] = None,
        train_steps: Optional[int] = None,
        eval_episodes: Optional[int] = None,
        allow_hparam_change: bool = False,
        sys_name: str = "local",
        read_only: bool = False,
        record_video: bool = False,
        render: bool = False,
        argv: Optional[List[str]] = None,
        flags: Optional[Dict[str, Any]] = None,
        verbose: bool = True,
    ):
        """Checks everything, then creates output_dir and builds the agent.

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
            sys_name: registered --sys target.
            read_only: load the run to evaluate/test/export it; nothing in
                output_dir is written (training is refused).
            record_video: record evaluation episodes (see hparams.video_interval).
            render: show evaluation episodes on screen where a display exists.
            argv: the command line to record in the snapshot (default sys.argv).
            flags: the flag values to record in the snapshot.
            verbose: print a progress line while training.
        """
        self.system = registry.systems.get(sys_name)()
        existing = None
        if output_dir is not None and hparams is None:
            existing = load_run_hparams(output_dir)
            if existing is None:
                raise HParamsError(f"{output_dir} holds no {HPARAMS_FILE}; name --hparams")
            hparams = existing
        hp = resolve_hparams(
            hparams,
            overrides,
            env=env,
            seed=seed,
            train_steps=train_steps,
            eval_episodes=eval_episodes,
        )
        eval_records: List[Dict[str, Any]] = []
        if output_dir is not None:
            existing = check_resume(output_dir, hp, allow_hparam_change or read_only)
            if not read_only:
                check_output_dir(output_dir)
            eval_records = read_eval_file(output_dir)
        if read_only and (output_dir is None or existing is None):
            raise CheckpointError(f"{output_dir} holds no run to load ({HPARAMS_FILE} missing)")
        self.hp = hp
        self.verbose = verbose
        self.read_only = read_only
        self.record_video = record_video
        self.viewer = video.ScreenViewer() if render else None
        if render and not self.viewer.active:
            self._say("no display: episodes are rendered to rgb_array only")
        self.device_info = self.system.setup()
        self.output_dir = output_dir or tempfile.mkdtemp(prefix="rl-run-")
        self.envs, self.agent = build_envs_and_agent(hp)
        self.counters = Counters(episodes=0)
        self.checkpoint = tf.train.Checkpoint(
            loop_counters=self.counters, **self.agent.checkpoint_items()
        )
        self.restored_from, unreadable = self._restore(has_records=bool(eval_records))
        self.agent.refresh_host_weights()
        if read_only and self.restored_from is None:
            raise CheckpointError(f"no checkpoint in {self._path(CHECKPOINT_DIR)}")
        # --- everything is checked and built; from here on we write ---
        self.manager: Optional[tf.train.CheckpointManager] = None
        self.logbook = Logbook(self.output_dir)
        if not read_only:
            self._prepare_output_dir(existing, argv, flags)
            self._tidy_checkpoints(unreadable)
            self.manager = tf.train.CheckpointManager(
                self.checkpoint, self._path(CHECKPOINT_DIR), max_to_keep=hp.keep_checkpoints
            )
            if self.logbook.recover(self.step if self.restored_from else 0):
                self._say(f"dropped the records past step {self.step}: they are redone")
        self._recent_returns: collections.deque = collections.deque(maxlen=100)
        self._last_metrics: Dict[str, float] = {}
        # eval.jsonl was read (and checked) above; records past the restored step are redone.
        self._last_eval: Optional[Dict[str, Any]] = last_eval_record(eval_records, self.step)
        self._next_video = 0
        self._obs: Optional[np.ndarray] = None
        self._eval_envs = None
        self._stop_signal: Optional[int] = None
        self.failure: Optional[str] = None  # why training stopped early (non-finite update)
        self._warned = False
        if self.restored_from is None:
            rows = "\n".join(f"| {k} | {v} |" for k, v in hp.to_dict().items())
            self.logbook.text("hparams", f"| hparam | value |\n|---|---|\n{rows}", 0)

    def _prepare_output_dir(
        self,
        existing: Optional[HParams],
        argv: Optional[List[str]],
        flags: Optional[Dict[str, Any]],
    ) -> None:
        os.makedirs(self.output_dir, exist_ok=True)
        changed = differences(existing, self.hp) if existing is not None else {}
        if set(changed) - RESUMABLE_FIELDS:
            # Keep the old file: nothing already written is lost.
            os.replace(
                self._path(HPARAMS_FILE), self._path(f"hparams.before-{int(time.time())}.json")
            )
        write_text_atomic(self._path(HPARAMS_FILE), json.dumps(self.hp.to_dict(), indent=2) + "\n")
        from rl import snapshot

        snapshot.write_snapshot(
            self.output_dir,
            list(argv if argv is not None else sys.argv),
            flags={**(flags or {}), "device": self.device_info},
            hparams=self.hp.to_dict(),
            seeds={
                "seed": self.hp.seed,
                "rule": "one stream per purpose derived from seed (rl/seeding.py): "
                "acting, update, replay, evaluation; env resets from "
                "derived_seed(seed, stream, step)",
            },
        )

    # --- paths and state -------------------------------------------------------
    def _path(self, *parts: str) -> str:
        return os.path.join(self.output_dir, *parts)

    @property
    def step(self) -> int:
        """Environment steps taken so far (all copies together)."""
        return self.agent.env_steps

    def _restore(self, has_records: bool) -> Tuple[Optional[str], List[str]]:
        """Restores the newest readable checkpoint; reports unreadable ones.

        Checkpoints are found from their files (``ckpt-<N>.index``), so a lost
        or garbled checkpoints/checkpoint index loses nothing. Nothing is written.

        Args:
            has_records: eval.jsonl holds records (so the run had checkpoints).

        Returns:
            The restored checkpoint's path (None: a new run) and the paths of
            newer checkpoints that could not be read.
        """
        folder = self._path(CHECKPOINT_DIR)
        candidates = [os.path.join(folder, f"ckpt-{n}") for n in reversed(checkpoint_steps(folder))]
        for i, path in enumerate(candidates):
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                if i:
                    self._say(f"using the previous checkpoint {path}")
                return path, candidates[:i]
            except Exception as e:  # noqa: BLE001  (TF raises IndexError, DataLoss, ... on bad files)
                self._say(f"checkpoint {path} cannot be read: {first_line(e)}")
        if candidates:
            raise CheckpointError(
                f"no checkpoint in {folder} can be read (tried {', '.join(candidates)})"
            )
        if has_records or listed_checkpoints(folder):
            # Starting over would drop every record of the run.
            raise CheckpointError(
                f"{self.output_dir} holds a run whose checkpoints ({folder}/ckpt-*) are gone; "
                "use another --output_dir"
            )
        return None, []

    def _tidy_checkpoints(self, unreadable: List[str]) -> None:
        """Makes checkpoints/ hold only what CheckpointManager should manage.

        Unreadable checkpoints go to checkpoints/unreadable/ (so a new save of
        the same step can replace them, and nothing is deleted unseen), folders
        that a kill left mid-save are removed, and the index is rebuilt from
        the files when it does not list exactly them.
        """
        folder = self._path(CHECKPOINT_DIR)
        for path in unreadable:
            moved_to = move_aside(
                glob.glob(glob.escape(path) + ".*"), self._path(CHECKPOINT_DIR, UNREADABLE_DIR)
            )
            self._say(f"moved the unreadable {os.path.basename(path)} to {moved_to}")
        for temp in glob.glob(os.path.join(folder, "ckpt-*_temp")):
            if re.fullmatch(r"ckpt-\d+_temp", os.path.basename(temp)):
                shutil.rmtree(temp, ignore_errors=True)
        steps = checkpoint_steps(folder)
        if steps and listed_checkpoints(folder) != steps:
            write_checkpoint_index(folder, steps)
            self._say(f"rebuilt {os.path.join(folder, CHECKPOINT_INDEX)} from the checkpoint files")

    def _warn_once(self, warnings: List[str]) -> None:
        """Prints the first learning warning of the run (a run that diverges
        would repeat it every update)."""
        if warnings and not self._warned:
            self._warned = True
            self._say(f"warning: {warnings[0]}")

    def _say(self, text: str) -> None:
        print(f"rl: {text}", file=sys.stderr, flush=True)

    # --- logging ------------------------------------------------------------
    def save(self) -> str:
        """Saves a checkpoint at the current step with the records it covers."""
        step = self.step
        self.logbook.stage(step)
        latest = self.manager.latest_checkpoint
        if latest is None or os.path.basename(latest) != f"ckpt-{step}":
            latest = self.manager.save(checkpoint_number=step)
        self.logbook.commit(step)
        return latest

    # --- evaluation ---------------------------------------------------------
    def evaluate(
        self, episodes: Optional[int] = None, record: int = 0, video_name: str = "eval"
    ) -> Dict[str, Any]:
        """Runs ``episodes`` greedy episodes on separate env copies.

        Args:
            episodes: how many (default hparams.eval_episodes).
            record: record this many of the episodes (the first ones) to
                videos/<video_name>_ep<i>.mp4 and .gif.
            video_name: file name stem of the recordings.

        Returns:
            step, returns, lengths, return_mean, return_std, episodes, and
            videos (paths) when recording.
        """
        episodes = self.hp.eval_episodes if episodes is None else episodes
        if episodes <= 0:
            raise ValueError(f"episodes must be > 0, got {episodes}")
        watched = min(record, episodes) if record else (1 if self.viewer else 0)
        envs = self._eval_env_set(episodes, rendered=watched > 0)
        recorders = [video.EpisodeRecorder() for _ in range(watched)]
        # Evaluation's own stream, keyed by step: how often or how long a run
        # evaluates never changes what it learns.
        rng = seeding.stream(self.hp.seed, seeding.EVAL, self.step)
        obs, _ = envs.reset(seed=seeding.derived_seed(self.hp.seed, seeding.EVAL, self.step))
        returns = np.zeros(episodes)
        lengths = np.zeros(episodes, np.int64)
        running = np.ones(episodes, bool)
        self._capture(envs, recorders, running)
        while running.any():
            actions = self.agent.act(obs, explore=False, rng=rng)
            obs, rewards, terminated, truncated, _ = envs.step(actions)
            returns += rewards * running
            lengths += running
            running &= ~(terminated | truncated)
            self._capture(envs, recorders, running)
        result = {
            "step": self.step,
            "returns": returns.tolist(),
            "lengths": lengths.tolist(),
            "return_mean": float(returns.mean()),
            "return_std": float(returns.std()),
            "episodes": episodes,
        }
        if record:
            result["videos"] = self._save_videos(envs, recorders, video_name)
        return result

    def _eval_env_set(self, episodes: int, rendered: bool):
        """Evaluation envs, kept between evaluations; rgb_array only if watched."""
        key = (episodes, rendered)
        if self._eval_envs is None or self._eval_envs[0] != key:
            if self._eval_envs is not None:
                self._eval_envs[1].close()
            envs = make_vec_env(
                self.hp.env, episodes, "sync", render_mode="rgb_array" if rendered else None
            )
            self._eval_envs = (key, envs)
        return self._eval_envs[1]

    def _capture(self, envs, recorders, running) -> None:
        """Frames of the watched episodes that are still running."""
        sub_envs = envs.unwrapped.envs
        for i, recorder in enumerate(recorders):
            if running[i]:
                frame = video.render_frame(sub_envs[i])
                if frame is not None:
                    recorder.add_frame(frame)
                    if i == 0 and self.viewer:
                        self.viewer.show(frame)

    def _save_videos(self, envs, recorders, name: str) -> List[str]:
        fps = int(envs.unwrapped.envs[0].metadata.get("render_fps") or 30)
        paths = []
        for i, recorder in enumerate(recorders):
            # The first episode's GIF also goes to TensorBoard: encode it once.
            gif = recorder.gif(fps=fps, gif_scale=0.5) if i == 0 and len(recorder) else None
            saved = recorder.save(
                self._path("videos"), f"{name}_ep{i}", fps=fps, gif_scale=0.5, gif=gif
            )
            paths.extend(saved.values())
            if gif is not None:
                self.logbook.gif("eval/video", gif.data, self.step, gif.width, gif.height)
        return paths

    def _evaluate_and_record(self, start_time: float) -> Dict[str, Any]:
        record = self.record_video and self.step >= self._next_video
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
        self.logbook.scalar("eval/return_mean", result["return_mean"], result["step"])
        self.logbook.scalar("eval/return_std", result["return_std"], result["step"])
        self.logbook.scalar("eval/length_mean", float(np.mean(result["lengths"])), result["step"])
        return result

    # --- training -----------------------------------------------------------
    def train(self, steps: Optional[int] = None) -> Dict[str, Any]:
        """Trains until ``hparams.train_steps`` env steps (or ``steps`` more).

        Evaluates every eval_interval steps, checkpoints every
        checkpoint_interval steps, at the end and on SIGINT/SIGTERM.

        Args:
            steps: train this many more env steps instead of up to train_steps.

        Returns:
            step, episodes, episode_return_mean, eval_return_mean, steps_per_second,
            the last update's losses, and ``interrupted`` (signal number or None).
        """
        if self.read_only:
            raise RuntimeError(
                "this experiment was loaded read-only; load it with read_only=False to train"
            )
        hp = self.hp
        target = self.step + steps if steps is not None else hp.train_steps
        start_time = time.time()
        start_step = self.step
        if start_step >= target:  # a finished run: nothing to do or rewrite
            if self.verbose:
                self._say(
                    f"{self.output_dir} is finished at step {self.step} of {target}; "
                    "pass a larger --train_steps to train further"
                )
            return self._finished_result()
        self._install_signal_handlers()
        try:
            if self._obs is None:
                self._obs, _ = self.envs.reset(
                    seed=seeding.derived_seed(hp.seed, seeding.TRAIN_ENV_RESET, self.step)
                )
            progress = Progress(self, target, enabled=self.verbose)
            next_eval = next_multiple(self.step, hp.eval_interval)
            next_checkpoint = next_multiple(self.step, hp.checkpoint_interval)
            # Stop only at a clean point (no partial rollout held outside the
            # checkpoint): past the target, or soon after a signal.
            while self.agent.pending_steps() > 0 or (
                self.step < target and self._stop_signal is None
            ):
                self._env_step()
                step = self.step
                try:
                    metrics = self.agent.update()
                except NonFiniteError as e:
                    # Nothing after the last checkpoint is saved: the weights are lost.
                    kept = self.manager.latest_checkpoint
                    self.failure = f"{e}; " + (
                        f"the last checkpoint, {kept}, is kept" if kept else "no checkpoint saved"
                    )
                    break
                if metrics is not None:
                    self._last_metrics = metrics
                    self._warn_once(self.agent.warnings(metrics))
                    for name, value in metrics.items():
                        self.logbook.scalar(f"train/{name}", value, step)
                    elapsed = max(time.time() - start_time, 1e-9)
                    self.logbook.scalar(
                        "train/steps_per_second", (step - start_step) / elapsed, step
                    )
                # Wait for a clean point (no partial rollout) past each interval.
                if self.agent.pending_steps() == 0:
                    if step >= next_eval:
                        next_eval = next_multiple(step, hp.eval_interval)
                        if hp.eval_episodes > 0:
                            self._evaluate_and_record(start_time)
                    if step >= next_checkpoint:
                        next_checkpoint = next_multiple(step, hp.checkpoint_interval)
                        self.save()
                progress.maybe_print()
            if self.failure is None:
                if (
                    self._stop_signal is None
                    and hp.eval_episodes > 0
                    and (self._last_eval is None or self._last_eval["step"] != self.step)
                ):
                    self._evaluate_and_record(start_time)
                self.save()
            progress.finish()
        finally:
            self._restore_signal_handlers()
        elapsed = max(time.time() - start_time, 1e-9)
        return self._result((self.step - start_step) / elapsed)

    def _env_step(self) -> None:
        obs = self._obs
        actions = self.agent.act(obs)
        next_obs, rewards, terminated, truncated, info = self.envs.step(actions)
        self.agent.observe(
            obs, actions, rewards, terminated, truncated, true_next_obs(next_obs, info)
        )
        self._obs = next_obs
        if "_episode" in info and info["_episode"].any():
            done = info["_episode"]
            finished = int(done.sum())
            self.counters.add("episodes", finished)
            step = self.step
            self._recent_returns.extend(float(r) for r in info["episode"]["r"][done])
            self.logbook.scalar(
                "train/episode_return", float(np.mean(info["episode"]["r"][done])), step
            )
            self.logbook.scalar(
                "train/episode_length", float(np.mean(info["episode"]["l"][done])), step
            )

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
            "steps_per_second": scalars.pop("train/steps_per_second", [None])[-1],
            "interrupted": None,
            "failure": None,
            **{
                tag[len("train/") :]: values[-1]
                for tag, values in scalars.items()
                if tag.startswith("train/")
            },
        }
        return {k: v for k, v in result.items() if v is not None or k in ("interrupted", "failure")}

    def _result(self, steps_per_second: float) -> Dict[str, Any]:
        recent = list(self._recent_returns)
        return {
            "step": self.step,
            "episodes": self.counters["episodes"],
            "episode_return_mean": float(np.mean(recent)) if recent else None,
            "eval_return_mean": (self._last_eval["return_mean"] if self._last_eval else None),
            "steps_per_second": steps_per_second,
            "interrupted": self._stop_signal,
            "failure": self.failure,
            **self._last_metrics,
        }

    # --- signals --------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        self._old_handlers = {}
        self._stop_signal = None
        if threading_is_main():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        del frame
        if self._stop_signal is not None:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self._stop_signal = signum
        self._say(f"got signal {signum}: saving a checkpoint and stopping")

    def _restore_signal_handlers(self) -> None:
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)

    def close(self) -> None:
        """Closes the environments."""
        self.envs.close()
        if self._eval_envs is not None:
            self._eval_envs[1].close()
        if self.viewer is not None:
            self.viewer.close()


def checkpoint_steps(folder: str) -> List[int]:
    """Steps of the checkpoints in ``folder``, from their ``ckpt-<N>.index`` files."""
    if not os.path.isdir(folder):
        return []
    found = (re.fullmatch(r"ckpt-(\d+)\.index", name) for name in os.listdir(folder))
    return sorted(int(m.group(1)) for m in found if m)


def listed_checkpoints(folder: str) -> Optional[List[int]]:
    """Steps that the checkpoints/checkpoint index lists, or None if it is missing or garbled.

    The index is a text protobuf (``key: value`` lines); it counts as sound
    only if it names a latest checkpoint and a timestamp per listed one
    (without them CheckpointManager would never delete old checkpoints).
    """
    path = os.path.join(folder, CHECKPOINT_INDEX)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    fields: Dict[str, List[str]] = collections.defaultdict(list)
    for line in lines:
        match = re.fullmatch(r'(\w+): (?:"(?:.*/)?ckpt-(\d+)"|(\d+(?:\.\d*)?(?:e[+-]?\d+)?))', line)
        if not match:
            return None
        fields[match.group(1)].append(match.group(2) or match.group(3))
    steps = [int(s) for s in fields.pop("all_model_checkpoint_paths", [])]
    latest = fields.pop("model_checkpoint_path", [])
    timestamps = fields.pop("all_model_checkpoint_timestamps", [])
    fields.pop("last_preserved_timestamp", None)
    if fields or not steps or latest != [str(steps[-1])] or len(timestamps) != len(steps):
        return None
    return steps


def write_checkpoint_index(folder: str, steps: List[int]) -> None:
    """Writes the checkpoints/checkpoint index that CheckpointManager reads.

    Args:
        folder: the checkpoints folder.
        steps: the checkpoints to list, oldest first; stamped with their files' times.
    """
    times = [os.path.getmtime(os.path.join(folder, f"ckpt-{n}.index")) for n in steps]
    lines = [f'model_checkpoint_path: "ckpt-{steps[-1]}"']
    lines += [f'all_model_checkpoint_paths: "ckpt-{n}"' for n in steps]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in times]
    # Checkpoints newer than this are the ones CheckpointManager rotates.
    lines.append(f"last_preserved_timestamp: {min(times) - 1.0!r}")
    write_text_atomic(os.path.join(folder, CHECKPOINT_INDEX), "\n".join(lines) + "\n")


def move_aside(paths: List[str], folder: str) -> str:
    """Moves files into ``folder`` without replacing any file already there.

    Returns:
        The folder they went to: ``folder``, or a new ``folder/<time ns>`` on a name clash.
    """
    os.makedirs(folder, exist_ok=True)
    if any(os.path.exists(os.path.join(folder, os.path.basename(p))) for p in paths):
        folder = os.path.join(folder, str(time.time_ns()))
        os.makedirs(folder)
    for path in paths:
        os.replace(path, os.path.join(folder, os.path.basename(path)))
    return folder


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

    def __init__(self, experiment: Experiment, target: int, enabled: bool):
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
        eta = (self.target - step) / rate if rate > 0 else math.inf
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


def load(output_dir: str, read_only: bool = True, **kwargs: Any) -> Experiment:
    """Opens a trained run from its output_dir (its hparams, latest checkpoint).

    Args:
        output_dir: the run folder.
        read_only: True: evaluate, test or export only, nothing is written;
            False: ``train()`` continues the run.
        **kwargs: more Experiment arguments (record_video, verbose, ...).
    """
    if not os.path.exists(os.path.join(output_dir, HPARAMS_FILE)):
        raise FileNotFoundError(f"{output_dir} holds no {HPARAMS_FILE}: not a run folder")
    kwargs.setdefault("verbose", False)
    return Experiment(hparams=None, output_dir=output_dir, read_only=read_only, **kwargs)
