"""Records below a Kafka partition's log start offset: every store-level view is a consumer's view.

A consumer never sees them: Kafka 3.8.0 ``core/src/main/scala/kafka/log/UnifiedLog.scala`` ``read``
(through ``LocalLog.read``) refuses a fetch below ``logStartOffset`` with
``OffsetOutOfRangeException``, and ``Partition.deleteRecordsOnLeader`` moves the log start into the
middle of a batch (``maybeIncrementLogStartOffset``) without rewriting it, so the records of that batch
below the start stay in the file.  ``read``, ``scan_arrow``, Spark and ``convert`` start at the log start;
``dump PART`` (text and ``--json``) and ``scan`` must too.  ``dump FILE`` is ``kafka-dump-log --files``
(``core/src/main/scala/kafka/tools/DumpLogSegments.scala``), which prints the file as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from segstore_kafka.checkpoints import write_offsets
from segstore_kafka.partition import LATEST_TIMESTAMP

import segstore
from segstore.cli import main
from segstore.records import Message


def _build(logs: Path, *, batches: int = 6, per_batch: int = 10, segment_bytes: int | None = None) -> Path:
    """``t-0`` of ``batches`` batches of ``per_batch`` records (offsets 0.. in order)."""
    config = {} if segment_bytes is None else {"segment.bytes": segment_bytes}
    with segstore.open(logs, format="kafka", mode="a", **config) as store:
        n = 0
        for _ in range(batches):
            store.append_batch([Message("t", f"v{n + i}".encode(), key=f"k{n + i}".encode(), partition=0,
                                        timestamp=1_700_000_000_000 + n + i) for i in range(per_batch)])
            n += per_batch
    return logs / "t-0"


def _dump_json_offsets(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[int]:
    assert main(["dump", str(path), "--json", *extra]) == 0
    return [json.loads(line)["offset"] for line in capsys.readouterr().out.splitlines()]


def _dump_text_offsets(path: Path, capsys: pytest.CaptureFixture[str]) -> list[int]:
    assert main(["dump", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    return [int(line.split()[2]) for line in lines if line.startswith("| offset: ")]


@pytest.mark.parametrize("where", ["partition", "logdir"])
def test_store_views_start_at_the_log_start(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            where: str) -> None:
    """``delete-records --before 25``: the log start lies inside the batch 20..29."""
    part = _build(tmp_path / "logs")
    assert main(["delete-records", str(part), "--before", "25"]) == 0
    capsys.readouterr()
    path = part if where == "partition" else tmp_path / "logs"
    with segstore.open(path) as store:
        assert store.offset_range("t", 0) == (25, 60)
        consumer = [r.offset for r in store.read("t", 0)]
        assert consumer == list(range(25, 60))
        assert [r.offset for r in store.scan()] == consumer
        assert [o for b in store.scan_arrow(["offset"]) for o in b.column("offset").to_pylist()] == consumer
    assert _dump_json_offsets(path, capsys) == consumer
    assert _dump_json_offsets(path, capsys, "--isolation", "read_committed") == consumer
    assert _dump_text_offsets(path, capsys) == consumer
    # the straddling batch keeps its own header (what the file holds), then the records from the start
    assert main(["dump", str(path)]) == 0
    text = capsys.readouterr().out
    assert "baseOffset: 20 lastOffset: 29" in text and "baseOffset: 10 lastOffset: 19" not in text


def test_segments_wholly_below_the_log_start_are_not_dumped(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A log start checkpointed before the segments below it were deleted (a crash between the two, as
    ``UnifiedLog.deleteLogStartOffsetBreachedSegments`` runs after the checkpoint): the store starts there."""
    part = _build(tmp_path / "logs", segment_bytes=300)
    bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
    assert len(bases) > 3
    start = bases[2] + 1
    write_offsets(str(tmp_path / "logs" / "log-start-offset-checkpoint"), {("t", 0): start})
    with segstore.open(part) as store:
        consumer = [r.offset for r in store.read("t", 0)]
    assert consumer == list(range(start, 60))
    assert _dump_json_offsets(part, capsys) == consumer
    assert _dump_text_offsets(part, capsys) == consumer
    assert main(["dump", str(part)]) == 0
    dumped = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Dumping ")]
    assert dumped == [f"Dumping {part / f'{base:020d}.log'}" for base in bases[2:]]


