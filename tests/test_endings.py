"""How a failed run ends: one line on stderr, its own exit code, the result JSON on stdout and
the last checkpoint kept, whether the env raised in training, in an evaluation or in a test.

``flaky_cartpole`` (rl/envs/stand_ins.py) draws its crashes from a generator seeded at reset,
not from the actions, so a seeded run crashes at the same step every time.
"""

import json
import os
import re
import resource
import shutil
import subprocess
import textwrap

import pytest
from polling import ROOT, run_train_py

from rl.cli import exits
from rl.run_folder import checkpoint_steps


def own_lines(proc):
    """stderr without the progress lines and rl's notices: the run's ending alone."""
    return [l for l in proc.stderr.splitlines() if not l.startswith(("step ", "rl: "))]


def result(proc):
    """The result JSON, the last line of stdout."""
    return json.loads(proc.stdout.splitlines()[-1])


def flaky(rate):
    return f"flaky_cartpole?failure_rate={rate}"


def contents(folder):
    """Every file under ``folder`` with its bytes (to prove nothing was written)."""
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# Envs that raise while being made: always, or only when asked to render (for videos).
BROKEN_ENVS = """
    import gymnasium as gym

    from rl import registry


    @registry.envs.register("unlicensed_sim")
    def unlicensed_sim(render_mode=None):
        raise RuntimeError("licence server not found")


    @registry.envs.register("unfilmable_cartpole")
    def unfilmable_cartpole(render_mode=None):
        if render_mode is not None:
            raise RuntimeError("no renderer here")
        return gym.make("CartPole-v1")
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A folder holding a --plugins module of broken envs, where train.py is run from."""
    folder = tmp_path_factory.mktemp("project")
    (folder / "broken_envs.py").write_text(textwrap.dedent(BROKEN_ENVS))
    return folder


@pytest.mark.process
def test_an_env_that_raises_in_training_stops_with_exit_6_and_resumes(tmp_path):
    out = tmp_path / "run"
    # Crashes at step 238, after the checkpoint at 128; no evaluation to crash first.
    args = ["--hparams", "ppo_tiny", "--env", flaky(0.004), "--eval_episodes", "0"]
    args += ["--train_steps", "1024", "--output_dir", str(out)]
    proc = run_train_py(*args)
    assert proc.returncode == exits.EXIT_ENV == 6, proc.stderr
    kept = out / "checkpoints" / "ckpt-128"
    assert own_lines(proc) == [
        f"train.py: stopped: env '{flaky(0.004)}' raised in step() during training: "
        "SimulatorCrash: flaky_cartpole: the simulator crashed (a simulated fault); "
        f"the last checkpoint, {kept}, is kept; rerun the same command to resume"
    ]
    ended = result(proc)
    assert ended["failure_kind"] == "env" and ended["failure"].startswith(f"env '{flaky(0.004)}'")
    assert 128 < ended["step"] < 256
    assert checkpoint_steps(str(out / "checkpoints")) == [128]
    # The same command resumes from it (and its reset's new seed crashes elsewhere).
    again = run_train_py(*args)
    assert again.returncode == 6, again.stderr
    assert f"rl: resuming from {kept}" in again.stderr
    assert len(own_lines(again)) == 1 and result(again)["failure_kind"] == "env"
    assert checkpoint_steps(str(out / "checkpoints")) == [128]


@pytest.mark.process
def test_an_env_that_raises_before_the_first_checkpoint_says_none_was_written(tmp_path):
    out = tmp_path / "run"
    proc = run_train_py("--hparams", "ppo_tiny", "--env", flaky(0.01), "--output_dir", str(out))
    assert proc.returncode == 6, proc.stderr
    [line] = own_lines(proc)
    assert line.startswith(f"train.py: stopped: env '{flaky(0.01)}' raised in step() during")
    assert line.endswith("; no checkpoint was written yet; rerun the same command to start again")
    ended = result(proc)
    assert ended["failure_kind"] == "env" and ended["step"] < 128
    assert ended["failure"].endswith("; no checkpoint was written yet")
    assert checkpoint_steps(str(out / "checkpoints")) == []


