"""Options of the ``segstore`` Spark source, named as Spark's Kafka connector names them.

=========================  ==================================================================
``path``                   the store: a RocketMQ store root, a Kafka log dir or one partition dir
``format``                 ``rocketmq`` / ``kafka`` / another registered name; detected if absent
``topics``                 comma-separated topic names to read (default: every topic)
``startingOffsets``        ``earliest`` (batch default), ``latest`` (stream default), or JSON
                           ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest)
``endingOffsets``          ``latest`` (default) or JSON as above (exclusive ends)
``startingTimestamp``      ms since the epoch: start each partition at its first offset whose
                           timestamp is at or after it (through the store's time lookup)
``endingTimestamp``        ms: end each partition before its first offset at or after it
``maxOffsetsPerTrigger``   streaming: at most this many offsets per micro-batch, over all partitions
``maxBytesPerPartition``   planner: target bytes of one input partition (default 64 MiB)
``minPartitions``          planner: split further until at least this many input partitions
                           (default: the session's default parallelism, recorded by ``register``)
``maxRecordsPerBatch``     reader: rows per Arrow batch (default 10000)
``includeControlRecords``  Kafka: also return transaction markers (default false, as consumers do)
``config``                 JSON object of the store's own config names, passed to ``segstore.open``
=========================  ==================================================================

Parsing is pure and runs on the driver; :class:`ReadOptions` is picklable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError

EARLIEST = -2
LATEST = -1
_NAMED = {"earliest": EARLIEST, "latest": LATEST}

DEFAULT_MAX_BYTES_PER_PARTITION = 64 * 1024 * 1024
DEFAULT_MAX_RECORDS_PER_BATCH = 10_000

#: Per topic, per partition: an absolute offset, or EARLIEST / LATEST.
OffsetSpec = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of the range to read: a named position, or per-partition offsets.

    ``default`` applies to partitions absent from ``offsets`` (EARLIEST or LATEST).
    """

    default: int
    offsets: tuple[tuple[str, int, int], ...] = ()

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
    topics: tuple[str, ...] | None = None
    starting: Bound = Bound(EARLIEST)
    ending: Bound = Bound(LATEST)
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    min_partitions: int | None = None     # None: the data source's default (the session's parallelism)
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    include_control_records: bool = False
    config: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What the writer needs: the store, its format and config, defaults for missing columns."""

    path: str
    format: str | None = None
    topic: str | None = None
    partition: int = 0
    staging_dir: str | None = None
    config: tuple[tuple[str, str], ...] = ()


_READ_NAMES = {"path", "format", "topics", "startingoffsets", "endingoffsets", "startingtimestamp",
               "endingtimestamp", "maxoffsetspertrigger", "maxbytesperpartition", "minpartitions",
               "maxrecordsperbatch", "includecontrolrecords", "config"}
_WRITE_NAMES = {"path", "format", "topic", "partition", "stagingdir", "config"}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands options in a case-insensitive map; normalise for lookups and messages.
    return {str(k).lower(): str(v) for k, v in options.items()}


def _int(options: dict[str, str], name: str, *, minimum: int | None = None) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError as err:
        raise ConfigError(f"option {name} must be an integer, found {text!r}") from err
    if minimum is not None and value < minimum:
        raise ConfigError(f"option {name} must be at least {minimum}, found {value}")
    return value


def _bool(options: dict[str, str], name: str) -> bool:
    text = options.get(name.lower(), "false").strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"option {name} must be true or false, found {text!r}")
    return text == "true"


def _config(options: dict[str, str]) -> tuple[tuple[str, str], ...]:
    # Spark lower-cases option names, so store config names travel inside one JSON option.
    text = options.get("config")
    if not text:
        return ()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"option config must be a JSON object of store config names, "
                          f"found {text!r}") from err
    if not isinstance(parsed, dict):
        raise ConfigError(f"option config must be a JSON object of store config names, found {text!r}")
    return tuple(sorted((str(k), str(v)) for k, v in parsed.items()))


def parse_bound(text: str | None, name: str, default: int) -> Bound:
    """Parse ``startingOffsets`` / ``endingOffsets``: earliest, latest, or per-partition JSON."""
    if text is None:
        return Bound(default)
    named = _NAMED.get(text.strip().lower())
    if named is not None:
        return Bound(named)
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f'option {name} must be earliest, latest or JSON like {{"topic": {{"0": 5}}}}, '
                          f"found {text!r}") from err
    if not isinstance(spec, dict):
        raise ConfigError(f"option {name} must be a JSON object of topics, found {text!r}")
    entries = []
    for topic, partitions in spec.items():
        if not isinstance(partitions, dict):
            raise ConfigError(f"option {name}: topic {topic!r} must map partitions to offsets, "
                              f"found {partitions!r}")
        for partition, offset in partitions.items():
            try:
                entries.append((str(topic), int(partition), int(offset)))
            except (TypeError, ValueError) as err:
                raise ConfigError(f"option {name}: {topic}/{partition} must be an integer partition "
                                  f"with an integer offset, found {offset!r}") from err
            if entries[-1][2] < EARLIEST:
                raise ConfigError(f"option {name}: offsets are >= 0, -1 (latest) or -2 (earliest), "
                                  f"found {offset} for {topic}/{partition}")
    # Partitions not listed keep the named default of that end, as in Spark's Kafka connector.
    return Bound(default, tuple(sorted(entries)))


def parse_read_options(options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    """Validate Spark's reader options.

    :raises ConfigError: an unknown option name or a malformed value, naming both.
    """
    opts = _lower(options)
    unknown = sorted(set(opts) - _READ_NAMES)
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(_READ_NAMES))}")
    path = opts.get("path")
    if not path:
        raise ConfigError('a path is required: spark.read.format("segstore").load(PATH)')
    topics = None
    if opts.get("topics"):
        topics = tuple(sorted({t.strip() for t in opts["topics"].split(",") if t.strip()}))
    starting_default = LATEST if streaming else EARLIEST
    return ReadOptions(
        path=path,
        format=opts.get("format") or None,
        topics=topics,
        starting=parse_bound(opts.get("startingoffsets"), "startingOffsets", starting_default),
        ending=parse_bound(opts.get("endingoffsets"), "endingOffsets", LATEST),
        starting_timestamp=_int(opts, "startingTimestamp", minimum=0),
        ending_timestamp=_int(opts, "endingTimestamp", minimum=0),
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", minimum=1),
        max_bytes_per_partition=(_int(opts, "maxBytesPerPartition", minimum=1)
                                 or DEFAULT_MAX_BYTES_PER_PARTITION),
        min_partitions=_int(opts, "minPartitions", minimum=1),
        max_records_per_batch=_int(opts, "maxRecordsPerBatch", minimum=1) or DEFAULT_MAX_RECORDS_PER_BATCH,
        include_control_records=_bool(opts, "includeControlRecords"),
        config=_config(opts),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate Spark's writer options.

    ``config`` is a JSON object of the store's own config names (Spark lower-cases
    option names, so they cannot be options of their own), e.g.
    ``{"mappedFileSizeCommitLog": 1048576}`` or ``{"segment.bytes": 1048576}``.

    :raises ConfigError: an unknown option name or a malformed value.
    """
    opts = _lower(options)
    unknown = sorted(set(opts) - _WRITE_NAMES)
    if unknown:
        raise ConfigError(f"unknown writer option(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(_WRITE_NAMES))}")
    path = opts.get("path")
    if not path:
        raise ConfigError('a path is required: df.write.format("segstore").save(PATH)')
    return WriteOptions(
        path=path,
        format=opts.get("format") or None,
        topic=opts.get("topic") or None,
        partition=_int(opts, "partition", minimum=0) or 0,
        staging_dir=opts.get("stagingdir") or None,
        config=_config(opts),
    )
