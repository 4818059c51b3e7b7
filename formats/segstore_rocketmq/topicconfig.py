"""``config/*.json`` in the broker's fastjson shape: topics.json and consumerOffset.json read and
written, delayOffset.json read, every other file left as it is.

The broker writes both with fastjson, pretty-printed with tabs, and keeps the
previous content as ``NAME.bak`` (``ConfigManager.persist``: ``MixAll.string2File``
writes ``.tmp``, copies the old file to ``.bak``, then renames); indents are tabs, drawn
here as 4 spaces::

    topics.json                              consumerOffset.json
    {                                        {
        "dataVersion":{                            "offsetTable":{
            "counter":1,                                   "TopicA@group":{0:12,1:3
            "timestamp":1700000000000                      }
        },                                         }
        "topicConfigTable":{                   }
            "TopicA":{
                "order":false, "perm":6, "readQueueNums":4, "topicFilterType":"SINGLE_TAG",
                "topicName":"TopicA", "topicSysFlag":0, "writeQueueNums":4
            }
        }
    }

fastjson writes integer map keys unquoted (``{0:12}``), which is not JSON;
:func:`loads_fastjson` quotes them before parsing.  Not thread-safe: one writer.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError, cut
from segstore.javatext import parse_int, parse_long

from .dirnames import BCQ_DIR
from .javacompat import concurrent_hashmap_order, string_hash

CONFIG_DIR = "config"
TOPICS_FILE = "topics.json"
CONSUMER_OFFSET_FILE = "consumerOffset.json"
BACKUP_SUFFIX = ".bak"
TOPIC_GROUP_SEPARATOR = "@"
DEFAULT_PERM = 6                   # PermName.PERM_READ | PERM_WRITE
#: a JSON string (passed over as it is), or an unquoted integer key (group 2) after ``{`` or ``,``
_STRING_OR_INT_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d{1,40})(\s*:)', re.DOTALL)
#: marks an unquoted integer key while the text goes through ``json`` (cannot occur in fastjson text)
_INT_KEY_MARK = "\x00"
#: what goes before and after such a key: quoted, behind the marker written as a JSON escape (``\u0000``)
_KEY_OPEN, _KEY_CLOSE = '"\\u0000', '"'
DELAY_OFFSET_FILE = "delayOffset.json"
SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
#: ``ConsumerOffsetManager.offsetTable = new ConcurrentHashMap<>(512)`` and ``commitOffset``'s
#: ``new ConcurrentHashMap<Integer, Long>(32)`` (rocketmq-all-4.9.7): the tables of a broker that
#: started without the file; one that loaded it holds fastjson's ``new ConcurrentHashMap()``.
NEW_TABLE_CAPACITY = 512
#: ``TopicConfigManager.topicConfigTable = new ConcurrentHashMap<>(1024)`` (rocketmq-all-4.9.7).
TOPIC_TABLE_CAPACITY = 1024
T = TypeVar("T")
#: a 5.x topic attribute (``TopicAttributes.QUEUE_TYPE_ATTRIBUTE``) and its batch value (``CQType.BatchCQ``)
QUEUE_TYPE_ATTRIBUTE = "queue.type"
BATCH_CQ = "BatchCQ"
NEW_QUEUE_MAP_CAPACITY = 32
#: the most configured queues of a topic ``consumers`` lists beside those with files or offsets
LISTED_QUEUES_MAX = 1 << 16
#: ``MixAll.RETRY_GROUP_TOPIC_PREFIX``: a group's retry topic, whose ``TopicConfig`` the broker creates on
#: the group's first heartbeat or sendMessageBack (4.9.7 ``TopicConfigManager
#: .createTopicInSendMessageBackMethod``), not before
RETRY_PREFIX = "%RETRY%"
#: the transaction check's topics, whose ``TopicConfig`` 4.9.7 ``TransactionalMessageBridge
#: .selectTopicConfig`` creates on first use (``createTopicInSendMessageBackMethod``, one queue)
MADE_ON_USE = frozenset({"RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"})


#: Deepest nesting of objects and arrays parsed (the broker's files nest 4 deep); deeper is refused
#: before parsing (Python's parser recurses per level).
MAX_DEPTH = 256
#: Integer literals longer than this stay text (:class:`RawNumber`): no Java type holds them, and
#: Python refuses to convert more than 4300 digits.
MAX_INT_DIGITS = 40
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class RawNumber(str):
    """A number literal kept as its text: a float, or an integer too long for any Java type.  Written
    back as it was read; a field that needs a number refuses it (or truncates a float, as fastjson
    does) in :func:`java_number`."""
#: ``PermName`` (rocketmq-all-4.9.7 common/constant): the permission bits of a topic.
PERM_READ, PERM_WRITE, PERM_INHERIT = 4, 2, 1


def perm_text(perm: int) -> str:
    """``PermName.perm2String``: ``R``, ``W``, ``X`` (inherit) or ``-`` in three places (``RW-`` for 6)."""
    return "".join(letter if perm & bit == bit else "-"
                   for letter, bit in (("R", PERM_READ), ("W", PERM_WRITE), ("X", PERM_INHERIT)))


def _int_keys(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    return {int(k[1:]) if k.startswith(_INT_KEY_MARK) else k: v for k, v in pairs}


def _parse_int(text: str) -> int | RawNumber:
    return int(text) if len(text) <= MAX_INT_DIGITS else RawNumber(text)


def _depth(text: str) -> int:
    """How deep objects and arrays nest in a JSON text (brackets inside strings not counted).  ``O(n)``."""
    bare = np.frombuffer(_STRING.sub('""', text).encode("utf-8", "surrogatepass"), np.uint8)
    step = (np.isin(bare, (ord("{"), ord("["))).astype(np.int64)
            - np.isin(bare, (ord("}"), ord("]"))).astype(np.int64))
    return int(np.cumsum(step).max()) if len(step) else 0


def loads_fastjson(text: str, path: str) -> Any:
    """Parse fastjson output: unquoted integer keys (``{0:12}``) come back as ``int`` keys, quoted
    ones as ``str``, so :func:`dumps_fastjson` writes each back as it was.  Floats and integers of
    more than :data:`MAX_INT_DIGITS` digits come back as :class:`RawNumber`.

    :raises CorruptDataError: not parseable, or nested deeper than :data:`MAX_DEPTH`, naming ``path``
        and the position.
    """
    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise CorruptDataError(f"expected a fastjson document nested at most {MAX_DEPTH} deep, found {depth} "
                               "levels", path)
    marked, inserted = _mark_int_keys(text)
    try:
        return json.loads(marked, object_pairs_hook=_int_keys, parse_int=_parse_int, parse_float=RawNumber,
                          parse_constant=RawNumber)
    except json.JSONDecodeError as err:
        raise CorruptDataError(f"expected a fastjson document, found {err.msg}", path,
                               _text_pos(err.pos, inserted)) from err


def _mark_int_keys(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with each unquoted integer key (outside strings) quoted behind :data:`_INT_KEY_MARK`, and
    where text went in: (position in ``text``, characters inserted there), in order."""
    pieces: list[str] = []
    inserted: list[tuple[int, int]] = []
    last = 0
    for match in _STRING_OR_INT_KEY.finditer(text):
        if match.group(2) is None:      # a string: its ",1:" is no key
            continue
        start, end = match.span(2)
        pieces += [text[last:start], _KEY_OPEN, text[start:end], _KEY_CLOSE]
        inserted += [(start, len(_KEY_OPEN)), (end, len(_KEY_CLOSE))]
        last = end
    pieces.append(text[last:])
    return "".join(pieces), inserted


