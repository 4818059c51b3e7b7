"""RocketMQ file boundaries, every append path and reopens, against a model of the 4.9.7 store.

The model is written from the broker's code (``store/src/main/java/org/apache/rocketmq/store/`` at tag
``rocketmq-all-4.9.7``), from the messages the commitlog holds:

- ``CommitLog.DefaultAppendMessageCallback.doAppend``: a message goes where the last ended when its size
  plus ``END_FILE_MIN_BLANK_LENGTH`` (8) fits in what is left of the file, else that rest is a BLANK
  ``[int remaining][int BLANK_MAGIC_CODE]`` and the message opens the next file;
- ``ConsumeQueue.putMessagePositionInfo``: a 20-byte entry per message but prepared and rolled-back
  transaction ones, in files of ``mappedFileSizeConsumeQueue`` bytes named by their first byte;
- ``index/IndexService.buildIndex`` and ``IndexFile.putKey``: for every message dispatched the last
  file, or a new one when it ``isWriteFull`` (``getAndCreateLastIndexFile``: begin and end fields the full
  file's end offset and time, which ``IndexService.flush`` then writes whole with ``updateByteBuffer``);
  ``UNIQ_KEY`` then each ``KEYS`` token; the header fields are written as they change
  (``IndexHeader``'s setters), so a file without entries keeps ``indexCount`` 0; a clean restart keeps
  every file as it is.
"""

from __future__ import annotations

import itertools
import os
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq.commitlog import CommitLog
from segstore_rocketmq.javacompat import string_hash
from segstore_rocketmq.message import Blank, RocketMQMessage
from segstore_rocketmq.store import RocketMQStore

BLANK_MAGIC_CODE = -875286124
T0 = 1_700_000_000_000


class _IndexFile:
    """One IndexFile as ``IndexFile``/``IndexHeader`` write it, in bytes."""

    def __init__(self, slots: int, num: int, end_phy: int, end_ts: int) -> None:
        self.slots, self.num = slots, num
        self.data = bytearray(40 + slots * 4 + num * 20)
        self.begin_ts = self.end_ts = self.begin_phy = self.end_phy = self.slot_count = 0
        self.count = 1      # in memory only, until the first key
        if end_phy > 0:
            self.begin_phy = self.end_phy = end_phy
            struct.pack_into(">qq", self.data, 16, end_phy, end_phy)
        if end_ts > 0:
            self.begin_ts = self.end_ts = end_ts
            struct.pack_into(">qq", self.data, 0, end_ts, end_ts)

    def put(self, key: str, phy: int, ts: int) -> bool:
        if self.count >= self.num:
            return False
        h = string_hash(key)
        h = 0 if h == -(2**31) else abs(h)
        slot_at = 40 + (h % self.slots) * 4
        prev = struct.unpack_from(">i", self.data, slot_at)[0]
        if prev <= 0 or prev > self.count:
            prev = 0
        diff = int((ts - self.begin_ts) / 1000)          # Java's long division
        diff = 0 if self.begin_ts <= 0 else min(max(diff, 0), 2**31 - 1)
        struct.pack_into(">iqii", self.data, 40 + self.slots * 4 + self.count * 20, h, phy, diff, prev)
        struct.pack_into(">i", self.data, slot_at, self.count)
        if self.count <= 1:
            self.begin_phy, self.begin_ts = phy, ts
            struct.pack_into(">q", self.data, 16, phy)
            struct.pack_into(">q", self.data, 0, ts)
        if prev == 0:
            self.slot_count += 1
            struct.pack_into(">i", self.data, 32, self.slot_count)
        self.count += 1
        struct.pack_into(">i", self.data, 36, self.count)
        self.end_phy, self.end_ts = phy, ts
        struct.pack_into(">q", self.data, 24, phy)
        struct.pack_into(">q", self.data, 8, ts)
        return True

    def flush(self) -> None:
        struct.pack_into(">qqqqii", self.data, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                         self.slot_count, self.count)


def _index_model(messages: list[RocketMQMessage], slots: int, num: int) -> list[bytes]:
    made: list[_IndexFile] = []

    def last_file() -> _IndexFile:
        if made and made[-1].count < made[-1].num:
            return made[-1]
        prev = made[-1] if made else None
        made.append(_IndexFile(slots, num, prev.end_phy if prev else 0, prev.end_ts if prev else 0))
        if prev is not None:
            prev.flush()
        return made[-1]

    for m in messages:
        f = last_file()
        if m.physical_offset < f.end_phy or m.sys_flag & 0xC == 0xC:
            continue
        keys = [m.properties["UNIQ_KEY"]] if "UNIQ_KEY" in m.properties else []
        keys += [k for k in m.properties.get("KEYS", "").split(" ") if k]
        for key in keys:
            while not f.put(f"{m.topic}#{key}", m.physical_offset, m.store_timestamp):
                f = last_file()
    return [bytes(f.data) for f in made]


