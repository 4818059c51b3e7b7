"""Plan a columnar append (``KafkaStore.append_arrow``): rows by partition, cut into batches.

The input is a ``pyarrow.RecordBatch`` or ``Table`` of :data:`segstore.columns.KAFKA_SCHEMA`'s
columns (what ``scan_arrow`` yields; any format's common columns do)::

    topic       string, required, no nulls
    value       binary or string, required (null: a tombstone)
    partition   integer (absent or null: 0, or a keyed row's partition, below)
    key         binary or string (absent: all null)
    timestamp   timestamp[ms] or integer ms (absent, null or -1: the append's time; below -1 refused)
    headers     list<struct<key: string, value: binary>> (absent: none)
    headerKeysBytes  list<binary>: a row's header keys as stored where one is not UTF-8 (what a scan
                gives: ``headers`` holds Java's text of them), written instead of their text
    baseOffset  integer: where it changes, a new batch begins (a scan's batches stay whole)
    isControl   bool: a true row is refused (markers are not data to copy)

A row naming no partition (no ``partition`` column, or a null in it: as ``append_batch`` routes a
message whose partition is None, and Kafka's producer a ``ProducerRecord`` with a null partition), with a
key (not null), of a topic of more than one
partition (``widths``, ``KafkaStore.partition_widths``) goes where the Java producer puts its
key (:mod:`.partitioner`: murmur2 of the key over the topic's partitions, one C pass over the
key column), the others to partition 0.

Other columns (``offset``, ``position``, the batch fields) are ignored: offsets
are assigned from each partition's log end, as ``append_batch`` assigns them.
A partition's rows of one input batch become batches of at most
:func:`batch_limit` bytes of records (a record larger than that alone in its
batch), each encoded in one C call (:class:`.arrowencode.Columns`).

Pure (columns in, row plans out); thread-safe.  ``O(rows)`` numpy, no per-row Python.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from segstore import arrays, grouping
from segstore.columns import HEADERS, binary_buffers
from segstore.errors import InvalidMessageError, cut
from segstore.javatext import JavaText, java_text
from segstore.records import MAX_TIMESTAMP

from . import partitioner
from .arrowencode import Columns
from .batch import RECORD_BATCH_OVERHEAD
from .columnar import STORED_KEYS

#: One record's bytes besides key, value and headers, at most; one header's besides its bytes.
RECORD_OVERHEAD = 36
HEADER_OVERHEAD = 10
#: The records of one appended batch, at most (uncompressed): large enough that the per-batch
#: work is noise, small enough that a batch's bytes stay within the cache and memory stays flat.
MAX_BATCH_BYTES = 1 << 20
#: The rows of a multi-batch append whose plans are kept from the check to the write (a few int64
#: each: about 32 MB); the batches past them are planned again as they are written.
KEPT_PLAN_ROWS = 1 << 20
#: Room left for a codec's own overhead on incompressible records (frames, block headers).
CODEC_SLACK = 1024


def batch_limit(max_message_bytes: int, segment_bytes: int, compressed: bool) -> int:
    """The records bytes (uncompressed, upper bound) of one batch an arrow append writes."""
    limit = min(max_message_bytes, segment_bytes) - RECORD_BATCH_OVERHEAD
    if compressed:
        limit -= CODEC_SLACK + limit // 100
    return max(1, min(limit, MAX_BATCH_BYTES))


@dataclass
class Plan:
    """One input batch laid out for appending: its (topic, partition) groups in first-seen order
    with their rows, each row's size bound, batch boundaries (``baseOffset``) and its columns."""

    groups: list[tuple[str, int, np.ndarray]]
    sizes: np.ndarray
    batch_ids: np.ndarray | None
    key: pa.Array
    value: pa.Array
    headers: pa.Array
    #: the timestamps as given (-1 where null): those below 0 become the append's time
    timestamps: np.ndarray
    #: the first row of each (topic, partition) group whose key chose the partition (only those)
    routed: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)

    def columns(self, now: int) -> Columns:
        """The encoder's columns, a timestamp below 0 being ``now``."""
        stamps = self.timestamps
        if (stamps < 0).any():
            stamps = np.where(stamps < 0, now, stamps)
        return Columns(self.key, self.value, stamps, self.headers)


