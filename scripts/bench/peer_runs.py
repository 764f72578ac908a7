"""One peer run: SB3 learns as many env steps as the rl run, then plays greedy episodes;
in its own process (--_peer_run), timed from outside like train.py."""

import statistics
import sys
import time
from typing import Dict, Optional

from scripts.bench import children, peer_checkpoints, peer_settings

PEER_EVAL_EPISODES = 20
# With --peer_checkpoints: env steps between saves of a long peer run.
PEER_CHECKPOINT_STEPS = 25_000


def peer_run(
    hparams: str,
    seed: int,
    steps: int,
    checkpoints: Optional[str] = None,
    checkpoint_steps: int = PEER_CHECKPOINT_STEPS,
) -> Dict[str, object]:
    """Builds, trains and evaluates one peer model in this process.

    Args:
      hparams: the rl set whose peer (a key of PEERS) runs.
      seed: seed of the model, its envs and the evaluation env.
      steps: env steps to learn.
      checkpoints: a folder to save the peer in every ``checkpoint_steps`` env steps and
        to resume it from (its learning then spans processes: ``learn_s`` is this one's);
        tied to this set, seed and steps on first use (``claim_peer_folder``).
      checkpoint_steps: env steps between saves.
    """
    # The peer's own set-up (torch, SB3, Gymnasium) has no TensorFlow and no
    # TensorBoard; here both are installed for rl, and SB3 would load them
    # through torch.utils.tensorboard (about 2.5 s). Hide them, as that venv would.
    sys.modules["tensorflow"] = None
    sys.modules["tensorboard"] = None
    if checkpoints:  # first: another run's folder is refused before torch loads
        peer_checkpoints.claim_peer_folder(
            checkpoints, {"set": hparams, "seed": seed, "steps": steps}
        )
    # The bench extra (torch, SB3): loaded in the peer process only.
    import gymnasium as gym
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    torch.set_num_threads(1)
    peer = peer_settings.PEERS[hparams]
    model = peer_settings.build_peer(peer, seed)
    callbacks, resumed_from = [], 0
    if checkpoints:
        from stable_baselines3.common.callbacks import CheckpointCallback

        model, resumed_from = peer_checkpoints.resume_peer(model, checkpoints)
        callbacks.append(
            CheckpointCallback(
                max(checkpoint_steps // model.n_envs, 1),
                checkpoints,
                name_prefix="peer",
                save_replay_buffer=True,
                save_vecnormalize=True,
            )
        )
    start = time.perf_counter()
    model.learn(max(steps - resumed_from, 0), callback=callbacks, reset_num_timesteps=False)
    learn_s = time.perf_counter() - start
    eval_env = DummyVecEnv([lambda: Monitor(gym.make(peer.env))])
    trained_statistics = model.get_vec_normalize_env()
    if trained_statistics is not None:  # the training envs' observation statistics, frozen
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
        eval_env.obs_rms = trained_statistics.obs_rms
    eval_env.seed(seed + 12345)
    returns, _ = evaluate_policy(
        model,
        eval_env,
        n_eval_episodes=PEER_EVAL_EPISODES,
        deterministic=True,
        return_episode_rewards=True,
    )
    return {
        "steps": int(model.num_timesteps),
        "learn_s": learn_s,
        "returns": list(returns),
        "resumed_from": resumed_from,
    }


def peer_once(hparams: str, seed: int, steps: int) -> Dict[str, object]:
    """Runs one peer process, timed like train.py, and returns the row's numbers.

    Args:
      hparams: the rl set whose peer (a key of PEERS) runs.
      seed: run seed.
      steps: env steps to learn.
    """
    command = children.benchmark_command("--_peer_run", hparams, str(seed), str(steps))
    wall, stdout = children.timed_run(command)
    result = children.last_json_line(stdout)
    return {
        "seed": seed,
        "steps": result["steps"],
        "wall_s": wall,
        "steps_per_s": result["steps"] / result["learn_s"],
        "final_return": statistics.fmean(result["returns"]),
        "eval_returns": result["returns"],
    }
