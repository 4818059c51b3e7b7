"""``spark.read.format("segstore_consumers").load(PATH)``: consumer groups' offsets and lag as a table.

One row per consumer group and partition (RocketMQ queue), what ``segstore consumers
PATH --json`` prints (``Store.consumer_groups``, :mod:`segstore.consumers`): ``group,
topic, partition, committed_offset, log_end_offset, lag, consumer_id, host, client_id,
state`` and ``extras`` (the format's own fields as JSON text).  Options:

=============================  =================================================================
``path``                       the store (a Kafka log dir, a RocketMQ store root)
``format``                     ``kafka`` / ``rocketmq``; detected if absent
``group``                      only this group
``nowMs``                      Kafka: judge offset expiry at this time (ms)
``offsetsRetentionMinutes``    Kafka: the broker's ``offsets.retention.minutes``
``hidden``                     RocketMQ: ``true`` also the rows ``mqadmin consumerProgress`` does
                               not list (a topic ``config/topics.json`` lacks, queues past its
                               ``readQueueNums``); default ``false``
``failOnDamage``               ``true`` (default): a file that does not read whole (a damaged
                               ``__consumer_offsets`` segment) fails the read, naming file and
                               byte, as ``segstore consumers`` exits 1 over it; ``false``: the
                               rows read before the damage (later commits are missing from them)
``config``, ``storageOptions`` as the ``segstore`` source
=============================  =================================================================

The table is small (a row per group partition) and read in one input partition on an
executor, from the one decoder the CLI uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from ..consumers import CONSUMER_SCHEMA, to_arrow
from ..errors import ConfigError, CorruptDataError
from .datasource import open_store, to_spark_batch
from .options import _bool, _check_known, _config, _int, _lower, _storage_options

CONSUMERS_NAME = "segstore_consumers"
#: The options as the docs spell them (compared lower-cased, as Spark hands them in any case).
_NAMES = ("path", "format", "group", "nowMs", "offsetsRetentionMinutes", "failOnDamage", "hidden", "config",
          "storageOptions")

#: The Spark schema of :data:`segstore.consumers.CONSUMER_SCHEMA`.
CONSUMERS_SPARK_SCHEMA = StructType([
    StructField("group", StringType(), nullable=False),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("committed_offset", LongType()),
    StructField("log_end_offset", LongType()),
    StructField("lag", LongType()),
    StructField("consumer_id", StringType()),
    StructField("host", StringType()),
    StructField("client_id", StringType()),
    StructField("state", StringType()),
    StructField("extras", StringType()),
])
assert [f.name for f in CONSUMERS_SPARK_SCHEMA.fields] == CONSUMER_SCHEMA.names


@dataclass(frozen=True, slots=True)
class ConsumersOptions:
    """The parsed options (picklable: they travel to the executor)."""

    path: str
    format: str | None
    group: str | None
    now_ms: int | None
    retention_minutes: int | None
    config: tuple[tuple[str, str], ...]
    fail_on_damage: bool = True
    hidden: bool = False


def parse_consumers_options(options: Mapping[str, str]) -> ConsumersOptions:
    """Validate the options.

    :raises ConfigError: no path, an unknown option, or a number that is not one.
    """
    opts = _lower(options)
    _check_known(opts, _NAMES, "option")
    path = opts.get("path")
    if not path:
        raise ConfigError(f'{CONSUMERS_NAME} needs a path: spark.read.format("{CONSUMERS_NAME}").load(PATH)')
    return ConsumersOptions(path, opts.get("format"), opts.get("group"), _int(opts, "nowMs"),
                            _int(opts, "offsetsRetentionMinutes", minimum=1),
                            _config(opts) + _storage_options(opts), _bool(opts, "failOnDamage", default=True),
                            _bool(opts, "hidden", default=False))


class ConsumersReader(DataSourceReader):
    """Reads the table in one input partition."""

    def __init__(self, options: ConsumersOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        o = self.options
        extra: dict[str, Any] = ({} if o.retention_minutes is None
                                 else {"offsets_retention_ms": o.retention_minutes * 60_000})
        with open_store(o.path, o.format, o.config) as store:
            if o.hidden and store.format == "rocketmq":
                extra["hidden"] = True
            found = store.consumer_groups(o.group, now_ms=o.now_ms, **extra)
        if found.damage and o.fail_on_damage:
            # a table missing the commits after a damaged batch would answer lag wrongly, silently
            raise CorruptDataError(f"{'; '.join(found.damage)} (the groups and offsets after it are not "
                                   "read; option failOnDamage=false reads the rows before it)")
        table = to_arrow(found.rows)
        for batch in table.to_batches():
            yield to_spark_batch(batch, CONSUMER_SCHEMA)


class ConsumersDataSource(DataSource):
    """``spark.read.format("segstore_consumers")`` (batch reads only)."""

    @classmethod
    def name(cls) -> str:
        return CONSUMERS_NAME

    def schema(self) -> StructType:
        return CONSUMERS_SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return ConsumersReader(parse_consumers_options(self.options))


__all__ = ["CONSUMERS_NAME", "CONSUMERS_SPARK_SCHEMA", "ConsumersDataSource", "parse_consumers_options"]
