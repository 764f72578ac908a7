"""Tests of scripts/benchmark.py: its pure parts, its errors and short real runs."""

import json
import os
import subprocess
import sys

import pytest

from scripts.bench import (
    checks,
    children,
    cli,
    costs,
    peer_checkpoints,
    peer_runs,
    peer_seeds,
    peer_settings,
    runs,
    scores,
    suite,
    tables,
    workers,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "benchmark.py")


needs_bench = pytest.mark.skipif(
    bool(peer_settings.missing_modules(peer_settings.PEER_MODULES)),
    reason='needs the bench extra: pip install -e ".[bench]"',
)


def run_script(*args, prelude=""):
    """Runs the script as `python scripts/benchmark.py ARGS`, after `prelude` Python code."""
    code = (
        f"import runpy, sys\n{prelude}\n"
        f"sys.argv = [{SCRIPT!r}] + {list(args)!r}\n"
        f"sys.exit(runpy.run_path({SCRIPT!r}, run_name='__main__'))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


@pytest.mark.unit
def test_per_call_ms_is_the_median_of_the_timed_calls():
    ticks = iter([0.0, 1.0, 10.0, 13.0, 20.0, 22.0])  # calls of 1 s, 3 s and 2 s
    calls = []
    ms = costs.per_call_ms(lambda: calls.append(1), 3, warmup=2, clock=lambda: next(ticks))
    assert ms == 2000.0
    assert len(calls) == 5  # two untimed warm-up calls, then three timed


@pytest.mark.unit
def test_summarise_pair_takes_medians_and_the_ratio_of_median_walls():
    rl_rows = [
        {"wall_s": 12.0, "final_return": 500.0},
        {"wall_s": 10.0, "final_return": 480.0},
        {"wall_s": 14.0, "final_return": 200.0},
    ]
    peer_rows = [
        {"wall_s": 40.0, "final_return": 500.0},
        {"wall_s": 30.0, "final_return": 450.0},
        {"wall_s": 35.0, "final_return": 500.0},
    ]
    summary = tables.summarise_pair("ppo_cartpole", "ppo", rl_rows, peer_rows)
    assert summary["pair"] == "ppo_cartpole vs sb3 ppo"
    assert summary["runs"] == 3
    assert (summary["rl_wall_s"], summary["peer_wall_s"]) == (12.0, 35.0)
    assert summary["ratio"] == pytest.approx(12.0 / 35.0)
    assert (summary["rl_eval_min"], summary["rl_eval_median"]) == (200.0, 480.0)
    assert (summary["peer_eval_min"], summary["peer_eval_median"]) == (450.0, 500.0)
    line = tables.format_summary(summary)
    assert line.split()[-5:] == ["12.0", "35.0", "0.34", "200.0/480.0", "450.0/500.0"]


@pytest.mark.unit
def test_missing_modules_names_only_what_cannot_be_imported():
    assert peer_settings.missing_modules(["json", "no_such_module_rl_bench"]) == [
        "no_such_module_rl_bench"
    ]


@pytest.mark.unit
def test_peer_error_names_the_sets_that_have_a_peer():
    error = checks.peer_error(["ppo_cartpole", "ppo_acrobot"], 3)
    assert error == (
        "--peer has no peer for ppo_acrobot: valid: ppo_cartpole, dqn_cartpole, sac_pendulum, "
        "dqn_lunar_lander, ppo_lunar_lander, dqn_mountain_car, a2c_lunar_lander, "
        "a2c_mountain_car, ddpg_lunar_lander_continuous"
    )
    assert checks.peer_error(["dqn_cartpole"], 0) == "--pairs must be >= 1, got 0"


@pytest.mark.process
def test_peer_without_the_bench_extra_is_one_line_and_exit_2(tmp_path):
    report = tmp_path / "report.json"
    # As on a machine without the extra: the import system finds no stable_baselines3.
    proc = run_script(
        "--peer",
        "--json",
        str(report),
        prelude="sys.modules['stable_baselines3'] = sys.modules['torch'] = None",
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        'benchmark.py: error: --peer needs torch, stable_baselines3: pip install -e ".[bench]"\n'
    )
    assert not report.exists()


@pytest.mark.process
@needs_bench
@pytest.mark.parametrize("hparams", ["ppo_cartpole", "dqn_cartpole"])
def test_a_peer_run_learns_the_steps_and_plays_20_greedy_episodes(hparams):
    proc = run_script("--_peer_run", hparams, "0", "512")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["steps"] == 512  # both collect in blocks of 256 env steps
    assert len(result["returns"]) == 20
    # CartPole pays 1 per step and no episode ends before 8 steps.
    assert all(r >= 8 for r in result["returns"])


@pytest.mark.process
@needs_bench
def test_a_peer_on_normalised_envs_is_evaluated_with_raw_returns():
    # a2c_mountain_car's peer trains on VecNormalize'd envs (scaled rewards); its
    # evaluation reports raw returns: -1 a step for at most 200 steps, whole numbers
    # (normalised rewards would be fractions near 0).
    proc = run_script("--_peer_run", "a2c_mountain_car", "0", "512")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["steps"] == 560  # 16 envs x 5 steps a rollout: 512 rounds up to 7 of them
    assert len(result["returns"]) == 20
    assert all(r == int(r) and -200 <= r <= -1 for r in result["returns"])


@pytest.mark.process
@needs_bench
def test_a_peer_run_saves_and_resumes_from_its_last_loadable_save(tmp_path):
    saves = tmp_path / "peer"
    flags = ["--peer_checkpoints", str(saves), "--peer_checkpoint_steps", "256"]
    first = run_script("--_peer_run", "dqn_cartpole", "0", "512", *flags)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout.splitlines()[-1])["resumed_from"] == 0
    for steps in (256, 512):
        assert (saves / f"peer_{steps}_steps.zip").exists()
        assert (saves / f"peer_replay_buffer_{steps}_steps.pkl").exists()
    # A save cut short by a kill: the one before it is taken. (The same steps: the folder
    # belongs to this set, seed and total.)
    (saves / "peer_512_steps.zip").write_bytes(b"cut short")
    second = run_script("--_peer_run", "dqn_cartpole", "0", "512", *flags)
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout.splitlines()[-1])
    assert (result["resumed_from"], result["steps"]) == (256, 512)
    assert "peer_512_steps.zip does not load" in second.stderr
    assert len(result["returns"]) == 20


