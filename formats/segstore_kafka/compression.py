"""The five Kafka record compression codecs, framed exactly as the Kafka clients frame them.

A compressed RecordBatch v2 stores the record region (everything after the
61-byte header) as one compressed stream; a compressed legacy (v0/v1) wrapper
message stores its inner message set the same way.  Codec ids are bits 0-2 of
the batch attributes.

Framing, as Kafka 3.8 writes it (``org.apache.kafka.common.compress``):

=======  ===  =========================================================================
name     id   stream
=======  ===  =========================================================================
none     0    the records as they are
gzip     1    one gzip member: ``1f 8b 08 00``, mtime 0, XFL 0, OS 255 (what JDK 17's
              ``GZIPOutputStream`` writes), raw deflate at level 6 (or the topic's
              ``compression.gzip.level``), CRC-32 and size;
              read as ``GZIPInputStream`` reads it: further members, and bytes after
              a member that do not begin one are ignored
snappy   2    xerial framing (snappy-java's ``SnappyOutputStream``, not Google's framing
              format): magic ``82 53 4E 41 50 50 59 00``, int32 version 1, int32
              compatible version 1, then blocks of [int32 length][raw snappy] holding
              32 KiB of input each (the raw snappy bytes of snappy-java and of
              cramjam's Rust encoder can differ; both decode the same); fewer than
              4 bytes after the last block end the stream, as snappy-java reads it
lz4      3    a standard LZ4 frame: FLG 0x60 (version 1, independent blocks, no block or
              content checksum, no content size), BD 0x40 (64 KiB blocks), header
              checksum, blocks, end mark; Kafka refuses dependent blocks, does not
              verify a content checksum and reads nothing after the end mark
              (``Lz4BlockInputStream``); ``compression.lz4.level`` other than 9
              compresses the blocks by LZ4 HC at that level
zstd     4    a plain zstd frame at level 3 (or ``compression.zstd.level``) without
              content size or checksum; the
              data is flushed as a block before the frame ends with an empty last
              block (what zstd-jni's stream does when Kafka closes it)
=======  ===  =========================================================================

Decoders accept what Kafka and kafka-python write: gzip with any header fields,
xerial snappy (and a bare raw snappy block, which old clients sent), any
independent-block LZ4 frame, zstd with or without content size.  Message format
v0 wrote LZ4 frames with a wrong header checksum (computed over the magic too);
``decompress(..., legacy_lz4=True)`` accepts those as Kafka does.

Everything here is pure (bytes in, bytes out), C-backed (zlib, cramjam, lz4,
zstandard) and thread-safe.  The codec packages are imported where a stream of theirs is
made or read (a command that reads no compressed batch, such as ``segstore info``, loads none).
"""

from __future__ import annotations

import functools
import struct
import threading
import zlib
from typing import Any

from segstore.errors import CorruptDataError, InvalidMessageError

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
NONE, GZIP, SNAPPY, LZ4, ZSTD = range(len(COMPRESSION_NAMES))
CODEC_MASK = 0x07

# --- gzip (RFC 1952) as JDK 17's GZIPOutputStream writes it -----------------------
GZIP_HEADER = struct.Struct(
    "<2s"  # ID1 ID2 = 1f 8b
    "B"    # CM = 8 (deflate)
    "B"    # FLG = 0
    "I"    # MTIME = 0
    "B"    # XFL = 0
    "B"    # OS = 255 (unknown)
)
assert GZIP_HEADER.size == 10
GZIP_TRAILER = struct.Struct(
    "<I"   # CRC-32 of the uncompressed data
    "I"    # ISIZE: uncompressed size mod 2**32
)
assert GZIP_TRAILER.size == 8
_GZIP_MAGIC = b"\x1f\x8b"
_DEFLATE_METHOD = 8
_GZIP_OS_UNKNOWN = 255
_GZIP_LEVEL = -1              # Deflater.DEFAULT_COMPRESSION (zlib's, level 6)
_RAW_DEFLATE_WBITS = -15
_GZIP_WBITS = 16 + 15         # zlib: expect a gzip wrapper
_GZIP_FHCRC, _GZIP_FEXTRA, _GZIP_FNAME, _GZIP_FCOMMENT = 0x02, 0x04, 0x08, 0x10   # FLG bits
#: GZIPInputStream.readTrailer looks for another member only where more than 26 bytes follow the
#: deflate data in its buffer (the 8-byte trailer included) or more are left unread: at most 18
#: after a trailer (too few for a member, at least 20 bytes) are not looked at.
_GZIP_MIN_FOLLOWING = 18
_GZIP_HEADER_BYTES = GZIP_HEADER.pack(_GZIP_MAGIC, _DEFLATE_METHOD, 0, 0, 0, _GZIP_OS_UNKNOWN)

