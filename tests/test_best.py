"""The best evaluation's checkpoint and policy artefact (rl/best.py): the rule, the record,
the folder's tidying, and runs that write, load, refuse and survive a kill while writing it."""

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from finished_run import ARGS, ROOT, contents, error_line, run

import rl
from rl.best import (
    BestRecord,
    best_policy_dir,
    best_steps,
    current_best,
    drop_earlier_bests,
    is_better,
    read_best,
    tidy_best,
)
from rl.errors import CheckpointError
from rl.experiment import Experiment
from rl.policy import PolicyArtefactError, load_policy, read_artefact

# ppo_tiny acts 32 steps per rollout: evaluations at 64, 128, ..., 384, checkpoints at 128,
# 256 and 384, so bests fall between checkpoints too.
OVERRIDES = {"eval_interval": 64}


def best_of(records):
    """The best evaluation of eval.jsonl's records by the documented rule (the first of
    the highest return_mean)."""
    best = None
    for record in records:
        if best is None or record["return_mean"] > best["return_mean"]:
            best = record
    return best


def eval_records(out):
    return [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]


# --- the rule and the record ----------------------------------------------------------
@pytest.mark.unit
def test_the_first_finite_evaluation_is_the_best_and_a_tie_keeps_the_earlier():
    assert is_better(-500.0, None)
    best = BestRecord(step=64, return_mean=20.0)
    assert is_better(20.5, best)
    assert not is_better(20.0, best)  # a tie: the earlier evaluation stays the best
    assert not is_better(19.0, best)
    assert not is_better(math.nan, None) and not is_better(math.inf, best)


def fake_best(out, step, return_mean=10.0):
    """A best folder as write_best lays it out, with a tiny artefact (no TensorFlow)."""
    folder = out / "best" / f"ckpt-{step}"
    (folder / "checkpoint").mkdir(parents=True)
    (folder / "checkpoint" / f"ckpt-{step}.index").write_bytes(b"index")
    (folder / "policy").mkdir()
    (folder / "policy" / "policy.json").write_text(json.dumps({"step": step, "hparams": {}}))
    np.savez(folder / "policy" / "weights.npz", np.zeros(3, np.float32))
    (folder / "best.json").write_text(json.dumps({"step": step, "return_mean": return_mean}))
    return folder


@pytest.mark.unit
def test_the_record_round_trips_and_a_damaged_best_is_one_line(tmp_path):
    folder = fake_best(tmp_path, 192, 81.5)
    assert read_best(str(folder)) == BestRecord(192, 81.5)
    damages = [  # (file, its new bytes or None: deleted, what the error says)
        ("best.json", None, "is not a best checkpoint (best.json is missing)"),
        ("best.json", b"{", "cannot read best.json"),
        ("best.json", b'{"step": 64, "return_mean": 1.0}', "must hold the step 192"),
        ("best.json", b'{"step": 192, "return_mean": "high"}', "and a return_mean"),
        ("checkpoint/ckpt-192.index", None, "lacks its checkpoint (checkpoint/ckpt-192)"),
        ("policy/weights.npz", b"torn", "cannot read the policy artefact"),
    ]
    for name, damage, said in damages:
        copy = tmp_path / "copy" / "best" / "ckpt-192"
        shutil.copytree(folder, copy)
        if damage is None:
            (copy / name).unlink()
        else:
            (copy / name).write_bytes(damage)
        with pytest.raises(CheckpointError) as raised:
            read_best(str(copy))
        assert said in str(raised.value) and "\n" not in str(raised.value), name
        shutil.rmtree(tmp_path / "copy")


@pytest.mark.unit
def test_tidying_keeps_the_best_up_to_the_restored_step(tmp_path):
    """A resume from step 128: the bests past it (their training is redone) move aside,
    the newest before it is the best, older ones and half-built folders go."""
    for step, mean in ((64, 10.0), (128, 20.0), (192, 30.0), (256, 40.0)):
        fake_best(tmp_path, step, mean)
    (tmp_path / "best" / "ckpt-320.partial").mkdir()  # a kill while writing it
    best, superseded, notices = tidy_best(str(tmp_path), restored_step=128)
    assert best == BestRecord(128, 20.0)
    assert best_steps(str(tmp_path)) == [128]
    assert sorted(os.listdir(tmp_path / "best")) == ["ckpt-128", "superseded"]
    assert sorted(os.listdir(tmp_path / "best" / "superseded")) == ["ckpt-192", "ckpt-256"]
    assert superseded == [str(tmp_path / "best" / f"ckpt-{s}") for s in (192, 256)]
    assert notices == []  # the caller says what moved (in the fallback's one line)
    assert tidy_best(str(tmp_path), restored_step=128) == (best, [], [])  # nothing more to do


