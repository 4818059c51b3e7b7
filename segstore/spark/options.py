"""Options of the ``segstore`` Spark source, named as Spark's Kafka connector names them.

Reading (docs/spark.md has the full table, with the connector's options this source refuses):

=====================================  ===============================================================
``path``                               the store: a RocketMQ store root, a Kafka log dir or one partition dir
``format``                             ``rocketmq`` / ``kafka`` / another registered name; detected if absent
``subscribe``                          comma-separated topic names to read (default: every topic);
                                       ``topics`` is the same
``subscribePattern``                   a Java regular expression; topics it finds a match in are read
``assign``                             JSON ``{"topicA": [0, 1]}``: these partitions (RocketMQ queues); one
                                       the topic lacks is not read (planning.selected)
``startingOffsets``                    ``earliest`` (batch default), ``latest`` (stream default), or JSON
                                       ``{"topic": {"0": 23, "1": -2}}`` naming every partition read and no
                                       other (-2 earliest, -1 latest; latest refused in batch:
                                       planning.check_batch_bounds; past the end: planning.check_readable)
``endingOffsets``                      ``latest`` (default) or JSON as above (exclusive; earliest refused;
                                       batch only, as the two ending options below)
``startingTimestamp``                  ms since the epoch, every partition: its first offset whose
                                       timestamp is at or after it (through the store's time lookup)
``startingOffsetsByTimestamp``         JSON ``{"topic": {"0": ms}}`` naming every partition read
``startingOffsetsByTimestampStrategy`` ``error`` (default) or ``latest``: a start time past a partition's end
``endingTimestamp``                    ms: end each partition before its first offset at or after it
``endingOffsetsByTimestamp``           JSON as ``startingOffsetsByTimestamp``
``failOnDataLoss``                     ``true`` (default): asking for offsets retention removed is an
                                       error; ``false``: start at the earliest offset still stored
``includeHeaders``                     ``true``: add the ``headers`` column (default false)
``decompressBodies``                   RocketMQ: ``true`` (default) gives each body as consumers read it,
                                       inflated where its producer compressed it; ``false`` as stored
``kafka.isolation.level``              ``read_uncommitted`` (default) or ``read_committed``
``includeControlRecords``              Kafka: also return transaction markers (default false, as consumers do)
``maxOffsetsPerTrigger``               streaming: about this many offsets per micro-batch (all partitions),
                                       shared as the connector's rateLimit (planning.limit_offsets); a batch
                                       read ignores it
``minOffsetsPerTrigger``               streaming: a trigger with fewer offsets waiting makes no micro-batch,
                                       until ``maxTriggerDelay`` (default 15m) has passed since the last one
                                       (planning.delays_batch); a batch read ignores both
``minPartitions``                      planner: split further until at least this many input partitions
                                       (default: the session's default parallelism, recorded by ``register``)
``maxBytesPerPartition``               planner: target bytes of one input partition (default 256 MiB)
``maxRecordsPerPartition``             planner: at most this many offsets per input partition, cut as the
                                       connector cuts (planning.record_ranges): every micro-batch, and a
                                       batch read where the connector splits (planning.splits_by_records)
``maxRecordsPerBatch``                 reader: rows per Arrow batch (default 10000)
``config``                             JSON object of the store's own config names (for ``segstore.open``)
``reader``                             ``jvm`` (the columnar JVM reader, the default where its jar is on
                                       the session's classpath) or ``python`` (PySpark's Python data source)
``storageOptions``                     JSON object of fsspec storage options for a URL path
                                       (``s3://``, ``s3a://``, ``hdfs://``, ``file://``): credentials,
                                       ``client_kwargs``...; travels to the executors with each partition
=====================================  ===============================================================

Options of the connector that name a running cluster (``kafka.bootstrap.servers``,
``kafka.*``, ``groupIdPrefix``, ``kafkaConsumer.pollTimeoutMs``, ``fetchOffset.*``) are
refused with a message that says to pass the broker's directory to ``load(path)``.

Parsing is pure and runs on the driver; :class:`ReadOptions` is picklable.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import jsontext
from ..errors import ConfigError, ReadOnlyError, check_path, cut, did_you_mean
from ..files import is_url
from ..javatext import java_trim, parse_int, parse_long
from .javaregex import compile_java

EARLIEST = -2
LATEST = -1
_NAMED = {"earliest": EARLIEST, "latest": LATEST}

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
#: ``reader``: which side of the source reads batches (segstore/spark/java or this package);
#: ``writer``: which stages a batch write's rows (the commit is this package's either way).
READER_JVM = "jvm"
READER_PYTHON = "python"
#: The ListOffsets codes (Kafka 3.8.0 ListOffsetsRequest) a time option may give in place of a time: the
#: connector hands its times to ListOffsets as they are (Spark 4 KafkaOffsetReaderAdmin:
#: ``OffsetSpec.forTimestamp``), and the broker answers -1 with the latest offset, -2 and -4 (earliest
#: local: no tiered storage here) with the log start (3.8.0 Partition.fetchOffsetForTimestamp,
#: UnifiedLog.fetchOffsetByTimestamp).  -3 (max timestamp) and other negatives are refused
#: (:func:`_check_time_code`).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4
TIME_CODES = (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)
#: ``startingOffsetsByTimestampStrategy``: what a start time past a partition's last record gives.
STRATEGY_ERROR = "error"
STRATEGY_LATEST = "latest"

#: Fewer, larger tasks: each costs Spark a launch and its shuffle files (docs/spark.md, Options).
DEFAULT_MAX_BYTES_PER_PARTITION = 256 * 1024 * 1024
DEFAULT_MAX_RECORDS_PER_BATCH = 10_000

#: Per topic, per partition: an absolute offset, or EARLIEST / LATEST.
OffsetSpec = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of the range to read: a named position, or per-partition offsets.

    ``default`` is a named position (EARLIEST or LATEST); ``specific``: the option gave per-partition JSON
    (``offsets``, possibly none), which must name exactly the partitions read
    (:func:`.planning.check_named_offsets`), so ``default`` then applies to none of them.
    """

    default: int
    offsets: tuple[tuple[str, int, int], ...] = ()
    specific: bool = False

    def for_partition(self, topic: str, partition: int) -> int:
        """The offset (or EARLIEST / LATEST) asked for ``topic``/``partition``."""
        for t, p, offset in self.offsets:
            if t == topic and p == partition:
                return offset
        return self.default


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Everything a read needs, parsed and validated."""

    path: str
    format: str | None = None
    topics: tuple[str, ...] | None = None             # subscribe
    topic_pattern: str | None = None                  # subscribePattern
    assign: tuple[tuple[str, int], ...] | None = None
    starting: Bound = Bound(EARLIEST)
    ending: Bound = Bound(LATEST)
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_timestamps: tuple[tuple[str, int, int], ...] | None = None   # startingOffsetsByTimestamp
    ending_timestamps: tuple[tuple[str, int, int], ...] | None = None
    starting_timestamp_strategy: str = STRATEGY_ERROR
    fail_on_data_loss: bool = True
    include_headers: bool = False
    decompress_bodies: bool = True
    isolation: str = READ_UNCOMMITTED
    max_offsets_per_trigger: int | None = None
    #: ``minOffsetsPerTrigger``, and ``maxTriggerDelay`` in ms (planning.delays_batch): streams only
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 0
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    #: ``maxRecordsPerPartition``: at most this many offsets in one input partition (planning.record_ranges)
    max_records_per_partition: int | None = None
    min_partitions: int | None = None     # None: the data source's default (the session's parallelism)
    #: the ``minPartitions`` option as given (``min_partitions`` takes the default where it is not): the
    #: connector splits partitions only where it is given (planning.check_readable)
    min_partitions_given: int | None = None
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    include_control_records: bool = False
    config: tuple[tuple[str, str], ...] = ()
    reader: str | None = None             # None: the JVM reader where its jar is loaded

    def selects_topic(self, topic: str) -> bool:
        """Whether ``subscribe`` / ``subscribePattern`` / ``assign`` let ``topic`` be read."""
        if self.topics is not None:
            return topic in self.topics
        if self.topic_pattern is not None:
            # a match anywhere in the name, as the connector's findFirstIn (javaregex)
            return _java_pattern(self.topic_pattern).search(topic) is not None
        if self.assign is not None:
            return any(t == topic for t, _ in self.assign)
        return True

    def selects(self, topic: str, partition: int) -> bool:
        """Whether the options let ``topic``/``partition`` be read."""
        if self.assign is not None:
            return (topic, partition) in self.assign
        return self.selects_topic(topic)


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What the writer needs: the store, its format and config, defaults for missing columns."""

    path: str
    format: str | None = None
    topic: str | None = None
    #: the ``partition`` option: rows without a partition take it (None: not given, see datasource)
    partition: int | None = None
    staging_dir: str | None = None
    config: tuple[tuple[str, str], ...] = ()
    #: ``writer``: which side of the source stages a batch write's rows (None: not given)
    writer: str | None = None


