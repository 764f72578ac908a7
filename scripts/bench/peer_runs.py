"""One peer run in its own process: SB3 learns as many env steps as the rl run, then plays
greedy episodes (--_peer_run, timed from outside like train.py); or one seed of the peer
trained and evaluated as its rl set is (--_peer_seed, for --suite --peer_seeds)."""

import json
import os
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


# In a peer seed's folder (<suite_dir>/peers/<set>/seed_<S>): its evaluations, written
# once the seed has trained (peer_seed_run); a seed without it trains from scratch.
EVALUATIONS_NAME = "evaluations.json"


def peer_seed_identity(
    hparams: str, seed: int, version: str, train_steps: Optional[int] = None
) -> Dict[str, object]:
    """What a peer seed's evaluations.json is of: the rl set's budget and evaluations,
    the seed, and the peer (its version and settings); a file of another is not resumed.

    Args:
      hparams: the rl set (a key of PEERS; a registered set).
      seed: the seed.
      version: Stable-Baselines3's version.
      train_steps: env steps to learn; None: the set's own.
    """
    hp = peer_seed_hparams(hparams, train_steps)
    return {
        "set": hparams,
        "seed": seed,
        "peer": f"Stable-Baselines3 {version}",
        "settings": peer_settings.zoo_settings(peer_settings.PEERS[hparams]),
        "train_steps": hp.train_steps,
        "eval_interval": hp.eval_interval,
        "eval_episodes": hp.eval_episodes,
        "deterministic": peer_settings.EVAL_DETERMINISTIC[hp.eval_act_select],
    }


def peer_seed_hparams(hparams: str, train_steps: Optional[int] = None):
    """The registered set ``hparams`` (its budget and evaluations), with ``train_steps``
    when given."""
    from rl import catalog, registry  # noqa: F401  (the sets; no TensorFlow)

    hp = registry.hparams.get(hparams)()
    return hp if train_steps is None else hp.replace(train_steps=train_steps)


def peer_seed_run(
    hparams: str, seed: int, folder: str, train_steps: Optional[int] = None
) -> Dict[str, object]:
    """Trains one seed of the peer of ``hparams`` for the set's train_steps, evaluating as
    the rl set does; writes ``folder``/evaluations.json (atomically) and returns it.

    Evaluations come every eval_interval env steps and once at the end, eval_episodes
    episodes each, on envs of their own (rl.evaluation.Evaluator: the episodes of the
    evaluation at step t reset from seeds derived from ``seed`` and t, as rl's do), the
    peer acting as the set's eval_act_select does (EVAL_DETERMINISTIC).

    Args:
      hparams: the rl set whose peer (a key of PEERS) runs.
      seed: seed of the model, its envs and the evaluations.
      folder: the seed's folder.
      train_steps: env steps to learn instead of the set's (a short check).
    """
    start = time.perf_counter()
    # As peer_run: the peer's process has no TensorFlow (rl.evaluation needs none).
    sys.modules["tensorflow"] = None
    sys.modules["tensorboard"] = None
    # The bench extra: loaded in the peer process only.
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from rl.evaluation import Evaluator
    from rl.files import write_text_atomic

    torch.set_num_threads(1)
    identity = peer_seed_identity(hparams, seed, stable_baselines3.__version__, train_steps)
    hp = peer_seed_hparams(hparams, train_steps)
    model = peer_settings.build_peer(peer_settings.PEERS[hparams], seed)
    statistics_env = model.get_vec_normalize_env()  # the training envs' (frozen here)

    def act(obs, rng):
        del rng  # deterministic or SB3's own sampling, as its evaluations act
        if statistics_env is not None:
            obs = statistics_env.normalize_obs(obs)
        return model.predict(obs, deterministic=identity["deterministic"])[0]

    evaluator = Evaluator(hp.env, seed, act, max_episode_steps=hp.max_episode_steps)
    evaluations = []

    def evaluate(step: int) -> None:
        result, _ = evaluator.evaluate(step, hp.eval_episodes)
        record = {k: result[k] for k in ("step", "return_mean", "returns")}
        evaluations.append({**record, "wall_time": time.perf_counter() - learn_start})

    class EvaluateEvery(BaseCallback):
        """Evaluates at the first step past each multiple of eval_interval before the end,
        as rl does (the end's evaluation comes after learning, once)."""

        def __init__(self):
            super().__init__()
            self.next_eval = hp.eval_interval

        def _on_step(self) -> bool:
            if hp.train_steps > self.num_timesteps >= self.next_eval:
                self.next_eval = (self.num_timesteps // hp.eval_interval + 1) * hp.eval_interval
                evaluate(self.num_timesteps)
            return True

    learn_start = time.perf_counter()
    model.learn(hp.train_steps, callback=EvaluateEvery())
    if not evaluations or evaluations[-1]["step"] != model.num_timesteps:
        evaluate(model.num_timesteps)  # the final one, as rl's
    evaluator.close()
    result = {
        **identity,
        "steps": int(model.num_timesteps),
        "learn_s": time.perf_counter() - learn_start,
        "wall_s": time.perf_counter() - start,
        "evaluations": evaluations,
    }
    os.makedirs(folder, exist_ok=True)
    write_text_atomic(os.path.join(folder, EVALUATIONS_NAME), json.dumps(result, indent=1))
    return result
