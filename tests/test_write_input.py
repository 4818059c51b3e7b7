"""``segstore write --input FILE.jsonl`` (issue 28, item 3): ``dump --json | write --input -`` round-trips
byte for byte, binary bodies included, on both formats; plain lines take base64 bodies too.

Expected bytes are the compat fixtures' own files, written by the brokers' Java code (their
``spec.json`` holds the config they were written with), and ``dump --json`` of the source.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES, ROCKETMQ_FIXTURES, ROOT
from segstore_kafka.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

import segstore
from segstore import cli
from segstore.records import Message

#: Kafka fixtures whose batches segstore compresses to Java's very bytes (test_kafka_fixtures.BYTE_IDENTICAL
#: less logappendtime, whose records' create times a dump does not carry): snappy-java picks other matches.
SAME_LOG_FILES = ("uncompressed", "gzip", "lz4", "zstd")


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


def pipe(source: Path, target: Path, *write_args: str) -> subprocess.CompletedProcess[bytes]:
    """``segstore dump SOURCE --json | segstore write TARGET --input - ...`` in real processes."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")])}
    dump = subprocess.run([sys.executable, "-m", "segstore.cli", "dump", str(source), "--json"],
                          capture_output=True, env=env, timeout=300, check=True)
    return subprocess.run([sys.executable, "-m", "segstore.cli", "write", str(target), "--input", "-",
                           *write_args], input=dump.stdout, capture_output=True, env=env, timeout=300,
                          check=False)


