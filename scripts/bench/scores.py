"""What a return means on each classic env: the threshold that counts as solved, the return
of random play, returns normalised between random play and RL Baselines3 Zoo's, and the
statistics over seeds that rliable computes (the probability of improvement, the
performance profile). The IQM and its interval are rl.analysis's, which uses rliable too.
"""

from __future__ import annotations

import glob
import io
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from rl.files import read_json_object, write_bytes_atomic

if TYPE_CHECKING:
    import numpy as np

# NumPy, rl.analysis and rliable are imported where used: the peer and cost processes
# (this same script) must not pay for them in their wall time.

# The solved threshold of each classic env: Gymnasium's spec.reward_threshold where the env
# has one (CartPole-v1 475, Acrobot-v1 -100, MountainCar-v0 -110, MountainCarContinuous-v0
# 90, LunarLander(Continuous)-v3 200; solved_threshold reads it from the spec). Pendulum-v1
# has none: -200 is chosen, a mean return over an evaluation's episodes (random starts)
# that an agent reaches only by swinging the pendulum up and holding it upright in
# nearly every episode: about 30 below RL-Zoo's agents (-152 to -172) and far above random
# play (-1197).
CHOSEN_THRESHOLDS: Dict[str, float] = {"Pendulum-v1": -200.0}

# The mean return of uniformly random actions on each classic env, over 100 episodes with
# seeds 0..99 (the action space seeded with the episode's seed). Reproduce with
#   python -c "from scripts.bench import scores; print(scores.measure_random_returns())"
RANDOM_RETURNS: Dict[str, float] = {
    "CartPole-v1": 25.0,
    "Acrobot-v1": -500.0,
    "MountainCar-v0": -200.0,
    "LunarLander-v3": -191.0,
    "Pendulum-v1": -1197.2,
    "MountainCarContinuous-v0": -33.3,
    "LunarLanderContinuous-v3": -206.7,
}
RANDOM_EPISODES = 100
# Thresholds of the performance profile, in normalised return (0: random play, 1: RL-Zoo):
# from, to, points.
PROFILE_TAUS = (-0.25, 1.5, 71)


def measure_random_returns(
    envs: Sequence[str] = tuple(RANDOM_RETURNS), episodes: int = RANDOM_EPISODES
) -> Dict[str, float]:
    """The mean return of uniformly random actions per env, over ``episodes`` episodes
    with seeds 0, 1, ... (the numbers of RANDOM_RETURNS).

    Args:
      envs: Gymnasium ids.
      episodes: episodes per env.
    """
    import gymnasium as gym  # late: Gymnasium, for this measurement only
    import numpy as np

    means = {}
    for env_id in envs:
        env = gym.make(env_id)
        totals = []
        for seed in range(episodes):
            env.reset(seed=seed)
            env.action_space.seed(seed)
            total, done = 0.0, False
            while not done:
                _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                total += float(reward)
                done = terminated or truncated
            totals.append(total)
        env.close()
        means[env_id] = round(float(np.mean(totals)), 1)
    return means


def solved_threshold(env_id: str) -> Optional[float]:
    """The return counted as solved on ``env_id``: Gymnasium's reward_threshold, else the
    one chosen here (CHOSEN_THRESHOLDS); None for an env with neither."""
    if env_id in CHOSEN_THRESHOLDS:
        return CHOSEN_THRESHOLDS[env_id]
    import gymnasium as gym  # late: Gymnasium, whose registry holds the thresholds

    try:
        threshold = gym.spec(env_id).reward_threshold
    except gym.error.Error:  # not a Gymnasium id (a game of rl, a remote env)
        return None
    return None if threshold is None else float(threshold)


def solved_fraction(returns: Sequence[float], threshold: float) -> float:
    """The fraction of ``returns`` (one per seed) at or above ``threshold``.

    Args:
      returns: one final return per seed, at least one.
      threshold: the return counted as solved.
    """
    import numpy as np

    if len(returns) == 0:
        raise ValueError("solved_fraction needs at least one return")
    return float(np.mean(np.asarray(returns, dtype=np.float64) >= threshold))


def normalised(returns: Sequence[float], random: float, reference: float) -> np.ndarray:
    """``returns`` rescaled so random play scores 0 and ``reference`` (RL-Zoo's) 1.

    Args:
      returns: returns on one env.
      random: that env's random-play return.
      reference: that env's reference return; not equal to ``random``.
    """
    import numpy as np

    if reference == random:
        raise ValueError(f"the reference return {reference} equals random play's")
    return (np.asarray(returns, dtype=np.float64) - random) / (reference - random)


def probability_of_improvement(
    before: Sequence[float], after: Sequence[float], reps: Optional[int] = None
) -> Tuple[float, Tuple[float, float]]:
    """The probability that a run of ``after`` scores above a run of ``before`` (ties count
    half), with its 95% stratified bootstrap interval (rliable).

    Args:
      before: one return per seed of the first result (A).
      after: one return per seed of the second (B).
      reps: bootstrap resamples (None: rl.analysis.BOOTSTRAP_REPS).

    Returns:
      (P(B > A), (low, high)).
    """
    import numpy as np
    from rliable import library, metrics  # rliable loads arch and pandas (~1 s)

    from rl import analysis  # heavy, see the top

    a = np.asarray(after, dtype=np.float64).reshape(-1, 1)
    b = np.asarray(before, dtype=np.float64).reshape(-1, 1)
    if a.size == 0 or b.size == 0:
        raise ValueError("the probability of improvement needs a return on each side")
    with analysis.seeded_numpy(analysis.BOOTSTRAP_SEED):
        points, intervals = library.get_interval_estimates(
            {"poi": [a, b]},
            lambda x, y: np.array([metrics.probability_of_improvement(x, y)]),
            reps=reps or analysis.BOOTSTRAP_REPS,
        )
    low, high = intervals["poi"][:, 0]
    return float(points["poi"][0]), (float(low), float(high))


