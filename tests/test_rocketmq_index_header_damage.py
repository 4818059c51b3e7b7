"""IndexFile headers whose times, offsets or ``indexCount`` disagree with the entries: recovery gives each
file the header 4.9.7 ``IndexFile.putKey`` leaves over the entries its count holds, and rebuilds what
the count left out.

Found with the storage oracle (``rmqload``, RocketMQ 4.9.7 ``DefaultMessageStore``) on copies of a store
of 40 messages with two keys each over three IndexFiles (8 slots, 32 entries): segstore's queries of
each damaged copy answered as the broker's ``queryMessage``; but after ``segstore recover`` verify still
failed and the broker's queries of the recovered copy missed keys:

- ``indexCount`` lowered (5, 0, negative) in a file whose ``endPhyOffset`` still named the last entry
  written: re-indexing resumed from that end (``_resume_point``), past the messages the count left out
  (a last file's put skipped everything below its stale ``endPhyOffset``): 7-15 keys lost for good.
- ``beginTimestamp`` -1 in the first file: ``selectPhyOffset`` reads each entry's time as
  ``beginTimestamp + timeDiff * 1000`` and stops a chain at one before the query's begin, so the broker
  found 32 of the 48 keys after recovery too; 0 or a future ``beginTimestamp``, and ``endTimestamp`` 0,
  were kept (``isTimeMatched`` picks the files a time-bounded query reads by them).

After the fix: verify clean, and the oracle's queries of every recovered copy equal the undamaged store's.
"""

from __future__ import annotations

import shutil
import struct

import pytest

import segstore
from segstore import cli

GEOMETRY = {"maxHashSlotNum": 8, "maxIndexNum": 32}
CONFIG = [arg for name, value in GEOMETRY.items() for arg in ("--config", f"{name}={value}")]
BEGIN_TS, END_TS, END_PHY, COUNT = 0, 8, 24, 36          # IndexHeader's field positions
KEYS = [f"k{i}" for i in range(40)] + [f"g{i}" for i in range(4)]


def topic_of(i: int) -> str:
    return "T1" if i % 3 else "T2"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    store = tmp_path_factory.mktemp("index") / "s"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=2000, **GEOMETRY) as s:
        for i in range(40):
            s.append({"topic": topic_of(i), "queue_id": i % 2, "body": b"x" * (i % 5 + 1),
                      "keys": [f"k{i}", f"g{i % 4}"]})
    assert len(list((store / "index").iterdir())) == 3
    return store


def answers(store) -> dict[tuple[str, str], list[int]]:
    with segstore.open(str(store), **GEOMETRY) as s:
        return {(t, k): sorted(m.physical_offset for m in s.query_by_key(t, k, max_hits=64))
                for t in ("T1", "T2") for k in KEYS}


DAMAGE = {
    "indexCount 5 in the first file": (0, COUNT, struct.pack(">i", 5)),
    "indexCount -5 in the first file": (0, COUNT, struct.pack(">i", -5)),
    "indexCount 0 in the last file": (-1, COUNT, struct.pack(">i", 0)),
    "beginTimestamp -1 in the first file": (0, BEGIN_TS, struct.pack(">q", -1)),
    "beginTimestamp 0 in the last file": (-1, BEGIN_TS, struct.pack(">q", 0)),
    "beginTimestamp 2^62 in the last file": (-1, BEGIN_TS, struct.pack(">q", 2**62)),
    "endTimestamp 0 in the first file": (0, END_TS, struct.pack(">q", 0)),
    "endPhyOffset 0 in the first file": (0, END_PHY, struct.pack(">q", 0)),
}


@pytest.mark.parametrize("abort", [False, True], ids=["clean shutdown", "abort file"])
@pytest.mark.parametrize("damage", DAMAGE)
def test_recovery_gives_each_index_file_the_header_its_entries_leave(pristine, tmp_path, capsys, damage,
                                                                     abort):
    store = tmp_path / "s"
    shutil.copytree(pristine, store)
    which, pos, data = DAMAGE[damage]
    path = sorted((store / "index").iterdir())[which]
    raw = bytearray(path.read_bytes())
    raw[pos:pos + len(data)] = data
    path.write_bytes(bytes(raw))
    if abort:
        (store / "abort").touch()
    expected = answers(pristine)
    assert all(expected[topic_of(i), f"k{i}"] for i in range(40))
    assert cli.main(["recover", *CONFIG, str(store)]) == 0
    assert cli.main(["verify", *CONFIG, str(store)]) == 0, capsys.readouterr().out
    assert answers(store) == expected
    if pos != COUNT:        # the same entries: the header as the broker wrote it
        assert path.read_bytes() == (pristine / "index" / path.name).read_bytes()


def test_a_sound_empty_last_index_file_keeps_its_count_zero(pristine, tmp_path):
    """An IndexFile the broker created at a roll holds ``indexCount`` 0 on disk until its first put
    (``IndexHeader.incIndexCount``): the header check leaves such a file's bytes as they are."""
    store = tmp_path / "s"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=2000, maxHashSlotNum=4, maxIndexNum=3) as s:
        s.append({"topic": "T1", "queue_id": 0, "body": b"x", "keys": ["a", "b"]})
        s.append({"topic": "T1", "queue_id": 0, "body": b"x"})     # IndexService.buildIndex: a new file
    *_, last = sorted((store / "index").iterdir())
    before = last.read_bytes()
    assert struct.unpack_from(">i", before, COUNT) == (0,)
    assert cli.main(["recover", "--config", "maxHashSlotNum=4", "--config", "maxIndexNum=3", str(store)]) == 0
    assert last.read_bytes() == before
