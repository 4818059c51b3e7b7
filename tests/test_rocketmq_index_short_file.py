"""An IndexFile shorter or longer than its size (a copy cut short, a crash before the file reached its size,
bytes appended past it) read as the broker reads it.

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


def select_phy_offsets(data: bytes, key: str, slots: int = SLOTS, entries: int = ENTRIES) -> list[int]:
    """4.9.7 ``IndexFile.selectPhyOffset`` of ``T1#key`` (``IndexService.buildKey``) from time 0 to
    ``Long.MAX_VALUE`` over what the file's ``MappedFile`` maps of ``data`` (``fileTotalSize`` bytes of
    ``slots`` slots and ``entries`` entries: its first bytes, zeros past a short file's end), the header as
    ``IndexHeader.load`` reads it."""
    size = 40 + 4 * slots + 20 * entries
    data = data[:size] + bytes(max(0, size - len(data)))
    begin_ts = struct.unpack_from(">q", data, 0)[0]
    count = max(struct.unpack_from(">i", data, 36)[0], 1)       # IndexHeader.load: 0 reads as 1
    key_hash = java_key_hash(f"T1#{key}")
    slot_value = struct.unpack_from(">i", data, 40 + 4 * (key_hash % slots))[0]
    found: list[int] = []
    if slot_value <= 0 or slot_value > count or count <= 1:
        return found
    number = slot_value
    while True:
        hash_read, phy, diff, prev = struct.unpack_from(">iqii", data, 40 + 4 * slots + 20 * number)
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


def test_a_short_index_file_of_unknown_geometry_is_read_at_the_broker_defaults(whole, tmp_path):
    """No geometry given and no whole file to read it off: the broker started without
    ``maxHashSlotNum``/``maxIndexNum`` maps the file at its defaults (5,000,000 slots, 20,000,000 entries:
    ``MappedFile.init`` maps 420,000,040 bytes READ_WRITE, growing the file to that), and ``queryMessage``
    reads the slots there.  segstore refused the file and, with no other IndexFile, scanned the commitlog,
    finding keys the broker does not; a reader now reads it as that mapping does (nothing written).  The
    oracle (``rmqload`` without the geometry) on this store cut at 700 bytes: the file grown to 420000040
    bytes, 0 of its 20 keys found."""
    store = tmp_path / "s"
    shutil.copytree(whole, store)
    [index_file] = (store / "index").iterdir()
    data = index_file.read_bytes()[:700]
    index_file.write_bytes(data)
    defaults = (5_000_000, 20_000_000)                   # MessageStoreConfig.maxHashSlotNum/maxIndexNum
    with segstore.open(str(store)) as s:
        [f] = s.index.files
        assert (f.slot_num, f.index_num) == defaults
        assert [p for p, _ in s.index.refused] == [str(index_file)]       # verify still reports it
        offsets = {m.physical_offset: m.keys for m in s.scan()}
        for key in KEYS:
            expected = [phy for phy in select_phy_offsets(data, key, *defaults) if key in offsets[phy]]
            assert sorted(m.physical_offset for m in s.query_by_key("T1", key)) == expected == []
    assert index_file.read_bytes() == data


TAILS = {"zeros": bytes(200), "ones": b"\xff" * 200, "the file again": None}


@pytest.mark.parametrize("tail", TAILS)
def test_a_longer_index_file_is_read_as_its_first_bytes(whole, tmp_path, capsys, tail):
    """4.9.7 ``IndexFile(fileName, hashSlotNum, indexNum, ...)`` builds a ``MappedFile`` of ``fileTotalSize``
    bytes, and ``MappedFile.init`` maps ``[0, fileSize)`` of whatever the file holds (``FileChannel.map``
    neither reads nor cuts the bytes past it): the broker reads and writes a longer IndexFile as its first
    ``fileTotalSize`` bytes.  segstore refused the file (its keys answered by a commitlog scan, or missed
    beside other IndexFiles).  The oracle (``rmqload ... maxHashSlotNum=8 maxIndexNum=64``) on this store with
    200 bytes of 0xff appended: every key found, the file left at 1552 bytes.  verify reports the bytes past
    the size (a broker never reads them)."""
    store = tmp_path / "s"
    shutil.copytree(whole, store)
    [index_file] = (store / "index").iterdir()
    data = index_file.read_bytes()
    longer = data + (TAILS[tail] if TAILS[tail] is not None else data)
    index_file.write_bytes(longer)
    with segstore.open(str(store), **GEOMETRY) as s:
        assert [f.name for f in s.index.files] == [index_file.name] and s.index.refused == []
        for key in KEYS:
            expected = select_phy_offsets(longer, key)
            assert len(expected) == 1
            assert [m.physical_offset for m in s.query_by_key("T1", key)] == expected
            assert [r.physical_offset for r in s.find("T1", key)] == expected
    assert index_file.read_bytes() == longer
    rc = cli.main(["verify", "--config", f"maxHashSlotNum={SLOTS}", "--config", f"maxIndexNum={ENTRIES}",
                   str(store)])
    out = capsys.readouterr().out
    assert rc == 1
    assert (f"{index_file}:{SIZE}: expected an index file of {SIZE} bytes ({SLOTS} slots, "
            f"{ENTRIES} entries), found {len(longer)} bytes: the broker maps only the first {SIZE}") in out


@pytest.mark.parametrize("tail", TAILS)
def test_recovery_cuts_a_longer_index_file_to_its_size_keeping_the_rest(whole, tmp_path, capsys, tail):
    """The broker's recovery and puts use a longer IndexFile's first ``fileTotalSize`` bytes (its
    ``MappedFile``) and never the rest: segstore's recovery keeps the file's entries (they were set aside
    and the file rebuilt under a new name), cuts the bytes past the size, keeping the non-zero ones in
    ``.segstore/cut/index/``, so verify is clean after and what the broker reads is unchanged.  Appends
    go on in the same file."""
    store = tmp_path / "s"
    shutil.copytree(whole, store)
    [index_file] = (store / "index").iterdir()
    data = index_file.read_bytes()
    extra = TAILS[tail] if TAILS[tail] is not None else data
    index_file.write_bytes(data + extra)
    config = ["--config", f"maxHashSlotNum={SLOTS}", "--config", f"maxIndexNum={ENTRIES}"]
    assert cli.main(["recover", *config, str(store)]) == 0
    out = capsys.readouterr().out
    assert f"{index_file}:{SIZE}: cut {len(extra)} bytes past the index file's {SIZE}" in out
    assert [p.name for p in (store / "index").iterdir()] == [index_file.name]
    assert index_file.read_bytes() == data
    kept = store / ".segstore" / "cut" / "index" / f"{index_file.name}.cut-{SIZE}"
    if any(extra):
        assert kept.read_bytes() == extra
    else:
        assert not kept.exists()
    assert cli.main(["verify", *config, str(store)]) == 0
    with segstore.open(str(store), mode="a", **GEOMETRY) as s:
        s.append({"topic": "T1", "queue_id": 0, "body": b"x", "keys": ["later"]})
    assert index_file.stat().st_size == SIZE
    with segstore.open(str(store), **GEOMETRY) as s:
        assert [m.keys for m in s.query_by_key("T1", "later")] == [["later"]]
        assert all(len(s.query_by_key("T1", key)) == 1 for key in KEYS)


def test_a_longer_last_index_file_is_read_at_the_geometry_of_a_full_one(tmp_path):
    """Without the geometry given, a full IndexFile decides it (``indexCount`` = ``maxIndexNum``), and the
    longer last file is read as its first bytes at that geometry, as a broker so configured maps it
    (``IndexService.load``: every file at the one configured size)."""
    store = tmp_path / "s"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=2000, maxHashSlotNum=4, maxIndexNum=8) as s:
        for key in KEYS:
            s.append({"topic": "T1", "queue_id": 0, "body": b"x", "keys": [key]})
    *full, last = sorted((store / "index").iterdir())
    assert full and last.stat().st_size == 40 + 4 * 4 + 20 * 8
    last.write_bytes(last.read_bytes() + b"\xff" * 100)
    with segstore.open(str(store)) as s:
        assert len(s.index.files) == len(full) + 1 and s.index.refused == []
        assert (s.index.slot_num, s.index.index_num) == (4, 8)
        found = {key: [m.keys for m in s.query_by_key("T1", key)] for key in KEYS}
        assert found == {key: [[key]] for key in KEYS}


@pytest.mark.parametrize("name", ["20990101000000000", "20000101000000000"], ids=["after", "before"])
def test_a_directory_among_the_index_files_stops_loading_there_as_the_broker_does(whole, tmp_path, capsys,
                                                                                  name):
    """4.9.7 ``IndexService.load`` opens the files of ``index/`` in name order; ``new IndexFile`` on a
    directory throws (``RandomAccessFile``: "Is a directory"), and ``load`` logs it and returns false
    there, leaving the files after it unloaded; ``DefaultMessageStore.load`` ignores that result and the
    broker starts.  The oracle: with the directory named after the IndexFile all 20 keys found, named
    before it none.  segstore's open failed ("expected a regular file, found a directory"), so the store
    could not be read, verified or recovered at all."""
    store = tmp_path / "s"
    shutil.copytree(whole, store)
    [index_file] = (store / "index").iterdir()
    data = index_file.read_bytes()
    (store / "index" / name).mkdir()
    after = name > index_file.name
    with segstore.open(str(store), **GEOMETRY) as s:
        assert [f.name for f in s.index.files] == ([index_file.name] if after else [])
        refused = [str(store / "index" / name)] + ([] if after else [str(index_file)])
        assert sorted(p for p, _ in s.index.refused) == sorted(refused)
        if after:
            assert all([m.keys for m in s.query_by_key("T1", key)] == [[key]] for key in KEYS)
    config = ["--config", f"maxHashSlotNum={SLOTS}", "--config", f"maxIndexNum={ENTRIES}"]
    assert cli.main(["verify", *config, str(store)]) == 1
    assert (f"{store / 'index' / name}: expected an index file, found a directory: the broker's "
            "IndexService.load stops there") in capsys.readouterr().out
    assert cli.main(["recover", *config, str(store)]) == 0
    assert (store / ".segstore" / "cut" / "index" / name).is_dir()
    assert cli.main(["verify", *config, str(store)]) == 0
    if after:       # its entries kept; only the directory moved
        assert [p.name for p in (store / "index").iterdir()] == [index_file.name]
        assert index_file.read_bytes() == data
    else:           # set aside with the directory (the broker loads neither) and rebuilt
        assert (store / ".segstore" / "cut" / "index" / index_file.name).read_bytes() == data
        assert len(list((store / "index").iterdir())) == 1
    with segstore.open(str(store), **GEOMETRY) as s:
        assert all([m.keys for m in s.query_by_key("T1", key)] == [[key]] for key in KEYS)
