"""Reproducibility snapshots: what was run, with which code, on which machine.

`write_snapshot` is called by train.py at the start of every run. The first call for an
output dir writes `<output_dir>/snapshot/`:

  command.txt      the command line, shell-quoted
  flags.json       the flags
  hparams.json     the resolved hparams
  seeds.json       every seed
  git.json         commit, branch, dirty flag, repo root and remote of the code's checkout
  git_diff.patch   uncommitted changes against HEAD, untracked (not ignored) files included
  packages.txt     installed distributions, one pip requirement a line; never `rl` itself
                   (PyPI's `rl` is another project): a comment names where it was imported from
  system.json      Python, OS, CPU, memory and what TensorFlow reports
  resumes.jsonl    one line per start or resume of the run

A later call (a resumed run) keeps every file and appends one line to resumes.jsonl.
`scripts/reproduce.py` turns a snapshot back into shell commands.
"""

import datetime
import importlib.metadata
import json
import os
import platform
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from typing import Any

from rl._tf import import_tensorflow_quietly
from rl.files import fsync_dir, read_json_object, write_text_atomic
from rl.processes import usable_cpus

SNAPSHOT_DIR = "snapshot"
COMMAND_FILE = "command.txt"
FLAGS_FILE = "flags.json"
HPARAMS_FILE = "hparams.json"
SEEDS_FILE = "seeds.json"
GIT_FILE = "git.json"
DIFF_FILE = "git_diff.patch"
PACKAGES_FILE = "packages.txt"
SYSTEM_FILE = "system.json"
RESUMES_FILE = "resumes.jsonl"
# This project's distribution name (setup.py). On PyPI the name belongs to an unrelated
# package, so the snapshot records our code by git commit and patch, never by a pin.
PROJECT_DISTRIBUTION = "rl"
# What command.txt must hold, for the error that finds it damaged.
_COMMAND_RULE = "it must hold the run's command, e.g. python train.py --hparams=ppo_cartpole"

# Prefix of the directory a snapshot is built in before it is renamed into place.
BUILD_PREFIX = ".snapshot.build-"
GIT_TIMEOUT_S = 30.0
# An untracked file bigger than this (a stray checkpoint, a dataset) is listed in git.json
# instead of being copied into the patch.
MAX_UNTRACKED_BYTES = 10 * 1024 * 1024
# Environment variables that change what a TF run computes or where it runs.
_ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "PYTHONHASHSEED",
    "TF_CUDNN_DETERMINISTIC",
    "TF_DETERMINISTIC_OPS",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_NUM_INTEROP_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_XLA_FLAGS",
)


