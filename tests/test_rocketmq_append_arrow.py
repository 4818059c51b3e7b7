"""RocketMQ ``append_arrow``: the rows ``scan_arrow`` yields appended as stored messages (appendarrow.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_rocketmq import appendarrow
from segstore_rocketmq.message import SYSFLAG_TRANSACTION_PREPARED
from segstore_rocketmq.store import RocketMQStore

from segstore.errors import InvalidMessageError, InvalidTopicError, MessageTooLargeError

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 400, "maxHashSlotNum": 16,
         "maxIndexNum": 40}
needs_c = pytest.mark.skipif(not appendarrow.available(), reason="segstore_rocketmq._speedups not built")


def store_files(path: Path) -> dict[str, bytes]:
    """Every file's bytes but the index files' names (wall-clock times) and config (save times)."""
    out = {}
    for dirpath, _, names in os.walk(path):
        for i, name in enumerate(sorted(names)):
            rel = os.path.relpath(os.path.join(dirpath, name), path)
            if not rel.startswith("config"):
                out[f"index/{i}" if rel.startswith("index") else rel] = Path(dirpath, name).read_bytes()
    return out


def messages(n: int) -> list[dict]:
    """Messages to a few queues, with user properties, negative flags, a prepared transaction message."""
    out: list[dict] = [{"topic": ["A", "Bee"][i % 2], "queue_id": i % 3,
                        "body": bytes([i % 251]) * (i * 7 % 300), "tags": f"t{i % 4}" if i % 5 else None,
                        "keys": [f"k{i}", f"o{i % 7}"] if i % 3 else None,
                        "properties": {"user": f"v{i}"} if i % 4 == 0 else None, "born_timestamp": 1_000 + i,
                        "flag": i - 50} for i in range(n)]
    out[5]["sys_flag"] = SYSFLAG_TRANSACTION_PREPARED       # stored without a consume-queue entry
    return out


def scanned(path: Path, config: dict = SMALL) -> pa.Table:
    with RocketMQStore(str(path), "r", config) as store:
        return pa.Table.from_batches(list(store.scan_arrow()))


def fill(path: Path, items: list[dict], config: dict = SMALL) -> pa.Table:
    with RocketMQStore(str(path), "a", config, clock=lambda: 1_700_000_000_000) as store:
        for item in items:
            store.append(item)
    return scanned(path, config)


def copy(source: pa.Table, path: Path, config: dict = SMALL, **kwargs) -> int:
    with RocketMQStore(str(path), "a", config, clock=lambda: 1) as store:
        return sum(store.append_arrow(b) for b in source.to_batches(**kwargs))


def test_a_scan_appended_to_an_empty_store_scans_equal(tmp_path):
    source = fill(tmp_path / "a", messages(120))
    assert copy(source, tmp_path / "b", max_chunksize=17) == source.num_rows == 120
    assert scanned(tmp_path / "b").equals(source)
    with RocketMQStore(str(tmp_path / "b"), "r", SMALL) as store:
        assert store.verify() == []
        assert [m.body for m in store.query_by_key("Bee", "k7")] == [messages(120)[7]["body"]]
    assert store_files(tmp_path / "a") == store_files(tmp_path / "b")


def test_a_scan_of_a_trimmed_store_appended_where_it_starts_scans_equal(tmp_path):
    """A store whose oldest commitlog files retention deleted starts past 0 (RocketMQ 4.9.7
    ``ConsumeQueue.correctMinOffset``); ``append_arrow`` places rows at the store's next offsets, so an
    empty store started where the source starts first (``start_commitlog_at``, ``start_queue_at``: a
    slave's ``MappedFileQueue.getLastMappedFile(startOffset)`` and ``fillPreBlank``) scans equal to it,
    queue and physical offsets and msgIds included, where it used to start at 0."""
    fill(tmp_path / "a", messages(120))
    with RocketMQStore(str(tmp_path / "a"), "a", {**SMALL, "fileReservedTime": 1}) as store:
        store.retention(now_ms=4_000_000_000_000)     # every file but the last expired
    source = scanned(tmp_path / "a")
    with RocketMQStore(str(tmp_path / "a"), "r", SMALL) as src, \
            RocketMQStore(str(tmp_path / "b"), "a", SMALL, clock=lambda: 1) as dst:
        assert src.commitlog.min_offset > 0
        assert dst.start_commitlog_at(src.commitlog.min_offset)
        for topic in src.topics():
            for queue in src.partitions(topic):
                dst.start_queue_at(topic, queue, src.offset_range(topic, queue)[0])
        for batch in source.to_batches(max_chunksize=17):
            dst.append_arrow(batch)
    assert scanned(tmp_path / "b").equals(source)
    with RocketMQStore(str(tmp_path / "a"), "r", SMALL) as src, \
            RocketMQStore(str(tmp_path / "b"), "r", SMALL) as dst:
        queues = [(t, q) for t in src.topics() for q in src.partitions(t)]
        assert any(src.offset_range(t, q)[0] > 0 for t, q in queues)
        assert [dst.offset_range(t, q) for t, q in queues] == [src.offset_range(t, q) for t, q in queues]
        assert dst.verify() == []


@needs_c
def test_the_columnar_path_writes_what_the_reference_writes(tmp_path, monkeypatch):
    """The rows the columnar path takes (v1, IPv4 hosts) are written by it, byte for byte as the
    reference (a RocketMQMessage a row through append_stored) writes them; the others by the reference."""
    items = messages(80)
    items[9]["born_host"] = "[::1]:7"        # an IPv6 host: its chunk goes to the reference
    source = fill(tmp_path / "a", items).combine_chunks()     # one batch: chunks of 20 rows below
    placed = []
    real = RocketMQStore.append_placed
    monkeypatch.setattr(RocketMQStore, "append_placed",
                        lambda self, *args: placed.append(args[2]) or real(self, *args))
    copy(source, tmp_path / "columns", max_chunksize=20)
    assert placed == [20, 20, 20]
    monkeypatch.setattr(appendarrow, "available", lambda: False)
    copy(source, tmp_path / "reference", max_chunksize=20)
    assert placed == [20, 20, 20]
    assert store_files(tmp_path / "columns") == store_files(tmp_path / "reference")
    assert store_files(tmp_path / "columns") == store_files(tmp_path / "a")


plain = st.fixed_dictionaries(
    {"topic": st.sampled_from(["A", "Ü-b"]), "queue_id": st.integers(0, 2), "body": st.binary(max_size=200)},
    optional={"tags": st.text(max_size=5), "keys": st.lists(st.text(max_size=4), max_size=3),
              "properties": st.dictionaries(st.sampled_from(["x", "y", "zz"]), st.text(max_size=6),
                                            max_size=2),
              "born_timestamp": st.integers(0, 2**50), "flag": st.integers(-(2**31), 2**31 - 1)})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(plain, min_size=1, max_size=40), version=st.sampled_from(["4.9.7", "4.8.0"]))
def test_scan_append_arrow_round_trip(tmp_path_factory, items, version):
    tmp = tmp_path_factory.mktemp("arrow")
    config = {**SMALL, "rocketmqVersion": version}
    try:
        source = fill(tmp / "a", items, config)
    except InvalidMessageError:      # a separator in a property: the store refuses it anyway
        return
    copy(source, tmp / "b", config)
    assert scanned(tmp / "b", config).equals(source)
    assert store_files(tmp / "a") == store_files(tmp / "b")


def test_what_append_arrow_refuses(tmp_path):
    source = fill(tmp_path / "a", messages(8)).slice(0, 3)
    with RocketMQStore(str(tmp_path / "b"), "a", SMALL) as store:
        with pytest.raises(InvalidMessageError):
            store.append_arrow([{"topic": "A"}])
        with pytest.raises(InvalidMessageError):
            store.append_arrow(source.drop_columns(["properties"]))
        hostile = source.set_column(source.schema.get_field_index("topic"), "topic",
                                    pa.array(["../x"] * 3, pa.string()))
        with pytest.raises(InvalidTopicError):
            store.append_arrow(hostile)
        props = pa.array([[("a", "b\x02c")]] * 3, pa.map_(pa.string(), pa.string()))
        with pytest.raises(InvalidMessageError):
            store.append_arrow(source.set_column(source.schema.get_field_index("properties"), "properties",
                                                 props))
        assert store.commitlog.end == 0 and store.append_arrow(source.slice(0, 0)) == 0


def _with(source: pa.Table, name: str, values: list, kind: pa.DataType | None = None) -> pa.Table:
    kind = kind or source.schema.field(name).type
    column = pa.array(values, kind)
    return source.set_column(source.schema.get_field_index(name), pa.field(name, kind), column)


@pytest.mark.parametrize(("name", "values", "kind", "said"), [
    # before: written as a message of magic 5, which verify then called damaged (and no reader reads)
    ("magic", [5, 5, 5], None, r"expected message magic 0xDAA320A7 \(v1\) or 0xDAA320AB \(v2\), found 5"),
    # before: cut to 32 bits by the C encoder without a word
    ("sysFlag", [0, 1 << 40, 0], pa.int64(), r"expected SYSFLAG in \[-2147483648, 2147483647\]"),
    ("flag", [0, -(1 << 33), 0], pa.int64(), r"expected FLAG in \[-2147483648, 2147483647\]"),
    # before: a null's slot read as queue 0 / sysFlag 0
    ("partition", [0, None, 0], None, "expected a queue id in .*found None"),
    ("sysFlag", [0, None, 0], None, "expected SYSFLAG as an int, found NoneType None"),
    # before: AttributeError (Host.parse(None)), AttributeError (a str column has no .offsets),
    # ArrowInvalid (the cast of 'x' to int64)
    ("bornHost", [None, "127.0.0.1:1", "127.0.0.1:1"], pa.string(), "expected a host .*found None"),
    ("properties", ["a", "b", "c"], pa.string(), "expected a map column properties .*found string"),
    ("bornTimestamp", ["x", "y", "z"], pa.string(),
     "expected times or integers in column bornTimestamp, found string"),
])
def test_a_column_value_the_message_cannot_carry_is_refused_and_nothing_written(tmp_path, name, values, kind,
                                                                                said):
    source = fill(tmp_path / "a", messages(8)).slice(0, 3)
    with RocketMQStore(str(tmp_path / "b"), "a", SMALL) as store:
        with pytest.raises(InvalidMessageError, match=said):
            store.append_arrow(_with(source, name, values, kind))
        assert store.commitlog.end == 0 and store.topics() == []
        assert store.append_arrow(source) == 3 and store.verify() == []


def test_a_refused_call_writes_nothing(tmp_path, monkeypatch):
    """Every chunk is checked before the first is written: a row refused in the last chunk leaves the
    store as it was (the chunks before it included)."""
    monkeypatch.setattr(appendarrow, "CHUNK_ROWS", 4)
    source = fill(tmp_path / "a", messages(12)).combine_chunks()
    props = source.column("properties").to_pylist()
    props[10] = [("a", "b\x02c")]
    bad = source.set_column(source.schema.get_field_index("properties"), "properties",
                            pa.array(props, source.schema.field("properties").type))
    big = source.set_column(source.schema.get_field_index("value"), "value",
                            pa.array([b""] * 11 + [bytes(5000)], pa.binary()))
    with RocketMQStore(str(tmp_path / "b"), "a", SMALL) as store:
        for table, error in ((bad, InvalidMessageError), (big, MessageTooLargeError)):
            with pytest.raises(error):
                store.append_arrow(table)
            assert store.commitlog.end == 0 and store.topics() == []
        assert store.append_arrow(source) == 12


PROPERTY_MAP = pa.map_(pa.string(), pa.string())
property_rows = st.lists(st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(st.sampled_from("ab\x01\x02é"), max_size=4),
                       st.one_of(st.none(), st.text(st.sampled_from("xy\x01\x02ü"), max_size=5))),
             max_size=4)), max_size=12)


@needs_c
@settings(max_examples=200, deadline=None)
@given(rows=property_rows, trailing=st.booleans(), cut=st.integers(0, 3), long=st.booleans())
def test_the_properties_join_in_c_equals_its_reference(rows, trailing, cut, long):
    """_speedups.join_properties (appendarrow._properties) against the pyarrow reference: sliced
    columns, null rows and values, separators, rows over the properties limit."""
    if long and rows:
        rows[0] = [("big", "v" * 32_767)]
    batch = pa.RecordBatch.from_arrays([pa.array(rows, PROPERTY_MAP)], ["properties"])
    batch = batch.slice(min(cut, batch.num_rows))
    got = appendarrow._properties(batch, trailing)
    want = appendarrow._properties_reference(batch, trailing)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        def texts(s):
            return [bytes(memoryview(s.data)[a:a + n]) for a, n in zip(s.starts.tolist(), s.lengths.tolist(),
                                                                          strict=True)]
        assert texts(got) == texts(want)
        assert len(got.starts) == batch.num_rows


def test_integer_columns_of_other_widths_append_the_same(tmp_path):
    """The integer columns may come in any integer type (a frame's int64 partition, a uint8 count);
    one that is not integers is refused with a typed error naming the column."""
    source = fill(tmp_path / "a", messages(30))
    widened = source
    for name, kind in (("partition", pa.int64()), ("magic", pa.int64()), ("flag", pa.int64()),
                       ("sysFlag", pa.int16()), ("reconsumeTimes", pa.uint8())):
        at = widened.schema.get_field_index(name)
        widened = widened.set_column(at, name, widened.column(name).cast(kind))
    copy(widened, tmp_path / "b")
    assert store_files(tmp_path / "b") == store_files(tmp_path / "a")
    texts = source.set_column(source.schema.get_field_index("flag"), "flag",
                              pa.array(["x"] * source.num_rows, pa.string()))
    with RocketMQStore(str(tmp_path / "c"), "a", SMALL) as store:
        # the columnar path's words, or the reference path's (no accelerator): the column named either way
        with pytest.raises(InvalidMessageError, match=r"(?i)flag"):
            store.append_arrow(texts)
        assert store.commitlog.end == 0


@pytest.mark.parametrize("columns", [True, False], ids=["columns", "reference"])
def test_a_body_of_max_message_size_is_stored_with_its_headers(tmp_path, monkeypatch, columns):
    """RocketMQ 4.9.7 ``CommitLog.MessageExtEncoder.encode``: ``maxMessageSize`` bounds the body; the
    message may be 64 KiB longer.  A 1024-byte body (a 1130-byte message) under ``maxMessageSize=1024``
    is appended as stored, in columns and entry by entry alike; a 1025-byte body is refused."""
    if not columns:
        monkeypatch.setattr(appendarrow, "available", lambda: False)
    elif not appendarrow.available():
        pytest.skip("segstore_rocketmq._speedups not built")
    item = {"topic": "A", "queue_id": 1, "body": bytes(1024), "keys": ["k1"], "tags": "t",
            "born_timestamp": 5}
    source = fill(tmp_path / "a", [item])
    assert source.column("size").to_pylist() == [1130]
    limited = {**SMALL, "maxMessageSize": 1024}
    assert copy(source, tmp_path / "b", limited) == 1
    assert store_files(tmp_path / "b") == store_files(tmp_path / "a")
    bigger = fill(tmp_path / "c", [{**item, "body": bytes(1025)}])
    with RocketMQStore(str(tmp_path / "d"), "a", limited) as store:
        with pytest.raises(MessageTooLargeError, match="body of at most 1024 bytes"):
            store.append_arrow(bigger)
        assert store.commitlog.end == 0


@pytest.mark.parametrize("pair", [("u", ""), ("", "v")])
@pytest.mark.parametrize("columnar", [True, False])
def test_a_property_with_an_empty_name_or_value_is_refused_as_append_refuses_it(tmp_path, monkeypatch, pair,
                                                                                 columnar):
    """RocketMQ 4.9.7 ``MessageDecoder.string2messageProperties`` drops a pair without a name or value
    (``kvSepIndex > index && kvSepIndex < newIndex - 1``) and ``Message.putUserProperty`` refuses a blank
    one: append() refuses it.  Before: append_arrow wrote the pair, and the row scanned back without it
    (``{"u": ""}`` as ``{}``).  A dump line refuses it as well, both of its paths; a converted store's
    message still keeps it byte for byte (``append_stored``: a batch send stores the client's properties
    as sent, ``CommitLog.MessageExtBatchEncoder``)."""
    from segstore_rocketmq import jsonl
    from segstore_rocketmq.message import Host, RocketMQMessage, decode_properties
    from test_rocketmq_write_input_columns import line

    if not columnar:
        monkeypatch.setattr(appendarrow, "available", lambda: False)
        monkeypatch.setattr(jsonl, "COLUMNAR", False)
    source = fill(tmp_path / "a", messages(8)).slice(0, 3)
    props = pa.array([[("a", "1")], [("a", "1"), pair], []], source.schema.field("properties").type)
    said = "expected property names and values that are not empty"
    with RocketMQStore(str(tmp_path / "b"), "a", SMALL) as store:
        with pytest.raises(InvalidMessageError, match=said) as err:
            store.append({"topic": "A", "value": b"x", "properties": dict([pair])})
        with pytest.raises(InvalidMessageError, match=f"{said}.* in row 1$") as err_arrow:
            store.append_arrow(_with(source, "properties", props.to_pylist(), props.type))
        assert str(err_arrow.value).startswith(str(err.value))
        with pytest.raises(InvalidMessageError, match=said):
            edited = {**line(2), "properties": {**line(2)["properties"], **dict([pair])}}
            jsonl.write_lines(store, [line(1), edited])
        assert store.commitlog.end == 0 and store.topics() == []
        host = Host.parse("127.0.0.1:1")
        store.append_stored([RocketMQMessage(topic="A", queue_id=0, body=b"x", born_host=host,
                                             store_host=host, properties=dict([("a", "1"), pair]))])
    stored = b"".join(data for name, data in store_files(tmp_path / "b").items() if "commitlog" in name)
    assert f"a\x011\x02{pair[0]}\x01{pair[1]}".encode() in stored
    assert decode_properties(f"a\x011\x02{pair[0]}\x01{pair[1]}".encode()) == {"a": "1"}
