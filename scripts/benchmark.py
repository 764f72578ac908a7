"""Speed and learning benchmark: whole train.py runs, one table.

    python scripts/benchmark.py                      # ppo_cartpole, dqn_cartpole
    python scripts/benchmark.py --hparams ppo_cartpole --seeds 0 1 2
    python scripts/benchmark.py --peer --pairs 3     # side by side with Stable-Baselines3
    python scripts/benchmark.py --baseline ../rl-base  # beside an earlier commit's checkout
    python scripts/benchmark.py --suite classic      # every classic set, 3 seeds, beside RL-Zoo
    python scripts/benchmark.py --remote             # envs over gRPC against in-process

Each run is a fresh `python train.py` process, so wall time includes Python
and TensorFlow start-up, tracing and compilation, as a user sees it. The
table gives wall time, env steps per second in the training loop, the final
evaluation return and the first step at which evaluation reached the target.

With --peer (needs `pip install -e ".[bench]"`), each set is paired with
Stable-Baselines3 on the RL Zoo's settings for the same env: ppo_cartpole with its PPO,
dqn_cartpole with its DQN, sac_pendulum with its SAC (`--hparams sac_pendulum --peer`),
and, to check RL-Zoo's published values on this machine, dqn_mountain_car,
a2c_lunar_lander and a2c_mountain_car. Runs alternate rl, peer, rl, peer, ... (run i of
each side uses seed i); a peer run is a fresh `python scripts/benchmark.py
--_peer_run SET SEED STEPS` process, timed from outside exactly like
train.py, that learns as many env steps as the rl run before it and then
plays 20 greedy episodes. A short process first measures per-call costs of
this machine (a compiled TensorFlow call, a NumPy MLP forward, a CartPole
step), printed above the table. In its per-run rows, steps/s counts the
training call only (rl: Experiment.train with its evaluations; peer: learn);
the summary gives median wall times, their ratio rl/peer, and min/median of
the final evaluations.

With --baseline CHECKOUT, another rl checkout (say `git worktree add ../rl-base REV` of
an earlier commit) runs each set and seed too, with the same Python, before or after
this checkout's run in turn, so a change's effect on speed is read on one host in one
run, not across hosts whose speeds differ by a third. The rl-only table then gives each
run's checkout ("code": rl or base) and each set's ratio of median wall times; with
--peer the summary adds the baseline's median wall time, its ratio to the peer and this
checkout's ratio to it.

Flags it does not know go to the rl runs' train.py (the default table and --peer only;
TRAIN_FLAGS_PASSED lists which). As with train.py, bad input (an unknown name, a number
out of range, a flag of another mode, an output path that cannot be written, a train.py
child's own refusal) ends in one line on stderr and exit code 2, checked before the
per-call costs and the runs.
"""

import argparse
import dataclasses
import importlib.util
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")
sys.path.insert(0, ROOT)  # this checkout's rl, not whichever one pip installed

from rl import command_line  # noqa: E402  (argparse only: no TensorFlow)
from rl.command_line import int_at_least  # noqa: E402
from rl.files import read_json_object, write_text_atomic  # noqa: E402

PROG = "benchmark.py"
PEER_MODULES = ("torch", "stable_baselines3")
PEER_EVAL_EPISODES = 20
# With --peer_checkpoints: env steps between saves of a long peer run.
PEER_CHECKPOINT_STEPS = 25_000
COST_CALLS = 2000
# MLP of the per-call costs: CartPole observations [16, 4] -> 64 -> 64 (tanh) -> 2.
COST_BATCH, COST_LAYERS = 16, (4, 64, 64, 2)


def fail(message: str) -> NoReturn:
    """One line on stderr and exit code 2, as train.py's bad input (rl/command_line.py)."""
    command_line.fail(PROG, message)


class ChildFailed(RuntimeError):
    """A process this script started (train.py, a peer, the costs) exited with an error.

    Attributes:
      command: its program and arguments.
      code: its exit code.
      stderr: its standard error.
    """

    def __init__(self, command: List[str], code: int, stderr: str):
        super().__init__(f"{describe_command(command)} failed with exit code {code}")
        self.command, self.code, self.stderr = command, code, stderr


def describe_command(command: List[str]) -> str:
    """A child's command as a user would type it: not Python's path, and the script's name
    alone when it is this checkout's (a --baseline's train.py keeps its folder)."""
    script = command[1]
    mine = os.path.dirname(script) in (ROOT, os.path.join(ROOT, "scripts"))
    return " ".join([os.path.basename(script) if mine else script, *command[2:]])


def timed_run(command: List[str], cwd: str = ROOT) -> Tuple[float, str]:
    """Runs a command from ``cwd``; returns its whole-process wall time and stdout.

    Args:
      command: program and arguments.
      cwd: the folder it runs in (another checkout's train.py runs in that checkout).

    Raises:
      ChildFailed: if it exits with an error.
    """
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise ChildFailed(command, proc.returncode, proc.stderr)
    return wall, proc.stdout


def last_json_line(stdout: str) -> Dict[str, object]:
    """The JSON object on the last line of a program's output.

    Args:
      stdout: the program's standard output.
    """
    return json.loads(stdout.strip().splitlines()[-1])


def run_once(
    hparams: str,
    seed: int,
    train_steps: Optional[int],
    output_dir: str,
    extra: List[str],
    checkout: str = ROOT,
) -> Dict[str, object]:
    """Runs train.py once and returns the row's numbers.

    Args:
      hparams: registered hparams set.
      seed: run seed.
      train_steps: env steps (None: the set's own budget).
      output_dir: a fresh folder for the run.
      extra: more train.py flags.
      checkout: the rl checkout whose train.py runs, in that folder (so it imports its
        own rl): this one, or a --baseline.
    """
    command = [
        sys.executable,
        os.path.join(checkout, "train.py"),
        "--hparams",
        hparams,
        "--seed",
        str(seed),
        "--output_dir",
        output_dir,
        *extra,
    ]
    if train_steps is not None:
        command += ["--train_steps", str(train_steps)]
    wall, stdout = timed_run(command, cwd=checkout)
    # Imported here, after the timed run: the peer and cost processes (this same
    # script) must not pay for rl's imports.
    from rl.logbook import EVAL_FILE, read_eval_records

    try:
        result = last_json_line(stdout)
        evals = read_eval_records(os.path.join(output_dir, EVAL_FILE))
        return {
            "hparams": hparams,
            "seed": seed,
            "steps": result["step"],
            "wall_s": wall,
            "steps_per_s": result["steps_per_second"],
            "final_return": evals[-1]["return_mean"],
            "eval_returns": evals[-1]["returns"],
            "evals": evals,
        }
    except (KeyError, IndexError, TypeError, ValueError, OSError) as e:
        if checkout == ROOT:
            raise  # this checkout's own output: a bug, with its traceback
        fail(
            f"--baseline {checkout}: the results of {describe_command(command)} cannot be "
            f"read ({type(e).__name__}: {e}); its train.py reports in another form than "
            "this checkout's, so give a later commit"
        )


def first_step_reaching(evals: List[dict], target: float) -> Optional[int]:
    for record in evals:
        if record["return_mean"] >= target:
            return record["step"]
    return None