def _dump(path: Path) -> list[dict]:
    out = io.StringIO()
    assert cli.main(["dump", str(path), "--json"], out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _config_args(spec: Path) -> list[str]:
    config = json.loads(spec.read_text()).get("config", {})
    return [arg for name, value in config.items() for arg in ("--config", f"{name}={value}")]


def _files(root: Path, pattern: str) -> dict[str, bytes]:
    """The files' bytes by path; a file of zeros holds nothing (a broker allocates its next commitlog
    file ahead, and a killed one leaves it)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob(pattern))
            if p.is_file() and p.read_bytes().strip(b"\0")}


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_a_rocketmq_dump_written_back_is_the_same_store_byte_for_byte(tmp_path, name):
    source = FIXTURES / "rocketmq" / name / "store"
    target = tmp_path / "store"
    done = pipe(source, target, *_config_args(source.parent / "spec.json"))
    assert done.returncode == 0, done.stderr
    assert _dump(target) == _dump(source)
    assert _files(target, "commitlog/*") == _files(source, "commitlog/*")
    assert _files(target, "consumequeue/*/*/*") == _files(source, "consumequeue/*/*/*")


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_a_kafka_dump_written_back_is_the_same_partition(tmp_path, name):
    source = next(p for p in (FIXTURES / "kafka" / name).iterdir() if p.is_dir())
    target = tmp_path / "logs" / source.name
    done = pipe(source, target)          # no config: the segments follow the dump's batch positions
    assert done.returncode == 0, done.stderr
    before, after = _dump(source), _dump(target)
    assert len(after) == len(before)
    if name in SAME_LOG_FILES:
        assert after == before
        assert _files(target, "*.log") == _files(source, "*.log")
        return
    # What a consumer reads is the same; the batches differ only where the dump cannot say how
    # they were stored: snappy's compressed bytes, LogAppendTime records' create times.
    differ = {"crc", "size", "position"}
    for old, new in zip(before, after, strict=True):
        assert {**old, "batch": None} == {**new, "batch": None}
        assert {k: v for k, v in old["batch"].items() if k not in differ} == \
            {k: v for k, v in new["batch"].items() if k not in differ}
        if name == "logappendtime" and old["batch"]["base_offset"] == old["batch"]["last_offset"]:
            assert new["batch"]["crc"] == old["batch"]["crc"]       # one record: its create time is the base
    assert sorted(p.name for p in target.glob("*.log")) == sorted(p.name for p in source.glob("*.log"))


def test_binary_bodies_keys_and_headers_round_trip(tmp_path):
    every_byte = bytes(range(256))
    rocketmq, kafka = tmp_path / "rmq", tmp_path / "logs" / "bin-0"
    with segstore.open(rocketmq, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "Bin", "queue_id": 1, "body": every_byte, "tags": "x y", "keys": ["k"]},
                            {"topic": "Bin", "queue_id": 0, "body": b"\xff\xfe\x00"}])
    with segstore.open(kafka, format="kafka", mode="a") as store:
        store.append_batch([Message("bin", every_byte, key=b"\x00\xff",
                                    headers=[("h", b"\x80\x81"), ("n", None)]),
                            Message("bin", None, key=None)])
    for source, fmt in ((rocketmq, "rocketmq"), (kafka, "kafka")):
        target = tmp_path / "copy" / source.name
        done = pipe(source, target)
        assert done.returncode == 0, done.stderr
        assert _dump(target) == _dump(source)
        with segstore.open(source) as old, segstore.open(target, format=fmt) as new:
            assert [(r.value, r.key, r.headers) for r in new.scan()] == \
                [(r.value, r.key, r.headers) for r in old.scan()]
            if fmt == "rocketmq":
                assert every_byte in [r.value for r in new.scan()]


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_plain_lines_take_base64_bodies_and_keys(tmp_path, capsys, fmt):
    target = tmp_path / ("t-0" if fmt == "kafka" else "store")
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "t", "bodyBase64": "AP+A"}\n'
                     '{"topic": "t", "valueBase64": "AQI=", "keyBase64": "aw=="}\n'
                     '{"topic": "t", "value": "text"}\n')
    code, _, err = run(capsys, "write", target, "--input", lines, "--format", fmt)
    assert code == 0, err
    with segstore.open(target) as store:
        got = sorted((r.value, r.key) for r in store.scan())
    assert got == sorted([(b"\x00\xff\x80", None), (b"\x01\x02", b"k"), (b"text", None)])


@pytest.mark.parametrize("line", ['{"topic": "t", "body": "x", "bodyBase64": "eA=="}',
                                  '{"topic": "t", "valueBase64": "not base64!"}'])
def test_a_line_giving_a_body_twice_or_bad_base64_is_refused(tmp_path, capsys, line):
    lines = tmp_path / "in.jsonl"
    lines.write_text(line + "\n")
    code, _, err = run(capsys, "write", tmp_path / "store", "--input", lines)
    assert code == 1
    assert err.startswith(f"{lines}:0: line 1: expected ")        # the line and its byte named
    assert not (tmp_path / "store").exists()


def test_a_dump_of_one_format_is_not_written_into_the_other(tmp_path, capsys):
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps(_dump(FIXTURES / "rocketmq" / "basic" / "store")[0]) + "\n")
    code, _, err = run(capsys, "write", tmp_path / "t-0", "--input", lines, "--format", "kafka")
    assert code == 1
    assert "line 1: expected messages for a kafka store, found a rocketmq dump --json line" in err
    assert "segstore convert" in err
    assert not (tmp_path / "t-0").exists()


def test_an_edited_dump_line_that_contradicts_itself_is_refused(tmp_path, capsys):
    line = _dump(FIXTURES / "rocketmq" / "basic" / "store")[0]
    assert line["tags"]
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({**line, "tags": "Edited"}) + "\n")
    code, _, err = run(capsys, "write", tmp_path / "store", "--input", lines)
    assert code == 1
    assert f"expected tags {line['tags']!r} as the message's properties and body say, found 'Edited'" in err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("topic", ["../../escape", "bad topic!", ""])
def test_a_dump_line_with_a_topic_the_broker_refuses_writes_nothing_anywhere(tmp_path, capsys, monkeypatch,
                                                                            topic, columnar):
    """A dump line's topic names consume-queue directories: one the broker's TopicValidator refuses
    (a path out of the store) is refused on either route, and no file is made, inside or outside."""
    from segstore_rocketmq import jsonl

    monkeypatch.setattr(jsonl, "COLUMNAR", columnar, raising=False)   # both routes, where there are two
    line = _dump(FIXTURES / "rocketmq" / "basic" / "store")[0]
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({**line, "topic": topic}) + "\n")
    code, _, err = run(capsys, "write", tmp_path / "store", "--input", lines)
    assert code == 1    # a bad line: the input's problem (docs/cli.md), not usage
    assert f"{lines}:0: line 1: expected a " in err and "topic" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["in.jsonl"]


def test_a_kafka_dump_keeps_its_offsets_and_is_refused_below_the_log_end(tmp_path, capsys):
    source = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps(obj) + "\n" for obj in _dump(source)))
    target = tmp_path / "topic-0"
    assert run(capsys, "write", target, "--input", lines)[0] == 0
    code, _, err = run(capsys, "write", target, "--input", lines)
    assert code == 1
    assert "expected a batch at or after the log end offset 300, found base offset 0" in err
    assert len(_dump(target)) == 300


def test_write_help_documents_the_input_lines(capsys):
    with pytest.raises(SystemExit):
        cli.main(["write", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "dump --json" in text and "bodyBase64" in text and "-" in text


@pytest.mark.parametrize("config", [
    [], ["--config", "segment.bytes=50000"],
    ["--config", "max.message.bytes=20000", "--config", "compression.type=lz4"],
], ids=["defaults", "small segments", "small batches, lz4"])
def test_kafka_plain_lines_are_cut_into_batches_the_partition_takes(tmp_path, capsys, config):
    """``write --input`` appends plain lines a few thousand a call, one batch per partition a call: 5,000
    lines of 1,000-byte values (5 MB for one partition) were refused whole, 'expected a batch of at most
    max.message.bytes=1048588 bytes', and so was any run past a smaller ``segment.bytes``. A call's
    batch now ends where the next record would take it past what one batch may hold (about 1 MiB, less
    under either setting), as a producer splits what a broker would refuse as too large
    (``ProducerBatch.split`` on MESSAGE_TOO_LARGE, Kafka 3.8.0)."""
    lines = tmp_path / "in.jsonl"
    with lines.open("w") as out:
        for i in range(5000):
            partition = i % 3 // 2          # two lines of three to partition 0
            out.write(json.dumps({"topic": "t", "partition": partition, "key": f"k{i}",
                                  "value": f"{i:06d}" + "é" * (i % 7) + "x" * 994,
                                  "headers": [["h", "v" * (i % 50)]]}) + "\n")
    code, out_text, err = run(capsys, "write", tmp_path / "k", "--format", "kafka", "--input", lines, *config)
    assert (code, err) == (0, ""), err
    assert out_text.endswith("appended 5000 messages\n")
    code, _, err = run(capsys, "verify", tmp_path / "k")
    assert code == 0, err
    with segstore.open(tmp_path / "k") as store:
        for partition, wanted in ((0, [i for i in range(5000) if i % 3 // 2 == 0]),
                                  (1, [i for i in range(5000) if i % 3 // 2 == 1])):
            records = list(store.read("t", partition, offset=0))
            assert [int(r.value[:6]) for r in records] == wanted
            sizes = {r.batch.base_offset: r.batch.size for r in records}
            assert len(sizes) > 3                       # several batches a call
            limit = 20000 if "max.message.bytes=20000" in config else 50000 if config else 1048588
            assert max(sizes.values()) <= limit


@pytest.mark.parametrize("line", [
    {"topic": "t", "value": "x", "key": "\udc00"},
    {"topic": "t", "value": "x", "tags": "a\ud800"},
    {"topic": "t", "value": "x", "properties": {"p\ud800": "v"}},
    {"topic": "t", "value": "x", "headers": [["h", "\ud800"]]},
], ids=["key", "tags", "property name", "header value"])
def test_a_rocketmq_line_with_a_lone_surrogate_in_its_properties_writes_nothing(tmp_path, capsys, line):
    """A lone surrogate (``"\\ud800"``, valid JSON) in a key, tags or a property was written as the
    invalid UTF-8 bytes ED A0 80 (properties are encoded with surrogatepass), which no broker stores:
    4.9.7 ``MessageDecoder.messageProperties2String`` makes a Java String and ``CommitLog``'s
    ``MessageExtEncoder`` writes ``getBytes(UTF_8)``, where it becomes ``?``. Refused, exit 1 naming
    the line, as the same surrogate in a body already was (and as Kafka refuses it everywhere)."""
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"topic": "t", "value": "ok"}) + "\n" + json.dumps(line) + "\n")
    code, _, err = run(capsys, "write", tmp_path / "r", "--format", "rocketmq", "--input", lines)
    assert code == 1, err
    assert "line 2: expected" in err and "surrogates not allowed" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("edit, said", [
    ({"value": base64.b64encode(b"\x00").decode()}, "expected an end-transaction marker value of 6 bytes"),
    ({"value": None}, "expected an end-transaction marker value of 6 bytes"),
    ({"key": base64.b64encode(b"\x00\x00\x00\x07").decode()},
     "expected an ABORT or COMMIT marker as the control record of a batch with producer id 2000"),
    ({"key": base64.b64encode(b"\x00\x00\x00\x02").decode()},           # LEADER_CHANGE
     "expected an ABORT or COMMIT marker as the control record of a batch with producer id 2000"),
], ids=["short marker value", "null marker value", "unknown type", "leader change with a producer"])
def test_a_kafka_control_line_the_broker_cannot_read_is_not_appended(tmp_path, capsys, edit, said):
    """An edited ``dump --json`` line of a transaction marker whose record is no marker the broker
    reads was appended to an existing partition, then ``exit 1`` said "an end-transaction marker value
    of 6 bytes, found ..." (no "expected", no line) and the partition could no longer be dumped or
    verified; a control batch of a producer holding another type was written and called ok. Kafka 3.8
    ``UnifiedLog.loadProducersFromRecords`` gives each batch with a producer id to
    ``ProducerAppendInfo.append``, which reads a control batch's first record with
    ``EndTransactionMarker.deserialize``: it throws on both, and the partition does not load.
    Refused now before anything is written."""
    source = FIXTURES / "kafka" / "txn" / "topic-0"
    dumped = _dump(source)
    marker = next(i for i, obj in enumerate(dumped) if obj["batch"]["is_control"])
    before = tmp_path / "before.jsonl"
    before.write_text("".join(json.dumps(obj) + "\n" for obj in dumped[:marker]))
    target = tmp_path / "topic-0"
    assert run(capsys, "write", target, "--input", before)[0] == 0
    log = target / "00000000000000000000.log"
    size = log.stat().st_size
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**dumped[marker], **edit}) + "\n")
    code, _, err = run(capsys, "write", target, "--input", bad)
    assert code == 1
    assert said in err and f"at offset {dumped[marker]['offset']}" in err
    assert log.stat().st_size == size
    assert run(capsys, "verify", target)[0] == 0


def test_a_refused_dump_line_is_named_by_its_line(tmp_path, capsys):
    """A ``dump --json`` line refused while appending (an edited ``body_crc``, a batch's unknown
    compression) exited 1 naming only the input file, ``in.jsonl: expected ...``: in a file of a
    million lines, no way to find it. It is named now as a plain line is, ``in.jsonl:POS: line N:``
    (for a Kafka batch its first line), where a scratch store refuses it the same way."""
    rocketmq = _dump(FIXTURES / "rocketmq" / "basic" / "store")[:3]
    rocketmq[2] = {**rocketmq[2], "body_crc": rocketmq[2]["body_crc"] ^ 1}
    kafka = _dump(FIXTURES / "kafka" / "txn" / "topic-0")[:30]
    bad_batch = kafka[20]["batch"]["base_offset"]
    first_bad = next(i for i, obj in enumerate(kafka) if obj["batch"]["base_offset"] == bad_batch)
    kafka = [{**obj, "batch": {**obj["batch"], "compression": "bogus"}}
             if obj["batch"]["base_offset"] == bad_batch else obj for obj in kafka]
    for name, objs, bad in (("r", rocketmq, 2), ("topic-0", kafka, first_bad)):
        lines = tmp_path / f"{name}.jsonl"
        text = ["".join(json.dumps(obj) + "\n") for obj in objs]
        lines.write_text("".join(text))
        code, _, err = run(capsys, "write", tmp_path / "out" / name, "--input", lines)
        assert code == 1, err
        assert err.startswith(f"{lines}:{len(''.join(text[:bad]).encode())}: line {bad + 1}: expected "), err


def test_a_dump_without_its_markers_names_the_transactions_it_leaves_open(tmp_path, capsys):
    """``dump --json --isolation read_committed`` leaves out the COMMIT markers (a read_committed consumer is
    never given them), so writing it back restores committed transactional batches whose transactions
    never end: Kafka 3.8.0's ``ProducerStateManager`` holds them open, the last stable offset stays at the
    first (``UnifiedLog.lastStableOffset``), and read_committed readers of the copy stop there.  Written
    without a word (exit 0, 1 record of 4 readable); stderr now names each transaction the input left open."""
    source = tmp_path / "src"
    message = {"topic": "t", "partition": 0, "key": b"k", "value": b"v"}
    with segstore.open(str(source), "kafka", "a") as store:
        store.append_batch([message])                       # 0
        with store.transaction(7, 0) as txn:
            txn.append_batch([message, message])            # 1, 2; the COMMIT at 3
        store.append_batch([message])                       # 4
    code, dumped, _ = run(capsys, "dump", source, "--json", "--isolation", "read_committed")
    assert code == 0 and len(dumped.splitlines()) == 4
    (tmp_path / "in.jsonl").write_text(dumped)
    code, out, err = run(capsys, "write", tmp_path / "copy", "--input", tmp_path / "in.jsonl")
    assert (code, out) == (0, f"{tmp_path / 'copy'}: appended 4 messages\n")
    assert err == (f"segstore write: {tmp_path / 'copy'}: t-0: producer 7's transaction from offset 1 is "
                   "left open (its COMMIT or ABORT marker is not in the input, as in a dump of an open "
                   "transaction, or a dump --isolation read_committed, which leaves markers out): "
                   "read_committed readers stop at offset 1 until it ends (segstore transactions --abort)\n")
    with segstore.open(str(tmp_path / "copy")) as store:
        assert [r.offset for r in store.read("t", 0, isolation="read_committed")] == [0]
    code, full, _ = run(capsys, "dump", source, "--json")
    (tmp_path / "all.jsonl").write_text(full)
    code, out, err = run(capsys, "write", tmp_path / "whole", "--input", tmp_path / "all.jsonl")
    assert (code, err) == (0, "")                           # the markers came with it


def test_a_copy_after_delete_records_starts_where_the_source_does(tmp_path, capsys):
    """docs/cli.md, "JSON-lines input": a dump starts at the log start offset, as a consumer reads
    (Kafka 3.8 ``UnifiedLog.deleteOldSegments``/``maybeIncrementLogStartOffset`` leave the batch holding
    it in place, ``LocalLog.read`` serves from it), so a DeleteRecords inside a batch comes back as that
    batch's records from the log start only (other ``.log`` bytes).  Its lines carry the log start and
    the segment's base, so the copy's log starts where the source's does: the same segment names and a
    ``log-start-offset-checkpoint`` entry, as ``LogLoader.load`` reads the log start back
    (``max(checkpoint, first segment base)``).  It used to start at the trimmed batch's base offset,
    where offsets the source answers OFFSET_OUT_OF_RANGE for were readable."""
    source = tmp_path / "src" / "topic-0"
    source.mkdir(parents=True)
    for p in (FIXTURES / "kafka" / "uncompressed" / "topic-0").iterdir():
        (source / p.name).write_bytes(p.read_bytes())
    first = next(o["batch"] for o in _dump(source) if o["batch"]["last_offset"] > o["batch"]["base_offset"])
    inside = first["base_offset"] + 1
    assert first["base_offset"] > 0     # a batch before it: the segment is named below the trimmed batch
    assert run(capsys, "delete-records", source, "--before", str(inside))[0] == 0
    before = _dump(source)
    assert before[0]["offset"] == inside
    target = tmp_path / "dst" / "topic-0"
    done = pipe(source, target)
    assert done.returncode == 0, done.stderr
    with segstore.open(source) as old, segstore.open(target) as new:
        assert new.offset_range("topic", 0) == old.offset_range("topic", 0) == (inside, 300)
    assert {o["log_start_offset"] for o in before} == {inside}
    after = _dump(target)
    differ = {"crc", "size", "position"}
    assert [{**o, "batch": None} for o in after] == [{**o, "batch": None} for o in before]
    assert [{k: v for k, v in o["batch"].items() if k not in differ} for o in after] == \
        [{k: v for k, v in o["batch"].items() if k not in differ} for o in before]
    assert after[0]["batch"]["size"] < before[0]["batch"]["size"]      # the records below it are not there
    assert sorted(p.name for p in target.glob("*.log")) == sorted(p.name for p in source.glob("*.log"))
    assert (tmp_path / "dst" / "log-start-offset-checkpoint").read_text() == f"0\n1\ntopic 0 {inside}\n"
    for store in (source, target):      # below the log start: OFFSET_OUT_OF_RANGE from both
        code, out, err = run(capsys, "query", store, "--topic", "topic", "--partition", "0", "--offset",
                             str(first["base_offset"]))
        assert (code, out) == (1, ""), err
        assert f"from its first held, {inside} (the messages before it were deleted)" in err


def test_a_copy_of_a_compacted_partition_keeps_its_log_start_and_segment_names(tmp_path, capsys):
    """The log cleaner keeps a cleaned segment's base offset (Kafka 3.8 ``Cleaner.cleanSegments``:
    ``UnifiedLog.createNewCleanedSegment(..., segments.head.baseOffset)``), so a compacted partition's
    log starts below its first record, and a segment is named below its first batch, or holds none.  A
    copy starts its log there too (each line carries ``log_start_offset``, each batch its
    ``segment_base_offset``): a consumer at an offset between the log start and the first record reads
    on from that record in both, where the copy used to start at the first batch and answer
    OFFSET_OUT_OF_RANGE."""
    lines = tmp_path / "in.jsonl"
    keys = [f"k{i % 10}" if i < 50 else f"u{i}" for i in range(60)]
    lines.write_text("".join(json.dumps({"topic": "c", "partition": 0, "key": key, "value": f"v{i}",
                                         "timestamp": 1700000000000 + i}) + "\n"
                             for i, key in enumerate(keys)))
    config = ("--config", "segment.bytes=400", "--config", "cleanup.policy=compact")
    source = tmp_path / "src"
    assert run(capsys, "write", source, "--input", lines, "--format", "kafka", *config)[0] == 0
    assert run(capsys, "compact", source, *config, "--now-ms", "1800000000000")[0] == 0
    before = _dump(source)
    assert before[0]["batch"]["base_offset"] > 0      # the cleaned log starts below its first batch
    target = tmp_path / "dst"
    done = pipe(source, target)
    assert done.returncode == 0, done.stderr
    with segstore.open(source) as old, segstore.open(target) as new:
        assert new.offset_range("c", 0) == old.offset_range("c", 0) == (0, 60)
    outs = [run(capsys, "query", store, "--topic", "c", "--partition", "0", "--offset", "5")[:2]
            for store in (source, target)]
    assert outs[0] == outs[1] and outs[0][0] == 0
    assert before[0]["log_start_offset"] == 0
    assert any(o["batch"]["segment_base_offset"] < o["offset"] for o in before if o["batch"]["position"] == 0)
    assert _dump(target) == before
    assert _files(target, "c-0/*.log") == _files(source, "c-0/*.log")     # the segments holding records
    assert (target / "c-0" / "00000000000000000000.log").read_bytes() == b""


def test_a_dump_of_an_older_segstore_is_still_written(tmp_path, capsys):
    """The dump's ``log_start_offset`` and ``segment_base_offset`` are optional on input: lines of a dump
    without them (an older segstore's) are written as they were, the log starting at the first batch."""
    source = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    old = [{k: v for k, v in o.items() if k != "log_start_offset"} for o in _dump(source)[3:]]
    old = [{**o, "batch": {k: v for k, v in o["batch"].items() if k != "segment_base_offset"}} for o in old]
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps(o) + "\n" for o in old))
    code, _, err = run(capsys, "write", tmp_path / "logs" / "topic-0", "--input", lines)
    assert code == 0, err
    with segstore.open(tmp_path / "logs" / "topic-0") as store:
        assert store.offset_range("topic", 0) == (old[0]["batch"]["base_offset"], 300)


