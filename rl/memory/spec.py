"""Field specs: what memory stores, from the env's spaces and the actor's extras."""

import dataclasses
from typing import Dict, Mapping, Tuple

import gymnasium as gym
import numpy as np


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    name: str
    dtype: np.dtype
    shape: Tuple[int, ...]


def transition_specs(
    observation_space: gym.Space, action_space: gym.Space, extras: Mapping = {}
) -> Dict[str, FieldSpec]:
    obs_dtype = np.dtype(np.uint8 if observation_space.dtype == np.uint8 else np.float32)
    if isinstance(action_space, gym.spaces.Discrete):
        action = (np.dtype(np.int32), ())
    elif isinstance(action_space, gym.spaces.Box):
        action = (np.dtype(np.float32), tuple(action_space.shape))
    else:
        action = (np.dtype(np.int32), tuple(action_space.shape))
    specs = {
        "obs": FieldSpec("obs", obs_dtype, tuple(observation_space.shape)),
        "actions": FieldSpec("actions", *action),
        "rewards": FieldSpec("rewards", np.dtype(np.float32), ()),
        "terminated": FieldSpec("terminated", np.dtype(np.bool_), ()),
        "truncated": FieldSpec("truncated", np.dtype(np.bool_), ()),
    }
    for name, (dtype, shape) in extras.items():
        specs[name] = FieldSpec(name, np.dtype(dtype), tuple(shape))
    return specs