@pytest.mark.process
def test_an_env_that_raises_in_an_evaluation_or_a_test_stops_with_exit_6(tmp_path):
    out = tmp_path / "run"
    # Training reaches step 256 (its envs crash at 258); the evaluation there crashes.
    proc = run_train_py(
        "--hparams", "ppo_tiny", "--env", flaky(0.002), "--hparam_override", "eval_interval=256",
        "--train_steps", "1024", "--output_dir", str(out),
    )  # fmt: skip
    assert proc.returncode == 6, proc.stderr
    kept = out / "checkpoints" / "ckpt-128"
    [line] = own_lines(proc)
    assert line.startswith(f"train.py: stopped: env '{flaky(0.002)}' raised in step() during ")
    assert "during evaluation: SimulatorCrash: " in line
    assert line.endswith(f"the last checkpoint, {kept}, is kept; rerun the same command to resume")
    ended = result(proc)
    assert ended["step"] == 256 and ended["failure_kind"] == "env"
    assert ended["eval_return_mean"] is None  # the evaluation did not finish
    assert checkpoint_steps(str(out / "checkpoints")) == [128]
    assert not (out / "eval.jsonl").exists()
    # Testing the run: the same crash, one line, and no test.json.
    test = run_train_py("--training=false", "--test_episodes", "10", "--output_dir", str(out))
    assert test.returncode == 6, test.stderr
    assert own_lines(test) == [
        f"train.py: stopped: cannot test {out}: env '{flaky(0.002)}' raised in step() during "
        "evaluation: SimulatorCrash: flaky_cartpole: the simulator crashed (a simulated fault); "
        "test.json was not written"
    ]
    assert not (out / "test.json").exists()


@pytest.mark.process
def test_an_env_that_raises_while_being_made_stops_with_exit_6(project, tmp_path):
    out = tmp_path / "run"
    args = ["--hparams", "ppo_tiny", "--plugins", "broken_envs", "--output_dir", str(out)]
    # At start-up: nothing is written.
    proc = run_train_py(*args, "--env", "unlicensed_sim", cwd=project)
    assert proc.returncode == 6, proc.stderr
    assert proc.stderr.splitlines() == [
        "train.py: stopped: env 'unlicensed_sim' raised while being made for training: "
        "RuntimeError: licence server not found; nothing was written"
    ]
    assert proc.stdout == "" and not out.exists()
    # Its video envs, made at the first evaluation (step 256): the checkpoint at 128 is kept.
    proc = run_train_py(*args, "--env", "unfilmable_cartpole", "--record_video",
                        "--hparam_override", "eval_interval=256", cwd=project)  # fmt: skip
    assert proc.returncode == 6, proc.stderr
    kept = out / "checkpoints" / "ckpt-128"
    assert own_lines(proc) == [
        "train.py: stopped: env 'unfilmable_cartpole' raised while being made for evaluation: "
        f"RuntimeError: no renderer here; the last checkpoint, {kept}, is kept; rerun the same "
        "command to resume"
    ]
    assert result(proc)["failure_kind"] == "env" and result(proc)["step"] == 256
    assert checkpoint_steps(str(out / "checkpoints")) == [128]


@pytest.mark.process
def test_an_env_raising_in_its_own_process_is_one_line_too(tmp_path):
    # vectorization=async: Gymnasium logs the copy's traceback before raising it again here.
    out = tmp_path / "run"
    proc = run_train_py("--hparams", "ppo_tiny", "--env", flaky(0.01), "--hparam_override",
                        "vectorization=async", "--output_dir", str(out))  # fmt: skip
    assert proc.returncode == 6, proc.stderr
    [line] = own_lines(proc)
    assert line.startswith(f"train.py: stopped: env '{flaky(0.01)}' raised in step() during")
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr
    assert result(proc)["failure_kind"] == "env"


