"""Records reach disk with their checkpoint: kills at any point neither lose nor double."""

import json

from tensorboard.backend.event_processing import event_accumulator

from rl.logbook import Logbook


def steps_in_tb(out):
    acc = event_accumulator.EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    return [e.step for e in acc.Tensors("x")] if "x" in acc.Tags()["tensors"] else []


def eval_steps(out):
    path = out / "eval.jsonl"
    return [json.loads(l)["step"] for l in path.read_text().splitlines()] if path.exists() else []


def log(book, step):
    book.scalar("x", 1.0, step)
    book.eval_line({"step": step, "return_mean": 1.0})


def test_commit_after_checkpoint(tmp_path):
    book = Logbook(str(tmp_path))
    log(book, 10)
    book.stage(10)
    assert eval_steps(tmp_path) == []  # not before the checkpoint exists
    book.commit(10)
    assert eval_steps(tmp_path) == [10] and steps_in_tb(tmp_path) == [10]


def test_kill_before_checkpoint_drops_the_staged_records(tmp_path):
    book = Logbook(str(tmp_path))
    log(book, 10)
    book.stage(10)
    book.commit(10)
    log(book, 20)
    book.stage(20)  # killed before checkpoint 20 was saved
    Logbook(str(tmp_path)).recover(restored_step=10)
    assert eval_steps(tmp_path) == [10] and steps_in_tb(tmp_path) == [10]
    assert not list(tmp_path.glob(".staged-*"))


def test_kill_after_checkpoint_commits_on_recovery_once(tmp_path):
    book = Logbook(str(tmp_path))
    log(book, 10)
    book.stage(10)  # checkpoint 10 saved, then killed
    Logbook(str(tmp_path)).recover(restored_step=10)
    Logbook(str(tmp_path)).recover(restored_step=10)
    assert eval_steps(tmp_path) == [10] and steps_in_tb(tmp_path) == [10]


def test_a_cut_last_line_is_replaced_not_glued(tmp_path):
    (tmp_path / "eval.jsonl").write_text('{"step": 5}\n{"step": 1')
    book = Logbook(str(tmp_path))
    log(book, 10)
    book.stage(10)
    book.commit(10)
    assert eval_steps(tmp_path) == [5, 10]


def test_event_files_sort_by_step(tmp_path):
    book = Logbook(str(tmp_path))
    for step in (9, 10, 100, 1000):
        log(book, step)
        book.stage(step)
        book.commit(step)
    assert steps_in_tb(tmp_path) == [9, 10, 100, 1000]
