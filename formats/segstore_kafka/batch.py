"""Kafka RecordBatch (message format v2): decode, validate and encode, byte-compatible with Kafka.

A Kafka ``.log`` file is a sequence of entries, each starting with an int64
offset and an int32 length of the bytes that follow.  Magic 2 entries are record
batches (``DefaultRecordBatch.java``)::

    offset  size  field
    0       8     baseOffset
    8       4     length: bytes after this field (batch size - 12)
    12      4     partitionLeaderEpoch
    16      1     magic = 2
    17      4     crc: CRC-32C (Castagnoli, unsigned) of bytes 21 .. end of batch
    21      2     attributes: bits 0-2 codec, 3 LogAppendTime, 4 transactional,
                  5 control, 6 baseTimestamp holds the delete horizon
    23      4     lastOffsetDelta
    27      8     baseTimestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     record count (never compressed)
    61      ...   records, or one compressed stream of them

Each record (``DefaultRecord.java``) is: varint length of the rest, int8
attributes (unused, 0), varlong timestampDelta, varint offsetDelta, varint key
length (-1 = null) and key, varint value length (-1 = null) and value, varint
header count, then per header varint key length + UTF-8 key and varint value
length (-1 = null) + value.  Control batches (transaction markers) hold one
record whose key is int16 version + int16 type (0 ABORT, 1 COMMIT) and whose
value is int16 version + int32 coordinator epoch.

Magic 0 and 1 entries (legacy message sets) are read by :mod:`.legacy` and
surface here as :class:`RecordBatch` objects with ``magic`` 0 or 1.  An entry of
a magic above 2 is framed as v2, as Kafka's ``FileLogInputStream.nextBatch`` frames
it (and its recovery keeps it when its length and CRC hold); its records raise.

The hot record loops run in the optional C extension ``segstore_kafka._speedups``
when it is built; the pure-Python loops below give identical results and errors.
Everything here is pure (buffers in, objects out, no file access) and
thread-safe; a :class:`RecordBatch` holds a view of the buffer it came from and
must not outlive the mapping of that buffer unless built from ``bytes``.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from segstore import speedups
from segstore.errors import CorruptDataError, InvalidMessageError, SegstoreError, TruncatedDataError
from segstore.javatext import JavaText, java_text

from .compression import (
    CODEC_MASK,
    COMPRESSION_NAMES,
    NONE,
    codec_id,
    compress,
    decompress,
    stored_codec_name,
)
from .varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

# The C extension is optional; the pure-Python loops below are the reference.
_speedups = speedups.load("segstore_kafka._speedups")

__all__ = [
    "COMPRESSION_NAMES",
    "HEADER",
    "Record",
    "RecordBatch",
    "encode_batch",
    "encode_control_batch",
    "iter_batches",
    "parse_control_record",
    "read_batch_header",
    "valid_prefix",
    "valid_v2_end",
]

# ---------------------------------------------------------------------------------
# Byte layouts

HEADER = struct.Struct(
    ">q"  # baseOffset => Int64
    "i"   # length => Int32: bytes after this field
    "i"   # partitionLeaderEpoch => Int32
    "b"   # magic => Int8 (2)
    "I"   # crc => Uint32: CRC-32C of attributes .. end of batch
    "h"   # attributes => Int16
    "i"   # lastOffsetDelta => Int32
    "q"   # baseTimestamp => Int64
    "q"   # maxTimestamp => Int64
    "q"   # producerId => Int64
    "h"   # producerEpoch => Int16
    "i"   # baseSequence => Int32
    "i"   # recordCount => Int32
)
assert HEADER.size == 61
RECORD_BATCH_OVERHEAD = HEADER.size
ENTRY_PREFIX = struct.Struct(">qi")          # every log entry: offset, length of what follows
assert ENTRY_PREFIX.size == 12
LOG_OVERHEAD = ENTRY_PREFIX.size
MAGIC_OFFSET = struct.calcsize(">qii")       # 16, the same in every message format
CRC_OFFSET = struct.calcsize(">qiib")        # 17
ATTRIBUTES_OFFSET = struct.calcsize(">qiibI")  # 21: the CRC covers from here to the end
HEADER_UP_TO_MAGIC = MAGIC_OFFSET + 1        # bytes needed to know which format follows
# The shortest v0 message after the entry prefix: crc, magic, attributes, key and value lengths
# (legacy.MIN_MESSAGE_SIZE; the legacy module loads with the first v0/v1 entry read, not here).
LEGACY_MIN_MESSAGE_SIZE = struct.calcsize(">Ibbii")   # 14
MAGIC_FIELD = struct.Struct(">b")
assert MAGIC_FIELD.size == 1
CRC_FIELD = struct.Struct(">I")
assert CRC_FIELD.size == 4

CONTROL_KEY = struct.Struct(
    ">h"  # version => Int16 (0)
    "h"   # type => Int16: 0 ABORT, 1 COMMIT, ...
)
assert CONTROL_KEY.size == 4
END_TXN_MARKER = struct.Struct(
    ">h"  # version => Int16 (0)
    "i"   # coordinatorEpoch => Int32
)
assert END_TXN_MARKER.size == 6

MAGIC_V2 = 2
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
CONTROL_TYPE_IDS = {name: type_id for type_id, name in CONTROL_TYPES.items()}
UNKNOWN_CONTROL_TYPE = "UNKNOWN"
NULL_LENGTH = -1
_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past int32 max to 0, as Kafka's producer sequences do."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


# ---------------------------------------------------------------------------------
# Records


@dataclass(slots=True)
class Record:
    """One decoded record: absolute offset and timestamp, key, value, headers.

    ``size_in_bytes`` is the record's encoded size (v2: including its length
    varint; legacy: the whole log entry of the message).  ``sequence`` is the
    producer sequence (the batch's base sequence plus the offset delta, or -1).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0
    size_in_bytes: int = 0
    sequence: int = NO_SEQUENCE


def parse_control_record(key: bytes | None, value: bytes | None) -> tuple[str, int | None]:
    """``(type name, coordinator epoch)`` of a control record; the epoch only for ABORT/COMMIT.

    :raises ValueError: the key or value is too short or has a negative version (as Kafka rejects).
    """
    if key is None or len(key) < CONTROL_KEY.size:
        raise ValueError(f"a control record key of {CONTROL_KEY.size} bytes, found {key!r}")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ValueError(f"a control record key version >= 0, found {version}")
    name = CONTROL_TYPES.get(type_id, UNKNOWN_CONTROL_TYPE)
    if name not in ("ABORT", "COMMIT"):
        return name, None
    if value is None or len(value) < END_TXN_MARKER.size:
        raise ValueError(f"an end-transaction marker value of {END_TXN_MARKER.size} bytes, found {value!r}")
    version, coordinator_epoch = END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise ValueError(f"an end-transaction marker version >= 0, found {version}")
    return name, coordinator_epoch


class _RecordProblem(Exception):
    """A malformed field inside one record body (private to the pure-Python decoder)."""


def _read_blob(body, pos: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(body, pos)
    if length < 0:  # any negative length is null, as DefaultRecord reads it
        return None, pos
    if pos + length > len(body):
        raise IndexError(pos)
    return bytes(body[pos:pos + length]), pos + length


def _decode_body(body) -> tuple:
    """``(attributes, timestamp delta, offset delta, key, value, headers)`` of one record body."""
    attributes = body[0]
    ts_delta, pos = decode_varlong(body, 1)
    offset_delta, pos = decode_varint(body, pos)
    key, pos = _read_blob(body, pos)
    value, pos = _read_blob(body, pos)
    header_count, pos = decode_varint(body, pos)
    if header_count < 0:
        raise _RecordProblem(f"expected a header count >= 0, found {header_count}")
    headers = []
    for _ in range(header_count):
        key_length, pos = decode_varint(body, pos)
        if key_length < 0:
            raise _RecordProblem(f"expected a header key length >= 0, found {key_length}")
        if pos + key_length > len(body):
            raise IndexError(pos)
        # RecordHeader.key(): Utils.utf8, new String(bytes, UTF_8), never an error (a U+FFFD for each
        # malformed sequence): what kafka-dump-log prints, every consumer reads and the log cleaner
        # writes again when it rebuilds a batch (DefaultRecord.writeTo encodes the key's text)
        # (a JavaText keeping the bytes where they are not UTF-8: dump --json's keyBase64)
        header_key = java_text(body[pos:pos + key_length])
        header_value, pos = _read_blob(body, pos + key_length)
        headers.append((header_key, header_value))
    if pos != len(body):
        raise _RecordProblem(f"expected fields filling its {len(body)} bytes, "
                             f"found {len(body) - pos} bytes after them")
    return attributes, ts_delta, offset_delta, key, value, headers


def _decode_records_py(region, count: int, base_offset: int, base_timestamp: int,
                       log_append_time: int | None, base_sequence: int) -> list[Record]:
    """Pure-Python reference decoder of ``count`` records filling ``region`` exactly.

    Raises ``ValueError(message, position in region)`` on malformed input, the
    same messages and positions as the C decoder.
    """
    return list(_iter_records_py(region, count, base_offset, base_timestamp, log_append_time, base_sequence))


def _iter_records_py(region, count: int, base_offset: int, base_timestamp: int,
                     log_append_time: int | None, base_sequence: int) -> Iterator[Record]:
    """:func:`_decode_records_py` one record at a time: a reader wanting the first few records of a
    batch decodes only those (the check that the records fill ``region`` comes after the last)."""
    view = memoryview(region)
    end = len(view)
    pos = 0
    for index in range(count):
        start = pos
        where = f"record {index} of {count}"
        try:
            length, pos = decode_varint(view, pos)
        except IndexError as err:
            raise ValueError(f"expected {count} records within {end} bytes, found {where} runs past them",
                             start) from err
        except ValueError as err:
            raise ValueError(f"{where}: expected well-formed varints, found one too long or out of range",
                             start) from err
        if length < 0:
            raise ValueError(f"{where}: expected a length >= 0, found {length}", start)
        if length > end - pos:
            raise ValueError(f"expected {count} records within {end} bytes, found {where} runs past them",
                             start)
        try:
            attributes, ts_delta, offset_delta, key, value, headers = _decode_body(view[pos:pos + length])
        except IndexError as err:
            raise ValueError(f"{where}: expected fields within its {length} bytes, found one running past "
                             "them", start) from err
        except _RecordProblem as err:
            raise ValueError(f"{where}: {err}", start) from err
        except ValueError as err:
            raise ValueError(f"{where}: expected well-formed varints, found one too long or out of range",
                             start) from err
        pos += length
        offset = base_offset + offset_delta
        timestamp = log_append_time if log_append_time is not None else base_timestamp + ts_delta
        if not (INT64_MIN <= offset <= INT64_MAX and INT64_MIN <= timestamp <= INT64_MAX):
            raise ValueError(f"{where}: expected an offset and timestamp within int64, found them past it",
                             start)
        sequence = NO_SEQUENCE
        if base_sequence != NO_SEQUENCE:
            sequence = increment_sequence(base_sequence, offset_delta)
        yield Record(offset, timestamp, key, value, headers, attributes, pos - start, sequence)
    if pos != end:
        raise ValueError(f"expected {count} records filling {end} bytes, found {end - pos} bytes after them",
                         pos)


def _unencodable(err: Exception) -> InvalidMessageError:
    """The error of records the encoder refused with ``err``: its own words where they say what was
    expected (a field's check, in Python or C), else wrapped."""
    if isinstance(err, InvalidMessageError):
        return err
    if str(err).startswith("expected "):
        return InvalidMessageError(str(err))
    return InvalidMessageError(f"expected records that Kafka can encode, found: {err}")


def _as_bytes(obj, what: str) -> bytes | None:
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj.encode("utf-8")
    try:
        return memoryview(obj).tobytes()
    except TypeError as err:
        # a TypeError, as the C encoder raises it (encode_batch words it as an InvalidMessageError)
        raise TypeError(f"expected a {what} as bytes, str or None, found {type(obj).__name__}") from err


def _record_fields(record) -> tuple:
    """``(key, value, timestamp, headers)`` of a tuple or an object with those attributes."""
    if isinstance(record, tuple | list):
        if len(record) == 3:
            return record[0], record[1], record[2], ()
        if len(record) == 4:
            return record[0], record[1], record[2], record[3] or ()
        raise ValueError(f"a record tuple (key, value, timestamp[, headers]), found {len(record)} items")
    return record.key, record.value, record.timestamp, record.headers or ()


def _encode_records_py(records: Sequence, offset_deltas: Sequence[int] | None,
                       base_timestamp: int | None = None,
                       stored_keys: bool = False) -> tuple[bytes, int, int]:
    """Pure-Python reference encoder: ``(records region, base timestamp, max timestamp)``.

    The base timestamp is the first record's unless given (a cleaned batch's delete horizon).
    ``stored_keys``: a header key that is a :class:`segstore.javatext.JavaText` is written as the bytes
    it keeps (a dump line written back as stored), not as its text's UTF-8 (what Kafka's encoder,
    ``DefaultRecord.writeTo``, writes of ``header.key()``).
    """
    parts = []
    max_timestamp = NO_TIMESTAMP
    for index, record in enumerate(records):
        key, value, timestamp, headers = _record_fields(record)
        timestamp = NO_TIMESTAMP if timestamp is None else operator.index(timestamp)
        if not INT64_MIN <= timestamp <= INT64_MAX:
            raise OverflowError(f"a timestamp within int64, found {timestamp}")
        if base_timestamp is None:
            base_timestamp = timestamp
        max_timestamp = max(max_timestamp, timestamp)
        offset_delta = index if offset_deltas is None else offset_deltas[index]
        body = [b"\x00", encode_varlong(timestamp - base_timestamp), encode_varint(offset_delta)]
        for blob in (_as_bytes(key, "key"), _as_bytes(value, "value")):
            if blob is None:
                body.append(encode_varint(NULL_LENGTH))
            else:
                body.append(encode_varint(len(blob)))
                body.append(blob)
        headers = list(headers)
        body.append(encode_varint(len(headers)))
        for header_key, header_value in headers:
            if not isinstance(header_key, str):
                raise TypeError(f"a str header key, found {type(header_key).__name__}")
            raw = getattr(header_key, "raw", None) if stored_keys else None
            encoded_key = header_key.encode("utf-8") if raw is None else raw
            body.append(encode_varint(len(encoded_key)))
            body.append(encoded_key)
            blob = _as_bytes(header_value, "header value")
            if blob is None:
                body.append(encode_varint(NULL_LENGTH))
            else:
                body.append(encode_varint(len(blob)))
                body.append(blob)
        joined = b"".join(body)
        parts.append(encode_varint(len(joined)))
        parts.append(joined)
    if base_timestamp is None:
        base_timestamp = NO_TIMESTAMP
    return b"".join(parts), base_timestamp, max_timestamp


if _speedups is not None:
    _speedups.init(Record)
    _decode_records = _speedups.decode_records
    _encode_records = _speedups.encode_records
else:
    _decode_records = _decode_records_py
    _encode_records = _encode_records_py


# ---------------------------------------------------------------------------------
# Batches


@dataclass(slots=True)
class RecordBatch:
    """A decoded batch header (magic 2) or legacy entry (magic 0/1), records decoded on demand.

    ``position`` is the byte position of the batch in its file and ``size`` its
    whole size in bytes (``length + 12``).  Offsets are absolute.
    """

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int = 0
    data: bytes | memoryview = field(default=b"", repr=False, compare=False)
    path: str = field(default="<memory>", repr=False, compare=False)
    legacy_messages: list | None = field(default=None, repr=False, compare=False)
    #: why a legacy wrapper's inner set does not read (raised by :meth:`records`, not by the walk)
    legacy_error: CorruptDataError | None = field(default=None, repr=False, compare=False)

    @property
    def size(self) -> int:
        """Bytes of the whole batch in the log."""
        return self.length + LOG_OVERHEAD

    @property
    def compression(self) -> str:
        """The codec's name; :raises CorruptDataError: an id of 5 to 7 (named as :meth:`records` names it)."""
        stream_pos = self.position + (RECORD_BATCH_OVERHEAD if self.magic >= MAGIC_V2 else 0)
        return stored_codec_name(self.attributes & CODEC_MASK, path=self.path, pos=stream_pos)

    @property
    def timestamp_type(self) -> str:
        if self.magic == 0:
            return "NoTimestampType"
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_FLAG else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= MAGIC_V2 and bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return self.magic >= MAGIC_V2 and bool(self.attributes & CONTROL_FLAG)

    @property
    def delete_horizon_ms(self) -> int:
        """The delete horizon a compacted batch carries in its base timestamp, else -1."""
        if self.magic >= MAGIC_V2 and self.attributes & DELETE_HORIZON_FLAG:
            return self.base_timestamp
        return NO_TIMESTAMP

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    def compute_crc(self) -> int:
        """The checksum of the batch bytes as stored (CRC-32C for v2, CRC-32 for v0/v1)."""
        if self.magic < MAGIC_V2:
            from . import legacy

            return legacy.compute_crc(self.data)
        return crc32c(self.data[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        """True if the stored CRC matches the bytes."""
        return self.compute_crc() == self.crc

    def records(self) -> list[Record]:
        """Decompress and decode every record, in order.

        With LogAppendTime every record's timestamp is the batch max timestamp, as
        Kafka reports it.  O(n) in the batch size.

        :raises CorruptDataError: the records do not decode (path and position named).
        """
        if self.magic < MAGIC_V2:
            return self._legacy_records()
        region = self._region()
        if region is None:
            return []
        try:
            return _decode_records(region, self.record_count, self.base_offset, self.base_timestamp,
                                   self._log_append_time(), self.base_sequence)
        except ValueError as err:
            raise self._undecodable(err) from err

    def iter_records(self) -> Iterator[Record]:
        """:meth:`records`, each decoded as it is taken (by the Python reference decoder, a few µs a
        record; a compressed batch is decompressed whole first): for a reader wanting only a batch's
        first records, where :meth:`records` builds all of them.  The check that the records fill
        the batch comes after the last.  Legacy (v0/v1) sets come decoded whole.

        :raises CorruptDataError: as :meth:`records`, when the record it names is reached.
        """
        if self.magic < MAGIC_V2:
            yield from self._legacy_records()
            return
        region = self._region()
        if region is None:
            return
        try:
            yield from _iter_records_py(region, self.record_count, self.base_offset, self.base_timestamp,
                                        self._log_append_time(), self.base_sequence)
        except ValueError as err:
            raise self._undecodable(err) from err

    def _region(self) -> bytes | memoryview | None:
        """The v2 batch's records region, decompressed; None where it holds no record."""
        if self.magic > MAGIC_V2:
            raise _unknown_magic(self.magic, self.path, self.position)
        if self.record_count == 0:
            return None     # DefaultRecordBatch.iterator: no record, the region (compressed or not) unread
        region: bytes | memoryview = memoryview(self.data)[RECORD_BATCH_OVERHEAD:]
        if self.attributes & CODEC_MASK != NONE:
            region = decompress(self.attributes & CODEC_MASK, region, path=self.path,
                                pos=self.position + RECORD_BATCH_OVERHEAD)
        if self.record_count < 0:
            raise CorruptDataError(f"expected a record count >= 0, found {self.record_count}",
                                   self.path, self.position)
        return region

    def _log_append_time(self) -> int | None:
        """Every record's timestamp with LogAppendTime (the batch's max timestamp), else None."""
        return self.max_timestamp if self.attributes & TIMESTAMP_TYPE_FLAG else None

    def _undecodable(self, err: ValueError) -> CorruptDataError:
        """A decoder's ``ValueError(message, position in the records region)`` as the error naming the
        file and position (within the batch where the region was compressed)."""
        message, where = err.args
        if self.attributes & CODEC_MASK != NONE:
            message = f"{message} (at byte {where} of the decompressed records)"
            where = 0
        return CorruptDataError(message, self.path, self.position + RECORD_BATCH_OVERHEAD + where)

    def _legacy_messages(self) -> list:
        if self.legacy_error is not None:
            raise CorruptDataError(self.legacy_error.message, self.legacy_error.path,
                                   self.legacy_error.pos) from self.legacy_error
        messages = self.legacy_messages
        if messages is None:
            # An uncompressed entry is its own message: iter_batches checked its CRC where asked to (as
            # for v2, reading the records checks none; a dump of a file read unchecked shows it invalid).
            from . import legacy

            messages = legacy.messages(self.data, path=self.path, base_pos=self.position, check_crc=False)
        return messages

    def _legacy_records(self) -> list[Record]:
        return [Record(m.offset, m.timestamp, m.key, m.value, [], m.attributes, m.size)
                for m in self._legacy_messages()]

    def records_with_crcs(self) -> list[tuple[Record, int | None]]:
        """:meth:`records`, each with its message's own CRC-32 (v0/v1) or None (v2, whose batch holds
        the CRC): what ``kafka-dump-log`` prints per record."""
        records = self.records()
        if self.magic >= MAGIC_V2:
            return [(record, None) for record in records]
        return list(zip(records, [m.crc for m in self._legacy_messages()], strict=True))

    def records_with_checks(self) -> list[tuple[Record, int | None, bool]]:
        """:meth:`records_with_crcs`, each also with whether its v0/v1 message's CRC matches its bytes
        (True for v2, whose batch holds the CRC): ``kafka-dump-log``'s ``isValid`` per legacy record."""
        if self.magic >= MAGIC_V2:
            return [(record, None, True) for record in self.records()]
        messages = self._legacy_messages()
        return [(record, m.crc, m.valid) for record, m in zip(self.records(), messages, strict=True)]

    def control_type(self) -> str | None:
        """``"COMMIT"``/``"ABORT"`` (or another control type name) of a control batch, else None.

        None too for a control batch of no records (``writeEmptyHeader``: a marker the cleaner emptied),
        which Kafka 3.8 passes as marking nothing (``ProducerAppendInfo.append``,
        ``CompletedFetch.containsAbortMarker``).
        """
        if not self.is_control or self.record_count == 0:
            return None
        records = self.records()
        if not records:
            raise CorruptDataError("expected a control batch with one control record, found none",
                                   self.path, self.position)
        try:
            return parse_control_record(records[0].key, records[0].value)[0]
        except ValueError as err:
            raise CorruptDataError(str(err), self.path, self.position) from err


    def end_marker_type(self) -> str | None:
        """:meth:`control_type` as the broker's producer state reads it (Kafka 3.8.0
        ``ProducerAppendInfo.append`` over ``FileLogInputStream``'s ``DefaultFileChannelRecordBatch``,
        what ``LogSegment.recover`` walks): a batch of a magic above 2 is decoded as v2 (nothing there
        checks its magic), where :meth:`records` refuses it as a consumer does."""
        if self.magic > MAGIC_V2:
            return replace(self, magic=MAGIC_V2).control_type()
        return self.control_type()


def _unknown_magic(magic: int, path: str, position: int) -> CorruptDataError:
    """A batch of a magic above 2: framed and kept as v2 (``FileLogInputStream.nextBatch``), its records
    unread (``ByteBufferLogInputStream.nextBatchSize``: no consumer reads a magic it does not know)."""
    return CorruptDataError(f"expected magic 0, 1 or 2, found {magic}", path, position + MAGIC_OFFSET)


def crc32c(data: bytes | memoryview, value: int = 0) -> int:
    """The CRC-32C (Castagnoli) of ``data``, continuing from ``value``: the C accelerator's (tested equal to
    the package's), else the ``crc32c`` package's, imported at the first checksum (it reads its own
    package metadata on import, importlib.metadata with zipfile and email: 10-20 ms that a command
    reading no batch, such as ``segstore info``, or a read whose checksums run in C, need not pay).
    Pure, thread-safe; ``O(len(data))``."""
    if _speedups is not None:
        return int(_speedups.crc32c(data, value))
    import crc32c as package

    return int(package.crc32c(data, value))


def _read_entry(view: memoryview, pos: int, *, path: str, base_pos: int, check_crc: bool) -> RecordBatch:
    """Decode the entry at ``view[pos]`` (v2 header, or a legacy message) without its records.

    The checks come in the order of Kafka's ``FileLogInputStream.nextBatch``: a
    tail too short for the header up to the magic, or shorter than its length
    says, is truncated; a length below any message's minimum is corrupt; then
    the magic and the v2 minimum length.
    """
    at = base_pos + pos
    if pos < 0:
        # struct reads a negative offset from the buffer's end: a corrupt index entry's position
        # would read another batch as if it stood there (Kafka's FileRecords.slice refuses it)
        raise CorruptDataError(f"expected a batch position of at least 0, found {pos}", path, base_pos)
    remaining = len(view) - pos
    if remaining <= HEADER_UP_TO_MAGIC:
        # nextBatch: ``position >= end - HEADER_SIZE_UP_TO_MAGIC`` ends the data (no batch is that short);
        # past the end: a position read before another process cut the file (a broker's recovery)
        found = f"{remaining}" if remaining >= 0 else f"the file ending at {base_pos + len(view)}"
        raise TruncatedDataError(f"expected a batch of more than {HEADER_UP_TO_MAGIC} bytes, "
                                 f"found {found}", path, at)
    _offset, length = ENTRY_PREFIX.unpack_from(view, pos)
    if length < LEGACY_MIN_MESSAGE_SIZE:
        raise CorruptDataError(f"expected a batch length of at least {LEGACY_MIN_MESSAGE_SIZE}, "
                               f"found {length}", path, at)
    size = LOG_OVERHEAD + length
    if remaining < size:
        raise TruncatedDataError(f"expected a {size}-byte batch, found {remaining} bytes", path, at)
    (magic,) = MAGIC_FIELD.unpack_from(view, pos + MAGIC_OFFSET)
    if magic < 0:
        try:   # framed as legacy, as nextBatch frames it, where its size and CRC-32 hold (kept by recovery)
            return _legacy_batch(view[pos:pos + size], at, path, check_crc, any_magic=True)
        except CorruptDataError:
            raise CorruptDataError(f"expected magic 0, 1 or 2, found {magic}", path,
                                   at + MAGIC_OFFSET) from None
    # A magic above 2 frames as a v2 batch, as nextBatch takes it (DefaultFileChannelRecordBatch) and
    # recovery keeps it when its length and CRC hold; its records raise (_unknown_magic).
    if magic < MAGIC_V2:
        return _legacy_batch(view[pos:pos + size], at, path, check_crc)
    if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptDataError("expected a v2 batch length of at least "
                               f"{RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}, found {length}", path, at)
    data = view[pos:pos + size]
    # Typed with its length: mypy cannot count a struct's fields, and keywords after ``*fields``
    # of unknown length would read to it as given twice.
    fields: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int] = HEADER.unpack_from(data)
    batch = RecordBatch(*fields, position=at, data=data, path=path)
    if check_crc:
        computed = crc32c(data[ATTRIBUTES_OFFSET:])
        if computed != batch.crc:
            raise CorruptDataError(f"expected CRC-32C {batch.crc:#010x} stored in the header, "
                                   f"found {computed:#010x} computed over bytes {ATTRIBUTES_OFFSET}..{size} "
                                   "of the batch",
                                   path, at + CRC_OFFSET)
    return batch


def _legacy_batch(data: memoryview, at: int, path: str, check_crc: bool,
                  any_magic: bool = False) -> RecordBatch:
    # The entry is whole by its own size and CRC: what Kafka checks a legacy batch by
    # (AbstractLegacyRecordBatch.ensureValid, what LogSegment.recover calls).  Its key and value, and a
    # wrapper's inner set (DeepRecordsIterator), are read with its records, where their errors are raised.
    from . import legacy

    entry = legacy.read_head(data, path=path, base_pos=at, check_crc=check_crc, any_magic=any_magic)
    messages = None
    error = None
    base_offset = entry.offset
    count = 1
    if entry.attributes & CODEC_MASK != NONE and entry.magic >= 0:
        try:
            messages = legacy.messages(data, path=path, base_pos=at, check_crc=check_crc)
        except CorruptDataError as err:
            error = err
        else:
            count = len(messages)
            base_offset = messages[0].offset   # a wrapper holds at least one (legacy.messages)
            if not INT64_MIN <= entry.offset - base_offset <= INT64_MAX:
                # a v0 wrapper's absolute inner offsets, which Kafka checks against nothing: a span
                # no last_offset_delta (an int64 in the columns) holds
                error = CorruptDataError(f"expected a batch spanning offsets within int64, found "
                                         f"{base_offset}..{entry.offset}", path, at)
                messages, count, base_offset = None, 1, entry.offset
    return RecordBatch(
        base_offset=base_offset, length=len(data) - LOG_OVERHEAD,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH, magic=entry.magic, crc=entry.crc,
        attributes=entry.attributes, last_offset_delta=entry.offset - base_offset,
        base_timestamp=entry.timestamp, max_timestamp=entry.timestamp, producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH, base_sequence=NO_SEQUENCE, record_count=count, position=at,
        data=data, path=path, legacy_messages=messages, legacy_error=error)


def iter_batches(buf, *, path: str = "<memory>", base_pos: int = 0, check_crc: bool = True,
                 start: int = 0) -> Iterator[RecordBatch]:
    """Yield every batch of a ``.log`` buffer from byte ``start`` to its exact end.

    ``position`` of each batch is ``base_pos`` + its index in ``buf``.  Records are
    not decoded (call :meth:`RecordBatch.records`).  O(number of batches), plus
    O(bytes) for the CRC checks (C, hardware CRC-32C).

    :raises TruncatedDataError: the buffer ends inside a batch (a torn tail).
    :raises CorruptDataError: a bad length, magic or CRC.
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) or buf.format != "B" else buf
    pos = start
    end = len(view)
    while pos < end:
        batch = _read_entry(view, pos, path=path, base_pos=base_pos, check_crc=check_crc)
        yield batch
        pos += batch.size


def read_batch_header(buf, pos: int, *, path: str = "<memory>", base_pos: int = 0) -> RecordBatch:
    """The batch at ``buf[pos]`` without CRC check or record decoding (fast scans, index building).

    :raises TruncatedDataError: the buffer ends inside the batch.
    :raises CorruptDataError: a bad length or magic.
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) or buf.format != "B" else buf
    return _read_entry(view, pos, path=path, base_pos=base_pos, check_crc=False)


def _valid_v2_end_py(buf, start: int, rising: bool = False) -> int:
    """:func:`valid_v2_end`'s reference (the C path is tested equal to it)."""
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) or buf.format != "B" else buf
    pos, end = max(start, 0), len(view)
    previous: int | None = None
    while end - pos >= RECORD_BATCH_OVERHEAD:
        size = ENTRY_PREFIX.unpack_from(view, pos)[1] + LOG_OVERHEAD
        if view[pos + MAGIC_OFFSET] != MAGIC_V2 or not RECORD_BATCH_OVERHEAD <= size <= end - pos:
            break
        if rising:
            fields = HEADER.unpack_from(view, pos)
            last = (fields[0] + fields[6] + 2**63) % 2**64 - 2**63     # Java's long sum wraps
            if previous is not None and last <= previous:
                break
            previous = last
        (stored,) = CRC_FIELD.unpack_from(view, pos + CRC_OFFSET)
        if crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]) != stored:
            break
        pos += size
    return min(pos, end)


