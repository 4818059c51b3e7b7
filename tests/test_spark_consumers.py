"""``spark.read.format("segstore_consumers")``: consumer groups as a table, the rows the library gives."""

from __future__ import annotations

import json

import pytest
from spark_support import FIXTURES, spark  # noqa: F401

import segstore
from segstore.errors import ConfigError

pytestmark = pytest.mark.spark

REAL = FIXTURES / "real" / "kraft-confluent-7.5.1"


def test_the_options_are_checked_before_spark_reads():
    pytest.importorskip("pyspark")
    from segstore.spark.consumers import parse_consumers_options

    parsed = parse_consumers_options({"path": "/x", "group": "g", "nowMs": "5",
                                      "offsetsRetentionMinutes": "60"})
    assert (parsed.path, parsed.group, parsed.now_ms, parsed.retention_minutes) == ("/x", "g", 5, 60)
    with pytest.raises(ConfigError, match="unknown option"):
        parse_consumers_options({"path": "/x", "subscribe": "t"})
    with pytest.raises(ConfigError, match="needs a path"):
        parse_consumers_options({})


def test_a_rocketmq_table_holds_the_rows_consumer_progress_lists_unless_hidden_asked(tmp_path):
    """The table's RocketMQ rows are those ``segstore consumers`` lists (4.9.7 AdminBrokerProcessor
    .getConsumeStats: a topic topics.json lacks is skipped); option ``hidden`` adds the others, as
    ``consumers --hidden`` does.  Read through the reader an executor runs, without a session."""
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import InputPartition

    from segstore.spark.consumers import ConsumersReader, parse_consumers_options

    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": b"x"}, {"topic": "Gone", "queue_id": 0,
                                                                          "body": b"y"}])
        store.commit_offsets("g", {("T", 0): 1, ("Gone", 0): 1})
    topics = path / "config" / "topics.json"
    document = json.loads(topics.read_text())
    del document["topicConfigTable"]["Gone"]
    topics.write_text(json.dumps(document))

    def topics_read(**options: str) -> list[str]:
        reader = ConsumersReader(parse_consumers_options({"path": str(path), **options}))
        return [topic for batch in reader.read(InputPartition(0))
                for topic in batch.column("topic").to_pylist()]

    assert topics_read() == topics_read(hidden="false") == ["T"]
    assert topics_read(hidden="true") == ["Gone", "T"]


def test_a_kafka_log_dirs_groups_read_as_a_table(spark):  # noqa: F811
    with segstore.open(REAL) as store:
        expected = [row.to_dict() for row in store.consumer_groups().rows]
    df = spark.read.format("segstore_consumers").load(str(REAL))
    got = [row.asDict() for row in df.orderBy("group", "topic", "partition").collect()]
    for row in got:
        row["extras"] = json.loads(row["extras"])
    assert got == expected and len(got) == 5
    lagging = df.where("group = 'order-group' AND log_end_offset IS NOT NULL").select("topic", "lag")
    lagging = lagging.collect()
    assert [(r.topic, r.lag) for r in lagging] == [("payment-create-response", 0)]


def test_a_damaged_offsets_log_fails_the_read_unless_asked_for_the_rows_before_it(spark, tmp_path):  # noqa: F811
    """As ``segstore consumers`` exits 1 over a ``__consumer_offsets`` batch that does not read (its
    later commits are missing, so its lag would be wrong), the table fails naming file and byte;
    ``failOnDamage=false`` gives the rows read before it, as the command prints them."""
    from test_kafka_consumer_groups import _damaged

    logs, log, data = _damaged(tmp_path)
    damage = f"{log}:{2 * len(data) // 5 + 17}: expected CRC-32C"
    with pytest.raises(Exception, match="failOnDamage=false") as failed:
        spark.read.format("segstore_consumers").load(str(logs)).collect()
    assert damage in str(failed.value)
    rows = spark.read.format("segstore_consumers").option("failOnDamage", "false").load(str(logs)).collect()
    assert [(r.group, r.topic, r.partition, r.committed_offset) for r in rows] == [("g", "orders", 0, 2)]
    with pytest.raises(Exception, match="failOnDamage must be true or false"):
        spark.read.format("segstore_consumers").option("failOnDamage", "maybe").load(str(logs)).collect()
