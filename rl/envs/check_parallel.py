"""The checks of a multi-agent env (PettingZoo's Parallel API) for ``python -m rl.envs.check``.

What PettingZoo's own tests cover (the API's types and invariants, and that one seed gives
one episode) is left to them (``pettingzoo.test``); rl adds what training on the env
needs to know: each agent's spaces, whether the env has a global state for a centralised
critic, and what random agents see in whole episodes (returns per agent and for the team,
episode lengths, agents that leave before the end, observations outside their space,
non-finite numbers). Each check returns ``CheckResult`` lines, as the single-agent checks
in rl/envs/check.py do, which prints them.
"""

import contextlib
import dataclasses
import io
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from rl.envs.check_results import (
    FAIL,
    PASS,
    WARN,
    CheckResult,
    close_twice,
    describe_space,
    guarded,
    is_finite,
)
from rl.errors import USER_ERRORS, error_line

ParallelEnvFactory = Callable[[], Any]  # returns a fresh pettingzoo.ParallelEnv

API_TEST_CYCLES = 200  # steps of PettingZoo's API and seed tests


def close_quietly(env: Any) -> None:
    """Closes an env a check is done with (the close check reports what close raises)."""
    try:
        env.close()
    except Exception:
        pass


def group_spaces(env: Any, space_of: Callable[[str], Any]) -> str:
    """The agents' spaces, agents with equal spaces listed together."""
    groups: Dict[str, List[str]] = {}
    for agent in env.possible_agents:
        groups.setdefault(describe_space(space_of(agent)), []).append(agent)
    return "; ".join(f"{', '.join(agents)}: {space}" for space, agents in groups.items())


def global_state_shape(env: Any) -> Optional[tuple]:
    """The shape of ``env.state()`` after a reset, None if the env has no global state."""
    try:
        return tuple(np.shape(env.state()))
    except (NotImplementedError, AttributeError):
        return None


def check_make(make: ParallelEnvFactory, seed: int) -> List[CheckResult]:
    """Builds the env once: its agents, their spaces and its global state.

    Raises:
        the ``USER_ERRORS`` types: bad input, not a failing env.
    """
    try:
        env = make()
        env.reset(seed=seed)
        agents = list(env.possible_agents)
        observations = group_spaces(env, env.observation_space)
        actions = group_spaces(env, env.action_space)
        state = global_state_shape(env)
    except USER_ERRORS:
        raise
    except Exception as error:
        return [
            CheckResult("make", FAIL, f"the env could not be made: {error_line(error, typed=True)}")
        ]
    close_quietly(env)
    state_line = (
        CheckResult("global state", PASS, f"state() gives shape {state}")
        if state is not None
        else CheckResult(
            "global state",
            WARN,
            "no state(): a centralised critic sees all agents' observations instead",
        )
    )
    return [
        CheckResult("make", PASS, f"{len(agents)} agents: {', '.join(agents)}"),
        CheckResult("observations", PASS, observations),
        CheckResult("actions", PASS, actions),
        state_line,
    ]


def pettingzoo_test(name: str, test: Callable[[], None]) -> CheckResult:
    """Runs one of PettingZoo's tests: PASS, or FAIL with the assertion it stopped at;
    what it prints is kept out of the report."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            test()
    except AssertionError as error:
        return CheckResult(name, FAIL, error_line(error, typed=True))
    return CheckResult(name, PASS, "passed")


def check_api(make: ParallelEnvFactory) -> CheckResult:
    """PettingZoo's Parallel API test over ``API_TEST_CYCLES`` steps."""
    from pettingzoo.test import parallel_api_test  # PettingZoo: the env's own extra

    env = make()
    try:
        return pettingzoo_test(
            "pettingzoo api", lambda: parallel_api_test(env, num_cycles=API_TEST_CYCLES)
        )
    finally:
        close_quietly(env)


def check_seeding(make: ParallelEnvFactory) -> CheckResult:
    """PettingZoo's seed test: two envs reset with one seed play the same episode."""
    from pettingzoo.test import parallel_seed_test  # PettingZoo: the env's own extra

    return pettingzoo_test(
        "determinism", lambda: parallel_seed_test(make, num_cycles=API_TEST_CYCLES)
    )


@dataclasses.dataclass
class ParallelRollout:
    """What random agents saw in whole episodes, filled in by ``random_episodes``."""

    agent_returns: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    team_returns: List[float] = dataclasses.field(default_factory=list)
    lengths: List[int] = dataclasses.field(default_factory=list)
    left_early: int = 0  # agents that left an episode before its last step
    outside: Optional[str] = None  # the first observation outside its space
    non_finite: Optional[str] = None  # the first non-finite observation or reward
    stopped: int = 0  # episodes cut at max_steps


