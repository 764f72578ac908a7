"""deploy/'s images, built and run: scripts/check_images.sh through a real Docker daemon, and
a three-node Ray cluster of rl:cpu containers: scripts/check_cluster.sh.

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
CLUSTER_SCRIPT = os.path.join(ROOT, "scripts", "check_cluster.sh")


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


def skip_without_a_daemon():
    problem = daemon_problem()
    if problem:
        pytest.skip(
            f"no Docker daemon reachable ({problem}); start one: bash scripts/docker_base.sh"
        )


@pytest.mark.docker
@pytest.mark.timeout(3600)
def test_every_image_builds_and_passes_its_checks():
    skip_without_a_daemon()
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


def actor_nodes(stderr, heading):
    """The containers named by the indented actor lines after the line starting ``heading``."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    places = []
    for line in lines[start + 1 :]:
        match = re.match(r"^  [0-9a-f]{12} node [0-9a-f]{12} (\S+) pid \d+$", line)
        if not match:
            break
        places.append(match.group(1))
    return sorted(places)


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_a_ray_cluster_of_containers_trains_loses_a_node_and_resumes():
    skip_without_a_daemon()
    proc = subprocess.run(
        ["bash", CLUSTER_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=1700
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    err = proc.stderr
    assert "every check passed" in proc.stdout
    assert "without the token: exit 2, train.py: error: --sys ray cannot reach" in err
    before = actor_nodes(err, "check_cluster: where each actor runs")
    # Ray's default placement spreads them (two on each in most runs here, three and one too).
    assert len(before) == 4 and set(before) == {"worker1", "worker2"}, err
    after = actor_nodes(err, "check_cluster: after the loss")
    assert after == ["worker1"] * 4, err
    reached = re.search(r"the run ended at step 100000 .*: return ([0-9.]+)", err)
    assert reached and float(reached.group(1)) >= 475, err
    assert "resuming from runs/ppo/checkpoints/ckpt-100000; final step 120000" in err
    assert re.search(r"  exit 4: train\.py: stopped: .*\(--worker_restarts\)", err), err
    assert "resuming from runs/lost/checkpoints/ckpt-50000; final step 100000" in err
    assert "rl.search --sys ray: 2 trials done" in err
    assert re.search(r"rl\.tournament --sys ray: done .*\n +# +player", err), err
    # Every container is gone, on success as on failure (the script's trap).
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "name=rl-cluster-"], capture_output=True, text=True
    )
    assert left.stdout == ""


@pytest.mark.process
def test_check_cluster_takes_no_argument():
    proc = subprocess.run(
        ["bash", CLUSTER_SCRIPT, "--fast"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "check_cluster.sh: unknown argument --fast (it takes none)\n"