def _text_pos(pos: int, inserted: list[tuple[int, int]]) -> int:
    """The position in the file's text of ``pos`` in the marked text (:func:`_mark_int_keys`); a position
    inside inserted characters is where they went in."""
    shift = 0
    for at, count in inserted:
        if pos < at + shift:
            break
        if pos < at + shift + count:
            return at
        shift += count
    return pos - shift


#: a JSON number literal as fastjson's lexer reads one into a ``BigDecimal``: sign, whole digits, fraction
#: digits, exponent (the literals Python's ``json`` passes on as :class:`RawNumber`)
_DECIMAL = re.compile(r"(-?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d{1,9}))?")
#: ``TypeUtils.intValue``/``longValue`` (fastjson 1.2.69): a ``BigDecimal`` of a scale in this range is
#: narrowed as ``BigDecimal.intValue()``/``longValue()`` do (truncated, then its low bits), others exactly
_NARROWED_SCALES = range(-100, 101)
#: ``TypeUtils.castToInt`` drops this from a string before ``Integer.parseInt`` (``castToLong`` does not)
_TRAILING_ZEROS = re.compile(r"\.0*$")
#: the strings ``castToInt``/``castToLong`` turn into ``null``
_NULL_TEXTS = ("", "null", "NULL")
#: the integral digits taken at a time when narrowing a long literal (:func:`_low_bits`)
_DIGIT_CHUNK = 18


def _wrap(number: int, bits: int) -> int:
    """``number``'s low ``bits`` bits as a two's-complement Java integer (what a narrowing keeps)."""
    number &= (1 << bits) - 1
    return number - (1 << bits) if number >> (bits - 1) else number


def _low_bits(digits: str, bits: int) -> int:
    """The decimal ``digits`` modulo ``2**bits``, in ``O(len(digits))`` (no Python int of them all:
    a literal of a million digits is narrowed as fast as it was parsed)."""
    modulus = 1 << bits
    number = 0
    for at in range(0, len(digits), _DIGIT_CHUNK):
        chunk = digits[at:at + _DIGIT_CHUNK]
        number = (number * 10 ** len(chunk) + int(chunk)) % modulus
    return number


def _narrow_decimal(text: str, bits: int) -> int | None:
    """A JSON decimal literal as fastjson 1.2.69 reads it into a Java int (``bits`` 32) or long (64):
    the lexer makes it a ``BigDecimal``; ``TypeUtils.intValue``/``longValue`` narrow one whose scale is
    in [-100, 100] as ``BigDecimal.intValue()``/``longValue()`` (truncated toward zero, then the low bits:
    ``1e10`` is the int 1410065408, ``2147483648.5`` the int -2147483648) and take any other exactly
    (``intValueExact``: an integer in range, else ``ArithmeticException``).  None: no such number."""
    match = _DECIMAL.fullmatch(text)
    if match is None:
        return None
    sign, whole, fraction, exponent = match.groups()
    digits = (whole + (fraction or "")).lstrip("0") or "0"
    scale = len(fraction or "") - int(exponent or 0)      # BigDecimal.scale()
    integral, dropped = (digits[:-scale] or "0", digits[-scale:]) if scale > 0 else (digits, "")
    if scale in _NARROWED_SCALES:
        low = _low_bits(integral, bits) * pow(10, max(0, -scale), 1 << bits)
        return _wrap(-low if sign else low, bits)
    if dropped.strip("0") or len(integral) - min(scale, 0) > 20:     # not integral, or past any long
        return None
    number = int(integral) * 10 ** -min(scale, 0)
    number = -number if sign else number
    return number if -(1 << (bits - 1)) <= number < 1 << (bits - 1) else None


