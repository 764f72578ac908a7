"""train.py answers --list, --help and mistakes before loading TensorFlow, and quietly.

Loading TensorFlow takes ~5 s; these answers must not wait for it. Whether a
module was imported is read from Python's own import log (-X importtime), so
the tests do not depend on how fast this machine is.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-X", "importtime", TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def imported(proc):
    """Top-level modules named in the -X importtime log on stderr."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def train_tiny(out, env=None):
    """A ppo_tiny run into ``out`` (a few seconds), as a user starts one."""
    return subprocess.run(
        [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--output_dir", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )


def messages(proc):
    return [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]


@pytest.mark.process
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--hparams", "ppo_cartpol", "--output_dir", "x"], "did you mean 'ppo_cartpole'"),
        (["--hparams", "ppo_tiny", "--env", "CartPole-v7", "--output_dir", "x"], "unknown env"),
        (
            ["--hparams", "ppo_tiny", "--env", "CartPole-v1?gravity=3", "--output_dir", "x"],
            "env 'CartPole-v1' takes no keyword argument 'gravity': it takes sutton_barto_reward",
        ),
        (["--hparams", "ppo_tiny", "--sys", "tpu_pod", "--output_dir", "x"], "unknown sys"),
        (["--hparams", "ppo_tiny", "--sys", "tpu", "--output_dir", "x"], "--sys tpu needs --tpu"),
        (["--hparams", "ppo_tiny", "--hparam_override", "lr=1", "--output_dir", "x"], "'lr'"),
        (
            ["--hparams", "ppo_tiny", "--hparam_override", "act_select=nope", "--output_dir", "x"],
            "nope",
        ),
        (["--hparams", "ppo_tiny", "--seed", str(2**64), "--output_dir", "x"], "--seed"),
        (["--hparams", "ppo_tiny", "--train_steps", "abc"], "train_steps"),
        (["--hparams", "ppo_tiny"], "--output_dir is required"),
        # Before TensorFlow, and so before any actor process starts.
        (["--output_dir", "x", "--num_workers", "2"], "--hparams is required"),
        (["--hparams", "ppo_tiny", "--num_workers", "3", "--output_dir", "x"], "valid: 1, 2"),
        (["--training=false", "--seed", "3", "--output_dir", "x"], "--seed cannot be used"),
        (["--test_episodes", "3", "--hparams", "ppo_tiny", "--output_dir", "x"], "--test_episodes"),
    ],
)
def test_mistakes_are_reported_without_loading_tensorflow(tmp_path, args, expected):
    proc = run(*[str(tmp_path / a) if a == "x" else a for a in args])
    assert proc.returncode == 2
    (line,) = messages(proc)
    assert line.startswith("train.py: error:") and expected in line
    assert "tensorflow" not in imported(proc)
    assert not (tmp_path / "x").exists()


@pytest.mark.process
def test_an_output_dir_that_cannot_take_the_run_is_reported_without_loading_tensorflow(tmp_path):
    # So also before any actor process starts (--num_workers).
    from rl import catalog, registry  # noqa: F401  (catalog fills the registries)

    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    run_dir = tmp_path / "run"  # a run's folder, as a ppo_tiny run leaves it
    run_dir.mkdir()
    hparams = json.dumps(registry.hparams.get("ppo_tiny")().to_dict())
    (run_dir / "hparams.json").write_text(hparams)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "hparams.json").write_text(hparams)
    (damaged / "eval.jsonl").write_bytes(b"\xff\xfe not a record\n")
    cases = [
        (notes, [], "is a file, not a folder"),
        (run_dir, ["--hparam_override", "learning_rate=0.1"], "holds a run with other hparams"),
        (damaged, [], "eval.jsonl"),
    ]
    for out, more, expected in cases:
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        proc = run("--hparams", "ppo_tiny", *more, "--num_workers", "2", "--output_dir", str(out))
        assert proc.returncode == 2, proc.stderr
        (line,) = messages(proc)
        assert line.startswith("train.py: error:") and expected in line, line
        assert "tensorflow" not in imported(proc)
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.process
def test_list_shows_registered_names_and_gymnasium_ids_without_tensorflow():
    proc = run("--list")
    assert proc.returncode == 0, proc.stderr
    assert "  ppo_cartpole" in proc.stdout and "  q_network" in proc.stdout
    assert "  catch" in proc.stdout
    assert "classic_control: Acrobot-v1, CartPole-v0, CartPole-v1" in proc.stdout
    assert "LunarLander-v3" in proc.stdout and "HalfCheetah-v5" in proc.stdout
    assert "tensorflow" not in imported(proc)


