"""Per-call costs of this machine: a compiled TensorFlow call, a NumPy MLP forward and a
CartPole step, measured in a child process and printed above the tables, so that numbers
from hosts of other speeds can be read side by side."""

import itertools
import statistics
import time
from typing import Callable, Dict

from scripts.bench import children

# Timed calls of each cost in the --_costs child.
COST_CALLS = 2000
# MLP of the per-call costs: CartPole observations [16, 4] -> 64 -> 64 (tanh) -> 2.
COST_BATCH, COST_LAYERS = 16, (4, 64, 64, 2)


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
    # Loaded in the --_costs child only (its own process, so no table pays for them).
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
    _, stdout = children.timed_run(children.benchmark_command("--_costs"))
    costs = children.last_json_line(stdout)
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
