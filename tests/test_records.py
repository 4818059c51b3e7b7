"""One public record type (``segstore.records.Record``) for every format, and one meaning of its keys in
the library, in Spark's columns (``scan_arrow``, which the Spark source reads) and in conversion.

Oracles: each record's ``dump --json`` object (checked against the brokers' own ``dump.jsonl`` by
the fixture tests) for the common fields, and the broker's rule for RocketMQ keys
(``MessageConst.KEY_SEPARATOR`` is one space; ``IndexService.buildIndex`` indexes each non-empty
token).
"""

from __future__ import annotations

import base64

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES, ROCKETMQ_FIXTURES
from segstore_rocketmq import columnar as rocketmq_columnar

import segstore
from segstore.convert.mapping import kafka_to_rocketmq, rocketmq_to_kafka
from segstore.convert.pipeline import kafka_entry_of
from segstore.records import COMMON_FIELDS, CREATE_TIME, Record

STORES = ([FIXTURES / "rocketmq" / name / "store" for name in ROCKETMQ_FIXTURES]
          + [FIXTURES / "kafka" / name / "topic-0" for name in KAFKA_FIXTURES])


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@pytest.mark.parametrize("path", STORES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_read_scan_and_find_return_records_whose_common_fields_are_the_dump_json_fields(path):
    with segstore.open(path) as store:
        rocketmq = store.format == "rocketmq"
        scanned = list(store.scan())
        assert scanned and all(isinstance(r, Record) for r in scanned)
        for record in scanned:
            obj = store.to_json(record)
            common = record.common()
            assert list(common) == list(COMMON_FIELDS)
            assert common["topic"] == obj["topic"]
            assert common["partition"] == obj["queue_id" if rocketmq else "partition"]
            assert common["offset"] == obj["queue_offset" if rocketmq else "offset"]
            assert common["timestamp"] == obj["born_timestamp" if rocketmq else "timestamp"]
            assert common["timestamp_type"] == (CREATE_TIME if rocketmq else obj["timestamp_type"])
            assert _b64(common["value"]) == obj["body" if rocketmq else "value"]
            if rocketmq:
                assert common["keys"] == obj["keys"]
                assert common["key"] == (obj["keys"][0].encode() if obj["keys"] else None)
                assert common["headers"] == [(k, v.encode()) for k, v in obj["properties"].items()]
                assert record.extras["physical_offset"] == obj["physical_offset"]
            else:
                assert _b64(common["key"]) == obj["key"]
                assert common["headers"] == [(h["key"], _unb64(h["value"])) for h in obj["headers"]]
                assert record.extras == obj["batch"]
            assert record.to_message().key == record.key
        topic = scanned[0].topic
        partition = store.partitions(topic)[0]
        assert all(isinstance(r, Record) for r in store.read(topic, partition))
        keyed = next((r for r in store.read(topic, partition) if r.keys), None)
        if keyed is not None:
            assert all(isinstance(r, Record) for r in store.find(topic, keyed.keys[0]))


@pytest.mark.parametrize("path", STORES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_spark_columns_hold_the_records_common_fields(path):
    """What the Spark source reads (``scan_arrow``'s connector columns) is the record's common fields."""
    columns = ["key", "value", "topic", "partition", "offset", "headers"]
    with segstore.open(path) as store:
        rows = [row for batch in store.scan_arrow(columns + (["keys"] if store.format == "rocketmq" else []))
                for row in batch.to_pylist()]
        scanned = list(store.scan())
        assert len(rows) == len(scanned)
        for row, record in zip(rows, scanned, strict=True):
            assert (row["key"], row["value"], row["topic"], row["partition"], row["offset"]) == (
                record.key, record.value, record.topic, record.partition, record.offset)
            assert [(h["key"], h["value"]) for h in row["headers"]] == record.headers
            if "keys" in row:
                assert row["keys"] == record.keys


#: KEYS values as a producer may set them (``Message.setKeys(Collection)`` joins with one space).
RAW_KEYS = ["one", "two words", " lead", "trail ", "a  b", "   ", "ключ ключ2", None]


@pytest.mark.parametrize("accelerated", [True, False], ids=["c", "python"])
def test_rocketmq_keys_mean_the_same_in_library_spark_and_conversion(tmp_path, monkeypatch, accelerated):
    if not accelerated:
        monkeypatch.setattr(rocketmq_columnar, "_speedups", None)
    path = tmp_path / "store"
    with segstore.open(path, "rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": f"m{i}",
                             "properties": {} if raw is None else {"KEYS": raw}}
                            for i, raw in enumerate(RAW_KEYS)])
    with segstore.open(path) as store:
        records = list(store.read("T", 0))
        expected = [[] if raw is None else [k for k in raw.split(" ") if k] for raw in RAW_KEYS]
        assert [r.keys for r in records] == expected                              # library
        assert [r.key for r in records] == [k[0].encode() if k else None for k in expected]
        columns = [row for b in store.scan_arrow(["key", "keys"]) for row in b.to_pylist()]
        assert [(c["key"], c["keys"] or []) for c in columns] == [(r.key, r.keys) for r in records]  # Spark
        assert [rocketmq_to_kafka(r).key for r in records] == [r.key for r in records]           # conversion
        for record in records:                                                    # find: every token
            for token in record.keys:
                assert record.offset in [r.offset for r in store.find("T", token)]


KAFKA_KEYS = [None, b"", b"plain", b"two words", b"\x00\xff binary", "ключ".encode()]


def test_kafka_keys_mean_the_same_in_library_spark_and_conversion(tmp_path):
    src = tmp_path / "k-0"
    with segstore.open(src, "kafka", mode="a") as store:
        store.append_batch([{"topic": "k", "value": b"v", "key": key} for key in KAFKA_KEYS])
    with segstore.open(src) as store:
        records = list(store.scan())
        assert [r.key for r in records] == KAFKA_KEYS                              # library
        assert [r.keys for r in records] == [
            [] if k is None else [k.decode("utf-8", "surrogateescape")] for k in KAFKA_KEYS]
        assert all(k.encode("utf-8", "surrogateescape") == r.key for r in records for k in r.keys)
        columns = [row["key"] for b in store.scan_arrow(["key"]) for row in b.to_pylist()]
        assert columns == KAFKA_KEYS                                                # Spark
        for record in records:                                                      # find: the whole key
            if record.key is not None:
                assert [r.offset for r in store.find("k", record.key)] == [record.offset]
        # conversion: a key that is one plain token becomes KEYS, so the RocketMQ record has the same key
        for record in records:
            converted = kafka_to_rocketmq(kafka_entry_of(record), store_host=_host())
            text = None if record.key is None else record.key.decode("utf-8", "replace")
            plain = bool(text) and " " not in text and text.encode() == record.key
            assert converted.key == (record.key if plain else None)
        assert store.find("k", "two") == []


def _host():
    from segstore_rocketmq.message import Host
    return Host.parse("127.0.0.1:10911")
