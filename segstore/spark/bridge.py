"""What the JVM side of the ``segstore`` source asks of Python: schema, pushdown, plan, read, write.

The JVM side (``segstore/spark/java``) decodes no format: each request here runs the
same planner and the same ``Store.scan_arrow`` as PySpark's Python data source
(:mod:`.datasource`), in a warm worker process (:mod:`.worker`).  Requests and answers
are JSON objects; :func:`read` answers with Arrow record batches of exactly the
columns asked, in Spark's types (timestamps in microseconds), which the JVM hands to
Spark as they are.

- ``schema``: ``{"options"}`` -> ``{"schema": Spark schema JSON, "format"}``;
- ``pushdown``: ``{"options", "filters"}`` -> ``{"exact": [indexes]}``, the filters
  the planner applies exactly (Spark need not evaluate them again);
- ``plan``: ``{"options", "schema", "filters", "parallelism"}`` ->
  ``{"partitions": [spec, ...]}`` (one per Spark task; ``spec`` goes back in ``read``);
- ``read``: ``{"partition": spec, "schema"}`` -> Arrow batches;
- streams (``{"options", "schema", "parallelism", "availableNow"}`` and): ``stream_initial``,
  ``stream_snapshot``, ``stream_latest`` (``"start"``, ``"maxRows"``) -> ``{"offsets"}``
  (``{topic: {partition: next offset}}``), ``stream_plan`` (``"start"``, ``"end"``) ->
  ``{"partitions"}``: :class:`.datasource.SegstoreStreamReader`'s answers.
- batch writes (the JVM side's writer; its tasks stage Arrow files themselves):
  ``write_begin`` (``{"options", "schema", "overwrite", "local"}`` -> ``{"root", "jobDir"}``),
  ``write_commit`` (``{"options", "root", "jobDir", "staged"}``) and ``write_abort``
  (``{"options", "root", "jobDir"}``) -> ``{}``: :class:`.datasource.StagedJob`'s.

Driver requests cost one store open each (planning opens it again, as the Python
source does); reads are ``O(records)`` in Arrow and C.  Not thread-safe: one request
at a time per process.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from ..errors import ConfigError
from ..store import Store
from . import planning
from .datasource import (
    TIME_COLUMNS,
    SegstoreStreamReader,
    StagedJob,
    StagedWrite,
    check_append_mode,
    check_destination,
    check_read_schema,
    check_write_schema,
    local_staging_root,
    open_store,
    read_slices,
)
from .options import ReadOptions, parse_read_options, parse_write_options
from .schema import arrow_schema, spark_schema

_COMPARISONS: dict[str, type[Filter]] = {
    "EqualTo": EqualTo, "GreaterThan": GreaterThan, "GreaterThanOrEqual": GreaterThanOrEqual,
    "LessThan": LessThan, "LessThanOrEqual": LessThanOrEqual,
}

#: Rows per batch handed to the JVM unless ``maxRecordsPerBatch`` says otherwise.
JVM_MAX_RECORDS_PER_BATCH = 1 << 16

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: Formats detected per (path, format option, config) in this process: the driver asks
#: ``pushdown`` and ``plan`` of the same store in turn, and detecting opens it.
_formats: dict[tuple[str, str | None, tuple[tuple[str, str], ...]], str] = {}


def _format(options: ReadOptions) -> str:
    key = (options.path, options.format, options.config)
    found = _formats.get(key)
    if found is None:
        with open_store(options.path, options.format, options.config) as store:
            found = _formats[key] = store.format
        if len(_formats) > 64:
            _formats.pop(next(iter(_formats)))
    return found


def _literal(node: Mapping[str, Any]) -> Any:
    kind, value = node["type"], node["value"]
    if kind == "string":
        return str(value)
    if kind == "int":
        return int(value)
    if kind == "timestamp":
        return _EPOCH + timedelta(microseconds=int(value))
    if kind == "timestamp_ntz":
        # no zone: never a time bound (the planner takes zoned times only)
        return _EPOCH.replace(tzinfo=None) + timedelta(microseconds=int(value))
    raise ConfigError(f"expected a literal of type string, int or timestamp, found {kind!r}")


def filters_from_json(nodes: list[Mapping[str, Any]]) -> list[Filter]:
    """Spark's pushed comparisons (as the JVM side writes them) as PySpark's filter objects."""
    result: list[Filter] = []
    for node in nodes:
        attribute = (str(node["attribute"]),)
        if node["kind"] == "In":
            result.append(In(attribute, tuple(_literal(v) for v in node["values"])))
        else:
            comparison: Any = _COMPARISONS[node["kind"]]      # each takes (attribute, value)
            result.append(comparison(attribute, _literal(node["value"])))
    return result


def schema(request: Mapping[str, Any]) -> dict[str, Any]:
    """The store's Spark schema (``includeHeaders`` as given) and its format."""
    options = parse_read_options(request["options"], streaming=None)      # a batch read's or a stream's
    format_name = _format(options)
    return {"schema": spark_schema(format_name, include_headers=options.include_headers).json(),
            "format": format_name}


