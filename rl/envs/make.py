"""Building single and vectorised environments by name.

``--env NAME`` takes a registered constructor (which may add wrappers) or any
Gymnasium id, with keyword arguments for it after a ``?`` as in env server URLs:
``LunarLander-v3?continuous=true&gravity=-9.5`` (values are JSON where they parse). A
keyword the constructor declares bool, int or float takes only that: ``true``/``false``
for a bool (not ``1`` or ``yes``, which Python would take as true).
Every env gets the same observation treatment: non-Box
observations (Discrete, MultiDiscrete, Tuple, Dict) are flattened to
one-hot/concatenated float32 vectors, uint8 images stay uint8 (the model
scales them), and every other Box becomes float32.
"""

import collections
import importlib.util
import inspect
import math
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

import rl.envs.atari as atari  # the module, not the package: rl.envs imports this file
import rl.envs.mujoco_log as mujoco_log  # the module, not the package (as atari above)
import rl.envs.parallel as parallel  # the module, not the package (as atari above)
from rl import registry
from rl.envs.remote import address as remote_url
from rl.envs.watched import WatchedAsyncVectorEnv
from rl.errors import HParamsError, error_line

# Gymnasium families that need more than rl's own requirements: the module
# each imports, and how to install it.
FAMILY_NEEDS = {
    "box2d": ("Box2D", "pip install -e '.[box2d]'"),
    "mujoco": ("mujoco", "pip install -e '.[mujoco]'"),
    "ale_py": ("ale_py", atari.INSTALL_HINT),
    "phys2d": ("jax", "pip install 'gymnasium[jax]'"),
    "tabular": ("jax", "pip install 'gymnasium[jax]'"),
}
# gym.make's keyword arguments (not the env's), with their types.
GYM_MAKE_KWARGS = {"max_episode_steps": int, "disable_env_checker": bool}
# What a keyword argument declared with one of these types takes (JSON after ``?``); the
# values of others (str, lists, Optional[...]) are the constructor's to check.
DECLARED_KINDS = {bool: "true or false", int: "an integer", float: "a finite number"}
# An env class sets ``metadata[BOUNDED_EPISODES] = True`` when every episode ends by
# itself within a bounded number of steps, whatever the policy (Catch, the games):
# then no cap is put on its episodes (see ``has_episode_limit``).
BOUNDED_EPISODES = "bounded_episodes"
LEGACY = "legacy"  # ids Gymnasium 1.x keeps only to explain they need mujoco-py, shimmy, ...


def gymnasium_ids() -> List[str]:
    atari.register_games()
    return sorted(gym.envs.registry.keys())


def env_family(env_id: str) -> str:
    """The Gymnasium family of an id from its entry point: "classic_control", "box2d", ..."""
    entry = gym.envs.registry[env_id].entry_point
    if not isinstance(entry, str):
        # Gymnasium's own non-string entries are functions that raise "install
        # mujoco-py/shimmy"; a class or function of a user's is a custom env.
        module = getattr(entry, "__module__", "") or ""
        from_gymnasium = module.split(".")[0] == "gymnasium" and not isinstance(entry, type)
        return LEGACY if from_gymnasium else "custom"
    parts = entry.split(":")[0].split(".")
    return parts[2] if parts[:2] == ["gymnasium", "envs"] and len(parts) > 2 else parts[0]


def missing_install(env_id: str) -> Optional[str]:
    """How to install what a Gymnasium id needs and lacks here, or None."""
    module, hint = FAMILY_NEEDS.get(env_family(env_id), (None, None))
    if module is not None and importlib.util.find_spec(module) is None:
        return hint
    return None