def valid_v2_end(buf, start: int = 0, *, rising: bool = False) -> int:
    """The end of the run of whole v2 batches from byte ``start`` (a batch boundary) whose length holds a
    batch inside ``buf`` and whose CRC-32C holds: the position of the first entry that is not one (a
    legacy entry, a bad length or CRC, the buffer ending inside it), or ``len(buf)``.  A fast forward
    for a walk that checks CRCs (:func:`iter_batches` names what is at the returned position).
    ``rising``: also stop at a batch whose last offset (``baseOffset + lastOffsetDelta``, wrapping as
    Java's long sum) is not above the one before it (from ``start``): where the indexes Kafka's recovery
    rebuilds may go back (``LogSegment.index_gone_back``).
    ``O(bytes)``, no Python per batch where the C accelerator is built."""
    if _speedups is not None:
        return int(_speedups.valid_v2_end(buf, start, rising))
    return _valid_v2_end_py(buf, start, rising)


def valid_prefix(buf, *, path: str = "<memory>", base_pos: int = 0) -> tuple[int, SegstoreError | None]:
    """Bytes of whole valid batches at the start of ``buf`` and the first problem after them.

    A batch is valid when its length, magic and CRC are (what Kafka's recovery
    checks).  Returns ``(len(buf), None)`` for a fully valid buffer.
    """
    valid = 0
    try:
        for batch in iter_batches(buf, path=path, base_pos=base_pos):
            valid += batch.size
    except SegstoreError as err:
        return valid, err
    return valid, None


