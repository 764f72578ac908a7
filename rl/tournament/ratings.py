"""The maths of a tournament: score tables, Bradley-Terry Elo, bootstrap intervals, Nash.

Pure NumPy/SciPy functions of small arrays; players are indices 0..P-1.

- **Scores.** A win scores 1, a draw 0.5, a loss 0. ``wins[i, j]`` counts the games
  i won against j, ``draws`` is symmetric.
- **Bradley-Terry** (Bradley & Terry 1952; Hunter 2004): P(i beats j) =
  sigmoid(s_i - s_j). The strengths maximise the likelihood of the scores (a draw
  is half a win each way) plus a tiny Gaussian prior ``-prior/2 * |s|^2``, which
  keeps them finite when a player wins every game and, because the likelihood's
  gradient sums to zero, also centres them at mean 0. Elo = 1000 + 400/ln(10) * s,
  so the mean rating is 1000 and 400 Elo points are odds of 10 to 1.
- **Bootstrap.** Each pair's games are resampled with replacement (a multinomial
  draw of its win/draw/loss counts) and the ratings refitted.
- **Nash.** The meta-game (Balduzzi et al. 2018, "Re-evaluating evaluation") is the
  symmetric zero-sum game whose payoff to the row player is its mean score minus
  0.5; its maximin mixture, found by linear programming, puts weight on the players
  no mixture of the others beats, and on every member of a cycle.
"""

from typing import Tuple

import numpy as np
from scipy.optimize import linprog

ELO_PER_NATURAL_UNIT = 400.0 / np.log(10.0)
ELO_MEAN = 1000.0
PRIOR = 0.01  # Gaussian prior on each strength: standard deviation 10 (about 1,737 Elo)


def check_square(name: str, table: np.ndarray) -> np.ndarray:
    """``table`` as a float array, if it is [P, P] with P >= 1; ValueError otherwise."""
    table = np.asarray(table, np.float64)
    if table.ndim != 2 or table.shape[0] != table.shape[1] or table.shape[0] < 1:
        raise ValueError(f"{name} must be [P, P], got shape {table.shape}")
    return table