@pytest.mark.process
@needs_bench
def test_a_ddpg_peer_explores_with_gaussian_noise_of_the_action_size():
    # RL-Zoo's `noise_type: normal` becomes SB3's NormalActionNoise, one std per action
    # dimension (LunarLanderContinuous has two). Built in a child: torch stays out of here.
    code = (
        "import json\nfrom scripts.bench import peer_settings\n"
        "m = peer_settings.build_peer(peer_settings.PEERS['ddpg_lunar_lander_continuous'], 0)\n"
        "n = m.action_noise\n"
        "print(json.dumps([type(n).__name__, n().shape, n._sigma.tolist(), m.learning_starts]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == ["NormalActionNoise", [2], [0.1, 0.1], 10000]


@needs_bench
@pytest.mark.slow
def test_peer_table_alternates_and_writes_rows_and_summaries(tmp_path):
    report = tmp_path / "report.json"
    proc = run_script(
        "--peer",
        "--pairs",
        "1",
        "--hparams",
        "ppo_cartpole",
        "--train_steps",
        "400",
        "--json",
        str(report),
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("per-call costs here: compiled TF MLP call")
    data = json.loads(report.read_text())
    assert set(data["costs_ms"]) == {"tf_call_ms", "numpy_mlp_ms", "cartpole_step_ms"}
    assert all(ms > 0 for ms in data["costs_ms"].values())
    rl_row, peer_row = data["rows"]
    assert (rl_row["side"], peer_row["side"]) == ("rl", "peer")
    # ppo_cartpole steps 16 envs x 25; the peer learns at least as many, in blocks of 256.
    assert (rl_row["steps"], peer_row["steps"]) == (400, 512)
    assert (len(rl_row["eval_returns"]), len(peer_row["eval_returns"])) == (10, 20)
    (summary,) = data["summaries"]
    assert summary["ratio"] == pytest.approx(rl_row["wall_s"] / peer_row["wall_s"])
    assert summary["rl_eval_median"] == rl_row["final_return"]
    assert sum(line.startswith("ppo_cartpole vs sb3 ppo") for line in lines) == 3


@needs_bench
@pytest.mark.slow
def test_a_baseline_checkout_runs_each_pair_too_with_its_own_rl(tmp_path):
    # A copy of this checkout whose train.py leaves a mark, so the row is its run.
    import shutil

    base, mark = tmp_path / "base", tmp_path / "base_ran"
    shutil.copytree(os.path.join(ROOT, "rl"), base / "rl")
    code = open(os.path.join(ROOT, "train.py")).read()
    (base / "train.py").write_text(
        f"import rl, pathlib; pathlib.Path({str(mark)!r}).write_text(rl.__file__)\n{code}"
    )
    report = tmp_path / "report.json"
    proc = run_script(
        "--peer", "--pairs", "1", "--hparams", "ppo_cartpole", "--train_steps", "400",
        "--baseline", str(base), "--json", str(report),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert mark.read_text() == str(base / "rl" / "__init__.py")  # the copy's own rl
    data = json.loads(report.read_text())
    assert data["baseline"] == str(base)
    rl_row, base_row, peer_row = data["rows"]
    assert [r["side"] for r in data["rows"]] == ["rl", "base", "peer"]
    assert base_row["seed"] == rl_row["seed"] and base_row["steps"] == rl_row["steps"] == 400
    (summary,) = data["summaries"]
    assert summary["base_wall_s"] == base_row["wall_s"]
    assert summary["base_ratio"] == pytest.approx(base_row["wall_s"] / peer_row["wall_s"])
    assert summary["rl_per_base"] == pytest.approx(rl_row["wall_s"] / base_row["wall_s"])
    header, _, line = proc.stdout.splitlines()[-3:]
    assert header.endswith(" " + tables.BASE_HEADER)
    assert line == tables.format_summary(summary)


@pytest.mark.unit
def test_summary_with_a_baseline_adds_its_wall_its_ratios_and_its_worst_eval():
    rows = {
        "rl": [{"wall_s": 9.0, "final_return": 500.0}, {"wall_s": 11.0, "final_return": 500.0}],
        "base": [{"wall_s": 14.0, "final_return": 480.0}, {"wall_s": 10.0, "final_return": 500.0}],
        "peer": [{"wall_s": 30.0, "final_return": 500.0}, {"wall_s": 20.0, "final_return": 90.0}],
    }
    summary = tables.summarise_pair("ppo_cartpole", "ppo", rows["rl"], rows["peer"], rows["base"])
    assert summary["base_wall_s"] == 12.0
    assert summary["base_ratio"] == pytest.approx(12.0 / 25.0)
    assert summary["rl_per_base"] == pytest.approx(10.0 / 12.0)
    assert summary["base_eval_min"] == 480.0
    line = tables.format_summary(summary)
    assert line.split()[-4:] == ["12.0", "0.48", "0.83", "480.0"]
    without = tables.summarise_pair("ppo_cartpole", "ppo", rows["rl"], rows["peer"])
    assert "base_wall_s" not in without
    assert len(tables.format_summary(without).split()) == len(line.split()) - 4


def _fake_runs(monkeypatch, base_steps=400):
    """Stands in for train.py and the peer: records each run's side and order."""
    calls = []

    def run_once(hparams, seed, train_steps, output_dir, extra, checkout=children.ROOT):
        side = "rl" if checkout == children.ROOT else "base"
        calls.append((side, seed, os.path.basename(output_dir)))
        return {
            "hparams": hparams, "seed": seed, "steps": 400 if side == "rl" else base_steps,
            "wall_s": {"rl": 10.0, "base": 12.0}[side] + seed, "steps_per_s": 1.0,
            "final_return": 500.0, "eval_returns": [500.0], "evals": [],
        }  # fmt: skip

    def peer_once(hparams, seed, steps):
        calls.append(("peer", seed, steps))
        return {"seed": seed, "steps": steps, "wall_s": 30.0, "steps_per_s": 1.0,
                "final_return": 500.0, "eval_returns": [500.0]}  # fmt: skip

    monkeypatch.setattr(runs, "run_once", run_once)
    monkeypatch.setattr(peer_runs, "peer_once", peer_once)
    monkeypatch.setattr(costs, "print_machine_costs", lambda: {"tf_call_ms": 0.2})
    return calls


@pytest.mark.unit
def test_a_baseline_runs_in_each_pair_taking_turns_with_this_checkout(monkeypatch, tmp_path):
    calls = _fake_runs(monkeypatch)
    _, rows, (summary,) = tables.run_peer_table(
        ["ppo_cartpole"], 3, None, [], str(tmp_path), baseline="/elsewhere/rl-base"
    )
    assert calls == [
        ("rl", 0, "ppo_cartpole-0-rl"), ("base", 0, "ppo_cartpole-0-base"), ("peer", 0, 400),
        ("base", 1, "ppo_cartpole-1-base"), ("rl", 1, "ppo_cartpole-1-rl"), ("peer", 1, 400),
        ("rl", 2, "ppo_cartpole-2-rl"), ("base", 2, "ppo_cartpole-2-base"), ("peer", 2, 400),
    ]  # fmt: skip
    assert [r["side"] for r in rows] == ["rl", "base", "peer"] * 3  # printed in one order
    assert (summary["rl_wall_s"], summary["base_wall_s"]) == (11.0, 13.0)
    assert summary["rl_per_base"] == pytest.approx(11.0 / 13.0)


@pytest.mark.unit
def test_a_baseline_that_trains_another_budget_is_one_line_and_exit_2(
    monkeypatch, tmp_path, capsys
):
    _fake_runs(monkeypatch, base_steps=512)
    with pytest.raises(SystemExit) as ended:
        tables.run_peer_table(["ppo_cartpole"], 1, None, [], str(tmp_path), "/elsewhere/b")
    assert ended.value.code == 2
    assert capsys.readouterr().err == (
        "benchmark.py: error: --baseline /elsewhere/b trained ppo_cartpole for 512 env steps "
        "and this checkout for 400: the set differs between them; give --train_steps to "
        "compare equal budgets\n"
    )


@pytest.mark.process
def test_a_baseline_whose_results_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys):
    # As an old checkout whose train.py reported in another form: no eval.jsonl, other keys.
    base = tmp_path / "base"
    (base / "rl").mkdir(parents=True)
    (base / "rl" / "__init__.py").write_text("")
    (base / "train.py").write_text("print('{\"step\": 400}')\n")
    with pytest.raises(SystemExit) as ended:
        runs.run_once("ppo_cartpole", 0, None, str(tmp_path / "run"), [], str(base))
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"benchmark.py: error: --baseline {base}: the results of {base / 'train.py'} "
        "--hparams ppo_cartpole --seed 0"
    )
    assert err.endswith(
        "its train.py reports in another form than this checkout's, so give a later commit\n"
    )


@pytest.mark.unit
def test_a_baselines_failure_names_its_train_py_by_its_path():
    assert (
        children.describe_command(
            [sys.executable, "/elsewhere/rl-base/train.py", "--hparams", "ppo_cartpole"]
        )
        == "/elsewhere/rl-base/train.py --hparams ppo_cartpole"
    )
    assert children.describe_command([sys.executable, children.TRAIN, "--seed", "0"]) == (
        "train.py --seed 0"
    )


@pytest.mark.process
@pytest.mark.parametrize(
    "make, says",
    [
        (lambda tmp: tmp / "absent", "is not a folder; give another rl checkout"),
        (lambda tmp: tmp, "is not an rl checkout (no train.py or rl/__init__.py); give one"),
        (lambda tmp: ROOT, "is this checkout; give another one"),
    ],
)
def test_a_baseline_that_is_not_another_checkout_is_one_line_and_exit_2(tmp_path, make, says):
    report = tmp_path / "report.json"
    folder = str(make(tmp_path))
    proc = run_script("--peer", "--baseline", folder, "--json", str(report))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        f"benchmark.py: error: --baseline {folder} {says} (e.g. git worktree add ../rl-base "
        "REV, then --baseline ../rl-base)\n"
    )
    assert not report.exists()