def _binary(batch: pa.RecordBatch, name: str) -> pa.Array:
    n = batch.num_rows
    if name not in batch.schema.names:
        return pa.nulls(n, pa.binary())
    arr = batch.column(name)
    if pa.types.is_binary(arr.type):
        return arr
    types = pa.types
    if types.is_string(arr.type) or types.is_large_binary(arr.type) or types.is_large_string(arr.type):
        return arr.cast(pa.binary())
    raise InvalidMessageError(f"expected a binary or string {name} column, found {arr.type}")


def _integers(batch: pa.RecordBatch, name: str, default: int | None) -> np.ndarray | None:
    """An integer column as int64 (nulls: ``default``; refused when None); None when absent."""
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs
    if name not in batch.schema.names:
        return None
    arr = batch.column(name)
    if pa.types.is_timestamp(arr.type):     # Kafka keeps milliseconds: finer units are truncated
        arr = arr.cast(pa.timestamp("ms", tz=arr.type.tz), safe=False).cast(pa.int64())
    if not pa.types.is_integer(arr.type):
        raise InvalidMessageError(f"expected an integer {name} column, found {arr.type}")
    if arr.null_count:
        if default is None:
            raise InvalidMessageError(f"expected a {name} in every row, found {arr.null_count} null")
        arr = pc.fill_null(arr, arrays.number(default, arr.type))
    return arrays.int64s(arr)


def _headers(batch: pa.RecordBatch) -> pa.Array:
    if "headers" not in batch.schema.names:
        return pa.nulls(batch.num_rows, HEADERS)
    arr = batch.column("headers")
    if arr.type != HEADERS:
        try:
            arr = arr.cast(HEADERS)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise InvalidMessageError(f"expected headers as {HEADERS}, found {arr.type}") from err
    return _stored_keys(batch, arr)


def _stored_keys(batch: pa.RecordBatch, headers: pa.Array) -> pa.Array:
    """``headers`` with the keys a :data:`STORED_KEYS` column gives (a scan's, for keys that are not
    UTF-8: Kafka 3.8 ``DefaultRecord.readHeaders`` keeps a key's bytes, ``RecordHeader.key()`` is Java's
    text of them) in place of their text: keys of type binary then.  Each must read as its key as
    Java reads it (:func:`segstore.javatext.java_text`).  ``O(headers)`` Python where the column holds
    one (rare), ``O(1)`` else.

    :raises InvalidMessageError: a column of another type, a row's list of another length than its
        headers, or bytes that are UTF-8 or read as another key (naming the row).
    """
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs
    if STORED_KEYS not in batch.schema.names:
        return headers
    stored = batch.column(STORED_KEYS)
    if pa.types.is_null(stored.type) or stored.null_count == len(stored):
        return headers
    if stored.type != pa.list_(pa.binary()):
        raise InvalidMessageError(f"expected a {STORED_KEYS} column of list<binary>, found {stored.type}")
    counts = pc.list_value_length(headers)
    starts = np.zeros(len(headers) + 1, np.int64)
    np.cumsum(arrays.int64s(pc.fill_null(counts, arrays.number(0, counts.type))), out=starts[1:])
    texts, values = pc.list_flatten(headers).flatten()
    keys = texts.cast(pa.binary()).to_pylist()
    for row in np.flatnonzero(arrays.to_numpy(stored.is_valid(), np.bool_)).tolist():
        raws, at = stored[row].as_py(), int(starts[row])
        if len(raws) != starts[row + 1] - at:
            raise InvalidMessageError(f"expected {STORED_KEYS} of {starts[row + 1] - at} items, one a "
                                      f"header, found {len(raws)} in row {row}")
        for j, raw in enumerate(raws):
            if raw is None:
                continue
            text = java_text(raw)
            if not isinstance(text, JavaText) or text != texts[at + j].as_py():
                raise InvalidMessageError(f"expected {STORED_KEYS} bytes that are not UTF-8 and read as "
                                          f"header key {cut(texts[at + j].as_py())}, found {cut(text)} in "
                                          f"row {row}")
            keys[at + j] = raw
    items = pa.StructArray.from_arrays([pa.array(keys, pa.binary()), values], names=["key", "value"])
    return pa.ListArray.from_arrays(pa.array(starts, pa.int32()), items, mask=headers.is_null())


