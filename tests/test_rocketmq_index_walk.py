"""Key queries over damaged IndexFile chains and odd ``index/`` names read what the broker reads.

RocketMQ ``IndexFile.selectPhyOffset`` and ``IndexService.load``/``queryOffset`` (4.9.7 and 5.3.3 alike):

- The chain walk follows a link to any entry from 1 to ``indexCount``, a later one too (a put only ever
  links back, so only damage points forward).  segstore stopped at a forward link and missed the entries
  the broker reads after it.  A walk that comes back to an entry it read (a cycle) is read by the broker
  again and again, each hit added anew until ``maxNum`` offsets end the whole query (older files
  unread); a cycle holding no hit loops forever.  segstore reads each entry once and ends the query there.
- ``IndexService.load`` opens every file whose name ``Long.parseLong`` reads (``MappedFile.init``), not
  only the 17-digit ones, in ``Arrays.sort`` order of the paths, and ``queryOffset`` reads that list from
  its end.  segstore's readers left such files out of queries (verify names them; recovery sets them aside).

The storage oracle (``rmqload``: the broker's ``queryMessage(topic, key, 32, 0, Long.MAX_VALUE)``) gave
the answers the model below gives for the cases named.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from conftest import cli_run
from hypothesis import given, settings
from hypothesis import strategies as st

import segstore
from segstore.indexes.keyhash import index_key_hash

HEADER, SLOT, ENTRY = 40, 4, 20
MAX_NUM = 32        # the oracle's queryMessage(topic, key, 32, 0, Long.MAX_VALUE)
T0 = 1_700_000_000_000


class Geometry:
    def __init__(self, slots: int, entries: int) -> None:
        self.slots, self.entries = slots, entries
        self.config = {"maxHashSlotNum": slots, "maxIndexNum": entries}

    def entry_pos(self, number: int) -> int:
        return HEADER + self.slots * SLOT + number * ENTRY

    def slot_pos(self, key: str) -> int:
        return HEADER + SLOT * (index_key_hash(f"T#{key}") % self.slots)


ONE = Geometry(4, 32)       # one file holds the 18 entries of six messages
SMALL = Geometry(4, 8)      # seven entries a file: three files


def select_phy_offsets(g: Geometry, data: bytes, key_hash: int, found: list[int]) -> bool:
    """4.9.7 ``IndexFile.selectPhyOffset`` over ``data`` (a whole file) from time 0 on, step by step as the
    Java loop: the offsets it adds to ``found`` (repeats too, up to ``MAX_NUM``).  Returns False where the
    loop never ends (more steps than entries without a hit: a cycle adding nothing)."""
    begin_ts = struct.unpack_from(">q", data, 0)[0]
    count = max(struct.unpack_from(">i", data, 36)[0], 1)       # IndexHeader.load: 0 reads as 1
    slot_value = struct.unpack_from(">i", data, HEADER + SLOT * (key_hash % g.slots))[0]
    if slot_value <= 0 or slot_value > count or count <= 1:
        return True
    number, idle = slot_value, 0
    while len(found) < MAX_NUM:
        if g.entry_pos(number) + ENTRY > len(data):
            return True         # getInt past the map: IndexOutOfBoundsException, caught and logged
        hash_read, phy, diff, prev = struct.unpack_from(">iqii", data, g.entry_pos(number))
        if diff < 0:
            return True
        time_read = begin_ts + diff * 1000
        idle += 1
        if hash_read == key_hash and time_read >= 0:
            found.append(phy)
            idle = 0
        if idle > g.entries + 1:
            return False
        if prev <= 0 or prev > count or prev == number or time_read < 0:
            return True
        number = prev
    return True


def broker_hits(g: Geometry, store: Path, key: str) -> tuple[list[int], bool]:
    """The model of the broker's ``queryMessage`` of ``T#key`` (``IndexService.queryOffset`` over the files
    ``IndexService.load`` loads, in its order): each offset once (it returns a repeated one again), less
    what another key's message (a hash collision) holds; and whether it answers at all (False: it loops,
    and the offsets are those it found on the way)."""
    loaded = [p.read_bytes() for p in sorted((store / "index").iterdir())]      # Arrays.sort(files)
    found: list[int] = []
    answers = True
    for data in reversed(loaded):
        if not select_phy_offsets(g, data, index_key_hash(f"T#{key}"), found):
            answers = False
            break
        if len(found) >= MAX_NUM:
            break
    with segstore.open(str(store), **g.config) as s:
        keys = {m.physical_offset: {*m.keys, m.properties["UNIQ_KEY"]} for m in s.scan()}
    return sorted({phy for phy in found if key in keys.get(phy, ())}), answers


def hits(g: Geometry, store: Path, *keys: str) -> list[int]:
    """segstore's key query of ``T#key`` for the one key given: the physical offsets, in commitlog order
    (for several: a list of those lists)."""
    answers = []
    with segstore.open(str(store), **g.config) as s:
        for key in keys:
            by_query = [m.physical_offset for m in s.query_by_key("T", key, max_hits=MAX_NUM)]
            assert by_query == sorted(r.physical_offset for r in s.find("T", key))
            answers.append(by_query)
    return answers[0] if len(keys) == 1 else answers


def write_store(path: Path, g: Geometry, count: int = 6) -> Path:
    with segstore.open(str(path), format="rocketmq", mode="a", mappedFileSizeCommitLog=1 << 16,
                       mappedFileSizeConsumeQueue=2000, **g.config) as s:
        for i in range(count):
            s.append({"topic": "T", "queue_id": 0, "body": b"x", "keys": [f"k{i}", "same"],
                      "properties": {"UNIQ_KEY": f"u{i}"}, "store_timestamp": T0 + 1000 * i})
    return path


def key_numbers(g: Geometry, data: bytes, key: str) -> list[int]:
    """The numbers of the entries of ``T#key`` in a file, oldest first."""
    h = index_key_hash(f"T#{key}")
    count = struct.unpack_from(">i", data, 36)[0]
    return [n for n in range(1, count) if struct.unpack_from(">i", data, g.entry_pos(n))[0] == h]


