"""The ``segstore`` command line.

Exit codes: 0 ok; 1 a data problem (corrupt or torn files, verify findings, a query
that matched nothing); 2 a usage problem (bad arguments, a path that does not exist
or does not hold the format asked for, unknown format or config name).
Errors go to stderr as ``path:pos: what was expected, what was found``; with
``--json`` stdout carries JSON only.
"""

from __future__ import annotations

import argparse
import base64
import codecs
import errno
import inspect
import json
import os
import re
import select
import stat
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TextIO, cast

from . import allocator, files, jsontext, overlap, progress, registry
from .api import open as open_store
from .errors import (
    MAX_SHOWN,
    NUL,
    ConfigError,
    CorruptDataError,
    FormatNotFoundError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    MissingDependencyError,
    NotFoundError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    SegstoreError,
    UnrepairedDataError,
    UnsupportedOperationError,
    WrongFormatError,
    cut,
    shown_number,
    shown_path,
    shown_text,
)
from .errors import shown as json_shown
from .javatext import java_trim, java_utf8, parse_int, parse_long
from .launch import EXIT_INTERRUPTED
from .plugin import WRITE_CHUNK, FileDumpOptions
from .records import Record
from .store import (
    ISOLATION_LEVELS,
    QUERY_ALL,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    DumpLine,
    Problem,
    QueryRequest,
    Store,
    text_word,
)

if TYPE_CHECKING:
    from .consumers import ConsumerGroups

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
#: What a query that matched nothing exits with (a data answer, not a usage problem).
EXIT_NO_HITS = EXIT_DATA
# ReadOnlyError: a write command on a URL (remote stores are read-only).
_USAGE_ERRORS = (ConfigError, FormatNotFoundError, InvalidTopicError, UnsupportedOperationError,
                 WrongFormatError, MissingDependencyError, ReadOnlyError)


class UsageError(SegstoreError, ValueError):
    """The command line is wrong (exit code 2)."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    try:
        installed = version("segstore")
    except PackageNotFoundError:
        installed = None
    return __version__ if installed in (None, __version__) else f"{__version__} (installed: {installed})"


def _parse_config(pairs: Sequence[str] | None) -> dict[str, str]:
    """``--config NAME=VALUE`` options as a dict (:func:`segstore.convert.parse_config`: each name once)."""
    from .convert import parse_config

    return parse_config(pairs)


def store_config(args: argparse.Namespace, fmt: str) -> dict[str, Any]:
    """The config a command opens a ``fmt`` store with: ``--config-file FILE`` (the broker's own config
    file, ``broker.conf`` / ``server.properties``, read and applied as that broker does:
    :func:`segstore.api.config_file`) under ``--config NAME=VALUE``, which wins over the file.

    :raises UsageError: no file at ``--config-file``.
    :raises ConfigError: a ``--config`` pair, or the file, the format refuses.
    """
    config = _parse_config(args.config)
    path = getattr(args, "config_file", None)
    if path is None:
        return config
    from .api import config_file

    if files.not_regular(path) == "a FIFO":         # --config-file <(cmd): a pipe, read once
        with files.spooled_file(path) as copy:
            try:
                taken = config_file(copy, fmt, **config)
            except ConfigError as err:
                if err.path != copy:
                    raise
                raise ConfigError(err.message, path, err.pos) from err
            _say_config_file_notes(args, copy, fmt, path, config)
            return taken
    _require_input_file(path, "a broker config file (--config-file)")
    taken = config_file(path, fmt, **config)
    _say_config_file_notes(args, path, fmt, path, config)
    return taken


def _say_config_file_notes(args: argparse.Namespace, path: str, fmt: str, shown: str,
                           config: Mapping[str, Any]) -> None:
    """Print on stderr, once a command, what :func:`segstore.api.config_file_notes` says of the
    ``--config-file`` at ``path`` (named ``shown``) for the store the command opens (``convert``: its
    ``DST``): a RocketMQ ``storePathRootDir``/``storePathCommitLog`` naming another place than ``PATH``,
    which is read all the same, or a file naming nothing the broker reads (another broker's file)."""
    store = getattr(args, "dst", None) or getattr(args, "path", None)
    if store is None or getattr(args, "_config_file_noted", False):
        return
    args._config_file_noted = True
    from .api import config_file_notes

    for note in config_file_notes(path, fmt, store, config):
        if shown != path and note.startswith(path):
            note = shown + note[len(path):]
        sys.stderr.write(f"segstore {args.command}: note: {note}\n")


def format_name(text: str) -> str:
    """``--format``: a format's name (an empty one would read as none given: ``write`` took the default
    format for it); a name no plugin registers is refused where the store is opened."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a format name ({', '.join(registry.names())}), found "
                                         f"{cut(text)}")
    return text


def resolve_store(path: str, fmt: str | None) -> str:
    """The format of the existing store at ``path``: ``fmt`` checked, or detected.

    :raises UsageError: ``path`` does not exist or is not a directory.
    :raises WrongFormatError: it holds no store of ``fmt`` (or of any known format).
    """
    if not files.exists(path):
        raise UsageError("expected an existing store directory, found no such file or directory", path)
    if not files.is_dir(path):
        raise UsageError("expected a store directory, found a file", path)
    if fmt is None:
        return registry.detect(path)
    if not registry.get(fmt).detect(path):
        others = registry.other_formats(path, fmt)
        found = f"a {others[0]} store" if others else f"no {fmt} files"
        raise WrongFormatError(f"expected a {fmt} store, found {found}", path)
    return fmt


def _open(args: argparse.Namespace, mode: str = "r") -> Any:
    fmt = resolve_store(args.path, args.format)
    store = open_store(args.path, format=fmt, mode=mode, **store_config(args, fmt))
    args.fixed_where = _fixed_where(store)
    return store


def _fixed_where(store: Store) -> tuple[str, int] | None:
    """The topic and partition a store of one partition directory fixes by its name (Kafka ``TOPIC-N``,
    ``KafkaStore.single``), which the lines of a miss name where ``--topic``/``--partition`` were not
    given; None for a store of several."""
    if not getattr(store, "single", False):
        return None
    topics = store.topics()
    partitions = store.partitions(topics[0]) if len(topics) == 1 else []
    return (topics[0], partitions[0]) if len(partitions) == 1 else None


def _where_words(args: argparse.Namespace, topic: str | None, partition: int | None) -> str:
    """``TOPIC/QUEUE`` of a selection, ``*`` for one not given, but for what the store's directory fixes
    (:func:`_fixed_where`: a Kafka partition directory opened alone names its topic and partition)."""
    fixed = getattr(args, "fixed_where", None)
    if fixed is not None:
        topic = fixed[0] if topic is None else topic
        partition = fixed[1] if partition is None else partition
    return f"{topic or '*'}/{'*' if partition is None else partition}"


def _partition(args: argparse.Namespace) -> int | None:
    """The queue / partition ``--queue`` or its alias ``--partition`` names (None: neither).

    :raises UsageError: both, naming two different ones (one of them would be dropped).
    """
    queue = getattr(args, "queue", None)  # ``transactions`` has --partition only
    if queue is not None and args.partition is not None and queue != args.partition:
        raise UsageError(f"expected one queue/partition, found --queue {queue} and --partition "
                         f"{args.partition} (one is the other's alias)")
    return queue if queue is not None else args.partition


def _json_line(obj: Any, out: TextIO) -> None:
    out.write(jsontext.dumps(obj, sort_keys=True) + "\n")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def time_ms(text: str) -> int:
    """A time option: milliseconds since the epoch, or ISO-8601 (``2024-05-01T12:00:00Z``,
    ``2024-05-01 12:00:00.250+02:00``, ``2024-05-01``); without a UTC offset it is UTC."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        # both brokers keep times in ms as a Java long (int() refused "\u00b2" and more than 4,300 digits:
        # a ValueError traceback from write --input's text times)
        return _long_option(text, "expected milliseconds since the epoch (a Java long) or an ISO-8601 time")
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text  # fromisoformat takes Z from 3.11 only
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds since the epoch or an ISO-8601 time, "
                                         f"found {shown_text(text)}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - _EPOCH) // timedelta(milliseconds=1)  # exact integers, no float rounding


def now_ms(text: str) -> int:
    """``--now-ms``: the clock a command judges by (:func:`time_ms`), at or after the epoch (a time
    before 1970 is a slip: a sign, a date)."""
    when = time_ms(text)
    if when < 0:
        raise argparse.ArgumentTypeError(f"expected a time at or after the epoch, found "
                                         f"{shown_text(text.strip())} "
                                         f"({when} ms)")
    return when


#: ``offsets.retention.minutes``' range (Kafka 3.8.0 ``KafkaConfig``: ``INT``, ``atLeast(1)``)
OFFSETS_RETENTION_MINUTES = (1, 2**31 - 1)


def retention_minutes(text: str) -> int:
    """``--offsets-retention-minutes``: a whole number the broker's ``offsets.retention.minutes`` takes
    (``ConfigDef.parseType``: ``Integer.parseInt`` of the trimmed text)."""
    low, high = OFFSETS_RETENTION_MINUTES
    minutes = parse_int(java_trim(text))
    if minutes is None or not low <= minutes <= high:
        raise argparse.ArgumentTypeError(f"expected {low} to {high} minutes (offsets.retention.minutes, an "
                                         f"INT at least {low}), found {shown_text(text)}")
    return minutes


#: ``kafka-get-offsets --time``'s names (3.8 ``GetOffsetShell.parseOffsetSpec``) and the ListOffsets
#: timestamps they stand for (``ListOffsetsRequest``)
LIST_OFFSETS_SPECS = {"earliest": -2, "latest": -1, "max-timestamp": -3}


def list_offsets_time(text: str) -> int:
    """``query --timestamp``: a time (:func:`time_ms`) or a name of :data:`LIST_OFFSETS_SPECS`."""
    spec = LIST_OFFSETS_SPECS.get(text.strip().lower())
    if spec is not None:
        return spec
    when = time_ms(text)
    if when < 0 and not text.strip().lstrip("-").isdigit():
        # a time before 1970 would come out as -1, -2, ...: ListOffsets codes, not the time it names
        raise argparse.ArgumentTypeError(f"expected a time at or after the epoch, found "
                                         f"{shown_text(text.strip())} "
                                         f"({when} ms)")
    return when


#: ``java.time.Duration.parse``'s text: ``[-+]P[nD][T[nH][nM][n[.n]S]]``, each number signed, any case
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?)(\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def _long_option(text: str, expected: str) -> int:
    """``int(text)`` within a Java long, for an option whose text is a whole number.

    :raises argparse.ArgumentTypeError: ``"<expected>, found <what>"``: the text cut to a readable
        length, a number too long for ``int()`` by its digit count, one past a long as
        :func:`segstore.errors.number` shows it.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected}, found {shown_text(text)}") from None
    if not -2**63 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{expected}, found {shown_number(value)}")
    return value


def whole_number(text: str) -> int:
    """An integer option (``--offset``, ``--count``, ``--queue``, ``--before``...): what ``int()`` takes,
    within a Java long, as every offset, count, queue and partition of both brokers is.  argparse's own
    refusal echoed the text whole (``invalid int value: '<5,000 digits>'``), and a number of hundreds of
    digits was taken, then echoed whole by the error it met (``no record at offset 999...``).

    :raises argparse.ArgumentTypeError: no integer, or one past a Java long (a usage error, exit 2).
    """
    return _long_option(text, "expected a whole number from -2^63 to 2^63-1 (a Java long)")


def _java_long(text: str) -> int:
    """A whole number as ``Long.valueOf`` reads it (:func:`segstore.javatext.parse_long`;
    kafka-consumer-groups' ``--to-offset``, ``--shift-by``: jopt-simple's ``OptionSpec<Long>``, which
    refuses what it throws on, a blank around it or a number past a long, as a usage error)."""
    value = parse_long(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a whole number from -2^63 to 2^63-1 (a Java long), "
                                         f"found {shown_text(text)}")
    return value


def _java_int(text: str) -> int:
    """A whole number as ``Integer.valueOf`` reads it (:func:`segstore.javatext.parse_int`;
    kafka-transactions' ``--max-transaction-timeout``, an argparse4j ``Integer``, which refuses what it
    throws on as a usage error)."""
    value = parse_int(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a whole number from -2^31 to 2^31-1 (a Java int), "
                                         f"found {shown_text(text)}")
    return value


def duration_ns(text: str) -> int:
    """``--by-duration``: an ISO-8601 duration as ``java.time.Duration.parse`` reads it (``P1DT2H``,
    ``PT30M``, ``PT0.5S``, ``-PT6H``), in nanoseconds."""
    found = _DURATION.fullmatch(text.strip())
    if found is None or found.group(0).upper().endswith(("P", "T")):
        raise argparse.ArgumentTypeError(f"expected an ISO-8601 duration such as P1DT2H30M or PT15M, found "
                                         f"{shown_text(text)}")
    sign, days, hours, minutes, seconds_sign, seconds, fraction = found.groups()

    def exact(value: int) -> int:
        # Duration.parse: Long.parseLong of each number, Math.multiplyExact to seconds, Math.addExact of
        # the parts; an overflow is its DateTimeParseException, not a duration
        if not -2**63 <= value < 2**63:
            raise argparse.ArgumentTypeError(f"expected an ISO-8601 duration of at most 2^63-1 seconds "
                                             f"(java.time.Duration), found {shown_text(text)}")
        return value

    def parsed(digits: str | None) -> int:
        # past 19 digits no long (and past 4,300 int() refuses them: a ValueError traceback)
        return exact(int(digits or 0) if len((digits or "").lstrip("+-").lstrip("0")) <= 19 else 2**63)

    whole = parsed(seconds)
    whole = exact(exact(parsed(minutes) * 60) + (-whole if seconds_sign == "-" else whole))
    whole = exact(exact(parsed(hours) * 3600) + whole)
    whole = exact(exact(parsed(days) * 86400) + whole)
    fraction_ns = int((fraction or "").ljust(9, "0"))
    ns = whole * 10**9 + (-fraction_ns if seconds_sign == "-" else fraction_ns)
    if sign == "-":
        exact(-whole)       # Duration.negated: -2^63 seconds has no negation
        return -ns
    return ns


def _print_records(store: Store, records: Iterable[Record], as_json: bool, out: TextIO) -> int:
    """One line a record: its ``dump --json`` object, or the format's one-line form; returns the count."""
    count = 0
    for record in records:
        if as_json:
            out.write(store.json_line(record) + "\n")
        else:
            out.write(store.describe(record) + "\n")
        count += 1
    return count


def _json_object(obj: Any, out: TextIO) -> None:
    """One record's (or answer's) JSON object a line, as ``dump --json`` writes records."""
    out.write(jsontext.dumps(obj) + "\n")


def _print_lines(lines: Iterable[DumpLine], as_json: bool, out: TextIO) -> int:
    """A plugin's answer lines: the text of each, or (``as_json``) the JSON object of each line that
    has one; returns how many lines were printed."""
    count = 0
    for line in lines:
        if not as_json:
            out.write(line.text + "\n")
        elif line.json and line.json_text is not None:   # the format's own (a record's dump --json line)
            out.write(line.json_text + "\n")
        elif line.json:
            _json_object(line.data, out)
        else:
            continue
        count += 1
    return count


#: Encodings (by codecs' names) that write UTF-8 text as the same bytes.
_UTF8 = frozenset({"utf-8"})


def _write_blocks(blocks: Iterable[bytes | memoryview], out: TextIO) -> None:
    """Write blocks of UTF-8 text: to ``out``'s binary buffer when it has one whose encoding is
    UTF-8 (no decode and encode again; what was written as text before is flushed first), else
    decoded into ``out``."""
    raw = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    if raw is not None and encoding is not None and codecs.lookup(encoding).name in _UTF8:
        out.flush()
        for block in blocks:
            raw.write(block)
        return
    for block in blocks:
        out.write(str(block, "utf-8", "surrogatepass"))


def _listing(noun: str, names: Sequence[object], limit: int = 20) -> str:
    """``noun``s ``names`` for a message: ``topics a, b`` (the first ``limit``, then how many more)."""
    if not names:
        return f"no {noun}s"
    shown = ", ".join(str(name) for name in names[:limit])
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"{noun}s {shown}{more}"


def _number_ranges(numbers: Iterable[int], below: int = 0) -> str:
    """``0-3, 17``: sorted numbers (and every one from 0 below ``below``) with runs of consecutive ones as
    ranges."""
    runs: list[list[int]] = [[0, below - 1]] if below > 0 else []
    for number in sorted(n for n in set(numbers) if n >= below):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _partition_flag(args: argparse.Namespace) -> str:
    """The selector the user gave for a queue / partition, in their words."""
    return "--queue" if getattr(args, "queue", None) is not None else "--partition"


#: How a format's directories name a topic's queue / partition, and the flag that selects it: Kafka 3.8's
#: ``TOPIC-PARTITION`` log dir (``UnifiedLog.parseTopicPartitionName`` splits the name at its last ``-``),
#: RocketMQ 4.9.7's ``consumequeue/TOPIC/QUEUE`` (``DefaultMessageStore.loadConsumeQueue``).
_DIRECTORY_NAMES = {"kafka": ("-", "--partition"), "rocketmq": ("/", "--queue")}


def _directory_name_hint(fmt: str, topic: str | None, partitions: Callable[[str], Iterable[int]],
                         form: str = "selectors") -> str:
    """``" (did you mean --topic T --partition N?)"`` for a ``topic`` that is a directory's name
    (``T-N`` of Kafka, ``T/N`` of RocketMQ) where ``T`` is a topic ``partitions`` gives partitions of
    (none: not known) and ``N`` one of them; else ``""``.  ``form``: the flags the command has,
    ``selectors`` (``--topic`` with ``--queue``/``--partition``), ``consumers`` (``consumers --topic``:
    Kafka's ``T:N``, a RocketMQ topic whole) or ``topic`` (whole topics only: ``convert``).  The one
    hint every command given a ``--topic`` it does not hold adds.  ``O(partitions of T)``; thread-safe."""
    named = _DIRECTORY_NAMES.get(fmt)
    if named is None or topic is None:
        return ""
    separator, flag = named
    base, _, number = topic.rpartition(separator)
    if not base or not number.isascii() or not number.isdigit() or number != str(int(number)):
        return ""
    if int(number) not in set(partitions(base)):
        return ""
    if form == "consumers" and fmt == "kafka":
        return f" (did you mean --topic {base}:{number}?)"
    if form != "selectors":
        return f" (did you mean --topic {base}? it takes the topic's every {flag[2:]})"
    return f" (did you mean --topic {base} {flag} {number}?)"


def _store_partitions(store: Store) -> Callable[[str], Iterable[int]]:
    """The partitions ``store`` holds of a topic (none of a topic it does not hold), for
    :func:`_directory_name_hint`."""
    topics = set(store.topics())
    return lambda topic: store.partitions(topic) if topic in topics else ()


def _missing_selection(store: Store, args: argparse.Namespace) -> NotFoundError | None:
    """What ``--topic``/``--queue``/``--partition`` name that ``store`` does not hold (None: it has all)."""
    topics = store.topics()
    if args.topic is not None and args.topic not in topics:
        hint = _directory_name_hint(store.format, args.topic, _store_partitions(store))
        return NotFoundError(f"expected a topic named {cut(args.topic)}, found {_listing('topic', topics)}"
                             f"{hint}", store.path)
    partition = _partition(args)
    if partition is None:
        return None
    chosen = [args.topic] if args.topic is not None else topics
    held = {p for t in chosen for p in store.partitions(t)}
    if partition in held:
        return None
    flag = _partition_flag(args)
    where = f"topic {cut(args.topic)}" if args.topic is not None else "any topic"
    found = f"{flag[2:]}s {_number_ranges(held)}" if held else f"no {flag[2:]}s"
    return NotFoundError(f"expected {flag} {partition} in {where}, found {found}", store.path)


def _dumped(dump: Callable[..., Iterable[bytes | memoryview]], out: TextIO, **kwargs: Any) -> int:
    """Write the blocks of ``dump(**kwargs)`` (a store's ``dump_json`` / ``dump_text``) to ``out``; the
    bytes written.  The dump walks ahead of the block being written where it can
    (``walk_ahead``: its threads format the next ranges while this one writes, instead of waiting for
    it), which is safe here as the dump is read within this call: it is closed before this returns or
    raises (a pipe's reader gone, an interrupt), so its threads are done before the store closes."""
    if "walk_ahead" in inspect.signature(dump).parameters:      # (a plugin's dump may not take it)
        kwargs["walk_ahead"] = True
    blocks = dump(**kwargs)
    counted = _Counted(blocks)
    try:
        _write_blocks(counted, out)
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()
    return counted.bytes


class _Counted:
    """Blocks passed through, counting their bytes (whether a dump wrote anything)."""

    def __init__(self, blocks: Iterable[bytes | memoryview]) -> None:
        self.blocks = blocks
        self.bytes = 0

    def __iter__(self) -> Iterator[bytes | memoryview]:
        for block in self.blocks:
            self.bytes += len(block)
            yield block


def _reads_tags(store: Store) -> bool:
    return "tag" in inspect.signature(store.read).parameters


def _decompressing(store: Store, args: argparse.Namespace) -> bool:
    """Whether ``--decompress-bodies`` was given, for a store whose records may hold bodies their
    producer compressed (it has ``consumed``: RocketMQ).

    :raises UsageError: given for another store.
    """
    if not args.decompress_bodies:
        return False
    if getattr(store, "consumed", None) is None:
        raise UsageError(f"--decompress-bodies: {store.format} records hold no compressed bodies "
                         "(their batches are decompressed whole)", args.path)
    return True


# -- commands ----------------------------------------------------------------

def _json_payload(data: bytes) -> str:
    """The ``json`` decoder: the bytes parsed as JSON and written compactly; bytes that are not JSON
    are shown as ``!invalid JSON (why): <the text>`` rather than stopping the dump."""
    text = java_utf8(data)
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    except ValueError as err:
        return f"!invalid JSON ({getattr(err, 'msg', err)}): {text}"


def _big_endian_payload(size: int, name: str) -> Any:
    """kafka-dump-log's ``IntegerDecoder`` / ``LongDecoder`` (3.8.0 ``org.apache.kafka.tools.api``:
    ``ByteBuffer.wrap(bytes).getInt()`` / ``getLong()``): the first ``size`` bytes as a signed big-endian
    number, any more ignored.  Fewer bytes stop the Java tool with a ``BufferUnderflowException``; here
    they print as ``!invalid NAME (N bytes, expected at least SIZE): <hex>`` and the dump goes on."""
    def decode(data: bytes) -> str:
        if len(data) < size:
            return f"!invalid {name} ({len(data)} bytes, expected at least {size}): {data.hex()}"
        return str(int.from_bytes(data[:size], "big", signed=True))
    return decode


#: ``--key-decoder`` / ``--value-decoder`` names: how payload bytes become text.
PAYLOAD_DECODERS: dict[str, Any] = {
    "utf-8": java_utf8,     # kafka.serializer.StringDecoder: new String(bytes, UTF_8)
    "hex": lambda data: data.hex(),
    "base64": lambda data: base64.b64encode(data).decode("ascii"),
    "json": _json_payload,
    "integer": _big_endian_payload(4, "integer"),
    "long": _big_endian_payload(8, "long"),
}
#: kafka-dump-log's ``--key-decoder-class`` / ``--value-decoder-class`` values segstore knows → the
#: decoder names above (3.8.0 ``DumpLogSegments.convertDeprecatedDecoderClass`` maps each deprecated
#: ``kafka.serializer`` class to its ``org.apache.kafka.tools.api`` one).  ``DefaultDecoder`` is not
#: here: the tool prints its ``byte[]`` as Java's ``[B@<identity hash>``, which no copy can reproduce.
DECODER_CLASSES = {f"{package}.{java}Decoder": name
                   for package in ("org.apache.kafka.tools.api", "kafka.serializer")
                   for java, name in (("String", "utf-8"), ("Integer", "integer"), ("Long", "long"))}


def decoder_class(text: str) -> str:
    """``--key-decoder-class`` / ``--value-decoder-class``: a Java decoder class kafka-dump-log users name,
    as the decoder segstore runs in its place."""
    try:
        return DECODER_CLASSES[text]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(sorted(DECODER_CLASSES))} (segstore runs no Java class; "
            f"--key-decoder / --value-decoder take {', '.join(sorted(PAYLOAD_DECODERS))}), found {text!r}"
        ) from None
