"""Evaluation: episodes acted with eval_act_select, on envs of its own, with its own random stream.

An ``Evaluator`` is given a way to act (``act(obs, rng) -> actions``), not an
agent, so the same evaluation serves a learner in this process or weights
received from elsewhere. Its envs, videos and on-screen viewer are its own,
reached only through the public vector-env API.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from rl import seeding, video
from rl.envs.env_errors import make_vec_env_naming_errors

# obs [N, ...] float32 and a NumPy generator -> actions [N].
Act = Callable[[np.ndarray, np.random.Generator], np.ndarray]


class EvaluationStopped(Exception):
    """An evaluation given up at a step because its ``stop`` said so (a signal): it
    leaves no result."""


class EvalEnvs:
    """``episodes`` copies of an env, of which the first ``watched`` render frames.

    The watched copies are a vector env of their own made with
    ``render_mode="rgb_array"``, so rendering them renders only those; together
    the two act as one vector env of ``episodes`` copies whose copy ``i`` is
    reset with ``seed + i``, as a single vector env's copies are.
    """

    def __init__(
        self,
        env_name: str,
        episodes: int,
        watched: int,
        max_episode_steps: Optional[int] = None,
    ):
        """Makes the copies.

        Args:
            env_name: a registered env name or a Gymnasium id.
            episodes: how many copies in all (> 0).
            watched: how many of them render rgb_array frames (0..episodes).
            max_episode_steps: the cap on episodes of an env without a limit of its
                own (rl.envs.make_env); None: episodes as the env has them.
        """
        if not 0 <= watched <= episodes or episodes <= 0:
            raise ValueError(
                f"need 0 <= watched <= episodes and episodes > 0, got {watched}, {episodes}"
            )
        self.key = (episodes, watched)
        # What the env raises in an evaluation is an EnvError naming it (rl/envs/make.py).
        self.watched = (
            make_vec_env_naming_errors(
                env_name, watched, "evaluation", "sync", "rgb_array", max_episode_steps
            )
            if watched
            else None
        )
        self.others = (
            make_vec_env_naming_errors(
                env_name, episodes - watched, "evaluation", "sync", None, max_episode_steps
            )
            if episodes > watched
            else None
        )
        self._parts = [envs for envs in (self.watched, self.others) if envs is not None]

    def reset(self, seed: int) -> np.ndarray:
        """Resets copy ``i`` with ``seed + i``; returns obs [episodes, ...]."""
        observations, first = [], 0
        for envs in self._parts:
            obs, _ = envs.reset(seed=seed + first)
            observations.append(obs)
            first += envs.num_envs
        return np.concatenate(observations)

    def step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Steps every copy; returns obs, rewards, terminated, truncated, each [episodes, ...]."""
        results, first = [], 0
        for envs in self._parts:
            obs, rewards, terminated, truncated, _ = envs.step(
                actions[first : first + envs.num_envs]
            )
            results.append((obs, rewards, terminated, truncated))
            first += envs.num_envs
        obs, rewards, terminated, truncated = (np.concatenate(parts) for parts in zip(*results))
        return obs, rewards, terminated, truncated

    def frames(self) -> List[Optional[np.ndarray]]:
        """One uint8 [H, W, 3] frame per watched copy (None where it rendered nothing)."""
        if self.watched is None or self.watched.render_mode != "rgb_array":
            return []
        return [None if f is None else video.as_rgb_frame(f) for f in self.watched.render()]

    def fps(self) -> int:
        """Frames per second the env declares for playback (30 if it declares none)."""
        envs = self.watched or self.others
        return int(envs.metadata.get("render_fps") or 30)

    def close(self) -> None:
        for envs in self._parts:
            envs.close()