def _lengths(arr: pa.Array) -> np.ndarray:
    """Byte lengths of a binary array's values (0 for nulls) as int64."""
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs
    lengths = pc.binary_length(arr)
    if lengths.null_count:
        lengths = pc.fill_null(lengths, arrays.number(0, lengths.type))
    return arrays.int64s(lengths)


def _header_sizes(headers: pa.Array) -> np.ndarray:
    """Each row's header bytes, at most (key and value bytes plus their varints)."""
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs
    n = len(headers)
    counts = pc.list_value_length(headers)
    counts = arrays.int64s(pc.fill_null(counts, arrays.number(0, counts.type)))
    if not counts.any():
        return np.zeros(n, np.int64)
    items = pc.list_flatten(headers)
    keys, values = items.flatten()
    if keys.null_count:
        raise InvalidMessageError("expected header keys, found a null one")
    per_item = _lengths(keys) + _lengths(values.cast(pa.binary())) + HEADER_OVERHEAD
    ends = np.cumsum(counts)
    total = np.concatenate(([0], np.cumsum(per_item)))
    return total[ends] - total[ends - counts]


def _groups(topics: pa.Array, partitions: np.ndarray) -> list[tuple[str, int, np.ndarray]]:
    """Rows by (topic, partition), in first-seen order, each group's rows in order."""
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs
    n = len(topics)
    one = str(topics[0].as_py()) if n else ""
    if n and pc.all(pc.equal(topics, arrays.string_scalar(one))).as_py():
        # the usual case, one topic: a compare per row instead of hashing every topic
        if (partitions == partitions[0]).all():
            return [(one, int(partitions[0]), np.arange(n, dtype=np.int64))]
        uniques, rows, bounds = grouping.groups(partitions)
        return [(one, int(p), rows[bounds[i]:bounds[i + 1]]) for i, p in enumerate(uniques.tolist())]
    encoded = pc.dictionary_encode(topics).combine_chunks() if isinstance(topics, pa.ChunkedArray) \
        else pc.dictionary_encode(topics)
    names = encoded.dictionary.to_pylist()
    codes, parts, rows, bounds = grouping.pair_groups(arrays.int64s(encoded.indices), partitions)
    return [(names[code], part, rows[bounds[i]:bounds[i + 1]])
            for i, (code, part) in enumerate(zip(codes.tolist(), parts.tolist(), strict=True))]


def _nulls(arr: pa.Array) -> np.ndarray | None:
    """The rows where ``arr`` is null (bool), None where none is."""
    if not arr.null_count:
        return None
    return ~arrays.natural(arr.is_valid()).astype(bool)


def _key_partitions(topics: pa.Array, key: pa.Array, widths: dict[str, int]) -> np.ndarray | None:
    """Each row's partition as its key chooses it over its topic's ``widths`` (-1: no key, or a topic
    of one partition); None where no row's key chooses.  ``O(rows)``: the topics' widths looked up
    once per distinct topic, the keys hashed in one C pass."""
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs
    n = len(topics)
    if not widths or key.null_count == n:
        return None
    encoded = pc.dictionary_encode(topics)
    table = np.array([widths.get(name, 0) for name in encoded.dictionary.to_pylist()], np.int64)
    if not (table > 1).any():
        return None
    per_row = table[arrays.int64s(encoded.indices)]
    keyed = per_row > 1
    if key.null_count:
        keyed &= arrays.natural(key.is_valid()).astype(bool)
    hashes = partitioner.murmur2_offsets(*binary_buffers(key))
    return np.where(keyed, partitioner.key_partitions(hashes, np.maximum(per_row, 1)), -1)


