"""python -m rl.envs.check: each check catches the fault it is for, on tiny broken envs."""

import importlib.util
import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from rl.envs import check
from rl.envs.make import make_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK_NAMES = [
    "make",
    "gymnasium checker",
    "random episodes",
    "rewards",
    "observations",
    "finite values",
    "speed",
    "determinism",
    "reset",
    "close",
]


class Countdown(gym.Env):
    """Five steps an episode, observation [t / 5, 0] in Box(-1, 1), reward 1 a step."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observe(), {}

    def step(self, action):
        self.t += 1
        return self.observe(), 1.0, self.t >= 5, False, {}

    def observe(self) -> np.ndarray:
        return np.array([self.t / 5, 0.0], np.float32)


class LeavesItsBox(Countdown):
    """Observations grow to [5, 0], beyond the declared high of 1."""

    def observe(self) -> np.ndarray:
        return np.array([self.t, 0.0], np.float32)


class NaNObservations(Countdown):
    """The third step's observation is NaN."""

    def observe(self) -> np.ndarray:
        return np.array([np.nan if self.t == 3 else 0.0, 0.0], np.float32)


class CloseRaises(Countdown):
    """``close`` raises."""

    def close(self):
        raise RuntimeError("simulator already shut down")


class NeverEnds(Countdown):
    """Never terminates and has no time limit."""

    def step(self, action):
        return self.observe(), 0.0, False, False, {}


class StepRaises(Countdown):
    """The second step raises."""

    def step(self, action):
        if self.t == 1:
            raise RuntimeError("simulator crashed")
        return super().step(action)


class IgnoresItsSeed(Countdown):
    """Observations drawn from an unseeded generator: stochastic whatever the seed."""

    def observe(self) -> np.ndarray:
        return np.array([np.random.default_rng().uniform(-1, 1), 0.0], np.float32)


def statuses(env, **kwargs) -> dict:
    """Check name -> status of ``run_checks`` on an env class or name."""
    return {r.name: r.status for r in check.run_checks(env, episodes=3, **kwargs)}


