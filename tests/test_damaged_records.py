"""Damaged run records (issue 37): nothing is lost or altered without one line saying so.

A real ppo_tiny run (checkpoints and evaluations at 128, 256 and 384) is damaged as a
careless user or a failing disk would: a field taken out of hparams.json, eval.jsonl cut
or deleted, an event file cut or deleted. What can be rebuilt (eval.jsonl from tb/'s
eval/record events and the other way round) is, with one line; what cannot is refused
with one line and exit 2, and the folder is left as it was.
"""

import json
import os

import pytest
from finished_run import ARGS, contents, error_line, run
from tensorboard.backend.event_processing import event_accumulator

pytestmark = pytest.mark.process

MORE = ["--hparams", "ppo_tiny", "--train_steps", "512"]  # one more evaluation, at 512


def notices(proc):
    """The run's "rl: ..." lines about its records (not progress or resuming)."""
    return [
        l[len("rl: ") :]
        for l in proc.stderr.splitlines()
        if l.startswith("rl: ") and ("dropped" in l or "rebuilt" in l)
    ]


def refusal(out, *args):
    """The one error line of a run on ``out`` refused with exit 2, leaving it untouched."""
    before = contents(out)
    proc = run(*args, "--output_dir", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert contents(out) == before
    return error_line(proc)


def resumed(out, *args):
    """The record notices of a run on ``out`` that went ahead (exit 0)."""
    proc = run(*args, "--output_dir", str(out))
    assert proc.returncode == 0, proc.stderr
    return notices(proc)


def records(out):
    return [json.loads(l) for l in (out / "eval.jsonl").read_text().splitlines()]


def event_files(out):
    return sorted((out / "tb").glob("events.out.tfevents.*"))


def eval_means_in_tb(out):
    acc = event_accumulator.EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    means = acc.Tensors("eval/return_mean")
    return [(e.step, float(e.tensor_proto.float_val[0])) for e in means]


def without_field(out, name):
    values = json.loads((out / "hparams.json").read_text())
    del values[name]
    (out / "hparams.json").write_text(json.dumps(values))


def with_field(out, name, value):
    values = json.loads((out / "hparams.json").read_text())
    (out / "hparams.json").write_text(json.dumps({**values, name: value}))


# --- hparams.json: every field, of its type and in range, or refused ---------------
@pytest.mark.parametrize(
    "damage, expected",
    [
        (
            lambda out: without_field(out, "learning_rate"),
            "hparam 'learning_rate' is missing; put back \"learning_rate\": 0.001 as "
            "{out}/snapshot/hparams.json holds it, or use another --output_dir",
        ),
        (
            lambda out: (without_field(out, "gamma"), (out / "snapshot" / "hparams.json").unlink()),
            "hparam 'gamma' is missing (today's default 0.99 need not be what the run trained "
            "with); put back the value it trained with, or use another --output_dir",
        ),
        (
            lambda out: with_field(out, "learning_rate", "fast"),
            "hparam 'learning_rate' expects float, got 'fast'",
        ),
        (
            lambda out: with_field(out, "learning_rate", -0.5),
            "hparam 'learning_rate' must be > 0, got -0.5",
        ),
        (lambda out: with_field(out, "gama", 0.9), "unknown hparam 'gama': did you mean 'gamma'"),
    ],
    ids=["missing", "missing-no-copy", "wrong-type", "out-of-range", "unknown"],
)
@pytest.mark.parametrize("hparams", [[], ["--hparams", "ppo_tiny"]], ids=["saved", "set"])
def test_a_damaged_hparams_file_is_refused_and_left_untouched(run_dir, damage, expected, hparams):
    damage(run_dir)
    line = refusal(run_dir, *hparams, "--train_steps", "512")
    assert line.startswith(f"train.py: error: {run_dir}/hparams.json: "), line
    assert expected.format(out=run_dir) in line


def test_a_damaged_hparams_file_is_refused_by_a_test_run_too(run_dir):
    without_field(run_dir, "learning_rate")
    line = refusal(run_dir, "--training=false", "--test_episodes", "1")
    assert "hparams.json: hparam 'learning_rate' is missing" in line


# --- eval.jsonl: rebuilt from tb/ -------------------------------------------------
def test_an_eval_log_cut_mid_line_is_rebuilt_before_training_on(run_dir, trained):
    data = (run_dir / "eval.jsonl").read_bytes()
    cut = data[:-20]  # into the last record (step 384)
    (run_dir / "eval.jsonl").write_bytes(cut)
    cut_bytes = len(cut) - cut.rfind(b"\n") - 1
    assert resumed(run_dir, *MORE) == [
        f"dropped the last line of {run_dir}/eval.jsonl, cut short "
        f"({cut_bytes} bytes without a newline)",
        f"rebuilt the evaluation records of step 384 in {run_dir}/eval.jsonl from "
        f"{run_dir}/tb, which holds them",
    ]
    after = records(run_dir)
    assert [r["step"] for r in after] == [128, 256, 384, 512]
    assert after[:3] == records(trained)  # every value, returns and lengths included
    assert [s for s, _ in eval_means_in_tb(run_dir)] == [128, 256, 384, 512]


def test_an_eval_log_cut_mid_file_is_rebuilt_on_a_finished_run(run_dir, trained):
    data = (run_dir / "eval.jsonl").read_bytes()
    (run_dir / "eval.jsonl").write_bytes(data[: data.index(b"\n") + 1 + 30])  # into line 2
    proc = run(*ARGS, "--output_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "is finished at step 384" in proc.stderr
    assert notices(proc) == [
        f"dropped the last line of {run_dir}/eval.jsonl, cut short (30 bytes without a newline)",
        f"rebuilt the evaluation records of steps 256, 384 in {run_dir}/eval.jsonl from "
        f"{run_dir}/tb, which holds them",
    ]
    assert (run_dir / "eval.jsonl").read_bytes() == data  # the very bytes train.py wrote


def test_a_deleted_eval_log_is_rebuilt(run_dir, trained):
    (run_dir / "eval.jsonl").unlink()
    assert resumed(run_dir, *ARGS) == [
        f"rebuilt the evaluation records of steps 128, 256, 384 in {run_dir}/eval.jsonl from "
        f"{run_dir}/tb, which holds them"
    ]
    assert (run_dir / "eval.jsonl").read_bytes() == (trained / "eval.jsonl").read_bytes()
    assert resumed(run_dir, *ARGS) == []  # whole again: nothing more to say


def test_a_garbled_eval_line_is_refused_and_rebuilt_once_deleted(run_dir, trained):
    lines = (run_dir / "eval.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "eval.jsonl").write_bytes(lines[0] + b'{"step": 256, "ret\n' + lines[2])
    assert refusal(run_dir, *ARGS) == (
        f"train.py: error: {run_dir}/eval.jsonl line 2 is not JSON; each line must be a JSON "
        "object with an integer 'step' (fix it, or delete it: training on rebuilds it from "
        "tb/; or use another --output_dir)"
    )
    (run_dir / "eval.jsonl").write_bytes(lines[0] + lines[2])  # the fix the line names
    assert resumed(run_dir, *ARGS) == [
        f"rebuilt the evaluation records of step 256 in {run_dir}/eval.jsonl from "
        f"{run_dir}/tb, which holds them"
    ]
    assert (run_dir / "eval.jsonl").read_bytes() == (trained / "eval.jsonl").read_bytes()


# --- tb/: evaluation events rebuilt from eval.jsonl; other lost events refused ----------
def test_a_deleted_event_file_gets_its_evaluation_events_back(run_dir, trained):
    event_files(run_dir)[1].unlink()  # committed with checkpoint 256
    assert resumed(run_dir, *MORE) == [
        f"rebuilt the evaluation events of step 256 in {run_dir}/tb from "
        f"{run_dir}/eval.jsonl, which holds them"
    ]
    means = [(r["step"], r["return_mean"]) for r in records(run_dir)]
    assert eval_means_in_tb(run_dir) == means and len(means) == 4
    assert records(run_dir)[:3] == records(trained)


def test_a_cut_event_file_is_refused_until_it_is_deleted(run_dir, trained):
    path = event_files(run_dir)[1]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    line = refusal(run_dir, *MORE)
    assert line.startswith(f"train.py: error: event file {path} is cut short after its first ")
    assert line.endswith(
        " events: the records after that point are lost and cannot be rebuilt; delete the "
        "file to resume without them (its evaluation records are rebuilt from eval.jsonl), "
        "or use another --output_dir"
    )
    path.unlink()  # the fix the line names
    assert resumed(run_dir, *MORE) == [
        f"rebuilt the evaluation events of step 256 in {run_dir}/tb from "
        f"{run_dir}/eval.jsonl, which holds them"
    ]
    assert [s for s, _ in eval_means_in_tb(run_dir)] == [128, 256, 384, 512]


def test_evaluations_in_neither_file_are_refused(run_dir):
    (run_dir / "eval.jsonl").unlink()
    event_files(run_dir)[2].unlink()  # checkpoint 384's: its evaluation is nowhere now
    assert refusal(run_dir, *MORE) == (
        f"train.py: error: {run_dir}/eval.jsonl and {run_dir}/tb hold 2 of the 3 evaluation "
        "records that checkpoint 384 covers, and the others are in neither: put the files "
        "back from a copy, or use another --output_dir"
    )
    assert not os.path.exists(run_dir / "eval.jsonl")


# --- the other records read at resume -------------------------------------------
def test_a_cut_resumes_log_line_is_dropped_with_a_line(run_dir):
    path = run_dir / "snapshot" / "resumes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0][:-10])  # written whole each time: only damage cuts it
    assert resumed(run_dir, *ARGS) == [
        f"dropped the last line of {path}, cut short ({len(lines[0]) - 10} bytes without a newline)"
    ]
    assert [json.loads(l)["event"] for l in path.read_text().splitlines()] == ["resume"]


def test_a_policy_artefact_missing_an_hparam_is_refused(run_dir):
    from rl.policy import PolicyArtefactError, load_policy

    path = run_dir / "policies" / "ckpt-384" / "policy.json"
    meta = json.loads(path.read_text())
    del meta["hparams"]["learning_rate"]
    path.write_text(json.dumps(meta))
    with pytest.raises(PolicyArtefactError) as info:
        load_policy(str(path.parent))
    assert str(info.value) == (
        f"{path}: hparam 'learning_rate' is missing (today's default 0.0003 need not be what "
        "the run trained with); put back the value it trained with, or use another --output_dir"
    )