@pytest.mark.process
def test_a_run_file_that_cannot_be_written_stops_with_exit_7(trained, tmp_path):
    out = tmp_path / "run"  # a copy of the session's finished run (checkpoints 128, 256, 384)
    shutil.copytree(trained, out)
    (out / "videos").write_text("a file where the videos folder belongs\n")
    proc = run_train_py("--hparams", "ppo_tiny", "--train_steps", "512", "--record_video",
                        "--output_dir", str(out))  # fmt: skip
    assert proc.returncode == exits.EXIT_FILES == 7, proc.stderr
    kept = out / "checkpoints" / "ckpt-384"
    assert own_lines(proc) == [
        f"train.py: stopped: cannot write {out / 'videos'}: File exists; the last checkpoint, "
        f"{kept}, is kept; make room or mend {out}, then rerun the same command to resume"
    ]
    assert result(proc)["failure_kind"] == "files" and result(proc)["step"] == 512
    assert checkpoint_steps(str(out / "checkpoints")) == [128, 256, 384]
    # A test of the run: the same, and test.json is not written.
    before = contents(out)
    test = run_train_py("--training=false", "--record_video", "--test_episodes", "1",
                        "--output_dir", str(out))  # fmt: skip
    assert test.returncode == 7, test.stderr
    assert own_lines(test) == [
        f"train.py: stopped: cannot test {out}: cannot write {out / 'videos'}: File exists; "
        "test.json was not written"
    ]
    assert contents(out) == before


# A disk that fails a write with EIO: closing or flushing a file whose path contains
# $EIO_PATHS fails as a failing disk fails it. LD_PRELOAD puts these before the C
# library's, so TensorFlow's file writers (fopen, fwrite, fflush, fclose) meet them.
FAILING_DISK_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int on_failing_disk(FILE *f) {
    const char *part = getenv("EIO_PATHS");
    char link[64], path[4096];
    ssize_t n;
    if (!part || !f) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fileno(f));
    n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return strstr(path, part) != NULL;
}

int fflush(FILE *f) {
    static int (*real)(FILE *);
    if (!real) real = dlsym(RTLD_NEXT, "fflush");
    if (on_failing_disk(f)) { errno = EIO; return EOF; }
    return real(f);
}

