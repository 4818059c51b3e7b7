"""``verify`` exits 1 on damage another command (or the broker) trips on (issue 28, item 11: "Silent
verify"): each case verified clean before.  RocketMQ 4.9.7 and Kafka 3.8 behaviour is named in each.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import damage
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import verify
from segstore_rocketmq.indexfile import ENTRY, HEADER

import segstore
from segstore import cli
from segstore.indexes import keyhash
from segstore.indexes.keyhash import ENTRY_DTYPE, SLOT_DTYPE, index_key_hash

SLOTS = 64                  # maxHashSlotNum of the RocketMQ fixtures
ENTRIES_AT = HEADER.size + SLOTS * 4


def _verify(capsys, store: Path) -> tuple[int, str]:
    rc = cli.main(["verify", str(store)])
    got = capsys.readouterr()
    return rc, got.out + got.err


def _index(store: Path) -> Path:
    return sorted((store / "index").iterdir())[0]


def _patch(path: Path, pos: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[pos:pos + len(data)] = data
    path.write_bytes(bytes(raw))


def _entry(path: Path, number: int) -> tuple[int, int, int, int]:
    raw = path.read_bytes()
    return ENTRY.unpack_from(raw, ENTRIES_AT + number * ENTRY.size)


@pytest.fixture
def rocketmq(tmp_path) -> Path:
    return damage.make_pristine("rocketmq", "basic", tmp_path / "copy")


def test_the_pristine_stores_verify_clean(tmp_path, capsys):
    for name in ("basic", "abort"):
        store = damage.make_pristine("rocketmq", name, tmp_path / name)
        (store / "abort").unlink(missing_ok=True)
        assert _verify(capsys, store) == (0, f"{store}: ok\n")


# -- IndexFile: slots and chains (IndexFile.putKey) ---------------------------------------------------


def test_a_slot_pointing_at_an_entry_of_another_slot(rocketmq, capsys):
    """Slot 3 pointed at the newest entry of the file (a used entry, below indexCount, whose key hashes
    to another slot): ``queryMessage`` for the keys of slot 3 walks another chain and finds none."""
    f = _index(rocketmq)
    count = struct.unpack_from(">i", f.read_bytes(), 36)[0]
    before = struct.unpack_from(">i", f.read_bytes(), HEADER.size + 3 * 4)[0]
    _patch(f, HEADER.size + 3 * 4, struct.pack(">i", count - 1))
    rc, out = _verify(capsys, rocketmq)
    assert rc == 1
    assert f"{f}:{HEADER.size + 12}: expected slot 3 to point at entry {before} (the newest hashed to it), " \
           f"found {count - 1}" in out


def test_a_link_to_another_entry(rocketmq, capsys):
    f = _index(rocketmq)
    n = next(n for n in range(2, 256) if _entry(f, n)[3] > 1)      # an entry linked to an earlier one
    key_hash, phy, diff, prev = _entry(f, n)
    _patch(f, ENTRIES_AT + n * ENTRY.size, ENTRY.pack(key_hash, phy, diff, prev - 1))
    rc, out = _verify(capsys, rocketmq)
    expected = (f"{f}:{ENTRIES_AT + n * ENTRY.size}: expected index entry {n} to link to entry {prev} "
                f"(the one before it in slot {key_hash % SLOTS}), found {prev - 1}")
    assert rc == 1 and expected in out


@pytest.mark.skipif(getattr(keyhash._speedups, "index_chains", None) is None,
                    reason="the C accelerator is not built (pure-Python pass)")
@settings(max_examples=200, deadline=None)
@given(slot_num=st.integers(1, 9), data=st.data())
def test_the_c_chain_facts_equal_the_reference(slot_num, data):
    """``_speedups.index_chains`` finds what the numpy reference finds, on chains built as
    ``IndexFile.putKey`` builds them and then damaged anywhere (hashes of either sign, links, links to
    another earlier entry, slots past ``indexCount``).  Sound files take its check without scratch
    per slot; any difference sends it to the full pass."""
    hashes = data.draw(st.lists(st.integers(-2**31, 2**31 - 1), max_size=40))
    entries = np.zeros(len(hashes), ENTRY_DTYPE)
    slots = np.zeros(slot_num, SLOT_DTYPE)
    for i, h in enumerate(hashes):                  # as putKey chains them
        entries[i] = (h, 100 + i, 0, slots[h % slot_num])
        slots[h % slot_num] = 1 + i
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["link", "earlier", "slot"]))
        if len(entries) and kind == "link":
            entries["prev"][data.draw(st.integers(0, len(entries) - 1))] = data.draw(st.integers(-3, 50))
        elif len(entries) and kind == "earlier":       # an entry number a link may hold, maybe not its own
            i = data.draw(st.integers(0, len(entries) - 1))
            entries["prev"][i] = data.draw(st.integers(0, i))
        else:
            slots[data.draw(st.integers(0, slot_num - 1))] = data.draw(st.integers(-3, 50))
    index_count = data.draw(st.integers(1, 50))
    assert keyhash.chain_facts(entries, slots, index_count) == \
        keyhash._chain_facts_reference(entries, slots, index_count)


def _chain_facts_model(entries: np.ndarray, slots: np.ndarray, index_count: int) -> tuple[int, ...]:
    """What verify expects of the chains, one entry at a time as 4.9.7 ``IndexFile.putKey`` links them:
    each entry to the newest before it in its slot (``keyHash % hashSlotNum``), each slot to its newest."""
    newest = [0] * len(slots)
    negative, links, link, expected_link = -1, 0, -1, -1
    for i, (h, _, _, prev) in enumerate(entries.tolist()):
        if h < 0 and negative < 0:
            negative = i
        if prev != newest[h % len(slots)]:
            if not links:
                link, expected_link = i, newest[h % len(slots)]
            links += 1
        newest[h % len(slots)] = 1 + i
    wrong = [s for s, held in enumerate(slots.tolist()) if held != newest[s] and held < index_count]
    return (negative, links, link, expected_link, len(wrong), wrong[0] if wrong else -1,
            newest[wrong[0]] if wrong else -1)


@settings(max_examples=200, deadline=None)
@given(slot_num=st.integers(1, 9), chunk=st.integers(1, 8), data=st.data())
def test_the_chunked_chain_facts_equal_a_model_of_put_key(slot_num, chunk, data):
    """The numpy pass (no C accelerator) chains :data:`keyhash.CHAIN_CHUNK` entries at a time, carrying each
    slot's newest entry from one chunk to the next (its memory bounded: the whole table sorted at once
    took 1.3 GB for a full 420 MB IndexFile): the same facts as one entry at a time, at any chunk size,
    on chains built as ``IndexFile.putKey`` builds them and then damaged anywhere."""
    hashes = data.draw(st.lists(st.integers(-2**31, 2**31 - 1), max_size=40))
    entries = np.zeros(len(hashes), ENTRY_DTYPE)
    slots = np.zeros(slot_num, SLOT_DTYPE)
    for i, h in enumerate(hashes):
        entries[i] = (h, 100 + i, 0, slots[h % slot_num])
        slots[h % slot_num] = 1 + i
    for _ in range(data.draw(st.integers(0, 3))):
        if len(entries) and data.draw(st.booleans()):
            entries["prev"][data.draw(st.integers(0, len(entries) - 1))] = data.draw(st.integers(-3, 50))
        else:
            slots[data.draw(st.integers(0, slot_num - 1))] = data.draw(st.integers(-3, 50))
    index_count = data.draw(st.integers(1, 50))
    saved, keyhash.CHAIN_CHUNK = keyhash.CHAIN_CHUNK, chunk
    try:
        assert keyhash._chain_facts_reference(entries, slots, index_count) == \
            _chain_facts_model(entries, slots, index_count)
    finally:
        keyhash.CHAIN_CHUNK = saved


@pytest.mark.skipif(getattr(keyhash._speedups, "index_chains", None) is None,
                    reason="the C accelerator is not built (pure-Python pass)")
def test_a_link_into_another_slot_whose_slot_was_emptied_is_found_by_the_c_chain_facts():
    """A damage every other check of a sound chain misses: entry 2 (slot 1) links to entry 1 (slot 0)
    and slot 0 holds nothing, so no entry is linked twice and the one unlinked entry is what its slot
    holds.  The C check of sound files refuses a link into another slot; both facts are reported."""
    entries = np.zeros(2, ENTRY_DTYPE)
    entries[0] = (0, 100, 0, 0)
    entries[1] = (1, 101, 0, 1)        # slot 1's first entry, linked as if it followed entry 1
    slots = np.array([0, 2], SLOT_DTYPE)
    facts = keyhash.chain_facts(entries, slots, 3)
    assert facts == keyhash._chain_facts_reference(entries, slots, 3)
    assert facts == (-1, 1, 1, 0, 1, 0, 1)     # link of entry 2 (expected none), slot 0 (expected entry 1)


@settings(max_examples=80, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 4), min_size=1, max_size=11)),
                     min_size=1, max_size=12), shuffle=st.booleans(), data=st.data())
def test_keys_put_twice_found_by_shifts_as_by_sorting(runs, shuffle, data):
    """``_put_twice`` compares each entry with the few before it where the entries are in put order
    (runs of one message, some longer than ``SHIFTED_RUN``) and sorts otherwise: the same offsets as
    the sort finds, either way (offsets from a damaged file included: negative ones)."""
    phys, hashes, phy = [], [], data.draw(st.integers(-3, 2))
    for gap, run in runs:
        phy += gap                                  # gap 0: the run goes on the message before
        phys += [phy] * len(run)
        hashes += run
    phys_a, hashes_a = np.array(phys, np.int64), np.array(hashes, np.int64)
    if shuffle:
        order = np.array(data.draw(st.permutations(range(len(phys)))), np.int64)
        phys_a, hashes_a = phys_a[order], hashes_a[order]
    assert verify._put_twice(phys_a, hashes_a).tolist() == \
        verify._put_twice_sorted(phys_a, hashes_a).tolist()


@pytest.mark.skipif(verify.columnar._speedups is None, reason="segstore_rocketmq._speedups not built")
@settings(max_examples=150, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(-1, 3), st.lists(st.integers(0, 4), min_size=1, max_size=11)),
                     max_size=14), carry=st.lists(st.integers(0, 4), max_size=5), chunk=st.integers(1, 9),
       shuffle=st.booleans(), long_run=st.booleans(), data=st.data())
def test_c_key_runs_equal_the_numpy_reference(runs, carry, chunk, shuffle, long_run, data):
    """``_key_runs`` (``index_key_runs``, one pass in C) finds what ``_key_runs_py`` finds chunk by chunk:
    the same runs holding a hash twice (offset, hashes, entries before, start) and the same carried run,
    for runs that go on from the file before, over chunk boundaries, in put order or not (offsets
    going down, shuffled), and longer than the C pass follows (``KEY_RUN_MAX``: the reference's)."""
    phys, hashes, phy = [], [], data.draw(st.integers(-3, 2))
    carry_phy = phy if data.draw(st.booleans()) else phy - 1
    for gap, run in runs:
        phy += gap                                  # gap 0: the run goes on the message before
        phys += [phy] * len(run)
        hashes += run
    if long_run:
        phys += [phy + 1] * 70
        hashes += list(range(70))
    entries = np.zeros(len(phys), ENTRY_DTYPE)
    entries["phy_offset"], entries["hash"] = phys, hashes
    if shuffle:
        entries = entries[np.array(data.draw(st.permutations(range(len(phys)))), np.int64)]
    carried = np.array(carry, np.int64)
    got = verify._key_runs(entries, carry_phy, carried, chunk)
    expected = verify._key_runs_py(entries, carry_phy, carried, chunk) if len(entries) else \
        ([], carry_phy, carried)
    assert [(p, r.tolist(), b, s) for p, r, b, s in got[0]] == \
        [(p, r.tolist(), b, s) for p, r, b, s in expected[0]]
    assert got[1] == expected[1] and got[2].tolist() == expected[2].tolist()


@pytest.mark.parametrize("boundary", ["file", "chunk", "none"])
def test_a_key_put_again_after_a_boundary_inside_the_run_is_named_where_the_run_goes_wrong(
        tmp_path, monkeypatch, boundary):
    """A message's run of entries (keys k, z in put order, ``IndexService.buildIndex``) cut by an
    IndexFile end (7 entries a file) or by ``ENTRY_CHUNK`` (3), or not cut: its entry before the cut
    damaged to z's hash, so z is indexed twice and ``queryMessage`` for z returns the message twice.
    The part before the cut holds no hash twice and the part after it starts right, so verify said
    nothing; it names the damaged entry as in a run not cut (one slot: the chains stay as the broker
    links them; the entry holds a key of its message: no other check sees it)."""
    store = tmp_path / "store"
    geometry = {"maxIndexNum": 8 if boundary == "file" else 100, "maxHashSlotNum": 1}
    with segstore.open(str(store), format="rocketmq", mode="a", **geometry) as s:
        s.append_batch([{"topic": "T", "body": b"x", "keys": [f"k{i}", f"z{i}"]} for i in range(4)])
    index, number, message = _index(store), (7 if boundary == "file" else 3), (3 if boundary == "file" else 1)
    if boundary == "chunk":
        monkeypatch.setattr(verify, "ENTRY_CHUNK", 3)      # entries 1-3, then 4-: message 1 is 3 and 4
    slots_end = HEADER.size + 4
    z_hash = index_key_hash(f"T#z{message}")
    key_hash, phy = _entry_at(index, slots_end, number)[:2]
    after = (sorted((store / "index").iterdir())[1], 1) if boundary == "file" else (index, number + 1)
    assert key_hash == index_key_hash(f"T#k{message}") and _entry_at(index, slots_end, number - 1)[1] != phy
    assert _entry_at(after[0], slots_end, after[1])[:2] == (z_hash, phy)      # the run goes on after the cut
    _patch(index, slots_end + number * ENTRY.size, struct.pack(">i", z_hash))
    with segstore.open(str(store), format="rocketmq") as s:
        problems = [(p.path, p.pos, p.message) for p in s.verify()]
    assert problems == [(str(index), slots_end + number * ENTRY.size,
                         f"expected the 2 key(s) of the message at {phy} indexed once, found "
                         f"index entry {number} put again")]


class _Message:
    """What ``verify._check_key_run`` reads of a message: topic ``T``, its keys."""

    def __init__(self, keys: list[str]) -> None:
        self.topic, self.store_timestamp, self.sys_flag = "T", 0, 0
        self.properties = {"KEYS": " ".join(keys)}


class _Index:
    """What ``verify._verify_index_repeats`` reads of a store: its index files and its messages."""

    def __init__(self, files: list, messages: list[_Message]) -> None:
        self.index = type("Index", (), {"files": files})()
        self.commitlog = type("Log", (), {"read": lambda _, phy: messages[phy]})()


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True), min_size=1,
                     max_size=8), data=st.data())
