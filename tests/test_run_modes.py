"""Test mode, copies, video and export as a user runs them (subprocesses)."""

import json
import os
import shutil
import signal
import subprocess
import sys

import imageio
import numpy as np
import pytest
from PIL import Image, ImageSequence

import rl
from rl.processes import usable_cpus
from rl.video import gif_delay_ms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(script, *args, timeout=300, **kwargs):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        **kwargs,
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "run"
    proc = run("train.py", "--hparams", "ppo_tiny", "--output_dir", str(out), "--record_video")
    assert proc.returncode == 0, proc.stderr
    return out


def files(path):
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.mark.process
def test_training_writes_snapshot_and_eval_videos(trained):
    assert (trained / "snapshot" / "hparams.json").exists()
    assert "ppo_tiny" in (trained / "snapshot" / "command.txt").read_text()
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(trained / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    gifs = acc.Tensors("eval/video")
    assert [g.step for g in gifs] == [128, 256]
    assert acc.SummaryMetadata("eval/video").plugin_data.plugin_name == "images"
    assert gifs[-1].tensor_proto.string_val[2].startswith(b"GIF89a")
    videos = sorted(os.listdir(trained / "videos"))
    # video_interval 0: the first episode of every evaluation (128 and 256).
    assert videos == [
        "eval_step000000128_ep0.gif",
        "eval_step000000128_ep0.mp4",
        "eval_step000000256_ep0.gif",
        "eval_step000000256_ep0.mp4",
    ]


@pytest.mark.process
def test_test_mode_records_and_leaves_training_outputs_untouched(trained):
    before = files(trained)
    proc = run(
        "train.py",
        "--training=false",
        "--output_dir",
        str(trained),
        "--test_episodes",
        "3",
        "--record_video",
    )
    assert proc.returncode == 0, proc.stderr
    assert "test: 3 episodes at step 256" in proc.stdout
    after = files(trained)
    for path, data in before.items():
        assert after[path] == data, path  # checkpoints, logs: byte-identical
    test = json.loads((trained / "test.json").read_text())
    assert test["episodes"] == 3 and len(test["returns"]) == 3
    assert test["return_mean"] == pytest.approx(np.mean(test["returns"]))
    assert test["checkpoint"].endswith("ckpt-256")
    for i, length in enumerate(test["lengths"]):
        mp4 = trained / "videos" / f"test_step000000256_ep{i}.mp4"
        with imageio.get_reader(str(mp4), "ffmpeg") as reader:
            assert sum(1 for _ in reader) == length  # one frame per step
        # Pillow merges identical consecutive GIF frames and adds up their
        # delays, so the GIF's total duration counts its frames.
        with Image.open(mp4.with_suffix(".gif")) as gif:
            delays = []
            for frame in ImageSequence.Iterator(gif):
                delays.append(frame.info["duration"])
        assert sum(delays) == length * gif_delay_ms(50)


@pytest.mark.process
def test_a_second_test_keeps_the_first_ones_results(trained, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    first = run("train.py", "--training=false", "--test_episodes", "2", "--output_dir", str(out))
    assert first.returncode == 0, first.stderr
    first_results = (out / "test.json").read_bytes()
    kept_before = set(out.glob("test.before-*.json"))  # other tests may have tested it too
    second = run("train.py", "--training=false", "--test_episodes", "3", "--output_dir", str(out))
    assert second.returncode == 0, second.stderr
    assert json.loads((out / "test.json").read_text())["episodes"] == 3
    kept = set(out.glob("test.before-*.json")) - kept_before
    assert len(kept) == 1 and kept.pop().read_bytes() == first_results


@pytest.mark.process
def test_test_mode_without_checkpoint_is_exit_2(tmp_path):
    proc = run("train.py", "--training=false", "--output_dir", str(tmp_path / "none"))
    assert proc.returncode == 2
    assert "holds no trained run" in proc.stderr and "no trained copies" in proc.stderr
    assert not (tmp_path / "none").exists()


@pytest.mark.process
def test_test_mode_tests_copies_that_have_no_evaluation_yet(trained, tmp_path):
    # A copy stopped before its first evaluation has checkpoints but no eval.jsonl;
    # test mode said the folder held "no trained copies".
    out = tmp_path / "copies"
    shutil.copytree(trained, out / "run_0", ignore=shutil.ignore_patterns("train.lock"))
    (out / "run_0" / "eval.jsonl").unlink()
    proc = run("train.py", "--training=false", "--test_episodes", "1", "--output_dir", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "test_summary.json").read_text())["runs"][0]["run_dir"] == str(
        out / "run_0"
    )


@pytest.mark.process
def test_copies_produce_runs_and_a_matching_summary(copies_runs, tmp_path):
    out = tmp_path / "copies"
    shutil.copytree(copies_runs / "seq", out)
    summary = json.loads((out / "summary.json").read_text())
    finals = []
    seeds = []
    for i in range(2):
        lines = (out / f"run_{i}" / "eval.jsonl").read_text().splitlines()
        finals.append(json.loads(lines[-1])["return_mean"])
        seeds.append(json.loads((out / f"run_{i}" / "hparams.json").read_text())["seed"])
    assert len(set(seeds)) == 2
    assert summary["num_runs"] == 2
    assert summary["final_return_mean"] == pytest.approx(np.mean(finals))
    assert summary["final_return_std"] == pytest.approx(np.std(finals))
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Rerunning resumes each finished copy: nothing changes, but what a kill left goes.
    before = files(out / "run_0" / "checkpoints")
    half_written = out / ".summary.0123456789ab.tmp.json"
    half_written.write_text("{")
    again = run("train.py", "--hparams", "ppo_tiny", "--copies", "2", "--output_dir", str(out))
    assert again.returncode == 0, again.stderr
    assert files(out / "run_0" / "checkpoints") == before
    assert not half_written.exists()
    # Testing the copies folder tests each copy.
    test = run("train.py", "--training=false", "--test_episodes", "2", "--output_dir", str(out))
    assert test.returncode == 0, test.stderr
    tested = json.loads((out / "test_summary.json").read_text())
    per_run = [json.loads((out / f"run_{i}" / "test.json").read_text()) for i in range(2)]
    assert [r["return_mean"] for r in tested["runs"]] == [r["return_mean"] for r in per_run]
    assert files(out / "run_0" / "checkpoints") == before


PLAIN_TF = """
import sys, numpy as np, tensorflow as tf
policy = tf.saved_model.load(sys.argv[1])
obs = np.load(sys.argv[2])
print(",".join(str(a) for a in policy(tf.constant(obs)).numpy()))
assert "rl" not in sys.modules
"""


@pytest.mark.process
def test_exported_policy_runs_without_rl(trained, tmp_path):
    export_dir = tmp_path / "policy"
    proc = run("scripts/export.py", str(trained), "--export_dir", str(export_dir))
    assert proc.returncode == 0, proc.stderr
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    plain = subprocess.run(
        [sys.executable, "-c", PLAIN_TF, str(export_dir), str(tmp_path / "obs.npy")],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        timeout=120,
    )
    assert plain.returncode == 0, plain.stderr
    exported = [int(a) for a in plain.stdout.strip().split(",")]
    sys.path.insert(0, ROOT)
    from rl.experiment import load

    agent_actions = load(str(trained)).agent.compute_action(obs)
    assert exported == agent_actions.tolist()
    again = run("scripts/export.py", str(trained), "--export_dir", str(export_dir))
    assert again.returncode == 2 and "exists already" in again.stderr


@pytest.mark.process
def test_copies_side_by_side_match_copies_one_after_another(copies_runs):
    for i in range(2):  # same derived seeds, same (deterministic) results
        a = (copies_runs / "seq" / f"run_{i}" / "eval.jsonl").read_text().splitlines()
        b = (copies_runs / "par" / f"run_{i}" / "eval.jsonl").read_text().splitlines()
        assert [json.loads(l)["returns"] for l in a] == [json.loads(l)["returns"] for l in b]
    summary = json.loads((copies_runs / "par" / "summary.json").read_text())
    assert summary["num_runs"] == 2
    # Side by side, each copy's TensorFlow got its share of the CPUs (one thread pool per
    # core oversubscribes them), recorded with the run; alone, TensorFlow's default.
    share = str(max(1, usable_cpus() // 2))
    for folder, expected in (("par", share), ("seq", None)):
        system = json.loads(
            (copies_runs / folder / "run_0" / "snapshot" / "system.json").read_text()
        )
        assert system["env"].get("TF_NUM_INTRAOP_THREADS") == expected
        assert system["env"].get("TF_NUM_INTEROP_THREADS") == expected


def waits_for_file(path) -> str:
    """Python source that waits until ``path`` exists, and exits with 1 after 60 s."""
    return (
        "import os, sys, time\n"
        "deadline = time.time() + 60\n"
        f"while not os.path.exists({str(path)!r}):\n"
        "    if time.time() > deadline: sys.exit(1)\n"
        "    time.sleep(0.05)\n"
    )


@pytest.mark.process
def test_copies_take_a_free_slot_as_soon_as_any_copy_ends(tmp_path):
    # Copy 0 ends only once copy 2 has started: with two slots, copy 2 must take the slot
    # copy 1 frees, not wait for copy 0 (whose wait then gives up after 60 s and fails).
    from rl import slots

    started = tmp_path / "copy_2_started"
    commands = [
        [sys.executable, "-c", waits_for_file(started)],
        [sys.executable, "-c", "pass"],
        [sys.executable, "-c", f"open({str(started)!r}, 'w').close()"],
    ]
    assert slots.run_in_slots(commands, 2, dict(os.environ)) == 0
    failing = [[sys.executable, "-c", "pass"], [sys.executable, "-c", "raise SystemExit(3)"]]
    assert slots.run_in_slots(failing, 2, dict(os.environ)) == 3


@pytest.mark.process
def test_a_copy_killed_by_a_signal_stops_the_others_and_starts_no_more(tmp_path):
    # The OOM killer picks a copy, not the light parent: the set's copies are then
    # incomplete, so the others checkpoint (SIGTERM) and the kill reaches the caller.
    from rl import slots

    stopped, started = tmp_path / "stopped", tmp_path / "third_started"
    ready = tmp_path / "first_ready"
    waits_for_sigterm = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(stopped)!r}, 'w').close(), "
        "sys.exit(143)))\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(60)\n"
    )
    # Not before the first is ready: SIGTERM would find no handler yet.
    dies_once_the_first_is_ready = waits_for_file(ready) + "os.kill(os.getpid(), 9)\n"
    commands = [
        [sys.executable, "-c", waits_for_sigterm],
        [sys.executable, "-c", dies_once_the_first_is_ready],
        [sys.executable, "-c", f"open({str(started)!r}, 'w').close()"],
    ]
    assert slots.run_in_slots(commands, 2, dict(os.environ)) == -9
    assert stopped.exists() and not started.exists()