# --- snappy, xerial framing (snappy-java SnappyCodec / SnappyOutputStream) ---------
XERIAL_HEADER = struct.Struct(
    ">8s"  # magic 82 53 4E 41 50 50 59 00
    "i"    # version = 1
    "i"    # minimum compatible version = 1
)
assert XERIAL_HEADER.size == 16
XERIAL_BLOCK_LENGTH = struct.Struct(">i")  # bytes of the raw snappy block that follows
assert XERIAL_BLOCK_LENGTH.size == 4
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE
_XERIAL_HEADER_BYTES = XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)

# --- lz4 frame (KafkaLZ4BlockOutputStream) -----------------------------------------
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
LZ4_DESCRIPTOR = struct.Struct(
    "<4s"  # magic 04 22 4D 18
    "B"    # FLG: version 01, block independence, no checksums, no content size = 0x60
    "B"    # BD: block max size 64 KiB = 0x40
    "B"    # HC: (xxh32(FLG BD) >> 8) & 0xFF
)
assert LZ4_DESCRIPTOR.size == 7
LZ4_FLG_INDEPENDENT_BLOCKS = 0x20
LZ4_FLG_CONTENT_SIZE = 0x08
LZ4_FLG_CONTENT_CHECKSUM = 0x04
LZ4_HC_OFFSET = 6
LZ4_CONTENT_SIZE_BYTES = 8
#: then blocks: uint32 LE length (high bit: stored uncompressed), the block; a 0 length ends the frame.
#: ``compression.lz4.level`` (3.8.0 KIP-390): the default 9 writes by ``fastCompressor``, another level
#: by ``highCompressor(level)``, LZ4 HC (``Lz4BlockOutputStream``)
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_UNCOMPRESSED_BLOCK = 0x80000000
LZ4_DEFAULT_LEVEL = 9

# --- zstd (ZstdOutputStreamNoFinalizer, level 3) ----------------------------------
ZSTD_LEVEL = 3
#: Compressed bytes fed to the zstd decoder per call: a 3-byte RLE block can stand for 128 KiB,
#: so one call makes at most about 44 times this many bytes past the limit before it is checked.
ZSTD_FEED = 1024

# --- bounds on what a stream from a file may inflate to --------------------------
#: The most bytes one compressed record region (or legacy inner message set) may inflate to.
#: Kafka bounds a batch as stored (``max.message.bytes``, 1 MiB by default) but not what it
#: inflates to; 256 MiB is far above what a producer's batch (``batch.size`` 16 KiB,
#: ``max.request.size`` 1 MiB) holds even at zstd's best ratios, and keeps a damaged or
#: hostile length from costing more memory than that.
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
#: A raw snappy block starts with its uncompressed length, a varint of at most 5 bytes.
SNAPPY_LENGTH_MAX_BYTES = 5


def codec_id(compression: str | int) -> int:
    """The attributes codec id of ``compression`` (a name or an id)."""
    if isinstance(compression, int):
        if 0 <= compression < len(COMPRESSION_NAMES):
            return compression
    elif compression in COMPRESSION_NAMES:
        return COMPRESSION_NAMES.index(compression)
    raise InvalidMessageError(f"expected a compression of {COMPRESSION_NAMES}, found {compression!r}")


def stored_codec_name(codec: int, *, path: str, pos: int) -> str:
    """The name of a stored batch's codec id (attributes bits 0-2).

    :raises CorruptDataError: ids 5 to 7, on which Kafka's ``CompressionType.forId`` throws
        (``pos``: the compressed stream's position, where :func:`decompress` names it too).
    """
    if not 0 <= codec < len(COMPRESSION_NAMES):
        raise CorruptDataError(f"expected a compression codec id of 0 to {len(COMPRESSION_NAMES) - 1} "
                               f"({', '.join(COMPRESSION_NAMES)}), found {codec}", path, pos)
    return COMPRESSION_NAMES[codec]


# ---------------------------------------------------------------------------------
# compress


def _gzip_compress(data: bytes, level: int = _GZIP_LEVEL) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, _RAW_DEFLATE_WBITS)
    body = deflater.compress(data) + deflater.flush()
    trailer = GZIP_TRAILER.pack(zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER_BYTES, body, trailer))


def _snappy_compress(data: bytes) -> bytes:
    import cramjam

    parts = [_XERIAL_HEADER_BYTES]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_compress(data: bytes) -> bytes:
    import lz4.frame

    return lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )


