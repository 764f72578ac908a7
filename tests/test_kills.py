"""Nothing lost at a kill (issue 44): a checkpoint and its policy artefact are one unit, and
what kills leave half-written goes at the next run of the folder.

train.py runs as a user runs it; ``tests/faults/sitecustomize.py``, on its PYTHONPATH only
here, kills it (SIGKILL) at a chosen file event of one checkpoint save.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from finished_run import ARGS, contents
from polling import run_train_py

from rl.policy import load_policy, policy_steps, read_artefact
from rl.run_folder import checkpoint_steps, leftover_temporaries

FAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults")
# A checkpoint, with an evaluation, at every rollout (ppo_tiny acts 32 steps per rollout).
EVERY_ROLLOUT = ["--hparams", "ppo_tiny"]
EVERY_ROLLOUT += ["--hparam_override", "checkpoint_interval=32,eval_interval=32,eval_episodes=1"]
REEXPORTED = "re-exported"


def train(out, steps, fault=None):
    """train.py on ``out`` to ``steps``; ``fault``: (step, n) kills it at the n-th file
    event of checkpoint ``step``'s save, (step, None) lists them in out/../events.txt."""
    env = dict(os.environ)
    if fault is not None:
        step, at = fault
        path = os.pathsep.join(filter(None, [FAULTS, env.get("PYTHONPATH")]))
        env.update(PYTHONPATH=path, RL_FAULT_DIR=str(out), RL_FAULT_STEP=str(step))
        env.update({"RL_FAULT_AT": str(at)} if at is not None else {})
        env.update({"RL_FAULT_LOG": str(out.parent / "events.txt")} if at is None else {})
    args = [*EVERY_ROLLOUT, "--train_steps", str(steps), "--output_dir", str(out)]
    return run_train_py(*args, env=env)


def without_artefact(out):
    """Steps of the checkpoints in out/checkpoints whose policies/ckpt-<step> is missing."""
    return sorted(set(checkpoint_steps(str(out / "checkpoints"))) - set(policy_steps(str(out))))


def reexport_lines(proc):
    return [l for l in proc.stderr.splitlines() if REEXPORTED in l]


def eval_steps(out):
    return [json.loads(l)["step"] for l in (out / "eval.jsonl").read_text().splitlines()]


def saved_variables(saved_model):
    """A SavedModel's variables, by checkpoint key (its object graph left out)."""
    reader = tf.train.load_checkpoint(str(saved_model / "variables" / "variables"))
    keys = set(reader.get_variable_to_shape_map()) - {"_CHECKPOINTABLE_OBJECT_GRAPH"}
    return {key: reader.get_tensor(key) for key in keys}


@pytest.mark.process
def test_a_kill_at_any_file_event_of_a_save_loses_no_policy(tmp_path):
    """One train.py per file event of a save, each killed at its event, each the rerun of
    the one before; then the finished run's rerun, killed in its re-export, and rerun:
    every checkpoint keeps its artefact, re-exported where a kill cut it.

    TensorFlow writes the checkpoint (between the logbook's renaming of .staged-<N>.tmp and
    its committing into tb/) and the SavedModel in C++, where the audit hook sees nothing:
    a kill during those writes leaves what a kill at the Python event before them leaves,
    plus TensorFlow's temporaries (test_what_kills_leave_half_written_goes_at_the_next_run).
    """
    out = tmp_path / "run"
    counted = train(out, 64, fault=(64, None))  # checkpoints 32 and 64, the save of 64 listed
    assert counted.returncode == 0, counted.stderr
    events = (tmp_path / "events.txt").read_text().splitlines()
    assert events[-1].endswith("os.rename policies/ckpt-64.partial -> policies/ckpt-64"), events
    # From the last event before the checkpoint's first write to the artefact's last.
    first = next(i for i, e in enumerate(events) if e.endswith(".staged-64.tmp -> .staged-64"))
    missing, kept = [], None
    for n in range(first, len(events)):
        target = checkpoint_steps(str(out / "checkpoints"))[-1] + 32
        if n == len(events) - 1:  # at the rename that completes the artefact: all written
            kept = tmp_path / "partial"
        proc = train(out, target, fault=(target, n))
        assert proc.returncode == -9, f"event {events[n]}: {proc.stderr}"
        lines = reexport_lines(proc)  # the rerun re-exports what the kill before cut, once
        assert len(lines) == len(missing), f"event {events[n]}: {proc.stderr}"
        for step in missing:
            assert f"policies/ckpt-{step} from ckpt-{step} (a kill" in lines[0]
        missing = without_artefact(out)
        assert set(missing) <= {target}, f"event {events[n]}: {missing}"  # at most the new one
        if kept is not None:
            shutil.copytree(out / "policies" / f"ckpt-{target}.partial", kept)
    assert missing == [target]  # the last kill came after the checkpoint, before the artefact
    # A kill in the rerun's re-export (at its last event) leaves what it found.
    export = next(i for i, e in enumerate(events) if e.endswith("rmtree policies/ckpt-64.partial"))
    proc = train(out, target, fault=(target, len(events) - 1 - export))
    assert proc.returncode == -9 and not reexport_lines(proc), proc.stderr
    assert without_artefact(out) == [target]
    # The rerun of the finished run re-exports it too, in one line.
    proc = train(out, target)
    assert proc.returncode == 0, proc.stderr
    assert f"is finished at step {target}" in proc.stderr
    assert len(reexport_lines(proc)) == 1, proc.stderr
    # Every checkpoint ever saved has its artefact (policy_steps: what tournaments, self-play
    # pools and tracking list); evaluations went on without a gap.
    assert policy_steps(str(out)) == list(range(32, target + 1, 32))
    assert without_artefact(out) == [] and not list((out / "policies").glob("*.partial"))
    assert eval_steps(out) == list(range(32, target + 1, 32))
    # The re-exported artefact is what the killed save was about to rename into place.
    again = out / "policies" / f"ckpt-{target}"
    written, reexported = read_artefact(str(kept)), read_artefact(str(again))
    assert (reexported["step"], reexported["version"]) == (written["step"], written["version"])
    assert len(reexported["arrays"]) == len(written["arrays"])
    for a, b in zip(reexported["arrays"], written["arrays"]):
        np.testing.assert_array_equal(a, b)
    written_model = saved_variables(kept / "saved_model")
    reexported_model = saved_variables(again / "saved_model")
    assert written_model.keys() == reexported_model.keys() and written_model
    for key, value in written_model.items():
        np.testing.assert_array_equal(reexported_model[key], value)
    observations = tf.random.stateless_normal([8, 4], seed=[1, 2])  # CartPole's
    serve = tf.saved_model.load(str(again / "saved_model")).signatures["serving_default"]
    np.testing.assert_array_equal(
        serve(observations=observations)["output_0"],
        tf.saved_model.load(str(kept / "saved_model"))(observations),
    )
    actor = load_policy(str(again))
    assert actor.to_env(actor.act(np.zeros((1, 4), np.float32), target)[0]).shape == (1,)


