"""The conversion run: bad input, existing destinations, corrupt sources, interruption and resume,
topic selection, timestamps and topic-name escaping."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, cli_run, copy_writable
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_kafka.conversion import KafkaArrowWriter, KafkaWriter
from segstore_rocketmq.arrowwrite import RocketMQArrowWriter
from segstore_rocketmq.conversion import RocketMQWriter

import segstore
from segstore.convert import convert, pipeline
from segstore.convert.pipeline import JOURNAL_NAME, kafka_entry_of, temp_path
from segstore.errors import (
    ConfigError,
    ConversionError,
    ConversionOptionError,
    CorruptDataError,
    InvalidTopicError,
    MessageTooLargeError,
    WrongFormatError,
)
from segstore.records import LOG_APPEND_TIME, Message

ROCKETMQ_CONFIG = {"maxHashSlotNum": 64, "maxIndexNum": 256, "mappedFileSizeCommitLog": 1 << 20}
BASIC = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA_TXN = FIXTURES / "kafka" / "txn" / "topic-0"


def scan_json(path: Path, fmt: str) -> list:
    with segstore.open(path, fmt) as store:
        if fmt == "kafka":
            return [kafka_entry_of(r) for r in store.scan()]
        return [store.to_json(m) for m in store.scan()]


class Interrupt(Exception):
    """Stands for a crash or Ctrl-C in the middle of a run."""


#: The writers of each target format (entry by entry, and in columns), whichever a run takes.
WRITERS = {"kafka": (KafkaWriter, KafkaArrowWriter), "rocketmq": (RocketMQWriter, RocketMQArrowWriter)}


def interrupt_after(monkeypatch: pytest.MonkeyPatch, to: str, calls: int) -> None:
    """Make the ``flush`` of the writers into ``to`` raise after ``calls`` flushes in all (the writes
    so far stay on disk)."""
    seen = [0]
    for cls in WRITERS[to]:
        def flush(self, *args, original=cls.flush):
            seen[0] += 1
            if seen[0] > calls:
                raise Interrupt
            return original(self, *args)

        monkeypatch.setattr(cls, "flush", flush)


def interrupted(monkeypatch: pytest.MonkeyPatch, setting: str, size: int, calls: int, src: Path, out: Path,
                **kwargs: Any) -> None:
    """``convert(src, out, **kwargs)`` writing ``size`` records at a time (``pipeline.<setting>``, which
    stays set) and interrupted after ``calls`` flushes (:func:`interrupt_after`)."""
    monkeypatch.setattr(pipeline, setting, size)
    with monkeypatch.context() as patch:
        interrupt_after(patch, kwargs["to"], calls)
        with pytest.raises(Interrupt):
            convert(src, out, **kwargs)


# -- bad input -----------------------------------------------------------------------

def test_unknown_format_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.txt").write_text("not a store")
    with pytest.raises(WrongFormatError, match="not a store of any known format"):
        convert(src, tmp_path / "out", to="kafka")
    assert not (tmp_path / "out").exists()


def test_mixed_formats_are_refused(tmp_path: Path) -> None:
    src = copy_writable(BASIC, tmp_path / "src")
    shutil.copytree(KAFKA_TXN, src / "topic-0")
    with pytest.raises(WrongFormatError, match="several formats"):
        convert(src, tmp_path / "out", to="kafka")


def test_missing_source_and_same_format_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match="expected a source store directory"):
        convert(tmp_path / "nothing", tmp_path / "out", to="kafka")
    with pytest.raises(ConversionError, match="another format than the target"):
        convert(BASIC, tmp_path / "out", to="rocketmq")
    with pytest.raises(ConversionError, match="no --compression for a RocketMQ destination"):
        convert(KAFKA_TXN, tmp_path / "out", to="rocketmq", compression="gzip")
    with pytest.raises(ConversionError, match="target format"):
        convert(BASIC, tmp_path / "out", to="parquet")


@pytest.mark.parametrize("to", ["rocketmq", "kafka"])
def test_a_source_of_the_target_format_is_a_usage_error(tmp_path: Path, to: str) -> None:
    """``convert SRC DST --to F`` of a store of format F: the arguments do not go together, as a
    ``--format`` the path does not hold (exit 2, docs/cli.md); before, exit 1, a data problem."""
    src = BASIC if to == "rocketmq" else KAFKA_TXN
    code, out, err = cli_run("convert", src, tmp_path / "out", "--to", to)
    assert (code, out) == (2, "")
    assert f"expected a source of another format than the target {to!r}, found {to!r}" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConversionOptionError):
        convert(src, tmp_path / "out", to=to)


def test_destination_inside_or_around_the_source_is_refused(tmp_path: Path) -> None:
    src = copy_writable(BASIC, tmp_path / "parent" / "store")
    for dst in (src, src / "kafka", tmp_path / "parent"):
        with pytest.raises(ConversionError, match="outside the source"):
            convert(src, dst, to="kafka", force=True)
    assert sorted(p.name for p in src.iterdir()) == sorted(p.name for p in BASIC.iterdir())


def test_existing_destination_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ConversionError, match="pass --force"):
        convert(BASIC, out, to="kafka")
    report = convert(BASIC, out, to="kafka", force=True)      # an empty directory
    assert report.messages == 366 and (out / JOURNAL_NAME).is_file()
    with segstore.open(out, "kafka", "a") as store:            # a Kafka store, changed since
        store.append({"topic": "extra", "partition": 0, "value": b"v"})
    with pytest.raises(ConversionError, match="pass --force"):
        convert(BASIC, out, to="kafka")
    assert convert(BASIC, out, to="kafka", force=True).messages == 366
    with segstore.open(out, "kafka") as store:
        assert "extra" not in store.topics()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_force_replaces_only_a_store_of_the_target_format(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # before: --force deleted whatever DST was, a directory of other files (a typo such as
    # "segstore convert store ~/") or a store of the other format included
    from segstore import cli

    home = tmp_path / "home"
    (home / "docs").mkdir(parents=True)
    (home / "notes.txt").write_text("mine")
    with pytest.raises(ConversionOptionError, match=r"expected a kafka store or an empty directory for "
                       r"--force to replace, found a directory that is no store, holding docs, "
                       r"notes\.txt") as info:
        convert(BASIC, home, to="kafka", force=True)
    assert info.value.path == str(home) and isinstance(info.value, ConfigError)
    assert cli.main(["convert", str(BASIC), str(home), "--to", "kafka", "--force"]) == 2
    assert f"{home}: expected a kafka store" in capsys.readouterr().err
    file = tmp_path / "file"
    file.write_text("mine")
    with pytest.raises(ConversionOptionError, match="found a file"):
        convert(BASIC, file, to="kafka", force=True)
    rocketmq = copy_writable(BASIC, tmp_path / "store")
    kafka = tmp_path / "k"
    convert(BASIC, kafka, to="kafka")
    with pytest.raises(ConversionOptionError, match="found a rocketmq store"):
        convert(BASIC, rocketmq, to="kafka", force=True)
    with pytest.raises(ConversionOptionError, match="found a kafka store"):
        convert(KAFKA_TXN, kafka, to="rocketmq", config=ROCKETMQ_CONFIG, force=True)
    assert (home / "notes.txt").read_text() == "mine" and file.read_text() == "mine"
    assert scan_json(rocketmq, "rocketmq") == scan_json(BASIC, "rocketmq")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "home", "k", "store"]
    # the temporary sibling too: --force starts over from a conversion's own, not from another directory
    tmp = Path(temp_path(str(tmp_path / "out")))
    (tmp / "mine").mkdir(parents=True)
    with pytest.raises(ConversionOptionError, match="found a directory that is no store, holding mine"):
        convert(BASIC, tmp_path / "out", to="kafka", force=True)
    assert (tmp / "mine").is_dir()


def test_corrupt_rocketmq_source_stops_at_path_and_pos(tmp_path: Path) -> None:
    src = copy_writable(BASIC, tmp_path / "src")
    first = src / "commitlog" / "00000000000000262144"
    data = bytearray(first.read_bytes())
    data[200] ^= 0xFF                       # inside a message of the second file
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as caught:
        convert(src, tmp_path / "out", to="kafka")
    assert caught.value.path == str(first) and caught.value.pos is not None
    assert str(caught.value).startswith(f"{first}:{caught.value.pos}: ")
    assert not (tmp_path / "out").exists()

    report = convert(src, tmp_path / "out2", to="kafka", skip_corrupt=True, verify=True)
    assert len(report.skipped) == 1 and report.skipped[0].startswith(f"{first}:")
    with segstore.open(BASIC, "rocketmq") as store:
        damaged = [m for m in store.scan() if m.physical_offset <= 262144 + 200 < m.physical_offset + m.size]
        assert report.messages == sum(1 for _ in store.scan()) - 1
    with segstore.open(tmp_path / "out2", "kafka") as store:
        (lost,) = damaged
        assert [r.offset for r in store.read(lost.topic, lost.queue_id, lost.queue_offset - 1, 2)] == [
            lost.queue_offset - 1, lost.queue_offset + 1]


@pytest.mark.parametrize("which", ["first", "last"])
def test_skip_corrupt_passes_a_damaged_first_or_last_message_of_a_queue(tmp_path: Path, which: str) -> None:
    src = copy_writable(BASIC, tmp_path / "store")
    with segstore.open(src, "rocketmq") as store:
        topic = store.topics()[0]
        queue_id = store.partitions(topic)[0]
        start, end = store.offset_range(topic, queue_id)
        lost = next(store.read(topic, queue_id, start if which == "first" else end - 1, 1))
        total = sum(1 for _ in store.scan())
    base = max(b for b in (int(p.name) for p in (src / "commitlog").iterdir()) if b <= lost.physical_offset)
    path = src / "commitlog" / f"{base:020d}"
    data = bytearray(path.read_bytes())
    # a byte of the body: its CRC no longer matches (properties that are not UTF-8 would be no damage: the
    # broker reads them as new String(bytes, UTF_8) does)
    at = data.index(lost.body, lost.physical_offset - base, lost.physical_offset - base + lost.size)
    assert lost.body
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    report = convert(src, tmp_path / "out", to="kafka", skip_corrupt=True)
    assert len(report.skipped) == 1 and report.messages == total - 1
    with segstore.open(tmp_path / "out", "kafka") as store:
        offsets = [r.offset for r in store.read(topic, queue_id, 0)]
    assert lost.queue_offset not in offsets and len(offsets) == end - start - 1


def test_corrupt_kafka_source_stops_or_skips_the_segment(tmp_path: Path) -> None:
    src = copy_writable(KAFKA_TXN, tmp_path / "topic-0")
    log = src / "00000000000000000054.log"
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as caught:
        convert(src, tmp_path / "out", to="rocketmq", config=ROCKETMQ_CONFIG)
    assert caught.value.path == str(log)
    report = convert(src, tmp_path / "out2", to="rocketmq", config=ROCKETMQ_CONFIG, skip_corrupt=True)
    assert len(report.skipped) == 1 and report.skipped[0].startswith(f"{log}:")
    with segstore.open(KAFKA_TXN, "kafka") as store:
        damaged = [r.offset for r in store.scan() if r.batch.position <= 100 < r.batch.position + r.batch.size
                   and 54 <= r.offset < 108]
        expected = sum(1 for r in store.scan()) - len(damaged)
    assert damaged and report.messages == expected


# -- interruption and resume -------------------------------------------------------------

def test_interrupted_rocketmq_to_kafka_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 20, BASIC, out, to="kafka")
    assert not out.exists()
    assert (Path(temp_path(str(out))) / JOURNAL_NAME).is_file()
    with pytest.raises(ConversionError, match="pass --resume"):
        convert(BASIC, out, to="kafka")
    with pytest.raises(ConversionError, match="same conversion"):
        convert(BASIC, out, to="kafka", resume=True, compression="gzip")
    report = convert(BASIC, out, to="kafka", resume=True, verify=True)
    assert report.already_present > 0 and report.already_present + report.messages == 366
    convert(BASIC, tmp_path / "clean", to="kafka")
    assert scan_json(out, "kafka") == scan_json(tmp_path / "clean", "kafka")
    assert not Path(temp_path(str(out))).exists()


def test_a_resume_compares_config_values_as_the_destination_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: a run given segment.bytes as a number (the library) could not be resumed with it as text
    # (--config gives text): "found one with other options", though the destination reads both alike;
    # the refusal printed both runs' options whole instead of the one that differs
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 20, BASIC, out, to="kafka",
                config={"segment.bytes": 1 << 20})
    with pytest.raises(ConversionError, match=re.escape(
            "expected to resume the same conversion, found one with other options: config "
            "{'segment.bytes': 1048576} (this run: {'segment.bytes': '2097152'})")):
        convert(BASIC, out, to="kafka", resume=True, config={"segment.bytes": "2097152"})
    report = convert(BASIC, out, to="kafka", resume=True, config={"segment.bytes": "1048576"}, verify=True)
    assert report.already_present > 0 and report.already_present + report.messages == 366


def test_interrupted_kafka_to_rocketmq_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    interrupted(monkeypatch, "ROCKETMQ_BATCH", 10, 5, KAFKA_TXN, out, to="rocketmq", config=ROCKETMQ_CONFIG)
    assert not out.exists()
    report = convert(KAFKA_TXN, out, to="rocketmq", config=ROCKETMQ_CONFIG, resume=True, verify=True)
    assert report.already_present >= 50
    convert(KAFKA_TXN, tmp_path / "clean", to="rocketmq", config=ROCKETMQ_CONFIG)
    assert scan_json(out, "rocketmq") == scan_json(tmp_path / "clean", "rocketmq")


def kafka_source(path: Path) -> Path:
    """A native Kafka log dir: partitions t-0 and t-1 of 40 records each, keys k0-k3 over and over,
    in 600-byte segments (t-0 is the first stream of the conversion order)."""
    with segstore.open(path, "kafka", "a", **{"segment.bytes": 600}) as store:
        for i in range(40):
            for p in (0, 1):
                store.append_batch([{"topic": "t", "partition": p, "key": b"k%d" % (i % 4),
                                     "value": b"p%d-%d" % (p, i), "timestamp": 1000 + i}])
    return path


def journal_of(out: Path) -> dict[str, Any]:
    return json.loads((Path(temp_path(str(out))) / JOURNAL_NAME).read_text())


def test_an_interrupted_run_has_recorded_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal holds the source's streams and logs before anything is converted, not only once done."""
    out = tmp_path / "out"
    interrupted(monkeypatch, "ROCKETMQ_BATCH", 10, 0, KAFKA_TXN, out, to="rocketmq", config=ROCKETMQ_CONFIG)
    journal = journal_of(out)
    assert journal["state"] == "running"
    assert journal["streams"] == [["topic", 0, 0, 216]]
    assert journal["logs"] == [[f"topic-0/{log.name}", 0, log.stat().st_size]
                               for log in sorted(KAFKA_TXN.glob("*.log"))]
    out = tmp_path / "out2"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 0, BASIC, out, to="kafka")
    with segstore.open(BASIC, "rocketmq") as store:
        end = store.commitlog.end
        queues = [[t, q, *store.offset_range(t, q)] for t in store.topics() for q in store.partitions(t)]
    assert journal_of(out)["logs"] == [["commitlog", 0, end]] and journal_of(out)["streams"] == queues


