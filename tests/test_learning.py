"""Learning thresholds: the shipped hparam sets must solve their task.

Slow (a run of up to a full budget each, up to 1-2 minutes here): marked `slow`, so
`python -m pytest -m unit` and `-m process` leave them out.
"""

import importlib.util
import os
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

from rl.experiment import Experiment, next_multiple
from rl.logbook import read_eval_records

pytestmark = pytest.mark.slow


def train_evals(
    hparams: str, tmp_path, num_workers: int = 0, overrides: str = ""
) -> List[Dict[str, Any]]:
    """Trains `hparams` with seed 0 to its full budget; its evaluation records.

    Args:
        hparams: a registered hparam set.
        tmp_path: the test's folder; the run goes to tmp_path/run.
        num_workers: actor processes (0: this process acts).
        overrides: an --hparam_override string.
    """
    exp = Experiment(
        hparams,
        str(tmp_path / "run"),
        overrides=overrides or None,
        seed=0,
        verbose=False,
        num_workers=num_workers,
    )
    result = exp.train()
    exp.close()
    assert result["step"] == exp.hp.train_steps  # the rollouts divide the budget
    evals = read_eval_records(os.path.join(tmp_path, "run", "eval.jsonl"))
    assert evals[-1]["step"] == exp.hp.train_steps
    return evals


def evaluations_in_chunks(exp: Experiment) -> Iterator[List[Dict[str, Any]]]:
    """Trains `exp` to its train_steps one evaluation interval at a time, each chunk one
    ``train(steps=...)`` call that ends where a one-call ``train()`` evaluates; yields the
    run's evaluation records after each chunk, checking that the chunk made one, at its end
    (test_training_in_chunks_is_the_one_call_run holds that the run is the same).
    """
    eval_file = os.path.join(exp.output_dir, "eval.jsonl")
    chunks = 0
    while exp.step < exp.hp.train_steps:
        end = min(next_multiple(exp.step, exp.hp.eval_interval), exp.hp.train_steps)
        result = exp.train(steps=end - exp.step)
        chunks += 1
        assert result["failure"] is None, result["failure"]
        evals = read_eval_records(eval_file)
        assert len(evals) == chunks and evals[-1]["step"] == exp.step, evals
        yield evals


def train_until_reached(
    hparams: str, tmp_path, budget: int, threshold: float, overrides: str = ""
) -> List[Dict[str, Any]]:
    """Trains `hparams` with seed 0 until an evaluation's mean return is `threshold` or
    more; fails if its budget of `budget` env steps is spent first.

    It checks what "reaches `threshold` within `budget` steps" says, on the run that
    ``train()`` makes in one call (``evaluations_in_chunks``), stopped at its first
    evaluation at or above `threshold`: made at `budget` steps at the latest.

    Args:
        hparams: a registered hparam set; its train_steps must be `budget`.
        tmp_path: the test's folder; the run goes to tmp_path/run.
        budget: the env steps the test's name allows.
        threshold: the evaluation mean return to reach.
        overrides: an --hparam_override string.

    Returns:
        The evaluation records made, the last one the first at or above `threshold`.
    """
    exp = Experiment(
        hparams, str(tmp_path / "run"), overrides=overrides or None, seed=0, verbose=False
    )
    assert exp.hp.train_steps == budget
    evals: List[Dict[str, Any]] = []
    try:
        for evals in evaluations_in_chunks(exp):
            if evals[-1]["return_mean"] >= threshold:
                return evals
    finally:
        exp.close()
    pytest.fail(
        f"{hparams} did not reach {threshold} within {budget} steps: "
        f"{[(e['step'], e['return_mean']) for e in evals]}"
    )


@pytest.mark.parametrize("hparams", ["ppo_tiny", "dqn_tiny"])
def test_training_in_chunks_is_the_one_call_run(tmp_path, hparams):
    # What train_until_reached stands on. An evaluation interval of 200 steps is not a
    # multiple of ppo_tiny's rollouts (32 steps): it evaluates at 224, 416, 608, ...
    runs = []
    for name, chunked in (("one_call", False), ("chunks", True)):
        exp = Experiment(
            hparams,
            str(tmp_path / name),
            seed=3,
            overrides="train_steps=1024,eval_interval=200",
            verbose=False,
        )
        if chunked:
            for evals in evaluations_in_chunks(exp):
                pass
        else:
            exp.train()
            evals = read_eval_records(os.path.join(exp.output_dir, "eval.jsonl"))
        runs.append(
            (
                [(e["step"], e["returns"]) for e in evals],
                [v.numpy() for v in exp.agent.model.variables],
            )
        )
        exp.close()
    (evals_one, weights_one), (evals_chunks, weights_chunks) = runs
    assert len(evals_one) >= 5 and evals_chunks == evals_one
    for one, chunk in zip(weights_one, weights_chunks):
        np.testing.assert_array_equal(one, chunk)


def test_ppo_cartpole_reaches_475_within_100k_steps(tmp_path):
    train_until_reached("ppo_cartpole", tmp_path, budget=100_000, threshold=475)