@pytest.mark.unit
def test_an_unreadable_best_moves_aside_and_the_one_before_it_is_used(tmp_path):
    fake_best(tmp_path, 64, 10.0)
    (fake_best(tmp_path, 128, 20.0) / "best.json").write_text("garbled")
    best, _, notices = tidy_best(str(tmp_path), restored_step=128)
    assert best == BestRecord(64, 10.0)
    assert (tmp_path / "best" / "unreadable" / "ckpt-128" / "best.json").exists()
    [notice] = notices
    assert notice.startswith("moved the unreadable best checkpoint to ") and "\n" not in notice


@pytest.mark.unit
def test_earlier_bests_go_once_a_checkpoint_covers_the_newest(tmp_path):
    for step in (64, 192, 256):
        fake_best(tmp_path, step)
    drop_earlier_bests(str(tmp_path), 128)  # nothing before 64: kept
    assert best_steps(str(tmp_path)) == [64, 192, 256]
    drop_earlier_bests(str(tmp_path), 192)
    assert sorted(os.listdir(tmp_path / "best")) == ["ckpt-192", "ckpt-256"]


@pytest.mark.unit
def test_the_best_is_the_newest_up_to_the_newest_checkpoint(tmp_path):
    assert current_best(str(tmp_path)) is None
    fake_best(tmp_path, 64)
    assert current_best(str(tmp_path)) is None  # no checkpoint covers it: a resume redoes it
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "ckpt-128.index").write_bytes(b"")
    fake_best(tmp_path, 192)
    assert current_best(str(tmp_path)) == str(tmp_path / "best" / "ckpt-64")
    assert best_policy_dir(str(tmp_path)) == str(tmp_path / "best" / "ckpt-64" / "policy")
    with pytest.raises(PolicyArtefactError, match="has no best checkpoint yet"):
        best_policy_dir(str(tmp_path / "other"))


# --- a run ------------------------------------------------------------------------------
@pytest.mark.unit
def test_the_best_holds_the_weights_evaluated_and_loads_through_the_api(tmp_path):
    out = tmp_path / "run"
    exp = Experiment("ppo_tiny", str(out), overrides=OVERRIDES, train_steps=384, verbose=False)
    evaluated = {}  # the acting weights of each evaluation, by step
    evaluate = exp.evaluate

    def remembering(*args, **kwargs):
        evaluated[exp.step] = [a.copy() for a in exp.learner.publish().arrays]
        return evaluate(*args, **kwargs)

    exp.evaluate = remembering
    result = exp.train()
    exp.close()
    records = eval_records(out)
    assert [r["step"] for r in records] == sorted(evaluated) == [64, 128, 192, 256, 320, 384]
    best = best_of(records)
    step = best["step"]
    assert (result["best_eval_step"], result["best_eval_return_mean"]) == (
        step,
        best["return_mean"],
    )
    assert result["eval_return_mean"] == records[-1]["return_mean"]  # still the final one
    assert best_steps(str(out)) == [step]  # one best, beside the latest checkpoint
    folder = out / "best" / f"ckpt-{step}"
    assert read_best(str(folder)) == BestRecord(step, best["return_mean"])
    saved = read_artefact(str(folder / "policy"))["arrays"]
    assert len(saved) == len(evaluated[step])
    assert all(np.array_equal(a, b) for a, b in zip(saved, evaluated[step]))  # exact
    # The best checkpoint restores those weights, and its evaluation replays the recorded one.
    with rl.load(str(out), checkpoint="best") as loaded:
        assert loaded.step == step and loaded.restored_from.endswith(f"checkpoint/ckpt-{step}")
        restored = loaded.learner.publish().arrays
        assert all(np.array_equal(a, b) for a, b in zip(restored, evaluated[step]))
        assert loaded.evaluate()["returns"] == best["returns"]
    with rl.load(str(out)) as latest:
        assert latest.step == 384
    actor = load_policy(best_policy_dir(str(out)))
    assert actor.to_env(actor.act(np.zeros((1, 4), np.float32))[0]).shape == (1,)
    with pytest.raises(ValueError, match="checkpoint must be one of"):
        rl.load(str(out), checkpoint="worst")
    with pytest.raises(ValueError, match="loads a run read-only"):
        rl.load(str(out), read_only=False, checkpoint="best")


