"""Tests for rl.snapshot and scripts/reproduce.py, on throwaway git repos."""

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from rl import snapshot
from rl.logbook import read_eval_records

REPO_ROOT = Path(__file__).resolve().parent.parent
# Identity and signing are set per call so the machine's git config cannot break a commit.
GIT = [
    "git",
    "-c",
    "user.name=Test",
    "-c",
    "user.email=test@example.com",
    "-c",
    "commit.gpgsign=false",
]


def _load_reproduce() -> types.ModuleType:
    """Imports scripts/reproduce.py by path, as scripts/ is not a package."""
    spec = importlib.util.spec_from_file_location(
        "reproduce", REPO_ROOT / "scripts" / "reproduce.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reproduce = _load_reproduce()


def git(repo: Path, *args: str) -> str:
    """Runs git in `repo` and returns its stdout.

    Args:
      repo: the repository directory.
      args: git arguments.
    """
    return subprocess.run(
        [*GIT, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeps git from finding a repository above tmp_path or the user's config."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def dirty_repo(tmp_path: Path) -> Path:
    """A repo with one commit, a modified tracked file and an untracked .py file."""
    repo = tmp_path / "code"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text("print('v1')\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", "train.py", ".gitignore")
    git(repo, "commit", "-q", "-m", "first")
    git(repo, "remote", "add", "origin", "https://alice:s3cret@example.com/team/rl.git")
    (repo / "train.py").write_text("print('v2')\n")
    (repo / "new_algo.py").write_text("LR = 0.5\n")
    (repo / "ignored.log").write_text("noise\n")
    return repo


def snap(output_dir: Path, source_dir: Path, **overrides) -> str:
    """Calls write_snapshot with small fixed arguments, minus TensorFlow.

    Args:
      output_dir: the run's output directory.
      source_dir: the checkout whose state is recorded.
      overrides: write_snapshot arguments to change.
    """
    kwargs = dict(
        argv=["train.py", "--algo=dqn", f"--output_dir={output_dir}", "--note=two words"],
        flags={"algo": "dqn", "output_dir": str(output_dir)},
        hparams={"lr": 0.001, "hidden": [64, 64]},
        seeds={"seed": 7, "env_seed": 8},
        source_dir=str(source_dir),
        include_tf=False,
    )
    kwargs.update(overrides)
    return snapshot.write_snapshot(str(output_dir), **kwargs)


@pytest.mark.unit
def test_snapshot_records_dirty_checkout(dirty_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    index_before = (dirty_repo / ".git" / "index").read_bytes()
    snap_dir = Path(snap(out, dirty_repo))

    assert snap_dir == out / "snapshot"
    data = snapshot.read_snapshot(str(out))
    assert data["git"]["in_git_repo"] is True
    assert data["git"]["dirty"] is True
    assert data["git"]["commit"] == git(dirty_repo, "rev-parse", "HEAD").strip()
    assert data["git"]["branch"] == "main"
    assert data["git"]["repo_root"] == str(dirty_repo)
    assert data["git"]["remote_url"] == "https://example.com/team/rl.git"
    assert "+print('v2')" in data["git_diff"]
    assert "diff --git a/new_algo.py b/new_algo.py" in data["git_diff"]
    assert "+LR = 0.5" in data["git_diff"]
    assert "ignored.log" not in data["git_diff"]
    assert data["command"] == shlex.join(["python", *data["argv"]])
    assert data["argv"][-1] == "--note=two words"
    assert data["hparams"] == {"lr": 0.001, "hidden": [64, 64]}
    assert data["seeds"] == {"seed": 7, "env_seed": 8}
    assert data["flags"]["algo"] == "dqn"
    assert data["system"]["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert "tensorflow" not in data["system"]
    assert any(line.startswith("pytest==") for line in data["packages"])
    assert data["packages"][0] == (
        f"# rl (this project) is not pinned: its code is {dirty_repo} at the commit in "
        "git.json, plus git_diff.patch"
    )
    names = [
        line.lstrip("# ").split("=")[0].split(" ")[0].lower().replace("_", "-")
        for line in data["packages"][1:]
    ]
    assert names == sorted(names)
    assert [r["event"] for r in data["resumes"]] == ["start"]
    # The user's index is untouched: the untracked file is still untracked.
    assert (dirty_repo / ".git" / "index").read_bytes() == index_before
    assert "?? new_algo.py" in git(dirty_repo, "status", "--porcelain")
    assert not [p for p in snap_dir.iterdir() if p.name.startswith(".")]


@pytest.mark.unit
def test_patch_recreates_working_tree(dirty_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    data = snapshot.read_snapshot(os.path.dirname(snap(out, dirty_repo)))
    clone = tmp_path / "clone"
    subprocess.run([*GIT, "clone", "-q", str(dirty_repo), str(clone)], check=True)
    git(clone, "checkout", "-q", data["git"]["commit"])
    git(clone, "apply", str(out / "snapshot" / "git_diff.patch"))
    assert (clone / "train.py").read_text() == "print('v2')\n"
    assert (clone / "new_algo.py").read_text() == "LR = 0.5\n"


@pytest.mark.unit
def test_patch_has_a_change_made_in_the_second_of_the_commit(tmp_path: Path) -> None:
    # Same size, same second as the index entry: only git's racy-index check sees the
    # change, and it needs the index copy to keep the index's mtime.
    for attempt in range(10):
        repo = tmp_path / f"repo{attempt}"
        repo.mkdir()
        second = int(time.time())
        git(repo, "init", "-q", "-b", "main")
        (repo / "train.py").write_text("print('v1')\n")
        git(repo, "add", "train.py")
        git(repo, "commit", "-q", "-m", "first")
        (repo / "train.py").write_text("print('v2')\n")
        if int(time.time()) == second:
            break
    else:
        pytest.skip("could not commit and edit within one second")
    time.sleep(1.1)  # The index copy is now written in a later second.
    patch, _ = snapshot.git_diff(snapshot.git_info(str(repo)))
    assert "+print('v2')" in patch


@pytest.mark.unit
def test_resume_appends_and_keeps_files(dirty_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    snap_dir = Path(snap(out, dirty_repo))
    before = {p.name: p.read_bytes() for p in snap_dir.iterdir()}

    again = snap(
        out, dirty_repo, argv=["train.py", "--resume"], hparams={"lr": 9.0}, seeds={"seed": 1}
    )

    assert again == str(snap_dir)
    after = {p.name: p.read_bytes() for p in snap_dir.iterdir()}
    assert after.keys() == before.keys()
    for name in before:
        if name != "resumes.jsonl":
            assert after[name] == before[name], name
    assert after["resumes.jsonl"].startswith(before["resumes.jsonl"])
    events = [json.loads(line) for line in after["resumes.jsonl"].splitlines()]
    assert [e["event"] for e in events] == ["start", "resume"]
    assert events[1]["argv"] == ["train.py", "--resume"]
    assert events[1]["git_commit"] == git(dirty_repo, "rev-parse", "HEAD").strip()
    assert events[1]["dirty"] is True
    assert "T" in events[1]["time"]


@pytest.mark.unit
def test_output_dir_inside_checkout_is_left_out(tmp_path: Path) -> None:
    repo = tmp_path / "code"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("A = 1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "first")
    out = repo / "runs" / "r1"
    out.mkdir(parents=True)
    (out / "ckpt.bin").write_bytes(b"\0" * 100)

    snap(out, repo)
    snap(out, repo)

    data = snapshot.read_snapshot(str(out))
    assert data["git"]["dirty"] is False
    assert data["git_diff"] == ""
    assert [e["dirty"] for e in data["resumes"]] == [False, False]


@pytest.mark.unit
def test_big_untracked_file_is_listed_not_copied(
    dirty_repo: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(snapshot, "MAX_UNTRACKED_BYTES", 5)
    (dirty_repo / "big.py").write_text("X = 'far too long'\n")
    data = snapshot.read_snapshot(os.path.dirname(snap(tmp_path / "run", dirty_repo)))
    assert "big.py" not in data["git_diff"]
    assert {"path": "big.py", "bytes": 19} in data["git"]["untracked_skipped"]
    assert "+print('v2')" in data["git_diff"]


@pytest.mark.unit
def test_not_a_git_repo(tmp_path: Path) -> None:
    code = tmp_path / "plain"
    code.mkdir()
    data = snapshot.read_snapshot(os.path.dirname(snap(tmp_path / "run", code)))
    assert data["git"]["in_git_repo"] is False
    assert "error" in data["git"]
    assert data["git_diff"] == ""
    assert data["resumes"][0]["git_commit"] is None


@pytest.mark.unit
def test_git_not_installed(dirty_repo: Path, tmp_path: Path, monkeypatch) -> None:
    empty = tmp_path / "empty_path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    data = snapshot.read_snapshot(os.path.dirname(snap(tmp_path / "run", dirty_repo)))
    assert data["git"] == {
        "in_git_repo": False,
        "source_dir": str(dirty_repo),
        "error": "git is not installed",
    }


@pytest.mark.unit
def test_failed_write_leaves_no_snapshot(dirty_repo: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"

    def crash(path: str, text: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(snapshot, "write_text_atomic", crash)
    with pytest.raises(OSError, match="disk full"):
        snap(out, dirty_repo)
    assert os.listdir(out) == []


@pytest.mark.unit
def test_half_built_snapshot_is_replaced(dirty_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    stale = out / ".snapshot.build-123-dead"  # What a kill -9 mid-write leaves behind.
    stale.mkdir(parents=True)
    (stale / "flags.json").write_text("{")
    snap(out, dirty_repo)
    assert os.listdir(out) == ["snapshot"]
    assert [e["event"] for e in snapshot.read_snapshot(str(out))["resumes"]] == ["start"]


@pytest.mark.unit
def test_read_snapshot_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nope" / "snapshot")):
        snapshot.read_snapshot(str(tmp_path / "nope"))


@pytest.mark.unit
def test_tensorflow_info_with_fake_tf(monkeypatch) -> None:
    device = types.SimpleNamespace(name="/physical_device:GPU:0", device_type="GPU")
    config = types.SimpleNamespace(
        list_physical_devices=lambda kind=None: [device],
        experimental=types.SimpleNamespace(
            get_device_details=lambda d: {"device_name": "Fake A100"}
        ),
    )

    def broken_build_info() -> dict:
        raise RuntimeError("no build info")

    fake_tf = types.SimpleNamespace(
        __version__="9.9",
        config=config,
        sysconfig=types.SimpleNamespace(get_build_info=broken_build_info),
    )
    monkeypatch.setitem(sys.modules, "tensorflow", fake_tf)
    info = snapshot.tensorflow_info()
    assert info["version"] == "9.9"
    assert info["physical_devices"] == [{"name": "/physical_device:GPU:0", "device_type": "GPU"}]
    assert info["gpus"] == [{"name": "/physical_device:GPU:0", "device_name": "Fake A100"}]
    assert info["build_info"] == {"error": "RuntimeError: no build info"}


@pytest.mark.unit
def test_tensorflow_info_when_import_fails(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # Makes `import tensorflow` raise.
    assert "import of tensorflow halted" in snapshot.tensorflow_info()["error"]


@pytest.mark.unit
def test_reproduce_prints_checkout_and_new_command(
    dirty_repo: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    snap(out, dirty_repo)
    commit = git(dirty_repo, "rev-parse", "HEAD").strip()

    assert reproduce.main([str(out)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert f"git clone https://example.com/team/rl.git {tmp_path}/run_reproduce_src" in lines
    assert f"git checkout {commit}" in lines
    assert f"git apply {out}/snapshot/git_diff.patch" in lines
    assert f"pip install -r {out}/snapshot/packages.txt" in lines
    # The project comes from the checkout: PyPI's `rl` is an unrelated package.
    assert lines[lines.index(f"pip install -r {out}/snapshot/packages.txt") + 1] == (
        "pip install --no-deps -e ."
    )
    expected = [
        "python",
        "train.py",
        "--algo=dqn",
        f"--output_dir={tmp_path}/run_reproduce",
        "--note=two words",
    ]
    assert lines[-1] == shlex.join(expected)
    assert "s3cret" not in "\n".join(lines)


@pytest.mark.unit
def test_reproduce_runs_from_the_recorded_subdirectory(
    dirty_repo: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    (dirty_repo / "sub").mkdir()
    monkeypatch.chdir(dirty_repo / "sub")
    out = tmp_path / "run"
    snap(out, dirty_repo, argv=[str(dirty_repo / "train.py"), "--output_dir", str(out)])

    assert reproduce.main([str(out), "--new_output_dir", str(tmp_path / "again")]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == ["cd sub", f"python ../train.py --output_dir={tmp_path}/again"]


@pytest.mark.unit
def test_files_follow_umask(dirty_repo: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        snap_dir = Path(snap(tmp_path / "run", dirty_repo))
    finally:
        os.umask(old)
    assert snap_dir.stat().st_mode & 0o777 == 0o755
    assert (snap_dir / "flags.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.unit
def test_set_flag_forms() -> None:
    argv = ["t.py", "--output_dir", "/a", "--x=1", "-output_dir=/c", "--output_dir_2=/d"]
    assert reproduce.set_flag(argv, "output_dir", "/b") == [
        "t.py",
        "--output_dir=/b",
        "--x=1",
        "--output_dir_2=/d",
    ]
    assert reproduce.set_flag(["t.py", "--x=1"], "output_dir", "/b") == [
        "t.py",
        "--x=1",
        "--output_dir=/b",
    ]
    assert reproduce.set_flag(["t.py", "--copies", "3", "--x=1"], "copies", None) == [
        "t.py",
        "--x=1",
    ]
    # The script itself is never read as a flag.
    assert reproduce.set_flag(["--seed=1"], "seed", "2") == ["--seed=1", "--seed=2"]


def names_the_project(line: str) -> bool:
    """Whether a packages.txt line pins a distribution named exactly rl (not rlcard, rlax)."""
    return re.match(r"^[#\s]*rl\s*(==|@|$)", line, re.IGNORECASE) is not None


@pytest.mark.unit
def test_packages_never_pin_the_project(tmp_path: Path, monkeypatch) -> None:
    # Run from a checkout's root, setup.py's rl.egg-info is the first `rl` metadata found.
    egg_info = tmp_path / "checkout" / "rl.egg-info"
    egg_info.mkdir(parents=True)
    (egg_info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: rl\nVersion: 0.1.0\n")
    monkeypatch.chdir(tmp_path / "checkout")
    monkeypatch.syspath_prepend(str(tmp_path / "checkout"))
    assert "rl" in [d.metadata["Name"] for d in snapshot.importlib.metadata.distributions()]

    lines = snapshot.packages_text("/src/of/rl").splitlines()

    assert lines[0].startswith("# rl (this project) is not pinned: its code is /src/of/rl ")
    assert [line for line in lines[1:] if names_the_project(line)] == []
    assert any(line.startswith("pytest==") for line in lines)


@pytest.mark.process
def test_reproduce_leaves_out_a_recorded_project_pin(
    dirty_repo: Path, tmp_path: Path, capsys
) -> None:
    # Snapshots written before the fix pinned rl==0.1.0, which is PyPI's unrelated rl.
    out = tmp_path / "run"
    snap(out, dirty_repo)
    legacy = "rl==0.1.0\nrl @ file:///x\nrlax==0.1.6\nrl-zoo==2.0\nRL==1\npytest==8.0\n"
    (out / "snapshot" / "packages.txt").write_text(legacy)

    assert reproduce.main([str(out)]) == 0

    lines = capsys.readouterr().out.splitlines()
    grep = next(line for line in lines if line.startswith("grep "))
    assert lines[lines.index(grep) + 1 :][:2] == [
        "pip install -r .venv/packages.txt",
        "pip install --no-deps -e .",
    ]
    (tmp_path / ".venv").mkdir()
    subprocess.run(["bash", "-c", grep], cwd=tmp_path, check=True)
    kept = (tmp_path / ".venv" / "packages.txt").read_text()
    assert kept == "rlax==0.1.6\nrl-zoo==2.0\npytest==8.0\n"


@pytest.mark.unit
def test_reproduce_retrains_one_copy_alone(dirty_repo: Path, tmp_path: Path, capsys) -> None:
    # A copy trained one after another by --copies recorded the --copies command line.
    copy = tmp_path / "x5" / "run_3"
    argv = ["train.py", "--hparams=ppo_tiny", "--copies", "5", "--copies_parallel=1"]
    argv += ["--output_dir", str(tmp_path / "x5"), "--seed=1"]
    snap(copy, dirty_repo, argv=argv, flags={"copies": 5, "seed": 1}, seeds={"seed": 123})

    assert reproduce.main([str(copy)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[-1] == f"python train.py --hparams=ppo_tiny --output_dir={copy}_reproduce --seed=123"
    )
    assert "one copy of a --copies run" in lines[1]


@pytest.mark.unit
def test_reproduce_missing_snapshot(tmp_path: Path, capsys) -> None:
    assert reproduce.main([str(tmp_path / "nothing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert str(tmp_path / "nothing") in captured.err


def refused_in_one_line(argv: list[str], capsys) -> str:
    """reproduce.py's one error line for `argv`, after checking it exits 2 and prints nothing.

    Args:
      argv: reproduce.py's arguments.
      capsys: pytest's capture of this test's output.
    """
    assert reproduce.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("reproduce.py: error: "), captured.err
    return lines[0]


@pytest.mark.unit
@pytest.mark.parametrize(
    "name, content, kind",
    [
        ("git.json", "null", "null"),
        ("flags.json", "[]", "an array"),
        ("seeds.json", '"7"', "a string"),
        ("hparams.json", "1", "a number"),
        ("system.json", "true", "a boolean"),
    ],
)
def test_reproduce_names_a_snapshot_file_of_the_wrong_json_type(
    dirty_repo: Path, tmp_path: Path, capsys, name: str, content: str, kind: str
) -> None:
    out = tmp_path / "run"
    (Path(snap(out, dirty_repo)) / name).write_text(content + "\n")
    line = refused_in_one_line([str(out)], capsys)
    assert f"{out / 'snapshot' / name} holds {kind}; it must hold a JSON object" in line


@pytest.mark.unit
def test_reproduce_names_a_snapshot_file_that_is_not_json(
    dirty_repo: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    (Path(snap(out, dirty_repo)) / "flags.json").write_text('{"algo": "dq')
    line = refused_in_one_line([str(out)], capsys)
    assert f"{out / 'snapshot' / 'flags.json'} is not JSON (Unterminated string" in line


@pytest.mark.unit
@pytest.mark.parametrize("command", ["", "python\n", 'python "train.py\n'])
def test_reproduce_refuses_a_command_txt_without_a_script(
    dirty_repo: Path, tmp_path: Path, capsys, command: str
) -> None:
    out = tmp_path / "run"
    (Path(snap(out, dirty_repo)) / "command.txt").write_text(command)
    line = refused_in_one_line([str(out)], capsys)
    assert str(out / "snapshot" / "command.txt") in line
    assert "it must hold the run's command, e.g. python train.py" in line


@pytest.mark.unit
def test_resumes_log_skips_a_line_a_kill_cut_short_as_a_resume_does(
    dirty_repo: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    resumes = Path(snap(out, dirty_repo)) / "resumes.jsonl"
    cut = '{"event": "resume", "ti'  # a kill -9 in the middle of a line
    with open(resumes, "a", encoding="utf-8") as f:
        f.write(cut)

    assert reproduce.main([str(out)]) == 0
    assert [e["event"] for e in snapshot.read_snapshot(str(out))["resumes"]] == ["start"]
    capsys.readouterr()
    snap(out, dirty_repo, argv=["train.py", "--resume"])  # the resume drops the cut line
    said = f"rl: dropped the last line of {resumes}, cut short ({len(cut)} bytes without a newline)"
    assert capsys.readouterr().err.splitlines().count(said) == 1
    assert [e["event"] for e in snapshot.read_snapshot(str(out))["resumes"]] == [
        "start",
        "resume",
    ]
    capsys.readouterr()
    with open(resumes, "a", encoding="utf-8") as f:
        f.write("[1]\n")  # a complete line that is no event is still refused
    line = refused_in_one_line([str(out)], capsys)
    assert f"{resumes} line 3 is not a JSON object; each line must be a JSON object" in line


@pytest.mark.unit
@pytest.mark.parametrize("where", ["run", "run/again", "a_file"])
def test_reproduce_refuses_a_new_output_dir_in_the_run_or_on_a_file(
    dirty_repo: Path, tmp_path: Path, capsys, where: str
) -> None:
    out = tmp_path / "run"
    snap(out, dirty_repo)
    (tmp_path / "a_file").write_text("kept\n")
    before = {
        p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts
    }

    line = refused_in_one_line([str(out), "--new_output_dir", str(tmp_path / where)], capsys)
    valid = (
        "is a file; name a folder"
        if where == "a_file"
        else f"is in the run being reproduced ({out})"
    )
    assert f"--new_output_dir {tmp_path / where} {valid}" in line
    after = {
        p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    assert after == before


@pytest.mark.unit
def test_reproduce_refuses_a_src_dir_in_the_run(dirty_repo: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    snap(out, dirty_repo)
    line = refused_in_one_line([str(out), "--src_dir", str(out / "code")], capsys)
    assert f"--src_dir {out / 'code'} is in the run being reproduced" in line


# --- real train.py runs ----------------------------------------------------------------


def _train(*args: str) -> None:
    """Runs train.py from the repo root, as a user would, and checks it succeeded.

    Args:
      args: train.py flags.
    """
    subprocess.run(
        [sys.executable, "train.py", *args], cwd=REPO_ROOT, check=True, capture_output=True
    )


def _run_printed(lines: list[str]) -> None:
    """Runs printed command lines in the repo root, which stands for the clone.

    Args:
      lines: lines of reproduce.py's output; `python` stands for this interpreter.
    """
    script = "\n".join(["set -e", 'python() { "$PY" "$@"; }', *lines])
    env = {**os.environ, "PY": sys.executable}
    subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, env=env, check=True, capture_output=True)


def _after_setup(lines: list[str]) -> list[str]:
    """The lines after the environment set-up (packages, then recorded variables such as
    the thread counts of copies side by side): the ones that train.

    Args:
      lines: reproduce.py's output.
    """
    setup = ("pip install", "export ")
    return lines[max(i for i, line in enumerate(lines) if line.startswith(setup)) + 1 :]


def _returns(run_dir: Path) -> list:
    """Every evaluation's step and episode returns of a run.

    Args:
      run_dir: a run folder holding eval.jsonl.
    """
    return [(r["step"], r["returns"]) for r in read_eval_records(str(run_dir / "eval.jsonl"))]


@pytest.mark.process
def test_real_copies_folder_reproduces_with_its_copies_command(
    copies_runs: Path, tmp_path: Path, capsys
) -> None:
    again = tmp_path / "again"
    assert reproduce.main([str(copies_runs / "seq"), "--new_output_dir", str(again)]) == 0

    lines = capsys.readouterr().out.splitlines()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    assert f"git checkout {head}" in lines
    assert "pip install --no-deps -e ." in lines
    assert lines[-1] == f"python train.py --hparams=ppo_tiny --copies=2 --output_dir={again}"
    # Whatever rl the venv's metadata names, the snapshot names the code that ran.
    packages = (copies_runs / "seq" / "run_0" / "snapshot" / "packages.txt").read_text()
    assert packages.startswith(f"# rl (this project) is not pinned: its code is {REPO_ROOT} ")
    assert [line for line in packages.splitlines()[1:] if names_the_project(line)] == []


@pytest.mark.process
def test_real_copy_is_retrained_alone_with_its_seed(
    copies_runs: Path, tmp_path: Path, capsys
) -> None:
    copy = copies_runs / "seq" / "run_1"
    again = tmp_path / "run_1_again"
    seed = json.loads((copy / "snapshot" / "seeds.json").read_text())["seed"]
    assert reproduce.main([str(copy), "--new_output_dir", str(again)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"python train.py --hparams=ppo_tiny --output_dir={again} --seed={seed}"
    _run_printed(_after_setup(lines))
    assert sorted(os.listdir(again)) == [
        "best",
        "checkpoints",
        "eval.jsonl",
        "hparams.json",
        "policies",
        "snapshot",
        "tb",
        "train.lock",
    ]
    assert _returns(again) == _returns(copy)


@pytest.mark.process
def test_real_parallel_copies_folder_is_retrained_copy_by_copy(
    copies_runs: Path, tmp_path: Path, capsys
) -> None:
    # Copies side by side record only their own command (and not the base seed).
    par = copies_runs / "par"
    again = tmp_path / "again"
    assert reproduce.main([str(par), "--new_output_dir", str(again)]) == 0

    out = capsys.readouterr().out.splitlines()
    # Each copy's share of the CPUs is part of the environment it ran in.
    assert any(line.startswith("export TF_NUM_INTRAOP_THREADS=") for line in out)
    lines = _after_setup(out)
    assert lines[0].startswith("# The copies ran side by side")
    assert len(lines) == 4
    for i, line in enumerate(lines[1:3]):
        seed = json.loads((par / f"run_{i}" / "snapshot" / "seeds.json").read_text())["seed"]
        assert line.startswith("python train.py --hparams=ppo_tiny ")
        assert line.endswith(f" --output_dir={again}/run_{i} --seed={seed}")
        assert "--copies" not in line
    # The retrained copies are what test_real_copy_is_retrained_alone_with_its_seed checks;
    # here copies of the originals stand in for them, to check the summary line.
    for i in range(2):
        shutil.copytree(par / f"run_{i}", again / f"run_{i}")
    _run_printed(lines[3:])
    old, new = (json.loads((d / "summary.json").read_text()) for d in (par, again))
    assert [r["final_return"] for r in new["runs"]] == [r["final_return"] for r in old["runs"]]
    assert (again / "curves.png").is_file()
