"""The consume-queue extension: ``consumequeue_ext/TOPIC/QUEUEID/`` (``enableConsumeQueueExt``).

RocketMQ 4.x (``store/.../ConsumeQueueExt.java``, rocketmq-all-4.9.7) keeps, for a broker with
``enableConsumeQueueExt=true`` (SQL92/bitmap filtering), one variable-size unit per message
beside the consume queue.  The consume-queue entry's tags code then holds the unit's *address*
instead of the tags hash::

    address = real offset + Long.MIN_VALUE      (ConsumeQueueExt.decorate)
    an address is any tags code <= Integer.MIN_VALUE - 1   (isExtAddr, MAX_ADDR)

A unit (``CqExtUnit.write``; big-endian)::

    offset  bytes  field
    0       2      size          the whole unit, 20 + bitMapSize
    2       8      tagsCode      what the consume queue would otherwise hold
    10      8      msgStoreTime  the message's store timestamp
    18      2      bitMapSize
    20      n      filterBitMap  (``bitMapLengthConsumeQueueExt`` bits, 64 by default: 8 bytes)

Files are ``mappedFileSizeConsumeQueueExt`` bytes (48 MiB by default), named by their first
byte's real offset (20 digits).  A unit is written only if it fits with 4 bytes to spare
(``END_BLANK_DATA_LENGTH``); otherwise ``short -1`` marks the end of the file and the unit
goes to the next one (``fullFillToEnd``).  Zeros after the last unit are unwritten space.

Pure decoding here; :class:`ConsumeQueueExt` opens the files read-only through
``segstore.files``.  Thread-safe for readers.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from segstore import files
from segstore.errors import CorruptIndexError
from segstore.files import MappedFile

from .consumequeue import parse_file_name

EXT_DIR = "consumequeue_ext"
#: ``[short size][long tagsCode][long msgStoreTime][short bitMapSize]``
UNIT_HEADER = struct.Struct(">hqqh")
assert UNIT_HEADER.size == 20        # CqExtUnit.MIN_EXT_UNIT_SIZE
END_MARK = -1                        # fullFillToEnd: putShort((short) -1)
END_BLANK_DATA_LENGTH = 4
#: ``ConsumeQueueExt.MAX_ADDR``: the largest tags code that is an address.
MAX_ADDR = -(1 << 31) - 1
_LONG_MIN = -(1 << 63)


def is_ext_address(tags_code: int) -> bool:
    """Whether a consume-queue tags code is an extension address (``isExtAddr``)."""
    return tags_code <= MAX_ADDR


def real_offset(address: int) -> int:
    """The byte offset in the extension files an address stands for (``unDecorate``)."""
    return address - _LONG_MIN


def address_of(offset: int) -> int:
    """The address a unit at real ``offset`` gets (``decorate``)."""
    return offset + _LONG_MIN


class ExtUnit(NamedTuple):
    """One extension unit."""

    size: int
    tags_code: int
    store_timestamp: int
    bitmap: bytes


def decode_unit(buf: bytes | memoryview, pos: int, *, path: str | None = None,
                base_pos: int = 0) -> ExtUnit | None:
    """The unit at ``buf[pos:]``; None at the end of the file's units (``-1``, zeros or too few bytes).

    :raises CorruptIndexError: a size that does not match its bitmap or runs past the file.
    """
    if len(buf) - pos < 2:
        return None
    (size,) = struct.unpack_from(">h", buf, pos)
    if size < 1:
        return None
    if size < UNIT_HEADER.size or pos + size > len(buf):
        raise CorruptIndexError(f"expected an extension unit of {UNIT_HEADER.size} to {len(buf) - pos} "
                                f"bytes, found size {size}", path, base_pos + pos)
    _, tags_code, store_ts, bitmap_size = UNIT_HEADER.unpack_from(buf, pos)
    if bitmap_size < 0 or UNIT_HEADER.size + bitmap_size != size:
        raise CorruptIndexError(f"expected an extension unit of {UNIT_HEADER.size} + bitMapSize bytes, "
                                f"found size {size} with bitMapSize {bitmap_size}", path, base_pos + pos)
    start = pos + UNIT_HEADER.size
    return ExtUnit(size, tags_code, store_ts, bytes(buf[start:start + bitmap_size]))


class ConsumeQueueExt:
    """The extension files of one queue, read-only.

    :param directory: ``consumequeue_ext/TOPIC/QUEUEID``.
    :raises CorruptIndexError: files of different sizes.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.files: dict[int, MappedFile] = {}
        self.file_size = 0
        for name in files.list_dir(directory):
            path = os.path.join(directory, name)
            mapped = MappedFile(path)
            if self.file_size and mapped.size != self.file_size:
                size = mapped.size
                mapped.close()
                self.close()
                raise CorruptIndexError(f"expected extension files of {self.file_size} bytes "
                                        f"(mappedFileSizeConsumeQueueExt), found {size}", path)
            self.file_size = mapped.size
            self.files[parse_file_name(directory, name)] = mapped

    def get(self, address: int) -> ExtUnit | None:
        """The unit at an address; None when no file holds it or nothing is written there.

        :raises CorruptIndexError: a malformed unit there.
        """
        if not is_ext_address(address) or not self.file_size:
            return None
        offset = real_offset(address)
        base = offset - offset % self.file_size
        mapped = self.files.get(base)
        if mapped is None:
            return None
        return decode_unit(mapped.view(), offset - base, path=mapped.path)

    def units(self) -> list[tuple[int, ExtUnit]]:
        """``(address, unit)`` for every unit, in order.

        :raises CorruptIndexError: a malformed unit.
        """
        out = []
        for base, mapped in sorted(self.files.items()):
            view = mapped.view()
            pos = 0
            while (unit := decode_unit(view, pos, path=mapped.path)) is not None:
                out.append((address_of(base + pos), unit))
                pos += unit.size
        return out

    def close(self) -> None:
        for mapped in self.files.values():
            mapped.close()
        self.files.clear()