def _lz4_compress_at(data: bytes, level: int) -> bytes:
    """``Lz4BlockOutputStream`` at a ``level`` other than the default: the same frame, each 64 KiB block
    by ``highCompressor(level)`` (LZ4 HC), stored raw (length's high bit set) where that is no smaller."""
    import lz4.block

    if level == LZ4_DEFAULT_LEVEL:
        return _lz4_compress(data)
    parts = [_lz4_compress(b"")[:-4]]          # magic, FLG, BD, header checksum (the end mark follows)
    view = memoryview(data)
    for start in range(0, len(data), LZ4_BLOCK_SIZE):
        chunk = bytes(view[start:start + LZ4_BLOCK_SIZE])
        packed = lz4.block.compress(chunk, mode="high_compression", compression=level, store_size=False)
        if len(packed) >= len(chunk):
            parts.append(struct.pack("<I", len(chunk) | LZ4_UNCOMPRESSED_BLOCK))
            parts.append(chunk)
        else:
            parts.append(struct.pack("<I", len(packed)))
            parts.append(packed)
    parts.append(bytes(4))                     # the end mark
    return b"".join(parts)


class _ZstdContexts(threading.local):
    """One zstd compressor and decompressor per thread: they are costly to create and not thread-safe."""

    def __init__(self) -> None:
        import zstandard

        self.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False,
                                                   write_checksum=False)
        self.decompressor = zstandard.ZstdDecompressor()
        #: compressors at the other levels (``compression.zstd.level``), made on first use
        self.levelled: dict[int, Any] = {}


@functools.cache
def _zstd() -> _ZstdContexts:
    """The contexts (made on first use: each thread's on its first use in that thread)."""
    return _ZstdContexts()


def _zstd_compress(data: bytes) -> bytes:
    import zstandard

    stream = _zstd().compressor.compressobj()
    return b"".join((stream.compress(data), stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK),
                     stream.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)))


def _zstd_compress_at(data: bytes, level: int) -> bytes:
    import zstandard

    contexts = _zstd()
    if level == ZSTD_LEVEL:
        return _zstd_compress(data)
    compressor = contexts.levelled.get(level)
    if compressor is None:
        compressor = contexts.levelled[level] = zstandard.ZstdCompressor(
            level=level, write_content_size=False, write_checksum=False)
    stream = compressor.compressobj()
    return b"".join((stream.compress(data), stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK),
                     stream.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)))


def compress(compression: str | int, data: bytes, level: int | None = None) -> bytes:
    """Compress a record region the way Kafka frames ``compression``, at ``level`` (the topic's
    ``compression.gzip.level``, ``.lz4.level`` or ``.zstd.level``, Kafka 3.8.0 KIP-390; None: the
    codec's default, ``CompressionType``'s ``defaultLevel``; snappy has none).

    O(n) in ``len(data)``; returns ``data`` itself for ``"none"``.
    """
    codec = codec_id(compression)
    if codec == NONE:
        return bytes(data)
    if level is None or codec == SNAPPY:
        return _COMPRESSORS[codec](bytes(data))
    return _LEVELLED[codec](bytes(data), level)


# ---------------------------------------------------------------------------------
# decompress


class _TooLarge(ValueError):
    """A stream inflates past the limit (raised before the bytes past it are made)."""


def _check_room(produced: int, limit: int) -> None:
    if produced > limit:
        raise _TooLarge(f"a stream inflating to at most {limit} bytes, found more")


def _gzip_member_follows(rest: bytes) -> bool:
    """Whether JDK's ``GZIPInputStream.readTrailer`` reads ``rest`` (the bytes after a member) as another
    member: more than 18 bytes beginning with a header its ``readHeader`` takes (magic, method 8, the
    fields FLG names, their CRC-16).  Otherwise it ignores them."""
    if len(rest) <= _GZIP_MIN_FOLLOWING or not rest.startswith(_GZIP_MAGIC) or rest[2] != _DEFLATE_METHOD:
        return False
    flags, pos = rest[3], GZIP_HEADER.size
    if flags & _GZIP_FEXTRA:
        if pos + 2 > len(rest):
            return False
        pos += 2 + int.from_bytes(rest[pos:pos + 2], "little")
    for flag in (_GZIP_FNAME, _GZIP_FCOMMENT):
        if flags & flag:
            end = rest.find(b"\x00", pos)
            if end < 0:
                return False
            pos = end + 1
    if flags & _GZIP_FHCRC:
        header_crc = zlib.crc32(rest[:pos]) & 0xFFFF
        if pos + 2 > len(rest) or int.from_bytes(rest[pos:pos + 2], "little") != header_crc:
            return False
        pos += 2
    return pos <= len(rest)


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    out: list[bytes] = []
    produced = 0
    rest = data
    while rest:
        if out and not _gzip_member_follows(rest):
            break  # GZIPInputStream: "ignore any malformed, do nothing"
        inflater = zlib.decompressobj(_GZIP_WBITS)
        # max_length bounds what zlib makes per call: never more than one byte past the limit.
        chunk = inflater.decompress(rest, limit - produced + 1)
        produced += len(chunk)
        _check_room(produced, limit)
        out.append(chunk)
        if inflater.unconsumed_tail or not inflater.eof:
            if inflater.unconsumed_tail:  # room was left, so zlib stopped for want of input
                raise ValueError("a complete gzip member, found input zlib did not take")
            raise ValueError("a complete gzip member, found the stream cut short")
        rest = inflater.unused_data
    return b"".join(out)


