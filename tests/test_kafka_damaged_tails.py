"""Kafka partitions whose last bytes a crash tore, read and recovered as Kafka 3.8 loads them.

- ``.txnindex``: ``TransactionIndex``'s iterator reads whole 34-byte entries only (``hasNext``), so a
  torn last entry does not stop a read; ``LogSegment.recover`` rebuilds the file (``reset``, then
  the aborts of the log), and an entry of a newer version stops every read (``next``).
- A log torn inside the batch the offset index's last entry points at: the log end and the
  largest timestamp are those of the whole batches, as after ``LogSegment.recover``.
- ``query --timestamp``: ``Partition.fetchOffsetForTimestamp`` answers only offsets below the high
  watermark (the last stable offset for read_committed); ``GetOffsetShell.parseOffsetSpec``'s
  earliest, latest and max-timestamp (``UnifiedLog.fetchOffsetByTimestamp``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import cli_run

T = 1_700_000_000_000
TXN = "00000000000000000000.txnindex"


def _txn_partition(tmp_path: Path) -> Path:
    """Two aborted transactions (a 68-byte ``.txnindex``) between plain records."""
    def txn(value: str, sequence: int, at: int) -> dict:
        return {"compression": "none", "records": [{"key": "k", "value": value, "timestamp": T + at}],
                "producer_id": 5, "producer_epoch": 0, "base_sequence": sequence, "transactional": True}

    def abort(at: int) -> dict:
        return {"control": "ABORT", "producer_id": 5, "producer_epoch": 0, "coordinator_epoch": 3,
                "timestamp": T + at}

    plain = [{"compression": "none", "records": [{"key": "p", "value": v, "timestamp": T + at}]}
             for v, at in (("a", 0), ("z", 5))]
    spec = {"config": {}, "batches": [plain[0], txn("x", 0, 1), abort(2), txn("y", 1, 3), abort(4), plain[1]]}
    (tmp_path / "txn.json").write_text(json.dumps(spec))
    code, _, err = cli_run("write", tmp_path / "logs" / "t-0", "--spec", tmp_path / "txn.json")
    assert code == 0, err
    assert (tmp_path / "logs" / "t-0" / TXN).stat().st_size == 68
    return tmp_path / "logs"


def _committed_values(logs: Path) -> list[str]:
    code, out, err = cli_run("dump", logs, "--json", "--isolation", "read_committed")
    assert code == 0, err
    return [json.loads(line)["value"] for line in out.splitlines()]


def test_a_torn_txnindex_entry_is_read_past_reported_and_rebuilt(tmp_path: Path) -> None:
    logs = _txn_partition(tmp_path)
    committed = _committed_values(logs)
    path = logs / "t-0" / TXN
    with open(path, "r+b") as f:
        f.truncate(40)      # one whole entry and 6 bytes of the next
    # reads go on with the whole entry, as Kafka's iterator does
    assert cli_run("info", logs)[0] == 0
    assert cli_run("dump", logs, "--json")[0] == 0
    code, out, _ = cli_run("verify", logs)
    assert code == 1
    assert f"{path}:34: expected whole 34-byte entries, found 6 bytes after the last" in out
    code, out, err = cli_run("recover", logs)
    assert code == 0, err
    assert f"{path}:34:" in out and "rebuilding it from the log" in out
    assert path.stat().st_size == 68
    assert cli_run("verify", logs)[0] == 0
    assert _committed_values(logs) == committed


def test_a_newer_txnindex_version_stops_read_committed_only_and_recover_rebuilds_it(tmp_path: Path) -> None:
    logs = _txn_partition(tmp_path)
    committed = _committed_values(logs)
    path = logs / "t-0" / TXN
    with open(path, "r+b") as f:
        f.seek(34)
        f.write(b"\x00\x01")    # the second entry's version: 1
    assert cli_run("dump", logs, "--json")[0] == 0      # read_uncommitted needs no aborts
    code, _, err = cli_run("dump", logs, "--json", "--isolation", "read_committed")
    assert code == 1 and f"{path}:34: expected aborted-transaction version 0, found 1" in err
    code, out, _ = cli_run("verify", logs)
    assert code == 1 and f"{path}:34: expected aborted-transaction version 0, found 1 (run recover)" in out
    assert cli_run("recover", logs)[0] == 0
    assert _committed_values(logs) == committed
    assert cli_run("verify", logs)[0] == 0


def _basic(tmp_path: Path) -> Path:
    """100 records in batches of 5 over 4 segments; the active one's offset index ends at offset 99,
    position 768 (``segment.bytes`` 1500, ``index.interval.bytes`` 200)."""
    batches = [{"compression": "none",
                "records": [{"key": f"k{(b * 5 + i) % 7}", "value": f"v{b * 5 + i}" * 10,
                             "timestamp": T + b * 1000 + i} for i in range(5)]} for b in range(20)]
    config = {"segment.bytes": 1500, "index.interval.bytes": 200}
    (tmp_path / "basic.json").write_text(json.dumps({"config": config, "batches": batches}))
    code, _, err = cli_run("write", tmp_path / "logs" / "t-0", "--spec", tmp_path / "basic.json")
    assert code == 0, err
    return tmp_path / "logs"


def _partition_info(logs: Path) -> dict:
    code, out, err = cli_run("info", logs, "--json")
    assert code == 0, err
    (part,) = json.loads(out)["partitions"]
    return part


def test_a_tail_torn_through_the_last_indexed_batch_ends_the_log_at_the_whole_batches(tmp_path: Path) -> None:
    logs = _basic(tmp_path)
    code, out, _ = cli_run("dump", logs / "t-0" / "00000000000000000080.index")
    assert code == 0 and out.splitlines()[-1] == "offset: 99 position: 768"
    os.truncate(logs / "t-0" / "00000000000000000080.log", 1000)     # the batch at 768 torn
    part = _partition_info(logs)
    # the whole batches end at offset 94 (recovery keeps 768 bytes: LogSegment.recover)
    assert (part["end_offset"], part["high_watermark"], part["max_timestamp"]) == (95, 95, T + 18_004)
    code, out, _ = cli_run("dump", logs, "--json")
    assert json.loads(out.splitlines()[-1])["offset"] == 94
    code, out, err = cli_run("delete-records", logs, "--before", "90", "--dry-run")
    assert code == 0, err
    assert cli_run("recover", logs)[0] == 0
    part = _partition_info(logs)
    assert (part["end_offset"], part["max_timestamp"]) == (95, T + 18_004)


def _query_offsets(logs: Path, *argv: str) -> tuple[int, list[int], str]:
    code, out, err = cli_run("query", logs, "--topic", "t", *argv, "--json")
    return code, [json.loads(line)["offset"] for line in out.splitlines()], err


def test_query_timestamp_answers_below_the_high_watermark_only(tmp_path: Path) -> None:
    logs = _basic(tmp_path)
    assert _query_offsets(logs, "--timestamp", str(T + 15_000))[:2] == (0, [75])
    (logs / "replication-offset-checkpoint").write_text("0\n1\nt 0 50\n")
    code, offsets, err = _query_offsets(logs, "--timestamp", str(T + 15_000))
    assert (code, offsets) == (1, [])
    assert "offset 75, is at or past the high watermark 50" in err
    assert _query_offsets(logs, "--timestamp", str(T + 9_000))[:2] == (0, [45])
    # latest is the high watermark, where no record is; earliest is never bounded
    code, offsets, err = _query_offsets(logs, "--timestamp", "latest")
    assert (code, offsets) == (1, []) and "latest is offset 50 (the high watermark)" in err
    assert _query_offsets(logs, "--timestamp", "-2")[:2] == (0, [0])
    # max-timestamp is offset 99, past the high watermark: no answer, as kafka-get-offsets
    assert _query_offsets(logs, "--timestamp", "max-timestamp")[:2] == (1, [])


def test_query_timestamp_names_kafka_get_offsets_specs(tmp_path: Path) -> None:
    logs = _basic(tmp_path)
    assert _query_offsets(logs, "--timestamp", "earliest")[:2] == (0, [0])
    assert _query_offsets(logs, "--timestamp", "MAX-TIMESTAMP")[:2] == (0, [99])
    assert _query_offsets(logs, "--timestamp", "-3")[:2] == (0, [99])
    code, offsets, err = _query_offsets(logs, "--timestamp", "-1")
    assert (code, offsets) == (1, []) and "latest is offset 100" in err


def test_max_timestamp_is_the_first_record_of_the_largest_timestamp(tmp_path: Path) -> None:
    """``RecordBatch.offsetOfMaxTimestamp``: the earliest record holding the batch's max timestamp, in the
    first segment whose largest timestamp is the partition's (``maxBy``)."""
    batches = [{"compression": "none", "records": [{"value": "a", "timestamp": T + 9},
                                                   {"value": "b", "timestamp": T + 5}]},
               {"compression": "none", "records": [{"value": "c", "timestamp": T + 1},
                                                   {"value": "d", "timestamp": T + 9},
                                                   {"value": "e", "timestamp": T + 9}]}]
    (tmp_path / "s.json").write_text(json.dumps({"config": {}, "batches": batches}))
    assert cli_run("write", tmp_path / "logs" / "t-0", "--spec", tmp_path / "s.json")[0] == 0
    assert _query_offsets(tmp_path / "logs", "--timestamp", "max-timestamp")[:2] == (0, [0])


def test_rocketmq_refuses_kafkas_offset_specs(tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text(json.dumps({"topic": "A", "body": "x"}) + "\n")
    assert cli_run("write", tmp_path / "rmq", "--input", tmp_path / "m.jsonl")[0] == 0
    code, out, err = cli_run("query", tmp_path / "rmq", "--topic", "A", "--queue", "0",
                             "--timestamp", "latest")
    assert code == 2 and out == ""
    assert "earliest, latest and max-timestamp are Kafka's" in err
