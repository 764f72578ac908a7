"""--plugins: a user's own loss, agent, env and hparam set, from a package rl does not know."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")

# A user's package: an env, a loss (PPO's, halved), an agent that accepts that loss, and
# two sets that differ only in agent and loss.
PLUGIN = '''
"""my_rl.corridor: walk right five cells; -0.01 a step, +1 at the end."""
import dataclasses

import gymnasium as gym
import numpy as np

from rl import registry
from rl.fields import named, one_of
from rl.hparams.ppo import PPOHParams


class Corridor(gym.Env):
    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.position = max(self.position + (1 if action == 1 else -1), 0)
        done = self.position == 5
        obs = np.array([self.position / 5], np.float32)
        return obs, (1.0 if done else -0.01), done, False, {}


@registry.envs.register("plugin_corridor")
def plugin_corridor(render_mode=None):
    return gym.wrappers.TimeLimit(Corridor(render_mode), 50)


@registry.envs.register("plugin_corridor_in_a_run")
def plugin_corridor_in_a_run(render_mode=None):
    # As a self-play env, it needs the run folder ($RL_RUN_DIR) in every process.
    import os

    if not os.environ.get("RL_RUN_DIR"):
        raise RuntimeError("RL_RUN_DIR is not set in this process")
    return plugin_corridor(render_mode)


@registry.grad_comp.register("halved_ppo_clip")
def halved_ppo_clip(*args, **kwargs):
    from rl.algos.grad_comp.ppo import ppo_clip_loss

    loss, extras = ppo_clip_loss(*args, **kwargs)
    return 0.5 * loss, extras


registry.agents.declare("halved_ppo", "my_rl.agent:HalvedPPO")


@dataclasses.dataclass(frozen=True)
class HalvedPPOHParams(PPOHParams):
    agent: str = one_of("halved_ppo", ("halved_ppo",))
    grad_comp: str = named("halved_ppo_clip", "grad_comp", ("halved_ppo_clip",))


SETTINGS = dict(
    env="plugin_corridor", num_envs=4, rollout_steps=32, num_epochs=2, num_minibatches=2,
    train_steps=2048, eval_interval=1024, eval_episodes=2, seed=3,
)


@registry.hparams.register
def halved_ppo_corridor():
    return HalvedPPOHParams(**SETTINGS)


@registry.hparams.register
def plain_ppo_corridor():
    return PPOHParams(**SETTINGS)
'''

AGENT = """
from rl.agents.ppo import PPOLearner


class HalvedPPO(PPOLearner):
    pass  # PPO's update, with the loss its hparams name
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A folder holding the user's package, where the user runs train.py from."""
    folder = tmp_path_factory.mktemp("project")
    package = folder / "my_rl"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "corridor.py").write_text(textwrap.dedent(PLUGIN))
    (package / "agent.py").write_text(textwrap.dedent(AGENT))
    (package / "broken.py").write_text("import no_such_dependency_xyz\n")
    (package / "raises.py").write_text("raise RuntimeError('bad plugin')\n")
    # A plugin ends the process or is interrupted while it registers.
    (package / "exits.py").write_text("import sys\nsys.exit(0)\n")
    (package / "exits_saying.py").write_text("raise SystemExit('x')\n")
    (package / "interrupted.py").write_text("raise KeyboardInterrupt\n")
    (package / "duplicate.py").write_text(
        "from rl import registry\n\n@registry.hparams.register\ndef ppo_cartpole():\n    pass\n"
    )
    return folder