def test_keys_put_again_are_named_once_wherever_files_and_chunks_cut_the_runs(keys, data):
    """Each message's run of entries (its keys in put order, some changed, some put again after it) is
    named once where it first goes wrong if it holds a hash twice, however IndexFile ends and
    ``ENTRY_CHUNK`` cut the runs: a run cut before its first wrong entry and holding the repeated hash
    only after the cut was not named (found by verifyR)."""
    messages = [_Message([f"k{k}" for k in ks]) for ks in keys]
    phys, hashes, expected = [], [], []
    for phy, ks in enumerate(keys):
        own = [index_key_hash(f"T#k{k}") for k in ks]
        run = [data.draw(st.sampled_from([h, *own])) if data.draw(st.booleans()) else h for h in own]
        run += data.draw(st.lists(st.sampled_from(own), max_size=3))     # put again
        wrong = [i for i, h in enumerate(run) if i >= len(own) or h != own[i]]
        if len(set(run)) < len(run) and wrong:
            expected.append(len(phys) + wrong[0])
        phys += [phy] * len(run)
        hashes += run
    cuts = sorted(data.draw(st.sets(st.integers(1, len(phys) - 1), max_size=3)) if len(phys) > 1 else [])
    files = []
    for lo, hi in zip([0, *cuts], [*cuts, len(phys)], strict=True):
        f = _Entries(phys[lo:hi])
        f.entries["hash"], f.path = hashes[lo:hi], lo          # a file named by its first entry's index
        files.append(f)
    saved, verify.ENTRY_CHUNK = verify.ENTRY_CHUNK, data.draw(st.integers(1, 9))
    try:
        problems: list = []
        verify._verify_index_repeats(_Index(files, messages), problems)
    finally:
        verify.ENTRY_CHUNK = saved
    assert [p.path + p.pos // ENTRY_DTYPE.itemsize - 1 for p in problems] == expected


def _entry_at(path: Path, entries_at: int, number: int) -> tuple[int, int, int, int]:
    return ENTRY.unpack_from(path.read_bytes(), entries_at + number * ENTRY.size)


class _Entries:
    """What ``verify._check_order`` reads of an index file: its entries, path and entry positions."""

    def __init__(self, phys: list[int]) -> None:
        self.entries = np.zeros(len(phys), ENTRY_DTYPE)
        self.entries["phy_offset"] = phys
        self.path = "idx"

    def entry_pos(self, n: int) -> int:
        return n * ENTRY_DTYPE.itemsize


@given(phys=st.lists(st.integers(-3, 20), max_size=30), prev=st.integers(-3, 20), chunk=st.integers(1, 4))
def test_index_order_checked_a_chunk_at_a_time_as_over_the_whole_file(phys, prev, chunk):
    """``_check_order`` compares the entries where they lie, ``ENTRY_CHUNK`` at a time: the first entry
    below the one before it (the last file's last entry before the first) is found across chunk ends."""
    befores = [prev, *phys][:len(phys)]
    down = next((i for i, (p, b) in enumerate(zip(phys, befores, strict=True)) if p < b), None)
    saved, verify.ENTRY_CHUNK = verify.ENTRY_CHUNK, chunk
    try:
        problems: list = []
        last = verify._check_order(_Entries(phys), prev, problems)
    finally:
        verify.ENTRY_CHUNK = saved
    assert last == (phys[-1] if phys else prev)
    assert [p.message for p in problems] == ([] if down is None else [
        f"expected index entry {down + 1} to point at or after the entry before it (commitlog offset "
        f"{befores[down]}), found {phys[down]}"])


def test_an_offset_below_the_first_commitlog_file_is_not_taken_for_an_expired_entry(tmp_path, capsys):
    """An entry below the commitlog's first offset is expired (retention deleted its file); a negative
    one, or one below the entry before it, is damage."""
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    (store / "commitlog" / f"{0:020d}").unlink()       # the commitlog starts at 262144
    f = sorted((store / "index").iterdir())[-1]
    key_hash, phy, diff, prev = _entry(f, 30)
    assert phy >= 262144
    _patch(f, ENTRIES_AT + 30 * ENTRY.size, ENTRY.pack(key_hash, -5, diff, prev))
    rc, out = _verify(capsys, store)
    assert rc == 1
    assert f"{f}:{ENTRIES_AT + 30 * ENTRY.size}: expected index entry 30 to point at or after the entry " \
           f"before it" in out
    assert "to point at a valid message, found commitlog offset -5" in out


def test_begin_and_end_timestamps_of_the_header(rocketmq, capsys):
    """``isTimeMatched`` picks the files a time-bounded query reads by them."""
    f = _index(rocketmq)
    begin, end = struct.unpack_from(">qq", f.read_bytes(), 0)
    _patch(f, 8, struct.pack(">q", end + 10_000))
    rc, out = _verify(capsys, rocketmq)
    assert rc == 1 and f"{f}:8: expected endTimestamp {end} (the store time of the last entry's message), " \
                       f"found {end + 10_000}" in out
    _patch(f, 8, struct.pack(">q", end))
    _patch(f, 0, struct.pack(">q", begin - 1))
    rc, out = _verify(capsys, rocketmq)
    assert rc == 1 and f"{f}:0: expected beginTimestamp {begin}" in out


def test_a_file_in_index_that_is_not_an_index_file_and_recover_sets_it_aside(rocketmq, capsys):
    """4.9.7 ``IndexService.load`` skips ``garbage`` (``MappedFile.init``'s ``Long.parseLong`` throws
    ``NumberFormatException``, logged at each start: the oracle's ERROR "load file .../garbage error") and
    opens a file of any number as an index file; verify names both, recover sets them aside."""
    stray = rocketmq / "index" / "garbage"
    stray.write_bytes(b"hello")
    rc, out = _verify(capsys, rocketmq)
    assert rc == 1 and f"{stray}: expected only index files named by their creation time (17 digits) in " \
                       "index/, found 'garbage': the broker's IndexService.load skips it (its name is no " \
                       "number)" in out
    assert cli.main(["recover", str(rocketmq)]) == 0
    aside = rocketmq / ".segstore" / "cut" / "index" / "garbage"
    assert f"{stray}: moved to {aside}" in capsys.readouterr().out
    assert (rocketmq / ".segstore" / "cut" / "index" / "garbage").read_bytes() == b"hello"
    assert _verify(capsys, rocketmq)[0] == 0


def test_a_file_in_index_named_by_a_number_is_what_the_broker_opens(rocketmq, capsys):
    """A name ``Long.parseLong`` reads (``MappedFile.init``) is opened by 4.9.7 ``IndexService.load`` as an
    IndexFile, a short one grown to its size (the oracle: ``123`` of 10 bytes loaded, grown to
    ``fileTotalSize``)."""
    stray = rocketmq / "index" / "123"
    stray.write_bytes(bytes(10))
    rc, out = _verify(capsys, rocketmq)
    assert rc == 1 and f"{stray}: expected only index files named by their creation time (17 digits) in " \
                       "index/, found '123': the broker's IndexService.load opens it as an index file" in out


def test_index_end_times_are_read_from_the_files_the_broker_loads(tmp_path):
    """``end_timestamps`` (``messageIndexEnable`` off: the headers recovery bounds ``indexMsgTimestamp``
    by) reads the files 4.9.7 ``IndexService.load`` loads: a name ``Long.parseLong`` refuses is skipped
    (``NumberFormatException``), a directory stops the load (``IOException``: load returns false).  It read
    ``garbage``'s header and went on past the directory."""
    def header(end: int) -> bytes:
        return HEADER.pack(0, end, 0, 0, 0, 0)
    (tmp_path / "123").write_bytes(header(7))
    (tmp_path / "20240101000000000").write_bytes(header(11))
    (tmp_path / "20990101000000000").mkdir()
    (tmp_path / "21000101000000000").write_bytes(header(55))
    (tmp_path / "garbage").write_bytes(header(99))
    assert keyhash.end_timestamps(str(tmp_path)) == [7, 11]


def test_the_last_index_file_cut_short_is_named_not_the_full_one_before_it(tmp_path, capsys):
    """Issue 28: an index file cut from 22,040 to 19,640 bytes (100 slots; 1,080 entries, then 960).
    The geometry of a store opened without it came from the last file, so the full file before it
    was reported as the wrong size.  A full file (indexCount = maxIndexNum) decides now.  (One file
    that is not full, cut at an entry boundary, reads as a store configured with fewer entries.)"""
    store = tmp_path / "store"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=400_000,
                       maxHashSlotNum=100, maxIndexNum=1080) as s:
        s.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"x" * 50, "keys": [f"k{i}"]}
                        for i in range(1500)])
    first, last = sorted((store / "index").iterdir())
    assert first.stat().st_size == last.stat().st_size == 22_040
    last.write_bytes(last.read_bytes()[:19_640])
    rc, out = _verify(capsys, store)
    assert rc == 1
    assert f"{last}: expected an index file of 22040 bytes (100 slots, 1080 entries), found 19640" in out
    assert str(first) not in out


