"""The RocketMQ broker store: commitlog, consume queues, index and config files of one directory.

Layout (``DefaultMessageStore``)::

    STORE/commitlog/00000000000000000000          messages of every topic (see .commitlog)
    STORE/consumequeue/TOPIC/QUEUEID/000...000    20-byte entries per queue (see .consumequeue)
    STORE/index/yyyyMMddHHmmssSSS                 key index (see .indexfile)
    STORE/config/topics.json, consumerOffset.json (see .topicconfig)
    STORE/lock                                    the writer lock

What the broker decides when it stores a message is applied here (the codecs stay
pure): delay levels move a message to ``SCHEDULE_TOPIC_XXXX`` with the delivery time
as its tags code, prepared and rollback transactions take queue offset 0 and get no
consume-queue entry, the properties string follows Java ``HashMap`` iteration order.

Thread-safety: not thread-safe; one thread appends, or guard the store with a lock.
Reads in another process (``mode="r"``) see what was appended up to its open.
"""

from __future__ import annotations

import base64
import functools
import heapq
import itertools
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import numpy as np

from segstore import files, jsontext
from segstore.columns import pooled, project
from segstore.errors import (
    ConfigError,
    CorruptDataError,
    CorruptIndexError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    NotFoundError,
    OffsetOutOfRangeError,
    SegstoreError,
    StorageFullError,
    StoreClosedError,
    UnsupportedOperationError,
    cut,
    did_you_mean,
    shown,
    shown_number,
)
from segstore.javatext import parse_int
from segstore.overlap import ahead, in_rounds, overlapped, thread_count
from segstore.records import Message, Record, header_pairs, integer_field, message_list, message_timestamp
from segstore.search import Bound, search
from segstore.store import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AppendResult,
    DumpLine,
    Store,
    bytes_by_topic,
    check_batch_rows,
    check_decompress,
    check_isolation,
    quoted_text,
    reads_while_open,
    text_word,
)

from . import columnar, multidispatch
from .checkpoint import FIELD_ATTRS as CHECKPOINT_FIELD_ATTRS
from .checkpoint import FIELD_NAMES as CHECKPOINT_FIELD_NAMES
from .checkpoint import FILE_NAME as CHECKPOINT_FILE
from .checkpoint import Checkpoint, CheckpointFile
from .commitlog import END_FILE_MIN_BLANK_LENGTH, CommitLog, CommitLogFile
from .config import SCHEDULE_TOPIC, TOPIC_MAX_LENGTH_V2, BrokerConfig, validate_group, validate_topic
from .consumequeue import CQ_DTYPE, FILE_NAME_DIGITS, ConsumeQueue, name_offset, queue_cut_dir
from .consumequeue_ext import EXT_DIR, ConsumeQueueExt
from .consumequeue_ext import MAX_ADDR as EXT_MAX_ADDR
from .dirnames import (
    BCQ_DIR,
    COMMITLOG_DIR,
    CONSUMEQUEUE_DIR,
    INDEX_DIR,
    LOCK_FILE,
    has_timer_store,
    is_rocketmq_store,
    queue_dirs,
)
from .indexfile import IndexRequest, IndexService, geometry_on_disk
from .javacompat import hashmap_order, string_hash
from .lifecycle import ABORT_FILE, LifecycleMixin, keys_and_tags
from .message import (
    KEY_SEPARATOR,
    MAX_QUEUE_ID,
    MESSAGE_MAGIC,
    NO_QUEUE_ENTRY,
    OFFSET_MSG_ID_LENGTHS,
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    SYSFLAG_COMPRESSED,
    SYSFLAG_TRANSACTION_COMMIT,
    SYSFLAG_TRANSACTION_MASK,
    Host,
    RocketMQMessage,
    empty_property,
    encode,
    encode_topic,
    has_queue_entry,
    magic_for,
    msg_id,
    set_offsets,
    stored_properties_of,
    stored_topic_field,
)
from .query import NO_HIT_LIMIT, SCAN_NOTE, DamagedMessage
from .topicconfig import (
    BACKUP_SUFFIX,
    ConsumerOffsets,
    TopicConfigs,
    read_delay_offsets,
    read_kept,
    read_subscription_groups,
    topic_and_group,
)

if TYPE_CHECKING:   # pyarrow and the appenders load where used (`segstore info` builds and writes nothing)
    import pyarrow as pa

    from segstore.consumers import ConsumerGroups
    from segstore.logview import Positions

    from .fastappend import PlainBatch
    from .flush import FlushService

LOCK_CONTENT = b"lock"

#: Fields an append dict may carry (besides the common Message names), in the order errors list them.
APPEND_FIELDS_ORDER = (
    "topic", "queue_id", "body", "tags", "keys", "properties", "flag", "born_timestamp", "born_host",
    "store_host", "store_timestamp", "sys_flag", "delay_level", "reconsume_times",
    "prepared_transaction_offset",
)
APPEND_FIELDS = frozenset(APPEND_FIELDS_ORDER)
#: The common Message names an append dict may carry instead (``offset`` and ``timestamp_type`` the
#: store assigns: taken, and not listed as names to give).
_COMMON_NAMES = ("partition", "value", "key", "headers", "timestamp")
_COMMON_FIELDS = frozenset({*_COMMON_NAMES, "offset", "timestamp_type"})
#: The keys of a ``dump --json`` object, in order.
JSON_KEYS = ("topic", "queue_id", "queue_offset", "physical_offset", "size", "body_crc", "flag", "sys_flag",
             "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
             "prepared_transaction_offset", "body", "properties", "tags", "keys", "tags_code", "msg_id")