# ---------------------------------------------------------------------------------
# Encoding


def _check_range(name: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise InvalidMessageError(f"expected {name} in [{low}, {high}], found {value}")
    return value


def attributes(codec: int, *, log_append: bool, is_transactional: bool, is_control: bool,
               delete_horizon: bool = False) -> int:
    """A v2 batch's attributes field: the codec id and the flags."""
    value = codec
    if delete_horizon:
        value |= DELETE_HORIZON_FLAG
    if log_append:
        value |= TIMESTAMP_TYPE_FLAG
    if is_transactional:
        value |= TRANSACTIONAL_FLAG
    if is_control:
        value |= CONTROL_FLAG
    return value


def check_header_ranges(*, base_offset: int, partition_leader_epoch: int, producer_id: int,
                        producer_epoch: int, base_sequence: int) -> None:
    """:raises InvalidMessageError: a header field outside its type's range."""
    _check_range("base_offset", base_offset, 0, INT64_MAX)
    _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX)
    _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
    _check_range("producer_epoch", producer_epoch, _INT16_MIN, _INT16_MAX)
    _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)


def _build(region: bytes, *, record_count: int, base_offset: int, last_offset_delta: int,
           base_timestamp: int, max_timestamp: int, compression: str | int, partition_leader_epoch: int,
           producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool,
           is_control: bool, log_append: bool, delete_horizon: bool = False,
           compression_level: int | None = None) -> bytes:
    codec = codec_id(compression)
    body = compress(codec, region, compression_level) if codec != NONE else region
    flags = attributes(codec, log_append=log_append, is_transactional=is_transactional, is_control=is_control,
                       delete_horizon=delete_horizon)
    check_header_ranges(base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body)
    header = HEADER.pack(base_offset, length, partition_leader_epoch, MAGIC_V2, 0, flags, last_offset_delta,
                         base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                         record_count)
    crc = crc32c(header[ATTRIBUTES_OFFSET:])
    crc = crc32c(body, crc)
    return b"".join((header[:CRC_OFFSET], CRC_FIELD.pack(crc), header[ATTRIBUTES_OFFSET:], body))