#: ``kafka-dump-log``'s internal-topic decoder flags → the plugin's decoder names.
INTERNAL_DECODERS = {"offsets_decoder": "offsets", "transaction_log_decoder": "transaction-log",
                     "cluster_metadata_decoder": "cluster-metadata"}


def _file_options(args: argparse.Namespace) -> FileDumpOptions:
    decoders = [name for flag, name in INTERNAL_DECODERS.items() if getattr(args, flag)]
    if len(decoders) > 1:
        raise UsageError("pick one of --offsets-decoder, --transaction-log-decoder, "
                         "--cluster-metadata-decoder")
    if args.max_bytes is not None and args.max_bytes < 0:
        raise UsageError(f"--max-bytes expects a number >= 0, found {args.max_bytes}")
    print_data = (args.print_data_log or bool(decoders) or args.key_decoder is not None
                  or args.value_decoder is not None)
    return FileDumpOptions(
        print_data=print_data, deep=args.deep_iteration or print_data,
        key_decoder=PAYLOAD_DECODERS[args.key_decoder or "utf-8"],
        value_decoder=PAYLOAD_DECODERS[args.value_decoder or "utf-8"],
        decoder=decoders[0] if decoders else None, max_bytes=args.max_bytes,
        index_sanity_check=args.index_sanity_check, verify_index_only=args.verify_index_only,
        skip_record_metadata=args.skip_record_metadata)


#: ``dump FILE``'s flags, each with the :class:`FileDumpOptions` field it sets
_FILE_FLAG_FIELDS = {"print_data_log": "print_data", "deep_iteration": "deep", "key_decoder": "key_decoder",
                     "value_decoder": "value_decoder", "max_bytes": "max_bytes",
                     "index_sanity_check": "index_sanity_check", "verify_index_only": "verify_index_only",
                     "skip_record_metadata": "skip_record_metadata",
                     **dict.fromkeys(INTERNAL_DECODERS, "decoder")}


def _check_file_flags(args: argparse.Namespace, plugin: Any, path: str) -> None:
    """Refuse a flag the plugin's :meth:`~segstore.plugin.FormatPlugin.dump_file` does not act on
    (``--key-decoder`` for a RocketMQ file), rather than dump the file as if it were not given.

    :raises UsageError: such a flag given.
    """
    honoured = plugin.file_dump_options
    if honoured is None:
        return
    for name, field in _FILE_FLAG_FIELDS.items():
        if getattr(args, name) not in (None, False) and field not in honoured:
            acting = sorted(f"--{flag.replace('_', '-')}" for flag, f in _FILE_FLAG_FIELDS.items()
                            if f in honoured)
            raise UsageError(f"--{name.replace('_', '-')}: expected a Kafka file (kafka-dump-log's flag), "
                             f"found a {plugin.name} file (it takes {', '.join(acting)})", path)


def _file_plugin(path: str, fmt: str | None) -> tuple[Any, str]:
    """The plugin that recognises the single file ``path`` and what kind of file it is.

    :raises UsageError: no plugin (or not ``fmt``) knows the file.
    """
    names = [fmt] if fmt is not None else registry.names()
    for name in names:
        plugin = registry.get(name)
        kind = plugin.file_kind(path)
        if kind is not None:
            return plugin, kind
    what = f"a {fmt} file" if fmt is not None else f"a file of a known format ({registry.names_words()})"
    found = files.not_regular(path) if not files.is_url(path) else None
    if found is not None:   # a FIFO or a device named as a store file: not the name is wrong
        raise UsageError(f"expected a regular file to dump, found {found}", path)
    raise UsageError(f"expected {what}, found {cut(os.path.basename(path))}", path)


def _dump_files(args: argparse.Namespace, out: TextIO) -> int:
    """``segstore dump FILE...``: each file as ``kafka-dump-log --files`` dumps it; problem lines (index
    entries that disagree with the log, torn bytes) go to stderr and make the exit code 1."""
    options = _file_options(args)
    plan = [(path, *_file_plugin(path, args.format)) for path in args.paths]  # every name checked first
    for path, plugin, _ in plan:
        _check_file_flags(args, plugin, path)
    problems = 0
    notes: list[str] = []   # kafka-dump-log prints its remarks once every file is dumped
    for path, plugin, kind in plan:
        if not args.json:
            out.write(f"Dumping {files.java_file_name(path)}\n")   # java.io.File's text, as the tool
        for line in plugin.dump_file(path, options):
            if args.json:
                if line.json:
                    _json_line({"file": path, "format": plugin.name, "file_kind": kind, **line.data,
                                **({"problem": True, "message": line.text} if line.problem else {})}, out)
            elif line.note:
                notes.append(line.text)
            elif line.problem:
                sys.stderr.write(line.text + "\n")
            else:
                out.write(line.text + "\n")
            problems += line.problem
    for text in notes:
        sys.stderr.write(text + "\n")
    return EXIT_DATA if problems else EXIT_OK


_FILE_ONLY_FLAGS = ("print_data_log", "deep_iteration", "key_decoder", "value_decoder", "max_bytes",
                    "index_sanity_check", "verify_index_only", "skip_record_metadata", *INTERNAL_DECODERS)


def _as_java_file(path: str) -> str:
    """A path as ``java.io.File`` takes it, which drops trailing separators: kafka-dump-log (3.8.0
    ``DumpLogSegments``: ``new File(arg)`` of each ``--files`` name) dumps ``00000000000000000000.log/``
    as that file, where the OS opens no file by that name (ENOTDIR).  The name without them where that
    is a file; else as given (a directory's name keeps its slash; a name of nothing is then refused as
    no such file)."""
    bare = path.rstrip("/" + os.sep)
    if bare and bare != path and not files.is_dir(path) and files.exists(bare) and not files.is_dir(bare):
        return bare
    return path


def cmd_dump(args: argparse.Namespace, out: TextIO) -> int:
    named = [_as_java_file(path) for listed in args.files or () for path in listed.split(",") if path]
    for path in named:
        if files.is_dir(path):
            raise UsageError("--files: expected single files (kafka-dump-log's --files), found a directory "
                             "(name a store directory as PATH)", path)
    args.paths = [*map(_as_java_file, args.paths), *named]
    if not args.paths:
        raise UsageError("expected a store directory or store files (PATH..., or --files FILE,...), "
                         "found none")
    for path in args.paths:
        if not files.exists(path):
            raise UsageError("expected an existing store directory, found no such file or directory", path)
    dirs = [path for path in args.paths if files.is_dir(path)]
    if not dirs:
        # read_committed needs the partition (its .txnindex files, its last stable offset): a file dumped
        # whole would show the markers and aborted records it asked to leave out
        given = [flag for flag, used in (
            ("--topic", args.topic is not None), (_partition_flag(args), _partition(args) is not None),
            ("--tag", args.tag is not None), ("--index", args.index), ("--begin", args.begin is not None),
            ("--end", args.end is not None), ("--group", args.group is not None),
            ("--isolation read_committed", args.isolation == READ_COMMITTED), ("--follow", args.follow),
            ("--interval", args.interval is not None), ("--threads", args.threads is not None),
            ("--decompress-bodies", args.decompress_bodies)) if used]
        if given:
            raise UsageError(f"{', '.join(given)}: expected a store directory, found single files (--topic, "
                             "--queue/--partition, --tag, --index, --begin/--end, --group, --isolation "
                             "read_committed, --threads, --interval, --follow and --decompress-bodies apply "
                             "to a store directory; single files are dumped whole, as stored)")
        return _dump_files(args, out)
    if len(args.paths) > 1:
        raise UsageError("expected one store directory, or store files only, found "
                         f"{len(args.paths)} paths of which {len(dirs)} directories")
    given = [f"--{name.replace('_', '-')}" for name in _FILE_ONLY_FLAGS
             if getattr(args, name) not in (None, False)]
    if given:
        raise UsageError(f"{', '.join(given)}: dumping single files only "
                         "(name the .log / .index / ... files)")
    timed = args.begin is not None or args.end is not None
    for flag, value in (("--begin", args.begin), ("--end", args.end)):
        if value is not None and value < 0:
            raise UsageError(f"{flag}: expected a time at or after the epoch, found {value} ms")
    if args.begin is not None and args.end is not None and args.begin > args.end:
        raise UsageError(f"expected --begin at or before --end, found {args.begin} > {args.end} (ms)")
    if timed and args.index:
        raise UsageError("--begin/--end and --index do not go together: the index files are dumped whole "
                         "(leave out --begin/--end)")
    if args.json and args.index:
        raise UsageError("expected --json or --index, found both: a store's index entries are dumped as text "
                         "(leave out --json), or as JSON file by file (segstore dump FILE... --json with its "
                         ".index/.timeindex/.txnindex, consume-queue or IndexFile files)")
    if args.interval is not None and not args.follow:
        raise UsageError("--interval goes with --follow (how often it looks for new messages)")
    args.path = args.paths[0]
    if args.group is not None:
        for flag, used in (("--begin/--end", timed), ("--tag", args.tag is not None),
                           ("--index", args.index)):
            if used:
                raise UsageError(f"--group and {flag} do not go together")
        if not args.follow:
            return _dump_backlog(args, out)
    if args.follow:
        return _follow(args, out)
    with _open(args) as store:
        isolation = args.isolation
        # only when given: a plugin whose records hold no compressed bodies takes no such argument
        inflate = {"decompress": True} if _decompressing(store, args) else {}
        narrowed: dict[str, Any] = {"begin": args.begin, "end": args.end} if timed else {}
        # What the selectors name is checked once nothing was printed: a RocketMQ commitlog can hold
        # messages of a topic no consume queue lists (prepared transactions), which dump shows.  The
        # index dump shows the store-wide IndexFiles whatever the topic, so it is checked first.
        missing = _missing_selection(store, args) if args.index else None
        if missing is not None:
            raise missing
        # only when given: a plugin's own dump_json / dump_text may take no threads, tags or windows
        threads = {} if args.threads is None else {"threads": args.threads}
        if args.tag is not None:
            if args.index:
                raise UsageError("--tag and --index do not go together")
            if "tag" not in inspect.signature(store.dump_text).parameters:
                raise UsageError(f"--tag: {store.format} records have no tags")
            # the consume queues a tagged dump reads hold no transaction a read_committed consumer skips
            narrowed["tag"] = args.tag
        if args.json:
            printed = _dumped(store.dump_json, out, topic=args.topic, partition=_partition(args),
                              isolation=isolation, **threads, **inflate, **narrowed)
        else:
            # Index problems go to stdout with the rest: they belong to the index dump they follow.
            printed = _dumped(store.dump_text, out, topic=args.topic, partition=_partition(args),
                              index=args.index, isolation=isolation, **threads, **inflate, **narrowed)
        missing = None if printed else _missing_selection(store, args)
        if args.json and not narrowed and isolation != READ_COMMITTED and missing is None:
            _say_not_carried(store, args)
        misses = _time_misses(store, args) if missing is None else []
    if missing is not None:
        raise missing
    if (timed or args.tag is not None) and not printed:
        # like query: a window or tag that holds nothing is a miss, said on stderr, and why where the
        # broker's lookup found none of the records stored from --begin on
        tagged = f" tagged {cut(args.tag)}" if args.tag is not None else ""
        sys.stderr.write(f"segstore dump: {_selection_words(args)}: no message{tagged}"
                         f"{_window_words(args)}\n")
        sys.stderr.writelines(f"segstore dump: {line}\n" for line in misses)
        return EXIT_NO_HITS
    sys.stderr.writelines(f"segstore dump: note: {line}\n" for line in misses)
    return EXIT_OK


def _time_misses(store: Store, args: argparse.Namespace) -> list[str]:
    """``dump --begin``: for each partition selected whose records from ``--begin`` on (to ``--end``) the
    broker's time lookup does not find, though some are stored, why (the store's ``time_lookup_miss``,
    what ``query --timestamp`` says: Kafka's lookup searches only the first segment whose largest timestamp
    reaches the time, a segment of v0 messages measured by its file's mtime), so that a dump printing none
    of them says so; none for a store without such lookups, or without ``--begin``."""
    miss = getattr(store, "time_lookup_miss", None)
    if miss is None or args.begin is None:
        return []
    partition = _partition(args)
    lines = []
    for topic in store.topics() if args.topic is None else [args.topic]:
        for p in store.partitions(topic):
            why = miss(topic, p, args.begin, args.end) if partition is None or p == partition else None
            if why is not None:
                lines.append(f"{topic}-{p}: nothing dumped from {args.begin}, {why}")
    return lines


def _say_not_carried(store: Any, args: argparse.Namespace) -> None:
    """``dump --json`` of whole partitions: on stderr, what of each one's producer state its lines do not
    carry, so that a copy written from them (``write --input``) lacks it (a store that says so:
    Kafka's ``not_carried``: batches the log cleaner emptied, ``.snapshot`` files)."""
    not_carried = getattr(store, "not_carried", None)
    if not_carried is None:
        return
    for (topic, partition), words in not_carried(args.topic, _partition(args)).items():
        sys.stderr.write(f"segstore dump: note: {topic}-{partition}: not in the dump: {words}; a broker "
                         "loading a copy written from it (write --input) rebuilds producer state from its "
                         "records alone (Kafka 3.8 ProducerStateManager), and takes such a producer's next "
                         "batch whatever its sequence (a retried batch is not found as a duplicate)\n")


def _dump_backlog(args: argparse.Namespace, out: TextIO) -> int:
    """``dump --group G``: what the group has not consumed yet, in the dump's layout: each partition
    (queue) it committed, of ``--topic``/``--queue`` when given, from its committed offset to the end
    ``consumers`` shows (the lag: Kafka the high watermark, at read_committed the last stable offset;
    RocketMQ the queue's max offset).  A partition this store does not hold is said on stderr."""
    with _open(args) as store:
        inflate = {"decompress": True} if _decompressing(store, args) else {}
        rows, damaged = _group_rows(store, args)
        stable = getattr(store, "last_stable_offset", None) if args.isolation == READ_COMMITTED else None
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        for row in rows:
            if row.committed_offset is None or row.committed_offset < 0:
                continue
            span = _consumable(store, row)
            if span is None:
                sys.stderr.write(f"segstore dump: {row.topic}-{row.partition}: not in this store (another "
                                 "broker's), left out\n")
                continue
            low, high = span
            if stable is not None:
                high = min(high, stable(row.topic, row.partition))
            if row.committed_offset < low:
                said = _deleted_unread(args.group, row.topic, row.partition, row.committed_offset, low)
                sys.stderr.write(f"{said}dumping from {low}\n")
            start = max(row.committed_offset, low)
            if start < high:
                ranges[row.topic, row.partition] = (start, high)
        printed = 0
        if ranges:
            threads = {} if args.threads is None else {"threads": args.threads}
            printed = _dumped(store.dump_json if args.json else store.dump_text, out, offsets=ranges,
                              isolation=args.isolation, **threads, **inflate)
    if not printed:
        if not any(row.committed_offset is not None and row.committed_offset >= 0 for row in rows):
            # no offset to start from: ``consumers`` counts such a queue's lag from its start (4.9.7
            # ``AdminBrokerProcessor.getConsumeStats``), so "consumed every message" would be wrong
            _say_uncommitted(args)
            return EXIT_NO_HITS
        sys.stderr.write(f"segstore dump: {_selection_words(args)}: group {cut(args.group)} has consumed "
                         "every message stored\n")
        return EXIT_NO_HITS
    return EXIT_DATA if damaged else EXIT_OK


def _group_notes(args: argparse.Namespace, found: ConsumerGroups) -> bool:
    """Write what ``consumer_groups`` could not apply to stderr: its notes, then the damage it met;
    True where it met damage (the command exits 1 once it printed what it could read)."""
    for line in (*found.notes, *found.damage):
        sys.stderr.write(f"segstore {args.command}: {args.path}: {line}\n")
    return bool(found.damage)


def _all_groups(store: Store, found: ConsumerGroups, **options: Any) -> list[str]:
    """Every group of the store, for a miss to name: what the answer for one group says, else asked."""
    if found.all_groups is not None:
        return found.all_groups
    return store.consumer_groups(None, **options).groups()


def _deleted_unread(group: str, topic: str, queue: int, committed: int, low: int) -> str:
    """The start of the stderr line of ``dump --group`` (and ``--follow``) for a queue whose messages from
    the group's committed offset were deleted before it read them (retention, DeleteRecords): what a
    consumer there logs as it is moved to the queue's start (Kafka 3.8.0 ``FetchCollector
    .handleInitializeErrors``: ``Fetch position ... is out of range ..., resetting offset``, reading on
    as ``auto.offset.reset=earliest``; RocketMQ 4.9.7 ``getMessage``: OFFSET_TOO_SMALL, its next offset
    the queue's min), so that the dump holding fewer messages than the lag ``consumers`` counts (log end
    less committed offset) is said, not silent."""
    return (f"segstore dump: {topic}-{queue}: group {cut(group)} committed offset {committed}, below the log "
            f"start {low}: offsets {committed}..{low - 1} were deleted before they were read; ")


def _say_uncommitted(args: argparse.Namespace) -> None:
    """On stderr: ``--group`` committed no offset of the queues selected, so ``dump`` (and ``--follow``,
    which reads the group's offsets once) has no position to read from."""
    sys.stderr.write(f"segstore dump: {_selection_words(args)}: group {cut(args.group)} committed no "
                     "offset here, so there is no position to dump from\n")


def _group_rows(store: Store, args: argparse.Namespace, *, committed: bool = False, hidden: bool = False
                ) -> tuple[list[Any], bool]:
    """The ``consumers`` rows of ``--group`` on the ``--topic`` (and ``--queue``/``--partition``, where the
    command has them) selected; ``committed``: only those with a committed offset; ``hidden``: RocketMQ's
    rows ``consumerProgress`` does not list too (a deleted topic's offsets, which ``--delete`` removes).
    And whether the files holding them were damaged (:func:`_group_notes` says on stderr what was not
    read).

    :raises NotFoundError: none (the groups there are named).
    """
    partition = _partition(args) if hasattr(args, "queue") else None
    found = store.consumer_groups(args.group, **({"hidden": True} if hidden and store.format == "rocketmq"
                                                 else {}))
    damaged = _group_notes(args, found)
    rows = [row for row in found.rows
            if row.topic is not None and row.partition is not None
            and (args.topic is None or row.topic == args.topic)
            and (partition is None or row.partition == partition)
            and (not committed or row.committed_offset is not None)]
    if not rows:
        where = (f" on {args.topic}/{partition}" if args.topic is not None and partition is not None
                 else f" on topic {cut(args.topic)}" if args.topic is not None
                 else f" on partition (queue) {partition}" if partition is not None else "")
        raise NotFoundError(f"expected consumer group {cut(args.group)}{where}, found "
                            f"{_listing('group', _all_groups(store, found))}", args.path)
    return rows, damaged


def _refuse_damaged(args: argparse.Namespace, damaged: bool) -> None:
    """Before ``--execute`` writes: offsets planned from a group read only in part would be guesses.

    :raises CorruptDataError: the group's files were damaged.
    """
    if damaged and args.execute:
        raise CorruptDataError("expected the consumer groups' files to read whole before writing offsets "
                               "planned from them, found the damage named above: nothing written", args.path)


#: The longest ``dump --follow --interval``, in seconds (a day): a longer wait is surely a slip.
MAX_FOLLOW_INTERVAL = 86400
#: ``--follow``'s seconds between looks when ``--interval`` is not given
FOLLOW_INTERVAL = 1.0
#: How many times in a row ``dump --follow`` looks again when a look found files gone that it had just
#: listed (retention or compaction deleting or renaming them), or the store it follows not there
#: (being deleted or replaced), before it gives up with the error.
FOLLOW_RETRIES = 10
#: Seconds between those looks (whatever ``--interval``: time for what changes the files to finish).
FOLLOW_RETRY_PAUSE = 0.05


