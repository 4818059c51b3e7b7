"""Fill a small filesystem with a store of either format, then read it while the disk is still full.

Usage: python disk_full_writer.py FORMAT STORE_DIR FILLER [small|large]
Run by tests/test_disk_full.py on a small tmpfs (in a user and mount namespace).  ``large``: files of
the sizes the brokers keep that are bigger than the whole filesystem (blocks reserved step by step
as the writer goes).
``FILLER`` is a file taking some of the space; it is deleted after the disk filled,
so the writer can go on.  Prints one JSON object: what was acknowledged, what the
errors were, what reads found while the disk was full and after.
"""

from __future__ import annotations

import json
import os
import sys

import segstore
from segstore.errors import SegstoreError, StorageFullError

ROCKETMQ = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 4000, "maxHashSlotNum": 64,
            "maxIndexNum": 256, "maxMessageSize": 8192}
KAFKA = {"segment.bytes": 64 * 1024, "segment.index.bytes": 4096}
#: each file bigger than the 2 MiB filesystem the test mounts for it (commitlog 8 MiB, an IndexFile of
#: 1.3 MB, Kafka index files of 4 MiB)
ROCKETMQ_LARGE = {"mappedFileSizeCommitLog": 8 << 20, "mappedFileSizeConsumeQueue": 1_000_000,
                  "maxHashSlotNum": 4096, "maxIndexNum": 65536, "maxMessageSize": 8192}
KAFKA_LARGE = {"segment.bytes": 8 << 20, "segment.index.bytes": 4 << 20}


def message(fmt: str, i: int) -> dict:
    body = f"m{i}-".encode() * (20 + i % 50)
    if fmt == "rocketmq":
        return {"topic": "Full", "queue_id": i % 2, "body": body, "keys": [f"k{i}"]}
    return {"topic": "full", "partition": 0, "value": body, "key": f"k{i}".encode()}


def body(fmt: str, i: int) -> str:
    msg = message(fmt, i)
    return (msg["body"] if fmt == "rocketmq" else msg["value"]).decode()


def read_all(fmt: str, path: str, config: dict) -> dict:
    """Every record's body (a typed error's text if reading failed) and verify's problems."""
    try:
        with segstore.open(path, format=fmt, mode="r", **config) as store:
            topic = "Full" if fmt == "rocketmq" else "full"
            bodies = []
            for p in store.partitions(topic):
                bodies += [bytes(m.body if fmt == "rocketmq" else m.value).decode()
                           for m in store.read(topic, p)]
            return {"bodies": sorted(bodies), "problems": [str(p) for p in store.verify()]}
    except SegstoreError as err:
        return {"error": f"{type(err).__name__}: {err}"}


def main() -> None:
    fmt, path, filler = sys.argv[1:4]
    large = sys.argv[4:5] == ["large"]
    if fmt == "rocketmq":
        config = ROCKETMQ_LARGE if large else ROCKETMQ
    else:
        config = KAFKA_LARGE if large else KAFKA
    acked: list[str] = []
    out: dict = {"errors": []}
    i = 0
    try:
        with segstore.open(path, format=fmt, mode="a", **config) as store:
            while True:
                try:
                    store.append_batch([message(fmt, i + j) for j in range(3)])
                except StorageFullError as err:
                    out["errors"].append(f"{type(err).__name__}: {err}")
                    if len(out["errors"]) == 1:
                        out["acked_when_full"] = sorted(acked)
                        out["full_read"] = read_all(fmt, path, config)     # beside the writer, disk full
                        os.remove(filler)                                   # space again: go on
                        continue
                    break
                acked += [body(fmt, i + j) for j in range(3)]
                i += 3
    except StorageFullError as err:     # close could not write a config file: still typed
        out["errors"].append(f"close: {type(err).__name__}: {err}")
    out["acked"] = sorted(acked)
    out["after"] = read_all(fmt, path, config)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