def random_episodes(
    make: ParallelEnvFactory, episodes: int, seed: int, max_steps: int
) -> ParallelRollout:
    """Plays ``episodes`` episodes with uniformly random actions for every agent."""
    stats = ParallelRollout()
    env = make()
    try:
        for episode in range(episodes):
            observations, _ = env.reset(seed=seed + episode)
            for i, agent in enumerate(env.possible_agents):
                env.action_space(agent).seed(seed + episode * 1000 + i)
            returns = {agent: 0.0 for agent in env.agents}
            steps = 0
            while env.agents and steps < max_steps:
                note_observations(stats, env, observations, episode, steps)
                actions = {agent: env.action_space(agent).sample() for agent in env.agents}
                observations, rewards, terminations, truncations, _ = env.step(actions)
                steps += 1
                for agent, reward in rewards.items():
                    if not is_finite(reward) and stats.non_finite is None:
                        stats.non_finite = f"{agent}'s reward at episode {episode}, step {steps}"
                    returns[agent] = returns.get(agent, 0.0) + float(reward)
                ended = [a for a in actions if terminations.get(a) or truncations.get(a)]
                if env.agents:  # the others play on without them
                    stats.left_early += len(ended)
            stats.stopped += bool(env.agents)
            stats.lengths.append(steps)
            stats.team_returns.append(sum(returns.values()))
            for agent, value in returns.items():
                stats.agent_returns.setdefault(agent, []).append(value)
    finally:
        close_quietly(env)
    return stats


def note_observations(
    stats: ParallelRollout, env: Any, observations: Dict[str, Any], episode: int, step: int
) -> None:
    """Records the first observation outside its agent's space and the first non-finite one."""
    for agent, observation in observations.items():
        where = f"{agent}'s observation at episode {episode}, step {step}"
        if stats.non_finite is None and not is_finite(observation):
            stats.non_finite = where
        if stats.outside is None and not env.observation_space(agent).contains(observation):
            stats.outside = where


def mean(values: List[float]) -> str:
    return f"{np.mean(values):.4g}" if values else "n/a"


def rollout_results(stats: ParallelRollout, episodes: int, max_steps: int) -> List[CheckResult]:
    """The report's lines for ``random_episodes``' numbers."""
    per_agent = ", ".join(f"{agent} {mean(v)}" for agent, v in stats.agent_returns.items())
    results = [
        CheckResult(
            "random episodes",
            PASS,
            f"{episodes} episodes, length {min(stats.lengths)}-{max(stats.lengths)}, team "
            f"return mean {mean(stats.team_returns)}; per agent: {per_agent}",
        ),
        CheckResult(
            "agents leaving",
            PASS,
            f"{stats.left_early} agent(s) left an episode before its end (their later steps "
            "are masked in training)"
            if stats.left_early
            else "every agent stayed to each episode's end",
        ),
    ]
    if stats.stopped:
        results.append(
            CheckResult(
                "episode end",
                WARN,
                f"{stats.stopped} of {episodes} episodes had not ended after {max_steps} steps",
            )
        )
    if stats.outside:
        results.append(
            CheckResult("observation space", FAIL, f"outside its space: {stats.outside}")
        )
    if stats.non_finite:
        results.append(CheckResult("finite values", FAIL, f"not finite: {stats.non_finite}"))
    return results


def check_random_episodes(
    make: ParallelEnvFactory, episodes: int, seed: int, max_steps: int
) -> List[CheckResult]:
    """Random agents for ``episodes`` episodes, and what they saw."""
    return rollout_results(random_episodes(make, episodes, seed, max_steps), episodes, max_steps)


def check_close(make: ParallelEnvFactory, seed: int) -> CheckResult:
    """close() after a step, then again."""
    env = make()
    env.reset(seed=seed)
    env.step({agent: env.action_space(agent).sample() for agent in env.agents})
    return close_twice(env)


def run_parallel_checks(
    make: ParallelEnvFactory,
    episodes: int,
    seed: int,
    max_steps: int,
) -> List[CheckResult]:
    """Every check of a multi-agent env, in report order; stops after "make" when the
    env cannot be made.

    Args:
        make: returns a fresh multi-agent env.
        episodes: random episodes to play.
        seed: seeds resets and random actions.
        max_steps: an episode that has not ended after this many steps is stopped.
    """
    made = check_make(make, seed)
    if made[0].status == FAIL:
        return made
    return [
        *made,
        *guarded("pettingzoo api", lambda: check_api(make)),
        *guarded("random episodes", lambda: check_random_episodes(make, episodes, seed, max_steps)),
        *guarded("determinism", lambda: check_seeding(make)),
        *guarded("close", lambda: check_close(make, seed)),
    ]
