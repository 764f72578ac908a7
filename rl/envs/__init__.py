"""envs: building (vectorised) Gymnasium environments by name.

``make.py`` turns a name into an env; ``registered.py`` holds the named
constructors that add wrappers; ``catch.py`` is rl's own small image env. Two-player
games (rl/games) are registered here too, as one seat against an opponent.
"""

from rl.envs import registered  # noqa: F401  (registers)
from rl.envs.make import check_env_name, make_env, make_vec_env, true_next_obs
from rl.games import registered as game_envs  # noqa: F401  (registers the games as envs)

__all__ = ["check_env_name", "make_env", "make_vec_env", "true_next_obs"]