def java_cast(value: Any, what: str, path: str, *, long: bool = True) -> int | None:
    """``value`` as fastjson 1.2.69 reads a JSON value into a Java ``long`` (or ``int``): None where
    it reads ``null`` (JSON ``null``; the strings ``""``, ``"null"``, ``"NULL"``, ``TypeUtils.castToInt``
    /``castToLong``): a primitive field keeps its default, a map refuses it.

    Checked against fastjson's own reading of ``TopicConfig``, ``DataVersion``,
    ``DelayOffsetSerializeWrapper`` and a ``ConcurrentMap<Integer, Long>`` (table in
    ``tests/test_rocketmq_config_numbers.py``): an integer literal in range; a decimal literal narrowed
    (:func:`_narrow_decimal`); ``true``/``false`` as an int only (1/0); a string with its commas dropped
    (``"1,000"``), for an int also a trailing ``.``/``.0...`` (``"8.0"``), then ``Integer.parseInt``/
    ``Long.parseLong`` (a sign, digits, no blanks).  Anything else is the ``JSONException`` the broker's
    ``ConfigManager.load`` fails on.  Not taken as fastjson takes them (refused instead): lexer leniencies
    that are no JSON (``'8'``, ``08``, ``+8``, ``1.``, ``8L``), a ``long`` string that is an ISO-8601 date
    (``castToLong`` gives its epoch millis), and a primitive ``long`` field's integer literal past a long
    (``DataVersion.timestamp`` keeps its low bits where the ``AtomicLong`` counter and the maps refuse it).

    :raises CorruptDataError: naming ``path``.
    """
    bits = 64 if long else 32
    number: int | None = None
    if value is None:
        return None
    if isinstance(value, bool):
        number = None if long else int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, RawNumber):    # a decimal literal, or an integer one too long for any Java type
        number = _narrow_decimal(value, bits) if any(c in value for c in ".eE") else None
    elif isinstance(value, str):
        if value in _NULL_TEXTS:
            return None
        text = value.replace(",", "")
        if not long:
            text = _TRAILING_ZEROS.sub("", text, count=1)
        number = parse_long(text) if long else parse_int(text)
    if number is None or not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        kind = "long" if long else "int"
        raise CorruptDataError(f"expected {what} (a Java {kind}), found {cut(json.dumps(value))}", path)
    return number


def java_number(value: Any, what: str, path: str, *, long: bool = True) -> int:
    """:func:`java_cast` where ``null`` is refused too (a map's key or value, the ``AtomicLong``
    ``DataVersion.counter``).

    :raises CorruptDataError: naming ``path``.
    """
    number = java_cast(value, what, path, long=long)
    if number is None:
        kind = "long" if long else "int"
        raise CorruptDataError(f"expected {what} (a Java {kind}), found {cut(json.dumps(value))}", path)
    return number


def _object(value: Any, what: str, path: str, *, empty_if_null: bool = False) -> dict[Any, Any]:
    """``value`` where fastjson needs an object: ``null`` (and ``[]`` for a whole document, which
    fastjson reads as ``null`` too) is nothing when ``empty_if_null``, anything else an error."""
    if isinstance(value, dict):
        return value
    if empty_if_null and (value is None or value == []):
        return {}
    raise CorruptDataError(f"expected {what} (a JSON object), found {cut(json.dumps(value))}", path)


def dumps_fastjson(value: Any, depth: int = 0) -> str:
    """``JSON.toJSONString(value, PrettyFormat)`` as fastjson 1.2.x writes it (``MapSerializer``,
    ``ListSerializer``): a string key goes on a new line indented by tabs, ``"key":value``; an
    integer key stays on the line, unquoted (``{0:12,1:3``); a non-empty map or list closes on
    a new line.  Maps are written in their iteration order."""
    if isinstance(value, dict):
        out = ["{"]
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            if isinstance(key, int):
                out.append(f"{key}:")
            else:
                out.append("\n" + "\t" * (depth + 1) + json.dumps(key, ensure_ascii=False) + ":")
            out.append(dumps_fastjson(item, depth + 1))
        if value:
            out.append("\n" + "\t" * depth)
        return "".join(out) + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [("\n" + "\t" * (depth + 1)) + dumps_fastjson(item, depth + 1) for item in value]
        return "[" + ",".join(items) + "\n" + "\t" * depth + "]"
    if isinstance(value, RawNumber):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def load_managed(path: str, read: Callable[[str], T]) -> T | None:
    """``read`` of the file a broker's ``ConfigManager.load`` (rocketmq-all-4.9.7 common) takes for the
    config file ``path``: ``path`` itself, or its ``.bak`` where ``path`` is missing, empty or cannot be
    decoded (a crash inside ``MixAll.string2File`` between its delete and its rename leaves only the
    ``.bak``); None where neither holds anything (``loadBak`` then succeeds on an empty table).

    Where ``path`` cannot be decoded and no ``.bak`` can either, the broker's load fails or (no ``.bak``)
    starts on an empty table: both lose what the file held, so that is the main file's error here.

    :raises CorruptDataError: as above, naming the file.
    """
    error: CorruptDataError | None = None
    if files.exists(path) and files.file_size(path):
        try:
            return read(path)
        except CorruptDataError as err:
            error = err
    backup = path + BACKUP_SUFFIX
    if files.exists(backup) and files.file_size(backup):
        try:
            return read(backup)
        except CorruptDataError:
            if error is None:
                raise
    if error is not None:
        raise error
    return None