int fclose(FILE *f) {
    static int (*real)(FILE *);
    int failing = on_failing_disk(f);
    if (!real) real = dlsym(RTLD_NEXT, "fclose");
    real(f);
    if (failing) { errno = EIO; return EOF; }
    return 0;
}
"""


def failing_disk(kind, tmp_path):
    """``subprocess.run`` options under which a disk refuses run files as ``kind`` says, and
    the words of the error: "full" (a write past 4 KB fails, as on a full disk; Python
    ignores SIGXFSZ) or "eio" (the files of checkpoint 512 fail to close with EIO, for
    which TensorFlow raises UnknownError)."""
    if kind == "full":

        def small_files():
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

        return {"preexec_fn": small_files}, "File too large"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler here to build the failing-disk shim")
    source, shim = tmp_path / "failing_disk.c", tmp_path / "failing_disk.so"
    source.write_text(FAILING_DISK_C)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(shim), str(source), "-ldl"], check=True)
    return {"env": dict(os.environ, LD_PRELOAD=str(shim), EIO_PATHS="ckpt-512")}, (
        "Input/output error"
    )


@pytest.mark.process
@pytest.mark.parametrize("kind", ["full", "eio"])
def test_a_disk_refusing_a_write_stops_with_exit_7_and_the_run_resumes_once_mended(
    trained, tmp_path, kind
):
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    checkpoints = contents(out / "checkpoints")
    failing, words = failing_disk(kind, tmp_path)
    args = ["--hparams", "ppo_tiny", "--train_steps", "512", "--output_dir", str(out)]
    proc = run_train_py(*args, **failing)
    assert proc.returncode == 7, proc.stderr
    [line] = own_lines(proc)
    kept = out / "checkpoints" / "ckpt-384"
    # In the OS's words, without TensorFlow's function node, temporary file or op.
    assert line.startswith(f"train.py: stopped: cannot save step 512 in {out}: {words}; "), line
    assert line.endswith(
        f"the last checkpoint, {kept}, is kept; make room or mend {out}, then rerun the same "
        "command to resume"
    )
    assert result(proc)["failure_kind"] == "files"
    assert contents(out / "checkpoints") == checkpoints
    # Mended, the same command resumes from it and finishes.
    again = run_train_py(*args)
    assert again.returncode == 0, again.stderr
    assert f"rl: resuming from {kept}" in again.stderr
    assert checkpoint_steps(str(out / "checkpoints")) == [256, 384, 512]  # keeps 3
    steps = [json.loads(l)["step"] for l in (out / "eval.jsonl").read_text().splitlines()]
    assert steps == [128, 256, 384, 512]


@pytest.mark.unit
def test_each_failure_kind_has_its_exit_code():
    from rl.errors import EnvError, EnvServerError
    from rl.experiment import FAILURE_KINDS, failure_kind

    assert set(exits.FAILURE_EXITS) == {kind for kind, _ in FAILURE_KINDS}
    assert len(set(exits.FAILURE_EXITS.values())) == len(exits.FAILURE_EXITS)
    assert failure_kind(IsADirectoryError(21, "Is a directory", "x")) == "files"
    assert failure_kind(EnvError("env 'x' raised")) == "env"
    assert failure_kind(EnvServerError("gone")) == "env_server"


@pytest.mark.unit
def test_the_exit_code_list_names_every_exit_code_of_train_py():
    with open(os.path.join(ROOT, "docs", "getting-started.md")) as f:
        text = f.read()
    listed = re.search(r"\*\*Exit codes:\*\*(.*?)\n- ", text, re.S).group(1)
    codes = {int(code) for code in re.findall(r"\b(\d+) [a-z]", listed)}
    ours = {value for name, value in vars(exits).items() if name.startswith("EXIT_")}
    assert codes == {0, 2} | ours
    assert set(exits.FAILURE_EXITS.values()) == ours


@pytest.mark.unit
def test_an_error_in_one_line_is_its_first_line_or_its_type():
    from rl.errors import error_line, first_line

    assert first_line("\n  disk full \nat line 3\n") == "disk full"
    assert first_line(" \n ") == ""
    assert error_line(ValueError("bad\nmore")) == "bad"
    assert error_line(ValueError("bad\nmore"), typed=True) == "ValueError: bad"
    assert error_line(ValueError("  \n")) == error_line(ValueError(), typed=True) == "ValueError"


@pytest.mark.unit
def test_only_a_tensorflow_file_system_error_is_a_file_that_cannot_be_written(tmp_path):
    from rl._tf import tf, writes_as_oserror

    (tmp_path / "a_file").write_text("in the way\n")
    checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
    with pytest.raises(OSError) as caught:  # a file where a folder belongs
        with writes_as_oserror("step 3 in x"):
            checkpoint.write(str(tmp_path / "a_file" / "ckpt"))
    assert isinstance(caught.value.__cause__, tf.errors.FailedPreconditionError)
    assert str(caught.value) == f"cannot save step 3 in x: {tmp_path / 'a_file'} is not a directory"
    # EIO has no code of its own: an UnknownError giving the OS's words is the disk's.
    with pytest.raises(OSError, match=r"^cannot save step 3 in x: Input/output error$"):
        with writes_as_oserror("step 3 in x"):
            raise tf.errors.UnknownError(None, None, "x/ckpt; Input/output error [Op:SaveV2]")
    # Not the file system's fault: it ends as itself, not as exit 7.
    for error in (tf.errors.InvalidArgumentError, tf.errors.InternalError, tf.errors.UnknownError):
        with pytest.raises(error):
            with writes_as_oserror("step 3 in x"):
                raise error(None, None, "a bug\nits details")
