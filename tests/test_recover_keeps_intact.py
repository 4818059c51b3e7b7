"""Recovery never loses an intact message and never changes or removes a commitlog byte without
keeping it (issue 28, item 11: "Loss" and "Kept").

- Loss: zeros over the end of one message and the header of the next, in a store shut down cleanly,
  made ``recover`` take the zeros for the end of the data: it kept the messages before them and cut
  the intact messages of this and the two later files (RocketMQ 4.9.7's ``recoverNormally`` stops
  there too: ``checkMessageAndReturnSize`` reads magic 0 as "illegal magic code" and the walk
  ends, ``truncateDirtyFiles`` cuts the rest).  Zeros followed by valid messages are damage, not
  the end: the walk goes on at the next valid message, the damaged bytes stay and are reported.
- Kept: a trailing commitlog file whose first bytes are zeros was taken for the allocator's
  preallocated spare, and a clean close deleted it with whatever it held.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path

import damage
import numpy as np
import pytest

import segstore
from segstore import cli
from segstore.errors import SegstoreError

FILE_SIZE = 200_000
CONFIG = {"mappedFileSizeCommitLog": FILE_SIZE, "mappedFileSizeConsumeQueue": 6000,
          "flushDiskType": "SYNC_FLUSH"}
MESSAGES = 253


def _body(i: int) -> bytes:
    return bytes([65 + i % 26]) * (1950 + (i * 37) % 300)


@pytest.fixture(scope="module")
def three_files(tmp_path_factory) -> Path:
    """A cleanly shut down SYNC_FLUSH store of three 200,000-byte commitlog files."""
    store = tmp_path_factory.mktemp("pristine") / "store"
    with segstore.open(str(store), format="rocketmq", mode="a", **CONFIG) as s:
        s.append_batch([{"topic": f"T{i % 3}", "queue_id": i % 4, "body": _body(i), "keys": [f"k{i}"]}
                        for i in range(MESSAGES)])
    assert len(os.listdir(store / "commitlog")) == 3
    return store


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    got = capsys.readouterr()
    return rc, got.out, got.err


def _positions(store: Path) -> list[tuple[int, int]]:
    with segstore.open(str(store), **CONFIG) as s:
        return [(m.physical_offset, m.size) for m in s.scan()]


def _commitlog(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "commitlog").iterdir())}


def unkept(before: dict[str, bytes], store: Path) -> list[str]:
    """The commitlog bytes (non-zero before) that recovery changed or removed without keeping them in
    ``.segstore/cut/commitlog/FILE.cut-POS``."""
    cut_dir = store / ".segstore" / "cut" / "commitlog"
    problems = []
    for name, old in before.items():
        path = store / "commitlog" / name
        new = np.zeros(len(old), np.uint8)
        if path.exists():
            data = np.frombuffer(path.read_bytes(), np.uint8)[:len(old)]
            new[:len(data)] = data
        was = np.frombuffer(old, np.uint8)
        kept = np.zeros(len(old), bool)
        for cut in cut_dir.glob(f"{name}.cut-*") if cut_dir.exists() else []:
            pos = int(re.fullmatch(rf"{name}\.cut-(\d+)(?:\.\d+)?", cut.name).group(1))
            saved = np.frombuffer(cut.read_bytes(), np.uint8)[:max(0, len(old) - pos)]
            kept[pos:pos + len(saved)] |= saved == was[pos:pos + len(saved)]
        lost = np.flatnonzero((was != new) & (was != 0) & ~kept)
        if len(lost):
            problems.append(f"{name}:{int(lost[0])}: {len(lost)} bytes changed or removed, not kept")
    return problems


@pytest.mark.parametrize("into_next", [4, 8])
def test_zeros_over_a_message_end_and_the_next_header_lose_nothing_after_them(tmp_path, capsys, three_files,
                                                                              into_next):
    """64 zeros from ``into_next`` bytes before message 18: message 17's properties end in zeros (no
    CRC covers them, it still decodes) and message 18's header is gone.  Before: ``recover`` exited 0
    keeping 17 messages, the 235 intact ones after them cut."""
    store = _copy(three_files, tmp_path / "store")
    positions = _positions(store)
    victim_phy, victim_size = positions[17]
    first = store / "commitlog" / f"{0:020d}"
    raw = bytearray(first.read_bytes())
    at = victim_phy - into_next
    raw[at:at + 64] = bytes(64)
    first.write_bytes(bytes(raw))
    before = _commitlog(store)

    rc, out, err = _cli(capsys, "recover", str(store))

    assert rc == 1, out + err
    assert f"{first}:{victim_phy}: expected messages, found {victim_size} damaged bytes with intact " \
           f"messages after them" in err
    assert _commitlog(store) == before              # nothing cut: every later message is intact
    with segstore.open(str(store), **CONFIG) as s:
        for i, (phy, _) in enumerate(positions):
            if i == 17:
                with pytest.raises(SegstoreError):
                    s.message_at(phy)
                continue
            assert s.message_at(phy).body == _body(i)
        # the queues serve every message after the damage (the consumer's view)
        served = {m.physical_offset for key in s.queues for m in _read_around(s, *key, victim_phy)}
    assert {phy for phy, _ in positions[18:]} <= served


def _read_around(store, topic: str, queue_id: int, damaged: int):
    """A queue's messages, stepping over the one at ``damaged`` (a read refuses it)."""
    low, high = store.offset_range(topic, queue_id)
    for offset in range(low, high):
        try:
            yield from store.read(topic, queue_id, offset, 1)
        except SegstoreError as err:
            assert str(damaged - damaged % FILE_SIZE).zfill(20) in str(err)