def _persist(path: str, text: str) -> None:
    """Write ``text`` atomically, keeping the old content as ``.bak``.

    Only the new content is made durable (fsynced): the ``.bak`` copy of the old, which was, is written
    atomically but not synced (RocketMQ 4.9.7 ``MixAll.string2File`` syncs neither), since the broker's
    ``ConfigManager.load`` reads ``.bak`` only where the file itself does not load.  A store writes
    ``topics.json`` whenever an append adds a queue: four syncs a queue were a tenth of a conversion
    into 16 queues (100,000 messages)."""
    if files.exists(path):
        files.write_atomic(path + BACKUP_SUFFIX, files.read_bytes(path), fsync=False)
    files.write_atomic(path, text)


def read_kept(read: Callable[[str], T], store_dir: str) -> tuple[T | None, CorruptDataError | None]:
    """``read(store_dir)`` (:func:`read_delay_offsets`, :func:`read_subscription_groups`, a managed file's
    load, ``info``'s checkpoint), or the error it raised: where the broker does not start on a file but
    what it holds is only shown (``info``), the rest of the answer stands and the error is said beside
    it."""
    try:
        return read(store_dir), None
    except CorruptDataError as err:
        return None, err


class _ManagedFile:
    """A config file the broker loads through ``ConfigManager.load`` (rocketmq-all-4.9.7: the file, then
    its ``.bak``), whose decode error is kept as :attr:`error` rather than raised: the broker does not
    start on it, but the commitlog and consume queues are read without it.  What needs the file's
    content or would rewrite it calls :meth:`check` first."""

    __slots__ = ("error",)
    path: str
    #: why the file (and its ``.bak``) could not be read, None where it was (or is absent)
    error: CorruptDataError | None

    def _load(self, read: Callable[[str], T]) -> T | None:
        """:func:`load_managed` of :attr:`path` with ``read``; None (and :attr:`error` set) where it
        failed."""
        found, self.error = read_kept(lambda path: load_managed(path, read), self.path)
        return found

    def check(self) -> None:
        """:raises CorruptDataError: the file (and its ``.bak``) could not be read (:attr:`error`)."""
        if self.error is not None:
            raise self.error


