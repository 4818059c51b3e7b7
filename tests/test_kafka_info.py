"""Kafka ``info``: each partition's ``max_timestamp``, the largest record timestamp (the segments'
``maxTimestampSoFar``, Kafka 3.8 ``LogSegment.maxTimestampSoFar``; what ``UnifiedLog.fetchOffsetByTimestamp``
answers for ``ListOffsetsRequest.MAX_TIMESTAMP`` with its timestamp, ``kafka-get-offsets --time
max-timestamp``)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from conftest import kafka_log_dir

import segstore
from segstore import cli


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(argv, out)
    return code, out.getvalue()


def times_of(store, topic: str, partition: int):
    for batch in store.partition_of(topic, partition).batches():
        for record in batch.records():
            yield record.offset, record.timestamp


def kafka_store(path: Path) -> Path:
    return kafka_log_dir(path, 40, lambda j: [("h", b"x")])


def test_kafka_info_gives_each_partition_its_largest_timestamp(tmp_path):
    """``max_timestamp``: the largest record timestamp of the partition (segments' ``maxTimestampSoFar``,
    what ``ListOffsets`` answers for the max-timestamp spec), though a later record's is smaller (a-0's
    last records, 5-7); -1 for an empty partition, None (``-``) where a segment cannot be read."""
    path = kafka_store(tmp_path / "kafka")
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "empty", "partition": 0, "value": b"x", "timestamp": 1}])
        store.delete_records(1, topic="empty", partition=0)
    with segstore.open(path) as store:
        info = {(p["topic"], p["partition"]): p["max_timestamp"] for p in store.info()["partitions"]}
        want = {(t, p): max((ts for _, ts in times_of(store, t, p)), default=-1)
                for t in store.topics() for p in store.partitions(t)}
        segment = store.partition_of("a", 0).segments[-1]
        last_batch = [header.position for header in segment.headers()][-1]
        log = Path(segment.path)
    assert info == want and info["a", 0] > 1_000 and info["empty", 0] == 1
    with log.open("r+b") as f:             # the last batch's length: below any batch's (a corrupt entry)
        f.seek(last_batch + 8)             # (a magic above 2 would not do: Kafka frames it as v2, keeps it)
        f.write((3).to_bytes(4, "big"))
    code, out = run(["info", str(path), "--json"])
    assert code == 0
    damaged = {(p["topic"], p["partition"]): p["max_timestamp"] for p in json.loads(out)["partitions"]}
    assert damaged["a", 0] is None and damaged["b", 1] == info["b", 1]


def test_info_consumers_and_retention_read_the_checkpoints_once_not_once_a_partition(tmp_path, monkeypatch):
    """Each partition's high watermark is its entry in replication-offset-checkpoint: parsing the file once
    a partition made info on a thousand partitions take seconds.  A log dir's checkpoints are parsed once
    each, however many partitions ask."""
    from segstore_kafka import checkpoints

    from segstore.records import Message

    with segstore.open(tmp_path / "logs", format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v", partition=p, timestamp=1000) for p in range(40)])
    parses = []
    real = checkpoints._parse
    monkeypatch.setattr(checkpoints, "_parse", lambda *a: parses.append(a[0]) or real(*a))
    with segstore.open(tmp_path / "logs") as store:
        info = store.info()
        store.consumer_groups()
        store.retention(dry_run=True)
    assert [p["high_watermark"] for p in info["partitions"]] == [1] * 40
    log_dir_files = [path for path in parses if Path(path).parent == tmp_path / "logs"]
    assert len(log_dir_files) == len(set(log_dir_files)) <= 4     # each partition's own epochs aside


def test_a_checkpoint_is_parsed_once_per_version_of_the_file(tmp_path, monkeypatch):
    """``read_offsets`` keeps what it parsed with the file's identity (device, inode, size, mtime): the
    same version is not parsed again, a rewrite in place or a replacement is, and what a caller gets is
    its own copy."""
    from segstore_kafka import checkpoints

    path = str(tmp_path / "replication-offset-checkpoint")
    checkpoints.write_offsets(path, {("t", 0): 5, ("t", 1): 7})
    parses = []
    real = checkpoints._parse
    monkeypatch.setattr(checkpoints, "_parse", lambda *a: parses.append(a[0]) or real(*a))
    first = checkpoints.read_offsets(path)
    first[("t", 0)] = 99                                            # the caller's copy
    assert checkpoints.read_offsets(path) == {("t", 0): 5, ("t", 1): 7} and len(parses) == 1
    assert checkpoints.offset_of(path, ("t", 1)) == 7 and checkpoints.offset_of(path, ("u", 0)) is None
    assert len(parses) == 1
    checkpoints.write_offsets(path, {("t", 0): 6})                  # replaced (a new inode)
    assert checkpoints.offset_of(path, ("t", 0)) == 6 and len(parses) == 2
    Path(path).write_text("0\n2\nt 0 8\nt 1 9\n")                   # rewritten in place, another size
    assert checkpoints.read_offsets(path) == {("t", 0): 8, ("t", 1): 9} and len(parses) == 3
    Path(path).unlink()
    assert checkpoints.read_offsets(path) == {} and checkpoints.offset_of(path, ("t", 0)) is None