def change_kafka(path: Path, change: str) -> None:
    """Change the source ``kafka_source`` made as the broker would: append to t-0, move its log start
    (DeleteRecords, what retention does too), or compact it (its offsets stay, its segments do not)."""
    config = {"cleanup.policy": "compact"} if change == "compact" else {}
    with segstore.open(path, "kafka", "a", **config) as store:
        before = store.offset_range("t", 0)
        if change == "append":
            store.append_batch([{"topic": "t", "partition": 0, "key": b"new", "value": b"p0-new%d" % i,
                                 "timestamp": 2000 + i} for i in range(5)])
        elif change == "delete_records":
            store.delete_records(10, topic="t", partition=0)
        else:
            assert store.compact(topic="t", partition=0)[0]["records_kept"] < 32
            assert store.offset_range("t", 0) == before


@pytest.mark.parametrize(("change", "then", "now"), [
    ("append", "t-0: offsets 0 to 40 then, offsets 0 to 45 now", (0, 45)),
    ("delete_records", "t-0: offsets 0 to 40 then, offsets 10 to 40 now", (10, 40)),
    ("compact", "t-0/00000000000000000000.log: bytes 0 to ", (0, 40)),
])
def test_resume_to_rocketmq_refuses_a_changed_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     change: str, then: str, now: tuple[int, int]) -> None:
    """A RocketMQ destination resumes by skipping as many records of the conversion order as it holds:
    records added to or gone from a partition before the last converted would be converted twice or
    never, so any change of the source since the interrupted run is refused (exit 1), and --force
    without --resume starts over."""
    src = kafka_source(tmp_path / "src")
    out = tmp_path / "out"
    interrupted(monkeypatch, "ROCKETMQ_BATCH", 10, 5, src, out, to="rocketmq", config=ROCKETMQ_CONFIG)
    change_kafka(src, change)
    with pytest.raises(ConversionError, match=re.escape(then)) as refused:
        convert(src, out, to="rocketmq", config=ROCKETMQ_CONFIG, resume=True)
    assert "a RocketMQ destination resumes by counting" in str(refused.value)
    assert "--force instead of --resume" in str(refused.value) and refused.value.path == str(src)
    assert not out.exists() and Path(temp_path(str(out))).is_dir()      # kept: the refusal changed nothing
    report = convert(src, out, to="rocketmq", config=ROCKETMQ_CONFIG, force=True, verify=True)
    assert report.already_present == 0
    convert(src, tmp_path / "clean", to="rocketmq", config=ROCKETMQ_CONFIG)
    assert scan_json(out, "rocketmq") == scan_json(tmp_path / "clean", "rocketmq")
    with segstore.open(src, "kafka") as store:
        assert store.offset_range("t", 0) == now


