"""Dumps between two times (``segstore dump --begin/--end``, ``dump*(begin=, end=)``).

A window is each queue / partition's offsets from the first stored at or after ``begin`` to the first
stored after ``end`` (``Store.offsets_between``), what a consumer seeking by time reads: RocketMQ
``mqadmin printMsg -b -e`` (``searchOffset`` per queue, by store time), kcat ``-o s@T -o e@T`` (Kafka
``ListOffsets``, by record timestamp).  Checked against the offsets found record by record, and each
dump path against the whole dump cut to those offsets: C and pure Python, text and JSON, one and two
threads, both isolation levels, the command line's miss and usage errors.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from conftest import cli_run, kafka_log_dir
from segstore_kafka import columnar as kafka_columnar
from segstore_rocketmq import columnar as rocketmq_columnar

import segstore
from segstore.errors import ConfigError, CorruptDataError, TruncatedDataError

BASE = 1_700_000_000_000


def rocketmq_store(path: Path) -> Path:
    """Two topics, three queues each, store times rising 10 ms a message with ties (three messages
    share each time), in small commitlog files (messages cross file ends); a prepared transaction
    message (no queue entry) in the middle."""
    with segstore.open(path, format="rocketmq", mode="a", mappedFileSizeCommitLog=4096,
                       mappedFileSizeConsumeQueue=20 * 64, messageIndexEnable=False) as store:
        for i in range(120):
            store.append({"topic": "TopicA" if i % 4 else "TopicB", "queue_id": i % 3, "body": b"m%d" % i,
                          "tags": "even" if i % 2 == 0 else "odd", "store_timestamp": BASE + 10 * (i // 3)})
            if i == 60:
                store.append({"topic": "TopicA", "queue_id": 0, "body": b"prepared", "sys_flag": 0x4,
                              "store_timestamp": BASE + 200})
    return path


def kafka_store(path: Path) -> Path:
    """``conftest.kafka_log_dir``: two topics of two partitions in small segments, rising timestamps
    (one per round), then on a-0 an aborted transaction and records whose timestamps go back (5-7)."""
    return kafka_log_dir(path, 40, lambda j: [("h", b"x")])


def brute_windows(store, begin: int | None, end: int | None) -> dict[tuple[str, int], tuple[int, int]]:
    """Per partition, record by record in offset order: from the first offset whose time is at or
    after ``begin`` to the first whose time is after ``end`` (the log's ends where None)."""
    found = {}
    for topic in store.topics():
        for partition in store.partitions(topic):
            first, last = store.offset_range(topic, partition)
            times = list(times_of(store, topic, partition))
            start = next((o for o, t in times if begin is None or t >= begin), last)
            stop = last if end is None else next((o for o, t in times if t > end), last)
            if begin is None:
                start = first
            if start < max(start, stop):
                found[topic, partition] = (start, stop)
    return found


def times_of(store, topic: str, partition: int):
    """``(offset, time)`` of every record in offset order, the time its broker looks offsets up by."""
    if store.format == "rocketmq":
        for msg in store.read(topic, partition):
            yield msg.queue_offset, msg.store_timestamp
    else:
        for batch in store.partition_of(topic, partition).batches():
            for record in batch.records():
                yield record.offset, record.timestamp


def probe_times(store) -> list[int | None]:
    """Every time held, one either side of it, and none."""
    held = {t for topic in store.topics() for p in store.partitions(topic)
            for _, t in times_of(store, topic, p)}
    return [*sorted({t + d for t in held for d in (-1, 0, 1) if t + d >= 0}), None]


def made_store(fmt: str, tmp_path: Path) -> Path:
    return rocketmq_store(tmp_path / "rmq") if fmt == "rocketmq" else kafka_store(tmp_path / "kafka")


@pytest.fixture(params=["rocketmq", "kafka"])
def store_path(request, tmp_path) -> Path:
    return made_store(request.param, tmp_path)


def test_offsets_between_are_the_first_offsets_at_or_after_each_time(store_path):
    with segstore.open(store_path) as store:
        times = probe_times(store)
        for begin in times[::3]:
            for end in times[1::5]:
                got = store.time_windows(None, None, begin, end)
                assert got == brute_windows(store, begin, end), (begin, end)
        assert store.time_windows(None, None, None, None) is None
        topic = store.topics()[0]
        partition = store.partitions(topic)[0]
        first, last = store.offset_range(topic, partition)
        assert store.offsets_between(topic, partition) == (first, last)
        assert store.offsets_between(topic, partition, 2**62, None) == (last, last)    # every record older
        assert store.offsets_between(topic, partition, None, 2**63 - 1) == (first, last)
        with pytest.raises(ConfigError, match="at least 0"):
            store.offsets_between(topic, partition, -1, None)


def dump_key(store, line: bytes) -> tuple[str, int, int] | None:
    """A dump line's record: topic, partition, offset (None: a RocketMQ message no queue points at)."""
    obj = json.loads(line)
    if store.format == "rocketmq":
        if obj["sys_flag"] & 0xC in (0x4, 0xC):     # prepared / rolled back
            return None
        return obj["topic"], obj["queue_id"], obj["queue_offset"]
    return obj["topic"], obj["partition"], obj["offset"]


def windows_cases(store) -> list[tuple[int | None, int | None]]:
    times = [t for t in probe_times(store) if t is not None]
    middle = times[len(times) // 2]
    return [(times[0], times[-1]), (middle, None), (None, middle), (middle, middle), (middle + 1, middle + 1),
            (times[len(times) // 3], times[2 * len(times) // 3] + 1), (times[-1] + 5, None), (None, 0)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_json_dump_of_a_window_is_the_whole_dump_cut_to_its_offsets(store_path, threads, isolation):
    with segstore.open(store_path) as store:
        whole = b"".join(bytes(b) for b in store.dump_json(isolation=isolation)).splitlines(keepends=True)
        for begin, end in windows_cases(store):
            for topic, partition in ((None, None), (store.topics()[-1], None), (store.topics()[0], 1)):
                windows = store.time_windows(topic, partition, begin, end)
                held = {(t, p, o) for (t, p), (a, b) in windows.items() for o in range(a, b)}
                expected = [line for line in whole if dump_key(store, line) in held]
                got = b"".join(bytes(b) for b in store.dump_json(topic=topic, partition=partition,
                                                                  isolation=isolation, threads=threads,
                                                                  begin=begin, end=end))
                assert got == b"".join(expected), (begin, end, topic, partition)
        assert any(windows_cases(store)), "a window holds something"


def text_dump(store, **selection) -> bytes:
    return b"".join(bytes(b) for b in store.dump_text(**selection))


def reference_text(store, **selection) -> bytes:
    return "".join(line.text + "\n" for line in store.dump(**selection)).encode()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_text_dump_of_a_window_is_the_reference_loops(store_path, threads, isolation):
    """C text formatter against the Python reference, and the reference's message / record lines are
    the whole dump's lines of the window's offsets (Kafka: under their batch lines)."""
    record = re.compile(rb"^\s*\d+\s+(\S+)/(\d+)@(\d+)\s" if "rmq" in store_path.name
                        else rb"^\| offset: (\d+) ")
    with segstore.open(store_path) as store:
        for begin, end in windows_cases(store):
            for topic in (None, store.topics()[0]):
                selection = {"topic": topic, "isolation": isolation, "begin": begin, "end": end}
                expected = reference_text(store, **selection)
                assert text_dump(store, threads=threads, **selection) == expected, (begin, end, topic)
                windows = store.time_windows(topic, None, begin, end)
                held = sum(b - a for a, b in windows.values())
                lines = [m for m in map(record.match, expected.splitlines()) if m]
                if store.format == "rocketmq":
                    assert sorted((m[1].decode(), int(m[2]), int(m[3])) for m in lines) == sorted(
                        (t, p, o) for (t, p), (a, b) in windows.items() for o in range(a, b)), (begin, end)
                elif isolation == "read_uncommitted":   # read_committed leaves aborted records out
                    assert len(lines) == held, (begin, end, topic)
                if not windows:
                    assert expected == b""


def both_dumps(store, begin: int | None, end: int | None) -> tuple[bytes, bytes]:
    json_lines = b"".join(bytes(b) for b in store.dump_json(begin=begin, end=end))
    return json_lines, text_dump(store, begin=begin, end=end)


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_pure_python_window_dumps_equal_the_accelerated(tmp_path, monkeypatch, fmt):
    path = made_store(fmt, tmp_path)
    with segstore.open(path) as store:
        cases = windows_cases(store)
        accelerated = [both_dumps(store, b, e) for b, e in cases]
    monkeypatch.setattr(rocketmq_columnar if fmt == "rocketmq" else kafka_columnar, "_speedups", None)
    with segstore.open(path) as store:
        pure = [both_dumps(store, b, e) for b, e in cases]
    assert pure == accelerated
    assert any(json_lines for json_lines, _ in pure)


def test_kafka_window_inside_a_batch_shows_the_batch_line_over_the_window_records(tmp_path):
    path = tmp_path / "logs"
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "t", "partition": 0, "value": b"v%d" % i, "timestamp": BASE + i}
                            for i in range(10)])
    with segstore.open(path) as store:
        text = reference_text(store, begin=BASE + 3, end=BASE + 5).decode()
        assert text_dump(store, begin=BASE + 3, end=BASE + 5).decode() == text
    batch_lines = [line for line in text.splitlines() if line.startswith("baseOffset:")]
    assert len(batch_lines) == 1 and batch_lines[0].startswith("baseOffset: 0 lastOffset: 9")
    assert re.findall(r"\| offset: (\d+)", text) == ["3", "4", "5"]


def run(argv: list[str]) -> tuple[int, str, str]:
    return cli_run(*argv)


def test_cli_dump_between_two_times(tmp_path):
    path = rocketmq_store(tmp_path / "rmq")
    iso_begin, iso_end = "2023-11-14T22:13:20.100Z", "2023-11-14T22:13:20.200Z"   # BASE + 100, BASE + 200
    code, out, err = run(["dump", str(path), "--json", "--begin", iso_begin, "--end", iso_end])
    assert code == 0 and err == ""
    stored = sorted(json.loads(line)["store_timestamp"] for line in out.splitlines())
    assert stored[0] == BASE + 100 and stored[-1] == BASE + 200 and len(stored) == 33
    assert b"prepared" not in b"".join(segstore_bodies(out))                 # no queue entry: in no window
    code, text, _ = run(["dump", str(path), "--begin", str(BASE + 100), "--end", str(BASE + 200)])
    assert code == 0 and len(text.splitlines()) == 33
    # --tag: the tagged messages of each queue's window, queue by queue
    code, tagged, _ = run(["dump", str(path), "--begin", str(BASE + 100), "--end", str(BASE + 200),
                           "--tag", "even", "--json"])
    assert code == 0
    rows = [json.loads(line) for line in tagged.splitlines()]
    assert rows and all(r["tags"] == "even" for r in rows)
    assert all(BASE + 100 <= r["store_timestamp"] <= BASE + 200 for r in rows)
    assert len(rows) == sum(1 for line in out.splitlines() if json.loads(line)["tags"] == "even")


def segstore_bodies(json_lines: str) -> list[bytes]:
    return [base64.b64decode(json.loads(line)["body"]) for line in json_lines.splitlines()]


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_cli_window_that_holds_nothing_is_a_miss(tmp_path, fmt):
    path = made_store(fmt, tmp_path)
    code, out, err = run(["dump", str(path), "--begin", "2100-01-01"])
    assert (code, out) == (1, "")
    assert "no message stored from 2100-01-01T00:00:00.000Z (4102444800000)" in err
    # past int64 ms: no time either broker keeps (a usage error, named, since huntB3; it was a miss)
    code, out, err = run(["dump", str(path), "--begin", str(10**20), "--end", str(10**20)])
    assert (code, out) == (2, "") and "--begin: expected milliseconds since the epoch (a Java long) or an " \
                                      "ISO-8601 time, found a number of 21 digits" in err
    code, out, err = run(["dump", str(path), "--topic", "nope", "--begin", "0"])
    assert code == 1 and out == "" and "expected a topic named 'nope'" in err


@pytest.mark.parametrize("argv, words", [
    (["--begin", "5", "--end", "4"], "expected --begin at or before --end, found 5 > 4"),
    (["--begin", "-3"], "--begin: expected a time at or after the epoch, found -3 ms"),
    (["--end", "1", "--index"], "--begin/--end and --index do not go together"),
    (["--begin", "yesterday"], "expected milliseconds since the epoch or an ISO-8601 time"),
])
def test_cli_window_usage_errors(tmp_path, argv, words):
    path = rocketmq_store(tmp_path / "rmq")
    code, out, err = run(["dump", str(path), *argv])
    assert code == 2 and out == "" and words in err
    log = next((path / "commitlog").iterdir())
    code, out, err = run(["dump", str(log), "--begin", "1"])
    assert code == 2 and "--begin/--end" in err


def test_a_window_whose_first_entry_points_elsewhere_is_refused_where_read_refuses_it(tmp_path):
    """The RocketMQ walk starts at the window's first consume-queue entry: one that points at another
    message raises what a queue read raises (the commitlog place and both messages), never a walk
    from inside a message."""
    path = rocketmq_store(tmp_path / "rmq")
    with segstore.open(path) as store:
        start, _ = store.offsets_between("TopicA", 1, BASE + 100, None)
    cq = next((path / "consumequeue" / "TopicA" / "1").iterdir())
    data = bytearray(cq.read_bytes())
    entry = slice(20 * start, 20 * start + 12)      # the entry's commitlog offset and size ...
    data[entry] = data[entry.start + 20:entry.stop + 20]    # ... made the next message's
    cq.write_bytes(bytes(data))
    with segstore.open(path) as store:
        with pytest.raises(CorruptDataError, match=r"expected a TopicA/1 message .* found a TopicA/1 mess"):
            b"".join(bytes(b) for b in store.dump_json(topic="TopicA", partition=1, begin=BASE + 100))
        with pytest.raises(CorruptDataError, match="expected a TopicA/1 message"):
            list(store.read("TopicA", 1, start, 1))
    code, out, err = run(["dump", str(path), "--topic", "TopicA", "--begin", str(BASE + 100)])
    assert code == 1 and out == "" and "commitlog" in err



@pytest.mark.parametrize("accelerated", [True, False])
def test_a_kafka_window_ending_before_a_batch_still_being_written_reads_none_of_it(tmp_path, monkeypatch,
                                                                                    accelerated):
    """A live writer's last batch, half written: the whole dump stops at it with TruncatedDataError; a
    window ending before it never decodes it (text and JSON, C and Python), and the time lookups
    count only whole batches (``LogSegment.max_timestamp_so_far``)."""
    path = tmp_path / "logs"
    with segstore.open(path, format="kafka", mode="a") as store:
        for b in range(3):
            store.append_batch([{"topic": "t", "partition": 0, "value": b"v" * 50,
                                 "timestamp": BASE + 10 * b + i} for i in range(5)])
    log = next((path / "t-0").glob("*.log"))
    with log.open("r+b") as f:
        f.truncate(log.stat().st_size - 40)
    if not accelerated:
        monkeypatch.setattr(kafka_columnar, "_speedups", None)
    with segstore.open(path) as store:
        with pytest.raises(TruncatedDataError):
            both_dumps(store, None, None)
        json_lines, text = both_dumps(store, BASE + 5, BASE + 14)      # the second batch, offsets 5-9
        assert store.offsets_between("t", 0, BASE + 5, None) == (5, 10)     # the torn batch: offsets 10-14
        assert store.offsets_between("t", 0, BASE + 21, None) == (10, 10)
    assert [json.loads(line)["offset"] for line in json_lines.splitlines()] == [5, 6, 7, 8, 9]
    assert re.findall(rb"\| offset: (\d+)", text) == [b"5", b"6", b"7", b"8", b"9"]