def _check(path: Path, config: dict[str, int]) -> None:
    file_size, cq_size = config["mappedFileSizeCommitLog"], config["mappedFileSizeConsumeQueue"]
    commitlog = CommitLog(str(path / "commitlog"), file_size)
    try:
        records = list(commitlog.walk())
    finally:
        commitlog.close()
    messages = [r for _, r in records if not isinstance(r, Blank)]
    end = None
    for m in messages:
        if end is not None:
            file_end = end - end % file_size + file_size
            fits = end + m.size + 8 <= file_end
            assert m.physical_offset == (end if fits else file_end)
            if not fits:
                data = (path / "commitlog" / f"{end - end % file_size:020d}").read_bytes()
                assert struct.unpack_from(">ii", data, end % file_size) == (file_end - end, BLANK_MAGIC_CODE)
        end = m.physical_offset + m.size
    queues: dict[tuple[str, int], list[bytes]] = {}
    for m in messages:
        if m.sys_flag & 0xC not in (0x4, 0xC):
            tags = m.properties.get("TAGS")
            queues.setdefault((m.topic, m.queue_id), []).append(
                struct.pack(">qiq", m.physical_offset, m.size, string_hash(tags) if tags else 0))
    for (topic, queue_id), rows in queues.items():
        directory = path / "consumequeue" / topic / str(queue_id)
        data = b"".join(rows)
        assert sorted(os.listdir(directory)) == [f"{b:020d}" for b in range(0, len(data), cq_size)]
        for base in range(0, len(data), cq_size):
            want = data[base:base + cq_size]
            assert (directory / f"{base:020d}").read_bytes() == want + bytes(cq_size - len(want))
    written = [(path / "index" / n).read_bytes() for n in sorted(os.listdir(path / "index"))]
    assert written == _index_model(messages, config["maxHashSlotNum"], config["maxIndexNum"])


item = st.fixed_dictionaries(
    {"topic": st.sampled_from(["A", "Bb"]), "queue_id": st.integers(0, 1), "body": st.binary(max_size=120),
     # most messages keyed, some with more keys than a small IndexFile takes; a third without
     "keys": st.lists(st.sampled_from(["k0", "k1", "k2", "k3"]), max_size=3)},
    optional={"tags": st.sampled_from(["t0", "t1"]),
              "properties": st.sampled_from([{"u": "v"}, {"UNIQ_KEY": "U1"}]),
              "sys_flag": st.sampled_from([4, 8, 12])})


def _append(path: Path, config: dict, how: str, items: list[dict], clock: Any) -> None:
    if how == "append_arrow":
        source = path.with_name(path.name + "-source")
        with RocketMQStore(str(source), "a", config, clock=clock) as store:
            store.append_batch(items)
            table = pa.Table.from_batches(list(store.scan_arrow()))
        with RocketMQStore(str(path), "a", config, clock=clock) as store:
            for batch in table.to_batches(max_chunksize=3):
                store.append_arrow(batch)
        return
    with RocketMQStore(str(path), "a", config, clock=clock) as store:
        if how == "append":
            for i in items:
                store.append(i)
        else:
            for at in range(0, len(items), 3):
                store.append_batch(items[at:at + 3])


@settings(max_examples=30, deadline=None)
@given(data=st.data(), items=st.lists(item, min_size=6, max_size=40),
       config=st.fixed_dictionaries({
           "mappedFileSizeCommitLog": st.sampled_from([300, 1024]),
           "mappedFileSizeConsumeQueue": st.sampled_from([20, 60]),
           "maxHashSlotNum": st.sampled_from([1, 4]), "maxIndexNum": st.sampled_from([2, 3, 4])}))
def test_every_append_path_places_and_indexes_as_the_broker(tmp_path_factory, data, items, config):
    """Sessions of appends (``append``, ``append_batch``, ``append_arrow``), each a reopen, with files so
    small that a BLANK, a consume-queue roll or an IndexFile roll comes every few messages: the commitlog
    placement, consume-queue files and IndexFiles (names aside) are the model's byte for byte.  (Before the
    fixes a batch left the IndexFile a keyless message after a full one opens to the next call, a close
    wrote indexCount 1 into a file without entries, and a reopen put again the keys of a message spanning
    three files.)"""
    path = tmp_path_factory.mktemp("r") / "store"
    stamps = itertools.count(T0, 700)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(items)), min_size=1, max_size=3))) - {len(items)})
    bounds = [0, *cuts, len(items)]
    for lo, hi in itertools.pairwise(bounds):
        how = data.draw(st.sampled_from(["append", "append_batch", "append_arrow"]))
        _append(path, config, how, [dict(i) for i in items[lo:hi]], lambda: next(stamps))
    _check(path, config)