class TopicConfigs(_ManagedFile):
    """The topics the store knows, with their queue counts (``config/topics.json``).

    Written as ``TopicConfigManager.persist`` writes it: every member and topic field read
    is kept (5.x adds some), topics in the iteration order of the broker's
    ``new ConcurrentHashMap<>(1024)`` (filled from the file through fastjson's map).

    A file (and ``.bak``) that cannot be decoded is kept as :attr:`error`, with no topics: the broker's
    ``ConfigManager.load`` fails on it and the broker does not start, but the commitlog and consume
    queues are read without it.  What would need the table or rewrite the file raises that error
    (:meth:`check`): a damaged file is never written over.
    """

    __slots__ = ("__dict__", "topics")     # read by the C appends on every call

    def __init__(self, store_dir: str) -> None:
        self.path = os.path.join(store_dir, CONFIG_DIR, TOPICS_FILE)
        self.store_dir = store_dir
        self.document: dict[str, Any] = {}
        self.topics: dict[str, dict[str, Any]] = {}
        self.counter = 0
        self.timestamp = 0
        #: queue counts the file names beyond the table's (:meth:`save_ahead`)
        self.ahead: dict[str, int] = {}
        #: the table changed since the file was written, which names those queues already (:meth:`settle`)
        self.unsaved = False
        found = self._load(read_topics)
        #: the file (or its ``.bak``) was read: the broker starts with its table, not an empty one
        self.loaded = found is not None
        if found is not None:
            self.document, loaded, self.counter, self.timestamp = found
            # fastjson parses into a new ConcurrentHashMap(); the manager putAll()s that into its own
            order = concurrent_hashmap_order(list(loaded), [string_hash(n) for n in loaded])
            self.topics = {name: loaded[name] for name in order}

    def summary(self, stored: dict[str, int]) -> dict[str, dict[str, Any]]:
        """Per topic of ``topics.json`` (by name): queue counts, permission (``perm2String``), order, system
        flag, and ``queues_stored``: how many consume queues the store holds for it (``stored``)."""
        out = {}
        for name in sorted(self.topics):
            entry = self.topics[name] if isinstance(self.topics[name], dict) else {}
            perm = entry.get("perm", DEFAULT_PERM)
            out[name] = {"read_queue_nums": entry.get("readQueueNums"),
                         "write_queue_nums": entry.get("writeQueueNums"),
                         "perm": perm_text(perm) if isinstance(perm, int) else str(perm),
                         "order": entry.get("order"), "topic_sys_flag": entry.get("topicSysFlag"),
                         "queues_stored": stored.get(name, 0)}
        return out

    def read_queue_count(self, topic: str) -> int:
        """``topic``'s ``readQueueNums`` in ``topics.json`` (``TopicConfig``'s 16 where the entry has none,
        :func:`read_topics`); 0 where it has no such topic or a count below 1."""
        entry = self.topics.get(topic)
        count = entry.get("readQueueNums") if isinstance(entry, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0

    def read_queue_ids(self, topic: str) -> range:
        """Queue ids ``0 .. readQueueNums - 1`` of ``topic`` (:meth:`read_queue_count`), as 4.9.7
        ``AdminBrokerProcessor.getConsumeStats`` walks them; empty past :data:`LISTED_QUEUES_MAX` (a
        sparse queue id written far out makes a count of billions)."""
        count = self.read_queue_count(topic)
        return range(count) if count <= LISTED_QUEUES_MAX else range(0)

    def stats_queue_count(self, topic: str, *, lmq: bool = False) -> int | None:
        """How many queues of ``topic`` (``0 .. n - 1``) 4.9.7 ``AdminBrokerProcessor.getConsumeStats``
        (``mqadmin consumerProgress``) walks for a group that committed to it: its ``readQueueNums``, 0
        where the table has no such topic (``selectTopicConfig`` null: skipped, as after ``mqadmin
        deleteTopic``, which leaves the groups' offsets); None (every queue) where the file was not read
        (absent, or :attr:`error`: the broker does not start on it) or names no topic the broker makes on
        use (:data:`RETRY_PREFIX`, :data:`MADE_ON_USE`), and 1 for a ``%LMQ%`` topic with ``lmq``
        (``enableLmq``: ``LmqTopicConfigManager.selectTopicConfig``'s one queue)."""
        if self.error is not None or not (self.loaded or self.topics):
            return None
        if topic in self.topics:
            return self.read_queue_count(topic)
        if lmq and topic.startswith("%LMQ%"):
            return 1
        return None if topic.startswith(RETRY_PREFIX) or topic in MADE_ON_USE else 0

    def batch_cq_topics(self) -> frozenset[str]:
        """The topics whose ``attributes`` make them 5.x ``queue.type=BatchCQ`` topics
        (``QueueTypeUtils.getCQType``, rocketmq-all-5.1.4): their messages have units in
        ``batchconsumequeue/`` and no consume-queue entry.

        Where the file could not be read (:attr:`error`), none when the store has no
        ``batchconsumequeue/``: no topic has batch units there, so every message a consumer reads is
        read through ``consumequeue/``, which needs no topic config.

        :raises CorruptDataError: the file could not be read and the store has ``batchconsumequeue/``:
            which of its topics are BatchCQ topics only the file says.
        """
        if self.error is not None and files.exists(os.path.join(self.store_dir, BCQ_DIR)):
            raise self.error
        return frozenset(name for name, entry in self.topics.items()
                         if isinstance(entry, dict) and isinstance(entry.get("attributes"), dict)
                         and entry["attributes"].get(QUEUE_TYPE_ATTRIBUTE) == BATCH_CQ)

    def ensure(self, topic: str, queue_id: int) -> bool:
        """Record that ``topic`` has queue ``queue_id``; True if that changed anything.

        :raises CorruptDataError: the file could not be read (:attr:`error`).
        """
        self.check()
        entry = self.topics.get(topic)
        needed = queue_id + 1
        if entry is not None and entry.get("writeQueueNums", 0) >= needed:
            return False
        if entry is None:
            self.topics[topic] = _new_entry(topic, needed)
        else:
            entry["readQueueNums"] = entry["writeQueueNums"] = needed
        self.counter += 1
        return True

    def written(self, topic: str, queue_id: int) -> bool:
        """Whether the file names queue ``queue_id`` of ``topic`` ahead of the table (:meth:`save_ahead`)."""
        return queue_id < self.ahead.get(topic, 0)

    def note(self, now_ms: int) -> None:
        """The table changed at ``now_ms`` in queues the file names already: written at :meth:`settle`."""
        self.timestamp = now_ms
        self.unsaved = True

    def dumps(self, ahead: Mapping[str, int] | None = None, timestamp: int | None = None) -> str:
        """The file's text as the broker writes it, with the ``ahead`` queue counts where they are more
        than the table's.  :raises CorruptDataError: it could not be read."""
        self.check()
        topics = self.topics
        if ahead:
            topics = dict(topics)
            for name, count in ahead.items():
                entry = topics.get(name)
                if entry is None:
                    topics[name] = _new_entry(name, count)
                elif entry.get("writeQueueNums", 0) < count:
                    topics[name] = {**entry, "readQueueNums": count, "writeQueueNums": count}
        order = concurrent_hashmap_order(list(topics), [string_hash(n) for n in topics],
                                         TOPIC_TABLE_CAPACITY)
        version = {**(self.document.get("dataVersion") or {}), "counter": self.counter,
                   "timestamp": self.timestamp if timestamp is None else timestamp}
        return dumps_fastjson({**self.document, "dataVersion": version,
                               "topicConfigTable": {name: _bean(topics[name]) for name in order}})

    def _write(self, text: str) -> None:
        files.make_dirs(os.path.dirname(self.path))
        _persist(self.path, text)
        self.loaded = True

    def save(self, now_ms: int) -> None:
        """Write the table changed at ``now_ms`` (and the queues written ahead not in it yet)."""
        self.timestamp = now_ms
        self._write(self.dumps(self.ahead))
        self.unsaved = False

    def save_ahead(self, keys: Iterable[tuple[str, int]], now_ms: int) -> None:
        """Write the file naming the ``(topic, queue id)`` queues too, the table left as it is: queues a
        writer is about to create, in one write rather than one each as its appends create them (a
        conversion into N queues wrote the whole file N times).  A writer killed later leaves them in
        the file; :meth:`settle` writes the table itself once the writer is done.

        :raises CorruptDataError: the file could not be read (:attr:`error`).
        """
        self.check()
        added = False
        for topic, queue_id in keys:
            entry = self.topics.get(topic)
            held = 0 if entry is None else entry.get("writeQueueNums", 0)
            if queue_id >= max(held, self.ahead.get(topic, 0)):
                self.ahead[topic] = queue_id + 1
                added = True
        if added:
            self._write(self.dumps(self.ahead, now_ms))

    def settle(self) -> None:
        """Write the table as it is where the file differs (:meth:`note`, :meth:`save_ahead`): the file
        a writer that wrote each change at once leaves."""
        if self.unsaved or self.ahead:
            self.ahead = {}
            self._write(self.dumps())
            self.unsaved = False


def _new_entry(topic: str, queue_count: int) -> dict[str, Any]:
    """A topic's entry as the broker's ``TopicConfig`` with ``queue_count`` read and write queues."""
    return {
        "order": False, "perm": DEFAULT_PERM, "readQueueNums": queue_count,
        "topicFilterType": DEFAULT_TOPIC_FILTER_TYPE, "topicName": topic, "topicSysFlag": 0,
        "writeQueueNums": queue_count,
    }


def topic_and_group(name: str) -> tuple[str, str] | None:
    """The topic and group of an ``offsetTable`` key, None for a key no consumer group's offsets are
    under.  RocketMQ 4.9.7 ``ConsumerOffsetManager`` commits and queries ``topic + "@" + group``
    (``commitOffset``, ``queryOffset``; topics and groups are ``[%|a-zA-Z0-9_-]+``, no ``@``) and its
    scans (``whichTopicByConsumer``, ``whichGroupByTopic``, ``removeOffset``) skip a key whose
    ``split("@")`` is not two parts; a key without ``@`` (``orphan``, ``t@``) or with two is read by none,
    and ``@g``'s topic "" has no ``TopicConfig`` (``getConsumeStats`` skips it)."""
    topic, _, group = name.partition(TOPIC_GROUP_SEPARATOR)
    if not topic or not group or TOPIC_GROUP_SEPARATOR in group:
        return None
    return topic, group


class ConsumerOffsets(_ManagedFile):
    """Committed consumer offsets, ``topic@group`` -> queue id -> offset (``config/consumerOffset.json``).

    Written as the broker's ``ConsumerOffsetManager.persist`` writes it: every other member
    of the file (5.x adds ``dataVersion``) kept as read, the table in the iteration order
    of the broker's ``ConcurrentHashMap`` (:func:`.javacompat.concurrent_hashmap_order`).

    A file (and ``.bak``) that cannot be decoded is kept as :attr:`error`: the broker's
    ``ConsumerOffsetManager.load`` (``ConfigManager.load``, then ``loadBak``) fails on it and
    ``BrokerController.initialize`` stops the broker, but the commitlog and consume queues are read
    without it.  What needs the offsets (:attr:`table`, :meth:`get`, :meth:`commit`, :meth:`dumps`,
    :meth:`save`) raises that error: no group's offsets are guessed, a damaged file is never written over.
    """

    def __init__(self, store_dir: str) -> None:
        self.path = os.path.join(store_dir, CONFIG_DIR, CONSUMER_OFFSET_FILE)
        self.document: dict[str, Any] = {}
        self._table: dict[str, dict[int, int]] = {}
        self._loaded: set[str] = set()
        self._capacity: int | None = NEW_TABLE_CAPACITY
        found = self._load(read_consumer_offsets)
        if found is not None:
            self.document, self._table = found
            self._loaded = set(self._table)
            self._capacity = None

    @property
    def table(self) -> dict[str, dict[int, int]]:
        """``topic@group`` -> queue id -> offset, as loaded and committed since.

        :raises CorruptDataError: the file could not be read (:attr:`error`).
        """
        self.check()
        return self._table

    def commit(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """:raises CorruptDataError: the file could not be read (:attr:`error`)."""
        self.table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset

    def get(self, topic: str, group: str, queue_id: int) -> int | None:
        """:raises CorruptDataError: the file could not be read (:attr:`error`)."""
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id)

    def dumps(self) -> str:
        """The file's text as the broker writes it.  :raises CorruptDataError: it could not be read."""
        names = concurrent_hashmap_order(list(self.table), [string_hash(n) for n in self.table],
                                         self._capacity)
        table = {}
        for name in names:
            offsets = self.table[name]
            capacity = None if name in self._loaded else NEW_QUEUE_MAP_CAPACITY
            order = concurrent_hashmap_order(list(offsets), list(offsets), capacity)
            table[name] = {q: offsets[q] for q in order}
        return dumps_fastjson({**self.document, "offsetTable": table})

    def save(self) -> None:
        files.make_dirs(os.path.dirname(self.path))
        _persist(self.path, self.dumps())


def read_delay_offsets(store_dir: str) -> dict[int, int]:
    """``config/delayOffset.json``: delay level -> offset delivered so far in its ``SCHEDULE_TOPIC_XXXX``
    queue (``ScheduleMessageService.offsetTable``); empty without the file or its ``.bak``
    (:func:`load_managed`).  segstore never rewrites it.

    :raises CorruptDataError: not fastjson.
    """
    return load_managed(os.path.join(store_dir, CONFIG_DIR, DELAY_OFFSET_FILE), read_delay_offset_file) or {}


def read_delay_offset_file(path: str) -> dict[int, int]:
    """One ``delayOffset.json`` (or its ``.bak``) as :func:`read_delay_offsets` takes it."""
    document = _object(loads_fastjson(files.read_text(path), path), "a delay-offset document", path,
                       empty_if_null=True)
    table = _object(document.get("offsetTable"), "offsetTable", path, empty_if_null=True)
    return {java_number(level, "a delay level", path, long=False): java_number(offset, "an offset", path)
            for level, offset in table.items()}


#: ``SubscriptionGroupConfig`` (4.9.7): each field fastjson fills, its Java type and the class's default
_GROUP_FIELDS = (("consumeEnable", "boolean", True), ("consumeFromMinEnable", "boolean", True),
                 ("consumeBroadcastEnable", "boolean", True), ("retryQueueNums", "int", 1),
                 ("retryMaxTimes", "int", 16), ("brokerId", "long", 0),
                 ("whichBrokerWhenConsumeSlowly", "long", 1),
                 ("notifyConsumerIdsChangedEnable", "boolean", True))


def _java_boolean(value: Any, what: str, path: str) -> bool:
    """A boolean field as fastjson's ``castToBoolean`` takes it: true/false, 1/0, or their text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise CorruptDataError(f"expected {what} (a Java boolean), found {cut(json.dumps(value))}", path)


def read_subscription_groups(store_dir: str) -> dict[str, dict[str, Any]]:
    """``config/subscriptionGroup.json`` as ``SubscriptionGroupManager.decode`` reads it through fastjson:
    per consumer group its ``SubscriptionGroupConfig`` (whether it may consume, broadcast, its retry queues
    and retries before the dead-letter queue), each field absent taking the class's default; empty without
    the file (or its ``.bak``, :func:`load_managed`).  segstore never rewrites it.

    :raises CorruptDataError: not fastjson, or a field of the wrong Java type (the broker's load fails).
    """
    return load_managed(os.path.join(store_dir, CONFIG_DIR, SUBSCRIPTION_GROUP_FILE),
                        read_subscription_group_file) or {}


def read_subscription_group_file(path: str) -> dict[str, dict[str, Any]]:
    """One ``subscriptionGroup.json`` (or its ``.bak``) as :func:`read_subscription_groups` takes it."""
    document = _object(loads_fastjson(files.read_text(path), path), "a subscription group document", path,
                       empty_if_null=True)
    table = _object(document.get("subscriptionGroupTable", {}), "subscriptionGroupTable", path,
                    empty_if_null=True)
    groups: dict[str, dict[str, Any]] = {}
    for name, entry in table.items():
        entry = _object(entry, f"the config of group {cut(name)}", path, empty_if_null=True)
        config: dict[str, Any] = {}
        for field_name, kind, default in _GROUP_FIELDS:
            value = entry.get(field_name)
            if value is None:
                value = default
            elif kind == "boolean":
                value = _java_boolean(value, f"{field_name} of group {cut(name)}", path)
            else:
                value = java_cast(value, f"{field_name} of group {cut(name)}", path, long=kind == "long")
                if value is None:       # read as null: the primitive field keeps its default
                    value = default
            config[field_name] = value
        groups[str(name)] = config
    return dict(sorted(groups.items()))


#: ``TopicConfig``'s int fields and their defaults (rocketmq-all-4.9.7 common ``TopicConfig``:
#: ``defaultReadQueueNums``/``defaultWriteQueueNums`` 16, ``PERM_READ | PERM_WRITE``, 0)
_TOPIC_INT_FIELDS = {"readQueueNums": 16, "writeQueueNums": 16, "perm": DEFAULT_PERM, "topicSysFlag": 0}
#: ``TopicConfig.order`` where missing or read as ``null`` (``castToBoolean`` reads ``null``, ``""``,
#: ``"null"``, ``"NULL"`` as null): the primitive's default; any other value is kept as read
_ORDER_DEFAULT = False
#: ``TopicFilterType`` (rocketmq-all-4.9.7 common), in ordinal order, and ``TopicConfig.topicFilterType``'s
#: default where the member is missing
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
DEFAULT_TOPIC_FILTER_TYPE = TOPIC_FILTER_TYPES[0]
_FNV_OFFSET, _FNV_PRIME, _LONG_MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def _fnv_hashes(text: str) -> tuple[int, int]:
    """fastjson 1.2.69 ``EnumDeserializer``'s two 64-bit FNV-1a hashes of a name over its UTF-16 chars:
    as it is, and with ``A``-``Z`` lowered (no other letter)."""
    units = np.frombuffer(text.encode("utf-16-be", "surrogatepass"), ">u2").tolist()
    exact = lower = _FNV_OFFSET
    for unit in units:
        exact = ((exact ^ unit) * _FNV_PRIME) & _LONG_MASK
        lower = ((lower ^ (unit + 32 if 0x41 <= unit <= 0x5A else unit)) * _FNV_PRIME) & _LONG_MASK
    return exact, lower


#: the names ``EnumDeserializer`` matches: each constant's name hash and its lowered name's hash
_FILTER_TYPE_BY_HASH = {h: name for name in TOPIC_FILTER_TYPES for h in _fnv_hashes(name)}


def _filter_type(value: Any, what: str, path: str) -> str | None:
    """``value`` as fastjson 1.2.69 ``EnumDeserializer.deserialze`` reads it into ``TopicFilterType``:
    an integer literal the constant of that ordinal; a string the constant whose name hashes as it does,
    as it is or with ``A``-``Z`` lowered (``"multi_tag"``, ``"Multi_Tag"``), else null (``""``, an unknown
    name: ``ErrorOnEnumNotMatch`` is off); ``null`` null.  Checked with the oracle's fastjson (``""``,
    ``" "``, ``"BOGUS"`` null; ``0``/``1`` the constants).

    :raises CorruptDataError: an ordinal out of range, or any other value (a decimal, a boolean, an
        object, an array): the ``JSONException`` the broker's ``ConfigManager.load`` fails on.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(TOPIC_FILTER_TYPES):
        return TOPIC_FILTER_TYPES[value]
    if isinstance(value, str) and not isinstance(value, RawNumber):
        if not value:
            return None
        exact, lower = _fnv_hashes(value)
        return _FILTER_TYPE_BY_HASH.get(exact) or _FILTER_TYPE_BY_HASH.get(lower)
    raise CorruptDataError(f"expected {what} (a TopicFilterType: a name, or an ordinal 0 to "
                           f"{len(TOPIC_FILTER_TYPES) - 1}), found {cut(json.dumps(value))}", path)


def _topic_config(entry: dict[str, Any], name: str, path: str) -> dict[str, Any]:
    """One ``topicConfigTable`` entry as fastjson fills a ``TopicConfig`` from it: an int field cast
    (:func:`java_cast`), and a field missing, or read as ``null`` where fastjson then leaves it, taking
    the class's default (checked with the oracle: ``{}`` is 16 read and write queues, ``RW-``,
    ``SINGLE_TAG``, flag 0, not ordered; ``"topicFilterType":null`` is a null filter type).  Other members
    are kept as read.  Where a default was filled in, the fields are in name order, as fastjson writes
    the bean back (``TopicConfigManager.persist``)."""
    filled = False
    for field_name, default in _TOPIC_INT_FIELDS.items():
        number = None
        if field_name in entry:
            number = java_cast(entry[field_name], f"{field_name} of topic {cut(name)}", path, long=False)
        filled |= number is None
        entry[field_name] = default if number is None else number
    order = entry.get("order")
    if "order" not in entry or order is None or order in _NULL_TEXTS:
        entry["order"] = _ORDER_DEFAULT
        filled = True
    held = entry.get("topicFilterType", DEFAULT_TOPIC_FILTER_TYPE)
    read = _filter_type(held, f"topicFilterType of topic {cut(name)}", path) if "topicFilterType" in entry \
        else held
    if "topicFilterType" not in entry or read != held:
        entry["topicFilterType"] = read
        filled = True
    return dict(sorted(entry.items())) if filled else entry


def _bean(entry: dict[str, Any]) -> dict[str, Any]:
    """A topic's entry as ``TopicConfigManager.persist`` writes the ``TopicConfig`` bean: fastjson leaves
    out a null field (``WriteMapNullValue`` is off), so a null ``topicFilterType`` is no member, which
    the next load reads as ``SINGLE_TAG`` (checked with the oracle's
    ``TopicConfigSerializeWrapper.toJson``)."""
    if "topicFilterType" in entry and entry["topicFilterType"] is None:
        return {k: v for k, v in entry.items() if k != "topicFilterType"}
    return entry


def read_topics(path: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]], int, int]:
    """``config/topics.json`` as ``TopicConfigManager.decode`` reads it through fastjson
    (``TopicConfigSerializeWrapper``; checked with fastjson 1.2.69, RocketMQ 4.9.7's): the
    document, its topic table, and ``dataVersion``'s counter and timestamp.  ``null`` and ``[]``
    read as no topics (fastjson gives ``null``, which ``decode`` passes over); a topic's field missing or
    read as ``null`` is ``TopicConfig``'s default (:func:`_topic_config`); a table that is not
    an object of objects, a queue count that is no Java int, a version field that is no Java long
    make fastjson throw and the broker's load fail.

    :raises CorruptDataError: naming the file.
    """
    document = _object(loads_fastjson(files.read_text(path), path), "a topic config document", path,
                       empty_if_null=True)
    table = _object(document.get("topicConfigTable", {}), "topicConfigTable", path)
    topics: dict[str, dict[str, Any]] = {}
    for name, entry in table.items():
        entry = _object(entry, f"the config of topic {cut(name)}", path)
        topics[str(name)] = _topic_config(entry, name, path)
    version = _object(document.get("dataVersion", {}), "dataVersion", path, empty_if_null=True)
    counter = java_number(version.get("counter", 0), "dataVersion.counter", path)
    timestamp = java_cast(version.get("timestamp", 0), "dataVersion.timestamp", path) or 0
    return document, topics, counter, timestamp


def read_consumer_offsets(path: str) -> tuple[dict[str, Any], dict[str, dict[int, int]]]:
    """``config/consumerOffset.json`` as ``ConsumerOffsetManager.decode`` reads it through fastjson
    (``ConcurrentMap<String, ConcurrentMap<Integer, Long>>``; checked with fastjson 1.2.69): the
    document and its table ``topic@group -> queue id -> offset``.  ``null`` and ``[]`` read as no
    offsets; a queue id that is no Java int or an offset that is no Java long (a decimal is
    truncated, a numeric string taken) make the broker's load fail.

    :raises CorruptDataError: naming the file.
    """
    document = _object(loads_fastjson(files.read_text(path), path), "a consumer offset document", path,
                       empty_if_null=True)
    table: dict[str, dict[int, int]] = {}
    for name, offsets in _object(document.get("offsetTable", {}), "offsetTable", path,
                                 empty_if_null=True).items():
        offsets = _object(offsets, f"the offsets of {cut(name)}", path)
        table[str(name)] = {java_number(q, f"a queue id of {cut(name)}", path, long=False):
                            java_number(o, f"the offset of {cut(name)} queue {cut(q)}", path)
                            for q, o in offsets.items()}
    return document, table