def test_dump_file_stays_physical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``dump FILE`` is kafka-dump-log: every record the file holds, those below the log start too."""
    part = _build(tmp_path / "logs")
    assert main(["delete-records", str(part), "--before", "25"]) == 0
    capsys.readouterr()
    log = next(iter(sorted(part.glob("*.log"))))
    assert main(["dump", str(log), "--json", "--print-data-log"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["offset"] for line in lines if line["kind"] == "record"] == list(range(60))
    assert main(["dump", str(log)]) == 0
    text = capsys.readouterr().out
    assert "baseOffset: 0 lastOffset: 9" in text and "baseOffset: 20 lastOffset: 29" in text


def test_earliest_of_an_emptied_partition_names_the_log_start(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka 3.8.0 ``UnifiedLog.fetchOffsetByTimestamp(EARLIEST_TIMESTAMP)`` answers the log start offset
    whatever is stored there (``kafka-get-offsets --time earliest`` prints ``t:0:60`` after
    ``delete-records --before -1``).  No record follows it, so, as ``latest`` is answered, the query names
    the offset on stderr and exits 1 (it said "no record stored at or after timestamp -2")."""
    part = _build(tmp_path / "logs")
    assert main(["delete-records", str(part), "--before", "-1"]) == 0
    capsys.readouterr()
    with segstore.open(part) as store:
        assert store.offset_range("t", 0) == (60, 60)
    for extra in ([], ["--json"], ["--isolation", "read_committed"]):
        assert main(["query", str(part), "--topic", "t", "--timestamp", "earliest", *extra]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert err == "segstore query: t-0: earliest is offset 60 (the log start offset), where no record " \
                      "is stored yet\n"
    assert main(["query", str(part), "--topic", "t", "--timestamp", "latest"]) == 1
    assert "latest is offset 60 (the high watermark)" in capsys.readouterr().err
    # with records after it, earliest prints them from the log start
    with segstore.open(tmp_path / "logs", format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"x", partition=0, timestamp=1_800_000_000_000)])
    assert main(["query", str(part), "--topic", "t", "--timestamp", "earliest", "--json"]) == 0
    assert [json.loads(line)["offset"] for line in capsys.readouterr().out.splitlines()] == [60]