def test_resume_to_rocketmq_of_an_unchanged_two_partition_source(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    src = kafka_source(tmp_path / "src")
    out = tmp_path / "out"
    interrupted(monkeypatch, "ROCKETMQ_BATCH", 10, 5, src, out, to="rocketmq", config=ROCKETMQ_CONFIG)
    report = convert(src, out, to="rocketmq", config=ROCKETMQ_CONFIG, resume=True, verify=True)
    assert report.already_present == 50 and report.messages == 30
    convert(src, tmp_path / "clean", to="rocketmq", config=ROCKETMQ_CONFIG)
    assert scan_json(out, "rocketmq") == scan_json(tmp_path / "clean", "rocketmq")


def test_resume_to_kafka_converts_messages_appended_since_once(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kafka destination skips, partition by partition, the offsets below the end it holds: messages
    appended to the RocketMQ source since the interrupted run (queue offsets past every recorded end,
    the commitlog grown) are converted once, as a run over the source as it is now converts them."""
    src = copy_writable(BASIC, tmp_path / "src")
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 20, src, out, to="kafka")
    with segstore.open(src, "rocketmq", "a") as store:
        topic = store.topics()[0]
        store.append_batch([{"topic": topic, "queue_id": q, "body": b"appended %d" % i}
                            for i in range(6) for q in (0, 3)])
        store.append_batch([{"topic": "NewTopic", "queue_id": 0, "body": b"new topic"}])
    report = convert(src, out, to="kafka", resume=True, verify=True)
    assert report.already_present > 0 and report.already_present + report.messages == 366 + 13
    convert(src, tmp_path / "clean", to="kafka")
    assert scan_json(out, "kafka") == scan_json(tmp_path / "clean", "kafka")
    values = [r.value for r in scan_json(out, "kafka")]
    assert sorted(v for v in values if v.startswith((b"appended", b"new topic"))) == sorted(
        [b"appended %d" % i for i in range(6) for _ in (0, 3)] + [b"new topic"])


def test_resume_refuses_another_store_put_at_the_source_path(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Another store at the source's path whose queues and commitlog start where the interrupted run's
    did and reach past them passes the offset and size checks; its first record tells it apart."""
    # before: the resume kept the 35 messages converted from the first store, then converted the
    # other store's from offset 35 on: a partition of both stores' messages

    def store(path: Path, body: bytes, count: int) -> Path:
        with segstore.open(path, "rocketmq", "a", **ROCKETMQ_CONFIG) as writer:
            writer.append_batch([{"topic": "T", "queue_id": 0, "body": body, "born_timestamp": i,
                                  "store_timestamp": i} for i in range(count)])
        return path

    monkeypatch.setattr(pipeline, "COLUMNAR", False)     # entry by entry: each flush writes its batch
    src, out = store(tmp_path / "src", b"first", 100), tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 5, 7, src, out, to="kafka")
    shutil.rmtree(src)
    store(src, b"other", 200)
    with pytest.raises(ConversionError, match=r"found T-0: a first record at offset 0 then, another at "
                       r"offset 0 now \(another store at this path\?\) \(convert with --force") as refused:
        convert(src, out, to="kafka", resume=True)
    assert refused.value.path == str(src) and Path(temp_path(str(out))).is_dir()
    assert convert(src, out, to="kafka", force=True).messages == 200
    with segstore.open(out, "kafka") as dest:
        assert {r.value for r in dest.scan()} == {b"other"}


def test_resume_to_kafka_refuses_a_source_whose_old_messages_were_deleted(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch
                                                                          ) -> None:
    """The broker's clean-up deleted the first commitlog file since the interrupted run: the Kafka
    destination holds records the source no longer does (queue starts moved), which a run over the
    source now would not write: refused."""
    src = copy_writable(BASIC, tmp_path / "src")
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 20, src, out, to="kafka")
    with segstore.open(src, "rocketmq", "a") as store:
        store.retention(now_ms=1 << 62, fileReservedTime=0)
        assert store.commitlog.min_offset > 0
    refused = (r"as the interrupted run found it, or only appended to, found TopicA-0: offsets 0 to \d+ "
               r"then, offsets [1-9]\d* to \d+ now \(convert with --force instead of --resume")
    with pytest.raises(ConversionError, match=refused):
        convert(src, out, to="kafka", resume=True)
    code, _, err = cli_run("convert", src, out, "--to", "kafka", "--resume")
    assert code == 1 and re.search(refused, err) and not out.exists()
    convert(src, out, to="kafka", force=True)
    convert(src, tmp_path / "clean", to="kafka")
    assert scan_json(out, "kafka") == scan_json(tmp_path / "clean", "kafka")


def test_resume_to_kafka_refuses_a_source_cut_at_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The commitlog's end went back (a torn tail cut by recovery, the store replaced by an older copy):
    what was converted from past it may no longer be in the source, refused even for a Kafka
    destination.  Here the whole source was swapped for a copy with fewer messages."""
    src = tmp_path / "src"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": b"m%d" % i} for i in range(30)])
    shutil.copytree(src, tmp_path / "older")
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": b"m%d" % i} for i in range(30, 40)])
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 5, src, out, to="kafka")
    shutil.rmtree(src)
    shutil.copytree(tmp_path / "older", src)
    with pytest.raises(ConversionError, match=r"found T-0: offsets 0 to 40 then, offsets 0 to 30 now"):
        convert(src, out, to="kafka", resume=True)


def test_a_journal_without_the_source_resumes_unchecked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A run interrupted under a version that wrote the streams only once done: nothing to compare, the
    resume skips as before (documented)."""
    out = tmp_path / "out"
    interrupted(monkeypatch, "ROCKETMQ_BATCH", 10, 5, KAFKA_TXN, out, to="rocketmq", config=ROCKETMQ_CONFIG)
    journal = journal_of(out)
    del journal["streams"], journal["logs"], journal["source_config"]
    (Path(temp_path(str(out))) / JOURNAL_NAME).write_text(json.dumps(journal))
    report = convert(KAFKA_TXN, out, to="rocketmq", config=ROCKETMQ_CONFIG, resume=True, verify=True)
    assert report.already_present == 50
    assert json.loads((out / JOURNAL_NAME).read_text())["streams"] == [["topic", 0, 0, 216]]


def test_a_bad_recorded_log_names_the_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 20, BASIC, out, to="kafka")
    journal = journal_of(out)
    journal["logs"] = [["commitlog", 0]]
    path = Path(temp_path(str(out))) / JOURNAL_NAME
    path.write_text(json.dumps(journal))
    found = "expected logs of [name, start, end] in the conversion journal, found ['commitlog', 0]"
    with pytest.raises(ConversionError, match=re.escape(found)) as info:
        convert(BASIC, out, to="kafka", resume=True)
    assert info.value.path == str(path)