def plot_performance_profile(
    curves: Dict[str, np.ndarray], path: str, reps: Optional[int] = None
) -> None:
    """Draws the performance profile (the fraction of runs above each normalised return,
    with 95% bands; rliable) of each curve into the PNG at ``path``.

    Args:
      curves: label -> [runs, cells] normalised returns.
      path: the image file, written atomically.
      reps: bootstrap resamples (None: rl.analysis.BOOTSTRAP_REPS).
    """
    import numpy as np

    # Matplotlib, drawn through the Agg canvas with no display; rliable loads arch and
    # pandas (~1 s) and its plot_utils pyplot and seaborn.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from rliable import library, plot_utils

    from rl import analysis  # heavy, see the top

    taus = np.linspace(*PROFILE_TAUS)
    with analysis.seeded_numpy(analysis.BOOTSTRAP_SEED):
        profiles, bands = library.create_performance_profile(
            curves, taus, reps=reps or analysis.BOOTSTRAP_REPS
        )
    figure = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    plot_utils.plot_performance_profiles(
        profiles,
        taus,
        performance_profile_cis=bands,
        xlabel="normalised final return τ (0: random play, 1: RL-Zoo)",
        ylabel="fraction of runs with return > τ",
        ax=axes,
    )
    axes.legend(fontsize="small")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    write_bytes_atomic(path, buffer.getvalue())


def cell_statistics(
    finals: Sequence[float],
    bests: Optional[Sequence[float]],
    threshold: Optional[float],
    peer: Optional[dict] = None,
) -> Dict[str, object]:
    """The statistics a result file records for one cell (a set on its env), from its
    per-seed returns: the final return's IQM with its 95% stratified bootstrap interval,
    the best evaluation's likewise, the fraction of seeds at or above the solved
    threshold and, with a peer's runs, the peer's IQM and the probability that rl
    improves on it.

    Args:
      finals: each seed's final return, at least one.
      bests: each seed's best evaluation return (None: not recorded).
      threshold: the solved threshold (None: the env has none).
      peer: the peer's summary ({"final_returns": [...], ...}), if it ran.
    """
    import numpy as np

    from rl import analysis  # heavy, see the top

    iqm, ci = analysis.iqm_with_ci(np.asarray(finals, dtype=np.float64))
    stats: Dict[str, object] = {"iqm": iqm, "ci95": list(ci)}
    if bests is not None:
        best_iqm, best_ci = analysis.iqm_with_ci(np.asarray(bests, dtype=np.float64))
        stats.update(best_iqm=best_iqm, best_ci95=list(best_ci))
    if threshold is not None:
        stats["solved_fraction"] = solved_fraction(finals, threshold)
    if peer is not None:
        peer_iqm, peer_ci = analysis.iqm_with_ci(np.asarray(peer["final_returns"], np.float64))
        poi, poi_ci = probability_of_improvement(peer["final_returns"], finals)
        stats.update(
            peer_iqm=peer_iqm,
            peer_ci95=list(peer_ci),
            poi_vs_peer=poi,
            poi_vs_peer_ci95=list(poi_ci),
        )
    return stats


def read_results(folder: str) -> List[Dict[str, object]]:
    """Every result file (``<set>.json``) in ``folder``, by name; each keeps its file name
    as ``"file"``.

    Raises:
      OSError or ValueError: a file that cannot be read or is no JSON object (the message
        names it).
    """
    results = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        result = read_json_object(path)
        result["file"] = os.path.basename(path)
        results.append(result)
    return results


def profile_curves(results: Sequence[Dict[str, object]]) -> Dict[str, np.ndarray]:
    """The performance profile's input: per agent, the [seeds, cells] normalised final
    returns of its cells with per-seed returns, an RL-Zoo value and a random-play return.

    rliable needs as many seeds in every cell of a curve: each agent's curve takes the
    first n seeds (copy order) of each of its cells, n the fewest any of them has; its
    label says how many cells and seeds.
    """
    import numpy as np

    cells: Dict[str, List[np.ndarray]] = {}
    for r in results:
        peer, env = r.get("peer") or {}, r.get("env")
        reference = peer.get("value") if peer.get("name") == "RL-Zoo" else None
        if not r.get("final_returns") or env not in RANDOM_RETURNS or reference is None:
            continue
        cells.setdefault(str(r["algorithm"]), []).append(
            normalised(r["final_returns"], RANDOM_RETURNS[env], reference)
        )
    curves = {}
    for agent, columns in sorted(cells.items()):
        n = min(len(c) for c in columns)
        cells_text = f"{len(columns)} cell" + ("s" if len(columns) > 1 else "")
        curves[f"{agent} ({cells_text}, {n} seeds)"] = np.stack([c[:n] for c in columns], axis=1)
    return curves
