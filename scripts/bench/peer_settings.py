"""The peer of the benchmark: Stable-Baselines3 with RL Baselines3 Zoo's settings for the
env of each rl set it is paired with, and whether this Python has it (the bench extra)."""

import dataclasses
import importlib.util
import os
from typing import Callable, Dict, List, Optional, Sequence

# The suite's peer over rl's seeds: <output_dir>/peers/<set>/ (seed_<S>/ and summary.json),
# beside rl's copies in <output_dir>/<set>/, which `train.py --copies` keeps for its run_<i>/.
PEERS_FOLDER = "peers"
PEER_SUMMARY_NAME = "summary.json"


def suite_peer_dir(output_dir: str, name: str) -> str:
    """Where the suite keeps set ``name``'s peer runs over rl's seeds."""
    return os.path.join(output_dir, PEERS_FOLDER, name)


# The bench extra: what the peer runs on.
PEER_MODULES = ("torch", "stable_baselines3")


def linear_schedule(start: float) -> Callable[[float], float]:
    """SB3 schedule falling linearly from `start` to 0 over training.

    Args:
      start: value at the beginning (SB3 passes progress_remaining, 1 -> 0).
    """
    return lambda progress_remaining: progress_remaining * start


@dataclasses.dataclass(frozen=True)
class Peer:
    """The Stable-Baselines3 run paired with an rl set, with RL-Zoo's settings (hyperparams/
    <algo>.yml) for the set's env.

    Attributes:
      algo: SB3's algorithm ("ppo", "dqn", "sac", "a2c").
      env: the Gymnasium id it learns and is evaluated on (the rl set's).
      settings: RL-Zoo's hyperparameters as SB3 keyword arguments (its defaults otherwise).
      n_envs: env copies (make_vec_env); None: one env from gym.make.
      normalize: observations and rewards through VecNormalize, as RL-Zoo's `normalize`.
      action_noise: std of Gaussian exploration noise on every action dimension, as
        RL-Zoo's `noise_type: normal` with `noise_std` (TD3, DDPG); None: none.
      zoo_entry: the entry of RL-Zoo's yml the settings are, when it is not ``env``'s.
    """

    algo: str
    env: str
    settings: Dict[str, object]
    n_envs: Optional[int] = None
    normalize: bool = False
    action_noise: Optional[float] = None
    zoo_entry: Optional[str] = None


def zoo_settings(peer: Peer) -> str:
    """Where ``peer``'s settings come from, as result files name it:
    "RL-Zoo hyperparams/ppo.yml: CartPole-v1"."""
    return f"RL-Zoo hyperparams/{peer.algo}.yml: {peer.zoo_entry or peer.env}"


# rl's eval_act_select -> SB3's predict(deterministic=...): how the peer acts in the
# evaluations of a seed run (peer_runs.peer_seed_run), as the rl set's evaluations act.
EVAL_DETERMINISTIC = {"greedy": True, "sample": False}


def build_peer(peer: Peer, seed: int):
    """The untrained SB3 model of ``peer``.

    Args:
      peer: what to build.
      seed: seed of the model and its env copies.
    """
    # The bench extra: loaded in the peer process only, as below.
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    if peer.n_envs is None:
        envs = gym.make(peer.env)
    else:
        envs = make_vec_env(peer.env, n_envs=peer.n_envs, seed=seed)
    if peer.normalize:
        envs = VecNormalize(envs)
    settings = dict(peer.settings)
    if peer.action_noise is not None:
        import numpy as np
        from stable_baselines3.common.noise import NormalActionNoise

        dims = envs.action_space.shape[-1]
        settings["action_noise"] = NormalActionNoise(
            np.zeros(dims), np.full(dims, peer.action_noise)
        )
    return peer_algorithm(peer)("MlpPolicy", envs, seed=seed, device="cpu", verbose=0, **settings)


def peer_algorithm(peer: Peer) -> type:
    """SB3's algorithm class of ``peer`` (``stable_baselines3.DQN`` for "dqn")."""
    import stable_baselines3  # the bench extra: only where a peer is built or checked

    return getattr(stable_baselines3, peer.algo.upper())


