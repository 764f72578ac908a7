"""Run folders that faults damaged: train.py recovers, or refuses in one line and writes nothing."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from finished_run import ARGS, ROOT, TRAIN, contents, error_line, run
from polling import wait_for
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

from rl import registry
from rl.experiment import (
    CHECKPOINT_INDEX,
    Experiment,
    RunConflictError,
    check_resume,
    listed_checkpoints,
)
from rl.files import lock_exclusively, read_json_object, write_text_atomic
from rl.run_folder import RUN_LOCK_FILE


def eval_steps(out):
    return [json.loads(l)["step"] for l in (out / "eval.jsonl").read_text().splitlines()]


def tensorboard(out):
    acc = event_accumulator.EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    return acc


# --- 1: an unreadable newest checkpoint is replaced, its steps logged once ----
@pytest.mark.process
@pytest.mark.parametrize("damaged", ["ckpt-384.index", "ckpt-384.data-00000-of-00001"])
def test_unreadable_final_checkpoint_is_redone_once(run_dir, damaged):
    path = run_dir / "checkpoints" / damaged
    path.write_bytes(b"\0" * path.stat().st_size)
    proc = run(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    # One line says it all (it was six): what cannot be read, what is used, what moved.
    kept, folder = run_dir / "checkpoints" / "ckpt-256", run_dir / "checkpoints"
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("rl: ")]
    assert line.startswith("rl: checkpoint ckpt-384 cannot be read ("), line
    assert line.endswith(
        f"; resuming from the previous checkpoint {kept}, redoing the training since step 256: "
        f"moved ckpt-384 to {folder / 'unreadable'}, the policy ckpt-384 to "
        f"{run_dir / 'policies' / 'superseded'}"
    ), line
    assert (run_dir / "checkpoints" / "unreadable" / damaged).exists()  # kept, not deleted
    assert listed_checkpoints(str(run_dir / "checkpoints")) == [128, 256, 384]
    before = contents(run_dir)
    again = run(*ARGS, "--output_dir", str(run_dir))
    assert again.returncode == 0 and "is finished at step 384" in again.stderr
    assert "cannot be read" not in again.stderr
    changed = {k for k, v in contents(run_dir).items() if before.get(k) != v}
    assert changed == {str(run_dir / "snapshot" / "resumes.jsonl")}  # nothing retrained
    assert eval_steps(run_dir) == [128, 256, 384]
    acc = tensorboard(run_dir)
    assert [e.step for e in acc.Tensors("eval/return_mean")] == [128, 256, 384]
    train_steps = [e.step for e in acc.Tensors("train/loss")]
    assert train_steps == sorted(set(train_steps)) and train_steps[-1] == 384


@pytest.mark.process
def test_no_readable_checkpoint_is_one_line_naming_the_folder_and_the_fix(run_dir):
    for index in (run_dir / "checkpoints").glob("ckpt-*.index"):
        index.write_bytes(b"\0" * 10)
    before = contents(run_dir)
    folder = run_dir / "checkpoints"
    said = (
        f"no checkpoint in {folder} can be read (ckpt-384, ckpt-256, ckpt-128; the newest: "
        "file is too short to be an sstable); put readable ones back from a copy, or train in "
        "another --output_dir"
    )
    proc = run(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"train.py: error: {said}"]
    test = run("--training=false", "--output_dir", str(run_dir))
    assert test.returncode == 2, test.stderr
    assert test.stderr.splitlines() == [f"train.py: error: cannot test {run_dir}: {said}"]
    assert contents(run_dir) == before


# --- 2: a lost or garbled index does not restart the run -----------------------
@pytest.mark.process
def test_checkpoints_are_found_without_their_index(run_dir):
    index = run_dir / "checkpoints" / CHECKPOINT_INDEX
    index.unlink()
    proc = run(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "ckpt-384" in proc.stderr and "is finished at step 384" in proc.stderr
    assert listed_checkpoints(str(run_dir / "checkpoints")) == [128, 256, 384]
    assert eval_steps(run_dir) == [128, 256, 384]


@pytest.mark.process
def test_a_garbled_index_is_rebuilt_and_rotates(run_dir):
    index = run_dir / "checkpoints" / CHECKPOINT_INDEX
    index.write_bytes(b'model_checkpoint_path: "ckpt-3\x00\x01 garbage {{\n')
    checkpoints = {k: v for k, v in contents(run_dir / "checkpoints").items() if "ckpt-" in k}
    # Read-only use finds the checkpoints too, and writes nothing into checkpoints/.
    test = run("--training=false", "--test_episodes", "1", "--output_dir", str(run_dir))
    assert test.returncode == 0, test.stderr
    assert json.loads((run_dir / "test.json").read_text())["step"] == 384
    assert index.read_bytes() == b'model_checkpoint_path: "ckpt-3\x00\x01 garbage {{\n'
    proc = run(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "is finished at step 384" in proc.stderr
    assert listed_checkpoints(str(run_dir / "checkpoints")) == [128, 256, 384]
    assert {k: v for k, v in contents(run_dir / "checkpoints").items() if "ckpt-" in k} == (
        checkpoints
    )
    # The rebuilt index lets CheckpointManager rotate them: keep_checkpoints is 3.
    longer = run("--hparams", "ppo_tiny", "--train_steps", "512", "--output_dir", str(run_dir))
    assert longer.returncode == 0, longer.stderr
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.index")) == [
        "ckpt-256.index",
        "ckpt-384.index",
        "ckpt-512.index",
    ]


# --- 3: a folder left by a kill during a checkpoint write is removed -------------
@pytest.mark.process
def test_temp_folder_of_a_killed_save_is_removed(run_dir):
    temp = run_dir / "checkpoints" / "ckpt-512_temp"
    temp.mkdir()
    (temp / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x" * 1000)
    test = run("--training=false", "--test_episodes", "1", "--output_dir", str(run_dir))
    assert test.returncode == 0 and temp.exists()  # read-only use leaves it
    assert run(*ARGS, "--output_dir", str(run_dir)).returncode == 0
    assert not temp.exists()


# --- 4: every file gets the mode the umask gives -------------------------------
@pytest.mark.unit
def test_write_text_atomic_follows_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_text_atomic(str(tmp_path / "a.json"), "{}\n")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temp file left


@pytest.mark.unit
@pytest.mark.parametrize(
    "data, said",
    [
        (b'{"a": "\xff"}', "is not UTF-8 text; it must hold a JSON object"),
        (b'{"a": 1', "is not JSON (Expecting ',' delimiter"),
        (b"", "is not JSON (Expecting value"),
        (b"null", "holds null; it must hold a JSON object"),
        (b"[1, 2]", "holds an array; it must hold a JSON object"),
        (b'"text"', "holds a string; it must hold a JSON object"),
    ],
)
def test_the_json_object_reader_names_the_file_and_what_it_holds(tmp_path, data, said):
    path = tmp_path / "a.json"
    path.write_bytes(data)
    with pytest.raises(ValueError) as raised:
        read_json_object(str(path))
    assert str(raised.value).startswith(f"{path} {said}")
    assert "\n" not in str(raised.value)


@pytest.mark.unit
def test_the_json_object_reader_returns_the_object_and_reports_a_missing_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"a": [1, 2.5, null], "b": {"c": "d"}}')
    assert read_json_object(str(path)) == {"a": [1, 2.5, None], "b": {"c": "d"}}
    with pytest.raises(FileNotFoundError):
        read_json_object(str(tmp_path / "missing.json"))


@pytest.mark.process
def test_every_run_file_has_the_umask_mode(tmp_path):
    out = tmp_path / "run"
    # One evaluation and checkpoint: every kind of file a run writes, at half the steps.
    proc = run(
        "--hparams", "ppo_tiny", "--train_steps", "128", "--output_dir", str(out), umask=0o022
    )
    assert proc.returncode == 0, proc.stderr
    modes = {p.relative_to(out).as_posix(): p.stat().st_mode & 0o777 for p in out.rglob("*")}
    assert modes["hparams.json"] == 0o644
    assert {m for p, m in modes.items() if (out / p).is_file()} == {0o644}


# --- 5: TensorBoard wall times are those of the records -------------------------
@pytest.mark.process
def test_tensorboard_wall_times_are_when_records_were_logged(tmp_path):
    out = tmp_path / "run"
    proc = run(
        "--hparams",
        "dqn_tiny",
        "--train_steps",
        "1024",
        "--hparam_override",
        "eval_interval=128,checkpoint_interval=2048",  # one checkpoint, at the end
        "--output_dir",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    evals = [json.loads(l) for l in (out / "eval.jsonl").read_text().splitlines()]
    events = tensorboard(out).Tensors("eval/return_mean")
    assert [e.step for e in events] == [r["step"] for r in evals] == list(range(128, 1025, 128))
    # eval.jsonl's wall_time (seconds since the start) is taken just before the
    # scalar is logged: the spacing of the two must agree.
    logged = [r["wall_time"] - evals[0]["wall_time"] for r in evals]
    stamped = [e.wall_time - events[0].wall_time for e in events]
    # (test_logbook checks with a fake clock that the commit's time is not used)
    assert stamped == pytest.approx(logged, abs=0.05)
    assert all(a < b for a, b in zip(stamped, stamped[1:]))
    values = [float(tensor_util.make_ndarray(e.tensor_proto)) for e in events]
    assert values == pytest.approx([r["return_mean"] for r in evals])


# --- 7: hparams that change what a checkpoint holds cannot be resumed -------------
@pytest.mark.process
def test_structural_change_is_refused_even_when_allowed(run_dir):
    before = contents(run_dir)
    proc = run(
        *ARGS,
        "--hparam_override",
        "hidden_sizes=[32]",
        "--allow_hparam_change",
        "--output_dir",
        str(run_dir),
    )
    assert proc.returncode == 2, proc.stderr
    line = error_line(proc)
    assert "cannot be resumed with these (hidden_sizes change what its checkpoints hold)" in line
    assert "use another --output_dir" in line and "--allow_hparam_change" not in line
    assert "cannot be read" not in proc.stderr
    assert contents(run_dir) == before


@pytest.mark.unit
@pytest.mark.parametrize(
    "changes, allowed",
    [
        ({"agent": "dqn"}, False),
        ({"model": "q_network"}, False),
        ({"hidden_sizes": (32,)}, False),
        ({"env": "Acrobot-v1"}, False),
        ({"learning_rate": 0.1, "activation": "relu", "num_envs": 4}, True),
    ],
)
def test_check_resume_allows_only_changes_a_checkpoint_survives(tmp_path, changes, allowed):
    saved = registry.hparams.get("ppo_tiny")()
    write_text_atomic(str(tmp_path / "hparams.json"), json.dumps(saved.to_dict()))
    new = registry.hparams.get("dqn_tiny")() if "agent" in changes else saved
    new = new.replace(**{k: v for k, v in changes.items() if k != "agent"})
    if allowed:
        assert check_resume(str(tmp_path), new, allow_change=True) == saved
        with pytest.raises(RunConflictError, match="pass --allow_hparam_change"):
            check_resume(str(tmp_path), new, allow_change=False)
    else:
        with pytest.raises(RunConflictError, match="cannot be resumed") as error:
            check_resume(str(tmp_path), new, allow_change=True)
        assert "--allow_hparam_change" not in str(error.value)


# --- 8: rerunning a finished run reports its results ------------------------------
@pytest.mark.process
def test_finished_rerun_reports_the_runs_results(run_dir):
    proc = run(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    last_eval = json.loads((run_dir / "eval.jsonl").read_text().splitlines()[-1])
    acc = tensorboard(run_dir)

    def last(tag):
        return float(tensor_util.make_ndarray(acc.Tensors(tag)[-1].tensor_proto))

    assert result["step"] == 384 and result["interrupted"] is None
    assert result["failure"] is None and result["failure_kind"] is None  # a fresh run's keys
    assert result["eval_return_mean"] == last_eval["return_mean"]
    records = [json.loads(l) for l in (run_dir / "eval.jsonl").read_text().splitlines()]
    best = max(records, key=lambda r: r["return_mean"])  # the first of the highest
    assert (result["best_eval_step"], result["best_eval_return_mean"]) == (
        best["step"],
        best["return_mean"],
    )
    assert result["steps_per_second"] == pytest.approx(last("train/steps_per_second"))
    assert result["steps_per_second"] > 0
    assert result["loss"] == pytest.approx(last("train/loss"))
    returns = [
        float(tensor_util.make_ndarray(e.tensor_proto)) for e in acc.Tensors("train/episode_return")
    ]
    assert result["episode_return_mean"] == pytest.approx(sum(returns[-100:]) / len(returns[-100:]))


# --- 9: damaged run files: one line, exit 2, nothing written -----------------------
def garble_agent(out):
    values = json.loads((out / "hparams.json").read_text())
    (out / "hparams.json").write_text(json.dumps({**values, "agent": 5}))


def latin1_hparams(out):
    (out / "hparams.json").write_bytes((out / "hparams.json").read_bytes() + b"\xe9\xff\n")


def latin1_eval_line(out):
    lines = (out / "eval.jsonl").read_bytes().splitlines(keepends=True)
    (out / "eval.jsonl").write_bytes(lines[0] + b'{"step": 200, "note": "\xe9"}\n' + lines[1])


def text_step(out):
    lines = (out / "eval.jsonl").read_bytes().splitlines(keepends=True)
    (out / "eval.jsonl").write_bytes(lines[0] + b'{"step": "12x"}\n' + b"".join(lines[1:]))


@pytest.mark.process
@pytest.mark.parametrize(
    "damage, expected",
    [
        (
            garble_agent,
            f"hparams.json: 'agent' must be one of {', '.join(registry.agents.names())}, got 5",
        ),
        (latin1_hparams, "hparams.json is not UTF-8 text"),
        (latin1_eval_line, "eval.jsonl line 2 is not UTF-8 text"),
        (text_step, "eval.jsonl line 2 has step '12x', not an integer"),
    ],
)
def test_damaged_run_file_is_one_line_and_nothing_written(run_dir, damage, expected):
    damage(run_dir)
    before = contents(run_dir)
    proc = run(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 2, proc.stderr
    assert expected in error_line(proc)
    assert "Traceback" not in proc.stderr
    assert contents(run_dir) == before


@pytest.mark.process
def test_a_last_eval_line_cut_by_a_kill_is_tolerated(run_dir):
    with open(run_dir / "eval.jsonl", "ab") as f:
        f.write(b'{"step": 5')
    proc = run("--hparams", "ppo_tiny", "--train_steps", "512", "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert eval_steps(run_dir) == [128, 256, 384, 512]


# --- 10: an output_dir that is a file or cannot be written -------------------------
@pytest.mark.process
def test_output_dir_that_is_a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("mine\n")
    for out in (path, path / "run"):
        proc = run("--hparams", "ppo_tiny", "--output_dir", str(out))
        assert proc.returncode == 2
        assert "is a file, not a folder" in error_line(proc)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert path.read_text() == "mine\n"


@pytest.mark.process
def test_output_dir_that_cannot_be_written():
    # Not even root can create anything under /proc.
    proc = run("--hparams", "ppo_tiny", "--output_dir", "/proc/rl-faults-test/run")
    assert proc.returncode == 2
    assert "cannot write in /proc" in error_line(proc)
    assert not os.path.exists("/proc/rl-faults-test")


# --- 10: one writer per run folder ------------------------------------------------
@pytest.mark.process
def test_a_run_another_process_trains_is_refused_and_left_alone(run_dir):
    # This test process holds the run's lock, as the process training it would.
    fd = lock_exclusively(str(run_dir / RUN_LOCK_FILE))
    assert fd is not None
    try:
        before = contents(run_dir)
        proc = run(*ARGS, "--train_steps", "512", "--output_dir", str(run_dir))
        assert proc.returncode == 2, proc.stderr
        assert f"is being trained by another process (pid {os.getpid()})" in error_line(proc)
        assert contents(run_dir) == before
    finally:
        os.close(fd)
    # Once the lock is free (as when its holder ends, even by kill -9), it resumes.
    proc = run(*ARGS, "--train_steps", "512", "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert (
        "resuming from" in proc.stderr and json.loads(proc.stdout.splitlines()[-1])["step"] == 512
    )


@pytest.mark.slow
def test_a_second_experiment_on_a_run_in_this_process_is_refused(tmp_path):
    out = str(tmp_path / "run")
    first = Experiment(hparams="ppo_tiny", output_dir=out, verbose=False)
    try:
        with pytest.raises(RunConflictError, match="held by an Experiment in this process"):
            Experiment(hparams="ppo_tiny", output_dir=out, verbose=False)
    finally:
        first.close()
    second = Experiment(hparams="ppo_tiny", output_dir=out, verbose=False)  # closed: free
    del second  # dropped without close(): the next one collects it and takes the lock
    third = Experiment(hparams="ppo_tiny", output_dir=out, verbose=False)
    third.close()


@pytest.mark.process
def test_copies_stop_with_a_checkpoint_when_their_parent_is_killed(tmp_path):
    out = tmp_path / "copies"
    command = [sys.executable, TRAIN, "--hparams", "ppo_tiny", "--train_steps", "10000000",
               "--copies", "2", "--copies_parallel", "2", "--output_dir", str(out)]  # fmt: skip
    parent = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        # Both copies are training once each has saved a checkpoint.
        indexes = [out / f"run_{i}" / "checkpoints" / "checkpoint" for i in range(2)]
        wait_for(
            lambda: all(p.exists() for p in indexes), "checkpoints of both copies", 180, parent
        )
        children = child_pids(parent.pid)
        assert len(children) == 2
    finally:
        parent.kill()
        parent.wait()
    # Linux sent each copy SIGTERM: it saves a checkpoint and ends (128 + 15 = 143).
    wait_for(
        lambda: not any(os.path.exists(f"/proc/{pid}") for pid in children), "end of the copies"
    )
    # Rerun with a budget already reached: each copy resumes, is finished, and the summary
    # is written (a copy still writing would have made this fail or conflict).
    proc = run("--hparams", "ppo_tiny", "--train_steps", "128", "--copies", "2",
               "--output_dir", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("resuming from") == 2
    assert json.loads((out / "summary.json").read_text())["num_runs"] == 2


def child_pids(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


# --- 11: a run never shares its folder with --copies runs or foreign files ------------
@pytest.mark.process
def test_a_single_run_is_refused_in_a_copies_folder(copies_runs, tmp_path):
    out = tmp_path / "copies"
    shutil.copytree(copies_runs / "seq", out)
    before = contents(out)
    for extra in ([], ["--copies", "1"]):
        proc = run("--hparams", "ppo_tiny", *extra, "--output_dir", str(out))
        assert proc.returncode == 2, proc.stderr
        assert "holds --copies runs" in error_line(proc)
    assert contents(out) == before


@pytest.mark.process
def test_more_copies_grow_a_copies_folder_and_fewer_are_refused(copies_runs, tmp_path):
    out = tmp_path / "copies"
    shutil.copytree(copies_runs / "seq", out)
    done = {i: contents(out / f"run_{i}" / "checkpoints") for i in range(2)}
    grown = run("--hparams", "ppo_tiny", "--copies", "3", "--output_dir", str(out))
    assert grown.returncode == 0, grown.stderr
    # The two finished copies are kept as they were; only the third trained.
    assert {i: contents(out / f"run_{i}" / "checkpoints") for i in range(2)} == done
    summary = json.loads((out / "summary.json").read_text())
    assert [r["run_dir"] for r in summary["runs"]] == [str(out / f"run_{i}") for i in range(3)]
    assert all("best_return" in r for r in summary["runs"])
    before = contents(out)
    fewer = run("--hparams", "ppo_tiny", "--copies", "2", "--output_dir", str(out))
    assert fewer.returncode == 2, fewer.stderr
    assert error_line(fewer) == (
        f"train.py: error: {out} holds 3 copies (run_<i>/) and --copies 2 would leave some "
        "out of summary.json; give --copies 3 or more to resume or grow them, or use another "
        "--output_dir"
    )
    assert contents(out) == before


@pytest.mark.process
def test_copies_are_refused_in_a_single_runs_folder(run_dir):
    before = contents(run_dir)
    proc = run(*ARGS, "--copies", "2", "--output_dir", str(run_dir))
    assert proc.returncode == 2, proc.stderr
    assert "holds a single run" in error_line(proc)
    assert contents(run_dir) == before


@pytest.mark.process
def test_new_copies_are_refused_among_files_that_are_not_copies(tmp_path):
    # They were written beside a tournament's files (and a summary.json beside its own).
    out = tmp_path / "tournament"
    out.mkdir()
    (out / "payoff.csv").write_text("player,opponent\n")
    (out / "tournament.json").write_text("{}")
    before = contents(out)
    proc = run(*ARGS, "--copies", "2", "--output_dir", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "holds files that are not --copies runs (payoff.csv, tournament.json)" in error_line(
        proc
    )
    assert contents(out) == before
    # Copies one after another are refused before TensorFlow loads, as side by side:
    # here TensorFlow cannot load at all.
    no_tensorflow = tmp_path / "no_tensorflow" / "tensorflow"
    no_tensorflow.mkdir(parents=True)
    (no_tensorflow / "__init__.py").write_text('raise ImportError("TensorFlow was loaded")')
    proc = subprocess.run(
        [sys.executable, TRAIN, *ARGS, "--copies", "2", "--output_dir", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(no_tensorflow.parent)},
    )
    assert proc.returncode == 2, proc.stderr
    assert "holds files that are not --copies runs" in error_line(proc)
    assert contents(out) == before
    # A file is refused as it is for one run, before the first copy starts.
    proc = run(*ARGS, "--copies", "2", "--output_dir", str(out / "payoff.csv"))
    assert proc.returncode == 2 and proc.stderr.startswith("train.py: error:"), proc.stderr
    assert f"{out / 'payoff.csv'} is a file, not a folder" in error_line(proc)


@pytest.mark.process
def test_a_new_run_is_refused_among_files_that_are_not_a_run(tmp_path):
    out = tmp_path / "notes"
    (out / "checkpoints").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "checkpoints" / "foo").write_text("also mine")
    before = contents(out)
    proc = run(*ARGS, "--output_dir", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "holds files that are not a run (checkpoints, notes.txt)" in error_line(proc)
    assert contents(out) == before
    # An empty folder is fine.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(*ARGS, "--train_steps", "128", "--output_dir", str(empty)).returncode == 0