def test_resume_without_an_interrupted_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match="interrupted conversion to resume"):
        convert(BASIC, tmp_path / "out", to="kafka", resume=True)


def test_resume_after_a_kill_before_the_journal_starts_over(tmp_path: Path) -> None:
    out = tmp_path / "out"
    os.makedirs(temp_path(str(out)))      # a kill between creating it and writing its journal
    report = convert(BASIC, out, to="kafka", resume=True)
    assert report.already_present == 0 and report.messages == 366
    shutil.rmtree(out)
    os.makedirs(temp_path(str(out)))
    (Path(temp_path(str(out))) / f"{JOURNAL_NAME}.tmp").write_text("{")     # a kill while writing it
    with pytest.raises(ConversionError, match=r"without a journal \(pass --force"):
        convert(BASIC, out, to="kafka", resume=True)
    assert convert(BASIC, out, to="kafka", resume=True, force=True).messages == 366


@pytest.mark.parametrize(("text", "found"), [
    ("[]", "a JSON object as the conversion journal, found []"),
    ('{"source_format": "rocketmq", "streams": 5}', "streams in the conversion journal to be an array"),
    ('{"source_format": "rocketmq", "logs": 5}', "logs in the conversion journal to be an array"),
    ('{"source_format": "rocketmq", "source_config": "abc"}', "source_config in the conversion journal"),
    ('{"source_format": 7}', "source_format in the conversion journal to be a string"),
])
def test_a_damaged_journal_is_a_typed_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      text: str, found: str) -> None:
    kafka = tmp_path / "k"
    convert(BASIC, kafka, to="kafka")
    (kafka / JOURNAL_NAME).write_text(text)
    with pytest.raises(ConversionError, match=re.escape(f"expected {found}")) as info:
        convert(kafka, tmp_path / "back", to="rocketmq")
    assert info.value.path == str(kafka / JOURNAL_NAME)
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 20, BASIC, out, to="kafka")
    (Path(temp_path(str(out))) / JOURNAL_NAME).write_text(text)
    with pytest.raises(ConversionError, match=re.escape(f"expected {found}")):
        convert(BASIC, out, to="kafka", resume=True)


def test_a_bad_recorded_source_config_names_the_journal(tmp_path: Path) -> None:
    kafka = tmp_path / "k"
    convert(BASIC, kafka, to="kafka")
    journal = json.loads((kafka / JOURNAL_NAME).read_text())
    journal["source_config"] = {"mappedFileSizeCommitLog": "abc"}
    (kafka / JOURNAL_NAME).write_text(json.dumps(journal))
    with pytest.raises(ConfigError, match=f"mappedFileSizeCommitLog from source_config of the conversion "
                       f"journal {kafka / JOURNAL_NAME}"):
        convert(kafka, tmp_path / "back", to="rocketmq")



def test_a_batch_larger_than_segment_bytes_leaves_nothing_behind(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # before: the run stopped at its first record, as it must (Kafka 3.8.0 UnifiedLog.append refuses a
    # batch over segment.bytes with a RecordBatchTooLargeException), but left .out.converting, so the
    # command with a sane segment.bytes was refused ("pass --resume ... or --force"), and --resume
    # (the same options) met the same record again
    from segstore import cli

    out = tmp_path / "out"
    with pytest.raises(MessageTooLargeError, match=r"expected a batch of at most segment\.bytes=100 bytes"):
        convert(BASIC, out, to="kafka", config={"segment.bytes": 100})
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert cli.main(["convert", str(BASIC), str(out), "--to", "kafka", "--config", "segment.bytes=100"]) == 1
    assert "segment.bytes=100" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert convert(BASIC, out, to="kafka", config={"segment.bytes": 1 << 20}, verify=True).messages == 366


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("setting", ["max.message.bytes", "segment.bytes"])
def test_batches_into_kafka_end_where_max_message_bytes_or_segment_bytes_would_refuse_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool, setting: str) -> None:
    # before: the writers halved a batch only while it passed segment.bytes, so max.message.bytes=2000
    # stopped a conversion of 100-byte messages at its first batch ("expected a batch of at most
    # max.message.bytes=2000 bytes, found 29673"), where a producer splits the batch (Kafka 3.8.0
    # UnifiedLog.analyzeAndValidateRecords refuses a batch over max.message.bytes, UnifiedLog.append
    # one over segment.bytes)
    from segstore_kafka.batch import iter_batches

    monkeypatch.setattr(pipeline, "COLUMNAR", columnar)
    src, out = tmp_path / "src", tmp_path / "out"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"b%03d" % i * 25} for i in range(300)])
    report = convert(src, out, to="kafka", config={setting: 2000}, verify=True)
    assert report.messages == 300
    sizes = [b.size for log in sorted(out.glob("T-*/*.log")) for b in iter_batches(log.read_bytes())]
    assert len(sizes) > 10 and max(sizes) <= 2000


@pytest.mark.parametrize("columnar", [True, False])
def test_a_kafka_value_over_max_message_size_names_its_record_and_the_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool) -> None:
    # before: "/.../.r.converting/commitlog:114: expected a body of at most 1024 bytes (maxMessageSize),
    # found 2000", naming a directory the refused run removes, neither the record nor the setting
    # (RocketMQ 4.9.7 CommitLog.MessageExtEncoder.encode refuses a body over maxMessageSize)
    monkeypatch.setattr(pipeline, "COLUMNAR", columnar)
    src = tmp_path / "k"
    with segstore.open(src, "kafka", "a") as store:
        store.append(Message("t.v1", b"small", b"k", 2, timestamp=1000))
        store.append(Message("t.v1", bytes(2000), b"k", 2, timestamp=1001))
    config = {"maxMessageSize": 1024, "mappedFileSizeCommitLog": 1 << 20}
    said = r"^expected a body of at most 1024 bytes \(maxMessageSize\) for t\.v1-2 offset 1, found 2000 \(--"
    with pytest.raises(MessageTooLargeError, match=said):
        convert(src, tmp_path / "r", to="rocketmq", config=config)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]
    config["maxMessageSize"] = 4096
    assert convert(src, tmp_path / "r", to="rocketmq", config=config, verify=True).messages == 2


@pytest.mark.parametrize("setting", ["segment.bytes", "max.message.bytes"])
def test_a_kafka_limit_below_the_smallest_batch_is_refused_before_converting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str) -> None:
    # before: taken (Kafka's LogConfig takes segment.bytes from 14), then the run stopped at its first
    # record with a MessageTooLargeError (exit 1): no batch (61-byte header, a record of 7 bytes at
    # least) fits
    from segstore import cli

    src, out = kafka_source(tmp_path / "src"), tmp_path / "out"
    rocketmq = tmp_path / "r"
    convert(src, rocketmq, to="rocketmq", config=ROCKETMQ_CONFIG)
    with pytest.raises(ConfigError, match=rf"expected {re.escape(setting)} of at least 68 \(the smallest "
                       r"record batch\) for partition t-0 to convert records into, found 67"):
        convert(rocketmq, out, to="kafka", config={setting: 67})
    assert cli.main(["convert", str(rocketmq), str(out), "--to", "kafka", "--config", f"{setting}=67"]) == 2
    assert f"{setting} of at least 68" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r", "src"]


