"""Bodies a RocketMQ producer compressed, as its consumers read them: bytes in, bytes out, no files.

A Java producer compresses a body longer than ``compressMsgBodyOverHowmuch`` (4 KiB by default,
4.9.7 ``DefaultMQProducer``) and says so in the stored message's SYSFLAG (4.9.7
``common/.../sysflag/MessageSysFlag.java``)::

    bit  0        0x001   COMPRESSED_FLAG     the body is compressed
    bits 8-10     0x700   COMPRESSION_TYPE    1 LZ4 (an LZ4 frame), 2 ZSTD (a zstd frame),
                                              3 ZLIB (a zlib stream); 0 is ZLIB too
                                              (producers before the type bits wrote only bit 0)

The broker stores the body as it came; a consumer's ``MessageDecoder.decode(deCompressBody=true)``
inflates it with the type's compressor (``CompressorFactory``, ``ZlibCompressor``/
``Lz4Compressor``/``ZstdCompressor.decompress``: the stream read to its end, bytes after it
ignored) and a type of 4-7 fails there (``CompressionType.findByValue``).

Thread-safe.  A body inflates to at most :data:`MAX_BODY` bytes: past it the body is refused as
damage (a producer checks ``maxMessageSize``, 4 MiB by default, before it compresses).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from segstore.errors import CorruptDataError

from .message import SYSFLAG_COMPRESSED, RocketMQMessage

if TYPE_CHECKING:
    import pyarrow as pa

#: SYSFLAG's compression type bits (``MessageSysFlag.COMPRESSION_TYPE_COMPARATOR``) and their shift.
COMPRESSION_TYPE_MASK = 0x7 << 8
COMPRESSION_TYPE_SHIFT = 8
#: ``CompressionType.findByValue``: 0 (no type bits) and 3 are zlib.
COMPRESSION_TYPES = {0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib"}
#: The longest body a compressed one may inflate to (16 times the broker's default maxMessageSize).
MAX_BODY = 64 << 20
#: Bytes of values in one batch after inflating: a batch whose inflated values would pass it is
#: cut (smaller pieces reuse their memory from batch to batch: with 128 MB ones, a scan of 8 KiB
#: bodies ran at 0.63x a bare inflating loop; Arrow's binary columns also cap a batch at 2 GiB).
MAX_BATCH_BODIES = 16 << 20


def compression_of(sys_flag: int) -> str | None:
    """The compressor of a message with ``sys_flag`` (``"zlib"``, ``"lz4"``, ``"zstd"``), None when
    its body is not compressed.

    :raises CorruptDataError: a compression type no broker knows (4-7).
    """
    if not sys_flag & SYSFLAG_COMPRESSED:
        return None
    kind = (sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT
    name = COMPRESSION_TYPES.get(kind)
    if name is None:
        raise CorruptDataError(f"expected a compression type of 0-3 in sysFlag {sys_flag:#x} "
                               f"(MessageSysFlag's bits 8-10), found {kind}")
    return name


def decompress(body: bytes | memoryview, sys_flag: int, *, limit: int = MAX_BODY) -> bytes:
    """``body`` as a consumer reads it: inflated when ``sys_flag`` says it is compressed, else as
    stored.  ``O(len(result))``.

    :raises CorruptDataError: the body does not inflate as its type says (damaged, cut short, of
        another type), inflates past ``limit`` bytes, or ``sys_flag`` names an unknown type.
    """
    name = compression_of(sys_flag)
    if name is None:
        return bytes(body)
    if not len(body):   # each Compressor.decompress reads into a buffer of the body's length: nothing
        return b""
    try:
        inflated = _INFLATE[name](bytes(body), limit)
    except CorruptDataError:
        raise
    except Exception as err:    # zlib.error, RuntimeError (lz4), zstandard.ZstdError: the libraries'
        raise CorruptDataError(f"expected a {name} body (sysFlag {sys_flag:#x}), found bytes that do "
                               f"not inflate: {err}") from err
    return inflated


def _too_long(name: str, limit: int) -> CorruptDataError:
    return CorruptDataError(f"expected a {name} body inflating to at most {limit} bytes, found more (the "
                            "stored bytes stay readable: decompress=False, Spark's decompressBodies=false)")


def _zlib(data: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit:
        raise _too_long("zlib", limit)
    if not inflater.eof:        # InflaterInputStream: "Unexpected end of ZLIB input stream"
        raise zlib.error("the zlib stream ends before its end mark")
    return out


def _lz4(data: bytes, limit: int) -> bytes:
    import lz4.frame

    inflater = lz4.frame.LZ4FrameDecompressor()
    out = inflater.decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise _too_long("lz4", limit)
    if not inflater.eof:
        raise RuntimeError("the LZ4 frame ends before its end mark")
    return bytes(out)


def _zstd(data: bytes, limit: int) -> bytes:
    import zstandard

    # ZstdInputStream reads frame after frame, as read_across_frames does
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        out = reader.read(limit + 1)
    if len(out) > limit:
        raise _too_long("zstd", limit)
    return bytes(out)


_INFLATE: dict[str, Callable[[bytes, int], bytes]] = {"zlib": _zlib, "lz4": _lz4, "zstd": _zstd}


def consumed(msg: RocketMQMessage, locate: Callable[[int], tuple[str, int]]) -> RocketMQMessage:
    """``msg`` as consumers read it: its body inflated where its producer compressed it and its
    SYSFLAG's 0x1 cleared, as :func:`consumer_batches` gives a row; ``size`` and ``body_crc`` stay
    the stored message's.  A message whose body is not compressed is returned as it is.

    :raises CorruptDataError: a compressed body that does not inflate, at the place ``locate`` gives
        for the message's commitlog position.
    """
    if not msg.sys_flag & SYSFLAG_COMPRESSED:
        return msg
    body = _inflated_at(msg.body, msg.sys_flag, msg.physical_offset, locate)
    return dataclasses.replace(msg, body=body, sys_flag=msg.sys_flag & ~SYSFLAG_COMPRESSED)


def _inflated_at(body: bytes | memoryview, sys_flag: int, position: int,
                 locate: Callable[[int], tuple[str, int]]) -> bytes:
    """:func:`decompress` of the body of the message at commitlog ``position``.

    :raises CorruptDataError: at the place ``locate`` gives for ``position``.
    """
    try:
        return decompress(body, sys_flag)
    except CorruptDataError as err:
        path, pos = locate(position)
        raise CorruptDataError(err.message, path, pos) from err


def consumer_batches(batch: pa.RecordBatch, flags: np.ndarray, positions: np.ndarray,
                     locate: Callable[[int], tuple[str, int]], max_bytes: int = MAX_BATCH_BODIES
                     ) -> Iterator[pa.RecordBatch]:
    """``batch`` (of ``scan_arrow``'s columns; ``flags`` and ``positions`` its rows' SYSFLAG and
    commitlog positions) with the compressed bodies of its ``value`` column inflated, as consumers
    read them, and in its ``sysFlag`` column (where it has one) those rows' COMPRESSED_FLAG cleared
    (``MessageSysFlag.clearCompressedFlag``), so that each row describes the body it holds (a
    consumer's ``MessageExt`` keeps the stored flag; ``MessageDecoder.encode`` would compress its
    body again).  Cut into several batches where the inflated values pass ``max_bytes``.  A batch
    holding no compressed body is yielded as it is: ``O(rows)`` numpy; else ``O(bytes)``, one Python
    call per compressed body.

    :raises CorruptDataError: a body that does not inflate, at the place ``locate`` gives for the
        message's commitlog position (its file and the position in it).
    """
    import pyarrow as pa

    compressed = np.flatnonzero(flags & SYSFLAG_COMPRESSED)
    if not len(compressed):
        yield batch
        return
    names = batch.schema.names
    columns = list(batch.columns)
    if "sysFlag" in names:
        cleared = np.array(flags, np.int32)
        cleared[compressed] &= ~SYSFLAG_COMPRESSED
        columns[names.index("sysFlag")] = pa.Array.from_buffers(pa.int32(), len(cleared),
                                                                [None, pa.py_buffer(cleared)])
    whole = pa.RecordBatch.from_arrays(columns, schema=batch.schema)
    if "value" not in names:
        yield whole
        return
    at = names.index("value")
    offsets, data = _binary(batch.column(at))
    bodies: dict[int, bytes] = {}
    for row in compressed.tolist():
        bodies[row] = _inflated_at(data[int(offsets[row]):int(offsets[row + 1])], int(flags[row]),
                                   int(positions[row]), locate)
    lengths = np.diff(offsets)
    lengths[compressed] = [len(bodies[row]) for row in compressed.tolist()]
    ends = np.cumsum(lengths)
    start = 0
    while start < len(lengths):      # pieces of at most max_bytes of values (a longer row alone)
        before = int(ends[start - 1]) if start else 0
        stop = min(len(lengths), max(int(np.searchsorted(ends, before + max_bytes, side="right")), start + 1))
        piece = list(whole.slice(start, stop - start).columns)
        rows = compressed[np.searchsorted(compressed, start):np.searchsorted(compressed, stop)].tolist()
        piece[at] = _values(offsets, data, lengths, [(row, bodies[row]) for row in rows], start, stop)
        yield pa.RecordBatch.from_arrays(piece, schema=batch.schema)
        start = stop


# reads the buffers as they are (Array.to_numpy would import pandas, which no read path loads)
def _binary(column: pa.Array) -> tuple[np.ndarray, memoryview]:
    """A binary column without nulls: its ``len + 1`` offsets (int64) and its data."""
    offsets = np.frombuffer(column.buffers()[1], np.int32)[column.offset:column.offset + len(column) + 1]
    data = column.buffers()[2]
    return offsets.astype(np.int64), memoryview(data) if data is not None else memoryview(b"")


def _values(offsets: np.ndarray, data: memoryview, lengths: np.ndarray, bodies: list[tuple[int, bytes]],
            start: int, stop: int) -> pa.Array:
    """Rows ``[start, stop)`` of the binary column of ``offsets`` over ``data``, with ``(row, body)`` of
    ``bodies`` (ascending rows) in place of those rows' bytes (``lengths``: every row's length with
    them; at most 2 GiB in all).  ``O(bytes)``: one join."""
    import pyarrow as pa

    pieces: list[bytes | memoryview] = []
    at = int(offsets[start])
    for row, body in bodies:
        pieces.append(data[at:int(offsets[row])])
        pieces.append(body)
        at = int(offsets[row + 1])
    pieces.append(data[at:int(offsets[stop])])
    new_offsets = np.zeros(stop - start + 1, np.int64)
    np.cumsum(lengths[start:stop], out=new_offsets[1:])
    new_offsets = new_offsets.astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), stop - start, [None, pa.py_buffer(new_offsets),
                                                             pa.py_buffer(b"".join(pieces))])