@pytest.mark.unit
def test_the_rl_table_with_a_baseline_runs_both_in_turns_and_prints_their_ratio(
    monkeypatch, tmp_path, capsys
):
    calls = _fake_runs(monkeypatch)
    rows = tables.run_table(
        ["ppo_cartpole"], [4, 5], None, 475.0, [], baseline="/elsewhere/rl-base"
    )
    assert [(side, seed) for side, seed, _ in calls] == [
        ("rl", 4), ("base", 4), ("base", 5), ("rl", 5)
    ]  # fmt: skip
    assert [(r["code"], r["seed"]) for r in rows] == [
        ("rl", 4),
        ("base", 4),
        ("rl", 5),
        ("base", 5),
    ]
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[-1] == "code" and out[2].split()[-1] == "rl"
    # Medians: here 14.5 s (seeds 4, 5: 14, 15), the baseline 16.5 s (16, 17).
    assert out[-1] == (
        "ppo_cartpole: median wall 14.50 s here, 16.50 s at the baseline: rl/base 0.88"
    )


@pytest.mark.process
def test_a_baseline_is_refused_by_the_modes_that_do_not_read_it(tmp_path):
    proc = run_script("--remote", "--baseline", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr == (
        "benchmark.py: error: --baseline is for the rl-only table (no mode flag) or --peer, "
        "not --remote; remove it\n"
    )


@pytest.mark.process
def test_without_peer_the_rl_table_stays(tmp_path):
    report = tmp_path / "rows.json"
    proc = run_script("--hparams", "ppo_tiny", "--seeds", "3", "--json", str(report))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(report.read_text())
    assert [(r["hparams"], r["seed"], r["steps"]) for r in rows] == [("ppo_tiny", 3, 256)]
    assert proc.stdout.splitlines()[0].split()[:2] == ["hparams", "seed"]
    assert "per-call costs" not in proc.stdout


@pytest.mark.unit
def test_the_classic_suite_takes_every_classic_set_but_bases_and_fixtures():
    sets = suite.classic_sets()
    names = [name for name, _, _, _ in sets]
    assert {"ppo_cartpole", "a2c_cartpole", "vpg_cartpole", "dqn_acrobot", "ppo_pendulum"} <= set(
        names
    )
    assert not [n for n in names if n.endswith(("_base", "_tiny"))]
    assert "ppo_atari" not in names
    envs = [env for _, _, env, _ in sets]
    assert envs == sorted(envs, key=suite.CLASSIC_ENVS.index)  # grouped by env, in order


@pytest.mark.unit
def test_the_suite_table_puts_rl_zoo_beside_each_set():
    row = {
        "set": "a2c_cartpole", "env": "CartPole-v1", "steps": 200_000, "runs": 3,
        "iqm": 498.25, "ci95": [490.0, 500.0], "solved_fraction": 1.0, "best_iqm": 500.0,
        "best_ci95": [500.0, 500.0], "rl_zoo": 500.0, "rl_zoo_steps": 500_000, "wall_s": 24.4,
    }  # fmt: skip
    other = dict(row, set="vpg_cartpole", rl_zoo=None, rl_zoo_steps=None)
    lines = suite.suite_markdown([row, other]).splitlines()
    assert lines[2] == (
        "| `a2c_cartpole` | CartPole-v1 | 200,000 | 3 | 498.2 [490.0, 500.0] | 100% | "
        "500.0 [500.0, 500.0] | 500 (500,000) | 24 |"
    )
    assert lines[3].split(" | ")[7] == "-"


@pytest.mark.unit
def test_second_half_rate_is_steps_over_the_seconds_of_the_second_half_records(tmp_path):
    from rl.logbook import summary_event, write_event_file

    # Updates every 1,000 steps; the first half slow (start-up), the second 2,000 steps/s.
    times = {1000: 10.0, 2000: 12.0, 3000: 13.0, 4000: 13.5, 5000: 14.0, 6000: 14.5}
    events = [
        summary_event("scalar", "train/steps_per_second", 1.0, step, 1_000.0 + seconds)
        for step, seconds in times.items()
    ] + [summary_event("scalar", "train/loss", 1.0, 6000, 9_999.0)]  # another tag: ignored
    os.makedirs(tmp_path / "tb")
    write_event_file(str(tmp_path / "tb" / "events.out.tfevents.000000000006000.1.0.rl.v2"), events)
    # Records at steps >= 3,000: 3,000 steps in 1.5 s.
    assert workers.second_half_rate(str(tmp_path)) == pytest.approx(2000.0)
    assert workers.second_half_rate(str(tmp_path / "missing")) is None


# --- bad input: one line, exit code 2, before any slow work --------------------------
@pytest.fixture
def no_slow_work(monkeypatch):
    """The cost measurement, the runs and the peer fail the test if they start."""

    def started(*args, **kwargs):
        raise AssertionError("slow work started before the inputs were checked")

    for module, name in (
        (costs, "print_machine_costs"),
        (children, "timed_run"),
        (children, "run_with_peak_memory"),
        (peer_runs, "peer_run"),
        (peer_runs, "peer_seed_run"),
    ):
        monkeypatch.setattr(module, name, started)


def one_line_error(capsys, *args):
    """cli.main(args) ends with exit code 2 and one line on stderr; returns its text."""
    with pytest.raises(SystemExit) as ended:
        cli.main(list(args))
    assert ended.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("benchmark.py: error: ") and err.count("\n") == 1, err
    return err[len("benchmark.py: error: ") : -1]


@pytest.mark.unit
@pytest.mark.parametrize(
    "args, message",
    [
        (["--seeds", "-1"], "argument --seeds: must be at least 0, got -1"),
        (["--train_steps", "-5"], "argument --train_steps: must be at least 1, got -5"),
        (["--train_steps", "0"], "argument --train_steps: must be at least 1, got 0"),
        (
            ["--suite", "classic", "--suite_seeds", "1"],
            "argument --suite_seeds: must be at least 2",
        ),
        (["--suite", "classic", "--suite_parallel", "0"], "argument --suite_parallel: must be"),
        (["--peer", "--pairs", "0"], "argument --pairs: must be at least 1, got 0"),
        (["--remote", "--calls", "0"], "argument --calls: must be at least 1, got 0"),
        (["--_peer_run", "dqn_cartpole", "x", "100"], "--_peer_run SEED 'x' is not an integer"),
        (["--_peer_run", "nosuch", "0", "100"], "--_peer_run has no peer for 'nosuch': valid: "),
        (
            ["--_peer_run", "dqn_cartpole", "0", "-100"],
            "--_peer_run STEPS must be at least 1, got -100",
        ),
        (["--_peer_seed", "nosuch", "0", "f"], "--_peer_seed has no peer for 'nosuch': valid: "),
        (["--_peer_seed", "dqn_cartpole", "-1", "f"], "--_peer_seed SEED must be at least 0"),
        (
            ["--_peer_run", "dqn_cartpole", "0", "16", "--peer_checkpoint_steps", "0"],
            "argument --peer_checkpoint_steps: must be at least 1, got 0",
        ),
    ],
)
def test_bad_numbers_and_names_are_one_line_before_any_work(no_slow_work, capsys, args, message):
    assert one_line_error(capsys, *args).startswith(message)


@pytest.mark.unit
@pytest.mark.parametrize(
    "args, message",
    [
        (["--peer", "--suite", "classic"], "--peer and --suite are separate modes; give one"),
        (["--only", "ppo_cartpole"], "--only is for --suite, not the rl-only table"),
        (["--suite", "classic", "--ray"], "--ray is for --workers, not --suite; remove it"),
        (["--peer", "--seeds", "1"], "--seeds is for the rl-only table (no mode flag), not --peer"),
        (["--workers", "--hparams", "ppo_tiny"], "--hparams is for the rl-only table (no mode"),
        (["--peer_checkpoints", "x"], "--peer_checkpoints is for --_peer_run, not the rl-only"),
        (["--suite", "classic", "--pairs", "2"], "--pairs is for --peer, not --suite"),
        (["--remote", "--num_workers", "2"], "unrecognized arguments: --num_workers 2 (--remote"),
    ],
)
def test_a_flag_of_another_mode_is_refused_naming_its_mode(no_slow_work, capsys, args, message):
    assert one_line_error(capsys, *args).startswith(message)


@pytest.mark.unit
@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus_flag", "1"], "Unknown command line flag 'bogus_flag' (the train.py flags"),
        (["--copies", "3"], "--copies is not passed on to train.py; the flags passed on are"),
        (["--hparam_override", "bogus=1"], "unknown hparam 'bogus'"),
        (
            ["--num_workers", "two"],
            "flag --num_workers=two: 'two' is not an integer in the range [0, 4096]",
        ),
    ],
)
def test_train_flags_are_checked_before_the_runs(no_slow_work, capsys, args, message):
    assert one_line_error(capsys, "--hparams", "ppo_tiny", *args).startswith(message)


