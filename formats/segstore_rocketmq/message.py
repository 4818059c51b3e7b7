"""The RocketMQ commitlog message codec: bytes in, records out, no files.

One stored message (``CommitLog.calMsgLength``; every integer big-endian, signed)::

    offset  bytes   field
    0       4       TOTALSIZE                 the whole message, this field included
    4       4       MAGICCODE                 0xDAA320A7 (v1) / 0xDAA320AB (v2: 2-byte topic length)
    8       4       BODYCRC                   zlib.crc32(body) & 0x7FFFFFFF
    12      4       QUEUEID
    16      4       FLAG                      the producer's flag
    20      8       QUEUEOFFSET               logical offset in the consume queue
    28      8       PHYSICALOFFSET            this message's commitlog offset
    36      4       SYSFLAG                   see the SYSFLAG_* bits
    40      8       BORNTIMESTAMP
    48      8|20    BORNHOST                  IPv4 (4) or IPv6 (16, sysFlag 0x10) address + int port
    ..      8       STORETIMESTAMP
    ..      8|20    STOREHOST                 IPv6 when sysFlag has 0x20
    ..      4       RECONSUMETIMES
    ..      8       PREPAREDTRANSACTIONOFFSET
    ..      4+n     BODYLENGTH, BODY
    ..      1+n     TOPICLENGTH (2 in v2), TOPIC
    ..      2+n     PROPERTIESLENGTH, PROPERTIES   NAME 0x01 VALUE 0x02 ... (trailing 0x02: see below)

Whether the properties end with a 0x02 depends on the broker version that wrote
them (``MessageDecoder.messageProperties2String``): up to 4.9.0 and again from
5.2.0 every pair is followed by 0x02; 4.9.1 to 5.1.4 delete the last one.  Decoding
accepts both and records which one a message has (``trailing_separator``);
encoding writes what the message says.

At the end of a commitlog file that cannot hold the next message the store writes
a BLANK record ``[int remaining][int 0xCBD43194]`` and the rest of the file is
unused.  :func:`decode` returns :data:`BLANK` for it; a zero TOTALSIZE with a zero
magic is the unwritten tail (:data:`END`).

The header from TOTALSIZE to BODYLENGTH is one ``struct.Struct`` per combination of
host address families (:data:`HEADERS`), so encoding a message is one ``pack`` and
one ``bytes.join``.  Functions here are pure and thread-safe.
"""

from __future__ import annotations

import base64
import ipaddress
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from segstore.errors import CorruptDataError, InvalidMessageError, InvalidTopicError, TruncatedDataError, cut
from segstore.javatext import JAVA_REPLACE
from segstore.records import CREATE_TIME, Header, Record

from .javacompat import java_host

MESSAGE_MAGIC = -626843481        # 0xDAA320A7
MESSAGE_MAGIC_V2 = -626843477     # 0xDAA320AB: topic length is 2 bytes
BLANK_MAGIC = -875286124          # 0xCBD43194

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_TRANSACTION_ROLLBACK = 0xC
SYSFLAG_TRANSACTION_MASK = 0xC
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_HOST_MASK = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6

#: The stored CRC is the zlib CRC-32 with the sign bit cleared (``UtilAll.crc32``).
BODY_CRC_MASK = 0x7FFFFFFF
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_SEPARATOR_BYTE = 0x02
PROPERTY_SEPARATOR_BYTES = PROPERTY_SEPARATOR.encode()
NAME_VALUE_SEPARATOR_BYTES = NAME_VALUE_SEPARATOR.encode()
MAX_PROPERTIES_BYTES = 0x7FFF     # the length is a signed short
MAX_TOPIC_BYTES_V1 = 0x7F         # the length is a signed byte
#: The highest queue id a store takes.  QUEUEID is an int, but the topic's queue count, queue id + 1,
#: goes to ``readQueueNums``/``writeQueueNums`` in ``config/topics.json``, Java ints too: with
#: 2147483647 the count overflows and the broker's ``TopicConfigManager`` load (fastjson) refuses
#: the file.
MAX_QUEUE_ID = 0x7FFFFFFE

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
KEY_SEPARATOR = " "

#: ``[int total size][int magic]``: the start of every record, BLANK included.
PREFIX = struct.Struct(">ii")
assert PREFIX.size == 8
#: The BLANK record that fills the end of a commitlog file: ``[int size to the file's end][int BLANK_MAGIC]``.
BLANK = PREFIX
#: A message needs its size plus this much room left in its file (``CommitLog.END_FILE_MIN_BLANK_LENGTH``),
#: else a BLANK fills the rest of the file and the message opens the next one.
END_FILE_MIN_BLANK_LENGTH = BLANK.size

