"""Arrow batches of the Spark source: the store's columnar batches cut to a slice and cast to exactly
the schema Spark checks, values unchanged (no session; Spark rows are compared in test_spark_fixtures)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

import segstore
from segstore.spark.datasource import read_slices, to_spark_batch
from segstore.spark.options import parse_read_options
from segstore.spark.planning import SegstoreInputPartition, Slice
from segstore.spark.schema import KAFKA_SCHEMA, ROCKETMQ_SCHEMA, arrow_schema, spark_schema

ROCKETMQ_STORE = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA_TXN = FIXTURES / "kafka" / "txn" / "topic-0"
TIMES = ("timestamp", "bornTimestamp", "storeTimestamp")


@pytest.mark.parametrize(("path", "include_headers"), [(ROCKETMQ_STORE, True), (ROCKETMQ_STORE, False),
                                                       (KAFKA_TXN, True), (KAFKA_TXN, False)])
def test_columnar_batches_become_batches_of_the_exact_spark_schema(path, include_headers):
    with segstore.open(str(path)) as store:
        schema = spark_schema(store.format, include_headers=include_headers)
        target = arrow_schema(schema)
        for batch in store.scan_arrow(target.names):
            spark = to_spark_batch(batch, target)
            assert spark.schema.equals(target)
            assert ("headers" in spark.schema.names) == include_headers
            for name in target.names:
                got, had = spark.column(name), batch.column(name)
                if name in TIMES:   # ms -> us, same instant
                    millis = had.cast(pa.int64()).to_pylist()
                    assert got.cast(pa.int64()).to_pylist() == [ms * 1000 for ms in millis]
                elif name == "headers":     # none are null, as Spark's Kafka connector gives them
                    assert got.to_pylist() == [h or None for h in had.to_pylist()]
                else:               # list/map fields renamed only
                    assert got.to_pylist() == had.to_pylist(), name


def _partition(path, fmt, slices) -> SegstoreInputPartition:
    pieces = tuple(Slice(t, p, lo, hi, 0) for t, p, lo, hi in slices)
    return SegstoreInputPartition(0, str(path), fmt, (), pieces)


@settings(max_examples=40, deadline=None)
@given(bounds=st.tuples(st.integers(0, 130), st.integers(0, 130)), max_rows=st.integers(1, 50),
       committed=st.booleans())
def test_kafka_slices_are_cut_at_their_offsets_and_sized(bounds, max_rows, committed):
    """A slice ``[start, end)`` yields exactly ``read``'s records in it (control records hidden, aborted ones
    too under read_committed), in batches of at most ``maxRecordsPerBatch`` rows."""
    start, end = min(bounds), max(bounds)
    opts = {"path": str(KAFKA_TXN), "maxRecordsPerBatch": str(max_rows)}
    if committed:
        opts["kafka.isolation.level"] = "read_committed"
    options = parse_read_options(opts)
    with segstore.open(str(KAFKA_TXN)) as store:
        isolation = "read_committed" if committed else "read_uncommitted"
        want = [r.offset for r in store.read("topic", 0, start, isolation=isolation)
                if r.offset < end and not r.batch.is_control]
    task = _partition(KAFKA_TXN, "kafka", [("topic", 0, start, end)])
    batches = list(read_slices(task, KAFKA_SCHEMA, options))
    assert all(0 < b.num_rows <= max_rows for b in batches)
    assert all(b.schema.equals(arrow_schema(KAFKA_SCHEMA)) for b in batches)
    assert [o for b in batches for o in b.column("offset").to_pylist()] == want


def test_rocketmq_slices_of_several_queues_in_one_task():
    with segstore.open(str(ROCKETMQ_STORE)) as store:
        queues = [(t, q) for t in store.topics() for q in store.partitions(t)]
        slices = []
        want = []
        for t, q in queues:
            low, high = store.offset_range(t, q)
            lo, hi = low + (high - low) // 3, high - (high - low) // 4
            slices.append((t, q, lo, hi))
            want += [(t, q, r.queue_offset, r.body) for r in store.read(t, q, lo) if r.queue_offset < hi]
    assert want
    options = parse_read_options({"path": str(ROCKETMQ_STORE), "maxRecordsPerBatch": "3"})
    batches = list(read_slices(_partition(ROCKETMQ_STORE, "rocketmq", slices), ROCKETMQ_SCHEMA, options))
    assert all(0 < b.num_rows <= 3 for b in batches)
    rows = [r for b in batches for r in b.to_pylist()]
    assert [(r["topic"], r["partition"], r["offset"], r["value"]) for r in rows] == want


def test_schema_choice():
    assert spark_schema("rocketmq") is ROCKETMQ_SCHEMA and spark_schema("kafka") is KAFKA_SCHEMA
    assert "headers" not in spark_schema("kafka", include_headers=False).fieldNames()


def test_the_format_schema_detected_travels_to_the_planner(monkeypatch):
    """Spark pickles the source after ``schema()`` and plans with that copy: its reader takes the
    detected format instead of opening the store a second time to detect it again."""
    import pickle

    from segstore.spark import datasource

    source = datasource.SegstoreDataSource({"path": str(KAFKA_TXN)})
    assert source.schema().fieldNames() == spark_schema("kafka", include_headers=False).fieldNames()
    planner_copy = pickle.loads(pickle.dumps(source))

    def no_open(*args, **kwargs):
        raise AssertionError("the store was opened again to detect its format")

    monkeypatch.setattr(datasource, "open_store", no_open)
    reader = planner_copy.reader(planner_copy.schema())
    assert reader.format == "kafka"
    # a fresh source (a user-given schema: Spark never calls schema()) still detects it
    monkeypatch.undo()
    fresh = datasource.SegstoreDataSource({"path": str(ROCKETMQ_STORE)})
    assert fresh.reader(ROCKETMQ_SCHEMA).format == "rocketmq"