def _log_dir_with(tmp_path: Path, *fixtures: str) -> Path:
    """A log directory holding each Kafka fixture's ``topic-0`` as ``NAME-0``."""
    logs = tmp_path / "src"
    for name in fixtures:
        (logs / f"{name}-0").mkdir(parents=True)
        for p in (FIXTURES / "kafka" / name / "topic-0").iterdir():
            (logs / f"{name}-0" / p.name).write_bytes(p.read_bytes())
    return logs


@pytest.mark.parametrize("emptied", [
    ("delete-records", "--before", "-1"),
    ("retention", "--config", "retention.ms=1", "--now-ms", "1800000000000"),
])
def test_a_copy_holds_a_partition_with_no_record_left_at_its_offsets(tmp_path, capsys, emptied):
    """A partition whose every record DeleteRecords or retention removed (Kafka 3.8
    ``UnifiedLog.deleteOldSegments``: a log whose every segment goes rolls an empty one first,
    ``deleteSegments``; ``maybeIncrementLogStartOffset``) is still there: a consumer lists it with its
    log start and end offsets both N, and fetches from N.  Its dump has no record line, so the copy
    used to lack the partition (a consumer got UNKNOWN_TOPIC_OR_PARTITION); the dump now gives it a
    partition line, and the copy holds it at N: one empty segment named N, as ``LogLoader.load`` reads
    an empty log back (log start ``max(checkpoint, first segment base)``, log end the last segment's
    ``readNextOffset``, its base when empty)."""
    source = _log_dir_with(tmp_path, "uncompressed", "gzip")
    code, _, err = run(capsys, emptied[0], source, "--topic", "uncompressed", *emptied[1:])
    assert code == 0, err
    with segstore.open(source) as old:
        assert old.offset_range("uncompressed", 0) == (300, 300)
    lines = _dump(source)
    # the source's leader-epoch-checkpoint holds epoch 3 from 300, which LogLoader.load drops at the log
    # end (truncateFromEndAsyncFlush(nextOffset)): no epoch to carry
    assert {"topic": "uncompressed", "partition": 0, "log_start_offset": 300, "log_end_offset": 300,
            "high_watermark": 300, "leader_epochs": []} in lines
    target = tmp_path / "dst"
    done = pipe(source, target)
    assert done.returncode == 0, done.stderr
    with segstore.open(target) as new:
        assert new.offset_range("uncompressed", 0) == (300, 300)
        assert new.offset_range("gzip", 0) == (0, 300)
    assert sorted(p.name for p in (target / "uncompressed-0").glob("*.log")) == [f"{300:020d}.log"]
    assert _dump(target) == lines
    for store in (source, target):      # a consumer at the log end gets nothing, not an error
        assert run(capsys, "query", store, "--topic", "uncompressed", "--partition", "0", "--offset",
                   "300")[0] == 1


