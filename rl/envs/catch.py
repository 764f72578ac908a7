"""Catch: a small image task, so image models can be tested in seconds.

A ball falls one row per step from a random column of the top row of a
10-row x 5-column grid; the agent moves a paddle along the bottom row. When the
ball reaches the bottom row (after 9 steps) the episode ends with reward +1 if
the paddle is under it, else -1. The observation is the grid as a 40 x 40 x 1
uint8 image, each cell a 4-pixel-tall, 8-pixel-wide block (255 for the ball and
the paddle, 0 elsewhere): 40 pixels each way is what the Nature-DQN torso needs
(8x8 stride 4, 4x4 stride 2, 3x3 stride 1: 40 -> 9 -> 3 -> 1).
"""

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from rl.envs.make import BOUNDED_EPISODES

ROWS = 10
COLUMNS = 5
CELL_HEIGHT = 4  # pixels per grid row
CELL_WIDTH = 8  # pixels per grid column; wider than tall so the image is square
RENDER_SCALE = 4  # rendered frames are 160 x 160, big enough to watch
LEFT, STAY, RIGHT = 0, 1, 2


def draw(ball_row: int, ball_column: int, paddle_column: int) -> np.ndarray:
    """The observation image of one state.

    Args:
        ball_row: the ball's row, 0 (top) to ROWS - 1 (the paddle's row).
        ball_column: the ball's column, 0 to COLUMNS - 1.
        paddle_column: the paddle's column, 0 to COLUMNS - 1.

    Returns:
        uint8 [ROWS * CELL_HEIGHT, COLUMNS * CELL_WIDTH, 1], a new array.
    """
    grid = np.zeros((ROWS, COLUMNS), dtype=np.uint8)
    grid[ball_row, ball_column] = 255
    grid[ROWS - 1, paddle_column] = 255
    cells = np.ones((CELL_HEIGHT, CELL_WIDTH), dtype=np.uint8)
    return np.kron(grid, cells)[:, :, None]


class Catch(gym.Env):
    """Catch the falling ball with the paddle; Discrete(3) actions: left, stay, right."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8, BOUNDED_EPISODES: True}  # 9 steps

    def __init__(self, render_mode: Optional[str] = None):
        """Creates the env; ``reset`` must be called before ``step``.

        Args:
            render_mode: None, or "rgb_array" for ``render`` to return frames.
        """
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"catch: unknown render_mode {render_mode!r}: valid: None, rgb_array")
        self.render_mode = render_mode
        self.action_space = gym.spaces.Discrete(3)
        shape = (ROWS * CELL_HEIGHT, COLUMNS * CELL_WIDTH, 1)
        self.observation_space = gym.spaces.Box(0, 255, shape, dtype=np.uint8)
        self._ball_row = 0
        self._ball_column = 0
        self._paddle_column = COLUMNS // 2

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Puts the ball in a random column of the top row and the paddle in the middle.

        Args:
            seed: seeds ``self.np_random`` (Gymnasium's convention); None keeps its stream.
            options: unused.
        """
        super().reset(seed=seed)
        self._ball_row = 0
        self._ball_column = int(self.np_random.integers(COLUMNS))
        self._paddle_column = COLUMNS // 2
        return self._observation(), {}

    def step(self, action) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        """Moves the paddle (clipped at the walls), then the ball one row down.

        Args:
            action: 0 left, 1 stay, 2 right.
        """
        if not self.action_space.contains(action):
            raise ValueError(f"catch: action {action!r} is not in {self.action_space}")
        self._paddle_column = min(max(self._paddle_column + int(action) - STAY, 0), COLUMNS - 1)
        self._ball_row += 1
        terminated = self._ball_row == ROWS - 1
        reward = 0.0
        if terminated:
            reward = 1.0 if self._paddle_column == self._ball_column else -1.0
        return self._observation(), reward, terminated, False, {}

    def render(self) -> Optional[np.ndarray]:
        """With render_mode "rgb_array": uint8 [160, 160, 3], the observation in grey, scaled up."""
        if self.render_mode != "rgb_array":
            return None
        image = self._observation()[:, :, 0]
        image = np.repeat(np.repeat(image, RENDER_SCALE, axis=0), RENDER_SCALE, axis=1)
        return np.repeat(image[:, :, None], 3, axis=2)

    def _observation(self) -> np.ndarray:
        return draw(self._ball_row, self._ball_column, self._paddle_column)
