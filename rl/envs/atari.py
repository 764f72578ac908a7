"""Atari 2600 games from ale-py (the `atari` extra), as Machado et al. (2018) recommend.

Any ``ALE/<Game>-v5`` id given as ``--env`` is built here: sticky actions
(repeat the previous action with probability 0.25), the minimal action set,
no-op starts, 4 frames per step with max-pooling of the last two, 84 x 84
grayscale, no episode end on a lost life, and the last ``FRAME_STACK`` frames
stacked on axis 0 as uint8. The model scales the bytes; replay stores each
frame once. ``ALE/<Game>-v5?frame_stack=1`` gives one frame per observation (what a
recurrent policy sees: it must remember the motion the stack would show); the frame
stack is the one keyword argument an Atari id takes.

Each step's info says whether it cost a life (``info["life_lost"]``): learners
with ``life_loss_terminal`` (PPO, A2C, VPG, IMPALA, DQN) treat that step as
terminal for learning only, while the game, the logged returns and evaluation go
on unchanged.
"""

import importlib.util
from typing import Any, Dict, Optional

import gymnasium as gym

ATARI_PREFIX = "ALE/"
INSTALL_HINT = "pip install -e '.[atari]'"
FRAME_STACK = 4  # frames per observation, on axis 0
MAX_FRAME_STACK = 16
FRAME_STACK_KWARG = "frame_stack"
STICKY_ACTION_PROBABILITY = 0.25
FRAME_SKIP = 4
NOOP_MAX = 30
SCREEN_SIZE = 84
LIFE_LOST = "life_lost"  # info key: the step cost a life and the game goes on

_registered = False


def is_atari(name: str) -> bool:
    return name.startswith(ATARI_PREFIX)


def installed() -> bool:
    return importlib.util.find_spec("ale_py") is not None


def register_games() -> None:
    """Adds the ALE ids to Gymnasium's registry if ale-py is installed (Gymnasium 1.x
    registers them only when asked)."""
    global _registered
    if _registered or not installed():
        return
    import ale_py

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner per env copy
    gym.register_envs(ale_py)
    _registered = True


def check_frame_stack(name: str, kwargs: Dict[str, Any]) -> None:
    """ValueError naming what an Atari id takes, unless ``kwargs`` is at most a
    ``frame_stack`` of 1 to ``MAX_FRAME_STACK``."""
    unknown = sorted(set(kwargs) - {FRAME_STACK_KWARG})
    if unknown:
        raise ValueError(
            f"env '{name}' takes no keyword argument {unknown[0]!r}: an Atari id takes only "
            f"{FRAME_STACK_KWARG} (the other settings are rl's)"
        )
    stack = kwargs.get(FRAME_STACK_KWARG, FRAME_STACK)
    if isinstance(stack, bool) or not isinstance(stack, int) or not 1 <= stack <= MAX_FRAME_STACK:
        raise ValueError(
            f"env '{name}' keyword argument {FRAME_STACK_KWARG!r} takes an integer in "
            f"[1, {MAX_FRAME_STACK}], got {stack!r}"
        )


def frames_per_observation(name: str, kwargs: Dict[str, Any]) -> int:
    """How many frames ``make_env`` stacks on axis 0 for env ``name`` with ``kwargs``
    (1: not a stack)."""
    return kwargs.get(FRAME_STACK_KWARG, FRAME_STACK) if is_atari(name) else 1


def make_atari(
    name: str, render_mode: Optional[str] = None, frame_stack: int = FRAME_STACK
) -> gym.Env:
    """The game ``name`` (an ALE id) with the preprocessing above; observations
    [frame_stack, 84, 84] uint8."""
    register_games()
    # The ALE's own frame skipping is off: AtariPreprocessing skips and max-pools.
    env = gym.make(
        name,
        frameskip=1,
        repeat_action_probability=STICKY_ACTION_PROBABILITY,
        full_action_space=False,
        render_mode=render_mode,
    )
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=NOOP_MAX,
        frame_skip=FRAME_SKIP,
        screen_size=SCREEN_SIZE,
        terminal_on_life_loss=False,
        grayscale_obs=True,
        scale_obs=False,
    )
    return LifeLossInfo(gym.wrappers.FrameStackObservation(env, frame_stack))


class LifeLossInfo(gym.Wrapper):
    """Adds ``info["life_lost"]``: the ALE's ``lives`` fell in this step and the game
    did not end (True in no other step, reset included, so every info has the key)."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._lives = info.get("lives", 0)
        info[LIFE_LOST] = False
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = info.get("lives", 0)
        info[LIFE_LOST] = bool(lives < self._lives and not terminated)
        self._lives = lives
        return obs, reward, terminated, truncated, info