@pytest.mark.parametrize("records", [True, False])
def test_a_copy_ends_where_its_source_does_past_its_last_record(tmp_path, capsys, records):
    """A log whose last records are gone ends past them: its last segment is empty, named by the log end
    offset (Kafka 3.8 ``LogLoader.load`` takes the log end from the last segment, ``readNextOffset``: its
    base when empty; the cleaner keeps an emptied segment, ``Cleaner.cleanSegments``), and a consumer's
    ListOffsets(latest) answers that end.  The copy used to end at its last dumped batch (a partition
    without records: was missing); a partition line carries the log end, and the copy ends there too."""
    source = tmp_path / "src"
    with segstore.open(source, mode="a", format="kafka") as store:
        if records:
            store.append_batch([{"topic": "t", "partition": 0, "value": str(i)} for i in range(5)])
            store.partition_of("t", 0).end_at(40)
        else:
            part = store.partition_of("t", 0, create=True)
            part.start_at(10)
            part.end_at(40)     # every record cleaned away: the empty segments 10 and 40
    want = (0 if records else 10, 40)
    with segstore.open(source) as old:
        assert old.offset_range("t", 0) == want
    target = tmp_path / "dst"
    done = pipe(source, target)
    assert done.returncode == 0, done.stderr
    with segstore.open(target) as new:
        assert new.offset_range("t", 0) == want
    assert _dump(target) == _dump(source)
    assert sorted(p.name for p in (target / "t-0").glob("*.log")) == \
        sorted(p.name for p in (source / "t-0").glob("*.log"))
    # the copy takes records on from the log end, as the source does
    code, _, err = run(capsys, "write", target, "--input", _plain(tmp_path, {"topic": "t", "value": "n"}))
    assert code == 0, err
    with segstore.open(target) as new:
        assert [r.offset for r in new.read("t", 0, 40)] == [40]