_BODY_PREVIEW = 40
#: Bound of each per-store memo (topics validated, hosts parsed, property orders, tag hashes).
_CACHE_LIMIT = 4096
CQ_ROW = CQ_DTYPE.itemsize
#: The largest physical offset a commitlog file name holds (a Java long)
MAX_PHYSICAL_OFFSET = 2**63 - 1
#: The largest queue offset a consume queue can hold: its entry's byte position (a file name) is a Java long
MAX_QUEUE_OFFSET = (2**63 - 1) // CQ_ROW
#: Messages formatted at a time by ``dump --json`` (bounds the text held: about 1 KiB each).
_DUMP_ROWS = 1 << 14
#: Ranges a thread of a dump's walk ahead (``walk_ahead``) may have formatted past the block the caller
#: holds (:func:`segstore.overlap.ahead`): each holds a range's text, about twice its bytes.
DUMP_AHEAD = 2
#: a dump's line writer (``columnar.JsonWriter``, ``columnar.TextWriter``)
_W = TypeVar("_W")
#: Reads of a record that does not decode past the queues' end before its error (a live writer's).
_LIVE_RETRIES = 3
_LIVE_RETRY_S = 0.02
#: Consume-queue entries read at a time by ``read``.
_READ_CHUNK = 1024
#: consume-queue entries per chunk of ``positions`` (1.3 MB read, three int64 columns out)
_POSITIONS_CHUNK = 1 << 16


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _text(value: Any, what: str) -> str:
    """An appended key, tag or property (name or value) as the text a property holds: a str, or UTF-8
    bytes of any bytes-like kind, as a body and Kafka's keys and headers are taken (a bytearray was
    "expected a key as a string", bytes being taken).

    :raises InvalidMessageError: neither.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    if not isinstance(value, str):
        raise InvalidMessageError(f"expected {what} as a str or UTF-8 bytes, found {type(value).__name__}")
    return value


#: The append fields that become a property (Message's constructor, setTags/setKeys, setDelayTimeLevel).
_PROPERTY_FIELDS = {PROPERTY_TAGS: "tags", PROPERTY_KEYS: "keys", PROPERTY_DELAY: "delay_level"}


def _said_twice(name: Any) -> InvalidMessageError:
    """A property an append gives twice (RocketMQ 4.9.7 Message.putProperty: its properties are a
    HashMap, which keeps one value of a name): refused, rather than stored with one of them dropped."""
    field = _PROPERTY_FIELDS.get(name)
    if field is not None:
        return InvalidMessageError(f"expected one of {field} or the {name} property, found both")
    return InvalidMessageError(f"expected each property name once (RocketMQ properties are a map), "
                               f"found {cut(name)} twice")


def _delay_property(text: str) -> int:
    """The level of a ``DELAY`` property as RocketMQ 4.9.7 ``Message.getDelayTimeLevel`` reads it
    (``Integer.parseInt``), which ``CommitLog.asyncPutMessage`` calls on every put.

    :raises InvalidMessageError: a text ``Integer.parseInt`` refuses (" 3", "1.5", "x", 2**31): its
        ``NumberFormatException`` fails the broker's put.
    """
    level = parse_int(text)
    if level is None:
        raise InvalidMessageError(f"expected the DELAY property as a Java int (Message.getDelayTimeLevel's "
                                  f"Integer.parseInt), found {cut(text)}")
    return level


def _scheduled_delay(text: str | None) -> None:
    """A stored ``SCHEDULE_TOPIC_XXXX`` message's ``DELAY``, as RocketMQ 4.9.7
    ``CommitLog.checkMessageAndReturnSize`` reads it on every dispatch and recovery walk:
    ``Integer.parseInt`` of any non-empty one.

    :raises InvalidMessageError: a text it refuses: its ``NumberFormatException`` makes the walk
        answer ``DispatchRequest(-1, false)``, so the reput service stops dispatching there and
        recovery takes the message for the end of the commitlog, truncating every later one.
    """
    if text and parse_int(text) is None:
        raise InvalidMessageError(f"expected a {SCHEDULE_TOPIC} message's DELAY property as a Java int "
                                  f"(CommitLog.checkMessageAndReturnSize's Integer.parseInt, which would "
                                  f"end the broker's recovery there), found {cut(text)}")


def _header_properties(headers: Iterable[tuple[Any, Any]]) -> dict[Any, str]:
    """Headers as RocketMQ properties.  A name given twice is refused: Kafka's headers are a list
    and keep both, RocketMQ's properties are a map (4.9.7 Message.putUserProperty) and would keep one.

    :raises InvalidMessageError: a repeated name, a value that is not text; headers not pairs
        (:func:`segstore.records.header_pairs`).
    """
    props: dict[Any, str] = {}
    for name, value in header_pairs(headers):
        if name in props:
            raise _said_twice(name)
        props[name] = _text(value or b"", "a header value")
    return props


def _bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8")
    if not isinstance(value, bytes | bytearray | memoryview):   # bytes(5) would be five zeros
        raise InvalidMessageError(f"expected a body as bytes or str, found {type(value).__name__}")
    return bytes(value)


def body_preview(body: bytes) -> str:
    """A short, printable view of a body: quoted text if UTF-8 (:func:`segstore.store.quoted_text`:
    JSON's quoting, DEL and C1 controls escaped too), else ``0x`` hex; ``...`` when cut."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        cut = body[:_BODY_PREVIEW // 2]
        return "0x" + cut.hex() + ("..." if len(body) > len(cut) else "")
    return quoted_text(text[:_BODY_PREVIEW]) + ("..." if len(text) > _BODY_PREVIEW else "")


def _of_topic(rows: columnar.Rows, topic: bytes | None) -> columnar.Rows:
    """``rows``, each of which holds ``topic`` (UTF-8; None: not known) as ``rows.topic`` says."""
    rows.topic = topic
    return rows


def _selected(view: memoryview, rows: columnar.Rows, topic: str | None, partition: int | None,
              committed: bool) -> columnar.Rows:
    """The rows of ``topic`` / queue ``partition`` (None: any), without (``committed``) the
    transaction messages no consume queue points at (:func:`has_queue_entry`); numpy masks."""
    if topic is None and partition is None and not committed:
        return rows
    keep = columnar.topic_is(view, rows, topic) if topic is not None else np.ones(len(rows), bool)
    if partition is not None:
        keep &= rows["queue_id"] == partition
    if committed:
        keep &= ~np.isin(rows["sys_flag"] & SYSFLAG_TRANSACTION_MASK, NO_QUEUE_ENTRY)
    return rows if keep.all() else rows.select(keep)


class _Windows:
    """The queues' offset windows of a dump between two times (``{(topic, queue): (start, stop)}``,
    :meth:`Store.time_windows`), the commitlog range holding their messages, and which rows and
    messages lie in them.  A message no consume queue points at (a prepared or rolled-back
    transaction message) has no queue offset and lies in none.  Thread-safe."""

    def __init__(self, store: RocketMQStore, windows: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        self.windows = dict(windows)
        self.codes = {t: i for i, t in enumerate(sorted({t for t, _ in windows}))}
        table = sorted((self.codes[t] << 32 | q & 0xFFFFFFFF, start, stop)
                       for (t, q), (start, stop) in windows.items())
        self.keys = np.array([key for key, _, _ in table], np.int64)
        self.starts = np.array([start for _, start, _ in table], np.int64)
        self.stops = np.array([stop for _, _, stop in table], np.int64)
        #: ``[lo, hi)``: the physical offsets of the windows' messages (None, None: no window)
        self.lo: int | None = None
        self.hi: int | None = None
        for (t, q), (start, stop) in self.windows.items():
            cq = store._queue_view(t, q)
            first, last = cq.entries(start, 1), cq.entries(stop - 1, 1)
            if not len(first) or not len(last):
                continue
            lo, hi = int(first["offset"][0]), int(last["offset"][0]) + int(last["size"][0])
            # the walk starts at lo (aligned): the entry must point at its message, as read() checks;
            # its body is the walk's to check, after the messages before it are given
            store._entry_message(t, q, start, lo, int(first["size"][0]), isinstance(cq, ConsumeQueue),
                                 check_crc=False)
            self.lo = lo if self.lo is None else min(self.lo, lo)
            self.hi = hi if self.hi is None else max(self.hi, hi)

    def rows(self, view: memoryview, rows: columnar.Rows) -> columnar.Rows:
        """The rows whose message lies in its queue's window (numpy masks, ``O(rows log queues)``)."""
        if not len(rows) or not len(self.keys):
            return rows.select(np.zeros(len(rows), bool))
        codes = columnar.topic_codes(view, rows, dict(self.codes))  # other topics numbered past these
        keys = codes.astype(np.int64) << 32 | rows["queue_id"].astype(np.int64) & 0xFFFFFFFF
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        offsets = rows["queue_offset"]
        keep = ((self.keys[at] == keys) & (offsets >= self.starts[at]) & (offsets < self.stops[at])
                & ~np.isin(rows["sys_flag"] & SYSFLAG_TRANSACTION_MASK, NO_QUEUE_ENTRY))
        return rows if keep.all() else rows.select(keep)

    def holds(self, msg: RocketMQMessage) -> bool:
        """Whether ``msg`` lies in its queue's window."""
        start, stop = self.windows.get((msg.topic, msg.queue_id), (0, 0))
        return start <= msg.queue_offset < stop and has_queue_entry(msg.sys_flag)


def subscription_tags(expression: str, path: str | None = None) -> frozenset[str] | None:
    """The tags a consumer subscribing with ``expression`` is given (None: every message), as 4.9.7
    ``FilterAPI.buildSubscriptionData`` reads it: ``*`` (or nothing) subscribes to all, anything else
    is tags joined by ``||``, each trimmed, empty ones dropped (``mqadmin printMsg -s`` trims the
    option first).  The broker then matches the tags codes of that set
    (``ExpressionMessageFilter.isMatchedByConsumeQueue``) and the client the tags themselves
    (``PullAPIWrapper.processPullResult``), so a message without TAGS matches only ``*``.

    :raises ConfigError: an expression of ``||`` alone (``||``, ``||||``...): Java's
        ``subString.split("\\|\\|")`` drops the trailing empty strings and returns no element, and
        ``buildSubscriptionData`` throws "subString split error" (the client's pull: "parse
        subscription error"), so the expression names no subscription at all.
    """
    expression = expression.strip()
    if expression in ("", "*"):
        return None
    if not expression.replace("||", ""):
        raise ConfigError(f"expected a subscription expression (--tag): a tag, tags joined by '||' "
                          f"('TagA || TagB') or '*', found {cut(expression)}, '||' with no tag, which "
                          "RocketMQ 4.9.7 FilterAPI.buildSubscriptionData refuses (subString split error)",
                          path)
    return frozenset(t.strip() for t in expression.split("||") if t.strip())


def _id_shape(text: str) -> str:
    """What is wrong with an offset msgId's text (stripped, upper case), in words."""
    wrong = sorted({c for c in text if c not in "0123456789ABCDEF"})
    shape = f"{len(text)} character{'' if len(text) == 1 else 's'}"
    if wrong:
        shape += f", not hex: {cut(''.join(wrong), 20)}"
    return shape


def message_line(msg: RocketMQMessage) -> str:
    """A message's line of the text dump (:meth:`RocketMQStore.dump`; the reference of
    ``columnar.TextWriter``)."""
    return (f"{msg.physical_offset:>12}  {text_word(msg.topic)}/{msg.queue_id}@{msg.queue_offset}  "
            f"size={msg.size} born={msg.born_timestamp} stored={msg.store_timestamp} "
            f"{keys_and_tags(msg)} body={body_preview(msg.body)}")


def _sent_to(built: Iterable[RocketMQMessage], max_topic_length: int) -> list[tuple[str, int]]:
    """The queues the producers of ``built``'s delay messages sent to, their ``REAL_TOPIC``/``REAL_QID``
    (stored in ``SCHEDULE_TOPIC_XXXX``): a broker configured that topic when it took the send (4.9.7
    ``AbstractSendMessageProcessor.msgCheck`` creates a topic it lacks, before
    ``CommitLog.asyncPutMessage`` moves the message), so ``topics.json`` names it and the message
    ``ScheduleMessageService`` delivers later lands in a topic the broker routes.  A ``REAL_TOPIC`` the
    broker would refuse, or a ``REAL_QID`` that is no queue id, names nothing."""
    sent = []
    for msg in built:
        if msg.topic == SCHEDULE_TOPIC and PROPERTY_REAL_TOPIC in msg.properties:
            topic = msg.properties[PROPERTY_REAL_TOPIC]
            queue_id = parse_int(msg.properties.get(PROPERTY_REAL_QUEUE_ID, ""))
            try:
                validate_topic(topic, max_topic_length)
            except InvalidTopicError:
                continue
            if queue_id is not None and 0 <= queue_id <= MAX_QUEUE_ID:
                sent.append((topic, queue_id))
    return sent


def _index_full(err: StorageFullError, start: int, end: int) -> StorageFullError:
    """The error of an index put that found the disk full after messages at ``[start, end)`` were written.

    The index comes after the messages (the broker builds it behind the commitlog, and
    recovery rebuilds it from there), so the messages stay: the error says so.
    """
    return StorageFullError(f"{err.message}; the messages at commitlog offsets [{start}, {end}) are stored, "
                            "their keys not all indexed (recover rebuilds the index; until then a close "
                            "keeps the abort file)", err.path, err.pos)


_INDEX_GEOMETRY = ("maxHashSlotNum", "maxIndexNum")


def _size_from_names(directories: Iterable[str], unit: int = 1) -> int:
    """The mapped-file size files named by their start offsets were written with, or 0 if unknown.

    Files that all have one length (two or more looked at) were written with it: 4.9.7
    ``MappedFileQueue.load`` refuses a file of any other length, while a name is only parsed,
    so a name contradicting it is the damage (a renamed file, named by verify and the load).
    Otherwise consecutive names differ by exactly that size, whatever a damaged file's length
    says: the most common difference, unless the files' most common length divides every
    difference (a missing file makes a difference of two sizes or more; with two files left it
    is the only one); with one file per directory, the most common length that is a multiple
    of ``unit`` (the smallest of equals).  Lengths are those of the first three files of each
    directory.
    """
    steps: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for directory in directories:
        names = [n for n in files.list_dir(directory) if name_offset(n) is not None]
        bases = [name_offset(n) or 0 for n in names]
        for low, high in itertools.pairwise(bases):
            steps[high - low] = steps.get(high - low, 0) + 1
        for name in names[:3]:      # a few per directory: one stat per queue, not per file
            path = os.path.join(directory, name)
            if files.not_regular(path) is None:
                size = files.file_size(path)
                if size > 0 and size % unit == 0:
                    sizes[size] = sizes.get(size, 0) + 1
    size = min(sizes, key=lambda n: (-sizes[n], n)) if sizes else 0
    if len(sizes) == 1 and sizes[size] >= 2:
        return size
    if steps:
        step = min(steps, key=lambda n: (-steps[n], n))
        return size if size and all(n % size == 0 for n in steps) else step
    return size


def _size_contradicted(directories: Iterable[str], size: int) -> int | None:
    """What the files of ``directories`` (named by their start offsets) say their mapped-file size is,
    where that plainly contradicts ``size``, else None.  Plainly: two names closer than ``size``
    (their files would overlap) where every step is a multiple of that smallest one and a file has
    it as its length, or names whose steps are all multiples of the one length their files share,
    when no file has length ``size`` (a file missing between others makes a step of several sizes,
    but the files left have the size).  A lone file of another length says nothing:
    recovery resizes a torn one.  Reads the names, and the lengths of a directory's first three files.
    """
    steps: set[int] = set()
    lengths: set[int] = set()
    for directory in directories:
        names = files.list_dir(directory)
        bases = sorted(offset for offset in map(name_offset, names) if offset is not None)
        steps.update(high - low for low, high in itertools.pairwise(bases))
        for base in bases[:3]:
            path = os.path.join(directory, f"{base:0{FILE_NAME_DIGITS}d}")
            if files.not_regular(path) is None:
                lengths.add(files.file_size(path))
    if not steps:
        return None
    step = min(steps)
    if step < size and step in lengths and all(n % step == 0 for n in steps):
        return step
    if size not in lengths and len(lengths) == 1:
        (length,) = lengths
        if length > 0 and all(n % length == 0 for n in steps):
            return length
    return None


def _check_given_sizes(path: str, given: Mapping[str, Any], config: BrokerConfig) -> None:
    """Refuse a ``mappedFileSizeCommitLog``/``mappedFileSizeConsumeQueue`` given that the store's files
    plainly were not written with (:func:`_size_contradicted`): as 4.9.7 ``MappedFileQueue.load``
    refuses to start on files of another length, and opening for append would otherwise "repair"
    every file to the wrong length (cutting the bytes past it from each commitlog file)."""
    checks = []
    if "mappedFileSizeCommitLog" in given:
        checks.append(("mappedFileSizeCommitLog", os.path.join(path, COMMITLOG_DIR),
                       [os.path.join(path, COMMITLOG_DIR)], config.mappedFileSizeCommitLog))
    if "mappedFileSizeConsumeQueue" in given:
        root = os.path.join(path, CONSUMEQUEUE_DIR)
        queues = [directory for _, _, directory in queue_dirs(root).queues]
        checks.append(("mappedFileSizeConsumeQueue", root, queues, config.consume_queue_file_size))
    for name, where, directories, size in checks:
        found = _size_contradicted(directories, size)
        if found is not None:
            raise ConfigError(f"expected files of {size} bytes ({name} as given), found files written with "
                              f"{found}: leave {name} out to take the size from the files", where)


def _sizes_on_disk(path: str, given: Mapping[str, Any]) -> dict[str, int]:
    """File sizes an existing store was written with, as config values, for those not ``given``.

    A store opened without ``mappedFileSizeCommitLog``/``mappedFileSizeConsumeQueue``
    (or the index geometry) takes them from its commitlog and consume-queue file names
    (see :func:`_size_from_names`) and its index files (the broker needs them configured;
    a store directory carries them implicitly).
    """
    found: dict[str, int] = {}
    if "mappedFileSizeCommitLog" not in given:
        found["mappedFileSizeCommitLog"] = _size_from_names([os.path.join(path, COMMITLOG_DIR)])
    if not all(name in given for name in _INDEX_GEOMETRY):
        found.update(geometry_on_disk(os.path.join(path, INDEX_DIR)))
    root = os.path.join(path, CONSUMEQUEUE_DIR)
    if "mappedFileSizeConsumeQueue" not in given:
        found["mappedFileSizeConsumeQueue"] = _size_from_names(
            (directory for _, _, directory in queue_dirs(root).queues), CQ_DTYPE.itemsize)
    return {k: v for k, v in found.items() if v > 0}


def _queue_bytes(cq: ConsumeQueue | ScannedQueue) -> int:
    """The commitlog bytes of a queue's messages from its min offset: its entries' sizes summed."""
    return sum(int(part["size"].sum(dtype=np.int64)) for part in cq.entry_parts(cq.min_offset))


class ScannedQueue:
    """A queue of a store that has no ``consumequeue/`` (a backup, a unit-test store), built by one
    commitlog scan: the entries the broker's dispatch would write for it.  Read-only; offers the
    reading half of :class:`ConsumeQueue` (``min_offset``, ``max_offset``, ``entries``)."""

    def __init__(self, first_offset: int, rows: np.ndarray) -> None:
        self.min_offset = first_offset
        self.max_offset = first_offset + len(rows)
        self.rows = rows

    def entries(self, start: int, count: int | None = None) -> np.ndarray:
        """Entries from logical offset ``start`` (at most ``count``).

        :raises OffsetOutOfRangeError: ``start`` is below :attr:`min_offset`.
        """
        if start < self.min_offset:
            raise OffsetOutOfRangeError(f"expected an offset of at least {self.min_offset}, found {start}")
        lo = start - self.min_offset
        return self.rows[lo:] if count is None else self.rows[lo:lo + count]

    def entry_parts(self, start: int, count: int | None = None) -> list[np.ndarray]:
        """:meth:`entries` as one part (the rows are in memory already)."""
        return [self.entries(start, count)]


#: A range of one queue's offsets for :meth:`RocketMQStore.scan_arrow`'s ``queues``: ``(topic, queue id,
#: start, end)``, ``end`` exclusive.
QueueSlice = tuple[str, int, int, int]


class _Range(NamedTuple):
    """A byte range of one commitlog file for a parallel read: ``[begin, end)``, file positions, to be
    moved to the message boundaries found after them before ``end`` / ``bound`` (the next range's end)
    (``first``: ``begin`` is a boundary, the file's start or an aligned start; ``last``: ``end`` is
    where the read stops in this file, kept as it is); ``lo``: the first position the caller asked
    for (rows before it are dropped)."""

    file: CommitLogFile
    lo: int
    begin: int
    end: int
    bound: int
    first: bool
    last: bool


def _refuse_multi_dispatch_append(path: str) -> None:
    """With ``enableMultiDispatch`` the broker assigns ``INNER_MULTI_QUEUE_OFFSET`` itself on put
    (RocketMQ 4.9.7 ``MultiDispatch.wrapMultiDispatch`` in ``CommitLog.DefaultAppendMessageCallback``)
    and its reput writes the LMQ entries; segstore does neither yet, and storing the message as given
    would leave LMQ queues the broker never completes."""
    raise UnsupportedOperationError("expected no INNER_MULTI_DISPATCH property with enableMultiDispatch "
                                    "(segstore does not assign multi-dispatch (LMQ) offsets on append), "
                                    "found one", path)


def _queue_id_error(queue_id: object) -> InvalidMessageError:
    """The error for a queue id a store does not take (see :data:`.message.MAX_QUEUE_ID`)."""
    return InvalidMessageError(f"expected a queue id in [0, {MAX_QUEUE_ID}] (its topic's queue count, the "
                               f"id + 1, is a Java int in config/topics.json), found {cut(queue_id)}")


class RocketMQStore(LifecycleMixin, Store):
    """A RocketMQ store directory opened for reading (``"r"``) or appending (``"a"``).

    :param config: broker config names to values (see :class:`BrokerConfig`).
    :param clock: milliseconds since the epoch for store timestamps (default: the wall clock).
    """

    format = "rocketmq"
    # members, not dict entries: the C appends (.fastappend) read them on every call
    __slots__ = ("_next_offsets", "_plain_topics", "_trailing_separator", "indexes", "queues")

    def __init__(self, path: str, mode: str = "r", config: Mapping[str, Any] | BrokerConfig | None = None,
                 *, clock: Any = None) -> None:
        super().__init__(os.fspath(path), mode)
        self.indexes = None     # the member hides Store.indexes, the class default
        if not isinstance(config, BrokerConfig):
            given = dict(config or {})
            on_disk = _sizes_on_disk(self.path, given)
            config = BrokerConfig.from_mapping({**on_disk, **given})
            _check_given_sizes(self.path, given, config)
        self.config = config
        self._clock = clock or _now_ms
        self._store_host = Host.parse(self.config.storeHost)
        self._delays = self.config.delay_levels_ms
        self._valid_topics: set[str] = set()
        self._host_cache: dict[str, Host] = {}
        self._order_cache: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._plain_topics: dict[str, bytes] = {}     # validated topics' fields (.fastappend)
        self._tags_codes: dict[str, int] = {}
        self._trailing_separator: bool | None = None    # the properties style, found at first append
        self._scanned: dict[tuple[str, int], ScannedQueue] | None = None
        #: what a reader should know about where answers came from (see :data:`SCAN_NOTE`)
        self.notes: list[str] = []
        writable = mode == "a"
        lock = files.WriterLock(os.path.join(self.path, LOCK_FILE), LOCK_CONTENT) if writable else None
        self._lock = lock
        # A running broker holds the same file with FileChannel.tryLock(0, 1, false) (4.9.7
        # DefaultMessageStore.start), a POSIX record lock on Linux, which the flock above does not see
        self._broker_lock = files.BrokerLock(os.path.join(self.path, LOCK_FILE), "a RocketMQ broker") \
            if writable else None
        if not writable and not files.is_dir(os.path.join(self.path, COMMITLOG_DIR)) \
                and not is_rocketmq_store(self.path):
            raise NotFoundError("expected a RocketMQ store (commitlog/, consumequeue/, or the checkpoint, "
                                "config/ and lock of a broker that stored nothing yet), found none",
                                self.path)
        self._commitlog: CommitLog | None = None
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        #: topic directories under ``consumequeue/`` whose names are not UTF-8, with the queue ids they
        #: hold: the broker loads none of them, nor does the store (``verify`` names each)
        self.unloadable_queues: list[tuple[str, list[int]]] = []
        #: ``consumequeue_ext/`` of a filter-enabled broker, read-only (see .consumequeue_ext)
        self.queue_exts: dict[tuple[str, int], ConsumeQueueExt] = {}
        self.index: IndexService | None = None
        self._init_lifecycle()
        try:
            if lock is not None:    # writable
                files.make_dirs(self.path)
                lock.acquire()
                if self._broker_lock is not None:
                    self._broker_lock.acquire()
            # Queues before the commitlog: a reader beside a writer then finds every commitlog file
            # its queue entries point into, however the writer rolled meanwhile (the writer writes
            # a message before its entry, and creates a file before writing into it).
            self._load_queues(writable)
            self._load_queue_exts()
            self._commitlog = CommitLog(os.path.join(self.path, COMMITLOG_DIR),
                                        self.config.mappedFileSizeCommitLog, writable=writable)
            for cq in self.queues.values():  # DefaultMessageStore.recoverTopicQueueTable
                cq.correct_min_offset(self.commitlog.min_offset)
            self.topic_configs = TopicConfigs(self.path)
            if writable:
                # An undecodable topics.json (and .bak) stops the broker (ConfigManager.load): a reader
                # reads the log and queues without it (info and verify show the error), a writer is
                # refused before recovery or an append changes anything: appends rewrite the file, and
                # recovery needs its BatchCQ topics.  The user repairs the file first.
                self.topic_configs.check()
            self.consumer_offsets = ConsumerOffsets(self.path)
            if writable:
                # An undecodable consumerOffset.json (and .bak) stops the broker too
                # (ConsumerOffsetManager.load): a reader reads the messages without it (what needs the
                # offsets raises its error), a writer is refused before anything changes: a commit
                # rewrites the file over what the user may repair.
                self.consumer_offsets.check()
            self._next_offsets = {key: cq.max_offset for key, cq in self.queues.items()}
            # A queue entry past the commitlog's last file is damage (the queues were listed before
            # the commitlog, so a writer's newer file is listed): the log is the truth, a reader
            # walks it from what the other queues cover, and verify reports the entry.
            if not writable:  # appending recovers first (see .lifecycle)
                self.commitlog.set_end(self._written_end(max(self._covered_end(),
                                                             self.commitlog.min_offset)))
            if self.config.messageIndexEnable:
                self.index = self._index_service(writable)
                self.index.load()
            if writable:
                self._open_for_append()
        except BaseException:
            self._release()
            raise

    def _index_service(self, writable: bool) -> IndexService:
        """``index/`` as 4.9.7 ``IndexService.load`` opens it: every file as ``new IndexFile(path,
        maxHashSlotNum, maxIndexNum, 0, 0)``, whose ``MappedFile`` maps ``fileTotalSize`` bytes of it
        whatever its length (``FileChannel.map``).  A longer file is its first bytes; a reader queries a
        shorter one zero-filled (a writer's recovery rebuilds it), at the geometry given, read off the
        files, or else the broker's defaults (what a broker started without them maps it at).  A reader
        queries the files named by another number too (``123``: the broker opens every name
        ``Long.parseLong`` reads); verify names them, a writer's recovery sets them aside."""
        return IndexService(os.path.join(self.path, INDEX_DIR), self.config.maxHashSlotNum,
                            self.config.maxIndexNum, writable=writable, zero_fill_short=True, past_end=True,
                            numbered_strays=True)

    def _covered_end(self) -> int:
        """Where a reader's walk for the data end starts: the largest end of a queue's last entry whose
        message is there (one decode each, usually one in all).  A writer writes a message before its
        entry, but a crash can leave an entry whose message never reached the disk (the page holding
        the entry flushed, the commitlog's not): the broker's recovery stops at the message's zeros and
        drops the entry (``truncateDirtyLogicFiles``), so such an end is not data, and the entry is
        reported as past the data end (``_check_queue_ends``, ``verify``)."""
        last = self.commitlog.log.active
        files_end = last.base + self.commitlog.file_size if last is not None else 0
        entries = sorted((e for e in (cq.last_entry for cq in self.queues.values())
                          if e is not None and e[0] + e[1] <= files_end), reverse=True)
        seen: set[tuple[int, int]] = set()
        for phy, size in entries:
            if (phy, size) in seen:
                continue
            seen.add((phy, size))
            try:
                if self.commitlog.read(phy, check_crc=False).size == size:
                    return phy + size
            except (CorruptDataError, OffsetOutOfRangeError):
                continue
        return self.commitlog.min_offset

    def _written_end(self, start: int) -> int:
        """The data end a reader sees, walking from ``start`` (past what the queues cover).

        A writer beside the reader may be copying a message there right now: a record that does
        not decode is read again after a moment, a few times, before its error is raised (a torn
        record stays torn; a written one completes within microseconds).
        """
        for _ in range(_LIVE_RETRIES - 1):
            try:
                return self.commitlog.find_end(start)
            except CorruptDataError:
                time.sleep(_LIVE_RETRY_S)
        return self.commitlog.find_end(start, torn_tail=True)

    @property
    def commitlog(self) -> CommitLog:
        """The commitlog.  :raises StoreClosedError: the store was closed."""
        if self._commitlog is None:
            raise StoreClosedError("store is closed", self.path)
        return self._commitlog

    def _load_queues(self, writable: bool) -> None:
        root = os.path.join(self.path, CONSUMEQUEUE_DIR)
        found = queue_dirs(root)
        if found.rocksdb:
            # read as a file store it would be one without queues: every message seemingly unreachable
            raise UnsupportedOperationError(
                "expected consume-queue directories (RocketMQ's file store), found a RocksDB consume-queue "
                "store (RocketMQ 5.2+ storeType=defaultRocksDB, RocksDBConsumeQueueStore): not covered", root)
        self.unloadable_queues = found.unloadable
        for topic, queue_id, directory in found.queues:
            if queue_id < 0:    # the broker loads it (Integer.parseInt), segstore holds no such queue
                raise CorruptDataError(f"expected queue directories named by a queue id of at least 0, "
                                       f"found {os.path.basename(directory)!r}", directory)
            self.queues[(topic, queue_id)] = ConsumeQueue(
                directory, topic, queue_id, self.config.consume_queue_file_size, writable=writable,
                cut_dir=queue_cut_dir(self.path, topic, queue_id))

    def _load_queue_exts(self) -> None:
        for topic, queue_id, directory in queue_dirs(os.path.join(self.path, EXT_DIR)).queues:
            if queue_id >= 0:
                self.queue_exts[(topic, queue_id)] = ConsumeQueueExt(directory)

    def entry_tags_codes(self, topic: str, queue_id: int, codes: np.ndarray) -> np.ndarray:
        """The tags codes of consume-queue entries with extension addresses replaced by their unit's
        tags code (a filter-enabled store, ``ConsumeQueue.getExt``); ``codes`` itself otherwise.

        An address whose unit is missing or malformed stays as it is.
        Runtime complexity: ``O(n)`` in numpy, plus one unit read per address.
        """
        ext = self.queue_exts.get((topic, queue_id))
        if ext is None:
            return codes
        at = np.flatnonzero(codes <= EXT_MAX_ADDR)
        if not len(at):
            return codes
        codes = codes.astype(np.int64)
        for i in at.tolist():
            try:
                unit = ext.get(int(codes[i]))
            except CorruptIndexError:           # verify reports it; the address stays unresolved
                continue
            if unit is not None:
                codes[i] = unit.tags_code
        return codes

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            directory = os.path.join(self.path, CONSUMEQUEUE_DIR, topic, str(queue_id))
            cq = ConsumeQueue(directory, topic, queue_id, self.config.consume_queue_file_size, writable=True,
                              cut_dir=queue_cut_dir(self.path, topic, queue_id))
            self.queues[(topic, queue_id)] = cq
        return cq

    # -- lifecycle -----------------------------------------------------------
    def _release(self) -> None:
        self._release_lifecycle()
        if self.index is not None:
            self.index.close()
            self.index = None
        for cq in self.queues.values():
            cq.close()
        self.queues = {}
        for ext in self.queue_exts.values():
            ext.close()
        self.queue_exts = {}
        if self._commitlog is not None:
            self._commitlog.close()
            self._commitlog = None
        if self._broker_lock is not None:
            self._broker_lock.release()
        if self._lock is not None:
            self._lock.release()

    def abandon(self) -> None:
        """Release everything as a killed process would: no flush, preallocated files left."""
        if self._closed:
            return
        if self.indexes is not None:  # extra index layouts (segstore.layouts): left as a crash leaves them
            self.indexes.abandon()
        self._abandon_durable()
        if self._commitlog is not None:
            self._commitlog.abandon()
        self._release()
        super().close()

    def flush(self) -> None:
        self._check_open()
        if self.mode != "a":
            return
        self._flush_durable()
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.flush()

    def close(self) -> None:
        """Flush, release the files."""
        if self._closed:
            return
        try:
            if self.indexes is not None:  # extra index layouts (segstore.layouts): closed cleanly first
                self.indexes.close()
            if self.mode == "a":
                self.topic_configs.settle()
                self._close_durable()
        finally:
            self._release()
            super().close()

    # -- appending -----------------------------------------------------------
    def _normalize(self, item: Message | Mapping[str, Any]) -> Mapping[str, Any]:
        """An append item as a mapping of :data:`APPEND_FIELDS` (common Message names mapped)."""
        if isinstance(item, Record):    # a record read from a store (RocketMQ's own: append_stored keeps all)
            item = item.to_message()
        if isinstance(item, Message):
            key = item.key
            headers = header_pairs(item.headers) if item.headers else []
            header_keys = [value for name, value in headers if name == PROPERTY_KEYS]
            if key is not None and header_keys:
                # KEYS the key and KEYS the header say the same thing twice: one would be lost, unless the
                # key is the header's first token, which is what a read message's to_message() gives
                def raw(value: Any) -> Any:
                    return value.encode("utf-8") if isinstance(value, str) else value

                tokens = (raw(header_keys[0]) or b"").split(KEY_SEPARATOR.encode())
                first = next((k for k in tokens if k), None)
                if raw(key) != first:
                    raise InvalidMessageError(f"expected one of key or a KEYS header (or a key that is the "
                                              f"header's first key), found key {cut(key)} and KEYS "
                                              f"{cut(header_keys[0])}")
                key = None
            fields: dict[str, Any] = {"topic": item.topic, "body": item.value,
                                      "queue_id": integer_field(item.partition, "partition")}
            if key is not None:
                fields["keys"] = [_text(key, "a key")]
            if headers:
                fields["properties"] = _header_properties(headers)
            stamp = message_timestamp(item.timestamp)
            if stamp >= 0:      # -1: the born time is the store time, as the append's
                fields["born_timestamp"] = stamp
            return fields
        if not isinstance(item, Mapping):   # Message.coerce's words (Kafka's), not "has no attribute 'keys'"
            raise InvalidMessageError(f"expected a message as a dict or a segstore.Message, "
                                      f"found {type(item).__name__}")
        other = item.keys() - APPEND_FIELDS
        if not other:
            return item
        if other - _COMMON_FIELDS:
            unknown = sorted(other - _COMMON_FIELDS)
            raise InvalidMessageError(f"expected RocketMQ message fields {list(APPEND_FIELDS_ORDER)} or the "
                                      f"common names {list(_COMMON_NAMES)}, found unknown field"
                                      f"{'s' if len(unknown) > 1 else ''} {unknown}"
                                      f"{did_you_mean(unknown[0], [*APPEND_FIELDS_ORDER, *_COMMON_NAMES])}")
        fields = dict(item)
        # a common name beside the RocketMQ one it maps to says the same thing twice: one would be lost
        for common, own in (("partition", "queue_id"), ("value", "body"), ("key", "keys"),
                            ("headers", "properties"), ("timestamp", "born_timestamp")):
            if common in fields and own in fields:
                raise InvalidMessageError(f"expected one of {common} or {own}, found both")
        properties = fields.get("properties")
        if "key" in fields and isinstance(properties, Mapping) and "KEYS" in properties:
            raise InvalidMessageError("expected one of key or the KEYS property, found both")
        if "partition" in fields:
            fields["queue_id"] = integer_field(fields.pop("partition"), "partition", None)
        if "value" in fields:
            fields["body"] = fields.pop("value")
        key = fields.pop("key", None)
        if key is not None:
            fields["keys"] = [_text(key, "a key")]
        headers = fields.pop("headers", None)
        if headers:
            fields["properties"] = _header_properties(headers)
        stamp = message_timestamp(fields.pop("timestamp", None))
        if stamp >= 0:
            fields["born_timestamp"] = stamp
        fields.pop("offset", None)
        fields.pop("timestamp_type", None)
        return fields

    def plain_topic_field(self, topic: str) -> bytes | None:
        """Validate ``topic`` and keep its encoded field for :func:`.fastappend.encode_batch`; None for
        a topic stored as v2 messages (the fast path writes v1 only: the general path takes those).

        :raises InvalidTopicError: a topic the broker refuses.
        """
        validate_topic(topic, self.config.topic_max_length)
        if magic_for(topic, writes_v2=self.config.writes_v2) != MESSAGE_MAGIC:
            return None
        field = self._plain_topics[topic] = encode_topic(topic, MESSAGE_MAGIC)
        return field

    def check_destinations(self, destinations: Iterable[tuple[str, int]]) -> None:
        """:meth:`Store.check_destinations`: a topic the broker refuses, a queue id out of range."""
        self._check_writable()
        for topic, queue_id in destinations:
            validate_topic(topic, self.config.topic_max_length)
            if type(queue_id) is not int or not 0 <= queue_id <= MAX_QUEUE_ID:
                raise _queue_id_error(queue_id)

    def create_queue(self, topic: str, queue_id: int) -> None:
        """Make an empty queue: its consume-queue directory (which the broker's
        ``DefaultMessageStore.loadConsumeQueue`` loads with or without files) and its topic's queue
        count in ``config/topics.json``.  Nothing for a queue the store holds already.

        :raises InvalidTopicError: a topic the broker refuses.
        :raises InvalidMessageError: a negative queue id.
        """
        self._check_writable()
        validate_topic(topic, self.config.topic_max_length)
        if type(queue_id) is not int or not 0 <= queue_id <= MAX_QUEUE_ID:
            raise _queue_id_error(queue_id)
        files.make_dirs(self._queue(topic, queue_id).directory)
        self._configure_queues([(topic, queue_id)])

    def start_commitlog_at(self, offset: int) -> bool:
        """Start a commitlog that holds no message at the file holding physical ``offset``, named
        ``offset - offset % mappedFileSizeCommitLog``: where a copy's source started (its first files
        deleted by retention), as a slave broker's commitlog starts at its master's (RocketMQ 4.9.7
        ``CommitLog.appendData`` through ``MappedFileQueue.getLastMappedFile(startOffset)``).  Whether
        it did: not where the commitlog holds a message (it keeps its place) or that file is its
        first already.

        :raises OffsetOutOfRangeError: an ``offset`` that is not one (negative, past a Java long).
        """
        self._check_writable()
        if type(offset) is not int or not 0 <= offset <= MAX_PHYSICAL_OFFSET:
            raise OffsetOutOfRangeError(f"expected a commitlog start offset from 0 to {MAX_PHYSICAL_OFFSET}, "
                                        f"found {offset!r:.40}", self.path)
        commitlog = self.commitlog
        base = offset - offset % commitlog.file_size
        if commitlog.end != commitlog.min_offset or base <= commitlog.min_offset:
            return False
        with self._flushing().lock:
            commitlog.start_at(base)
        return True

    def start_queue_at(self, topic: str, queue_id: int, offset: int) -> bool:
        """Start a queue that holds no entry at logical ``offset``, as RocketMQ 4.9.7
        ``ConsumeQueue.putMessagePositionInfo`` starts one whose first message dispatched has a queue
        offset past 0 (``fillPreBlank``: blank entries before it in its file), so a copy's queue starts
        where its source's does.  Only in a commitlog starting past 0 (:meth:`start_commitlog_at`): the
        blank entries point below it, and the queue's first offset is ``offset`` after a restart too
        (``correctMinOffset``); in one starting at 0 the broker would read them as messages.  Whether it
        did: not where the queue holds an entry or starts past 0 already, nor for ``offset`` 0.

        :raises InvalidTopicError: a topic the broker refuses.
        :raises InvalidMessageError: a queue id out of range.
        :raises OffsetOutOfRangeError: an offset below 0 or past what a consume-queue file name holds.
        """
        self._check_writable()
        validate_topic(topic, self.config.topic_max_length)
        if type(queue_id) is not int or not 0 <= queue_id <= MAX_QUEUE_ID:
            raise _queue_id_error(queue_id)
        if type(offset) is not int or not 0 <= offset <= MAX_QUEUE_OFFSET:
            raise OffsetOutOfRangeError(f"expected a queue offset of {topic}/{queue_id} from 0 to "
                                        f"{MAX_QUEUE_OFFSET}, found {shown_number(offset)}", self.path)
        held = self.queues.get((topic, queue_id))
        if (offset == 0 or self.commitlog.min_offset == 0
                or (held is not None and (held.max_offset or held.log.active is not None))):
            return False
        with self._flushing().lock:
            self._queue(topic, queue_id).start_at(offset, self.commitlog.min_offset)
            self._next_offsets[(topic, queue_id)] = offset
        self._configure_queues([(topic, queue_id)])
        return True

    def _configure_queues(self, keys: Iterable[tuple[str, int]]) -> None:
        """Add the ``(topic, queue id)`` queues to ``config/topics.json``, written at once when that
        changed it: a writer killed later leaves every topic it created in the table, as the broker
        persists a topic it creates (4.9.7 ``TopicConfigManager.createTopicInSendMessageMethod``:
        ``this.persist()``), and a broker routes only the topics there."""
        changed = written = False
        configs = self.topic_configs
        for topic, queue_id in keys:
            if configs.ensure(topic, queue_id):
                changed = True
                written = written or not configs.written(topic, queue_id)
        if written:
            configs.save(self._clock())
        elif changed:   # the file names them already (:meth:`configure_queues_ahead`): written at close
            configs.note(self._clock())

    def configure_queues_ahead(self, keys: Iterable[tuple[str, int]]) -> None:
        """Write ``config/topics.json`` naming the ``(topic, queue id)`` queues about to be written, in
        one write: the appends creating them then write it no more (a conversion into N queues wrote
        the whole file N times, one queue more each).  A writer killed later leaves them in the table
        (as :meth:`_configure_queues` leaves the queues it creates); :meth:`close` writes the table
        itself, as it would be had each append written it.

        :raises CorruptDataError: ``config/topics.json`` could not be read.
        """
        self._check_writable()
        self.topic_configs.save_ahead(keys, self._clock())

    def _appender(self, flusher: FlushService) -> Any:
        """The C appends of this store (:func:`.fastappend.appender`), None where there are none."""
        from .fastappend import appender

        return appender(self, flusher, _now_ms)

    @property
    def plain_topic_fields(self) -> Mapping[str, bytes]:
        """The encoded fields of the topics :meth:`plain_topic_field` validated (read by .fastappend)."""
        return self._plain_topics

    @property
    def next_offsets(self) -> Mapping[tuple[str, int], int]:
        """Each queue's next offset: where the next message's QUEUEOFFSET is taken from."""
        return self._next_offsets

    @property
    def store_host(self) -> Host:
        """``storeHost``: the STOREHOST (and default BORNHOST) of appended messages."""
        return self._store_host

    @property
    def indexed(self) -> bool:
        """Whether appends put ``topic#key`` entries into the key index (``messageIndexEnable``)."""
        return self.index is not None

    def _host(self, value: Any, default: Host) -> Host:
        if value is None:
            return default
        if isinstance(value, Host):
            return value
        host = self._host_cache.get(value)
        if host is None:
            host = Host.parse(value)
            if len(self._host_cache) < _CACHE_LIMIT:
                self._host_cache[value] = host
        return host

    def _ordered(self, props: dict[str, str]) -> dict[str, str]:
        """``props`` in Java HashMap iteration order (orders cached by key sequence)."""
        names = tuple(props)
        order = self._order_cache.get(names)
        if order is None:
            order = tuple(hashmap_order(names))
            if len(self._order_cache) < _CACHE_LIMIT:
                self._order_cache[names] = order
        return {k: props[k] for k in order}

    @property
    def trailing_separator(self) -> bool:
        """Whether appended messages end their properties with 0x02 (the broker version's style).

        An existing store keeps the style of its newest messages (a 4.8 store stays
        4.8); a store without messages takes ``rocketmqVersion``'s.
        """
        if self._trailing_separator is None:
            found = self._stored_style()
            self._trailing_separator = self.config.trailing_separator if found is None else found
        return self._trailing_separator

    def take_style(self, trailing_separator: bool) -> bool:
        """Have a store that holds no message with properties end the properties it appends with 0x02 or
        not as ``trailing_separator`` says: a copy's source's style (``dump --json`` lines say it by their
        ``size``), as :meth:`start_commitlog_at` starts the copy where its source started; else a copy of
        a store written by another broker version than ``rocketmqVersion`` gave every message another
        size, physical offset and msgId.  Whether it did: a store whose messages show a style keeps it.

        Runtime complexity: as :meth:`trailing_separator` (``O(queues)`` reads).
        """
        self._check_writable()
        if self._stored_style() is not None:
            return False
        self._trailing_separator = bool(trailing_separator)
        return True

    def _stored_style(self) -> bool | None:
        """The style of the newest message with properties among the last message of every queue
        and the first of the last commitlog file; None when none of them has properties.

        Runtime complexity: ``O(queues)`` reads at most.
        """
        offsets = set()
        for cq in self.queues.values():
            end = cq.max_offset
            if end > cq.min_offset:
                offsets.add(int(cq.entries(end - 1, 1)["offset"][0]))
        active = self.commitlog.log.active
        if active is not None and active.wrote > 0:
            offsets.add(active.base)
        for physical in sorted(offsets, reverse=True):
            msg = self._unchecked_or_none(physical)     # the style shows whatever its body's CRC
            if msg is not None and msg.properties:
                return msg.trailing_separator
        return None

    def _build(self, item: Message | Mapping[str, Any], now: int) -> RocketMQMessage:
        """The message the broker would store for an append item (before offsets)."""
        fields = self._normalize(item)
        get = fields.get
        topic = get("topic")
        # a list or an object is no set member (TypeError: unhashable): validate_topic names its kind
        if type(topic) is not str or topic not in self._valid_topics:
            topic = validate_topic(topic, self.config.topic_max_length)
            if len(self._valid_topics) < _CACHE_LIMIT:
                self._valid_topics.add(topic)
        queue_id = get("queue_id")
        if type(queue_id) is not int or not 0 <= queue_id <= MAX_QUEUE_ID:
            queue_id = integer_field(queue_id, "queue_id")
            if not 0 <= queue_id <= MAX_QUEUE_ID:
                raise _queue_id_error(queue_id)
        # The producer's map: TAGS, KEYS (Message constructor), user properties, in put order.
        produced: dict[str, str] = {}
        tags = get("tags")
        if tags:
            produced[PROPERTY_TAGS] = tags if type(tags) is str else _text(tags, "tags")
        # An empty tags or KEYS text is no property: 4.9.7's Message constructor sets neither when
        # empty, and a producer's setTags("")/setKeys([""]) reaches no store, as the broker's
        # SendMessageProcessor.sendMessage rebuilds the map through MessageDecoder.string2messageProperties,
        # which drops a pair with an empty value.
        keys = get("keys")
        if keys:
            if isinstance(keys, str | bytes):
                keys = [keys]
            elif not isinstance(keys, Iterable):    # a number: "'int' object is not iterable" said nothing
                raise InvalidMessageError(f"expected keys as a text or a list of texts, found {shown(keys)}")
            joined = KEY_SEPARATOR.join([k if type(k) is str else _text(k, "a key") for k in keys])
            if joined:
                produced[PROPERTY_KEYS] = joined
        user = get("properties")
        if user:
            for name, value in user.items():
                name = name if type(name) is str else _text(name, "a property name")
                if name in produced:    # the map keeps one value of a name: the other would be lost
                    raise _said_twice(name)
                value = value if type(value) is str else _text(value, "a property value")
                if not name or not value:   # stored, a pair no consumer would see
                    raise empty_property(name, value)
                produced[name] = value
        # A lone surrogate ("\ud800" in a JSON line) is text no broker stores: Java's UTF-8 encoder
        # (MessageDecoder.messageProperties2String, then getBytes(UTF_8) in CommitLog's encoder)
        # writes '?' for it; written as the bytes ED xx xx, it would be read back as U+FFFD (new
        # String(bytes, UTF_8)). Refused, as a body's is.
        for text in (*produced, *produced.values()):
            if not text.isascii():
                text.encode("utf-8")
        # MultiDispatch.isMultiDispatchMsg: the config and a non-blank INNER_MULTI_DISPATCH
        if self.config.enableMultiDispatch and \
                produced.get(multidispatch.PROPERTY_INNER_MULTI_DISPATCH, "").strip():
            _refuse_multi_dispatch_append(self.path)
        # 4.9.7 Message.setDelayTimeLevel puts DELAY whatever the level (-1 too: the broker stores it
        # and, the level not > 0, leaves the message in its topic); 0 is the field's "no delay".
        delay = integer_field(get("delay_level"), "delay_level")
        if delay:
            if PROPERTY_DELAY in produced:
                raise _said_twice(PROPERTY_DELAY)
            # setDelayTimeLevel(int): a level past a Java int is a DELAY text that getDelayTimeLevel's
            # Integer.parseInt refuses on the broker's put, as the DELAY property given so is refused
            if not -(1 << 31) <= delay < 1 << 31:
                raise InvalidMessageError(f"expected delay_level as a Java int (Message.setDelayTimeLevel), "
                                          f"found {delay}")
            produced[PROPERTY_DELAY] = str(delay)
        elif PROPERTY_DELAY in produced:
            delay = _delay_property(produced[PROPERTY_DELAY])
        store_timestamp = get("store_timestamp")
        store_timestamp = integer_field(store_timestamp, "store_timestamp", now)
        store_host = self._host(get("store_host"), self._store_host)
        born_timestamp = get("born_timestamp")
        body = get("body")
        sys_flag = integer_field(get("sys_flag"), "sys_flag")
        msg = RocketMQMessage(
            topic, queue_id, body if type(body) is bytes else _bytes(body),
            self._ordered(produced) if len(produced) > 1 else produced,
            integer_field(get("flag"), "flag"), 0, 0, sys_flag,
            integer_field(born_timestamp, "born_timestamp", store_timestamp),
            self._host(get("born_host"), store_host), store_timestamp, store_host,
            integer_field(get("reconsume_times"), "reconsume_times"),
            integer_field(get("prepared_transaction_offset"), "prepared_transaction_offset"))
        msg.trailing_separator = self.trailing_separator
        if delay > 0 and sys_flag & SYSFLAG_TRANSACTION_MASK in (0, SYSFLAG_TRANSACTION_COMMIT):
            self._schedule(msg, delay)
        # the stored topic decides (5.x rewrites a delay message's topic before CommitLog.asyncPutMessage)
        msg.magic = magic_for(msg.topic, writes_v2=self.config.writes_v2)
        return msg

    def _schedule(self, msg: RocketMQMessage, level: int) -> None:
        """Move a delay message to ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1`` (the broker's rewrite).

        RocketMQ 4.9.7 ``CommitLog.asyncPutMessage``: a level above ``getMaxDelayLevel()`` is clamped
        (``setDelayTimeLevel(max)``, the broker refuses none); a level within keeps its ``DELAY`` text.
        """
        if level > len(self._delays):
            level = len(self._delays)
            msg.properties[PROPERTY_DELAY] = str(level)
        msg.properties[PROPERTY_REAL_TOPIC] = msg.topic
        msg.properties[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties = {k: msg.properties[k] for k in hashmap_order(msg.properties)}
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def tags_code(self, msg: RocketMQMessage) -> int:
        """The consume-queue tags code the broker computes for ``msg``.

        Delay messages (in ``SCHEDULE_TOPIC_XXXX`` with a ``DELAY`` level): the
        delivery time, store time + that level's delay; otherwise the TAGS hash (0 without).
        """
        if msg.topic == SCHEDULE_TOPIC and has_queue_entry(msg.sys_flag):
            # 4.9.7 CommitLog.checkMessageAndReturnSize: Integer.parseInt of DELAY, capped at the last level
            level = parse_int(msg.properties.get(PROPERTY_DELAY) or "")
            if level is not None and level > 0:
                return msg.store_timestamp + self._delays[min(level, len(self._delays)) - 1]
        tags = msg.tags
        return string_hash(tags) if tags else 0

    def _append_locked(self, messages: Iterable[Message | Mapping[str, Any]], *,
                       as_stored: bool = False) -> list[AppendResult]:
        """Append messages in order (the caller holds the flusher's lock): one commitlog write per
        file touched, one array per queue.

        Every message is built, checked and encoded (:func:`.message.encode`) before
        any queue offset is taken or any byte written, and the files the batch rolls
        into are created (blocks reserved) before it writes, so a refused batch
        changes nothing.  ``as_stored``: the items are finished
        :class:`RocketMQMessage` records written as they are (no put-time rules).

        :raises InvalidTopicError: a topic the broker refuses.
        :raises MessageTooLargeError: a message above ``maxMessageSize`` (or a commitlog file).
        :raises InvalidMessageError: a field the format cannot carry (both are ones too).
        :raises StorageFullError: the disk is full (nothing of the batch written).
        """
        from .fastappend import encode_batch

        self._check_writable()
        now = self._clock()
        if not as_stored:
            messages = message_list(messages)
            batch = encode_batch(self, self._plain_items(messages), now)
            if batch is not None:
                return self._write_plain(batch)
        # cast: with ``as_stored`` the items are finished RocketMQMessage records (append_stored).
        built = (cast("list[RocketMQMessage]", list(messages)) if as_stored
                 else [self._build_checked(item, now) for item in messages])
        if not built:
            return []
        if as_stored:   # a topic names consume-queue directories: one the broker refuses is never stored
            for topic in {msg.topic for msg in built}:
                validate_topic(topic, TOPIC_MAX_LENGTH_V2)
            for msg in built:
                if msg.topic == SCHEDULE_TOPIC:
                    _scheduled_delay(msg.properties.get(PROPERTY_DELAY))
        encoded = self.encode_checked(built)
        # Every message is valid: place the batch and take queue offsets (kept aside until written).
        start = self.commitlog.end
        sizes = [msg.size for msg in built]
        placement = self.commitlog.place(sizes)
        cq_rows: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        taken: dict[tuple[str, int], int] = {}
        results = []
        next_offsets = self._next_offsets
        tags_codes = self._tags_codes
        for msg, data, phys in zip(built, encoded, placement.offsets, strict=True):
            key = (msg.topic, msg.queue_id)
            if has_queue_entry(msg.sys_flag):
                queue_offset = taken.get(key)
                if queue_offset is None:
                    queue_offset = next_offsets.get(key, 0)
                taken[key] = queue_offset + 1
                tags = msg.properties.get(PROPERTY_TAGS)
                if msg.topic == SCHEDULE_TOPIC:
                    code = self.tags_code(msg)
                elif not tags:
                    code = 0
                else:
                    cached = tags_codes.get(tags)
                    if cached is None:
                        cached = string_hash(tags)
                        if len(tags_codes) < _CACHE_LIMIT:
                            tags_codes[tags] = cached
                    code = cached
                cq_rows.setdefault(key, []).append((phys, msg.size, code))
            else:
                queue_offset = 0
            msg.queue_offset, msg.physical_offset = queue_offset, phys
            set_offsets(data, queue_offset, phys)
            results.append(AppendResult(msg.topic, msg.queue_id, queue_offset, phys, msg.size,
                                        {"msg_id": msg_id(msg.store_host, phys),
                                         "store_timestamp": msg.store_timestamp}))
        self._reserve(placement.end, [(key, 0, len(rows)) for key, rows in cq_rows.items()])
        self.commitlog.write_batch(start, encoded, placement.offsets, placement.blanks, sizes)
        next_offsets.update(taken)
        for key, rows in cq_rows.items():
            self._queue(*key).append_array(np.array(rows, dtype=CQ_DTYPE))
        # a put-time rule, as the broker's: records written as stored configure their own queues only
        sent = [] if as_stored else _sent_to(built, self.config.topic_max_length)
        self._configure_queues([*cq_rows, *sent])
        if self.index is not None:
            try:
                self.index.put_batch([
                    # an empty UNIQ_KEY (a stored message's) reads as none: MessageDecoder drops it
                    IndexRequest(m.topic, m.physical_offset, m.store_timestamp,
                                 m.properties.get(PROPERTY_UNIQ_KEY) or None, m.properties.get(PROPERTY_KEYS),
                                 m.sys_flag)
                    for m in built])
                self._open_index_after_full(placement.end)
            except StorageFullError as err:
                self.index_incomplete = True
                raise _index_full(err, start, placement.end) from err
        return results

    def encode_checked(self, built: Iterable[RocketMQMessage]) -> list[bytearray]:
        """Each message encoded (:func:`.message.encode`, its size set, its offsets 0 until placed),
        checked as an append checks it before writing anything.

        :raises InvalidMessageError: a negative queue id, or a field the format cannot carry.
        :raises MessageTooLargeError: a body above ``maxMessageSize``, a message above
            :attr:`~.config.BrokerConfig.max_stored_size` or a commitlog file.
        """
        config = self.config
        body_limit = config.maxMessageSize
        limit = min(config.max_stored_size, config.mappedFileSizeCommitLog - END_FILE_MIN_BLANK_LENGTH)
        encoded = []
        for msg in built:
            if type(msg.queue_id) is not int or not 0 <= msg.queue_id <= MAX_QUEUE_ID:    # a directory name
                raise _queue_id_error(msg.queue_id)
            msg.queue_offset = msg.physical_offset = 0     # filled in once placed (set_offsets)
            data = encode(msg)
            # 4.9.7 CommitLog.MessageExtEncoder.encode: the body against maxMessageSize, then the whole
            # message against maxMessageSize + 64 KiB; doAppend: a message a file cannot hold never fits
            if len(msg.body) > body_limit:
                raise MessageTooLargeError(f"expected a body of at most {body_limit} bytes (maxMessageSize), "
                                           f"found {len(msg.body)}",
                                           os.path.join(self.path, COMMITLOG_DIR), self.commitlog.end)
            if msg.size > limit:
                raise MessageTooLargeError(f"expected a message of at most {limit} bytes (maxMessageSize "
                                           f"{config.maxMessageSize} + 64 KiB, mappedFileSizeCommitLog "
                                           f"{config.mappedFileSizeCommitLog} - 8), found {msg.size}",
                                           os.path.join(self.path, COMMITLOG_DIR), self.commitlog.end)
            encoded.append(data)
        return encoded

    def _plain_items(self, items: list[Any]) -> list[Any]:
        """``items`` with each :class:`Message` as the mapping :meth:`_normalize` makes of it, which
        the plain path (:func:`.fastappend.encode_batch`) takes where it is plain (no headers): what
        the general path writes for the Message (it normalizes it the same way).  ``items`` as given
        where a Message does not normalize (the general path raises its typed error then)."""
        if not items or not isinstance(items[0], Message):
            return items
        try:
            return [self._normalize(item) if isinstance(item, Message) else item for item in items]
        except (SegstoreError, TypeError, ValueError, AttributeError, UnicodeError):
            return items

    def _build_checked(self, item: Message | Mapping[str, Any], now: int) -> RocketMQMessage:
        """:meth:`_build`; a value of the wrong kind (``int("x")``...) is an InvalidMessageError."""
        try:
            return self._build(item, now)
        except SegstoreError:
            raise
        except (TypeError, ValueError, AttributeError, OverflowError, UnicodeError) as err:
            raise InvalidMessageError(f"expected RocketMQ message fields of the documented kinds, found "
                                      f"{cut(str(err))}") from err

    def _reserve(self, end: int, queues: Iterable[tuple[tuple[str, int], int, int]]) -> None:
        """Reserve the blocks a batch ending at physical ``end`` writes into (the commitlog's and each
        consume queue's: the next step of the active files, every file it rolls into), before it
        writes anything; ``queues``: ``(key, _, count)``, ``count`` new
        entries per queue (the form of :attr:`.fastappend.PlainBatch.queues`).

        :raises StorageFullError: the disk is full; the consume-queue files made here are deleted
            again (commitlog files stay as preallocated spares, which hold nothing).
        """
        self.commitlog.reserve(end)
        created: list[str] = []
        try:
            for key, _, count in queues:
                cq = self.queues.get(key)
                if cq is not None and cq.fits(count):
                    continue    # within the reserved blocks of the queue's active file: nothing to do
                if cq is None:
                    directory = os.path.join(self.path, CONSUMEQUEUE_DIR, key[0], str(key[1]))
                    cq = ConsumeQueue(directory, key[0], key[1], self.config.consume_queue_file_size,
                                      writable=True, cut_dir=queue_cut_dir(self.path, *key))
                    self.queues[key] = cq
                created += cq.reserve(count)
        except StorageFullError:
            for path in created:
                files.remove(path)
            raise

    def _write_plain(self, batch: PlainBatch) -> list[AppendResult]:
        """Write a batch :func:`.fastappend.encode_batch` encoded (its queue offsets start at
        :attr:`next_offsets`): commitlog, queues, index.

        The hot path of every append (a single one included): the checks that nothing needs
        reserving are made inline, and the rows go to the queues as the bytes they are.
        """
        results = batch.results
        if batch.end == batch.start:    # nothing encoded (a conversion's batch carries no results)
            return results
        queues = batch.queues
        next_offsets = self._next_offsets
        commitlog = self.commitlog
        # what _reserve would find: every queue's entries within the reserved blocks of its active
        # file, the batch within those of the active commitlog file
        reserve = not commitlog.fits(batch.end)
        if not reserve:
            by_key = self.queues
            for key, _, count in queues:
                cq = by_key.get(key)
                if cq is None or not cq.fits(count):
                    reserve = True
                    break
        if reserve:
            try:
                self._reserve(batch.end, queues)
            except StorageFullError:
                if batch.data is None:     # encoded into the active file past its end: zeros again
                    commitlog.discard_unwritten(batch.end - batch.start)
                raise
        batch.write(commitlog)
        rows = memoryview(batch.cq_rows)
        by_key = self.queues
        for key, first, count in queues:
            next_offsets[key] = next_offsets.get(key, 0) + count
            cq = by_key.get(key)
            if cq is None:
                cq = self._queue(*key)
            cq.append_packed(rows[first * CQ_ROW:(first + count) * CQ_ROW])
        self._configure_queues(key for key, _, _ in queues)
        if self.index is not None:
            # the broker opens the IndexFile for every message it dispatches, keys or not
            # (CommitLogDispatcherBuildIndex -> IndexService.buildIndex -> retryGetAndCreateIndexFile),
            # as put_batch does
            try:
                if batch.index_entries:
                    self.index.put_hashes(*batch.index_columns())
                else:
                    self.index._writable_file()
                self._open_index_after_full(batch.end)
            except StorageFullError as err:
                self.index_incomplete = True
                raise _index_full(err, batch.start, batch.end) from err
        return results

    def _open_index_after_full(self, end: int) -> None:
        """Open the next IndexFile where a message of the batch ending at physical ``end`` follows the one
        whose keys filled the last file: 4.9.7 ``IndexService.buildIndex`` begins with
        ``retryGetAndCreateIndexFile`` for every message it dispatches, keys or not, and
        ``getAndCreateLastIndexFile`` makes a new file whenever the last ``isWriteFull``.  (A file full
        before the batch was replaced as it began.)  ``O(1)``; a message is read once per file filled."""
        index = self.index
        if index is None or not index.files or not index.files[-1].is_full:
            return
        last = index.files[-1]
        filled_by = last.header.end_phy_offset
        if filled_by + self.commitlog.read(filled_by, check_crc=False).size < end:
            index._writable_file()

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commit a consumer group's next offset for a queue to ``config/consumerOffset.json``.

        Written at once (tmp + rename, old content kept as ``.bak``), as the broker persists it.
        """
        self.commit_offsets(group, {(topic, queue_id): offset})

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int], *,
                       now_ms: int | None = None, **options: Any) -> list[str]:
        """Commit a consumer group's next offsets, ``{(topic, queue id): offset}``, all or none: every
        offset is checked against its queue first, then the file is written once (tmp + rename, the
        content before kept as ``.bak``: the way back from a reset).  The file keeps no commit time
        (``now_ms`` and ``options`` are not used); no notes.

        :raises OffsetOutOfRangeError: an offset outside its queue's ``[min, max]`` (``[0, 0]`` for a queue
            without files); nothing written.
        :raises ConfigError: a group name a client refuses (:func:`.config.validate_group`: with ``@`` its
            ``topic@group`` key is one the broker never reads); nothing written.
        :raises InvalidTopicError: a topic name the broker refuses; nothing written.
        :raises ConfigError: a queue id outside ``[0, MAX_QUEUE_ID]``; nothing written.
        """
        self._check_writable()
        self._check_commit(group, offsets)
        self._check_group_call(group, now_ms=now_ms)
        validate_group(group, self.consumer_offsets.path)   # the client's rule: a name the broker reads back
        for topic, queue_id in offsets:
            validate_topic(topic, self.config.topic_max_length)
            if not 0 <= queue_id <= MAX_QUEUE_ID:
                # was written: a key of 2^40 that ConsumerOffsetManager's Integer keys cannot hold, a queue -5
                # no topic has, shown by every later `consumers` (and 10**5000 failed the save half-way)
                raise ConfigError(f"expected a queue id of {topic} in [0, {MAX_QUEUE_ID}], found "
                                  f"{shown_number(queue_id)}", self.consumer_offsets.path)
        for (topic, queue_id), offset in offsets.items():
            # a queue without files is empty: getMaxOffsetInQueue answers 0 (a %RETRY% queue before a retry)
            start, end = self.offset_range(topic, queue_id) if (topic, queue_id) in self.queues else (0, 0)
            if not start <= offset <= end:
                raise OffsetOutOfRangeError(f"expected an offset in [{start}, {end}] for {topic}/{queue_id}, "
                                            f"found {shown_number(offset)}", self.consumer_offsets.path)
        for (topic, queue_id), offset in offsets.items():
            self.consumer_offsets.commit(topic, group, queue_id, offset)
        self.consumer_offsets.save()
        return []

    def delete_offsets(self, group: str, topic: str | None = None, *, partitions: Iterable[int] | None = None,
                       now_ms: int | None = None, **options: Any) -> list[str]:
        """Remove ``group``'s ``topic@group`` entry of ``config/consumerOffset.json``, or every entry of the
        group (``ConsumerOffsetManager.removeOffset``, what ``mqadmin deleteSubGroup -r true`` does to
        the offsets), in one write, the content before kept as ``.bak``.  No notes.

        :raises NotFoundError: the group holds no offset of ``topic`` (or none at all).
        :raises UnsupportedOperationError: ``partitions``: the broker removes a topic's entry whole.
        """
        self._check_writable()
        self._check_group_call(group, topic, now_ms)
        if self._deleted_partitions(topic, partitions) is not None:
            raise UnsupportedOperationError("expected a whole topic's offsets to delete, found partitions "
                                            "(queues) named: 4.9.7 ConsumerOffsetManager.removeOffset "
                                            "removes a topic@group entry whole", self.path)
        owned = {name: topic_and_group(name) for name in self.consumer_offsets.table}
        names = [name for name, pair in owned.items()
                 if pair is not None and pair[1] == group and (topic is None or pair[0] == topic)]
        if not names:
            where = f" of topic {topic!r}" if topic is not None else ""
            raise NotFoundError(f"expected offsets of consumer group {group!r}{where}, found none",
                                self.consumer_offsets.path)
        for name in names:
            del self.consumer_offsets.table[name]
        self.consumer_offsets.save()
        return []

    def transaction_states(self, transactional_id: str | None = None) -> list[dict[str, Any]]:
        """:meth:`Store.transaction_states`: RocketMQ keeps no coordinator state; says where to look."""
        raise UnsupportedOperationError("rocketmq stores keep no transaction coordinator state: their "
                                        "transactions are half messages (half_messages(); the command line's "
                                        "transactions --find-hanging)", self.path)

    def half_messages(self, topic: str | None = None, queue_id: int | None = None, *,
                      now_ms: int | None = None, max_timeout_ms: int | None = None
                      ) -> tuple[list[dict[str, Any]], list[str]]:
        """Transactional messages still waiting for their producer's commit or rollback, as the broker's
        transaction check finds them (:mod:`.halfmessages`): each half queue read from the offset the
        checker (``CID_RMQ_SYS_TRANS``) committed, less what an op message finished, older than
        ``max_timeout_ms`` (default the broker's ``transactionTimeOut``) at ``now_ms`` (default the
        clock); only those of ``topic``/``queue_id`` (their real topic and queue) when given.  Returns the
        rows and notes.  ``O(op messages)`` vectorised, Python per half message read.

        :raises CorruptDataError: there are half queues and ``config/consumerOffset.json`` (and its
            ``.bak``) could not be decoded: where the checker got to is not known.
        """
        from . import halfmessages as hm

        self._check_open()
        now = int(time.time() * 1000) if now_ms is None else now_ms
        timeout = self.config.transactionTimeOut if max_timeout_ms is None else max_timeout_ms
        topics = self.topics()
        if hm.HALF_TOPIC not in topics:
            return [], [f"no {hm.HALF_TOPIC} queue here: no transactional message was stored"]
        rows: list[dict[str, Any]] = []
        for half_queue in self.partitions(hm.HALF_TOPIC):
            done: set[int] = set()
            if hm.OP_TOPIC in topics and half_queue in self.partitions(hm.OP_TOPIC):
                for batch in self.scan_arrow(["value", "tags"], topic=hm.OP_TOPIC, partition=half_queue):
                    done |= hm.done_offsets(batch.column("value"), batch.column("tags"))
            start = self.consumer_offsets.get(hm.HALF_TOPIC, hm.CHECK_GROUP, half_queue) or 0
            found = hm.pending(self.read(hm.HALF_TOPIC, half_queue, start), done, now_ms=now,
                               timeout_ms=timeout, check_max=self.config.transactionCheckMax,
                               file_reserved_ms=self.config.fileReservedTime * 3_600_000)
            rows.extend(row for row in found if (topic is None or row["topic"] == topic)
                        and (queue_id is None or row["queue_id"] == queue_id))
        return rows, []

    def configured_queue(self, topic: str, queue_id: int) -> bool:
        """Whether ``config/topics.json`` gives ``topic`` the read queue ``queue_id`` (``0 ..
        readQueueNums - 1``), files or none: the broker answers a queue without files as empty
        (``getMinOffsetInQueue``/``getMaxOffsetInQueue`` 0), so a group may be given offset 0 there."""
        self._check_open()
        return 0 <= queue_id < self.topic_configs.read_queue_count(topic)

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset ``group`` committed for a queue, or None.

        :raises CorruptDataError: ``config/consumerOffset.json`` (and its ``.bak``) could not be decoded.
        """
        self._check_open()
        return self.consumer_offsets.get(topic, group, queue_id)

    def consumer_groups(self, group: str | None = None, *, now_ms: int | None = None,
                        **options: Any) -> ConsumerGroups:
        """Per consumer group, topic and queue: the committed offset (``config/consumerOffset.json``), the
        queue's max offset and the lag (``mqadmin consumerProgress``'s Consumer Offset, Broker Offset and
        Diff), by group, topic and queue.  Only ``group``'s when given.

        Every queue of a topic a group committed to is listed (those with files, those it committed, and
        queues ``0 .. readQueueNums - 1`` of ``config/topics.json``, as ``getConsumeStats`` walks them: a
        queue without files is empty, max offset 0); ``committed_offset`` is None for a queue the group
        never committed.  ``lag`` is Diff as the broker computes it (4.9.7
        ``getConsumeStats``, ``ConsumerProgressSubCommand``): the max offset less the committed one,
        taken as 0 where there is none (``queryOffset``'s -1), and not clamped (a commit past the max
        offset, as a reset or a queue cut by recovery leaves, is a negative Diff).  The files keep no
        members or group states (the
        broker holds those in memory): those columns are None.  ``extras["last_timestamp"]`` is
        ``consumerProgress``'s LastTime as the broker computes it from its store (4.9.7
        ``AdminBrokerProcessor.getConsumeStats``): the store time of the message at the committed
        offset less one (the last one consumed), 0 when there is none or it cannot be read (the
        tool's ``N/A``).  ``now_ms`` is not used (RocketMQ offsets do not expire).

        Where ``config/topics.json`` was read, only the rows ``getConsumeStats`` lists are: a topic the file
        lacks is skipped (``selectTopicConfig`` null: a topic ``mqadmin deleteTopic`` removed keeps its
        groups' offsets, whose rows were a negative Diff no broker shows), and of a topic it has only
        queues below ``readQueueNums`` are walked (:meth:`.TopicConfigs.stats_queue_count`; a
        ``%RETRY%`` topic the file lacks is listed whole: the broker makes its config on the group's
        first heartbeat).  A note names each group's topic and queues left out; option ``hidden=True``
        lists them too (what deleting a deleted topic's offsets reads).  Without the file, or where it
        cannot be decoded, every row is listed.

        :raises CorruptDataError: ``config/consumerOffset.json`` (and its ``.bak``) could not be decoded
            (:attr:`consumer_offsets` ``.error``): no group's offsets are known.
        :raises ConfigError: ``hidden`` not a bool.
        """
        from segstore.consumers import ConsumerGroups, ConsumerOffset  # its dataclasses: not for `info`

        self._check_open()
        self._check_group_call(group, now_ms=now_ms, any_group=True)
        hidden = options.get("hidden", False)
        if not isinstance(hidden, bool):
            raise ConfigError(f"expected hidden as a bool, found {type(hidden).__name__} {cut(hidden)}",
                              self.path)
        rows = []
        notes = []
        # a key that is no topic@group (topic_and_group) is skipped, as the broker's scans skip it
        owned = [(pair, offsets) for name, offsets in self.consumer_offsets.table.items()
                 if (pair := topic_and_group(name)) is not None]
        if not owned:       # said, as a Kafka log directory without __consumer_offsets says it
            path = self.consumer_offsets.path
            held = files.exists(path) or files.exists(path + BACKUP_SUFFIX)
            where = ("config/consumerOffset.json holds no offsets" if held
                     else "no config/consumerOffset.json here")
            notes.append(f"{where}: no consumer group committed offsets")
        for (topic, group_name), offsets in sorted(owned, key=lambda item: item[0][::-1]):
            if group is not None and group_name != group:
                continue
            # consumerProgress walks queues 0 .. readQueueNums - 1 of topics.json, files or none
            queue_ids = {*offsets, *self.partitions(topic), *self.topic_configs.read_queue_ids(topic)}
            shown = self.topic_configs.stats_queue_count(topic, lmq=self.config.enableLmq)
            unlisted = [] if shown is None else sorted(q for q in queue_ids if q >= shown)
            if unlisted and not hidden:
                notes.append(self._unlisted_note(group_name, topic, unlisted, shown or 0))
                queue_ids.difference_update(unlisted)
            for queue_id in sorted(queue_ids):
                max_offset = self.offset_range(topic, queue_id)[1] if (topic, queue_id) in self.queues else 0
                committed = offsets.get(queue_id)
                last = self._store_time_at(topic, queue_id, committed - 1) if committed else None
                rows.append(ConsumerOffset(group_name, topic, queue_id, committed, max_offset,
                                           max_offset - max(committed or 0, 0),
                                           extras={"last_timestamp": last if last and last > 0 else 0}))
        return ConsumerGroups(rows, notes, columns=(("LAST-TIME", "last_timestamp"),))

    def _unlisted_note(self, group: str, topic: str, queue_ids: list[int], shown: int) -> str:
        """The note of :meth:`consumer_groups` on a group's queues of ``topic`` that ``consumerProgress``
        does not list (``shown`` queues it does): why, and how to see or remove them."""
        words = ", ".join(map(str, queue_ids[:8])) + (f" and {len(queue_ids) - 8} more" if len(queue_ids) > 8
                                                      else "")
        why = (f"config/topics.json has no topic {cut(topic)} (deleted: mqadmin deleteTopic leaves its "
               "groups' offsets), which 4.9.7 AdminBrokerProcessor.getConsumeStats "
               "(mqadmin consumerProgress) skips"
               if topic not in self.topic_configs.topics else
               f"past the topic's readQueueNums {shown} in config/topics.json, where 4.9.7 "
               "AdminBrokerProcessor.getConsumeStats (mqadmin consumerProgress) stops")
        return (f"group {cut(group)}: {topic} queues {words} not listed: {why}; "
                "consumer_groups(hidden=True), the command line's consumers --hidden, lists them, and "
                "consumers --group G --delete --topic T --execute removes a topic's offsets")

    def _store_time_at(self, topic: str, queue_id: int, offset: int) -> int | None:
        """The store time of a queue's message at ``offset`` (``getMessageStoreTimeStamp``), None where
        there is none or it cannot be read."""
        if offset < 0 or (topic, queue_id) not in self._queue_views():
            return None
        cq = self._queue_view(topic, queue_id)
        if not cq.min_offset <= offset < cq.max_offset:
            return None
        try:
            return self._stored_at(cq, offset)
        except SegstoreError:
            return None

    def _stored_at(self, cq: ConsumeQueue | ScannedQueue, offset: int) -> int | None:
        """The store time of the message ``cq``'s entry at ``offset`` points at (None: no such entry).

        Its body CRC is not checked: 4.9.7 ``ConsumeQueue.getOffsetInQueueByTime`` reads the store time
        alone (``CommitLog.pickupStoreTimestamp``), so a time lookup (``query --timestamp``, ``dump
        --begin/--end``) passes over a damaged body it need not read; a read of that message names it.

        :raises CorruptDataError: the entry points at no message.
        """
        rows = cq.entries(offset, 1)
        return self.commitlog.read(int(rows["offset"][0]), check_crc=False).store_timestamp if len(rows) \
            else None

    def find_msg_id(self, msg_id: str) -> RocketMQMessage | None:
        """The message whose offset msgId (``MessageDecoder.createMessageId``: store host address, port,
        commitlog offset, as hex) is ``msg_id``; None when it names no message of this store.

        Runtime complexity: one commitlog read.

        :raises ConfigError: ``msg_id`` is no offset msgId: not 32 hex digits (an IPv4 store host: 4
            address bytes, the port's 4, the offset's 8) nor 56 (an IPv6 one, 16 address bytes).  4.9.7
            ``MessageDecoder.decodeMessageId`` reads the hex (``UtilAll.string2bytes``, either case) as
            those bytes, ``msgId.length() == 32 ? 4 : 16`` address bytes, and throws on fewer; a client
            msgId (the ``UNIQ_KEY``, :meth:`find_client_msg_id`) has the same lengths.
        """
        self._check_open()
        text = msg_id.strip().upper()
        if len(text) not in OFFSET_MSG_ID_LENGTHS or text.strip("0123456789ABCDEF"):
            raise ConfigError(f"expected an offset msgId: 32 hex digits (an IPv4 store host's address and "
                              f"port, then the commitlog offset: MessageDecoder.createMessageId) or 56 (an "
                              f"IPv6 store host), found {cut(msg_id)} ({_id_shape(text)})", self.path)
        offset = int(text[-16:], 16)
        found = self._message_or_none(offset)
        if isinstance(found, DamagedMessage):
            # a message whose checks fail (its body CRC) is still the one the id names: its damage is
            # the answer, not "no such message" (the broker's viewMessage checks no CRC)
            if found.message.msg_id == text:
                raise found.error
            return None
        return found if found is not None and found.msg_id == text else None

    def find_client_msg_id(self, topic: str, msg_id: str) -> list[RocketMQMessage]:
        """The messages of ``topic`` whose client msgId, the ``UNIQ_KEY`` property, is ``msg_id``, in
        commitlog order (several where a producer's retry stored one twice), through the index as
        ``mqadmin queryMsgByUniqueKey -a`` finds them: 4.9.7 ``MQAdminImpl.queryMessage`` with
        ``isUniqKey`` keeps a hit only where ``getMsgId()``, the UNIQ_KEY, equals the id, so a message
        that carries the id as one of its ``KEYS`` is not it.  ``O(chain length)``, as :meth:`find`.
        """
        return [msg for msg in self._key_hits(topic, msg_id, None, None, None, None)
                if msg.properties.get("UNIQ_KEY") == msg_id]

    def _unchecked_or_none(self, physical_offset: int) -> RocketMQMessage | None:
        """The message at ``physical_offset`` decoded without its body CRC check; None where no message
        decodes there at all (past the end, not a message's first byte, torn)."""
        try:
            return self.commitlog.read(physical_offset, check_crc=False)
        except (CorruptDataError, OffsetOutOfRangeError):
            return None

    # -- reading -------------------------------------------------------------
    def scan(self, *, isolation: str = READ_UNCOMMITTED) -> Iterator[RocketMQMessage]:
        """Every commitlog message in physical order (transactions included, unless ``isolation`` is
        ``read_committed``: as :meth:`dump_json`), BLANKs skipped.

        :raises CorruptDataError: a damaged message, or one whose header contradicts its position
            (a PHYSICALOFFSET other than it, a negative QUEUEID: what verify calls torn), as
            :meth:`dump`, :meth:`scan_arrow` and :meth:`read` raise it.
        :raises ConfigError: an unknown isolation level.
        """
        self._check_open()
        committed = check_isolation(isolation) == READ_COMMITTED
        yield from self._scan(committed)

    def _scan(self, committed: bool = False, window: _Windows | None = None) -> Iterator[RocketMQMessage]:
        """:meth:`scan`; with a ``window``, only from its first message to its last (as the C dumps
        walk it: damage outside it is not met)."""
        lo, hi = (window.lo, window.hi) if window is not None else (None, None)
        for offset, record in self.commitlog.walk(lo):
            if hi is not None and offset >= hi:
                return
            if isinstance(record, RocketMQMessage):
                if record.physical_offset != offset or record.queue_id < 0:
                    seg = self.commitlog.file_for(offset)
                    raise CorruptDataError(str(columnar.contradiction(record.physical_offset, record.queue_id,
                                                                      offset)), seg.path, offset - seg.base)
                if committed and not has_queue_entry(record.sys_flag):
                    continue
                yield record

    @reads_while_open   # a queue's read resumed after close would end early, silently
    def scan_arrow(self, columns: Iterable[str] | None = None, *, topic: str | None = None,
                   partition: int | None = None, offset: int = 0, start: int | None = None,
                   end: int | None = None, batch_rows: int = columnar.SCAN_BATCH_ROWS,
                   threads: int | None = None, queues: Sequence[QueueSlice] | None = None,
                   decompress: bool = False, isolation: str = READ_UNCOMMITTED) -> Iterator[pa.RecordBatch]:
        """The messages as batches of :data:`segstore.columns.ROCKETMQ_SCHEMA` (see ``Store.scan_arrow``).

        With no arguments: every commitlog message in physical order (as :meth:`scan`).
        With ``topic`` and ``partition``: that queue from queue ``offset`` on (from its first
        offset where ``offset`` is below it, as :meth:`read`), through its consume queue (entries
        read a chunk at a time, messages decoded at their positions, each checked to be that queue's
        message of that size).  With ``start``/``end``: the
        messages whose physical offset lies in ``[start, end)`` (their files are walked from
        the start, so a position need not be a message boundary).  A batch holds at most
        ``batch_rows`` messages of one commitlog file.  Runtime complexity: ``O(bytes read)``.

        With ``queues``, ``(topic, queue id, start, end)`` ranges of queue offsets: the messages those
        ranges of their consume queues point at, read in commitlog (file) order in one pass over the
        commitlog files holding them (:meth:`_queue_ranges_rows`), so each queue's in offset order but
        the queues interleaved as stored.  The same rows as reading each range through its queue, the
        same checks (each message must be its entry's) and the same error for a wrong entry.

        ``threads`` (default: see segstore.overlap.thread_count) walks the commitlog (not a queue) by
        byte ranges on that many threads (:meth:`_parallel_regions`): the same messages in the same
        order and the same error at the same place as one thread, batches cut where the ranges are.
        With one range by default (2 cores) the walk of the next region runs on a second thread beside
        the build of this one (:func:`segstore.overlap.overlapped`); one thread asked for (``threads=1``,
        ``$SEGSTORE_THREADS=1``) runs both on this one.

        The ``value`` column holds each body as stored, compressed where its producer compressed it
        (``sysFlag`` 0x1), as the broker serves it.  With ``decompress``, as consumers read it
        (:func:`.bodycodec.consumer_batches`): compressed bodies inflated, their ``sysFlag``
        cleared of 0x1, a batch cut where the inflated values would pass 16 MiB.

        ``isolation`` as :meth:`dump_json`'s: ``read_committed`` leaves out the prepared and
        rolled-back transaction messages, which no consume queue points at (numpy masks on each
        batch's decoded flags, before its columns are built; a batch left with none is not given).

        :raises CorruptDataError: a damaged message (the error :meth:`scan`/:meth:`read` raise), or
            with ``decompress`` a compressed body that does not inflate.
        :raises NotFoundError: no such queue.
        :raises ConfigError: ``threads`` below 1, an unknown isolation level, an ``offset`` (other than 0)
            without a queue.
        """
        from segstore.columns import ROCKETMQ_SCHEMA

        self._check_open()
        check_decompress(decompress, self.path)
        self._check_topic(topic, any_topic=True)
        self._check_read(partition, offset, any_partition=True)
        self._check_positions(start, end)
        check_batch_rows(batch_rows)
        committed = check_isolation(isolation) == READ_COMMITTED
        asked, threads = threads, thread_count(threads)     # asked: threads=1 keeps the overlap off
        schema = project(ROCKETMQ_SCHEMA, columns)
        if decompress and {"value", "sysFlag"} & set(schema.names):
            from . import bodycodec

            def build(view: memoryview, rows: columnar.Rows) -> list[pa.RecordBatch]:
                # the rows' flags say which bodies to inflate, their positions where each lies
                return list(bodycodec.consumer_batches(columnar.build_batch(view, rows, schema),
                                                       rows["sys_flag"], rows["position"], self._locate))
        else:
            def build(view: memoryview, rows: columnar.Rows) -> list[pa.RecordBatch]:
                return [columnar.build_batch(view, rows, schema)]
        if committed:
            build_all = build

            def build(view: memoryview, rows: columnar.Rows) -> list[pa.RecordBatch]:
                rows = _selected(view, rows, None, None, committed=True)
                return build_all(view, rows) if len(rows) else []

        fill = columnar.fill_for(schema.names)      # only the fields its columns are built from
        if (topic is None) != (partition is None):
            raise ConfigError("expected topic and partition together, found only one")
        if topic is None and offset != 0:
            # a walk of the commitlog (or of queue ranges) has no queue offset to start from: the offset
            # was dropped without a word, every message given (Kafka starts each partition there)
            raise ConfigError(f"expected a queue (topic and partition) for offset {offset}, found none "
                              "(without one the commitlog is walked whole; start/end select byte positions)",
                              self.path)
        if queues is not None:
            if topic is not None or start is not None or end is not None:
                raise ConfigError("expected queue ranges (queues) alone, found a queue (topic, partition) "
                                  "or a byte range (start, end) too")
            for made in overlapped(self._queue_ranges_rows(queues, batch_rows, fill), lambda r: build(*r),
                                   asked):
                yield from made
            return
        if topic is not None and partition is not None:     # both or neither (checked above)
            if start is not None or end is not None:
                raise ConfigError("expected a queue (topic, partition) or a byte range (start, end), "
                                  "found both")
            yield from self._scan_queue(build, topic, partition, offset, batch_rows, fill)
            return
        if threads > 1:
            for regions in self._parallel_regions(start, end, batch_rows, threads, build, fill):
                for made in regions:
                    yield from made
        else:
            # the walk of the next region overlaps the build of this one (segstore.overlap), but where
            # one thread was asked for
            for made in overlapped(self._region_rows(start, end, batch_rows, fill=fill), lambda r: build(*r),
                                   asked):
                yield from made
        if end is None:
            self._check_queue_ends()

    def _check_queue_ends(self, topic: str | None = None, partition: int | None = None) -> None:
        """Raise for the first selected queue (``topic``/``partition``, None: any) that points past the
        commitlog's end: messages a consumer would read are gone from the log (a file cut short or
        lost), which a walk of the log alone cannot see.  ``O(queues)``, and for a queue past the end
        ``O(its files)`` and the one binary search over the first such file's entries.

        :raises CorruptDataError: naming the consume-queue file and the entry's byte position.
        """
        end = self.commitlog.end
        for (t, q), cq in sorted(self.queues.items()):
            if (topic is not None and t != topic) or (partition is not None and q != partition):
                continue
            if cq.max_physical_end <= end:
                continue
            for seg in cq.segment_files():
                ends = seg.entries["offset"].astype(np.int64) + seg.entries["size"]
                if not len(ends) or int(ends[-1]) <= end:
                    continue
                # a queue's physical offsets ascend: the first entry ending past the log's end
                slot = search(ends, end + 1, Bound.SMALLEST_UPPER)
                entry = seg.entries[slot]
                raise CorruptDataError(
                    f"expected the commitlog to hold the message of {t}/{q} offset {seg.first_offset + slot} "
                    f"(physical offset {int(entry['offset'])}, {int(entry['size'])} bytes), found the "
                    f"commitlog ending at {end}", seg.file.path, slot * CQ_DTYPE.itemsize)

    def _locate(self, position: int) -> tuple[str, int]:
        """The commitlog file holding physical ``position`` and the position in it."""
        seg = self.commitlog.file_for(position)
        return seg.path, position - seg.base

    def consumed(self, msg: RocketMQMessage) -> RocketMQMessage:
        """``msg`` as consumers read it: its body inflated where its producer compressed it, its
        sysFlag's 0x1 cleared (:func:`.bodycodec.consumed`).

        :raises CorruptDataError: a compressed body that does not inflate, at the message.
        """
        from . import bodycodec

        return bodycodec.consumed(msg, self._locate)

    def _region_rows(self, start: int | None, end: int | None, batch_rows: int = columnar.BATCH_ROWS, *,
                     reuse: bool = False, fill: int = columnar.FILL_ALL, aligned: bool = False
                     ) -> Iterator[tuple[memoryview, columnar.Rows]]:
        """The decoded rows of the messages whose physical offset lies in ``[start, end)`` (None: the
        store's ends), with the view of their commitlog file, or a row's own (``columnar.java_row``)
        (``reuse``, ``fill``: see ``columnar.walk_file``).  The walk starts at the start of ``start``'s
        file, or (``aligned``: ``start`` is known to be a message's first byte) at ``start``."""
        cl = self.commitlog
        for seg, lo, hi in cl.files_between(start, end):
            view = seg.file.view()
            first = max(lo - seg.base, 0) if aligned else 0
            zeros = functools.partial(cl.check_zeros_end, seg, limit=seg.wrote)   # data after zeros: damage
            for rows in columnar.walk_file(view, first, seg.wrote, seg.base, cl.file_size, seg.path,
                                           stop=hi - seg.base, batch_rows=batch_rows, reuse=reuse, fill=fill,
                                           zeros_end=zeros):
                if rows["position"][0] < lo:
                    rows = rows.select(rows["position"] >= lo)
                    if not len(rows):
                        continue
                yield columnar.view_of(view, rows), rows

    def _split_ranges(self, start: int | None, end: int | None, aligned: bool = False) -> Iterator[_Range]:
        """The byte ranges of :meth:`_parallel_regions`, in log order (:class:`_Range`); each file's
        first begins at the file's start, or (``aligned``: ``start`` is a message's first byte) at
        ``start``.  Raises the gaps' errors in their place."""
        for seg, lo, hi in self.commitlog.files_between(start, end):
            stop = min(hi - seg.base, seg.wrote)
            first = max(lo - seg.base, 0)
            origin = first if aligned else 0
            cuts = list(range(first + columnar.SPLIT_BYTES, stop, columnar.SPLIT_BYTES))
            ends = [*cuts, max(stop, 0)]
            for a, b, bound in zip([origin, *cuts], ends, [*ends[1:], max(stop, 0)], strict=True):
                yield _Range(seg, lo - seg.base, a, b, bound, a == origin, b == max(stop, 0))

    def _parallel_regions(self, start: int | None, end: int | None, batch_rows: int, threads: int,
                          make: Callable[[memoryview, columnar.Rows], Any], fill: int = columnar.FILL_ALL,
                          aligned: bool = False, walk_ahead: bool = False
                          ) -> Generator[list[Any], None, None]:
        """``make(view, rows)`` of the rows :meth:`_region_rows` walks (decoding ``fill``; ``aligned`` as
        there), on ``threads`` threads: per byte range (:meth:`_split_ranges`) the list of what it
        made, in log order.

        Each range is walked from the message boundary found next to its start
        (:func:`.columnar.next_boundary`) up to the one next to its end.  A guess is taken only where
        the range before it ended (:class:`.columnar.Reach`); one it did not confirm (bytes of a body
        that look like a header) is walked again from where the walk before ended, and a range
        after the file's data ended is dropped.  So the rows, and an error raised at its first
        position after the rows before it, are those of one thread.  ``make`` runs on the walking
        thread; it must be thread-safe.  Memory: ``SPLIT_BYTES`` of rows and their results per range,
        ``PER_ROUND * threads`` ranges at a time (:func:`segstore.overlap.in_rounds`; both in
        :mod:`.columnar`).  ``walk_ahead``: the ranges are walked on ``threads`` threads of their own,
        up to :data:`DUMP_AHEAD` ranges a thread past the one handed out, also while this generator is
        suspended (:func:`segstore.overlap.ahead`), for a caller that reads it within one call of its
        own and closes it (or reads it to its end) before the store can change; closing it waits for
        the ranges being walked.
        """
        cl = self.commitlog

        def walk(task: _Range, at: int | None = None
                 ) -> tuple[int, int, columnar.Reach, list[Any], BaseException | None]:
            seg, lo = task.file, task.lo
            view = seg.file.view()
            if at is None:
                at = (task.begin if task.first
                      else columnar.next_boundary(view, task.begin, task.end, seg.base))
            stop = task.end if task.last else columnar.next_boundary(view, task.end, task.bound, seg.base)
            reach = columnar.Reach(at)
            made: list[Any] = []
            try:
                for rows in columnar.walk_file(view, at, seg.wrote, seg.base, cl.file_size, seg.path,
                                               stop=stop, batch_rows=batch_rows, reach=reach, fill=fill,
                                               zeros_end=functools.partial(cl.check_zeros_end, seg,
                                                                           limit=seg.wrote)):
                    if rows["position"][0] < seg.base + lo:
                        rows = rows.select(rows["position"] >= seg.base + lo)
                        if not len(rows):
                            continue
                    made.append(make(columnar.view_of(view, rows), rows))
            except SegstoreError as err:
                return at, stop, reach, made, err
            return at, stop, reach, made, None

        current, expected, ended = None, 0, False
        ranges = self._split_ranges(start, end, aligned)
        results = (ahead(ranges, walk, threads, DUMP_AHEAD * threads) if walk_ahead
                   else in_rounds(ranges, walk, threads, columnar.PER_ROUND * threads))
        try:
            for task, result, error in results:
                if error is not None:
                    raise error                 # not a data error: a bug or an interrupt, as one thread
                assert result is not None
                if task.file is not current:    # its first range begins at a boundary
                    current, expected, ended = task.file, task.begin, False
                if ended:
                    continue
                at, stop, reach, made, failure = result
                if at != expected:              # a guess the range before did not confirm
                    if expected >= stop:
                        continue                # the range before walked past this whole range
                    at, stop, reach, made, failure = walk(task, expected)
                yield made
                if failure is not None:
                    raise failure
                expected, ended = reach.pos, reach.ended
        finally:
            results.close()     # a walk ahead's threads stop before the caller goes on

    def _queue_ranges_rows(self, queues: Sequence[QueueSlice], batch_rows: int, fill: int = columnar.FILL_ALL
                           ) -> Iterator[tuple[memoryview, columnar.Rows]]:
        """The rows of :meth:`scan_arrow`'s ``queues`` with the view of their commitlog file, in
        commitlog order.

        The ranges' consume-queue entries are read first (ends clamped to each queue's); then each
        commitlog file holding some is walked from its first entry's message to the end of its last
        (files and stretches holding none are not read), and of each region's rows those at an entry's
        position are kept, each checked to be that entry's message (queue id, queue offset, size and
        topic, as a queue read checks them).  An entry whose message the walk did not meet (it points
        inside another message) or that fails the check raises what a queue read raises
        (:meth:`_wrong_entry`), after the rows before it in commitlog order.

        Where the ranges are of distinct queues and each ascends (:meth:`.columnar.QueueRanges.claimable`),
        each row claims the one entry it can be, that of its queue offset (:func:`.columnar.claim_entries`),
        while every entry a region passes is claimed: the entries are never sorted.  From the first
        region where one is not (damage, or an entry at no message), and for ranges that are not so,
        the entries sorted by physical offset are matched with the rows (:func:`.columnar.match_entries`),
        which finds what is wrong in log order.  Both give the same rows and the same error (the claims
        are all that the merge would check, entry for entry; a Hypothesis test reads damaged queues both
        ways).  The claims took 4M entries in 0.34G instructions, the merge and its matches 0.83G
        (2026-12-02, the value query of ``benchmarks/worker_protocol.py``); each row's claim is made by
        the C walk as it decodes the row (``walk_file``'s ``ranges``): 0.24G.

        Memory: 17 bytes per entry of the ranges (positions, sizes and a flag; the entries are read where
        the queue files are mapped), 24 more where they are merged, plus one region's rows.  Runtime
        complexity: ``O(E + bytes walked)`` for E entries claimed, ``O(E log E + bytes walked)`` merged.

        :raises NotFoundError: a range names no queue of the store.
        :raises CorruptDataError: a wrong entry, or a message the walk cannot decode.
        """
        parts: list[tuple[int, int, list[np.ndarray]]] = []
        for slot, (topic, partition, first, stop) in enumerate(queues):
            cq = self._queue_view(topic, partition)
            first, stop = int(first), min(int(stop), cq.max_offset)
            if first >= stop:
                continue
            # a start below the queue's: as a queue read
            parts.append((slot, first, cq.entry_parts(first, stop - first)))
        if not parts:
            return
        # the entries one range after another, then sorted by position (in the pool, read from the
        # mapped queue files: a read's entries are megabytes, which fresh memory would fault in page
        # by page on every read)
        bounds = np.cumsum([0, *(sum(map(len, pieces)) for *_, pieces in parts)], dtype=np.int64)
        positions, sizes = pooled(int(bounds[-1]), np.int64), pooled(int(bounds[-1]), np.int64)
        at = 0
        for piece in (piece for *_, pieces in parts for piece in pieces):
            positions[at:at + len(piece)], sizes[at:at + len(piece)] = piece["offset"], piece["size"]
            at += len(piece)
        # each slot's queue id and topic (UTF-8, one after another), as the rows are checked against them
        names = [str(q[0]).encode("utf-8") for q in queues]
        # every row given is checked against an entry of its queue, topic included: of one topic, its
        # rows' topic column is that name repeated (columnar.Rows.topic)
        one_topic = names[0] if len(set(names)) == 1 else None
        ranges = columnar.QueueRanges(
            positions, sizes, bounds, np.array([p[0] for p in parts], np.int64),
            np.array([p[1] for p in parts], np.int64), np.array([int(q[1]) for q in queues], np.int64),
            np.cumsum([0, *map(len, names)], dtype=np.int64), b"".join(names))
        del parts
        # Each row claims its entry (claim_entries: no merge of the ranges) while every entry passed is
        # claimed; from a region where one is not, the entries sorted by position (match_entries) find
        # what is wrong in log order.  met: per entry, in range order, then (table made) in position order.
        table = None if ranges.claimable() else ranges.merged()
        met = pooled(len(positions), np.bool_)
        met.fill(False)
        cursors = bounds[:-1].copy()
        lows, claimed = bounds[:-1].copy(), 0
        cl = self.commitlog
        while True:       # the entries of each commitlog file in turn: per range, lows[r] to highs[r]
            live = [r for r in range(len(lows)) if lows[r] < bounds[r + 1]]
            if not live:
                break
            first_at = min(int(positions[lows[r]]) for r in live)
            seg = cl.file_for(first_at)
            highs, boundary = lows.copy(), (first_at // cl.file_size + 1) * cl.file_size
            for r in live:
                highs[r] += np.searchsorted(positions[lows[r]:bounds[r + 1]], boundary)
            stop = max(int(np.add(positions[a:b], sizes[a:b], out=pooled(b - a, np.int64)).max())
                       for a, b in zip(lows, highs, strict=True) if b > a) - seg.base
            view = seg.file.view()
            zeros = functools.partial(cl.check_zeros_end, seg, limit=seg.wrote)   # data after zeros: damage
            for rows in columnar.walk_file(view, first_at - seg.base, seg.wrote, seg.base, cl.file_size,
                                           seg.path, stop=stop, batch_rows=batch_rows, fill=fill,
                                           zeros_end=zeros, ranges=ranges if table is None else None):
                own = columnar.view_of(view, rows)
                if table is None:
                    hits, passed, identity = columnar.claim_entries(own, rows, ranges, cursors, met)
                    claimed += len(hits)
                    if len(hits) == passed:
                        if len(hits):
                            yield own, _of_topic(rows if identity else rows.select(hits), one_topic)
                        continue
                    table = ranges.merged()
                    met = met[table.order]
                # the entries in this region's stretch, matched with its rows (both ascend)
                lo, hi = int((lows - bounds[:-1]).sum()), int((highs - bounds[:-1]).sum())
                walked = rows["position"]
                first = lo + int(np.searchsorted(table.phys[lo:hi], walked[0]))
                last = lo + int(np.searchsorted(table.phys[lo:hi], walked[-1], side="right"))
                if first == last:
                    continue
                hits, wrong, identity = columnar.match_entries(own, rows, table, first, last, met)
                if len(hits):
                    yield own, _of_topic(rows if identity else rows.select(hits), one_topic)
                if wrong >= 0:
                    self._wrong_queue_entry(queues, table, wrong)
            lows = highs
        if table is None:
            if claimed == len(positions):
                return
            table = ranges.merged()
            met = met[table.order]
        missed = np.flatnonzero(~met)
        if len(missed):
            self._wrong_queue_entry(queues, table, int(missed[0]))

    def _wrong_queue_entry(self, queues: Sequence[QueueSlice], table: columnar.QueueEntries, at: int) -> None:
        sizes, offsets, slots = table.columns(slice(at, at + 1))
        topic, partition, *_ = queues[int(slots[0])]
        self._wrong_entry(topic, int(partition), int(offsets[0]), int(table.phys[at]), int(sizes[0]))

    def queue_offsets_at(self, topic: str, partition: int, positions: Iterable[int]) -> list[int]:
        """For each commitlog position, the first offset of the queue whose message starts at or after
        it (the queue's end where none does): where a byte range of the commitlog starts in the queue.
        A queue's entries ascend in physical offset, so each is one binary search of its consume-queue
        files: ``O(files + log entries)``, no message read.

        :raises NotFoundError: no such queue.
        """
        self._check_open()
        cq = self._queue_view(topic, partition)
        if isinstance(cq, ScannedQueue):
            columns = [(cq.min_offset, cq.rows["offset"])]
        else:
            columns = [(seg.first_offset, seg.entries["offset"]) for seg in cq.segment_files() if len(seg)]
        answers = []
        for position in positions:
            found = cq.max_offset
            for first, phys in columns:
                at = search(phys, int(position), Bound.SMALLEST_UPPER)
                if at < len(phys):
                    found = first + at
                    break
            answers.append(min(max(found, cq.min_offset), cq.max_offset))
        return answers

    def queue_span(self, topic: str, partition: int, start: int, end: int) -> tuple[int, int]:
        """The commitlog bytes ``[first, last)`` from the message of queue offset ``start`` to the end of
        that of ``end - 1`` (offsets clamped to the queue's; ``(0, 0)`` when none is left).  Two
        consume-queue entries read: ``O(log files)``.

        :raises NotFoundError: no such queue.
        """
        self._check_open()
        cq = self._queue_view(topic, partition)
        start, end = max(start, cq.min_offset), min(end, cq.max_offset)
        if start >= end:
            return 0, 0
        first, last = cq.entries(start, 1), cq.entries(end - 1, 1)
        return int(first["offset"][0]), int(last["offset"][0]) + int(last["size"][0])

    def _tags_codes_of(self, view: memoryview, rows: columnar.Rows) -> np.ndarray:
        """Each row's consume-queue tags code (:meth:`tags_code`): the TAGS hashes, in C; delay
        messages the code their entry holds (:meth:`_dumped_tags_code`), message by message (they are
        few)."""
        codes = columnar.tags_hashes(view, rows)
        scheduled = np.flatnonzero(columnar.topic_is(view, rows, SCHEDULE_TOPIC))
        if len(scheduled):
            codes[scheduled] = [self._dumped_tags_code(m)
                                for m in columnar.messages(view, rows.select(scheduled))]
        return codes

    def _dumped_tags_code(self, msg: RocketMQMessage) -> int:
        """The tags code ``dump --json`` shows: what the broker stores in the consume queue.  A delay
        message's is its entry's (a delivery time under the broker's ``messageDelayLevel``, which the
        store does not record and segstore may be given otherwise), :meth:`tags_code` where no entry
        points at it.  ``O(log(files))`` for a delay message, ``O(1)`` otherwise."""
        if msg.topic != SCHEDULE_TOPIC or not has_queue_entry(msg.sys_flag):
            return self.tags_code(msg)
        cq = self.queues.get((msg.topic, msg.queue_id))
        if cq is not None and cq.min_offset <= msg.queue_offset < cq.max_offset:
            row = cq.entries(msg.queue_offset, 1)
            if len(row) and int(row["offset"][0]) == msg.physical_offset:
                code = self.entry_tags_codes(msg.topic, msg.queue_id, row["tags_code"].astype(np.int64))
                return int(code[0])
        return self.tags_code(msg)

    def _scan_queue(self, build: Callable[[memoryview, columnar.Rows], list[pa.RecordBatch]], topic: str,
                    partition: int, offset: int, batch_rows: int, fill: int = columnar.FILL_ALL
                    ) -> Iterator[pa.RecordBatch]:
        cq = self.queues.get((topic, partition))
        if cq is None:
            raise NotFoundError(f"expected a consume queue for {topic}/{partition}, found none", self.path)
        cl = self.commitlog
        # an offset below the queue's first (its old files deleted) reads from there, as read() and the
        # broker (4.9.7 DefaultMessageStore.getMessage: OFFSET_TOO_SMALL, nextBeginOffset = minOffset);
        # a negative one is no offset (Store._check_read refused it)
        position = max(offset, cq.min_offset)
        while True:
            entries = cq.entries(position, batch_rows)
            if not len(entries):
                return
            phys = entries["offset"].astype(np.int64)
            sizes = entries["size"].astype(np.int64)
            # one batch per run of entries in the same commitlog file, bounded in bytes
            files_of = phys // cl.file_size
            cut = len(phys)
            changes = np.flatnonzero(files_of[1:] != files_of[:-1])
            if len(changes):
                cut = int(changes[0]) + 1
            cut = max(1, min(cut, int(np.searchsorted(np.cumsum(sizes[:cut]), columnar.BATCH_BYTES)) + 1))
            phys, sizes = phys[:cut], sizes[:cut]
            cl.check_not_lost(int(phys[0]))   # a file lost between others: named as read() names it
            seg = cl.file_for(int(phys[0]))
            view = seg.file.view()
            rows = columnar.Rows(cut)
            n = columnar.decode_at(view, phys - seg.base, len(view), seg.base, rows, fill=fill)
            bad = self._queue_rows_end(view, rows, topic, partition, position, phys, sizes)
            if bad:
                yield from build(view, rows if bad == n else rows.select(slice(0, bad)))
            if bad < len(phys):
                # a message whose properties are not UTF-8 (the C decode stops at it): its own row
                odd = None if bad < n else columnar.java_row(view, int(phys[n]) - seg.base, len(view),
                                                             seg.base)
                own = view if odd is None else columnar.view_of(view, odd)
                if odd is None or not self._queue_rows_end(own, odd, topic, partition, position + n, phys[n:],
                                                           sizes[n:]):
                    self._wrong_entry(topic, partition, position + bad, int(phys[bad]), int(sizes[bad]))
                else:
                    yield from build(own, odd)
                    cut = n + 1
            position += cut

    def _queue_rows_end(self, view: memoryview, rows: columnar.Rows, topic: str, partition: int,
                        position: int, phys: np.ndarray, sizes: np.ndarray) -> int:
        """How many of ``rows`` (decoded at the queue's entries from queue offset ``position`` on:
        ``phys``, ``sizes``) are those entries' messages before the first that is not (its size, queue,
        queue offset and topic; or a multi-dispatch (LMQ) queue's message the entry names)."""
        n = len(rows)
        wrong = ((rows["size"] != sizes[:n]) | (rows["queue_id"] != partition)
                 | (rows["queue_offset"] != position + np.arange(n))
                 | ~columnar.topic_is(view, rows, topic))
        for i in np.flatnonzero(wrong).tolist():     # a multi-dispatch (LMQ) queue's entries
            if not multidispatch.is_entry(self.commitlog.read(int(phys[i])), topic, partition, position + i,
                                          int(sizes[i])):
                break
            wrong[i] = False
        return int(np.argmax(wrong)) if wrong.any() else n

    def _entry_message(self, topic: str, partition: int, queue_offset: int, phys: int, size: int,
                       checks_offset: bool, *, check_crc: bool = True) -> RocketMQMessage:
        """The message a consume-queue entry (``queue_offset``: commitlog ``phys``, ``size`` bytes)
        points at, checked to be it: its size, topic, queue and (``checks_offset``: a consume queue
        the broker wrote, not one rebuilt from a scan) queue offset; its body CRC unless not
        ``check_crc``.

        :raises CorruptDataError: it is not (:meth:`_wrong_entry`).
        """
        msg = self.commitlog.read(phys, check_crc=check_crc)
        if (msg.size != size or msg.topic != topic or msg.queue_id != partition
                or (checks_offset and msg.queue_offset != queue_offset)) \
                and not multidispatch.is_entry(msg, topic, partition, queue_offset, size):
            self._wrong_entry(topic, partition, queue_offset, phys, size)
        return msg

    def _wrong_entry(self, topic: str, partition: int, queue_offset: int, phys: int, size: int) -> None:
        """Raise what :meth:`read` raises for the consume-queue entry at ``queue_offset``."""
        msg = self.commitlog.read(phys)
        seg = self.commitlog.file_for(phys)
        try:
            validate_topic(msg.topic, TOPIC_MAX_LENGTH_V2)
        except InvalidTopicError as err:     # damage: the broker never stores such a name
            raise CorruptDataError(f"expected a stored topic the broker accepts, found: {err.message}",
                                   seg.path, phys - seg.base) from err
        raise CorruptDataError(
            f"expected a {topic}/{partition} message of {size} bytes (queue offset {queue_offset}), "
            f"found a {msg.topic}/{msg.queue_id} message of {msg.size} bytes "
            f"(queue offset {msg.queue_offset})", seg.path, phys - seg.base)

    def message_at(self, physical_offset: int) -> RocketMQMessage:
        """The message at a commitlog offset."""
        self._check_open()
        return self.commitlog.read(physical_offset)

    # -- segstore.logview.LogView (what the core's generic index layouts use) ----------------
    #: time lookups go by store time, as the broker's getOffsetInQueueByTime
    time_column = "storeTimestamp"
    control_column = None

    def record_at(self, topic: str, partition: int, offset: int, position: int) -> RocketMQMessage | None:
        """The queue's message at ``offset``, walking the commitlog from ``position`` (skipping other
        queues' messages).  ``O(messages between)``; None when the walk passes ``offset``."""
        self._check_open()
        for _, record in self.commitlog.walk(position):
            if not isinstance(record, RocketMQMessage):
                continue
            if (record.topic, record.queue_id) == (topic, partition) and has_queue_entry(record.sys_flag) \
                    and record.queue_offset >= offset:
                return record if record.queue_offset == offset else None
        return None

    def positions(self, topic: str, partition: int, offset: int = 0) -> Iterator[Positions]:
        """The queue's ``(queue offsets, physical offsets, sizes)`` from ``offset`` on (the first held at
        or after it), straight from its consume-queue entries: no message is decoded or checked
        (``verify`` checks the entries against the commitlog; :meth:`scan_arrow` checks each).
        Chunks of :data:`_POSITIONS_CHUNK` entries.

        :raises NotFoundError: no such queue.
        """
        self._check_open()
        cq = self._queue_view(topic, partition)
        position = max(offset, cq.min_offset)
        while True:
            entries = cq.entries(position, _POSITIONS_CHUNK)
            if not len(entries):
                return
            yield (np.arange(position, position + len(entries), dtype=np.int64),
                   entries["offset"].astype(np.int64), entries["size"].astype(np.int64))
            position += len(entries)

    def position_bases(self, topic: str, partition: int, positions: np.ndarray) -> np.ndarray:
        """The commitlog file start of each physical offset."""
        positions = np.asarray(positions, dtype=np.int64)
        return positions - positions % self.commitlog.file_size

    def index_home(self, topic: str, partition: int) -> tuple[str, str]:
        """Extra indexes under ``STORE/.segstore/LAYOUT/TOPIC/QUEUEID`` (the broker opens fixed paths)."""
        return self.path, os.path.join(topic, str(partition))

    def index_homes(self) -> list[str]:
        return [self.path]

    def key_offsets(self, topic: str, partition: int, key: bytes, max_hits: int | None = None) -> list[int]:
        """Queue offsets of the queue's messages carrying ``key`` (a KEYS token or the UNIQ_KEY), through
        the broker's IndexFiles, each candidate checked against the commitlog.  ``O(chain length)``.

        :raises UnsupportedOperationError: the store has no ``index/`` (messageIndexEnable off).
        """
        from .query import query_by_key

        self._check_open()
        service, owned = self.index, None
        if service is None:
            directory = os.path.join(self.path, INDEX_DIR)
            if not files.is_dir(directory):
                raise UnsupportedOperationError("expected the broker's index/ directory "
                                                "(messageIndexEnable), found none", self.path)
            service = owned = self._index_service(False)
            service.load()

        def message(phys: int) -> RocketMQMessage | None:
            try:
                return self.commitlog.read(phys)
            except (CorruptDataError, OffsetOutOfRangeError):
                return None

        try:
            found = query_by_key(service, topic, key.decode("utf-8", "surrogateescape"), message,
                                 max_hits=NO_HIT_LIMIT)
        finally:
            if owned is not None:
                owned.close()
        offsets = sorted(m.queue_offset for m in found
                         if m.queue_id == partition and has_queue_entry(m.sys_flag))
        return offsets if max_hits is None else offsets[-max_hits:] if max_hits else []

    @property
    def commitlog_only(self) -> bool:
        """True when a store opened for reading holds messages but no consume queue."""
        return self.mode == "r" and not self.queues and self.commitlog.end > self.commitlog.min_offset

    def _queue_views(self) -> Mapping[tuple[str, int], ConsumeQueue | ScannedQueue]:
        """The consume queues, or for a commitlog-only store the queues one scan finds (built once)."""
        if not self.commitlog_only:
            return self.queues
        if self._scanned is None:
            rows: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
            first: dict[tuple[str, int], int] = {}
            for msg in self.scan():
                if has_queue_entry(msg.sys_flag):
                    key = (msg.topic, msg.queue_id)
                    first.setdefault(key, msg.queue_offset)
                    rows.setdefault(key, []).append((msg.physical_offset, msg.size, self.tags_code(msg)))
            self._scanned = {key: ScannedQueue(first[key], np.array(r, dtype=CQ_DTYPE))
                             for key, r in rows.items()}
            self.notes.append(SCAN_NOTE)
        return self._scanned

    def _queue_view(self, topic: str, partition: int) -> ConsumeQueue | ScannedQueue:
        cq = self._queue_views().get((topic, partition))
        if cq is None:
            raise NotFoundError(f"expected a consume queue for {topic}/{partition}, found none", self.path)
        return cq

    def read(self, topic: str, partition: int, offset: int = 0, count: int | None = None, *,
             tag: str | None = None, decompress: bool = False, isolation: str = READ_UNCOMMITTED
             ) -> Iterator[RocketMQMessage]:
        """Messages of one queue from ``offset`` through its consume queue, lazily.

        With ``tag``, a subscription expression as a consumer's (:func:`subscription_tags`): only
        messages whose TAGS are one of its tags (``"TagA || TagB"``; ``"*"``: every message): the
        entry's tags code is compared first (no commitlog read for others), then the real tag.
        ``count`` bounds the messages returned.  Entries are read in chunks of
        :data:`_READ_CHUNK`, so memory stays bounded on long queues.

        An ``offset`` below the queue's first (its commitlog files deleted, or lost) reads from the
        first, as the broker's ``getMessage`` answers ``OFFSET_TOO_SMALL`` with that offset as the
        next to pull (``nextOffsetCorrection``) and the consumer goes on from there.

        A message's ``body`` is as stored, compressed where its producer compressed it; with
        ``decompress``, as consumers read it (:func:`.bodycodec.consumed`).

        ``isolation`` as :meth:`dump_json`'s: ``read_committed`` leaves out prepared and rolled-back
        transaction messages (not counted in ``count``).  The broker gives them no consume-queue
        entry, so a queue of its points at none: both levels read the same there.

        :raises CorruptDataError: an entry points at something that is not its message, or (with
            ``decompress``) a compressed body does not inflate.
        :raises ConfigError: an unknown isolation level.
        """
        self._check_open()
        check_decompress(decompress, self.path)
        self._check_topic(topic)
        self._check_read(partition, offset, count)
        committed = check_isolation(isolation) == READ_COMMITTED
        if tag is not None and not isinstance(tag, str):
            raise ConfigError(f"expected a tag as a string, found {type(tag).__name__} {cut(tag)}", self.path)
        cq = self._queue_view(topic, partition)
        offset = max(offset, cq.min_offset)
        # a consume queue's entry n points at the message whose QUEUEOFFSET is n (verify checks it)
        checks_offsets = isinstance(cq, ConsumeQueue)
        tags = subscription_tags(tag, self.path) if tag is not None else None
        codes = np.array([string_hash(t) for t in tags], np.int64) if tags is not None else None
        returned = 0
        position = offset
        while count is None or returned < count:
            rows = cq.entries(position, _READ_CHUNK)
            if not len(rows):
                return
            if codes is None:
                slots: Iterable[int] = range(len(rows))
            else:
                stored = self.entry_tags_codes(topic, partition, rows["tags_code"])
                slots = np.flatnonzero(np.isin(stored, codes))
            phys_col, size_col = rows["offset"].tolist(), rows["size"].tolist()
            for i in slots:
                msg = self._entry_message(topic, partition, position + i, phys_col[i], size_col[i],
                                          checks_offsets)
                if tags is not None and msg.tags not in tags:
                    continue
                if committed and not has_queue_entry(msg.sys_flag):
                    continue
                yield self.consumed(msg) if decompress else msg
                returned += 1
                if count is not None and returned >= count:
                    return
            position += len(rows)

    def topics(self) -> list[str]:
        self._check_open()
        return sorted({topic for topic, _ in self._queue_views()})

    def partitions(self, topic: str) -> list[int]:
        self._check_open()
        self._check_topic(topic)
        return sorted(qid for t, qid in self._queue_views() if t == topic)

    def offset_range(self, topic: str, partition: int) -> tuple[int, int]:
        self._check_open()
        self._check_topic(topic)
        self._check_partition(partition)
        cq = self._queue_view(topic, partition)
        return cq.min_offset, cq.max_offset

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The first queue offset stored at or after ``timestamp`` (None: every message is older).

        :raises ConfigError: a negative ``timestamp`` (no store time; refused on every format, as
            Kafka's would be taken for a ListOffsets code).
        """
        self._check_topic(topic)
        self._check_partition(partition)
        self._check_time("lookup", timestamp, required=True)
        cq = self._queue_view(topic, partition)   # NotFoundError for a queue not held, index or not
        # the extra sparse time index (segstore.layouts)
        if self.indexes is not None and "time" in self.indexes:
            return self.indexes.offset_for_time(topic, partition, timestamp)
        from .query import offset_in_queue_by_time

        start, end = self.offset_range(topic, partition)
        found = offset_in_queue_by_time(start, end, lambda offset: self._stored_at(cq, offset), timestamp)
        return None if found >= end else found

    def segment_infos(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """The consume-queue files of a queue: ``start_offset``, ``end_offset``, ``bytes``
        (the sum of the message sizes they point at) and ``path``, for split planning."""
        self._check_open()
        self._check_partition(partition)
        cq = self._queue_view(topic, partition)
        if isinstance(cq, ScannedQueue):
            return [{"start_offset": cq.min_offset, "end_offset": cq.max_offset,
                     "bytes": int(cq.rows["size"].sum(dtype=np.int64)), "path": self.commitlog.directory}]
        return [{"start_offset": seg.first_offset, "end_offset": seg.first_offset + len(seg),
                 "bytes": int(seg.entries["size"].sum(dtype=np.int64)), "path": seg.file.path}
                for seg in cq.segment_files()]

    # -- records ------------------------------------------------------------
    def to_json(self, record: RocketMQMessage) -> dict[str, Any]:
        self._check_record(record, RocketMQMessage)
        return {
            "topic": record.topic, "queue_id": record.queue_id, "queue_offset": record.queue_offset,
            "physical_offset": record.physical_offset, "size": record.size, "body_crc": record.body_crc,
            "flag": record.flag, "sys_flag": record.sys_flag, "born_timestamp": record.born_timestamp,
            "born_host": str(record.born_host), "store_timestamp": record.store_timestamp,
            "store_host": str(record.store_host), "reconsume_times": record.reconsume_times,
            "prepared_transaction_offset": record.prepared_transaction_offset,
            "body": base64.b64encode(record.body).decode("ascii"), "properties": dict(record.properties),
            "tags": record.tags, "keys": record.keys, "tags_code": self._dumped_tags_code(record),
            "msg_id": record.msg_id, **_stored_properties_field(record), **stored_topic_field(record),
        }

    def dump_json(self, *, topic: str | None = None, partition: int | None = None,
                  isolation: str = READ_UNCOMMITTED, threads: int | None = None, decompress: bool = False,
                  begin: int | None = None, end: int | None = None,
                  offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None, tag: str | None = None,
                  walk_ahead: bool = False) -> Iterator[bytes | memoryview]:
        """``dump --json`` lines (UTF-8) in commitlog order, :data:`JSON_KEYS` objects (with an ``ext``
        object for a message a ``consumequeue_ext`` unit describes), a batch of messages at a time
        in C where built.  ``read_committed`` leaves out what no consumer is given: prepared and
        rolled-back transaction messages, which no consume queue points at (:func:`has_queue_entry`).
        The C path's blocks are views of one reused buffer (valid until the next block is
        asked for).  ``threads`` (default: see segstore.overlap.thread_count) walks and formats the
        commitlog by byte ranges on that many threads (as :meth:`scan_arrow`), the same bytes.
        ``decompress``: each message as consumers read it (:func:`.bodycodec.consumed`; a batch
        holding a compressed body is formatted message by message).  ``begin``/``end`` (ms,
        inclusive): only the messages at each queue's :meth:`offsets_between` (store times), still
        in commitlog order, read from the first of them to the last; no message without a queue
        entry.  ``offsets`` (``{(topic, queue): (start, stop)}``): those offsets instead.
        ``O(bytes read)``.  ``tag``: only the messages whose TAGS equal it, queue by queue as
        ``mqadmin printMsg -s`` prints them (:meth:`tagged`; ``offsets`` not taken).

        ``walk_ahead`` (with ``threads`` above 1): the ranges are walked and formatted ahead of the block
        the caller holds, also while this generator is suspended (:func:`segstore.overlap.ahead`: the
        caller's own work on a block runs beside the formatting of the next ones), a few ranges a
        thread at most.  Only for a caller that reads the blocks within one call of its own and closes
        the generator (or reads it to its end) before it closes or changes the store (the CLI's dump):
        closing it waits for the threads.  Without it no thread runs while the generator is suspended.

        :raises ConfigError: an unknown isolation level, ``threads`` below 1.
        :raises CorruptDataError: with ``decompress``, a compressed body that does not inflate.
        """
        self._check_open()
        self._check_dump(topic, partition, tag)
        check_decompress(decompress, self.path)
        committed = check_isolation(isolation) == READ_COMMITTED
        threads = thread_count(threads)
        ext_units = self._ext_units_by_physical_offset()
        if tag is not None:
            for msg in self.tagged(topic, partition, tag, begin, end, decompress=decompress):
                yield _json_line(self._json_record(msg, ext_units))
            return
        lmq = self._multi_dispatch_dump(topic, partition, begin, end, offsets, decompress)
        if lmq is not None:
            for msg in lmq:
                yield _json_line(self._json_record(msg, ext_units))
            return
        window = self._windows(topic, partition, begin, end, offsets)
        if window is not None and window.lo is None:
            return      # a window holding no message: nothing for either path to walk

        def json_lines(writer: columnar.JsonWriter, view: memoryview, rows: columnar.Rows
                       ) -> bytes | memoryview:
            # message by message: inflating costs more; a row columnar.java_row built (properties that
            # are not UTF-8, its own view) adds their stored bytes, which the C writer does not see
            if (decompress and _has_compressed(rows)) or rows.view is not None:
                return b"".join(_json_line(self.to_json(self.consumed(m) if decompress else m))
                                for m in columnar.messages(view, rows))
            return writer.lines(view, rows, self._tags_codes_of(view, rows))

        if columnar._speedups is not None and not ext_units:   # in C, a batch at a time
            yield from self._formatted(topic, partition, committed, window, threads, columnar.JsonWriter,
                                       json_lines, walk_ahead)
            self._check_queue_ends(topic, partition)
            return
        for msg in self._scan(window=window if window is not None and window.lo is not None else None):
            if topic is not None and msg.topic != topic:
                continue
            if partition is not None and msg.queue_id != partition:
                continue
            if committed and not has_queue_entry(msg.sys_flag):
                continue
            if window is not None and not window.holds(msg):
                continue
            yield _json_line(self._json_record(self.consumed(msg) if decompress else msg, ext_units))
        self._check_queue_ends(topic, partition)

    def _json_record(self, msg: RocketMQMessage, ext_units: Mapping[int, tuple[int, Any]]) -> dict[str, Any]:
        """A ``dump --json`` object: :meth:`to_json`, and the ``consumequeue_ext`` unit describing it."""
        record = self.to_json(msg)
        unit = ext_units.get(msg.physical_offset)
        if unit is not None:
            address, ext = unit
            record["ext"] = {"address": address, "tags_code": ext.tags_code,
                             "store_timestamp": ext.store_timestamp, "bitmap": ext.bitmap.hex()}
        return record

    def tagged(self, topic: str | None, partition: int | None, tag: str, begin: int | None = None,
               end: int | None = None, *, decompress: bool = False) -> Iterator[RocketMQMessage]:
        """The messages whose TAGS equal ``tag``, queue by queue (``mqadmin printMsg -s``), each queue's
        at the offsets :meth:`offsets_between` gives for ``begin``/``end``: the consume queues' tags
        codes filter before the commitlog is read (:meth:`read`).  ``O(entries + bytes of the hits)``.

        :raises ConfigError: an expression :func:`subscription_tags` refuses, whatever the store holds."""
        subscription_tags(tag, self.path)
        for t in [topic] if topic is not None else self.topics():
            for q in [partition] if partition is not None else self.partitions(t):
                start, stop = self.offsets_between(t, q, begin, end)
                for msg in self.read(t, q, start, tag=tag, decompress=decompress):
                    if msg.queue_offset >= stop:
                        break
                    yield msg

    def dump_text(self, *, topic: str | None = None, partition: int | None = None, index: bool = False,
                  isolation: str = READ_UNCOMMITTED, threads: int | None = None, decompress: bool = False,
                  begin: int | None = None, end: int | None = None,
                  offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None, tag: str | None = None,
                  walk_ahead: bool = False) -> Iterator[bytes | memoryview]:
        """:meth:`dump`'s lines as blocks of UTF-8 text, each line ending in a newline: the message
        lines a batch of messages at a time in C where built (filtered as :meth:`dump_json`, the
        same bytes as :meth:`dump`'s Python loop), then (``index``) the index lines.  The C path's
        blocks are views of one reused buffer (valid until the next block is asked for).
        ``threads``, ``decompress``, ``begin``, ``end``, ``offsets``, ``tag`` and ``walk_ahead`` as
        :meth:`dump_json` (``index``: every index line, whatever the window).  ``O(bytes read)``.

        :raises ConfigError: an unknown isolation level, ``threads`` below 1.
        :raises CorruptDataError: with ``decompress``, a compressed body that does not inflate.
        """
        self._check_open()
        self._check_dump(topic, partition, tag)
        check_decompress(decompress, self.path)
        committed = check_isolation(isolation) == READ_COMMITTED
        threads = thread_count(threads)
        if columnar._speedups is None or tag is not None or self._multi_dispatch_queues(topic, partition):
            for line in self.dump(topic=topic, partition=partition, index=index, isolation=isolation,
                                  decompress=decompress, begin=begin, end=end, offsets=offsets, tag=tag):
                yield line.text.encode("utf-8", "surrogatepass") + b"\n"
            return

        def text_lines(writer: columnar.TextWriter, view: memoryview, rows: columnar.Rows
                       ) -> bytes | memoryview:
            # message by message: inflating costs more; a row columnar.java_row built (properties that
            # are not UTF-8, its own view) adds their stored bytes, which the C writer does not see
            if (decompress and _has_compressed(rows)) or rows.view is not None:
                return b"".join((message_line(self.consumed(m)) + "\n").encode("utf-8", "surrogatepass")
                                for m in columnar.messages(view, rows))
            return writer.lines(view, rows)

        window = self._windows(topic, partition, begin, end, offsets)
        yield from self._formatted(topic, partition, committed, window, threads, columnar.TextWriter,
                                   text_lines, walk_ahead)
        self._check_queue_ends(topic, partition)
        if index:
            yield from (line.text.encode("utf-8", "surrogatepass") + b"\n"
                        for line in self._dump_indexes(topic, partition))

    def dump(self, *, topic: str | None = None, partition: int | None = None, index: bool = False,
             isolation: str = READ_UNCOMMITTED, decompress: bool = False, begin: int | None = None,
             end: int | None = None, offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None,
             tag: str | None = None) -> Iterator[DumpLine]:
        """One line per message in commitlog order (``read_committed``, ``decompress``, ``begin``, ``end``,
        ``offsets`` and ``tag`` as :meth:`dump_json`); with ``index`` then every consume-queue entry of
        the selected queues, every IndexFile header and entry, and what :meth:`verify` finds
        (``problem`` lines)."""
        self._check_open()
        self._check_dump(topic, partition, tag)
        check_decompress(decompress, self.path)
        committed = check_isolation(isolation) == READ_COMMITTED
        if tag is not None:
            for msg in self.tagged(topic, partition, tag, begin, end, decompress=decompress):
                yield DumpLine(message_line(msg), json=False)
            if index:
                yield from self._dump_indexes(topic, partition)
            return
        lmq = self._multi_dispatch_dump(topic, partition, begin, end, offsets, decompress)
        if lmq is not None:
            for msg in lmq:
                yield DumpLine(message_line(msg), json=False)
            if index:
                yield from self._dump_indexes(topic, partition)
            return
        window = self._windows(topic, partition, begin, end, offsets)
        for msg in self._scan(window=window if window is not None and window.lo is not None else None):
            if topic is not None and msg.topic != topic:
                continue
            if partition is not None and msg.queue_id != partition:
                continue
            if committed and not has_queue_entry(msg.sys_flag):
                continue
            if window is not None and not window.holds(msg):
                continue
            yield DumpLine(message_line(self.consumed(msg) if decompress else msg), json=False)
        if index:
            yield from self._dump_indexes(topic, partition)
        self._check_queue_ends(topic, partition)

    def _formatted(self, topic: str | None, partition: int | None, committed: bool, window: _Windows | None,
                   threads: int, new_writer: Callable[[], _W],
                   lines: Callable[[_W, memoryview, columnar.Rows], bytes | memoryview],
                   walk_ahead: bool = False) -> Iterator[bytes | memoryview]:
        """The C dumps' walk (:meth:`dump_json`, :meth:`dump_text`): the rows of ``topic``/``partition``
        (None: any; ``committed``: read_committed's; ``window``: its offsets only, walked from its first
        message to its last) region by region in log order, each made ``lines(writer, view, rows)``
        with a ``new_writer()`` reused region to region, on ``threads`` threads (a writer each;
        ``walk_ahead`` as :meth:`_parallel_regions`).  Blocks may be views of a writer's buffer, valid
        until the next is asked for."""
        if window is not None and window.lo is None:
            return
        lo, hi = (window.lo, window.hi) if window is not None else (None, None)
        aligned = window is not None

        def kept(view: memoryview, rows: columnar.Rows) -> columnar.Rows:
            rows = _selected(view, rows, topic, partition, committed)
            return rows if window is None or not len(rows) else window.rows(view, rows)

        if threads > 1:
            def made(view: memoryview, rows: columnar.Rows) -> bytes | memoryview:
                rows = kept(view, rows)
                if not len(rows):
                    return b""
                # a writer of its own: the block is a view of its buffer, handed out as it is (a copy
                # into a bytes object held the GIL through a range's text, the other threads waiting)
                return lines(new_writer(), view, rows)

            regions = self._parallel_regions(lo, hi, _DUMP_ROWS, threads, made, aligned=aligned,
                                             walk_ahead=walk_ahead)
            try:
                for blocks in regions:
                    yield from (block for block in blocks if block)
            finally:
                regions.close()     # (its threads stop before the caller goes on)
            return
        writer = new_writer()
        for view, rows in self._region_rows(lo, hi, _DUMP_ROWS, reuse=True, aligned=aligned):
            rows = kept(view, rows)
            if len(rows):
                yield lines(writer, view, rows)

    def _multi_dispatch_dump(self, topic: str | None, partition: int | None, begin: int | None,
                             end: int | None, offsets: Mapping[tuple[str, int], tuple[int, int]] | None,
                             decompress: bool) -> Iterator[RocketMQMessage] | None:
        """A dump of ``topic``'s multi-dispatch (LMQ) queues: None unless ``topic`` is named and each
        selected queue of it points at messages of other topics (RocketMQ 4.9.7
        ``ConsumeQueue.multiDispatchLmqQueue`` writes such queues: :meth:`_multi_dispatch_queues`).
        The commitlog holds no message of such a topic, so the commitlog walk the dumps make would find
        none: these dumps read the queues instead (:meth:`read`, each entry checked), the messages as
        stored (their own topic and queue, as ``getMessage`` serves them), merged in commitlog order.
        ``begin``/``end``/``offsets`` select each queue's offsets as for any queue."""
        chosen = self._multi_dispatch_queues(topic, partition)
        if not chosen:
            return None
        assert topic is not None
        views = self._queue_views()
        windows = self.dump_windows(topic, partition, begin, end, offsets)
        reads = []
        for q in chosen:
            cq = views[topic, q]
            start, stop = cq.min_offset, cq.max_offset
            if windows is not None:
                if (topic, q) not in windows:
                    continue
                start, stop = windows[topic, q]
            if start < stop:
                reads.append(self.read(topic, q, start, stop - start, decompress=decompress))
        return heapq.merge(*reads, key=lambda m: m.physical_offset)

    def _multi_dispatch_queues(self, topic: str | None, partition: int | None) -> list[int]:
        """The selected queues of ``topic`` when each points at messages of other topics, a multi-dispatch
        (LMQ) topic's (judged by the first entry of each: one decode a queue); [] otherwise, or when no
        topic is named."""
        if topic is None:
            return []
        views = self._queue_views()
        chosen = sorted(q for t, q in views if t == topic and (partition is None or q == partition))
        for q in chosen:
            cq = views[topic, q]
            rows = cq.entries(cq.min_offset, 1)
            if not len(rows):
                continue
            try:
                first = self.commitlog.read(int(rows["offset"][0]))
            except SegstoreError:
                return []           # the walk's dump reports what is there
            if first.topic == topic:
                return []
        return chosen

    def _windows(self, topic: str | None, partition: int | None, begin: int | None, end: int | None,
                 offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None) -> _Windows | None:
        """The selected queues' windows between ``begin`` and ``end``, or of ``offsets`` (None: neither
        given)."""
        windows = self.dump_windows(topic, partition, begin, end, offsets)
        return None if windows is None else _Windows(self, windows)

    def _dump_indexes(self, topic: str | None, partition: int | None) -> Iterator[DumpLine]:
        for (t, q), cq in sorted(self.queues.items()):
            if (topic is not None and t != topic) or (partition is not None and q != partition):
                continue
            yield DumpLine(f"Dumping {cq.directory} (offsets {cq.min_offset}..{cq.max_offset})", json=False)
            for number, entry in enumerate(cq.entries(cq.min_offset), cq.min_offset):
                yield DumpLine(f"offset: {number} commitlogOffset: {int(entry['offset'])} "
                               f"size: {int(entry['size'])} tagsCode: {int(entry['tags_code'])}", json=False)
        for index_file in self.index.files if self.index is not None else ():
            h = index_file.header
            yield DumpLine(f"Dumping {index_file.path}", json=False)
            yield DumpLine(f"beginTimestamp: {h.begin_timestamp} endTimestamp: {h.end_timestamp} "
                           f"beginPhyOffset: {h.begin_phy_offset} endPhyOffset: {h.end_phy_offset} "
                           f"hashSlotCount: {h.hash_slot_count} indexCount: {h.index_count}", json=False)
            for number, entry in enumerate(index_file.entries, 1):
                yield DumpLine(f"entry: {number} keyHash: {int(entry['hash'])} commitlogOffset: "
                               f"{int(entry['phy_offset'])} timeDiff: {int(entry['time_diff'])} "
                               f"prevIndex: {int(entry['prev'])}", json=False)
        for problem in self.verify():
            yield DumpLine(str(problem), {"path": problem.path, "pos": problem.pos,
                                          "message": problem.message}, problem=True)

    def _ext_units_by_physical_offset(self) -> dict[int, tuple[int, Any]]:
        """Physical offset -> ``(address, unit)`` for every consume-queue entry that points into
        ``consumequeue_ext/`` (empty for a store without it)."""
        found: dict[int, tuple[int, Any]] = {}
        for key, ext in self.queue_exts.items():
            cq = self.queues.get(key)
            if cq is None:
                continue
            rows = cq.entries(cq.min_offset)
            for i in np.flatnonzero(rows["tags_code"] <= EXT_MAX_ADDR).tolist():
                address = int(rows["tags_code"][i])
                try:
                    unit = ext.get(address)
                except CorruptIndexError:       # dumped without it; verify reports it
                    continue
                if unit is not None:
                    found[int(rows["offset"][i])] = (address, unit)
        return found

    # -- retention (retention.py) ---------------------------------------------
    def retention(self, *, dry_run: bool = False, now_ms: int | None = None, topic: str | None = None,
                  partition: int | None = None, disk_ratio: Any = None,
                  **options: Any) -> list[dict[str, Any]]:
        """The broker's clean-up: expired commitlog files, then the queue and index files below them."""
        from . import retention as retention_rules  # its result dataclass: not for `info`

        if topic is not None or partition is not None:
            raise ConfigError("expected no topic or queue (--topic, --queue/--partition): RocketMQ retention "
                              "is store-wide (one commitlog holds every queue)", self.path)
        if not dry_run:
            self._check_writable()
        self._check_open()
        self._check_time("now", now_ms)   # a str met the files' times ("'>=' not supported", TypeError)
        if self._flusher is None:
            return [retention_rules.run(self, now_ms=now_ms, dry_run=dry_run,
                                        disk_ratio=disk_ratio).to_dict()]
        with self._flusher.lock:
            return [retention_rules.run(self, now_ms=now_ms, dry_run=dry_run,
                                        disk_ratio=disk_ratio).to_dict()]

    # -- tooling -------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What the store holds; per queue its offsets, files, the commitlog bytes its messages take
        (``bytes``: the sizes its consume-queue entries give, from its min offset; ``topic_bytes`` their
        sums by topic, largest first: which topic fills the disk; prepared and rolled-back transaction
        messages are in no queue) and ``last_updated``
        (``mqadmin topicStatus``'s "Last Updated").  ``O(queues + messages)`` for the byte counts, numpy
        over the mapped consume queues."""
        self._check_open()
        queues: list[dict[str, Any]] = [
            {"topic": t, "queue_id": q, "min_offset": cq.min_offset, "max_offset": cq.max_offset,
             "files": len(cq.segment_files()) if isinstance(cq, ConsumeQueue) else 0,
             "bytes": _queue_bytes(cq), "last_updated": self._last_updated(t, q, cq)}
            for (t, q), cq in sorted(self._queue_views().items())]
        commitlog_files = [{"path": seg.path, "size": seg.file.size} for seg in self.commitlog.log.segments]
        stored: dict[str, int] = {}
        for topic, _queue in self._queue_views():
            stored[topic] = stored.get(topic, 0) + 1
        # a config file that cannot be decoded (nor its .bak): the broker does not start (topics.json,
        # consumerOffset.json, subscriptionGroup.json: BrokerController.initialize; delayOffset.json:
        # ScheduleMessageService.load); said here beside what the others hold, not raised
        delivered, delay_error = read_kept(read_delay_offsets, self.path)
        groups, groups_error = read_kept(read_subscription_groups, self.path)

        def said(key: str, error: CorruptDataError | None) -> dict[str, str]:
            return {key: str(error)} if error is not None else {}

        return {"format": self.format, "path": self.path, "topics": self.topics(),
                "topic_configs": self.topic_configs.summary(stored),
                **said("topic_configs_error", self.topic_configs.error),
                **said("consumer_offsets_error", self.consumer_offsets.error),
                "queues": queues,
                "topic_bytes": bytes_by_topic(queues),
                "commitlog": {"min_offset": self.commitlog.min_offset, "max_offset": self.commitlog.end,
                              "files": commitlog_files},
                **self._shutdown_info(),
                "group_configs": groups if groups is not None else {},
                **said("group_configs_error", groups_error),
                "config": self.config.as_dict(), "delay_offsets": delivered if delivered is not None else {},
                **said("delay_offsets_error", delay_error),
                "delay_queues": self._delay_queues(delivered),
                **self._info_5x(),
                **({"notes": list(self.notes)} if self.notes else {})}

    def _shutdown_info(self) -> dict[str, Any]:
        """``info``'s ``checkpoint`` (4.9.7 ``StoreCheckpoint``: the store times up to which the commitlog,
        the consume queues and the index were flushed, which bound the next abnormal recovery; the 5.x
        offsets) and ``unclean_shutdown``: an ``abort`` file, which ``DefaultMessageStore.start`` creates and
        ``shutdown`` removes, was there (found by a reader, or by this store when it opened for append): the
        broker's next start recovers abnormally (``recoverAbnormally``).  A checkpoint that cannot be read is
        ``checkpoint_error`` (``verify`` says more)."""
        if self.checkpoint is not None:
            point: Checkpoint | None = self.checkpoint.value
            error = None
        else:
            point, error = read_kept(lambda path: CheckpointFile(os.path.join(path, CHECKPOINT_FILE)).value,
                                     self.path)
        unclean = self.abort_at_open if self.abort_at_open is not None \
            else files.exists(os.path.join(self.path, ABORT_FILE))
        out: dict[str, Any] = {"unclean_shutdown": bool(unclean)}
        if point is not None:
            out["checkpoint"] = {name: getattr(point, attr) for name, attr in zip(
                CHECKPOINT_FIELD_NAMES, CHECKPOINT_FIELD_ATTRS, strict=True)}
        else:
            out["checkpoint_error"] = str(error)
        return out

    def _delay_queues(self, delivered: Mapping[int, int] | None) -> list[dict[str, Any]]:
        """Each delay level's ``SCHEDULE_TOPIC_XXXX`` queue (queue id = level - 1) as the broker's
        ``ScheduleMessageService`` would go on with it: the offset ``delivered`` (``config/delayOffset.json``)
        says it delivered up to (0 where it names none), the messages still to deliver and, from their
        consume-queue entries' tags codes (the delivery time, ``computeDeliverTimestamp``), when the next
        and the last fall due (-1: none).  ``delivered`` None (the file could not be read): what was
        delivered is not known, so neither what is left nor when it falls due (None each)."""
        words = self.config.messageDelayLevel.split()
        rows = []
        for (topic, queue_id), cq in sorted(self._queue_views().items()):
            if topic != SCHEDULE_TOPIC:
                continue
            level = queue_id + 1
            if delivered is None:
                rows.append({"topic": topic, "queue_id": queue_id, "level": level,
                             "delay": words[queue_id] if queue_id < len(words) else None,
                             "delivered_offset": None, "max_offset": cq.max_offset,
                             "pending": None, "next_due": None, "last_due": None})
                continue
            start = max(delivered.get(level, 0), cq.min_offset)
            pending = max(cq.max_offset - start, 0)
            due = [int(cq.entries(at, 1)["tags_code"][0]) for at in (start, cq.max_offset - 1)] if pending \
                else [-1, -1]
            rows.append({"topic": topic, "queue_id": queue_id, "level": level,
                         "delay": words[queue_id] if queue_id < len(words) else None,
                         "delivered_offset": delivered.get(level, 0), "max_offset": cq.max_offset,
                         "pending": pending, "next_due": due[0], "last_due": due[1]})
        return rows

    def _last_updated(self, topic: str, queue_id: int, cq: ConsumeQueue | ScannedQueue) -> int:
        """The store time of a queue's last message, as the broker's ``getTopicStatsInfo`` gives it
        (4.9.7 ``AdminBrokerProcessor``: ``getMessageStoreTimeStamp(topic, queue, max - 1)``): 0 for an
        empty queue, -1 where that message cannot be read (``verify`` says why)."""
        if cq.max_offset <= max(cq.min_offset, 0):
            return 0
        found = self._store_time_at(topic, queue_id, cq.max_offset - 1)
        return -1 if found is None else found

    def _info_5x(self) -> dict[str, Any]:
        """5.x files, where the store has them: batch consume queues and the timer store (the modules that
        read them load only where their files are)."""
        out: dict[str, Any] = {}
        if files.is_dir(os.path.join(self.path, BCQ_DIR)):
            from . import batchconsumequeue

            batch = batchconsumequeue.load(self.path)
            if batch:
                out["batch_queues"] = [{"topic": t, "queue_id": q, "min_offset": b.min_offset,
                                        "max_offset": b.max_offset, "files": len(b.files)}
                                       for (t, q), b in sorted(batch.items())]
        if has_timer_store(self.path):
            from . import timerstore

            out["timer"] = timerstore.info(self.path)
        return out


def _has_compressed(rows: columnar.Rows) -> bool:
    """Whether any of ``rows`` holds a body its producer compressed (``O(rows)``)."""
    return bool(np.any(rows["sys_flag"] & SYSFLAG_COMPRESSED))


def _stored_properties_field(record: RocketMQMessage) -> dict[str, str]:
    """``{"properties_base64": ...}``, the stored bytes of ``record``'s properties, where they are not
    UTF-8 (its ``properties`` are Java's text of them, a U+FFFD for each malformed sequence, which
    ``write --input`` would store as EF BF BD); else ``{}``: a ``dump --json`` line that
    ``write --input`` makes the same bytes again."""
    raw = stored_properties_of(record.properties)
    return {} if raw is None else {"properties_base64": base64.b64encode(raw).decode("ascii")}


def _json_line(record: dict[str, Any]) -> bytes:
    """A ``dump --json`` line of ``record`` (the C ``JsonWriter``'s reference): a lone surrogate escaped,
    ``\\ud800``, so the line is UTF-8 (none comes from stored properties, read as Java reads them)."""
    return (jsontext.dumps(record) + "\n").encode("utf-8")