def _follow(args: argparse.Namespace, out: TextIO) -> int:
    """``dump --follow``: every queue's messages from its start (or ``--begin``), then, every
    ``--interval`` seconds, the offsets stored since, until Ctrl-C (exit 0) or, when stdout is a pipe,
    until its reader is gone (``| head``, exit 0).  Each look opens the store afresh (new topics, rolled
    or deleted files) and reads each queue up to the end it has then (RocketMQ: its consume queue's,
    so only messages the broker dispatched; Kafka: its last whole batch's), so no message is printed
    twice or left out; a look that finds files gone that it had just listed looks again.  A queue
    whose end went back below what was printed (truncated) is followed from its new end, one whose
    start passed what was printed (retention) from its new start, each said on stderr.  A RocketMQ
    message no consume queue points at (a prepared transaction) is not followed.  ``--isolation
    read_committed`` reads a Kafka partition up to its last stable offset only (what a read_committed
    consumer is given: the records of a transaction still open wait for its marker; aborted ones never
    come).  With ``--group``, the partitions the group committed, each from its committed offset up to
    its high watermark (what the group's next consumer would be given).

    :raises NotFoundError: the store went away (deleted or moved) while followed.
    """
    for flag, given in (("--end", args.end is not None), ("--index", args.index),
                        ("--tag", args.tag is not None)):
        if given:
            raise UsageError(f"--follow and {flag} do not go together")
    if args.interval is None:
        args.interval = FOLLOW_INTERVAL
    if not 0 < args.interval <= MAX_FOLLOW_INTERVAL:
        raise UsageError(f"--interval: expected a positive number of seconds, at most {MAX_FOLLOW_INTERVAL} "
                         f"(a day), found {args.interval}")
    follower = _Follower(args)
    damaged = False
    try:
        if args.group is not None:
            with _open(args) as store:
                rows, damaged = _group_rows(store, args)
                follower.starts = {(row.topic, row.partition): row.committed_offset for row in rows
                                   if row.committed_offset is not None and row.committed_offset >= 0}
            if not follower.starts:     # read once: nothing could ever come
                _say_uncommitted(args)
                return EXIT_NO_HITS
        while True:
            follower.look_again(out)
            if _reader_gone(out, args.interval):
                break               # as a closed pipe met on a write
    except KeyboardInterrupt:       # how a follow ends
        pass
    return EXIT_DATA if damaged else EXIT_OK


class _Follower:
    """What ``dump --follow`` keeps from one look at the store to the next."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        #: the store's format once a look opened it (a store replaced by another format went away)
        self.format: str | None = args.format
        self.looked = False
        #: each queue's next offset to print, by ``(topic, queue)``
        self.nexts: dict[tuple[str, int], int] = {}
        #: with ``--group``: the queues the group committed, each from its committed offset
        self.starts: dict[tuple[str, int], int] | None = None
        #: ``(topic, queue, offset)`` of the last window the text written so far ends with (Kafka:
        #: the segment heading it went under is not repeated when the next look goes on from there)
        self.continues: tuple[str, int, int] | None = None
        self.waiting_said = False
        #: bytes the look under way wrote (one that wrote some is not taken again), and whether it
        #: opened the store
        self.written = 0
        self.opened = False
        #: the format's change marker of the store when the last look that succeeded started
        #: (``FormatPlugin.change_marker``; None: the next look reads)
        self.marker: Hashable | None = None
        #: the config each format's looks open the store with, read once (``--config-file <(cmd)`` is a
        #: pipe, which a second look would wait on forever)
        self.configs: dict[str, dict[str, Any]] = {}

    def look_again(self, out: TextIO) -> None:
        """One look; none where the store's change marker is the one the last look started from (it
        would find nothing new: a Kafka log dir of 1,000 partitions costs a look about 1 ms each to
        open); again (up to :data:`FOLLOW_RETRIES` times) while files it listed went away before it
        opened them, or the store it follows is not there (being deleted or replaced), as long as it
        wrote nothing.

        :raises NotFoundError: the store went away.
        :raises SegstoreError: any other error, or one that stayed.
        """
        marker = None
        if self.looked and self.format is not None:
            try:
                marker = registry.get(self.format).change_marker(self.args.path)
            except SegstoreError:
                pass                    # no marker: the look says what is wrong
            if marker is not None and marker == self.marker:
                return
        self.marker = None
        for attempt in range(FOLLOW_RETRIES + 1):
            self.written = 0
            self.opened = False
            try:
                self.look(out)
                self.marker = marker
            except SegstoreError as err:
                gone = self._gone()
                if self.written or attempt == FOLLOW_RETRIES or not (gone or self._passing(err)):
                    if gone is not None:
                        raise gone from err
                    raise
            else:
                return
            time.sleep(FOLLOW_RETRY_PAUSE)

    def _passing(self, err: SegstoreError) -> bool:
        """Whether ``err`` may be a look meeting files as they change: a file gone between the listing
        and its opening (``ENOENT``), or a store that a look opened before and this one could not."""
        return (isinstance(err, NotFoundError) and isinstance(err.__cause__, FileNotFoundError)) or (
            self.looked and not self.opened)

    def _gone(self) -> NotFoundError | None:
        """The error saying the store followed went away, where a look found it before and it is no
        longer there (no such directory, or none a store of its format)."""
        path = self.args.path
        if not self.looked or self.format is None:
            return None
        if not files.is_dir(path):
            found = "no such directory"
        elif not registry.get(self.format).detect(path):
            found = f"no {self.format} store there"
        else:
            return None
        return NotFoundError(f"expected the {self.format} store this follow reads, found {found}: the store "
                             "went away (deleted or moved)", path)

    def look(self, out: TextIO) -> None:
        """Print what each queue holds past what was printed, up to the end a consumer reads to; say on
        stderr where a queue's end went back below it or its start past it."""
        args = self.args
        committed = args.isolation == READ_COMMITTED
        partition = _partition(args)
        fmt = resolve_store(args.path, self.format)
        if fmt not in self.configs:
            self.configs[fmt] = store_config(args, fmt)
        with open_store(args.path, format=fmt, mode="r", **self.configs[fmt]) as store:
            self.opened = True
            inflate = {"decompress": True} if _decompressing(store, args) else {}
            held = store.topics()
            refused = None
            if args.topic is not None and args.topic not in held:
                plugin = registry.get(fmt)
                refused = plugin.refuses_topic(args.topic)
                fixed = plugin.fixed_topics(args.path)
                if refused is None and fixed is not None and args.topic not in fixed:
                    refused = f"its path fixes the topics it holds: {', '.join(sorted(fixed))}"
            hint = "" if args.topic is None or args.topic in held else \
                _directory_name_hint(store.format, args.topic, _store_partitions(store))
            if refused is not None:     # waited for, it would never come
                raise NotFoundError(f"expected a topic named {cut(args.topic)}, found "
                                    f"{_listing('topic', held)} (no message is ever stored under that name: "
                                    f"{refused}){hint}", args.path)
            if args.topic is not None and args.topic not in held and not self.waiting_said:
                sys.stderr.write(f"segstore dump: {args.path}: waiting for topic {cut(args.topic)} "
                                 f"({_listing('topic', held)} now){hint}\n")
                self.waiting_said = True
            stable = getattr(store, "last_stable_offset", None) if committed else None
            # a group's consumer reads up to the high watermark (Kafka; RocketMQ: the queue's end)
            watermark = getattr(store, "high_watermark", None) if self.starts is not None else None
            ranges: dict[tuple[str, int], tuple[int, int]] = {}
            nexts: dict[tuple[str, int], int] = {}
            for topic in [t for t in held if args.topic is None or t == args.topic]:
                for queue in store.partitions(topic):
                    if (partition is not None and queue != partition) or (
                            self.starts is not None and (topic, queue) not in self.starts):
                        continue
                    low, end = store.offset_range(topic, queue)
                    start = self._start(store, topic, queue, low, end)
                    high = end
                    if watermark is not None:
                        high = min(high, watermark(topic, queue))
                    if stable is not None:
                        high = min(high, stable(topic, queue))
                    if start < high:
                        ranges[topic, queue] = (start, high)
                    nexts[topic, queue] = max(start, high)
            self._print(store, ranges, out, inflate)
        self.nexts.update(nexts)
        self.format = fmt
        self.looked = True

    def _start(self, store: Store, topic: str, queue: int, low: int, end: int) -> int:
        """Where the look reads ``topic``/``queue`` from: the next offset to print, else (its first
        look) the queue's start, ``--begin``'s offset or the group's committed offset.  Where the queue
        was truncated below the next offset (its end went back) or the group committed past its end,
        its end; where retention deleted offsets not printed yet (its start passed the next offset),
        its start: each said on stderr (what a Kafka consumer logs as it resets its position: 3.8.0
        ``SubscriptionState.maybeCompleteValidation``, ``FetchCollector.handleInitializeErrors``), and
        kept at once."""
        args = self.args
        start = self.nexts.get((topic, queue))
        if start is None:
            if self.starts is not None:
                start = self.starts[topic, queue]
                if start > end:
                    sys.stderr.write(f"segstore dump: {topic}-{queue}: group {cut(args.group)} committed "
                                     f"offset {start}, past the log end {end}; following from {end}\n")
                    start = end
                elif start < low:
                    sys.stderr.write(_deleted_unread(args.group, topic, queue, start, low)
                                     + f"following from {low}\n")
            elif args.begin is not None:
                start = store.offsets_between(topic, queue, args.begin)[0]
                miss = getattr(store, "time_lookup_miss", None)
                why = None if miss is None else miss(topic, queue, args.begin)
                if why is not None:
                    sys.stderr.write(f"segstore dump: {topic}-{queue}: following from offset {start}, "
                                     f"{why}\n")
            return max(low if start is None else start, low)
        if end < start:
            sys.stderr.write(f"segstore dump: {topic}-{queue}: the log was truncated to {end} below the "
                             f"{start} already printed; following from {end}\n")
            self.nexts[topic, queue] = start = end
        elif low > start:
            sys.stderr.write(f"segstore dump: {topic}-{queue}: offsets {start}..{low - 1} were deleted "
                             f"before they were read; following from {low}\n")
            self.nexts[topic, queue] = start = low
        return start

    def _print(self, store: Any, ranges: dict[tuple[str, int], tuple[int, int]], out: TextIO,
               inflate: dict[str, bool]) -> None:
        """Dump ``ranges`` of ``store`` (a plugin's, whose ``dump_text`` may take ``continues``): JSON
        at once; text partition by partition where the store's text can go on under the heading the
        last look gave (Kafka's segment headings: each printed once)."""
        if not ranges:
            return
        args = self.args
        threads = {} if args.threads is None else {"threads": args.threads}
        if args.json or "continues" not in inspect.signature(store.dump_text).parameters:
            dump = store.dump_json if args.json else store.dump_text
            self._write(dump(offsets=ranges, isolation=args.isolation, **threads, **inflate), out)
            return
        for (topic, queue), span in sorted(ranges.items()):
            self._write(store.dump_text(offsets={(topic, queue): span}, isolation=args.isolation,
                                        continues=self.continues, **threads, **inflate), out)
            self.continues = (topic, queue, span[1])

    def _write(self, blocks: Iterable[bytes | memoryview], out: TextIO) -> None:
        counted = _Counted(blocks)
        try:
            _write_blocks(counted, out)
        finally:
            self.written += counted.bytes
        out.flush()


def _reader_gone(out: TextIO, seconds: float) -> bool:
    """Wait ``seconds``; True (at once) where ``out`` is a pipe whose reader went away (``| head`` has
    what it wanted): a follow that writes nothing would never meet the closed pipe otherwise."""
    try:
        fd = out.fileno()
        pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
    except (AttributeError, OSError, ValueError):      # no descriptor (a StringIO), or a closed one
        pipe = False
    if not pipe:
        time.sleep(seconds)
        return False
    waiting = select.poll()
    waiting.register(fd, 0)         # POLLERR (no reader left) and POLLHUP are told whatever is asked
    return bool(waiting.poll(seconds * 1000))


def _iso_utc(ms: int) -> str | None:
    """Milliseconds since the epoch as ISO-8601 UTC (``2024-05-01T12:00:00.250Z``); None past the
    year 9999 or before 1 (what ``datetime`` holds)."""
    try:
        when = (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")
    except OverflowError:
        return None
    return when.replace("+00:00", "Z")


def _selection_words(args: argparse.Namespace) -> str:
    """``TOPIC/QUEUE`` of the selectors given, ``*`` for one not given (:func:`_where_words`)."""
    return _where_words(args, args.topic, _partition(args))


def _window_words(args: argparse.Namespace) -> str:
    """`` stored from BEGIN to END`` in the user's words (ISO-8601, UTC), or empty without a window."""
    def said(ms: int) -> str:
        when = _iso_utc(ms)
        return str(ms) if when is None else f"{when} ({ms})"

    words = ""
    if args.begin is not None:
        words += f" from {said(args.begin)}"
    if args.end is not None:
        words += f" to {said(args.end)}"
    return f" stored{words}" if words else ""


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as store:
        info = store.info()
        if args.topic is not None or _partition(args) is not None:
            whole, info = info, _narrowed(info, args.topic, _partition(args))
            # a topic (queue) the store's config names but no queue holds yet is shown (its config, no queues)
            if not _configured(info, args.topic, _partition(args)):
                missing = _missing_selection(store, args)
                if missing is not None and args.topic is not None and _configured(whole, args.topic, None):
                    # the topic is known (its config): what is missing is the queue / partition
                    count, held = _configured_partitions(whole, args.topic)
                    if args.topic in store.topics():
                        held |= set(store.partitions(args.topic))
                    flag = _partition_flag(args)
                    found = (f"{flag[2:]}s {_number_ranges(held, count)}" if held or count > 0
                             else f"no {flag[2:]}s")
                    missing = NotFoundError(f"expected {flag} {_partition(args)} in topic {cut(args.topic)}, "
                                            f"found {found}", store.path)
                if missing is not None:
                    raise missing
    if args.json:
        _json_line(info, out)
    else:
        _print_info(info, out)
    return EXIT_OK


#: ``info`` maps keyed by topic name (a plugin's topic configs, the metadata log's topics)
_PER_TOPIC_MAPS = ("topics", "topic_configs")


def _configured(info: dict[str, Any], topic: str | None, partition: int | None) -> bool:
    """Whether the config in ``info`` (narrowed: RocketMQ ``topics.json``, the KRaft metadata log) names
    ``topic`` and, given, its ``partition`` (queue): one of its assignments, or below its partition or
    queue count, as ``kafka-topics --describe --topic T --partitions P`` shows a partition another broker
    holds."""
    for key in _PER_TOPIC_MAPS:
        entry = info[key].get(topic) if isinstance(info.get(key), dict) else None
        if entry is None:
            continue
        if partition is None:
            return True
        if isinstance(entry, dict):
            counts = [n for k in ("partitions", "read_queue_nums", "write_queue_nums")
                      if isinstance(n := entry.get(k), int) and not isinstance(n, bool)]
            if entry.get("assignments") or (counts and 0 <= partition < max(counts)):
                return True
    return False


def _configured_partitions(info: dict[str, Any], topic: str) -> tuple[int, set[int]]:
    """The partitions (queues) the config in ``info`` gives ``topic``: every one below the largest of its
    partition or queue counts (a count, not a set: topics.json may say 2^31 - 1), and its assignments."""
    count, assigned = 0, set[int]()
    for key in _PER_TOPIC_MAPS:
        entry = info[key].get(topic) if isinstance(info.get(key), dict) else None
        if not isinstance(entry, dict):
            continue
        assigned.update(a["partition"] for a in entry.get("assignments") or []
                        if isinstance(a, dict) and isinstance(a.get("partition"), int))
        for name in ("partitions", "read_queue_nums", "write_queue_nums"):
            n = entry.get(name)
            if isinstance(n, int) and not isinstance(n, bool):
                count = max(count, n)
    return count, assigned


def _narrowed(info: dict[str, Any], topic: str | None, partition: int | None) -> dict[str, Any]:
    """``info`` with its per-topic parts narrowed to ``topic`` and ``partition`` (None: any): every list of
    maps carrying a ``topic`` (queues, partitions; by ``queue_id`` or ``partition``), the maps keyed by
    topic name, the topic list; store-wide parts (commitlog, config, cluster) as they are.  A per-topic row
    (``topic_bytes``: no queue or partition of its own) stays whole for its topic: ``--queue 1`` does not
    make the topic's size a queue's, nor drop it."""
    def wanted(item: dict[str, Any]) -> bool:
        if topic is not None and item["topic"] != topic:
            return False
        if partition is None or ("queue_id" not in item and "partition" not in item):
            return True
        return item.get("queue_id", item.get("partition")) == partition

    narrowed: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, list) and value and all(isinstance(i, dict) and "topic" in i for i in value):
            value = [item for item in value if wanted(item)]
        elif topic is not None and key in _PER_TOPIC_MAPS and isinstance(value, dict):
            value = {name: v for name, v in value.items() if name == topic}
            if partition is not None:       # the metadata's assignment of the one partition
                value = {name: _one_assignment(v, partition) for name, v in value.items()}
        elif topic is not None and key == "topics" and isinstance(value, list):
            value = [name for name in value if name == topic]
        narrowed[key] = value
    return narrowed


def _one_assignment(topic: Any, partition: int) -> Any:
    """A topic's ``info`` map with its ``assignments`` (the metadata log's) narrowed to ``partition``."""
    if not isinstance(topic, dict) or not isinstance(topic.get("assignments"), list):
        return topic
    return {**topic, "assignments": [a for a in topic["assignments"] if a.get("partition") == partition]}


