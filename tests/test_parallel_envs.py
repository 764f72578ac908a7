"""Multi-agent envs by name (PettingZoo's Parallel API): the matrix games' known payoffs,
the env check on them and on small broken envs, the refusals of a multi-agent env where a
single-agent one is wanted and back, and the mapping of agents to policies."""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv
from pettingzoo.test import parallel_api_test

from rl import catalog  # noqa: F401  (fills the registries)
from rl.envs import check, make_env, make_parallel_env
from rl.envs.check_parallel import run_parallel_checks
from rl.envs.matrix_games import CLIMBING_PAYOFF, best_joint_return, penalty_payoff
from rl.errors import HParamsError
from rl.hparams.policy_map import SHARED, assign_policies, policy_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def play(env, actions):
    env.reset(seed=0)
    return env.step(dict(zip(env.possible_agents, actions)))


@pytest.mark.unit
def test_the_climbing_game_pays_both_agents_its_matrix_and_ends_after_one_move():
    env = make_parallel_env("climbing_game")
    for a0 in range(3):
        for a1 in range(3):
            _, rewards, terminations, truncations, _ = play(env, (a0, a1))
            assert rewards == {
                "agent_0": CLIMBING_PAYOFF[a0][a1],
                "agent_1": CLIMBING_PAYOFF[a0][a1],
            }
            assert all(terminations.values()) and not any(truncations.values())
            assert env.agents == []
    assert best_joint_return(CLIMBING_PAYOFF) == 11.0
    assert CLIMBING_PAYOFF[0][0] == 11.0 and CLIMBING_PAYOFF[0][1] == -30.0  # the climb


@pytest.mark.unit
def test_the_penalty_game_takes_its_penalty_by_name_and_refuses_a_positive_one():
    env = make_parallel_env("penalty_game?penalty=-25")
    assert play(env, (0, 2))[1]["agent_0"] == -25.0
    assert play(env, (2, 2))[1]["agent_1"] == 10.0
    assert play(env, (1, 1))[1]["agent_0"] == 2.0
    with pytest.raises(ValueError, match="penalty must be at most 0"):
        penalty_payoff(1.0)


@pytest.mark.unit
@pytest.mark.parametrize("name", ["climbing_game", "penalty_game"])
def test_the_matrix_games_pass_pettingzoos_parallel_api_test(name):
    parallel_api_test(make_parallel_env(name), num_cycles=20)


@pytest.mark.unit
def test_mpe_and_sisl_envs_are_made_by_name_with_their_keyword_arguments():
    spread = make_parallel_env("simple_spread?N=2&max_cycles=5")
    assert spread.possible_agents == ["agent_0", "agent_1"]
    spread.reset(seed=0)
    assert spread.state().shape == (24,)  # the global state a centralised critic sees
    tag = make_parallel_env("simple_tag?continuous_actions=true")
    assert isinstance(tag.action_space("adversary_0"), gym.spaces.Box)
    assert [a for a in tag.possible_agents if a.startswith("adversary_")] == [
        "adversary_0",
        "adversary_1",
        "adversary_2",
    ]
    walkers = make_parallel_env("multiwalker?n_walkers=2")
    assert walkers.possible_agents == ["walker_0", "walker_1"]
    for env in (spread, tag, walkers):
        env.close()


@pytest.mark.unit
def test_a_multi_agent_env_where_a_single_agent_one_is_wanted_and_back_is_one_line():
    with pytest.raises(HParamsError) as multi:
        make_env("simple_spread")
    assert "multi-agent env" in str(multi.value)
    assert "python -m rl.envs.check simple_spread" in str(multi.value)
    with pytest.raises(HParamsError, match="'CartPole-v1' is a single-agent env"):
        make_parallel_env("CartPole-v1")
    with pytest.raises(HParamsError) as bad_key:
        make_parallel_env("simple_spread?agents=4")
    assert "takes no keyword argument 'agents': it takes N, local_ratio" in str(bad_key.value)