def test_zeros_mid_data_after_a_clean_shutdown_are_damage_for_verify_too(tmp_path, capsys, three_files):
    store = _copy(three_files, tmp_path / "store")
    phy = _positions(store)[17][0]
    first = store / "commitlog" / f"{0:020d}"
    raw = bytearray(first.read_bytes())
    raw[phy - 4:phy + 60] = bytes(64)
    first.write_bytes(bytes(raw))
    rc, out, _ = _cli(capsys, "verify", str(store))
    assert rc == 1 and f"{first}:{phy}: expected a message or a BLANK, found zeros before later valid " \
                       f"messages" in out


@pytest.mark.parametrize(("name", "value"), [("abort", 268435456), ("abort", 7), ("basic", 268435456)])
def test_bytes_in_a_trailing_file_that_starts_with_zeros_are_kept(tmp_path, capsys, name, value):
    """Issue 28: 268435456 written at 55,684 of the ``abort`` store's last commitlog file (a file the
    broker preallocated, zeros before the damage).  Its first bytes being zeros, the file was taken
    for the allocator's spare and the clean close after ``recover`` deleted it, damage and all,
    keeping nothing.  A spare holds zeros only; a file holding anything is loaded, and its
    bytes past the data end are cut as a torn tail, kept first."""
    store = damage.make_pristine("rocketmq", name, tmp_path / "copy")
    last = sorted((store / "commitlog").iterdir())[-1]
    raw = bytearray(last.read_bytes())
    if any(raw[:8]):        # the basic store's last file holds messages: make a trailing file of zeros
        size = len(raw)
        last = last.with_name(f"{int(last.name) + size:020d}")
        raw = bytearray(size)
    raw[55684:55688] = struct.pack(">i", value)
    last.write_bytes(bytes(raw))
    before = _commitlog(store)
    rc, out, err = _cli(capsys, "recover", str(store))
    assert rc == 0, err
    assert unkept(before, store) == []
    extent = 55684 + max(i for i, b in enumerate(struct.pack(">i", value)) if b) + 1
    assert f"{last}:0: cut {extent} bytes of torn tail, saved in" in out
    assert _cli(capsys, "verify", str(store))[0] == 0


def test_random_bytes_after_the_last_message_are_kept_when_cut(tmp_path, capsys):
    """Issue 28: 4,077 random bytes after the last message."""
    store = damage.make_pristine("rocketmq", "abort", tmp_path / "copy")
    with segstore.open(str(store)) as s:
        end = s.commitlog.end
    seg = store / "commitlog" / f"{end - end % 65536:020d}"
    raw = bytearray(seg.read_bytes())
    pos = end % 65536
    raw[pos:pos + 4077] = np.random.default_rng(28).integers(0, 256, 4077, np.uint8).tobytes()
    seg.write_bytes(bytes(raw))
    before = _commitlog(store)
    rc, _, err = _cli(capsys, "recover", str(store))
    assert rc == 0, err
    assert unkept(before, store) == []