def pushdown(request: Mapping[str, Any]) -> dict[str, Any]:
    """Which of the filters the planner applies exactly (by index)."""
    options = parse_read_options(request["options"], streaming=None)
    filters = filters_from_json(request["filters"])
    _, remaining = planning.pushdown(filters, time_column=TIME_COLUMNS.get(_format(options)))
    left = {id(f) for f in remaining}
    return {"exact": [i for i, f in enumerate(filters) if id(f) not in left]}


def plan(request: Mapping[str, Any]) -> dict[str, Any]:
    """The read's input partitions, pruned by the pushed filters, in a multiple of ``parallelism``.

    :raises SegstoreError: as the Python source's planning (unknown options, offsets lost...).
    """
    options = parse_read_options(request["options"])
    if options.min_partitions is None:
        options = dataclasses.replace(options, min_partitions=max(1, int(request.get("parallelism") or 1)))
    format_name = _format(options)
    check_read_schema(StructType.fromJson(json.loads(request["schema"])), format_name)
    pruning, _ = planning.pushdown(filters_from_json(request.get("filters") or []),
                                   time_column=TIME_COLUMNS.get(format_name))
    with open_store(options.path, format_name, options.config) as store:
        result = planning.plan_batch(store, options, pruning)
    plan_id = uuid.uuid4().hex
    return {"partitions": [_spec(p, request["options"], plan_id)
                           for p in planning.input_partitions(result, options, format_name)]}


def _spec(partition: InputPartition, options: Mapping[str, str], plan: str) -> dict[str, Any]:
    """An input partition as JSON for the JVM side, which hands it back in ``read``."""
    assert isinstance(partition, planning.SegstoreInputPartition)
    return {"index": partition.index, "path": partition.path, "format": partition.format,
            "config": [list(c) for c in partition.config],
            "slices": [[s.topic, s.partition, s.start, s.end, s.bytes] for s in partition.slices],
            "order": partition.order, "options": dict(options), "plan": plan}


#: The store the last read of this process opened, kept for the next read of the same plan:
#: ``(plan id, path, format, config)`` and the store.
_kept: tuple[tuple[Any, ...], Store] | None = None


def _plan_store(partition: planning.SegstoreInputPartition, plan: str | None) -> Store | None:
    """The store to read a partition of ``plan`` from: the one an earlier task of the same plan
    opened in this process, else a new one (closing the one kept for another plan).

    Every task of a plan was planned from the same state of the store and opens it after the
    plan was made, so a store one task opened serves the others as well as a fresh one, and
    saves the open.  A new plan (another query, the next micro-batch) opens afresh, on the maps
    the worker keeps (``worker._warm``: a RocketMQ queue's messages lie all over the commitlog,
    and each new map faulted the whole file in again).  None: no plan id, open per read.
    """
    global _kept
    if plan is None:
        return None
    key = (plan, partition.path, partition.format, partition.config)
    if _kept is not None and _kept[0] == key:
        return _kept[1]
    if _kept is not None:
        _kept[1].close()
        _kept = None
    store = open_store(partition.path, partition.format, partition.config)
    _kept = (key, store)
    return store


def _stream(request: Mapping[str, Any]) -> SegstoreStreamReader:
    """The stream reader a stream request asks, after the checks :func:`plan` makes of a batch read
    (``schema``: the query's, the user's where given).

    :raises ConfigError: bad options, or a schema naming a column the store lacks or giving one another type.
    """
    options = parse_read_options(request["options"], streaming=True)
    if options.min_partitions is None:
        options = dataclasses.replace(options, min_partitions=max(1, int(request.get("parallelism") or 1)))
    format_name = _format(options)
    check_read_schema(StructType.fromJson(json.loads(request["schema"])), format_name)
    reader = SegstoreStreamReader(options, format_name, spark_schema(format_name,
                                                                     include_headers=options.include_headers))
    reader.available_now = request.get("availableNow")
    return reader


def stream_initial(request: Mapping[str, Any]) -> dict[str, Any]:
    """``{"offsets"}``: where a new stream starts (``startingOffsets``...), per partition."""
    return {"offsets": _stream(request).initialOffset()}