class OneLeavesEarly(ParallelEnv):
    """Two agents for four steps; ``quitter`` terminates after the first, then the other
    plays on alone. Observation: the step count; reward 1 a step each."""

    metadata = {"name": "one_leaves_early"}

    def __init__(self, reward=1.0, observation_scale=1.0):
        self.possible_agents = ["stayer", "quitter"]
        self.agents = []
        self.reward, self.observation_scale = reward, observation_scale
        self.t = 0
        # One space object per kind: PettingZoo's API test asks for the same object each call.
        self._observation_space = gym.spaces.Box(0.0, 4.0, (1,), np.float32)
        self._action_space = gym.spaces.Discrete(2)

    def observation_space(self, agent):
        return self._observation_space

    def action_space(self, agent):
        return self._action_space

    def observe(self):
        return np.array([self.t * self.observation_scale], np.float32)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return {a: self.observe() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        acting = list(self.agents)
        done = {a: a == "quitter" or self.t >= 4 for a in acting}
        self.agents = [a for a in acting if not done[a]]
        observations = {a: self.observe() for a in acting}
        rewards = {a: self.reward for a in acting}
        return observations, rewards, done, {a: False for a in acting}, {a: {} for a in acting}


def parallel_results(make, episodes=2):
    return {r.name: r for r in run_parallel_checks(make, episodes=episodes, seed=0, max_steps=100)}


@pytest.mark.unit
def test_the_env_check_counts_an_agent_that_leaves_early_and_its_returns_stop_there():
    results = parallel_results(OneLeavesEarly)
    assert results["agents leaving"].status == check.PASS
    assert results["agents leaving"].detail.startswith("2 agent(s) left an episode")
    detail = results["random episodes"].detail
    assert "length 4-4" in detail and "team return mean 5" in detail  # 4 + 1
    assert "stayer 4, quitter 1" in detail
    assert results["global state"].status == check.WARN  # no state(): observations instead
    assert results["pettingzoo api"].status == check.PASS


@pytest.mark.unit
def test_the_env_check_fails_non_finite_rewards_and_observations_outside_their_space():
    nan = parallel_results(lambda: OneLeavesEarly(reward=float("nan")))
    assert nan["finite values"].status == check.FAIL
    assert "reward at episode 0, step 1" in nan["finite values"].detail
    outside = parallel_results(lambda: OneLeavesEarly(observation_scale=2.0))
    assert outside["observation space"].status == check.FAIL  # 2 t reaches 6 > 4
    assert check.exit_code(list(outside.values())) == 1


@pytest.mark.unit
def test_the_env_check_passes_a_named_multi_agent_env_through_run_checks():
    results = check.run_checks("simple_spread?N=2&max_cycles=10", episodes=2)
    report = check.format_report("simple_spread", results)
    assert check.exit_code(results) == 0, report
    names = [r.name for r in results]
    assert names == [
        "make",
        "observations",
        "actions",
        "global state",
        "pettingzoo api",
        "random episodes",
        "agents leaving",
        "determinism",
        "close",
    ], report
    assert "length 10-10" in report


@pytest.mark.process
def test_train_refuses_a_multi_agent_env_with_exit_2_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "train.py", "--hparams", "ppo_cartpole", "--env", "simple_spread",
         "--output_dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'simple_spread' is a multi-agent env" in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.unit
def test_the_first_matching_pattern_gives_an_agents_policy():
    mapping = (("adversary_*", "predators"), ("agent_*", "prey"), ("*", "rest"))
    assert policy_for("adversary_2", mapping) == "predators"
    assert policy_for("agent_0", mapping) == "prey"
    assert policy_for("leader_0", mapping) == "rest"
    assert policy_for("leader_0", mapping[:2]) == ""


SPREAD_SPACES = {a: ("Box(12)", "Discrete(5)") for a in ("agent_0", "agent_1", "agent_2")}
TAG_SPACES = {
    **{f"adversary_{i}": ("Box(16)", "Discrete(5)") for i in range(3)},
    "agent_0": ("Box(14)", "Discrete(5)"),
}


@pytest.mark.unit
def test_one_shared_policy_or_one_per_group_assigns_every_agent():
    assert set(
        assign_policies(list(SPREAD_SPACES), SPREAD_SPACES, SHARED, ["shared"]).values()
    ) == {"shared"}
    groups = (("adversary_*", "predators"), ("agent_*", "prey"))
    assigned = assign_policies(list(TAG_SPACES), TAG_SPACES, groups, ["predators", "prey"])
    assert assigned == {
        "adversary_0": "predators",
        "adversary_1": "predators",
        "adversary_2": "predators",
        "agent_0": "prey",
    }


@pytest.mark.unit
def test_a_mapping_that_leaves_an_agent_out_names_it_and_the_patterns():
    with pytest.raises(HParamsError) as error:
        assign_policies(list(TAG_SPACES), TAG_SPACES, (("adversary_*", "p"),), ["p"])
    assert "no policy for agent(s) agent_0" in str(error.value)
    assert "(adversary_*)" in str(error.value)


@pytest.mark.unit
def test_a_mapping_to_an_undefined_policy_names_the_defined_ones():
    with pytest.raises(HParamsError) as error:
        assign_policies(list(SPREAD_SPACES), SPREAD_SPACES, (("*", "sharde"),), ["shared"])
    assert "names policy sharde, which the set does not define; its policies: shared" in str(
        error.value
    )


@pytest.mark.unit
def test_one_policy_over_agents_whose_spaces_differ_is_refused_naming_both():
    with pytest.raises(HParamsError) as error:
        assign_policies(list(TAG_SPACES), TAG_SPACES, SHARED, ["shared"])
    message = str(error.value)
    assert "policy shared is shared by agents whose spaces differ" in message
    assert "adversary_0 sees Box(16)" in message and "agent_0 sees Box(14)" in message
    assert "separate policies" in message


@pytest.mark.unit
def test_the_env_server_refuses_a_multi_agent_env_asked_of_it_by_name():
    from rl.envs.remote import serve  # grpcio: the remote extra

    with pytest.raises(serve.Refusal) as refused:
        serve.env_maker([serve.ANY_ENV])("climbing_game", None, {})
    assert "climbing_game is a multi-agent env" in str(refused.value)


@pytest.mark.process
def test_the_env_server_refuses_to_start_for_a_multi_agent_env_with_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "rl.envs.remote.serve", "--env", "simple_spread", "--port", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "simple_spread is a multi-agent env" in lines[0], proc.stderr
