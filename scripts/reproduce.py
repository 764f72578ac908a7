"""Prints the shell commands that recreate a run's code and environment and rerun it.

Usage: python scripts/reproduce.py <output_dir> [--new_output_dir DIR] [--src_dir DIR]

`<output_dir>` is a run folder holding `snapshot/` (written by `rl.snapshot.write_snapshot`),
one copy `run_<i>` of a `--copies` run, or a whole `--copies` folder (its copies' snapshots
are read). Prints, without running or writing anything: a clone and checkout of the recorded
commit, `git apply` of the uncommitted changes, a venv with the recorded packages plus this
project installed from that checkout (never PyPI's unrelated `rl`), and the recorded command
with its `--output_dir` pointing at a new directory. A copy is retrained alone with its own
seed; a `--copies` folder is retrained whole. `--new_output_dir` and `--src_dir` must lie
outside the run; a damaged snapshot or such a folder gets one line and exit code 2.
"""

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

# The checkout's own `rl` first: an installed one (another checkout) may be older.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rl import analysis  # noqa: E402
from rl.errors import one_line  # noqa: E402
from rl.snapshot import DIFF_FILE, PACKAGES_FILE, SNAPSHOT_DIR, read_snapshot  # noqa: E402

# A packages.txt line pinning this project: snapshots written before the project was left
# out of packages.txt have `rl==0.1.0`, which pip would fetch from PyPI (another package).
_PROJECT_PIN = re.compile(r"rl(?![\w.-])", re.IGNORECASE)
# The same, as a grep -E pattern that filters those lines out.
_PROJECT_PIN_GREP = "^[Rr][Ll]([^[:alnum:]_.-]|$)"


def set_flag(argv: list[str], name: str, value: str | None) -> list[str]:
    """Replaces every `--name=v` / `--name v` in `argv` by one `--name=value`, or drops them.

    The new flag takes the place of the first old one, or goes last if there was none.
    absl also accepts a single dash, so `-name` counts too.

    Args:
      argv: command-line arguments, script first (never treated as a flag).
      name: the flag name, without dashes.
      value: the new value; None removes the flag.
    """
    forms = (f"--{name}", f"-{name}")
    out = argv[:1]
    position = None
    skip_next = False
    for arg in argv[1:]:
        if skip_next:
            skip_next = False
        elif arg in forms or arg.startswith(tuple(form + "=" for form in forms)):
            skip_next = "=" not in arg  # `--name v`: the value is the next argument.
            position = len(out) if position is None else position
        else:
            out.append(arg)
    if value is not None:
        out.insert(len(out) if position is None else position, f"--{name}={value}")
    return out


def single_run_argv(snap: dict, new_output_dir: str) -> list[str]:
    """The command line that retrains the run of `snap` alone into `new_output_dir`.

    A copy trained by `--copies N` one after another recorded the `--copies` command line
    (its flags say `copies > 1`); retraining just that copy means no `--copies` and the
    copy's own derived seed. A copy trained side by side recorded its own command already.

    Args:
      snap: the run's snapshot, from `read_snapshot`.
      new_output_dir: where the rerun writes.

    Raises:
      ValueError: if a copy's snapshot records no seed.
    """
    argv = set_flag(list(snap["argv"]), "output_dir", new_output_dir)
    if _copies_flag(snap) <= 1:
        return argv
    if "seed" not in snap["seeds"]:
        raise ValueError(f"{snap['dir']}: a --copies copy whose seeds.json has no seed")
    for name in ("copies", "copies_parallel"):
        argv = set_flag(argv, name, None)
    return set_flag(argv, "seed", str(snap["seeds"]["seed"]))


def _copies_run_lines(snaps: list[dict], new_output_dir: str) -> list[str]:
    """Lines that retrain a whole `--copies` folder into `new_output_dir`.

    Copies trained one after another each recorded the `--copies` command line: that one
    command is run (the newest copy's, as a later, larger `--copies` added it). Copies
    trained side by side (`--copies_parallel`) recorded only their own command, and not
    the base seed theirs were derived from: each copy is then retrained by its own command,
    with its own seed, into `<new_output_dir>/run_<i>`, and the summary written after.

    Args:
      snaps: the copies' snapshots, by copy index.
      new_output_dir: where the rerun writes.
    """
    recorded = [s for s in snaps if _copies_flag(s) > 1]
    if recorded:
        argv = set_flag(list(recorded[-1]["argv"]), "output_dir", new_output_dir)
        return _run_lines(recorded[-1], [argv])
    argvs = [single_run_argv(s, os.path.join(new_output_dir, _copy_name(s))) for s in snaps]
    new = json.dumps(new_output_dir)  # A Python string literal in double quotes.
    summary = f"from rl import analysis; analysis.write_summary({new}, analysis.find_runs({new}))"
    return [
        "# The copies ran side by side and recorded only their own commands: "
        "each is retrained alone, then summarised.",
        *_run_lines(snaps[0], argvs),
        shlex.join(["python", "-c", summary]),
    ]


