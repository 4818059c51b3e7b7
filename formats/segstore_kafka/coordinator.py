"""Loading a coordinator's log (``__consumer_offsets``, ``__transaction_state``): the latest record per key.

Both coordinators load their partition of the internal topic from the log start to the
log end and keep, per record key, the latest value; a tombstone (null value) deletes
the key (Kafka 3.8.0 ``GroupMetadataManager.doLoadGroupsAndOffsets``,
``TransactionStateManager.loadTransactionMetadata``).  Offset commits in transactional
batches (``TxnOffsetCommit``) are held per producer id until the producer's COMMIT
marker, which applies each one unless the key already holds a commit from a later
batch (``CommitRecordMetadataAndOffset.olderThan``: appended batch offsets compared);
an ABORT marker, or any other control record, drops them.  A record without a key
stops the broker's load (``require(record.hasKey)``); here it is counted and skipped.

How it runs: per column batch (``offset``, ``key``, ``value``, ``baseOffset``,
``isControl``, ``isTransactional``, ``producerId``, ``timestamp``), the latest row of
each key among the plain (non-transactional, non-control) rows is found with Arrow's
dictionary encoding and numpy, so Python touches each distinct key of a batch once, not
each record; only transactional and control rows (rare) are walked one by one.  Their
COMMIT applications are kept with the marker's offset and folded in at the end against
the plain rows, in log order.  Record types are counted per key version in Arrow.

Pure (column batches in, dicts out); not thread-safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from segstore import arrays
from segstore.columns import KAFKA_SCHEMA, project
from segstore.errors import SegstoreError

from . import batch as codec

#: The columns the load reads.
COLUMNS = project(KAFKA_SCHEMA, ["offset", "key", "value", "timestamp", "baseOffset", "isControl",
                                 "isTransactional", "producerId"])
VERSION_BYTES = 2
#: The key-version count of keys shorter than their int16 version.
SHORT_KEY = -1


@dataclass(frozen=True, slots=True)
class Latest:
    """The record a key ends with: its offset, its batch's base offset, its value (None: a tombstone)."""

    offset: int
    batch_offset: int
    value: bytes | None


def key_version(key: bytes) -> int:
    """The int16 version a coordinator key starts with (the record type); -1 for a key too short."""
    return int.from_bytes(key[:VERSION_BYTES], "big", signed=True) if len(key) >= VERSION_BYTES else SHORT_KEY


class CoordinatorLog:
    """The latest record per key of one coordinator partition, fed column batches in log order.

    :param pending_key: which keys a transactional batch holds back until its COMMIT marker (the
        group coordinator's offset commits); None: transactional batches load as the others.
    :param same_key: the one form of keys the coordinator reads as the same key (the group
        coordinator's OffsetCommitKey v0 and v1 are both ``GroupTopicPartition``); None: the bytes.
    """

    def __init__(self, pending_key: Callable[[bytes], bool] | None = None,
                 same_key: Callable[[bytes], bytes] | None = None) -> None:
        self.pending_key = pending_key
        self.same_key = same_key
        self.latest: dict[bytes, Latest] = {}
        #: per producer id, the transactional commits not yet committed or aborted
        self.pending: dict[int, dict[bytes, Latest]] = {}
        #: COMMIT markers' applications: (marker offset, key, the pending commit)
        self.applied: list[tuple[int, bytes, Latest]] = []
        #: records per key version (the record type), all records read
        self.key_versions: Counter[int] = Counter()
        self.records = 0
        self.keyless = 0
        self.max_timestamp = -1
        self._control_batch = -1
        #: the error that ended the load before the log's end (None: it read whole)
        self.failed: SegstoreError | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        """Load one column batch (:data:`COLUMNS`), the next in log order."""
        import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs

        n = batch.num_rows
        if not n:
            return
        self.records += n
        keys = batch.column("key")
        self.max_timestamp = max(self.max_timestamp, pc.max(batch.column("timestamp")).value or -1)
        control = batch.column("isControl")
        special = pc.or_(control, batch.column("isTransactional"))
        data_keys = pc.filter(keys, pc.invert(control))
        counts = pc.value_counts(pc.binary_slice(data_keys, 0, VERSION_BYTES)).to_pylist()
        for entry in counts:
            prefix = entry["values"]
            if prefix is None:
                self.keyless += entry["counts"]
            else:
                self.key_versions[key_version(prefix)] += entry["counts"]
        plain = pc.and_(pc.invert(special), pc.is_valid(keys))
        self._latest_plain(batch.filter(plain))
        if pc.any(special).as_py():
            self._walk(batch.filter(special))

    def _latest_plain(self, rows: pa.RecordBatch) -> None:
        import pyarrow.compute as pc

        if not rows.num_rows:
            return
        encoded = pc.dictionary_encode(rows.column("key"))
        # through the buffers: pyarrow's own numpy bridges import pandas (0.2 s, and a Ctrl-C
        # landing in that import leaves a half-made pandas module that fails every later call)
        indices = arrays.natural(encoded.indices)
        distinct, first_from_end = np.unique(indices[::-1], return_index=True)
        last_rows = len(indices) - 1 - first_from_end
        names = encoded.dictionary.take(arrays.from_numpy(distinct)).to_pylist()
        taken = arrays.from_numpy(last_rows)
        offsets = rows.column("offset").take(taken).to_pylist()
        bases = rows.column("baseOffset").take(taken).to_pylist()
        values = rows.column("value").take(taken).to_pylist()
        latest = self.latest
        if self.same_key is not None:
            names = [self.same_key(key) for key in names]
        for key, offset, base, value in zip(names, offsets, bases, values, strict=True):
            current = latest.get(key)
            if current is None or current.offset < offset:
                latest[key] = Latest(offset, base, value)

    def _walk(self, rows: pa.RecordBatch) -> None:
        """Transactional and control rows, one by one in log order."""
        columns = [rows.column(name).to_pylist() for name in
                   ("offset", "key", "value", "baseOffset", "isControl", "producerId")]
        for offset, key, value, base, is_control, producer in zip(*columns, strict=True):
            if is_control:
                if base == self._control_batch:     # the broker reads a control batch's first record only
                    continue
                self._control_batch = base
                try:
                    kind, _ = codec.parse_control_record(key, value)
                except ValueError:
                    kind = "UNKNOWN"
                held = self.pending.pop(producer, {})
                if kind == "COMMIT":
                    self.applied.extend((offset, k, commit) for k, commit in held.items())
                continue
            if key is None:
                continue
            if self.same_key is not None:
                key = self.same_key(key)
            if self.pending_key is not None and self.pending_key(key):
                held = self.pending.setdefault(producer, {})
                if value is None:
                    held.pop(key, None)
                else:
                    held[key] = Latest(offset, base, value)
                continue
            current = self.latest.get(key)
            if current is None or current.offset < offset:
                self.latest[key] = Latest(offset, base, value)

    def final(self) -> dict[bytes, Latest]:
        """Every key's last record (tombstones included), COMMIT applications folded in in log order."""
        out = dict(self.latest)
        for marker, key, commit in self.applied:
            current = out.get(key)
            if current is not None and current.offset > marker:
                continue        # a later plain record replaced whatever this marker applied
            if current is None or current.value is None or current.batch_offset < commit.batch_offset:
                out[key] = Latest(marker, commit.batch_offset, commit.value)
        return out

    def open_transactions(self) -> int:
        """Producers whose transactional offset commits are still pending at the log end."""
        return sum(1 for held in self.pending.values() if held)