# --- the peer: Stable-Baselines3 with the RL Zoo's settings -------------------------
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
    """

    algo: str
    env: str
    settings: Dict[str, object]
    n_envs: Optional[int] = None
    normalize: bool = False
    action_noise: Optional[float] = None


def build_peer(peer: Peer, seed: int):
    """The untrained SB3 model of ``peer``.

    Args:
      peer: what to build.
      seed: seed of the model and its env copies.
    """
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
    import stable_baselines3

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
    ),
}


def peer_saves(folder: str) -> List[Tuple[int, str]]:
    """(env steps, file name) of the peer models ``CheckpointCallback`` saved in
    ``folder`` (prefix "peer"), oldest first; [] for a missing folder."""
    if not os.path.isdir(folder):
        return []
    return sorted(
        (int(m.group(1)), name)
        for name in os.listdir(folder)
        for m in [re.fullmatch(r"peer_(\d+)_steps\.zip", name)]
        if m
    )


# In a --peer_checkpoints folder: the peer run its saves belong to (set, seed, steps).
PEER_MANIFEST = "peer_run.json"


def claim_peer_folder(folder: str, run: Dict[str, object]) -> None:
    """Ties ``folder`` to one peer run: records the run on first use; refuses (exit 2) a
    folder recorded for another run, or holding another run's saves.

    The steps are part of the run: SB3's schedules (learning rate, exploration) run over
    the total it was asked to learn.

    Args:
      folder: the --peer_checkpoints folder.
      run: {"set": ..., "seed": ..., "steps": ...} of this run.
    """
    recorded = read_peer_manifest(folder)
    if recorded is not None and recorded != run:
        fail(
            f"--peer_checkpoints {folder} holds the saves of {describe_peer_run(recorded)}, "
            f"not {describe_peer_run(run)}; give another folder"
        )
    # Also with a manifest: saves of this set, seed and steps made before the peer's
    # settings changed (the DDPG peer's batch) are another run.
    check_saves_fit(folder, run, recorded=recorded is not None)
    if recorded is None:
        os.makedirs(folder, exist_ok=True)
        write_text_atomic(os.path.join(folder, PEER_MANIFEST), json.dumps(run) + "\n")


def describe_peer_run(run: Dict[str, object]) -> str:
    return f"{run['set']} seed {run['seed']} for {run['steps']} steps"


def read_peer_manifest(folder: str) -> Optional[Dict[str, object]]:
    """The run recorded in ``folder``'s manifest; None if it has none (exit 2 if damaged)."""
    path = os.path.join(folder, PEER_MANIFEST)
    if not os.path.exists(path):
        return None
    try:
        run = read_json_object(path)
        if set(run) != {"set", "seed", "steps"}:
            raise ValueError(f"{path} holds {sorted(run)}; expected the keys set, seed and steps")
    except OSError as e:
        fail(f"--peer_checkpoints {folder}: {PEER_MANIFEST} cannot be read ({e.strerror})")
    except ValueError as e:
        fail(
            f"--peer_checkpoints {folder}: {e}; if the saves are of SET SEED STEPS, write "
            '{"set": SET, "seed": SEED, "steps": STEPS} to it'
        )
    return run


def check_saves_fit(folder: str, run: Dict[str, object], recorded: bool) -> None:
    """The saves in ``folder`` are resumed only if the newest readable one has this run's
    seed, steps, policy and the peer's settings; else the process ends (exit 2).

    Args:
      folder: the --peer_checkpoints folder.
      run: {"set": ..., "seed": ..., "steps": ...} of this run.
      recorded: the folder's manifest names this run; then saves that do not read are
        left to ``resume_peer``, which starts afresh if none loads.
    """
    saves = peer_saves(folder)
    if not saves:
        return
    saved = newest_save_data(folder, saves)
    if saved is None:
        if recorded:
            return
        fail(
            f"--peer_checkpoints {folder} holds peer saves that cannot be read and no "
            f"{PEER_MANIFEST} saying whose they are; move them away or give another folder"
        )
    peer = PEERS[str(run["set"])]
    policy = peer_algorithm(peer).policy_aliases["MlpPolicy"].__module__
    differences = save_differences(saved, peer, run, policy)
    if differences:
        more = f"; and {len(differences) - 3} more" if len(differences) > 3 else ""
        fail(
            f"--peer_checkpoints {folder} holds the saves of another run than "
            f"{describe_peer_run(run)} ({'; '.join(differences[:3])}{more}); give another folder"
        )


def newest_save_data(folder: str, saves: List[Tuple[int, str]]) -> Optional[dict]:
    """The settings SB3 stored (the zip's "data" JSON) in the newest save that reads."""
    import zipfile

    for _, name in reversed(saves):
        try:
            with zipfile.ZipFile(os.path.join(folder, name)) as archive:
                data = json.loads(archive.read("data"))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            continue  # cut short by a kill: the one before tells as well
        if isinstance(data, dict):
            return data
    return None


def save_differences(
    saved: dict, peer: Peer, run: Dict[str, object], policy_module: str
) -> List[str]:
    """How a save's stored settings differ from those of ``run``'s peer; [] if they agree.

    Args:
      saved: the "data" JSON of an SB3 save.
      peer: the peer of the run's set.
      run: {"set", "seed", "steps"} of the run.
      policy_module: the module of the peer algorithm's MlpPolicy class.
    """
    expected = {
        "seed": run["seed"],
        "steps": run["steps"],
        "n_envs": peer.n_envs or 1,
        **{k: v for k, v in peer.settings.items() if isinstance(v, (int, float, str))},
    }
    # SB3 stores the total it was asked to learn as _total_timesteps.
    found = {key: saved.get("_total_timesteps" if key == "steps" else key) for key in expected}
    differences = [
        f"{k} {brief(found[k])}, not {brief(v)}"
        for k, v in expected.items()
        # SB3 stores some settings as objects (DQN's train_freq 256 as a pickled
        # TrainFreq): those cannot be compared from the JSON, so they are not.
        if found[k] != v and not isinstance(found[k], dict)
    ]
    saved_policy = (saved.get("policy_class") or {}).get("__module__")
    if saved_policy != policy_module:
        differences.insert(0, f"policy of {saved_policy}, not {policy_module}")
    return differences


def brief(value: object) -> str:
    """A stored setting for a one-line message (SB3 stores objects as pickled dicts)."""
    return "an object" if isinstance(value, dict) else repr(value)


def resume_peer(model, folder: str):
    """The peer saved last in ``folder`` (model, replay, normalisation), or ``model``
    itself when nothing there loads; and the env steps it had learned.

    A save cut short by a kill leaves a file that does not load: the one before is used.

    Args:
      model: the untrained peer, built as the saved one was.
      folder: where ``CheckpointCallback`` saved it (prefix "peer").
    """
    from stable_baselines3.common.vec_env import VecNormalize

    for steps, name in reversed(peer_saves(folder)):
        replay = os.path.join(folder, f"peer_replay_buffer_{steps}_steps.pkl")
        statistics_path = os.path.join(folder, f"peer_vecnormalize_{steps}_steps.pkl")
        try:
            envs = model.get_env()
            if os.path.exists(statistics_path):
                envs = VecNormalize.load(statistics_path, envs.venv)
            loaded = type(model).load(os.path.join(folder, name), env=envs, device="cpu")
            if hasattr(loaded, "replay_buffer"):
                loaded.load_replay_buffer(replay)
        except Exception as e:  # noqa: BLE001  (any damage: fall back to the save before)
            print(
                f"peer: {name} does not load ({type(e).__name__}); trying the one before",
                file=sys.stderr,
            )
            continue
        return loaded, steps
    return model, 0


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
        claim_peer_folder(checkpoints, {"set": hparams, "seed": seed, "steps": steps})
    import gymnasium as gym
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    torch.set_num_threads(1)
    peer = PEERS[hparams]
    model = build_peer(peer, seed)
    callbacks, resumed_from = [], 0
    if checkpoints:
        from stable_baselines3.common.callbacks import CheckpointCallback

        model, resumed_from = resume_peer(model, checkpoints)
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
    command = [sys.executable, os.path.abspath(__file__), "--_peer_run", hparams, str(seed)]
    wall, stdout = timed_run(command + [str(steps)])
    result = last_json_line(stdout)
    return {
        "seed": seed,
        "steps": result["steps"],
        "wall_s": wall,
        "steps_per_s": result["steps"] / result["learn_s"],
        "final_return": statistics.fmean(result["returns"]),
        "eval_returns": result["returns"],
    }


