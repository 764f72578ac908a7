"""Checks of the benchmark's input that end the process with one line and exit code 2
before any slow work: the train.py flags passed on, the sets, --json, --baseline, --peer
and the hidden --_peer_run.

train.py's flag table (rl.cli.flag_table), rl.catalog and rl.hparams are imported where
used: they load NumPy and more, which the peer and cost processes (this same script) must
not pay for in their wall time.
"""

import argparse
import os
from typing import Dict, List, Optional, Sequence, Tuple

from rl import plugins
from rl.command_line import int_in_range
from rl.errors import USER_ERRORS, PluginError
from rl.fields import MAX_SEED, MAX_STEPS
from scripts.bench import children, peer_settings, scores

# The train.py flags the rl runs of the table and --peer pass on; the benchmark sets
# --hparams, --seed, --output_dir and --train_steps itself, and the others (--copies,
# --training, ...) make no benchmark.
TRAIN_FLAGS_PASSED = (
    "sys", "ray_address", "tpu", "cpu_replicas", "hparam_override", "env", "plugins",
    "eval_episodes", "num_workers", "worker_restarts", "worker_restart_window",
    "worker_timeout", "worker_rounds_ahead",
    "record_video", "tracking", "tracking_uri", "tracking_experiment",
)  # fmt: skip


def peer_error(hparams: Sequence[str], pairs: int) -> Optional[str]:
    """Why a --peer run cannot start, or None.

    Args:
      hparams: the --hparams sets.
      pairs: the --pairs count.
    """
    peers = peer_settings.PEERS
    unpaired = [name for name in hparams if name not in peers]
    if unpaired:
        return f"--peer has no peer for {', '.join(unpaired)}: valid: {', '.join(peers)}"
    if pairs < 1:
        return f"--pairs must be >= 1, got {pairs}"
    return peer_settings.missing_bench_extra("--peer")


def parse_train_flags(extra: List[str]) -> Dict[str, object]:
    """The values of the train.py flags in ``extra``, parsed by train.py's own parser;
    a flag it does not know or does not take, or a bad value, ends the process (exit 2)."""
    from absl import flags  # with train.py's flags, heavy (see the top)

    from rl.cli import flag_table as train_cli  # train.py's flags

    passed = ", ".join(f"--{name}" for name in TRAIN_FLAGS_PASSED)
    if "hparams" not in train_cli.FLAGS:
        train_cli.define_flags()
    train_cli.FLAGS.unparse_flags()  # values of an earlier parse in this process would count
    try:
        rest = train_cli.FLAGS([children.TRAIN, *extra])
        given = sorted(
            {
                train_cli.FLAGS[name].name
                for name in train_cli.FLAGS
                if train_cli.FLAGS[name].present
            }
        )
        values = {name: train_cli.FLAGS[name].value for name in TRAIN_FLAGS_PASSED}
    except flags.Error as e:
        children.fail(
            f"{train_cli.flag_error_message(e)} (the train.py flags passed on are {passed})"
        )
    finally:
        train_cli.FLAGS.unparse_flags()
    if rest[1:]:
        children.fail(f"unexpected arguments {' '.join(rest[1:])!r}; flags look like --name=value")
    for name in given:
        if name not in TRAIN_FLAGS_PASSED:
            children.fail(
                f"--{name} is not passed on to train.py; the flags passed on are {passed}"
            )
    return values


def check_rl_sets(
    names: Sequence[str],
    seeds: Sequence[int],
    train_steps: Optional[int],
    train_flags: Dict[str, object],
) -> None:
    """Ends the process (exit 2) unless each set, with each seed and the train.py flags,
    resolves to valid hparams (an unknown set names the registered ones)."""
    from rl import catalog  # noqa: F401  (fills the registries; heavy, see the top)
    from rl.hparams.resolve import resolve_hparams  # heavy

    try:
        plugins.load(train_flags["plugins"])  # they may register the sets
        for name in names:
            for seed in seeds:
                resolve_hparams(
                    name,
                    train_flags["hparam_override"],
                    env=train_flags["env"],
                    seed=seed,
                    train_steps=train_steps,
                    eval_episodes=train_flags["eval_episodes"],
                )
    except USER_ERRORS + (PluginError,) as e:
        children.fail(str(e))


