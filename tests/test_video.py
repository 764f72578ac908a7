"""Tests for rl.video: files read back with the same decoders players use, and TensorBoard's own
image plugin serving the GIF summary."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from collections.abc import Iterator

import gymnasium as gym
import imageio
import numpy as np
import pytest
from PIL import Image, ImageSequence
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from tensorboard.plugins.image import images_plugin
from werkzeug.test import Client

from rl import video
from rl.logbook import Logbook

pytestmark = pytest.mark.unit

NUM_FRAMES = 20


@pytest.fixture(scope="module")
def cartpole_frames() -> list[np.ndarray]:
    """NUM_FRAMES frames of a seeded CartPole episode, rendered headless."""
    with pytest.MonkeyPatch.context() as mp:
        # pygame.init() probes video and audio; dummy drivers keep it quiet without a display.
        mp.setenv("SDL_VIDEODRIVER", "dummy")
        mp.setenv("SDL_AUDIODRIVER", "dummy")
        env = gym.make("CartPole-v1", render_mode="rgb_array")
        env.reset(seed=0)
        frames = [video.render_frame(env)]
        for t in range(NUM_FRAMES - 1):
            _, _, terminated, truncated, _ = env.step(t % 2)
            if terminated or truncated:
                env.reset(seed=t)
            frames.append(video.render_frame(env))
        env.close()
    return frames


def moving_square_frames(n: int, height: int, width: int) -> list[np.ndarray]:
    """n distinct frames: a white square moving one pixel right per frame.

    Args:
      n: number of frames.
      height: frame height.
      width: frame width (must exceed n + 4).
    """
    frames = []
    for i in range(n):
        frame = np.zeros((height, width, 3), dtype=np.uint8)
        frame[2:6, i : i + 4] = 255
        frames.append(frame)
    return frames


def read_mp4(path: str) -> list[np.ndarray]:
    """Decodes every frame of a video with imageio's ffmpeg reader.

    Args:
      path: video file.
    """
    with imageio.get_reader(path, "ffmpeg") as reader:
        # iter_data, not list(reader): the reader's len() is unknown (huge) for streams.
        return list(reader.iter_data())


def read_gif(data: bytes) -> tuple[list[np.ndarray], list[int]]:
    """Decodes a GIF's frames and their delays with Pillow.

    Args:
      data: GIF file bytes.

    Returns:
      (RGB frames, per-frame delays in ms).
    """
    with Image.open(io.BytesIO(data)) as gif:
        assert gif.info.get("loop") == 0, "GIF must loop forever"
        frames, delays = [], []
        for frame in ImageSequence.Iterator(gif):
            frames.append(np.asarray(frame.convert("RGB")))
            delays.append(frame.info["duration"])
    return frames, delays


def recorder_with(frames: list[np.ndarray]) -> video.EpisodeRecorder:
    """Returns a recorder holding the given frames.

    Args:
      frames: frames to add, in order.
    """
    recorder = video.EpisodeRecorder()
    for frame in frames:
        recorder.add_frame(frame)
    return recorder


def test_render_frame_cartpole(cartpole_frames: list[np.ndarray]) -> None:
    assert len(cartpole_frames) == NUM_FRAMES
    for frame in cartpole_frames:
        assert frame.shape == (400, 600, 3) and frame.dtype == np.uint8


def test_render_frame_none_without_rgb_array() -> None:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    assert video.render_frame(env) is None
    env.close()


def test_save_cartpole_episode(tmp_path, cartpole_frames: list[np.ndarray]) -> None:
    recorder = recorder_with(cartpole_frames)
    paths = recorder.save(str(tmp_path), "episode", fps=30, gif_scale=0.5)

    assert paths == {"mp4": str(tmp_path / "episode.mp4"), "gif": str(tmp_path / "episode.gif")}
    assert sorted(os.listdir(tmp_path)) == ["episode.gif", "episode.mp4"]  # no temp files left

    mp4_frames = read_mp4(paths["mp4"])
    assert len(mp4_frames) == NUM_FRAMES
    assert mp4_frames[0].shape == (400, 600, 3)
    with imageio.get_reader(paths["mp4"], "ffmpeg") as reader:
        meta = reader.get_meta_data()
    assert meta["codec"] == "h264" and meta["pix_fmt"].startswith("yuv420p")
    assert meta["fps"] == 30
    # Lossy, but the picture must be the episode's, not garbage.
    assert np.abs(mp4_frames[5].astype(int) - cartpole_frames[5]).mean() < 5

    with open(paths["gif"], "rb") as f:
        gif_frames, delays = read_gif(f.read())
    assert gif_frames[0].shape == (200, 300, 3)
    # CartPole snaps to whole pixels, so some consecutive frames repeat; Pillow stores a repeat
    # as a longer delay, so count frames as played.
    delay = video.gif_delay_ms(30)
    assert all(d % delay == 0 for d in delays)
    assert sum(d // delay for d in delays) == NUM_FRAMES


def test_gif_keeps_every_distinct_frame() -> None:
    frames = moving_square_frames(NUM_FRAMES, 12, 32)
    gif = video.encode_gif(frames, fps=10)
    gif_frames, delays = read_gif(gif.data)
    assert len(gif_frames) == NUM_FRAMES
    assert delays == [100] * NUM_FRAMES
    assert (gif.width, gif.height) == (32, 12)
    np.testing.assert_array_equal(gif_frames[3], frames[3])  # few colours: lossless


def test_gif_merges_repeats_but_keeps_duration() -> None:
    frame = moving_square_frames(1, 12, 32)[0]
    _, delays = read_gif(video.encode_gif([frame] * 5, fps=20).data)
    assert sum(delays) == 5 * 50


def test_gif_delay_ms() -> None:
    assert video.gif_delay_ms(30) == 30
    assert video.gif_delay_ms(10) == 100
    assert video.gif_delay_ms(1000) == 20  # browsers slow anything faster down
    with pytest.raises(ValueError):
        video.gif_delay_ms(0)


def test_odd_sized_frames(tmp_path) -> None:
    frames = moving_square_frames(NUM_FRAMES, 23, 37)
    paths = recorder_with(frames).save(str(tmp_path), "odd", fps=15)

    mp4_frames = read_mp4(paths["mp4"])
    assert len(mp4_frames) == NUM_FRAMES
    assert mp4_frames[0].shape == (24, 38, 3)  # padded by one row and column, not resized
    with open(paths["gif"], "rb") as f:
        gif_frames, _ = read_gif(f.read())
    assert len(gif_frames) == NUM_FRAMES
    assert gif_frames[0].shape == (23, 37, 3)


def test_pad_to_even() -> None:
    frame = np.arange(3 * 5 * 3, dtype=np.uint8).reshape(3, 5, 3)
    padded = video.pad_to_even(frame)
    assert padded.shape == (4, 6, 3)
    np.testing.assert_array_equal(padded[:3, :5], frame)
    np.testing.assert_array_equal(padded[3, :5], frame[2])  # edge repeated
    even = np.zeros((4, 6, 3), dtype=np.uint8)
    assert video.pad_to_even(even) is even


def test_zero_frames_writes_nothing(tmp_path) -> None:
    out = tmp_path / "videos"
    assert video.EpisodeRecorder().save(str(out), "empty") == {}
    assert not out.exists()


def test_failed_write_leaves_no_file(tmp_path, monkeypatch) -> None:
    (tmp_path / "ep.mp4").write_bytes(b"previous")

    def broken_mp4(path: str, frames: list[np.ndarray], fps: int) -> None:
        with open(path, "wb") as f:
            f.write(b"half a video")
        raise KeyboardInterrupt  # as if the run were stopped mid-write

    monkeypatch.setattr(video, "_write_mp4", broken_mp4)
    recorder = recorder_with(moving_square_frames(3, 8, 8))
    with pytest.raises(KeyboardInterrupt):
        recorder.save(str(tmp_path), "ep")
    assert os.listdir(tmp_path) == ["ep.mp4"]
    assert (tmp_path / "ep.mp4").read_bytes() == b"previous"


def test_add_frame_validates_and_copies() -> None:
    recorder = video.EpisodeRecorder()
    frame = np.zeros((4, 6, 3), dtype=np.uint8)
    recorder.add_frame(frame)
    frame[:] = 255  # the env may reuse its buffer
    assert recorder.frames[0].max() == 0
    recorder.add_frame(np.zeros((4, 6, 4), dtype=np.uint8))  # RGBA: alpha dropped
    recorder.add_frame(np.zeros((4, 6), dtype=np.uint8))  # grey: repeated
    assert len(recorder) == 3
    with pytest.raises(ValueError, match="differs"):
        recorder.add_frame(np.zeros((4, 8, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        recorder.add_frame(np.zeros((4, 6, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="plain file name"):
        recorder.save("/tmp", "a/b")
    recorder.clear()
    assert len(recorder) == 0


@pytest.fixture
def gif_logdir(
    tmp_path, cartpole_frames: list[np.ndarray]
) -> Iterator[tuple[str, video.EncodedGif]]:
    """A TensorBoard log dir holding one GIF summary under tag "eval/episode" at step 7."""
    gif = recorder_with(cartpole_frames).gif(fps=30, gif_scale=0.25)
    book = Logbook(str(tmp_path))
    book.gif("eval/episode", gif.data, step=7, width=gif.width, height=gif.height)
    book.stage(7)
    book.commit(7)
    yield book.tb_dir, gif


def test_gif_summary_served_by_tensorboard(gif_logdir: tuple[str, video.EncodedGif]) -> None:
    logdir, gif = gif_logdir
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    apps = images_plugin.ImagesPlugin(
        base_plugin.TBContext(data_provider=provider)
    ).get_plugin_apps()

    # The same three requests the Images tab makes.
    tags = json.loads(Client(apps["/tags"]).get("/").data)
    assert tags["."]["eval/episode"]["samples"] == 1
    images = json.loads(
        Client(apps["/images"]).get("/", query_string={"run": ".", "tag": "eval/episode"}).data
    )
    assert [image["step"] for image in images] == [7]
    response = Client(apps["/individualImage"]).get("/?" + images[0]["query"])
    assert response.status_code == 200
    assert response.mimetype == "image/gif"
    assert response.data.startswith(b"GIF89a")
    assert response.data == gif.data

    tensor = multiplexer.Tensors(".", "eval/episode")[0].tensor_proto
    assert tensor.string_val[:2] == [str(gif.width).encode(), str(gif.height).encode()]


def test_gif_summary_rejects_non_gif() -> None:
    with pytest.raises(ValueError, match="not a GIF"):
        Logbook("/nonexistent").gif("x", b"\x89PNG\r\n", step=0, width=1, height=1)


def test_display_available(monkeypatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert not video.display_available()
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    assert video.display_available()
    monkeypatch.delenv("WAYLAND_DISPLAY")
    monkeypatch.setenv("DISPLAY", ":0")
    assert video.display_available()
    monkeypatch.delenv("DISPLAY")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert video.display_available()


def test_screen_viewer_without_display(monkeypatch) -> None:
    monkeypatch.setattr(video, "display_available", lambda: False)
    viewer = video.ScreenViewer()
    assert not viewer.active
    viewer.show(np.zeros((4, 4, 3), dtype=np.uint8))
    viewer.close()


def test_screen_viewer_shows_frames_in_a_pygame_window(monkeypatch) -> None:
    # SDL's dummy driver gives pygame a real display surface without a screen.
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setattr(video, "display_available", lambda: True)
    import pygame

    viewer = video.ScreenViewer()
    frame = np.zeros((6, 8, 3), dtype=np.uint8)
    frame[1, 2] = (10, 20, 30)
    viewer.show(frame)
    assert viewer.active
    surface = pygame.display.get_surface()
    assert surface.get_size() == (8, 6)
    assert tuple(surface.get_at((2, 1)))[:3] == (10, 20, 30)
    viewer.close()
    assert not pygame.display.get_init()


def test_screen_viewer_without_a_video_device_warns_once(monkeypatch, caplog) -> None:
    monkeypatch.setattr(video, "display_available", lambda: True)
    import pygame

    def no_device(*args: object) -> None:
        raise pygame.error("No available video device")

    monkeypatch.setattr(pygame.display, "set_mode", no_device)
    viewer = video.ScreenViewer()
    assert viewer.active
    with caplog.at_level(logging.WARNING, logger="rl.video"):
        for _ in range(3):
            viewer.show(np.zeros((4, 4, 3), dtype=np.uint8))
    assert not viewer.active
    assert len(caplog.records) == 1
    viewer.close()