#: The one description of the message header, TOTALSIZE to BODYLENGTH: ``(field, struct code)``.
#: A host is ``4si`` (IPv4) or ``16si`` (IPv6, by its sysFlag bit): :data:`HOST`.
HOST = "host"
HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("TOTALSIZE", "i"),
    ("MAGICCODE", "i"),
    ("BODYCRC", "i"),
    ("QUEUEID", "i"),
    ("FLAG", "i"),
    ("QUEUEOFFSET", "q"),
    ("PHYSICALOFFSET", "q"),
    ("SYSFLAG", "i"),
    ("BORNTIMESTAMP", "q"),
    ("BORNHOST", HOST),
    ("STORETIMESTAMP", "q"),
    ("STOREHOST", HOST),
    ("RECONSUMETIMES", "i"),
    ("PREPAREDTRANSACTIONOFFSET", "q"),
    ("BODYLENGTH", "i"),
)
_HOST_FORMAT = {False: "4si", True: "16si"}


def _fields_format(fields: tuple[tuple[str, str], ...], born_v6: bool = False, store_v6: bool = False) -> str:
    hosts = iter((_HOST_FORMAT[born_v6], _HOST_FORMAT[store_v6]))
    return ">" + "".join(next(hosts) if code == HOST else code for _, code in fields)


def _position(name: str) -> int:
    """The byte position of a header field before the first host (the same for every host family)."""
    names = [n for n, _ in HEADER_FIELDS]
    return struct.calcsize(_fields_format(HEADER_FIELDS[:names.index(name)]))


#: The fields before the born host.
FIXED = struct.Struct(_fields_format(HEADER_FIELDS[:9]))
assert FIXED.size == 48
QUEUE_OFFSET_POS = _position("QUEUEOFFSET")
PHYSICAL_OFFSET_POS = _position("PHYSICALOFFSET")
SYSFLAG_POS = _position("SYSFLAG")
assert (QUEUE_OFFSET_POS, PHYSICAL_OFFSET_POS, SYSFLAG_POS) == (20, 28, 36)
#: QUEUEOFFSET and PHYSICALOFFSET, side by side: what an append fills in once the batch is placed.
OFFSETS = struct.Struct(">qq")
assert QUEUE_OFFSET_POS + OFFSETS.size // 2 == PHYSICAL_OFFSET_POS

IPV4_HOST = struct.Struct(">" + _HOST_FORMAT[False])
IPV6_HOST = struct.Struct(">" + _HOST_FORMAT[True])
assert (IPV4_HOST.size, IPV6_HOST.size) == (8, 20)

#: Header structs (TOTALSIZE .. BODYLENGTH) keyed by the sysFlag host bits.
HEADERS: dict[int, struct.Struct] = {
    (SYSFLAG_BORNHOST_V6 if born else 0) | (SYSFLAG_STOREHOST_V6 if store else 0):
        struct.Struct(_fields_format(HEADER_FIELDS, born, store))
    for born in (False, True) for store in (False, True)
}
assert HEADERS[0].size == 88 and HEADERS[SYSFLAG_HOST_MASK].size == 112
TOPIC_LENGTH_V1 = struct.Struct(">b")
TOPIC_LENGTH_V2 = struct.Struct(">h")
PROPERTIES_LENGTH = struct.Struct(">h")
BODY_LENGTH = struct.Struct(">i")
MSG_ID_OFFSET = struct.Struct(">q")
#: SYSFLAG (at SYSFLAG_POS) and STORETIMESTAMP (after the born host), read alone (store_timestamp_at)
SYSFLAG = struct.Struct(">i")
STORE_TIMESTAMP = struct.Struct(">q")
assert (TOPIC_LENGTH_V1.size, TOPIC_LENGTH_V2.size) == (1, 2)
assert (PROPERTIES_LENGTH.size, MSG_ID_OFFSET.size) == (2, 8)
#: The range of each integer struct code of :data:`HEADER_FIELDS`.
_RANGES = {"i": (-(1 << 31), (1 << 31) - 1), "q": (-(1 << 63), (1 << 63) - 1)}


class Host(NamedTuple):
    """A socket address as stored: the packed IP (4 or 16 bytes) and the port."""

    ip: bytes
    port: int

    @property
    def is_v6(self) -> bool:
        return len(self.ip) == 16

    @classmethod
    def parse(cls, text: str) -> Host:
        """``"ip:port"`` or ``"[v6]:port"`` (any IPv6 spelling) as a :class:`Host`.

        An IPv4-mapped IPv6 address (``[::ffff:a.b.c.d]:port``) is the IPv4 host, 4 bytes (and no
        v6 sysFlag bit when stored): Java's ``InetAddress`` turns such an address into an
        ``Inet4Address``, so a broker never stores one as 16 bytes, and its ``MessageDecoder``
        (4.9.7 ``decodeMessage``: ``InetAddress.getByAddress``) reads those 16 bytes as the IPv4 host.

        :raises InvalidMessageError: not an address with a port in 0..65535.
        """
        if not isinstance(text, str):
            raise InvalidMessageError(f"expected a host as 'ip:port' or '[ipv6]:port', found {cut(text)}")
        addr, _, port_text = text.rpartition(":")
        if addr.startswith("[") and addr.endswith("]"):
            addr = addr[1:-1]
        try:
            address = ipaddress.ip_address(addr)
            if address.version == 6 and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            ip = address.packed
            port = int(port_text)
        except ValueError as err:
            raise InvalidMessageError(f"expected a host as 'ip:port' or '[ipv6]:port', found {text!r} ({err})"
                                      ) from err
        if not 0 <= port <= 0xFFFF:
            raise InvalidMessageError(f"expected a port in 0..65535, found {port} in {text!r}")
        return cls(ip, port)

    def __str__(self) -> str:
        """As the broker prints it: ``ip:port``, IPv6 in full as ``[a:b:..:h]:port``."""
        text = java_host(ipaddress.ip_address(self.ip))
        return f"[{text}]:{self.port}" if self.is_v6 else f"{text}:{self.port}"


