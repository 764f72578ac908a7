"""An env's exceptions as one ``EnvError`` naming it, for the envs of training and evaluation.

A simulator that crashes is then told apart from a fault of rl's own code, and train.py
reports it in one line (exit code 6). Not imported by ``rl.envs``: the env server, which
may run under an older Gymnasium (without ``gym.vector.VectorWrapper``), does without it.
"""

import contextlib
from typing import Any, Iterator, Optional

import gymnasium as gym

from rl.envs.make import make_vec_env
from rl.errors import EnvError, EnvServerError, HParamsError, UnknownNameError, error_line


def make_vec_env_naming_errors(
    name: str,
    num_envs: int,
    during: str,
    vectorization: str = "sync",
    render_mode: Optional[str] = None,
    max_episode_steps: Optional[int] = None,
) -> gym.vector.VectorEnv:
    """``make_vec_env`` whose env, when it raises while being made, reset or stepped,
    raises one ``EnvError`` naming it: a simulator's crash told apart from rl's own faults.

    Args:
        name, num_envs, vectorization, render_mode, max_episode_steps: as ``make_vec_env``.
        during: what the envs serve, for the message: "training", "evaluation".
    """
    with env_errors_named(name, f"while being made for {during}"):
        envs = make_vec_env(name, num_envs, vectorization, render_mode, max_episode_steps)
    return EnvErrorsNamed(envs, name, during)


class EnvErrorsNamed(gym.vector.VectorWrapper):
    """A vector env whose reset and step raise what the env raises as one ``EnvError``."""

    def __init__(self, env: gym.vector.VectorEnv, name: str, during: str):
        """Args:
        env: the vector env (``make_vec_env``).
        name: the env's name as the run gave it (``flaky_cartpole?failure_rate=0.01``).
        during: what the env serves, for the message: "training", "evaluation".
        """
        super().__init__(env)
        self.name = name
        self.during = during

    def reset(self, **kwargs: Any):
        with env_errors_named(self.name, f"in reset() during {self.during}"):
            return self.env.reset(**kwargs)

    def step(self, actions):
        with env_errors_named(self.name, f"in step() during {self.during}"):
            return self.env.step(actions)


@contextlib.contextmanager
def env_errors_named(name: str, when: str) -> Iterator[None]:
    """What the env raises inside becomes ``EnvError("env 'NAME' raised WHEN: Type: <its
    first line>")``. rl's own errors (a bad name or value, an env server's fault) pass as
    they are: they already say what went wrong."""
    try:
        yield
    except (EnvError, EnvServerError, HParamsError, UnknownNameError):
        raise
    except Exception as e:  # noqa: BLE001  (an env may raise anything)
        raise EnvError(f"env '{name}' raised {when}: {error_line(e, typed=True)}") from e
