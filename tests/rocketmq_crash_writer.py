"""A writer process for the crash tests: appends numbered messages forever, printing each acknowledged one.

Usage: python rocketmq_crash_writer.py STORE FLUSH_DISK_TYPE [MODULE:QUALNAME:enter|exit:N]
Each line printed is ``i physical_offset``, written only after append() returned.
It resumes numbering after the messages already in the store.
"""

from __future__ import annotations

import importlib
import os
import signal
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


def kill_at(target: str) -> None:
    """SIGKILL this process at the N-th call of a function: ``module:Class.method:enter|exit:N`` (on entering
    it, or on its return), a kill landing at that point of a roll."""
    module, qualname, when, nth = target.split(":")
    owner = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original, calls = getattr(owner, name), [0]

    def killing(*args, **kwargs):
        calls[0] += 1
        if calls[0] == int(nth) and when == "enter":
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if calls[0] == int(nth) and when == "exit":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, staticmethod(killing) if isinstance(owner.__dict__[name], staticmethod) else killing)


def main() -> None:
    path, flush_type = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        kill_at(sys.argv[3])
    with segstore.open(path, format="rocketmq", mode="a", flushDiskType=flush_type, **CONFIG) as store:
        i = sum(store.offset_range("Crash", q)[1] for q in store.partitions("Crash")) if store.topics() else 0
        while True:
            result = store.append(message(i))
            sys.stdout.write(f"{i} {result.position}\n")
            sys.stdout.flush()
            i += 1


if __name__ == "__main__":
    main()
