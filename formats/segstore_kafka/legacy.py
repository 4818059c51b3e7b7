"""Kafka message formats v0 and v1 (legacy message sets): read only.

Topics written before Kafka 0.11 (or by old clients on an old message format
version) hold these.  Each log entry is one message (``LegacyRecord.java``)::

    offset  size  field
    0       8     offset (absolute; for a compressed v1 wrapper, the last inner offset)
    8       4     message size: bytes after this field
    12      4     crc: CRC-32 (zlib) of bytes 16 .. end of the message
    16      1     magic: 0 or 1
    17      1     attributes: bits 0-2 codec (none, gzip, snappy, lz4), bit 3 LogAppendTime (v1)
    18      8     timestamp (v1 only)
    ..      4     key length (-1, or any negative, = null), key
    ..      4     value length (-1, or any negative, = null), value
                  (bytes after the value, inside the message size, are not read: Kafka does not)

A compressed message is a *wrapper*: its value is a compressed message set of
inner messages.  Under a v0 wrapper inner offsets are absolute; under a v1 wrapper
relative, the absolute offset being ``wrapper offset - last inner offset + inner
offset`` (a wrapper offset of 0 leaves them as they are; one below the last inner
offset is invalid: ``AbstractLegacyRecordBatch.DeepRecordsIterator``).  Under
LogAppendTime every inner v1 message takes the wrapper's timestamp; v0 messages
have no timestamps (-1), whatever their wrapper.  Wrappers do not nest, and hold
at least one message; decompressed bytes ending inside an inner entry end the set
there, as Kafka reads it (``DataLogInputStream``).

Pure (buffers in, tuples out) and thread-safe.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from segstore.errors import CorruptDataError, TruncatedDataError

from .compression import CODEC_MASK, COMPRESSION_NAMES, LZ4, NONE, ZSTD, decompress

MESSAGE_PREFIX = struct.Struct(
    ">q"  # offset => Int64
    "i"   # message size => Int32: bytes after this field
    "I"   # crc => Uint32: CRC-32 of magic .. end
    "b"   # magic => Int8 (0 or 1)
    "b"   # attributes => Int8
)
assert MESSAGE_PREFIX.size == 18
LOG_OVERHEAD = struct.calcsize(">qi")     # 12: offset and size, not counted by the size
CRC_COVERED_FROM = struct.calcsize(">qiI")  # 16: the CRC covers magic .. end
TIMESTAMP_V1 = struct.Struct(">q")          # after the attributes, v1 only
assert TIMESTAMP_V1.size == 8
BYTES_LENGTH = struct.Struct(">i")          # key and value length prefixes, -1 = null
assert BYTES_LENGTH.size == 4

# Kafka's LegacyRecord.RECORD_OVERHEAD_V0 / _V1: the smallest message sizes.
MIN_MESSAGE_SIZE = struct.calcsize(">Ibbii")      # 14: crc, magic, attributes, key and value lengths
MIN_MESSAGE_SIZE_V1 = struct.calcsize(">Ibbqii")  # 22: plus the timestamp
TIMESTAMP_TYPE_FLAG = 0x08
NO_TIMESTAMP = -1
NULL_LENGTH = -1
INT64_MAX = (1 << 63) - 1


class LegacyMessage(NamedTuple):
    """One legacy message as stored (``offset`` absolute once resolved by :func:`messages`)."""

    offset: int
    size: int             # bytes of the whole log entry, LOG_OVERHEAD included
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    valid: bool = True    # the stored CRC matches the bytes (False only where read without the check)


def compute_crc(data) -> int:
    """CRC-32 of a legacy log entry's bytes from the magic to the end."""
    return zlib.crc32(memoryview(data)[CRC_COVERED_FROM:])