def encode_batch(records: Sequence, *, base_offset: int, compression: str | int = "none",
                 partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH, producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                 is_transactional: bool = False, is_control: bool = False,
                 timestamp_type: str = CREATE_TIME, log_append_time: int | None = None,
                 offset_deltas: Sequence[int] | None = None, compression_level: int | None = None,
                 stored_keys: bool = False) -> bytes:
    """Encode one RecordBatch v2, byte for byte as Kafka's ``MemoryRecordsBuilder`` does
    (``compression_level``: the codec's level, :func:`.compression.compress`).  ``stored_keys``:
    header keys that are a :class:`segstore.javatext.JavaText` written as the bytes they keep
    (:func:`_encode_records_py`; records given as tuples), not as their text.

    ``records`` are tuples ``(key, value, timestamp[, headers])`` or objects with
    ``key``, ``value``, ``timestamp`` and ``headers`` (a :class:`Record`, a
    :class:`segstore.records.Message`); keys and values are bytes, str (UTF-8) or
    None; headers ``(str, bytes | None)`` pairs.  Offsets are ``base_offset`` +
    0, 1, ... unless ``offset_deltas`` gives them (compacted batches).  The base
    timestamp is the first record's and the max timestamp the largest, or
    ``log_append_time`` with LogAppendTime (then required).  O(total bytes).

    :raises InvalidMessageError: a field out of range or of the wrong type.
    """
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise InvalidMessageError(f"expected timestamp_type {CREATE_TIME!r} or {LOG_APPEND_TIME!r}, "
                                  f"found {timestamp_type!r}")
    log_append = timestamp_type == LOG_APPEND_TIME
    if log_append and log_append_time is None:
        raise InvalidMessageError("expected a log_append_time with LogAppendTime, found None")
    if offset_deltas is not None and len(offset_deltas) != len(records):
        raise InvalidMessageError(f"expected {len(records)} offset deltas, found {len(offset_deltas)}")
    encoder = _encode_records
    if stored_keys and any(isinstance(key, JavaText) for record in records for key, _ in record[3]):
        encoder = functools.partial(_encode_records_py, stored_keys=True)
    try:
        region, base_timestamp, max_timestamp = encoder(records, offset_deltas)
    except (ValueError, TypeError, OverflowError, AttributeError, BufferError) as err:
        raise _unencodable(err) from err
    if log_append:
        max_timestamp = log_append_time
    last_offset_delta = 0
    if records:
        last_offset_delta = len(records) - 1 if offset_deltas is None else offset_deltas[-1]
    return _build(region, record_count=len(records), base_offset=base_offset,
                  last_offset_delta=last_offset_delta, base_timestamp=base_timestamp,
                  max_timestamp=max_timestamp, compression=compression,
                  partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                  producer_epoch=producer_epoch, base_sequence=base_sequence,
                  is_transactional=is_transactional, is_control=is_control, log_append=log_append,
                  compression_level=compression_level)