class Evaluator:
    """Runs evaluation episodes and records videos of some of them."""

    def __init__(
        self,
        env_name: str,
        seed: int,
        act: Act,
        viewer: Optional[video.ScreenViewer] = None,
        max_episode_steps: Optional[int] = None,
        stop: Callable[[], bool] = lambda: False,
    ):
        """Makes nothing until the first evaluation.

        Args:
            env_name: the env to evaluate on.
            seed: the run seed; each evaluation's streams derive from it and the step.
            act: ``act(obs [N, ...], rng) -> actions [N]``, the policy evaluated.
            viewer: shows the first episode on screen while it runs (closed with this).
            max_episode_steps: the cap on episodes of an env without a limit of its own
                (rl.envs.make_env); None: episodes as the env has them.
            stop: asked before every step; True gives the evaluation up
                (EvaluationStopped), so a signal stops even a long one within a step.
        """
        self.env_name = env_name
        self.seed = seed
        self.act = act
        self.viewer = viewer
        self.max_episode_steps = max_episode_steps
        self.stop = stop
        self._envs: Optional[EvalEnvs] = None

    def _env_set(self, episodes: int, watched: int) -> EvalEnvs:
        """Evaluation envs, kept between evaluations of the same shape."""
        if self._envs is None or self._envs.key != (episodes, watched):
            if self._envs is not None:
                self._envs.close()
            self._envs = EvalEnvs(self.env_name, episodes, watched, self.max_episode_steps)
        return self._envs

    def evaluate(
        self,
        step: int,
        episodes: int,
        record: int = 0,
        videos_dir: str = "videos",
        video_name: str = "eval",
    ) -> Tuple[Dict[str, Any], Optional[video.EncodedGif]]:
        """Runs ``episodes`` episodes at once, one per env copy, until each ends.

        Args:
            step: the training step evaluated: keys the random streams.
            episodes: how many (> 0).
            record: record this many of the episodes (the first ones) to
                ``<videos_dir>/<video_name>_ep<i>.mp4`` and ``.gif``.
            videos_dir: where recordings go.
            video_name: file name stem of the recordings.

        Returns:
            The result (step, returns, lengths, return_mean, return_std,
            episodes, and videos when recording) and the first recorded
            episode's GIF (None when nothing was recorded).

        Raises:
            EvaluationStopped: ``stop`` said so before a step.
        """
        if episodes <= 0:
            raise ValueError(f"episodes must be > 0, got {episodes}")
        watched = min(record, episodes) if record else (1 if self.viewer else 0)
        envs = self._env_set(episodes, watched)
        recorders = [video.EpisodeRecorder() for _ in range(watched)]
        # Evaluation's own stream, keyed by step: how often or how long a run
        # evaluates never changes what it learns.
        rng = seeding.stream(self.seed, seeding.EVAL, step)
        obs = envs.reset(seed=seeding.derived_seed(self.seed, seeding.EVAL, step))
        returns = np.zeros(episodes)
        lengths = np.zeros(episodes, np.int64)
        running = np.ones(episodes, bool)
        self._capture(envs, recorders, running)
        while running.any():
            if self.stop():
                raise EvaluationStopped(f"the evaluation at step {step} was stopped")
            actions = self.act(obs, rng)
            obs, rewards, terminated, truncated = envs.step(actions)
            returns += rewards * running
            lengths += running
            running &= ~(terminated | truncated)
            self._capture(envs, recorders, running)
        result: Dict[str, Any] = {
            "step": step,
            "returns": returns.tolist(),
            "lengths": lengths.tolist(),
            "return_mean": float(returns.mean()),
            "return_std": float(returns.std()),
            "episodes": episodes,
        }
        gif = None
        if record:
            result["videos"], gif = save_videos(recorders, envs.fps(), videos_dir, video_name)
        return result, gif

    def _capture(
        self, envs: EvalEnvs, recorders: List[video.EpisodeRecorder], running: np.ndarray
    ) -> None:
        """Frames of the watched episodes that are still running."""
        if not running[: len(recorders)].any():
            return  # nothing watched is running: render nothing
        for i, frame in enumerate(envs.frames()):
            if running[i] and frame is not None:
                recorders[i].add_frame(frame)
                if i == 0 and self.viewer:
                    self.viewer.show(frame)

    def close(self) -> None:
        """Closes the envs and the viewer."""
        if self._envs is not None:
            self._envs.close()
            self._envs = None
        if self.viewer is not None:
            self.viewer.close()


def save_videos(
    recorders: List[video.EpisodeRecorder], fps: int, folder: str, name: str
) -> Tuple[List[str], Optional[video.EncodedGif]]:
    """Writes each recorded episode as MP4 and GIF (half size).

    Returns:
        The paths written, and the first episode's GIF (None if it has no frame).
    """
    paths: List[str] = []
    first_gif = None
    for i, recorder in enumerate(recorders):
        # The first episode's GIF also goes to TensorBoard: encode it once.
        gif = recorder.gif(fps=fps, gif_scale=0.5) if i == 0 and len(recorder) else None
        saved = recorder.save(folder, f"{name}_ep{i}", fps=fps, gif_scale=0.5, gif=gif)
        paths.extend(saved.values())
        first_gif = first_gif or gif
    return paths, first_gif