def _read_bytes(data: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + BYTES_LENGTH.size > end:
        raise IndexError(pos)
    (length,) = BYTES_LENGTH.unpack_from(data, pos)
    pos += BYTES_LENGTH.size
    if length < 0:  # any negative length is null, as Utils.sizeDelimited reads it
        return None, pos
    if pos + length > end:
        raise IndexError(pos)
    return bytes(data[pos:pos + length]), pos + length


class LegacyHead(NamedTuple):
    """What Kafka checks a legacy log entry by before its records are read: its size and CRC."""

    offset: int
    size: int             # bytes of the whole log entry, LOG_OVERHEAD included
    crc: int
    magic: int
    attributes: int
    timestamp: int        # -1 in v0
    valid: bool           # the stored CRC matches the bytes


def read_head(data, *, path: str = "<memory>", base_pos: int = 0, pos: int = 0,
              check_crc: bool = True, any_magic: bool = False) -> LegacyHead:
    """The entry at ``data[pos]`` as Kafka's recovery takes it: ``FileLogInputStream.nextBatch`` (a
    size of at least 14, ``RECORD_OVERHEAD_V0``, whatever the magic) and ``LegacyRecord.ensureValid``
    (the CRC); its key and value are not read.

    ``any_magic``: a negative magic too, framed as nextBatch frames it (``LegacyFileChannelRecordBatch``,
    read as v1 is) when its size and CRC hold (what the recovery keeps); its messages are not read.

    :raises TruncatedDataError: the bytes end inside the entry.
    :raises CorruptDataError: bad magic, size or CRC.
    """
    view = memoryview(data)
    at = base_pos + pos
    if len(view) - pos < MESSAGE_PREFIX.size:
        raise TruncatedDataError(f"expected a {MESSAGE_PREFIX.size}-byte message header, "
                                 f"found {len(view) - pos} bytes", path, at)
    offset, size, crc, magic, attributes = MESSAGE_PREFIX.unpack_from(view, pos)
    framed = (any_magic and magic < 0 and MIN_MESSAGE_SIZE <= size <= len(view) - pos - LOG_OVERHEAD
              and zlib.crc32(view[pos + CRC_COVERED_FROM:pos + LOG_OVERHEAD + size]) == crc)
    if magic not in (0, 1) and not framed:
        raise CorruptDataError(f"expected message magic 0 or 1, found {magic}", path, at + CRC_COVERED_FROM)
    if size < MIN_MESSAGE_SIZE:
        raise CorruptDataError(f"expected a v{magic} message size of at least {MIN_MESSAGE_SIZE}, "
                               f"found {size}", path, at)
    end = pos + LOG_OVERHEAD + size
    if end > len(view):
        raise TruncatedDataError(f"expected a {LOG_OVERHEAD + size}-byte message, "
                                 f"found {len(view) - pos} bytes", path, at)
    computed = zlib.crc32(view[pos + CRC_COVERED_FROM:end])
    if check_crc and computed != crc:
        raise CorruptDataError(f"expected CRC-32 {crc:#010x} stored in the message, "
                               f"found {computed:#010x}", path, at + LOG_OVERHEAD)
    timestamp = NO_TIMESTAMP
    if magic != 0:  # a size of 14 holds the timestamp (bytes 18..26 of the entry); LegacyRecord.timestamp
        (timestamp,) = TIMESTAMP_V1.unpack_from(view, pos + MESSAGE_PREFIX.size)
    return LegacyHead(offset, LOG_OVERHEAD + size, crc, magic, attributes, timestamp, computed == crc)


def read_entry(data, *, path: str = "<memory>", base_pos: int = 0, pos: int = 0,
               check_crc: bool = True) -> LegacyMessage:
    """Decode the legacy message whose log entry starts at ``data[pos]`` (offset as stored).

    :raises TruncatedDataError: the bytes end inside the entry.
    :raises CorruptDataError: bad magic, size, lengths or CRC.
    """
    head = read_head(data, path=path, base_pos=base_pos, pos=pos, check_crc=check_crc)
    view = memoryview(data)
    at = base_pos + pos
    size = head.size - LOG_OVERHEAD
    if head.magic == 1 and size < MIN_MESSAGE_SIZE_V1:
        raise CorruptDataError(f"expected a v1 message size of at least {MIN_MESSAGE_SIZE_V1}, found {size}",
                               path, at)
    end = pos + head.size
    cursor = pos + MESSAGE_PREFIX.size + (TIMESTAMP_V1.size if head.magic == 1 else 0)
    try:
        key, cursor = _read_bytes(view, cursor, end)
        value, cursor = _read_bytes(view, cursor, end)
    except (IndexError, ValueError) as err:
        raise CorruptDataError(f"expected key and value within the {size}-byte message, found {err}",
                               path, at) from err
    # bytes after the value are not read (LegacyRecord.value() is a slice of its own length)
    return LegacyMessage(head.offset, head.size, head.crc, head.magic, head.attributes, head.timestamp, key,
                         value, head.valid)


def messages(data, *, path: str = "<memory>", base_pos: int = 0,
             check_crc: bool = True) -> list[LegacyMessage]:
    """The messages of one log entry: itself, or the inner messages of a compressed wrapper.

    Offsets are absolute; timestamps follow the wrapper's timestamp type.  Errors
    in the inner set name the wrapper's position and the inner byte position.
    """
    wrapper = read_entry(data, path=path, base_pos=base_pos, check_crc=check_crc)
    codec = wrapper.attributes & CODEC_MASK
    if codec == NONE:
        return [wrapper]
    if codec >= ZSTD:
        found = COMPRESSION_NAMES[codec] if codec < len(COMPRESSION_NAMES) else f"codec id {codec}"
        raise CorruptDataError(f"expected a v{wrapper.magic} codec none, gzip, snappy or lz4, found {found}",
                               path, base_pos)
    if wrapper.value is None:
        raise CorruptDataError("expected a compressed message set in the wrapper value, found null",
                               path, base_pos)
    inner_set = decompress(codec, wrapper.value, path=path, pos=base_pos, legacy_lz4=codec == LZ4 and
                           wrapper.magic == 0)
    inner = []
    pos = 0
    while len(inner_set) - pos >= LOG_OVERHEAD:
        # DataLogInputStream.nextBatch: a size below any message's is corrupt; bytes ending inside the
        # entry (its offset and size, or the message they give) end the inner set, read no further
        (size,) = BYTES_LENGTH.unpack_from(inner_set, pos + LOG_OVERHEAD - BYTES_LENGTH.size)
        if size < MIN_MESSAGE_SIZE:
            raise CorruptDataError(f"expected an inner message size of at least {MIN_MESSAGE_SIZE}, found "
                                   f"{size} at byte {pos} of the decompressed set", path, base_pos)
        if len(inner_set) - pos < LOG_OVERHEAD + size:
            break
        try:
            message = read_entry(inner_set, path=path, base_pos=base_pos, pos=pos, check_crc=check_crc)
        except CorruptDataError as err:
            raise CorruptDataError(f"expected a valid inner message at byte {pos} of the decompressed set, "
                                   f"found: {err.message}", path, base_pos) from err
        if message.attributes & CODEC_MASK != NONE:
            raise CorruptDataError(f"expected uncompressed inner messages, found a nested wrapper "
                                   f"(codec id {message.attributes & CODEC_MASK}) at byte {pos}",
                                   path, base_pos)
        inner.append(message)
        pos += message.size
    if not inner:  # DeepRecordsIterator: "Found invalid compressed record set with no inner records"
        raise CorruptDataError(f"expected a compressed message set of at least one inner message, found no "
                               f"inner message in {len(inner_set)} decompressed bytes", path, base_pos)
    shift = 0
    # AbstractLegacyRecordBatch.DeepRecordsIterator: a v1 wrapper of offset 0 (some librdkafka
    # versions) leaves the relative offsets as they are; one below the last inner offset is invalid.
    if wrapper.magic > 0 and wrapper.offset != 0:
        if wrapper.offset < inner[-1].offset:
            raise CorruptDataError(f"expected a v1 wrapper offset of at least its last inner offset "
                                   f"{inner[-1].offset} (or 0), found wrapper offset {wrapper.offset}",
                                   path, base_pos)
        shift = wrapper.offset - inner[-1].offset
        # Java's long sum wraps where an inner offset above the last one is shifted past Long.MAX_VALUE
        # (offsets out of order inside the set); no int64 column holds it: an error, named, not a crash
        top = max(m.offset for m in inner) + shift
        if top > INT64_MAX:
            raise CorruptDataError(f"expected inner offsets within int64 once shifted by the v1 wrapper "
                                   f"offset {wrapper.offset} from its last inner offset {inner[-1].offset}, "
                                   f"found {top}", path, base_pos)
    log_append = wrapper.magic > 0 and wrapper.attributes & TIMESTAMP_TYPE_FLAG
    # DeepRecordsIterator gives the wrapper's time to inner messages of magic 1 only (v0 has none)
    return [m._replace(offset=m.offset + shift,
                       timestamp=wrapper.timestamp if log_append and m.magic > 0 else m.timestamp)
            for m in inner]