@pytest.mark.process
def test_help_lists_train_flags_without_tensorflow():
    proc = run("--help")
    assert proc.returncode == 0
    for flag in ("--hparams", "--output_dir", "--hparam_override", "--copies", "--training"):
        assert flag in proc.stdout
    assert "tensorflow" not in imported(proc)


@pytest.mark.unit
def test_an_env_that_needs_an_extra_names_the_install(monkeypatch):
    import importlib.util

    from rl import catalog  # noqa: F401
    from rl.envs import check_env_name
    from rl.hparams.base import HParamsError

    real_find_spec = importlib.util.find_spec
    missing = {"Box2D", "mujoco"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name in missing else real_find_spec(name)
    )
    with pytest.raises(HParamsError, match=r"'LunarLander-v3' needs box2d.*\.\[box2d\]"):
        check_env_name("LunarLander-v3")
    with pytest.raises(HParamsError, match=r"'HalfCheetah-v5' needs mujoco.*\.\[mujoco\]"):
        check_env_name("HalfCheetah-v5")
    with pytest.raises(HParamsError, match="legacy"):
        check_env_name("Ant-v2")
    check_env_name("CartPole-v1")


@pytest.mark.process
def test_only_rl_speaks_during_a_run(tmp_path):
    # TensorFlow's start-up lines (CUDA probing, oneDNN notices) and its C++
    # errors during training are hidden unless asked for.
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a user has it
    proc = train_tiny(out, env)
    assert proc.returncode == 0, proc.stderr
    foreign = [l for l in proc.stderr.splitlines() if not l.startswith(("step ", "rl: "))]
    assert foreign == []
    loud = subprocess.run(
        [sys.executable, "-c", "import rl; rl.Experiment"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "RL_TF_LOGS": "1", "TF_CPP_MIN_LOG_LEVEL": "0"},
    )
    quiet = subprocess.run(
        [sys.executable, "-c", "import rl; rl.Experiment"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert loud.stderr != ""  # the lines exist; they are hidden, not absent


@pytest.mark.process
def test_gymnasiums_warnings_are_rl_lines_said_once(tmp_path):
    # Gymnasium warned in colour, with its own source line, once per env made (train and
    # evaluation envs): two warnings of two lines each for one outdated id.
    proc = subprocess.run(
        [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--env", "CartPole-v0",
         "--output_dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    foreign = [l for l in proc.stderr.splitlines() if not l.startswith(("step ", "rl: "))]
    assert foreign == []
    warned = [l for l in proc.stderr.splitlines() if l.startswith("rl: warning:")]
    assert warned == [
        "rl: warning: The environment CartPole-v0 is out of date. You should consider "
        "upgrading to version `v1`."
    ]


@pytest.mark.process
def test_mujoco_logs_in_the_run_folder_and_warns_once(tmp_path):
    # MuJoCo wrote MUJOCO_LOG.TXT into the folder train.py ran from, and printed its
    # warning about HalfCheetah's model at every env made.
    pytest.importorskip("mujoco", reason="needs the mujoco extra")
    cwd = tmp_path / "where_the_user_is"
    cwd.mkdir()
    out = tmp_path / "runs" / "cheetah"
    proc = subprocess.run(
        [sys.executable, TRAIN, "--hparams", "sac_tiny", "--env", "HalfCheetah-v5",
         "--train_steps", "64", "--eval_episodes", "1", "--output_dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert list(cwd.iterdir()) == []
    said = [l for l in proc.stderr.splitlines() if l.startswith("rl: warning: MuJoCo: ")]
    assert len(said) == 1 and said[0].endswith(f"(its log: {out / 'MUJOCO_LOG.TXT'})"), said
    logged = (out / "MUJOCO_LOG.TXT").read_text()
    assert logged.count("WARNING: ") >= 2  # the training env's and the evaluation env's
    assert (
        said[0]
        .split("MuJoCo: ", 1)[1]
        .startswith(logged.split("WARNING: ", 1)[1].split("\n")[0][:40])
    )


@pytest.mark.process
def test_mistakes_on_an_existing_run_are_reported_without_loading_tensorflow(run_dir):
    out = run_dir  # a copy of the session's finished ppo_tiny run
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for args, expected in (
        (["--hparam_override", "lr=1"], "unknown hparam 'lr'"),
        (["--seed", "-3"], "flag --seed=-3: -3 is not an integer in the range [0, "),
        (["--env", "CartPole-v7"], "unknown env 'CartPole-v7'"),
    ):
        proc = run(*args, "--output_dir", str(out))
        assert proc.returncode == 2
        (line,) = messages(proc)
        assert line.startswith("train.py: error:") and expected in line
        assert "tensorflow" not in imported(proc)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.process
def test_tensorflow_loads_without_keras_plotting_imports_which_still_load_later():
    # Keras 3 imports matplotlib.pyplot and cv2 while TensorFlow loads (~1 s); rl keeps
    # them out (rl._tf.KERAS_UNUSED_OPTIONAL_IMPORTS) and rl's own plots and Atari
    # preprocessing import them afterwards as usual.
    code = (
        "import sys; from rl import _tf; _tf.import_tensorflow_quietly(); "
        "print(sorted(m for m in _tf.KERAS_UNUSED_OPTIONAL_IMPORTS if m in sys.modules)); "
        "import matplotlib.pyplot, cv2; print(cv2.resize is not None)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["[]", "True"], proc.stdout


@pytest.mark.process
def test_captured_stderr_holds_what_native_code_wrote_and_restores_the_descriptor():
    # As C++ writes: straight to file descriptor 2, past sys.stderr. Run in a child so
    # the descriptor pytest captures is not the one redirected.
    code = (
        "import os, sys\n"
        "from rl.processes import captured_stderr\n"
        "with captured_stderr() as log:\n"
        "    os.write(2, b'[W gcs_client.cc:210] retry\\n')\n"
        "    print('from python', file=sys.stderr)\n"
        "print(repr(log.text))\n"
        "try:\n"
        "    with captured_stderr() as failed:\n"
        "        os.write(2, b'before the error\\n')\n"
        "        raise KeyError('x')\n"
        "except KeyError:\n"
        "    print(repr(failed.text))\n"
        "os.write(2, b'after\\n')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        repr("[W gcs_client.cc:210] retry\nfrom python\n"),
        repr("before the error\n"),
    ]
    assert proc.stderr == "after\n"  # the descriptor is the terminal's again, error or not


@pytest.mark.process
def test_inputs_that_slipped_through_are_refused_in_one_line_without_tensorflow(tmp_path):
    # Each trained (or refused only once TensorFlow had loaded, or in a traceback's words).
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    out = str(tmp_path / "run")
    tiny = ["--hparams", "ppo_tiny", "--output_dir", out]
    cases = [
        (["--env", "CartPole-v1?max_episode_steps=-1"], "takes a positive integer (its own"),
        (["--env", "CartPole-v1?max_episode_steps=0"], "limit is 500; leave it out to keep that)"),
        (["--hparam_override", "learning_rate=1e-3,learning_rate=2e-3"], "overridden twice"),
        (
            ["--hparam_override", "learning_rate=1e-3", "--hparam_override", "seed=3"],
            "--hparam_override is given 2 times, and only the last would count",
        ),
        (["--record_video", "--eval_episodes", "0"], "eval_episodes 0 turns off; give"),
        (["--record_video", "--hparam_override", "eval_episodes=0"], "--eval_episodes 1 or more"),
        (["--env", "grpc://[::1/CartPole-v1"], "an IPv6 address is written in brackets"),
        (["--env", "grpc://[zz::1]:50051/CartPole-v1"], "invalid host ('zz::1' does not"),
        (["--plugins", "../../etc/passwd"], "--plugins ../../etc/passwd: not a module name"),
        (
            ["--hparams", "ppo_tiny", "--output_dir", str(loop)],
            f"{loop} is a symbolic link that cannot be followed (Too many levels of symbolic",
        ),
    ]
    for args, expected in cases:
        proc = run(*(args if "--output_dir" in args else tiny + args))
        assert proc.returncode == 2, (args, proc.stderr)
        (line,) = messages(proc)
        assert line.startswith("train.py: error:") and expected in line, line
        assert "tensorflow" not in imported(proc), args
        assert os.listdir(tmp_path) == ["loop"], args  # nothing written
