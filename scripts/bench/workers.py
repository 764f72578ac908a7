"""Throughput with actor processes: env steps/s and peak memory of train.py against
--num_workers, on a slow (CPU-bound) env and two real ones; Ray actors beside processes."""

import os
from typing import List, Optional

from scripts.bench import children, columns


def second_half_rate(run_dir: str) -> Optional[float]:
    """Env steps/s over a run's second half, from the times of its own update records.

    The run's reported rate counts from the start of training, so worker start-up
    and the first update's compile weigh on short runs; this is the steady rate.
    None when fewer than two updates were logged in the second half.
    """
    # Imported here: rl.logbook loads NumPy, which the peer and cost processes (this same
    # script) must not pay for.
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


# Throughput with actor processes: (env, hparams, worker counts).
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
    columns.print_header(header)
    rows = []
    with children.scratch_folder() as tmp:
        for env, hparams, counts in WORKER_CASES:
            systems = ("local", "ray") if ray and env == "slow_cartpole" else ("local",)
            base = steady_base = None  # one local worker's rates: Ray's rows compare to them too
            for sys_name in systems:
                for n in counts:
                    if sys_name == "ray" and n not in (2, 8):
                        continue
                    out = os.path.join(tmp, f"{env}-{sys_name}-{n}")
                    command = children.train_command(
                        "--hparams", hparams, "--env", env,
                        "--sys", sys_name, "--num_workers", str(n), "--output_dir", out,
                        "--train_steps", str(train_steps), "--hparam_override", WORKER_OVERRIDES,
                    )  # fmt: skip
                    wall, stdout, peak = children.run_with_peak_memory(command)
                    result = children.last_json_line(stdout)
                    rate = float(result["steps_per_second"])
                    steady = second_half_rate(out)
                    if n == 1 and sys_name == "local":
                        base, steady_base = rate, steady
                    rows.append(
                        {"env": env, "sys": sys_name, "workers": n, "steps": result["step"],
                         "wall_s": wall, "steps_per_s": rate, "second_half_steps_per_s": steady,
                         "peak_rss_bytes": peak}
                    )  # fmt: skip
                    ratio = columns.cell(rate / base if base else None, 6, ".2f")
                    steady_text = columns.cell(steady or None, 8, ".0f")
                    steady_ratio = columns.cell(
                        steady / steady_base if steady and steady_base else None, 6, ".2f"
                    )
                    print(
                        f"{env:<15} {sys_name:<6} {n:>7} {result['step']:>7} {wall:>7.1f} "
                        f"{rate:>8.0f} {ratio} {steady_text} {steady_ratio} "
                        f"{peak / 2**20:>11.0f}",
                        flush=True,
                    )
    return rows
