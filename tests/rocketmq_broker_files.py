"""Store files laid out as a real RocketMQ broker leaves them, written independently of segstore.

Every byte here follows the broker's sources (apache/rocketmq), not segstore's encoder,
so that tests compare segstore against the broker's layouts rather than against itself:

- a message: ``CommitLog.calMsgLength`` / ``CommitLog.DefaultAppendMessageCallback.doAppend``
  (rocketmq-all-4.2.0 .. 4.9.7, ``store/.../CommitLog.java``), v1 magic, IPv4 hosts;
- properties: ``MessageDecoder.messageProperties2String`` of the chosen version
  (a 0x02 after every pair up to 4.9.0 and from 5.2.0; the last one deleted in 4.9.1 .. 5.1.4);
- a BLANK at the end of a file: ``[int remaining][int BLANK_MAGIC_CODE]``;
- a consume-queue entry: ``ConsumeQueue.putMessagePositionInfo``, ``[long offset][int size][long tagsCode]``;
- ``checkpoint``: ``StoreCheckpoint``, three longs in a 4096-byte file;
- ``lock``: ``DefaultMessageStore.start`` writes the 4 bytes ``lock`` into it.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from dataclasses import dataclass, field

MESSAGE_MAGIC_CODE = -626843481
BLANK_MAGIC_CODE = -875286124
STORE_HOST = (bytes([127, 0, 0, 1]), 10911)
#: TOTALSIZE .. BODYLENGTH with two IPv4 hosts (``CommitLog.calMsgLength``)
HEADER = struct.Struct(">iiiiiqqiq4siq4siiqi")
assert HEADER.size == 88
CQ_ENTRY = struct.Struct(">qiq")
assert CQ_ENTRY.size == 20


def java_hash(text: str) -> int:
    """``String.hashCode`` (UTF-16 code units, 32-bit wrap), signed."""
    h = 0
    for unit in struct.unpack(f"<{len(text.encode('utf-16-le')) // 2}H", text.encode("utf-16-le")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def properties_string(pairs: list[tuple[str, str]], version: tuple[int, int, int]) -> bytes:
    """``MessageDecoder.messageProperties2String`` of broker ``version`` over ``pairs`` in order."""
    text = "".join(f"{name}\x01{value}\x02" for name, value in pairs)
    if (4, 9, 1) <= version < (5, 2, 0) and text:
        text = text[:-1]                        # sb.deleteCharAt(sb.length() - 1)
    return text.encode("utf-8")


@dataclass
class Msg:
    topic: str
    queue_id: int
    body: bytes
    properties: list[tuple[str, str]] = field(default_factory=list)
    store_timestamp: int = 1_700_000_000_000
    sys_flag: int = 0


def message_bytes(m: Msg, queue_offset: int, physical_offset: int, version: tuple[int, int, int]) -> bytes:
    props = properties_string(m.properties, version)
    topic = m.topic.encode("utf-8")
    size = HEADER.size + len(m.body) + 1 + len(topic) + 2 + len(props)
    head = HEADER.pack(size, MESSAGE_MAGIC_CODE, zlib.crc32(m.body) & 0x7FFFFFFF, m.queue_id, 0, queue_offset,
                       physical_offset, m.sys_flag, m.store_timestamp - 5, *STORE_HOST, m.store_timestamp,
                       *STORE_HOST, 0, 0, len(m.body))
    return head + m.body + struct.pack(">b", len(topic)) + topic + struct.pack(">h", len(props)) + props


def tags_of(m: Msg) -> str | None:
    return dict(m.properties).get("TAGS")


@dataclass
class Written:
    """Where the broker put each message: ``(physical offset, size, queue offset)``."""

    placed: list[tuple[int, int, int]]
    end: int


def write_commitlog(store: str, messages: list[Msg], *, file_size: int, version: tuple[int, int, int],
                    start: int = 0) -> Written:
    """The commitlog files of ``messages`` appended from ``start`` (0: a new store), full-size files,
    a BLANK where the next message does not fit (``size + 8 > remaining``)."""
    directory = os.path.join(store, "commitlog")
    os.makedirs(directory, exist_ok=True)
    offsets: dict[tuple[str, int], int] = {}
    placed = []
    pos = start
    buffers: dict[int, bytearray] = {}

    def buf(base: int) -> bytearray:
        if base not in buffers:
            path = os.path.join(directory, f"{base:020d}")
            buffers[base] = bytearray(Path(path).read_bytes() if os.path.exists(path) else bytes(file_size))
        return buffers[base]

    for m in messages:
        queued = m.sys_flag & 0xC not in (0x4, 0xC)
        qoff = offsets.get((m.topic, m.queue_id), 0) if queued else 0
        data = message_bytes(m, qoff, pos, version)
        base = pos - pos % file_size
        if pos + len(data) + 8 > base + file_size:
            blank = struct.pack(">ii", base + file_size - pos, BLANK_MAGIC_CODE)
            buf(base)[pos - base:pos - base + 8] = blank
            pos = base + file_size
            base = pos
            data = message_bytes(m, qoff, pos, version)
        buf(base)[pos - base:pos - base + len(data)] = data
        placed.append((pos, len(data), qoff if queued else -1))
        if queued:
            offsets[(m.topic, m.queue_id)] = qoff + 1
        pos += len(data)
    for base, data in buffers.items():
        with open(os.path.join(directory, f"{base:020d}"), "wb") as f:
            f.write(data)
    return Written(placed, pos)


def write_consume_queues(store: str, messages: list[Msg], written: Written, *, file_size: int) -> None:
    """One entry per queued message, files of ``file_size`` bytes named by their first entry's byte offset."""
    rows: dict[tuple[str, int], list[bytes]] = {}
    for m, (phys, size, qoff) in zip(messages, written.placed, strict=True):
        if qoff < 0:
            continue
        tags = tags_of(m)
        entry = CQ_ENTRY.pack(phys, size, java_hash(tags) if tags else 0)
        rows.setdefault((m.topic, m.queue_id), []).append(entry)
    for (topic, queue_id), entries in rows.items():
        directory = os.path.join(store, "consumequeue", topic, str(queue_id))
        os.makedirs(directory, exist_ok=True)
        data = b"".join(entries)
        for base in range(0, len(data), file_size):
            chunk = data[base:base + file_size]
            with open(os.path.join(directory, f"{base:020d}"), "wb") as f:
                f.write(chunk + bytes(file_size - len(chunk)))