def check_records(records: Sequence) -> None:
    """Check that :func:`encode_batch` can encode ``records`` (before anything is written).

    :raises InvalidMessageError: a field out of range or of the wrong type.
    """
    try:
        _encode_records(records, None)
    except (ValueError, TypeError, OverflowError, AttributeError, BufferError) as err:
        raise _unencodable(err) from err


def encode_control_batch(kind: str, *, base_offset: int, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, timestamp: int,
                         partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                         log_append_time: int | None = None) -> bytes:
    """Encode a transaction marker batch (``kind`` ``"COMMIT"`` or ``"ABORT"``) as Kafka writes it.

    Like ``MemoryRecords.withEndTransactionMarker``: transactional, control, no
    sequence, one record with a null-free key (version 0, type) and value
    (version 0, coordinator epoch).  ``log_append_time``: the batch is stamped LogAppendTime with it
    as its max timestamp, as the leader stamps a marker of a LogAppendTime topic.
    """
    if kind not in ("COMMIT", "ABORT"):
        raise InvalidMessageError(f"expected a control batch kind 'COMMIT' or 'ABORT', found {kind!r}")
    key = CONTROL_KEY.pack(CONTROL_KEY_VERSION, CONTROL_TYPE_IDS[kind])
    value = END_TXN_MARKER.pack(END_TXN_MARKER_VERSION,
                                _check_range("coordinator_epoch", coordinator_epoch, INT32_MIN, INT32_MAX))
    return encode_batch([(key, value, timestamp)], base_offset=base_offset,
                        partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, is_transactional=True,
                        is_control=True, log_append_time=log_append_time,
                        timestamp_type=CREATE_TIME if log_append_time is None else LOG_APPEND_TIME)



