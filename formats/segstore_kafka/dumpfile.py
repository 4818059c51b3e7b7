"""``segstore dump FILE`` for single Kafka files, as ``kafka-dump-log --files`` does.

Which file is which (Kafka 3.8.0 ``kafka.tools.DumpLogSegments.main``: by suffix):
``%020d.log`` and KRaft snapshots ``%020d-%010d.checkpoint`` / ``bootstrap.checkpoint``
(record batches), ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot`` (producer state);
segstore adds ``leader-epoch-checkpoint`` and the log dir's offset checkpoints (text).

Index dumps read the segment's ``.log`` beside them (and the ``.timeindex`` dump its
``.index``), as the tool does, and report where an entry disagrees with the log.  The lines
are the tool's (``DumpLogSegments.printBatchLevel``, ``dumpIndex``, ``dumpTimeIndex``,
``dumpTxnIndex``, ``dumpProducerIdSnapshot``); ``data`` carries the same fields for ``--json``.
Only :mod:`segstore.files` opens the files.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError, SegstoreError, TruncatedDataError
from segstore.javatext import java_utf8
from segstore.plugin import DumpLine, FileDumpOptions

from . import batch as codec
from . import snapshot
from .checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_leader_epochs,
    read_offsets,
)
from .dirnames import KRAFT_SNAPSHOT, OFFSET_LIMIT, kraft_snapshot_id
from .offsetindex import OFFSET_ENTRY
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .timeindex import TIME_ENTRY
from .txnindex import ABORTED_TXN
from .txnindex import CURRENT_VERSION as CURRENT_TXN_VERSION

SNAPSHOT_SUFFIX = snapshot.SUFFIX
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"  # BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME
OFFSET_CHECKPOINTS = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
_SEGMENT_NAME = re.compile(r"^(\d{20})(\.[a-z]+)$")
#: Files Kafka writes beside those that kafka-dump-log's main skips with ``Ignoring unknown file X``
#: (their suffix, from the last dot, is none of its five): a partition's ``partition.metadata``, a log
#: dir's ``meta.properties``, ``.lock`` (``LogManager.LockFileName``) and ``.kafka_cleanshutdown``
#: (``CleanShutdownFileHandler``), the metadata partition's ``quorum-state``
#: (``FileQuorumStateStore.DEFAULT_FILE_NAME``: a name without a dot, on which the tool's
#: ``filename.substring(filename.lastIndexOf("."))`` throws, so ``dump __cluster_metadata-0/*`` died
#: there), each of these, the text checkpoints and ``bootstrap.checkpoint`` as ``NAME.tmp``
#: (``CheckpointFile``, ``FileQuorumStateStore``, ``PropertiesUtils``, ``PartitionMetadataFile`` and
#: ``BootstrapDirectory`` write there first, and a crash leaves it), and
#: segment or snapshot files a deletion, cleaning, swap or write left with a second suffix
#: (``.log.deleted``, ``.index.swap``, ``.checkpoint.part``, ...).
IGNORED_NAMES = ("partition.metadata", "meta.properties", ".lock", ".kafka_cleanshutdown", "quorum-state")
_SUFFIXED_SEGMENT = re.compile(r"^\d{20}(-\d{10})?\.[a-z]+\.(deleted|cleaned|swap|part|tmp)$")
#: A KRaft snapshot being written: ``Snapshots.createTempFile`` (Kafka 3.8) names it
#: ``Files.createTempFile(dir, "OFFSET-EPOCH-", ".checkpoint.part")``, the JDK's random digits between;
#: a crash while a snapshot is written leaves it (``KafkaMetadataLog.recoverSnapshots`` deletes it).
_PARTIAL_SNAPSHOT = re.compile(r"^\d{20}-\d{10}-\d+\.checkpoint\.part$")
NO_TIMESTAMP = codec.NO_TIMESTAMP
RECORD_INDENT = "|"  # DumpLogSegments.RecordIndent

#: The internal-topic decoders ``--offsets-decoder`` etc. pick, by their names in :mod:`.internal_topics`
#: (key, value, offset, path, pos) -> texts; that module and its schemas load where one is asked for,
#: or a control record is dumped (a store's plain text dump paid ~1 ms for them).
DECODERS = {"offsets": "decode_offsets", "transaction-log": "decode_transaction_log",
            "cluster-metadata": "decode_cluster_metadata"}


def file_kind(path: str) -> str | None:
    """``log``, ``index``, ``timeindex``, ``txnindex``, ``snapshot``, ``kraft-snapshot``,
    ``leader-epoch-checkpoint`` or ``offset-checkpoint``; ``ignored`` for a file Kafka writes that the
    tool skips (:data:`IGNORED_NAMES`, a second suffix); None for a name Kafka does not write."""
    name = os.path.basename(path)
    if name == LEADER_EPOCH_CHECKPOINT:
        return "leader-epoch-checkpoint"
    if name in OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if name == BOOTSTRAP_SNAPSHOT or re.match(KRAFT_SNAPSHOT, name):
        return "kraft-snapshot"
    if name in IGNORED_NAMES or _SUFFIXED_SEGMENT.match(name) or _PARTIAL_SNAPSHOT.match(name):
        return "ignored"
    if name.endswith(".tmp") and name[:-4] in (*IGNORED_NAMES, *OFFSET_CHECKPOINTS, LEADER_EPOCH_CHECKPOINT,
                                               BOOTSTRAP_SNAPSHOT):
        return "ignored"
    match = _SEGMENT_NAME.match(name)
    if match is None:
        return None
    return {
        LOG_SUFFIX: "log",
        INDEX_SUFFIX: "index",
        TIME_INDEX_SUFFIX: "timeindex",
        TXN_INDEX_SUFFIX: "txnindex",
        SNAPSHOT_SUFFIX: "snapshot",
    }.get(match.group(2))


def java_absolute_path(path: str) -> str:
    """``new java.io.File(path).getAbsolutePath()`` on Unix, as the tool names files in its findings:
    the path with repeated and trailing slashes dropped (``UnixFileSystem.normalize``), after the
    working directory when relative; ``.`` and ``..`` are kept (``os.path.abspath`` folds them)."""
    name = files.java_file_name(path)
    if name.startswith("/"):
        return name
    cwd = os.getcwd()
    if not name:
        return cwd
    return cwd + name if cwd.endswith("/") else f"{cwd}/{name}"


def base_offset(path: str) -> int:
    """The offset a segment file's name stands for (its 20 digits).

    :raises CorruptDataError: 20 digits past a Java long: the tool's ``getName.split("\\.")(0).toLong``
        throws there, and ``LogLoader`` cannot load the segment (verify names it in a partition).
    """
    offset = int(os.path.basename(path).split(".")[0].split("-")[0])
    if offset >= OFFSET_LIMIT:
        raise CorruptDataError(f"expected a segment file named by an offset below 2**63 (a Java long), found "
                               f"{offset}", path)
    return offset


def sibling(path: str, suffix: str) -> str:
    """The file of the same segment with ``suffix``."""
    return os.path.join(os.path.dirname(path), f"{base_offset(path):020d}{suffix}")


def dump_file(path: str, options: FileDumpOptions) -> Iterator[DumpLine]:
    """The dump lines of one Kafka file (see the module docstring)."""
    kind = file_kind(path)
    if kind in ("log", "kraft-snapshot"):
        yield from dump_log(path, options, kind)
    elif kind == "index":
        yield from dump_index(path, options)
    elif kind == "timeindex":
        yield from dump_time_index(path, options)
    elif kind == "txnindex":
        yield from dump_txn_index(path)
    elif kind == "snapshot":
        yield from dump_producer_snapshot(path)
    elif kind == "leader-epoch-checkpoint":
        for entry in read_leader_epochs(path):
            yield DumpLine(
                f"epoch: {entry.epoch} startOffset: {entry.start_offset}",
                {"kind": "entry", "epoch": entry.epoch, "start_offset": entry.start_offset},
            )
    elif kind == "ignored":
        # DumpLogSegments.main: System.err.println(s"Ignoring unknown file $file"), and on to the next file
        yield DumpLine(f"Ignoring unknown file {path}", {"kind": "ignored"}, note=True)
    elif kind == "offset-checkpoint":
        for (topic, partition), offset in read_offsets(path).items():
            yield DumpLine(
                f"topic: {topic} partition: {partition} offset: {offset}",
                {"kind": "entry", "topic": topic, "partition": partition, "offset": offset},
            )
    else:
        raise CorruptDataError(
            "expected a Kafka segment, index, snapshot or checkpoint file name, found "
            f"{os.path.basename(path)!r}",
            path,
        )


class _Mapped:
    """A file mapped read-only for the length of a ``with`` block (absent: empty)."""

    def __init__(self, path: str, *, required: bool = True) -> None:
        self.file = files.MappedFile(path) if required or files.exists(path) else None

    def __enter__(self) -> memoryview:
        return self.file.view() if self.file is not None else memoryview(b"")

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()


# -- record batches ------------------------------------------------------------------------------


def optional_long(value: int | None) -> str:
    """Java's ``OptionalLong.toString()``, as a Scala string concatenation prints one."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def batch_text(batch: codec.RecordBatch, position: int, valid: bool) -> str:
    """``printBatchLevel`` (Kafka 3.8): the v2 header fields (or ``offset:`` for v0/v1), then position,
    time, size.  ``deleteHorizonMs`` is ``RecordBatch.deleteHorizonMs()``, an ``OptionalLong``."""
    if batch.magic >= codec.MAGIC_V2:
        horizon = batch.delete_horizon_ms if batch.attributes & codec.DELETE_HORIZON_FLAG else None
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.record_count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {str(batch.is_transactional).lower()} "
            f"isControl: {str(batch.is_control).lower()} deleteHorizonMs: {optional_long(horizon)}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {position} {batch.timestamp_type}: {batch.max_timestamp} size: {batch.size} "
        f"magic: {batch.magic} compresscodec: {batch.compression} crc: {batch.crc} "
        f"isvalid: {str(valid).lower()}"
    )