def write_checkpoint(store: str, physic: int, logics: int, index: int = 0) -> None:
    with open(os.path.join(store, "checkpoint"), "wb") as f:
        f.write(struct.pack(">qqq", physic, logics, index).ljust(4096, b"\0"))


def write_store(store: str, messages: list[Msg], *, version: tuple[int, int, int] = (4, 9, 7),
                file_size: int = 4096, cq_file_size: int = 200, queues: bool = True) -> Written:
    """A store after a clean shutdown: commitlog, consume queues (unless ``queues`` is false),
    checkpoint, the ``lock`` file, no ``abort``."""
    os.makedirs(store, exist_ok=True)
    written = write_commitlog(store, messages, file_size=file_size, version=version)
    if queues:
        write_consume_queues(store, messages, written, file_size=cq_file_size)
    last = max((m.store_timestamp for m in messages), default=0)
    write_checkpoint(store, last, last)
    with open(os.path.join(store, "lock"), "wb") as f:
        f.write(b"lock")
    return written


def broker_served_queue(directory: str, file_size: int, phy_end: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of every entry RocketMQ 4.9.7 serves from a consume-queue directory after
    its load and recovery, modelled on the source:

    - ``MappedFileQueue.load``: any file of another length than ``file_size`` stops the broker;
    - ``ConsumeQueue.recover``: from the third-last file, valid slots (``offset >= 0 && size > 0``)
      while files are full; ``truncateDirtyFiles`` drops files after that point;
    - ``ConsumeQueue.truncateDirtyLogicFiles(phy_end)``: from the last file, a file whose slot 0
      points at or past ``phy_end`` is deleted; otherwise slot 0 is taken *as it is* (even zeros)
      and later slots while valid and below ``phy_end``.
    """
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    datas = [Path(directory, name).read_bytes() for name in names]
    if any(len(d) != file_size for d in datas):
        raise AssertionError(f"MappedFileQueue.load: {directory} holds a file of another length")
    slots = [[CQ_ENTRY.unpack_from(d, i)[:2] for i in range(0, file_size, 20)] for d in datas]
    if not slots:
        return []
    index = max(len(slots) - 3, 0)
    mapped_offset = 0
    while True:
        for i, (offset, size) in enumerate(slots[index]):
            if not (offset >= 0 and size > 0):
                break
            mapped_offset = (i + 1) * 20
        if mapped_offset == file_size and index + 1 < len(slots):
            index, mapped_offset = index + 1, 0
            continue
        break
    wrote = [file_size] * index + [mapped_offset]          # files after ``index`` are deleted
    del slots[index + 1:]
    while slots:                                            # truncateDirtyLogicFiles
        last = slots[-1]
        if last[0][0] >= phy_end:
            slots.pop()
            wrote.pop()
            continue
        n = 1
        while n < len(last) and last[n][0] >= 0 and last[n][1] > 0 and last[n][0] < phy_end:
            n += 1
        wrote[-1] = n * 20
        break
    return [entry for file_slots, w in zip(slots, wrote, strict=True) for entry in file_slots[:w // 20]]


EXT_UNIT = struct.Struct(">hqqh")
LONG_MIN = -(1 << 63)


def write_filter_store(store: str, messages: list[Msg], *, ext_file_size: int = 300,
                       bitmap_bytes: int = 8) -> Written:
    """A store of a broker with ``enableConsumeQueueExt=true`` (RocketMQ 4.9.7 ``ConsumeQueue.
    putMessagePositionInfoWrapper``, ``ConsumeQueueExt.put`` / ``CqExtUnit.write``): every queued
    message gets a unit ``[short size][long tagsCode][long storeTime][short bitMapSize][bitmap]`` in
    ``consumequeue_ext/TOPIC/QUEUE/``, and its consume-queue entry holds the unit's address
    (real offset + Long.MIN_VALUE) instead of the tags code.  A unit that does not fit with 4 bytes
    to spare ends the file with ``short -1`` (``fullFillToEnd``)."""
    written = write_store(store, messages)
    ext_files: dict[tuple[str, int], dict[int, bytearray]] = {}
    ends: dict[tuple[str, int], int] = {}
    entries: dict[tuple[str, int], list[bytes]] = {}
    for i, (m, (phys, size, qoff)) in enumerate(zip(messages, written.placed, strict=True)):
        if qoff < 0:
            continue
        key = (m.topic, m.queue_id)
        tags = tags_of(m)
        bitmap = bytes([(i * 37 + j) & 0xFF for j in range(bitmap_bytes)])
        unit = EXT_UNIT.pack(EXT_UNIT.size + len(bitmap), java_hash(tags) if tags else 0, m.store_timestamp,
                             len(bitmap)) + bitmap
        pos = ends.get(key, 0)
        base = pos - pos % ext_file_size
        files_ = ext_files.setdefault(key, {})
        buf = files_.setdefault(base, bytearray(ext_file_size))
        if len(unit) > ext_file_size - (pos - base) - 4:
            buf[pos - base:pos - base + 2] = struct.pack(">h", -1)
            base += ext_file_size
            pos = base
            buf = files_.setdefault(base, bytearray(ext_file_size))
        buf[pos - base:pos - base + len(unit)] = unit
        ends[key] = pos + len(unit)
        entries.setdefault(key, []).append(CQ_ENTRY.pack(phys, size, pos + LONG_MIN))
    for (topic, queue_id), rows in entries.items():
        directory = os.path.join(store, "consumequeue", topic, str(queue_id))
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        data = b"".join(rows)
        for base in range(0, len(data), 200):
            with open(os.path.join(directory, f"{base:020d}"), "wb") as f:
                f.write(data[base:base + 200].ljust(200, b"\0"))
        ext_dir = os.path.join(store, "consumequeue_ext", topic, str(queue_id))
        os.makedirs(ext_dir)
        for base, buf in ext_files[(topic, queue_id)].items():
            with open(os.path.join(ext_dir, f"{base:020d}"), "wb") as f:
                f.write(buf)
    return written
