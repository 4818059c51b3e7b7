"""Kafka's variable-length integers (``ByteUtils`` in the Kafka clients).

A *varint* is a signed 32-bit integer, a *varlong* a signed 64-bit integer.  Both
are zigzag-mapped to unsigned (``(n << 1) ^ (n >> 63)``: 0, -1, 1, -2, ... become
0, 1, 2, 3, ...) and then written little-endian in groups of 7 bits, the high bit
of each byte set when another byte follows.  A varint takes 1..5 bytes, a varlong
1..10.  The record layer of RecordBatch v2 uses them for every length and delta.

The decoders are the pure-Python reference; the C accelerator
(``segstore_kafka._speedups``) decodes whole record regions without calling them.
Decoders raise :class:`IndexError` when the bytes end inside a value and
:class:`ValueError` when a value has too many bytes; the record codec turns both
into one :class:`~segstore.errors.CorruptDataError` naming the file and position.
All functions are pure and thread-safe.
"""

from __future__ import annotations

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

_CONTINUE = 0x80
_PAYLOAD = 0x7F
_BITS_PER_BYTE = 7
_MASK64 = (1 << 64) - 1


def zigzag(value: int) -> int:
    """Map a signed 64-bit integer to the unsigned zigzag form."""
    return ((value << 1) ^ (value >> 63)) & _MASK64


def unzigzag(raw: int) -> int:
    """Invert :func:`zigzag`."""
    return (raw >> 1) ^ -(raw & 1)


def _encode_unsigned(raw: int) -> bytes:
    out = bytearray()
    while raw > _PAYLOAD:
        out.append((raw & _PAYLOAD) | _CONTINUE)
        raw >>= _BITS_PER_BYTE
    out.append(raw)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer; :class:`ValueError` outside int32."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint must fit in int32, found {value}")
    return _encode_unsigned(zigzag(value))


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer; :class:`ValueError` outside int64."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong must fit in int64, found {value}")
    return _encode_unsigned(zigzag(value))


def _size_of_unsigned(raw: int) -> int:
    return max(1, -(-raw.bit_length() // _BITS_PER_BYTE))


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` writes for ``value``."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint must fit in int32, found {value}")
    return _size_of_unsigned(zigzag(value))


def size_of_varlong(value: int) -> int:
    """Bytes :func:`encode_varlong` writes for ``value``."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong must fit in int64, found {value}")
    return _size_of_unsigned(zigzag(value))


def _decode_unsigned(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    for i in range(max_bytes):
        byte = buf[pos + i]
        raw |= (byte & _PAYLOAD) << shift
        if not byte & _CONTINUE:
            return raw, pos + i + 1
        shift += _BITS_PER_BYTE
    raise ValueError(f"variable-length integer of at most {max_bytes} bytes, found a longer one at {pos}")


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a varint at ``buf[pos]``; return ``(value, position after it)``.

    :raises IndexError: the bytes end inside the value.
    :raises ValueError: more than 5 bytes, or a value outside int32.
    """
    raw, end = _decode_unsigned(buf, pos, MAX_VARINT_BYTES)
    value = unzigzag(raw)
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint in int32 range at {pos}, found {value}")
    return value, end


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a varlong at ``buf[pos]``; return ``(value, position after it)``.

    :raises IndexError: the bytes end inside the value.
    :raises ValueError: more than 10 bytes, or a value outside int64.
    """
    raw, end = _decode_unsigned(buf, pos, MAX_VARLONG_BYTES)
    if raw > _MASK64:
        raise ValueError(f"varlong in int64 range at {pos}, found {raw} before zigzag")
    return unzigzag(raw), end

UINT32_MAX = (1 << 32) - 1


def encode_unsigned_varint(value: int) -> bytes:
    """Kafka's ``ByteUtils.writeUnsignedVarint`` (no zigzag): the lengths and tags of flexible messages."""
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"unsigned varint must fit in uint32, found {value}")
    return _encode_unsigned(value)


def decode_unsigned_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Kafka's ``ByteUtils.readUnsignedVarint``: at most 5 bytes; returns ``(value, position after it)``.

    :raises IndexError: the bytes end inside the value.
    :raises ValueError: more than 5 bytes.
    """
    return _decode_unsigned(buf, pos, MAX_VARINT_BYTES)