def test_dqn_cartpole_reaches_475_within_100k_steps(tmp_path):
    train_until_reached("dqn_cartpole", tmp_path, budget=100_000, threshold=475)


# Not PPO: with two actor processes it is the run without them, to the bit
# (tests/test_workers.py, test_an_on_policy_run_with_2_workers_is_the_run_with_none).
@pytest.mark.parametrize("hparams", ["dqn_cartpole", "impala_cartpole"])
def test_with_two_actor_processes_cartpole_reaches_475(tmp_path, hparams):
    # The same sets with their env copies stepped by two actor processes, which act up to
    # three rounds ahead of the learner, on older weights. A run's numbers
    # depend on the host's floating point: one host's seed-0 DQN run ended above 475, another's
    # reaches 500 at 70k steps and ends on 457.2 (8 episodes of 10 at 500). So: solved at an
    # evaluation and nearly solved at the end (random play scores about 22). The end is
    # part of the criterion, so it trains the whole budget, in one call (train() stops the
    # actor processes when it returns: trained in chunks, it would be another run).
    returns = [e["return_mean"] for e in train_evals(hparams, tmp_path, num_workers=2)]
    assert max(returns) >= 475, returns
    assert returns[-1] >= 400, returns


def test_a2c_cartpole_reaches_475_within_200k_steps(tmp_path):
    train_until_reached("a2c_cartpole", tmp_path, budget=200_000, threshold=475)


def test_vpg_cartpole_reaches_475_within_300k_steps(tmp_path):
    # REINFORCE with a learned baseline; seeds 0-2 hold 500 from 140k-200k steps on.
    train_until_reached("vpg_cartpole", tmp_path, budget=300_000, threshold=475)


def test_ppo_pendulum_reaches_minus_250_within_rl_zoos_100k_steps(tmp_path):
    # A Gaussian policy, clipped to the bounds; seed 0 reaches it at 61,440 steps (-1,103,
    # -543, -230 over 20 episodes; -131 and -147 after), the suite's copies end at -151,
    # -118, -155 (docs/benchmarks.md).
    evals = train_until_reached("ppo_pendulum", tmp_path, budget=102_400, threshold=-250)
    assert evals[-1]["episodes"] == 20


@pytest.mark.skipif(
    importlib.util.find_spec("Box2D") is None,
    reason="LunarLanderContinuous-v3 needs Box2D: pip install -e '.[box2d]'",
)
def test_ppo_lunar_lander_continuous_learns_within_200k_steps(tmp_path):
    # A tanh-squashed Gaussian on 200k steps instead of the set's 1M, the learning rate
    # annealed over them, with the 500k set of before (10 epochs of 16 minibatches, gamma
    # 0.99, lambda 0.95). Its four evaluations swing by 100 or more from one to the next:
    # seeds 0-3 end at -20, 66, -44 and 118 (best 58, 96, 135, 118); before the NumPy
    # forward went row by row (bitwise other runs) at 104, 154, -22 and 41 (best 120, 154,
    # 141, 48). Random play scores -202. So: an evaluation above 0, and none back near
    # random at the end; the end is part of the criterion, so it trains the whole budget.
    before = "num_epochs=10,num_minibatches=16,gamma=0.99,gae_lambda=0.95"
    evals = train_evals(
        "ppo_lunar_lander_continuous", tmp_path, overrides=f"{before},train_steps=200000"
    )
    returns = [e["return_mean"] for e in evals]
    assert evals[-1]["step"] == 200_000
    assert max(returns) >= 0, returns
    assert returns[-1] >= -100, returns


def test_impala_cartpole_reaches_475_within_300k_steps(tmp_path):
    # One process (no lag beyond the update in between): A2C with V-trace targets.
    train_until_reached("impala_cartpole", tmp_path, budget=300_000, threshold=475)


@pytest.mark.parametrize("hparams", ["sac_pendulum", "td3_pendulum", "ddpg_pendulum"])
def test_off_policy_actor_critics_reach_minus_250_on_pendulum_within_20k_steps(tmp_path, hparams):
    # With 64 x 64 networks instead of the sets' 256 x 256, a third of the time: seeds 0-2
    # end between -155 and -160 (SAC), -155 and -164 (TD3), -157 and -164 (DDPG); the full
    # sets' results are in docs/benchmarks.md.
    train_until_reached(
        hparams, tmp_path, budget=20_000, threshold=-250, overrides="hidden_sizes=(64,64)"
    )


def test_rainbow_cartpole_reaches_475_within_50k_steps(tmp_path):
    # Every DQN switch on (dueling, noisy, C51, 3-step, prioritised); seeds 0-2 hold 500
    # from 25k-40k steps on.
    train_until_reached("rainbow_cartpole", tmp_path, budget=50_000, threshold=475)


def test_qrdqn_cartpole_reaches_475_within_100k_steps(tmp_path):
    # QR-DQN (10 quantiles per action) on dqn_cartpole's settings; seed 0 holds 500 from 40k.
    train_until_reached("qrdqn_cartpole", tmp_path, budget=100_000, threshold=475)
