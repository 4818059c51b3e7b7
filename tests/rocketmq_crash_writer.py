"""A writer process for the crash tests: appends numbered messages forever, printing each acknowledged one.

Usage: python rocketmq_crash_writer.py STORE FLUSH_DISK_TYPE
Each line printed is ``i physical_offset``, written only after append() returned.
It resumes numbering after the messages already in the store.
"""

from __future__ import annotations

import sys

import segstore

CONFIG = {
    "mappedFileSizeCommitLog": 16384,
    "mappedFileSizeConsumeQueue": 400,
    "maxHashSlotNum": 16,
    "maxIndexNum": 64,
    "flushIntervalCommitLog": 5,
    "flushIntervalConsumeQueue": 10,
}
QUEUES = 2


def message(i: int) -> dict:
    return {
        "topic": "Crash",
        "queue_id": i % QUEUES,
        "body": f"m{i}-".encode() * (1 + i % 7),
        "keys": [f"k{i}"],
    }


def main() -> None:
    path, flush_type = sys.argv[1], sys.argv[2]
    with segstore.open(path, format="rocketmq", mode="a", flushDiskType=flush_type, **CONFIG) as store:
        i = sum(store.offset_range("Crash", q)[1] for q in store.partitions("Crash")) if store.topics() else 0
        while True:
            result = store.append(message(i))
            sys.stdout.write(f"{i} {result.position}\n")
            sys.stdout.flush()
            i += 1


if __name__ == "__main__":
    main()