# The peer of each hparams set.
PEERS: Dict[str, Peer] = {
    "ppo_cartpole": Peer(
        "ppo",
        "CartPole-v1",
        {
            "n_steps": 32,
            "batch_size": 256,
            "n_epochs": 20,
            "gamma": 0.98,
            "gae_lambda": 0.8,
            "ent_coef": 0.0,
            "learning_rate": linear_schedule(1e-3),
            "clip_range": linear_schedule(0.2),
        },
        n_envs=8,
    ),
    "dqn_cartpole": Peer(
        "dqn",
        "CartPole-v1",
        {
            "learning_rate": 2.3e-3,
            "batch_size": 64,
            "buffer_size": 100_000,
            "learning_starts": 1000,
            "gamma": 0.99,
            "target_update_interval": 10,
            "train_freq": 256,
            "gradient_steps": 128,
            "exploration_fraction": 0.16,
            "exploration_final_eps": 0.04,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
    ),
    # Learning rate 1e-3, SB3's defaults otherwise: 256 x 256, batch 256, one gradient
    # step per env step.
    "sac_pendulum": Peer("sac", "Pendulum-v1", {"learning_rate": 1e-3}),
    "dqn_lunar_lander": Peer(
        "dqn",
        "LunarLander-v3",
        {
            "learning_rate": 6.3e-4,
            "batch_size": 128,
            "buffer_size": 50_000,
            "learning_starts": 0,
            "gamma": 0.99,
            "target_update_interval": 250,
            "train_freq": 4,
            "gradient_steps": -1,
            "exploration_fraction": 0.12,
            "exploration_final_eps": 0.1,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
    ),
    "ppo_lunar_lander": Peer(
        "ppo",
        "LunarLander-v3",
        {
            "n_steps": 1024,
            "batch_size": 64,
            "gae_lambda": 0.98,
            "gamma": 0.999,
            "n_epochs": 4,
            "ent_coef": 0.01,
        },
        n_envs=16,
    ),
    "dqn_mountain_car": Peer(
        "dqn",
        "MountainCar-v0",
        {
            "learning_rate": 4e-3,
            "batch_size": 128,
            "buffer_size": 10_000,
            "learning_starts": 1000,
            "gamma": 0.98,
            "target_update_interval": 600,
            "train_freq": 16,
            "gradient_steps": 8,
            "exploration_fraction": 0.2,
            "exploration_final_eps": 0.07,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
    ),
    "a2c_lunar_lander": Peer(
        "a2c",
        "LunarLander-v3",
        {
            "gamma": 0.995,
            "n_steps": 5,
            "learning_rate": linear_schedule(8.3e-4),
            "ent_coef": 1e-5,
        },
        n_envs=8,
    ),
    "a2c_mountain_car": Peer("a2c", "MountainCar-v0", {"ent_coef": 0.0}, n_envs=16, normalize=True),
    # The settings behind RL-Zoo's published 230 (2021): its yml of then with SB3's
    # defaults before 2.3.0, which trained after each episode, as many gradient steps
    # as the episode's env steps, on batches of 100 (SB3's changelog for 2.3.0).
    "ddpg_lunar_lander_continuous": Peer(
        "ddpg",
        "LunarLanderContinuous-v3",
        {
            "gamma": 0.98,
            "buffer_size": 200_000,
            "learning_starts": 10_000,
            "batch_size": 100,
            "gradient_steps": -1,
            "train_freq": (1, "episode"),
            "learning_rate": 1e-3,
            "policy_kwargs": {"net_arch": [400, 300]},
        },
        action_noise=0.1,
        zoo_entry="LunarLanderContinuous-v2 of 2021",
    ),
}


def missing_modules(names: Sequence[str]) -> List[str]:
    """The modules among `names` that this Python cannot import.

    Args:
      names: top-level module names.
    """
    return [name for name in names if importlib.util.find_spec(name) is None]


def missing_bench_extra(flag: str) -> Optional[str]:
    """Why ``flag`` cannot run here for want of the bench extra, or None if it is installed.

    Args:
      flag: the flag that needs the peer ("--peer", "--_peer_run").
    """
    missing = missing_modules(PEER_MODULES)
    if missing:
        return f'{flag} needs {", ".join(missing)}: pip install -e ".[bench]"'
    return None
