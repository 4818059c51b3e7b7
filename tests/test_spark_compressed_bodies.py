"""Spark reads a RocketMQ body its producer compressed as consumers read it, unless told otherwise
(``decompressBodies``), on both readers; see tests/test_rocketmq_bodycodec.py for the codec."""

from __future__ import annotations

import zlib

import pytest
from spark_support import reader, source, spark  # noqa: F401

import segstore

pytestmark = pytest.mark.spark

BODIES = [b"hello " * 2000, b"plain", b"z" * 6000]


def test_compressed_bodies_are_read_inflated_unless_decompress_bodies_is_false(spark, reader, tmp_path):  # noqa: F811
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        for n, body in enumerate(BODIES):
            stored, flag = (body, 0) if n == 1 else (zlib.compress(body), 0x301)
            store.append({"topic": "T", "queue_id": n % 2, "body": stored, "sys_flag": flag})
    df = source(spark, reader).load(str(path))
    rows = df.select("partition", "offset", "value").collect()
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in rows)
    assert [value for *_, value in got] == [BODIES[0], BODIES[2], BODIES[1]]
    stored = source(spark, reader).option("decompressBodies", "false").load(str(path))
    values = sorted(bytes(r.value) for r in stored.select("value").collect())
    assert values == sorted([zlib.compress(BODIES[0]), BODIES[1], zlib.compress(BODIES[2])])
