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
import json
import math
import os
import signal
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Union

import numpy as np
import tensorflow as tf

from rl import catalog, registry, video  # noqa: F401  (catalog fills the registries)
from rl.counters import Counters
from rl.envs import make_vec_env, true_next_obs
from rl.hparams.base import (
    RESUMABLE_FIELDS,
    HParams,
    HParamsError,
    apply_overrides,
    check_ranges,
    differences,
    from_dict,
)
from rl.logbook import EVAL_FILE, Logbook, read_eval_records

HPARAMS_FILE = "hparams.json"


class RunConflictError(ValueError):
    """output_dir holds a run with other hparams; one readable line."""


class CheckpointError(RuntimeError):
    """No checkpoint in output_dir can be read."""


# --- small file helpers ----------------------------------------------------
def write_text_atomic(path: str, text: str) -> None:
    """Writes via a temp file and rename, so readers never see half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_json(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise HParamsError(f"{path} is not valid JSON ({e})") from None


# --- resolving hparams -------------------------------------------------------
def resolve_hparams(
    hparams: Union[str, HParams], overrides: Union[str, Dict[str, Any], None] = None, **fields: Any
) -> HParams:
    """Named set (or object) + overrides + explicit fields -> checked hparams.

    Args:
        hparams: a registered hparams set name, or an HParams object.
        overrides: "a=1,b=[2,3]" text or a dict of field -> value.
        **fields: further field values (None values are ignored), e.g. the
            ``--env`` and ``--seed`` flags.

    Raises:
        UnknownNameError, HParamsError: for unknown names or bad values.
    """
    hp = registry.hparams.get(hparams)() if isinstance(hparams, str) else hparams
    if isinstance(overrides, dict):
        hp = from_dict(type(hp), {**hp.to_dict(), **overrides})
    else:
        hp = apply_overrides(hp, overrides)
    explicit = {k: v for k, v in fields.items() if v is not None}
    if explicit:
        hp = from_dict(type(hp), {**hp.to_dict(), **explicit})
    validate_hparams(hp)
    return hp


def validate_hparams(hp: HParams) -> None:
    """Checks every field against the limits declared with it (registered names
    included), then that the named components fit the agent."""
    check_ranges(hp)
    agent_class = registry.agents.get(hp.agent)
    for field, fitting in agent_class.fitting_components.items():
        if getattr(hp, field) not in fitting:
            raise HParamsError(
                f"hparam '{field}' of agent '{hp.agent}' must be one of "
                f"{', '.join(fitting)}, got {getattr(hp, field)!r}"
            )


def load_run_hparams(output_dir: str) -> Optional[HParams]:
    """The hparams a previous run saved in ``output_dir``, or None if none."""
    path = os.path.join(output_dir, HPARAMS_FILE)
    if not os.path.exists(path):
        return None
    values = read_json(path)
    if not isinstance(values, dict) or "agent" not in values:
        raise HParamsError(f"{path} does not hold hparams (no 'agent' field)")
    cls = registry.agents.get(values["agent"]).hparams_class
    return from_dict(cls, values)


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
    if changed and not allow_change:
        listed = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
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
    envs = make_vec_env(hp.env, hp.num_envs, hp.vectorization)
    try:
        agent_class = registry.agents.get(hp.agent)
        agent = agent_class(hp, envs.single_observation_space, envs.single_action_space)
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


def derived_seed(*parts: int) -> int:
    """A 31-bit seed from several integers (the run seed, a step, ...)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0] & 0x7FFFFFFF)


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
        if output_dir is not None:
            existing = check_resume(output_dir, hp, allow_hparam_change or read_only)
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
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self._path("checkpoints"), max_to_keep=hp.keep_checkpoints
        )
        self.restored_from = self._restore()
        if read_only and self.restored_from is None:
            raise CheckpointError(f"no checkpoint in {self._path('checkpoints')}")
        # --- everything is checked and built; from here on we write ---
        if not read_only:
            self._prepare_output_dir(existing, argv, flags)
        self.logbook = Logbook(self.output_dir)
        if not read_only:
            self.logbook.recover(self.step if self.restored_from else 0)
        self._recent_returns: collections.deque = collections.deque(maxlen=100)
        self._last_metrics: Dict[str, float] = {}
        self._last_eval: Optional[Dict[str, Any]] = last_eval_record(
            self._path(EVAL_FILE), self.step
        )
        self._next_video = 0
        self._obs: Optional[np.ndarray] = None
        self._eval_envs = None
        self._stop_signal: Optional[int] = None
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
                "rule": "init, generator and replay from seed; env resets "
                "from derived_seed(seed, 0|1, step)",
            },
        )

    # --- paths and state -------------------------------------------------------
    def _path(self, *parts: str) -> str:
        return os.path.join(self.output_dir, *parts)

    @property
    def step(self) -> int:
        """Environment steps taken so far (all copies together)."""
        return self.agent.env_steps

    def _restore(self) -> Optional[str]:
        """Restores the newest readable checkpoint; reports unreadable ones."""
        candidates = list(reversed(self.manager.checkpoints))
        for path in candidates:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                if path != candidates[0]:
                    self._say(f"using the previous checkpoint {path}")
                return path
            except Exception as e:  # noqa: BLE001  (TF raises IndexError, DataLoss, ... on bad files)
                self._say(f"checkpoint {path} cannot be read: {first_line(e)}")
        if candidates:
            raise CheckpointError(
                f"no checkpoint in {self._path('checkpoints')} can be read "
                f"(tried {', '.join(candidates)})"
            )
        return None

    def _say(self, text: str) -> None:
        print(f"rl: {text}", file=sys.stderr, flush=True)

    # --- logging ------------------------------------------------------------
    def save(self) -> str:
        """Saves a checkpoint at the current step with the records it covers."""
        step = self.step
        self.logbook.stage(step)
        latest = self.manager.latest_checkpoint
        if latest is None or not latest.endswith(f"ckpt-{step}"):
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
        obs, _ = envs.reset(seed=derived_seed(self.hp.seed, 1, self.step))
        returns = np.zeros(episodes)
        lengths = np.zeros(episodes, np.int64)
        running = np.ones(episodes, bool)
        self._capture(envs, recorders, running)
        while running.any():
            obs, rewards, terminated, truncated, _ = envs.step(self.agent.act(obs, explore=False))
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
            return self._result(0.0)
        self._install_signal_handlers()
        try:
            if self._obs is None:
                self._obs, _ = self.envs.reset(seed=derived_seed(hp.seed, 0, self.step))
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
                metrics = self.agent.update()
                if metrics is not None:
                    self._last_metrics = metrics
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

    def _result(self, steps_per_second: float) -> Dict[str, Any]:
        recent = list(self._recent_returns)
        return {
            "step": self.step,
            "episodes": self.counters["episodes"],
            "episode_return_mean": float(np.mean(recent)) if recent else None,
            "eval_return_mean": (self._last_eval["return_mean"] if self._last_eval else None),
            "steps_per_second": steps_per_second,
            "interrupted": self._stop_signal,
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


def last_eval_record(path: str, step: int) -> Optional[Dict[str, Any]]:
    """The last evaluation at or before ``step`` in an eval.jsonl, if any."""
    earlier = [r for r in read_eval_records(path) if r["step"] <= step]
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