def train(project, *args, timeout=300):
    return subprocess.run(
        [sys.executable, TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=project,
    )


def final(proc):
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_plugin_loss_agent_env_and_set_train_with_workers_and_resume(project):
    # Two worker processes must import the plugin too (its env); with them a PPO run is
    # the run without (tests/test_workers.py), so the run learns as one alone does.
    out = project / "runs" / "halved"
    proc = train(project, "--plugins", "my_rl.corridor", "--hparams", "halved_ppo_corridor",
                 "--num_workers", "2", "--output_dir", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert final(proc)["step"] == 2048
    evals = [json.loads(l) for l in (out / "eval.jsonl").read_text().splitlines()]
    assert evals[-1]["return_mean"] == pytest.approx(0.96)  # five steps right: 1 - 4 * 0.01
    # Resumed without the flag: the run's snapshot names its plugins.
    again = train(project, "--output_dir", str(out), "--train_steps", "3072")
    assert again.returncode == 0, again.stderr
    assert "resuming from" in again.stderr and final(again)["step"] == 3072


def test_the_plugin_loss_is_the_one_that_trains(project):
    # One update (4 envs x 32 steps) from the same seed and data: the halved loss reports
    # half of PPO's. Adam makes the steps nearly scale-free, so later minibatches agree too.
    results = {}
    for name in ("halved_ppo_corridor", "plain_ppo_corridor"):
        out = project / "runs" / f"one_update_{name}"
        proc = train(project, "--plugins", "my_rl.corridor", "--hparams", name,
                     "--train_steps", "128", "--output_dir", str(out))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        results[name] = final(proc)
    halved, plain = results["halved_ppo_corridor"], results["plain_ppo_corridor"]
    # (within 1%: Adam's epsilon is the only term that sees the gradient's scale)
    assert halved["loss"] == pytest.approx(0.5 * plain["loss"], rel=1e-2)


def test_plugins_reach_copies_side_by_side(project):
    # Each copy is a train.py of its own: it must import the plugin to know the set.
    out = project / "runs" / "copies"
    proc = train(project, "--plugins", "my_rl.corridor", "--hparams", "halved_ppo_corridor",
                 "--copies", "2", "--copies_parallel", "2", "--train_steps", "128",
                 "--output_dir", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["num_runs"] == 2


def test_plugins_and_the_run_folder_reach_ray_actors(project):
    # A plugin env under a built-in set: nothing in the spec imports the plugin, so the
    # actor loads it from RL_PLUGINS, which the learner sends it with RL_RUN_DIR (this env
    # refuses to be made without it, as a self-play env cannot find its opponents).
    pytest.importorskip("ray")
    out = project / "runs" / "ray"
    proc = train(project, "--sys", "ray", "--plugins", "my_rl.corridor", "--hparams", "ppo_tiny",
                 "--env", "plugin_corridor_in_a_run", "--num_workers", "2",
                 "--train_steps", "1024", "--output_dir", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert final(proc)["step"] == 1024


@pytest.mark.parametrize(
    "module, expected",
    [
        ("my_rl.nope", "--plugins my_rl.nope: no module named 'my_rl.nope'"),
        (
            "my_rl.broken",
            "--plugins my_rl.broken: no module named 'no_such_dependency_xyz' (it imports "
            "'no_such_dependency_xyz', which is missing)",
        ),
        ("my_rl.raises", "--plugins my_rl.raises: importing it raised RuntimeError: bad plugin"),
        ("my_rl.duplicate", "--plugins my_rl.duplicate: importing it raised"),
        # These ended train.py with exit 0 and no output, printed only "x", and printed a
        # 28-line traceback.
        ("my_rl.exits", "--plugins my_rl.exits: importing it called sys.exit(0) ("),
        ("my_rl.exits_saying", "--plugins my_rl.exits_saying: importing it called sys.exit('x')"),
        (
            "my_rl.interrupted",
            "--plugins my_rl.interrupted: importing it raised KeyboardInterrupt (",
        ),
        # An unset shell variable ($PLUGIN): it was skipped, and recorded as "" in the snapshot.
        ("", "--plugins was given an empty name; a plugin is a module importable"),
    ],
)
def test_a_bad_plugin_is_one_line_and_writes_nothing(project, module, expected):
    out = project / "runs" / "bad"
    proc = train(project, "--plugins", module, "--hparams", "ppo_tiny", "--output_dir", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"train.py: error: {expected}"), proc.stderr
    assert not out.exists()


def test_a_search_over_a_plugin_set_imports_the_plugin_in_every_trial(project):
    pytest.importorskip("optuna", reason="needs the search extra (optuna)")
    space = project / "lr.yaml"
    space.write_text("learning_rate: {categorical: [3e-4, 1e-3]}\n")
    out = project / "search"
    proc = subprocess.run(
        [sys.executable, "-m", "rl.search", "--plugins", "my_rl.corridor",
         "--hparams", "halved_ppo_corridor", f"--space={space}", f"--output_dir={out}",
         "--trials=1", "--pruner=none", "--train_steps=1024"],
        capture_output=True, text=True, timeout=300, cwd=project,
        env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    best = json.loads((out / "best.json").read_text())
    assert best["command"].startswith("python train.py --hparams halved_ppo_corridor")
    assert "--plugins my_rl.corridor" in best["command"]
    trial_hparams = json.loads((out / "trial_0" / "hparams.json").read_text())
    assert trial_hparams["agent"] == "halved_ppo" and trial_hparams["learning_rate"] in (3e-4, 1e-3)