def test_a_compacted_copy_keeps_the_leader_epochs_its_source_loads(tmp_path, capsys):
    """The cleaner leaves ``leader-epoch-checkpoint`` as it is (Kafka 3.8 ``LogCleaner`` rewrites
    segments only), so a compacted log's cache starts an epoch below its first batch that survived, and
    ``LogLoader.load`` keeps it (it truncates only from the log end and the log start).  A copy built
    from the batches alone started each epoch at its first surviving batch: a consumer's
    ListOffsets(earliest) got no leader epoch for the log start (``LeaderEpochFileCache.epochForOffset``
    finds no entry at or below it) where the source answers epoch 0, and OffsetsForLeaderEpoch
    (``LeaderEpochFileCache.endOffsetFor``) answered another end offset for an epoch whose first
    batches went.  The dump's partition line carries the source's epochs, and the copy's checkpoint is
    the source's."""
    source = _log_dir_with(tmp_path, "uncompressed")
    assert run(capsys, "compact", source, "--config", "cleanup.policy=compact")[0] == 0
    lines = _dump(source)
    assert lines[0]["batch"]["base_offset"] > 0        # the records at the start of epoch 0 are gone
    assert lines[-1] == {"topic": "uncompressed", "partition": 0, "log_start_offset": 0,
                         "log_end_offset": 300, "high_watermark": 300,
                         "leader_epochs": [[0, 0], [1, 123], [3, 238]]}
    target = tmp_path / "dst"
    done = pipe(source, target)
    assert done.returncode == 0, done.stderr
    checkpoint = "uncompressed-0/leader-epoch-checkpoint"
    assert (target / checkpoint).read_text() == (source / checkpoint).read_text() == \
        "0\n3\n0 0\n1 123\n3 238\n"
    with segstore.open(source) as old, segstore.open(target) as new:
        answers = [tuple(store.partition_of("uncompressed", 0).offset_for_time(at)
                         for at in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)) for store in (old, new)]
    assert answers[0] == answers[1]
    assert answers[0][0].leader_epoch == 0
    assert _dump(target) == lines


