"""What a copy of a Kafka partition's records does not carry of its producer state, said where it is made.

Kafka 3.8's log cleaner keeps the last batch of each active producer, its records removed
(``LogCleaner.Cleaner``'s ``isBatchLastRecordOfProducer`` -> ``BatchRetention.RETAIN_EMPTY``), so that
``ProducerStateManager``, which rebuilds each producer's epoch, last sequence and open transaction from
the newest ``.snapshot`` and the batches after it (``UnifiedLog.rebuildProducerState``), keeps that
producer's last sequence: without it the broker takes the producer's next batch whatever its sequence,
and a batch retried across the copy is not found as a duplicate.  A dump has a line per record, so
such a batch has none; a conversion to RocketMQ keeps no sequence at all.  ``dump --json`` says so on
stderr per partition (naming the producers), ``convert`` in its report (``not carried: ...``); before,
both were silent.  The producers read back from the copy show the loss is what the note says.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from conftest import cli_run

import segstore

#: the records' times, and the compaction's clock (a producer idle a day is expired: not kept)
NOW = 1_700_000_000_000


def _line(offset: int, producer: int, sequence: int, key: bytes, segment: int = 0) -> dict:
    """A ``dump --json`` line of a one-record batch of ``producer`` (-1: none) at ``offset``."""
    return {"topic": "t", "partition": 0, "offset": offset, "timestamp": NOW + offset,
            "timestamp_type": "CreateTime", "key": base64.b64encode(key).decode(),
            "value": base64.b64encode(b"v%d" % offset).decode(), "headers": [],
            "batch": {"base_offset": offset, "last_offset": offset, "position": 0, "size": 0, "crc": 0,
                      "compression": "none", "magic": 2, "producer_id": producer,
                      "producer_epoch": 0 if producer >= 0 else -1, "base_sequence": sequence,
                      "partition_leader_epoch": 0, "is_transactional": False, "is_control": False,
                      "max_timestamp": NOW + offset, "base_timestamp": NOW + offset, "delete_horizon_ms": -1,
                      "segment_base_offset": segment}}


@pytest.fixture
def cleaned(tmp_path) -> Path:
    """Producer 7 writes key x, producer 8 writes x again (and y); the cleaner removes 7's record and
    keeps its batch, emptied, as its last one (a later segment, so the first two are cleaned)."""
    lines = [_line(0, 7, 0, b"x"), _line(1, 8, 0, b"x"), _line(2, 8, 1, b"y"), _line(3, -1, -1, b"z", 3)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    logs = tmp_path / "logs"
    code, _, err = cli_run("write", logs, "--format", "kafka", "--input", source)
    assert code == 0, err
    code, out, err = cli_run("compact", logs, "--config", "cleanup.policy=compact", "--now-ms", str(NOW + 10))
    assert code == 0, err
    code, out, err = cli_run("dump", logs / "t-0" / "00000000000000000000.log")
    assert code == 0, err
    heads = [(int(line.split("producerId: ")[1].split()[0]), int(line.split("count: ")[1].split()[0]))
             for line in out.splitlines() if line.startswith("baseOffset")]
    assert heads == [(7, 0), (8, 1), (8, 1)], out
    return logs


def _producers(logs: Path) -> dict[int, int]:
    """Each producer's last sequence as the partition's producer state holds it."""
    with segstore.open(logs, format="kafka") as kafka:
        return {p["producer_id"]: p["last_sequence"]
                for p in kafka.producers("t", 0, now_ms=NOW + 10)[("t", 0)]}


def test_dump_json_says_which_producer_state_a_copy_from_it_loses(cleaned, tmp_path):
    assert _producers(cleaned) == {7: 0, 8: 1}
    code, out, err = cli_run("dump", cleaned, "--json")
    assert code == 0, err
    records = [line for line in map(json.loads, out.splitlines()) if "batch" in line]
    assert [line["offset"] for line in records] == [1, 2, 3]     # 0: emptied, no line
    assert ("segstore dump: note: t-0: not in the dump: the state of producer 7 (held by 1 batch the log "
            "cleaner emptied); a broker loading a copy written from it (write --input)") in err, err
    source = tmp_path / "dump.jsonl"
    source.write_text(out, encoding="utf-8")
    copy = tmp_path / "copy"
    code, _, err = cli_run("write", copy, "--input", source)
    assert code == 0, err
    assert _producers(copy) == {8: 1}          # what the note said: producer 7's state is gone
    code, _, err = cli_run("dump", copy, "--json")
    assert code == 0 and "note" not in err, err      # the copy's records rebuild its whole state


def test_a_selection_or_a_window_says_nothing(cleaned):
    """Only a dump of whole partitions is a copy's input: ``--begin``/``read_committed`` add no note."""
    for args in (["--begin", str(NOW)], ["--isolation", "read_committed"]):
        code, _, err = cli_run("dump", cleaned, "--json", *args)
        assert code == 0 and "note" not in err, (args, err)


def test_convert_reports_the_producer_state_it_does_not_carry(cleaned, tmp_path):
    """To RocketMQ the sequences go too (the way back writes none): every producer's state is named."""
    code, out, err = cli_run("convert", cleaned, tmp_path / "rmq", "--to", "rocketmq")
    assert code == 0, err
    assert ("not carried: t-0: the state of producers 7, 8 (held by their sequences and 1 batch the log "
            "cleaner emptied)") in out.splitlines(), out
    code, out, err = cli_run("convert", tmp_path / "rmq", tmp_path / "back", "--to", "kafka")
    assert code == 0, err
    assert "not carried" not in out
    assert _producers(tmp_path / "back") == {8: -1}


def test_convert_reports_the_leader_epochs_it_does_not_carry(tmp_path):
    """A batch's leader epoch has no RocketMQ place either: the way back writes epoch 0, so ListOffsets
    and OffsetsForLeaderEpoch answer otherwise; the report names the epochs (before: silent)."""
    lines = [_line(0, -1, -1, b"a"), _line(1, -1, -1, b"b")]
    lines[0]["batch"]["partition_leader_epoch"], lines[1]["batch"]["partition_leader_epoch"] = 3, 5
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, _, err = cli_run("write", tmp_path / "logs", "--format", "kafka", "--input", source)
    assert code == 0, err
    code, out, err = cli_run("convert", tmp_path / "logs", tmp_path / "rmq", "--to", "rocketmq")
    assert code == 0, err
    assert "not carried: t-0: leader epochs 3 to 5 (the way back writes epoch 0)" in out.splitlines(), out
    code, _, err = cli_run("convert", tmp_path / "rmq", tmp_path / "back", "--to", "kafka")
    assert code == 0, err
    with segstore.open(tmp_path / "back", format="kafka") as kafka:
        assert kafka.info()["partitions"][0]["leader_epochs"] == [[0, 0]]


def test_a_partition_without_producers_has_no_note(tmp_path):
    lines = [_line(0, -1, -1, b"a"), _line(1, -1, -1, b"b")]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, _, err = cli_run("write", tmp_path / "logs", "--format", "kafka", "--input", source)
    assert code == 0, err
    code, _, err = cli_run("dump", tmp_path / "logs", "--json")
    assert code == 0 and err == "", err
    code, out, err = cli_run("convert", tmp_path / "logs", tmp_path / "rmq", "--to", "rocketmq")
    assert code == 0 and "not carried" not in out, out