def _raw_snappy_length(block: bytes | memoryview) -> int:
    """The uncompressed length a raw snappy block declares (its leading varint, at most 2**32 - 1)."""
    length = shift = 0
    for pos in range(min(len(block), SNAPPY_LENGTH_MAX_BYTES)):
        byte = block[pos]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if length > 0xFFFFFFFF:
                break
            return length
        shift += 7
    raise ValueError("a raw snappy block starting with its uncompressed length (a varint of at most 5 "
                     "bytes), found none")


def _raw_snappy_decompress(block: bytes | memoryview, produced: int, limit: int) -> bytes:
    # The length varint comes from the file: checked before the codec allocates that many bytes.
    declared = _raw_snappy_length(block)
    if produced + declared > limit:
        raise _TooLarge(f"a stream inflating to at most {limit} bytes, found a snappy block declaring "
                        f"{declared} bytes after {produced}")
    import cramjam

    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _raw_snappy_decompress(data, 0, limit)
    if len(data) < XERIAL_HEADER.size:
        raise ValueError(f"a {XERIAL_HEADER.size}-byte xerial header, found {len(data)} bytes")
    out = []
    produced = 0
    view = memoryview(data)
    pos = XERIAL_HEADER.size
    while pos < len(data):
        if data.startswith(XERIAL_MAGIC, pos):  # concatenated streams, as SnappyInputStream reads them
            pos += XERIAL_HEADER.size
            continue
        if pos + XERIAL_BLOCK_LENGTH.size > len(data):
            break  # SnappyInputStream.hasNextChunk: fewer than 4 bytes left end the stream
        (length,) = XERIAL_BLOCK_LENGTH.unpack_from(data, pos)
        pos += XERIAL_BLOCK_LENGTH.size
        if length < 0 or pos + length > len(data):
            raise ValueError(f"a xerial block of {length} bytes at {pos}, found {len(data) - pos} bytes left")
        block = _raw_snappy_decompress(view[pos:pos + length], produced, limit)
        produced += len(block)
        out.append(block)
        pos += length
    return b"".join(out)


def _lz4_as_kafka_reads(data: bytes, legacy: bool) -> bytes:
    """The frame as Kafka's ``Lz4BlockInputStream`` reads it, for liblz4 to decode: the header
    checksum of message format v0 not checked (its clients hashed the magic too, KAFKA-3160), and the
    content checksum not verified (``readBlock``: "TODO: verify this content checksum").  The FLG's
    content-checksum bit is cleared and the header checksum redone (a wrong one of v1/v2 is left for
    liblz4 to name); the 4 checksum bytes are then left after the end mark, where nothing is read."""
    if len(data) < LZ4_DESCRIPTOR.size or not data.startswith(LZ4_FRAME_MAGIC):
        return data
    flg = data[len(LZ4_FRAME_MAGIC)]
    descriptor_end = LZ4_HC_OFFSET + (LZ4_CONTENT_SIZE_BYTES if flg & LZ4_FLG_CONTENT_SIZE else 0)
    if descriptor_end >= len(data) or not (legacy or flg & LZ4_FLG_CONTENT_CHECKSUM):
        return data
    descriptor = data[len(LZ4_FRAME_MAGIC):descriptor_end]
    if not legacy and data[descriptor_end] != (_xxh32(descriptor) >> 8) & 0xFF:
        return data
    descriptor = bytes((flg & ~LZ4_FLG_CONTENT_CHECKSUM,)) + descriptor[1:]
    checksum = (_xxh32(descriptor) >> 8) & 0xFF
    return LZ4_FRAME_MAGIC + descriptor + bytes((checksum,)) + data[descriptor_end + 1:]


