"""Shared test set-up: quiet TensorFlow, a repo-root import path, runs more than one module reads."""

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from finished_run import run_dir, trained  # noqa: E402, F401  (fixtures for every test module)

from rl.processes import TF_THREAD_VARIABLES, tf_thread_share  # noqa: E402  (after the repo root is on the path)

# Test workers (-n 2) running TensorFlow with a thread pool per core each oversubscribe the
# cores: each gets its share, as train.py's copies side by side do (the learning tests took
# 12% less time; docs/benchmarks.md). The training subprocesses of its tests inherit it.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.update(tf_thread_share(int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


@contextlib.contextmanager
def shared_folder(tmp_path_factory, name: str):
    """A folder of this test session that is filled once, for every test worker.

    Yields ``(folder, fill)``: ``fill`` is True for the one caller that must fill it; the
    others wait (a file lock) until it has. With `-n 2` each pytest-xdist worker has its own
    session fixtures, so a run trained in one would otherwise be trained again in the other.
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, above each worker's own
    folder = base / name
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / ".filled"
        fill = not done.exists()
        if fill:  # what a failed fill left is not resumed from
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
        yield folder, fill
        done.touch()


@pytest.fixture(scope="session")
def copies_runs(tmp_path_factory):
    """`train.py --hparams=ppo_tiny --copies=2` run one after another (seq/) and side by
    side (par/), from the repo root as a user runs it. Read-only: copy a folder to change it."""
    with shared_folder(tmp_path_factory, "copies_runs") as (root, fill):
        copies = (("seq", []), ("par", ["--copies_parallel=2"])) if fill else ()
        for folder, more in copies:
            proc = subprocess.run(
                [sys.executable, "train.py", "--hparams=ppo_tiny", "--copies=2", *more,
                 f"--output_dir={root / folder}"],
                cwd=ROOT, capture_output=True, text=True, timeout=600,
                env={k: v for k, v in os.environ.items() if k not in TF_THREAD_VARIABLES},
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture(autouse=True)
def _no_run_dir_from_an_earlier_test(monkeypatch):
    """Each test starts without RL_RUN_DIR (self-play envs look for a run's policies there)."""
    monkeypatch.delenv("RL_RUN_DIR", raising=False)


TIERS = ("unit", "process", "slow", "docker")  # the markers pytest.ini declares for the tiers


def tier_problems(items) -> list:
    """One line per test that has no tier or more than one, naming the test."""
    problems = []
    for item in items:
        tiers = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if len(tiers) != 1:
            found = " and ".join(tiers) if tiers else "none"
            problems.append(f"{item.nodeid}: tier {found}")
    return problems


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module in which a test has no tier, or several, fails to collect, naming the test.

    A collection error stops the session before -m deselects anything, in pytest-xdist's
    workers too, so an unmarked test fails every tier's run.
    """
    outcome = yield
    report = outcome.get_result()
    if report.passed:
        problems = tier_problems(item for item in report.result if isinstance(item, pytest.Item))
        if problems:
            report.outcome = "failed"
            report.longrepr = (
                f"each test needs exactly one tier marker of {', '.join(TIERS)} (pytestmark = "
                "pytest.mark.unit at a module's top, or @pytest.mark.unit on a test):\n  "
                + "\n  ".join(problems)
            )


# The order tests start in: the longest tier first. pytest-xdist's workers take their tests
# in collection order (and steal from each other's queues, pytest.ini), so a learning run
# collected last would otherwise run alone at the end while the other worker idles; short
# unit tests last fill the gaps instead.
TIER_ORDER = {"slow": 0, "process": 1, "unit": 2, "docker": 3}


def tier_rank(item) -> int:
    """Where ``item``'s tier starts (a test without exactly one tier fails to collect)."""
    tiers = [mark.name for mark in item.iter_markers() if mark.name in TIER_ORDER]
    return TIER_ORDER[tiers[0]] if len(tiers) == 1 else len(TIER_ORDER)


def pytest_collection_modifyitems(items):
    """Longest tier first; within a tier, the order of collection (a stable sort)."""
    items.sort(key=tier_rank)