# -- checkpoint (StoreCheckpoint) -----------------------------------------------------------------------


@pytest.mark.parametrize(("pos", "name"), [(0, "physicMsgTimestamp"), (8, "logicsMsgTimestamp"),
                                           (16, "indexMsgTimestamp")])
def test_a_checkpoint_time_past_every_message(rocketmq, capsys, pos, name):
    """A time of 2**50 ms: ``recoverAbnormally`` starts at the last file whose first message is older
    than ``min(physic, logics) - 3 s``, so after a crash the broker would dispatch only the last
    file again.  ``recover`` sets it to the newest message's store time (what the broker's next
    flush writes)."""
    checkpoint = rocketmq / "checkpoint"
    _patch(checkpoint, pos, struct.pack(">q", 2 ** 50))
    rc, out = _verify(capsys, rocketmq)
    assert rc == 1 and f"{checkpoint}:{pos}: expected {name} at most the newest message's store time" in out
    assert f"found {2 ** 50}" in out
    assert cli.main(["recover", str(rocketmq)]) == 0
    assert f"checkpoint: {name} set to the newest message's store time" in capsys.readouterr().out
    assert _verify(capsys, rocketmq)[0] == 0


def test_a_checkpoint_replaced_by_a_symlink_loop(rocketmq, capsys):
    """``StoreCheckpoint`` opens it with ``RandomAccessFile``: the broker does not start."""
    checkpoint = rocketmq / "checkpoint"
    checkpoint.unlink()
    os.symlink("checkpoint.loop", checkpoint)
    os.symlink("checkpoint", rocketmq / "checkpoint.loop")
    rc, out = _verify(capsys, rocketmq)
    assert rc == 1 and f"{checkpoint}: expected a checkpoint file of 4096 bytes, found a symlink loop" in out