def _lz4_decompress(data: bytes, limit: int, legacy: bool = False) -> bytes:
    import lz4.frame

    data = _lz4_as_kafka_reads(data, legacy)
    if not data:
        return b""
    if len(data) > len(LZ4_FRAME_MAGIC) and data.startswith(LZ4_FRAME_MAGIC):
        flg = data[len(LZ4_FRAME_MAGIC)]
        if not flg & LZ4_FLG_INDEPENDENT_BLOCKS:
            raise ValueError(f"an LZ4 frame with independent blocks (FLG bit 0x20), found FLG {flg:#04x}")
    frame = lz4.frame.LZ4FrameDecompressor()
    chunk = frame.decompress(data, max_length=limit + 1)
    _check_room(len(chunk), limit)
    if not frame.eof:
        raise ValueError("a complete LZ4 frame, found the stream cut short")
    # Kafka's Lz4BlockInputStream is finished at the frame's end mark and reads nothing after it
    return chunk


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    decompressor = _zstd().decompressor
    out = []
    produced = 0
    view = memoryview(data)
    pos = 0
    while pos < len(data):
        stream = decompressor.decompressobj()
        # Fed in small pieces so that no call makes much more than ZSTD_FEED bytes of input can
        # (a zstd block of a few bytes may stand for 128 KiB): the limit is checked between calls.
        while not stream.eof and pos < len(data):
            piece = view[pos:pos + ZSTD_FEED]
            chunk = stream.decompress(piece)
            produced += len(chunk)
            _check_room(produced, limit)
            out.append(chunk)
            pos += len(piece)
        if not stream.eof:
            raise ValueError("a complete zstd frame, found the stream cut short")
        pos -= len(stream.unused_data)
    return b"".join(out)


_XXH_P1, _XXH_P2, _XXH_P3, _XXH_P4, _XXH_P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_U32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _U32


def _xxh32(data: bytes) -> int:
    """xxHash32 with seed 0 of a short input (< 16 bytes: an LZ4 frame descriptor)."""
    if len(data) >= 16:
        raise ValueError(f"a frame descriptor shorter than 16 bytes, found {len(data)}")
    h = (_XXH_P5 + len(data)) & _U32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl32((h + word * _XXH_P3) & _U32, 17) * _XXH_P4) & _U32
        pos += 4
    for byte in data[pos:]:
        h = (_rotl32((h + byte * _XXH_P5) & _U32, 11) * _XXH_P1) & _U32
    h ^= h >> 15
    h = (h * _XXH_P2) & _U32
    h ^= h >> 13
    h = (h * _XXH_P3) & _U32
    h ^= h >> 16
    return h


def decompress(compression: str | int, data, *, path: str = "<memory>", pos: int = 0,
               legacy_lz4: bool = False, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress a record region written with ``compression``, making at most ``limit`` bytes.

    No size a stream declares is trusted: a raw snappy block's length is checked
    against ``limit`` before the codec allocates it, and gzip, LZ4 and zstd are
    inflated in bounded steps, so a bomb costs at most about ``limit`` bytes.

    :param path: file named in errors; :param pos: byte position of the stream in it.
    :param legacy_lz4: accept the wrong LZ4 header checksum of message format v0.
    :param limit: the most bytes the stream may inflate to (:data:`MAX_DECOMPRESSED_BYTES`).
    :raises CorruptDataError: the stream does not decode, or inflates past ``limit``.
    """
    if isinstance(compression, int):
        stored_codec_name(compression, path=path, pos=pos)
    codec = codec_id(compression)
    data = bytes(data)
    if codec == NONE:
        return data
    try:
        if codec == LZ4:
            return _lz4_decompress(data, limit, legacy_lz4)
        return _DECOMPRESSORS[codec](data, limit)
    except Exception as err:
        if not isinstance(err, _codec_errors()):
            raise
        raise CorruptDataError(
            f"expected a valid {COMPRESSION_NAMES[codec]} stream of {len(data)} bytes, found: {err}", path,
            pos) from err


def _codec_errors() -> tuple[type[Exception], ...]:
    """What the codecs raise on a stream that does not decode."""
    import cramjam
    import zstandard

    return (ValueError, RuntimeError, OSError, zlib.error, zstandard.ZstdError, cramjam.DecompressionError)


_COMPRESSORS = {GZIP: _gzip_compress, SNAPPY: _snappy_compress, LZ4: _lz4_compress, ZSTD: _zstd_compress}
_LEVELLED = {GZIP: _gzip_compress, LZ4: _lz4_compress_at, ZSTD: _zstd_compress_at}
_DECOMPRESSORS = {GZIP: _gzip_decompress, SNAPPY: _snappy_decompress, ZSTD: _zstd_decompress}
