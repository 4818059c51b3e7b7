"""``segstore dump|query --isolation read_committed`` through the real command line (a subprocess).

Kafka: the broker-written ``txn`` fixture holds committed and aborted transactions; the
oracle (:func:`test_kafka_isolation._oracle`) comes from its ``spec.json`` and the broker's
own ``dump.jsonl``, not from the reader under test.  A read_committed consumer
(``CompletedFetch`` with ``UnifiedLog.collectAbortedTransactions``) is given neither the
aborted records nor the transaction markers.

RocketMQ: the broker-written ``basic`` store holds a prepared (sysFlag 0x4) and a
rolled-back (0xC) transaction message; ``CommitLogDispatcherBuildConsumeQueue.dispatch``
gives them no consume-queue entry, so no consumer is given them, while ``IndexService.buildIndex``
still indexes the prepared one by key.  read_committed leaves them out where a commitlog
walk or a key lookup would show them.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from conftest import FIXTURES
from test_cli import run_process
from test_kafka_isolation import PART, _oracle

import segstore

BASIC = FIXTURES / "rocketmq" / "basic" / "store"
PREPARED, ROLLBACK, TRANSACTION_MASK = 0x4, 0xC, 0xC


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _committed_offsets() -> tuple[list[int], list[int]]:
    every, aborted, control = _oracle()
    assert aborted and control
    return every, [o for o in every if o not in aborted and o not in control]


@pytest.mark.parametrize("flags", [[], ["--isolation", "read_uncommitted"]], ids=["default", "explicit"])
def test_kafka_dump_json_is_read_uncommitted_by_default(flags):
    every, _ = _committed_offsets()
    done = run_process("dump", PART, "--json", *flags)
    assert done.returncode == 0, done.stderr
    assert [obj["offset"] for obj in _json_lines(done.stdout)] == every


def test_kafka_dump_json_read_committed_hides_aborted_records_and_markers():
    _, committed = _committed_offsets()
    done = run_process("dump", PART, "--json", "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    dumped = _json_lines(done.stdout)
    assert [obj["offset"] for obj in dumped] == committed
    assert not any(obj["batch"]["is_control"] for obj in dumped)
    # the objects are those of the plain dump, only fewer
    every = {obj["offset"]: obj for obj in _json_lines(run_process("dump", PART, "--json").stdout)}
    assert dumped == [every[obj["offset"]] for obj in dumped]


def test_kafka_dump_text_read_committed_lists_only_committed_records():
    _, committed = _committed_offsets()
    done = run_process("dump", PART, "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    records = [int(line.split()[2]) for line in lines if line.startswith("| offset: ")]
    assert records == committed
    assert not [line for line in lines if "isControl: true" in line]
    plain = run_process("dump", PART).stdout
    assert "isControl: true" in plain and "endTxnMarker: ABORT" in plain


def test_kafka_query_offset_read_committed_starts_at_the_next_committed_record():
    every, committed = _committed_offsets()
    hidden = [o for o in every if o not in committed]
    start = hidden[0]
    args = ("query", PART, "--offset", start, "--count", 3, "--json")
    plain = run_process(*args)
    assert [obj["offset"] for obj in _json_lines(plain.stdout)] == [o for o in every if o >= start][:3]
    done = run_process(*args, "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    assert [obj["offset"] for obj in _json_lines(done.stdout)] == [o for o in committed if o >= start][:3]


def test_kafka_query_key_read_committed_leaves_out_aborted_hits():
    every, committed = _committed_offsets()
    with segstore.open(str(PART)) as store:
        keys = {r.offset: r.key for r in store.read("topic", 0)}
    # a key carried by an aborted record and by no committed one
    aborted_only = next(k for o, k in keys.items() if k and k.startswith(b"key-") and o not in committed
                        and all(keys[c] != k for c in committed))
    key = aborted_only.decode()
    plain = run_process("query", PART, "--key", key, "--json")
    assert plain.returncode == 0, plain.stderr
    hits = [o for o in every if keys[o] == aborted_only]
    assert [obj["offset"] for obj in _json_lines(plain.stdout)] == hits
    done = run_process("query", PART, "--key", key, "--json", "--isolation", "read_committed")
    assert (done.returncode, done.stdout) == (1, "")
    assert f"no record with key {key!r}" in done.stderr


def test_rocketmq_dump_read_committed_leaves_out_prepared_and_rolled_back_messages():
    plain = _json_lines(run_process("dump", BASIC, "--json").stdout)
    kinds = [obj["sys_flag"] & TRANSACTION_MASK for obj in plain]
    assert PREPARED in kinds and ROLLBACK in kinds
    done = run_process("dump", BASIC, "--json", "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    assert _json_lines(done.stdout) == [obj for obj, kind in zip(plain, kinds, strict=True)
                                        if kind not in (PREPARED, ROLLBACK)]
    text = run_process("dump", BASIC, "--isolation", "read_committed")
    assert text.returncode == 0 and len(text.stdout.splitlines()) == len(plain) - 2


def test_rocketmq_query_key_read_committed_leaves_out_a_prepared_message():
    plain = _json_lines(run_process("dump", BASIC, "--json").stdout)
    prepared = next(obj for obj in plain if obj["sys_flag"] & TRANSACTION_MASK == PREPARED)
    key = prepared["keys"][0]
    args = ("query", BASIC, "--topic", prepared["topic"], "--key", key, "--json")
    found = run_process(*args)
    assert found.returncode == 0, found.stderr
    assert [obj["physical_offset"] for obj in _json_lines(found.stdout)] == [prepared["physical_offset"]]
    done = run_process(*args, "--isolation", "read_committed")
    assert (done.returncode, done.stdout) == (1, "")


def test_an_unknown_isolation_level_is_a_usage_error():
    done = run_process("dump", PART, "--isolation", "committed")
    assert done.returncode == 2 and "invalid choice: 'committed'" in done.stderr
    assert "Traceback" not in done.stderr


# -- the other format's read options (the library) -----------------------------------------------

def test_rocketmq_reads_take_isolation_as_its_dump_json_does():
    """``isolation=`` on a RocketMQ ``read``/``scan``/``scan_arrow`` was a bare TypeError (an unexpected
    keyword), though Kafka's take it and RocketMQ's ``dump_json`` gives it a meaning: read_committed
    leaves out the prepared and rolled-back messages, which no consume queue points at
    (``CommitLogDispatcherBuildConsumeQueue.dispatch``).  The scans filter by numpy masks."""
    from segstore.errors import ConfigError

    with segstore.open(str(BASIC)) as store:
        shown = [json.loads(line) for block in store.dump_json(isolation="read_committed")
                 for line in bytes(block).decode().splitlines()]
        committed = [obj["physical_offset"] for obj in shown]
        every = pa.Table.from_batches(list(store.scan_arrow()))
        hidden = [int(f) & TRANSACTION_MASK in (PREPARED, ROLLBACK) for f in every["sysFlag"].to_pylist()]
        assert sum(hidden) == 2 and len(committed) == every.num_rows - 2
        for threads in (1, 2):
            table = pa.Table.from_batches(list(store.scan_arrow(isolation="read_committed", threads=threads)))
            assert table["physicalOffset"].to_pylist() == committed
            assert table == every.filter(pa.array([not h for h in hidden]))
            # a projection without the flags is filtered all the same
            values = pa.Table.from_batches(list(store.scan_arrow(["value"], isolation="read_committed",
                                                                 threads=threads)))
            assert values["value"] == table["value"]
        assert pa.Table.from_batches(list(store.scan_arrow(isolation="read_uncommitted"))) == every
        assert [m.physical_offset for m in store.scan(isolation="read_committed")] == committed
        assert [m.physical_offset for m in store.scan(isolation="read_uncommitted")] == \
            every["physicalOffset"].to_pylist()
        for topic in store.topics():
            for queue in store.partitions(topic):
                # the broker gives the hidden messages no entry: a queue reads the same either way
                plain = [m.physical_offset for m in store.read(topic, queue)]
                read = store.read(topic, queue, isolation="read_committed")
                assert [m.physical_offset for m in read] == plain
                arrow = store.scan_arrow(topic=topic, partition=queue, isolation="read_committed")
                assert [o for b in arrow for o in b["physicalOffset"].to_pylist()] == plain
        for bad in (lambda: store.read(store.topics()[0], 0, isolation="serializable"),
                    lambda: store.scan_arrow(isolation="serializable"),
                    lambda: store.scan(isolation="serializable")):
            with pytest.raises(ConfigError, match="isolation must be read_uncommitted or read_committed, "
                                                  "found 'serializable'"):
                next(iter(bad()))


def test_kafka_reads_take_decompress_and_change_nothing():
    """``decompress=`` (RocketMQ's: bodies as their producer compressed them, or as consumers read
    them) on a Kafka ``read``/``scan``/``scan_arrow`` was a bare TypeError.  A Kafka producer
    compresses whole batches, never one record's value, and the reads always decompress them:
    both values give what consumers read.  Anything but True or False is a ConfigError."""
    from segstore.errors import ConfigError

    gzip = FIXTURES / "kafka" / "gzip" / "topic-0"
    with segstore.open(str(gzip)) as store:
        plain = [(r.offset, r.value) for r in store.read("topic", 0)]
        assert plain[0][1].startswith(b"value-0-")      # out of a gzip batch, as consumers read it
        table = pa.Table.from_batches(list(store.scan_arrow()))
        for decompress in (True, False):
            assert [(r.offset, r.value) for r in store.read("topic", 0, decompress=decompress)] == plain
            assert [(r.offset, r.value) for r in store.scan(decompress=decompress)] == plain
            assert pa.Table.from_batches(list(store.scan_arrow(decompress=decompress))) == table
        for bad in (lambda: store.read("topic", 0, decompress="yes"),
                    lambda: store.scan(decompress="yes"),
                    lambda: store.scan_arrow(decompress=1)):
            with pytest.raises(ConfigError, match="expected decompress as True or False, found"):
                next(iter(bad()))


def test_kafka_dumps_take_decompress_and_change_nothing():
    """RocketMQ's ``dump``/``dump_text``/``dump_json`` take ``decompress=``; Kafka's were a bare TypeError
    (unexpected keyword) where its reads already took it: code written for both formats stopped there."""
    from segstore.errors import ConfigError

    with segstore.open(str(FIXTURES / "kafka" / "gzip" / "topic-0")) as store:
        plain = ([line.text for line in store.dump()], b"".join(store.dump_text()),
                 b"".join(store.dump_json()))
        assert plain[2].startswith(b'{"topic": "topic"') and plain[1]
        for decompress in (True, False):
            assert ([line.text for line in store.dump(decompress=decompress)],
                    b"".join(store.dump_text(decompress=decompress)),
                    b"".join(store.dump_json(decompress=decompress))) == plain
        for bad in (lambda: store.dump(decompress="yes"), lambda: store.dump_text(decompress=None),
                    lambda: store.dump_json(decompress=1)):
            with pytest.raises(ConfigError, match="expected decompress as True or False, found"):
                next(iter(bad()))


def test_latest_below_the_log_end_names_the_records_stored_there(tmp_path, capsys):
    """``query --timestamp latest`` answers the high watermark (the last stable offset with
    ``--isolation read_committed``), as Kafka 3.8.0 ``UnifiedLog.fetchOffsetByTimestamp`` with
    ``ListOffsetsRequest.LATEST_TIMESTAMP`` (``Partition.fetchOffsetForTimestamp``'s bound) does.  Below
    the log end, an open transaction's records and what follows them are stored there: stderr said
    "where no record is stored yet" of offset 1 while ``query --offset 1`` printed its record."""
    from segstore.cli import main

    logs = tmp_path / "logs"
    message = {"topic": "T", "partition": 0, "key": b"k", "value": b"v"}
    with segstore.open(str(logs), "kafka", "a") as store:
        store.append_batch([message])                       # 0
        store.transaction(7, 0).append_batch([message])     # 1: left open
        store.append_batch([message])                       # 2
    query = ["query", str(logs), "--topic", "T"]
    assert main([*query, "--timestamp", "latest", "--isolation", "read_committed"]) == 1
    assert capsys.readouterr() == ("", "segstore query: T-0: latest is offset 1 (the last stable offset), "
                                   "the records stored from there to the log end offset 3 not yet given "
                                   "to read_committed consumers\n")
    assert main([*query, "--offset", "1"]) == 0
    assert "| offset: 1 " in capsys.readouterr().out
    assert main([*query, "--timestamp", "latest"]) == 1
    assert capsys.readouterr() == ("", "segstore query: T-0: latest is offset 3 (the high watermark), "
                                   "where no record is stored yet\n")


def test_read_committed_is_refused_for_single_files(capsys):
    """``dump FILE --isolation read_committed`` dumped the segment whole, its ABORT/COMMIT markers and
    aborted records included, exit 0: the option was silently ignored.  What a read_committed consumer
    is given needs the partition (its ``.txnindex`` files and last stable offset, Kafka 3.8.0
    ``UnifiedLog.collectAbortedTransactions``), so it is refused with files as ``--topic`` and the other
    store flags are (exit 2); the default level dumps the file as before."""
    from segstore.cli import main

    segment = str(PART / "00000000000000000000.log")
    assert main(["dump", segment, "--isolation", "read_committed"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--isolation read_committed" in err and "apply to a store directory" in err
    assert main(["dump", segment, "--isolation", "read_uncommitted"]) == 0
    assert "isControl: true" in capsys.readouterr().out


def test_query_offset_read_committed_says_why_a_stored_record_is_not_given(tmp_path, capsys):
    """A read_committed fetch ends at the last stable offset (Kafka 3.8.0 ``UnifiedLog.read`` with
    ``FetchIsolation.TXN_COMMITTED``) and the consumer's ``CompletedFetch`` skips markers and aborted
    batches.  ``query --offset N --isolation read_committed`` of a record stored past the last stable
    offset said "no record at offset N", which ``query --offset N`` contradicted; now it names the
    last stable offset (or the markers and aborted records met before it)."""
    from segstore.cli import main

    logs = tmp_path / "logs"
    message = {"topic": "T", "partition": 0, "key": b"k", "value": b"v"}
    with segstore.open(str(logs), "kafka", "a") as store:
        store.append_batch([message])                       # 0
        with pytest.raises(RuntimeError), store.transaction(8, 0) as aborted:
            aborted.append_batch([message])                 # 1, its ABORT at 2
            raise RuntimeError
        store.transaction(7, 0).append_batch([message])     # 3: left open
        store.append_batch([message])                       # 4
    query = ["query", str(logs), "--topic", "T", "--isolation", "read_committed", "--offset"]
    assert main([*query, "4"]) == 1
    assert capsys.readouterr() == ("", "segstore query: T-0: offset 4 is at or past the last stable offset "
                                   "3, where a read_committed read stops (records are stored up to the log "
                                   "end offset 5; --isolation read_uncommitted shows them)\n")
    assert main([*query, "1"]) == 1
    assert capsys.readouterr().err == (
        "segstore query: T-0: from offset 1 to the last stable offset 3 a read_committed read finds only "
        "transaction markers and aborted records (records are stored up to the log end offset 5; "
        "--isolation read_uncommitted shows them)\n")
    assert main([*query, "5"]) == 1
    assert capsys.readouterr().err == ("segstore query: T/0: no record at offset 5, at or past its end: "
                                       "offsets 0 to 4 are held\n")
    assert main([*query, "0"]) == 0