def gymnasium_listing() -> str:
    """Every Gymnasium id by family, marking the families that need an install."""
    families = collections.defaultdict(list)
    for env_id in gymnasium_ids():
        families[env_family(env_id)].append(env_id)
    lines = ["gymnasium ids (any of them works as --env):"]
    for family, ids in sorted(families.items()):
        hint = missing_install(ids[0])
        if family == LEGACY:
            needs = " [need packages Gymnasium 1.x dropped]"
        else:
            needs = f" [not installed: {hint}]" if hint else ""
        lines.append(f"  {family}{needs}: {', '.join(ids)}")
    return "\n".join(lines)


def split_kwargs(name: str) -> Tuple[str, Dict[str, Any]]:
    """``NAME?key=value&...`` -> (NAME, keyword arguments); an env server URL is whole."""
    if remote_url.is_remote(name) or "?" not in name:
        return name, {}
    base, query = name.split("?", 1)
    try:
        return base, remote_url.query_kwargs(query)
    except ValueError as e:
        raise HParamsError(f"env '{name}': {e}") from None


def _parameters(constructor) -> Optional[Dict[str, Optional[type]]]:
    """The keyword arguments a constructor takes, each with its declared kind (a key of
    ``DECLARED_KINDS``, else None), or None if it takes any (``**kwargs``)."""
    try:
        parameters = inspect.signature(constructor).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {
        p.name: _declared_kind(p)
        for p in parameters
        if p.kind in keyword and p.name != "render_mode"
    }


def _declared_kind(parameter: inspect.Parameter) -> Optional[type]:
    """bool, int or float when ``parameter`` is annotated so (or, unannotated, defaults
    to a bool), else None."""
    annotation = parameter.annotation
    if isinstance(annotation, str):  # ``from __future__ import annotations``
        annotation = {kind.__name__: kind for kind in DECLARED_KINDS}.get(annotation)
    if annotation in DECLARED_KINDS:
        return annotation
    if annotation is inspect.Parameter.empty and isinstance(parameter.default, bool):
        return bool
    return None


