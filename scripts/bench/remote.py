"""Remote envs: CartPole env steps/s per call size in this process against gRPC (unary and
streaming) to a server process on loopback, then PPO's training throughput both ways."""

import os
import time
from typing import List, Tuple

from scripts.bench import children, columns, costs

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
    import numpy as np  # loaded when the mode runs, as every heavy module here

    envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, size=(calls + 20, envs.num_envs))
    step = iter(actions)
    start = time.perf_counter()
    ms = costs.per_call_ms(lambda: envs.step(next(step)), calls)
    elapsed = time.perf_counter() - start
    return envs.num_envs * (calls + 20) / elapsed, ms


def run_remote_table(calls: int) -> List[dict]:
    """CartPole env steps/s per call size, in-process against gRPC (unary and streaming) to
    a server process on loopback; then PPO training throughput both ways."""
    # Imported here: rl.envs loads NumPy and Gymnasium, and the client gRPC, which the peer
    # and cost processes (this same script) must not pay for.
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
        columns.print_header(header)
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
        columns.print_header(header)
        local = None
        with children.scratch_folder() as tmp:
            for where, env in (("in-process", REMOTE_ENV), ("grpc", url)):
                command = children.train_command(
                    "--hparams", REMOTE_TRAIN_SET, "--env", env,
                    "--hparam_override", f"num_envs={REMOTE_TRAIN_ENVS}",
                    "--output_dir", os.path.join(tmp, where),
                )  # fmt: skip
                wall, stdout = children.timed_run(command)
                rate = float(children.last_json_line(stdout)["steps_per_second"])
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