def encode_retained_batch(batch: RecordBatch, records: Sequence[Record], *,
                          delete_horizon_ms: int = NO_TIMESTAMP, stored_keys: bool = False,
                          stored_times: tuple[int, int] | None = None) -> bytes:
    """The batch the log cleaner writes for the ``records`` it keeps of ``batch``.

    As ``MemoryRecords.buildRetainedRecordsInto``: the batch's base offset, producer
    fields, leader epoch, compression and timestamp type; each record keeps its
    offset and timestamp; the last offset delta stays the original batch's
    (``overrideLastOffset``); with ``delete_horizon_ms`` set the base timestamp is
    the horizon and the delete-horizon attribute is set.  ``stored_keys``: header keys that are not
    UTF-8 written as stored (:func:`_encode_records_py`; the cleaner writes their text).
    ``stored_times``: the ``(base, max)`` timestamps the batch was stored with (a dump line written back,
    whose records below a DeleteRecords' log start the dump does not show): the records' deltas are
    from that base, and the max stays where it is at least the records' own.  O(total bytes).
    """
    deltas = [r.offset - batch.base_offset for r in records]
    rows = [(r.key, r.value, r.timestamp, r.headers) for r in records]
    log_append = batch.timestamp_type == LOG_APPEND_TIME
    has_horizon = delete_horizon_ms != NO_TIMESTAMP
    base = delete_horizon_ms if has_horizon else None if stored_times is None else stored_times[0]
    try:
        region, base_timestamp, max_timestamp = _encode_records_py(rows, deltas, base, stored_keys)
    except (ValueError, TypeError, OverflowError) as err:
        raise _unencodable(err) from err
    if log_append:
        max_timestamp = batch.max_timestamp
    elif stored_times is not None and stored_times[1] > max_timestamp:
        max_timestamp = stored_times[1]
    return _build(region, record_count=len(rows), base_offset=batch.base_offset,
                  last_offset_delta=batch.last_offset - batch.base_offset, base_timestamp=base_timestamp,
                  max_timestamp=max_timestamp, compression=batch.compression,
                  partition_leader_epoch=batch.partition_leader_epoch, producer_id=batch.producer_id,
                  producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                  is_transactional=batch.is_transactional, is_control=batch.is_control, log_append=log_append,
                  delete_horizon=has_horizon)


def encode_empty_batch(batch: RecordBatch) -> bytes:
    """``DefaultRecordBatch.writeEmptyHeader``: a record-less header keeping the batch's offsets and
    producer state (the cleaner's ``RETAIN_EMPTY``): no compression, base timestamp -1, its max timestamp."""
    return _build(b"", record_count=0, base_offset=batch.base_offset,
                  last_offset_delta=batch.last_offset - batch.base_offset, base_timestamp=NO_TIMESTAMP,
                  max_timestamp=batch.max_timestamp, compression="none",
                  partition_leader_epoch=batch.partition_leader_epoch, producer_id=batch.producer_id,
                  producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                  is_transactional=batch.is_transactional, is_control=batch.is_control,
                  log_append=batch.timestamp_type == LOG_APPEND_TIME)