def plan(batch: pa.RecordBatch, widths: dict[str, int] | None = None) -> Plan:
    """Lay ``batch`` out for appending; ``widths``: the partition count of each topic of more than
    one (rows naming no partition: their key's, above).

    :raises InvalidMessageError: a required column missing, a column of the wrong type, a null
        topic, a partition outside ``[0, 2**31)``, a null header key, a control row.
    """
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs
    names = batch.schema.names
    missing = [name for name in ("topic", "value") if name not in names]
    if missing:
        raise InvalidMessageError(f"expected the columns topic and value (those of segstore.columns), "
                                  f"found {names} (no {missing})")
    topics = batch.column("topic")
    if not (pa.types.is_string(topics.type) or pa.types.is_large_string(topics.type)
            or (pa.types.is_dictionary(topics.type) and pa.types.is_string(topics.type.value_type))):
        raise InvalidMessageError(f"expected a string topic column, found {topics.type}")
    if topics.null_count:
        raise InvalidMessageError(f"expected a topic in every row, found {topics.null_count} null")
    if pa.types.is_dictionary(topics.type):
        topics = topics.cast(pa.string())
    control = batch.column("isControl") if "isControl" in names else None
    if control is not None and not pa.types.is_boolean(control.type):
        raise InvalidMessageError(f"expected a bool isControl column, found {control.type}")
    if control is not None and pc.any(control).as_py():
        raise InvalidMessageError("expected data records, found a control record (a transaction marker: "
                                  "scan with isolation='read_committed' to leave markers out)")
    n = batch.num_rows
    key = _binary(batch, "key")
    partitions = _integers(batch, "partition", -1)     # a null: routed below, as a missing column
    unnamed = None if partitions is None else _nulls(batch.column("partition"))
    if partitions is not None:
        named = partitions if unnamed is None else partitions[~unnamed]
        if len(named) and not (0 <= named.min() and named.max() < 1 << 31):
            raise InvalidMessageError(f"expected partitions in [0, 2**31), found {int(named.min())} .. "
                                      f"{int(named.max())}")
    chosen = None
    if partitions is None or unnamed is not None:
        chosen = _key_partitions(topics, key, widths or {})
        if chosen is not None and unnamed is not None:
            chosen = np.where(unnamed, chosen, -1)
        routes = np.zeros(n, np.int64) if chosen is None else np.maximum(chosen, 0)
        partitions = routes if partitions is None or unnamed is None \
            else np.where(unnamed, routes, partitions)
    timestamps = _integers(batch, "timestamp", -1)
    if timestamps is None:
        timestamps = np.full(n, -1, np.int64)
    elif n and timestamps.min() < -1:   # as records.message_timestamp refuses a message's
        row = int(np.argmax(timestamps < -1))
        raise InvalidMessageError(f"expected timestamps in [0, {MAX_TIMESTAMP}] ms since the epoch (null or "
                                  f"-1: the append's time; Kafka's ProducerRecord: \"Timestamp should always "
                                  f"be non-negative or null\"), found {int(timestamps[row])} in row {row}")
    value, headers = _binary(batch, "value"), _headers(batch)
    sizes = _lengths(key) + _lengths(value) + _header_sizes(headers) + RECORD_OVERHEAD
    base_offsets = _integers(batch, "baseOffset", -1)
    groups = _groups(topics, partitions)
    routed = {}
    if chosen is not None:
        for topic, partition, rows in groups:
            first = np.flatnonzero(chosen[rows] >= 0)
            if len(first):
                routed[(topic, partition)] = int(rows[first[0]])
    return Plan(groups, sizes, base_offsets, key, value, headers, timestamps, routed)


def cuts(rows: np.ndarray, sizes: np.ndarray, batch_ids: np.ndarray | None,
         limit: int) -> Iterator[np.ndarray]:
    """``rows`` cut into runs of at most ``limit`` bytes of ``sizes`` (a larger row alone), a run
    ending too where ``batch_ids`` changes.  One step per run (numpy within it)."""
    n = len(rows)
    if n == 0:
        return
    edges = [0]
    if batch_ids is not None:
        ids = batch_ids[rows]
        edges += (np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist()
    edges.append(n)
    total = np.concatenate(([0], np.cumsum(sizes[rows])))
    for start, stop in itertools.pairwise(edges):
        while start < stop:
            end = int(np.searchsorted(total, total[start] + limit, side="right")) - 1
            end = min(max(end, start + 1), stop)
            yield rows[start:end]
            start = end
