"""The RocketMQ ``checkpoint`` file: the store times up to which each part is durable.

Layout (``StoreCheckpoint``, big-endian, one OS page of 4096 bytes)::

    0   physicMsgTimestamp  i8   store time of the last commitlog message flushed
    8   logicsMsgTimestamp  i8   store time of the last message whose consume-queue entry was flushed
    16  indexMsgTimestamp   i8   end time of the last index file flushed when full
    24  masterFlushedOffset i8   RocketMQ 5.x only (0 in 4.x)
    32  confirmPhyOffset    i8   RocketMQ 5.x only (0 in 4.x)
    ... zeros to 4096

Recovery after a crash starts from the first commitlog file whose first message
is older than ``min(physic, logics) - 3000 ms`` (:attr:`Checkpoint.min_timestamp`).

:class:`Checkpoint` is the pure value (``unpack``/``pack``); :class:`CheckpointFile`
keeps it in a mapped file and flushes it as the broker does.  Not thread-safe:
the store updates it from its flush thread under its own lock.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from segstore import files
from segstore.errors import CorruptDataError, TruncatedDataError

FIELDS = struct.Struct(
    ">q"  # physicMsgTimestamp
    "q"  # logicsMsgTimestamp
    "q"  # indexMsgTimestamp
    "q"  # masterFlushedOffset (5.x)
    "q"  # confirmPhyOffset (5.x)
)
assert FIELDS.size == 40
FILE_SIZE = 4096
RECOVERY_MARGIN_MS = 3000
FILE_NAME = "checkpoint"


@dataclass(slots=True)
class Checkpoint:
    """The checkpoint's fields (milliseconds since the epoch; offsets in bytes)."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @classmethod
    def unpack(cls, data: bytes | memoryview, *, path: str | None = None) -> Checkpoint:
        """Parse a checkpoint; the 5.x fields are read when present.

        :raises TruncatedDataError: fewer than 24 bytes (the three 4.x fields).
        """
        if len(data) < FIELDS.size:
            legacy = struct.calcsize(">qqq")
            if len(data) < legacy:
                raise TruncatedDataError(
                    f"expected a checkpoint of {FILE_SIZE} bytes, found {len(data)}", path, len(data)
                )
            data = bytes(data) + bytes(FIELDS.size - len(data))
        return cls(*FIELDS.unpack_from(data, 0))

    def pack(self) -> bytes:
        """The whole 4096-byte file."""
        fields = FIELDS.pack(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        )
        return fields + bytes(FILE_SIZE - FIELDS.size)

    def clamp_times(self, newest: int, index_newest: int | None = None) -> list[str]:
        """Set the 4.x times later than ``newest`` (the newest message's store time) to it: what the
        broker's flush writes there next (the store time of the last message it flushed).
        ``indexMsgTimestamp`` is set only past ``index_newest`` (default ``newest``): the latest
        ``endTimestamp`` of the IndexFiles kept, which 4.9.7 ``IndexService.load(false)`` destroys
        after a crash when they end past it.  The names of the fields changed."""
        changed = []
        for name, attr, ceiling in (("physicMsgTimestamp", "physic_msg_timestamp", newest),
                                    ("logicsMsgTimestamp", "logics_msg_timestamp", newest),
                                    ("indexMsgTimestamp", "index_msg_timestamp",
                                     newest if index_newest is None else index_newest)):
            if getattr(self, attr) > ceiling:
                setattr(self, attr, ceiling)
                changed.append(name)
        return changed

    def index_file_flushed(self, end_timestamp: int) -> bool:
        """A full IndexFile was flushed (4.9.7 ``IndexService.flush``): its ``endTimestamp`` is the new
        ``indexMsgTimestamp`` when above 0, as there (a file ending at a store time of -1 leaves the field,
        which would otherwise make the next crash-start destroy every later-ending file).  Whether it
        changed."""
        if end_timestamp <= 0 or end_timestamp == self.index_msg_timestamp:
            return False
        self.index_msg_timestamp = end_timestamp
        return True

    @property
    def min_timestamp(self) -> int:
        """``getMinTimestamp``: min(physic, logics) less the 3 s margin, at least 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - RECOVERY_MARGIN_MS)

    @property
    def min_timestamp_index(self) -> int:
        """``getMinTimestampIndex``: the recovery start that also covers the index."""
        return min(self.min_timestamp, self.index_msg_timestamp)


#: the three 4.x fields: store times of messages
TIME_FIELDS = ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")
#: every field by its broker name, and the :class:`Checkpoint` attribute holding it
FIELD_NAMES = (*TIME_FIELDS, "masterFlushedOffset", "confirmPhyOffset")
FIELD_ATTRS = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp", "master_flushed_offset",
               "confirm_phy_offset")


def check(data: bytes | memoryview, *, path: str, newest: int | None = None) -> list[tuple[int, str]]:
    """Problems of a checkpoint's bytes as ``(pos, message)``: size, negative times, data after the fields,
    and (with ``newest``, the newest store time of the commitlog's messages) a time later than any
    message's: each field is the store time of a message the broker flushed, and a later one makes
    its recovery after a crash start past files whose queue entries it must dispatch again
    (``recoverAbnormally`` starts at the file whose first message is older than the minimum)."""
    out: list[tuple[int, str]] = []
    if len(data) != FILE_SIZE:
        out.append(
            (min(len(data), FILE_SIZE), f"expected a checkpoint of {FILE_SIZE} bytes, found {len(data)}")
        )
    try:
        cp = Checkpoint.unpack(data, path=path)
    except CorruptDataError as err:
        if (err.pos or 0, err.message) not in out:   # under 24 bytes: the size problem above, once
            out.append((err.pos or 0, err.message))
        return out
    names = (
        "physicMsgTimestamp",
        "logicsMsgTimestamp",
        "indexMsgTimestamp",
        "masterFlushedOffset",
        "confirmPhyOffset",
    )
    values = (
        cp.physic_msg_timestamp,
        cp.logics_msg_timestamp,
        cp.index_msg_timestamp,
        cp.master_flushed_offset,
        cp.confirm_phy_offset,
    )
    for i, (name, value) in enumerate(zip(names, values, strict=True)):
        if value < 0:
            out.append((i * 8, f"expected {name} >= 0, found {value}"))
        elif newest is not None and name in TIME_FIELDS and value > newest:
            out.append((i * 8, f"expected {name} at most the newest message's store time {newest}, "
                               f"found {value}"))
    tail = bytes(data[FIELDS.size : FILE_SIZE])
    if any(tail):
        first = next(i for i, b in enumerate(tail) if b)
        out.append(
            (FIELDS.size + first, f"expected zeros after byte {FIELDS.size}, found 0x{tail[first]:02x}")
        )
    return out


class CheckpointFile:
    """The checkpoint in a mapped 4096-byte file; :meth:`flush` writes the fields and msyncs.

    A missing file reads as all zeros (a new store); it is created when opened writable.
    """

    def __init__(self, path: str, *, writable: bool = False) -> None:
        self.path = path
        self.writable = writable
        self._file: files.MappedFile | None = None
        #: what opening it writable repaired, one line each (see :meth:`_repair`)
        self.repairs: list[str] = []
        if writable:
            if not files.exists(path):
                # whole or absent: a writer killed while it makes a store leaves no short checkpoint
                # (which readers take for an empty store, and verify reports)
                files.write_atomic(path, bytes(FILE_SIZE))
            size = files.file_size(path)
            self._file = files.MappedFile(path, None if size > FILE_SIZE else FILE_SIZE, create=True,
                                          writable=True, reserve=True)
            self.value = Checkpoint.unpack(self._file.view(0, FIELDS.size), path=path)
            self._repair(size)
        elif files.exists(path):
            self.value = Checkpoint.unpack(files.read_bytes(path), path=path)
        else:
            self.value = Checkpoint()

    def _repair(self, size: int) -> None:
        """Make the file what :func:`check` expects, saying what changed in :attr:`repairs`: 4096 bytes
        (4.9.7 ``StoreCheckpoint`` maps one page and writes only its fields: a longer file's bytes past
        it are kept under ``.segstore/cut/`` first), zeros after the fields, no negative field (0, as
        a new store's: a negative time would start the next abnormal recovery at the first file)."""
        assert self._file is not None
        if size > FILE_SIZE:
            extra = self._file.view(FILE_SIZE, size)
            if any(extra):
                # here only: detecting a store's format loads this module, and .consumequeue its indexes
                from .consumequeue import CUT_DIR, SEGSTORE_DIR

                kept = files.save_aside(self.path, FILE_SIZE, extra, into=os.path.join(
                    os.path.dirname(self.path), SEGSTORE_DIR, CUT_DIR))
                self.repairs.append(f"{self.path}:{FILE_SIZE}: cut {size - FILE_SIZE} bytes past the "
                                    f"checkpoint's {FILE_SIZE}, saved in {kept}")
            else:
                self.repairs.append(f"{self.path}:{FILE_SIZE}: cut {size - FILE_SIZE} zero bytes past the "
                                    f"checkpoint's {FILE_SIZE}")
            del extra
            self._file.resize(FILE_SIZE)
        elif size < FILE_SIZE:
            self.repairs.append(f"{self.path}: extended from {size} to {FILE_SIZE} bytes with zeros")
        tail = self._file.view(FIELDS.size, FILE_SIZE)
        nonzero = sum(1 for b in tail if b)
        del tail
        if nonzero:
            self._file.write(FIELDS.size, bytes(FILE_SIZE - FIELDS.size))
            self.repairs.append(f"{self.path}:{FIELDS.size}: zeroed {nonzero} non-zero bytes after the "
                                "fields")
        for name, attr in zip(FIELD_NAMES, FIELD_ATTRS, strict=True):
            if getattr(self.value, attr) < 0:
                self.repairs.append(f"{self.path}: {name} {getattr(self.value, attr)} set to 0")
                setattr(self.value, attr, 0)
        if self.repairs:
            self.flush()

    def flush(self, value: Checkpoint | None = None) -> None:
        """Write the fields (:attr:`value`'s, or ``value``'s) and make them durable
        (``StoreCheckpoint.flush``)."""
        if self._file is None:
            return
        self._file.write(0, (value or self.value).pack()[: FIELDS.size])
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