# -- Kafka (Kafka 3.8: LogManager.loadLogs, LogLoader, LogSegment, CheckpointFile) ----------------------

TOPIC = "topic-0"


@pytest.fixture
def kafka(tmp_path) -> Path:
    return damage.make_pristine("kafka", "uncompressed", tmp_path / "copy")


def test_the_pristine_log_dir_verifies_clean(kafka, capsys):
    assert _verify(capsys, kafka) == (0, f"{kafka}: ok\n")


def test_the_last_offset_index_entry_of_a_closed_segment_pointing_past_the_log(kafka, capsys):
    """``OffsetIndex.sanityCheck`` looks at the file's length only; a fetch looked up there finds no
    batch (``FileRecords.searchForOffsetWithSize`` from past the end)."""
    index = kafka / TOPIC / "00000000000000000073.index"
    slots = len(index.read_bytes()) // 8
    _patch(index, (slots - 1) * 8 + 4, struct.pack(">i", 2147483647))
    rc, out = _verify(capsys, kafka)
    last = slots - 1
    expected = f"{index}:{last * 8}: expected the entry of slot {last} to point at a batch ending at"
    assert rc == 1 and expected in out
    assert "found no batch at position 2147483647" in out


def test_an_empty_time_index_of_a_closed_segment(kafka, capsys):
    """``LogSegment.readMaxTimestampAndOffsetSoFar`` takes the last entry (``(-1, base)`` when empty):
    ``retention.ms`` would delete the segment at once and ``fetchOffsetByTimestamp`` pass it by."""
    index = kafka / TOPIC / "00000000000000000073.timeindex"
    index.write_bytes(b"")
    rc, out = _verify(capsys, kafka)
    assert rc == 1 and f"{index}:0: expected the time index of a closed segment to end at its largest " \
                       f"timestamp" in out and "found no entry" in out


