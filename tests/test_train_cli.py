"""train.py as a user runs it: bad input, kill -9 and resume, Ctrl-C."""

import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
from polling import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")


def run(*args, timeout=240):
    return subprocess.run(
        [sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def error_line(proc):
    lines = [l for l in proc.stderr.splitlines() if l.startswith("train.py: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.process
@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--hparams", "ppo_cartpol"],
            "unknown hparams 'ppo_cartpol': did you mean 'ppo_cartpole'",
        ),
        (["--hparams", "ppo_tiny", "--sys", "tpu_pod"], "unknown sys 'tpu_pod'"),
        (
            ["--hparams", "ppo_tiny", "--env", "CartPole-v7"],
            "unknown env 'CartPole-v7': did you mean 'CartPole-v1'",
        ),
        (["--hparams", "ppo_tiny", "--hparam_override", "lr=1"], "unknown hparam 'lr'"),
        (
            ["--hparams", "ppo_tiny", "--hparam_override", "num_envs=two"],
            "hparam 'num_envs' expects int",
        ),
        # One case per kind of bad override value (unreadable, too long, out
        # of range, another agent's); the rest are in-process tests of
        # resolve_hparams in test_registry_hparams.py.
        (  # literal_eval raised TypeError here
            ["--hparams", "ppo_tiny", "--hparam_override", "hidden_sizes={[]:1}"],
            "hparam 'hidden_sizes' expects list of int, e.g. hidden_sizes=[16]",
        ),
        (  # literal_eval raised MemoryError here
            ["--hparams", "ppo_tiny", "--hparam_override", "train_steps=" + "-" * 20_000 + "1"],
            "hparam overrides are 20013 characters long; at most 4000 are read",
        ),
        (  # oneDNN aborted the process here
            ["--hparams", "ppo_tiny", "--hparam_override", "hidden_sizes=[0]"],
            "each item of hparam 'hidden_sizes' must be in [1, 4096], got 0",
        ),
        (
            ["--hparams", "ppo_tiny", "--hparam_override", "agent=dqn"],
            "hparam 'agent' must be one of 'ppo', got 'dqn'",
        ),
        (  # absl said "invalid literal for int() with base 10: 'abc'"
            ["--hparams", "ppo_tiny", "--train_steps", "abc"],
            "flag --train_steps=abc: 'abc' is not an integer in the range [1, 1000000000000]",
        ),
        (
            ["--hparams", "ppo_tiny", "--train_steps", "0"],
            "flag --train_steps=0: 0 is not an integer in the range [1, ",
        ),
        (  # absl said "('Non-boolean argument to boolean flag', 'maybe')"
            ["--hparams", "ppo_tiny", "--record_video=maybe"],
            "flag --record_video=maybe: 'maybe' is not true or false",
        ),
        (
            ["--hparams", "ppo_tiny", "--no_such_flag"],
            "unknown flag --no_such_flag; train.py --help lists the flags",
        ),
        (
            ["--hparams", "ppo_tiny", "--copie", "2"],
            "unknown flag --copie; did you mean --copies",
        ),
        (  # both copies trained, then the summary raised FileNotFoundError (exit 1)
            ["--hparams", "ppo_tiny", "--copies", "2", "--eval_episodes", "0"],
            "--copies compares the copies' final evaluations (summary.json, curves.png), "
            "which eval_episodes 0 turns off; give it at least 1",
        ),
        (
            ["--hparams", "ppo_tiny", "--copies", "2", "--hparam_override", "eval_episodes=0"],
            "--copies compares the copies' final evaluations",
        ),
        (
            ["--hparams", "ppo_tiny", "--copies_parallel", "2"],
            "--copies_parallel is for --copies N with N > 1",
        ),
        # Every numeric flag has a range (test_input_checks.py); these were accepted.
        (  # TensorFlow's device set-up spun for minutes
            ["--hparams", "ppo_tiny", "--sys", "mirrored", "--cpu_replicas", "100000"],
            "flag --cpu_replicas=100000: 100000 is not an integer in the range [2, 64]",
        ),
        (  # grew to gigabytes checking the copies
            ["--hparams", "ppo_tiny", "--copies", "100000000"],
            "flag --copies=100000000: 100000000 is not an integer in the range [1, 1000]",
        ),
        (  # rl.search refused it; one check for both now
            ["--hparams", "ppo_tiny", "--copies", "2", "--copies_parallel", "3"],
            "--copies_parallel 3 is more than --copies 2: at most 2 copies can run at once",
        ),
        (
            ["--hparams", "ppo_tiny", "--num_workers", "2", "--worker_restart_window", "nan"],
            "flag --worker_restart_window=nan: nan is not a number in the range [1.0, 604800.0]",
        ),
        (
            ["--hparams", "ppo_tiny", "--num_workers", "2", "--worker_restart_window", "inf"],
            "flag --worker_restart_window=inf: inf is not a number in the range",
        ),
        (  # ignored without a word: no worker read it
            ["--hparams", "dqn_tiny", "--worker_rounds_ahead", "1"],
            "--worker_rounds_ahead is for actor processes, which --num_workers 0 has none "
            "of; add --num_workers N or remove it",
        ),
        (
            ["--hparams", "dqn_tiny", "--worker_timeout", "5", "--worker_restarts", "1"],
            "--worker_restarts, --worker_timeout are for actor processes, which "
            "--num_workers 0 has none of; add --num_workers N or remove them",
        ),
        (  # 0 would grant no round: the learner would wait for ever
            ["--hparams", "dqn_tiny", "--num_workers", "2", "--worker_rounds_ahead", "0"],
            "flag --worker_rounds_ahead=0: 0 is not an integer in the range [1, 16]",
        ),
        (
            ["--hparams", "ppo_tiny", "--seed", "-1"],
            "flag --seed=-1: -1 is not an integer in the range [0, 2147483647]",
        ),
        (  # any text was true
            ["--hparams", "ppo_tiny", "--env", "CartPole-v1?sutton_barto_reward=maybe"],
            "env 'CartPole-v1' keyword argument 'sutton_barto_reward' takes true or false, "
            "got 'maybe'",
        ),
        (  # a RecursionError traceback
            ["--hparams", "ppo_tiny", "--env", "CartPole-v1?sutton_barto_reward=" + "[" * 3000],
            "nested deeper than",
        ),
        # User text with a newline is echoed escaped: the error stays one line.
        (["--hparams", "ppo_tiny", "--env", "Cart\nPole"], "unknown env 'Cart\\nPole'"),
        (["--hparams", "ppo_\ntiny"], "unknown hparams 'ppo_\\ntiny'"),
        (
            ["--hparams", "ppo_tiny", "--hparam_override", "le\narning_rate=1"],
            "unknown hparam 'le\\narning_rate'",
        ),
        (["--hparams", "ppo_tiny", "--plugins", "no\nsuch"], "--plugins no\\nsuch: not a module"),
        (  # was cut at the newline: "flag --train_steps=1"
            ["--hparams", "ppo_tiny", "--train_steps", "1\n2"],
            "flag --train_steps=1\\n2: '1\\n2' is not an integer in the range",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, expected):
    out = tmp_path / "new_dir"
    proc = run(*args, "--output_dir", str(out))
    assert proc.returncode == 2, proc.stderr
    assert expected in error_line(proc)
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert not out.exists()


@pytest.mark.process
def test_an_output_dir_with_a_newline_is_echoed_in_one_line(tmp_path):
    notes = tmp_path / "a\nb"
    notes.write_text("not a folder\n")
    proc = run("--hparams", "ppo_tiny", "--output_dir", str(notes))
    assert proc.returncode == 2, proc.stderr
    assert "a\\nb" in error_line(proc) and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert notes.read_text() == "not a folder\n"


@pytest.mark.process
def test_missing_output_dir_and_hparams(tmp_path):
    proc = run("--hparams", "ppo_tiny")
    assert proc.returncode == 2 and "--output_dir is required" in error_line(proc)
    proc = run("--output_dir", str(tmp_path / "x"))
    assert proc.returncode == 2 and "--hparams is required" in error_line(proc)
    assert not (tmp_path / "x").exists()


@pytest.mark.process
def test_help_says_evaluation_acts_with_the_sets_eval_act_select():
    # It said "Greedy episodes"; the Atari DQN sets evaluate epsilon-greedy.
    proc = run("--help")
    assert proc.returncode == 0, proc.stderr
    assert "acted with the hparams' eval_act_select" in " ".join(proc.stdout.split())


@pytest.mark.process
def test_list_prints_every_kind():
    proc = run("--list")
    assert proc.returncode == 0
    for kind in ("agents:", "models:", "act_select:", "grad_comp:", "hparams:", "envs:"):
        assert kind in proc.stdout
    assert "  ppo_cartpole" in proc.stdout


@pytest.mark.process
def test_other_runs_hparams_are_refused_unless_asked(run_dir):
    out = run_dir  # a copy of the session's finished ppo_tiny run (384 steps)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    proc = run("--hparams", "dqn_tiny", "--output_dir", str(out))
    assert proc.returncode == 2
    assert "holds a run with other hparams" in error_line(proc)
    proc = run(
        "--hparams", "ppo_tiny", "--hparam_override", "learning_rate=0.1", "--output_dir", str(out)
    )
    assert proc.returncode == 2 and "learning_rate" in error_line(proc)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert before == after  # nothing written or lost
    # Longer training is not a different run.
    assert (
        run("--hparams", "ppo_tiny", "--train_steps", "512", "--output_dir", str(out)).returncode
        == 0
    )
    proc = run(
        "--hparams",
        "ppo_tiny",
        "--hparam_override",
        "learning_rate=0.1",
        "--allow_hparam_change",
        "--output_dir",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "hparams.json").read_text())["learning_rate"] == 0.1
    assert list(out.glob("hparams.before-*.json"))


def eval_steps(out):
    return [json.loads(l)["step"] for l in (out / "eval.jsonl").read_text().splitlines()]


def tensorboard_steps(out, tag):
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    return [e.step for e in acc.Tensors(tag)]


@pytest.mark.slow
def test_kill_9_then_rerun_resumes_without_doubling(tmp_path):
    out = tmp_path / "run"
    args = [
        "--hparams",
        "dqn_tiny",
        "--train_steps",
        "20000",
        "--hparam_override",
        "eval_interval=1024,checkpoint_interval=1024",
        "--output_dir",
        str(out),
    ]
    proc = subprocess.Popen(
        [sys.executable, TRAIN, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = out / "checkpoints" / "checkpoint"
    evals = out / "eval.jsonl"

    def has_eval_2048():
        # Its line is committed after checkpoint 2048 is saved: wait for the
        # line itself, or the kill may fall in between (then resume redoes it).
        return evals.exists() and 2048 in eval_steps(out)

    wait_for(has_eval_2048, "evaluation line at step 2048", timeout=180, process=proc)
    proc.kill()  # SIGKILL, mid-run
    proc.wait()
    assert state.exists() and "ckpt-2048" in state.read_text()
    killed_at = max(eval_steps(out))
    assert killed_at >= 2048
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert "resuming from" in done.stderr
    steps = eval_steps(out)
    assert steps == sorted(set(steps))  # no step twice, never backwards
    assert steps[-1] == 20000
    tb = tensorboard_steps(out, "eval/return_mean")
    assert tb == sorted(set(tb)) and tb[-1] == 20000


@pytest.mark.process
def test_ctrl_c_saves_a_checkpoint_and_exits_130(tmp_path):
    # No periodic checkpoint falls inside the run, so the one found afterwards is the
    # signal's. The signal is sent once a progress line shows the run past step 64.
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            TRAIN,
            "--hparams",
            "ppo_tiny",
            "--train_steps",
            "1000000",
            "--hparam_override",
            "checkpoint_interval=1000000",
            "--output_dir",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = []  # progress lines (stderr) as they come

    def read_stderr():
        for line in proc.stderr:
            stderr.append(line)

    def progress():
        steps = [re.match(r"step\s+([\d,]+)/", line) for line in list(stderr)]
        return max((int(m.group(1).replace(",", "")) for m in steps if m), default=0)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()

    def past_step_64():
        step = progress()
        return step if step >= 64 else None

    seen = wait_for(
        past_step_64, "progress line past step 64", process=proc, details=lambda: "".join(stderr)
    )
    proc.send_signal(signal.SIGINT)
    proc.stdout.read()
    code = proc.wait(timeout=60)
    reader.join(timeout=10)
    assert code == 130, stderr
    assert "stopping, with a checkpoint if a clean point comes" in "".join(stderr), stderr
    latest = (out / "checkpoints" / "checkpoint").read_text().splitlines()[0]
    step = int(latest.split("ckpt-")[1].rstrip('"'))
    assert step >= seen  # saved on the signal, after the progress line seen
    assert step % 32 == 0  # at a rollout boundary (2 envs x 16 steps)


@pytest.mark.process
def test_a_budget_that_ends_mid_rollout_says_where_the_run_ends(tmp_path):
    # ppo_tiny's rollout: 2 envs x 16 steps = 32; 250 ends inside the eighth.
    proc = run("--hparams", "ppo_tiny", "--train_steps", "250", "--output_dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert (
        "train_steps=250 is not a multiple of a rollout (32 env steps): the run ends at step 256"
        in proc.stderr
    )
    assert json.loads(proc.stdout.splitlines()[-1])["step"] == 256


@pytest.mark.unit
def test_the_progress_line_counts_down_to_zero_and_not_below():
    import collections
    import types

    from rl.experiment import Progress

    run = types.SimpleNamespace(
        step=0, _recent_returns=collections.deque([1.0, 3.0]), _last_eval={"return_mean": 2.5}
    )
    progress = Progress(run, target=1000, enabled=False)
    progress.start_time -= 10.0  # 10 s ago
    run.step = 500  # 50 steps/s: 10 s to go
    assert re.search(
        r"step +500/1,000 +50 steps/s .* 2\.0 +eval 2\.5 +ETA 0:00:1[01]$", progress.line()
    )
    run.step = 1500  # a rollout that ends past the target: 3 s past at 150 steps/s
    assert progress.line().endswith("ETA 0:00:00")


@pytest.mark.process
def test_a_blank_env_server_token_is_refused_before_connecting(tmp_path):
    # It was sent as "Bearer    " to a server that may take no token at all.
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--env", "grpc://127.0.0.1:9/CartPole-v1",
         "--output_dir", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "RL_ENV_SERVER_TOKEN": "   "},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "$RL_ENV_SERVER_TOKEN is blank" in error_line(proc)
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert not out.exists()