@pytest.mark.unit
def test_an_unknown_set_is_refused_naming_the_registered_ones(no_slow_work, capsys):
    message = one_line_error(capsys, "--hparams", "ppo_tiny", "ppo_cartpol")
    assert message.startswith("unknown hparams 'ppo_cartpol': did you mean 'ppo_cartpole'")
    assert "valid: " in message


@pytest.mark.unit
def test_output_paths_are_checked_before_any_work(no_slow_work, capsys, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    assert one_line_error(capsys, "--hparams", "ppo_tiny", "--json", str(tmp_path)) == (
        f"--json {tmp_path} is a folder; name a file, e.g. {tmp_path / 'bench.json'}"
    )
    missing = tmp_path / "missing" / "rows.json"
    assert "does not exist" in one_line_error(capsys, "--json", str(missing))
    suite = one_line_error(capsys, "--suite", "classic", "--output_dir", str(a_file))
    assert suite == f"--output_dir {a_file} is a file; name a folder for the suite's runs"
    peer = one_line_error(
        capsys, "--_peer_run", "dqn_cartpole", "0", "16", "--peer_checkpoints", str(a_file)
    )
    assert peer == f"--peer_checkpoints {a_file} is a file; name a folder for the peer's saves"
    assert a_file.read_text() == "kept"


@pytest.mark.unit
def test_an_unknown_suite_set_is_refused_and_suite_md_kept(no_slow_work, capsys, tmp_path):
    (tmp_path / "suite.md").write_text("earlier table\n")
    message = one_line_error(
        capsys, "--suite", "classic", "--only", "nosuchset", "--output_dir", str(tmp_path)
    )
    assert message.startswith("--only nosuchset: not a set of the classic suite: valid: ")
    assert "ppo_cartpole" in message and "ppo_tiny" not in message
    assert (tmp_path / "suite.md").read_text() == "earlier table\n"


def write_copies(set_dir, finals, bests=None, seeds=None, final_step=2000):
    """A finished `train.py --copies` folder: run_<i>/eval.jsonl whose evaluations peak at
    each best return (default: half the final) and end at each final return, hparams.json
    with each seed (default 100 + i), and its summary.json."""
    from rl import analysis

    bests = bests or [final / 2 for final in finals]
    run_dirs = []
    for i, final in enumerate(finals):
        run_dir = set_dir / f"run_{i}"
        run_dir.mkdir(parents=True, exist_ok=True)
        records = [
            {"step": 1000, "return_mean": bests[i], "returns": [bests[i]], "wall_time": 5.0},
            {"step": final_step, "return_mean": final, "returns": [final],
             "wall_time": 10.0 + i, "episodes": 10},
        ]  # fmt: skip
        (run_dir / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        seed = seeds[i] if seeds else 100 + i
        (run_dir / "hparams.json").write_text(json.dumps({"seed": seed}))
        run_dirs.append(str(run_dir))
    analysis.write_summary(str(set_dir), run_dirs)


@pytest.mark.unit
def test_a_suite_run_of_one_set_keeps_the_rows_of_the_others(monkeypatch, capsys, tmp_path):
    write_copies(tmp_path / "dqn_cartpole", [500.0, 480.0, 490.0])  # an earlier --only run
    commands = []

    def train_copies(command):  # train.py --copies, done at once
        commands.append(command)
        output_dir = command[command.index("--output_dir") + 1]
        write_copies(tmp_path / os.path.basename(output_dir), [100.0, 200.0, 300.0])
        return 1.0, ""

    monkeypatch.setattr(costs, "print_machine_costs", lambda: None)
    monkeypatch.setattr(children, "timed_run", train_copies)
    code = cli.main(
        ["--suite", "classic", "--only", "ppo_cartpole", "--suite_seeds", "3",
         "--suite_parallel", "1", "--output_dir", str(tmp_path)]
    )  # fmt: skip
    assert code == 0
    assert len(commands) == 1 and "ppo_cartpole" in commands[0]
    table = (tmp_path / "suite.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in table[2:]] == ["| `dqn_cartpole`", "| `ppo_cartpole`"]
    assert table[2].split(" | ")[3:5] == ["3", "490.0 [480.0, 500.0]"]
    assert table[3].split(" | ")[-1] == "11 |"  # median of the copies' last wall times
    assert (tmp_path / "curves_CartPole-v1.png").exists()
    assert capsys.readouterr().out.splitlines()[-1].startswith("ppo_cartpole")


# --- the suite's plan, resume and result files ----------------------------------------
@pytest.mark.unit
def test_the_seeds_of_a_cell_come_from_one_plan_that_a_flag_overrides():
    assert suite.planned_seeds("ppo_cartpole", "CartPole-v1") == 10
    assert suite.planned_seeds("sac_pendulum", "Pendulum-v1") == 10
    assert suite.planned_seeds("dqn_mountain_car", "MountainCar-v0") == 5
    assert suite.planned_seeds("td3_lunar_lander_continuous", "LunarLanderContinuous-v3") == 5
    assert suite.planned_seeds("ppo_lunar_lander", "LunarLander-v3") == 10
    assert suite.planned_seeds("ppo_cartpole", "CartPole-v1", override=3) == 3
    # Every long cell is a classic set.
    assert set(suite.LONG_SETS) <= {name for name, _, _, _ in suite.classic_sets()}


@pytest.mark.unit
def test_only_the_copies_not_yet_finished_remain(tmp_path):
    write_copies(tmp_path, [500.0, 480.0], final_step=5000)  # run_0, run_1: finished
    write_copies(tmp_path / "stopped", [100.0], final_step=3000)
    os.rename(tmp_path / "stopped" / "run_0", tmp_path / "run_2")  # stopped at 3000 of 5000
    (tmp_path / "run_3").mkdir()  # started, no evaluation yet
    assert suite.remaining_copies(str(tmp_path), 6, 5000) == [2, 3, 4, 5]
    assert suite.remaining_copies(str(tmp_path), 2, 5000) == []
    assert suite.remaining_copies(str(tmp_path / "nothing"), 2, 5000) == [0, 1]


@pytest.mark.unit
def test_fewer_seeds_than_a_set_folder_holds_are_refused_before_any_work(
    no_slow_work, capsys, tmp_path
):
    write_copies(tmp_path / "ppo_cartpole", [500.0, 480.0, 490.0])
    before = (tmp_path / "ppo_cartpole" / "summary.json").read_text()
    message = one_line_error(
        capsys, "--suite", "classic", "--only", "ppo_cartpole", "--suite_seeds", "2",
        "--output_dir", str(tmp_path),
    )  # fmt: skip
    assert message == (
        f"{tmp_path / 'ppo_cartpole'} holds 3 copies and the suite plans 2 for ppo_cartpole: "
        "the suite grows a set, never shrinks it; give --suite_seeds 3 or more, or another "
        "--output_dir"
    )
    assert (tmp_path / "ppo_cartpole" / "summary.json").read_text() == before


PEER_SUMMARY = {
    "name": "SB3 PPO", "settings": {"n_steps": 32}, "train_steps": 100_000,
    "command": "python scripts/benchmark.py --_peer_run ppo_cartpole SEED 100000",
    "eval_episodes": 10, "seeds": [7, 8, 9, 10], "final_returns": [100.0, 200.0, 300.0, 400.0],
    "best_returns": [500.0, 500.0, 400.0, 450.0],
}  # fmt: skip


@pytest.mark.unit
def test_a_suite_run_writes_a_result_file_with_its_seeds_returns_and_peer(
    monkeypatch, capsys, tmp_path
):
    steps = dict((n, s) for n, _, _, s in suite.classic_sets())["ppo_cartpole"]
    finals, bests = [500.0, 480.0, 100.0, 490.0], [500.0, 500.0, 475.0, 500.0]
    commands = []

    def train_copies(command):  # train.py --copies, done at once
        commands.append(command)
        write_copies(tmp_path / "ppo_cartpole", finals, bests, [7, 8, 9, 10], steps)
        return 1.0, ""

    monkeypatch.setattr(costs, "print_machine_costs", lambda: {"tf_call_ms": 0.1})
    monkeypatch.setattr(children, "timed_run", train_copies)
    (tmp_path / "peers" / "ppo_cartpole").mkdir(parents=True)
    (tmp_path / "peers" / "ppo_cartpole" / "summary.json").write_text(json.dumps(PEER_SUMMARY))
    args = ["--suite", "classic", "--only", "ppo_cartpole", "--suite_seeds", "4",
            "--output_dir", str(tmp_path), "--results_dir", str(tmp_path / "results")]  # fmt: skip
    assert cli.main(args) == 0
    assert commands[0][commands[0].index("--copies") + 1] == "4"
    result = json.loads((tmp_path / "results" / "ppo_cartpole.json").read_text())
    assert result["seeds"] == [7, 8, 9, 10]
    assert result["final_returns"] == finals and result["best_returns"] == bests
    assert result["solved_threshold"] == 475.0 and result["solved_fraction"] == 0.75
    assert result["iqm"] == pytest.approx(485.0)  # the middle two of four
    assert result["ci95"][0] <= 485.0 <= result["ci95"][1]
    assert result["best_iqm"] == pytest.approx(500.0)
    assert result["peer_runs"] == PEER_SUMMARY
    assert result["peer_iqm"] == pytest.approx(250.0)
    # rl's 500, 480 and 490 beat each of the peer's 4 seeds; its 100 ties the peer's 100
    # (a half) and loses to the rest: 12.5 of 16 pairs.
    assert result["poi_vs_peer"] == pytest.approx(12.5 / 16)
    assert result["peer"]["name"] == "RL-Zoo" and result["machine"] == {"tf_call_ms": 0.1}
    assert result["command"].startswith("python scripts/benchmark.py --suite classic --only")
    assert (tmp_path / "results" / "profile.png").read_bytes()[:4] == b"\x89PNG"
    # Run again: every copy is done, so no train.py starts and the file is the same.
    commands.clear()
    assert cli.main(args) == 0
    assert commands == []
    again = json.loads((tmp_path / "results" / "ppo_cartpole.json").read_text())
    assert again == result
    # Growing to 5 seeds trains again (train.py trains only the new copy).
    assert cli.main([*args[:5], "5", *args[6:]]) == 0
    assert commands and commands[0][commands[0].index("--copies_parallel") + 1] == "1"


# --- scores: thresholds, normalisation and rliable's statistics ----------------------
@pytest.mark.unit
def test_solved_thresholds_are_gymnasiums_and_the_one_chosen_for_pendulum():
    expected = {
        "CartPole-v1": 475.0, "Acrobot-v1": -100.0, "MountainCar-v0": -110.0,
        "MountainCarContinuous-v0": 90.0, "LunarLander-v3": 200.0,
        "LunarLanderContinuous-v3": 200.0, "Pendulum-v1": -200.0,
    }  # fmt: skip
    assert {env: scores.solved_threshold(env) for env in suite.CLASSIC_ENVS} == expected
    assert scores.solved_threshold("tictactoe") is None


@pytest.mark.unit
def test_the_solved_fraction_counts_returns_at_or_above_the_threshold():
    assert scores.solved_fraction([475.0, 500.0, 474.9, 100.0], 475.0) == 0.5
    assert scores.solved_fraction([-90.0], -100.0) == 1.0
    with pytest.raises(ValueError):
        scores.solved_fraction([], 1.0)


@pytest.mark.unit
def test_returns_are_normalised_from_random_play_to_rl_zoo():
    random, zoo = scores.RANDOM_RETURNS["Acrobot-v1"], -76.6
    assert scores.normalised([random, zoo], random, zoo).tolist() == [0.0, 1.0]
    assert scores.normalised([-288.3], -500.0, -76.6)[0] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        scores.normalised([1.0], 5.0, 5.0)


@pytest.mark.unit
def test_the_probability_of_improvement_of_a_dominating_set_is_1_and_of_equal_sets_half():
    low = [100.0, 120.0, 130.0, 90.0, 110.0]
    high = [200.0, 220.0, 230.0, 190.0, 210.0]
    assert scores.probability_of_improvement(low, high) == (1.0, (1.0, 1.0))
    assert scores.probability_of_improvement(high, low) == (0.0, (0.0, 0.0))
    poi, (a, b) = scores.probability_of_improvement(low, low)
    assert poi == 0.5 and a < 0.5 < b
    # Hand-counted: B beats A on 3 of 4 pairs.
    assert scores.probability_of_improvement([1.0, 3.0], [2.0, 4.0])[0] == 0.75


@pytest.mark.unit
def test_a_profile_curve_takes_the_first_seeds_of_each_cell_as_many_as_its_fewest():
    results = [
        {"algorithm": "ppo", "env": "CartPole-v1", "final_returns": [500.0, 25.0, 262.5],
         "peer": {"name": "RL-Zoo", "value": 500}},
        {"algorithm": "ppo", "env": "Acrobot-v1", "final_returns": [-76.6, -500.0],
         "peer": {"name": "RL-Zoo", "value": -76.6}},
        {"algorithm": "vpg", "env": "CartPole-v1", "final_returns": [500.0]},  # no RL-Zoo value
    ]  # fmt: skip
    curves = scores.profile_curves(results)
    assert list(curves) == ["ppo (2 cells, 2 seeds)"]
    assert curves["ppo (2 cells, 2 seeds)"].tolist() == [[1.0, 1.0], [0.0, 0.0]]


def write_result(folder, name, finals):
    folder.mkdir(exist_ok=True)
    result = {"set": name, "algorithm": "ppo", "env": "CartPole-v1", "final_returns": finals}
    (folder / f"{name}.json").write_text(json.dumps(result))


@pytest.mark.process
def test_compare_prints_per_set_the_probability_that_b_improves_on_a(tmp_path):
    write_result(tmp_path / "a", "ppo_cartpole", [100.0, 200.0, 300.0, 400.0])
    write_result(tmp_path / "a", "dqn_cartpole", [500.0, 500.0, 500.0])
    write_result(tmp_path / "a", "a2c_cartpole", [500.0, 500.0])  # not in B: left out
    write_result(tmp_path / "b", "ppo_cartpole", [450.0, 460.0, 470.0, 480.0, 490.0])
    write_result(tmp_path / "b", "dqn_cartpole", [500.0, 500.0, 500.0])
    proc = run_script("--compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == [f"A: {tmp_path / 'a'}", f"B: {tmp_path / 'b'}"]
    assert lines[2].split() == [
        "set", "env", "A", "seeds", "A", "IQM", "B", "seeds", "B", "IQM", "P(B", ">", "A)",
        "95%", "CI",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[4:]}
    assert sorted(rows) == ["dqn_cartpole", "ppo_cartpole"]
    assert rows["dqn_cartpole"][2:] == ["3", "500.0", "3", "500.0", "0.50", "[0.50,", "0.50]"]
    assert rows["ppo_cartpole"][2:7] == ["4", "250.0", "5", "470.0", "1.00"]
    bad = run_script("--compare", str(tmp_path / "a"), str(tmp_path / "missing"))
    assert bad.returncode == 2
    assert bad.stderr == (
        f"benchmark.py: error: --compare {tmp_path / 'missing'}: not a folder; name a folder of "
        "result files (<set>.json), e.g. docs/results or a suite's <output_dir>/results\n"
    )


@pytest.mark.unit
def test_compare_refuses_folders_without_a_set_in_common(capsys, tmp_path):
    write_result(tmp_path / "a", "ppo_cartpole", [1.0, 2.0])
    write_result(tmp_path / "b", "dqn_cartpole", [1.0, 2.0])
    (tmp_path / "empty").mkdir()
    message = one_line_error(capsys, "--compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert message.startswith(f"--compare {tmp_path / 'a'} {tmp_path / 'b'}: no set has")
    message = one_line_error(capsys, "--compare", str(tmp_path / "a"), str(tmp_path / "empty"))
    assert message.startswith(f"--compare {tmp_path / 'empty'}: holds no result file")


@pytest.mark.process
def test_a_childs_bad_input_error_stays_one_line_and_exit_2(capsys):
    # train.py refuses --tracking_uri without --tracking mlflow, before TensorFlow loads.
    with pytest.raises(SystemExit) as ended:
        cli.main(["--hparams", "ppo_tiny", "--tracking_uri", "x"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("benchmark.py: error: train.py --hparams ppo_tiny --seed 0 ")
    assert err.endswith(
        ": --tracking_uri is for --tracking mlflow; remove it or add --tracking mlflow\n"
    )


@pytest.mark.unit
def test_a_child_crash_names_the_command_and_exits_1(capsys):
    crash = children.ChildFailed(
        [sys.executable, children.TRAIN, "--hparams", "ppo_tiny"],
        1,
        "Traceback (most recent call last):\n  ...\nMemoryError\n",
    )
    assert cli.report_child_failure(crash) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-2] == "MemoryError"
    assert err[-1].startswith("benchmark.py: train.py --hparams ppo_tiny failed with exit code 1")


DDPG_SAVE = {  # what SB3 stored of the DDPG peer's run of 300k steps, seed 0
    "policy_class": {"__module__": "stable_baselines3.td3.policies"},
    "seed": 0, "_total_timesteps": 300_000, "n_envs": 1, "gamma": 0.98,
    "buffer_size": 200_000, "learning_starts": 10_000, "batch_size": 100,
    "gradient_steps": -1, "learning_rate": 0.001,
}  # fmt: skip


@pytest.mark.unit
def test_a_save_is_matched_against_the_set_seed_steps_and_settings_of_its_peer():
    peer = peer_settings.PEERS["ddpg_lunar_lander_continuous"]
    run = {"set": "ddpg_lunar_lander_continuous", "seed": 0, "steps": 300_000}
    td3 = "stable_baselines3.td3.policies"
    assert peer_checkpoints.save_differences(DDPG_SAVE, peer, run, td3) == []
    assert peer_checkpoints.save_differences(DDPG_SAVE, peer, dict(run, seed=1, steps=16), td3) == [
        "seed 0, not 1",
        "steps 300000, not 16",
    ]
    # A save of SB3's batch of 256 (before the peer took 2021's 100) is another run.
    assert peer_checkpoints.save_differences(dict(DDPG_SAVE, batch_size=256), peer, run, td3) == [
        "batch_size 256, not 100"
    ]
    sac = peer_settings.PEERS["sac_pendulum"]
    assert peer_checkpoints.save_differences(
        DDPG_SAVE, sac, run, "stable_baselines3.sac.policies"
    ) == ["policy of stable_baselines3.td3.policies, not stable_baselines3.sac.policies"]


@pytest.mark.unit
def test_settings_sb3_stores_as_objects_are_not_compared():
    # SB3 turns DQN's train_freq=256 into a TrainFreq, stored as a pickled object.
    peer = peer_settings.PEERS["dqn_cartpole"]
    assert peer.settings["train_freq"] == 256
    run = {"set": "dqn_cartpole", "seed": 0, "steps": 100_000}
    save = {
        "policy_class": {"__module__": "stable_baselines3.dqn.policies"},
        "seed": 0, "_total_timesteps": 100_000, "n_envs": peer.n_envs or 1,
        **{k: v for k, v in peer.settings.items() if isinstance(v, (int, float, str))},
        "train_freq": {":type:": "<class 'TrainFreq'>", ":serialized:": "gAS..."},
    }  # fmt: skip
    assert (
        peer_checkpoints.save_differences(save, peer, run, "stable_baselines3.dqn.policies") == []
    )


def files_of(folder):
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


@pytest.mark.process
@needs_bench
def test_a_peer_folder_is_tied_to_its_set_seed_and_steps(tmp_path):
    saves = tmp_path / "peer"
    first = run_script(
        "--_peer_run", "ppo_cartpole", "0", "256", "--peer_checkpoints", str(saves),
        "--peer_checkpoint_steps", "256",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert json.loads((saves / "peer_run.json").read_text()) == {
        "set": "ppo_cartpole", "seed": 0, "steps": 256,
    }  # fmt: skip
    before = files_of(saves)
    for other, said in [
        (("dqn_cartpole", "0", "16"), "not dqn_cartpole seed 0 for 16 steps"),
        (("ppo_cartpole", "1", "256"), "not ppo_cartpole seed 1 for 256 steps"),
    ]:
        proc = run_script("--_peer_run", *other, "--peer_checkpoints", str(saves))
        assert proc.returncode == 2
        assert proc.stderr == (
            f"benchmark.py: error: --peer_checkpoints {saves} holds the saves of ppo_cartpole "
            f"seed 0 for 256 steps, {said}; give another folder\n"
        )
        assert files_of(saves) == before
    (saves / "peer_run.json").write_text("[]")
    before = files_of(saves)
    damaged = run_script(
        "--_peer_run", "ppo_cartpole", "0", "256", "--peer_checkpoints", str(saves)
    )
    assert damaged.returncode == 2
    assert damaged.stderr == (
        f"benchmark.py: error: --peer_checkpoints {saves}: {saves / 'peer_run.json'} holds an "
        'array; it must hold a JSON object; if the saves are of SET SEED STEPS, write {"set": '
        'SET, "seed": SEED, "steps": STEPS} to it\n'
    )
    assert files_of(saves) == before


@pytest.mark.unit
@needs_bench
def test_a_recorded_folders_saves_of_other_peer_settings_are_not_resumed(tmp_path, capsys):
    # Saves of the DDPG peer from before it took 2021's batch of 100: same set, seed and
    # steps (the manifest agrees), other settings.
    import zipfile

    run = {"set": "ddpg_lunar_lander_continuous", "seed": 0, "steps": 300_000}
    folder = tmp_path / "peer"
    folder.mkdir()
    (folder / "peer_run.json").write_text(json.dumps(run))
    with zipfile.ZipFile(folder / "peer_25000_steps.zip", "w") as archive:
        archive.writestr("data", json.dumps(dict(DDPG_SAVE, batch_size=256)))
    before = files_of(folder)
    with pytest.raises(SystemExit) as ended:
        peer_checkpoints.claim_peer_folder(str(folder), run)
    assert ended.value.code == 2
    assert "(batch_size 256, not 100); give another folder" in capsys.readouterr().err
    assert files_of(folder) == before
    with zipfile.ZipFile(folder / "peer_50000_steps.zip", "w") as archive:
        archive.writestr("data", json.dumps(DDPG_SAVE))
    peer_checkpoints.claim_peer_folder(str(folder), run)  # the newest save is the run's: resumed


@pytest.mark.unit
@needs_bench
def test_peer_saves_made_before_manifests_are_adopted_if_they_are_the_runs(tmp_path):
    # Like the long DDPG peer runs whose saves were made before peer_run.json existed.
    saves = tmp_path / "peer"
    flags = ["--peer_checkpoints", str(saves), "--peer_checkpoint_steps", "100"]
    made = run_script("--_peer_run", "ddpg_lunar_lander_continuous", "0", "200", *flags)
    assert made.returncode == 0, made.stderr
    (saves / "peer_run.json").unlink()
    before = files_of(saves)
    foreign = run_script("--_peer_run", "dqn_cartpole", "0", "200", *flags)
    assert foreign.returncode == 2
    assert foreign.stderr.count("\n") == 1
    assert (
        "holds the saves of another run than dqn_cartpole seed 0 for 200 steps (policy of "
        "stable_baselines3.td3.policies, not stable_baselines3.dqn.policies;" in foreign.stderr
    )
    assert files_of(saves) == before
    resumed = run_script("--_peer_run", "ddpg_lunar_lander_continuous", "0", "200", *flags)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[-1])["resumed_from"] == 200
    assert json.loads((saves / "peer_run.json").read_text()) == {
        "set": "ddpg_lunar_lander_continuous", "seed": 0, "steps": 200,
    }  # fmt: skip


# --- the peer over rl's seeds (--suite classic --peer_seeds N) -----------------------
def fake_seed_result(name, seed, means, steps=None):
    """A seed's evaluations.json as peer_seed_run writes it, its evaluations' means ``means``."""
    identity = peer_runs.peer_seed_identity(name, seed, "2.9.2", steps)
    evaluations = [
        {"step": 1000 * (i + 1), "return_mean": m, "returns": [m], "wall_time": float(i)}
        for i, m in enumerate(means)
    ]
    return {**identity, "steps": 1000 * len(means), "learn_s": 1.0, "wall_s": 2.0,
            "evaluations": evaluations}  # fmt: skip


@pytest.mark.unit
def test_every_peer_learns_its_sets_env_and_acts_as_its_evaluations_do():
    from rl import catalog, registry  # noqa: F401

    for name, peer in peer_settings.PEERS.items():
        hp = registry.hparams.get(name)()
        assert peer.env == hp.env, name
        assert hp.eval_act_select in peer_settings.EVAL_DETERMINISTIC, name
    assert peer_settings.zoo_settings(peer_settings.PEERS["dqn_lunar_lander"]) == (
        "RL-Zoo hyperparams/dqn.yml: LunarLander-v3"
    )


@pytest.mark.unit
def test_the_peer_trains_on_the_seeds_of_rls_copies():
    from rl import seeding

    assert peer_seeds.peer_seed_list("ppo_cartpole", 10) == seeding.copy_seeds(0, 10)
    assert peer_seeds.seed_folder("/s", "ppo_cartpole", 7) == "/s/peers/ppo_cartpole/seed_7"


@pytest.mark.unit
def test_the_peer_summary_holds_each_seeds_final_and_best_in_seed_order():
    results = [
        fake_seed_result("dqn_cartpole", 5, [100.0, 500.0, 120.0]),
        fake_seed_result("dqn_cartpole", 3, [200.0, 300.0]),
    ]
    summary = peer_seeds.peer_summary("dqn_cartpole", [5, 3], results, "the command")
    assert summary == {
        "set": "dqn_cartpole",
        "name": "Stable-Baselines3 2.9.2",
        "settings": "RL-Zoo hyperparams/dqn.yml: CartPole-v1",
        "command": "the command",
        "train_steps": 100_000,
        "eval_episodes": 10,
        "seeds": [5, 3],
        "final_returns": [120.0, 300.0],
        "best_returns": [500.0, 300.0],
        "wall_s": [2.0, 2.0],
    }


@pytest.fixture
def fake_peer_seeds(monkeypatch):
    """--peer_seeds with SB3 2.9.2 "installed" and each seed's process replaced by one
    that writes its evaluations.json at once; returns the seeds trained, in order."""
    trained = []

    def train_seed(command):
        name, seed, folder = command[command.index("--_peer_seed") + 1 :][:3]
        trained.append(int(seed))
        result = fake_seed_result(name, int(seed), [10.0 * len(trained), 5.0])
        with open(os.path.join(folder, peer_runs.EVALUATIONS_NAME), "w") as f:
            json.dump(result, f)
        return 1.0, ""

    monkeypatch.setattr(peer_settings, "missing_bench_extra", lambda flag: None)
    monkeypatch.setattr(peer_seeds, "sb3_version", lambda: "2.9.2")
    monkeypatch.setattr(children, "timed_run", train_seed)
    return trained


@pytest.mark.unit
def test_peer_seeds_resume_seed_by_seed_and_summarise(fake_peer_seeds, capsys, tmp_path):
    seeds = peer_seeds.peer_seed_list("ppo_cartpole", 3)
    done = tmp_path / "peers" / "ppo_cartpole" / f"seed_{seeds[1]}"
    done.mkdir(parents=True)  # finished before an interruption
    (done / "evaluations.json").write_text(
        json.dumps(fake_seed_result("ppo_cartpole", seeds[1], [400.0, 450.0]))
    )
    args = ["--suite", "classic", "--only", "ppo_cartpole", "--peer_seeds", "3",
            "--output_dir", str(tmp_path)]  # fmt: skip
    assert cli.main(args) == 0
    assert fake_peer_seeds == [seeds[0], seeds[2]]  # the finished seed is kept
    summary = json.loads((tmp_path / "peers" / "ppo_cartpole" / "summary.json").read_text())
    assert summary["seeds"] == seeds
    assert summary["final_returns"] == [5.0, 450.0, 5.0]
    assert summary["best_returns"] == [10.0, 450.0, 20.0]
    assert summary["command"] == (
        "python scripts/benchmark.py --suite classic --only ppo_cartpole --peer_seeds 3 "
        f"--output_dir {tmp_path}"
    )
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split()[-1] for row in rows] == ["now", "earlier", "now"]
    assert cli.main(args) == 0  # all done: nothing trains, the summary stays
    assert fake_peer_seeds == [seeds[0], seeds[2]]
    assert json.loads((tmp_path / "peers" / "ppo_cartpole" / "summary.json").read_text()) == summary


@pytest.mark.unit
def test_a_seed_file_of_another_run_or_damaged_is_one_line_before_any_training(
    fake_peer_seeds, capsys, tmp_path
):
    seed = peer_seeds.peer_seed_list("dqn_cartpole", 1)[0]
    folder = tmp_path / "peers" / "dqn_cartpole" / f"seed_{seed}"
    folder.mkdir(parents=True)
    path = folder / "evaluations.json"
    path.write_text(json.dumps(fake_seed_result("dqn_cartpole", seed, [1.0], steps=500)))
    args = ["--suite", "classic", "--only", "ppo_cartpole", "dqn_cartpole", "--peer_seeds", "1",
            "--output_dir", str(tmp_path)]  # fmt: skip
    assert one_line_error(capsys, *args) == (
        f"{path} is of another peer run (train_steps 500, not 100000); move it away to "
        "retrain the seed"
    )
    path.write_text('{"set": "dqn_cart')
    assert one_line_error(capsys, *args).startswith(f"{path} is damaged ({path} is not JSON")
    assert fake_peer_seeds == []  # ppo_cartpole's seed, before it, did not train either
    assert not (tmp_path / "peers" / "dqn_cartpole" / "summary.json").exists()


@pytest.mark.unit
@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--only", "ppo_cartpole", "ppo_acrobot"],
            "--peer_seeds: no Stable-Baselines3 peer for ppo_acrobot; the sets with one: "
            "dqn_cartpole, ppo_cartpole, a2c_mountain_car, ",
        ),
        (["--suite_seeds", "3"], "--suite_seeds is for rl's copies; with --peer_seeds the"),
        (["--suite_parallel", "2"], "--suite_parallel is for rl's copies; with --peer_seeds"),
        (["--peer_seeds", "0"], "argument --peer_seeds: must be at least 1, got 0"),
    ],
)
def test_bad_peer_seeds_input_is_one_line_before_any_work(no_slow_work, capsys, args, message):
    full = ["--suite", "classic", "--peer_seeds", "2", *args]
    assert one_line_error(capsys, *full).startswith(message)


@pytest.mark.unit
def test_peer_seeds_without_the_bench_extra_is_one_line(no_slow_work, capsys, monkeypatch):
    monkeypatch.setattr(peer_settings, "missing_modules", lambda names: list(names))
    assert one_line_error(capsys, "--suite", "classic", "--peer_seeds", "2") == (
        '--peer_seeds needs torch, stable_baselines3: pip install -e ".[bench]"'
    )


@pytest.mark.unit
def test_train_steps_is_for_the_peers_seeds_not_rls_copies(no_slow_work, capsys):
    assert one_line_error(capsys, "--suite", "classic", "--train_steps", "10").startswith(
        "--train_steps is for the peer's seeds of --suite (with --peer_seeds); rl's copies"
    )


@pytest.mark.process
@needs_bench
def test_the_real_peer_trains_each_seed_once_and_summarises(tmp_path):
    args = ("--suite", "classic", "--only", "ppo_cartpole", "--peer_seeds", "2",
            "--train_steps", "1000", "--output_dir", str(tmp_path))  # fmt: skip
    proc = run_script(*args)
    assert proc.returncode == 0, proc.stderr
    seeds = peer_seeds.peer_seed_list("ppo_cartpole", 2)
    summary = json.loads((tmp_path / "peers" / "ppo_cartpole" / "summary.json").read_text())
    assert summary["name"].startswith("Stable-Baselines3 ")
    assert summary["settings"] == "RL-Zoo hyperparams/ppo.yml: CartPole-v1"
    assert (summary["seeds"], summary["train_steps"], summary["eval_episodes"]) == (seeds, 1000, 10)
    assert summary["command"] == "python scripts/benchmark.py " + " ".join(args)
    for seed, final, best in zip(seeds, summary["final_returns"], summary["best_returns"]):
        result = json.loads(
            (tmp_path / "peers" / "ppo_cartpole" / f"seed_{seed}" / "evaluations.json").read_text()
        )
        # 8 envs x 32 steps a rollout: 1,024 steps; eval_interval 20,000: the final only.
        assert result["steps"] == 1024 and [e["step"] for e in result["evaluations"]] == [1024]
        assert len(result["evaluations"][0]["returns"]) == 10 and result["deterministic"]
        assert final == best == result["evaluations"][0]["return_mean"] >= 8  # CartPole: 8+
    files = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("evaluations.json")}
    again = run_script(*args)
    assert again.returncode == 0, again.stderr
    assert [row.split()[-1] for row in again.stdout.splitlines()[2:]] == ["earlier", "earlier"]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("evaluations.json")} == files