def _batch_data(batch: codec.RecordBatch, position: int, valid: bool) -> dict[str, Any]:
    return {
        "kind": "batch",
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "count": batch.record_count,
        "base_sequence": batch.base_sequence,
        "last_sequence": batch.last_sequence,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "partition_leader_epoch": batch.partition_leader_epoch,
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control,
        "delete_horizon_ms": batch.delete_horizon_ms,
        "position": position,
        "timestamp_type": batch.timestamp_type,
        "max_timestamp": batch.max_timestamp,
        "size": batch.size,
        "magic": batch.magic,
        "compression": batch.compression,
        "crc": batch.crc,
        "is_valid": valid,
    }


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def record_text(batch: codec.RecordBatch, record: codec.Record, *, metadata: bool = True,
                control: str = "", payload: tuple[str | None, str | None] | None = None,
                crc: int | None = None, crc_valid: bool = True) -> str:
    """``dumpLog``'s line of one record (Kafka 3.8 ``DumpLogSegments``): ``| offset: ... valueSize: V``,
    then ``sequence: S headerKeys: [a,b]`` (v2) or ``isValid: true crc: C}`` (v0/v1: ``crc`` the
    message's own, :meth:`RecordBatch.records_with_crcs`, ``crc_valid`` whether it matches, the
    tool's ``AbstractLegacyRecordBatch.isValid``; the brace is the tool's), a control record's
    ``control`` text; then with ``payload`` (``(key, value)`` as decoded,
    data records only) ``key: K`` and `` payload: P``.  As the tool builds it: the ``| `` prefix goes
    before the first part printed other than the payload, which always follows a space, so
    ``--skip-record-metadata`` prints `` payload: P`` alone for a keyless record and an empty line
    for a control record."""
    out: list[str] = []
    prefix = f"{RECORD_INDENT} "
    if metadata:
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        out.append(f"{prefix}offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
                   f"keySize: {key_size} valueSize: {value_size}")
        prefix = " "
        if batch.magic >= codec.MAGIC_V2:
            names = ",".join(name for name, _ in record.headers)
            out.append(f" sequence: {record.sequence} headerKeys: [{names}]")
        elif crc is not None:
            out.append(f" isValid: {str(crc_valid).lower()} crc: {crc}}}")
        if batch.is_control:
            out.append(f" {control}")
    if payload is not None and not batch.is_control:
        key, value = payload
        if key is not None:
            out.append(f"{prefix}key: {key}")
        if value is not None:
            out.append(f" payload: {value}")
    return "".join(out)


