"""Extra indexes under retention.

Retention moves a stream's log start: lookups answer from it as the store does
without the index.
"""

from __future__ import annotations

import io
from pathlib import Path

import segstore
from segstore import cli

BASE_MS = 1_700_000_000_000
LATER_MS = BASE_MS + 10**12          # every file is older than any reserved time then
ROCKETMQ_CONFIG = {"mappedFileSizeCommitLog": 2048, "mappedFileSizeConsumeQueue": 20 * 8}


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli.main(list(argv), out), out.getvalue()


def _rocketmq_retention(path: Path) -> None:
    """The admin's manual delete: every commitlog file but the last, and the queue files below it."""
    rc, out = _run("retention", str(path), "--config", "fileReservedTime=0", "--now-ms", str(LATER_MS))
    assert rc == 0 and "deleted" in out, out


def test_rocketmq_time_index_answers_from_the_queue_start_after_retention(tmp_path: Path) -> None:
    """The first messages left after retention are found: message 30, the queue's first, is stored at
    +30 and is the answer for any earlier time.  The broker's ``ConsumeQueue.getOffsetInQueueByTime``
    (rocketmq-all-4.9.7) searches from ``minLogicOffset`` and passes over units below the commitlog's
    min offset: the store's own answer without the index is that."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", indexes=["time"], **ROCKETMQ_CONFIG,
                       **{"layout.interval.bytes": 1000}) as store:
        for i in range(40):
            store.append_batch([{"topic": "A", "queue_id": 0, "body": bytes(100), "keys": ["k"],
                                 "store_timestamp": BASE_MS + i}])
    _rocketmq_retention(path)
    with segstore.open(path, format="rocketmq") as store:
        start, end = store.offset_range("A", 0)
        assert 0 < start < end and store.indexes is not None and "time" in store.indexes
        answers = {t: store.offset_for_time("A", 0, t) for t in (0, BASE_MS, BASE_MS + start, BASE_MS + end)}
    with segstore.open(path, format="rocketmq", indexes=[]) as plain:
        assert answers == {t: plain.offset_for_time("A", 0, t) for t in answers}
    assert answers == {0: start, BASE_MS: start, BASE_MS + start: start, BASE_MS + end: None}
    rc, out = _run("query", str(path), "--topic", "A", "--queue", "0", "--timestamp", "0")
    assert rc == 0 and f"offset {start} is the first" in out
