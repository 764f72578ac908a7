"""State saved beside each checkpoint (the run folder's contract), and the local System."""

import contextlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from rl.agents.ppo import PPOLearner
from rl.experiment import Experiment
from rl.files import write_atomically
from rl.systems import LocalSystem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ppo_tiny acts 32 steps per rollout, so these checkpoint at 64, 128, 192 and 256 and keep two.
OVERRIDES = "checkpoint_interval=64,keep_checkpoints=2"


class StepStamp:
    """A stand-in for a replay buffer: saves the agent's step, remembers the step it loaded."""

    def __init__(self, agent):
        self.agent = agent
        self.loaded = None

    def save(self, path):
        write_atomically(path, lambda tmp: np.savez(tmp, step=self.agent.env_steps))

    def load(self, path):
        with np.load(path) as data:
            self.loaded = int(data["step"])


@pytest.fixture
def stamps(monkeypatch):
    """Gives every PPO agent a separately saved ``stamp``; returns the stamps made."""
    made = []

    def separate_state(agent):
        made.append(StepStamp(agent))
        return {"stamp": made[-1]}

    monkeypatch.setattr(PPOLearner, "separate_state", separate_state, raising=False)
    return made


def files(folder):
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def stamp_steps(folder):
    """Steps of the stamp-<N>.npz files in ``folder``."""
    return sorted(
        int(n[len("stamp-") : -len(".npz")]) for n in files(folder) if n.startswith("stamp-")
    )


def trained_run(tmp_path):
    out = tmp_path / "run"
    exp = Experiment("ppo_tiny", str(out), overrides=OVERRIDES, verbose=False)
    exp.train()
    exp.close()
    return out


@pytest.mark.slow
def test_state_files_are_saved_with_each_checkpoint_and_rotated_with_it(tmp_path, stamps):
    out = trained_run(tmp_path)
    ckpts = out / "checkpoints"
    assert stamp_steps(ckpts) == [192, 256]  # 64 and 128 rotated away
    assert {n for n in files(ckpts) if n.endswith(".index")} == {
        "ckpt-192.index",
        "ckpt-256.index",
    }
    for step in (192, 256):
        with np.load(ckpts / f"stamp-{step}.npz") as data:
            assert int(data["step"]) == step
    again = Experiment("ppo_tiny", str(out), overrides=OVERRIDES, verbose=False)
    assert again.step == 256 and stamps[-1].loaded == 256
    again.close()


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["missing", "garbled"])
def test_a_checkpoint_without_its_readable_state_file_falls_back(tmp_path, stamps, capsys, damage):
    out = trained_run(tmp_path)
    latest = out / "checkpoints" / "stamp-256.npz"
    if damage == "missing":
        latest.unlink()
    else:
        latest.write_bytes(b"not an npz")
    again = Experiment("ppo_tiny", str(out), overrides=OVERRIDES, verbose=False)
    assert again.step == 192 and stamps[-1].loaded == 192
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if "ckpt-256" in line]  # one line for it all
    assert "ckpt-256 cannot be read" in line and "resuming from the previous checkpoint" in line
    assert "the best checkpoint ckpt-256 to " in line  # its best too: its training is redone
    if damage == "missing":
        assert "its stamp-256.npz is missing" in err
    # The unreadable checkpoint went aside with what was left of its state file.
    unreadable = files(out / "checkpoints" / "unreadable")
    assert "ckpt-256.index" in unreadable
    assert ("stamp-256.npz" in unreadable) == (damage == "garbled")
    again.train()  # saves 256 again, with its state file
    assert stamps[-1].agent.env_steps == 256
    assert stamp_steps(out / "checkpoints") == [192, 256]
    again.close()


@pytest.mark.process
def test_a_kill_after_the_state_file_before_its_checkpoint_loses_nothing(tmp_path, stamps):
    """The child kills itself (SIGKILL) right after writing stamp-192.npz: no timing involved."""
    out = tmp_path / "run"
    child = textwrap.dedent(
        f"""
        import os, signal
        import numpy as np
        from rl.agents.ppo import PPOLearner
        from rl.experiment import Experiment
        from rl.files import write_atomically

        class KillAfter192:
            def __init__(self, agent):
                self.agent = agent
            def save(self, path):
                write_atomically(path, lambda tmp: np.savez(tmp, step=self.agent.env_steps))
                if self.agent.env_steps == 192:
                    os.kill(os.getpid(), signal.SIGKILL)
            def load(self, path):
                pass

        PPOLearner.separate_state = lambda agent: {{"stamp": KillAfter192(agent)}}
        Experiment("ppo_tiny", {str(out)!r}, overrides={OVERRIDES!r}, verbose=False).train()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == -9, proc.stderr
    ckpts = out / "checkpoints"
    assert "stamp-192.npz" in files(ckpts) and "ckpt-192.index" not in files(ckpts)
    again = Experiment("ppo_tiny", str(out), overrides=OVERRIDES, verbose=False)
    assert again.step == 128 and stamps[-1].loaded == 128
    # Tidying dropped the state file whose checkpoint was never saved.
    assert stamp_steps(ckpts) == [64, 128]
    again.train()
    assert stamp_steps(ckpts) == [192, 256]
    again.close()


@pytest.mark.slow
def test_leftover_temporary_state_files_are_removed_when_resuming(tmp_path, stamps):
    out = trained_run(tmp_path)
    ckpts = out / "checkpoints"
    (ckpts / ".stamp-320.0123456789ab.tmp.npz").write_bytes(b"half")
    (ckpts / "stamp-320.npz").write_bytes(b"never covered by a checkpoint")
    again = Experiment("ppo_tiny", str(out), overrides=OVERRIDES, verbose=False)
    assert again.step == 256
    assert sorted(n for n in os.listdir(ckpts) if "stamp" in n) == [
        "stamp-192.npz",
        "stamp-256.npz",
    ]
    again.close()


@pytest.mark.slow
def test_read_only_loading_writes_no_state_file(tmp_path, stamps):
    out = trained_run(tmp_path)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    run = Experiment(None, str(out), read_only=True, verbose=False)
    assert stamps[-1].loaded == 256
    run.close()
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.unit
def test_the_local_system_uses_the_default_strategy_and_one_replica():
    system = LocalSystem()
    default = tf.distribute.get_strategy()  # outside any scope: the default strategy
    assert system.replica_count == 1
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        assert tf.distribute.get_strategy() is not default  # the check below can fail
    with system.scope():
        assert tf.distribute.get_strategy() is default
        assert not tf.distribute.has_strategy()
    assert type(system.actor_launcher(0)).__name__ == "ProcessLauncher"


@pytest.mark.unit
def test_the_agent_is_built_inside_the_systems_scope(tmp_path, monkeypatch):
    events = []
    scope = LocalSystem.scope

    @contextlib.contextmanager
    def recorded_scope(self):
        events.append("enter")
        with scope(self):
            yield
        events.append("exit")

    build = PPOLearner.__init__

    def recorded_build(self, *args, **kwargs):
        events.append("build")
        build(self, *args, **kwargs)

    monkeypatch.setattr(LocalSystem, "scope", recorded_scope)
    monkeypatch.setattr(PPOLearner, "__init__", recorded_build)
    exp = Experiment("ppo_tiny", str(tmp_path / "run"), verbose=False)
    assert events == ["enter", "build", "exit"]
    exp.close()