def control_text(record: codec.Record, data: dict[str, Any] | None = None, *, path: str = "<memory>",
                 pos: int = 0) -> str:
    """What ``dumpLog`` prints of a control record (Kafka 3.8, ``ControlRecordType.fromTypeId``):
    ``endTxnMarker: ABORT coordinatorEpoch: N``; ``SnapshotHeader {...}``, ``SnapshotFooter {...}``,
    ``KRaftVersion {...}``, ``KRaftVoters {...}`` (the records as their JSON converters write them);
    else ``controlType: NAME(ID)``.  One the tool cannot parse (it stops there) reads
    ``controlType: invalid (...)``.  ``data`` gets its fields for ``--json``."""
    data = {} if data is None else data
    try:
        kind, coordinator_epoch = codec.parse_control_record(record.key, record.value)
    except ValueError as err:
        data["control_error"] = str(err)
        return f"controlType: invalid ({err})"
    data["control_type"] = kind
    if coordinator_epoch is not None:
        data["coordinator_epoch"] = coordinator_epoch
        return f"endTxnMarker: {kind} coordinatorEpoch: {coordinator_epoch}"
    from . import internal_topics

    try:
        decoded = internal_topics.decode_control_record(kind, record.value, path=path, pos=pos)
    except CorruptDataError as err:
        data["control_error"] = err.message
        return f"controlType: {kind} invalid ({err.message})"
    if decoded is not None:
        label, text = decoded
        data["control_record"] = text
        return f"{label} {text}"
    assert record.key is not None       # parse_control_record read its type from it
    type_id = codec.CONTROL_KEY.unpack_from(record.key)[1]
    return f"controlType: {kind}({type_id})"