def test_a_resume_that_cannot_go_on_leaves_nothing_behind(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed run that meets a record the destination refuses removes the interrupted run's output
    too (another resume, with the same options, would meet it again); an interruption keeps it."""
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 7, 20, BASIC, out, to="kafka")
    with monkeypatch.context() as patch:
        for cls in WRITERS["kafka"]:
            def flush(self, *args):
                raise MessageTooLargeError("expected a smaller batch, found a larger one", "somewhere")

            patch.setattr(cls, "flush", flush)
        with pytest.raises(MessageTooLargeError):
            convert(BASIC, out, to="kafka", resume=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert convert(BASIC, out, to="kafka").messages == 366

# -- options ---------------------------------------------------------------------------------

def test_topic_selection(tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = convert(BASIC, out, to="kafka", topics=["TopicB"])
    with segstore.open(out, "kafka") as store:
        topics = store.topics()
        side = [dict(r.headers)["rmq.topic"] for r in store.read("rmq.nonqueued", 0)]
    assert topics == ["TopicB", "rmq.nonqueued"]
    assert set(side) == {b"TopicB"}
    with segstore.open(BASIC, "rocketmq") as store:
        assert report.messages == sum(1 for m in store.scan() if m.topic == "TopicB")


def test_one_topic_name_alone_is_taken_as_that_topic(tmp_path: Path) -> None:
    # before: topics="TopicB" was iterated as its characters ("expected source topics named 'B', 'T', ...")
    report = convert(BASIC, tmp_path / "out", to="kafka", topics="TopicB")
    assert report.messages == convert(BASIC, tmp_path / "out2", to="kafka", topics=["TopicB"]).messages > 0


@pytest.mark.parametrize(("options", "said"), [
    ({"config": "segment.bytes=1048576"}, "expected config as a mapping of name to value .*found str"),
    ({"config": ["segment.bytes=1048576"]}, "expected config as a mapping of name to value .*found list"),
    ({"topics": [1]}, r"expected topics as names \(str\), found \[1\]"),
    ({"src": None}, "expected src as a path, found NoneType None"),
    ({"dst": 5}, "expected dst as a path, found int 5"),
])
def test_library_options_of_the_wrong_kind_are_option_errors(tmp_path: Path, options: dict,
                                                            said: str) -> None:
    # before: ValueError from dict(config) ("dictionary update sequence element #0 has length 1"),
    # TypeError from os.fspath(None)
    args = {"src": BASIC, "dst": tmp_path / "out", **options}
    with pytest.raises(ConversionOptionError, match=said):
        convert(args.pop("src"), args.pop("dst"), to="kafka", **args)
    assert list(tmp_path.iterdir()) == []


def test_a_kafka_topic_too_long_for_the_rocketmq_store_is_refused_before_anything_is_converted(
        tmp_path: Path) -> None:
    # before: the run converted the partitions before it, then stopped at the long topic's first message
    # ("expected a topic of at most 127 characters, found 249", naming neither), and left
    # .out.converting, so the corrected command needed --force
    src = tmp_path / "src"
    with segstore.open(src, format="kafka", mode="a") as store:
        for topic in ("A" * 5, "Z" * 249):
            store.append({"topic": topic, "partition": 0, "value": b"v"})
    with pytest.raises(InvalidTopicError, match=r"expected the kafka partition 'Z+'\.\.\. \(129 more "
                       r"characters\)-0 as a queue of the RocketMQ store, found it refused: expected a topic "
                       r"of at most 127 characters, found 249 .*--config rocketmqVersion=5\.1\.0\)"):
        convert(src, tmp_path / "out", to="rocketmq")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    # a 5.1+ store writes the long topic as a v2 message (RocketMQ 5.1.0 CommitLog.asyncPutMessage:
    # MESSAGE_VERSION_V2 where autoMessageVersionOnTopicLen and the topic is over Byte.MAX_VALUE), and
    # it converts back
    report = convert(src, tmp_path / "out", to="rocketmq", config={"rocketmqVersion": "5.1.0"}, verify=True)
    assert report.messages == 2
    convert(tmp_path / "out", tmp_path / "back", to="kafka", verify=True)
    with segstore.open(tmp_path / "back") as store:
        assert store.topics() == ["A" * 5, "Z" * 249]


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state", "__cluster_metadata"])
def test_a_rocketmq_topic_named_as_a_kafka_internal_topic_is_refused_before_anything_is_converted(
        tmp_path: Path, internal: str) -> None:
    """A RocketMQ topic may be named ``__consumer_offsets``, ``__transaction_state`` or
    ``__cluster_metadata``; it converted into Kafka partitions of that name, which a Kafka broker
    reads as its own (apache/kafka 3.8.0 ``Topic.INTERNAL_TOPICS``: ``GroupMetadataManager.
    doLoadGroupsAndOffsets`` / ``TransactionStateManager.loadTransactionMetadata`` fail the partition's
    load at a record without a key, ``require(record.hasKey, ...)``; ``Topic.CLUSTER_METADATA_TOPIC_NAME``:
    ``LogManager.loadLogs`` skips ``__cluster_metadata-0``, the KRaft metadata log), and ``--verify``
    failed on ``__cluster_metadata`` ("expected metadata frame version 1, found ...")."""
    src = tmp_path / "src"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": topic, "queue_id": 0, "body": b"x", "born_timestamp": 1,
                             "store_timestamp": 2} for topic in ("ok", internal)])
    said = (rf"expected no RocketMQ topic converted into one a Kafka broker keeps for its own records "
            rf"\(__cluster_metadata, __consumer_offsets, __transaction_state\), found {internal}-0, whose "
            rf"records did not all come from Kafka \(leave the topic out: --topic")
    with pytest.raises(InvalidTopicError, match=said):
        convert(src, tmp_path / "out", to="kafka")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    code, _, err = cli_run("convert", src, tmp_path / "out", "--to", "kafka")
    assert code == 2 and internal in err and sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    # an empty queue of that name too
    empty = tmp_path / "empty"
    with segstore.open(empty, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.create_queue(internal, 3)
    with pytest.raises(InvalidTopicError, match=rf"found {internal}-3, an empty one no conversion from Kafka "
                                                rf"recorded"):
        convert(empty, tmp_path / "out", to="kafka")
    # the other topics convert
    convert(src, tmp_path / "out", to="kafka", topics=["ok"], verify=True)
    with segstore.open(tmp_path / "out") as store:
        assert store.topics() == ["ok"]


def test_kafka_internal_topics_still_go_round_trip_through_rocketmq(tmp_path: Path) -> None:
    """A Kafka log directory's own ``__consumer_offsets`` / ``__transaction_state`` partitions, with records
    or empty, come back from RocketMQ as they were; a RocketMQ message appended to such a queue since
    (none of Kafka's) is refused as a native topic is."""
    src = tmp_path / "src"
    with segstore.open(src, "kafka", "a") as store:
        store.append({"topic": "__consumer_offsets", "partition": 0, "key": b"\x00\x02k", "value": b"v"})
        store.partition_of("__consumer_offsets", 1, create=True)
        store.partition_of("__transaction_state", 0, create=True)
        store.append({"topic": "orders", "partition": 0, "key": b"k", "value": b"v"})
    convert(src, tmp_path / "r", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    convert(tmp_path / "r", tmp_path / "back", to="kafka", verify=True)
    assert scan_json(tmp_path / "back", "kafka") == scan_json(src, "kafka")
    with segstore.open(tmp_path / "back") as store:
        assert [(t, p) for t in store.topics() for p in store.partitions(t)] == [
            ("__consumer_offsets", 0), ("__consumer_offsets", 1), ("__transaction_state", 0), ("orders", 0)]
    # a copy without its journal: the empty queue of a topic whose other queues hold Kafka's records is
    # Kafka's too, an empty one alone cannot tell
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "r", copy)
    (copy / pipeline.JOURNAL_NAME).unlink()
    convert(copy, tmp_path / "back2", to="kafka", topics=["__consumer_offsets"], verify=True)
    with pytest.raises(InvalidTopicError, match=r"found __transaction_state-0, an empty one no conversion "
                                                r"from Kafka recorded"):
        convert(copy, tmp_path / "back3", to="kafka")
    with segstore.open(tmp_path / "r", "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append({"topic": "__consumer_offsets", "queue_id": 0, "body": b"native"})
    with pytest.raises(InvalidTopicError, match=r"found __consumer_offsets-0, whose records did not all come "
                                                r"from Kafka"):
        convert(tmp_path / "r", tmp_path / "again", to="kafka")


def test_rocketmq_topics_whose_kafka_names_collide_are_refused(tmp_path: Path) -> None:
    """RocketMQ topics ``a%b`` and ``a_25b`` became Kafka topics ``a.25b`` and ``a_25b``, which Kafka
    refuses to hold together (apache/kafka 3.8.0 ``ReplicationControlManager.createTopic``: "Topic 'a_25b'
    collides with existing topic: a.25b", ``Topic.hasCollisionChars``/``unifyCollisionChars``: their metric
    names clash); segstore's own append refuses the second.  So did ``rmq_nonqueued`` with the reserved
    ``rmq.nonqueued`` of the prepared transaction messages."""
    message = {"queue_id": 0, "body": b"x", "born_timestamp": 1, "store_timestamp": 2}
    for name, topics, said in [
            ("escaped", [("a%b", 0), ("a_25b", 0)], r"expected a_25b-0 \(converted from rocketmq\) as a "
             r"partition of the Kafka log directory, found it refused: expected a topic that does not "
             r"collide with existing topic 'a\.25b', found 'a_25b'.*\(leave one of the topics out"),
            ("nonqueued", [("rmq_nonqueued", 0), ("t", 0x4)], r"expected rmq\.nonqueued-0 \(converted from "
             r"rocketmq\) .*collide with existing topic 'rmq_nonqueued'")]:
        src = tmp_path / name
        with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
            store.append_batch([{**message, "topic": topic, "sys_flag": flag} for topic, flag in topics])
        with pytest.raises(InvalidTopicError, match=said):
            convert(src, tmp_path / "out", to="kafka")
        assert not (tmp_path / "out").exists() and not (tmp_path / ".out.converting").exists()
    assert cli_run("convert", tmp_path / "escaped", tmp_path / "out", "--to", "kafka")[0] == 2
    convert(tmp_path / "escaped", tmp_path / "out", to="kafka", topics=["a%b"], verify=True)
    with segstore.open(tmp_path / "out") as store:
        assert store.topics() == ["a.25b"]


def test_a_rocketmq_topic_too_long_for_kafka_once_escaped_names_its_queue(tmp_path: Path) -> None:
    # before: "expected a Kafka topic name of at most 249 characters, found 300 in '.25.25...'", naming
    # neither the RocketMQ topic nor its queue (Kafka 3.8.0 Topic.validate: at most 249 characters)
    src = tmp_path / "src"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "a", "queue_id": 0, "body": b"x"},
                            {"topic": "%" * 100, "queue_id": 3, "body": b"y"}])
    with pytest.raises(InvalidTopicError, match=r"expected the RocketMQ queue '%+'/3 as a kafka partition, "
                                                r"found its topic refused: expected a Kafka topic name of at "
                                                r"most 249 characters, found 300"):
        convert(src, tmp_path / "out", to="kafka")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_timestamp_store_from_a_source_without_a_store_time_is_an_option_error(tmp_path: Path) -> None:
    # before: taken and ignored (a Kafka record has one time), as --decompress-bodies is not
    with pytest.raises(ConversionOptionError, match=r"expected --timestamp store only for a source whose "
                                                    r"messages have a store time .*found a kafka source"):
        convert(KAFKA_TXN, tmp_path / "out", to="rocketmq", timestamp="store")
    assert list(tmp_path.iterdir()) == []
    assert cli_run("convert", KAFKA_TXN, tmp_path / "out", "--to", "rocketmq", "--timestamp", "store")[0] == 2