def test_earliest_local_is_the_log_start_without_remote_storage(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka 3.8.0 ``ListOffsetsRequest.EARLIEST_LOCAL_TIMESTAMP = -4``: ``UnifiedLog.fetchOffsetByTimestamp``
    answers it as ``EARLIEST_TIMESTAMP`` where the topic has no remote storage (``!remoteLogEnabled()``),
    and ``Partition.fetchOffsetForTimestamp`` bounds neither by the high watermark.  ``--timestamp -4``
    was read as a time (before every record: "no record stored at or after timestamp -4" here); a
    negative that is no 3.8.0 code (-5 on) was read as a time too, and is refused now."""
    from segstore.errors import ConfigError
    from segstore.store import QueryRequest

    part = _build(tmp_path / "logs")
    assert main(["delete-records", str(part), "--before", "-1"]) == 0
    capsys.readouterr()
    assert main(["query", str(part), "--topic", "t", "--timestamp", "-4"]) == 1
    assert capsys.readouterr() == ("", "segstore query: t-0: earliest local is offset 60 (the log start "
                                       "offset), where no record is stored yet\n")
    with segstore.open(part) as store:
        answer = store.query(QueryRequest(topic="t", partition=0, timestamp=-4))
        assert [line.text for line in answer.lines] == [
            "t-0: earliest local is offset 60 (the log start offset), where no record is stored yet"]
        for code in (-5, -6, -(1 << 63)):
            with pytest.raises(ConfigError, match=f"ListOffsets codes .* found {code}$"):
                store.query(QueryRequest(topic="t", partition=0, timestamp=code))
    with segstore.open(tmp_path / "logs", format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"x", partition=0, timestamp=1_800_000_000_000)])
    assert main(["query", str(part), "--topic", "t", "--timestamp", "-4", "--json"]) == 0
    assert [json.loads(line)["offset"] for line in capsys.readouterr().out.splitlines()] == [60]
    assert main(["query", str(part), "--topic", "t", "--timestamp", "-5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "-4 (earliest local), found -5" in err


def test_earliest_at_a_marker_names_the_log_start_under_read_committed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The log start at a COMMIT marker: ``read_uncommitted`` shows the marker from there; a
    ``read_committed`` read finds nothing, and the answer still names the offset (Kafka 3.8.0
    ``UnifiedLog.fetchOffsetByTimestamp`` answers earliest whatever the isolation)."""
    from segstore_kafka.partition import KafkaConfig, Partition

    part = tmp_path / "logs" / "t-0"
    p = Partition(str(part), KafkaConfig(), writable=True)
    p.append_records([(b"k", b"v", 1, [])], producer_id=7, producer_epoch=0, base_sequence=0,
                     transactional=True)
    p.append_control("COMMIT", producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=2)
    p.close()
    assert main(["delete-records", str(part), "--before", "1"]) == 0
    capsys.readouterr()
    assert main(["query", str(part), "--topic", "t", "--timestamp", "earliest"]) == 0
    assert "endTxnMarker: COMMIT" in capsys.readouterr().out
    assert main(["query", str(part), "--topic", "t", "--timestamp", "earliest", "--isolation",
                 "read_committed"]) == 1
    assert capsys.readouterr().err == "segstore query: t-0: earliest is offset 1 (the log start offset); a " \
                                      "read_committed read finds no record from there\n"


def test_max_timestamp_below_the_log_start_names_its_offset(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka 3.8.0 ``UnifiedLog.fetchOffsetByTimestamp(MAX_TIMESTAMP)`` takes the segment of the largest
    ``maxTimestampSoFar`` and the first record of that timestamp, without looking at the log start
    offset (``Partition.fetchOffsetForTimestamp`` bounds it by the high watermark only): after
    ``delete-records --before 3`` over a batch whose largest time is at offset 1, ``kafka-get-offsets
    --time -3`` prints ``t:0:1``.  The query read on from offset 1, which a read starts at the log start,
    and showed offset 3, a record of another time, as the max-timestamp record; it names offset 1 now,
    on stderr as ``latest`` and an emptied ``earliest`` are named, and exits 1 (no record a consumer can
    fetch is there)."""
    logs = tmp_path / "logs"
    times = [5000, 9000, 3000, 4000, 6000]
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, partition=0, timestamp=1_700_000_000_000 + t)
                            for i, t in enumerate(times)])
    assert main(["query", str(logs), "--topic", "t", "--timestamp", "max-timestamp", "--json"]) == 0
    assert [json.loads(line)["offset"] for line in capsys.readouterr().out.splitlines()] == [1]
    assert main(["delete-records", str(logs / "t-0"), "--before", "3"]) == 0
    capsys.readouterr()
    for spec in ("max-timestamp", "-3"):
        for extra in ([], ["--json"]):
            assert main(["query", str(logs), "--topic", "t", "--timestamp", spec, *extra]) == 1
            assert capsys.readouterr() == (
                "", "segstore query: t-0: max-timestamp is offset 1 (timestamp 1700000009000), below the log "
                    "start offset 3: its record was deleted\n")
    # a time still finds the first record at or after it from the log start (offset 4: 6000 ms)
    assert main(["query", str(logs), "--topic", "t", "--timestamp", "1700000005500", "--json"]) == 0
    assert [json.loads(line)["offset"] for line in capsys.readouterr().out.splitlines()] == [4]


def test_a_writable_open_moves_the_first_leader_epoch_up_to_the_log_start(tmp_path: Path) -> None:
    """Kafka 3.8.0 LogLoader.load: "The earliest leader epoch may not be flushed during a hard failure.
    Recover it here": leaderEpochCache.truncateFromStartAsyncFlush(logStartOffsetCheckpoint).  A broker
    killed after it checkpointed a new log start but before it flushed the epochs leaves "0 0" where its
    next load writes "0 25"; a reader holds "0 25" as the loaded broker does (``info`` said ``0 0``) and
    changes no file."""
    logs = tmp_path / "logs"
    part = _build(logs)
    epochs = part / "leader-epoch-checkpoint"
    assert epochs.read_text().splitlines()[2:] == ["0 0"]
    write_offsets(str(logs / "log-start-offset-checkpoint"), {("t", 0): 25})
    with segstore.open(logs) as reader:
        assert next(iter(reader.read("t", 0))).offset == 25
        assert reader.info()["partitions"][0]["leader_epochs"] == [[0, 25]]
    assert epochs.read_text().splitlines()[2:] == ["0 0"]
    with segstore.open(logs, mode="a"):
        pass
    assert epochs.read_text().splitlines()[2:] == ["0 25"]


@pytest.mark.parametrize("kept", [["0 60"], ["0 0", "3 60"]], ids=["delete-records", "leader-elected"])
def test_a_reader_drops_leader_epochs_at_the_log_end_as_the_log_loader_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kept: list[str]) -> None:
    """Kafka 3.8.0 ``LogLoader.load`` (core/src/main/scala/kafka/log/LogLoader.scala) truncates the leader
    epoch cache at the log end it loaded: ``leaderEpochCache.truncateFromEndAsyncFlush(nextOffset)``
    removes every entry starting at or after it.  ``delete-records --before -1`` leaves ``0 60`` (the epoch
    moved up to the new log start, which is the log end), and a leader elected at the log end leaves
    ``3 60`` after ``0 0``: the loaded broker holds neither.  A reader showed them (``info``:
    ``leader_epochs=0 60``) and answered ListOffsets latest with their epoch; it now holds what the broker
    loads and leaves the file as it is; ``recover`` drops them from the file and says so."""
    logs = tmp_path / "logs"
    part = _build(logs)
    epochs = part / "leader-epoch-checkpoint"
    if kept == ["0 60"]:
        assert main(["delete-records", str(part), "--before", "-1"]) == 0
    else:
        epochs.write_text("".join(f"{line}\n" for line in ["0", str(len(kept)), *kept]))
    assert epochs.read_text().splitlines()[2:] == kept
    before = epochs.read_bytes()
    loaded = [] if kept == ["0 60"] else [[0, 0]]
    capsys.readouterr()
    assert main(["info", str(part), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"][0]["leader_epochs"] == loaded
    with segstore.open(logs) as store:
        latest = store.partition_of("t", 0).offset_for_time(LATEST_TIMESTAMP)
        assert (latest.offset, latest.leader_epoch) == (60, loaded[-1][0] if loaded else None)
    assert epochs.read_bytes() == before
    assert main(["recover", str(logs)]) == 0
    assert "dropped the leader epochs starting at or past the log end 60" in capsys.readouterr().out
    assert epochs.read_text().splitlines()[2:] == [" ".join(map(str, e)) for e in loaded]

def test_a_log_start_checkpoint_past_the_log_end_is_named_by_verify_and_recover(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``log-start-offset-checkpoint`` says 500 of a partition whose log ends at 60 (its segments restored
    from an older copy, say).  Kafka 3.8.0 ``LogLoader.recoverLog`` (``deleteSegmentsIfLogStartGreaterThan
    LogEnd``) deletes every segment of it at the broker's next start, and ``dump`` shows no record.
    verify said ok and recover exited 0; both now name the checkpoint (exit 1), and recover deletes
    nothing: which of the two is wrong is for the operator to say."""
    logs = tmp_path / "logs"
    part = _build(logs)
    checkpoint = logs / "log-start-offset-checkpoint"
    write_offsets(str(checkpoint), {("t", 0): 500})
    message = ("expected the log start offset of t-0 at most its log end 60, found 500: Kafka's "
               "LogLoader.recoverLog deletes every segment")
    with segstore.open(logs) as store:
        found = [(p.path, p.pos, message in p.message) for p in store.verify()]
    assert found == [(str(checkpoint), None, True)]
    before = sorted(p.name for p in part.iterdir())
    assert main(["recover", str(logs)]) == 1
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in part.iterdir()) == before
    assert main(["verify", str(logs)]) == 1
    write_offsets(str(checkpoint), {("t", 0): 60})      # at the log end: the partition is empty, not gone
    assert main(["verify", str(logs)]) == 0


@pytest.mark.parametrize("how", ["open", "recover"])
def test_the_epochs_are_truncated_from_the_log_end_before_the_log_start_as_the_log_loader_does(
        tmp_path: Path, how: str) -> None:
    """Kafka 3.8.0 ``LogLoader.load`` (core/src/main/scala/kafka/log/LogLoader.scala) truncates the leader
    epoch cache from the log end first (``truncateFromEndAsyncFlush(nextOffset)``) and from the start
    after (``truncateFromStartAsyncFlush(logStartOffsetCheckpoint)``): a log whose start checkpoint is its
    end (offsets 0..59, log start 60) with epochs ``0 0``, ``3 40`` loads as ``3 60`` (the other order
    drops every entry: ``3 60`` starts at the log end).  ``segstore recover`` truncated from the end again
    after the open had truncated from the start, and wrote ``0 60``: the epoch of its append then went
    back from 3 to 0 (no entry left, ``latest_epoch or 0``)."""
    logs = tmp_path / "logs"
    part = _build(logs)
    epochs = part / "leader-epoch-checkpoint"
    epochs.write_text("0\n2\n0 0\n3 40\n")
    write_offsets(str(logs / "log-start-offset-checkpoint"), {("t", 0): 60})
    with segstore.open(logs) as reader:
        assert reader.info()["partitions"][0]["leader_epochs"] == [[3, 60]]
    with segstore.open(logs, mode="a") as store:
        if how == "recover":
            store.recover()
        assert store.partition_of("t", 0).epochs.entries == [(3, 60)]
        store.append({"topic": "t", "partition": 0, "value": b"after"})
    assert epochs.read_text().splitlines()[2:] == ["3 60"]
    with segstore.open(logs) as store:
        (batch,) = store.partition_of("t", 0).batches(60)
    assert batch.partition_leader_epoch == 3