def _record_line(
    batch: codec.RecordBatch, record: codec.Record, options: FileDumpOptions, path: str,
    crc: int | None = None, crc_valid: bool = True,
) -> DumpLine:
    """One record's line (:func:`record_text`) and its ``--json`` object."""
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    data: dict[str, Any] = {
        "kind": "record",
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": batch.timestamp_type,
        "key_size": key_size,
        "value_size": value_size,
    }
    metadata = not options.skip_record_metadata
    control = ""
    if metadata:
        if batch.magic >= codec.MAGIC_V2:
            data.update(sequence=record.sequence, header_keys=[name for name, _ in record.headers])
        if batch.is_control:
            control = control_text(record, data, path=path, pos=batch.position)
    payload = None
    if options.print_data and not batch.is_control:
        payload = _payload(record, options, path, batch.position)
        data.update(key=payload[0], payload=payload[1])
    if crc is not None and metadata:
        data["is_valid"] = crc_valid
    return DumpLine(record_text(batch, record, metadata=metadata, control=control, payload=payload, crc=crc,
                                crc_valid=crc_valid), data)


def _payload(
    record: codec.Record, options: FileDumpOptions, path: str, pos: int
) -> tuple[str | None, str | None]:
    if options.decoder is not None:
        from . import internal_topics

        decode: Callable[..., tuple[str | None, str | None]] = getattr(internal_topics,
                                                                       DECODERS[options.decoder])
        return decode(record.key, record.value, record.offset, path=path, pos=pos)
    decode_key = options.key_decoder or _utf8
    decode_value = options.value_decoder or _utf8
    key = None if record.key is None else decode_key(bytes(record.key))
    value = None if record.value is None else decode_value(bytes(record.value))
    return key, value


def _utf8(data: bytes) -> str:
    """``StringDecoder``: ``new String(bytes, UTF_8)`` (a U+FFFD for each malformed sequence, as Java
    delimits them: one for the three bytes of an encoded surrogate, ``ED A0 80``)."""
    return java_utf8(data)


