"""A small reader for Kafka's generated-message encoding, driven by schemas written as data.

Kafka describes its internal records (``__consumer_offsets``, ``__transaction_state``, KRaft
metadata) in JSON message definitions; its ``MessageGenerator`` turns them into Java classes.
This module reads the same bytes from a :class:`Schema` that transcribes such a definition
(names, types, versions, tags), so a record type is added by writing its schema, not code.

Encoding (``clients/.../common/protocol/Readable``, ``ByteBufferAccessor``, ``MessageUtil``;
every integer big-endian)::

    int8 / int16 / uint16 / int32 / int64 / float64 / bool(1 byte, != 0)
    uuid                16 bytes (shown as Kafka's Uuid.toString: URL-safe base64, no padding)
    not flexible        string: int16 length (negative: null) + UTF-8; bytes: int32 length (negative:
                        null); array: int32 count (negative: null) + elements
    flexible version    string/bytes: unsigned varint length+1 (0 null); array: unsigned varint count+1
                        (0 null); after the fields of the message and of every nested struct, the
                        tagged fields: unsigned varint count, then per field unsigned varint tag,
                        unsigned varint size, that many bytes (a field read in the tagged section
                        only, in the versions its ``tagged`` says)

A null is read only where the field's ``nullableVersions`` allow it; elsewhere the bytes are refused,
as the generated readers refuse them (``MessageDataGenerator.generateVariableLengthReader``, Kafka 3.8.0:
``non-nullable field X was serialized as null``).

Pure: bytes in, ``dict`` out (keys as Kafka's JsonConverters write them: the field name with its
first letter lower-cased).  Bad bytes raise :class:`segstore.errors.CorruptDataError`; bytes that end
inside a number, a uuid or a varint raise its subclass :class:`~segstore.errors.TruncatedDataError`
(where Java's ``ByteBuffer`` throws ``BufferUnderflowException``, which some callers catch apart; a
string's or bytes' body cut short is ``ByteBufferAccessor.readArray``'s plain ``RuntimeException``).
"""

from __future__ import annotations

import base64
import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from segstore.errors import CorruptDataError, TruncatedDataError
from segstore.javatext import java_utf8

from .varint import decode_unsigned_varint

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")
UUID_SIZE = 16
assert (INT8.size, INT16.size, UINT16.size, INT32.size, INT64.size, FLOAT64.size) == (1, 2, 2, 4, 8, 8)

_FIXED = {"int8": INT8, "int16": INT16, "uint16": UINT16, "int32": INT32, "int64": INT64, "float64": FLOAT64}
NO_VERSIONS = (1, 0)  # an empty range: "none"
#: The longest string the generated readers take (``string field X had invalid length``).
MAX_STRING_LENGTH = 0x7FFF


@functools.cache  # a handful of texts, asked for every field of every record read
def versions(text: str) -> tuple[int, int]:
    """A JSON definition's version range: ``"0+"``, ``"3"``, ``"0-4"``, ``"none"`` → (low, high)."""
    if text == "none":
        return NO_VERSIONS
    if text.endswith("+"):
        return int(text[:-1]), 0x7FFF
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def _in(version: int, span: tuple[int, int]) -> bool:
    return span[0] <= version <= span[1]


@dataclass(frozen=True)
class Field:
    """One field of a message definition (``type`` as in the JSON: ``int32``, ``string``, ``[]int32``,
    ``[]Name`` with ``fields`` for an array of structs)."""

    name: str
    type: str
    versions: str = "0+"
    nullable: str = "none"
    tag: int | None = None
    tagged: str = "none"
    default: Any = None
    fields: tuple[Field, ...] = ()

    @property
    def json_name(self) -> str:
        return self.name[:1].lower() + self.name[1:]


@dataclass(frozen=True)
class Schema:
    """One message definition: its name, ``apiKey`` (metadata records), valid and flexible versions."""

    name: str
    valid: str
    flexible: str
    fields: tuple[Field, ...]
    api_key: int | None = None

    def valid_versions(self) -> tuple[int, int]:
        return versions(self.valid)

    def is_flexible(self, version: int) -> bool:
        return _in(version, versions(self.flexible))


class _Reader:
    """A cursor over ``buf``; every read checks the bytes are there."""

    def __init__(self, buf: bytes | memoryview, path: str, base_pos: int) -> None:
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, bytes) else memoryview(buf)
        self.pos = 0
        self.path = path
        self.base_pos = base_pos

    def fail(self, what: str, found: str) -> CorruptDataError:
        return CorruptDataError(f"expected {what}, found {found}", self.path, self.base_pos + self.pos)

    def take(self, n: int, what: str, error: type[CorruptDataError] = CorruptDataError) -> memoryview:
        if self.pos + n > len(self.buf):
            raise error(f"expected {n} bytes of {what}, found {len(self.buf) - self.pos} left", self.path,
                        self.base_pos + self.pos)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def fixed(self, st: struct.Struct, what: str) -> Any:
        return st.unpack(self.take(st.size, what, TruncatedDataError))[0]

    def uvarint(self, what: str) -> int:
        try:
            value, end = decode_unsigned_varint(self.buf, self.pos)
        except IndexError as err:
            raise TruncatedDataError(f"expected an unsigned varint ({what}), found the bytes end inside it",
                                     self.path, self.base_pos + self.pos) from err
        except ValueError as err:
            raise self.fail(f"an unsigned varint ({what})", f"bad bytes ({err})") from err
        self.pos = end
        return value

    def length(self, flexible: bool, wide: bool, what: str, nullable: bool) -> int | None:
        """A string/bytes/array length; None for null (any negative length), where ``nullable``.

        :raises CorruptDataError: a null where the field is not nullable.
        """
        at = self.pos
        n = self.uvarint(what) - 1 if flexible else self.fixed(INT32 if wide else INT16, what)
        if n >= 0:
            return n
        if not nullable:
            raise CorruptDataError(f"expected a value of the non-nullable field {what}, found null ({n})",
                                   self.path, self.base_pos + at)
        return None

    def at_end(self) -> bool:
        return self.pos == len(self.buf)