#: The read options as the docs spell them; Spark hands their names in any case (the Python data source's
#: lower-cased), and they are compared lower-cased (:data:`_READ_NAMES`), but a refusal names them so.
READ_OPTIONS = ("path", "format", "topics", "subscribe", "subscribePattern", "assign", "startingOffsets",
                "endingOffsets", "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
                "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "failOnDataLoss",
                "includeHeaders", "decompressBodies", "kafka.isolation.level", "maxOffsetsPerTrigger",
                "minOffsetsPerTrigger", "maxTriggerDelay", "maxBytesPerPartition", "maxRecordsPerPartition",
                "minPartitions", "maxRecordsPerBatch", "includeControlRecords", "config", "storageOptions",
                "reader")
_READ_NAMES = {name.lower() for name in READ_OPTIONS}
#: Options of Spark's Kafka connector that talk to a running cluster: nothing to do offline.
_CLUSTER_NAMES = {"groupidprefix", "kafkaconsumer.polltimeoutms", "fetchoffset.numretries",
                  "fetchoffset.retryintervalms"}
WRITE_OPTIONS = ("path", "format", "topic", "partition", "stagingDir", "config", "writer")


@functools.lru_cache(maxsize=64)
def _java_pattern(pattern: str) -> re.Pattern[str]:
    return compile_java(pattern)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands options in a case-insensitive map; normalise for lookups and messages.
    return {str(k).lower(): str(v) for k, v in options.items()}


