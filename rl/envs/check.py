"""Checks an env before training on it: ``python -m rl.envs.check ENV``.

    python -m rl.envs.check CartPole-v1 [--episodes 10] [--seed 0] [--max_steps 10000]

ENV is anything ``--env`` takes: a registered env, a Gymnasium id or a
``grpc://host:port/ENV_ID`` URL of an env server. The env is built by
``make_env``, so it is checked as training sees it (rl's observation wrappers
included). A multi-agent env (PettingZoo's Parallel API, rl/envs/parallel.py) gets the
checks of rl/envs/check_parallel.py instead, in the same report. The report has one line per check, PASS, WARN or FAIL with its
numbers; the exit code is 1 when a check fails, and bad input (an unknown env,
a bad flag value) is one line on stderr with exit code 2.

Every check is a function of an env factory (a zero-argument callable that
returns a fresh ``gym.Env``) and returns ``CheckResult`` records, so tests call
them on small broken envs without a subprocess. What Gymnasium's own checker
covers (spaces, the types ``reset`` and ``step`` return, seeding of ``reset``)
is left to it.
"""

import argparse
import dataclasses
import re
import sys
import time
import warnings
from typing import Any, Callable, List, NoReturn, Optional, Sequence, Tuple, Union

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

# The catalog: rl's game envs (tictactoe...) sit above rl.envs; this command is an entry
# point, declared in .importlinter as one that may import it.
from rl import catalog, command_line, plugins  # noqa: F401  (catalog fills the registries)
from rl.command_line import int_in_range
from rl.envs.check_parallel import run_parallel_checks
from rl.envs.check_results import (  # noqa: F401  (the statuses: tests and callers read them here)
    FAIL,
    PASS,
    STATUSES,
    WARN,
    CheckResult,
    close_twice,
    describe_space,
    guarded,
    is_finite,
)
from rl.envs.make import env_factory, is_multi_agent, make_parallel_env
from rl.errors import USER_ERRORS, PluginError, error_line
from rl.fields import MAX_SEED, MAX_STEPS

PROG = "python -m rl.envs.check"
MAX_EPISODES = 100_000  # --episodes: a typo guard
DETERMINISM_STEPS = 200  # steps compared between two envs reset with one seed

EnvFactory = Callable[[], gym.Env]

# Gymnasium warns whenever the checked env has wrappers; rl checks the env as it
# trains on it, with its wrappers, on purpose.
_WRAPPED_WARNING = re.compile(r"The environment \(.*\) is different from the unwrapped version")
_COLOUR_CODE = re.compile(r"\x1b\[[0-9;]*m")


@dataclasses.dataclass
class RolloutStats:
    """What random episodes showed, filled in by ``random_rollout``.

    Steps are counted within an episode; step 0 is the observation of ``reset``.
    ``first_outside`` and ``first_non_finite`` are (episode, step) or None.
    """

    episode_lengths: List[int] = dataclasses.field(default_factory=list)
    episode_returns: List[float] = dataclasses.field(default_factory=list)
    capped_episodes: int = 0  # stopped at max_steps without ending
    observations: int = 0
    outside_space: int = 0
    first_outside: Optional[Tuple[int, int]] = None
    non_finite_observations: int = 0
    first_non_finite: Optional[Tuple[int, int]] = None
    rewards: int = 0
    non_finite_rewards: int = 0
    declared: Optional[Tuple[float, float]] = None  # lowest low, highest high of a Box
    observed_min: Optional[float] = None  # over every finite observation element
    observed_max: Optional[float] = None
    reward_min: Optional[float] = None  # over every finite reward
    reward_max: Optional[float] = None
    seconds: float = 0.0
    error: Optional[str] = None  # what the env raised, with where


def as_factory(env: Union[str, EnvFactory]) -> EnvFactory:
    """A zero-argument env constructor from an env name or a constructor.

    Args:
        env: a name ``make_env`` accepts, or a callable returning a fresh ``gym.Env``.

    Raises:
        UnknownNameError, HParamsError: for a name that ``make_env`` refuses.
        TypeError: for anything else.
    """
    if isinstance(env, str):
        return env_factory(env)
    if callable(env):
        return env
    raise TypeError(f"env must be a name or a callable returning a gym.Env, got {env!r}")


def close_after_check(env: gym.Env) -> None:
    """Closes an env a check is done with; what ``close`` raises is ignored here
    because ``check_close`` reports it.

    Args:
        env: the env.
    """
    try:
        env.close()
    except Exception:
        pass


