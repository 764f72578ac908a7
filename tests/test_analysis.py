"""Tests of rl.analysis and scripts/plot.py on small synthetic eval logs."""

from __future__ import annotations

import importlib.util
import json
import math
import os

import numpy as np
import pytest
from eval_logs import record as _record
from eval_logs import write_run as _write_run

from rl import analysis

pytestmark = pytest.mark.unit

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_plot_script():
    """Imports scripts/plot.py, which is not in a package, as a module."""
    path = os.path.join(REPO_ROOT, "scripts", "plot.py")
    spec = importlib.util.spec_from_file_location("plot_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plot_script = _load_plot_script()


def _write_copies(output_dir, finals) -> list[str]:
    """Writes run_0.. run_{N-1} with evals at steps 0, 100, 200 ending at `finals`."""
    return [
        _write_run(os.path.join(output_dir, f"run_{i}"), [0, 100, 200], [0.0, final / 2, final])
        for i, final in enumerate(finals)
    ]


# --- interquartile_mean ---------------------------------------------------------------


def test_iqm_divisible_by_four_is_mean_of_middle_half():
    assert analysis.interquartile_mean(np.arange(1, 9)) == 4.5  # mean of 3, 4, 5, 6
    assert analysis.interquartile_mean(np.array([8, 1, 7, 2, 6, 3, 5, 4])) == 4.5


def test_iqm_ignores_outliers():
    assert analysis.interquartile_mean(np.array([-1000, 1, 2, 3, 4, 5, 6, 1000])) == 3.5


def test_iqm_fractional_weights_for_five_values():
    # Mass 0.2 each; overlap with [0.25, 0.75] gives weights 0, 0.3, 0.4, 0.3, 0.
    expected = 0.3 * 2 + 0.4 * 3 + 0.3 * 7
    assert analysis.interquartile_mean(np.array([10, 1, 7, 3, 2])) == pytest.approx(expected)
    assert expected == pytest.approx(3.9)


def test_iqm_small_sizes():
    assert analysis.interquartile_mean(np.array([5.0])) == 5.0
    assert analysis.interquartile_mean(np.array([1.0, 3.0])) == 2.0
    # n=3: weights 1/6, 2/3, 1/6.
    assert analysis.interquartile_mean(np.array([60.0, 10.0, 20.0])) == pytest.approx(25.0)


def test_iqm_rejects_empty_and_2d():
    with pytest.raises(ValueError):
        analysis.interquartile_mean(np.array([]))
    with pytest.raises(ValueError):
        analysis.interquartile_mean(np.ones((2, 2)))


# --- bootstrap_ci ---------------------------------------------------------------------


def test_bootstrap_ci_contains_estimate_and_is_deterministic():
    values = np.random.default_rng(1).normal(10.0, 2.0, size=20)
    low, high = analysis.bootstrap_ci(values, seed=3)
    assert low < analysis.interquartile_mean(values) < high
    assert analysis.bootstrap_ci(values, seed=3) == (low, high)
    assert analysis.bootstrap_ci(values, seed=4) != (low, high)


def test_bootstrap_ci_other_statistic_and_confidence():
    values = np.arange(30, dtype=float)
    narrow = analysis.bootstrap_ci(values, statistic=np.mean, confidence=0.5)
    wide = analysis.bootstrap_ci(values, statistic=np.mean, confidence=0.99)
    assert wide[0] < narrow[0] < np.mean(values) < narrow[1] < wide[1]


def test_bootstrap_ci_of_constant_is_a_point():
    assert analysis.bootstrap_ci(np.full(5, 7.0)) == (7.0, 7.0)


@pytest.mark.parametrize("kwargs", [{"confidence": 1.0}, {"confidence": 0.0}, {"num_resamples": 0}])
def test_bootstrap_ci_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        analysis.bootstrap_ci(np.arange(4.0), **kwargs)


# --- read_eval_log --------------------------------------------------------------------


def test_read_eval_log_round_trip(tmp_path):
    run = _write_run(tmp_path / "r", [0, 10], [1.5, 2.5])
    records = analysis.read_eval_log(run)
    assert records == [_record(0, 1.5), _record(10, 2.5)]


def test_read_eval_log_skips_truncated_last_line(tmp_path):
    run = _write_run(tmp_path / "r", [0, 10], [1.5, 2.5], tail='{"step": 20, "retu')
    assert [r["step"] for r in analysis.read_eval_log(run)] == [0, 10]


def test_read_eval_log_raises_on_corruption_before_last_line(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "eval.jsonl").write_text(
        json.dumps(_record(0, 1.0))
        + "\n"
        + '{"step": 10, "ret\n'
        + json.dumps(_record(20, 2.0))
        + "\n"
    )
    with pytest.raises(ValueError, match=r"eval\.jsonl line 2 is not JSON"):
        analysis.read_eval_log(str(run))


def test_read_eval_log_raises_on_missing_field(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "eval.jsonl").write_text('{"step": 0}\n' + json.dumps(_record(1, 1.0)) + "\n")
    with pytest.raises(ValueError, match=r"line 1: missing field\(s\) \['return_mean'\]"):
        analysis.read_eval_log(str(run))


def test_read_eval_log_missing_file_names_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        analysis.read_eval_log(str(tmp_path / "nowhere"))


# --- summarize_runs, aligned_curves ---------------------------------------------------


def test_summarize_runs_matches_files(tmp_path):
    run_dirs = _write_copies(tmp_path / "out", [10.0, 20.0, 60.0])
    # A truncated final line must not count as the final evaluation.
    _write_run(run_dirs[0], [0, 100, 200], [0.0, 5.0, 10.0], tail='{"step": 300')
    _write_run(run_dirs[1], [0, 100, 200], [0.0, 30.0, 20.0])  # its best is not its final
    summary = analysis.summarize_runs(run_dirs)
    assert summary["num_runs"] == 3
    assert summary["runs"] == [
        {"run_dir": run_dirs[0], "final_step": 200, "final_return": 10.0, "best_return": 10.0},
        {"run_dir": run_dirs[1], "final_step": 200, "final_return": 20.0, "best_return": 30.0},
        {"run_dir": run_dirs[2], "final_step": 200, "final_return": 60.0, "best_return": 60.0},
    ]
    assert summary["final_return_mean"] == 30.0
    assert summary["final_return_std"] == pytest.approx(math.sqrt((400 + 100 + 900) / 3))
    assert summary["final_return_iqm"] == pytest.approx(10 / 6 + 20 * 2 / 3 + 60 / 6)
    low, high = summary["final_return_iqm_ci"]
    assert 10.0 <= low <= summary["final_return_iqm"] <= high <= 60.0


def test_summarize_runs_rejects_empty_log(tmp_path):
    run = _write_run(tmp_path / "r", [], [])
    with pytest.raises(ValueError, match="no evaluations"):
        analysis.summarize_runs([run])


def test_aligned_curves_interpolates_on_common_range(tmp_path):
    a = _write_run(tmp_path / "a", [0, 100, 200, 300], [0.0, 10.0, 20.0, 30.0])
    b = _write_run(tmp_path / "b", [50, 150, 250], [5.0, 5.0, 25.0])
    steps, returns = analysis.aligned_curves([a, b])
    np.testing.assert_array_equal(steps, [50, 100, 150, 200, 250])
    np.testing.assert_allclose(
        returns, [[5.0, 10.0, 15.0, 20.0, 25.0], [5.0, 5.0, 5.0, 15.0, 25.0]]
    )


def test_aligned_curves_identical_grids_are_not_changed(tmp_path):
    run_dirs = _write_copies(tmp_path / "out", [4.0, 8.0])
    steps, returns = analysis.aligned_curves(run_dirs)
    np.testing.assert_array_equal(steps, [0, 100, 200])
    np.testing.assert_array_equal(returns, [[0.0, 2.0, 4.0], [0.0, 4.0, 8.0]])


def test_aligned_curves_rejects_disjoint_and_unordered(tmp_path):
    a = _write_run(tmp_path / "a", [0, 10], [0.0, 1.0])
    b = _write_run(tmp_path / "b", [20, 30], [0.0, 1.0])
    with pytest.raises(ValueError, match="do not overlap"):
        analysis.aligned_curves([a, b])
    c = _write_run(tmp_path / "c", [0, 10, 10], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="strictly increasing"):
        analysis.aligned_curves([c])


def test_find_runs_orders_copies_numerically(tmp_path):
    out = tmp_path / "out"
    run_dirs = _write_copies(out, [1.0] * 11)
    assert analysis.find_runs(str(out)) == run_dirs  # run_10 after run_2
    assert analysis.find_runs(run_dirs[3]) == [run_dirs[3]]
    with pytest.raises(FileNotFoundError):
        analysis.find_runs(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="neither"):
        analysis.find_runs(str(tmp_path))


# --- plots and files ------------------------------------------------------------------


def test_write_summary_writes_json_and_png(tmp_path):
    out = tmp_path / "out"
    run_dirs = _write_copies(out, [10.0, 20.0, 60.0, 30.0])
    summary = analysis.write_summary(str(out), run_dirs)
    with open(out / "summary.json") as f:
        assert json.load(f) == summary
    assert (out / "curves.png").read_bytes().startswith(PNG_MAGIC)
    assert sorted(os.listdir(out)) == [
        "curves.png",
        "run_0",
        "run_1",
        "run_2",
        "run_3",
        "summary.json",
    ]  # no temp files left behind


def test_plot_curves_failure_leaves_no_file(tmp_path):
    path = tmp_path / "curves.png"
    with pytest.raises(FileNotFoundError):
        analysis.plot_curves({"x": [str(tmp_path / "missing")]}, str(path))
    assert os.listdir(tmp_path) == []


def test_plot_script_writes_png_and_table(tmp_path, capsys):
    copies = tmp_path / "dqn"
    _write_copies(copies, [10.0, 20.0, 30.0])
    single = _write_run(tmp_path / "ppo", [0, 100, 200], [0.0, 1.0, 2.0])
    out = tmp_path / "plots" / "cmp.png"
    code = plot_script.main([str(copies), single, "--out", str(out), "--title", "t"])
    assert code == 0
    assert out.read_bytes().startswith(PNG_MAGIC)
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:2] == ["label", "runs"]
    assert table[1].startswith("dqn") and "20.00 ± 8.16" in table[1]
    assert table[2].split()[:2] == ["ppo", "1"]