@pytest.mark.process
def test_sigterm_to_copies_side_by_side_reaches_each_copy_before_train_py_ends(tmp_path):
    # A search prunes a trial of copies with one SIGTERM to its train.py: each copy must
    # checkpoint and end before train.py does, so nothing trains on behind the search.
    # Not copy.py: beside parent.py it would stand in for the standard library's copy.
    child = tmp_path / "a_copy.py"
    child.write_text(
        "import os, signal, sys, time\n"
        "def checkpoint(*args):\n"
        "    time.sleep(1)  # a checkpoint takes a while\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, checkpoint)\n"
        "os.write(1, b'up\\n')  # one write: the two copies share the pipe\n"
        "time.sleep(60)\n"
    )
    marks = [tmp_path / f"copy_{i}" for i in range(2)]
    parent = tmp_path / "parent.py"
    parent.write_text(
        "import os, sys\n"
        "from rl import slots\n"
        f"commands = [[sys.executable, {str(child)!r}, m] for m in {[str(m) for m in marks]!r}]\n"
        "sys.exit(slots.run_in_slots(commands, 2, dict(os.environ)))\n"
    )
    environ = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(rl.__file__))}
    proc = subprocess.Popen(
        [sys.executable, str(parent)], stdout=subprocess.PIPE, text=True, env=environ
    )
    assert [proc.stdout.readline() for _ in marks] == ["up\n"] * 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    assert all(m.exists() for m in marks)  # written a second after each copy's SIGTERM