def human(value: Any) -> str:
    """A value of a plugin's answer as text for people: lists joined by ``, `` (a list of lists by
    ``; ``, its items by spaces; a list of plain values inside a map by ``,`` alone, so that
    ``replicas=1,2,3, isr=1`` reads one way), maps as ``k=v, ...``, None as ``-``; never a Python repr."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_packed(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        if any(isinstance(item, list | tuple) for item in value):
            return "; ".join(" ".join(human(v) for v in item) if isinstance(item, list | tuple)
                             else human(item) for item in value)
        return ", ".join(human(item) for item in value) if value else "-"
    return str(value)


def _packed(value: Any) -> str:
    """A map's value as :func:`human` shows it, a list of plain values joined by ``,`` alone; a text as
    one word (:func:`segstore.store.text_word`: quoted where it holds white space, a quote or a control
    character), so that ``k=v, ...`` splits as printed whatever a name from the files holds."""
    if isinstance(value, list | tuple) and value and not any(isinstance(v, list | tuple | dict)
                                                             for v in value):
        return ",".join(_packed(v) if isinstance(v, str) else human(v) for v in value)
    if isinstance(value, str):
        return text_word(value)
    return human(value)


def _print_info(info: dict[str, Any], out: TextIO, indent: str = "") -> None:
    """Every field, nested maps indented and lists of maps one ``- k=v, ...`` line per item (never cut)."""
    for key, value in info.items():
        if isinstance(value, dict) and not value:
            out.write(f"{indent}{key}: -\n")       # a map with nothing in it (a topic with no configs)
        elif isinstance(value, dict):
            out.write(f"{indent}{key}:\n")
            _print_info(value, out, indent + "  ")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            out.write(f"{indent}{key}:\n")
            for item in value:
                out.write(f"{indent}  - {human(item)}\n")
        else:
            out.write(f"{indent}{key}: {human(value)}\n")


def _problem_json(problem: Problem | str) -> dict[str, Any]:
    if isinstance(problem, Problem):
        return {"path": problem.path, "pos": problem.pos, "message": problem.message}
    return {"path": None, "pos": None, "message": str(problem)}


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as store:
        # only when given: a plugin's own verify may take no threads
        problems = store.verify() if args.threads is None else store.verify(threads=args.threads)
    if args.json:
        if problems or not args.quiet:     # --quiet: nothing when clean, whatever the output's form
            _json_line({"path": args.path, "ok": not problems,
                        "problems": [_problem_json(p) for p in problems]}, out)
        return EXIT_DATA if problems else EXIT_OK
    for problem in problems:
        out.write(f"{problem}\n")
    if not problems and not args.quiet:
        sys.stderr.write(f"{args.path}: ok\n")
    return EXIT_DATA if problems else EXIT_OK


def cmd_recover(args: argparse.Namespace, out: TextIO) -> int:
    """Exit 1 when damage remains that recovery cannot cut without losing intact records."""
    unrepaired: UnrepairedDataError | None = None
    with _open(args, mode="a") as store:
        threads = {}
        if args.threads is not None:
            if "threads" not in inspect.signature(store.recover).parameters:
                raise UsageError(f"--threads: {store.format} stores recover on one thread")
            threads = {"threads": args.threads}
        try:
            lines = store.recover(**threads)
        except UnrepairedDataError as err:
            lines, unrepaired = err.actions, err
        # the extra index layouts recover (or rebuild) when the store opens for append
        indexes = getattr(store, "indexes", None)
        lines = [*lines, *(indexes.actions if indexes is not None else [])]
    if args.json:
        _json_line({"path": args.path, "actions": lines,
                    **({"unrepaired": str(unrepaired)} if unrepaired else {})}, out)
    else:
        for line in lines:
            out.write(f"{line}\n")
        if not lines:
            out.write(f"{args.path}: nothing to recover\n")
    if unrepaired is not None:
        sys.stderr.write(f"{unrepaired}\n")
        return EXIT_DATA
    return EXIT_OK


def _no_hit_message(request: QueryRequest, args: argparse.Namespace) -> str:
    where = _where_words(args, request.topic, request.partition)
    if request.key is not None:
        return f"{where}: no record with key {cut(request.key)}"
    if request.timestamp is not None:
        return f"{where}: no record stored at or after timestamp {request.timestamp}"
    return f"{where}: no record at offset {request.offset}"


def _query_msg_id(args: argparse.Namespace, out: TextIO) -> int:
    """``mqadmin queryMsgById``: the offset msgId names the commitlog position; otherwise (a client
    msgId, the UNIQ_KEY property) the index is asked, as ``DefaultMQAdminExtImpl.viewMessage`` does."""
    with _open(args) as store:
        find = getattr(store, "find_msg_id", None)
        if find is None:
            raise UsageError(f"--msg-id: {store.format} stores have no message ids")
        decompress = _decompressing(store, args)
        try:
            found = find(args.msg_id)
        except ConfigError as err:
            # not an offset msgId: with --topic it may still be a client one, which the index is asked
            # for (4.9.7 DefaultMQAdminExtImpl.viewMessage(topic, msgId) falls back when
            # decodeMessageId throws); without it, the id is wrong
            if args.topic is None:
                raise UsageError(f"--msg-id: {err.message}; a client msgId, the UNIQ_KEY, is looked up "
                                 "with --topic T") from err
            found = None
        if found is not None:
            _print_records(store, [store.consumed(found) if decompress else found], args.json, out)
            return EXIT_OK
        if args.topic is not None:
            # the UNIQ_KEY alone, not a KEYS token that happens to equal it (MQAdminImpl.queryMessage)
            clients = [store.consumed(m) if decompress else m
                       for m in store.find_client_msg_id(args.topic, args.msg_id)]
            if _print_records(store, clients, args.json, out):
                return EXIT_OK
    where = "" if args.topic is not None else " (pass --topic to look it up as a client msgId / UNIQ_KEY)"
    sys.stderr.write(f"segstore query: no message with msgId {args.msg_id}{where}\n")
    return EXIT_NO_HITS


def _offset_asked(store: Store, request: QueryRequest) -> tuple[str, int, int, int] | None:
    """An offset query's ``(topic, partition, first offset, end offset)`` (:meth:`Store.offset_range`);
    None for another query or where the queue is not one the store holds (the query says so)."""
    if request.offset is None or request.key is not None:
        return None
    topics = store.topics()
    topic = request.topic if request.topic is not None else (topics[0] if len(topics) == 1 else None)
    partition = request.partition if request.partition is not None else 0
    if topic not in topics or partition not in store.partitions(topic):
        return None
    return (topic, partition, *store.offset_range(topic, partition))


def _below_first_offset(store: Store, request: QueryRequest) -> OffsetOutOfRangeError | None:
    """Why an offset query asks for nothing held: its offset is below the queue's (partition's) first
    (its messages deleted: RocketMQ's getMessage answers OFFSET_TOO_SMALL, Kafka's fetch
    OFFSET_OUT_OF_RANGE), rather than the messages after it; None otherwise or when the queue is
    not one the store holds (the query says so)."""
    asked = _offset_asked(store, request)
    if asked is None or request.offset is None or request.offset >= asked[2]:
        return None
    topic, partition, low, _ = asked
    return OffsetOutOfRangeError(f"expected an offset of {topic}/{partition} from its first held, {low} "
                                 f"(the messages before it were deleted), found {request.offset}", store.path)


def _past_end_words(store: Store, request: QueryRequest, args: argparse.Namespace) -> str | None:
    """An offset query's miss where the offset is at or past the queue's (partition's) end: what it
    holds, so that ``no record at offset 45`` says why (none stored there yet); None otherwise."""
    asked = _offset_asked(store, request)
    if asked is None or request.offset is None or request.offset < asked[3]:
        return None
    topic, partition, low, high = asked
    held = f"offsets {low} to {high - 1} are held" if high > low else f"it holds none (its end is {high})"
    return (f"{_where_words(args, topic, partition)}: no record at offset {request.offset}, at or past its "
            f"end: {held}")


def _queues_asked(store: Store, args: argparse.Namespace) -> list[int] | None:
    """The queues / partitions an offset or time query of ``--topic`` reads when ``--queue``/``--partition``
    is not given: all of them (None: the topic is not one the store holds, or none was named and the
    store holds several; the format's own answer says so)."""
    topic = args.topic
    if topic is None:
        topics = store.topics()
        if len(topics) != 1:
            return None
        topic = topics[0]
    return store.partitions(topic) if topic in store.topics() else None


def _one_queue(store: Store, args: argparse.Namespace, flag: str) -> int | None:
    """The queue / partition ``flag`` (an offset or tag query) reads: the one given, else the topic's
    only one (None: the format's answer for a topic it does not hold).

    :raises UsageError: the topic has several and none was named (an offset means nothing without one).
    """
    partition = _partition(args)
    if partition is not None:
        return partition
    held = _queues_asked(store, args)
    if held is None or not held:
        return None
    if len(held) > 1:
        topic = args.topic or store.topics()[0]
        raise UsageError(f"{flag}: expected --queue/--partition as well, found neither: topic {cut(topic)} "
                         f"has queues/partitions {_number_ranges(held)}, and an offset is one queue's")
    return held[0]


def _query_tag(args: argparse.Namespace, out: TextIO) -> int:
    if args.offset is None or args.topic is None:
        raise UsageError("--tag goes with --topic T --queue Q --offset N [--count C] (or use dump --tag)")
    with _open(args) as store:
        queue = _one_queue(store, args, "--tag") or 0
        if not _reads_tags(store):
            raise UsageError(f"--tag: {store.format} records have no tags")
        inflate = {"decompress": True} if _decompressing(store, args) else {}
        found = _print_records(store, store.read(args.topic, queue, args.offset, args.count, tag=args.tag,
                                                 **inflate), args.json, out)
    if not found:
        sys.stderr.write(f"segstore query: {args.topic}/{queue}: no record tagged {cut(args.tag)} from "
                         f"offset {args.offset}\n")
        return EXIT_NO_HITS
    return EXIT_OK


def _query_flags_unused(args: argparse.Namespace) -> None:
    """Refuse the flags the lookup asked for would not use, rather than answer without them.

    :raises UsageError: two lookups (--key, --offset, --timestamp, --msg-id), or a flag of another lookup:
        --begin/--end/--max are a key query's, --count an offset or time query's, --tag an offset
        query's; --msg-id takes only --topic.
    """
    asked = [name for name in ("key", "offset", "timestamp", "msg_id") if getattr(args, name) is not None]
    if len(asked) > 1:
        raise UsageError(f"expected one of --key, --offset, --timestamp or --msg-id, found "
                         f"{' and '.join('--' + name.replace('_', '-') for name in asked)}")
    given = {flag: value is not None for flag, value in (
        ("--begin", args.begin), ("--end", args.end), ("--max", args.max), ("--count", args.count),
        ("--tag", args.tag), ("--queue/--partition", _partition(args)))}
    if args.msg_id is not None:
        # the message at the msgId's commitlog offset, whatever its transaction state: nothing to hide
        given["--isolation read_committed"] = args.isolation == READ_COMMITTED
        extra = [flag for flag, present in given.items() if present]
        if extra:
            raise UsageError(f"--msg-id goes alone (with --topic for a client msgId), found {extra[0]} too")
        return
    if args.key is None:
        extra = [flag for flag in ("--begin", "--end", "--max") if given[flag]]
        if extra:
            raise UsageError(f"{extra[0]} goes with --key (a key query's window and hit count); the messages "
                             "stored between two times: segstore dump --begin/--end")
    elif given["--count"]:
        raise UsageError("--count goes with --offset or --timestamp; a key query shows every hit, or the "
                         "newest --max N")
    elif args.begin is not None and args.end is not None and args.begin > args.end:
        # a window that holds no time: a mistake (swapped bounds), not a key nothing carries; as dump says
        raise UsageError(f"expected --begin at or before --end, found {args.begin} > {args.end} (ms)")


def cmd_query(args: argparse.Namespace, out: TextIO) -> int:
    asked = [name for name in ("key", "offset", "timestamp", "msg_id") if getattr(args, name) is not None]
    _query_flags_unused(args)
    if args.msg_id is not None:
        return _query_msg_id(args, out)
    if args.offset is not None and args.offset < 0:
        raise UsageError(f"expected an --offset of at least 0 (offsets start at 0), found {args.offset}",
                         args.path)
    if args.count is None:
        args.count = 1
    if args.count < 1:
        raise UsageError(f"--count expects a positive number, found {args.count}")
    if args.tag is not None:
        return _query_tag(args, out)
    if args.max is not None and args.max < 1:
        raise UsageError(f"--max expects a positive number, found {args.max}")
    request = QueryRequest(topic=args.topic, partition=_partition(args), key=args.key, offset=args.offset,
                           count=args.count, timestamp=args.timestamp, begin=args.begin, end=args.end,
                           max=args.max if args.max is not None else QUERY_ALL, isolation=args.isolation)
    if not asked:
        raise UsageError("query needs one of --key, --offset, --timestamp or --msg-id")
    with _open(args) as store:
        request.decompress = _decompressing(store, args)
        if request.key is None and request.partition is None:
            if request.offset is not None:
                request.partition = _one_queue(store, args, "--offset")
            elif request.timestamp is not None:
                held = _queues_asked(store, args)
                if held is not None and len(held) > 1:   # every queue's, as kafka-get-offsets --time
                    return _query_each_queue(store, request, held, args, out)
                if held is not None and len(held) == 1:  # the topic's one queue, whatever its number
                    request.partition = held[0]
        below = _below_first_offset(store, request)
        if below is not None:
            raise below
        try:
            result = store.query(request)
        except NotFoundError:
            # the selectors in the user's words, with what the store holds ("found partitions 0, 2")
            missing = _missing_selection(store, args)
            if missing is not None:
                raise missing from None
            raise
        if result.found:
            _print_lines(result.lines, args.json, out)
        for note in getattr(store, "notes", ()):    # where the answer came from (stderr: --json stays JSON)
            sys.stderr.write(f"{args.path}: {note}\n")
        if result.damage is not None:   # met after the records printed: named, exit 1 (as dump's)
            raise result.damage
        if not result.found:
            missing = _missing_selection(store, args)   # a miss because the selectors name nothing held
            if missing is not None:
                raise missing
            # Like grep: nothing on stdout; the format's own words for the miss (where it has some) on stderr.
            said = [line.text for line in result.lines if not line.problem]
            for text in said or [_past_end_words(store, request, args) or _no_hit_message(request, args)]:
                sys.stderr.write(f"segstore query: {text}\n")
        elif request.key is not None and args.max is not None and result.found:
            # Count every hit to say how many --max left out.
            request.max = QUERY_ALL
            total, shown = len(store.query(request).records), len(result.records)
            if total > shown:
                sys.stderr.write(f"segstore query: {shown} of {total} hits shown (the newest; "
                                 f"--max {args.max}), {total - shown} left out\n")
    return EXIT_OK if result.found else EXIT_NO_HITS


def _query_each_queue(store: Store, request: QueryRequest, queues: list[int], args: argparse.Namespace,
                      out: TextIO) -> int:
    """``query --timestamp`` of a topic's every queue / partition (none was named): each one's answer
    in queue order on stdout, a line on stderr for each that holds nothing so new; exit 0 when any
    answered."""
    found = False
    for queue in queues:
        result = store.query(replace(request, partition=queue))
        if result.found:
            _print_lines(result.lines, args.json, out)
            found = True
        else:
            said = [line.text for line in result.lines if not line.problem]
            for text in said or [_no_hit_message(replace(request, partition=queue), args)]:
                sys.stderr.write(f"segstore query: {text}\n")
        if result.damage is not None:   # met after the records printed: named, exit 1 (as dump's)
            raise result.damage
    return EXIT_OK if found else EXIT_NO_HITS


_PROGRESS_STEP = 1 << 20  # report reading progress a MiB at a time, not a line at a time


class _RepeatedName(ValueError):
    """A JSON object of an input line gives a name twice (:data:`_LINE_DECODER`)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of ``pairs``, each name given once: ``json.loads`` keeps the last of a repeated name
    and drops the others without a word (``{"topic": "A", "topic": "B"}`` written to B), where a line
    giving both of two fields that mean one thing is refused rather than written with one dropped."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _RepeatedName(name)
            seen.add(name)
    return obj


#: The input lines' JSON reader: ``json.loads``'s, refusing a name given twice in an object (one decoder
#: made once: ``json.loads`` with a hook builds a new one a call, 1.7 against 0.4 us a line more).
_LINE_DECODER = json.JSONDecoder(object_pairs_hook=_once_each)


def _jsonl_lines(path: str, shown: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(line number, byte position, object)`` for each JSON object of a JSON-lines file (blank lines
    skipped), streamed: memory holds one line.  ``shown`` names the file in errors.

    Reports progress in bytes to the open :func:`progress.task`.

    :raises InvalidMessageError: a line is not a JSON object (named by line number and byte position).
    """
    reported = end = 0
    for number, (start, line) in enumerate(files.iter_lines(path), 1):
        end = start + len(line)
        if end - reported >= _PROGRESS_STEP:
            progress.advance(end - reported)
            reported = end
        if not line.strip():
            continue
        # UTF-8, as the input is documented (a byte order mark taken at the file's start): json.loads of
        # bytes would guess UTF-16 for a line that starts with b"\xff\xfe" and complain of that codec
        bom = 3 if start == 0 and line.startswith(codecs.BOM_UTF8) else 0
        try:
            text = line[bom:].decode("utf-8")
        except UnicodeDecodeError as err:
            at = bom + err.start
            raise InvalidMessageError(f"line {number}: expected UTF-8 text, found byte 0x{line[at]:02x} at "
                                      f"column {at + 1} ({err.reason})", shown, start) from err
        try:
            obj = _LINE_DECODER.decode(text)
        except _RepeatedName as err:
            raise InvalidMessageError(f"line {number}: expected each name once in a JSON object, found "
                                      f"{cut(err.name)} twice (a JSON reader keeps one and drops the other)",
                                      shown, start) from err
        except json.JSONDecodeError as err:
            # the column from the line's start, its newline not counted: err.colno counts from that
            # newline when the object is cut short there ('{"topic": "T"' said "at column 1")
            column = min(err.pos, len(text.rstrip("\r\n"))) + 1
            raise InvalidMessageError(f"line {number}: expected a JSON object, found invalid JSON "
                                      f"({err.msg} at column {column})", shown, start) from err
        except (ValueError, RecursionError) as err:     # nested past the interpreter's recursion limit
            said = _too_long_number(text) or f"expected a JSON object, found invalid JSON ({err})"
            raise InvalidMessageError(f"line {number}: {said}", shown, start) from err
        if not isinstance(obj, dict):
            raise InvalidMessageError(f"line {number}: expected a JSON object, found {type(obj).__name__}",
                                      shown, start)
        yield number, start, obj
    progress.advance(end - reported)


def _too_long_number(text: str) -> str | None:
    """What to say of JSON ``text`` that ``json.loads`` refused for an integer past 4,300 digits, not
    Python's advice to raise ``sys.set_int_max_str_digits`` (nothing a user of segstore can do): the
    number by its digits and the field holding it; None when something else refused it.  ``O(len)``."""
    number_text = jsontext.too_long_number(text)
    if number_text is None:
        return None
    return f"expected integers a field can hold (a Java long at most: 19 digits), found {number_text}"


def _read_spec(path: str) -> Any:
    """The JSON of the spec file at ``path``.

    :raises InvalidMessageError: it is no JSON (nested past the interpreter's recursion limit, an integer
        past 4,300 digits too): what the input holds is the input's problem (exit 1), as a line of
        ``--input`` that is no JSON.
    """
    text = files.read_text(path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        said = _too_long_number(text) or f"expected a JSON spec, found invalid JSON ({err})"
        raise InvalidMessageError(said, path) from err


def _spec_format(spec: Any, spec_path: str) -> str:
    """The format a compat-fixture spec describes: Kafka specs list ``batches``, RocketMQ ``messages``."""
    if isinstance(spec, dict) and "batches" in spec:
        return "kafka"
    if isinstance(spec, dict) and "messages" in spec:
        return "rocketmq"
    found = "neither" if isinstance(spec, dict) else json_shown(spec)
    # (no "pass --format": a spec of neither shape is refused whatever format writes it)
    raise InvalidMessageError("expected a spec with 'messages' (rocketmq) or 'batches' (kafka), found "
                              f"{found}", spec_path)


def check_store_path(path: str) -> None:
    """A path a command writes a store at (``write PATH``, ``convert SRC DST``): not empty, and the
    nearest part of it that exists a directory (``afile/sub`` under a file cannot be created).

    :raises UsageError: either, naming the path (exit 2, as a ``PATH`` that is a file).
    """
    if not path:
        raise UsageError("expected a store path, found an empty one", path)
    if files.is_url(path):      # refused by the write itself: remote stores are read-only
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not files.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    if files.exists(parent) and not files.is_dir(parent):
        raise UsageError(f"expected a directory to create the store in, found a file in the way: {parent}",
                         path)


def _target_format(path: str, fmt: str | None, default: str) -> str:
    """The format to write into ``path``: its own if it holds a store (checked against ``fmt``)."""
    check_store_path(path)
    if files.exists(path) and not files.is_dir(path):
        raise UsageError("expected a store directory (or none) to write into, found a file", path)
    if files.list_dir(path):
        return resolve_store(path, fmt)
    registry.check_new_store(path, fmt or default)
    return fmt or default


def cmd_write(args: argparse.Namespace, out: TextIO) -> int:
    config: dict[str, Any] = _parse_config(args.config)
    if args.spec and args.input:
        raise UsageError("write takes --spec or --input, not both")
    if args.spec:
        _require_input_file(args.spec, "a JSON spec file")
        spec = _read_spec(args.spec)
        fmt = args.format or _spec_format(spec, args.spec)
        check_store_path(args.path)
        if files.exists(args.path) and not files.is_dir(args.path):
            raise UsageError("expected a directory (or none) to write a spec into, found a file", args.path)
        if files.list_dir(args.path):
            raise UsageError("expected an empty or missing directory to write a spec into, found one with "
                             f"{len(files.list_dir(args.path))} entries", args.path)
        registry.check_new_store(args.path, fmt)
        try:
            merged = {**spec.get("config", {}), **store_config(args, fmt)}
            items = spec.get("messages", spec.get("batches")) if isinstance(spec, dict) else None
            unit = "msg" if isinstance(spec, dict) and "messages" in spec else "batch"
            with files.RemovedOnFailure(args.path), \
                    progress.task(f"write {fmt} from {os.path.basename(args.spec)}",
                                  len(items) if isinstance(items, list) else None, unit):
                registry.get(fmt).write_spec(args.path, spec, merged)
        except InvalidMessageError as err:
            if err.path is not None:    # PATH's own name (a Kafka partition directory's): a bad argument
                raise
            # a message of the spec (its topic, its queue id, a property) that the replay could not place:
            # named by the spec, as every other error of it is (the exit code of its kind kept, but a bad
            # topic's: the input's problem, exit 1, as --input's, not a bad argument's).  Not a
            # ConfigError: its value may be the command line's --config, merged into the spec's.
            kind = InvalidMessageError if isinstance(err, InvalidTopicError) else type(err)
            raise kind(err.message, args.spec) from err
        except SegstoreError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
            # a field of another kind than the spec's (a list for its messages' object, a number for a
            # body): its replay's error, once, naming the spec (it was a traceback)
            raise InvalidMessageError("expected a spec of the fields compat_fixtures/README.md lists, each "
                                      f"of its kind, found {err!r:.200}", args.spec) from err
        out.write(f"{args.path}: wrote {fmt} store from {args.spec}\n")
        return EXIT_OK
    if args.input:
        if args.input == "-":
            with files.spooled(sys.stdin.buffer) as path:   # read twice: a pipe is read once, into a file
                return _write_input(args, path, config, out, shown="<stdin>")
        if files.not_regular(args.input) == "a FIFO":        # --input <(cmd): a pipe too
            with files.spooled_file(args.input) as path:
                return _write_input(args, path, config, out, shown=args.input)
        _require_input_file(args.input, "a JSON-lines file")
        return _write_input(args, args.input, config, out)
    raise UsageError("write needs --spec SPEC.json or --input FILE.jsonl")


#: The time fields of a plain message line (common, and RocketMQ's own), in ms since the epoch.
_TIME_FIELDS = ("timestamp", "born_timestamp", "store_timestamp")
_MAX_TIME = 2**63 - 1


def _ms_times(obj: dict[str, Any], number: int, pos: int, shown: str) -> dict[str, Any]:
    """A line with its text times (ISO-8601, ``"2024-05-01T12:00:00Z"``, UTC where it names no offset,
    as the command line's times) turned into ms since the epoch; ``obj`` itself when it holds none
    (the common case: no copy).

    :raises InvalidMessageError: a text that is no time, naming the line and its byte position.
    """
    texts = [name for name in _TIME_FIELDS if isinstance(obj.get(name), str)]
    if not texts:
        return obj
    obj = dict(obj)
    for name in texts:
        try:
            obj[name] = time_ms(obj[name])
        except argparse.ArgumentTypeError as err:
            raise InvalidMessageError(f"line {number}: {name}: {err}", shown, pos) from None
    return obj


def _check_times(obj: Mapping[str, Any], number: int, pos: int, shown: str) -> None:
    """A plain line's times are whole ms, at least 0: a negative one is no time (Kafka's producer refuses
    it, ``ProducerRecord``), where the library's appends would take it for "none" and write the time
    of the write instead of what the line says.

    :raises InvalidMessageError: naming the line and its byte position.
    """
    for name in _TIME_FIELDS:
        value = obj.get(name)
        if value is not None and type(value) is not int:     # Kafka's codec said "'float' object cannot..."
            raise InvalidMessageError(f"line {number}: expected a {name} in ms since the epoch (a whole "
                                      f"number) or an ISO-8601 time, found {_json_found(value)}", shown, pos)
        if type(value) is int and value < 0:
            raise InvalidMessageError(f"line {number}: expected a {name} of at least 0 ms (leave it out for "
                                      f"the time of the write), found {shown_number(value)}", shown, pos)
        if type(value) is int and value > _MAX_TIME:  # Kafka's codec failed on it without naming the field
            raise InvalidMessageError(f"line {number}: expected a {name} of at most {_MAX_TIME} ms (a Java "
                                      f"long, as both brokers keep times), found {shown_number(value)}",
                                      shown, pos)


#: What the store gives a plain line's message, never the line: its offset, and its timestamp type
#: (the topic's message.timestamp.type, as a producer's records get it).
_ASSIGNED_FIELDS = {"offset": "the store gives each message the next offset of its queue / partition",
                    "timestamp_type": "the topic's message.timestamp.type decides it (--config "
                                      "message.timestamp.type=LogAppendTime)"}


def _check_unassigned(obj: Mapping[str, Any], number: int, pos: int, shown: str) -> None:
    """A plain line does not say what the store assigns: an ``offset`` or ``timestamp_type`` it gave was
    dropped without a word (a line saying offset 7 stored at offset 0).  A ``dump --json`` line, which
    keeps its offsets and batches, is the form that does.

    :raises InvalidMessageError: naming the field, the line and its byte position.
    """
    for name, why in _ASSIGNED_FIELDS.items():
        if obj.get(name) is not None:
            raise InvalidMessageError(f"line {number}: expected no {name} in a plain message line ({why}; "
                                      f"a dump --json line keeps its offsets), found {name} {cut(obj[name])}",
                                      shown, pos)


def _require_input_file(path: str, what: str) -> None:
    """``write --spec``/``--input`` names a file to read: a missing one, or a directory, is a usage
    problem (exit 2, as a missing store path is), found before anything is created.

    :raises UsageError: nothing, or no regular file, at ``path``.
    """
    found = files.not_regular(path)
    if found == "nothing":
        raise UsageError(f"expected {what}, found no such file or directory", path)
    if found is not None:
        raise UsageError(f"expected {what}, found {found}", path)


def _write_input(args: argparse.Namespace, path: str, config: dict[str, Any], out: TextIO,
                 shown: str | None = None) -> int:
    """``write --input``: two streamed passes, so memory stays at one line and a bad line anywhere still
    writes nothing.  The first checks that every line is a JSON object and finds the ``dump --json``
    lines and which format wrote them (a new store takes that format); the second appends."""
    shown = shown or path
    size = files.file_size(path)
    dumped: dict[str, tuple[int, int]] = {}    # format -> (line number, byte position) of its first dump line
    transactional = False                      # a dump line of a transactional batch (Kafka's) among them
    with progress.task(f"check {os.path.basename(shown)}", size):
        for number, pos, obj in _jsonl_lines(path, shown):
            claims = [name for name in registry.names() if registry.get(name).reads_dump_line(obj)]
            if len(claims) > 1:
                raise InvalidMessageError(f"line {number}: expected a message or one format's dump --json "
                                          f"object, found one with fields of {' and '.join(claims)}",
                                          shown, pos)
            if claims and claims[0] not in dumped:
                dumped[claims[0]] = (number, pos)
            batch = obj.get("batch") if claims else None
            if isinstance(batch, dict) and batch.get("is_transactional") is True:
                transactional = True
            if not claims:
                _check_times(_ms_times(obj, number, pos, shown), number, pos, shown)
                _check_unassigned(obj, number, pos, shown)
    first_dumped = min(dumped, key=dumped.__getitem__, default="rocketmq")
    fmt = _target_format(args.path, args.format, first_dumped)
    config = store_config(args, fmt)
    for other, (number, pos) in dumped.items():
        if other != fmt:
            raise InvalidMessageError(f"line {number}: expected messages for a {fmt} store, found a {other} "
                                      "dump --json line (segstore convert converts a store to another "
                                      "format)", shown, pos)
    recent: deque[tuple[int, int]] = deque(maxlen=_LOCATE_WINDOW)
    # dump lines restore transactional batches: what was open before, to name what the input leaves open
    opened_before = _open_transactions(args.path, fmt) if transactional else None

    def lines() -> Iterator[dict[str, Any]]:
        for number, pos, obj in _jsonl_lines(path, shown):
            recent.append((number, pos))
            yield _ms_times(obj, number, pos, shown)

    with files.RemovedOnFailure(args.path), progress.task(f"append to {fmt}", size):
        try:
            count = registry.get(fmt).write_jsonl(args.path, lines(), config)
        except InvalidMessageError as err:
            # name the input file (and the line) when the plugin could not; a message too large names
            # the store's log, where it would have gone, not the line that held it
            if err.path is None or isinstance(err, (MessageTooLargeError, InvalidTopicError)):
                # a line's bad topic is the input's problem (exit 1), not a bad argument's
                # (InvalidTopicError); so is one only the store refuses (a Kafka topic colliding with
                # one it holds: named by the store)
                kind = InvalidMessageError if isinstance(err, InvalidTopicError) else type(err)
                found = _locate_bad_line(fmt, path, list(recent), config, err.message)
                if found is None:
                    where = err.path if isinstance(err, InvalidTopicError) and err.path else shown
                    raise kind(err.message, where) from err
                number, pos, message = found
                raise kind(f"line {number}: {message}", shown, pos) from err
            raise
    out.write(f"{args.path}: appended {count} message{'' if count == 1 else 's'}\n")
    if opened_before is not None:
        for topic, partition, producer, start in sorted(_open_transactions(args.path, fmt) - opened_before):
            sys.stderr.write(
                f"segstore write: {args.path}: {topic}-{partition}: producer {producer}'s transaction from "
                f"offset {start} is left open (its COMMIT or ABORT marker is not in the input, as in a dump "
                "of an open transaction, or a dump --isolation read_committed, which leaves markers out): "
                f"read_committed readers stop at offset {start} until it ends (segstore transactions "
                "--abort)\n")
    return EXIT_OK


def _open_transactions(path: str, fmt: str) -> set[tuple[str, int, int, int]]:
    """``(topic, partition, producer id, first offset)`` of each transaction open in the store at ``path``
    (none: no store there yet, or a format without producer state).  ``O(batch headers)``."""
    if not files.exists(path) or not files.list_dir(path):
        return set()
    with open_store(path, format=fmt) as store:
        if not hasattr(store, "producers"):
            return set()
        return {(topic, partition, p["producer_id"], p["current_transaction_start_offset"])
                for (topic, partition), found in store.producers().items() for p in found
                if p["current_transaction_start_offset"] is not None}


#: Lines a failed ``write --input`` looks back over for the one its plugin refused: a plugin appends
#: runs of at most ``WRITE_CHUNK`` lines, so the refused run is among the last lines it was given.
_LOCATE_WINDOW = 2 * WRITE_CHUNK + 1


def _locate_bad_line(fmt: str, path: str, recent: list[tuple[int, int]], config: dict[str, Any],
                     said: str) -> tuple[int, int, str] | None:
    """``(line number, byte position, message)`` of the first of the ``recent`` lines of an input that
    its format refuses, found by appending prefixes of them to scratch stores (a binary search:
    ``O(log lines)`` scratch writes of at most :data:`_LOCATE_WINDOW` lines); None where it cannot
    tell (no prefix refused).  Where ``dump --json`` lines are among them (a batch's lines go
    together, and a scratch store lacks what the store held), the line is named only where its
    refusal is the very one the store ``said``.  Only on the error path: a write that succeeds pays
    nothing."""
    import tempfile

    if not recent:
        return None
    wanted = {number for number, _ in recent}
    objs = []
    for number, (_, line) in enumerate(files.iter_lines(path), 1):
        if number in wanted and line.strip():
            objs.append(_ms_times(json.loads(line), number, 0, path))     # as the append was given them
    if len(objs) != len(recent):
        return None
    dumped = any(registry.get(name).reads_dump_line(obj) for obj in objs for name in registry.names())
    plugin = registry.get(fmt)

    def refusal(count: int) -> str | None:
        with tempfile.TemporaryDirectory(prefix="segstore-locate-") as scratch:
            try:
                plugin.write_jsonl(os.path.join(scratch, "store"), iter(objs[:count]), config)
            except InvalidMessageError as err:
                return err.message
            except SegstoreError:
                return None
        return None

    low, high = 0, len(objs)        # the first refused prefix is longer than low, at most high lines
    if refusal(high) is None:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if refusal(middle) is None:
            low = middle
        else:
            high = middle
    message = refusal(high)
    number, pos = recent[high - 1]
    if message is None or (dumped and message != said):
        return None
    return number, pos, _in_json_terms(message, objs[high - 1])


#: The append checkers' Python words (their messages are the library's too, for Python callers) and
#: what a JSON line holds instead, most specific first.  Both formats take a null value or key.
_JSON_WORDS = (
    ("bytes, str or None", "a string or null"),
    ("a body as bytes or str", "a body as a string or null"),
    ("a key as a str or UTF-8 bytes", "a key as a string or null"),
    ("a str or UTF-8 bytes", "a string"),
    ("a text or a list of texts", "a string or an array of strings"),
    ("a topic name (str)", "a topic name (a string)"),
    ("a str header key", "a string header key"),
    ("a list of (key, value) pairs", "an array of [name, value] pairs"),
    ("a (key, value) pair", "a [name, value] pair"),
)


def _in_json_terms(message: str, obj: Mapping[str, Any]) -> str:
    """An append's refusal of JSON line ``obj`` (``write --input``) in JSON's terms: the Python types
    its checkers name as JSON's (``a string or null``, not ``bytes, str or None``) and what it found,
    where it is one of the line's values (a type's name or a repr), as :func:`_json_found` shows it
    (``found an object {"a": "b"}``, not ``found dict``).  A message naming no such value keeps its words but
    the expectation's.  ``O(fields and headers of the line)``; thread-safe."""
    expected, said, found = message.rpartition(", found ")
    if not said:
        expected = message
    for python, words in _JSON_WORDS:
        expected = expected.replace(python, words)
    if not said:
        return expected
    for value in _line_values(expected, obj):
        forms = {type(value).__name__, cut(value), cut(repr(value)), json_shown(value),
                 f"{type(value).__name__} {cut(value)}"}
        if found in forms:
            scalar = value is None or isinstance(value, (bool, int, float))
            if scalar and found in (json_shown(value), cut(value)) and found != "None":
                break           # JSON's words already (``found 41``, ``found the number 5``, ``found true``)
            return f"{expected}, found {_json_found(value)}"
    return f"{expected}, found {found}"


def _json_found(value: Any) -> str:
    """A JSON line's ``value`` as a refusal shows it: as :func:`errors.shown` names its kind (``the
    number 5``, ``null``, ``an object``...), but strings, arrays and objects as JSON text (``"0"``,
    ``{"a": "b"}``, not Python's ``'0'``, ``{'a': 'b'}``), cut to :data:`MAX_SHOWN` characters."""
    if value is None or isinstance(value, (bool, int, float)):
        return json_shown(value)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except ValueError:      # holding an integer past 4,300 digits
        return json_shown(value)
    if len(text) > MAX_SHOWN:
        text = f"{text[:MAX_SHOWN]}... ({len(text) - MAX_SHOWN} more characters)"
    kind = "an array " if isinstance(value, list) else "an object " if isinstance(value, dict) else ""
    return kind + text


def _line_values(expected: str, obj: Mapping[str, Any]) -> Iterator[Any]:
    """The values of JSON line ``obj`` an expectation may be about: its fields the words name (``a body``:
    ``value``), and for a header's or property's name or value every header pair, name and value."""
    words = set(re.findall(r"[A-Za-z_]+", expected))
    if "body" in words:
        words.add("value")
    for name in words & set(obj):
        yield obj[name]
    if words & {"header", "property"}:
        pairs = obj.get("headers")
        if isinstance(pairs, list):
            for pair in pairs:
                yield pair
                if isinstance(pair, list):
                    yield from pair
        properties = obj.get("properties")
        if isinstance(properties, dict):
            for item in properties.items():
                yield from item
#: ``kafka-consumer-groups --describe``'s columns, then the group's state.
CONSUMER_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                   "HOST", "CLIENT-ID", "STATE")
#: ``ConsumerGroupCommand.printOffsetFormat``: the least widths of its columns.
_CONSUMER_WIDTHS = (15, 15, 10, 15, 15, 15, 15, 15, 15, 0)
#: What ``ConsumerGroupCommand.shouldPrintMemberState`` says on stderr of a group in these states.
_STATE_NOTES = {"Empty": "Consumer group '{}' has no active members.",
                "PreparingRebalance": "Warning: Consumer group '{}' is rebalancing.",
                "CompletingRebalance": "Warning: Consumer group '{}' is rebalancing.",
                "Assigning": "Warning: Consumer group '{}' is rebalancing.",
                "Reconciling": "Warning: Consumer group '{}' is rebalancing."}


def _java_length(text: str) -> int:
    """``String.length()``: UTF-16 units, two for a character past the BMP (``😀``), which the Kafka tools
    measure and pad by (``String.format("%-Ns")``).  ``O(len)``."""
    return len(text) if text.isascii() else len(text) + sum(ord(c) > 0xFFFF for c in text)


def _pad(text: str, size: int) -> str:
    """``String.format("%-" + size + "s", text)``: spaces up to ``size`` UTF-16 units."""
    return text + " " * (size - _java_length(text))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int], out: TextIO) -> None:
    """Left-aligned columns at least ``widths`` wide, one space apart, as the Kafka tools print them
    (widths in UTF-16 units, as Java measures them)."""
    sizes = [max([least, _java_length(name), *(_java_length(row[i]) for row in rows)])
             for i, (name, least) in enumerate(zip(header, widths, strict=True))]
    for line in (header, *rows):
        out.write(" ".join(_pad(cell, size) for cell, size in zip(line, sizes, strict=True)).rstrip() + "\n")


