"""Many agents acting at once: PettingZoo's Parallel API, named like every other env.

A multi-agent env is a constructor in rl's env registry that returns a
``pettingzoo.ParallelEnv``, registered as a Gymnasium one is
(``@registry.envs.register("my_env")``). This module names MPE's envs (the mpe2 package),
PettingZoo's SISL family and two cooperative matrix games with known best joint actions
(rl/envs/matrix_games.py); all need the ``multiagent`` extra, imported when an env is
made. An AEC env (agents taking turns) joins through ``aec_as_parallel``, PettingZoo's
own conversion, where the env allows it.

Each constructor takes the keyword arguments of its env that change the task (the
agents' numbers, the episode's length, discrete or continuous actions), checked by name
and type before the env is made, as for every registered env (rl/envs/make.py).
"""

import importlib
import sys
from types import ModuleType
from typing import Any

from rl import registry

INSTALL_HINT = "pip install -e '.[multiagent]'"


def is_parallel_env(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo ``ParallelEnv`` (PettingZoo is loaded once one
    exists, so asking costs no import)."""
    module = sys.modules.get("pettingzoo.utils.env")
    return module is not None and isinstance(env, module.ParallelEnv)


def optional_module(path: str) -> ModuleType:
    """Imports ``path`` of the ``multiagent`` extra; an ImportError naming the install
    command if it is missing."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as e:
        raise ImportError(f"{e.name} is not installed: {INSTALL_HINT}") from None


def aec_as_parallel(env: Any) -> Any:
    """An AEC env (agents act in turn) as a parallel one, by PettingZoo's conversion;
    PettingZoo refuses envs whose turns cannot be taken at once."""
    return optional_module("pettingzoo.utils.conversions").aec_to_parallel(env)


# --- MPE (mpe2): particles moving in 2-D; `continuous_actions` picks the action space ---
@registry.envs.register("simple_spread")
def simple_spread(
    render_mode=None,
    N: int = 3,
    local_ratio: float = 0.5,
    max_cycles: int = 25,
    continuous_actions: bool = False,
) -> Any:
    """MPE's cooperative navigation: N agents cover N landmarks without colliding;
    the team is rewarded by how close the landmarks' nearest agents are (``local_ratio``
    mixes in each agent's own collisions)."""
    return optional_module("mpe2.simple_spread_v3").parallel_env(
        N=N,
        local_ratio=local_ratio,
        max_cycles=max_cycles,
        continuous_actions=continuous_actions,
        render_mode=render_mode,
    )


@registry.envs.register("simple_tag")
def simple_tag(
    render_mode=None,
    num_good: int = 1,
    num_adversaries: int = 3,
    num_obstacles: int = 2,
    max_cycles: int = 25,
    continuous_actions: bool = False,
) -> Any:
    """MPE's predator and prey: slower adversaries (``adversary_*``) are rewarded for
    touching the faster good agents (``agent_*``), who are penalised for it."""
    return optional_module("mpe2.simple_tag_v3").parallel_env(
        num_good=num_good,
        num_adversaries=num_adversaries,
        num_obstacles=num_obstacles,
        max_cycles=max_cycles,
        continuous_actions=continuous_actions,
        render_mode=render_mode,
    )


@registry.envs.register("simple_adversary")
def simple_adversary(
    render_mode=None, N: int = 2, max_cycles: int = 25, continuous_actions: bool = False
) -> Any:
    """MPE's physical deception: N good agents near the target landmark, one adversary
    (``adversary_0``) that does not know which landmark it is."""
    return optional_module("mpe2.simple_adversary_v3").parallel_env(
        N=N, max_cycles=max_cycles, continuous_actions=continuous_actions, render_mode=render_mode
    )


@registry.envs.register("simple_speaker_listener")
def simple_speaker_listener(
    render_mode=None, max_cycles: int = 25, continuous_actions: bool = False
) -> Any:
    """MPE's cooperative communication: a speaker that sees the goal and cannot move, a
    listener that moves and cannot see it; agents with different spaces."""
    return optional_module("mpe2.simple_speaker_listener_v4").parallel_env(
        max_cycles=max_cycles, continuous_actions=continuous_actions, render_mode=render_mode
    )


# --- SISL (PettingZoo): cooperative control with many agents ---------------------------
@registry.envs.register("multiwalker")
def multiwalker(
    render_mode=None,
    n_walkers: int = 3,
    shared_reward: bool = True,
    terminate_on_fall: bool = True,
    max_cycles: int = 500,
) -> Any:
    """SISL's multiwalker: bipedal walkers carry a package together, continuous actions;
    a walker that falls leaves the episode (and ends it with ``terminate_on_fall``)."""
    return optional_module("pettingzoo.sisl.multiwalker_v9").parallel_env(
        n_walkers=n_walkers,
        shared_reward=shared_reward,
        terminate_on_fall=terminate_on_fall,
        max_cycles=max_cycles,
        render_mode=render_mode,
    )


@registry.envs.register("pursuit")
def pursuit(
    render_mode=None,
    n_pursuers: int = 8,
    n_evaders: int = 30,
    shared_reward: bool = True,
    max_cycles: int = 500,
) -> Any:
    """SISL's pursuit: pursuers on a 16 x 16 grid catch evaders by surrounding them;
    discrete moves, 7 x 7 x 3 local views."""
    return optional_module("pettingzoo.sisl.pursuit_v5").parallel_env(
        n_pursuers=n_pursuers,
        n_evaders=n_evaders,
        shared_reward=shared_reward,
        max_cycles=max_cycles,
        render_mode=render_mode,
    )


# --- Matrix games with known best joint actions (rl/envs/matrix_games.py) -------------
@registry.envs.register("climbing_game")
def climbing_game(render_mode=None) -> Any:
    """Claus and Boutilier's climbing game: two agents, three actions, one move; the best
    joint action (0, 0) pays both 11, a step off it by one agent costs 30."""
    games = optional_module("rl.envs.matrix_games")
    return games.MatrixGame(games.CLIMBING_PAYOFF, "climbing_game")


@registry.envs.register("penalty_game")
def penalty_game(render_mode=None, penalty: float = -10.0) -> Any:
    """Claus and Boutilier's penalty game: (0, 0) and (2, 2) pay both 10, their mix
    ``penalty`` (at most 0), and (1, 1) a safe 2."""
    games = optional_module("rl.envs.matrix_games")
    return games.MatrixGame(games.penalty_payoff(penalty), "penalty_game")