def test_store_time_as_log_append_time_still_round_trips(tmp_path: Path) -> None:
    kafka, back = tmp_path / "k", tmp_path / "r"
    convert(BASIC, kafka, to="kafka", timestamp="store", verify=True)
    with segstore.open(BASIC, "rocketmq") as store:
        store_times = {(m.topic, m.queue_id, m.queue_offset): m.store_timestamp for m in store.scan()}
    with segstore.open(kafka, "kafka") as store:
        records = list(store.read("TopicA", 0))
        assert all(r.batch.timestamp_type == LOG_APPEND_TIME for r in records)
        assert [r.timestamp for r in records] == [store_times[("TopicA", 0, r.offset)] for r in records]
    convert(kafka, back, to="rocketmq", verify=True, config={"maxHashSlotNum": 64, "maxIndexNum": 256})
    assert scan_json(back, "rocketmq") == scan_json(BASIC, "rocketmq")


def test_topic_names_each_side_forbids_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "rmq"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": t, "queue_id": q, "body": f"{t}/{q}".encode(), "born_timestamp": 1,
                             "store_timestamp": 2} for t in ("%RETRY%group", "a|b", "plain") for q in (0, 1)])
    kafka, back = tmp_path / "k", tmp_path / "back"
    convert(src, kafka, to="kafka", verify=True)
    assert sorted(p.name for p in kafka.iterdir() if p.is_dir()) == [
        ".25RETRY.25group-0", ".25RETRY.25group-1", "a.7Cb-0", "a.7Cb-1", "plain-0", "plain-1"]
    convert(kafka, back, to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    assert scan_json(back, "rocketmq") == scan_json(src, "rocketmq")

    ksrc = tmp_path / "kafka-src"
    with segstore.open(ksrc, "kafka", "a") as store:
        store.append_batch([{"topic": "orders.v1", "partition": 3, "key": b"k", "value": b"v",
                             "timestamp": 5}])
    rmq, kback = tmp_path / "r2", tmp_path / "k2"
    convert(ksrc, rmq, to="rocketmq", config=ROCKETMQ_CONFIG)
    with segstore.open(rmq, "rocketmq") as store:
        assert store.topics() == ["orders%2Ev1"] and store.partitions("orders%2Ev1") == [3]
    convert(rmq, kback, to="kafka", verify=True)
    assert scan_json(kback, "kafka") == scan_json(ksrc, "kafka")


def test_report_lines_and_journal(tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = convert(BASIC, out, to="kafka", verify=True)
    lines = report.lines()
    assert "366 messages" in lines[0] and lines[-1].startswith("verified")
    journal = (out / JOURNAL_NAME).read_text()
    assert '"state": "done"' in journal and '"mappedFileSizeCommitLog": 262144' in journal
    assert os.listdir(tmp_path) == ["out"]


def test_progress_bar_only_when_asked_or_on_a_terminal(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    convert(BASIC, tmp_path / "quiet", to="kafka")
    assert capsys.readouterr().err == ""          # stderr is not a terminal under pytest
    convert(BASIC, tmp_path / "loud", to="kafka", progress=True)
    err = capsys.readouterr().err
    assert "convert rocketmq -> kafka" in err and "366" in err and "MB/s" in err


KILL_SCRIPT = """
import json, os, signal, sys
from segstore.convert import convert, pipeline
from segstore_kafka.conversion import KafkaArrowWriter, KafkaWriter
from segstore_rocketmq.arrowwrite import RocketMQArrowWriter
from segstore_rocketmq.conversion import RocketMQWriter
writers = (KafkaWriter, KafkaArrowWriter) if sys.argv[3] == "kafka" else (RocketMQWriter, RocketMQArrowWriter)
pipeline.BATCH_RECORDS = pipeline.ROCKETMQ_BATCH = 5
calls = [0]
for writer in writers:
    # killed at the 13th batch written (the Kafka columnar writer queues batches in flush and
    # appends them in _append)
    name = "_append" if writer is KafkaArrowWriter else "flush"
    def hook(self, *args, original=getattr(writer, name)):
        calls[0] += 1
        if calls[0] > 12:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, *args)
    setattr(writer, name, hook)
convert(sys.argv[1], sys.argv[2], to=sys.argv[3], config=json.loads(sys.argv[4]))
"""


@pytest.mark.parametrize(("src", "to"), [(BASIC, "kafka"), (KAFKA_TXN, "rocketmq")])
def test_killed_conversion_leaves_no_store_and_resumes(tmp_path: Path, src: Path, to: str) -> None:
    out = tmp_path / "out"
    config = ROCKETMQ_CONFIG if to == "rocketmq" else {}
    killed = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(src), str(out), to, json.dumps(config)],
                            check=False)
    assert killed.returncode == -signal.SIGKILL
    assert not out.exists() and Path(temp_path(str(out))).is_dir()
    report = convert(src, out, to=to, resume=True, verify=True, config=config)
    assert report.already_present > 0
    convert(src, tmp_path / "clean", to=to, config=config)
    assert scan_json(out, to) == scan_json(tmp_path / "clean", to)


INSTALLED_KILL_SCRIPT = """
import json, os, signal, sys
from segstore.convert import convert, pipeline
original = pipeline._install
def install(tmp, dst):
    original(tmp, dst)
    os.kill(os.getpid(), signal.SIGKILL)       # installed, but killed before it could say so
pipeline._install = install
convert(sys.argv[1], sys.argv[2], to=sys.argv[3], config=json.loads(sys.argv[4]))
"""


@pytest.mark.parametrize(("src", "to"), [(BASIC, "kafka"), (KAFKA_TXN, "rocketmq")])
def test_resume_of_a_run_killed_after_it_installed_the_store_does_nothing(tmp_path: Path, src: Path,
                                                                         to: str) -> None:
    """A conversion killed between installing DST and reporting: ``--resume`` (what the docs say to run
    after a crash) found DST and refused it ("pass --force"), and --force converted it all again.
    The store in DST is that very run's, done: the resume reports it, converting nothing, and the
    same resume over a source appended to since is still refused."""
    out = tmp_path / "out"
    config = ROCKETMQ_CONFIG if to == "rocketmq" else {}
    killed = subprocess.run([sys.executable, "-c", INSTALLED_KILL_SCRIPT, str(src), str(out), to,
                             json.dumps(config)], check=False)
    assert killed.returncode == -signal.SIGKILL
    assert out.is_dir() and not Path(temp_path(str(out))).exists()
    before = scan_json(out, to)
    report = convert(src, out, to=to, resume=True, verify=True, config=config)
    assert report.messages == 0 and report.already_present == len(before) > 0 and report.verified
    assert scan_json(out, to) == before
    grown, fmt = copy_writable(src, tmp_path / "grown" / src.name), "rocketmq" if to == "kafka" else "kafka"
    shutil.rmtree(out)
    convert(grown, out, to=to, config=config)
    with segstore.open(grown, fmt, "a") as store:
        topic = store.topics()[0]
        store.append_batch([{"topic": topic, "partition": 0, "value": b"later", "timestamp": 1}]
                           if fmt == "kafka" else [{"topic": topic, "queue_id": 0, "body": b"later"}])
    with pytest.raises(ConversionError, match="destination that does not exist"):
        convert(grown, out, to=to, resume=True, config=config)


def test_foreign_record_in_a_converted_partition_is_refused(tmp_path: Path) -> None:
    kafka = tmp_path / "k"
    convert(BASIC, kafka, to="kafka")
    with segstore.open(kafka, "kafka", "a") as store:
        store.append_batch([{"topic": "TopicA", "partition": 0, "key": b"x", "value": b"appended later",
                             "timestamp": 1}])
    with pytest.raises(ConversionError, match=r"rmq\.physical_offset"):
        convert(kafka, tmp_path / "r", to="rocketmq", config=ROCKETMQ_CONFIG)


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from segstore import cli

    out = tmp_path / "out"
    out.mkdir()
    assert cli.main(["convert", str(BASIC), str(out), "--to", "kafka"]) == 1
    assert "pass --force" in capsys.readouterr().err
    assert cli.main(["convert", str(tmp_path), str(tmp_path / "x"), "--to", "kafka"]) == 2
    assert "not a store of any known format" in capsys.readouterr().err
    assert cli.main(["convert", str(tmp_path / "typo"), str(tmp_path / "y"), "--to", "kafka"]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()
    with pytest.raises(SystemExit) as usage:
        cli.main(["convert", str(BASIC), str(out), "--to", "parquet"])
    assert usage.value.code == 2
    assert cli.main(["convert", str(BASIC), str(out), "--to", "kafka", "--force", "--topic", "TopicA"]) == 0
    partitions = sorted(n for n in os.listdir(out) if n.startswith("Topic"))
    assert partitions == ["TopicA-0", "TopicA-1", "TopicA-2", "TopicA-3"]


def test_kafka_batches_stay_within_segment_bytes(tmp_path: Path) -> None:
    src = tmp_path / "rmq"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": bytes(60), "keys": [f"k{i}"], "tags": "x",
                             "born_timestamp": i, "store_timestamp": i} for i in range(400)])
    out = tmp_path / "k"
    convert(src, out, to="kafka", verify=True, config={"segment.bytes": 2048})
    with segstore.open(out, "kafka") as store:
        batches = {(r.batch.base_offset, r.batch.size) for r in store.read("T", 0)}
        assert len(store.partition_of("T", 0).segments) > 10
    assert max(size for _, size in batches) <= 2048 and len(batches) > 20


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_kafka_message_sets_convert(tmp_path: Path, magic: int) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    part = tmp_path / "old-0"
    part.mkdir()
    data = b""
    for base in (0, 3):
        builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
        for i in range(base, base + 3):
            timestamp = 1_600_000_000_000 + i if magic else None
            builder.append(i, timestamp, b"k%d" % i if i % 2 else None, b"v" * i)
        data += bytes(builder.build())
    (part / "00000000000000000000.log").write_bytes(data)
    rmq, back = tmp_path / "r", tmp_path / "k"
    convert(part, rmq, to="rocketmq", config=ROCKETMQ_CONFIG, verify=True)
    convert(rmq, back, to="kafka", verify=True)

    def records(path: Path) -> list[tuple]:
        with segstore.open(path, "kafka") as store:
            return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in store.scan()]

    assert records(back / "old-0") == records(part)
    assert len(records(part)) == 6