def dump_log(path: str, options: FileDumpOptions, kind: str = "log") -> Iterator[DumpLine]:
    """``dumpLog``: every batch (deep: every record) of a ``.log`` or KRaft snapshot, up to
    ``max_bytes`` (whole batches only), then torn or invalid bytes and non-consecutive offsets."""
    name = os.path.basename(path)
    if kind == "log":
        yield DumpLine(
            f"Log starting offset: {base_offset(path)}", {"kind": "start", "offset": base_offset(path)}
        )
    elif name == BOOTSTRAP_SNAPSHOT:
        yield DumpLine("KRaft bootstrap snapshot", {"kind": "bootstrap-snapshot"})
    else:
        snapshot_id = kraft_snapshot_id(path)
        if snapshot_id is None:
            raise CorruptDataError(f"expected a KRaft snapshot named OFFSET-EPOCH.checkpoint, found {name!r}",
                                   path)
        end, epoch = snapshot_id
        yield DumpLine(
            f"Snapshot end offset: {end}, epoch: {epoch}",
            {"kind": "snapshot", "end_offset": end, "epoch": epoch},
        )
    deep = options.deep or options.print_data or options.decoder is not None
    with _Mapped(path) as whole:
        limit = len(whole) if options.max_bytes is None else min(len(whole), max(options.max_bytes, 0))
        view = whole[:limit]
        valid_bytes = 0
        last_offset = None
        non_consecutive: list[tuple[int, int]] = []
        problem: SegstoreError | None = None
        try:
            for batch in codec.iter_batches(view, path=path, check_crc=False):
                valid = batch.is_valid()
                yield DumpLine(batch_text(batch, valid_bytes, valid), _batch_data(batch, valid_bytes, valid))
                if deep:
                    try:
                        checked = batch.records_with_checks()
                    except CorruptDataError as err:
                        # The batch's frame holds (its size leads to the next batch): its records do not
                        # decode, which the tool dies on.  Said here, and the batches after it dumped,
                        # rather than every byte from here on called invalid.
                        yield _problem(err)
                        checked = []
                    for record, crc, crc_valid in checked:
                        if last_offset is not None and record.offset != last_offset + 1:
                            non_consecutive.append((last_offset, record.offset))
                        last_offset = record.offset
                        yield _record_line(batch, record, options, path, crc, crc_valid)
                valid_bytes += batch.size
        except TruncatedDataError as err:
            # --max-bytes cuts batches off on purpose: the tool only reports trailing bytes without it.
            if options.max_bytes is None or limit == len(whole):
                problem = err
        except CorruptDataError as err:
            problem = err
        if problem is not None:
            trailing = len(view) - valid_bytes
            yield DumpLine(
                f"Found {trailing} invalid bytes at the end of {name} ({problem})",
                {"kind": "invalid-bytes", "bytes": trailing, "position": valid_bytes, "error": str(problem)},
                problem=True,
            )
    if non_consecutive:
        # DumpLogSegments prints these after every file, on stderr, by absolute path, each pair prepended
        # to its list (so newest first), and still exits 0: a compacted log has gaps by design.
        yield DumpLine(
            f"Non-consecutive offsets in {java_absolute_path(path)}",
            {"kind": "non-consecutive", "pairs": non_consecutive},
            note=True,
        )
        for first, second in reversed(non_consecutive):
            yield DumpLine(f"  {first} is followed by {second}", note=True, json=False)


# -- indexes -------------------------------------------------------------------------------------


def _index_entries(data: memoryview, dtype: np.dtype) -> np.ndarray:
    """Every whole slot of an index file (as the tool maps it: length rounded down to the entry size)."""
    return np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)


def _sanity(path: str, length: int, entry_size: int, problems: list[str]) -> DumpLine:
    if length % entry_size != 0:
        problems.append(f"found {length} bytes which is neither positive nor a multiple of {entry_size}")
    if problems:
        return DumpLine(
            f"{path}: failed sanity check: {problems[0]}",
            {"kind": "sanity-check", "ok": False, "problem": problems[0]},
            problem=True,
        )
    return DumpLine(f"{files.java_file_name(path)} passed sanity check.",
                    {"kind": "sanity-check", "ok": True})