def _tool_table(header: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Each column padded to its widest cell and followed by a tab, the last too, as ``kafka-transactions``
    prints its tables (Kafka 3.8.0 ``ToolsUtils.prettyPrintTable``, ``printRow``): a script that splits
    the tool's lines on tabs splits these."""
    sizes = [max([_java_length(name), *(_java_length(row[i]) for row in rows)])
             for i, name in enumerate(header)]
    for line in (header, *rows):
        out.write("".join(_pad(cell, size) + "\t" for cell, size in zip(line, sizes, strict=True)) + "\n")


def _cell(value: Any) -> str:
    """A table cell: ``-`` for a value not known (``ConsumerGroupCommand.MISSING_COLUMN_VALUE``)."""
    return "-" if value is None else str(value)


RESET_HEADER = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


def _reset_offsets(args: argparse.Namespace, out: TextIO) -> int:
    """``consumers --reset-offsets``: the new offset of every partition (queue) the group committed
    (or each of ``--topic``'s, :func:`_topic_scope`; or those ``--from-file`` names) as
    ``kafka-consumer-groups --reset-offsets`` plans it, printed (``--export``: as the CSV ``--from-file``
    reads); written with ``--execute`` through the store's ``commit_offsets`` (all or none; an unchanged
    offset is committed again, as the tool commits it).  An offset outside a partition's range is
    clamped into it, as the tool's ``checkOffsetsRange`` does, but by ``--to-current``, which keeps the
    committed one."""
    if args.group is None or not _reset_asked(args):
        raise UsageError("--reset-offsets needs --group G and one of --to-datetime TIME, --by-duration D, "
                         "--to-earliest, --to-latest, --to-current, --to-offset N, --shift-by N, "
                         "--from-file CSV")
    if args.export and args.json:
        raise UsageError("--export prints CSV: not with --json")
    if args.converted_from is not None:
        _check_converted_from(args)
    if args.by_duration is not None:    # ConsumerGroupCommand: now minus the duration, then as a datetime
        now_ns = (time.time_ns() if args.now_ms is None else args.now_ms * 1_000_000) - args.by_duration
        args.to_datetime = max(0, now_ns // 1_000_000)      # back past the epoch: every record is after it
    if args.to_datetime is not None and args.to_datetime < 0:
        raise UsageError(f"--to-datetime: expected a time at or after the epoch, found {args.to_datetime} ms")
    from .consumers import ConsumerOffset

    chosen = _topic_partitions(args)
    wanted: dict[tuple[str, int], int | None] | None = None
    if args.from_file is not None:
        wanted = dict(_reset_plan_file(args, chosen))
    elif chosen is not None:            # --topic T:0,1: those partitions, committed or not, as the tool's
        wanted = dict.fromkeys(((args.topic, p) for p in chosen), None)
    options = ({} if args.offsets_retention_minutes is None
               else {"offsets_retention_ms": args.offsets_retention_minutes * 60_000})
    notes: list[str] = []
    with _open(args, mode="a" if args.execute else "r") as store:
        if args.converted_from is not None and wanted is not None:
            wanted = _converted_plan(args, store, wanted)
        # Kafka --topic T: every partition of T, as the tool's (RocketMQ's rows of a topic hold its queues)
        whole_topic = wanted is None and args.topic is not None and store.format == "kafka"
        # the group's partitions as its files hold them (Kafka: at the newest record's time): a group the
        # broker would expire by --now-ms is reset all the same, as kafka-consumer-groups resets a new one
        if wanted is None and not whole_topic:
            rows, damaged = _group_rows(store, args)
            current = {(row.topic, row.partition): row for row in rows}
        else:                           # the partitions named, whether or not the group committed them
            found = store.consumer_groups(args.group)
            damaged = _group_notes(args, found)
            rows = found.rows
            known = {(row.topic, row.partition): row for row in rows}
            if wanted is None:
                wanted = _topic_scope(args, store, found, notes)
            current = {queue: known.get(queue) or ConsumerOffset(args.group, *queue, None, None, None)
                       for queue in wanted}
        if args.shift_by is not None:   # a queue the group never committed has nothing to shift
            unshifted = [queue for queue, row in current.items()
                         if row.committed_offset is None or row.committed_offset < 0]
            current = {queue: row for queue, row in current.items() if queue not in unshifted}
            if unshifted and args.topic is not None and current:
                # ConsumerGroupCommand.prepareOffsetsToReset throws for the first, and resets nothing
                names = ", ".join(f"{t}-{q}" for t, q in sorted(unshifted))
                notes.append(f"{names}: no committed offset of group {cut(args.group)} to shift, so not "
                             "planned (kafka-consumer-groups refuses the whole reset)")
            if not current:
                raise NotFoundError(f"expected a committed offset of group {cut(args.group)} to shift, "
                                    "found none", args.path)
        plan = {queue: _reset_target(args, store, row, None if wanted is None else wanted[queue])
                for queue, row in sorted(current.items())}
        _refuse_damaged(args, damaged)
        if args.execute:
            notes += store.commit_offsets(args.group, _to_commit(args, store, current, plan),
                                          now_ms=args.now_ms, **options)
    if args.export:     # ConsumerGroupCommand.exportOffsetsToCsv, one group: topic,partition,offset
        import csv  # quotes a name holding a comma, as Jackson's CSV writer would

        csv.writer(out, lineterminator="\n").writerows((t, q, o) for (t, q), o in plan.items())
    elif args.json:
        _json_line([{"group": args.group, "topic": t, "partition": q, "new_offset": o}
                    for (t, q), o in plan.items()], out)
    else:
        _table(RESET_HEADER, [(args.group, t, str(q), str(o)) for (t, q), o in plan.items()],
               (*_CONSUMER_WIDTHS[:3], 0), out)
    _after_group_change(args, rows, notes, "resets only an inactive group", "commit these offsets")
    return EXIT_DATA if damaged else EXIT_OK


def _check_converted_from(args: argparse.Namespace) -> None:
    """``--converted-from FORMAT`` goes with ``--from-file`` and names another known format than the
    store's, checked before the store is opened.

    :raises UsageError: it does not.
    """
    if args.from_file is None:
        raise UsageError("--converted-from goes with --from-file (the offsets of the store this one was "
                         "converted from)")
    here = resolve_store(args.path, args.format)
    others = [name for name in registry.names() if name != here]
    if args.converted_from not in others:
        raise UsageError(f"--converted-from: expected the format of the store this {here} store was "
                         f"converted from ({', '.join(others)}), found {cut(args.converted_from)}")


def _converted_plan(args: argparse.Namespace, store: Store, wanted: dict[tuple[str, int], int | None]
                    ) -> dict[tuple[str, int], int | None]:
    """``--converted-from FORMAT``: ``--from-file``'s plan, whose topics and offsets are those of the
    FORMAT store ``store`` was converted from, in ``store``'s terms: each topic as the conversion
    named it (Kafka ``orders.v1``: RocketMQ ``orders%2Ev1``), each offset where a consumer that
    committed it goes on in ``store`` (``FormatConversion.converted_offset``: RocketMQ, the first
    message converted from that Kafka offset or a later one; checked by :func:`_check_converted_from`).
    ``O(log n)`` reads a queue.
    """
    from .convert.interchange import Peer
    from .convert.topicnames import escape, rules

    peer = Peer(args.converted_from, rules(args.converted_from))
    side = registry.get(store.format).conversion()
    plan: dict[tuple[str, int], int | None] = {}
    for (topic, queue), offset in wanted.items():
        name = escape(topic, peer.topics, side.topics)
        if offset is not None:
            try:
                offset = side.converted_offset(store, name, queue, peer, offset)
            except NotFoundError:
                pass        # no such queue here: the plan says so, as for any other line of the file
        plan[name, queue] = offset
    return plan


#: How many partitions a note of ``--reset-offsets --topic`` names (a topic may have thousands).
NAMED_PARTITIONS = 20


def _topic_scope(args: argparse.Namespace, store: Store, found: ConsumerGroups, notes: list[str]
                 ) -> dict[tuple[str, int], int | None]:
    """Kafka ``--reset-offsets --topic T``: every partition of T, committed or not, as the tool's
    ``parseTopicPartitionsToReset`` takes them from ``describeTopics`` (a partition the group never
    committed is given an offset too, and a group that never committed to T its first ones): those
    this log dir holds, and those the group's rows name (one on another broker cannot be planned).
    Partitions of T that neither names (the KRaft metadata's count, else the numbers of the
    directories here) are said in ``notes``: not planned, they keep no offset of the group.

    :raises NotFoundError: T is neither here nor among the group's topics (the groups there named).
    """
    topic = args.topic
    held = store.partitions(topic) if topic in store.topics() else []
    grouped = {row.partition for row in found.rows if row.topic == topic and row.partition is not None}
    if not held and not grouped:
        hint = _directory_name_hint(store.format, topic, _consumed_partitions(found, store), form="consumers")
        raise NotFoundError(f"expected consumer group {cut(args.group)} on topic {cut(topic)}, found "
                            f"{_listing('group', _all_groups(store, found))}{hint}", args.path)
    widths = getattr(store, "partition_widths", None)       # Kafka's: the metadata's count where it has one
    count = widths().get(topic, 1) if widths is not None else 1
    elsewhere = sorted(set(range(count)) - set(held) - grouped)
    if elsewhere:
        names = ", ".join(f"{topic}-{p}" for p in elsewhere[:NAMED_PARTITIONS])
        if len(elsewhere) > NAMED_PARTITIONS:
            names += f" and {len(elsewhere) - NAMED_PARTITIONS} more"
        notes.append(f"{names}: not in this log dir (another broker's), so not planned, where "
                     "kafka-consumer-groups --topic resets every partition of the topic: a consumer of the "
                     "group starts there at its auto.offset.reset")
    return dict.fromkeys(((topic, p) for p in sorted({*held, *grouped})), None)


def _reset_asked(args: argparse.Namespace) -> bool:
    """Whether the command line names a target of ``--reset-offsets``."""
    return (args.to_datetime is not None or args.by_duration is not None or args.to_earliest or args.to_latest
            or args.to_current or args.to_offset is not None or args.shift_by is not None
            or args.from_file is not None)


def _topic_partitions(args: argparse.Namespace) -> list[int] | None:
    """``--topic T:0,1`` (``ConsumerGroupCommand.parseTopicsWithPartitions``): its partitions, ``args.topic``
    left as the name; None for a plain ``--topic T`` or none (neither format's topic names hold ``:``).

    :raises UsageError: what follows the ``:`` is not a list of partition numbers.
    """
    if args.topic is None or ":" not in args.topic:
        return None
    topic, _, listed = args.topic.partition(":")
    numbers = [parse_int(number) for number in listed.split(",")]      # Integer.parseInt of each
    partitions = [number for number in numbers if number is not None]
    if not topic or len(partitions) != len(numbers) or any(p < 0 for p in partitions):
        raise UsageError(f"--topic: expected TOPIC or TOPIC:PARTITION,..., found {cut(args.topic)}")
    args.topic = topic
    return sorted(set(partitions))


def _reset_plan_file(args: argparse.Namespace, partitions: list[int] | None) -> dict[tuple[str, int], int]:
    """``--from-file``: the CSV ``--export`` writes (``topic,partition,offset`` a line), or its several
    groups' form (``group,topic,partition,offset``: ``--group``'s lines kept), as
    ``ConsumerGroupCommand.parseResetPlan`` reads it (the first line decides which); ``-`` reads stdin.
    ``--topic`` (and its ``:PARTITION,...``) keep only their lines.

    :raises UsageError: no such file, or a line of neither form (named by its byte position).
    :raises NotFoundError: no line for the group (on the selected topic).
    """
    import csv

    if args.from_file == "-":
        data = sys.stdin.buffer.read()
    elif files.not_regular(args.from_file) == "a FIFO":        # --from-file <(cmd)
        with files.spooled_file(args.from_file) as copy:
            data = files.read_bytes(copy)
    else:
        _require_input_file(args.from_file, "a CSV reset plan")
        data = files.read_bytes(args.from_file)
    shown = "<stdin>" if args.from_file == "-" else args.from_file
    plan: dict[tuple[str, int], int] = {}
    fields = None
    pos = 0
    for line in data.splitlines(keepends=True):
        at, pos = pos, pos + len(line)
        text = line.decode("utf-8", "replace").strip()
        if not text:
            continue
        cells = next(csv.reader([text]))
        fields = fields or len(cells)
        # parseResetPlan (Jackson's CSV reader): the partition an int, the offset a long, blanks around them
        # trimmed, then NumberInput.parseInt / parseLong (Integer.parseInt / Long.parseLong past ASCII)
        numbers: tuple[int, int] | None = None
        if len(cells) >= 3:
            queue_, offset_ = parse_int(cells[-2].strip()), parse_long(cells[-1].strip())
            if queue_ is not None and offset_ is not None:
                numbers = queue_, offset_
        if numbers is None or len(cells) != fields or fields not in (3, 4):
            raise UsageError(f"expected topic,partition,offset (or group,topic,partition,offset) as the "
                             f"first line has {fields} fields, found {text[:200]!r}", shown, at)
        group, topic, (queue, offset) = cells[0] if fields == 4 else args.group, cells[-3], numbers
        if group == args.group and (args.topic is None or topic == args.topic) \
                and (partitions is None or queue in partitions):
            plan[topic, queue] = offset
    if not plan:
        where = "" if args.topic is None else f" on topic {cut(args.topic)}"
        raise NotFoundError(f"expected a reset plan for group {cut(args.group)}{where}, found none", shown)
    return plan


def _after_group_change(args: argparse.Namespace, rows: list[Any], notes: list[str], verb: str,
                        what: str) -> None:
    """What a reset or a deletion says on stderr: a group that still had members, the store's notes, and
    that a plan without ``--execute`` wrote nothing."""
    states = sorted({row.state for row in rows} - {None, "Empty", "Dead"})
    if states:
        # kafka-consumer-groups refuses a group that is not inactive; offline, the state is the one the log
        # ends with, which a broker stopped under running consumers leaves behind
        sys.stderr.write(f"segstore consumers: group {cut(args.group)} was {'/'.join(states)}, with members, "
                         f"when its log ends (kafka-consumer-groups {verb}): its "
                         "consumers must be stopped, or their next commits overwrite this\n")
    for note in notes:
        sys.stderr.write(f"segstore consumers: {note}\n")
    if not args.execute:
        sys.stderr.write("segstore consumers: a plan only, nothing written: add --execute (with the broker "
                         f"stopped) to {what}\n")


DELETE_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET")


def _delete_offsets(args: argparse.Namespace, out: TextIO) -> int:
    """``consumers --delete``: the group's committed offsets (of ``--topic``, Kafka also ``--topic T:0,1``'s
    partitions, as the tool's ``deleteOffsets`` takes them; or all of them: the group itself), printed;
    deleted with ``--execute`` through the store's ``delete_offsets``, as ``kafka-consumer-groups
    --delete-offsets`` / ``--delete`` has the broker do."""
    if args.group is None:
        raise UsageError("--delete needs --group G (and --topic T to delete one topic's offsets)")
    if args.topic is not None and ":" in args.topic and resolve_store(args.path, args.format) != "kafka":
        raise UsageError(f"--delete removes a whole topic's offsets (RocketMQ keeps a topic's as one "
                         f"entry): expected --topic TOPIC, found {cut(args.topic)}")
    chosen = _topic_partitions(args)
    with _open(args, mode="a" if args.execute else "r") as store:
        rows, damaged = _group_rows(store, args, committed=True, hidden=True)
        if chosen is not None:
            rows = [row for row in rows if row.partition in chosen]
            if not rows:
                raise NotFoundError(f"expected offsets of consumer group {cut(args.group)} on {args.topic} "
                                    f"partitions {chosen}, found none", args.path)
        _refuse_damaged(args, damaged)
        notes = (store.delete_offsets(args.group, args.topic, partitions=chosen, now_ms=args.now_ms)
                 if args.execute else [])
    if args.json:
        _json_line([{"group": row.group, "topic": row.topic, "partition": row.partition,
                     "committed_offset": row.committed_offset} for row in rows], out)
    else:
        _table(DELETE_HEADER, [(row.group, row.topic, str(row.partition), str(row.committed_offset))
                               for row in rows], (*_CONSUMER_WIDTHS[:3], 0), out)
    # GroupCoordinator.handleDeleteGroups refuses a group with members (NON_EMPTY_GROUP); handleDeleteOffsets
    # refuses a Stable consumer group's partitions of the topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC)
    verb = ("deletes only an inactive group" if args.topic is None else
            "deletes an active group's offsets only of topics its members do not subscribe to")
    _after_group_change(args, rows, notes, verb, "delete these offsets")
    return EXIT_DATA if damaged else EXIT_OK


def _to_commit(args: argparse.Namespace, store: Store, current: Mapping[tuple[str, int], Any],
               plan: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """What a reset's ``--execute`` commits: every planned offset (the tool commits them all, an unchanged
    one again with a new commit time), but for ``--to-current``'s offsets the partition no longer holds
    (below a log start that moved past it), which stay as they are: the stores refuse to commit an
    offset outside the log anew."""
    if not args.to_current:
        return plan
    kept = {}
    for queue, offset in plan.items():
        span = _consumable(store, current[queue])
        if span is None or span[0] <= offset <= span[1]:
            kept[queue] = offset
    return kept


def _consumable(store: Store, row: Any) -> tuple[int, int] | None:
    """The offsets a consumer of a ``consumers`` row's partition (queue) may be given: from its start
    to the end the row shows (Kafka: the high watermark, the tools' ``latest`` offset; RocketMQ: the
    queue's max offset), never below the start; None where the store does not hold the partition.  A
    queue the row gives an end for but the store has no file of is empty (RocketMQ: a group's
    ``%RETRY%`` queue before any retry, ``getMaxOffsetInQueue`` 0), and so is a RocketMQ queue
    ``topics.json`` configures (``configured_queue``); a Kafka row gives none for a partition of
    another broker."""
    if row.topic not in store.topics() or row.partition not in store.partitions(row.topic):
        configured = getattr(store, "configured_queue", None)     # RocketMQ: topics.json's queues
        if row.log_end_offset is None and (configured is None or not configured(row.topic, row.partition)):
            return None
        return 0, 0
    start, end = store.offset_range(row.topic, row.partition)
    if row.log_end_offset is not None:
        end = max(start, min(end, row.log_end_offset))
    return start, end


def _reset_target(args: argparse.Namespace, store: Store, row: Any, planned: int | None = None) -> int:
    """The new offset of the partition (queue) of a ``consumers`` row for ``--reset-offsets`` (``planned``:
    the ``--from-file`` offset), within its range: from its start to the end the row shows (Kafka: the
    high watermark, the tool's ``latest`` offset; RocketMQ: the queue's max offset), but for
    ``--to-current``, which keeps the committed offset as it is, as the tool does.

    :raises NotFoundError: the partition is not in this store (a Kafka log directory holds its broker's).
    """
    topic, queue = row.topic, row.partition
    span = _consumable(store, row)
    if span is None:
        hint = ("--topic T resets one topic" if args.topic is None
                else "its log range, which bounds the new offset, is in that broker's log dir")
        raise NotFoundError(f"expected {topic}-{queue} here to plan the new offset of group "
                            f"{cut(args.group)}, found none (another broker's partition: {hint})", args.path)
    start, end = span
    if args.to_earliest:
        return start
    if args.to_latest:
        return end
    if args.to_datetime is not None:
        if start >= end:
            # nothing stored: no time finds an offset (a RocketMQ queue without files has none to look up
            # in, and 4.9.7 getOffsetInQueueByTime answers 0, its end)
            return end
        # ListOffsets answers only below the high watermark (Partition.fetchOffsetForTimestamp); none,
        # and the tool falls back to the latest offset (ConsumerGroupCommand.getLogTimestampOffsets)
        found = store.offset_for_time(topic, queue, args.to_datetime)
        return end if found is None or found >= end else max(found, start)
    if args.to_current:
        # prepareOffsetsToReset: the committed offset as it is, unclamped (no checkOffsetsRange); a
        # partition the group never committed goes to its end, as the tool's does
        return end if row.committed_offset is None or row.committed_offset < 0 else row.committed_offset
    if planned is not None:
        wanted = planned
    else:
        wanted = args.to_offset if args.to_offset is not None else row.committed_offset + args.shift_by
    return min(max(wanted, start), end)


def _path_taken_back(args: argparse.Namespace, flags: Sequence[str]) -> None:
    """``consumers --state PATH``: an option whose value may be left out took the store path; give it back
    (the option then has no value).

    :raises UsageError: no path at all.
    """
    for flag in flags:
        if args.path is None and getattr(args, flag):
            args.path = getattr(args, flag)
            setattr(args, flag, "")
    if args.path is None:
        raise UsageError("the following arguments are required: path")


def cmd_consumers(args: argparse.Namespace, out: TextIO) -> int:
    from .consumers import COLUMNS as CONSUMER_COLUMNS  # pyarrow: not for the other commands

    _path_taken_back(args, ("type", "state"))

    # kafka-consumer-groups' own spellings of what segstore does by default or by --delete --topic
    if args.all_groups and args.group is not None:
        raise UsageError("--all-groups and --group do not go together")
    if args.describe and (args.list or args.reset_offsets or args.delete or args.delete_offsets):
        raise UsageError("--describe is the view of groups: not with --list, --reset-offsets or --delete")
    if args.delete_offsets:
        if args.topic is None:
            raise UsageError("--delete-offsets deletes --topic's committed offsets: expected --topic, "
                             "found none (--delete alone deletes the whole group)")
        args.delete = True
    if args.offsets_retention_minutes is not None and resolve_store(args.path, args.format) == "rocketmq":
        # 4.9.7 ConsumerOffsetManager keeps an offset until it is deleted: nothing expires by time
        raise UsageError("--offsets-retention-minutes is Kafka's offsets.retention.minutes: RocketMQ "
                         "consumer offsets do not expire", args.path)
    if (args.now_ms is not None and args.by_duration is None
            and resolve_store(args.path, args.format) == "rocketmq"):
        # consumerOffset.json keeps an offset, no commit time, and nothing expires: only --by-duration's now
        raise UsageError("--now-ms is the time Kafka offsets expire by and are committed at: RocketMQ "
                         "consumer offsets keep no time and do not expire (it goes with --by-duration here)",
                         args.path)
    targets = _reset_asked(args)
    if args.delete and (args.reset_offsets or targets):
        raise UsageError("--delete and --reset-offsets (or its targets) do not go together")
    if args.dry_run and args.execute:       # ConsumerGroupCommandOptions.checkArgs
        raise UsageError("--reset-offsets only accepts one of --execute and --dry-run")
    if args.all_topics and (args.topic is not None or not args.reset_offsets):
        raise UsageError("--all-topics (every partition the group committed, the default) goes with "
                         "--reset-offsets, not with --topic")
    state = args.state is not None
    if (state or args.members or args.list or args.type is not None) and (args.delete or args.reset_offsets):
        raise UsageError("--list, --state and --members describe groups: not with --reset-offsets or "
                         "--delete")
    if sum((state and not args.list, args.members, args.list)) > 1:
        raise UsageError("--list, --state and --members: one view at a time")
    if args.offsets and (state or args.members or args.list or args.delete or args.reset_offsets):
        # ConsumerGroupCommandOptions.checkArgs: --describe takes at most one of --members, --offsets, --state
        raise UsageError("--offsets is the default view of groups: not with --list, --state, --members, "
                         "--reset-offsets or --delete")
    if args.verbose and not args.members:
        raise UsageError("--verbose goes with --members")
    if (args.type is not None or args.state) and not args.list:
        raise UsageError("--type, and --state with states, filter --list")
    if args.converted_from is not None and not args.reset_offsets:
        raise UsageError("--converted-from goes with --reset-offsets --from-file")
    # a deletion tombstones what the group holds: no plan to export, no expiry to judge
    if args.delete and args.export:
        raise UsageError("--export goes with --reset-offsets, not with --delete")
    if args.delete and args.offsets_retention_minutes is not None:
        raise UsageError("--offsets-retention-minutes goes with the view of groups or --reset-offsets, not "
                         "with --delete")
    if args.hidden and (args.delete or args.reset_offsets):
        # a deletion reads every committed offset; a reset plans what the broker's resetOffset walks
        raise UsageError("--hidden goes with the view of groups (--delete deletes the rows it hides "
                         "without it), not with --reset-offsets or --delete")
    if args.hidden and resolve_store(args.path, args.format) != "rocketmq":
        raise UsageError("--hidden shows the RocketMQ rows mqadmin consumerProgress does not list: a Kafka "
                         "store's rows are all listed", args.path)
    if args.delete:
        return _delete_offsets(args, out)
    if args.reset_offsets:
        return _reset_offsets(args, out)
    if args.execute or args.dry_run or targets:
        raise UsageError("--to-datetime, --by-duration, --to-earliest, --to-latest, --to-current, "
                         "--to-offset, --shift-by, --from-file, --dry-run and --execute go with "
                         "--reset-offsets or --delete")
    if args.export:
        raise UsageError("--export goes with --reset-offsets")

    options: dict[str, Any] = ({} if args.offsets_retention_minutes is None
                               else {"offsets_retention_ms": args.offsets_retention_minutes * 60_000})
    if args.hidden:
        options["hidden"] = True
    with _open(args) as store:
        found = store.consumer_groups(args.group, now_ms=args.now_ms, **options)
        damaged = _group_notes(args, found)
        if args.group is not None and not found.rows:
            groups = _all_groups(store, found, now_ms=args.now_ms, **options)
            raise NotFoundError(f"expected consumer group {cut(args.group)}, found "
                                f"{_listing('group', groups)}", args.path)
        if args.topic is not None:      # (open: a topic no group consumes is named with the store's)
            found = _on_topic(args, store, found)
    # what was read is shown; damage met makes it exit 1, as dump does
    failed = EXIT_DATA if damaged else EXIT_OK
    if args.list:
        return _group_list(args, found, out) or failed
    if state or args.members:
        return _group_views(args, found, out) or failed
    if args.json:
        _json_line([row.to_dict() for row in found.rows], out)
        return failed
    for n, (group, rows) in enumerate(found.by_group().items()):
        note = _STATE_NOTES.get(rows[0].state or "")
        if note is not None:
            sys.stderr.write(note.format(group) + "\n")
        cells = [tuple(_cell(getattr(row, name)) for name in CONSUMER_COLUMNS)
                 + tuple(_extra_cell(key, row.extras.get(key)) for _, key in found.columns)
                 for row in rows if row.topic is not None]
        if n:
            out.write("\n")
        _table(CONSUMER_HEADER + tuple(header for header, _ in found.columns), cells,
               _CONSUMER_WIDTHS + (0,) * len(found.columns), out)
    return failed


#: ``kafka-consumer-groups --describe --state``'s columns (the coordinator as its ``__consumer_offsets``
#: partition: the files name no broker address) and ``--members``' (GROUP-INSTANCE-ID only where a
#: member has one, as the tool does; ASSIGNMENT with ``--verbose``).
STATE_HEADER = ("GROUP", "COORDINATOR-PARTITION", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
#: ``--members``' columns: header, least width, the member's field (:func:`_member_cell` shows it).
_MEMBER_COLUMNS = (("GROUP", 15, "group"), ("CONSUMER-ID", 15, "consumer_id"),
                   ("GROUP-INSTANCE-ID", 17, "group_instance_id"), ("HOST", 15, "host"),
                   ("CLIENT-ID", 15, "client_id"), ("#PARTITIONS", 15, "partitions"),
                   ("ASSIGNMENT", 0, "assignment"))


def _group_views(args: argparse.Namespace, found: ConsumerGroups, out: TextIO) -> int:
    """``consumers --state`` (a line a group: ``ConsumerGroupCommand.printStates``) or ``--members`` (a line
    a member, with or without partitions: ``printMembers``); ``-`` where the format keeps no such thing
    (RocketMQ keeps no members or states)."""
    rows: list[dict[str, Any]] = []
    if args.state is not None:
        for group, (first, *_) in found.by_group().items():
            rows.append({"group": group, "coordinator_partition": first.extras.get("coordinator_partition"),
                         "assignment_strategy": first.extras.get("protocol"), "state": first.state,
                         "members": first.extras.get("members")})
    else:
        rows = [member.to_dict() for member in found.members]
        if found.rows and all(row.state is None for row in found.rows):
            sys.stderr.write(f"segstore consumers: {args.path}: the store's files keep no group members or "
                             "states (its broker holds them in memory)\n")
        else:
            for group in sorted(set(found.groups()) - {member.group for member in found.members}):
                sys.stderr.write(f"Consumer group '{group}' has no active members.\n")
    if args.json:
        _json_line(rows, out)
        return EXIT_OK
    if args.state is not None:
        _table(STATE_HEADER, [tuple(_cell(value) for value in row.values()) for row in rows],
               (15,) * len(STATE_HEADER), out)
        return EXIT_OK
    static = any(row["group_instance_id"] for row in rows)
    columns = [(header, width, key) for header, width, key in _MEMBER_COLUMNS
               if (key != "group_instance_id" or static) and (key != "assignment" or args.verbose)]
    cells = [tuple(_member_cell(key, row[key]) for _, _, key in columns) for row in rows]
    _table([header for header, _, _ in columns], cells, [width for _, width, _ in columns], out)
    return EXIT_OK


def _consumed_partitions(found: ConsumerGroups, store: Store | None = None) -> Callable[[str], Iterable[int]]:
    """The partitions of a topic a group of ``found`` committed to, and those ``store`` holds if given
    (for :func:`_directory_name_hint`: a group's topic may be held on another broker)."""
    held = _store_partitions(store) if store is not None else lambda topic: ()
    return lambda topic: {*held(topic), *(row.partition for row in found.rows
                                          if row.topic == topic and row.partition is not None)}


def _on_topic(args: argparse.Namespace, store: Store, found: ConsumerGroups) -> ConsumerGroups:
    """The groups that committed offsets or hold partitions on ``--topic`` (``T:0,1``: those partitions),
    and of their rows only that topic's; members are those groups'.

    :raises NotFoundError: no group consumes it.
    """
    partitions = _topic_partitions(args)
    rows = [row for row in found.rows if row.topic == args.topic
            and (partitions is None or row.partition in partitions)]
    if not rows:
        where = f"topic {cut(args.topic)}" + ("" if partitions is None else f" partitions {partitions}")
        hint = "" if partitions is not None else \
            _directory_name_hint(store.format, args.topic, _consumed_partitions(found), form="consumers")
        raise NotFoundError(f"expected a consumer group on {where}, found "
                            f"{_listing('group', found.groups())}{hint}", args.path)
    groups = {row.group for row in rows}
    return replace(found, rows=rows, members=[m for m in found.members if m.group in groups])


#: ``kafka-consumer-groups --list``'s group types (``GroupType``), by the ``kind`` a format gives a group
_GROUP_TYPES = {"classic": "Classic", "consumer": "Consumer"}


def _names(text: str | None, known: Iterable[str], what: str) -> set[str] | None:
    """``--state``/``--type``'s comma-separated values, case-insensitive as ``ConsumerGroupState.parse``
    (None or empty: all), spelled as ``known`` spells them.

    :raises UsageError: a value ``known`` does not hold.
    """
    if not text:
        return None
    spelled = {name.lower(): name for name in known}
    wanted = {value.strip().lower() for value in text.split(",")}
    unknown = sorted(wanted - set(spelled))
    if unknown:
        raise UsageError(f"expected {what} among {', '.join(sorted(spelled.values()))}, found "
                         f"{cut(unknown[0])}")
    return {spelled[value] for value in wanted}


def _group_list(args: argparse.Namespace, found: ConsumerGroups, out: TextIO) -> int:
    """``consumers --list``: a group id a line (``kafka-consumer-groups --list``); with ``--state`` or
    ``--type`` a table of GROUP [TYPE] [STATE], those flags' values (comma-separated) keeping only the
    groups in those states or of those types, as ``listConsumerGroupsWithFilters``."""
    from .consumers import STATES

    states = _names(args.state, [name for name in STATES if name != "Unknown"], "a group state")
    types = _names(args.type, _GROUP_TYPES.values(), "a group type")
    rows: list[dict[str, str | None]] = []
    for group, (first, *_) in found.by_group().items():
        kind = _GROUP_TYPES.get(str(first.extras.get("kind")), "Unknown")
        if (states is None or first.state in states) and (types is None or kind in types):
            rows.append({"group": group, "type": kind, "state": first.state})
    if args.json:
        _json_line(rows, out)
    elif args.state is None and args.type is None:
        out.writelines(f"{row['group']}\n" for row in rows)
    else:
        keys = ["group"] + ["type"] * (args.type is not None) + ["state"] * (args.state is not None)
        width = max([15, *(len(row["group"] or "") for row in rows)]) + 10
        # a state the format keeps none of is Unknown; a group id is shown as it is, "" too (Kafka commits
        # offsets of the empty group id: GroupCoordinator.isValidGroupId asks OffsetCommit for non-null only)
        _table([key.upper() for key in keys],
               [tuple("Unknown" if row[key] is None else str(row[key]) for key in keys) for row in rows],
               [width] + [20] * (len(keys) - 1), out)
    return EXIT_OK


def _member_cell(key: str, value: Any) -> str:
    """A ``--members`` cell: the text, empty for no group instance id; ASSIGNMENT (``--verbose``) as
    ``other(2), topic(0,1)``, topics sorted, partitions in number order, ``-`` for none (Kafka 3.5's
    ``ConsumerGroupCommand.printMembers``; 3.8's Java port drops the topic names and sorts the partitions as
    text, which reads wrong past 9)."""
    if key != "assignment":
        return "" if value is None else str(value)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in value:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return "-"
    return ", ".join(sorted(f"{topic}({','.join(map(str, sorted(ps)))})" for topic, ps in by_topic.items()))


def _extra_cell(key: str, value: Any) -> str:
    """A format's own column of the consumers table: a time (ms, 0 none) as ISO-8601 UTC, else as text."""
    if key.endswith("timestamp") and isinstance(value, int):
        return "-" if value <= 0 else _iso_utc(value) or str(value)
    return _cell(value)


#: ``kafka-transactions describe``'s columns but two (3.8.0 ``DescribeTransactionsCommand``): offline no
#: broker answers, so CoordinatorPartition (the ``__transaction_state`` partition, whose leader is the
#: coordinator) stands for CoordinatorId, and LastUpdateTimeMs (the log's) for TransactionDurationMs (the
#: tool's clock less the start time).
TRANSACTION_HEADER = ("TransactionalId", "CoordinatorPartition", "ProducerId", "ProducerEpoch",
                      "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                      "LastUpdateTimeMs", "TopicPartitions")
_TRANSACTION_FIELDS = ("transactional_id", "coordinator_partition", "producer_id", "producer_epoch", "state",
                       "timeout_ms", "start_timestamp", "last_update_timestamp", "partitions")


#: ``kafka-transactions describe-producers``'s columns, after the partition's.
PRODUCER_HEADER = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                   "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset")
_PRODUCER_FIELDS = ("producer_id", "producer_epoch", "coordinator_epoch", "last_sequence", "last_timestamp",
                    "current_transaction_start_offset")
#: ``kafka-transactions find-hanging``'s columns.
HANGING_HEADER = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                  "LastTimestamp", "Duration(min)")
_HANGING_FIELDS = ("topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch",
                   "current_transaction_start_offset", "last_timestamp", "duration_min")


#: ``transactions --find-hanging``'s columns on a RocketMQ store: each half message no commit or rollback
#: finished, by its real topic and queue, what the broker's next check does with it.
HALF_HEADER = ("Topic", "QueueId", "MsgId", "ProducerGroup", "HalfOffset", "BornTimestamp", "CheckTimes",
               "NextCheck", "Duration(min)")
_HALF_FIELDS = ("topic", "queue_id", "msg_id", "producer_group", "half_offset", "born_timestamp",
                "check_times", "next_check", "duration_min")


def _rows_out(args: argparse.Namespace, header: Sequence[str], fields: Sequence[str],
              rows: list[dict[str, Any]], out: TextIO) -> int:
    """A ``transactions`` view's rows: one JSON list, or the table of ``header`` over ``fields``."""
    if args.json:
        _json_line(rows, out)
    else:
        _tool_table(header, [tuple(_producer_cell(f, row[f]) for f in fields) for row in rows], out)
    return EXIT_OK


def _producer_cell(field: str, value: Any) -> str:
    """A ``transactions`` view's table cell: no open transaction as ``None``, as ``kafka-transactions
    describe-producers`` prints it (``DescribeProducersCommand``); others as :func:`_cell`."""
    if field == "current_transaction_start_offset" and value is None:
        return "None"
    return _cell(value)


def _producer_command(args: argparse.Namespace, out: TextIO) -> int:
    """``transactions --producers`` / ``--find-hanging`` / ``--abort``: a partition's producers, its
    hanging transactions, aborting one (Kafka, as ``kafka-transactions`` asks the brokers)."""
    if args.abort and (args.topic is None or args.partition is None or args.start_offset is None):
        raise UsageError("--abort needs --topic T --partition P --start-offset N (the transaction's first "
                         "offset, as --find-hanging lists it)")
    if not args.abort and (args.start_offset is not None or args.execute):
        raise UsageError("--start-offset and --execute go with --abort")
    if args.transactional_id is not None:     # kafka-transactions' describe takes it, its other commands not
        raise UsageError("--transactional-id goes with the transactional ids' view (no --producers, "
                         "--find-hanging or --abort)")
    if args.max_transaction_timeout is not None and not args.find_hanging:
        raise UsageError("--max-transaction-timeout goes with --find-hanging")
    if args.max_transaction_timeout is not None and args.max_transaction_timeout < 0:
        raise UsageError("--max-transaction-timeout: expected minutes >= 0, found "
                         f"{args.max_transaction_timeout}")
    damaged = False
    with _open(args, mode="a" if args.execute else "r") as store:
        if args.find_hanging and hasattr(store, "half_messages"):     # RocketMQ's half messages
            timeout = None if args.max_transaction_timeout is None else args.max_transaction_timeout * 60_000
            rows, notes = store.half_messages(args.topic, args.partition, now_ms=args.now_ms,
                                              max_timeout_ms=timeout)
            for note in notes:
                sys.stderr.write(f"segstore transactions: {args.path}: {note}\n")
            # segstore's own table (no tool prints one): a text cell from the messages' properties (the
            # real topic, msgId, producer group) is one word, so that a tab or line break in it does not
            # split the table's columns or rows (text_word)
            shown = rows if args.json else [
                {f: text_word(v) if isinstance(v, str) else v for f, v in row.items()} for row in rows]
            return _rows_out(args, HALF_HEADER, _HALF_FIELDS, shown, out)
        for method in ("producers", "hanging_transactions", "open_transaction", "abort_transaction"):
            if not hasattr(store, method):
                given = "--producers" if args.producers else "--abort" if args.abort else "--find-hanging"
                hint = " (their transactions are half messages: --find-hanging)" \
                    if hasattr(store, "half_messages") else ""
                raise UsageError(f"{given}: {store.format} stores keep no producer state{hint}", args.path)
        missing = _missing_selection(store, args)  # named with what the log dir holds, as other commands
        if missing is not None:
            raise missing
        if args.producers:
            found = store.producers(args.topic, args.partition, now_ms=args.now_ms)
            rows = [{"topic": t, "partition": p, **producer} for (t, p), producers in found.items()
                    for producer in producers]
            header, fields = PRODUCER_HEADER, ("topic", "partition", *_PRODUCER_FIELDS)
        elif args.find_hanging:
            timeout = None if args.max_transaction_timeout is None else args.max_transaction_timeout * 60_000
            rows, notes, damage = store.hanging_transactions(args.topic, args.partition, now_ms=args.now_ms,
                                                             max_timeout_ms=timeout)
            for note in (*notes, *damage):
                sys.stderr.write(f"segstore transactions: {note}\n")
            damaged = bool(damage)
            header, fields = HANGING_HEADER, _HANGING_FIELDS
        else:
            act = store.abort_transaction if args.execute else store.open_transaction
            rows = [{"topic": args.topic, "partition": args.partition,
                     **act(args.topic, args.partition, args.start_offset, now_ms=args.now_ms)}]
            header, fields = PRODUCER_HEADER, ("topic", "partition", *_PRODUCER_FIELDS)
    _rows_out(args, header, fields, rows, out)
    if args.abort and not args.execute:
        sys.stderr.write("segstore transactions: a plan only, nothing written: add --execute (with the "
                         "broker stopped) to write the ABORT marker\n")
    return EXIT_DATA if damaged else EXIT_OK


def cmd_transactions(args: argparse.Namespace, out: TextIO) -> int:
    if args.producers or args.find_hanging or args.abort:
        return _producer_command(args, out)
    for flag, given in (("--topic", args.topic is not None), ("--partition", args.partition is not None),
                        ("--start-offset", args.start_offset is not None), ("--execute", args.execute),
                        ("--max-transaction-timeout", args.max_transaction_timeout is not None),
                        ("--now-ms", args.now_ms is not None)):
        if given:
            raise UsageError(f"{flag} goes with --producers, --find-hanging or --abort")
    with _open(args) as store:
        states = store.transaction_states(args.transactional_id)
    errors = [s for s in states if "error" in s or "note" in s]
    states = [s for s in states if "error" not in s and "note" not in s]
    for state in errors:
        sys.stderr.write(f"segstore transactions: {args.path}: {state.get('error', state.get('note'))}\n")
    # what was read is shown; a file that did not read whole makes it exit 1, as dump does
    failed = EXIT_DATA if any(state.get("damage") for state in errors) else EXIT_OK
    if args.transactional_id is not None and not states:
        sys.stderr.write(f"segstore transactions: {args.path}: no transactional id "
                         f"{cut(args.transactional_id)}\n")
        return EXIT_DATA
    if args.json:
        _json_line(states, out)
        return failed
    rows = [tuple(_transaction_cell(f, s[f]) for f in _TRANSACTION_FIELDS) for s in states]
    _tool_table(TRANSACTION_HEADER, rows, out)
    return failed


def _transaction_cell(field: str, value: Any) -> str:
    """A ``transactions`` table cell: partitions comma-separated; a start time the log holds as negative
    (none) as ``None``, as kafka-transactions describe prints it (``DescribeTransactionsHandler`` gives it no
    start time)."""
    if field == "partitions":
        return ",".join(value)
    if field == "start_timestamp" and value < 0:
        return "None"
    return str(value)


def cmd_formats(args: argparse.Namespace, out: TextIO) -> int:
    code = EXIT_OK
    rows = []
    for entry in registry.available():
        row = {"name": entry.name, "entry_point": entry.value, "distribution": entry.distribution,
               "description": None, "error": None}
        try:
            row["description"] = registry.get(entry.name).description
        except SegstoreError as err:
            row["error"] = str(err)
            code = EXIT_DATA
        rows.append(row)
    if args.json:
        _json_line(rows, out)
        return code
    for row in rows:
        out.write(f"{row['name']}: {row['error'] or row['description']}\n"
                  f"  from {row['distribution'] or '(no distribution)'}, entry point {row['entry_point']}\n")
    return code


# -- parser --------------------------------------------------------------------

#: ``--config-file``'s help (every command that takes ``--config``)
CONFIG_FILE_HELP = ("the broker's own config file (RocketMQ broker.conf, Kafka server.properties), read as "
                    "the broker reads it: the names concerning the store taken, the others ignored; "
                    "--config wins over it")

def _common(p: argparse.ArgumentParser, *, path_after_optional_values: bool = False) -> None:
    """The store path and ``--format``/``--config``.  ``path_after_optional_values``: the command has
    options whose value may be left out (``consumers --state [STATES]``), which take a path written
    right after them; the path is then optional to argparse and :func:`_path_taken_back` finds it."""
    p.add_argument("path", nargs="?" if path_after_optional_values else None,
                   help="store directory (RocketMQ) or partition / log directory (Kafka)")
    p.add_argument("--format", type=format_name,
                   help=f"the format PATH must hold ({', '.join(registry.names())}); detected if omitted")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a format config value, by the broker's own name (repeatable)")
    p.add_argument("--config-file", metavar="FILE", help=CONFIG_FILE_HELP)


def _selectors(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", help="only this topic")
    p.add_argument("--queue", type=whole_number, help="RocketMQ queue id")
    p.add_argument("--partition", type=whole_number, help="Kafka partition (alias of --queue)")


def _json_flag(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"{what} (stdout holds JSON only)")


def _thread_count(text: str) -> int:
    """``--threads N``: a whole number from 1 to :data:`segstore.overlap.MAX_THREADS` (argparse turns
    the error into its usage line and exit 2)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of threads, at least 1, found "
                                         f"{shown_text(text)}")
    if value > overlap.MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected a whole number of threads, at most "
                                         f"{overlap.MAX_THREADS}, found {shown_text(text)}")
    return value


def _threads_flag(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--threads", type=_thread_count, metavar="N",
                   help=f"{what} on N threads, 1 to {overlap.MAX_THREADS}, 1 being the calling thread alone "
                        "(default: $SEGSTORE_THREADS, else the cores this process may use where it may use "
                        "3 or more, else one range with a second core's help); the output is the same with "
                        "any N")


def _decompress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--decompress-bodies", action="store_true",
                   help="RocketMQ: each body as consumers read it, inflated where its producer compressed "
                        "it (sysFlag 0x1, then cleared); default: as stored")


def _isolation_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--isolation", choices=ISOLATION_LEVELS, default=READ_UNCOMMITTED,
                   help="as a Kafka consumer's isolation.level: read_uncommitted (default) shows every "
                        "stored record; read_committed hides what a read_committed consumer is not given "
                        "(Kafka: transaction markers and aborted transactions; RocketMQ: prepared and "
                        "rolled-back transaction messages)")


#: ``write --help``: what an ``--input`` line may be (docs/cli.md has the whole of it).
_WRITE_INPUT_LINES = (
    'input lines (docs/cli.md, "JSON-lines input"): a plain message, {"topic": ..., "value": ..., '
    '"key": ..., "partition": ..., "headers": [[k, v], ...], "timestamp": ...} or RocketMQ\'s names '
    "(queue_id, body, tags, keys, properties, ...), strings as UTF-8 text, bodyBase64/valueBase64/"
    "keyBase64 for binary bytes (Kafka: a keyed line naming no partition goes to its key's partition, "
    "as Kafka's producer chooses it); or a line of `segstore dump --json`, written back as it was stored "
    "(bodies base64, Kafka batches with their offsets), so `segstore dump SRC --json | segstore write "
    "DST --input -` copies a store byte for byte (RocketMQ: give DST the source's --config "
    "mappedFileSizeCommitLog and mappedFileSizeConsumeQueue)")


#: The namespace attribute where :class:`_OnceAction` keeps the options given so far: dest -> (flag, value)
_GIVEN = "_options_given"


class _OnceAction(argparse._StoreAction):
    """An option that takes one value, given at most once: every such option of every command (the
    parsers :class:`_Parser` makes take it for ``add_argument`` without an ``action``).  argparse keeps
    the last and drops the first without a word (``dump --topic a --topic b`` dumped b,
    ``delete-records --before 1 --before 2`` moved the log start to 2); Kafka's tools refuse a second
    value of such an option (jopt-simple's ``valueOf``: ``OptionException``) and mqadmin keeps the first
    (commons-cli's ``getOptionValue``).  Options meant to repeat say so (``action="append"``: ``--config``,
    ``--files``, ``convert --topic``); a flag given twice means what it means once.

    :raises argparse.ArgumentError: given again (a usage error, exit 2, the command's usage).
    """

    #: what the message adds after "segstore takes one"
    advice = ""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given: dict[str, tuple[str | None, Any]] = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given and self.option_strings:     # a positional is matched once, or (``*``) twice
            flag, before = given[self.dest]
            said = "" if flag == option_string else f" as {flag}"
            raise argparse.ArgumentError(self, f"expected once, found it given twice ({cut(before)}{said}, "
                                               f"then {cut(values)}): segstore takes one{self.advice}")
        given[self.dest] = (option_string, values)
        super().__call__(parser, namespace, values, option_string)


class _ConsumerGroupsOnce(_OnceAction):
    """``consumers --group`` / ``--topic``, which kafka-consumer-groups takes several times (several
    groups, several topics) where segstore takes one."""

    advice = " (where kafka-consumer-groups takes several, run one command each)"


class _Parser(argparse.ArgumentParser):
    """The parser of the command line and of each command: an option that takes a value takes it once
    (:class:`_OnceAction`), whichever command (or plugin package) adds it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _OnceAction)
        self.register("action", "store", _OnceAction)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's refusal of a value outside ``choices`` (a command, ``--index``, ``--isolation``...),
        the value cut to a readable length (argparse echoed a 70,000-character one whole)."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {cut(value)} (choose from {choices})")


class _VersionAction(argparse._VersionAction):
    """``--version``: the installed version is looked up when asked for (a metadata scan of the
    installed packages, 5 ms that no other command needs)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        self.version = f"segstore {_version()}"
        super().__call__(parser, namespace, values, option_string)


class _Unbuilt:
    """What :class:`_OnlyCommand` gives for a command this run does not parse: every call that would
    add arguments, groups or defaults to its parser does nothing."""

    def __getattr__(self, name: str) -> Any:
        return self._nothing

    def _nothing(self, *args: Any, **kwargs: Any) -> _Unbuilt:
        return self


class _OnlyCommand:
    """The subcommands of a command line that names ``command``: each is registered (its name, aliases
    and help, so usage and errors read as with all of them built), only ``command``'s parser is made:
    argparse makes the others' through :meth:`make`, which gives an :class:`_Unbuilt` (making the
    commands' parsers and their arguments was 10-15 ms of a 0.25 s ``segstore info``, the empty
    parsers of the other commands alone 3-5 ms)."""

    def __init__(self, command: str) -> None:
        self._command = command
        self._building = False
        self.sub: Any = None    # the subparsers action, whose parser_class is :meth:`make`

    def make(self, **kwargs: Any) -> Any:
        """The ``parser_class`` argparse makes each subcommand's parser with."""
        return _Parser(**kwargs) if self._building else _Unbuilt()

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self._building = name == self._command or self._command in kwargs.get("aliases", ())
        return cast(argparse.ArgumentParser, self.sub.add_parser(name, **kwargs))


#: The top-level options that print and exit where they stand, whatever follows them: a command line
#: starting with one needs no command's parser (they made 207 of the 209 ``add_argument`` calls of
#: ``segstore --help``, 27M of its 315M instructions; the help lists the commands by the names and help
#: they are registered with).
_EXITING = frozenset({"-h", "--help", "--version"})


#: What ``segstore --help`` says first (the module's docstring is written for the source's reader)
DESCRIPTION = ("Read, write, verify, recover, query and convert Apache RocketMQ broker stores and Apache "
               "Kafka partition directories.")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the ``command`` a command line names, only that subcommand's
    arguments are made (the others' names and help are there, as usage shows them)."""
    parser = _Parser(prog="segstore", description=DESCRIPTION,
                     epilog="exit codes: 0 ok, 1 data problem or no match, 2 usage, 130 interrupted (Ctrl-C)")
    parser.add_argument("--version", action=_VersionAction)
    sub: Any
    if command is None:
        sub = parser.add_subparsers(dest="command", required=True)
    else:
        sub = _OnlyCommand(command)
        sub.sub = parser.add_subparsers(dest="command", required=True, parser_class=sub.make)

    p = sub.add_parser("dump", help="print every message of a store (human-readable, or --json one object a "
                                    "line), or single store files as kafka-dump-log --files does")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="a store directory (RocketMQ) or partition / log directory (Kafka); or one or more "
                        "single files: Kafka .log, .index, .timeindex, .txnindex, .snapshot, KRaft "
                        ".checkpoint, leader-epoch-checkpoint; RocketMQ commitlog, consume-queue, IndexFile, "
                        "checkpoint")
    p.add_argument("--format", type=format_name,
                   help=f"the format PATH must hold ({', '.join(registry.names())}); detected if omitted")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a format config value, by the broker's own name (repeatable)")
    p.add_argument("--config-file", metavar="FILE", help=CONFIG_FILE_HELP)
    _selectors(p)
    _json_flag(p, "one dump object a line")
    p.add_argument("--tag", help="only messages whose TAGS equal this, or one of 'TagA || TagB' ('*': all), "
                   "as a consumer's subscription (RocketMQ), queue by queue")
    p.add_argument("--group", help="only what this consumer group has not consumed yet: each partition "
                                   "(queue) it committed, from its committed offset to the end (its lag)")
    p.add_argument("--begin", type=time_ms, metavar="TIME",
                   help="only messages from this time on (ms or ISO-8601; UTC if no offset): in each queue "
                        "/ partition from the first offset stored at or after it, as a consumer seeking by "
                        "time (RocketMQ store time, Kafka record timestamp; mqadmin printMsg -b)")
    p.add_argument("--end", type=time_ms, metavar="TIME",
                   help="only messages up to this time, inclusive: in each queue / partition up to the "
                        "first offset stored after it (mqadmin printMsg -e)")
    p.add_argument("--follow", action="store_true",
                   help="then keep printing messages as they are stored, as tail -f (each queue's new "
                        "offsets; Ctrl-C ends it, exit 0)")
    p.add_argument("--interval", type=float, metavar="SECONDS",
                   help=f"with --follow: how often to look for new messages (default {FOLLOW_INTERVAL:g}, at "
                        f"most {MAX_FOLLOW_INTERVAL})")
    _isolation_flag(p)
    _decompress_flag(p)
    _threads_flag(p, "read and format a store directory")
    p.add_argument("--index", action="store_true",
                   help="also dump the index files (Kafka .index/.timeindex/.txnindex; RocketMQ consume "
                        "queues and IndexFiles) and check them against the log")
    files_only = p.add_argument_group("single files (kafka-dump-log's flags)")
    files_only.add_argument("--files", action="append", metavar="FILE[,FILE...]",
                            help="single files to dump, comma-separated, as kafka-dump-log takes them (the "
                                 "same as naming them as PATHs)")
    files_only.add_argument("--print-data-log", action="store_true",
                            help="print each record's key and payload (implies --deep-iteration)")
    files_only.add_argument("--deep-iteration", action="store_true",
                            help="print every record of each batch, not only the batch headers")
    for which in ("key", "value"):
        files_only.add_argument(f"--{which}-decoder", choices=sorted(PAYLOAD_DECODERS),
                                help=f"how {which} bytes are printed (default utf-8; implies "
                                     "--print-data-log)")
        files_only.add_argument(f"--{which}-decoder-class", dest=f"{which}_decoder", type=decoder_class,
                                metavar="CLASS",
                                help=f"kafka-dump-log's name of a {which} decoder: its String, Integer or "
                                     "Long Decoder, as --" + which + "-decoder utf-8, integer or long")
    files_only.add_argument("--offsets-decoder", action="store_true",
                            help="decode __consumer_offsets records (offset commits, group metadata)")
    files_only.add_argument("--transaction-log-decoder", action="store_true",
                            help="decode __transaction_state records (transaction metadata)")
    files_only.add_argument("--cluster-metadata-decoder", action="store_true",
                            help="decode KRaft __cluster_metadata records (type, version, fields)")
    files_only.add_argument("--max-bytes", type=whole_number, metavar="N",
                            help="read only the whole batches / messages within the first N bytes of "
                                 "a log file")
    files_only.add_argument("--index-sanity-check", action="store_true",
                            help="only run the broker's start-up sanity check on .index/.timeindex files")
    files_only.add_argument("--verify-index-only", action="store_true",
                            help="check index entries against the log without printing them")
    files_only.add_argument("--skip-record-metadata", action="store_true",
                            help="leave out each record's offset/timestamp/size fields")
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser("info", help="topics, queues/partitions, offset ranges, files and sizes")
    _common(p)
    _selectors(p)
    _json_flag(p, "one JSON object")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("verify", help="check every file; exit 1 with one path:pos line per problem")
    _common(p)
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing when the store is clean")
    _threads_flag(p, "decode the logs")
    _json_flag(p, 'one object {"path", "ok", "problems": [{"path", "pos", "message"}]}')
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("recover", help="repair what a crash left (torn tails kept aside); say what was done")
    _common(p)
    _threads_flag(p, "Kafka: recover the partitions and decode their logs; RocketMQ: walk the commitlog of "
                     "the full check;")
    _json_flag(p, 'one object {"path", "actions": [...]}')
    p.set_defaults(func=cmd_recover)

    p = sub.add_parser("query", help="look messages up by key, offset or timestamp; exit 1 when none match")
    _common(p)
    _selectors(p)
    p.add_argument("--key", help="messages carrying this key (RocketMQ KEYS/UNIQ_KEY; Kafka record key, "
                                 "from the extra key index)")
    p.add_argument("--offset", type=whole_number,
                   help="queue / partition offset of the first message to print")
    p.add_argument("--count", type=whole_number, default=None,
                   help="with --offset (Kafka: or --timestamp): this many messages (default 1)")
    p.add_argument("--timestamp", type=list_offsets_time,
                   help="the first offset stored at or after this time (ms since the epoch, or ISO-8601; UTC "
                        "if no offset); Kafka also earliest, latest, max-timestamp (or -2, -1, -3) and -4 "
                        "(earliest local: the log start, as there is no remote storage), as "
                        "kafka-get-offsets --time; another negative is refused")
    p.add_argument("--begin", type=time_ms,
                   help="key query window start, inclusive (ms or ISO-8601), of the time the broker looks "
                        "keys up by: RocketMQ the store time as its IndexFile keeps it (whole seconds after "
                        "the file's first entry), Kafka the record timestamp")
    p.add_argument("--end", type=time_ms, help="key query window end, inclusive (ms or ISO-8601)")
    p.add_argument("--msg-id", help="RocketMQ msgId: the offset msgId (store host + commitlog offset, 32 or "
                                    "56 hex digits), or with --topic a client msgId (UNIQ_KEY), as mqadmin "
                                    "queryMsgById")
    p.add_argument("--tag", help="with --offset: the next --count messages whose TAGS equal this, or one of "
                   "'TagA || TagB' ('*': any), as a consumer's subscription (RocketMQ)")
    p.add_argument("--max", type=whole_number, default=None,
                   help="at most this many key hits in all (not per queue), the newest (default: all); says "
                        "how many were left out")
    _isolation_flag(p)
    _decompress_flag(p)
    _json_flag(p, "one dump object a line")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("write", help="write a store from a fixture spec or a JSON-lines file of messages",
                       description="Append the messages of a JSON-lines file (--input) to a store, creating "
                                   "it, or write a store from a compat-fixture spec (--spec).",
                       epilog=_WRITE_INPUT_LINES)
    _common(p)
    p.add_argument("--spec", help="a compat-fixture spec.json (into a new or empty directory)")
    p.add_argument("--input", metavar="FILE.jsonl",
                   help="a file of one JSON message per line, or - for stdin (appended; creates the store, "
                        "of the format of the dump --json lines it holds, else --format, else rocketmq)")
    p.set_defaults(func=cmd_write)

    p = sub.add_parser("consumers", help="consumer groups: committed offset, log end offset, lag and state "
                                         "per partition (queue), as kafka-consumer-groups --describe (Kafka "
                                         "__consumer_offsets; RocketMQ config/consumerOffset.json)")
    _common(p, path_after_optional_values=True)
    p.add_argument("--group", action=_ConsumerGroupsOnce,
                   help="only this consumer group (exit 1 when there is none)")
    p.add_argument("--all-groups", action="store_true",
                   help="every group (the default without --group), as kafka-consumer-groups takes it")
    p.add_argument("--describe", action="store_true",
                   help="the default view (kafka-consumer-groups --describe), taken as the tool takes it")
    p.add_argument("--offsets", action="store_true",
                   help="the default view, a row a partition (kafka-consumer-groups --describe --offsets), "
                        "taken as the tool takes it")
    p.add_argument("--now-ms", type=now_ms, metavar="TIME",
                   help="Kafka: judge offset expiry at this time (ms or ISO-8601; default: the newest "
                        "record's time in __consumer_offsets); with --reset-offsets --execute, the "
                        "commit's time (default: the clock); with --by-duration, its now (RocketMQ too)")
    p.add_argument("--offsets-retention-minutes", type=retention_minutes, metavar="N",
                   help="Kafka: the broker's offsets.retention.minutes, 1 to 2147483647 (default 10080, 7 "
                        "days)")
    _json_flag(p, "one JSON list of {group, topic, partition, committed_offset, log_end_offset, lag, "
                  "consumer_id, host, client_id, state, extras}")
    p.add_argument("--hidden", action="store_true",
                   help="RocketMQ: also the rows mqadmin consumerProgress does not list, which stderr "
                        "names: offsets of a topic config/topics.json lacks (deleted), queues past its "
                        "readQueueNums")
    p.add_argument("--list", action="store_true",
                   help="the groups' ids, a line each (kafka-consumer-groups --list); with --state / --type "
                        "a table with those columns")
    p.add_argument("--state", nargs="?", const="", metavar="STATES",
                   help="a line a group: coordinator partition, assignment strategy, state, member count "
                        "(kafka-consumer-groups --describe --state); with --list, the STATE column, and "
                        "comma-separated states (Stable,Empty...) keep only those")
    p.add_argument("--type", nargs="?", const="", metavar="TYPES",
                   help="with --list: the TYPE column (Classic, or Consumer for KIP-848 groups); "
                        "comma-separated types keep only those")
    p.add_argument("--members", action="store_true",
                   help="a line a member, whether or not it holds partitions: consumer id, group instance id "
                        "(static members), host, client id, partition count (kafka-consumer-groups "
                        "--describe --members)")
    p.add_argument("--verbose", action="store_true",
                   help="with --members: also each member's ASSIGNMENT, as topic(partitions)")
    p.add_argument("--topic", action=_ConsumerGroupsOnce,
                   help="only this topic's partitions (queues): the groups consuming it and their rows of "
                        "it, or what --reset-offsets / --delete change; TOPIC:0,1 for those partitions "
                        "(with --reset-offsets, committed or not)")
    reset = p.add_argument_group("resetting or deleting a group's offsets (broker stopped; as "
                                 "kafka-consumer-groups --reset-offsets / --delete-offsets / --delete, "
                                 "mqadmin resetOffsetByTime / deleteSubGroup)")
    reset.add_argument("--reset-offsets", action="store_true",
                       help="plan new offsets for --group (the partitions it committed, RocketMQ every "
                            "queue of their topics; or every partition of --topic, committed or not), each "
                            "clamped to its range; written only with --execute")
    target = reset.add_mutually_exclusive_group()
    target.add_argument("--to-datetime", type=time_ms, metavar="TIME",
                        help="each one's first offset stored at or after TIME (its end if none is)")
    target.add_argument("--to-earliest", action="store_true", help="each one's first offset")
    target.add_argument("--to-latest", action="store_true", help="each one's end (nothing left to consume)")
    target.add_argument("--to-offset", type=_java_long, metavar="N", help="offset N in each")
    target.add_argument("--shift-by", type=_java_long, metavar="N",
                        help="each committed offset moved by N (negative: back)")
    target.add_argument("--by-duration", type=duration_ns, metavar="DURATION",
                        help="as --to-datetime of now (--now-ms, else the clock) minus an ISO-8601 duration "
                             "(P1DT2H, PT30M)")
    target.add_argument("--to-current", action="store_true",
                        help="each committed offset as it is, not clamped, as the tool keeps it (the end "
                             "where none is): with --export, the group's position saved for --from-file")
    target.add_argument("--from-file", metavar="CSV",
                        help="the offsets of a CSV file, topic,partition,offset a line (or "
                             "group,topic,partition,offset: --group's lines), as --export writes; - for "
                             "stdin")
    reset.add_argument("--converted-from", metavar="FORMAT",
                       help="--from-file's topics and offsets are those of the FORMAT store this one was "
                            "converted from (segstore convert): each topic as the conversion named it, "
                            "each offset where a consumer that committed it goes on here (Kafka -> "
                            "RocketMQ: the first message converted from that offset or a later one)")
    reset.add_argument("--export", action="store_true",
                       help="print the plan as the CSV --from-file reads, topic,partition,offset a line")
    reset.add_argument("--delete", action="store_true",
                       help="delete --group's committed offsets of --topic (Kafka: TOPIC:0,1 those "
                            "partitions'), or the whole group (as kafka-consumer-groups --delete-offsets / "
                            "--delete); only with --execute")
    reset.add_argument("--delete-offsets", action="store_true",
                       help="--delete of --topic's offsets (kafka-consumer-groups' name; needs --topic)")
    reset.add_argument("--all-topics", action="store_true",
                       help="with --reset-offsets: every partition the group committed, the default "
                            "(kafka-consumer-groups' scope option, taken as the tool takes it)")
    reset.add_argument("--dry-run", action="store_true",
                       help="print the plan and write nothing, the default without --execute "
                            "(kafka-consumer-groups' option, taken as the tool takes it)")
    reset.add_argument("--execute", action="store_true",
                       help="write the plan: RocketMQ config/consumerOffset.json (the file before kept as "
                            ".bak), Kafka one batch of offset commits (or tombstones) in the group's "
                            "__consumer_offsets partition")
    p.set_defaults(func=cmd_consumers)

    p = sub.add_parser("transactions", help="Kafka transactional ids from __transaction_state: producer id "
                                            "and epoch, state, partitions, as kafka-transactions describe")
    _common(p)
    p.add_argument("--transactional-id", help="only this transactional id (exit 1 when there is none)")
    _json_flag(p, "one JSON list of {transactional_id, producer_id, producer_epoch, state, timeout_ms, "
                  "start_timestamp, last_update_timestamp, partitions, coordinator_partition} (with "
                  "--producers, --find-hanging, --abort: of their rows)")
    what = p.add_argument_group("producers and hanging transactions (Kafka partitions, as kafka-transactions "
                                "describe-producers, find-hanging, abort)").add_mutually_exclusive_group()
    what.add_argument("--producers", action="store_true",
                      help="each partition's active producers: epoch, last sequence and timestamp, the "
                           "coordinator epoch of its last marker, the start of its open transaction")
    what.add_argument("--find-hanging", action="store_true",
                      help="transactions open longer than --max-transaction-timeout that no coordinator "
                           "state here still finishes (they hold back read_committed consumers and "
                           "compaction); RocketMQ: half messages no commit or rollback finished, older than "
                           "transactionTimeOut, as the broker's transaction check finds them")
    what.add_argument("--abort", action="store_true",
                      help="abort the transaction open in --topic/--partition from --start-offset: an ABORT "
                           "marker, written only with --execute (the broker stopped)")
    p.add_argument("--topic", help="with --producers, --find-hanging, --abort: this topic's partitions")
    p.add_argument("--partition", type=whole_number, help="with --topic: this partition")
    # kafka-transactions (argparse4j): --start-offset a Long, --max-transaction-timeout an Integer
    p.add_argument("--start-offset", type=_java_long, metavar="N",
                   help="with --abort: the transaction's first offset")
    p.add_argument("--max-transaction-timeout", type=_java_int, metavar="MIN",
                   help="with --find-hanging: open longer than this many minutes (default 15)")
    p.add_argument("--now-ms", type=now_ms, metavar="TIME",
                   help="with --producers, --find-hanging, --abort: judge at this time (ms or ISO-8601; "
                        "default: the clock); --abort writes the marker with it")
    p.add_argument("--execute", action="store_true", help="with --abort: write the marker")
    p.set_defaults(func=cmd_transactions)

    p = sub.add_parser("formats", help="the installed format plugins: name, description, where from")
    _json_flag(p, "one JSON list")
    p.set_defaults(func=cmd_formats)

    # Conversion and extra index layouts are packages of their own; they add their subcommands.
    from . import maintenance
    from .convert import cli as convert_cli
    from .layouts import cli as layouts_cli

    convert_cli.add_cli(sub)
    layouts_cli.add_commands(sub)
    maintenance.add_cli(sub)
    _remember_parsers(parser)
    return parser


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command's namespace its own parser, so that an unknown flag prints that
    command's usage rather than the top-level one (argparse hands unknown flags to the top)."""
    parser.set_defaults(_parser=parser)
    for action in parser._actions:  # argparse has no public way to walk its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if isinstance(child, argparse.ArgumentParser):   # not a command this run leaves unbuilt
                    _remember_parsers(child)


def progress_sink(args: argparse.Namespace, out: TextIO, stream: TextIO | None = None) -> progress.Sink:
    """The progress display of every command: tqdm bars (total, rate, ETA) on ``stream`` (stderr) when
    both stdout and it are terminals and the output is not ``--json``; otherwise nothing at all."""
    stream = sys.stderr if stream is None else stream
    if getattr(args, "json", False) or not (_on_terminal(out) and _on_terminal(stream)):
        return progress.SILENT
    return progress.TqdmSink(stream)


#: What the library advises in its own terms, and what a command-line user does instead.
_READERS = "reading commands such as segstore dump, info, query and verify work meanwhile"
_LIBRARY_ADVICE = (
    ("; open it with mode='r' to read", f"; wait for it to finish ({_READERS})"),
    (", or open with mode='r' to read", f" ({_READERS})"),
    ("remote stores are read-only: open them with mode='r'", "remote stores are read-only: only the reading "
                                                             "commands take a URL"),
)
_FORMAT_ADVICE = ("; pass --format to say which it should be", "; pass --format")


def cli_words(err: SegstoreError, args: argparse.Namespace) -> SegstoreError:
    """``err`` with the library's advice put in the command line's terms: no ``mode='r'``, and no
    ``--format`` for a command that has no such option (``convert``)."""
    message = err.message
    if message.startswith("expected mode='r' for a URL"):
        message = (f"expected a local path for segstore {args.command}, found a URL (remote stores are "
                   "read-only: only the reading commands take a URL)")
    for library, cli in _LIBRARY_ADVICE:
        message = message.replace(library, cli)
    parser = getattr(args, "_parser", None)
    if parser is not None and "--format" not in parser._option_string_actions:  # argparse: no public way
        for advice in _FORMAT_ADVICE:
            message = message.replace(advice, "")
    if message == err.message:
        return err
    return type(err)(message, err.path, err.pos)


#: Control characters a terminal acts on (C0 but newline and tab, DEL, C1), written as ``\u001b`` as the
#: dump's bodies are: names, keys and tags come from the files, and a terminal shown
#: ``ESC [ 2 J`` clears itself (or worse).
_TERMINAL_ESCAPES = {c: f"\\u{c:04x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))
                     if c not in (0x0A, 0x09)}


class TerminalText:
    """A text stream that writes control characters as ``\\uXXXX`` (:data:`_TERMINAL_ESCAPES`): what the
    CLI prints on a terminal.  Redirected output is left byte for byte as the files hold it."""

    #: no binary buffer: the dump's fast path writes its blocks as text, through :meth:`write`
    buffer = None

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text.translate(_TERMINAL_ESCAPES))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _on_terminal(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code."""
    out = out or sys.stdout
    if _on_terminal(out):
        out = cast(TextIO, TerminalText(out))
    err = sys.stderr
    if not _on_terminal(err) or isinstance(err, TerminalText):
        return _main(argv, out)
    # messages name what the files hold too; the progress bars (their own escapes) keep the raw stream
    sys.stderr = cast(TextIO, TerminalText(err))
    try:
        return _main(argv, out, progress_stream=err)
    finally:
        sys.stderr = err


def _output_error(err: OSError) -> str:
    """The line for an ``OSError`` writing the command's output (``err.filename`` where it names a file)."""
    if err.filename is None and err.errno == errno.EBADF:
        return f"<stdout>: expected an open output to write to, found none ({err.strerror})"
    return str(files._translate(err, err.filename if err.filename is not None else "<stdout>"))


#: What glibc's dynamic loader says of a library it cannot map for want of memory (``dlopen``'s ENOMEM).
_LOADER_OUT_OF_MEMORY = ("failed to map segment from shared object", "cannot allocate memory")


def _out_of_memory(err: BaseException) -> bool:
    """Whether ``err``, or an error that caused it (numpy raises its own ImportError from the loader's),
    is the process running out of memory."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, MemoryError) or (
                isinstance(cause, ImportError) and any(words in str(cause).lower()
                                                       for words in _LOADER_OUT_OF_MEMORY)):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _nul_argument(argv: Sequence[str]) -> str | None:
    """The line refusing an argument that holds a NUL byte, or None.  No command line holds one (``execve``
    takes C strings): only a caller of :func:`main` passes one, and a path with one was looked for
    as a path without it (``os.path.exists`` says False: "no such file or directory") and echoed raw, the
    byte a space on a terminal.  Refused before any call to the system, the byte shown escaped
    (:func:`errors.shown_path`), as the library refuses such a path (:func:`errors.check_path`)."""
    for arg in argv:
        at = arg.find(NUL) if isinstance(arg, str) else -1
        if at >= 0:
            first = argv[0] if isinstance(argv[0], str) else ""
            where = "segstore" if NUL in first or first.startswith("-") else f"segstore {first}"
            shown = shown_path(arg) if len(arg) <= MAX_SHOWN else cut(arg)
            return (f"{where}: {shown}: expected an argument without a NUL byte (no command line holds one), "
                    f"found one at character {at}")
    return None


#: The options that take a time (:func:`time_ms`), and the whole numbers of ms that read as seconds since
#: the epoch: 10 digits, 2001-09-09 to 2286-11-20 as seconds, but January to April 1970 as ms
_TIME_OPTIONS = ("--begin", "--end", "--timestamp", "--now-ms", "--to-datetime")
_SECONDS_LIKE = range(10**9, 10**10)


def _basic_date(text: str) -> str | None:
    """``2023-11-14`` for ``20231114``: an 8-digit number that is an ISO 8601 basic date (``YYYYMMDD``, a
    real month and day), else None."""
    if len(text) != 8:
        return None
    try:
        return datetime.strptime(text, "%Y%m%d").date().isoformat()
    except ValueError:
        return None


def _seconds_notes(argv: Sequence[str]) -> list[str]:
    """A note for each time option given a number that reads as seconds since the epoch (``--begin
    1700000000``, what ``date +%s`` prints): the brokers' times and Kafka's tools take ms, so it is taken
    as ms, a time in 1970 (a dump from it is the whole store), and the note says what it was taken as and
    the ms the seconds would be.  Likewise for an ISO 8601 basic date (``--begin 20231114``, 8 digits of
    a real date): the note gives the ISO form to write (``--begin 2023-11-14``).  What the command does
    is unchanged.  ``O(arguments)``."""
    notes = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name not in _TIME_OPTIONS:
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        text = value.strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 10):
            continue
        day = _basic_date(text)
        seconds = int(text) in _SECONDS_LIKE
        if day is None and not seconds:
            continue
        as_ms = (_EPOCH + timedelta(milliseconds=int(text))).isoformat(timespec="milliseconds")
        if day is not None:
            notes.append(f"note: {name} {text} is taken as milliseconds since the epoch, "
                         f"{as_ms.replace('+00:00', 'Z')}; as a date (YYYYMMDD) it is {name} {day}")
        if not seconds:
            continue
        as_s = (_EPOCH + timedelta(seconds=int(text))).isoformat()
        notes.append(f"note: {name} {text} is taken as milliseconds since the epoch, "
                     f"{as_ms.replace('+00:00', 'Z')}; as seconds ({as_s.replace('+00:00', 'Z')}) it "
                     f"is {name} {int(text) * 1000}")
    return notes


def _main(argv: Sequence[str] | None, out: TextIO, progress_stream: TextIO | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    refused = _nul_argument(argv)
    if refused is not None:
        sys.stderr.write(refused + "\n")
        return EXIT_USAGE
    # the command is the first argument (the top level has no option that takes a value); a first
    # argument that prints and exits (--help, --version) names none, and no command's parser is made
    first = argv[0] if argv else None
    parser = build_parser(first if first is not None and (not first.startswith("-") or first in _EXITING)
                          else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        shown = " ".join(arg if len(arg) <= MAX_SHOWN else cut(arg) for arg in unknown)   # not 70,000 chars
        args._parser.error(f"unrecognized arguments: {shown}")
    for note in _seconds_notes(argv):
        sys.stderr.write(f"segstore {args.command}: {note}\n")
    try:
        with progress.reporting(progress_sink(args, out, progress_stream)):
            return args.func(args, out)
    except UsageError as err:
        sys.stderr.write(f"segstore {args.command}: {cli_words(err, args)}\n")
        return EXIT_USAGE
    except _USAGE_ERRORS as err:
        sys.stderr.write(f"{cli_words(err, args)}\n")
        return EXIT_USAGE
    except SegstoreError as err:
        sys.stderr.write(f"{cli_words(err, args)}\n")
        return EXIT_DATA
    except BrokenPipeError:
        return EXIT_OK
    except OSError as err:
        # the store's files translate their OSErrors where they are met (files.py): what escapes is the
        # output's, stdout on a full disk (> /dev/full) or a descriptor gone bad; a line, never a traceback
        sys.stderr.write(f"segstore {args.command}: {_output_error(err)}\n")
        return EXIT_DATA
    except (MemoryError, ImportError) as err:
        # the process's memory is capped (ulimit -v) or the system's committed: a line, never a
        # traceback; what the command wrote is left as on any failure.  Where it runs out while a
        # module loads lazily (numpy, pyarrow), the dynamic loader cannot map the library's segments
        # and Python raises ImportError instead
        if not _out_of_memory(err):
            raise
        sys.stderr.write(f"segstore {args.command}: expected the memory the command needs, found none "
                         "(a capped address space: ulimit -v?)\n")
        return EXIT_DATA
    except KeyboardInterrupt:
        if getattr(args, "follow", False):     # how a follow ends, wherever it is (reading --group's offsets)
            return EXIT_OK
        # Ctrl-C: what the command left is what its own clean-up made of it (a write removes what
        # it created, a conversion keeps its journal for --resume); a line, never a traceback
        sys.stderr.write(f"segstore {args.command}: interrupted\n")
        return EXIT_INTERRUPTED


#: What :func:`command` puts in its environment unless it is set: numpy's BLAS on one thread
#: (segstore does no linear algebra, and OpenBLAS's pool, started when numpy loads, spins about
#: 0.1 s of another core's time in every command).  Benchmarks start their children with it.
COMMAND_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def command() -> int:
    """The ``segstore`` executable: :func:`main` in a process whose allocator keeps freed memory for
    the next batch (:func:`segstore.allocator.retain`: a one-shot command over a big store gains
    from it, and nothing else in the process would rather give memory back), with
    :data:`COMMAND_ENV`."""
    allocator.retain()
    for name, value in COMMAND_ENV.items():
        os.environ.setdefault(name, value)
    if sys.stdout is None:      # started with stdout closed (>&-): nowhere to write what it answers
        command_name = sys.argv[1] if len(sys.argv) > 1 else ""
        sys.stderr.write(f"segstore {command_name}: <stdout>: expected an open output to write to, found it "
                         "closed\n")
        return EXIT_DATA
    code = main()
    try:    # what is still buffered, while an error can be said (the interpreter's own flush: a traceback)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except OSError as err:
        command_name = sys.argv[1] if len(sys.argv) > 1 else ""
        sys.stderr.write(f"segstore {command_name}: {_output_error(err)}\n")
        code = code or EXIT_DATA
    else:
        return code
    # the interpreter flushes stdout once more on its way out: let that find nothing to fail on
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return code


if __name__ == "__main__":
    # ``python -m segstore.cli`` runs this file as ``__main__``, a second copy of the module beside the
    # ``segstore.cli`` that the subcommand modules import (maintenance, convert, index): their ``UsageError``
    # is not this copy's, so its ``except`` took them for data problems (exit 1, no command name).
    # Run the imported module, as the ``segstore`` executable does.
    from segstore.launch import command as launch

    sys.exit(launch())