def test_plot_script_custom_labels(tmp_path, capsys):
    a = _write_run(tmp_path / "a" / "run", [0, 1], [0.0, 1.0])
    b = _write_run(tmp_path / "b" / "run", [0, 1], [0.0, 2.0])
    out = str(tmp_path / "c.png")
    assert plot_script.main([a, b, "--out", out]) == 2  # both are labelled "run"
    assert "duplicate label" in capsys.readouterr().err
    assert plot_script.main([a, b, "--out", out, "--label", "A", "--label", "B"]) == 0
    assert plot_script.main([a, b, "--out", out, "--label", "A"]) == 2


def test_plot_script_bad_dir_exits_2_with_one_line(tmp_path, capsys):
    missing = str(tmp_path / "missing")
    assert plot_script.main([missing, "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and missing in err
    assert not os.path.exists(tmp_path / "c.png")


def test_plot_script_usage_error_returns_2(capsys):
    assert plot_script.main([]) == 2
    assert plot_script.main(["--help"]) == 0


def test_plot_script_writes_into_first_run_dir_by_default(tmp_path, monkeypatch, capsys):
    copies = tmp_path / "dqn"
    _write_copies(copies, [10.0, 20.0])
    single = _write_run(tmp_path / "ppo", [0, 100], [0.0, 1.0])
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert plot_script.main([str(copies), single]) == 0
    assert (copies / "curves.png").read_bytes().startswith(PNG_MAGIC)
    assert os.listdir(cwd) == []  # a checkout run from here stays clean
    assert not os.path.exists(os.path.join(single, "curves.png"))
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {copies / 'curves.png'}"
    other = tmp_path / "elsewhere.png"
    assert plot_script.main([str(copies), single, "--output", str(other)]) == 0
    assert other.read_bytes().startswith(PNG_MAGIC)


def test_plot_script_never_writes_over_a_file_that_is_not_an_image(tmp_path, capsys):
    run = _write_run(tmp_path / "run", [0, 100], [0.0, 1.0])
    log = os.path.join(run, "eval.jsonl")
    before = open(log, "rb").read()
    os.makedirs(log + ".png")  # a folder named like an image
    for output in (log, os.path.join(run, "notes"), log + ".png"):
        assert plot_script.main([run, "--output", output]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and output in err
        assert "name an image file ending in .png, .svg, .pdf" in err
    assert open(log, "rb").read() == before
    assert plot_script.main([run]) == 0  # the run still plots
    assert plot_script.main([run]) == 0  # over its earlier plot


def test_plot_is_written_in_the_format_its_suffix_names(tmp_path):
    run = _write_run(tmp_path / "run", [0, 100], [0.0, 1.0])
    analysis.plot_curves({"run": [run]}, str(tmp_path / "curves.svg"))
    assert b"<svg" in (tmp_path / "curves.svg").read_bytes()[:500]
    analysis.plot_curves({"run": [run]}, str(tmp_path / "CURVES.PDF"))
    assert (tmp_path / "CURVES.PDF").read_bytes().startswith(b"%PDF")


def test_plot_suffixes_are_formats_matplotlib_writes():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    supported = FigureCanvasAgg(Figure()).get_supported_filetypes()
    assert {suffix[1:] for suffix in analysis.PLOT_SUFFIXES} <= set(supported)


def test_copy_dirs_lists_only_run_folders_by_index(tmp_path):
    for name in ("run_10", "run_2", "run_x"):
        (tmp_path / name).mkdir()
    (tmp_path / "run_3").write_text("a file, not a copy")
    assert analysis.copy_dirs(str(tmp_path)) == [str(tmp_path / "run_2"), str(tmp_path / "run_10")]
    assert analysis.copy_dirs(str(tmp_path / "run_2")) == []
