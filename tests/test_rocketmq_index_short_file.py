"""A short IndexFile (a copy cut short, a crash before the file reached its size) read as the broker reads it.

RocketMQ 4.9.7 ``IndexService.load`` opens every file in ``index/`` as ``new IndexFile(path, hashSlotNum,
indexNum, 0, 0)``, whose ``MappedFile`` maps ``fileTotalSize`` bytes (``FileChannel.map`` past the end:
zeros), and ``IndexFile.selectPhyOffset`` walks the slot's chain over that mapping.  So keys whose slot and
entry chain lie in the bytes the file kept are still found.  segstore refused the whole file (its keys
missed); a reader now reads it zero-filled (nothing written to the file), and ``verify`` still reports it.
The storage oracle (``rmqload``, the broker's ``queryMessage``) answered the same keys as segstore for this
store cut at 0, 20, 56, 72, 179, 372, 700, 885 and 1351 bytes.
"""

from __future__ import annotations

import shutil
import struct

import pytest

import segstore
from segstore import cli

SLOTS, ENTRIES = 8, 64
SIZE = 40 + 4 * SLOTS + 20 * ENTRIES            # IndexFile.fileTotalSize: header, slots, entries
GEOMETRY = {"maxHashSlotNum": SLOTS, "maxIndexNum": ENTRIES}
KEYS = [f"k{i}" for i in range(20)]


def java_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(String.hashCode())``, ``Integer.MIN_VALUE`` as 0."""
    h = 0
    for unit in struct.unpack(f">{len(key.encode('utf-16-be')) // 2}H", key.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >> 31 else h
    return 0 if h == -(1 << 31) else abs(h)


def select_phy_offsets(data: bytes, key: str) -> list[int]:
    """4.9.7 ``IndexFile.selectPhyOffset`` of ``T1#key`` (``IndexService.buildKey``) from time 0 to
    ``Long.MAX_VALUE`` over ``data`` zero-filled to the file's size (what its ``MappedFile`` maps), the
    header as ``IndexHeader.load`` reads it."""
    data = data + bytes(SIZE - len(data))
    begin_ts = struct.unpack_from(">q", data, 0)[0]
    count = max(struct.unpack_from(">i", data, 36)[0], 1)       # IndexHeader.load: 0 reads as 1
    key_hash = java_key_hash(f"T1#{key}")
    slot_value = struct.unpack_from(">i", data, 40 + 4 * (key_hash % SLOTS))[0]
    found: list[int] = []
    if slot_value <= 0 or slot_value > count or count <= 1:
        return found
    number = slot_value
    while True:
        hash_read, phy, diff, prev = struct.unpack_from(">iqii", data, 40 + 4 * SLOTS + 20 * number)
        if diff < 0:
            break
        time_read = begin_ts + diff * 1000
        if hash_read == key_hash and time_read >= 0:
            found.append(phy)
        if prev <= 0 or prev > count or prev == number or time_read < 0:
            break
        number = prev
    return found


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    store = tmp_path_factory.mktemp("index") / "s"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=2000, **GEOMETRY) as s:
        for key in KEYS:
            s.append({"topic": "T1", "queue_id": 0, "body": b"x", "keys": [key]})
    [index_file] = (store / "index").iterdir()
    assert index_file.stat().st_size == SIZE
    return store


# cut in the header, in the slots, at their end, inside the entries (mid entry too), one byte short
@pytest.mark.parametrize("cut", [0, 20, 56, 72, 179, 372, 700, 885, SIZE - 1])
def test_a_short_index_file_finds_the_keys_its_kept_bytes_hold(whole, tmp_path, capsys, cut):
    store = tmp_path / "s"
    shutil.copytree(whole, store)
    [index_file] = (store / "index").iterdir()
    data = index_file.read_bytes()[:cut]
    index_file.write_bytes(data)
    expected = {key: sorted(select_phy_offsets(data, key)) for key in KEYS}
    with segstore.open(str(store), **GEOMETRY) as s:
        offsets = {m.physical_offset: m.keys for m in s.scan()}
        # the broker's candidates, less what another key's message (a hash collision) holds
        expected = {key: [phy for phy in phys if key in offsets[phy]] for key, phys in expected.items()}
        got = {key: sorted(m.physical_offset for m in s.query_by_key("T1", key)) for key in KEYS}
        assert got == expected
        assert {key: sorted(r.physical_offset for r in s.find("T1", key)) for key in KEYS} == expected
    if cut == SIZE - 1:
        assert all(expected.values())       # every entry lies in the kept bytes
    if cut <= 179:
        assert not any(expected.values())   # each chain's newest entry is past the cut
    assert index_file.read_bytes() == data  # read, never written
    rc = cli.main(["verify", "--config", f"maxHashSlotNum={SLOTS}", "--config", f"maxIndexNum={ENTRIES}",
                   str(store)])
    out = capsys.readouterr().out
    assert rc == 1 and f"{index_file}: expected an index file of {SIZE} bytes" in out


def test_a_short_index_file_of_unknown_geometry_is_refused_as_before(whole, tmp_path):
    """No geometry given and no whole file to read it off: a zero-filled file at the defaults would have
    its slots misread, so it is refused (and a store without other IndexFiles scanned for keys)."""
    store = tmp_path / "s"
    shutil.copytree(whole, store)
    [index_file] = (store / "index").iterdir()
    index_file.write_bytes(index_file.read_bytes()[:700])
    with segstore.open(str(store)) as s:
        assert s.index.files == [] and [p for p, _ in s.index.refused] == [str(index_file)]
        assert [m.keys for m in s.query_by_key("T1", "k0")] == [["k0"]]
