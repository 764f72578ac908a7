"""Records reach disk with their checkpoint: kills at any point neither lose nor double."""

import json
import re
import time

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

from rl.logbook import JsonLinesError, Logbook, read_eval_records

pytestmark = pytest.mark.unit


def steps_in_tb(out):
    acc = event_accumulator.EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    return [e.step for e in acc.Tensors("x")] if "x" in acc.Tags()["tensors"] else []


def eval_steps(out):
    path = out / "eval.jsonl"
    return [json.loads(l)["step"] for l in path.read_text().splitlines()] if path.exists() else []


def log(book, step):
    book.scalar("x", 1.0, step)
    book.eval_line({"step": step, "return_mean": 1.0, "return_std": 0.0, "lengths": [3]})


def test_commit_after_checkpoint(tmp_path):
    book = Logbook(str(tmp_path))
    log(book, 10)
    book.stage(10)
    assert eval_steps(tmp_path) == []  # not before the checkpoint exists
    book.commit(10)
    assert eval_steps(tmp_path) == [10] and steps_in_tb(tmp_path) == [10]


def test_each_record_keeps_the_time_it_was_logged_not_the_commit_time(tmp_path, monkeypatch):
    clock = iter([100.0, 105.0, 111.0, 500.0, 500.0, 500.0])
    monkeypatch.setattr(time, "time", lambda: next(clock))
    book = Logbook(str(tmp_path))
    for step in (10, 20, 30):
        book.scalar("x", 1.0, step)
    book.stage(30)
    book.commit(30)  # long after the records: the clock reads 500 from here on
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    assert [(e.step, e.wall_time) for e in acc.Tensors("x")] == [
        (10, 100.0),
        (20, 105.0),
        (30, 111.0),
    ]


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


def test_records_keep_the_wall_time_they_were_logged_at(tmp_path):
    book = Logbook(str(tmp_path))
    bounds = []
    for step in (1, 2, 3):
        before = time.time()
        book.scalar("x", float(step), step)
        bounds.append((before, time.time()))
        time.sleep(0.2)
    book.stage(3)
    book.commit(3)
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    stamps = [e.wall_time for e in acc.Tensors("x")]
    assert all(lo <= t <= hi for t, (lo, hi) in zip(stamps, bounds)), (stamps, bounds)
    assert stamps[2] - stamps[0] >= 0.4  # not one instant at stage time


def test_recover_drops_committed_records_past_the_restored_step(tmp_path):
    book = Logbook(str(tmp_path))
    for step in (10, 20, 30):
        log(book, step)
        book.stage(step)
        book.commit(step)
    assert Logbook(str(tmp_path)).recover(restored_step=10)  # 20 and 30 are redone
    assert eval_steps(tmp_path) == [10] and steps_in_tb(tmp_path) == [10]
    assert not Logbook(str(tmp_path)).recover(restored_step=10)


def test_eval_file_lines_are_checked_except_a_cut_last_one(tmp_path):
    path = tmp_path / "eval.jsonl"
    path.write_bytes(b'{"step": 5}\n\n{"step": 7}\n{"step": 9')
    assert [r["step"] for r in read_eval_records(str(path))] == [5, 7]
    for bad, problem in [
        (b'{"step": 5.5}\n', "has step 5.5, not an integer"),
        (b'{"step": true}\n', "has step True, not an integer"),
        (b"[5]\n", "is not a JSON object"),
        (b'{"step": 5\n', "is not JSON"),
        (b'{"step": 5, "x": "\xff"}\n', "is not UTF-8 text"),
    ]:
        path.write_bytes(b'{"step": 1}\n' + bad)
        with pytest.raises(JsonLinesError, match=f"line 2 {re.escape(problem)}"):
            read_eval_records(str(path))


def test_a_staged_scalar_is_the_event_tensorboards_own_helpers_build():
    # summary_event builds scalar tensors by hand and shares metadata between records.
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.scalar import metadata as scalar_metadata
    from tensorboard.util import tensor_util

    from rl.logbook import summary_event

    expected = event_pb2.Event(
        wall_time=12.5,
        step=7,
        summary=summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(
                    tag="train/loss",
                    tensor=tensor_util.make_tensor_proto(np.float32(0.1)),
                    metadata=scalar_metadata.create_summary_metadata(
                        display_name="train/loss", description=""
                    ),
                )
            ]
        ),
    )
    for _ in range(2):  # the second from the cached metadata
        built = summary_event("scalar", "train/loss", 0.1, 7, 12.5)
        assert built.SerializeToString() == expected.SerializeToString()


def test_event_files_are_the_same_bytes_with_and_without_tensorflow(tmp_path, monkeypatch):
    # With TensorFlow loaded, TFRecordWriter checksums in C++; without, TensorBoard's writer.
    import sys

    from rl._tf import import_tensorflow_quietly
    from rl.logbook import scalar_events, summary_event, write_event_file

    import_tensorflow_quietly()
    events = [summary_event("scalar", f"t{i % 3}", i * 0.5, i, 100.0 + i) for i in range(50)]
    events.append(summary_event("text", "hparams", "lr **3e-4**", 50, 200.0))
    with_tf, without_tf = tmp_path / "a.tfevents.with_tf", tmp_path / "b.tfevents.without_tf"
    write_event_file(str(with_tf), events)
    with monkeypatch.context() as patch:
        patch.delitem(sys.modules, "tensorflow")
        write_event_file(str(without_tf), events)
    assert with_tf.read_bytes() == without_tf.read_bytes()
    t1 = [(step, value) for tag, step, value, _ in scalar_events(str(with_tf)) if tag == "t1"]
    assert t1 == [(step, step * 0.5) for step in range(1, 50, 3)]


@pytest.mark.parametrize("with_tensorflow", [False, True], ids=["python", "tensorflow"])
def test_an_event_file_cut_at_any_byte_or_garbled_is_found(tmp_path, monkeypatch, with_tensorflow):
    import sys

    from rl.logbook import EventFileError, read_events, summary_event, write_event_file

    if with_tensorflow:  # CRCs checked by TensorFlow, as in a training process
        import tensorflow  # noqa: F401
    else:
        monkeypatch.delitem(sys.modules, "tensorflow", raising=False)

    path = tmp_path / "events.out.tfevents.x"
    write_event_file(str(path), [summary_event("scalar", "x", 1.0, s, 100.0) for s in (1, 2)])
    data = path.read_bytes()
    assert [e.step for e in read_events(str(path))] == [0, 1, 2]  # the version record first
    ends = []  # where each whole record ends: 12-byte header, the event, a 4-byte CRC
    for event in read_events(str(path)):
        ends.append((ends[-1] if ends else 0) + 12 + event.ByteSize() + 4)
    assert ends[-1] == len(data)
    for cut in range(1, len(data)):
        path.write_bytes(data[:cut])
        whole = sum(end <= cut for end in ends)
        with pytest.raises(EventFileError, match=f"is cut short after its first {whole} events$"):
            read_events(str(path))
    for flipped in (3, ends[0] + 20, len(data) - 1):  # a length, an event, a CRC
        garbled = bytearray(data)
        garbled[flipped] ^= 0x10
        path.write_bytes(bytes(garbled))
        whole = sum(end <= flipped for end in ends)
        with pytest.raises(EventFileError, match=f"is damaged after its first {whole} events$"):
            read_events(str(path))