def stream_snapshot(request: Mapping[str, Any]) -> dict[str, Any]:
    """``{"offsets"}``: the store's ends now, where an ``availableNow`` query stops."""
    reader = _stream(request)
    reader.prepareForTriggerAvailableNow()
    return {"offsets": reader.available_now}


def stream_latest(request: Mapping[str, Any]) -> dict[str, Any]:
    """``{"offsets", "lastTriggerMillis"}``: the end of the next micro-batch from ``start`` as the JVM's
    read limits admit it (:meth:`.datasource.SegstoreStreamReader.admit`): ``minRows`` (its delay from the
    options, as the JVM's ``ReadMinRows`` was built from them) with ``lastTriggerMillis``, the time of the
    stream's last micro-batch, which the JVM keeps, and ``maxRows``; neither: every offset waiting."""
    reader = _stream(request)
    reader.last_trigger_ms = int(request.get("lastTriggerMillis") or 0)
    low, high = request.get("minRows"), request.get("maxRows")
    offsets = reader.admit(request["start"], None if low is None else int(low),
                           None if high is None else int(high))
    return {"offsets": offsets, "lastTriggerMillis": reader.last_trigger_ms}


def stream_plan(request: Mapping[str, Any]) -> dict[str, Any]:
    """The input partitions of the micro-batch ``[start, end)``, as :func:`plan` gives them."""
    partitions = _stream(request).partitions(request["start"], request["end"])
    plan_id = uuid.uuid4().hex
    return {"partitions": [_spec(p, request["options"], plan_id) for p in partitions]}


def _job(request: Mapping[str, Any]) -> StagedJob:
    return StagedJob(parse_write_options(request["options"]), str(request["root"]), str(request["jobDir"]))


def write_begin(request: Mapping[str, Any]) -> dict[str, Any]:
    """``{"root", "jobDir"}``: a batch write's staging, made after the checks the Python data source's
    ``writer`` makes (append mode, the frame's columns); ``local``: the session runs ``local[...]``
    (stage in :func:`.datasource.local_staging_root`)."""
    options = parse_write_options(request["options"])
    check_append_mode(options, bool(request.get("overwrite")))
    check_write_schema(StructType.fromJson(json.loads(request["schema"])), options)
    check_destination(options)
    job = StagedJob.start(options, uuid.uuid4().hex,
                          local_root=local_staging_root() if request.get("local") else None)
    return {"root": job.root, "jobDir": job.job_dir}


def write_commit(request: Mapping[str, Any]) -> dict[str, Any]:
    """Append the files the tasks staged (``staged``: ``[partition, path, rows]`` each) to the store, in
    partition order, then remove the staging (:meth:`.datasource.StagedJob.commit`)."""
    _job(request).commit([StagedWrite(int(p), str(path), int(rows)) for p, path, rows in request["staged"]])
    return {}


def write_abort(request: Mapping[str, Any]) -> dict[str, Any]:
    """Remove a failed job's staging; the store is not touched."""
    _job(request).clean()
    return {}


def read(request: Mapping[str, Any]) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The Arrow schema of the batches, and the batches of one planned partition's columns.

    The batches are produced lazily; errors (a store that changed since planning, a
    corrupt record) are raised by the iterator, at their position in the read.
    """
    spec = request["partition"]
    options = parse_read_options(spec["options"], streaming=None)         # a batch's or a micro-batch's
    if "maxrecordsperbatch" not in {name.lower() for name in spec["options"]}:
        # Spark takes the store's own batches whole here: no Python per row in between, and
        # each batch costs a frame and a load however few rows it has
        options = dataclasses.replace(options, max_records_per_batch=JVM_MAX_RECORDS_PER_BATCH)
    columns = StructType.fromJson(json.loads(request["schema"]))
    partition = planning.SegstoreInputPartition(
        int(spec["index"]), str(spec["path"]), str(spec["format"]),
        tuple((str(k), str(v)) for k, v in spec["config"]),
        tuple(planning.Slice(str(t), int(p), int(a), int(b), int(n)) for t, p, a, b, n in spec["slices"]),
        str(spec.get("order", planning.ORDER_QUEUE)))
    store = _plan_store(partition, spec.get("plan"))
    # a Kafka store's chunks of as many rows (its data buffers bound them still): each chunk costs the
    # worker its Python and the JVM a frame and a load; 4M records of 100-byte values came in 256
    # chunks of 16k rows, now in 98 of about 41k (worker CPU per query 0.26 -> 0.22 s)
    return arrow_schema(columns), read_slices(partition, columns, options, store,
                                              chunk_rows=options.max_records_per_batch)