def _copies_flag(snap: dict) -> int:
    """The `--copies` value the run's process was started with (1 for a lone run).

    Args:
      snap: a snapshot, from `read_snapshot`.
    """
    return int(snap["flags"].get("copies") or 1)


def _copy_name(snap: dict) -> str:
    """The `run_<i>` folder name of the copy whose snapshot this is.

    Args:
      snap: a copy's snapshot, from `read_snapshot`.
    """
    return os.path.basename(os.path.dirname(snap["dir"]))


def build_commands(
    output_dir: str, new_output_dir: str | None = None, src_dir: str | None = None
) -> list[str]:
    """The shell lines (commands and `#` comments) that reproduce the run in `output_dir`.

    Args:
      output_dir: the run's output directory, holding `snapshot/`, or a `--copies`
        output directory, holding `run_<i>/snapshot/`.
      new_output_dir: where the rerun writes; defaults to `<output_dir>_reproduce`.
      src_dir: where the code is cloned; defaults to `<new_output_dir>_src`.

    Raises:
      FileNotFoundError: if there is no snapshot (nor copies with one).
      ValueError: if a snapshot file is damaged, or the rerun would write into a file
        or into the run it reproduces.
    """
    output_dir = os.path.abspath(output_dir.rstrip(os.sep) or os.sep)
    new_output_dir = os.path.abspath(new_output_dir or output_dir + "_reproduce")
    src_dir = os.path.abspath(src_dir or new_output_dir + "_src")
    check_destination("new_output_dir", new_output_dir, output_dir)
    check_destination("src_dir", src_dir, output_dir)
    copies = _copies_with_snapshot(output_dir)
    snaps = [read_snapshot(d) for d in copies] or [read_snapshot(output_dir)]
    snap = snaps[0]
    if copies:
        lines = [f"# Reproduce the --copies run in {output_dir}", "set -e"]
        run = _copies_run_lines(snaps, new_output_dir)
    else:
        lines = [f"# Reproduce the run in {output_dir}"]
        if _copies_flag(snap) > 1:
            lines.append("# It is one copy of a --copies run: retrained alone, with its seed.")
        lines.append("set -e")
        run = _run_lines(snap, [single_run_argv(snap, new_output_dir)])
    lines += _checkout_lines(snap["git"], snap, src_dir)
    if any(
        (s["git"].get("commit"), s["git_diff"]) != (snap["git"].get("commit"), snap["git_diff"])
        for s in snaps
    ):
        lines.append(f"# Warning: the copies recorded different code; this is {snap['dir']}'s.")
    return lines + _environment_lines(snap) + run


def check_destination(flag: str, path: str, run_dir: str) -> None:
    """Refuses a place the printed commands would write that is a file or lies in `run_dir`.

    A retrain must never write into the run it reproduces: its checkpoints would mix
    with the run's own (or resume it), and a clone would dirty it.

    Args:
      flag: the option that named `path`, without dashes, for the message.
      path: an absolute path the commands write (a folder, new or not).
      run_dir: the absolute run (or `--copies`) folder being reproduced.

    Raises:
      ValueError: naming `path` and what is valid.
    """
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--{flag} {path} is a file; name a folder (new or not) outside {run_dir}")
    if _inside(os.path.realpath(path), os.path.realpath(run_dir)):
        raise ValueError(
            f"--{flag} {path} is in the run being reproduced ({run_dir}); name a folder outside it"
        )


def _copies_with_snapshot(output_dir: str) -> list[str]:
    """The `run_<i>` copies holding a snapshot, if `output_dir` is a `--copies` folder.

    Args:
      output_dir: an absolute directory; a run folder (with its own snapshot) has none.
    """
    if not os.path.isdir(output_dir) or os.path.isdir(os.path.join(output_dir, SNAPSHOT_DIR)):
        return []
    return [
        d for d in analysis.copy_dirs(output_dir) if os.path.isdir(os.path.join(d, SNAPSHOT_DIR))
    ]


def _checkout_lines(git: dict, snap: dict, src_dir: str) -> list[str]:
    """Lines that get the recorded code into `src_dir`.

    Args:
      git: the snapshot's git.json.
      snap: the whole snapshot from `read_snapshot`.
      src_dir: where the code goes.
    """
    q = shlex.quote
    if not git.get("in_git_repo"):
        return [
            "# The code was not in a git checkout when the run started "
            f"({git.get('error') or 'no git info'}); put it in {src_dir} by hand.",
            f"cd {q(src_dir)}",
        ]
    lines = []
    if git.get("remote_url"):
        lines.append(f"git clone {q(git['remote_url'])} {q(src_dir)}")
    else:
        lines.append(
            f"# No git remote was recorded: clone the repository at {git.get('repo_root')} instead."
        )
        lines.append(f"git clone {q(git.get('repo_root') or '<repository>')} {q(src_dir)}")
    lines.append(f"cd {q(src_dir)}")
    if git.get("commit"):
        if git.get("commit_on_remote") is False:
            lines.append(
                "# Warning: the commit was on no remote branch when the run started; push it first."
            )
        lines.append(f"git checkout {q(git['commit'])}")
    else:
        lines.append("# The repository had no commit yet: the patch below holds all the code.")
    if git.get("dirty") and snap["git_diff"]:
        lines.append(f"git apply {q(os.path.join(snap['dir'], DIFF_FILE))}")
    for skipped in git.get("untracked_skipped") or []:
        lines.append(f"# Not in the patch (too big, {skipped['bytes']} bytes): {skipped['path']}")
    return lines