#: ``0.0.0.0:0``: the host fields of a message built without hosts.
NO_HOST = Host(bytes(4), 0)


class Blank(NamedTuple):
    """The end-of-file filler: ``size`` bytes to the end of the commitlog file."""

    size: int


class End(NamedTuple):
    """Unwritten space (a zero size and magic): nothing more in this file."""


#: The two non-message results of :func:`decode`.
END = End()


@dataclass(slots=True)
class RocketMQMessage(Record):
    """One commitlog message with every stored field, and the common :class:`segstore.records.Record`
    fields over them: ``partition`` the queue id, ``offset`` the queue offset, ``timestamp`` the born
    timestamp, ``key`` the first ``KEYS`` token, ``value`` the body, ``headers`` the properties.

    ``properties`` keeps the stored order (encoding writes them in dict order).
    ``magic`` is :data:`MESSAGE_MAGIC` or :data:`MESSAGE_MAGIC_V2`.
    """

    topic: str
    queue_id: int
    body: bytes = b""
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    queue_offset: int = 0
    physical_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = NO_HOST
    store_timestamp: int = 0
    store_host: Host = NO_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    size: int = 0
    body_crc: int = 0
    magic: int = MESSAGE_MAGIC
    #: the stored properties end with 0x02 (brokers up to 4.9.0 and from 5.2.0 write them so)
    trailing_separator: bool = False
    #: the stored topic bytes where they are not UTF-8 (``topic`` then is Java's text of them, a U+FFFD
    #: for each malformed sequence: :func:`decode`), else None; not compared: what the broker reads is
    stored_topic: bytes | None = field(default=None, compare=False, repr=False)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        """The ``KEYS`` property split on spaces, empty tokens dropped (as the broker indexes them)."""
        raw = self.properties.get(PROPERTY_KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @property
    def msg_id(self) -> str:
        return msg_id(self.store_host, self.physical_offset)

    # -- the common record (segstore.records.Record) --------------------------------------------
    @property
    def partition(self) -> int:
        return self.queue_id

    @property
    def offset(self) -> int:
        return self.queue_offset

    @property
    def timestamp(self) -> int:
        return self.born_timestamp

    @property
    def timestamp_type(self) -> str:
        return CREATE_TIME

    @property
    def key(self) -> bytes | None:
        keys = self.keys
        return keys[0].encode("utf-8", "surrogatepass") if keys else None

    @property
    def value(self) -> bytes:
        return self.body

    @property
    def headers(self) -> list[Header]:
        return [(k, v.encode("utf-8", "surrogatepass")) for k, v in self.properties.items()]

    @property
    def extras(self) -> Mapping[str, Any]:
        """The RocketMQ fields: those of a ``dump --json`` object beyond the common ones."""
        return {"physical_offset": self.physical_offset, "size": self.size, "body_crc": self.body_crc,
                "flag": self.flag, "sys_flag": self.sys_flag, "born_timestamp": self.born_timestamp,
                "born_host": str(self.born_host), "store_timestamp": self.store_timestamp,
                "store_host": str(self.store_host), "reconsume_times": self.reconsume_times,
                "prepared_transaction_offset": self.prepared_transaction_offset,
                "properties": dict(self.properties), "tags": self.tags, "msg_id": self.msg_id,
                "magic": self.magic}


#: The transaction types of messages no consume queue holds (``CommitLogDispatcherBuildConsumeQueue``):
#: prepared and rolled-back ones, which no consumer is given.
NO_QUEUE_ENTRY = (SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)


def has_queue_entry(sys_flag: int) -> bool:
    """Whether the broker writes a consume-queue entry (not for prepared/rollback transactions)."""
    return sys_flag & SYSFLAG_TRANSACTION_MASK not in NO_QUEUE_ENTRY


def body_crc(body: bytes) -> int:
    """The stored body CRC: ``CRC32(body) & 0x7FFFFFFF`` (zlib's C implementation)."""
    return zlib.crc32(body) & BODY_CRC_MASK


_U64_MASK = (1 << 64) - 1


@lru_cache(maxsize=256)
def _msg_id_prefix(store_host: Host) -> str:
    return (store_host.ip + BODY_LENGTH.pack(store_host.port)).hex().upper()


#: Hex lengths of an offset msgId: IPv4 (4 + 4 + 8 bytes) and IPv6 (16 + 4 + 8) store hosts.
OFFSET_MSG_ID_LENGTHS = (32, 56)


def msg_id(store_host: Host, physical_offset: int) -> str:
    """Uppercase hex of store IP + int port + long physical offset (32 or 56 characters)."""
    return _msg_id_prefix(store_host) + format(physical_offset & _U64_MASK, "016X")


def encode_properties(properties: dict[str, str], trailing_separator: bool = False) -> bytes:
    """``NAME 0x01 VALUE 0x02 ...`` UTF-8, with or without a 0x02 after the last pair.

    ``trailing_separator`` picks the broker version's style (see the module
    docstring); an empty map is ``b""`` in both.

    The separators are checked by counting them in the joined string (C speed).  A value may hold
    0x01: RocketMQ 4.9.7 does not escape (``MessageDecoder.messageProperties2String``) and reads a
    value as everything after its item's *first* 0x01 (``string2messageProperties``), so such a
    value is stored and read back as it was, by the broker (which rebuilds the producer's map that
    way before it stores it) and by segstore.  A name holding 0x01 (read back cut there, the rest
    going to the value) and 0x02 anywhere (which splits the item) are what the format cannot carry.

    :raises InvalidMessageError: a name holds 0x01/0x02 or a value 0x02, or the result exceeds
        32767 bytes.
    """
    if not properties:
        return b""
    text = PROPERTY_SEPARATOR.join([f"{name}{NAME_VALUE_SEPARATOR}{value}"
                                    for name, value in properties.items()])
    n = len(properties)
    if text.count(PROPERTY_SEPARATOR) != n - 1 or (
            text.count(NAME_VALUE_SEPARATOR) != n and any(NAME_VALUE_SEPARATOR in k for k in properties)):
        bad = next(t for item in properties.items() for i, t in enumerate(item)
                   if PROPERTY_SEPARATOR in t or (i == 0 and NAME_VALUE_SEPARATOR in t))
        raise InvalidMessageError(
            f"expected property names without the separators 0x01/0x02 and values without 0x02, "
            f"found {bad!r}")
    if trailing_separator:
        text += PROPERTY_SEPARATOR
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > MAX_PROPERTIES_BYTES:
        raise InvalidMessageError(f"expected properties of at most {MAX_PROPERTIES_BYTES} bytes, "
                                  f"found {len(data)}")
    return data


def empty_property(name: str, value: str, where: str = "") -> InvalidMessageError:
    """A property with an empty name or value, refused by every append (``append``, ``append_arrow``,
    a ``dump --json`` line): RocketMQ 4.9.7 ``MessageDecoder.string2messageProperties`` drops such a pair
    (``kvSepIndex > index && kvSepIndex < newIndex - 1``), so no consumer, scan or dump would see it,
    and ``Message.putUserProperty`` refuses a blank name or value.  (``append_stored`` of a converted
    store's messages keeps such a pair byte for byte: a batch send stores the client's properties as
    sent, ``CommitLog.MessageExtBatchEncoder``.)  ``where``: the row, for an Arrow append."""
    found = f"a property with an empty name (value {cut(value)})" if not name else \
        f"the property {cut(name)} with an empty value"
    return InvalidMessageError("expected property names and values that are not empty (the broker's "
                               f"MessageDecoder drops such a pair), found {found}{where}")


def stored_topic_field(msg: RocketMQMessage) -> dict[str, str]:
    """``{"topic_base64": ...}``, the stored bytes of ``msg``'s topic where they are not UTF-8 (its
    ``topic`` is Java's text of them: two such topics of other bytes read alike), else ``{}``: what a
    ``dump --json`` line carries so that it says which bytes the store holds.  No broker stores such a
    topic (4.9.7 ``TopicValidator``), so ``write --input`` refuses the line, naming them."""
    raw = msg.stored_topic
    return {} if raw is None else {"topic_base64": base64.b64encode(raw).decode("ascii")}


class JavaProperties(dict[str, str]):
    """Properties whose stored bytes are not UTF-8, read as the broker reads them (``java_text`` of
    :func:`decode_properties`), keeping those bytes: ``raw``.  A dict everywhere (what a Java reader
    sees); what wants the bytes as stored (``dump --json``'s ``properties_base64``, :func:`encode`
    writing a stored message again) asks :func:`stored_properties_of`."""

    raw: bytes


def stored_properties_of(properties: Mapping[str, str]) -> bytes | None:
    """The stored bytes ``properties`` were read from where they are not UTF-8 (a :class:`JavaProperties`
    that still reads as those bytes read: not changed since, and within :data:`MAX_PROPERTIES_BYTES`),
    else None (their text is what is written).  ``O(len(raw))`` for such properties, ``O(1)`` else."""
    if type(properties) is not JavaProperties:
        return None
    raw = properties.raw
    if len(raw) > MAX_PROPERTIES_BYTES or \
            list(decode_properties(raw, java_text=True).items()) != list(properties.items()):
        return None
    return raw


def java_properties_of(raw: bytes, properties: Mapping[str, str], what: str) -> JavaProperties:
    """Stored properties bytes given beside their text (``what`` names them: a dump line's
    ``properties_base64``, a row's ``propertiesBytes``), kept to be written as they are
    (:func:`stored_properties_of`): they must read as ``properties`` as RocketMQ 4.9.7 reads them
    (``CommitLog.checkMessageAndReturnSize``: ``new String(bytes, UTF_8)``, then
    ``MessageDecoder.string2messageProperties``), in their order.  ``O(len(raw))``.

    :raises InvalidMessageError: bytes that are UTF-8 (their text says all: none is given for them) or
        that read as other properties, or more than the format holds.
    """
    read = decode_properties(raw, java_text=True)
    if type(read) is not JavaProperties or list(read.items()) != list(properties.items()):
        raise InvalidMessageError(f"expected {what} of bytes that are not UTF-8 and read as its properties "
                                  f"{cut(dict(properties))}, found {cut(read)}")
    if len(raw) > MAX_PROPERTIES_BYTES:
        raise InvalidMessageError(f"expected properties of at most {MAX_PROPERTIES_BYTES} bytes, "
                                  f"found {len(raw)}")
    return read


def stored_property_values(properties: Mapping[str, str]) -> dict[str, tuple[bytes, bytes]] | None:
    """Each property's name and value as stored, by its name as the broker reads it, where
    ``properties`` were read from bytes that are not UTF-8 (:func:`stored_properties_of`), else None.
    The stored bytes split as :func:`decode_properties` splits their text (0x01 and 0x02 are ASCII: no
    malformed sequence takes one in), so the names and pairs kept are the same.  ``O(len(raw))``."""
    raw = stored_properties_of(properties)
    if raw is None:
        return None
    values: dict[str, tuple[bytes, bytes]] = {}
    for item in raw.split(PROPERTY_SEPARATOR_BYTES):
        name, _, value = item.partition(NAME_VALUE_SEPARATOR_BYTES)
        if name and value:
            values[bytes(name).decode("utf-8", JAVA_REPLACE)] = (name, value)
    return values


def encode_property_bytes(pairs: Sequence[tuple[bytes, bytes]], trailing_separator: bool = False) -> bytes:
    """:func:`encode_properties` of names and values given as bytes (stored bytes, which need not be
    UTF-8: RocketMQ 4.9.7 ``CommitLog.MessageExtBatchEncoder`` stores a batch's properties as the client
    sent them), with the same checks.

    :raises InvalidMessageError: a name holds 0x01/0x02 or a value 0x02, or the result exceeds 32767
        bytes.
    """
    for name, value in pairs:
        if NAME_VALUE_SEPARATOR_BYTES in name or PROPERTY_SEPARATOR_BYTES in name or \
                PROPERTY_SEPARATOR_BYTES in value:
            raise InvalidMessageError(
                f"expected property names without the separators 0x01/0x02 and values without 0x02, "
                f"found {cut(name if PROPERTY_SEPARATOR_BYTES not in value else value)}")
    data = PROPERTY_SEPARATOR_BYTES.join([name + NAME_VALUE_SEPARATOR_BYTES + value for name, value in pairs])
    if trailing_separator and pairs:
        data += PROPERTY_SEPARATOR_BYTES
    if len(data) > MAX_PROPERTIES_BYTES:
        raise InvalidMessageError(f"expected properties of at most {MAX_PROPERTIES_BYTES} bytes, "
                                  f"found {len(data)}")
    return data


def decode_properties(data: bytes | memoryview, *, every_pair: bool = False,
                      java_text: bool = False) -> dict[str, str]:
    """The inverse of :func:`encode_properties` (stored order kept; either style), read as the
    broker reads it (RocketMQ 4.9.7 ``MessageDecoder.string2messageProperties``): an item is kept
    only where its first 0x01 has a name before it and a value after it (``kvSepIndex > index &&
    kvSepIndex < newIndex - 1``), so an item without a separator (the empty one after a trailing
    0x02 among them), with an empty name or with an empty value is skipped; a name given again
    takes the later value.

    ``every_pair``: every item with a separator kept, empty name or value too (the pairs as
    written, to write them again byte for byte: not what a reader shows).  ``java_text``: bytes that
    are not UTF-8 read as the broker reads them (``new String(bytes, UTF_8)`` in
    ``CommitLog.checkMessageAndReturnSize``: a U+FFFD for each malformed sequence, a surrogate's three
    bytes ``ED A0 80`` too) rather than refused, in a :class:`JavaProperties` keeping the bytes.

    :raises UnicodeDecodeError: without ``java_text``, bytes that are not UTF-8.
    """
    if not data:
        return {}
    raw = bytes(data)
    props: dict[str, str]
    try:
        text = raw.decode("utf-8")
        props = {}
    except UnicodeDecodeError:
        if not java_text:
            raise
        text = raw.decode("utf-8", JAVA_REPLACE)
        props = JavaProperties()
        props.raw = raw
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if (name and value) or (every_pair and sep):    # (an empty value also stands for no separator)
            props[name] = value
    return props


def encode_topic(topic: str, magic: int = MESSAGE_MAGIC) -> bytes:
    """The topic with its length field (1 byte in v1, 2 in v2).  Cached (a store has few topics).

    :raises InvalidTopicError: too long for the length field.
    """
    if type(topic) is not str:
        raise InvalidTopicError(f"expected a topic as a string, found {type(topic).__name__}")
    return _topic_field(topic, magic)


@lru_cache(maxsize=4096)
def _topic_field(topic: str, magic: int) -> bytes:
    try:
        data = topic.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidTopicError(f"expected a topic of UTF-8 text, found {cut(topic)}") from err
    if magic == MESSAGE_MAGIC:
        if len(data) > MAX_TOPIC_BYTES_V1:
            raise InvalidTopicError(f"expected a topic of at most {MAX_TOPIC_BYTES_V1} bytes for message "
                                    f"magic v1, found {len(data)}")
        return TOPIC_LENGTH_V1.pack(len(data)) + data
    if len(data) > MAX_PROPERTIES_BYTES:
        raise InvalidTopicError(f"expected a topic of at most {MAX_PROPERTIES_BYTES} bytes, "
                                f"found {len(data)}")
    return TOPIC_LENGTH_V2.pack(len(data)) + data


def magic_for(topic: str, *, writes_v2: bool) -> int:
    """The message version the broker stores a topic's messages as (``CommitLog.asyncPutMessage``,
    rocketmq-all-5.1.0 to 5.3.0): ``MESSAGE_VERSION_V2`` when ``autoMessageVersionOnTopicLen`` and
    ``topic.length() > Byte.MAX_VALUE`` (UTF-16 units; topics are ASCII), else v1."""
    return MESSAGE_MAGIC_V2 if writes_v2 and len(topic) > MAX_TOPIC_BYTES_V1 else MESSAGE_MAGIC


def host_flags(born_host: Host, store_host: Host) -> int:
    """The sysFlag host bits the addresses' families call for."""
    return (SYSFLAG_BORNHOST_V6 if born_host.is_v6 else 0) | (SYSFLAG_STOREHOST_V6 if store_host.is_v6 else 0)


def encoded_size(body_len: int, topic_field_len: int, properties_len: int, sys_flag: int) -> int:
    """``calMsgLength``: the stored size for these field lengths (topic field includes its length)."""
    return (HEADERS[sys_flag & SYSFLAG_HOST_MASK].size + body_len + topic_field_len
            + PROPERTIES_LENGTH.size + properties_len)


def _header_values(msg: RocketMQMessage, crc: int) -> tuple[Any, ...]:
    """The values of :data:`HEADER_FIELDS` in order (a host is two values: IP, port)."""
    return (msg.size, msg.magic, crc, msg.queue_id, msg.flag, msg.queue_offset, msg.physical_offset,
            msg.sys_flag, msg.born_timestamp, msg.born_host.ip, msg.born_host.port, msg.store_timestamp,
            msg.store_host.ip, msg.store_host.port, msg.reconsume_times, msg.prepared_transaction_offset,
            len(msg.body))


def _field_problem(msg: RocketMQMessage, crc: int) -> str:
    """What in ``msg`` its header cannot hold (checked field by field against :data:`HEADER_FIELDS`)."""
    values = iter((msg.size, msg.magic, crc, msg.queue_id, msg.flag, msg.queue_offset, msg.physical_offset,
                   msg.sys_flag, msg.born_timestamp, msg.born_host, msg.store_timestamp, msg.store_host,
                   msg.reconsume_times, msg.prepared_transaction_offset, len(msg.body)))
    for name, code in HEADER_FIELDS:
        value = next(values)
        if code == HOST:
            if not isinstance(value, Host) or type(value.ip) is not bytes or len(value.ip) not in (4, 16):
                return f"expected {name} as a Host of a 4- or 16-byte IP and a port, found {cut(value)}"
            value, code = value.port, "i"
            name += " port"
        lo, hi = _RANGES[code]
        if type(value) is not int:
            return f"expected {name} as an int, found {type(value).__name__} {cut(value)}"
        if not lo <= value <= hi:
            return f"expected {name} in [{lo}, {hi}], found {cut(value)}"
    return "expected a message the header can hold, found one it cannot"


def encode(msg: RocketMQMessage) -> bytearray:
    """The stored bytes of ``msg`` (the reference encoder; every append writes these bytes).

    Sets ``msg.size``, ``msg.body_crc`` and the host bits of ``msg.sys_flag``;
    QUEUEOFFSET and PHYSICALOFFSET are written as the message says (an append
    encodes first, then fills them in with :func:`set_offsets`).  A bytearray, so
    they can be.  Runtime complexity: ``O(size)`` (the CRC and one join).

    :raises InvalidMessageError: a magic other than v1's and v2's, a field out of its range (a 32-bit
        field outside ``[-2**31, 2**31)``, a 64-bit one outside ``[-2**63, 2**63)``, a host of the
        wrong length, a body that is not bytes) or properties the format cannot
        carry; nothing of ``msg`` is changed then.  (Which values a store accepts,
        a queue id >= 0 among them, is the store's policy.)
    :raises InvalidTopicError: a topic too long for its length field.
    """
    if msg.magic != MESSAGE_MAGIC and msg.magic != MESSAGE_MAGIC_V2:     # a layout the readers know
        raise InvalidMessageError(f"expected message magic 0x{MESSAGE_MAGIC & 0xFFFFFFFF:08X} (v1) or "
                                  f"0x{MESSAGE_MAGIC_V2 & 0xFFFFFFFF:08X} (v2), found {cut(msg.magic)}")
    topic_field = encode_topic(msg.topic, msg.magic)
    # properties read from bytes that are not UTF-8 are written as those bytes (a store copied byte for
    # byte), not as Java's text of them (EF BF BD for each U+FFFD)
    properties = stored_properties_of(msg.properties)
    if properties is None:
        properties = encode_properties(msg.properties, msg.trailing_separator)
    body = msg.body
    if type(body) is not bytes:
        raise InvalidMessageError(f"expected a body as bytes, found {type(body).__name__}")
    old = msg.sys_flag, msg.size
    crc = body_crc(body)
    parts: list[bytes] | None = None
    try:
        msg.sys_flag = (msg.sys_flag & ~SYSFLAG_HOST_MASK) | host_flags(msg.born_host, msg.store_host)
        msg.size = encoded_size(len(body), len(topic_field), len(properties), msg.sys_flag)
        parts = encode_parts(msg, topic_field, properties, crc)
        # "4s"/"16s" pad or cut an IP of another length without a word: checked here
        if len(msg.born_host.ip) not in (4, 16) or len(msg.store_host.ip) not in (4, 16):
            parts = None
    except (struct.error, TypeError, AttributeError):
        parts = None
    if parts is None:
        msg.sys_flag, msg.size = old
        raise InvalidMessageError(_field_problem(msg, crc))
    msg.body_crc = crc
    return bytearray().join(parts)


def encode_parts(msg: RocketMQMessage, topic_field: bytes, properties: bytes, crc: int) -> list[bytes]:
    """The layout of :data:`HEADER_FIELDS` filled from ``msg`` as it is, then body, topic, properties.

    The layer under :func:`encode`, which checks the fields and computes size and
    CRC first; alone only for tests that store what an append would refuse.

    :raises struct.error: a field out of its range.
    """
    return [HEADERS[msg.sys_flag & SYSFLAG_HOST_MASK].pack(*_header_values(msg, crc)), msg.body, topic_field,
            PROPERTIES_LENGTH.pack(len(properties)), properties]


def set_offsets(data: bytearray, queue_offset: int, physical_offset: int, at: int = 0) -> None:
    """Fill in QUEUEOFFSET and PHYSICALOFFSET of the encoded message at ``data[at:]``."""
    OFFSETS.pack_into(data, at + QUEUE_OFFSET_POS, queue_offset, physical_offset)


def store_timestamp_at(data: bytes | bytearray | memoryview, at: int = 0) -> int:
    """STORETIMESTAMP of the encoded message at ``data[at:]``: after the born host, 4 or 16 bytes of
    address by its sysFlag bit (4.9.7 ``CommitLog.isMappedFileMatchedRecover``, ``pickupStoreTimestamp``)."""
    sys_flag = SYSFLAG.unpack_from(data, at + SYSFLAG_POS)[0]
    host = IPV6_HOST if sys_flag & SYSFLAG_BORNHOST_V6 else IPV4_HOST
    return int(STORE_TIMESTAMP.unpack_from(data, at + FIXED.size + host.size)[0])


def blank_record(size: int) -> bytes:
    """The BLANK record filling the last ``size`` bytes of a commitlog file."""
    return BLANK.pack(size, BLANK_MAGIC)


def _read_host(buf: memoryview, pos: int, v6: bool) -> tuple[Host, int]:
    layout = IPV6_HOST if v6 else IPV4_HOST
    ip, port = layout.unpack_from(buf, pos)
    return Host(ip, port), pos + layout.size


def decode(buf: bytes | memoryview, pos: int = 0, *, path: str | None = None, base_pos: int = 0,
           check_crc: bool = True, java_text: bool = True) -> RocketMQMessage | Blank | End:
    """The record at ``buf[pos:]``: a message, a :class:`Blank` or :data:`END`.

    ``path`` and ``base_pos`` (the file position of ``buf[0]``) only name the
    place in errors.  ``java_text``: properties and a topic that are not UTF-8 read as the broker
    reads them (:func:`decode_properties`; RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` and
    ``MessageDecoder.decode`` read both as ``new String(bytes, UTF_8)``, a U+FFFD for each malformed
    sequence, and keep such a message); False refuses them, as the C walk does
    (``columnar.decode_region``, whose callers build such a message's row with
    :func:`.columnar.java_row`).  Runtime complexity: ``O(size)``
    (the CRC).

    :raises TruncatedDataError: the record runs past the end of ``buf``.
    :raises CorruptDataError: an unknown magic, inconsistent lengths or a CRC mismatch.
    """
    buf = memoryview(buf)
    where = base_pos + pos
    if len(buf) - pos < PREFIX.size:
        if any(buf[pos:]):
            raise TruncatedDataError(f"expected a record header of {PREFIX.size} bytes, "
                                     f"found {len(buf) - pos} bytes", path, where)
        return END
    total, magic = PREFIX.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return Blank(total)
    if magic not in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2):
        if total == 0 and magic == 0:
            return END
        raise CorruptDataError(f"expected message magic 0xDAA320A7, 0xDAA320AB or BLANK 0xCBD43194, "
                               f"found 0x{magic & 0xFFFFFFFF:08X}", path, where + PREFIX.size // 2)
    if total < HEADERS[0].size:
        raise CorruptDataError(f"expected a message size of at least {HEADERS[0].size}, found {total}",
                               path, where)
    if total > len(buf) - pos:
        raise TruncatedDataError(f"expected a message of {total} bytes, found {len(buf) - pos} bytes left",
                                 path, where)
    try:
        return _decode_message(buf, pos, total, magic, check_crc, java_text)
    except (struct.error, UnicodeDecodeError, ValueError) as err:
        raise CorruptDataError(f"expected a well-formed message of {total} bytes, found {err}",
                               path, where) from err


def stored_properties(buf: bytes | memoryview, pos: int) -> bytes:
    """The PROPERTIES bytes of the message at ``buf[pos:]``, as stored (one :func:`decode` read
    whole: its lengths are not checked again).  ``O(its header)``."""
    view = memoryview(buf)[pos:]
    total, magic = PREFIX.unpack_from(view, 0)
    header = HEADERS[FIXED.unpack_from(view, 0)[7] & SYSFLAG_HOST_MASK]
    p = header.size + header.unpack_from(view, 0)[16]
    topic_len_layout = TOPIC_LENGTH_V1 if magic == MESSAGE_MAGIC else TOPIC_LENGTH_V2
    p += topic_len_layout.size + topic_len_layout.unpack_from(view, p)[0] + PROPERTIES_LENGTH.size
    return bytes(view[p:total])


def _decode_message(buf: memoryview, pos: int, total: int, magic: int, check_crc: bool,
                    java_text: bool = False) -> RocketMQMessage:
    end = pos + total
    rec = buf[pos:end]
    (_, _, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts) = FIXED.unpack_from(rec, 0)
    header = HEADERS[sys_flag & SYSFLAG_HOST_MASK]
    if total < header.size:
        raise ValueError(f"size {total} smaller than the {header.size}-byte header")
    fields = header.unpack_from(rec, 0)
    born_host = Host(fields[9], fields[10])
    store_ts = fields[11]
    store_host = Host(fields[12], fields[13])
    reconsume, prepared, body_len = fields[14], fields[15], fields[16]
    p = header.size
    if body_len < 0 or p + body_len > total:
        raise ValueError(f"body length {body_len} does not fit in the message")
    body = bytes(rec[p:p + body_len])
    p += body_len
    topic_len_layout = TOPIC_LENGTH_V1 if magic == MESSAGE_MAGIC else TOPIC_LENGTH_V2
    (topic_len,) = topic_len_layout.unpack_from(rec, p)
    p += topic_len_layout.size
    if topic_len < 0 or p + topic_len > total:
        raise ValueError(f"topic length {topic_len} does not fit in the message")
    # (4.9.7 CommitLog.checkMessageAndReturnSize and MessageDecoder.decode read the topic as new
    # String(bytes, UTF_8) too: a topic that is not UTF-8 is one the broker refuses, its Java text; the
    # bytes are kept as stored_topic, for dump --json's topic_base64)
    topic_bytes = bytes(rec[p:p + topic_len])
    stored_topic = None
    try:
        topic = topic_bytes.decode("utf-8")
    except UnicodeDecodeError:
        if not java_text:
            raise
        topic, stored_topic = topic_bytes.decode("utf-8", JAVA_REPLACE), topic_bytes
    p += topic_len
    (props_len,) = PROPERTIES_LENGTH.unpack_from(rec, p)
    p += PROPERTIES_LENGTH.size
    if props_len < 0 or p + props_len != total:
        raise ValueError(f"properties length {props_len} does not end the message at its size")
    try:
        properties = decode_properties(rec[p:p + props_len], java_text=java_text)
    except UnicodeDecodeError as err:
        bad = err.object[err.start]
        raise ValueError(f"properties that are not UTF-8 (byte 0x{bad:02X} at byte {err.start} of them, "
                         f"{p + err.start} of the message): RocketMQ 4.9.7 reads them as new "
                         "String(bytes, UTF_8) does, a U+FFFD for each malformed sequence, and keeps the "
                         "message; segstore does not read it") from err
    trailing = props_len > 0 and rec[total - 1] == PROPERTY_SEPARATOR_BYTE
    if check_crc:
        actual = body_crc(body)
        if actual != crc:
            raise ValueError(f"body CRC {crc} stored but the body's CRC is {actual}")
    return RocketMQMessage(
        topic=topic, queue_id=queue_id, body=body, properties=properties, flag=flag,
        queue_offset=queue_offset, physical_offset=physical_offset, sys_flag=sys_flag,
        born_timestamp=born_ts, born_host=born_host, store_timestamp=store_ts, store_host=store_host,
        reconsume_times=reconsume, prepared_transaction_offset=prepared, size=total, body_crc=crc,
        magic=magic, trailing_separator=trailing, stored_topic=stored_topic)
