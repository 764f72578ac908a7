"""Episode videos: record rendered frames, save them as MP4 and GIF, show them in TensorBoard.

Everything here works without a display: frames come from envs made with
`render_mode="rgb_array"`, files are encoded with imageio (ffmpeg for MP4, Pillow for GIF),
and an on-screen window is only an optional extra (`ScreenViewer`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Sequence

import cv2
import gymnasium as gym
import imageio
import imageio.v3 as iio
import numpy as np

from rl.files import write_atomically

_LOG = logging.getLogger(__name__)

# Frames one recorded episode may hold in memory: 1,456 CartPole frames (every one of its
# 500 steps), about 10,000 Atari ones. An episode as long as max_episode_steps allows
# (27,000 CartPole-sized frames: 19 GB) is recorded up to here.
MAX_RECORDING_BYTES = 2**30

# Browsers (and so TensorBoard) replay GIF delays under 20 ms as 100 ms, so a faster GIF would
# play slower; GIF stores delays in whole centiseconds.
_MIN_GIF_DELAY_CS = 2


@dataclasses.dataclass(frozen=True)
class EncodedGif:
    """An animated GIF in memory, with the size TensorBoard's image summary needs.

    Attributes:
      data: the GIF file's bytes (start with b"GIF89a").
      width: frame width in pixels.
      height: frame height in pixels.
    """

    data: bytes
    width: int
    height: int


def as_rgb_frame(frame: np.ndarray) -> np.ndarray:
    """Returns a frame as a fresh, contiguous uint8 [H, W, 3] array.

    Grey [H, W] or [H, W, 1] frames are repeated to three channels and an alpha channel is
    dropped; anything else raises, since guessing a float range or a layout would hide bugs.

    Args:
      frame: uint8 image of shape [H, W], [H, W, 1], [H, W, 3] or [H, W, 4].

    Returns:
      A copy of shape [H, W, 3], so later changes to the caller's buffer do not reach it.
    """
    array = np.asarray(frame)
    if array.dtype != np.uint8:
        raise ValueError(f"frame must be uint8, got {array.dtype}")
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4):
        raise ValueError(f"frame must have shape [H, W, 3], got {array.shape}")
    if array.shape[2] == 1:
        array = np.repeat(array, 3, axis=2)
    return np.array(array[:, :, :3], dtype=np.uint8, order="C", copy=True)


def pad_to_even(frame: np.ndarray) -> np.ndarray:
    """Pads a frame on the bottom and right to even height and width.

    yuv420p stores colour at half resolution, so libx264 rejects odd sizes; repeating the
    edge row/column keeps every original pixel, unlike resizing.

    Args:
      frame: image of shape [H, W, C].

    Returns:
      The frame itself if both sides are even, otherwise a padded copy [H + H % 2, W + W % 2, C].
    """
    pad_h, pad_w = frame.shape[0] % 2, frame.shape[1] % 2
    if not (pad_h or pad_w):
        return frame
    return np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")


def gif_delay_ms(fps: int) -> int:
    """Returns the per-frame GIF delay in milliseconds for a frame rate.

    Args:
      fps: frames per second wanted.

    Returns:
      A multiple of 10 ms (GIF's unit), at least 20 ms so browsers do not slow it down.
    """
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    return max(_MIN_GIF_DELAY_CS, round(100 / fps)) * 10


def encode_gif(frames: Sequence[np.ndarray], fps: int = 30, scale: float = 1.0) -> EncodedGif:
    """Encodes frames as a looping animated GIF.

    Pillow merges consecutive identical frames into one with the summed delay, so the GIF may
    hold fewer frames than given but always plays for len(frames) * gif_delay_ms(fps).

    Args:
      frames: uint8 [H, W, 3] images, all of one size, at least one.
      fps: playback frames per second.
      scale: resize factor applied with cv2.INTER_AREA (e.g. 0.5 halves each side).

    Returns:
      The GIF bytes with the (scaled) width and height.
    """
    if not frames:
        raise ValueError("cannot encode a GIF without frames")
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    height, width = frames[0].shape[:2]
    if scale != 1.0:
        width, height = max(1, round(width * scale)), max(1, round(height * scale))
        frames = [cv2.resize(f, (width, height), interpolation=cv2.INTER_AREA) for f in frames]
    data = iio.imwrite(
        "<bytes>",
        np.stack(frames),
        extension=".gif",
        plugin="pillow",
        is_batch=True,
        duration=gif_delay_ms(fps),
        loop=0,  # 0 = repeat forever
    )
    return EncodedGif(data=data, width=width, height=height)


def _write_mp4(path: str, frames: Sequence[np.ndarray], fps: int) -> None:
    """Encodes frames as H.264 MP4 (yuv420p, playable by browsers and common players).

    Args:
      path: output file; must end in .mp4 so ffmpeg picks the container.
      frames: uint8 [H, W, 3] images, all of one size.
      fps: frames per second.
    """
    # Frames are already padded to even sizes; macro_block_size=2 stops imageio from
    # resizing them up to multiples of 16 (its default).
    writer = imageio.get_writer(
        path,
        format="FFMPEG",
        mode="I",
        fps=fps,
        codec="libx264",
        pixelformat="yuv420p",
        macro_block_size=2,
        ffmpeg_log_level="error",
    )
    try:
        for frame in frames:
            writer.append_data(pad_to_even(frame))
    finally:
        writer.close()


class EpisodeRecorder:
    """Collects the RGB frames of an episode and saves them as MP4 and GIF.

    Frames are kept in memory (a 600x400 CartPole frame is 720 KB), so record evaluation
    episodes, not all of training; frames past ``max_bytes`` are left out, with one
    warning line.
    """

    def __init__(self, max_bytes: int = MAX_RECORDING_BYTES) -> None:
        """Args:
        max_bytes: the most frame bytes kept; later frames are left out.
        """
        self._frames: list[np.ndarray] = []
        self._bytes = 0
        self.max_bytes = max_bytes
        self.full = False  # a frame was left out

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def frames(self) -> tuple[np.ndarray, ...]:
        """The frames recorded so far, oldest first."""
        return tuple(self._frames)

    def add_frame(self, frame: np.ndarray) -> None:
        """Appends a copy of one frame.

        Args:
          frame: uint8 [H, W, 3] image (grey or RGBA are converted); same size as earlier frames.
        """
        frame = as_rgb_frame(frame)
        if self._frames and frame.shape != self._frames[0].shape:
            raise ValueError(
                f"frame shape {frame.shape} differs from the first frame's {self._frames[0].shape}"
            )
        if self._bytes + frame.nbytes > self.max_bytes:
            if not self.full:
                self.full = True
                print(
                    f"rl: warning: the recording stops at frame {len(self._frames)} "
                    f"({self.max_bytes / 2**20:.0f} MiB of frames); the episode goes on",
                    file=sys.stderr,
                    flush=True,
                )
            return
        self._frames.append(frame)
        self._bytes += frame.nbytes

    def clear(self) -> None:
        """Drops all recorded frames, e.g. before the next episode."""
        self._frames.clear()
        self._bytes = 0
        self.full = False

    def gif(self, fps: int = 30, gif_scale: float = 1.0) -> EncodedGif:
        """Encodes the recorded frames as an animated GIF in memory (see `encode_gif`).

        Args:
          fps: playback frames per second.
          gif_scale: resize factor for the GIF's sides.
        """
        return encode_gif(self._frames, fps=fps, scale=gif_scale)

    def save(
        self,
        directory: str,
        name: str,
        fps: int = 30,
        gif_scale: float = 1.0,
        gif: EncodedGif | None = None,
    ) -> dict[str, str]:
        """Writes `<directory>/<name>.mp4` and `<directory>/<name>.gif`, each atomically.

        Args:
          directory: output folder, created if missing.
          name: file name without extension or folder.
          fps: playback frames per second for both files.
          gif_scale: resize factor for the GIF only (the MP4 keeps full size), e.g. 0.5.
          gif: these frames already encoded by `gif(fps, gif_scale)`, so a caller that
            needs the GIF too encodes it once; None: encoded here.

        Returns:
          {"mp4": path, "gif": path}, or {} (and nothing written) if no frame was recorded.
        """
        if not name or os.sep in name or (os.altsep and os.altsep in name):
            raise ValueError(f"name must be a plain file name, got {name!r}")
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        if not self._frames:
            return {}
        os.makedirs(directory, exist_ok=True)
        paths = {ext: os.path.join(directory, f"{name}.{ext}") for ext in ("mp4", "gif")}
        write_atomically(paths["mp4"], lambda path: _write_mp4(path, self._frames, fps))
        gif_data = (gif or self.gif(fps=fps, gif_scale=gif_scale)).data

        def write_gif(path: str) -> None:
            with open(path, "wb") as f:
                f.write(gif_data)

        write_atomically(paths["gif"], write_gif)
        return paths


def render_frame(env: gym.Env) -> np.ndarray | None:
    """Renders one frame of an env made with render_mode="rgb_array".

    Args:
      env: a gymnasium env (or wrapper); other render modes are not called, to avoid their
        per-call warnings or windows.

    Returns:
      uint8 [H, W, 3] frame, or None if the env does not render to rgb_array.
    """
    if getattr(env, "render_mode", None) != "rgb_array":
        return None
    frame = env.render()
    if frame is None:
        return None
    return as_rgb_frame(frame)


def display_available() -> bool:
    """Returns True if windows can be shown: always on macOS and Windows, on Linux if X11 or
    Wayland is advertised through DISPLAY or WAYLAND_DISPLAY."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class ScreenViewer:
    """Shows frames in a pygame window (pygame comes with Gymnasium's classic-control
    extra); a no-op without a display, or if the window cannot be opened."""

    def __init__(self, title: str = "rl") -> None:
        """Creates the viewer; the window opens on the first `show`.

        Args:
          title: window title.
        """
        self._title = title
        self._active = display_available()
        self._screen = None

    @property
    def active(self) -> bool:
        """Whether frames are being shown."""
        return self._active

    def show(self, frame: np.ndarray) -> None:
        """Displays one frame, or does nothing if inactive.

        Args:
          frame: uint8 [H, W, 3] RGB image.
        """
        if not self._active:
            return
        try:
            import pygame

            height, width = frame.shape[:2]
            if self._screen is None or self._screen.get_size() != (width, height):
                pygame.display.init()
                pygame.display.set_caption(self._title)
                self._screen = pygame.display.set_mode((width, height))
            # pygame surfaces are indexed [x, y]: swap the image's rows and columns.
            pygame.surfarray.blit_array(self._screen, np.ascontiguousarray(frame.swapaxes(0, 1)))
            pygame.display.flip()
            pygame.event.pump()  # keeps the window responsive
        except Exception as err:  # noqa: BLE001  (no pygame, no video device, ...)
            self._active = False
            _LOG.warning("cannot show frames in a window, carrying on without: %s", err)

    def close(self) -> None:
        """Closes the window if one was opened."""
        if self._screen is not None:
            import pygame

            pygame.display.quit()
            self._screen = None
        self._active = False