def dump_index(path: str, options: FileDumpOptions) -> Iterator[DumpLine]:
    """``dumpIndex``: every offset-index entry (to the first zero entry after slot 0), each checked
    against the last offset of the batch at its position in the ``.log`` beside it."""
    base = base_offset(path)
    with _Mapped(path) as data:
        slots = _index_entries(data, OFFSET_ENTRY)
        if len(slots) == 0:
            yield DumpLine(f"{files.java_file_name(path)} is empty.", {"kind": "empty"})
            return
        rel = slots["relative_offset"].astype(np.int64)
        if options.index_sanity_check:
            last = base + int(rel[-1])
            problems = (
                [f"the last offset is {last} which is less than the base offset {base}"]
                if last < base
                else []
            )
            yield _sanity(path, len(data), OFFSET_ENTRY.itemsize, problems)
            return
        positions = slots["position"].astype(np.int64)
        mismatches: list[tuple[int, int | None]] = []
        with _Mapped(sibling(path, LOG_SUFFIX)) as log:
            for i in range(len(slots)):
                offset, position = base + int(rel[i]), int(positions[i])
                if offset == base and i > 0:  # a preallocated (sparse) tail: stop at the first zero entry
                    break
                found = _last_offset_at(log, position, path)
                if found != offset:
                    mismatches.append((offset, found))
                if not options.verify_index_only:
                    yield DumpLine(
                        f"offset: {offset} position: {position}",
                        {"kind": "entry", "offset": offset, "position": position},
                    )
    if mismatches:
        # main prints them once every file is dumped, on stderr: a heading naming the absolute path,
        # then each pair, newest first (each was prepended to the file's list).  No batch at the
        # position (the tool fails there) reads -1, the tool's "not found" of dumpTimeIndex.
        yield _finding_heading(f"Mismatches in :{java_absolute_path(path)}")
        for offset, found in reversed(mismatches):
            yield DumpLine(
                f"  Index offset: {offset}, log offset: {-1 if found is None else found}",
                {"kind": "mismatch", "index_offset": offset, "log_offset": found},
                problem=True,
                note=True,
            )


def _finding_heading(text: str) -> DumpLine:
    """The text-only heading of a group of findings kafka-dump-log prints after every file."""
    return DumpLine(text, note=True, json=False)


def _last_offset_at(log: memoryview, position: int, path: str) -> int | None:
    """The last offset of the batch starting at ``position`` (None: no whole batch there)."""
    try:
        return codec.read_batch_header(log, position, path=path).last_offset
    except (SegstoreError, IndexError, ValueError):
        return None


def dump_time_index(path: str, options: FileDumpOptions) -> Iterator[DumpLine]:
    """``dumpTimeIndex``: every time-index entry, checked against the batch it names (found through the
    offset index): its last offset, its max record timestamp, and increasing index timestamps."""
    base = base_offset(path)
    with _Mapped(path) as data:
        slots = _index_entries(data, TIME_ENTRY)
        rel = slots["relative_offset"].astype(np.int64)
        stamps = slots["timestamp"].astype(np.int64)
        if options.index_sanity_check:
            problems = []
            if len(slots) and int(stamps[-1]) < int(stamps[0]):
                problems.append(
                    f"the last timestamp is {int(stamps[-1])} which is less than the first "
                    f"timestamp {int(stamps[0])}"
                )
            if len(slots) and base + int(rel[-1]) < base:
                problems.append(
                    f"the last offset is {base + int(rel[-1])} which is less than the first offset {base}"
                )
            yield _sanity(path, len(data), TIME_ENTRY.itemsize, problems)
            return
        with (
            _Mapped(sibling(path, INDEX_SUFFIX), required=False) as index_data,
            _Mapped(sibling(path, LOG_SUFFIX)) as log,
        ):
            index = _index_entries(index_data, OFFSET_ENTRY)
            index_offsets = base + index["relative_offset"].astype(np.int64)
            previous = NO_TIMESTAMP
            findings: list[DumpLine] = []
            for i in range(len(slots)):
                offset, timestamp = base + int(rel[i]), int(stamps[i])
                if offset == base and i > 0:
                    break
                findings += _check_time_entry(path, log, index, index_offsets, offset, timestamp, previous)
                if not options.verify_index_only:
                    yield DumpLine(
                        f"timestamp: {timestamp} offset: {offset}",
                        {"kind": "entry", "timestamp": timestamp, "offset": offset},
                    )
                previous = timestamp
    # TimeIndexDumpErrors.printErrors, once every file is dumped: the timestamp mismatches, the
    # out-of-order timestamps (each group under a heading naming the absolute path), then the
    # offsets not found (under a heading naming no file), each group in index order.
    where = java_absolute_path(path)
    for kind, heading in (
        ("timestamp-mismatch", f"Found timestamp mismatch in :{where}"),
        ("out-of-order", f"Found out of order timestamp in :{where}"),
        ("offset-not-found", "The following indexed offsets are not found in the log."),
    ):
        group = [line for line in findings if line.data["kind"] == kind]
        if group:
            yield _finding_heading(heading)
            yield from group