def mean_scores(wins: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Each row player's mean score against each column player.

    Args:
        wins: int [P, P], games row won against column.
        draws: int [P, P], symmetric.

    Returns:
        float [P, P]: (wins + draws / 2) / games; NaN where the pair played no game
        (the diagonal).
    """
    wins, draws = check_square("wins", wins), check_square("draws", draws)
    games = wins + wins.T + draws
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(games > 0, (wins + 0.5 * draws) / games, np.nan)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(_log_sigmoid(x))


def bradley_terry(
    points: np.ndarray, prior: float = PRIOR, tolerance: float = 1e-10, max_steps: int = 100
) -> np.ndarray:
    """Bradley-Terry strengths by Newton's method (maximum a posteriori).

    Maximises sum_ij points[i, j] * log sigmoid(s_i - s_j) - prior / 2 * sum_i s_i^2.

    Args:
        points: float [P, P], what row scored against column: wins plus half the draws.
        prior: precision of the Gaussian prior on each strength; with 0 the fit is the
            plain maximum likelihood, which is finite only if no group of players
            wins every game against the rest.
        tolerance: stop when no strength moves more than this.
        max_steps: Newton steps at most.

    Returns:
        float [P]: strengths in natural units, mean 0.
    """
    points = check_square("points", points)
    if np.any(points < 0):
        raise ValueError("points must be non-negative")
    games = points + points.T
    strengths = np.zeros(points.shape[0])

    def objective(s: np.ndarray) -> float:
        return float(np.sum(points * _log_sigmoid(s[:, None] - s[None, :])) - prior / 2 * s @ s)

    value = objective(strengths)
    for _ in range(max_steps):
        p = _sigmoid(strengths[:, None] - strengths[None, :])  # P(row beats column)
        gradient = np.sum(points - games * p, axis=1) - prior * strengths
        curvature = games * p * (1.0 - p)
        hessian = curvature - np.diag(curvature.sum(axis=1) + prior)
        step = np.linalg.lstsq(hessian, -gradient, rcond=None)[0]
        scale = 1.0
        while objective(strengths + scale * step) < value - 1e-12 and scale > 1e-6:
            scale /= 2  # backtrack: Newton's full step can overshoot far from the optimum
        strengths = strengths + scale * step
        value = objective(strengths)
        if np.max(np.abs(scale * step)) < tolerance:
            break
    return strengths - strengths.mean()


def elo(strengths: np.ndarray) -> np.ndarray:
    """Elo ratings of Bradley-Terry strengths [P] (mean 1000): float [P]."""
    strengths = np.asarray(strengths, np.float64)
    return ELO_MEAN + ELO_PER_NATURAL_UNIT * (strengths - strengths.mean())


def elo_ratings(wins: np.ndarray, draws: np.ndarray, prior: float = PRIOR) -> np.ndarray:
    """Elo of each player from its results, draws half a win each way: float [P].

    Args:
        wins: int [P, P], games row won against column.
        draws: int [P, P], symmetric.
        prior: see ``bradley_terry``.
    """
    wins, draws = check_square("wins", wins), check_square("draws", draws)
    return elo(bradley_terry(wins + 0.5 * draws, prior))


def bootstrap_elo(
    wins: np.ndarray, draws: np.ndarray, resamples: int, seed: int, prior: float = PRIOR
) -> np.ndarray:
    """Elo ratings refitted on resampled games: float [resamples, P].

    Each pair's games are drawn again with replacement, as many as it played: a
    multinomial draw over its (i wins, draw, j wins) frequencies.

    Args:
        wins: int [P, P], games row won against column.
        draws: int [P, P], symmetric.
        resamples: how many resampled tournaments.
        seed: seeds the resampling.
        prior: see ``bradley_terry``.
    """
    wins, draws = check_square("wins", wins), check_square("draws", draws)
    count = wins.shape[0]
    rng = np.random.default_rng(seed)
    tables = np.zeros((resamples, count, count))
    for i in range(count):
        for j in range(i + 1, count):
            outcomes = np.array([wins[i, j], draws[i, j], wins[j, i]])
            games = int(outcomes.sum())
            if games == 0:
                continue
            drawn = rng.multinomial(games, outcomes / games, size=resamples)
            tables[:, i, j] = drawn[:, 0] + 0.5 * drawn[:, 1]
            tables[:, j, i] = drawn[:, 2] + 0.5 * drawn[:, 1]
    return np.stack([elo(bradley_terry(table, prior)) for table in tables])


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> np.ndarray:
    """The central ``level`` interval of samples along axis 0: float [2, ...] (low, high)."""
    tail = 100.0 * (1.0 - level) / 2.0
    return np.percentile(np.asarray(samples, np.float64), [tail, 100.0 - tail], axis=0)


def zero_sum_nash(payoff: np.ndarray) -> Tuple[np.ndarray, np.ndarray, float]:
    """A Nash equilibrium of the zero-sum matrix game ``payoff`` (to the row player).

    The row player's maximin mixture x solves max v s.t. x^T payoff >= v, sum x = 1,
    x >= 0; the column player's is the row player's of ``-payoff^T``. When the
    equilibrium is not unique, the LP solver (HiGHS) returns one of them.

    Args:
        payoff: float [R, C].

    Returns:
        (row mixture float [R], column mixture float [C], value of the game).
    """
    payoff = np.asarray(payoff, np.float64)
    if payoff.ndim != 2 or 0 in payoff.shape or not np.all(np.isfinite(payoff)):
        raise ValueError(f"payoff must be a finite [R, C] matrix, got shape {payoff.shape}")
    row, value = _maximin(payoff)
    column, _ = _maximin(-payoff.T)
    return row, column, value


def _maximin(payoff: np.ndarray) -> Tuple[np.ndarray, float]:
    """The row player's maximin mixture [R] and the value it guarantees."""
    rows, columns = payoff.shape
    # Variables (x_1..x_R, v): minimise -v subject to v - x^T payoff[:, j] <= 0 for every j.
    cost = np.zeros(rows + 1)
    cost[-1] = -1.0
    upper = np.hstack([-payoff.T, np.ones((columns, 1))])
    equal = np.hstack([np.ones((1, rows)), np.zeros((1, 1))])
    bounds = [(0.0, None)] * rows + [(None, None)]
    result = linprog(
        cost,
        A_ub=upper,
        b_ub=np.zeros(columns),
        A_eq=equal,
        b_eq=[1.0],
        bounds=bounds,
        method="highs",
    )
    if not result.success:
        raise RuntimeError(f"the Nash linear program failed: {result.message}")
    mixture = np.clip(result.x[:rows], 0.0, None)
    mixture[mixture < 1e-9] = 0.0
    return mixture / mixture.sum(), float(result.x[-1])


def meta_game_nash(scores: np.ndarray) -> np.ndarray:
    """The Nash mixture over players of the meta-game of mean scores: float [P].

    Args:
        scores: float [P, P], mean score of row against column; the diagonal is ignored
            (a player against itself scores 0.5).
    """
    scores = check_square("scores", scores)
    payoff = np.where(np.eye(scores.shape[0], dtype=bool), 0.0, scores - 0.5)
    mixture, _, _ = zero_sum_nash(payoff)
    return mixture