def set_link(g: Geometry, data: bytearray, number: int, prev: int) -> None:
    struct.pack_into(">i", data, g.entry_pos(number) + 16, prev)


@pytest.fixture(scope="module")
def one_file(tmp_path_factory) -> Path:
    """Six messages keyed ``u<i>`` (UNIQ_KEY), ``k<i>`` and ``same``: 18 entries in one IndexFile."""
    store = write_store(tmp_path_factory.mktemp("walk") / "s", ONE)
    assert len(list((store / "index").iterdir())) == 1
    return store


@pytest.fixture(scope="module")
def three_files(tmp_path_factory) -> Path:
    """The same messages over three IndexFiles of seven entries."""
    store = write_store(tmp_path_factory.mktemp("walk3") / "s", SMALL)
    assert len(list((store / "index").iterdir())) == 3
    return store


def _copy(store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    return copy


def _phys(store: Path, g: Geometry) -> list[int]:
    with segstore.open(str(store), **g.config) as s:
        return sorted(m.physical_offset for m in s.scan())


def test_a_forward_link_is_followed_as_the_broker_follows_it(one_file, tmp_path):
    """The slot of ``same`` names its entry of message 1, whose link names the entry of message 3 (two
    damaged ints): the broker reads 1, 3, 2, 1, 3, 2... until 32 offsets, so it returns messages 1, 2 and
    3 (the oracle: 32 hits of those three offsets); segstore read message 1 only."""
    copy = _copy(one_file, tmp_path)
    [path] = (copy / "index").iterdir()
    data = bytearray(path.read_bytes())
    same = key_numbers(ONE, data, "same")
    struct.pack_into(">i", data, ONE.slot_pos("same"), same[1])
    set_link(ONE, data, same[1], same[3])
    path.write_bytes(data)
    phys = _phys(copy, ONE)
    assert hits(ONE, copy, "same") == [phys[1], phys[2], phys[3]]
    assert broker_hits(ONE, copy, "same") == ([phys[1], phys[2], phys[3]], True)


def test_a_cycle_without_a_hit_ends_the_query_with_what_it_found(one_file, tmp_path):
    """``same``'s newest entry links to ``k0``'s, which links forward to ``k1``'s, which links back to
    ``k0``'s: the broker's walk never ends (its query hangs, the index's read lock held: the oracle's
    ``queryMessage`` of a key whose chain ran into such a cycle was still in ``IndexFile.selectPhyOffset``
    after 180 s); segstore returns the hit read before the cycle."""
    copy = _copy(one_file, tmp_path)
    [path] = (copy / "index").iterdir()
    data = bytearray(path.read_bytes())
    [k0], [k1], same = (key_numbers(ONE, data, key) for key in ("k0", "k1", "same"))
    set_link(ONE, data, same[-1], k0)
    set_link(ONE, data, k0, k1)
    set_link(ONE, data, k1, k0)
    path.write_bytes(data)
    phys = _phys(copy, ONE)
    assert broker_hits(ONE, copy, "same") == ([phys[5]], False)
    assert hits(ONE, copy, "same") == [phys[5]]


def test_a_cycle_in_the_newest_file_ends_the_query_before_the_older_files(three_files, tmp_path):
    """The broker's walk round a cycle holding a hit adds it until ``maxNum`` (32) offsets, and
    ``queryOffset`` then reads no older file: the messages only those files index are not returned."""
    copy = _copy(three_files, tmp_path)
    newest = sorted((copy / "index").iterdir())[-1]
    data = bytearray(newest.read_bytes())
    same = key_numbers(SMALL, data, "same")
    assert len(same) == 2
    set_link(SMALL, data, same[0], same[1])         # the older entry links forward to the newer
    newest.write_bytes(data)
    expected, answers = broker_hits(SMALL, copy, "same")
    assert answers and len(expected) == 2
    assert hits(SMALL, copy, "same") == expected


@settings(max_examples=100)
@given(data=st.data())
def test_any_damaged_link_slot_or_count_reads_what_the_broker_reads(one_file, tmp_path_factory, data):
    """Links and slots set to any number from -1 to indexCount + 1, the count lowered: the query's hits
    are the broker's (each once, less another key's messages); where the broker never answers, those its
    walk found."""
    copy = tmp_path_factory.mktemp("any") / "s"
    shutil.copytree(one_file, copy)
    [path] = (copy / "index").iterdir()
    raw = bytearray(path.read_bytes())
    count = struct.unpack_from(">i", raw, 36)[0]
    for _ in range(data.draw(st.integers(1, 4))):
        set_link(ONE, raw, data.draw(st.integers(1, count - 1)), data.draw(st.integers(-1, count + 1)))
    if data.draw(st.booleans()):
        struct.pack_into(">i", raw, ONE.slot_pos(data.draw(st.sampled_from(["same", "k0", "u5"]))),
                         data.draw(st.integers(-1, count + 1)))
    if data.draw(st.booleans()):
        struct.pack_into(">i", raw, 36, data.draw(st.integers(0, count)))
    path.write_bytes(raw)
    keys = ("same", "k0", "u3", "u5")
    assert hits(ONE, copy, *keys) == [broker_hits(ONE, copy, key)[0] for key in keys]


# -- names ------------------------------------------------------------------------------------------------

def test_an_index_file_named_by_another_number_is_queried(three_files, tmp_path, capsys):
    """The oldest IndexFile renamed ``1``: the broker's load opens it (``Long.parseLong("1")``) and sorts
    it first, as before, so its queries find every key (the oracle: all 6 ``same`` hits, ``k0`` found);
    segstore's reader left it out and missed the keys it alone holds.  verify still names it, and recover
    sets it aside and puts its entries again."""
    copy = _copy(three_files, tmp_path)
    oldest = sorted((copy / "index").iterdir())[0]
    oldest.rename(copy / "index" / "1")
    phys = _phys(copy, SMALL)
    assert hits(SMALL, copy, "same") == broker_hits(SMALL, copy, "same")[0] == phys
    assert hits(SMALL, copy, "k0") == [phys[0]]
    code, out, _ = cli_run("verify", copy, "--config", "maxHashSlotNum=4", "--config", "maxIndexNum=8")
    assert code == 1 and "found '1': the broker's IndexService.load opens it as an index file" in out
    assert cli_run("recover", copy, "--config", "maxHashSlotNum=4", "--config", "maxIndexNum=8")[0] == 0
    assert not (copy / "index" / "1").exists()
    assert hits(SMALL, copy, "same") == broker_hits(SMALL, copy, "same")[0] == phys
    assert hits(SMALL, copy, "k0") == [phys[0]]
    assert cli_run("verify", copy, "--config", "maxHashSlotNum=4", "--config", "maxIndexNum=8")[0] == 0


def test_a_numbered_file_sorting_last_is_read_first_as_the_broker_reads_it(three_files, tmp_path):
    """A copy of the oldest IndexFile named ``9`` sorts after the 17-digit names (``Arrays.sort`` of the
    paths), so the broker's ``queryOffset`` reads it first; with a ``begin`` after its time range it is not
    read, and its ``beginTimestamp < begin`` ends the query there: nothing found, where the newest file
    holds the key.  segstore read the 17-digit files only and found it."""
    copy = _copy(three_files, tmp_path)
    index = sorted((copy / "index").iterdir())
    shutil.copy(index[0], copy / "index" / "9")
    with segstore.open(str(copy), **SMALL.config) as s:
        newest = [m for m in s.scan() if m.store_timestamp >= T0 + 5000]
        assert [m.physical_offset for m in s.query_by_key("T", "k5")] == [newest[0].physical_offset]
        assert s.query_by_key("T", "k5", begin=T0 + 5000) == []
        assert s.find("T", "k5", begin=T0 + 5000) == []
    (copy / "index" / "9").unlink()
    with segstore.open(str(copy), **SMALL.config) as s:
        assert [m.physical_offset for m in s.query_by_key("T", "k5", begin=T0 + 5000)] == \
            [newest[0].physical_offset]


@pytest.mark.parametrize("name", ["\u00b2" * 17, "\u0661" * 17, "-1", "+7", "99999999999999999999"])
def test_which_names_the_reader_queries_are_those_long_parse_long_reads(three_files, tmp_path, name):
    """The oldest IndexFile renamed: ``Long.parseLong`` reads Arabic-Indic digits and a sign, not
    superscripts (``Character.digit``) nor a number past ``Long.MAX_VALUE``; the broker skips those
    (``NumberFormatException``, logged).  segstore took 17 superscript twos for an index file name."""
    copy = _copy(three_files, tmp_path)
    oldest = sorted((copy / "index").iterdir())[0]
    oldest.rename(copy / "index" / name)
    phys = _phys(copy, SMALL)
    read = name not in ("\u00b2" * 17, "99999999999999999999")
    assert (phys[0] in hits(SMALL, copy, "same")) is read
    assert hits(SMALL, copy, "k0") == ([phys[0]] if read else [])


def test_a_directory_named_by_a_number_ends_the_files_the_broker_queries(three_files, tmp_path):
    """A directory ``1`` in ``index/`` sorts first: 4.9.7 ``IndexService.load``'s ``new IndexFile`` throws
    ``IOException`` on it and the load returns there, every IndexFile after it unloaded, so the broker's
    key queries find nothing.  segstore's reader went on past it and found every key; verify names it."""
    copy = _copy(three_files, tmp_path)
    (copy / "index" / "1").mkdir()
    assert hits(SMALL, copy, "same", "k5") == [[], []]
    code, out, _ = cli_run("verify", copy, "--config", "maxHashSlotNum=4", "--config", "maxIndexNum=8")
    assert code == 1 and "found '1': the broker's IndexService.load stops there (new IndexFile throws on a " \
                         "directory), loading none of the files after it" in out
    assert cli_run("recover", copy, "--config", "maxHashSlotNum=4", "--config", "maxIndexNum=8")[0] == 0
    assert hits(SMALL, copy, "same", "k5") == [_phys(copy, SMALL), [_phys(copy, SMALL)[5]]]