@pytest.mark.parametrize("base", [289, 0], ids=["active", "first"])
def test_a_deleted_log_file_leaves_orphaned_indexes_and_checkpoints_past_the_end(kafka, capsys, base):
    """``LogLoader`` deletes an index whose ``.log`` is gone (the segment's records are lost); the
    recovery point and high watermark past the log end say so too."""
    (kafka / TOPIC / f"{base:020d}.log").unlink()
    rc, out = _verify(capsys, kafka)
    assert rc == 1
    assert f"{kafka / TOPIC / f'{base:020d}.index'}: expected {base:020d}.log beside {base:020d}.index, " \
           f"found none" in out
    if base:
        point = kafka / "recovery-point-offset-checkpoint"
        assert f"{point}: expected the recovery point of topic-0 at most its log end {base}, found 300" in out
        assert f"{kafka / 'replication-offset-checkpoint'}: expected the high watermark of topic-0" in out


@pytest.mark.parametrize(("base", "lost"), [
    (137, ": offsets 137-216 (from the previous segment's end to before the next segment's base, 217)"),
    (0, ": offsets 0-72 (from the index's base to before the next segment's base, 73)"),
    (289, ": offsets from 289 on (the log end goes back to 289, and new records take those offsets again)"),
], ids=["middle", "first", "active"])
def test_a_deleted_log_files_orphaned_indexes_name_the_offsets_lost(kafka, capsys, base, lost):
    """Kafka 3.8 ``LogLoader.loadSegmentFiles`` deletes an index whose ``.log`` is gone ("Found an
    orphaned index file") and loads the other segments as they are: the offsets from the previous
    segment's end to the next segment's base are gone (a fetch there returns the next base's batch).
    verify named the index files, not the offsets: now it names them, from the neighbours' offsets."""
    (kafka / TOPIC / f"{base:020d}.log").unlink()
    rc, out = _verify(capsys, kafka)
    index = kafka / TOPIC / f"{base:020d}.index"
    said = (f"{index}: expected {base:020d}.log beside {base:020d}.index, found none: Kafka's LogLoader "
            f"deletes the orphaned index, and the records of the segment are lost{lost}")
    assert rc == 1 and said in out.splitlines(), out


