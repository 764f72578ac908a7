"""Prints the shell commands that recreate a run's code and environment and rerun it.

Usage: python scripts/reproduce.py <output_dir> [--new_output_dir DIR] [--src_dir DIR]

Reads `<output_dir>/snapshot/` (written by `rl.snapshot.write_snapshot`) and prints, without
running or writing anything: a clone and checkout of the recorded commit, `git apply` of the
uncommitted changes, a venv with the recorded packages, and the recorded command with its
`--output_dir` pointing at a new directory.
"""

import argparse
import os
import shlex
import sys
from pathlib import Path

try:
    from rl.snapshot import DIFF_FILE, PACKAGES_FILE, read_snapshot
except ImportError:  # Run as `python scripts/reproduce.py` from a checkout not pip-installed.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rl.snapshot import DIFF_FILE, PACKAGES_FILE, read_snapshot

OUTPUT_DIR_FLAG = "--output_dir"


def replace_output_dir(argv: list[str], new_output_dir: str) -> list[str]:
    """Points every `--output_dir` in `argv` at `new_output_dir`, adding one if absent.

    Args:
      argv: command-line arguments, script first.
      new_output_dir: where the rerun should write.
    """
    out: list[str] = []
    found = False
    skip_next = False
    for i, arg in enumerate(argv):
        if skip_next:
            skip_next = False
            continue
        if arg.startswith(OUTPUT_DIR_FLAG + "="):
            out.append(f"{OUTPUT_DIR_FLAG}={new_output_dir}")
            found = True
        elif arg == OUTPUT_DIR_FLAG and i + 1 < len(argv):
            out.append(f"{OUTPUT_DIR_FLAG}={new_output_dir}")
            found = skip_next = True
        else:
            out.append(arg)
    if not found:
        # The run used the flag's default; a rerun must not write over the original.
        out.append(f"{OUTPUT_DIR_FLAG}={new_output_dir}")
    return out


def build_commands(
    output_dir: str, new_output_dir: str | None = None, src_dir: str | None = None
) -> list[str]:
    """The shell lines (commands and `#` comments) that reproduce the run in `output_dir`.

    Args:
      output_dir: the run's output directory, holding `snapshot/`.
      new_output_dir: where the rerun writes; defaults to `<output_dir>_reproduce`.
      src_dir: where the code is cloned; defaults to `<new_output_dir>_src`.

    Raises:
      FileNotFoundError: if the snapshot is missing.
    """
    output_dir = os.path.abspath(output_dir.rstrip(os.sep) or os.sep)
    snap = read_snapshot(output_dir)
    new_output_dir = os.path.abspath(new_output_dir or output_dir + "_reproduce")
    src_dir = os.path.abspath(src_dir or new_output_dir + "_src")
    git = snap["git"]
    lines = [f"# Reproduce the run in {output_dir}", "set -e"]
    lines += _checkout_lines(git, snap, src_dir)
    lines += _environment_lines(snap)
    lines += _run_lines(git, snap, new_output_dir)
    return lines


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
    """Lines that build a venv with the recorded Python and packages.

    Args:
      snap: the whole snapshot from `read_snapshot`.
    """
    q = shlex.quote
    version = snap["system"].get("python", {}).get("version", "")
    python = "python" + ".".join(version.split(".")[:2]) if version else "python3"
    lines = [
        f"# Recorded Python: {version or 'unknown'}",
        f"{python} -m venv .venv",
        ". .venv/bin/activate",
        f"pip install -r {q(os.path.join(snap['dir'], PACKAGES_FILE))}",
    ]
    local = [line[2:] for line in snap["packages"] if line.startswith("# ")]
    if local:
        lines.append(
            "# Installed from local directories, not in the pins above: " + "; ".join(local)
        )
    for name, value in sorted(snap["system"].get("env", {}).items()):
        lines.append(f"export {name}={q(value)}")
    return lines


def _run_lines(git: dict, snap: dict, new_output_dir: str) -> list[str]:
    """Lines that rerun the recorded command, writing to `new_output_dir`.

    Args:
      git: the snapshot's git.json.
      snap: the whole snapshot from `read_snapshot`.
      new_output_dir: where the rerun writes.
    """
    argv = list(snap["argv"])
    root = git.get("repo_root")
    cwd = (snap["resumes"] or [{}])[0].get("cwd")
    lines = []
    script = os.path.join(cwd or "", argv[0]) if argv else ""
    script = script if os.path.isabs(script) else None  # Unknown without the run's cwd.
    if root and cwd and _inside(cwd, root):
        # Run from the same place in the clone, so relative paths in flags still resolve.
        if os.path.relpath(cwd, root) != ".":
            lines.append(f"cd {shlex.quote(os.path.relpath(cwd, root))}")
        if script and _inside(script, root):
            argv[0] = os.path.relpath(script, cwd)
    elif root and script and _inside(script, root):
        argv[0] = os.path.relpath(script, root)  # The script now lives in the clone.
    lines.append(shlex.join(["python", *replace_output_dir(argv, new_output_dir)]))
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
        print(f"reproduce.py: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