def test_a_partition_line_assigns_its_epochs_as_the_cache_does(tmp_path, capsys):
    """A partition line's leader epochs are assigned onto the partition's in turn, as Kafka 3.8
    ``LeaderEpochFileCache.assign`` does (``maybeTruncateNonMonotonicEntries``): an epoch the partition
    already starts later now starts at the line's offset, epochs it does not hold are added."""
    target = tmp_path / "logs"
    with segstore.open(target, mode="a", format="kafka") as store:
        store.partition_of("t", 0, create=True).epochs.merge([(2, 0)])
        store.append_batch([{"topic": "t", "partition": 0, "value": str(i)} for i in range(5)])
    code, _, err = run(capsys, "write", target, "--input", _plain(tmp_path, {
        "topic": "t", "partition": 0, "log_start_offset": 0, "log_end_offset": 9,
        "leader_epochs": [[1, 0], [2, 3], [4, 8]]}))
    assert code == 0, err
    assert (target / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n2 3\n4 8\n"


@pytest.mark.parametrize("directory", [False, True])
def test_a_copy_keeps_its_sources_high_watermark(tmp_path, capsys, directory):
    """A partition's high watermark (``replication-offset-checkpoint``) is where its consumers read up
    to (Kafka 3.8 ``UnifiedLog.read`` with ``FetchIsolation.HIGH_WATERMARK``; ListOffsets(latest)
    answers it), below the log end by what followers had not copied.  A copy's was its log end: its
    consumers read records the source's do not serve yet, and ``query --timestamp latest`` answered
    another offset.  The partition line carries it, and the copy checkpoints it (in the log directory
    written, or, for a partition directory, its parent's, as delete-records writes a log start)."""
    source = _log_dir_with(tmp_path, "uncompressed")
    (source / "replication-offset-checkpoint").write_text("0\n1\nuncompressed 0 200\n")
    target = tmp_path / "dst"
    if directory:
        source, target = source / "uncompressed-0", target / "uncompressed-0"
    done = pipe(source, target)
    assert done.returncode == 0, done.stderr
    with segstore.open(source) as old, segstore.open(target) as new:
        assert new.high_watermark("uncompressed", 0) == old.high_watermark("uncompressed", 0) == 200
    lines = _dump(source)
    assert lines[-1]["high_watermark"] == 200 and lines[-1]["log_end_offset"] == 300
    answers = [run(capsys, "query", store, "--topic", "uncompressed", "--timestamp", "latest")[::2]
               for store in (source, target)]
    assert answers[0] == answers[1] and "latest is offset 200 (the high watermark)" in answers[0][1]
    checkpoint = (target if not directory else target.parent) / "replication-offset-checkpoint"
    assert checkpoint.read_text() == "0\n1\nuncompressed 0 200\n"
    assert _dump(target) == lines


def _plain(tmp_path: Path, *objs: dict) -> Path:
    lines = tmp_path / "plain.jsonl"
    lines.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return lines


@pytest.mark.parametrize(("line", "said"), [
    ({"log_start_offset": 0, "log_end_offset": 40, "leader_epochs": [[1, 5], [1, 7]]},
     "expected a partition line's leader_epochs as [epoch, start offset] pairs"),
    ({"log_start_offset": 6, "log_end_offset": 40, "leader_epochs": [[1, 5]]}, "found [1, 5]"),
    ({"log_start_offset": 0, "log_end_offset": 40, "leader_epochs": [[1, 5], [2, 40]]}, "found [2, 40]"),
    ({"log_start_offset": 0, "log_end_offset": 40, "leader_epochs": [[2**31, 5]]}, "epochs up to 2147483647"),
    ({"log_start_offset": 0, "log_end_offset": 40, "leader_epochs": {"1": 5}}, 'found an object {"1": 5}'),
    ({"log_start_offset": 5, "log_end_offset": 40, "high_watermark": 4}, "expected a partition line's "
     "high_watermark from its log_start_offset 5 to its log_end_offset 40, found 4"),
    ({"log_start_offset": 5, "log_end_offset": 40, "high_watermark": 41}, "found 41"),
    ({"log_start_offset": 41, "log_end_offset": 40}, "expected a partition line's log_start_offset from 0 to "
                                                     "its log_end_offset 40, found 41"),
    ({"log_start_offset": 0, "log_end_offset": "40"}, "expected a partition line's log_end_offset as an "
                                                      "integer from 0 to 9223372036854775807"),
    # past a Java long: no checkpoint file could hold it (the store's would no longer read)
    ({"log_start_offset": 0, "log_end_offset": 2**63}, "found 9223372036854775808"),
    ({"log_start_offset": 0, "log_end_offset": 40, "offset": 3}, "found unknown field(s) ['offset']"),
    ({"log_end_offset": 40}, "found no ['log_start_offset']"),
])
def test_a_partition_line_that_cannot_be_is_refused(tmp_path, capsys, line, said):
    """A partition line whose log start lies past its log end, or whose fields are not a dump's, is
    refused (exit 1), nothing written."""
    target = tmp_path / "logs"
    code, _, err = run(capsys, "write", target, "--input", _plain(tmp_path, {"topic": "t", "partition": 0,
                                                                             **line}))
    assert code == 1
    assert said in err, err
    assert not target.exists()


def test_a_partition_line_below_the_log_end_is_refused(tmp_path, capsys):
    """A partition line ending before records the partition already holds cannot be its log end:
    refused, exit 1, the records kept."""
    target = tmp_path / "logs"
    assert run(capsys, "write", target, "--format", "kafka", "--input",
               _plain(tmp_path, *({"topic": "t", "value": str(i)} for i in range(3))))[0] == 0
    code, _, err = run(capsys, "write", target, "--input", _plain(tmp_path, {
        "topic": "t", "partition": 0, "log_start_offset": 0, "log_end_offset": 2}))
    assert code == 1
    assert "expected a log end offset at or past 3 (the log end offset of t-0), found 2" in err
    with segstore.open(target) as store:
        assert store.offset_range("t", 0) == (0, 3)


@pytest.mark.parametrize(("segment_base", "named"), [(100, 100), (60, 137)])
def test_a_dump_appended_after_other_records_names_its_segment_within_the_log(tmp_path, capsys, segment_base,
                                                                              named):
    """A batch that begins a segment in its source is rolled to a segment named by its
    ``segment_base_offset`` where that lies at or past the log end; below it (the log held other
    records there) by the batch's base offset, as before the field (Kafka names a segment at or past
    the log end: ``UnifiedLog.roll``'s ``max(expectedNextOffset, logEndOffset)``)."""
    objs = _dump(FIXTURES / "kafka" / "uncompressed" / "topic-0")
    head = [o for o in objs if o["offset"] < 73]
    tail = [{**o, "batch": {**o["batch"], "segment_base_offset": segment_base}} for o in objs
            if o["batch"]["segment_base_offset"] == 137]
    assert tail[0]["batch"]["position"] == 0 and tail[0]["batch"]["base_offset"] == 137
    target = tmp_path / "logs" / "topic-0"
    for name, part in (("head", head), ("tail", tail)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in part))
        code, _, err = run(capsys, "write", target, "--input", tmp_path / f"{name}.jsonl")
        assert code == 0, err
    assert sorted(p.name for p in target.glob("*.log")) == [f"{0:020d}.log", f"{named:020d}.log"]
    with segstore.open(target) as store:
        assert store.offset_range("topic", 0) == (0, 217)
        assert [r.offset for r in store.read("topic", 0, 73, 1)] == [137]


@pytest.mark.parametrize(("edit", "said"), [
    (lambda o: {**o, "log_start_offset": o["offset"] + 1}, "expected a log_start_offset from 0 to the line's "
                                                           "offset"),
    (lambda o: {**o, "log_start_offset": "0"}, "expected a log_start_offset from 0"),
    (lambda o: {**o, "batch": {**o["batch"], "segment_base_offset": o["batch"]["base_offset"] + 1}},
     "expected a batch segment_base_offset from 0 to the batch's base offset"),
    (lambda o: {**o, "batch": {**o["batch"], "segment_base_offset": -1}},
     "expected a batch segment_base_offset from 0"),
    (lambda o: {**o, "batch": {**o["batch"], "segment_base_offset": True}},
     "expected a batch segment_base_offset from 0"),
])
def test_a_dump_line_placing_its_log_impossibly_is_refused(tmp_path, capsys, edit, said):
    """A log start past a line's offset would hide that record, a segment named past its batch's base
    offset cannot hold it (Kafka's segment names its first offset or below): refused, exit 1, nothing
    written."""
    objs = _dump(FIXTURES / "kafka" / "uncompressed" / "topic-0")[:5]
    objs[0] = edit(objs[0])
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps(o) + "\n" for o in objs))
    code, _, err = run(capsys, "write", tmp_path / "logs" / "topic-0", "--input", lines)
    assert code == 1
    assert said in err, err
    assert not (tmp_path / "logs" / "topic-0").exists()


def _trimmed_rocketmq(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, list[str]]:
    """A copy of the basic RocketMQ fixture whose oldest commitlog files retention deleted, and its config."""
    source = tmp_path / "src"
    fixture = FIXTURES / "rocketmq" / "basic" / "store"
    for p in fixture.rglob("*"):
        if p.is_file():
            (source / p.relative_to(fixture)).parent.mkdir(parents=True, exist_ok=True)
            (source / p.relative_to(fixture)).write_bytes(p.read_bytes())
    config = _config_args(fixture.parent / "spec.json")
    assert run(capsys, "retention", source, *config, "--config", "fileReservedTime=1",
               "--now-ms", "2030-01-01T00:00:00Z")[0] == 0
    return source, config