def warning_text(message: Any) -> str:
    """A warning's message without Gymnasium's colour codes and "WARN: " prefix.

    Args:
        message: ``warnings.WarningMessage.message``.
    """
    text = _COLOUR_CODE.sub("", str(message)).strip()
    return text[len("WARN: ") :] if text.startswith("WARN: ") else text


def check_counts(episodes: int, max_steps: int) -> None:
    """Raises ValueError unless both are at least 1.

    Args:
        episodes: random episodes to play.
        max_steps: the per-episode step cap.
    """
    if episodes < 1 or max_steps < 1:
        raise ValueError(f"episodes and max_steps must be at least 1, got {episodes}, {max_steps}")


def check_make(make: EnvFactory) -> CheckResult:
    """Builds the env once and reports its spaces.

    Args:
        make: returns a fresh env.

    Raises:
        the ``USER_ERRORS`` types: bad input, not a failing env.
    """
    try:
        env = make()
        observation, action = env.observation_space, env.action_space
    except USER_ERRORS:
        raise
    except Exception as error:
        return CheckResult(
            "make", FAIL, f"the env could not be made: {error_line(error, typed=True)}"
        )
    close_after_check(env)
    detail = f"observation {describe_space(observation)}, action {describe_space(action)}"
    return CheckResult("make", PASS, detail)


def check_gymnasium(make: EnvFactory) -> CheckResult:
    """Gymnasium's ``check_env`` on a fresh env: what it raises FAILs, what it warns WARNs.

    Rendering is not checked (training does not render; its "human" mode opens windows).

    Args:
        make: returns a fresh env.
    """
    env = make()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env, skip_render_check=True)
    except Exception as error:
        return CheckResult("gymnasium checker", FAIL, error_line(error, typed=True))
    finally:
        close_after_check(env)
    texts = [warning_text(w.message) for w in caught]
    texts = list(dict.fromkeys(t for t in texts if not _WRAPPED_WARNING.match(t)))
    if texts:
        return CheckResult(
            "gymnasium checker",
            WARN,
            f"{len(texts)} warning{'' if len(texts) == 1 else 's'}",
            tuple(texts),
        )
    return CheckResult("gymnasium checker", PASS, "no errors, no warnings")


def finite_range(value: Any) -> Optional[Tuple[float, float]]:
    """(min, max) of an array's finite elements, or None (none, or not numeric).

    Args:
        value: an observation of a Box space.
    """
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        return None
    array = array[np.isfinite(array)]
    return (float(array.min()), float(array.max())) if array.size else None


def widen(
    low: Optional[float], high: Optional[float], span: Optional[Tuple[float, float]]
) -> Tuple[Optional[float], Optional[float]]:
    """A running (min, max) extended by ``span``.

    Args:
        low: the running min, None before the first value.
        high: the running max, None before the first value.
        span: (min, max) of new values, or None.
    """
    if span is None:
        return low, high
    if low is None or high is None:
        return span
    return min(low, span[0]), max(high, span[1])


def record_observation(
    stats: RolloutStats, space: gym.Space, obs: Any, where: Tuple[int, int]
) -> None:
    """Adds one observation to ``stats``.

    Args:
        stats: updated in place.
        space: the declared observation space.
        obs: the observation.
        where: (episode, step) of the observation.
    """
    stats.observations += 1
    if not space.contains(obs):
        stats.outside_space += 1
        stats.first_outside = stats.first_outside or where
    if not is_finite(obs):
        stats.non_finite_observations += 1
        stats.first_non_finite = stats.first_non_finite or where
    if isinstance(space, gym.spaces.Box):
        span = finite_range(obs)
        stats.observed_min, stats.observed_max = widen(stats.observed_min, stats.observed_max, span)


def record_reward(stats: RolloutStats, reward: Any) -> float:
    """Adds one reward to ``stats``; returns it as a float.

    Args:
        stats: updated in place.
        reward: what ``step`` returned as reward.
    """
    value = float(reward)
    stats.rewards += 1
    if not np.isfinite(value):
        stats.non_finite_rewards += 1
        return value
    stats.reward_min, stats.reward_max = widen(stats.reward_min, stats.reward_max, (value, value))
    return value