def fits_kind(value: Any, kind: type) -> bool:
    """Whether a parsed keyword value is of the declared ``kind``: JSON true/false for
    bool (not 1 or "yes"), a whole number for int, a finite number for float (JSON's
    parser reads NaN and Infinity)."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, kind)


def _check_kwargs(name: str, kwargs: Dict[str, Any]) -> None:
    """HParamsError if the env ``name`` does not take each of ``kwargs``."""
    if not kwargs:
        return
    if atari.is_atari(name):
        try:
            atari.check_frame_stack(name, kwargs)
        except ValueError as e:
            raise HParamsError(str(e)) from None
        return
    if name in registry.envs:
        accepted = _parameters(registry.envs.get(name))
    else:
        entry_point = gym.envs.registry[name].entry_point
        try:  # a plugin may register a class or function instead of "module:attr"
            creator = entry_point if callable(entry_point) else load_env_creator(entry_point)
        except (ImportError, AttributeError) as e:
            raise HParamsError(f"env '{name}' cannot be made here: {e}") from None
        accepted = _parameters(creator)
        if accepted is not None:
            accepted.update(GYM_MAKE_KWARGS)
    if accepted is None:
        return
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        takes = ", ".join(accepted) if accepted else "none"
        raise HParamsError(
            f"env '{name}' takes no keyword argument {unknown[0]!r}: it takes {takes}"
        )
    for key, value in kwargs.items():
        kind = accepted[key]
        if kind is not None and not fits_kind(value, kind):
            raise HParamsError(
                f"env '{name}' keyword argument {key!r} takes {DECLARED_KINDS[kind]}, got {value!r}"
            )


def _check_episode_limit(name: str, kwargs: Dict[str, Any]) -> None:
    """HParamsError unless the ``max_episode_steps`` that ``gym.make`` takes for the
    Gymnasium id ``name``, if given, is a positive integer: a negative one drops the env's
    own limit (CartPole's 500) without a word, and Gymnasium asserts on 0 only once the
    env is made."""
    if "max_episode_steps" not in kwargs:
        return
    steps = kwargs["max_episode_steps"]
    if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1:
        return
    limit = gym.envs.registry[name].max_episode_steps
    own = f" (its own limit is {limit}" if limit else " (it has no limit of its own"
    raise HParamsError(
        f"env '{name}' keyword argument 'max_episode_steps' takes a positive integer{own}; "
        f"leave it out to keep that), got {steps!r}"
    )


def check_env_name(name: str) -> None:
    """Raises UnknownNameError (closest of both kinds of name) if ``name`` is neither,
    and HParamsError if it is a Gymnasium id whose dependencies are not installed, a
    malformed env server URL (whether the server answers is found out when connecting),
    or keyword arguments after ``?`` that the env does not take."""
    check_env(*split_kwargs(name))


def check_env(name: str, kwargs: Dict[str, Any]) -> None:
    """``check_env_name`` for a name without ``?`` and its keyword arguments."""
    if name in registry.envs:
        _check_kwargs(name, kwargs)
        return
    if remote_url.is_remote(name):
        try:
            remote_url.parse(name)
            remote_url.token_from_environment()  # sent with every call: checked now
        except ValueError as e:
            raise HParamsError(str(e)) from None
        if importlib.util.find_spec("grpc") is None:
            raise HParamsError(f"env '{name}' needs grpcio: pip install -e '.[remote]'")
        return
    if atari.is_atari(name) and not atari.installed():
        raise HParamsError(
            f"env '{name}' is an Atari game, and ale-py is not installed: {atari.INSTALL_HINT}"
        )
    atari.register_games()
    if name in gym.envs.registry:
        family = env_family(name)
        if family == LEGACY:
            raise HParamsError(
                f"env '{name}' is a legacy id that Gymnasium 1.x can no longer make; "
                "use its newest version (see `python train.py --list`)"
            )
        hint = missing_install(name)
        if hint:
            raise HParamsError(f"env '{name}' needs {family}, which is not installed: {hint}")
        _check_episode_limit(name, kwargs)
        _check_kwargs(name, kwargs)
        return
    hint = registry.did_you_mean(name, registry.envs.names() + gymnasium_ids())
    raise registry.UnknownNameError(
        f"unknown env {name!r}: {hint}valid: a registered env "
        f"({', '.join(registry.envs.names())}), any Gymnasium id "
        "(list them all with `python train.py --list`) or grpc://host:port/ID of an env server"
    )


def _standard_wrappers(env: gym.Env) -> gym.Env:
    # uint8 images stay bytes until the model (4x less memory in replay);
    # everything else becomes one flat or shaped float32 tensor.
    if not isinstance(env.observation_space, gym.spaces.Box):
        env = gym.wrappers.FlattenObservation(env)
    if env.observation_space.dtype not in (np.float32, np.uint8):
        env = gym.wrappers.DtypeObservation(env, np.float32)
    return env


def has_episode_limit(env: gym.Env) -> bool:
    """Whether ``env`` ends every episode by itself: a TimeLimit among its wrappers, a
    limit in its spec, the ALE's cap on frames, or ``metadata[BOUNDED_EPISODES]``."""
    layer = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, gym.wrappers.TimeLimit):
            return True
        layer = layer.env
    spec = env.spec
    if spec is not None and (
        spec.max_episode_steps is not None or spec.kwargs.get("max_num_frames_per_episode")
    ):
        return True
    return bool(env.metadata.get(BOUNDED_EPISODES))


def bound_episodes(env: gym.Env, max_episode_steps: Optional[int]) -> gym.Env:
    """``env`` with its episodes truncated at ``max_episode_steps`` (gymnasium's TimeLimit)
    unless it has a limit of its own, which is kept; None: ``env`` as it is."""
    if max_episode_steps is None or has_episode_limit(env):
        return env
    return gym.wrappers.TimeLimit(env, max_episode_steps)