def test_a_rocketmq_copy_of_a_trimmed_store_starts_where_the_source_does(tmp_path, capsys):
    """docs/cli.md, "JSON-lines input": a source whose oldest files ``deleteExpiredFiles`` removed starts
    its commitlog at a later file and each queue past 0 (RocketMQ 4.9.7 ``ConsumeQueue.correctMinOffset``,
    ``DefaultMessageStore.getMinOffsetInQueue``).  Its copy, given the source's file sizes, starts there
    too, as a slave's store starts at its master's (``MappedFileQueue.getLastMappedFile(startOffset)``
    names the first file ``startOffset - startOffset % mappedFileSize``; ``ConsumeQueue
    .putMessagePositionInfo`` starts a queue at its first message's queue offset, ``fillPreBlank``):
    the same dump (queue and physical offsets, msgIds), commitlog files and queue offset ranges.  It
    used to start at 0, its messages moved down, so a consumer's committed offset pointed elsewhere."""
    source, config = _trimmed_rocketmq(tmp_path, capsys)
    before = _dump(source)
    assert before[0]["physical_offset"] > 0
    target = tmp_path / "dst"
    done = pipe(source, target, *config)
    assert done.returncode == 0, done.stderr
    assert _dump(target) == before
    assert _files(target, "commitlog/*") == _files(source, "commitlog/*")
    with segstore.open(source, **dict(a.split("=") for a in config[1::2])) as old, \
            segstore.open(target) as new:
        queues = [(t, q) for t in old.topics() for q in old.partitions(t)]
        assert any(old.offset_range(t, q)[0] > 0 for t, q in queues)
        assert [new.offset_range(t, q) for t, q in queues] == [old.offset_range(t, q) for t, q in queues]
    assert run(capsys, "verify", target)[0] == 0
    topic, queue = next((o["topic"], o["queue_id"]) for o in before if o["queue_offset"] > 0)
    first = min(o["queue_offset"] for o in before if (o["topic"], o["queue_id"]) == (topic, queue))
    for store in (source, target):      # below the queue's first offset: none in both (OFFSET_TOO_SMALL)
        code, out, err = run(capsys, "query", store, "--topic", topic, "--queue", str(queue), "--offset",
                             str(first - 1))
        assert (code, out) == (1, ""), err


def test_a_rocketmq_copy_into_other_file_sizes_starts_at_0(tmp_path, capsys):
    """Without the source's ``mappedFileSizeCommitLog`` the file holding the first message is the copy's
    first (0 here, in a 1 GiB file): its queues then start at 0 too, as an empty broker store does
    (blank entries before a queue's first would read as messages in a commitlog starting at 0)."""
    source, _ = _trimmed_rocketmq(tmp_path, capsys)
    before = _dump(source)
    target = tmp_path / "dst"
    done = pipe(source, target)
    assert done.returncode == 0, done.stderr
    after = _dump(target)
    moved = {"physical_offset", "queue_offset", "msg_id"}
    assert [{k: v for k, v in o.items() if k not in moved} for o in after] == \
        [{k: v for k, v in o.items() if k not in moved} for o in before]
    assert after[0]["physical_offset"] == 0
    assert sorted(p.name for p in (target / "commitlog").iterdir())[0] == f"{0:020d}"


@pytest.mark.parametrize("edit", [{"physical_offset": -1}, {"physical_offset": "65536"},
                                  {"queue_offset": -3}, {"queue_offset": 1.5}])
def test_a_rocketmq_dump_line_placing_its_copy_impossibly_is_refused(tmp_path, capsys, edit):
    """Where a copy starts comes from its first line's offsets: one that is no offset is refused (exit
    1), nothing written."""
    objs = _dump(FIXTURES / "rocketmq" / "basic" / "store")[:3]
    objs[0] = {**objs[0], **edit}
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps(o) + "\n" for o in objs))
    code, _, err = run(capsys, "write", tmp_path / "out", "--input", lines)
    assert code == 1
    assert f"expected {next(iter(edit))} as an integer of at least 0" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("field", "value"), [("partition", [["a"]]), ("partition", {"a": 1}),
                                              ("topic", ["T"]), ("topic", {"a": 1})])
@pytest.mark.parametrize("existing", [False, True], ids=["new log dir", "log dir with the partition"])
def test_a_kafka_dump_line_whose_topic_or_partition_is_a_list_is_refused_naming_the_line(
        tmp_path, capsys, field, value, existing):
    """A ``dump --json`` line whose partition or topic is a list or an object ended in "TypeError:
    unhashable type" (a traceback) where the log directory looked the new partition up; exit 1 naming
    the line, as an int topic or a float partition is refused."""
    target = tmp_path / "logs"
    with segstore.open(target, format="kafka", mode="a") as store:
        store.append({"topic": "T", "partition": 0, "value": b"v"})
    code, out, _ = run(capsys, "dump", target, "--json")
    line = json.loads(out.splitlines()[0])
    line[field] = value
    if not existing:
        target = tmp_path / "new"
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "write", target, "--format", "kafka", "--input", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}:0: line 1: expected "), err
    assert "Traceback" not in err


@pytest.mark.parametrize("field", ["last_offset", "max_timestamp"])
def test_a_kafka_dump_line_whose_batch_number_is_past_its_width_is_refused_naming_the_line(tmp_path, capsys,
                                                                                         field):
    """A ``dump --json`` line whose batch's ``last_offset`` or ``max_timestamp`` is 2**64 ended in
    ``struct.error: 'q' format requires ...`` (a traceback) where the batch header was packed; exit 1
    naming the line, as a field of another kind is."""
    source = tmp_path / "logs"
    with segstore.open(source, format="kafka", mode="a") as store:
        store.append({"topic": "T", "partition": 0, "value": b"v", "timestamp": 5})
    line = json.loads(run(capsys, "dump", source, "--json")[1].splitlines()[0])
    line["batch"][field] = 2**64
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "write", tmp_path / "new", "--input", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}:0: line 1: expected a Kafka dump --json line's fields of their "
                          "kinds, "), err
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize(("field", "value", "said"), [
    ("topic", 65536, "found the number 65536"),
    ("topic", None, "found null"),
    ("topic", True, "found true"),
])
def test_a_topic_of_the_wrong_kind_is_shown_as_the_line_gave_it(tmp_path, capsys, fmt, field, value, said):
    """A JSON number where the topic's string goes is named as a number: it was ``found '65536'``
    (Kafka: ``repr`` of its ``repr``, so it read as the string "65536") or ``found 65536`` (RocketMQ)."""
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({field: value, "value": "x"}) + "\n")
    code, _, err = run(capsys, "write", tmp_path / "store", "--format", fmt, "--input", lines)
    assert code == 1
    assert err.startswith(f"{lines}:0: line 1: expected ")
    assert err.rstrip("\n").endswith(said), err