def test_force_clears_a_destination_left_aside(tmp_path: Path) -> None:
    out = tmp_path / "out"
    convert(BASIC, out, to="kafka")
    aside = tmp_path / ".out.replaced"
    aside.mkdir()
    (aside / "old").write_text("left by an interrupted install")
    convert(BASIC, out, to="kafka", force=True)
    assert out.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_destination_that_is_a_link_is_converted_where_it_points(tmp_path: Path) -> None:
    # before: --force renamed the link aside, put the new store in the link's place (on the link's
    # disk) and then failed on rmtree of the renamed link: exit 1, the link left as .link.replaced
    disk = tmp_path / "disk"
    disk.mkdir()
    real = disk / "store"
    convert(BASIC, real, to="kafka")
    expected = scan_json(real, "kafka")
    with segstore.open(real, "kafka", "a") as store:            # changed since: --force replaces it
        store.append({"topic": "extra", "partition": 0, "value": b"v"})
    home = tmp_path / "home"
    home.mkdir()
    link = home / "store"
    link.symlink_to(real, target_is_directory=True)
    report = convert(BASIC, link, to="kafka", force=True)
    assert report.dst == str(link) and report.messages == 366
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert [p.name for p in home.iterdir()] == ["store"] and [p.name for p in disk.iterdir()] == ["store"]
    assert scan_json(real, "kafka") == expected
    dangling = home / "new"                     # a link to where the store is to be
    dangling.symlink_to(disk / "new", target_is_directory=True)
    convert(BASIC, dangling, to="kafka")
    assert dangling.is_symlink() and (disk / "new").is_dir() and not (disk / "new").is_symlink()
    assert scan_json(dangling, "kafka") == scan_json(disk / "new", "kafka") != []


class CleanRuns(dict):
    """Uninterrupted conversions' records by target (short repr: hypothesis prints its arguments)."""

    def __repr__(self) -> str:
        return "CleanRuns(kafka, rocketmq)"


@pytest.fixture(scope="module")
def clean_conversions(tmp_path_factory: pytest.TempPathFactory) -> CleanRuns:
    root = tmp_path_factory.mktemp("clean")
    convert(BASIC, root / "k", to="kafka")
    convert(KAFKA_TXN, root / "r", to="rocketmq", config=ROCKETMQ_CONFIG)
    return CleanRuns(kafka=scan_json(root / "k", "kafka"), rocketmq=scan_json(root / "r", "rocketmq"))


@given(st.sampled_from(["kafka", "rocketmq"]), st.integers(0, 60))
@settings(max_examples=10, deadline=None)
def test_resume_after_an_interruption_at_any_point(tmp_path_factory: pytest.TempPathFactory,
                                                   clean_conversions: CleanRuns, to: str,
                                                   flushes: int) -> None:
    src, config = (BASIC, {}) if to == "kafka" else (KAFKA_TXN, ROCKETMQ_CONFIG)
    out = tmp_path_factory.mktemp("resume") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "BATCH_RECORDS", 7)
        patch.setattr(pipeline, "ROCKETMQ_BATCH", 3)
        with pytest.MonkeyPatch.context() as crash:
            interrupt_after(crash, to, flushes)
            try:
                convert(src, out, to=to, config=config)
                stopped = False
            except Interrupt:
                stopped = True
        if stopped:
            assert not out.exists()
            convert(src, out, to=to, config=config, resume=True)
    assert scan_json(out, to) == clean_conversions[to]