def uuid_text(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _scalar(r: _Reader, kind: str, flexible: bool, what: str, nullable: bool = False) -> Any:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return r.fixed(fixed, what)
    if kind == "bool":
        return r.fixed(INT8, what) != 0
    if kind == "uuid":
        return uuid_text(bytes(r.take(UUID_SIZE, what, TruncatedDataError)))
    if kind == "string":
        n = r.length(flexible, False, what, nullable)
        if n is None:
            return None
        if n > MAX_STRING_LENGTH:
            raise r.fail(f"a string length of at most {MAX_STRING_LENGTH} ({what})", str(n))
        # Readable.readString: new String(bytes, UTF_8), which replaces malformed bytes and never throws
        return java_utf8(r.take(n, what))
    if kind in ("bytes", "records"):
        n = r.length(flexible, True, what, nullable)
        return None if n is None else base64.b64encode(bytes(r.take(n, what))).decode("ascii")
    raise ValueError(f"schema type {kind!r} is not supported")


def _value(r: _Reader, f: Field, version: int, flexible: bool) -> Any:
    nullable = _in(version, versions(f.nullable))
    if f.type.startswith("[]"):
        n = r.length(flexible, True, f.name, nullable)
        if n is None:
            return None
        if n > len(r.buf) - r.pos:  # every element takes at least one byte
            raise r.fail(f"an array count of at most {len(r.buf) - r.pos} ({f.name})", str(n))
        element = f.type[2:]
        if f.fields:
            return [_struct(r, f.fields, version, flexible) for _ in range(n)]
        # the generated readers read an array's strings and bytes as never null
        return [_scalar(r, element, flexible, f"{f.name} element") for _ in range(n)]
    if f.fields:    # a struct field: inline, as the generated readers read a non-nullable one
        return _struct(r, f.fields, version, flexible)
    return _scalar(r, f.type, flexible, f.name, nullable)


def _struct(r: _Reader, fields: Sequence[Field], version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for f in fields:
        if not _in(version, versions(f.versions)):
            continue
        if f.tag is not None and _in(version, versions(f.tagged)):
            tagged[f.tag] = f
            out[f.json_name] = f.default
            continue
        if not flexible and f.tag is not None:
            continue
        out[f.json_name] = _value(r, f, version, flexible)
    if flexible:
        unknown: list[dict[str, Any]] = []
        for _ in range(r.uvarint("tagged field count")):
            tag = r.uvarint("tag")
            size = r.uvarint("tagged field size")
            raw = r.take(size, f"tagged field {tag}")
            tf = tagged.get(tag)
            if tf is None:
                unknown.append({"tag": tag, "data": base64.b64encode(bytes(raw)).decode("ascii")})
                continue
            inner = _Reader(raw, r.path, r.base_pos + r.pos - size)
            out[tf.json_name] = _value(inner, tf, version, flexible)
            if not inner.at_end():
                raise inner.fail(
                    f"tagged field {tf.name} to fill its {size} bytes", f"{size - inner.pos} left"
                )
        if unknown:
            out["_unknownTaggedFields"] = unknown
    return out


def read(
    schema: Schema,
    buf: bytes | memoryview,
    version: int,
    *,
    path: str = "<memory>",
    base_pos: int = 0,
    whole: bool = True,
) -> tuple[dict[str, Any], int]:
    """Decode one ``schema`` message of ``version`` from the start of ``buf``; returns it and the bytes used.

    :param whole: the message must fill ``buf``, as ``AbstractApiMessageSerde.read`` requires of a metadata
        record (``Found N byte(s) of garbage after ...``); the coordinators' readers
        (``GroupMetadataManager.readOffsetMessageValue``, ``TransactionLog.readTxnRecordValue``,
        ``CoordinatorRecordSerde.readMessage``, Kafka 3.8.0) read the fields and never look at what
        follows: read their records with False.
    :raises CorruptDataError: a version the schema does not define, or bytes that do not fit it
        (:class:`~segstore.errors.TruncatedDataError`: bytes that end before the message does).
    """
    r = _Reader(buf, path, base_pos)
    if not _in(version, schema.valid_versions()):
        raise r.fail(f"a {schema.name} version in {schema.valid}", str(version))
    data = _struct(r, schema.fields, version, schema.is_flexible(version))
    if whole and not r.at_end():
        raise r.fail(f"the end of the {schema.name} v{version}", f"{len(r.buf) - r.pos} more bytes")
    return data, r.pos


def read_uvarint(
    buf: bytes | memoryview,
    pos: int,
    *,
    path: str = "<memory>",
    base_pos: int = 0,
    what: str = "an unsigned varint",
) -> tuple[int, int]:
    """An unsigned varint at ``pos``; returns (value, next position)."""
    r = _Reader(buf, path, base_pos)
    r.pos = pos
    return r.uvarint(what), r.pos


def read_int16(
    buf: bytes | memoryview, pos: int, *, path: str = "<memory>", base_pos: int = 0, what: str = "an int16"
) -> int:
    """The big-endian int16 at ``pos``."""
    r = _Reader(buf, path, base_pos)
    r.pos = pos
    return r.fixed(INT16, what)
