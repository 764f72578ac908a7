"""Two-player zero-sum games from PettingZoo's classic family, by name.

A game is played through PettingZoo's AEC API. What a player sees at its turn is
reduced to two arrays: ``features`` (float32, flat: the board from the mover's
point of view, or the opponent's last move) and ``mask`` (bool [num_actions]:
the legal moves). Both rl's single-agent view of a game (``versus.py``) and
tournaments (rl/tournament) read observations through ``features_and_mask``.
"""

import dataclasses
import importlib
from typing import Any, Dict, Tuple

import numpy as np

from rl import registry

INSTALL_HINT = "pip install -e '.[games]'"


@dataclasses.dataclass(frozen=True)
class GameSpec:
    """Attributes:
    name: rl's name of the game.
    module: the PettingZoo module whose ``env()`` makes it.
    num_actions: moves of the action space.
    num_features: length of the features vector.
    kwargs: passed to ``env()``.
    """

    name: str
    module: str
    num_actions: int
    num_features: int
    kwargs: Tuple[Tuple[str, Any], ...] = ()


GAMES: Dict[str, GameSpec] = {
    spec.name: spec
    for spec in (
        GameSpec("tictactoe", "pettingzoo.classic.tictactoe_v3", 9, 3 * 3 * 2),
        GameSpec("connect_four", "pettingzoo.classic.connect_four_v3", 7, 6 * 7 * 2),
        # Rock-paper-scissors: 15 throws a game; features: the opponent's last throw
        # (rock, paper, scissors, or none yet) one-hot.
        GameSpec(
            "rps", "pettingzoo.classic.rps_v2", 3, 4, (("num_actions", 3), ("max_cycles", 15))
        ),
    )
}


def check_game_name(name: str) -> GameSpec:
    """The spec of game ``name``; UnknownNameError naming the valid games otherwise."""
    if name not in GAMES:
        hint = registry.did_you_mean(name, GAMES)
        raise registry.UnknownNameError(
            f"unknown game {name!r}: {hint}valid: {', '.join(sorted(GAMES))}"
        )
    return GAMES[name]


def make_game(name: str, render_mode=None):
    """A PettingZoo AEC env of game ``name``.

    Raises:
      UnknownNameError: not a game.
      ImportError: PettingZoo is not installed (the message says how to install it).
    """
    spec = check_game_name(name)
    try:
        module = importlib.import_module(spec.module)
    except ImportError as e:
        raise ImportError(f"game {name!r} needs PettingZoo ({e}): {INSTALL_HINT}") from None
    return module.env(render_mode=render_mode, **dict(spec.kwargs))


def features_and_mask(spec: GameSpec, observation: Any) -> Tuple[np.ndarray, np.ndarray]:
    """What a player sees: (features float32 [num_features], legal moves bool [num_actions]).

    Args:
      spec: the game.
      observation: the AEC env's observation for the player to move.
    """
    if isinstance(observation, dict):  # board games: {"observation", "action_mask"}
        features = np.asarray(observation["observation"], np.float32).reshape(-1)
        mask = np.asarray(observation["action_mask"]).astype(bool)
    else:  # rps: the opponent's last throw, num_actions meaning "none yet"
        features = np.zeros(spec.num_features, np.float32)
        features[int(observation)] = 1.0
        mask = np.ones(spec.num_actions, bool)
    return features, mask


def learner_observation(features: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """What a model sees of a game (float32 [num_features + num_actions]): the features,
    then the legal-move mask as 0/1, which models with ``action_mask`` read."""
    return np.concatenate([features, mask.astype(np.float32)])