#: The largest Java ``long``: what the JVM side (Spark's ``ReadLimit.maxRows``) takes.
JAVA_LONG_MAX = (1 << 63) - 1
#: The largest Java ``int``: ``minPartitions`` is read with ``toInt`` (Integer.parseInt).
JAVA_INT_MAX = (1 << 31) - 1
#: ``[+-]?[0-9]+``: a number the JVM reader says is past a long where ``Long.parseLong`` throws on it
_ASCII_WHOLE = re.compile(r"[+-]?[0-9]+")


def _int(options: dict[str, str], name: str, *, minimum: int | None = None,
         maximum: int | None = None, trim: bool = False, bits: int = 64) -> int | None:
    """Option ``name`` as Java's ``Long.parseLong`` (the connector's ``toLong``, the JVM reader's
    SegstoreStream.getDefaultReadLimit) reads it (:func:`segstore.javatext.parse_long`): no whitespace
    around it, no ``_`` between digits, which Python's ``int`` allows, no digit past the BMP; ``bits=32``:
    within a Java int too, as ``Integer.parseInt`` (the connector's ``toInt``: minPartitions).  ``trim``:
    trimmed first (``String.trim``), as the connector trims its times (Spark 4
    KafkaSourceProvider.getKafkaOffsetRangeLimit: ``tsStr.trim``)."""
    text = options.get(name.lower())
    if text is None:
        return None
    candidate = java_trim(text) if trim else text
    value = parse_long(candidate)
    if value is None and _ASCII_WHOLE.fullmatch(candidate) and len(candidate) < 4000:
        # past a long: the JVM reader's message (SegstoreStream.getDefaultReadLimit)
        raise ConfigError(f"option {name} must be at most {JAVA_LONG_MAX}, found {int(candidate)}")
    if value is None:
        raise ConfigError(f"option {name} must be an integer, found {text!r}")
    if bits == 32:
        minimum = -JAVA_INT_MAX - 1 if minimum is None else minimum
        maximum = JAVA_INT_MAX if maximum is None else min(maximum, JAVA_INT_MAX)
    if minimum is not None and value < minimum:
        raise ConfigError(f"option {name} must be at least {minimum}, found {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"option {name} must be at most {maximum}, found {value}")
    return value


#: ``maxTriggerDelay`` when not given (Spark 4 KafkaSourceProvider.DEFAULT_MAX_TRIGGER_DELAY).
DEFAULT_MAX_TRIGGER_DELAY = "15m"
#: The units of a time string and their length in microseconds (Spark's JavaUtils.timeSuffixes).
_TIME_SUFFIXES = {"us": 1, "ms": 1000, "s": 1000_000, "m": 60_000_000, "min": 60_000_000,
                  "h": 3600_000_000, "d": 86400_000_000}
_TIME_STRING = re.compile(r"(-?[0-9]+)([a-z]+)?")


def time_string_ms(text: str, name: str) -> int:
    """A time string in ms as Spark's ``JavaUtils.timeStringAsMs`` reads it (the connector's
    ``Utils.timeStringAsMs``: Spark 4 KafkaMicroBatchStream.maxTriggerDelayMs): lower-cased then trimmed,
    ``-?[0-9]+`` (a Java long) and an optional unit (``us``, ``ms``, ``s``, ``m``/``min``, ``h``, ``d``; ms
    without one), converted as ``TimeUnit.convert`` converts: toward zero from us, saturating at a long's
    bounds from the larger units.

    :raises ConfigError: anything else, naming option ``name`` and the units.
    """
    found = _TIME_STRING.fullmatch(java_trim(text.lower()))
    value = parse_long(found.group(1)) if found is not None else None
    unit = _TIME_SUFFIXES.get(found.group(2) or "ms") if found is not None else None
    if value is None or unit is None:
        raise ConfigError(f"option {name}: time must be specified as seconds (s), milliseconds (ms), "
                          "microseconds (us), minutes (m or min), hour (h), or day (d), e.g. 50s, 100ms or "
                          f"250us; found {text!r}")
    if unit < 1000:
        return abs(value) // 1000 * (-1 if value < 0 else 1)       # Java's division: toward zero
    return max(-JAVA_LONG_MAX - 1, min(JAVA_LONG_MAX, value * (unit // 1000)))


def _java_char_equal(a: str, b: str) -> bool:
    """Two characters as ``String.equalsIgnoreCase`` compares them: equal, or equal once upper-cased, or
    once upper- then lower-cased, by the one-character (simple) case mappings."""
    def simple(c: str, mapped: str) -> str:
        return mapped if len(mapped) == 1 else c

    upper_a, upper_b = simple(a, a.upper()), simple(b, b.upper())
    lower_a, lower_b = simple(upper_a, upper_a.lower()), simple(upper_b, upper_b.lower())
    return a == b or upper_a == upper_b or lower_a == lower_b


def java_equals_ignore_case(text: str, other: str) -> bool:
    """``String.equalsIgnoreCase``: ``"fal\\u017fe"`` (a long s, whose upper case is S) equals ``"false"``,
    where Python's ``lower()`` keeps the long s."""
    return len(text) == len(other) and all(_java_char_equal(a, b) for a, b in zip(text, other, strict=True))


def _bool(options: dict[str, str], name: str, *, default: bool = False) -> bool:
    # any case, untrimmed, as the connector's ``toBoolean`` and CaseInsensitiveStringMap.getBoolean take it
    # (both String.equalsIgnoreCase)
    text = options.get(name.lower(), "true" if default else "false")
    if not java_equals_ignore_case(text, "true") and not java_equals_ignore_case(text, "false"):
        raise ConfigError(f"option {name} must be true or false, found {text!r}")
    return java_equals_ignore_case(text, "true")


def _config(options: dict[str, str]) -> tuple[tuple[str, str], ...]:
    # Spark lower-cases option names, so store config names travel inside one JSON option.
    text = options.get("config")
    if not text:
        return ()
    parsed = _json_object(text, "config", "store config names")
    return tuple(sorted((str(k), str(v)) for k, v in parsed.items()))


#: What Jackson skips before a JSON value (ReaderBasedJsonParser: space, tab, line feed, carriage return).
_JSON_BLANKS = " \t\n\r"


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity: Jackson refuses them (JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS is off)
    raise ValueError(f"{name} is no JSON number")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _jackson_object(text: str, what: str) -> dict[str, Any]:
    """``text`` as Spark 4's JsonUtils reads a JSON option into a Scala ``Map`` (``ObjectMapper`` with
    ``DefaultScalaModule``, jackson-databind 2.21 in PySpark 4.3): the first JSON value, after blanks;
    whatever follows it is never read (``FAIL_ON_TRAILING_TOKENS`` is off: ``{"t": [0]} x`` is
    ``{"t": [0]}``); ``null`` is an empty map.  ``O(len(text))``.

    :raises ConfigError: no JSON object there: ``what`` (what was expected) and the text.
    """
    start = len(text) - len(text.lstrip(_JSON_BLANKS))
    try:
        value, _ = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as err:
        raise ConfigError(f"{what}, found {cut(text)}") from err
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{what}, found {cut(text)}")
    return value


def _jackson_number(value: Any, bits: int = 64) -> int:
    """A JSON value read into a Scala ``Long`` (``bits=64``: an offset, a time) or ``Int`` (32: an
    assigned partition) as Jackson 2.21 reads one (``NumberDeserializers``, default coercions; Spark 4
    JsonUtils): an integer within range; a float within range, cut toward zero (``ACCEPT_FLOAT_AS_INT``;
    a long saturates as Java's cast: ``9.223372036854776E18`` is the largest long); ``null``, a string of
    blanks (chars up to U+0020) and the string ``"null"`` are 0; another string ``String.trim``-ed and read
    by ``Long.parseLong`` (``" 5"`` and ``"\u0665"`` are 5; ``"1_000"``, ``"\xa05"``, ``"5.0"`` no number),
    within range.  A boolean, an array or an object is none.

    :raises TypeError, ValueError: no such number.
    """
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if value is None:
        return 0
    if isinstance(value, bool) or isinstance(value, (list, dict)):
        raise TypeError(f"expected a number, found {value!r}")
    if isinstance(value, float):
        # Jackson compares the double with the bounds as doubles, then casts (saturating)
        if value < float(low) or value > float(high):
            raise ValueError(f"expected a number within {low}..{high}, found {value!r}")
        return max(low, min(high, int(value)))
    if isinstance(value, str):
        if all(char <= " " for char in value):
            return 0
        text = java_trim(value)
        number = 0 if text == "null" else parse_long(text)
        if number is None:
            raise ValueError(f"expected a number, found {value!r}")
        value = number
    if not low <= value <= high:
        raise ValueError(f"expected a number within {low}..{high}, found {value!r}")
    return int(value)


def _json_partition(key: str) -> int:
    """A JSON object's partition key as the connector reads it (Spark 4 JsonUtils: Jackson's ``Int`` key,
    ``Integer.parseInt``): no whitespace nor ``_``, which Python's ``int`` takes, within a Java int.

    :raises ValueError: not such a key.
    """
    number = parse_int(key)
    if number is None:
        raise ValueError(f"expected a Java int, found {key!r}")
    return number


def parse_bound(text: str | None, name: str, default: int) -> Bound:
    """Parse ``startingOffsets`` / ``endingOffsets``: earliest, latest, or per-partition JSON."""
    if text is None:
        return Bound(default)
    named = _NAMED.get(java_trim(text).lower())     # .trim, toLowerCase(Locale.ROOT)
    if named is not None:
        return Bound(named)
    # trimmed, as the connector trims it before Jackson reads it (getKafkaOffsetRangeLimit)
    spec = _jackson_object(java_trim(text), f'option {name} must be earliest, latest or a JSON object like '
                                            f'{{"topic": {{"0": 5}}}}')
    # keyed as the connector's Map[Int, Long]: a partition named twice ("0" and "00") keeps its last value
    entries: dict[tuple[str, int], int] = {}
    for topic, partitions in spec.items():
        if not isinstance(partitions, dict) and partitions is not None:
            raise ConfigError(f"option {name}: topic {topic!r} must map partitions to offsets, "
                              f"found {partitions!r}")
        for partition, offset in (partitions or {}).items():
            try:
                key, value = (str(topic), _json_partition(partition)), _jackson_number(offset)
            except (TypeError, ValueError) as err:
                raise ConfigError(f"option {name}: {topic}/{partition} must be an integer partition "
                                  f"with an integer offset, found {offset!r}") from err
            if value < EARLIEST:
                raise ConfigError(f"option {name}: offsets are >= 0, -1 (latest) or -2 (earliest), "
                                  f"found {offset} for {topic}/{partition}")
            entries[key] = value
    return Bound(default, tuple(sorted((t, p, v) for (t, p), v in entries.items())), specific=True)


def _refuse_several_paths(opts: dict[str, str]) -> None:
    """``load(p1, p2)``: Spark passes the paths as option ``paths`` (a JSON list); a read is of one store."""
    text = opts.get("paths")
    if text is None:
        return
    try:
        paths = json.loads(text)
    except ValueError:
        paths = [text]
    if not isinstance(paths, list):
        paths = [paths]
    raise ConfigError(f"expected one store path in load(PATH), found {len(paths)}: "
                      f"{', '.join(str(p) for p in paths)}; read each store on its own and union the "
                      "DataFrames")


#: Streaming admission options: a batch query ignores them (the connector only logs that it does: Spark 4
#: KafkaSourceProvider.validateBatchOptions).
_TRIGGER_NAMES = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")


def _check_trigger_bounds(opts: dict[str, str]) -> None:
    """Check minOffsetsPerTrigger and maxOffsetsPerTrigger given together as the connector checks them in
    batch and streaming queries alike (Spark 4 KafkaSourceProvider.validateGeneralOptions: read as longs,
    the minimum not above the maximum).

    :raises ConfigError: such a pair that is not two longs, or whose minimum is above its maximum.
    """
    if "minoffsetspertrigger" in opts and "maxoffsetspertrigger" in opts:
        low = _int(opts, "minOffsetsPerTrigger")
        high = _int(opts, "maxOffsetsPerTrigger")
        if low is not None and high is not None and low > high:
            raise ConfigError(f"The value of minOffsetPerTrigger({low}) is higher than the "
                              f"maxOffsetsPerTrigger({high})")


def _batch_ignores_triggers(opts: dict[str, str]) -> dict[str, str]:
    """``opts`` without the streaming admission options a batch query ignores."""
    return {name: value for name, value in opts.items() if name not in _TRIGGER_NAMES}


def _refuse_unknown(opts: dict[str, str]) -> None:
    _refuse_several_paths(opts)
    for name in sorted(opts):
        if name in _READ_NAMES:
            continue
        if name in _CLUSTER_NAMES or name.startswith("kafka."):
            raise ConfigError(f"option {name} configures a connection to a running Kafka cluster; segstore "
                              "reads the broker's files: pass its directory to "
                              'spark.read.format("segstore").load(PATH)')
    _check_known(opts, READ_OPTIONS, "option")


def _check_known(opts: Mapping[str, str], known: Iterable[str], what: str) -> None:
    """Raise for the names of ``opts`` (lower-cased) that ``known`` (the names as the docs spell them,
    compared lower-cased) lacks: each with the known name it was likely meant to be, then every known
    name, spelled as the docs spell them.

    :raises ConfigError: an unknown name.
    """
    spelled = {name.lower(): name for name in known}
    unknown = sorted(set(opts) - set(spelled))
    if unknown:
        named = ", ".join(name + did_you_mean(name, spelled.values()) for name in unknown)
        listed = ", ".join(sorted(spelled.values(), key=str.lower))
        raise ConfigError(f"unknown {what}(s) {named}; known: {listed}")


def _json_object(text: str, name: str, what: str) -> dict[str, Any]:
    """``text`` as a JSON object; anything else is one :class:`ConfigError` naming option ``name``."""
    return jsontext.loads_object(text, f"option {name} must be a JSON object of {what}")


def _topic_list(text: str) -> tuple[str, ...]:
    # as the connector splits it: split(",").map(_.trim).filter(_.nonEmpty)
    return tuple(sorted({java_trim(t) for t in text.split(",") if java_trim(t)}))


def parse_assign(text: str) -> tuple[tuple[str, int], ...]:
    """``assign``: JSON ``{"topicA": [0, 1], "topicB": [2]}`` -> sorted (topic, partition) pairs, read as
    the connector reads it: it must start with ``{`` once trimmed (Spark 4
    KafkaSourceProvider.validateGeneralOptions), then Jackson reads the untrimmed text into a
    ``Map[String, Seq[Int]]`` (JsonUtils.partitions: :func:`_jackson_object`, :func:`_jackson_number`;
    ``null`` is no partition)."""
    if not java_trim(text).startswith("{"):
        raise ConfigError(f"option assign must be a JSON object of partition lists like "
                          f"{{\"topicA\": [0, 1]}}: no topic partitions to assign in {cut(text)}")
    spec = _jackson_object(text, "option assign must be a JSON object of partition lists like "
                                 '{"topicA": [0, 1]}')
    pairs = set()
    for topic, partitions in spec.items():
        if not isinstance(partitions, list) and partitions is not None:
            raise ConfigError('option assign must be a JSON object of partition lists like '
                              f'{{"topicA": [0, 1]}}, found {partitions!r} for {topic!r}')
        for partition in partitions or ():
            # any Java int, as the connector's Seq[Int] (Spark 4 JsonUtils.partitions): one the topic lacks,
            # a negative one too, is not read (planning.selected)
            try:
                pairs.add((str(topic), _jackson_number(partition, bits=32)))
            except (TypeError, ValueError) as err:
                raise ConfigError(f"option assign: partitions of {topic!r} must be integers (Java ints), "
                                  f"found {partition!r}") from err
    return tuple(sorted(pairs))


def parse_timestamps(text: str | None, name: str) -> tuple[tuple[str, int, int], ...] | None:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: ``{"topic": {"0": ms}}``, trimmed then
    read by Jackson as the connector reads it (Spark 4 getKafkaOffsetRangeLimit, JsonUtils
    .partitionTimestamps: a ``Map[String, Map[Int, Long]]``, :func:`_jackson_object`)."""
    if text is None:
        return None
    spec = _jackson_object(java_trim(text), f'option {name} must be a JSON object like '
                                            f'{{"topic": {{"0": 1700000000000}}}}')
    entries: dict[tuple[str, int], int] = {}       # a partition named twice keeps its last value (Map)
    for topic, partitions in spec.items():
        if not isinstance(partitions, dict) and partitions is not None:
            raise ConfigError(f'option {name} must be a JSON object like {{"topic": {{"0": 1700000000000}}}}'
                              f", found {partitions!r} for {topic!r}")
        for partition, ms in (partitions or {}).items():
            try:
                key, value = (str(topic), _json_partition(partition)), _jackson_number(ms)
            except (TypeError, ValueError) as err:
                raise ConfigError(f"option {name}: {topic}/{partition} must be an integer partition with a "
                                  f"timestamp in ms, found {ms!r}") from err
            _check_time_code(name, value, f" for {topic}/{partition}")
            entries[key] = value
    return tuple(sorted((t, p, v) for (t, p), v in entries.items()))


def _check_time_code(name: str, ms: int, where: str = "") -> None:
    """Refuse a negative time that is not one of :data:`TIME_CODES`.  The connector would hand it to
    ListOffsets too, but what it means there depends on the broker: Kafka 3.8.0 reads -3 as the offset of
    the largest timestamp (which this source does not look up) and any other negative as a time before
    every record (the first record), while later brokers read -5 and below as codes of their own
    (3.9's latest tiered offset); given one, a user meant a code, or a time before 1970, not a start at
    the first record.

    :raises ConfigError: naming the option and the value.
    """
    if ms < 0 and ms not in TIME_CODES:
        raise ConfigError(f"option {name}: expected ms since the epoch (>= 0) or a ListOffsets code -1 "
                          f"(latest), -2 (earliest) or -4 (earliest local), found {ms}{where}")


def _time(opts: dict[str, str], name: str) -> int | None:
    value = _int(opts, name, trim=True)
    if value is not None:
        _check_time_code(name, value)
    return value


def _choice(opts: dict[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    # any case, untrimmed, as the connector takes its choices (StrategyOnNoMatchStartingOffset.withName and
    # IsolationLevel.valueOf of the upper-cased value) and the JVM reader ``reader`` / ``writer``
    # (SegstoreTable: equalsIgnoreCase)
    # (the connector upper-cases with toUpperCase(Locale.ROOT), full case mappings as Python's upper():
    # "late\u017ft" is LATEST; the JVM reader's equalsIgnoreCase reads "jvm" and "python" alike)
    text = opts.get(name.lower(), default)
    found = [choice for choice in choices if text.upper() == choice.upper()]
    if not found:
        raise ConfigError(f"option {name} must be {' or '.join(choices)}, found {text!r}")
    return found[0]


#: Each end's options in the connector's order of preference: of those given, only the first is read, the
#: others are never parsed nor checked (Spark 4 KafkaSourceProvider.getKafkaOffsetRangeLimit).
STARTING_OPTIONS = ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets")
ENDING_OPTIONS = ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets")


def _effective(opts: dict[str, str], names: tuple[str, ...]) -> str | None:
    """The first of ``names`` given in ``opts`` (lower-cased names), or None."""
    return next((name for name in names if name.lower() in opts), None)


def parse_read_options(options: Mapping[str, str], *, streaming: bool | None = False) -> ReadOptions:
    """Validate Spark's reader options.

    ``streaming``: a stream's options (True), a batch read's (False), or those of a read that may be either
    (None: the schema, and a partition's read, which Spark asks alike of both), which leaves unread what
    only one of them reads, the ending and the trigger options: a stream ignores what a batch read would
    refuse there (the connector never reads endingTimestamp in a stream).

    :raises ConfigError: an unknown option name or a malformed value, naming both;
        an option of the Kafka connector that needs a running cluster; an ending option of a stream.
    """
    opts = _lower(options)
    _check_trigger_bounds(opts)
    if streaming is not True:
        opts = _batch_ignores_triggers(opts)
    _refuse_unknown(opts)
    path = opts.get("path")
    if not path:
        raise ConfigError('a path is required: spark.read.format("segstore").load(PATH)')
    check_path(path, "a store path")        # a Java string holds a NUL byte, no file system does
    # Given is chosen, empty or not: Spark's Kafka connector takes the option's presence as the strategy
    # and refuses an empty one (Spark 4 KafkaSourceProvider.validateGeneralOptions), where an empty
    # value taken as absent would read every topic of the store.
    chosen = [n for n in ("subscribe", "topics", "subscribePattern", "assign") if n.lower() in opts]
    if len(chosen) > 1:
        raise ConfigError(f"options {' and '.join(chosen)} both choose topics; give only one of subscribe, "
                          "subscribePattern or assign")
    topics = pattern = assign = None
    if "subscribe" in opts or "topics" in opts:
        name = chosen[0]
        topics = _topic_list(opts[name.lower()])
        if not topics:
            raise ConfigError(f"option {name} must name at least one topic (comma-separated), found "
                              f"{opts[name.lower()]!r}")
    elif "subscribepattern" in opts:
        # trimmed, as the connector's SubscribePatternStrategy(value.trim())
        pattern = java_trim(opts["subscribepattern"])
        if not pattern:
            raise ConfigError(f"option subscribePattern must be a regular expression, found "
                              f"{opts['subscribepattern']!r}")
        _java_pattern(pattern)
    elif "assign" in opts:
        assign = parse_assign(opts["assign"])
    if streaming is True:
        # a stream has no end: Spark's Kafka connector refuses these two in streaming queries (Spark 4
        # KafkaSourceProvider.validateStreamOptions) rather than ignore them; endingTimestamp it does not
        # refuse, and never reads (only the starting options are resolved for a stream)
        for name in ("endingOffsets", "endingOffsetsByTimestamp"):
            if name.lower() in opts:
                raise ConfigError(f"option {name} is not valid in streaming queries (a stream has no end); "
                                  "use trigger(availableNow=True) to stop at the store's end")
    starting_default = LATEST if streaming else EARLIEST
    # only the option each end takes is read: the others are not parsed, let alone checked
    taken = {name.lower() for name in (_effective(opts, STARTING_OPTIONS),
                                       _effective(opts, ENDING_OPTIONS) if streaming is False else None)
             if name}
    given = {name: text for name, text in opts.items() if name in taken}
    isolation = _choice(opts, "kafka.isolation.level", (READ_UNCOMMITTED, READ_COMMITTED), READ_UNCOMMITTED)
    return ReadOptions(
        path=path,
        format=opts.get("format") or None,
        topics=topics,
        topic_pattern=pattern,
        assign=assign,
        starting=parse_bound(given.get("startingoffsets"), "startingOffsets", starting_default),
        ending=parse_bound(given.get("endingoffsets"), "endingOffsets", LATEST),
        starting_timestamp=_time(given, "startingTimestamp"),
        ending_timestamp=_time(given, "endingTimestamp"),
        starting_timestamps=parse_timestamps(given.get("startingoffsetsbytimestamp"),
                                             "startingOffsetsByTimestamp"),
        ending_timestamps=parse_timestamps(given.get("endingoffsetsbytimestamp"), "endingOffsetsByTimestamp"),
        starting_timestamp_strategy=_choice(opts, "startingOffsetsByTimestampStrategy",
                                            (STRATEGY_ERROR, STRATEGY_LATEST), STRATEGY_ERROR),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", default=True),
        include_headers=_bool(opts, "includeHeaders"),
        decompress_bodies=_bool(opts, "decompressBodies", default=True),
        isolation=isolation,
        # a Java long, as the JVM reader's ReadLimit (SegstoreStream.getDefaultReadLimit) parses it
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", minimum=1),
        # Java longs, as the connector's toLong and Utils.timeStringAsMs (Spark 4 KafkaMicroBatchStream);
        # a batch read has dropped them (_batch_ignores_triggers)
        min_offsets_per_trigger=_int(opts, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=time_string_ms(opts.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY),
                                            "maxTriggerDelay"),
        max_bytes_per_partition=(_int(opts, "maxBytesPerPartition", minimum=1)
                                 or DEFAULT_MAX_BYTES_PER_PARTITION),
        # a Java long, as the connector's toLong (Spark 4 KafkaOffsetReaderAdmin); at least 1, a piece
        # being ceil(size / maximum) (KafkaOffsetRangeCalculator.getRanges)
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", minimum=1),
        min_partitions=_int(opts, "minPartitions", minimum=1, bits=32),
        min_partitions_given=_int(opts, "minPartitions", minimum=1, bits=32),
        max_records_per_batch=_int(opts, "maxRecordsPerBatch", minimum=1) or DEFAULT_MAX_RECORDS_PER_BATCH,
        include_control_records=_bool(opts, "includeControlRecords"),
        config=_config(opts) + _storage_options(opts),
        reader=_choice(opts, "reader", (READER_JVM, READER_PYTHON), READER_JVM) if "reader" in opts else None,
    )


def _storage_options(options: dict[str, str]) -> tuple[tuple[str, str], ...]:
    # Carried inside ``config`` (what input partitions already carry to the executors);
    # segstore.open takes ``storage_options`` apart from the store's config names.
    text = options.get("storageoptions")
    if not text:
        return ()
    parsed = _json_object(text, "storageOptions", "fsspec storage options")
    return (("storage_options", json.dumps(parsed, sort_keys=True)),)


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate Spark's writer options.

    ``config`` is a JSON object of the store's own config names (Spark lower-cases
    option names, so they cannot be options of their own), e.g.
    ``{"mappedFileSizeCommitLog": 1048576}`` or ``{"segment.bytes": 1048576}``.

    :raises ConfigError: an unknown option name or a malformed value.
    """
    opts = _lower(options)
    _check_known(opts, WRITE_OPTIONS, "writer option")
    path = opts.get("path")
    if not path:
        raise ConfigError('a path is required: df.write.format("segstore").save(PATH)')
    check_path(path, "a store path")
    if opts.get("stagingdir"):
        check_path(opts["stagingdir"], "a stagingDir path")
    if is_url(path):
        raise ReadOnlyError("expected a local path to write to, found a URL (stores on remote "
                            "filesystems are read-only)", path)
    return WriteOptions(
        path=path,
        format=opts.get("format") or None,
        topic=opts.get("topic") or None,
        partition=_int(opts, "partition", minimum=0),
        staging_dir=opts.get("stagingdir") or None,
        config=_config(opts),
        writer=_choice(opts, "writer", (READER_JVM, READER_PYTHON), READER_JVM) if "writer" in opts else None,
    )
