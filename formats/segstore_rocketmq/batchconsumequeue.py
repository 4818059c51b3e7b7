"""The RocketMQ 5.x batch consume queue: ``batchconsumequeue/TOPIC/QUEUEID/%020d`` (read-only).

Source: apache/rocketmq ``rocketmq-all-5.3.0``, ``store/.../queue/BatchConsumeQueue.java``
(``CQ_STORE_UNIT_SIZE = 46``, ``putBatchMessagePositionInfo``, ``recover``) and
``StorePathConfigHelper.getStorePathBatchConsumeQueue`` (the directory name).  A topic whose
``queue.type`` attribute is ``BatchCQ`` gets one 46-byte unit per *batch* of messages instead of
the 20-byte units of ``consumequeue/``; big-endian::

    offset  bytes  field
    0       8      commitLogOffset   the batch's message in the commitlog
    8       4      size
    12      8      tagsCode
    20      8      storeTime         (MSG_STORE_TIME_OFFSET_INDEX)
    28      8      msgBaseOffset     the queue offset of the batch's first message (MSG_BASE_OFFSET_INDEX)
    36      2      batchSize         messages in the batch (MSG_BATCH_SIZE_INDEX)
    38      4      compactedOffset   INVALID_POS (-1) as written (MSG_COMPACT_OFFSET_INDEX)
    42      4      reserved          0

Files are ``mapperFileSizeBatchConsumeQueue`` bytes (300000 units by default), named by the byte
offset of their first unit (``MappedFileQueue``).  ``recover`` keeps units while
``commitLogOffset >= 0 && size > 0 && msgBaseOffset >= 0 && batchSize > 0``; the first other unit
ends the queue, and the rest of the files must be unwritten (zeros).  A unit's queue offsets are
``[msgBaseOffset, msgBaseOffset + batchSize)`` and the next unit starts where it ends
(``maxOffsetInQueue = msgBaseOffset + batchSize``).

Pure decoding plus a read-only view of a store's ``batchconsumequeue/``; files are mapped through
:mod:`segstore.files`.  Thread-safe for readers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError
from segstore.plugin import DumpLine
from segstore.store import Problem

from .consumequeue import name_offset
from .dirnames import BCQ_DIR, queue_dirs

BCQ_UNIT = np.dtype([
    ("offset", ">i8"),
    ("size", ">i4"),
    ("tags_code", ">i8"),
    ("store_time", ">i8"),
    ("base_offset", ">i8"),
    ("batch_size", ">i2"),
    ("compacted_offset", ">i4"),
    ("reserved", ">i4"),
])
assert BCQ_UNIT.itemsize == 46
#: ``mapperFileSizeBatchConsumeQueue`` (MessageStoreConfig, 5.3.0)
DEFAULT_FILE_SIZE = 300_000 * BCQ_UNIT.itemsize
INVALID_POS = -1
FILE_NAME_DIGITS = 20


@dataclass(frozen=True, slots=True)
class BatchQueueFile:
    """The units of one file up to its end (``recover``'s rule), and where its unwritten space starts."""

    path: str
    base: int                  # the byte offset its name gives
    units: np.ndarray          # BCQ_UNIT rows kept
    problems: tuple[tuple[int, str], ...]


def decode_file(data: bytes | memoryview, *, path: str, base: int) -> BatchQueueFile:
    """The units of one batch-consume-queue file's bytes.

    Units are kept while ``recover``'s rule holds; after them every byte must be zero (a non-zero
    byte is a problem, reported with its position).  ``O(units)`` with numpy.

    :raises CorruptDataError: the name is not a multiple of 46 (no broker writes it).
    """
    if base % BCQ_UNIT.itemsize:
        raise CorruptDataError(
            f"expected a file name that is a multiple of {BCQ_UNIT.itemsize}, found {base}", path)
    count = len(data) // BCQ_UNIT.itemsize
    rows = np.frombuffer(data, BCQ_UNIT, count=count)
    good = (rows["offset"] >= 0) & (rows["size"] > 0) & (rows["base_offset"] >= 0) & (rows["batch_size"] > 0)
    bad = np.flatnonzero(~good)
    used = int(bad[0]) if len(bad) else count
    problems: list[tuple[int, str]] = []
    if len(data) % BCQ_UNIT.itemsize:
        problems.append((count * BCQ_UNIT.itemsize, f"expected a size that is a multiple of "
                                                    f"{BCQ_UNIT.itemsize}, found {len(data)} bytes"))
    tail = np.frombuffer(data, np.uint8, offset=used * BCQ_UNIT.itemsize)
    nonzero = np.flatnonzero(tail)
    if len(nonzero) and used < count:
        pos = used * BCQ_UNIT.itemsize
        row = rows[used]
        problems.append((pos, f"expected a unit with commitLogOffset >= 0, size > 0, msgBaseOffset >= 0 "
                              f"and batchSize > 0, or unwritten zeros, found commitLogOffset "
                              f"{int(row['offset'])} size {int(row['size'])} "
                              f"msgBaseOffset {int(row['base_offset'])} "
                              f"batchSize {int(row['batch_size'])}"))
    return BatchQueueFile(path, base, rows[:used].copy(), tuple(problems))


def check_units(units: np.ndarray, positions: np.ndarray, file_index: np.ndarray, paths: list[str],
                commitlog_end: int | None) -> list[Problem]:
    """Problems of a queue's units in order (the first of each kind): queue offsets contiguous (each
    unit starts where the one before ends), commitlog offsets increasing and (given the commitlog
    end) inside the commitlog.  ``positions``/``file_index``: each unit's byte position and file."""
    out: list[Problem] = []
    if not len(units):
        return out

    def where(i: int) -> tuple[str, int]:
        return paths[int(file_index[i])], int(positions[i])
    ends = units["base_offset"] + units["batch_size"]
    gap = np.flatnonzero(units["base_offset"][1:] != ends[:-1]) + 1
    for i in gap[:1].tolist():
        out.append(Problem(*where(i), f"expected msgBaseOffset {int(ends[i - 1])} (the unit before "
                                      f"ends there), found {int(units['base_offset'][i])}"))
    back = np.flatnonzero(units["offset"][1:] <= units["offset"][:-1]) + 1
    for i in back[:1].tolist():
        out.append(Problem(*where(i), f"expected a commitLogOffset above {int(units['offset'][i - 1])}, "
                           f"found {int(units['offset'][i])}"))
    if commitlog_end is not None:
        past = np.flatnonzero(units["offset"] + units["size"] > commitlog_end)
        for i in past[:1].tolist():
            out.append(Problem(*where(i), f"expected a batch inside the commitlog (end {commitlog_end}), "
                                          f"found commitLogOffset {int(units['offset'][i])} "
                                          f"size {int(units['size'][i])}"))
    return out


@dataclass(slots=True)
class BatchQueue:
    """One ``batchconsumequeue/TOPIC/QUEUEID`` directory, read whole on open (its units are small)."""

    topic: str
    queue_id: int
    files: list[BatchQueueFile]

    @property
    def units(self) -> np.ndarray:
        return np.concatenate([f.units for f in self.files]) if self.files else np.zeros(0, BCQ_UNIT)

    @property
    def min_offset(self) -> int:
        units = self.units
        return int(units["base_offset"][0]) if len(units) else 0

    @property
    def max_offset(self) -> int:
        """``maxOffsetInQueue``: past the last batch's messages."""
        units = self.units
        return int(units["base_offset"][-1] + units["batch_size"][-1]) if len(units) else 0

    def problems(self, commitlog_end: int | None = None) -> list[Problem]:
        out = [Problem(f.path, pos, msg) for f in self.files for pos, msg in f.problems]
        counts = [len(f.units) for f in self.files]
        positions = (np.concatenate([np.arange(n) * BCQ_UNIT.itemsize for n in counts]) if counts
                     else np.zeros(0, np.int64))
        file_index = np.repeat(np.arange(len(counts)), counts)
        # a file after one that ended early holds units the broker never reads
        for before, after in zip(self.files, self.files[1:], strict=False):
            full = len(before.units) * BCQ_UNIT.itemsize
            if len(after.units) and full < files.file_size(before.path):
                out.append(Problem(after.path, 0, f"expected no units after the end of the queue in "
                                                  f"{before.path} (at byte {full}), "
                                                  f"found {len(after.units)}"))
        return out + check_units(self.units, positions, file_index, [f.path for f in self.files],
                                 commitlog_end)


def read_file(path: str) -> BatchQueueFile:
    name = os.path.basename(path)
    base = name_offset(name)
    if base is None:
        raise CorruptDataError(f"expected a batch consume queue file named by {FILE_NAME_DIGITS} digits, "
                               f"found {name!r}", path)
    mapped = files.MappedFile(path)
    try:
        return decode_file(mapped.view(), path=path, base=base)
    finally:
        mapped.close()


def load(store_dir: str) -> dict[tuple[str, int], BatchQueue]:
    """Every queue under ``store_dir/batchconsumequeue`` (empty when the directory is absent)."""
    root = os.path.join(store_dir, BCQ_DIR)
    out: dict[tuple[str, int], BatchQueue] = {}
    if not files.is_dir(root):
        return out
    # stray entries skipped as the broker's loader skips them (.dirnames.queue_dirs)
    for topic, queue_id, directory in queue_dirs(root).queues:
        if queue_id < 0:
            continue
        names = sorted(n for n in files.list_dir(directory) if name_offset(n) is not None)
        out[(topic, queue_id)] = BatchQueue(topic, queue_id,
                                            [read_file(os.path.join(directory, n)) for n in names])
    return out


def dump(path: str) -> Iterator[DumpLine]:
    """``segstore dump FILE`` of one batch-consume-queue file: every unit, then its problems."""
    f = read_file(path)
    first = f.base // BCQ_UNIT.itemsize
    for i, row in enumerate(f.units.tolist()):
        offset, size, tags_code, store_time, base, batch, compacted, _reserved = row
        yield DumpLine(
            f"unit: {first + i} commitlogOffset: {offset} size: {size} tagsCode: {tags_code} "
            f"storeTime: {store_time} msgBaseOffset: {base} batchSize: {batch} compactedOffset: {compacted}",
            {"kind": "unit", "unit": first + i, "commitlog_offset": offset, "size": size,
             "tags_code": tags_code, "store_time": store_time, "msg_base_offset": base, "batch_size": batch,
             "compacted_offset": compacted})
    for pos, message in f.problems:
        yield DumpLine(f"{path}:{pos}: {message}", {"kind": "error", "position": pos, "error": message},
                       problem=True)