@pytest.mark.parametrize(("fields", "said"), [
    # was: found "unhashable type: 'list'" (a set lookup of the topic before it was validated)
    ({"topic": ["a"]}, 'expected a non-empty topic name, found an array ["a"]'),
    # was: found "'int' object is not iterable"
    ({"topic": "a", "keys": 5}, "expected keys as a string or an array of strings, found the number 5"),
])
def test_a_rocketmq_line_of_the_wrong_kind_says_what_it_found_not_pythons_words(tmp_path, capsys, fields,
                                                                                 said):
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({**fields, "body": "x"}) + "\n")
    code, _, err = run(capsys, "write", tmp_path / "store", "--format", "rocketmq", "--input", lines)
    assert code == 1
    assert err == f"{lines}:0: line 1: {said}\n", err


def test_a_kafka_partition_given_as_a_string_is_shown_quoted_once(tmp_path, capsys):
    """It was ``found "'3'"``: the ``repr`` of the ``repr``; then Python's quotes, ``'3'``; now JSON's."""
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "t", "partition": "3", "value": "x"}\n')
    code, _, err = run(capsys, "write", tmp_path / "store", "--format", "kafka", "--input", lines)
    assert code == 1
    assert err == f"{lines}:0: line 1: expected an integer partition, found \"3\"\n"


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("field", ["partition", "timestamp", "queue_id"])
@pytest.mark.parametrize("sign", ["", "-"])
def test_an_integer_of_thousands_of_digits_is_named_with_its_field(tmp_path, capsys, fmt, field, sign):
    """Past 4,300 digits ``json.loads`` raises Python's own limit, which the message passed on with its
    advice to call ``sys.set_int_max_str_digits()``: the number is named by its digits and field."""
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "t", "value": "x"}\n' f'{{"topic": "t", "{field}": {sign}{"9" * 5000}}}\n')
    code, _, err = run(capsys, "write", tmp_path / "store", "--format", fmt, "--input", lines)
    assert code == 1
    assert err == (f"{lines}:29: line 2: expected integers a field can hold (a Java long at most: 19 "
                   f"digits), found a number of 5000 digits at {field}\n")
    assert not (tmp_path / "store").exists()


def test_an_integer_of_thousands_of_digits_before_a_syntax_error_is_named(tmp_path, capsys):
    lines = tmp_path / "in.jsonl"
    lines.write_text(f'{{"topic": "t", "headers": [["k", {"1" * 4400}]], "x": }}\n')
    code, _, err = run(capsys, "write", tmp_path / "store", "--input", lines)
    assert code == 1
    assert err.endswith("found a number of 4400 digits\n"), err


@pytest.mark.parametrize("count", [1, 2])
def test_the_summary_counts_in_the_singular_for_one_message(tmp_path, capsys, count):
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"topic": "T", "body": f"m{i}"}) + "\n" for i in range(count)))
    code, out, err = run(capsys, "write", tmp_path / "s", "--input", lines)
    said = "1 message" if count == 1 else f"{count} messages"
    assert (code, out, err) == (0, f"{tmp_path / 's'}: appended {said}\n", "")


#: (line, format, the error after "line 1: "): a plain line's wrong JSON type, said in JSON's terms (the
#: append checkers' Python words, ``bytes, str or None`` and ``found dict``, are for Python callers).
JSON_TYPE_MISTAKES = [
    ({"topic": "T", "value": {"a": "b"}}, "kafka",
     'expected a value as a string or null, found an object {"a": "b"}'),
    ({"topic": "T", "value": {"a": "b"}}, "rocketmq",
     'expected a body as a string or null, found an object {"a": "b"}'),
    ({"topic": "T", "value": True}, "kafka", "expected a value as a string or null, found true"),
    ({"topic": "T", "value": "x", "key": [1, 2]}, "kafka",
     "expected a key as a string or null, found an array [1, 2]"),
    ({"topic": "T", "value": "x", "key": 5}, "rocketmq",
     "expected a key as a string or null, found the number 5"),
    ({"topic": "T", "value": "x", "headers": {"h": {"a": 1}}}, "kafka",
     'expected headers as an array of [name, value] pairs, found an object {"h": {"a": 1}}'),
    ({"topic": "T", "value": "x", "headers": ["hv"]}, "rocketmq",
     'expected header 0 as a [name, value] pair, found "hv"'),
    ({"topic": "T", "value": "x", "headers": [["h", {"a": 1}]]}, "kafka",
     'expected a header value as a string or null, found an object {"a": 1}'),
    ({"topic": "T", "value": "x", "headers": [["h", {"a": 1}]]}, "rocketmq",
     'expected a header value as a string, found an object {"a": 1}'),
    ({"topic": "T", "value": "x", "partition": "0"}, "kafka", 'expected an integer partition, found "0"'),
    ({"topic": "T", "value": "x", "partition": True}, "rocketmq",
     "expected partition as an integer, found true"),
    ({"topic": 5, "value": "x"}, "kafka", "expected a topic name (a string), found the number 5"),
    ({"topic": "T", "value": "x", "tags": 5}, "rocketmq", "expected tags as a string, found the number 5"),
    ({"topic": "T", "value": "x", "keys": 5}, "rocketmq",
     "expected keys as a string or an array of strings, found the number 5"),
    ({"topic": "T", "value": "x", "properties": {"a": 1}}, "rocketmq",
     "expected a property value as a string, found the number 1"),
    ({"topic": "T", "value": "x", "flag": "1"}, "rocketmq", 'expected flag as an integer, found "1"'),
]


@pytest.mark.parametrize(("line", "fmt", "said"), JSON_TYPE_MISTAKES,
                         ids=[f"{fmt}:{json.dumps(line)}" for line, fmt, _ in JSON_TYPE_MISTAKES])
def test_a_plain_lines_wrong_json_type_is_said_in_json_terms(tmp_path, capsys, line, fmt, said):
    """``write --input`` said ``found "{'a': 'b'}"`` and ``bytes, str or None`` of a JSON line (Python's
    reprs and types, which JSON has not): now the JSON text found and JSON's types."""
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "T", "value": "ok"}\n' + json.dumps(line) + "\n")
    code, out, err = run(capsys, "write", tmp_path / "s", "--format", fmt, "--input", lines)
    assert (code, out) == (1, "")
    assert err == f"{lines}:30: line 2: {said}\n"
    assert not (tmp_path / "s").exists()


def test_the_librarys_own_words_stay_for_python_callers(tmp_path):
    """The checkers' messages are the library's: a Python caller appending a dict value reads Python's
    types, as before."""
    from segstore.errors import InvalidMessageError

    with segstore.open(tmp_path / "s", format="kafka", mode="a") as store:
        with pytest.raises(InvalidMessageError, match=r"expected a value as bytes, str or None, found dict"):
            store.append({"topic": "T", "value": {"a": "b"}})