# --- per-call costs of this machine ---------------------------------------------
def per_call_ms(
    call: Callable[[], object],
    calls: int,
    warmup: int = 20,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Median wall time of one call, in milliseconds.

    Args:
      call: the function to time, called without arguments.
      calls: how many timed calls.
      warmup: untimed calls first (first calls build caches).
      clock: seconds, monotonic.
    """
    for _ in range(warmup):
        call()
    times = []
    for _ in range(calls):
        start = clock()
        call()
        times.append(clock() - start)
    return 1000.0 * statistics.median(times)


def machine_costs(calls: int) -> Dict[str, float]:
    """Per-call costs in ms: a compiled TF MLP call, the NumPy MLP, a CartPole step.

    Args:
      calls: timed calls of each.
    """
    import gymnasium as gym
    import numpy as np

    from rl._tf import import_tensorflow_quietly

    tf = import_tensorflow_quietly()  # its start-up lines would land between the table's rows
    rng = np.random.default_rng(0)
    layers = [
        (rng.normal(0, 0.1, (n_in, n_out)).astype(np.float32), np.zeros(n_out, np.float32))
        for n_in, n_out in zip(COST_LAYERS[:-1], COST_LAYERS[1:])
    ]
    x = rng.normal(size=(COST_BATCH, COST_LAYERS[0])).astype(np.float32)

    def numpy_forward():
        h = x
        for w, b in layers[:-1]:
            h = np.tanh(h @ w + b)
        return h @ layers[-1][0] + layers[-1][1]

    variables = [(tf.Variable(w), tf.Variable(b)) for w, b in layers]

    @tf.function(input_signature=[tf.TensorSpec(x.shape, tf.float32)])
    def tf_forward(h):
        for w, b in variables[:-1]:
            h = tf.tanh(h @ w + b)
        return h @ variables[-1][0] + variables[-1][1]

    concrete, x_tf = tf_forward.get_concrete_function(), tf.constant(x)
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    actions = itertools.cycle([0, 1])

    def env_step():
        _, _, terminated, truncated, _ = env.step(next(actions))
        if terminated or truncated:
            env.reset()

    return {
        "tf_call_ms": per_call_ms(lambda: concrete(x_tf), calls),
        "numpy_mlp_ms": per_call_ms(numpy_forward, calls),
        "cartpole_step_ms": per_call_ms(env_step, calls),
    }


def print_machine_costs() -> Dict[str, float]:
    """Measures the per-call costs in a fresh process, prints them and returns them."""
    _, stdout = timed_run([sys.executable, os.path.abspath(__file__), "--_costs"])
    costs = last_json_line(stdout)
    print(format_costs(costs))
    return costs


def format_costs(costs: Dict[str, float]) -> str:
    """One line of the per-call costs.

    Args:
      costs: machine_costs' result.
    """
    return (
        f"per-call costs here: compiled TF MLP call [16,4] {costs['tf_call_ms']:.3f} ms, "
        f"NumPy MLP forward {costs['numpy_mlp_ms']:.3f} ms, "
        f"CartPole-v1 step {costs['cartpole_step_ms']:.3f} ms"
    )


# --- the side-by-side table ---------------------------------------------------
def pair_name(hparams: str, algo: str) -> str:
    """The table's name of a pair.

    Args:
      hparams: the rl hparams set.
      algo: the peer algorithm.
    """
    return f"{hparams} vs sb3 {algo}"


def summarise_pair(
    hparams: str,
    algo: str,
    rl_rows: Sequence[dict],
    peer_rows: Sequence[dict],
    base_rows: Sequence[dict] = (),
) -> Dict[str, object]:
    """Medians of one pair's runs and the ratio of median wall times, rl/peer.

    Args:
      hparams: the rl hparams set.
      algo: the peer algorithm.
      rl_rows: run_once rows of the set.
      peer_rows: peer_once rows.
      base_rows: run_once rows of the --baseline checkout, if any: the summary then
        gives its median wall time, its ratio to the peer and rl's ratio to it.
    """
    rl_wall = statistics.median(r["wall_s"] for r in rl_rows)
    peer_wall = statistics.median(r["wall_s"] for r in peer_rows)
    rl_evals = [r["final_return"] for r in rl_rows]
    peer_evals = [r["final_return"] for r in peer_rows]
    summary = {
        "pair": pair_name(hparams, algo),
        "runs": len(rl_rows),
        "rl_wall_s": rl_wall,
        "peer_wall_s": peer_wall,
        "ratio": rl_wall / peer_wall,
        "rl_eval_min": min(rl_evals),
        "rl_eval_median": statistics.median(rl_evals),
        "peer_eval_min": min(peer_evals),
        "peer_eval_median": statistics.median(peer_evals),
    }
    if base_rows:
        base_wall = statistics.median(r["wall_s"] for r in base_rows)
        summary.update(
            base_wall_s=base_wall,
            base_ratio=base_wall / peer_wall,
            rl_per_base=rl_wall / base_wall,
            base_eval_min=min(r["final_return"] for r in base_rows),
        )
    return summary


RUN_HEADER = (
    f"{'pair':<32} {'run':>3} {'side':<4} {'seed':>4} {'steps':>7} {'wall s':>7} "
    f"{'steps/s':>8} {'final eval':>10} {'episodes':>8}"
)
SUMMARY_HEADER = (
    f"{'pair':<32} {'runs':>4} {'rl s':>6} {'peer s':>6} {'rl/peer':>7} "
    f"{'rl eval min/med':>15} {'peer eval min/med':>17}"
)
# With --baseline: the other checkout's median wall, its ratio to the peer, rl's to it.
BASE_HEADER = f"{'base s':>6} {'base/peer':>9} {'rl/base':>7} {'base eval min':>13}"


def format_run(row: Dict[str, object]) -> str:
    """One per-run line of the side-by-side table.

    Args:
      row: a run_once or peer_once row with pair, run and side added.
    """
    return (
        f"{row['pair']:<32} {row['run']:>3} {row['side']:<4} {row['seed']:>4} "
        f"{row['steps']:>7} {row['wall_s']:>7.1f} {row['steps_per_s']:>8.0f} "
        f"{row['final_return']:>10.1f} {len(row['eval_returns']):>8}"
    )


def format_summary(summary: Dict[str, object]) -> str:
    """One summary line of the side-by-side table.

    Args:
      summary: summarise_pair's result.
    """
    rl_eval = f"{summary['rl_eval_min']:.1f}/{summary['rl_eval_median']:.1f}"
    peer_eval = f"{summary['peer_eval_min']:.1f}/{summary['peer_eval_median']:.1f}"
    line = (
        f"{summary['pair']:<32} {summary['runs']:>4} {summary['rl_wall_s']:>6.1f} "
        f"{summary['peer_wall_s']:>6.1f} {summary['ratio']:>7.2f} "
        f"{rl_eval:>15} {peer_eval:>17}"
    )
    if "base_wall_s" in summary:
        line += (
            f" {summary['base_wall_s']:>6.1f} {summary['base_ratio']:>9.2f} "
            f"{summary['rl_per_base']:>7.2f} {summary['base_eval_min']:>13.1f}"
        )
    return line


def missing_modules(names: Sequence[str]) -> List[str]:
    """The modules among `names` that this Python cannot import.

    Args:
      names: top-level module names.
    """
    return [name for name in names if importlib.util.find_spec(name) is None]


def peer_error(hparams: Sequence[str], pairs: int) -> Optional[str]:
    """Why a --peer run cannot start, or None.

    Args:
      hparams: the --hparams sets.
      pairs: the --pairs count.
    """
    unpaired = [name for name in hparams if name not in PEERS]
    if unpaired:
        return f"--peer has no peer for {', '.join(unpaired)}: valid: {', '.join(PEERS)}"
    if pairs < 1:
        return f"--pairs must be >= 1, got {pairs}"
    missing = missing_modules(PEER_MODULES)
    if missing:
        return f'--peer needs {", ".join(missing)}: pip install -e ".[bench]"'
    return None


def checkout_runs(
    name: str,
    turn: int,
    seed: int,
    train_steps: Optional[int],
    extra: List[str],
    tmp: str,
    baseline: Optional[str],
) -> List[Tuple[str, dict]]:
    """One run of ``name`` by this checkout ("rl") and, with a --baseline, one by it
    ("base"), as [(side, run_once row)] in that order; a baseline that trains another
    number of steps ends the process (exit 2).

    Args:
      name: the hparams set.
      turn: the index of this round: the two checkouts take turns going first, so
        neither always follows the same run (the peer's, or the other checkout's).
      seed: the runs' seed.
      train_steps: env steps (None: the set's own budget).
      extra: more train.py flags.
      tmp: a folder for the run folders.
      baseline: the other checkout, or None.
    """
    sides = [("rl", ROOT)] + ([("base", baseline)] if baseline else [])
    rows = {}
    for side, checkout in sides if turn % 2 == 0 else sides[::-1]:
        folder = os.path.join(tmp, f"{name}-{seed}-{side}")
        rows[side] = run_once(name, seed, train_steps, folder, extra, checkout)
    if baseline and rows["base"]["steps"] != rows["rl"]["steps"]:
        fail(
            f"--baseline {baseline} trained {name} for {rows['base']['steps']} env steps and "
            f"this checkout for {rows['rl']['steps']}: the set differs between them; give "
            "--train_steps to compare equal budgets"
        )
    return [(side, rows[side]) for side, _ in sides]


def run_peer_table(
    hparams: Sequence[str],
    pairs: int,
    train_steps: Optional[int],
    extra: List[str],
    tmp: str,
    baseline: Optional[str] = None,
) -> Tuple[Dict[str, float], List[dict], List[dict]]:
    """Measures the per-call costs, then runs and prints the side-by-side table.

    Args:
      hparams: rl sets, each with a peer in PEERS.
      pairs: rl/peer run pairs per set.
      train_steps: env steps of the rl runs (None: the set's own budget).
      extra: more train.py flags.
      tmp: a folder for the rl runs.
      baseline: another rl checkout (--baseline) whose train.py runs each pair's set and
        seed too, between this checkout's run and the peer's (side "base").
    """
    costs = print_machine_costs()
    print(RUN_HEADER)
    print("-" * len(RUN_HEADER), flush=True)
    rows, summaries = [], []
    for name in hparams:
        algo, pair_rows = PEERS[name].algo, {"rl": [], "base": [], "peer": []}
        for run in range(pairs):
            for side, row in checkout_runs(name, run, run, train_steps, extra, tmp, baseline):
                del row["evals"], row["hparams"]
                pair_rows[side].append(row)
            # The peer learns as many env steps as the rl run took.
            pair_rows["peer"].append(peer_once(name, run, int(pair_rows["rl"][-1]["steps"])))
            for side in ("rl", "base", "peer") if baseline else ("rl", "peer"):
                row = pair_rows[side][-1]
                row.update(pair=pair_name(name, algo), run=run + 1, side=side)
                rows.append(row)
                print(format_run(row), flush=True)
        summaries.append(
            summarise_pair(name, algo, pair_rows["rl"], pair_rows["peer"], pair_rows["base"])
        )
    print()
    header = SUMMARY_HEADER + (f" {BASE_HEADER}" if baseline else "")
    print(header)
    print("-" * len(header))
    for summary in summaries:
        print(format_summary(summary))
    return costs, rows, summaries


def run_table(
    hparams: Sequence[str],
    seeds: Sequence[int],
    train_steps: Optional[int],
    target: float,
    extra: List[str],
    baseline: Optional[str] = None,
) -> List[dict]:
    """Runs and prints the rl-only table; returns its rows without the eval records.

    Args:
      hparams: rl sets.
      seeds: seeds of each set.
      train_steps: env steps (None: the set's own budget).
      target: evaluation return counted as solved.
      extra: more train.py flags.
      baseline: another rl checkout (--baseline) that runs each set and seed too: a
        "code" column ("rl" or "base") and, per set, the ratio of median wall times.
    """
    rows = []
    header = (
        f"{'hparams':<14} {'seed':>4} {'steps':>8} {'wall s':>7} "
        f"{'steps/s':>8} {'final eval':>10} {'solved at':>9}"
    ) + (f" {'code':>4}" if baseline else "")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as tmp:
        for name in hparams:
            for turn, seed in enumerate(seeds):
                for side, row in checkout_runs(name, turn, seed, train_steps, extra, tmp, baseline):
                    solved = first_step_reaching(row["evals"], target)
                    row["solved_at"] = solved
                    if baseline:
                        row["code"] = side
                    rows.append(row)
                    print(
                        f"{name:<14} {seed:>4} {row['steps']:>8} {row['wall_s']:>7.1f} "
                        f"{row['steps_per_s']:>8.0f} {row['final_return']:>10.1f} "
                        f"{solved if solved is not None else '-':>9}"
                        + (f" {side:>4}" if baseline else ""),
                        flush=True,
                    )
    if baseline:
        print()
        for name in hparams:
            walls = {
                side: statistics.median(
                    r["wall_s"] for r in rows if r["hparams"] == name and r["code"] == side
                )
                for side in ("rl", "base")
            }
            print(
                f"{name}: median wall {walls['rl']:.2f} s here, {walls['base']:.2f} s at the "
                f"baseline: rl/base {walls['rl'] / walls['base']:.2f}"
            )
    return [{k: v for k, v in r.items() if k not in ("evals", "eval_returns")} for r in rows]


# --- the learning suite: every classic-control / Box2D set against RL Baselines3 Zoo ----
CLASSIC_ENVS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "LunarLander-v3",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
    "LunarLanderContinuous-v3",
)
# RL Baselines3 Zoo's published mean return (benchmark.md, mean of its runs) and the env
# steps it trained for, by (agent, env). Its LunarLander values are for v2; v3 fixes
# bugs in the same task.
RL_ZOO: Dict[Tuple[str, str], Tuple[float, int]] = {
    ("ppo", "CartPole-v1"): (500.0, 100_000),
    ("dqn", "CartPole-v1"): (500.0, 50_000),
    ("a2c", "CartPole-v1"): (500.0, 500_000),
    ("ppo", "Acrobot-v1"): (-73.5, 1_000_000),
    ("dqn", "Acrobot-v1"): (-76.6, 100_000),
    ("a2c", "Acrobot-v1"): (-83.4, 500_000),
    ("ppo", "MountainCar-v0"): (-110.4, 1_000_000),
    ("dqn", "MountainCar-v0"): (-100.8, 120_000),
    ("a2c", "MountainCar-v0"): (-111.3, 1_000_000),
    ("ppo", "LunarLander-v3"): (242.0, 1_000_000),
    ("dqn", "LunarLander-v3"): (154.0, 100_000),
    ("a2c", "LunarLander-v3"): (156.0, 200_000),
    ("ppo", "Pendulum-v1"): (-172.0, 100_000),
    ("a2c", "Pendulum-v1"): (-163.0, 1_000_000),
    ("sac", "Pendulum-v1"): (-157.0, 20_000),
    ("td3", "Pendulum-v1"): (-152.0, 20_000),
    ("ddpg", "Pendulum-v1"): (-152.0, 20_000),
    ("sac", "LunarLanderContinuous-v3"): (260.0, 500_000),
    ("td3", "LunarLanderContinuous-v3"): (208.0, 300_000),
    ("ddpg", "LunarLanderContinuous-v3"): (230.0, 300_000),
    ("ppo", "LunarLanderContinuous-v3"): (270.9, 1_000_000),
    ("td3", "MountainCarContinuous-v0"): (93.5, 300_000),
    ("ddpg", "MountainCarContinuous-v0"): (93.5, 300_000),
}


def classic_sets() -> List[Tuple[str, str, str, int]]:
    """(set, agent, env, train_steps) of every registered set on a classic env, by env.

    Bases and test fixtures (``*_base``, ``*_tiny``) are left out; a new set joins by
    being registered.
    """
    from rl import catalog, registry  # noqa: F401  (catalog: every set registered)

    found = []
    for name in registry.hparams.names():
        hp = registry.hparams.get(name)()
        if hp.env in CLASSIC_ENVS and not name.endswith(("_base", "_tiny")):
            found.append((name, hp.agent, hp.env, hp.train_steps))
    return sorted(found, key=lambda row: (CLASSIC_ENVS.index(row[2]), row[0]))


SUITE_HEADER = (
    f"{'set':<30} {'env':<25} {'steps':>9} {'runs':>4} {'IQM':>8} {'95% CI':>19} "
    f"{'RL-Zoo':>8} {'at steps':>9} {'wall s':>7}"
)


def suite_selection(only: Sequence[str]) -> List[Tuple[str, str, str, int]]:
    """The classic sets to train now: every one, or the --only ones (exit 2 for a name that
    is not a classic set)."""
    from rl.registry import did_you_mean

    sets = classic_sets()
    names = [name for name, _, _, _ in sets]
    for name in only:
        if name not in names:
            fail(
                f"--only {name}: not a set of the classic suite: {did_you_mean(name, names)}"
                f"valid: {', '.join(names)}"
            )
    return [row for row in sets if not only or row[0] in only]


def check_suite_folder(output_dir: str, selected: Sequence[str]) -> None:
    """Ends the process (exit 2) unless ``output_dir`` can take the suite: a folder (or
    none yet) whose set folders are folders and whose earlier results read."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        fail(f"--output_dir {output_dir} is a file; name a folder for the suite's runs")
    for name, agent, env, steps in classic_sets():
        set_dir = os.path.join(output_dir, name)
        if os.path.exists(set_dir) and not os.path.isdir(set_dir):
            fail(f"{set_dir} is a file; move it away, the runs of {name} go there")
        if name not in selected:
            suite_row(output_dir, name, agent, env, steps)  # reads, so damage shows now


def run_suite(
    output_dir: str, seeds: int, parallel: int, sets: Sequence[Tuple[str, str, str, int]]
) -> List[dict]:
    """Trains ``sets`` ``seeds`` times each (``--copies``), printing their rows; then
    writes the table and plots of every classic set with results in ``output_dir``.

    Each set's copies go to ``output_dir/<set>``; a rerun resumes or skips what is done,
    and a run of some sets (--only) keeps the others' rows in suite.md and the plots.

    Args:
      output_dir: where the runs, plots and suite.md go (an absolute path: train.py runs
        from ROOT).
      seeds: copies per set (seeds derived from the set's seed, as --copies does).
      parallel: copies trained at once (--copies_parallel).
      sets: (set, agent, env, train_steps) of the sets to train now.

    Returns:
      the rows of every set in suite.md.
    """
    print(SUITE_HEADER)
    print("-" * len(SUITE_HEADER))
    try:
        for name, agent, env, steps in sets:
            command = [
                sys.executable, TRAIN, "--hparams", name, "--copies", str(seeds),
                "--copies_parallel", str(parallel), "--output_dir", os.path.join(output_dir, name),
            ]  # fmt: skip
            timed_run(command)
            print(format_suite_row(suite_row(output_dir, name, agent, env, steps)), flush=True)
    finally:  # the sets done so far (and earlier) keep their rows if one fails
        rows = write_suite_files(output_dir)
    return rows


def suite_row(output_dir: str, name: str, agent: str, env: str, steps: int) -> Optional[dict]:
    """A set's row from its copies' summary.json and eval logs in ``output_dir/<name>``;
    None before its copies have all finished once. Unreadable results end the process."""
    set_dir = os.path.join(output_dir, name)
    from rl import analysis

    path = os.path.join(set_dir, analysis.SUMMARY_NAME)
    if not os.path.exists(path):
        return None
    try:
        summary = read_json_object(path)
        # The copies as this folder holds them (summary.json names them by the path given).
        run_dirs = [os.path.join(set_dir, os.path.basename(r["run_dir"])) for r in summary["runs"]]
        walls = [analysis.read_eval_log(d)[-1].get("wall_time") for d in run_dirs]
        iqm, ci = summary["final_return_iqm"], summary["final_return_iqm_ci"]
        finals = [r["final_return"] for r in summary["runs"]]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        fail(
            f"the results of {name} in {set_dir} cannot be read ({type(e).__name__}: {e}); "
            f"rerun it with --only {name} to rewrite them"
        )
    walls = [w for w in walls if w is not None]
    zoo_value, zoo_steps = RL_ZOO.get((agent, env), (None, None))
    return {
        "set": name, "agent": agent, "env": env, "steps": steps, "runs": len(run_dirs),
        "iqm": iqm, "ci": ci, "finals": finals, "rl_zoo": zoo_value, "rl_zoo_steps": zoo_steps,
        "wall_s": statistics.median(walls) if walls else None, "run_dirs": run_dirs,
    }  # fmt: skip


def format_suite_row(row: dict) -> str:
    """One printed line of the suite's table."""
    low, high = row["ci"]
    zoo_value, zoo_steps = row["rl_zoo"], row["rl_zoo_steps"]
    wall = f"{row['wall_s']:>7.0f}" if row["wall_s"] is not None else f"{'-':>7}"
    return (
        f"{row['set']:<30} {row['env']:<25} {row['steps']:>9,} {row['runs']:>4} "
        f"{row['iqm']:>8.1f} {f'[{low:.1f}, {high:.1f}]':>19} "
        f"{zoo_value if zoo_value is not None else '-':>8} "
        f"{f'{zoo_steps:,}' if zoo_steps else '-':>9} {wall}"
    )


def write_suite_files(output_dir: str) -> List[dict]:
    """suite.md and one curve plot per env (curves_<env>.png) of every classic set with
    results in ``output_dir``; returns their rows (nothing is written without one)."""
    from rl import analysis

    rows = [suite_row(output_dir, *found) for found in classic_sets()]
    rows = [row for row in rows if row is not None]
    if not rows:
        return rows
    for env in CLASSIC_ENVS:
        groups = {row["set"]: row["run_dirs"] for row in rows if row["env"] == env}
        if groups:
            analysis.plot_curves(groups, os.path.join(output_dir, f"curves_{env}.png"), env)
    write_text_atomic(os.path.join(output_dir, "suite.md"), suite_markdown(rows))
    return rows


def suite_markdown(rows: Sequence[dict]) -> str:
    """The suite's table in Markdown, for docs/benchmarks.md."""
    lines = [
        "| set | env | steps | runs | IQM [95% CI] | RL-Zoo (steps) | median wall s |",
        "|---|---|---:|---:|---|---|---:|",
    ]
    for row in rows:
        low, high = row["ci"]
        zoo = f"{row['rl_zoo']:g} ({row['rl_zoo_steps']:,})" if row["rl_zoo"] is not None else "-"
        wall = f"{row['wall_s']:.0f}" if row["wall_s"] is not None else "-"
        lines.append(
            f"| `{row['set']}` | {row['env']} | {row['steps']:,} | {row['runs']} | "
            f"{row['iqm']:.1f} [{low:.1f}, {high:.1f}] | {zoo} | {wall} |"
        )
    return "\n".join(lines) + "\n"


def tree_rss_bytes(root: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc)."""
    parents: Dict[int, int] = {}
    rss: Dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
        rss[int(entry)] = pages * os.sysconf("SC_PAGE_SIZE")
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(rss.get(pid, 0) for pid in tree)


def run_with_peak_memory(command: List[str]) -> Tuple[float, str, int]:
    """Runs a command; returns wall time, stdout and the peak RSS of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_bytes(proc.pid))
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise ChildFailed(command, proc.returncode, stderr.decode(errors="replace"))
    return time.perf_counter() - start, stdout.decode(), peak


def second_half_rate(run_dir: str) -> Optional[float]:
    """Env steps/s over a run's second half, from the times of its own update records.

    The run's reported rate counts from the start of training, so worker start-up
    and the first update's compile weigh on short runs; this is the steady rate.
    None when fewer than two updates were logged in the second half.
    """
    from rl._tf import import_tensorflow_quietly
    from rl.logbook import committed_event_files, scalar_events

    import_tensorflow_quietly()  # TensorBoard's event reader loads it, with start-up lines
    records = sorted(
        (step, millis)
        for _, path in committed_event_files(os.path.join(run_dir, "tb"))
        for tag, step, _, millis in scalar_events(path)
        if tag == "train/steps_per_second"
    )
    if not records:
        return None
    half = records[-1][0] / 2
    later = [(step, millis) for step, millis in records if step >= half]
    if len(later) < 2 or later[-1][1] <= later[0][1]:
        return None
    return (later[-1][0] - later[0][0]) / ((later[-1][1] - later[0][1]) / 1000)


# Throughput with actor processes: (env, hparams, train.py flags, worker counts).
WORKER_CASES = (
    ("slow_cartpole", "impala_cartpole", (0, 1, 2, 4, 8)),
    ("CartPole-v1", "impala_cartpole", (0, 1, 2)),
    ("LunarLander-v3", "impala_cartpole", (0, 1, 2)),
)
WORKER_OVERRIDES = "num_envs=8,rollout_steps=25,eval_episodes=0,checkpoint_interval=1000000"


def run_workers_table(train_steps: int, ray: bool) -> List[dict]:
    """Env steps/s against --num_workers, with peak memory; Ray beside processes if asked."""
    header = (
        f"{'env':<15} {'sys':<6} {'workers':>7} {'steps':>7} {'wall s':>7} "
        f"{'steps/s':>8} {'x N=1':>6} {'2nd half':>8} {'x N=1':>6} {'peak RSS MB':>11}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as tmp:
        for env, hparams, counts in WORKER_CASES:
            systems = ("local", "ray") if ray and env == "slow_cartpole" else ("local",)
            base = steady_base = None  # one local worker's rates: Ray's rows compare to them too
            for sys_name in systems:
                for n in counts:
                    if sys_name == "ray" and n not in (2, 8):
                        continue
                    out = os.path.join(tmp, f"{env}-{sys_name}-{n}")
                    command = [
                        sys.executable, TRAIN, "--hparams", hparams, "--env", env,
                        "--sys", sys_name, "--num_workers", str(n), "--output_dir", out,
                        "--train_steps", str(train_steps), "--hparam_override", WORKER_OVERRIDES,
                    ]  # fmt: skip
                    wall, stdout, peak = run_with_peak_memory(command)
                    result = last_json_line(stdout)
                    rate = float(result["steps_per_second"])
                    steady = second_half_rate(out)
                    if n == 1 and sys_name == "local":
                        base, steady_base = rate, steady
                    rows.append(
                        {"env": env, "sys": sys_name, "workers": n, "steps": result["step"],
                         "wall_s": wall, "steps_per_s": rate, "second_half_steps_per_s": steady,
                         "peak_rss_bytes": peak}
                    )  # fmt: skip
                    ratio = f"{rate / base:6.2f}" if base else f"{'-':>6}"
                    steady_text = f"{steady:8.0f}" if steady else f"{'-':>8}"
                    steady_ratio = (
                        f"{steady / steady_base:6.2f}" if steady and steady_base else f"{'-':>6}"
                    )
                    print(
                        f"{env:<15} {sys_name:<6} {n:>7} {result['step']:>7} {wall:>7.1f} "
                        f"{rate:>8.0f} {ratio} {steady_text} {steady_ratio} "
                        f"{peak / 2**20:>11.0f}",
                        flush=True,
                    )
    return rows


REMOTE_ENV = "CartPole-v1"
REMOTE_BATCHES = (1, 8, 64)  # env copies stepped per call
REMOTE_TRAIN_SET, REMOTE_TRAIN_ENVS = "ppo_cartpole", 16


def vector_steps_per_second(envs, calls: int, seed: int = 0) -> Tuple[float, float]:
    """(env steps/s, median ms per call) of ``envs.step`` with uniformly random actions.

    Args:
      envs: a vector env (local or remote).
      calls: timed step calls (after 20 untimed ones).
      seed: for the env and the actions.
    """
    import numpy as np

    envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, size=(calls + 20, envs.num_envs))
    step = iter(actions)
    start = time.perf_counter()
    ms = per_call_ms(lambda: envs.step(next(step)), calls)
    elapsed = time.perf_counter() - start
    return envs.num_envs * (calls + 20) / elapsed, ms


def run_remote_table(calls: int) -> List[dict]:
    """CartPole env steps/s per call size, in-process against gRPC (unary and streaming) to
    a server process on loopback; then PPO training throughput both ways."""
    from rl.envs import make_vec_env
    from rl.envs.remote.client import RemoteVectorEnv
    from rl.envs.remote.serve import launch

    server, port = launch(REMOTE_ENV)
    url = f"grpc://127.0.0.1:{port}/{REMOTE_ENV}"
    rows = []
    try:
        header = (
            f"{'envs/call':>9} {'transport':<12} {'env steps/s':>11} {'ms/call':>8} {'x local':>8}"
        )
        print(header)
        print("-" * len(header))
        for n in REMOTE_BATCHES:
            local = None
            for transport in ("in-process", "grpc unary", "grpc stream"):
                if transport == "in-process":
                    envs = make_vec_env(REMOTE_ENV, n)
                else:
                    envs = RemoteVectorEnv(url, n, stream=transport == "grpc stream")
                try:
                    rate, ms = vector_steps_per_second(envs, calls)
                finally:
                    envs.close()
                local = rate if local is None else local
                rows.append(
                    {
                        "envs_per_call": n,
                        "transport": transport,
                        "steps_per_s": rate,
                        "ms_per_call": ms,
                    }
                )
                print(
                    f"{n:>9} {transport:<12} {rate:>11.0f} {ms:>8.3f} {rate / local:>8.2f}",
                    flush=True,
                )
        print()
        header = f"{'training':<40} {'env':<8} {'wall s':>7} {'steps/s':>8} {'x local':>8}"
        print(header)
        print("-" * len(header))
        local = None
        with tempfile.TemporaryDirectory(prefix="rl-bench-") as tmp:
            for where, env in (("in-process", REMOTE_ENV), ("grpc", url)):
                command = [
                    sys.executable, TRAIN, "--hparams", REMOTE_TRAIN_SET, "--env", env,
                    "--hparam_override", f"num_envs={REMOTE_TRAIN_ENVS}",
                    "--output_dir", os.path.join(tmp, where),
                ]  # fmt: skip
                wall, stdout = timed_run(command)
                rate = float(last_json_line(stdout)["steps_per_second"])
                local = rate if local is None else local
                name = f"{REMOTE_TRAIN_SET} num_envs={REMOTE_TRAIN_ENVS}"
                rows.append({"training": name, "env": where, "wall_s": wall, "steps_per_s": rate})
                print(
                    f"{name:<40} {where:<8} {wall:>7.1f} {rate:>8.0f} {rate / local:>8.2f}",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait()
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = command_line.OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--hparams", nargs="+", default=["ppo_cartpole", "dqn_cartpole"])
    parser.add_argument(
        "--seeds", nargs="+", type=int_at_least(0), default=[0], help="without --peer"
    )
    parser.add_argument(
        "--train_steps",
        type=int_at_least(1),
        default=None,
        help="env steps of each rl run (default: the set's own; with --workers 20,000)",
    )
    parser.add_argument(
        "--target", type=float, default=475.0, help="evaluation return counted as solved"
    )
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument(
        "--peer", action="store_true", help="alternate runs with Stable-Baselines3 (PPO, DQN, SAC)"
    )
    parser.add_argument(
        "--pairs", type=int, default=3, help="with --peer: rl/peer runs per set (seeds 0..N-1)"
    )
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="another rl checkout (a git worktree of an earlier commit) whose train.py also "
        "runs each set and seed (with --peer: each pair), so a change's speed is measured "
        "on one host in one run",
    )
    parser.add_argument(
        "--workers",
        action="store_true",
        help="env steps/s and peak memory against --num_workers (slow, CPU-bound envs)",
    )
    parser.add_argument(
        "--ray", action="store_true", help="with --workers: Ray actors beside processes"
    )
    parser.add_argument(
        "--suite",
        choices=("classic",),
        help="train every classic-control/Box2D set over --suite_seeds seeds; IQM beside RL-Zoo",
    )
    parser.add_argument(
        "--suite_seeds",
        type=int_at_least(2),  # a row is over train.py --copies, which needs 2 or more
        default=3,
        help="with --suite: runs per set (copies, at least 2)",
    )
    parser.add_argument(
        "--suite_parallel",
        type=int_at_least(1),
        default=os.cpu_count() or 1,
        help="with --suite: at once",
    )
    parser.add_argument(
        "--output_dir", default="runs/suite", help="with --suite: where runs and plots go"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        help="with --suite: just these sets (suite.md and the plots keep the other sets' rows)",
    )
    parser.add_argument(
        "--remote",
        action="store_true",
        help="env steps/s over gRPC (unary, streaming) against in-process, and PPO throughput",
    )
    parser.add_argument(
        "--calls", type=int_at_least(1), default=3000, help="with --remote: steps per row"
    )
    # The processes this script starts for the peer and the per-call costs.
    parser.add_argument("--_peer_run", nargs=3, metavar="SET_SEED_STEPS", help=argparse.SUPPRESS)
    parser.add_argument(
        "--peer_checkpoints",
        help="with --_peer_run: save the peer into this folder and resume it from there "
        "(runs of hours that outlive a session); the folder is tied to the set, seed and "
        f"steps of its first run ({PEER_MANIFEST})",
    )
    parser.add_argument(
        "--peer_checkpoint_steps",
        type=int_at_least(1),
        default=PEER_CHECKPOINT_STEPS,
        help="with --peer_checkpoints: env steps between saves",
    )
    parser.add_argument("--_costs", action="store_true", help=argparse.SUPPRESS)
    return parser


# The flags each mode reads ("table": the rl-only table, no mode flag); a flag given to a
# mode that does not read it is refused rather than dropped.
MODE_FLAGS: Dict[str, Tuple[str, ...]] = {
    "table": ("hparams", "seeds", "train_steps", "target", "json", "baseline"),
    "peer": ("hparams", "pairs", "train_steps", "json", "baseline"),
    "suite": ("only", "suite_seeds", "suite_parallel", "output_dir", "json"),
    "workers": ("ray", "train_steps", "json"),
    "remote": ("calls", "json"),
    "_peer_run": ("peer_checkpoints", "peer_checkpoint_steps"),
    "_costs": (),
}
# Modes whose rl runs get the flags benchmark.py does not know (they go to train.py).
MODES_PASSING_FLAGS = ("table", "peer")
# The train.py flags those modes pass on; it sets --hparams, --seed, --output_dir and
# --train_steps itself, and the others (--copies, --training, ...) make no benchmark.
TRAIN_FLAGS_PASSED = (
    "sys", "ray_address", "tpu", "cpu_replicas", "hparam_override", "env", "plugins",
    "eval_episodes", "num_workers", "worker_restarts", "worker_restart_window",
    "record_video", "tracking", "tracking_uri", "tracking_experiment",
)  # fmt: skip


def mode_name(mode: str) -> str:
    return "the rl-only table (no mode flag)" if mode == "table" else f"--{mode}"


def given_flags(argv: List[str]) -> List[str]:
    """The flags (argparse dests) on the command line, whether or not at their defaults."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS  # so only the flags given are set
    given, _ = parser.parse_known_args(argv)
    return sorted(vars(given))


def chosen_mode(given: Sequence[str]) -> str:
    """The one mode asked for (exit 2 for two), "table" for none."""
    modes = [mode for mode in MODE_FLAGS if mode in given]
    if len(modes) > 1:
        fail(f"{' and '.join(f'--{m}' for m in modes)} are separate modes; give one of them")
    return modes[0] if modes else "table"


def check_mode_flags(mode: str, given: Sequence[str], extra: List[str]) -> None:
    """Ends the process (exit 2) for a flag ``mode`` does not read, naming the mode that does."""
    for flag in given:
        if flag in MODE_FLAGS or flag in MODE_FLAGS[mode]:
            continue
        readers = [mode_name(m) for m in MODE_FLAGS if flag in MODE_FLAGS[m]]
        fail(f"--{flag} is for {' or '.join(readers)}, not {mode_name(mode)}; remove it")
    if extra and mode not in MODES_PASSING_FLAGS:
        fail(
            f"unrecognized arguments: {' '.join(extra)} ({mode_name(mode)} passes no flags on "
            "to train.py; see --help)"
        )


def parse_train_flags(extra: List[str]) -> Dict[str, object]:
    """The values of the train.py flags in ``extra``, parsed by train.py's own parser;
    a flag it does not know or does not take, or a bad value, ends the process (exit 2)."""
    from absl import flags

    from rl import cli

    passed = ", ".join(f"--{name}" for name in TRAIN_FLAGS_PASSED)
    if "hparams" not in cli.FLAGS:
        cli.define_flags()
    cli.FLAGS.unparse_flags()  # values of an earlier parse in this process would count
    try:
        rest = cli.FLAGS([TRAIN, *extra])
        given = sorted({cli.FLAGS[name].name for name in cli.FLAGS if cli.FLAGS[name].present})
        values = {name: cli.FLAGS[name].value for name in TRAIN_FLAGS_PASSED}
    except flags.Error as e:
        fail(f"{cli.flag_error_message(e)} (the train.py flags passed on are {passed})")
    finally:
        cli.FLAGS.unparse_flags()
    if rest[1:]:
        fail(f"unexpected arguments {' '.join(rest[1:])!r}; flags look like --name=value")
    for name in given:
        if name not in TRAIN_FLAGS_PASSED:
            fail(f"--{name} is not passed on to train.py; the flags passed on are {passed}")
    return values


def check_rl_sets(
    names: Sequence[str],
    seeds: Sequence[int],
    train_steps: Optional[int],
    train_flags: Dict[str, object],
) -> None:
    """Ends the process (exit 2) unless each set, with each seed and the train.py flags,
    resolves to valid hparams (an unknown set names the registered ones)."""
    from rl import (
        catalog,  # noqa: F401  (fills the registries)
        plugins,
    )
    from rl.errors import USER_ERRORS, PluginError
    from rl.hparams.resolve import resolve_hparams

    try:
        plugins.load(train_flags["plugins"])  # they may register the sets
        for name in names:
            for seed in seeds:
                resolve_hparams(
                    name,
                    train_flags["hparam_override"],
                    env=train_flags["env"],
                    seed=seed,
                    train_steps=train_steps,
                    eval_episodes=train_flags["eval_episodes"],
                )
    except USER_ERRORS + (PluginError,) as e:
        fail(str(e))


def check_json_path(path: Optional[str]) -> None:
    """Ends the process (exit 2) unless --json names a file that can be written."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        fail(f"--json {path} is a folder; name a file, e.g. {os.path.join(path, 'bench.json')}")
    if not os.path.isdir(folder):
        fail(f"--json {path}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK):
        fail(f"--json {path}: the folder {folder} is not writable")


def peer_run_args(values: List[str]) -> Tuple[str, int, int]:
    """(set, seed, steps) of --_peer_run SET SEED STEPS; bad ones end the process (exit 2)."""
    name, seed, steps = values
    if name not in PEERS:
        fail(f"--_peer_run has no peer for {name!r}: valid: {', '.join(PEERS)}")
    numbers = []
    for what, text, low in (("SEED", seed, 0), ("STEPS", steps, 1)):
        try:
            numbers.append(int_at_least(low)(text))
        except argparse.ArgumentTypeError as e:
            fail(f"--_peer_run {what} {e}")
    return name, numbers[0], numbers[1]


def checked_baseline(folder: Optional[str]) -> Optional[str]:
    """The absolute path of --baseline, an rl checkout other than this one; anything else
    ends the process (exit 2)."""
    if folder is None:
        return None
    how = "e.g. git worktree add ../rl-base REV, then --baseline ../rl-base"
    if not os.path.isdir(folder):
        fail(f"--baseline {folder} is not a folder; give another rl checkout ({how})")
    path = os.path.abspath(folder)
    missing = [
        name for name in ("train.py", os.path.join("rl", "__init__.py"))
        if not os.path.isfile(os.path.join(path, name))
    ]  # fmt: skip
    if missing:
        fail(
            f"--baseline {folder} is not an rl checkout (no {' or '.join(missing)}); "
            f"give one ({how})"
        )
    if os.path.realpath(path) == os.path.realpath(ROOT):
        fail(f"--baseline {folder} is this checkout; give another one ({how})")
    return path


def check_peer_checkpoints(folder: Optional[str]) -> None:
    """Ends the process (exit 2) if --peer_checkpoints names something other than a folder."""
    if folder is not None and os.path.exists(folder) and not os.path.isdir(folder):
        fail(f"--peer_checkpoints {folder} is a file; name a folder for the peer's saves")


def run_peer_process(args: argparse.Namespace) -> int:
    """--_peer_run: one peer run in this process, its result as a JSON line."""
    name, seed, steps = peer_run_args(args._peer_run)
    check_peer_checkpoints(args.peer_checkpoints)
    missing = missing_modules(PEER_MODULES)
    if missing:
        fail(f'--_peer_run needs {", ".join(missing)}: pip install -e ".[bench]"')
    result = peer_run(name, seed, steps, args.peer_checkpoints, args.peer_checkpoint_steps)
    print(json.dumps(result))
    return 0


def prepare_mode(mode: str, args: argparse.Namespace, extra: List[str]) -> Callable[[], object]:
    """Checks the inputs of ``mode`` (exit 2 on a bad one) before any slow work; returns
    the run of the mode, which gives the report."""
    check_json_path(args.json)
    if mode == "suite":
        output_dir = os.path.abspath(args.output_dir)  # train.py runs from ROOT
        sets = suite_selection(args.only)
        check_suite_folder(output_dir, [name for name, _, _, _ in sets])
        return lambda: run_suite(output_dir, args.suite_seeds, args.suite_parallel, sets)
    if mode == "remote":
        return lambda: run_remote_table(args.calls)
    if mode == "workers":
        train_steps = 20_000 if args.train_steps is None else args.train_steps
        return lambda: run_workers_table(train_steps, args.ray)
    train_flags = parse_train_flags(extra)
    baseline = checked_baseline(args.baseline)
    if mode == "peer":
        error = peer_error(args.hparams, args.pairs)
        if error:
            fail(error)
        check_rl_sets(args.hparams, range(args.pairs), args.train_steps, train_flags)
        return lambda: run_peer_report(args.hparams, args.pairs, args.train_steps, extra, baseline)
    check_rl_sets(args.hparams, args.seeds, args.train_steps, train_flags)
    return lambda: run_table(
        args.hparams, args.seeds, args.train_steps, args.target, extra, baseline
    )


def run_peer_report(
    hparams: Sequence[str],
    pairs: int,
    train_steps: Optional[int],
    extra: List[str],
    baseline: Optional[str] = None,
) -> Dict[str, object]:
    """--peer: the side-by-side table as the --json report."""
    with tempfile.TemporaryDirectory(prefix="rl-bench-") as tmp:
        costs, rows, summaries = run_peer_table(hparams, pairs, train_steps, extra, tmp, baseline)
    report = {"costs_ms": costs, "rows": rows, "summaries": summaries}
    return {**report, "baseline": baseline} if baseline else report


def report_child_failure(error: ChildFailed) -> int:
    """A failed child: its one-line bad-input error (exit 2) becomes this script's one line;
    anything else shows the end of its output and exit code 1. The rows measured before
    it are already printed (and the suite's files written)."""
    lines = [line for line in error.stderr.splitlines() if line.strip()]
    command = describe_command(error.command)
    if error.code == 2 and lines:
        message = re.sub(r"^[\w.]+: error: ", "", lines[-1])  # the child's own prefix
        fail(f"{command}: {message}")
    print("\n".join(lines[-20:]), file=sys.stderr)
    print(
        f"{PROG}: {command} failed with exit code {error.code} (the end of its output above); "
        "the rows measured before it are printed above",
        file=sys.stderr,
    )
    return 1


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args, extra = build_parser().parse_known_args(argv)
    given = given_flags(argv)
    mode = chosen_mode(given)
    check_mode_flags(mode, given, extra)
    if mode == "_peer_run":
        return run_peer_process(args)
    if mode == "_costs":
        print(json.dumps(machine_costs(COST_CALLS)))
        return 0
    run_mode = prepare_mode(mode, args, extra)
    try:
        if mode in ("suite", "remote", "workers"):
            print_machine_costs()
        report = run_mode()
    except ChildFailed as e:
        return report_child_failure(e)
    if args.json:
        write_text_atomic(args.json, json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