def test_a_partition_directory_renamed_out_of_the_topic_partition_form(kafka, capsys):
    """``LocalLog.parseTopicPartitionName`` throws on ``topic-x``: ``LogManager.loadLogs`` fails the log
    directory."""
    (kafka / TOPIC).rename(kafka / "topic-x")
    rc, out = _verify(capsys, kafka)
    expected = f"{kafka / 'topic-x'}: expected partition directories named TOPIC-PARTITION in a log directory"
    assert rc == 1 and f"{expected}, found 'topic-x'" in out


@pytest.mark.parametrize("digits", [23, 400])
def test_a_log_start_offset_that_is_no_java_long_is_reported_and_read_as_kafka_does(kafka, capsys, digits):
    """``CheckpointFile`` parses offsets with ``Long.parseLong``: the line is malformed, and
    ``LogManager.loadLogs`` reads the file as empty ("resetting to the base offset of the first
    segment")."""
    checkpoint = kafka / "log-start-offset-checkpoint"
    checkpoint.write_text(f"0\n1\ntopic 0 {'9' * digits}\n")
    rc, out = _verify(capsys, kafka)
    # the line named by its position, as every other finding in the file (line 3 starts at byte 4)
    assert rc == 1 and f"{checkpoint}:4: expected an integer offset (a Java long), found '999" in out
    rc = cli.main(["query", "--offset", "0", "--count", "1", "--json", str(kafka / TOPIC)])
    assert rc == 0 and '"offset": 0' in capsys.readouterr().out
