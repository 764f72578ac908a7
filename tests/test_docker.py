"""deploy/'s images, built and run: scripts/check_images.sh through a real Docker daemon.

The `docker` tier (`pytest -m docker`) needs a reachable daemon and skips with one line
without one; `bash scripts/docker_base.sh` starts one where Debian's packages can be had.
RL_CHECK_IMAGES_ARGS adds the script's arguments, e.g. "--no-gpu --no-tpu" to leave out
the accelerator images (each build downloads gigabytes).
"""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check_images.sh")


def daemon_problem():
    """Why no Docker daemon answers here, in one line; None when one does."""
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except FileNotFoundError:
        return "no docker client on PATH"
    except subprocess.TimeoutExpired:
        return "docker info did not answer in 30 s"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return lines[-1] if lines else f"docker info exited {proc.returncode}"
    return None


def table_rows(stdout):
    """{image: the rest of its row} from the table the script prints last."""
    return dict(re.findall(r"^(rl:[a-z-]+) +(.+)$", stdout, re.M))


@pytest.mark.docker
@pytest.mark.timeout(3600)
def test_every_image_builds_and_passes_its_checks():
    problem = daemon_problem()
    if problem:
        pytest.skip(
            f"no Docker daemon reachable ({problem}); start one: bash scripts/docker_base.sh"
        )
    args = ["bash", SCRIPT, *os.environ.get("RL_CHECK_IMAGES_ARGS", "").split()]
    proc = subprocess.run(
        args, cwd=ROOT, capture_output=True, text=True, timeout=3500,
        env={**os.environ, "PYTHON": sys.executable},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    rows = table_rows(proc.stdout)
    assert set(rows) == {"rl:cpu", "rl:env-server", "rl:gpu", "rl:tpu"}, proc.stdout
    for image in ("rl:cpu", "rl:env-server"):
        assert "FAILED" not in rows[image] and " MB " in rows[image], rows[image]
    assert "475+ on a volume: ok" in rows["rl:cpu"]
    assert "resumed in a second container: ok" in rows["rl:cpu"]
    assert "a train.py outside trains on it: ok" in rows["rl:env-server"]
    assert "a wrong token is refused: ok" in rows["rl:env-server"]


@pytest.mark.process
def test_a_bad_argument_is_one_line_and_exit_2():
    proc = subprocess.run(
        ["bash", SCRIPT, "--colt"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "check_images.sh: unknown argument --colt (known: --cold, --no-gpu, --no-tpu)"
    ]
    assert proc.stdout == ""