def check_json_path(path: Optional[str]) -> None:
    """Ends the process (exit 2) unless --json names a file that can be written."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        children.fail(
            f"--json {path} is a folder; name a file, e.g. {os.path.join(path, 'bench.json')}"
        )
    if not os.path.isdir(folder):
        children.fail(f"--json {path}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK):
        children.fail(f"--json {path}: the folder {folder} is not writable")


def check_results_folder(folder: str, flag: str = "--profile") -> List[dict]:
    """The result files (<set>.json) of ``folder``; ends the process (exit 2) for a folder
    that does not exist, holds none with per-seed final returns, or one that cannot be
    read."""
    if not os.path.isdir(folder):
        children.fail(
            f"{flag} {folder}: not a folder; name a folder of result files (<set>.json), "
            "e.g. docs/results or a suite's <output_dir>/results"
        )
    try:
        results = scores.read_results(folder)
    except (OSError, ValueError) as e:
        children.fail(f"{flag} {folder}: a result file cannot be read ({e})")
    scored = [r for r in results if r.get("final_returns")]
    if not scored:
        children.fail(
            f"{flag} {folder}: holds no result file with per-seed final returns "
            '(<set>.json with "final_returns"); name docs/results or a suite\'s '
            "<output_dir>/results"
        )
    return scored


def peer_run_args(values: List[str]) -> Tuple[str, int, int]:
    """(set, seed, steps) of --_peer_run SET SEED STEPS; bad ones end the process (exit 2)."""
    name, seed, steps = values
    if name not in peer_settings.PEERS:
        children.fail(
            f"--_peer_run has no peer for {name!r}: valid: {', '.join(peer_settings.PEERS)}"
        )
    numbers = []
    for what, text, low, high in (("SEED", seed, 0, MAX_SEED), ("STEPS", steps, 1, MAX_STEPS)):
        try:
            numbers.append(int_in_range(low, high)(text))
        except argparse.ArgumentTypeError as e:
            children.fail(f"--_peer_run {what} {e}")
    return name, numbers[0], numbers[1]


def peer_seed_args(values: List[str]) -> Tuple[str, int, str]:
    """(set, seed, folder) of --_peer_seed SET SEED FOLDER; bad ones end the process (exit 2)."""
    name, seed, folder = values
    if name not in peer_settings.PEERS:
        children.fail(
            f"--_peer_seed has no peer for {name!r}: valid: {', '.join(peer_settings.PEERS)}"
        )
    try:
        number = int_in_range(0, MAX_SEED)(seed)
    except argparse.ArgumentTypeError as e:
        children.fail(f"--_peer_seed SEED {e}")
    if os.path.exists(folder) and not os.path.isdir(folder):
        children.fail(f"--_peer_seed {folder} is a file; name a folder for the seed's results")
    return name, number, folder


def checked_baseline(folder: Optional[str]) -> Optional[str]:
    """The absolute path of --baseline, an rl checkout other than this one; anything else
    ends the process (exit 2)."""
    if folder is None:
        return None
    how = "e.g. git worktree add ../rl-base REV, then --baseline ../rl-base"
    if not os.path.isdir(folder):
        children.fail(f"--baseline {folder} is not a folder; give another rl checkout ({how})")
    path = os.path.abspath(folder)
    missing = [
        name for name in ("train.py", os.path.join("rl", "__init__.py"))
        if not os.path.isfile(os.path.join(path, name))
    ]  # fmt: skip
    if missing:
        children.fail(
            f"--baseline {folder} is not an rl checkout (no {' or '.join(missing)}); "
            f"give one ({how})"
        )
    if os.path.realpath(path) == os.path.realpath(children.ROOT):
        children.fail(f"--baseline {folder} is this checkout; give another one ({how})")
    return path


def check_peer_checkpoints(folder: Optional[str]) -> None:
    """Ends the process (exit 2) if --peer_checkpoints names something other than a folder."""
    if folder is not None and os.path.exists(folder) and not os.path.isdir(folder):
        children.fail(f"--peer_checkpoints {folder} is a file; name a folder for the peer's saves")