def test_an_empty_store_round_trips(tmp_path: Path) -> None:
    """A RocketMQ store of 0 messages (a broker started once) converts to a Kafka log dir of no
    partition, which is still found to be Kafka (its log-dir checkpoints, written by
    ``LogManager.checkpointLogRecoveryOffsets`` at start) and converts back."""
    src = tmp_path / "src"
    segstore.open(src, format="rocketmq", mode="a").close()
    convert(src, tmp_path / "k", to="kafka", verify=True)
    assert sorted(p.name for p in (tmp_path / "k").iterdir() if p.name != JOURNAL_NAME) == [
        "log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"]
    with segstore.open(tmp_path / "k") as store:
        assert store.format == "kafka" and store.topics() == [] and store.verify() == []
    convert(tmp_path / "k", tmp_path / "back", to="rocketmq", verify=True)
    with segstore.open(tmp_path / "back") as store:
        assert store.format == "rocketmq" and list(store.scan()) == [] and store.verify() == []


def test_kafka_compression_and_timestamp_type_configs_that_contradict_the_options_are_refused(
        tmp_path: Path) -> None:
    """``--config compression.type`` / ``message.timestamp.type`` of a Kafka destination were taken and
    ignored: the batches were written by ``--compression`` / ``--timestamp`` alone.  A broker with the
    topic config writes what it says (apache/kafka 3.8.0 ``LogValidator.validateMessagesAndAssignOffsets``:
    the batches recompressed to ``targetCompression`` unless it is ``producer``, their times set to the
    append time for ``LOG_APPEND_TIME``; ``BrokerCompressionType``: ``uncompressed`` is no compression)."""
    cases = [({"compression.type": "gzip"}, {}, r"expected --compression gzip .*compression\.type=gzip"
                                                r".*found --compression none"),
             ({"compression.type": "uncompressed"}, {"compression": "zstd"}, r"found --compression zstd"),
             ({"message.timestamp.type": "LogAppendTime"}, {},
              r"expected --timestamp store .*message\.timestamp\.type=LogAppendTime.*found --timestamp born"),
             ({"message.timestamp.type": "CreateTime"}, {"timestamp": "store"}, r"found --timestamp store")]
    for config, options, message in cases:
        with pytest.raises(ConversionOptionError, match=message):
            convert(BASIC, tmp_path / "out", to="kafka", config=config, **options)
        assert list(tmp_path.iterdir()) == []
    assert cli_run("convert", BASIC, tmp_path / "out", "--to", "kafka", "--config",
                   "compression.type=lz4")[0] == 2
    # what agrees, or leaves the choice to the producer, converts as before
    for config, options, codec in [({"compression.type": "lz4"}, {"compression": "lz4"}, "lz4"),
                                   ({"compression.type": "producer"}, {"compression": "gzip"}, "gzip"),
                                   ({"compression.type": "uncompressed"}, {}, "none")]:
        out = tmp_path / f"ok-{codec}"
        convert(BASIC, out, to="kafka", config=config, verify=True, **options)
        with segstore.open(out, "kafka") as store:
            assert {r.batch.compression for r in store.read("TopicA", 0)} == {codec}
    out = tmp_path / "ok-time"
    convert(BASIC, out, to="kafka", config={"message.timestamp.type": "LogAppendTime"}, timestamp="store")
    with segstore.open(out, "kafka") as store:
        assert {r.batch.timestamp_type for r in store.read("TopicA", 0)} == {LOG_APPEND_TIME}


def _batch_payloads(log: Path) -> list[bytes]:
    """The compressed record region of each batch of a segment file (after the 61-byte v2 header)."""
    data, pos, out = log.read_bytes(), 0, []
    while pos < len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        out.append(data[pos + 61:pos + 12 + length])
        pos += 12 + length
    return out


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("codec,level", [("gzip", 1), ("lz4", 17), ("zstd", 19)])
def test_a_kafka_destinations_compression_level_is_the_level_batches_are_compressed_at(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool, codec: str, level: int) -> None:
    """``--config compression.<codec>.level`` (Kafka 3.8.0 KIP-390) was taken and ignored: every batch was
    compressed at the codec's default level.  The topic's level is the one its broker compresses
    the codec at (apache/kafka 3.8.0 ``LogConfig.getCompression``: ``Compression.zstd().level(
    compression.zstd.level)``..., the ``targetCompression`` ``LogValidator`` recompresses with)."""
    from segstore_kafka.compression import compress, decompress

    monkeypatch.setattr(pipeline, "COLUMNAR", columnar)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta"]
    with segstore.open(tmp_path / "src", "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "t", "queue_id": 0, "born_timestamp": 1, "store_timestamp": 2,
                             "body": b" ".join(words[(i * j) % 7 % 6] for j in range(300))}
                            for i in range(60)])
    convert(tmp_path / "src", tmp_path / "k", to="kafka", compression=codec, verify=True,
            config={f"compression.{codec}.level": str(level)})
    [log] = (tmp_path / "k" / "t-0").glob("*.log")
    payloads = _batch_payloads(log)
    assert payloads
    for payload in payloads:
        region = decompress(codec, payload)
        assert payload == compress(codec, region, level)
        assert payload != compress(codec, region)      # (the default level writes other bytes)
    convert(tmp_path / "src", tmp_path / "default", to="kafka", compression=codec)
    [log] = (tmp_path / "default" / "t-0").glob("*.log")
    assert all(p == compress(codec, decompress(codec, p)) for p in _batch_payloads(log))


def test_a_config_the_destination_refuses_is_not_blamed_on_the_sources_journal(tmp_path: Path) -> None:
    """The way back to RocketMQ opens the destination with the source journal's ``source_config``
    under ``--config``; a name or value of ``--config`` itself that the destination refuses was
    reported "(with autoMessageVersionOnTopicLen, ... from source_config of the conversion journal
    ...; --config NAME=VALUE overrides it)", every recorded name listed, as if the journal were at
    fault.  Such a ``--config`` is refused as given."""
    kafka = tmp_path / "k"
    convert(BASIC, kafka, to="kafka")
    for config, message in [({"foo": "1"}, r"found 'foo'"),
                            ({"mappedFileSizeCommitLog": "abc"}, r"mappedFileSizeCommitLog, found 'abc'")]:
        with pytest.raises(ConfigError, match=message) as caught:
            convert(kafka, tmp_path / "back", to="rocketmq", config=config)
        assert "source_config" not in str(caught.value)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]
    # a bad value the journal itself holds is still named as the journal's
    journal = json.loads((kafka / JOURNAL_NAME).read_text())
    journal["source_config"]["maxIndexNum"] = "many"
    (kafka / JOURNAL_NAME).write_text(json.dumps(journal))
    with pytest.raises(ConfigError, match=r"maxIndexNum.*from source_config of the conversion journal"):
        convert(kafka, tmp_path / "back", to="rocketmq")


@pytest.mark.parametrize(("keys", "found"), [
    (["rmq.p.TRACE_ON", "kafka.offset", ""], False),
    (["\u4e2d\u6587", "\u00e9t\u00e9", "\ud7a3"], False),  # lead bytes below EF: the largest byte decides
    (["\U0001f600 emoji", "\uffee", "\ufffc"], False),  # bytes from EF up but no U+FFFD: searched
    (["ok", "a\ufffdb"], True),
    (["\ufffd"], True),
])
def test_header_keys_holding_a_replacement_char_are_found(keys, found) -> None:
    """The columnar conversion sends a batch whose header keys hold a U+FFFD (Java's text of key bytes
    that are not UTF-8) to the entry path: found whatever the other keys' bytes, in a sliced array too
    (its data buffer holds the other rows' keys as well)."""
    import pyarrow as pa

    arr = pa.array(["\ufffd-before", *keys, "\ufffd-after"], pa.string())
    assert pipeline._holds_replacement(arr.slice(1, len(keys))) is found
    assert pipeline._holds_replacement(pa.array(keys, pa.string())) is found
    assert pipeline._holds_replacement(arr.slice(1, 0)) is False