def episode_cap(name: str, max_episode_steps: int) -> Optional[int]:
    """The cap ``make_env(name, max_episode_steps=...)`` puts on episodes: None when the
    env has a limit of its own or is an env server's (the server puts the cap the client
    sends on the envs it finds without a limit). A Gymnasium id's registration says whether
    it has a limit; an env of rl's registry (a constructor) is made once to find out."""
    if remote_url.is_remote(name) or atari.is_atari(name):
        return None  # the ALE caps episodes at 108,000 frames itself
    bare, kwargs = split_kwargs(name)
    if bare not in registry.envs:  # a Gymnasium id (check_env_name admitted it)
        spec = gym.envs.registry[bare]
        creator = spec.entry_point
        if not callable(creator):
            creator = load_env_creator(creator)
        limited = (
            spec.max_episode_steps is not None
            or kwargs.get("max_episode_steps") is not None  # gym.make's own TimeLimit
            or bool(getattr(creator, "metadata", {}).get(BOUNDED_EPISODES))
        )
        return None if limited else max_episode_steps
    env = make_raw_env(name)
    try:
        return None if has_episode_limit(env) else max_episode_steps
    finally:
        env.close()


def make_raw_env(name: str, render_mode: Optional[str] = None, **kwargs) -> gym.Env:
    """One environment as its constructor returns it, without rl's observation wrappers
    (what an env server serves: the client applies the wrappers on its side).

    Args:
        name: a registered env name or a Gymnasium id, with any ``?key=value`` arguments.
        render_mode: passed to the constructor, e.g. "rgb_array" for video.
        **kwargs: more keyword arguments for the constructor (or ``gymnasium.make``).
    """
    name, from_name = split_kwargs(name)
    kwargs = {**from_name, **kwargs}
    check_env(name, kwargs)
    if render_mode == "rgb_array" and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        # pygame-based envs draw off-screen; without this SDL probes for a
        # display and prints errors on headless machines.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    if "mujoco" in sys.modules or (
        name in gym.envs.registry and env_family(name) == "mujoco"
    ):  # a plugin's env may load MuJoCo too
        mujoco_log.route_warnings()
    try:
        if name in registry.envs:
            return registry.envs.get(name)(render_mode=render_mode, **kwargs)
        if atari.is_atari(name):
            return atari.make_atari(name, render_mode, **kwargs)
        return gym.make(name, render_mode=render_mode, **kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as e:
        raise HParamsError(f"env '{name}' cannot be made here: {error_line(e)}") from None
    except (TypeError, ValueError) as e:
        if not kwargs:
            raise
        # A value the constructor refuses (the names were checked above).
        raise HParamsError(f"env '{name}' refused {kwargs}: {error_line(e)}") from None


def make_env(
    name: str, render_mode: Optional[str] = None, max_episode_steps: Optional[int] = None
) -> gym.Env:
    """One environment, with the standard observation wrappers.

    Args:
        name: a registered env name, a Gymnasium id, or a ``grpc://host:port/ID`` URL
          of an env server (rl/envs/remote).
        render_mode: passed to the constructor, e.g. "rgb_array" for video.
        max_episode_steps: truncates the episodes of an env without a limit of its own
          (``bound_episodes``; the hparam of that name); None: episodes as the env has them
          (an env server's: at the server's default cap).
    """
    if remote_url.is_remote(name):
        from rl.envs.remote.client import RemoteEnv  # grpcio only when used

        return _standard_wrappers(RemoteEnv(name, render_mode, max_episode_steps))
    env = make_raw_env(name, render_mode)
    if parallel.is_parallel_env(env):
        env.close()
        raise HParamsError(
            f"env '{name}' is a multi-agent env (PettingZoo's Parallel API), which a "
            f"single-agent set cannot train; `python -m rl.envs.check {name}` checks it"
        )
    return _standard_wrappers(bound_episodes(env, max_episode_steps))


def is_multi_agent(name: str) -> bool:
    """Whether env ``name`` is a multi-agent one: a registered constructor that returns a
    PettingZoo ``ParallelEnv`` (made once to find out, as ``episode_cap`` does)."""
    if remote_url.is_remote(name) or split_kwargs(name)[0] not in registry.envs:
        return False
    env = make_raw_env(name)
    try:
        return parallel.is_parallel_env(env)
    finally:
        env.close()


def make_parallel_env(name: str, render_mode: Optional[str] = None) -> Any:
    """One multi-agent env (a PettingZoo ``ParallelEnv``), as its constructor returns it.

    Args:
        name: a registered multi-agent env, with any ``?key=value`` arguments.
        render_mode: passed to the constructor, e.g. "rgb_array" for video.

    Raises:
        HParamsError: ``name`` is a single-agent env, or bad keyword arguments.
        UnknownNameError: ``name`` is no env at all.
    """
    env = make_raw_env(name, render_mode)
    if not parallel.is_parallel_env(env):
        env.close()
        raise HParamsError(
            f"env '{name}' is a single-agent env; a multi-agent one is a registered "
            "constructor that returns a PettingZoo ParallelEnv (rl/envs/parallel.py names "
            "rl's own)"
        )
    return env


def env_factory(
    name: str, render_mode: Optional[str] = None, max_episode_steps: Optional[int] = None
) -> Callable[[], gym.Env]:
    """A zero-argument constructor, for vector envs and worker processes."""
    check_env_name(name)
    return lambda: make_env(name, render_mode, max_episode_steps)


def make_vec_env(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: Optional[str] = None,
    max_episode_steps: Optional[int] = None,
) -> gym.vector.VectorEnv:
    """``num_envs`` copies stepped together, with episode statistics in infos.

    Sub-environments reset in the same step they end (Gymnasium's SAME_STEP
    autoreset): the returned observation starts the next episode and
    ``info["final_obs"]`` holds the true last one, so truncated episodes can be
    bootstrapped from it.

    Args:
        name: a registered env name, a Gymnasium id or a grpc:// env server URL.
        num_envs: how many copies.
        vectorization: "sync" (in this process) or "async" (one process each, watched:
            a copy that hangs is one EnvError, rl/envs/watched.py).
        render_mode: passed to each copy.
        max_episode_steps: the cap on episodes of an env without a limit (``make_env``;
            an env server's copies are capped there, at this cap).
    """
    if remote_url.is_remote(name):
        # One session of num_envs copies on the server, stepped in one call;
        # ``vectorization`` is the server's business.
        check_env_name(name)
        from rl.envs.remote.client import RemoteVectorEnv  # grpcio only when used

        vec = RemoteVectorEnv(
            name, num_envs, render_mode=render_mode, max_episode_steps=max_episode_steps
        )
        return gym.wrappers.vector.RecordEpisodeStatistics(vec)
    factories = [env_factory(name, render_mode, max_episode_steps)] * num_envs
    mode = gym.vector.AutoresetMode.SAME_STEP
    if vectorization == "sync":
        vec = gym.vector.SyncVectorEnv(factories, autoreset_mode=mode)
    elif vectorization == "async":
        vec = WatchedAsyncVectorEnv(factories, name, autoreset_mode=mode)
    else:
        raise ValueError(f"unknown vectorization '{vectorization}': valid: sync, async")
    return gym.wrappers.vector.RecordEpisodeStatistics(vec)


def true_next_obs(next_obs: np.ndarray, info: dict) -> np.ndarray:
    """The observation each copy actually reached: the final one where it ended.

    Args:
        next_obs: [N, ...] observations returned by a SAME_STEP vector step.
        info: that step's info dict.
    """
    if "_final_obs" not in info or not info["_final_obs"].any():
        return next_obs
    result = next_obs.copy()
    for i in np.flatnonzero(info["_final_obs"]):
        result[i] = info["final_obs"][i]
    return result