def _environment_lines(snap: dict) -> list[str]:
    """Lines that build a venv with the recorded Python and packages, then this project.

    Run from the top of the clone. The project is installed from the checkout, without
    dependencies (the recorded pins are the environment), never by its name from PyPI.

    Args:
      snap: the whole snapshot from `read_snapshot`.
    """
    q = shlex.quote
    version = snap["system"].get("python", {}).get("version", "")
    python = "python" + ".".join(version.split(".")[:2]) if version else "python3"
    packages = os.path.join(snap["dir"], PACKAGES_FILE)
    lines = [f"# Recorded Python: {version or 'unknown'}", f"{python} -m venv .venv"]
    lines.append(". .venv/bin/activate")
    if any(_PROJECT_PIN.match(line) for line in snap["packages"]):
        lines.append("# The recorded pins name this project, which PyPI's `rl` is not: left out.")
        lines.append(f"grep -v -E {q(_PROJECT_PIN_GREP)} {q(packages)} > .venv/packages.txt")
        packages = ".venv/packages.txt"
    lines.append(f"pip install -r {q(packages)}")
    lines.append(f"pip install --no-deps -e {q(_project_dir_in_clone(snap['git']))}")
    local = [
        line[2:]
        for line in snap["packages"]
        if line.startswith("# ") and not _PROJECT_PIN.match(line[2:])
    ]
    if local:
        lines.append(
            "# Installed from local directories, not in the pins above: " + "; ".join(local)
        )
    for name, value in sorted(snap["system"].get("env", {}).items()):
        lines.append(f"export {name}={q(value)}")
    return lines


def _project_dir_in_clone(git: dict) -> str:
    """Where the project (the folder holding `rl/`) is, relative to the top of the clone.

    Args:
      git: the snapshot's git.json.
    """
    root, source = git.get("repo_root"), git.get("source_dir")
    if root and source and _inside(source, root):
        return os.path.relpath(source, root)
    return "."


def _run_lines(snap: dict, argvs: list[list[str]]) -> list[str]:
    """Lines that run `argvs` (the recorded command, edited) from the recorded place.

    Args:
      snap: the whole snapshot from `read_snapshot`; its git root, working directory
        and script say where in the clone to run.
      argvs: the command lines to run, script first.
    """
    git = snap["git"]
    root = git.get("repo_root")
    cwd = (snap["resumes"] or [{}])[0].get("cwd")
    lines = []
    recorded = snap["argv"][0] if snap["argv"] else ""
    script = os.path.join(cwd or "", recorded) if recorded else ""
    script = script if os.path.isabs(script) else None  # Unknown without the run's cwd.
    new_script = None
    if root and cwd and _inside(cwd, root):
        # Run from the same place in the clone, so relative paths in flags still resolve.
        if os.path.relpath(cwd, root) != ".":
            lines.append(f"cd {shlex.quote(os.path.relpath(cwd, root))}")
        if script and _inside(script, root):
            new_script = os.path.relpath(script, cwd)
    elif root and script and _inside(script, root):
        new_script = os.path.relpath(script, root)  # The script now lives in the clone.
    for argv in argvs:
        argv = [new_script or argv[0], *argv[1:]] if argv else argv
        lines.append(shlex.join(["python", *argv]))
    return lines


def _inside(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it.

    Args:
      path: an absolute path.
      root: an absolute directory.
    """
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(root)]) == os.path.abspath(
        root
    )


def main(argv: list[str] | None = None) -> int:
    """Prints the commands; returns the exit code.

    Args:
      argv: the arguments after the program name; defaults to `sys.argv[1:]`.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", help="the run's output directory, holding snapshot/")
    parser.add_argument(
        "--new_output_dir", help="where the rerun writes (default: <output_dir>_reproduce)"
    )
    parser.add_argument(
        "--src_dir", help="where the code is cloned (default: <new_output_dir>_src)"
    )
    args = parser.parse_args(argv)
    try:
        lines = build_commands(args.output_dir, args.new_output_dir, args.src_dir)
    except (FileNotFoundError, ValueError) as e:
        print(
            f"reproduce.py: error: {one_line(str(e))}", file=sys.stderr
        )  # train.py's one-line form
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
