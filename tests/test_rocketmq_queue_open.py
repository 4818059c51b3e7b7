"""How a store open counts each consume-queue file's entries.

A reader counts the last three files of a queue slot by slot and takes each earlier file whose last
slot is an entry as full, as the broker's own recovery does (RocketMQ 4.9.7
``ConsumeQueue.recover``: ``index = mappedFiles.size() - 3``, the files before it not read); a writer
counts every file, and ``verify`` counts them all again before it checks them.
"""

from __future__ import annotations

import pytest

import segstore
from segstore.errors import SegstoreError
from segstore.indexes import dense

CONFIG = {"mappedFileSizeCommitLog": 1 << 16, "mappedFileSizeConsumeQueue": 4 * 20}
MESSAGES = 24           # 6 consume-queue files of 4 slots


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store"
    with segstore.open(str(path), "rocketmq", "a", **CONFIG) as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": b"m%d" % i} for i in range(MESSAGES)])
    return path


def queue_files(path):
    return sorted((path / "consumequeue" / "T" / "0").iterdir())


def counts(store):
    return [len(seg) for seg in store.queues[("T", 0)].log.segments]


def zero_slot(path, file_index: int, slot: int) -> None:
    with open(queue_files(path)[file_index], "r+b") as f:
        f.seek(slot * 20)
        f.write(bytes(20))


def test_a_reader_and_a_writer_count_a_clean_queue_alike(store_path):
    assert len(queue_files(store_path)) == MESSAGES // 4 > dense.COUNTED_FILES
    with segstore.open(str(store_path), "rocketmq", "r", **CONFIG) as reader:
        read = counts(reader), [m.body for m in reader.read("T", 0, 0)]
    with segstore.open(str(store_path), "rocketmq", "a", **CONFIG) as writer:
        written = counts(writer), [m.body for m in writer.read("T", 0, 0)]
    assert read == written == ([4] * 6, [b"m%d" % i for i in range(MESSAGES)])


def test_a_reader_takes_an_early_file_as_full_as_the_broker_and_verify_still_finds_its_hole(store_path):
    zero_slot(store_path, 0, 1)         # a hole in the first file, which the broker's recovery never reads
    with segstore.open(str(store_path), "rocketmq", "r", **CONFIG) as reader:
        assert counts(reader) == [4] * 6
        with pytest.raises(SegstoreError):      # the hole (offset 0, size 0) is no message of the queue
            list(reader.read("T", 0, 1))
        problems = reader.verify()
        assert counts(reader) == [1, 4, 4, 4, 4, 4]     # verify counted every file
    first = str(queue_files(store_path)[0])
    assert any(p.path == first and p.pos == 20 and "expected zeros after the last valid entry" in p.message
               for p in problems), problems
    with segstore.open(str(store_path), "rocketmq", "r", **CONFIG) as again:
        assert [str(p) for p in again.verify()] == [str(p) for p in problems]


def test_a_hole_in_one_of_the_last_three_files_ends_the_queue_for_a_reader(store_path):
    """The files after a hole would be read as the offsets the hole lacks (file 5's first entry, offset
    20, as offset 17): a reader's queue ends at the hole, as the broker's recovery ends it there
    (``ConsumeQueue.recover`` stops at the first invalid entry, ``truncateDirtyLogicFiles`` the rest)."""
    zero_slot(store_path, 4, 1)
    with segstore.open(str(store_path), "rocketmq", "r", **CONFIG) as reader:
        assert counts(reader)[3:] == [4, 1]
        assert reader.offset_range("T", 0) == (0, 17)
        assert [m.body for m in reader.read("T", 0, 15)] == [b"m15", b"m16"]


@pytest.mark.parametrize("file_index", [5, 4])
def test_a_zeroed_first_slot_of_one_of_the_last_files_is_a_hole_the_queue_goes_on_past(store_path,
                                                                                       file_index):
    """Slot 0 of a file is zeros, entries after it.  RocketMQ 4.9.7 and 5.3.3
    ``ConsumeQueue.truncateDirtyLogicFiles`` keeps a last file's slot 0 whatever it holds below the
    commitlog's end (``if (0 == i)``) and the entries after it, and ``getMessage`` serves the zeros as an
    empty message; where it does not run (no queue reaches the commitlog's end), the reput writes the
    entries again.  The oracle on a store of two queues with such a slot in the last file: the queue
    (0, 20), 19 messages and an empty one at 15; with it in the last file of the other queue: (0, 22),
    every message.  segstore's reader ended the queue at the slot (16 or 20 of 24 offsets here); it now
    holds the offsets after it, and a read of the slot raises, as of a hole in an earlier file."""
    zero_slot(store_path, file_index, 0)
    hole = file_index * 4
    with segstore.open(str(store_path), "rocketmq", "r", **CONFIG) as reader:
        assert reader.offset_range("T", 0) == (0, MESSAGES)
        after = [m.body for m in reader.read("T", 0, hole + 1)]
        assert after == [b"m%d" % i for i in range(hole + 1, MESSAGES)]
        assert [m.body for m in reader.read("T", 0, 0, hole)] == [b"m%d" % i for i in range(hole)]
        with pytest.raises(SegstoreError, match=f"queue offset {hole}"):
            list(reader.read("T", 0, hole))
        assert any(p.path == str(queue_files(store_path)[file_index]) and p.pos == 0 for p in reader.verify())
    with segstore.open(str(store_path), "rocketmq", "a", **CONFIG) as writer:     # recovery puts it again
        assert [m.body for m in writer.read("T", 0, 0)] == [b"m%d" % i for i in range(MESSAGES)]
