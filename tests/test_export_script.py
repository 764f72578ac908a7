"""scripts/export.py's answers to a bad --export_dir (in-process; the export itself is
tested as a user runs it in test_run_modes.py)."""

import importlib.util
import os

import pytest

from rl.cli import flag_table

pytestmark = pytest.mark.process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_export_script():
    """Imports scripts/export.py, which is not in a package, as a module."""
    spec = importlib.util.spec_from_file_location(
        "export_script", os.path.join(ROOT, "scripts", "export.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


export_script = _load_export_script()


def refused_in_one_line(argv, capsys, monkeypatch) -> str:
    """export.py's one error line for ``argv``, after checking it exits 2.

    Args:
      argv: export.py's arguments.
      capsys: pytest's capture of this test's output.
      monkeypatch: restores flag_table.PROG, which export.py sets for its messages.
    """
    monkeypatch.setattr(flag_table, "PROG", flag_table.PROG)
    with pytest.raises(SystemExit) as exit_info:
        export_script.main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("export.py: error: "), lines
    return lines[0]


def test_an_export_dir_under_a_file_is_refused_in_one_line(
    copies_runs, tmp_path, capsys, monkeypatch
):
    run = copies_runs / "seq" / "run_0"  # a trained ppo_tiny run, read only
    a_file = tmp_path / "a_file"
    a_file.write_text("kept\n")
    line = refused_in_one_line([str(run), "--export_dir", str(a_file / "x")], capsys, monkeypatch)
    assert f"--export_dir {a_file / 'x'}: {a_file} is a file, not a folder; name a folder" in line
    assert a_file.read_text() == "kept\n"
    assert not (run / "export").exists()


def test_an_existing_export_dir_is_refused_in_one_line(copies_runs, tmp_path, capsys, monkeypatch):
    run = copies_runs / "seq" / "run_0"
    line = refused_in_one_line([str(run), "--export_dir", str(tmp_path)], capsys, monkeypatch)
    assert f"{tmp_path} exists already; choose another --export_dir" in line
    assert os.listdir(tmp_path) == []