def random_rollout(make: EnvFactory, episodes: int, seed: int, max_steps: int) -> RolloutStats:
    """Plays ``episodes`` episodes of uniformly random actions on one fresh env.

    Actions come from the action space seeded with ``seed``; the first reset
    gets ``seed``. What the env raises ends the rollout and is kept in ``error``.

    Args:
        make: returns a fresh env.
        episodes: how many episodes.
        seed: seeds the first reset and the action sampling.
        max_steps: an episode that has not ended after this many steps is stopped.
    """
    env = make()
    space = env.observation_space
    stats = RolloutStats(declared=declared_range(space))
    env.action_space.seed(seed)
    where = (0, 0)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # Gymnasium's passive checker repeats what check_gymnasium reports.
            warnings.simplefilter("ignore")
            for episode in range(episodes):
                where = (episode, 0)
                obs, _ = env.reset(seed=seed if episode == 0 else None)
                record_observation(stats, space, obs, where)
                total, ended, steps = 0.0, False, 0
                while not ended and steps < max_steps:
                    steps += 1
                    where = (episode, steps)
                    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                    record_observation(stats, space, obs, where)
                    total += record_reward(stats, reward)
                    ended = bool(terminated or truncated)
                stats.episode_lengths.append(steps)
                stats.episode_returns.append(total)
                stats.capped_episodes += 0 if ended else 1
    except Exception as error:
        stats.error = f"{error_line(error, typed=True)} (episode {where[0]}, step {where[1]})"
    stats.seconds = time.perf_counter() - start
    close_after_check(env)
    return stats


def number(value: Optional[float]) -> str:
    """A short readable number: ``1,234`` for whole numbers, else 4 significant digits.

    Args:
        value: the number, or None (shown as "-").
    """
    if value is None:
        return "-"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.4g}"


def min_mean_max(values: Sequence[float]) -> str:
    """``"min/mean/max"`` of values.

    Args:
        values: at least one number.
    """
    return "/".join(number(v) for v in (min(values), float(np.mean(values)), max(values)))


def declared_range(space: gym.Space) -> Optional[Tuple[float, float]]:
    """(lowest low, highest high) of a Box space, or None for other spaces.

    Args:
        space: the declared observation space.
    """
    if not isinstance(space, gym.spaces.Box):
        return None
    return float(np.min(space.low)), float(np.max(space.high))


def rollout_results(stats: RolloutStats, episodes: int, max_steps: int) -> List[CheckResult]:
    """The report lines of a random rollout.

    Args:
        stats: what ``random_rollout`` gathered.
        episodes: how many episodes were asked for.
        max_steps: the per-episode step cap it ran with.
    """
    results = []
    done = len(stats.episode_lengths)
    if stats.error is not None:
        results.append(
            CheckResult(
                "random episodes", FAIL, f"the env raised {stats.error} after {done} episodes"
            )
        )
    else:
        detail = (
            f"{episodes} episodes: length {min_mean_max(stats.episode_lengths)}, "
            f"return {min_mean_max(stats.episode_returns)} (min/mean/max)"
        )
        if stats.capped_episodes:
            detail += (
                f"; {stats.capped_episodes} did not end within --max_steps {max_steps:,} "
                "(does the env need a time limit?)"
            )
        results.append(
            CheckResult("random episodes", WARN if stats.capped_episodes else PASS, detail)
        )
    if stats.rewards:
        span = f"[{number(stats.reward_min)}, {number(stats.reward_max)}]"
        detail = f"per step in {span} over {stats.rewards:,} steps"
        results.append(CheckResult("rewards", PASS, detail))
    declared = stats.declared
    values = ""
    if declared is not None:
        values = (
            f"; values in [{number(stats.observed_min)}, {number(stats.observed_max)}], "
            f"declared [{number(declared[0])}, {number(declared[1])}]"
        )
    if stats.outside_space:
        episode, step = stats.first_outside
        detail = (
            f"{stats.outside_space:,} of {stats.observations:,} outside the declared space "
            f"(first: episode {episode}, step {step}){values}"
        )
        results.append(CheckResult("observations", FAIL, detail))
    else:
        detail = f"all {stats.observations:,} in the declared space{values}"
        results.append(CheckResult("observations", PASS, detail))
    if stats.non_finite_observations or stats.non_finite_rewards:
        detail = (
            f"NaN or inf in {stats.non_finite_observations:,} of {stats.observations:,} "
            f"observations and {stats.non_finite_rewards:,} of {stats.rewards:,} rewards"
        )
        if stats.first_non_finite is not None:
            episode, step = stats.first_non_finite
            detail += f" (first observation: episode {episode}, step {step})"
        results.append(CheckResult("finite values", FAIL, detail))
    else:
        detail = (
            f"no NaN or inf in {stats.observations:,} observations and {stats.rewards:,} rewards"
        )
        results.append(CheckResult("finite values", PASS, detail))
    steps = sum(stats.episode_lengths)
    if steps and stats.seconds > 0:
        detail = (
            f"{number(round(steps / stats.seconds))} steps/s with random actions, resets included"
        )
        results.append(CheckResult("speed", PASS, detail))
    return results