@pytest.mark.process
def test_train_py_ends_with_the_signal_that_killed_a_copy_and_the_other_saves(tmp_path):
    from polling import pids_naming, wait_for

    out = tmp_path / "copies"
    proc = subprocess.Popen(
        [sys.executable, "train.py", "--hparams=ppo_cartpole", "--copies=2",
         "--copies_parallel=2", "--train_steps=400000", f"--output_dir={out}",
         "--hparam_override=eval_interval=2000,checkpoint_interval=2000,eval_episodes=2"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # Both copies training (so copy 0 has its SIGTERM handler) before copy 1 is killed.
    evals = [out / f"run_{i}" / "eval.jsonl" for i in range(2)]
    wait_for(
        lambda: all(e.exists() and e.stat().st_size > 0 for e in evals),
        "an evaluation of each copy",
        process=proc,
    )
    for pid in pids_naming(f"--output_dir={out / 'run_1'}"):
        os.kill(pid, signal.SIGKILL)  # as the OOM killer would
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, stderr
    assert "rl: a copy was killed by signal 9; the others stopped with a checkpoint" in stderr
    finals = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"step"')]
    assert [final["interrupted"] for final in finals] == [signal.SIGTERM]  # copy 0's
    assert finals[0]["step"] < 400_000 and not pids_naming(str(out))


@pytest.mark.unit
def test_a_users_thread_settings_are_kept_for_copies_side_by_side(monkeypatch):
    from rl import processes
    from rl.cli import copies

    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    monkeypatch.delenv("TF_NUM_INTEROP_THREADS", raising=False)
    monkeypatch.setattr(processes, "usable_cpus", lambda: 8)
    environ = copies.copy_environment(3)
    assert environ["TF_NUM_INTRAOP_THREADS"] == environ["TF_NUM_INTEROP_THREADS"] == "2"
    assert copies.copy_environment(16)["TF_NUM_INTRAOP_THREADS"] == "1"
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "4")
    environ = copies.copy_environment(3)
    assert environ["TF_NUM_INTRAOP_THREADS"] == "4" and "TF_NUM_INTEROP_THREADS" not in environ
