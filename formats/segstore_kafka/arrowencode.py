"""Encode a RecordBatch v2 from Arrow columns (a columnar conversion's write path).

:func:`encode_batch_columns` is :func:`segstore_kafka.batch.encode_batch` for records
given as columns: ``key``/``value`` binary (null: a null key or value), ``timestamp``
int64 milliseconds, absolute ``offset`` int64, ``headers``
``list<struct<key: string, value: binary>>`` (a null list: no headers).  The records
region is encoded in one C pass over the Arrow buffers
(``segstore_kafka._speedups.encode_columns``), else by :func:`encode_region_py`, the
reference, which hands the rows to the per-record encoder; the two are tested equal.
A batch whose rows come from one column set is encoded whole in one C call
(``_speedups.encode_batch``: records, then the codec over them, then header and
CRC-32C); otherwise the header, CRC and compression are ``batch._build``'s.  Both
give ``batch.encode_batch``'s bytes (tested equal with hypothesis).

Pure (columns in, bytes out); thread-safe.  ``O(bytes)``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from segstore import arrays, speedups
from segstore.columns import binary_buffers
from segstore.errors import InvalidMessageError
from segstore.javatext import java_text
from segstore.records import LOG_APPEND_TIME

from . import batch as codec
from .compression import NONE, codec_id, compress

if TYPE_CHECKING:   # pyarrow loads where a column is read (compaction's imports of this module need none)
    import pyarrow as pa

_speedups = speedups.load("segstore_kafka._speedups")


def _binary(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, Any]:
    """``(valid as uint8, int32 offsets into data, data)`` of a binary array (the offsets and data
    are the array's own buffers: no copy)."""
    import pyarrow as pa

    arr = arr.cast(pa.binary()) if arr.type != pa.binary() else arr
    n = len(arr)
    valid = np.ones(n, np.uint8) if arr.null_count == 0 else arrays.natural(arr.is_valid()).view(np.uint8)
    return (valid, *binary_buffers(arr))


def _headers(headers: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """``(int32 per-row offsets from 0, header keys, header values)`` of a list<struct> column."""
    import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs

    n = len(headers)
    if headers.null_count:
        # a null list has no headers; list_flatten skips what lies under it (filling the nulls with
        # empty lists instead cost 3 us a row)
        counts = pc.list_value_length(headers)
        lengths = arrays.natural(pc.fill_null(counts, arrays.number(0, counts.type)))
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(lengths, out=offsets[1:])
    else:
        offsets = arrays.to_numpy(headers.offsets, np.int32)
        offsets = offsets - offsets[0] if n else np.zeros(1, np.int32)
    items = pc.list_flatten(headers)
    keys, values = items.flatten()
    return offsets, keys, values


class Columns:
    """A batch's ``key``, ``value``, ``timestamp`` and ``headers`` columns, laid out once for encoding
    any of its rows (the buffers are the batch's own where Arrow's layout allows)."""

    def __init__(self, key: pa.Array, value: pa.Array, timestamps: np.ndarray, headers: pa.Array) -> None:
        self.arrays: tuple[pa.Array, ...] = (key, value, headers)
        self.n = len(key)
        self.timestamps = np.ascontiguousarray(timestamps, np.int64)
        self._laid: tuple | None = None

    @classmethod
    def of_buffers(cls, n: int, layout: tuple) -> Columns:
        """Columns of ``n`` rows given as the encoder's buffers (:meth:`_layout`'s tuple: validity as
        one uint8 per row, int32 offsets), e.g. a decoded chunk's; encoded by C only."""
        columns = cls.__new__(cls)
        columns.arrays = ()
        columns.n = n
        columns.timestamps = layout[6]
        columns._laid = layout
        return columns

    def lay_out(self) -> None:
        """Lay the buffers out now (they are laid out on first use otherwise: once, if two threads
        encode rows of these columns, only when this ran first)."""
        self._layout()

    def _layout(self) -> tuple:
        if self._laid is None:
            key, value, headers = self.arrays
            h_offsets, h_keys, h_values = _headers(headers)
            if h_keys.null_count:
                raise InvalidMessageError("expected header keys, found a null one")
            _, hko, hkd = _binary(h_keys)
            self._laid = (*_binary(key), *_binary(value), self.timestamps, h_offsets, hko, hkd,
                          *_binary(h_values))
        return self._laid

    def region(self, rows: np.ndarray, base_timestamp: int, deltas: np.ndarray) -> tuple[bytes, int]:
        """``(records region, max timestamp)`` of ``rows`` (indices into the batch) at these offset deltas.

        :raises InvalidMessageError: a field Kafka cannot encode.
        """
        rows = np.ascontiguousarray(rows, np.int64)
        deltas = np.ascontiguousarray(deltas, np.int64)
        if _speedups is None:
            return self.region_py(rows, base_timestamp, deltas)
        kv, ko, kd, vv, vo, vd, ts, ho, hko, hkd, hvv, hvo, hvd = self._layout()
        try:
            region, top = _speedups.encode_columns(self.n, base_timestamp, rows, kv, ko, kd, vv, vo, vd, ts,
                                                   deltas, ho, hko, hkd, hvv, hvo, hvd)
        except ValueError as err:
            raise InvalidMessageError(f"expected records Kafka can encode, found: {err}") from err
        return region, top

    def batch(self, rows: np.ndarray, base_timestamp: int, deltas: np.ndarray, header: tuple,
              codec: int, level: int | None = None) -> bytes:
        """One whole batch of ``rows`` in one C call (see :func:`header_fields` for ``header``).

        :raises InvalidMessageError: a field Kafka cannot encode.
        """
        kv, ko, kd, vv, vo, vd, ts, ho, hko, hkd, hvv, hvo, hvd = self._layout()
        assert _speedups is not None        # callers check native()
        squeeze = None if codec == NONE else functools.partial(compress, codec, level=level)
        try:
            return _speedups.encode_batch(self.n, base_timestamp, np.ascontiguousarray(rows, np.int64), kv,
                                          ko, kd, vv, vo, vd, ts, np.ascontiguousarray(deltas, np.int64), ho,
                                          hko, hkd, hvv, hvo, hvd, header, squeeze)
        except ValueError as err:
            raise InvalidMessageError(f"expected records Kafka can encode, found: {err}") from err

    def region_py(self, rows: np.ndarray, base_timestamp: int, deltas: np.ndarray) -> tuple[bytes, int]:
        """The reference of :meth:`region`: the rows as tuples through the per-record encoder."""
        key, value, headers = self.arrays
        if len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < self.n:
            raise InvalidMessageError(f"expected rows within the batch's {self.n}, found {rows.tolist()}")
        import pyarrow as pa

        take = pa.array(rows, pa.int64())
        # (a header key given as bytes, arrowappend's stored key, as the JavaText that keeps them)
        records = [(k, v, t, [(java_text(item["key"]) if isinstance(item["key"], bytes) else item["key"],
                               item["value"]) for item in h or ()])
                   for k, v, t, h in zip(key.take(take).to_pylist(), value.take(take).to_pylist(),
                                         self.timestamps[rows].tolist(), headers.take(take).to_pylist(),
                                         strict=True)]
        try:
            region, _, top = codec._encode_records_py(records, np.asarray(deltas).tolist(), base_timestamp,
                                                      stored_keys=True)
        except (ValueError, TypeError, OverflowError) as err:
            raise InvalidMessageError(f"expected records Kafka can encode, found: {err}") from err
        return region, top


def encode_batch_columns(pieces: list[tuple[Columns, np.ndarray]], offsets: np.ndarray, *, base_offset: int,
                         compression: str | int = "none",
                         partition_leader_epoch: int = codec.NO_PARTITION_LEADER_EPOCH,
                         producer_id: int = codec.NO_PRODUCER_ID,
                         producer_epoch: int = codec.NO_PRODUCER_EPOCH,
                         is_transactional: bool = False, is_control: bool = False,
                         timestamp_type: str = codec.CREATE_TIME, log_append_time: int | None = None,
                         compression_level: int | None = None) -> bytes:
    """One RecordBatch v2 of the rows ``pieces`` name (``(columns, row indices)``, in order) at absolute
    ``offsets``, byte for byte what ``batch.encode_batch`` makes of the same records.

    :raises InvalidMessageError: a field out of range, or no rows.
    """
    n = sum(len(rows) for _, rows in pieces)
    if n == 0 or len(offsets) != n:
        raise InvalidMessageError(f"expected one offset for each of at least one record, found "
                                  f"{len(offsets)} "
                                  f"for {n}")
    log_append = timestamp_type == LOG_APPEND_TIME
    if log_append and log_append_time is None:
        raise InvalidMessageError("expected a log_append_time with LogAppendTime, found None")
    first_columns, first_rows = next((c, r) for c, r in pieces if len(r))
    base_timestamp = int(first_columns.timestamps[first_rows[0]])
    deltas = np.asarray(offsets, np.int64) - base_offset
    whole = [(c, r) for c, r in pieces if len(r)]
    if _speedups is not None and len(whole) == 1:
        codec_number = codec_id(compression)
        header = header_fields(
            base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
            attributes=codec.attributes(codec_number, log_append=log_append,
                                        is_transactional=is_transactional, is_control=is_control),
            last_offset_delta=int(deltas[-1]), max_timestamp=log_append_time if log_append else None,
            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=codec.NO_SEQUENCE)
        return first_columns.batch(first_rows, base_timestamp, deltas, header, codec_number,
                                   compression_level)
    regions = []
    max_timestamp = codec.NO_TIMESTAMP
    done = 0
    for columns, rows in pieces:
        region, top = columns.region(rows, base_timestamp, deltas[done:done + len(rows)])
        done += len(rows)
        regions.append(region)
        max_timestamp = max(max_timestamp, top)
    if log_append and log_append_time is not None:
        max_timestamp = log_append_time
    return codec._build(b"".join(regions), record_count=n, base_offset=base_offset,
                        last_offset_delta=int(deltas[-1]), base_timestamp=base_timestamp,
                        max_timestamp=max_timestamp, compression=compression,
                        partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=codec.NO_SEQUENCE,
                        is_transactional=is_transactional, is_control=is_control, log_append=log_append,
                        compression_level=compression_level)


def header_fields(*, base_offset: int, partition_leader_epoch: int, attributes: int, last_offset_delta: int,
                  max_timestamp: int | None, producer_id: int, producer_epoch: int, base_sequence: int,
                  ) -> tuple:
    """The ``header`` tuple of ``_speedups.encode_batch`` (None: the rows' largest timestamp), its
    fields range-checked as ``batch._build`` checks them.

    :raises InvalidMessageError: a field out of range.
    """
    check = codec.check_header_ranges
    check(base_offset=base_offset, partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
          producer_epoch=producer_epoch, base_sequence=base_sequence)
    return (base_offset, partition_leader_epoch, attributes, last_offset_delta, max_timestamp, producer_id,
            producer_epoch, base_sequence)


def encode_retained(columns: Columns, batch: codec.RecordBatch, rows: np.ndarray, offsets: np.ndarray, *,
                    delete_horizon_ms: int = codec.NO_TIMESTAMP) -> bytes:
    """``batch.encode_retained_batch`` of ``batch``'s kept ``rows`` of ``columns`` (their absolute
    ``offsets``), in one C call; the same bytes (tested equal).

    :raises InvalidMessageError: a field Kafka cannot encode.
    """
    has_horizon = delete_horizon_ms != codec.NO_TIMESTAMP
    log_append = batch.timestamp_type == LOG_APPEND_TIME
    base_timestamp = delete_horizon_ms if has_horizon else int(columns.timestamps[rows[0]])
    header = header_fields(
        base_offset=batch.base_offset, partition_leader_epoch=batch.partition_leader_epoch,
        attributes=codec.attributes(codec_id(batch.compression), log_append=log_append,
                                    is_transactional=batch.is_transactional, is_control=batch.is_control,
                                    delete_horizon=has_horizon),
        last_offset_delta=batch.last_offset - batch.base_offset,
        max_timestamp=batch.max_timestamp if log_append else None, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence)
    return columns.batch(rows, base_timestamp, np.asarray(offsets, np.int64) - batch.base_offset, header,
                         codec_id(batch.compression))


def native() -> bool:
    """Whether the C encoder is there (``SEGSTORE_PURE_PYTHON=1`` or no compiler: the Python codec)."""
    return _speedups is not None