def check_random_episodes(
    make: EnvFactory, episodes: int, seed: int, max_steps: int
) -> List[CheckResult]:
    """Random episodes: lengths, returns, reward range, observations against the
    declared space, NaN/inf, steps per second.

    Args:
        make: returns a fresh env.
        episodes: how many episodes.
        seed: seeds the first reset and the action sampling.
        max_steps: an episode that has not ended after this many steps is stopped.
    """
    check_counts(episodes, max_steps)
    return rollout_results(random_rollout(make, episodes, seed, max_steps), episodes, max_steps)


def same(a: Any, b: Any) -> bool:
    """Whether two observations, rewards or flags are equal (NaN equals NaN).

    Args:
        a: one value (a number, array, or a dict/tuple/list of them).
        b: the other.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))


def first_difference(a: Sequence[Any], b: Sequence[Any], names: Sequence[str]) -> Optional[str]:
    """The name of the first pair of values that differ, or None.

    Args:
        a: values from one env.
        b: the same values from the other.
        names: what each value is.
    """
    for name, x, y in zip(names, a, b):
        if not same(x, y):
            return name
    return None


def check_determinism(make: EnvFactory, seed: int, steps: int = DETERMINISM_STEPS) -> CheckResult:
    """Two fresh envs reset with ``seed`` and fed the same actions: identical
    observations, rewards, terminations? WARN (not FAIL) naming the first step
    that differs: some envs are stochastic by design.

    Episodes that end are reset (without a seed) in both, until ``steps`` steps.

    Args:
        make: returns a fresh env.
        seed: the reset seed, also seeding the actions.
        steps: how many steps to compare.
    """
    first, second = make(), make()
    first.action_space.seed(seed)
    step, what = 0, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reported by check_gymnasium
            what = first_difference(
                first.reset(seed=seed)[:1], second.reset(seed=seed)[:1], ["reset observation"]
            )
            while what is None and step < steps:
                step += 1
                action = first.action_space.sample()
                a, b = first.step(action)[:4], second.step(action)[:4]
                what = first_difference(a, b, ["observation", "reward", "terminated", "truncated"])
                if what is None and (a[2] or a[3]):
                    what = first_difference(
                        first.reset()[:1], second.reset()[:1], ["reset observation"]
                    )
    except Exception as error:
        return CheckResult(
            "determinism", FAIL, f"the env raised {error_line(error, typed=True)} at step {step}"
        )
    finally:
        close_after_check(first)
        close_after_check(second)
    if what is not None:
        detail = (
            f"two envs reset with seed {seed} and given the same actions differ at step {step} "
            f"({what}): stochastic beyond its seed (some envs are, by design), so seeded runs "
            "will not repeat exactly"
        )
        return CheckResult("determinism", WARN, detail)
    detail = (
        f"{steps} steps identical in two envs reset with seed {seed} "
        "(observations, rewards, terminated, truncated)"
    )
    return CheckResult("determinism", PASS, detail)


def check_reset(make: EnvFactory, seed: int) -> CheckResult:
    """``reset`` returns (obs, info) with obs in the observation space and info a dict.

    Args:
        make: returns a fresh env.
        seed: the reset seed.
    """
    env = make()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reported by check_gymnasium
            result = env.reset(seed=seed)
    except Exception as error:
        return CheckResult("reset", FAIL, f"reset raised {error_line(error, typed=True)}")
    finally:
        close_after_check(env)
    if not isinstance(result, tuple) or len(result) != 2:
        return CheckResult(
            "reset", FAIL, f"reset returned a {type(result).__name__}, not (obs, info)"
        )
    obs, info = result
    if not env.observation_space.contains(obs):
        return CheckResult(
            "reset", FAIL, "the observation of reset is outside the observation space"
        )
    if not isinstance(info, dict):
        return CheckResult(
            "reset", FAIL, f"the info of reset is a {type(info).__name__}, not a dict"
        )
    return CheckResult(
        "reset", PASS, "returns (obs, info): obs in the observation space, info a dict"
    )


def check_close(make: EnvFactory, seed: int) -> CheckResult:
    """``close`` after a reset and a step works, and a second ``close`` does not raise.

    Args:
        make: returns a fresh env.
        seed: the reset seed.
    """
    env = make()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reported by check_gymnasium
            env.reset(seed=seed)
            env.step(env.action_space.sample())
    except Exception as error:
        close_after_check(env)
        return CheckResult(
            "close",
            FAIL,
            f"could not reset and step before closing: {error_line(error, typed=True)}",
        )
    return close_twice(env)


def made_as_multi_agent(name: str) -> bool:
    """Whether env ``name`` is a multi-agent one; False when its constructor fails, so
    the single-agent "make" check reports the failure (bad input still raises)."""
    try:
        return is_multi_agent(name)
    except USER_ERRORS:
        raise
    except Exception:
        return False


def run_checks(
    env: Union[str, EnvFactory], episodes: int = 10, seed: int = 0, max_steps: int = 10_000
) -> List[CheckResult]:
    """Every check, in report order; stops after "make" when the env cannot be made.

    Args:
        env: a name ``make_env`` accepts, or a callable returning a fresh ``gym.Env``.
        episodes: random episodes to play.
        seed: seeds resets and random actions.
        max_steps: an episode that has not ended after this many steps is stopped.

    Raises:
        UnknownNameError, HParamsError: for a name that ``make_env`` refuses.
        ValueError: if episodes or max_steps is below 1.
    """
    check_counts(episodes, max_steps)
    if isinstance(env, str) and made_as_multi_agent(env):
        return run_parallel_checks(lambda: make_parallel_env(env), episodes, seed, max_steps)
    make = as_factory(env)
    made = check_make(make)
    if made.status == FAIL:
        return [made]
    return [
        made,
        *guarded("gymnasium checker", lambda: check_gymnasium(make)),
        *guarded("random episodes", lambda: check_random_episodes(make, episodes, seed, max_steps)),
        *guarded("determinism", lambda: check_determinism(make, seed)),
        *guarded("reset", lambda: check_reset(make, seed)),
        *guarded("close", lambda: check_close(make, seed)),
    ]


def format_report(label: str, results: Sequence[CheckResult]) -> str:
    """The printed report: a title, then one line per check and its notes.

    Args:
        label: what was checked (the env name).
        results: the checks' results.
    """
    width = max(len(r.name) for r in results) if results else 0
    lines = [f"checking env {label}"]
    for result in results:
        lines.append(f"{result.status}  {result.name:<{width}}  {result.detail}")
        lines.extend(f"      - {note}" for note in result.notes)
    counts = {status: sum(r.status == status for r in results) for status in STATUSES}
    lines.append(", ".join(f"{count} {status}" for status, count in counts.items()))
    return "\n".join(lines)


def exit_code(results: Sequence[CheckResult]) -> int:
    """1 if any check failed, else 0.

    Args:
        results: the checks' results.
    """
    return 1 if any(r.status == FAIL for r in results) else 0


def fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2 (rl/command_line.py)."""
    command_line.fail(PROG, message)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line's ENV and flags; bad ones end the process (exit 2).

    Args:
        argv: the arguments after the program name.
    """
    parser = command_line.OneLineParser(
        prog=PROG,
        description="Checks an env before training on it: one PASS/WARN/FAIL line per check; "
        "exit code 1 if any check fails, 2 for bad input.",
    )
    parser.add_argument("env", help="registered env, Gymnasium id or grpc://host:port/ENV_ID")
    parser.add_argument(
        "--episodes",
        type=int_in_range(1, MAX_EPISODES),
        default=10,
        help="random episodes to play (default 10)",
    )
    parser.add_argument(
        "--seed",
        type=int_in_range(0, MAX_SEED),
        default=0,
        help="seeds resets and actions (default 0)",
    )
    parser.add_argument(
        "--max_steps",
        type=int_in_range(1, MAX_STEPS),
        default=10_000,
        help="stop an episode that has not ended after this many steps (default 10000)",
    )
    parser.add_argument(
        "--plugins",
        action="append",
        default=[],
        help="module to import first that registers your env (repeatable), as in train.py",
    )
    return parser.parse_args(list(argv))


def main(argv: Sequence[str]) -> int:
    """Checks the env named on the command line and prints the report.

    Args:
        argv: the arguments after the program name.

    Returns:
        0 when no check failed, 1 otherwise (bad input exits with 2).
    """
    args = parse_args(argv)
    try:
        plugins.load(args.plugins)
        results = run_checks(args.env, args.episodes, args.seed, args.max_steps)
    except USER_ERRORS + (PluginError,) as error:
        fail(str(error))
    print(format_report(args.env, results), flush=True)
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