# What kills leave half-written, in each folder where one can be left, with its writer; a
# name ending in "/" is a folder (planted with a file in it).
HALF_WRITTEN = {
    ".hparams.0123456789ab.tmp.json": "rl/files.py's write_atomically",
    ".eval.0123456789ab.tmp.jsonl": "the logbook rebuilding eval.jsonl",
    ".test.0123456789ab.tmp.json": "--training=false",
    ".tracking.0123456789ab.tmp.json": "--tracking",
    ".snapshot.build-4242-0123abcd/": "the snapshot, built aside",
    ".rl-write-check-ab_12xyz/": "check_output_dir's probe",
    "checkpoints/.checkpoint.0123456789ab.tmp": "write_checkpoint_index",
    "checkpoints/checkpoint.tmp0123456789abcdef0123456789abcdef": "CheckpointManager's index",
    "checkpoints/ckpt-512_temp/": "TensorFlow's save under way",
    "checkpoints/ckpt-512.data-00000-of-00001": "TensorFlow's data, renamed before its index",
    "checkpoints/.replay-512.0123456789ab.tmp.npz": "a separate state file",
    "snapshot/.resumes.0123456789ab.tmp.jsonl": "a resume's line",
    "tb/.events.out.tfevents.000000000000512.1.0.rl.0123456789ab.tmp.v2": "a rebuilt event file",
    "videos/.eval_step000000512_ep0.0123456789ab.tmp.mp4": "a recorded episode",
    "videos/.eval_step000000512_ep0.0123456789ab.tmp.gif": "a recorded episode",
}
# Removed by the logbook's recovery and by tidy_policies, not by leftover_temporaries.
HALF_WRITTEN_ELSEWHERE = {
    ".staged-999.tmp/": "the logbook staging records",
    ".staged-999/": "records staged for a checkpoint never saved",
    "policies/ckpt-512.partial/": "write_policy_artefact",
}
# Names like theirs that no run writes: a user's, kept.
NOT_OURS = [
    "notes.tmp",
    ".hparams.tmp.json",
    ".hparams.0123456789AB.tmp.json",
    "checkpoints/ckpt-512_temp.bak",
    "checkpoints/checkpoint.tmp",
    "checkpoints/ckpt-384.data-00000-of-00001.bak",
    "snapshot/.resumes.jsonl.tmp",
    "tb/.0123456789ab.tmp",
    "videos/my.0123456789ab.tmp.mp4",
    "policies/ckpt-512.partial.old/",
]


def plant(out, names):
    for name in names:
        path = out / name.rstrip("/") / ("half" if name.endswith("/") else "")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")


@pytest.mark.unit
def test_leftover_temporaries_are_named_exactly(tmp_path):
    plant(tmp_path, list(HALF_WRITTEN) + NOT_OURS)
    (tmp_path / "checkpoints" / "ckpt-384.index").write_bytes(b"an index")
    (tmp_path / "checkpoints" / "ckpt-384.data-00000-of-00001").write_bytes(b"its data")
    expected = sorted(str(tmp_path / name.rstrip("/")) for name in HALF_WRITTEN)
    assert leftover_temporaries(str(tmp_path)) == expected


@pytest.mark.process
def test_what_kills_leave_half_written_goes_at_the_next_run(run_dir):
    planted = {**HALF_WRITTEN, **HALF_WRITTEN_ELSEWHERE}
    plant(run_dir, list(planted) + NOT_OURS)
    before = contents(run_dir)
    proc = run_train_py(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 0 and "is finished at step 384" in proc.stderr, proc.stderr
    for name in planted:
        assert not (run_dir / name.rstrip("/")).exists(), name
    after = contents(run_dir)
    kept = {p: v for p, v in before.items() if not any(n in p for n in planted)}
    assert set(after) == set(kept)  # the half-written gone, nothing new
    changed = {p for p in kept if after[p] != kept[p]}
    assert changed == {str(run_dir / "snapshot" / "resumes.jsonl")}  # nothing else touched