def _check_time_entry(
    path: str,
    log: memoryview,
    index: np.ndarray,
    index_offsets: np.ndarray,
    offset: int,
    timestamp: int,
    previous: int,
) -> Iterator[DumpLine]:
    from segstore.search import Bound, search

    slot = search(index_offsets, offset, Bound.LARGEST_LOWER) if len(index) else -1
    position = int(index["position"][slot]) if slot >= 0 else 0
    found = None
    try:
        for batch in codec.iter_batches(log, path=path, check_crc=False, start=position):
            if batch.last_offset >= offset:
                found = batch
                break
    except SegstoreError:
        found = None
    if found is None or found.last_offset != offset:
        log_offset = -1 if found is None else found.last_offset
        yield DumpLine(
            f"Indexed offset: {offset}, found log offset: {log_offset}",
            {"kind": "offset-not-found", "index_offset": offset, "log_offset": log_offset},
            problem=True,
            note=True,
        )
        return
    max_timestamp = max((r.timestamp for r in found.records()), default=NO_TIMESTAMP)
    if max_timestamp != timestamp:
        yield DumpLine(
            f"  Index timestamp: {timestamp}, log timestamp: {max_timestamp}",
            {"kind": "timestamp-mismatch", "index_timestamp": timestamp, "log_timestamp": max_timestamp},
            problem=True,
            note=True,
        )
    if previous >= timestamp:
        yield DumpLine(
            f"  Index timestamp: {timestamp}, Previously indexed timestamp: {previous}",
            {"kind": "out-of-order", "index_timestamp": timestamp, "previous_timestamp": previous},
            problem=True,
            note=True,
        )


def dump_txn_index(path: str) -> Iterator[DumpLine]:
    """``dumpTxnIndex``: every aborted-transaction entry, as ``TransactionIndex.allAbortedTxns``
    iterates them: whole entries only, stopping at one of a version above ``AbortedTxn.CURRENT_VERSION``
    (the tool throws there).  That entry, or bytes after the last whole entry (a torn append the
    iterator passes over), are reported after the entries before them."""
    entry_size = ABORTED_TXN.itemsize
    with _Mapped(path) as data:
        size = len(data)
        whole = size // entry_size * entry_size
        rows = np.frombuffer(data[:whole], dtype=ABORTED_TXN).tolist()
    for slot, row in enumerate(rows):
        entry = dict(zip(ABORTED_TXN.names or (), (int(v) for v in row), strict=True))
        if entry["version"] > CURRENT_TXN_VERSION:
            pos = slot * entry_size
            yield _problem(CorruptDataError(
                f"expected aborted-transaction version {CURRENT_TXN_VERSION} or below "
                f"(TransactionIndex: Unexpected aborted transaction version), found {entry['version']}",
                path, pos))
            return
        yield DumpLine(
            f"version: {entry['version']} producerId: {entry['producer_id']} "
            f"firstOffset: {entry['first_offset']} lastOffset: {entry['last_offset']} "
            f"lastStableOffset: {entry['last_stable_offset']}",
            {"kind": "aborted-txn", **entry},
        )
    if size != whole:
        yield _problem(TruncatedDataError(
            f"expected a {entry_size}-byte aborted-transaction entry, found {size - whole} bytes",
            path, whole))


def _problem(err: SegstoreError) -> DumpLine:
    """A finding that ends a file's dump, on stderr as ``path:pos: expected ..., found ...``."""
    return DumpLine(str(err), {"kind": "error", "position": err.pos, "error": err.message}, problem=True)


def dump_producer_snapshot(path: str) -> Iterator[DumpLine]:
    """``dumpProducerIdSnapshot``: one line per producer entry of a ``.snapshot``.  One that
    ``ProducerStateManager.readSnapshot`` refuses (version, CRC, schema) is said on stderr and the
    dump goes on to the next file, as the tool catches ``CorruptSnapshotException``."""
    try:
        with _Mapped(path) as data:
            entries = snapshot.entry_dicts(snapshot.read_snapshot(data, path=path))
    except CorruptDataError as err:        # TruncatedDataError too
        yield _problem(err)
        return
    for entry in entries:
        yield DumpLine(snapshot.entry_line(entry), {"kind": "producer", **entry})
