"""envs: building (vectorised) Gymnasium environments by name.

``make.py`` turns a name into an env; ``registered.py`` holds the named
constructors that add wrappers; ``parallel.py`` names the multi-agent envs (PettingZoo's
Parallel API) and ``matrix_games.py`` holds two with known best joint actions;
``partial.py`` names envs that need memory (classic control without velocities, a
cue to recall); ``catch.py`` is rl's own small image env;
``mujoco_log.py`` sends MuJoCo's warnings to the run folder, each said once;
``watched.py`` bounds the waits for ``vectorization=async`` copies (a hung one is named);
``env_errors.py`` turns what an env raises in training or evaluation into one
``EnvError`` (imported where used: the env server runs without it). The
two-player games' envs (rl/games/registered.py) sit above this package, since they load
saved policies; rl/catalog.py registers them with everything else.
"""

from rl.envs import parallel, partial, registered  # noqa: F401  (register)
from rl.envs.make import (
    check_env_name,
    make_env,
    make_parallel_env,
    make_vec_env,
    true_next_obs,
)

__all__ = ["check_env_name", "make_env", "make_parallel_env", "make_vec_env", "true_next_obs"]