@pytest.mark.process
def test_test_episodes_from_the_best_checkpoint(run_dir):
    best = best_of(eval_records(run_dir))
    proc = run("--training=false", "--checkpoint", "best", "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    test = json.loads((run_dir / "test.json").read_text())
    assert test["step"] == best["step"]
    folder = run_dir / "best" / f"ckpt-{best['step']}"
    assert test["checkpoint"] == str(folder / "checkpoint" / f"ckpt-{best['step']}")
    assert "the best evaluation's checkpoint" in proc.stdout


@pytest.mark.process
@pytest.mark.parametrize("damage", ["none", "unreadable"])
def test_a_missing_or_unreadable_best_is_refused_in_one_line(run_dir, damage):
    [folder] = (run_dir / "best").iterdir()
    if damage == "none":
        shutil.rmtree(folder)
        said = f"{run_dir} has no best checkpoint yet"
    else:
        data = next((folder / "checkpoint").glob("*.data-*"))
        data.write_bytes(b"\0" * data.stat().st_size)
        said = "the best checkpoint"
    before = contents(run_dir)
    proc = run("--training=false", "--checkpoint", "best", "--output_dir", str(run_dir))
    assert proc.returncode == 2, proc.stderr
    assert error_line(proc).startswith(f"train.py: error: cannot test {run_dir}: {said}")
    assert contents(run_dir) == before


@pytest.mark.process
def test_a_bad_checkpoint_name_is_one_line():
    proc = subprocess.run(
        [sys.executable, "train.py", "--training=false", "--checkpoint=worst", "--output_dir=x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "train.py: error: flag --checkpoint=worst: value should be one of <latest|best>"
    ]


@pytest.mark.process
def test_a_kill_while_writing_the_best_keeps_the_previous_one(tmp_path):
    """The child makes every evaluation a best and kills itself (SIGKILL) while writing the
    one of step 192, its checkpoint written, its artefact not: no timing involved."""
    out = tmp_path / "run"
    child = textwrap.dedent(
        f"""
        import os, signal
        import rl.best, rl.experiment
        from rl.experiment import Experiment

        write_artefact = rl.best.write_policy_artefact

        def killed_at_192(agent, output_dir, step, **kwargs):
            if step == 192:
                os.kill(os.getpid(), signal.SIGKILL)
            return write_artefact(agent, output_dir, step, **kwargs)

        rl.best.write_policy_artefact = killed_at_192
        rl.experiment.is_better = lambda return_mean, best: True
        Experiment("ppo_tiny", {str(out)!r}, overrides={OVERRIDES!r}, train_steps=384,
                   verbose=False).train()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == -9, proc.stderr
    best = out / "best"
    assert sorted(os.listdir(best)) == ["ckpt-128", "ckpt-192.partial"]
    assert (best / "ckpt-192.partial" / "checkpoint" / "ckpt-192.index").exists()
    # The previous best is whole: its weights are checkpoint 128's (evaluated, then saved).
    assert read_best(str(best / "ckpt-128")).step == 128
    kept = read_artefact(str(best / "ckpt-128" / "policy"))["arrays"]
    saved = read_artefact(str(out / "policies" / "ckpt-128"))["arrays"]
    assert all(np.array_equal(a, b) for a, b in zip(kept, saved))
    test = run("--training=false", "--checkpoint", "best", "--output_dir", str(out))
    assert test.returncode == 0, test.stderr
    assert json.loads((out / "test.json").read_text())["step"] == 128
    # A resume removes the half-written one and keeps the best it resumes with.
    resumed = run(*ARGS, "--output_dir", str(out), "--hparam_override", "eval_interval=64")
    assert resumed.returncode == 0, resumed.stderr
    assert not any(name.endswith(".partial") for name in os.listdir(best))
    result = json.loads(resumed.stdout.splitlines()[-1])
    assert best_steps(str(out)) == [result["best_eval_step"]]
    assert result["best_eval_step"] in {r["step"] for r in eval_records(out)}
