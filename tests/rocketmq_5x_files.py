"""RocketMQ 5.x store files laid out as a 5.x broker writes them, independently of segstore.

From apache/rocketmq ``rocketmq-all-5.3.0`` (``store/src/main/java/org/apache/rocketmq/store/``):

- ``batchconsumequeue/TOPIC/QUEUE/%020d``: ``queue/BatchConsumeQueue.putBatchMessagePositionInfo``,
  ``[long offset][int size][long tagsCode][long storeTime][long msgBaseOffset][short batchSize]
  [int INVALID_POS=-1][int 0]`` (46 bytes), in files of ``mapperFileSizeBatchConsumeQueue`` bytes;
- ``timerlog/%020d``: ``timer/TimerMessageStore.doEnqueue`` (a 52-byte unit) appended by
  ``timer/TimerLog.append`` (a ``[int left][long 0][int BLANK_MAGIC_CODE]`` blank when the unit
  does not fit with 16 bytes to spare, then a new file);
- ``timerwheel``: ``timer/TimerWheel.putSlot`` at ``getSlotIndex`` (``timeMs / precisionMs %
  (2 * slotsTotal)``), ``[long timeMs / precisionMs][long firstPos][long lastPos][int num][int magic]``,
  ``slotsTotal = 7 * 86400``, the file ``2 * slotsTotal * 32`` bytes;
- ``config/timercheck``: ``timer/TimerCheckpoint.flush``, seven longs in a 4096-byte page;
- ``config/timermetrics``: ``timer/TimerMetrics.persist``, fastjson;
- a v2 message: ``MessageExtEncoder.encode`` with ``MessageVersion.MESSAGE_VERSION_V2``.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass, field

from rocketmq_broker_files import HEADER, STORE_HOST, Msg, properties_string

MESSAGE_MAGIC_CODE_V2 = -626843477     # MessageDecoder.MESSAGE_MAGIC_CODE_V2, 0xDAA320AB
BCQ_UNIT = struct.Struct(">qiqqqhii")
assert BCQ_UNIT.size == 46
TIMER_UNIT = struct.Struct(">iqiqiqiiq")
assert TIMER_UNIT.size == 52
TIMER_BLANK = struct.Struct(">iqi")
TIMER_BLANK_MAGIC = -875286124          # 0xBBCCDDEE ^ (1880681586 + 8) as a Java int
WHEEL_SLOT = struct.Struct(">qqqii")
SLOTS_TOTAL = 7 * 24 * 3600
TIMER_CHECK = struct.Struct(">7q")


def java_hash(text: str) -> int:
    h = 0
    data = text.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def write_batch_queue(store: str, topic: str, queue_id: int,
                      batches: list[tuple[int, int, int, int, int]], *, file_size: int,
                      first_offset: int = 0) -> list[str]:
    """Units ``(commitlog offset, size, tags code, store time, batch size)`` of one queue, message
    queue offsets counted from ``first_offset``; files of ``file_size`` bytes (a multiple of 46)."""
    directory = os.path.join(store, "batchconsumequeue", topic, str(queue_id))
    os.makedirs(directory, exist_ok=True)
    per_file = file_size // BCQ_UNIT.size
    paths = []
    base = first_offset
    for start in range(0, max(len(batches), 1), per_file):
        data = bytearray(file_size)
        for i, (offset, size, tags, stamp, count) in enumerate(batches[start:start + per_file]):
            BCQ_UNIT.pack_into(data, i * BCQ_UNIT.size, offset, size, tags, stamp, base, count, -1, 0)
            base += count
        path = os.path.join(directory, f"{start * BCQ_UNIT.size:020d}")
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
    return paths


@dataclass
class TimerStoreWriter:
    """``TimerMessageStore.doEnqueue`` over ``TimerLog`` and ``TimerWheel`` (no rolls, no deletes
    unless given a magic)."""

    store: str
    file_size: int = 1024
    precision_ms: int = 1000
    logs: list[bytearray] = field(default_factory=list)
    wrote: int = 0
    wheel: dict[int, list[int]] = field(default_factory=dict)
    positions: list[int] = field(default_factory=list)

    def _append(self, unit: bytes) -> int:
        if not self.logs:
            self.logs.append(bytearray(self.file_size))
        if len(unit) + TIMER_BLANK.size > self.file_size - self.wrote:
            left = self.file_size - self.wrote
            TIMER_BLANK.pack_into(self.logs[-1], self.wrote, left, 0, TIMER_BLANK_MAGIC)
            self.logs.append(bytearray(self.file_size))
            self.wrote = 0
        pos = (len(self.logs) - 1) * self.file_size + self.wrote
        self.logs[-1][self.wrote:self.wrote + len(unit)] = unit
        self.wrote += len(unit)
        return pos

    def enqueue(self, write_time: int, delayed_time: int, offset_py: int, size_py: int, topic: str,
                magic: int = 1) -> int:
        index = delayed_time // self.precision_ms % (2 * SLOTS_TOTAL)
        slot = self.wheel.get(index)
        slot_ms = delayed_time // self.precision_ms * self.precision_ms
        if slot is None or slot[0] * self.precision_ms != slot_ms:
            slot = [-1, -1, -1, 0, 0]          # getSlot: Slot(-1, -1, -1)
        unit = TIMER_UNIT.pack(TIMER_UNIT.size, slot[2], magic, write_time, delayed_time - write_time,
                               offset_py, size_py, java_hash(topic), 0)
        pos = self._append(unit)
        self.wheel[index] = [delayed_time // self.precision_ms, pos if slot[1] == -1 else slot[1], pos,
                             slot[3] + 1, slot[4]]
        self.positions.append(pos)
        return pos

    def write(self, *, check: tuple[int, ...] | None = None, metrics: dict[str, int] | None = None) -> None:
        root = os.path.join(self.store, "timerlog")
        os.makedirs(root, exist_ok=True)
        for i, data in enumerate(self.logs):
            with open(os.path.join(root, f"{i * self.file_size:020d}"), "wb") as f:
                f.write(data)
        with open(os.path.join(self.store, "timerwheel"), "wb") as f:
            f.truncate(2 * SLOTS_TOTAL * WHEEL_SLOT.size)     # RandomAccessFile.setLength: zeros
            for index, slot in sorted(self.wheel.items()):
                f.seek(index * WHEEL_SLOT.size)
                f.write(WHEEL_SLOT.pack(*slot))
        os.makedirs(os.path.join(self.store, "config"), exist_ok=True)
        if check is not None:
            with open(os.path.join(self.store, "config", "timercheck"), "wb") as f:
                f.write(TIMER_CHECK.pack(*check).ljust(4096, b"\0"))
        if metrics is not None:
            text = json.dumps({"dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1700000000000},
                               "timingCount": {t: {"count": n, "timeStamp": 1700000000000}
                                               for t, n in metrics.items()}}, separators=(",", ":"))
            with open(os.path.join(self.store, "config", "timermetrics"), "w") as f:
                f.write(text)

    @property
    def end(self) -> int:
        return (len(self.logs) - 1) * self.file_size + self.wrote if self.logs else 0


def message_v2_bytes(m: Msg, queue_offset: int, physical_offset: int, born_timestamp: int) -> bytes:
    """``MessageExtEncoder.encode`` of a ``MESSAGE_VERSION_V2`` message (IPv4 hosts, the store host as
    both): the v1 layout with magic 0xDAA320AB and a 2-byte topic length (``MessageVersion.putTopicLength``),
    ``calMsgLength`` counting ``getTopicLengthSize() == 2``; properties as 5.2.0+ write them."""
    props = properties_string(m.properties, (5, 3, 0))
    topic = m.topic.encode("utf-8")
    size = HEADER.size + len(m.body) + 2 + len(topic) + 2 + len(props)
    head = HEADER.pack(size, MESSAGE_MAGIC_CODE_V2, zlib.crc32(m.body) & 0x7FFFFFFF, m.queue_id, 0,
                       queue_offset, physical_offset, m.sys_flag, born_timestamp, *STORE_HOST,
                       m.store_timestamp, *STORE_HOST, 0, 0, len(m.body))
    return head + m.body + struct.pack(">h", len(topic)) + topic + struct.pack(">h", len(props)) + props