def write_snapshot(
    output_dir: str,
    argv: list[str],
    flags: dict,
    hparams: dict,
    seeds: dict,
    source_dir: str | None = None,
    include_tf: bool = True,
) -> str:
    """Records how this run was started; on a resumed run, appends a resume event.

    Args:
      output_dir: the run's output directory; the snapshot goes in its `snapshot/`.
      argv: the command-line arguments, script first (`sys.argv`).
      flags: the parsed flags, name to value.
      hparams: the resolved hparams, name to value.
      seeds: every seed the run uses, name to value.
      source_dir: the project directory of the code being run (inside its git checkout);
        defaults to the directory holding the imported `rl` package, which stays right
        when an `rl.egg-info` in the current directory or an install elsewhere would
        point importlib.metadata at another copy.
      include_tf: whether system.json asks TensorFlow about devices and its build.

    Returns:
      The path of the snapshot directory.
    """
    source_dir = source_dir or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    snapshot_dir = os.path.join(output_dir, SNAPSHOT_DIR)
    if os.path.isdir(snapshot_dir):
        _append_event(snapshot_dir, "resume", argv, git_info(source_dir, output_dir))
        return snapshot_dir

    os.makedirs(output_dir, exist_ok=True)
    _remove_stale_builds(output_dir)
    git = git_info(source_dir, output_dir)
    patch, diff_notes = git_diff(git, output_dir)
    git.update(diff_notes)
    files = {
        COMMAND_FILE: shlex.join(["python", *argv]) + "\n",
        FLAGS_FILE: _to_json(flags),
        HPARAMS_FILE: _to_json(hparams),
        SEEDS_FILE: _to_json(seeds),
        GIT_FILE: _to_json(git),
        DIFF_FILE: patch,
        PACKAGES_FILE: packages_text(source_dir),
        SYSTEM_FILE: _to_json(system_info(include_tf)),
        RESUMES_FILE: _event_line("start", argv, git),
    }
    # Built aside and renamed in one step, so a killed process never leaves a snapshot
    # that a resume would mistake for a complete one.
    build_dir = os.path.join(output_dir, f"{BUILD_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    os.mkdir(build_dir)  # Not mkdtemp: its 0700 mode would ignore the user's umask.
    try:
        for name, content in files.items():
            write_text_atomic(os.path.join(build_dir, name), content)
        os.rename(build_dir, snapshot_dir)
    except OSError:
        shutil.rmtree(build_dir, ignore_errors=True)
        if not os.path.isdir(snapshot_dir):
            raise
        # Another process with the same output dir won the race: count this as a resume.
        _append_event(snapshot_dir, "resume", argv, git)
    except BaseException:
        shutil.rmtree(build_dir, ignore_errors=True)
        raise
    fsync_dir(output_dir)
    return snapshot_dir


def read_snapshot(output_dir: str) -> dict:
    """Loads the snapshot written by `write_snapshot`.

    Args:
      output_dir: the run's output directory (the one holding `snapshot/`).

    Returns:
      A dict with keys `dir`, `command` (str), `argv` (list), `flags`, `hparams`,
      `seeds`, `git`, `system` (dicts), `git_diff` (str), `packages` (list of lines)
      and `resumes` (list of event dicts).

    Raises:
      FileNotFoundError: naming the missing snapshot directory or file.
      ValueError: naming a damaged file and what it must hold.
    """
    snapshot_dir = os.path.join(output_dir, SNAPSHOT_DIR)
    if not os.path.isdir(snapshot_dir):
        raise FileNotFoundError(f"no snapshot directory at {snapshot_dir}")
    command, argv = _read_command(snapshot_dir)
    return {
        "dir": snapshot_dir,
        "command": command,
        "argv": argv,
        "flags": _read_json_object(snapshot_dir, FLAGS_FILE),
        "hparams": _read_json_object(snapshot_dir, HPARAMS_FILE),
        "seeds": _read_json_object(snapshot_dir, SEEDS_FILE),
        "git": _read_json_object(snapshot_dir, GIT_FILE),
        "git_diff": _read_text(snapshot_dir, DIFF_FILE),
        "packages": _read_text(snapshot_dir, PACKAGES_FILE).splitlines(),
        "system": _read_json_object(snapshot_dir, SYSTEM_FILE),
        "resumes": _read_resumes(snapshot_dir),
    }


def _snapshot_file(snapshot_dir: str, name: str) -> str:
    """The path of snapshot file `name`.

    Raises:
      FileNotFoundError: naming the file, if it is missing.
    """
    path = os.path.join(snapshot_dir, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"snapshot file missing: {path}")
    return path


def _read_text(snapshot_dir: str, name: str) -> str:
    """The text of snapshot file `name`."""
    # Patches may hold non-UTF-8 bytes; keep them readable rather than fail.
    with open(_snapshot_file(snapshot_dir, name), encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def _read_command(snapshot_dir: str) -> tuple[str, list[str]]:
    """command.txt's command line, and its arguments after `python`.

    Raises:
      ValueError: naming the file, if it holds no script to run.
    """
    path = os.path.join(snapshot_dir, COMMAND_FILE)
    command = _read_text(snapshot_dir, COMMAND_FILE).strip()
    try:
        words = shlex.split(command)
    except ValueError as e:  # an unclosed quote
        raise ValueError(f"{path} is not a shell command line ({e}); {_COMMAND_RULE}") from None
    if len(words) < 2:
        raise ValueError(f"{path} names no script to run; {_COMMAND_RULE}")
    return command, words[1:]


def _read_json_object(snapshot_dir: str, name: str) -> dict:
    """The JSON object in snapshot file `name`.

    Raises:
      FileNotFoundError: naming the file, if it is missing.
      ValueError: naming the file, if it is not JSON or holds another JSON type.
    """
    return read_json_object(_snapshot_file(snapshot_dir, name))


def _read_resumes(snapshot_dir: str) -> list[dict]:
    """The events of resumes.jsonl; a last line a kill cut short is skipped, as
    `_append_event` drops it (the logbook's policy for every JSON-lines log).

    Raises:
      ValueError: naming the file and a complete line that is not a JSON object.
    """
    # Imported here: rl.logbook loads TensorBoard, which train.py's early checks
    # (they import this module for its file names) do without.
    from rl.logbook import parse_json_lines

    path = _snapshot_file(snapshot_dir, RESUMES_FILE)
    rule = "each line must be a JSON object (fix or delete that line)"
    return [event for _, event in parse_json_lines(path, lambda event: None, rule)]


# --- git ---------------------------------------------------------------------------------


def git_info(source_dir: str, output_dir: str | None = None) -> dict:
    """Describes the git checkout holding `source_dir`; never raises.

    Args:
      source_dir: any directory inside the checkout.
      output_dir: the run's output dir; if inside the checkout it does not count as a
        change (a run's own files would otherwise make every resume look dirty).

    Returns:
      `{"in_git_repo": False, "source_dir": ..., "error": ...}` outside a checkout (or
      without git), else `in_git_repo`, `repo_root`, `source_dir`, `commit`, `branch`, `dirty`, `remote_name`,
      `remote_url`, `commit_on_remote` and `errors` (git calls that failed).
    """
    root, error = _git(["rev-parse", "--show-toplevel"], source_dir)
    if root is None:
        return {"in_git_repo": False, "source_dir": os.path.abspath(source_dir), "error": error}
    root = root.strip()
    errors: list[str] = []

    def run(args: list[str]) -> str | None:
        out, err = _git(args, root)
        if out is None:
            errors.append(f"git {' '.join(args)}: {err}")
        return None if out is None else out.strip()

    # A repo with no commit yet has no HEAD; that is a state, not an error.
    commit, _ = _git(["rev-parse", "--verify", "-q", "HEAD"], root)
    commit = commit.strip() if commit else None
    branch, _ = _git(["symbolic-ref", "--short", "-q", "HEAD"], root)
    status = run(
        ["status", "--porcelain", "--untracked-files=normal", "--", *_pathspec(root, output_dir)]
    )
    remote_name, remote_url = _remote(root)
    on_remote = None
    if commit and remote_name:
        contains = run(["branch", "-r", "--contains", commit, "--format=%(refname)"])
        on_remote = None if contains is None else bool(contains)
    return {
        "in_git_repo": True,
        "repo_root": root,
        "source_dir": os.path.abspath(source_dir),
        "commit": commit,
        "branch": branch.strip() if branch else None,
        "dirty": None if status is None else bool(status),
        "remote_name": remote_name,
        "remote_url": remote_url,
        "commit_on_remote": on_remote,
        "errors": errors,
    }


def git_diff(git: dict, output_dir: str | None = None) -> tuple[str, dict]:
    """Renders uncommitted changes, untracked files included, as one patch against HEAD.

    Untracked files are marked intent-to-add in a temporary copy of the index, so the
    user's real index is never written.

    Args:
      git: the result of `git_info`.
      output_dir: the run's output dir; left out of the patch if inside the checkout.

    Returns:
      The patch text (empty when clean or not in a repo) and notes for git.json:
      `untracked_skipped` (files too big to include) and `diff_error` if any.
    """
    if not git.get("in_git_repo"):
        return "", {}
    root = git["repo_root"]
    spec = _pathspec(root, output_dir)
    base = git["commit"]
    if base is None:
        base, err = _git(["hash-object", "-t", "tree", "/dev/null"], root)
        if base is None:
            return "", {"diff_error": err}
        base = base.strip()
    index_path, err = _git(["rev-parse", "--git-path", "index"], root)
    if index_path is None:
        return "", {"diff_error": err}
    index_path = os.path.join(root, index_path.strip())  # Relative to root unless absolute.
    with tempfile.TemporaryDirectory(prefix="rl-snapshot-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        if os.path.isfile(index_path):
            # A copy keeps the stat cache, so git need not re-hash every tracked file. It
            # keeps the index's mtime too: git re-reads a file changed in the same second as
            # the index was written only if the index looks that old (racy git).
            shutil.copy2(index_path, env["GIT_INDEX_FILE"])
        listed, err = _git(
            ["ls-files", "-z", "--others", "--exclude-standard", "--", *spec], root, env
        )
        if listed is None:
            return "", {"diff_error": err}
        untracked, skipped = _split_by_size(root, [p for p in listed.split("\0") if p])
        if untracked:
            _, err = _git(
                [
                    "--literal-pathspecs",
                    "add",
                    "--intent-to-add",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                root,
                env,
                stdin="\0".join(untracked),
            )
            if err is not None:
                return "", {"diff_error": err, "untracked_skipped": skipped}
        diff_args = [
            "diff",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-relative",
        ]
        # Fixed prefixes keep the patch appliable whatever diff.noprefix says.
        diff_args += ["--src-prefix=a/", "--dst-prefix=b/", base, "--", *spec]
        patch, err = _git(diff_args, root, env, timeout=4 * GIT_TIMEOUT_S)
    notes: dict[str, Any] = {"untracked_skipped": skipped}
    if patch is None:
        notes["diff_error"] = err
    return patch or "", notes


def _git(
    args: list[str],
    cwd: str,
    extra_env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> tuple[str | None, str | None]:
    """Runs git; returns (stdout, None) on success and (None, error message) otherwise.

    Args:
      args: git arguments, without `git`.
      cwd: directory to run in.
      extra_env: variables added to the environment.
      stdin: text fed to git's standard input.
      timeout: seconds before git is killed.
    """
    # No optional locks: `git status` must not rewrite the user's index behind their back.
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", **(extra_env or {})}
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            input=stdin.encode("utf-8", "surrogateescape") if stdin is not None else None,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return None, "git is not installed"
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{type(e).__name__}: {e}"
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        return None, message or f"git {args[0]} exited with {proc.returncode}"
    return proc.stdout.decode("utf-8", "surrogateescape"), None


def _pathspec(root: str, output_dir: str | None) -> list[str]:
    """Pathspecs for the whole checkout minus `output_dir` when it lies inside.

    Args:
      root: the checkout's top directory.
      output_dir: the run's output directory, or None.
    """
    spec = ["."]
    if output_dir:
        rel = os.path.relpath(os.path.realpath(output_dir), os.path.realpath(root))
        if rel != "." and not rel.startswith(os.pardir):
            spec.append(f":(exclude,literal){rel}")
    return spec


def _split_by_size(root: str, paths: list[str]) -> tuple[list[str], list[dict]]:
    """Splits untracked paths into those small enough for the patch and those skipped.

    Args:
      root: the checkout's top directory; paths are relative to it.
      paths: untracked file paths.
    """
    keep, skipped = [], []
    for path in paths:
        try:
            size = os.lstat(os.path.join(root, path)).st_size
        except OSError:
            continue  # Deleted since git listed it.
        if size > MAX_UNTRACKED_BYTES:
            skipped.append({"path": path, "bytes": size})
        else:
            keep.append(path)
    return keep, skipped


def _remote(root: str) -> tuple[str | None, str | None]:
    """Returns the remote to clone from (origin if present) and its credential-free URL.

    Args:
      root: the checkout's top directory.
    """
    names, _ = _git(["remote"], root)
    names = (names or "").split()
    if not names:
        return None, None
    name = "origin" if "origin" in names else names[0]
    url, _ = _git(["config", "--get", f"remote.{name}.url"], root)
    return name, _strip_credentials(url.strip()) if url else None


def _strip_credentials(url: str) -> str:
    """Drops `user:token@` from an http(s) URL so no secret lands in a snapshot.

    Args:
      url: a git remote URL.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or "@" not in parts.netloc:
        return url  # scp-like `git@host:path` names a user, not a secret.
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


# --- packages and system -----------------------------------------------------------------


def packages_text(source_dir: str) -> str:
    """Lists installed distributions as pip requirements, sorted by name, minus this project.

    Distributions installed from a local directory cannot be fetched by pip, so they
    become comments (pip ignores them); VCS installs are pinned to their commit. This
    project is never pinned, whatever metadata importlib finds for the name (an
    `rl.egg-info` in the current directory, an editable install of another checkout):
    the first line says where the imported code lives instead.

    Args:
      source_dir: the directory holding the imported `rl` package.
    """
    lines: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        metadata = dist.metadata  # parsed on each access: once per distribution here
        name = metadata["Name"]
        key = (name or "").lower().replace("_", "-")
        # The first one found on sys.path is the one imported; later ones are shadowed.
        if not name or key in lines or key == PROJECT_DISTRIBUTION:
            continue
        lines[key] = _requirement(name, metadata["Version"], dist.read_text("direct_url.json"))
    project = (
        f"# {PROJECT_DISTRIBUTION} (this project) is not pinned: its code is "
        f"{os.path.abspath(source_dir)} at the commit in {GIT_FILE}, plus {DIFF_FILE}\n"
    )
    return project + "".join(lines[key] + "\n" for key in sorted(lines))


def _requirement(name: str, version: str, direct_url: str | None) -> str:
    """One packages.txt line for a distribution.

    Args:
      name: the distribution name.
      version: its version.
      direct_url: its PEP 610 direct_url.json text, if it was installed from a URL.
    """
    try:
        info = json.loads(direct_url) if direct_url else {}
    except ValueError:
        info = {}
    url = info.get("url", "")
    if "vcs_info" in info:
        vcs = info["vcs_info"]
        return f"{name} @ {vcs.get('vcs', 'git')}+{url}@{vcs.get('commit_id', '')}"
    if "dir_info" in info or url.startswith("file:"):
        return f"# {name}=={version} installed from {url}"
    if url:
        return f"{name} @ {url}"
    return f"{name}=={version}"


def system_info(include_tf: bool = True) -> dict:
    """Describes the interpreter, OS, hardware and (optionally) TensorFlow.

    Args:
      include_tf: whether to import TensorFlow and record its version, devices and build.
    """
    info = {
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "os": {
            "platform": platform.platform(),
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "hostname": platform.node(),
        },
        "cpu": {
            "model": _cpu_model(),
            "count": os.cpu_count(),
            "usable": usable_cpus(),
        },
        "memory_bytes": _total_memory(),
        "env": {name: os.environ[name] for name in _ENV_VARS if name in os.environ},
    }
    if include_tf:
        info["tensorflow"] = tensorflow_info()
    return info


def tensorflow_info() -> dict:
    """What TensorFlow reports about itself and the devices it sees; never raises."""
    try:
        # Lazy: train.py has it loaded already, tests may not.
        tf = import_tensorflow_quietly()
    except Exception as e:  # A broken install is worth recording, not crashing on.
        return {"error": f"{type(e).__name__}: {e}"}
    info: dict[str, Any] = {"version": getattr(tf, "__version__", None)}
    probes = {
        "physical_devices": lambda: [
            {"name": d.name, "device_type": d.device_type}
            for d in tf.config.list_physical_devices()
        ],
        "build_info": lambda: dict(tf.sysconfig.get_build_info()),
        "gpus": lambda: [
            {"name": d.name, **tf.config.experimental.get_device_details(d)}
            for d in tf.config.list_physical_devices("GPU")
        ],
    }
    for key, probe in probes.items():
        try:
            info[key] = probe()
        except Exception as e:  # One failing probe must not hide the others.
            info[key] = {"error": f"{type(e).__name__}: {e}"}
    return info


def _cpu_model() -> str | None:
    """The CPU model name from /proc/cpuinfo, falling back to `platform.processor()`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                # x86 says "model name"; many ARM kernels only say "Hardware".
                if line.lower().startswith(("model name", "hardware")) and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _total_memory() -> int | None:
    """Physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


# --- files -------------------------------------------------------------------------------


def _event_line(event: str, argv: list[str], git: dict) -> str:
    """One resumes.jsonl line.

    Args:
      event: `start` or `resume`.
      argv: the command-line arguments.
      git: the result of `git_info`.
    """
    record = {
        "event": event,
        "time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "argv": list(argv),
        "cwd": os.getcwd(),
        "git_commit": git.get("commit"),
        "dirty": git.get("dirty"),
    }
    return json.dumps(record, default=str) + "\n"


def _append_event(snapshot_dir: str, event: str, argv: list[str], git: dict) -> None:
    """Appends an event to resumes.jsonl by rewriting it whole, so a kill leaves it intact.

    Args:
      snapshot_dir: the snapshot directory.
      event: `start` or `resume`.
      argv: the command-line arguments.
      git: the result of `git_info`.
    """
    from rl.logbook import drop_cut_last_line  # late: it loads TensorBoard (see _read_resumes)

    path = os.path.join(snapshot_dir, RESUMES_FILE)
    cut = drop_cut_last_line(path)  # written whole each time: only damage cuts a line
    if cut:
        print(f"rl: {cut}", file=sys.stderr, flush=True)
    old = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    write_text_atomic(path, old + _event_line(event, argv, git))


def _remove_stale_builds(output_dir: str) -> None:
    """Removes half-built snapshots left by a process killed while writing one.

    Args:
      output_dir: the run's output directory.
    """
    for name in os.listdir(output_dir):
        if name.startswith(BUILD_PREFIX):
            shutil.rmtree(os.path.join(output_dir, name), ignore_errors=True)


def _to_json(obj: Any) -> str:
    """Stable, readable JSON; values JSON lacks (enums, paths, numpy scalars) become strings.

    Args:
      obj: the value to encode.
    """
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"
