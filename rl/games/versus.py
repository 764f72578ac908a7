"""One seat of a two-player game as a Gymnasium env; the other seat plays ``opponent``.

This is how every single-agent algorithm of rl trains on a game: ``--env
tictactoe`` plays against a uniformly random opponent, ``tictactoe_lookahead``
against the one-step look-ahead player, and ``tictactoe_selfplay`` against the
learner's own past policies (rl/games/selfplay.py). An opponent may have
``new_game(rng)`` (called at each reset) and ``game_over(learner_score)`` hooks. The learner's seat alternates between
episodes, so it learns to play first and second.

Observation: float32 [num_features + num_actions], the game's features for the
player to move followed by its legal-move mask (1 = legal); models read the mask
with ``action_mask=True`` (rl/models/settings.py) and never choose an illegal
move. An illegal move (from an agent that ignores the mask) loses the game at
once: reward -1, ``info["illegal_move"] = True``. Rewards are the learner's: +1
a win, -1 a loss, 0 a draw (rps: +1/-1/0 per throw). ``win_reward`` and
``loss_reward`` replace the +1 and -1 (``--env 'tictactoe_selfplay?win_reward=0.1'``):
a learner that must never lose should value a win less than it fears a loss, and
prefer a sure draw to a win it might pay for with a loss.
"""

from typing import Callable, Optional

import gymnasium as gym
import numpy as np

from rl.envs.make import BOUNDED_EPISODES
from rl.games.spec import (
    GameSpec,
    check_game_name,
    features_and_mask,
    learner_observation,
    make_game,
)


def is_number(value) -> bool:
    """An int or float, not a bool (``?win_reward=true`` is not 1.0)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class VersusEnv(gym.Env):
    """A game seen from one seat; ``opponent`` moves in the other."""

    # Every game ends within a bounded number of moves (rps after its 15 throws).
    metadata = {"render_modes": ["rgb_array"], "render_fps": 2, BOUNDED_EPISODES: True}

    def __init__(
        self,
        game: str,
        opponent: Callable[[GameSpec], object],
        render_mode: Optional[str] = None,
        loss_reward: float = -1.0,
        win_reward: float = 1.0,
    ):
        """Args:
        game: a name of rl.games.spec.GAMES.
        opponent: a player factory (a registered player's): spec -> Player.
        render_mode: None or "rgb_array".
        loss_reward: the learner's reward for a loss (a lost throw in rps), in [-1e6, 0).
        win_reward: the learner's reward for a win (a won throw in rps), in (0, 1e6].
        """
        if not (is_number(loss_reward) and -1e6 <= loss_reward < 0):
            raise ValueError(f"loss_reward must be a number in [-1e6, 0), got {loss_reward!r}")
        if not (is_number(win_reward) and 0 < win_reward <= 1e6):
            raise ValueError(f"win_reward must be a number in (0, 1e6], got {win_reward!r}")
        self.loss_reward = float(loss_reward)
        self.win_reward = float(win_reward)
        self.spec_game = check_game_name(game)
        self.game = make_game(game, render_mode=render_mode)
        self.opponent = opponent(self.spec_game)
        self.render_mode = render_mode
        size = self.spec_game.num_features + self.spec_game.num_actions
        self.observation_space = gym.spaces.Box(0.0, 1.0, (size,), np.float32)
        self.action_space = gym.spaces.Discrete(self.spec_game.num_actions)
        self.learner = None
        self._return = 0.0
        self._episodes = 0
        self._opponent_rng = np.random.default_rng()

    # --- the learner's view --------------------------------------------------------
    def _observation(self) -> np.ndarray:
        features, mask = features_and_mask(self.spec_game, self.game.observe(self.learner))
        return learner_observation(features, mask)

    def _game_over(self) -> bool:
        agent = self.game.agent_selection
        return bool(self.game.terminations[agent] or self.game.truncations[agent])

    def _opponent_moves(self) -> float:
        """Plays the opponent until the learner is to move or the game is over; returns
        the learner's rewards meanwhile."""
        reward = 0.0
        while not self._game_over() and self.game.agent_selection != self.learner:
            mover = self.game.agent_selection
            features, mask = features_and_mask(self.spec_game, self.game.observe(mover))
            self.game.step(int(self.opponent.act(features, mask, self._opponent_rng)))
            reward += float(self.game.rewards[self.learner])
        return reward

    def _scaled(self, reward: float) -> float:
        """PettingZoo's +1 or -1 for the learner as ``win_reward`` or ``loss_reward``."""
        return reward * (self.win_reward if reward > 0 else -self.loss_reward)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        if seed is not None:
            self._episodes = 0
            self._opponent_rng = np.random.default_rng([seed, 7])
        self.game.reset(seed=None if seed is None else int(seed))
        first, second = self.game.possible_agents[:2]
        # The seat alternates, starting from a seeded coin.
        if self._episodes == 0:
            self._first_seat = int(self.np_random.integers(2))
        seat = (self._first_seat + self._episodes) % 2
        self._episodes += 1
        self.learner = (first, second)[seat]
        self._return = 0.0
        if hasattr(self.opponent, "new_game"):  # a pool opponent draws this game's player
            self.opponent.new_game(self._opponent_rng)
        self._return += self._opponent_moves()
        return self._observation(), {"seat": seat}

    def step(self, action):
        if self.learner is None:
            raise RuntimeError("call reset() before step()")
        if self._game_over():
            raise RuntimeError("the game is over: call reset()")
        _, mask = features_and_mask(self.spec_game, self.game.observe(self.learner))
        action = int(action)
        if not 0 <= action < len(mask) or not mask[action]:
            # An illegal move loses (agents with action_mask never make one).
            self._finish(-1.0)
            return self._observation(), self.loss_reward, True, False, {"illegal_move": True}
        self.game.step(action)
        reward = float(self.game.rewards[self.learner]) + self._opponent_moves()
        self._return += reward  # the game's own score, which decides who won
        over = self._game_over()
        if over:
            self._finish(self._return)
        terminated = over and bool(self.game.terminations[self.game.agent_selection])
        truncated = over and not terminated
        return self._observation(), self._scaled(reward), terminated, truncated, {}

    def _finish(self, learner_return: float) -> None:
        """Tells a pool opponent the learner's score: 1 a win, 0.5 a draw, 0 a loss."""
        if hasattr(self.opponent, "game_over"):
            self.opponent.game_over(0.5 + 0.5 * float(np.sign(learner_return)))

    def render(self):
        return self.game.render() if self.render_mode == "rgb_array" else None

    def close(self):
        self.game.close()
