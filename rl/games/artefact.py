"""A player acting with a run's policy artefact (``policies/ckpt-<step>/``), in NumPy.

It plays greedily, as evaluation does: the highest-scoring legal move (a Q-network's
largest Q-value, a policy's most probable move). The artefact must come from a run
on one of the game's envs (``tictactoe``, ``tictactoe_selfplay``, ...), whose
observations are the features followed by the legal-move mask.
"""

import os
from typing import Optional

import gymnasium as gym
import numpy as np

from rl.games.registered import game_of_env
from rl.games.spec import GameSpec, check_game_name, learner_observation
from rl.policy import PolicyArtefactError, load_host_policy, read_artefact


def artefact_game(path: str) -> str:
    """The game an artefact's run played (from its env name), or raises PolicyArtefactError."""
    env = read_artefact(path)["hparams"].get("env", "")
    game = game_of_env(env)
    if game is None:
        raise PolicyArtefactError(f"{path}: its run trained on {env!r}, which is not a game")
    return game


class ArtefactPlayer:
    """Plays a game with a policy artefact, greedily, among legal moves only."""

    def __init__(self, path: str, name: Optional[str] = None, game: Optional[str] = None):
        """Args:
        path: the artefact folder.
        name: the player's name (default: <run folder>@<step>).
        game: the game it must play (default: its run's); another raises.
        """
        trained_on = artefact_game(path)
        if game is not None and game != trained_on:
            raise PolicyArtefactError(f"{path} plays {trained_on}, not {game}")
        self.spec: GameSpec = check_game_name(trained_on)
        size = self.spec.num_features + self.spec.num_actions
        self.policy, self.arrays = load_host_policy(
            path,
            gym.spaces.Box(0.0, 1.0, (size,), np.float32),
            gym.spaces.Discrete(self.spec.num_actions),
        )
        run = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path))))
        step = os.path.basename(os.path.abspath(path)).split("-")[-1]
        self.name = name or f"{run}@{step}"

    def scores(self, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """[A] how much the policy likes each move: Q-values, or a categorical policy's
        logits (its outputs: the most likely move has the largest)."""
        obs = learner_observation(features, mask)[None]
        out = self.policy(obs, self.arrays)
        return out[0] if self.policy.outputs == "q_values" else out.outputs[0]

    def act(self, features: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        scores = np.where(mask, self.scores(features, mask), -np.inf)
        return int(np.argmax(scores))
