"""A writer for the crash harness (tests/crash.py): opens, appends and closes a store in cycles, forever.

Usage: python crash_writer.py FORMAT STORE SEED

Each cycle opens the store for appending (the open recovers what the last kill left),
appends a random number of single messages, batches and columnar batches (``append_arrow``), and
closes it, so a kill can
land while opening (recovery included), appending, rolling a file (the sizes in
:data:`CONFIGS` roll the commitlog every few dozen messages and a consume queue or an
offset index every few) and closing.  Output lines, each flushed:

    o            about to open
    a I J        messages I..J-1 acknowledged (the append that wrote them returned)
    c            about to close

Message ``i`` is :func:`message`; numbering resumes after the messages in the store.
"""

from __future__ import annotations

import random
import sys
import time

import segstore

CONFIGS = {
    "rocketmq": {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 16,
                 "maxIndexNum": 40, "flushIntervalCommitLog": 5, "flushIntervalConsumeQueue": 10},
    # segment.index.bytes 64: the time index (5 slots) and offset index (8) fill before segment.bytes, so
    # kills land in rolls forced by a full index and in recoveries that rebuild more entries than fit
    "kafka": {"segment.bytes": 4096, "segment.index.bytes": 64, "index.interval.bytes": 256},
}
TOPICS = {"rocketmq": "Crash", "kafka": "crash"}
#: A RocketMQ v1 message's magic code (``MessageDecoder.MESSAGE_MAGIC_CODE``), a stored message's column.
MESSAGE_MAGIC_V1 = -626843481
QUEUES = {"rocketmq": 2, "kafka": 1}


def body(i: int) -> bytes:
    return f"m{i}-".encode() * (1 + i % 9)


def message(fmt: str, i: int) -> dict:
    if fmt == "rocketmq":
        return {"topic": "Crash", "queue_id": i % QUEUES[fmt], "body": body(i), "keys": [f"k{i}"]}
    return {"topic": "crash", "partition": 0, "value": body(i), "key": f"k{i}".encode()}


def columns(fmt: str, start: int, stop: int):
    """Messages ``start..stop-1`` as the columns ``append_arrow`` takes (RocketMQ: stored messages, as
    ``scan_arrow`` yields them; Kafka: a producer's)."""
    import pyarrow as pa  # here: only a writer that draws a columnar batch pays for it

    from segstore.columns import KAFKA_SCHEMA, ROCKETMQ_SCHEMA

    ids = range(start, stop)
    if fmt == "kafka":
        names = ("topic", "partition", "key", "value")
        rows = [{"topic": "crash", "partition": 0, "key": f"k{i}".encode(), "value": body(i)} for i in ids]
        return pa.Table.from_pylist(rows, schema=pa.schema([KAFKA_SCHEMA.field(n) for n in names]))
    now = int(time.time() * 1000)
    host = "127.0.0.1:10911"
    rows = [{"topic": "Crash", "partition": i % QUEUES[fmt], "value": body(i),
             "properties": [("KEYS", f"k{i}")], "bornTimestamp": now, "storeTimestamp": now,
             "bornHost": host, "storeHost": host, "sysFlag": 0, "flag": 0, "reconsumeTimes": 0,
             "preparedTransactionOffset": 0, "magic": MESSAGE_MAGIC_V1}
            for i in ids]
    return pa.Table.from_pylist(rows, schema=pa.schema([ROCKETMQ_SCHEMA.field(n) for n in rows[0]]))


def count(store, fmt: str) -> int:
    """Messages in the store (it holds exactly messages 0..count-1)."""
    topic = TOPICS[fmt]
    if topic not in store.topics():
        return 0
    return sum(store.offset_range(topic, p)[1] for p in store.partitions(topic))


def main() -> None:
    fmt, path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    out = sys.stdout
    while True:
        out.write("o\n")
        out.flush()
        with segstore.open(path, format=fmt, mode="a", **CONFIGS[fmt]) as store:
            i = count(store, fmt)
            for _ in range(rng.randint(1, 30)):
                n = rng.choice([1, 1, 1, 2, 5, 17])
                if n == 1:
                    store.append(message(fmt, i))
                elif rng.random() < 0.3:
                    store.append_arrow(columns(fmt, i, i + n))
                else:
                    store.append_batch([message(fmt, j) for j in range(i, i + n)])
                out.write(f"a {i} {i + n}\n")
                out.flush()
                i += n
            out.write("c\n")
            out.flush()


if __name__ == "__main__":
    main()