def run_module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rl.envs.check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.process
def test_cartpole_passes_every_check_through_the_command_line():
    proc = run_module("CartPole-v1", "--episodes", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reported = dict(
        (name, status)
        for status, name in re.findall(r"^(PASS|WARN|FAIL)  (.+?)  ", proc.stdout, re.M)
    )
    assert sorted(reported) == sorted(CHECK_NAMES), proc.stdout
    assert check.FAIL not in reported.values(), proc.stdout
    assert "3 episodes" in proc.stdout and proc.stdout.splitlines()[-1].endswith("0 FAIL")


@pytest.mark.unit
def test_a_well_behaved_env_passes_every_check():
    assert statuses(Countdown) == {name: check.PASS for name in CHECK_NAMES}


@pytest.mark.unit
def test_random_episodes_report_lengths_returns_and_rewards():
    results = {r.name: r for r in check.run_checks(Countdown, episodes=3)}
    assert "length 5/5/5" in results["random episodes"].detail
    assert "return 5/5/5" in results["random episodes"].detail
    assert "per step in [1, 1] over 15 steps" in results["rewards"].detail
    assert "all 18 in the declared space; values in [0, 1], declared [-1, 1]" in (
        results["observations"].detail
    )


@pytest.mark.unit
def test_observations_outside_the_declared_box_fail():
    results = {r.name: r for r in check.run_checks(LeavesItsBox, episodes=3)}
    assert results["observations"].status == check.FAIL
    # Steps 2..5 of each episode leave [-1, 1]; the first is episode 0, step 2.
    assert "12 of 18 outside the declared space (first: episode 0, step 2)" in (
        results["observations"].detail
    )
    assert "values in [0, 5], declared [-1, 1]" in results["observations"].detail
    assert results["finite values"].status == check.PASS
    assert results["reset"].status == check.PASS  # the reset observation is inside


@pytest.mark.unit
def test_nan_observations_fail_the_finite_values_check():
    results = {r.name: r for r in check.run_checks(NaNObservations, episodes=3)}
    assert results["finite values"].status == check.FAIL
    assert "NaN or inf in 3 of 18 observations" in results["finite values"].detail
    assert "(first observation: episode 0, step 3)" in results["finite values"].detail
    assert results["observations"].status == check.FAIL  # NaN is in no Box either


@pytest.mark.unit
def test_episodes_that_never_end_warn_at_max_steps():
    results = check.check_random_episodes(NeverEnds, episodes=2, seed=0, max_steps=20)
    assert results[0].status == check.WARN
    assert "2 did not end within --max_steps 20" in results[0].detail


@pytest.mark.unit
def test_an_env_that_raises_in_step_fails_the_random_episodes_naming_where():
    results = check.check_random_episodes(StepRaises, episodes=3, seed=0, max_steps=100)
    assert results[0].status == check.FAIL
    assert results[0].detail == (
        "the env raised RuntimeError: simulator crashed (episode 0, step 2) after 0 episodes"
    )


@pytest.mark.unit
def test_a_close_that_raises_fails_the_close_check():
    result = check.check_close(CloseRaises, seed=0)
    assert result.status == check.FAIL
    assert "close() raised RuntimeError: simulator already shut down" in result.detail
    assert statuses(CloseRaises)["close"] == check.FAIL


@pytest.mark.unit
def test_an_env_stochastic_beyond_its_seed_warns_on_determinism_naming_the_step():
    result = check.check_determinism(IgnoresItsSeed, seed=0)
    assert result.status == check.WARN
    assert "differ at step 0 (reset observation)" in result.detail
    assert "by design" in result.detail
    # Gymnasium's checker asserts that reset is seeded: a failure, not a warning.
    assert statuses(IgnoresItsSeed)["gymnasium checker"] == check.FAIL


@pytest.mark.unit
def test_an_env_that_cannot_be_made_fails_once_and_stops():
    def broken():
        raise OSError("no simulator licence")

    results = check.run_checks(broken, episodes=1)
    assert [(r.name, r.status) for r in results] == [("make", check.FAIL)]
    assert "OSError: no simulator licence" in results[0].detail


@pytest.mark.unit
def test_gymnasium_warnings_are_reported_one_note_each_without_colour_codes():
    result = check.check_gymnasium(lambda: make_env("Pendulum-v1"))
    assert result.status == check.WARN and result.detail == "1 warning"
    assert result.notes[0].startswith("For Box action spaces, we recommend")


@pytest.mark.process
@pytest.mark.skipif(importlib.util.find_spec("grpc") is None, reason="needs the remote extra")
def test_an_env_served_over_grpc_is_checked_through_its_url():
    from rl.envs.remote.serve import launch

    server, port = launch("CartPole-v1")  # the server's own --port 0 start-up
    try:
        results = check.run_checks(f"grpc://127.0.0.1:{port}/CartPole-v1", episodes=2)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert [r.name for r in results] == CHECK_NAMES
    assert check.exit_code(results) == 0, check.format_report("served CartPole-v1", results)


@pytest.mark.process
def test_rl_game_envs_are_checked_through_the_command_line():
    # The game envs sit above rl.envs; the command knows them through rl/catalog.py.
    proc = run_module("tictactoe_lookahead", "--episodes", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == f"{len(CHECK_NAMES)} PASS, 0 WARN, 0 FAIL", proc.stdout


@pytest.mark.process
@pytest.mark.skipif(importlib.util.find_spec("grpc") is None, reason="needs the remote extra")
def test_the_env_server_serves_rl_game_envs():
    from rl.envs.remote.serve import launch

    server, port = launch("tictactoe")  # refused as an unknown env without the catalog
    try:
        results = check.run_checks(f"grpc://127.0.0.1:{port}/tictactoe", episodes=2)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert check.exit_code(results) == 0, check.format_report("served tictactoe", results)


@pytest.mark.process
def test_unknown_env_exits_2_with_one_line_naming_valid_choices():
    proc = run_module("CartPol-v1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "unknown env 'CartPol-v1'" in lines[0] and "'CartPole-v1'" in lines[0]
    assert "valid: a registered env (" in lines[0] and "cartpole" in lines[0]


@pytest.mark.unit
@pytest.mark.parametrize(
    "argv, message",
    [
        (["CartPole-v1", "--episodes", "0"], "argument --episodes: must be at least 1, got 0"),
        (["CartPole-v1", "--max_steps", "x"], "argument --max_steps: 'x' is not an integer"),
        # Gymnasium refuses a negative seed: the checks failed, blaming the env (exit 1).
        (["CartPole-v1", "--seed", "-1"], "argument --seed: must be at least 0, got -1"),
        ([], "the following arguments are required: env"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        check.main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"{check.PROG}: error: {message}\n"


@pytest.mark.unit
def test_exit_code_is_1_only_when_a_check_fails():
    passed = check.CheckResult("a", check.PASS, "")
    warned = check.CheckResult("b", check.WARN, "")
    failed = check.CheckResult("c", check.FAIL, "")
    assert check.exit_code([passed, warned]) == 0
    assert check.exit_code([passed, failed]) == 1
    with pytest.raises(ValueError, match="not one of PASS, WARN, FAIL"):
        check.CheckResult("d", "OK", "")


@pytest.mark.unit
def test_episode_counts_below_one_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        check.run_checks(Countdown, episodes=0)
