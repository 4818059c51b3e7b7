"""Bad input through Spark meets the library's typed errors, their message the first line the user reads,
alike on both readers: a missing path, a file, the other format, an unknown option, a column the store
lacks, a damaged commitlog; a worker child that died while idle is never handed the next query, and one
killed in a read, or in a driver's request, fails saying so."""

from __future__ import annotations

import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from spark_support import READERS, reader, source, spark  # noqa: F401

import segstore
from segstore.errors import (
    ConfigError,
    CorruptDataError,
    FormatNotFoundError,
    InvalidTopicError,
    NotFoundError,
    WrongFormatError,
)

pytestmark = pytest.mark.spark

#: Small RocketMQ files: a 1 MiB commitlog file, 1,000 consume-queue entries, no IndexFile.
ROCKETMQ_CONFIG = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 20 * 1000,
                   "messageIndexEnable": "false"}
CONFIG_OPTION = ('{"mappedFileSizeCommitLog": 1048576, "mappedFileSizeConsumeQueue": 20000, '
                 '"messageIndexEnable": "false"}')
#: RocketMQ 4.9.7 CommitLog.checkMessageAndReturnSize: the fields before the body (total size, magic, body
#: CRC, queue id, flag, queue offset, physical offset, sys flag, born time, born host, store time, store
#: host, reconsume times, prepared transaction offset, body length), IPv4 hosts.
BODY_AT = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A Kafka log dir (t-0, five records) and a RocketMQ store (T/0, five messages), and a plain file."""
    base = tmp_path_factory.mktemp("bad-input")
    kafka = base / "kafka-logs"
    with segstore.open(str(kafka), "kafka", "a") as store:
        for i in range(5):
            store.append({"topic": "t", "partition": 0, "key": b"k", "value": b"v%d" % i})
    rocketmq = base / "rocketmq"
    with segstore.open(str(rocketmq), "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        for i in range(5):
            store.append({"topic": "T", "queue_id": 0, "body": b"body%d" % i})
    plain = base / "a-file"
    plain.write_bytes(b"not a store")
    return {"kafka": kafka, "rocketmq": rocketmq, "file": plain, "base": base}


def _first_line(err: BaseException) -> str:
    return str(err).split("\n", 1)[0]


def _library_error(path: Path, **config) -> Exception:
    """What the library raises opening ``path`` and reading every message."""
    with pytest.raises(segstore.errors.SegstoreError) as raised, segstore.open(str(path), **config) as store:
        for table in store.scan_arrow(["value"]):
            assert table is not None
    return raised.value


@pytest.mark.parametrize(("where", "options", "error", "message"), [
    ("nothing", {}, NotFoundError, "nothing: expected a store directory to read, found no such file"),
    ("file", {}, WrongFormatError, "not a store of any known format"),
    ("kafka", {"format": "rocketmq"}, WrongFormatError, "expected a rocketmq store, found a kafka store"),
    ("rocketmq", {"format": "kafka", "config": CONFIG_OPTION}, WrongFormatError,
     "expected a kafka store, found a rocketmq store"),
    ("kafka", {"format": "Kafka"}, FormatNotFoundError,
     "unknown format 'Kafka'; known formats: kafka, rocketmq (did you mean 'kafka'?)"),
    ("kafka", {"statingOffsets": "earliest"}, ConfigError,
     "unknown option(s) statingoffsets (did you mean 'startingOffsets'?)"),
    ("kafka", {"startingOffsets": '{"t": {"0": -5}}'}, ConfigError,
     "option startingOffsets: offsets are >= 0, -1 (latest) or -2 (earliest), found -5 for t/0"),
    ("kafka", {"minPartitions": "many"}, ConfigError,
     "option minPartitions must be an integer, found 'many'"),
])
def test_a_refused_read_raises_the_library_s_error_first(spark, reader, stores, where, options,  # noqa: F811
                                                          error, message):
    """Py4J raised a Py4JJavaError whose first line was ``An error occurred while calling o123.load.``,
    the library's message further down in Java's stack trace (the Python reader's in a Python traceback
    inside it); a user reads the library's class and message now, the same from both readers."""
    path = stores["base"] / "nothing" if where == "nothing" else stores[where]
    with pytest.raises(error) as raised:
        source(spark, reader).options(**options).load(str(path)).count()
    assert message in _first_line(raised.value)
    assert "Traceback" not in str(raised.value) and "\tat " not in str(raised.value)


def test_a_schema_naming_a_column_the_store_lacks_is_the_library_s_error(spark, reader, stores):  # noqa: F811
    with pytest.raises(ConfigError) as raised:
        source(spark, reader).schema("nosuch binary").load(str(stores["kafka"])).count()
    assert _first_line(raised.value).startswith("the schema names column 'nosuch', which a kafka store")


def _damaged(stores, name: str) -> Path:
    """A copy of the RocketMQ store with message 1's body changed (its body CRC no longer matches), torn in
    the middle of message 3 (zeros from there: a crash's sparse file), or its commitlog file cut there."""
    copy = stores["base"] / name
    if not copy.exists():
        shutil.copytree(stores["rocketmq"], copy)
        with segstore.open(str(copy), **ROCKETMQ_CONFIG) as store:
            messages = list(store.read("T", 0))
        (log,) = (copy / "commitlog").iterdir()
        middle = messages[3].physical_offset + 30
        with open(log, "r+b") as f:
            if name == "crc":
                f.seek(messages[1].physical_offset + BODY_AT)
                f.write(b"B")       # b"body1" -> b"Body1"
            elif name == "torn":
                f.seek(middle)
                f.write(bytes(messages[4].physical_offset + messages[4].size - middle))
        if name == "short":
            os.truncate(log, middle)
    return copy


@pytest.mark.parametrize("damage", ["crc", "torn", "short"])
def test_a_damaged_commitlog_is_the_same_library_error_from_both_readers(spark, stores, damage):  # noqa: F811
    """A changed body (its CRC), a message torn by a crash, a file cut short: a CorruptDataError naming the
    file and byte first, the same from a task (or the planning) of either reader; where the library's read
    of every message meets the damage first, its error."""
    path = _damaged(stores, damage)
    expected = _library_error(path, **ROCKETMQ_CONFIG)
    seen = []
    for name in READERS:
        with pytest.raises(CorruptDataError) as raised:
            source(spark, name).option("config", CONFIG_OPTION).load(str(path)).collect()
        seen.append(_first_line(raised.value))
    assert seen[0] == seen[1]
    # the commitlog's byte, or (torn: the commitlog ends before the queue's entry, read in queue order) the
    # entry's
    assert re.match(rf"{re.escape(str(path))}/(commitlog|consumequeue/T/0)/0+:\d+: expected ", seen[0])
    if damage != "torn":
        assert seen[0] == str(expected)


def _worker_children() -> list[int]:
    """The children of this test process's JVM's segstore fork servers (``python -m segstore.spark.worker``,
    started by the JVM, which this process started): not another test process's."""
    commands, parents = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                commands[int(entry)] = f.read()
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue

    def ours(pid: int) -> bool:
        for _ in range(4):
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    def worker(pid: int) -> bool:
        return b"segstore.spark.worker" in commands.get(pid, b"")

    servers = {pid for pid in commands if worker(pid) and not worker(parents.get(pid, 0)) and ours(pid)}
    return [pid for pid, parent in parents.items() if parent in servers]


def test_a_worker_child_killed_while_idle_is_not_handed_the_next_task(spark, stores):  # noqa: F811
    """The JVM keeps its connections to worker children for later tasks; one whose child had died while
    idle (the out-of-memory killer, an operator's kill) failed the next query that borrowed it: ``segstore's
    Python worker failed: Broken pipe`` from its planning, or a task's ``closed the connection``."""
    frame = source(spark, "jvm").load(str(stores["kafka"]))
    assert frame.count() == 5
    children = _worker_children()
    assert children, "the JVM keeps its worker children between queries"
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    assert frame.count() == 5
    assert sorted(r.value for r in frame.collect()) == [b"v%d" % i for i in range(5)]


def test_a_write_on_a_child_killed_while_idle_is_written_once(spark, tmp_path):  # noqa: F811
    """A write's begin and commit borrow idle connections too; one whose child died while idle was asked the
    write again on a new connection after its exchange failed, which for a commit whose child had died in
    the middle of it would append twice.  A write is never asked twice now: a reused connection is
    pinged first and replaced when its child is gone, so the write is whole and once."""
    path = tmp_path / "kafka-logs"
    frame = spark.createDataFrame([(b"a",), (b"b",)], "value binary")
    write = frame.write.format("segstore").options(writer="jvm", format="kafka", topic="t").mode("append")
    write.save(str(path))
    children = _worker_children()
    assert children, "the JVM keeps its worker children between requests"
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    write.save(str(path))
    with segstore.open(str(path), "kafka") as store:
        values = [v for batch in store.scan_arrow(["value"]) for v in batch.column(0).to_pylist()]
    assert sorted(values) == [b"a", b"a", b"b", b"b"]


def test_a_worker_child_killed_in_a_read_fails_the_task_saying_so(spark, tmp_path):  # noqa: F811
    """A worker child killed while a task reads from it (SIGKILL: the out-of-memory killer) failed the task
    with ``segstore worker closed the connection`` or ``Broken pipe``, no word of why; its server notes
    the signal (segstore/spark/worker.py note_exit) and the task's error says it."""
    import threading

    from pyspark.sql.functions import udf

    path = tmp_path / "kafka-logs"
    with segstore.open(str(path), "kafka", "a") as store:
        # values of 64 KiB: the rows Spark hands its Python UDF fill the pipe to it after a few, so the
        # task takes them from the reader as the UDF goes, not all at once
        store.append_batch([segstore.Message("t", b"%d" % i + bytes(64 << 10)) for i in range(400)])

    started = tmp_path / "started"

    @udf("int")
    def slowly(value):
        import time

        started.touch()      # the task is reading: its worker child holds the rest of the partition
        time.sleep(0.01)     # 400 rows: about 4 s of reading, batches of one row released one by one
        return len(value)

    def kill_when_reading():
        for _ in range(600):
            if started.exists():
                break
            threading.Event().wait(0.05)
        for pid in _worker_children():
            os.kill(pid, signal.SIGKILL)

    frame = source(spark, "jvm").options(maxRecordsPerBatch="1", minPartitions="1").load(str(path))
    killer = threading.Thread(target=kill_when_reading)
    killer.start()
    try:
        with pytest.raises(Exception, match=r"segstore's worker child \(pid \d+\) ended in the middle of "
                                            r"reading a partition: killed by signal 9 \(SIGKILL"):
            frame.select(slowly("value")).collect()
    finally:
        killer.join()
    assert frame.count() == 400       # the next query is served by new children


@pytest.mark.parametrize("kills", [1, 2], ids=["asked again", "killed twice"])
def test_a_worker_child_killed_in_a_driver_request_is_named_and_a_read_asked_again(spark, stores,  # noqa: F811
                                                                                    kills):
    """A worker child killed while it answers the driver's request (here the schema's, which opens the
    store) failed the query with a bare ``segstore's Python worker failed: segstore worker closed the
    connection``: the child's hello names it now (segstore/spark/worker.py, ``PythonWorkers.call``), and a
    request that only reads the store is asked once more, of a new child; a second death is named with
    both.  The store is a URL whose HTTP server holds a request until the test has killed the child
    asking it (the first ``kills`` requests), then answers 404."""
    import http.server
    import queue
    import threading

    held: queue.Queue[threading.Event] = queue.Queue()
    seen: list[str] = []
    lock = threading.Lock()

    class Holding(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            with lock:
                seen.append(self.path)
                hold = len(seen) <= kills
            if hold:
                release = threading.Event()
                held.put(release)
                release.wait(120)
            try:
                self.send_response(404)
                self.end_headers()
            except OSError:
                pass            # the child asking is gone

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Holding)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    killed: list[list[int]] = []

    def kill_when_asked():
        for _ in range(kills):
            try:
                release = held.get(timeout=120)
            except queue.Empty:
                return
            children = _worker_children()
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            killed.append(children)
            release.set()

    killer = threading.Thread(target=kill_when_asked)
    killer.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/store"
    try:
        if kills == 1:      # asked again of a new child, whose answer is the user's
            with pytest.raises(NotFoundError) as caught:
                source(spark, "jvm").load(url)
            assert _first_line(caught.value) == (f"{url}: expected a store directory to read, found no such "
                                                 "file or directory")
        else:
            said = (r"segstore's worker child \(pid \d+\) ended in the middle of the driver's schema "
                    r"request: killed by signal 9 \(SIGKILL: the kernel's out-of-memory killer, or a kill\); "
                    r"it was asked once more, of a new child, after child \d+ ended \(killed by signal 9 "
                    r"\(SIGKILL")
            with pytest.raises(Exception, match=said):
                source(spark, "jvm").load(url)
    finally:
        killer.join()
        server.shutdown()
    assert len(killed) == kills and all(killed)
    assert source(spark, "jvm").load(str(stores["kafka"])).count() == 5     # new children serve on


def test_an_unsupported_plan_is_carried_past_pyspark_s_no_partitions_fallback(stores, monkeypatch):
    """Spark 4.3's planning worker (plan_data_source_read) takes a NotImplementedError from a Python reader's
    ``partitions()`` for a source that does not split its reads and reads one empty partition: a store
    whose format lists no segments (UnsupportedOperationError, a NotImplementedError) read as no rows
    from the Python reader, where the JVM reader raised the error.  It is carried through now, and
    Python gets it back as the library's error."""
    import traceback

    from segstore.errors import UnsupportedOperationError
    from segstore.spark import raised
    from segstore.spark.datasource import SegstoreDataSource

    with segstore.open(str(stores["kafka"])) as store:
        kind = type(store)

    def unlisted(self, topic, partition):
        raise UnsupportedOperationError("kafka stores do not list their segments", self.path)

    monkeypatch.setattr(kind, "segment_infos", unlisted)
    source_ = SegstoreDataSource({"path": str(stores["kafka"])})
    with pytest.raises(raised.Carried) as carried:
        source_.reader(source_.schema()).partitions()
    assert not isinstance(carried.value, NotImplementedError)
    text = "".join(traceback.format_exception(carried.value))
    found = raised.from_traceback(text)
    assert type(found) is UnsupportedOperationError
    assert str(found) == f"{stores['kafka']}: kafka stores do not list their segments"


def _traceback_of(raise_it) -> str:
    import traceback

    try:
        raise_it()
    except Exception as err:
        text = "".join(traceback.format_exception(err))
        return f"[PYTHON_DATA_SOURCE_ERROR] Failed: {text}\n\tat x.y(Z.java)"
    raise AssertionError("raised nothing")


def test_a_traceback_is_the_library_s_error_only_where_it_ends_in_one():
    """segstore.spark.raised reads the error a Python traceback ends with: the library's, even raised while
    handling another; not one that ended in another exception (a bug there stays Spark's)."""
    from segstore.spark import raised

    def plain():
        raise CorruptDataError("expected a batch, found garbage", "t-0/0.log", 12)

    def during():
        try:
            {}["x"]
        except KeyError as err:
            raise NotFoundError("expected topic t, found none", "/s") from err

    def ended_in_another():
        try:
            plain()
        except CorruptDataError:
            raise ValueError("a bug while handling it") from None

    found = raised.from_traceback(_traceback_of(plain))
    assert type(found) is CorruptDataError and str(found) == "t-0/0.log:12: expected a batch, found garbage"
    found = raised.from_traceback(_traceback_of(during))
    assert type(found) is NotFoundError and str(found) == "/s: expected topic t, found none"
    assert raised.from_traceback(_traceback_of(ended_in_another)) is None
    assert raised.from_traceback("no traceback at all") is None


def test_a_stream_over_a_store_damaged_between_micro_batches_is_the_library_s_error(spark, tmp_path):  # noqa: F811
    """A micro-batch reading a batch whose CRC no longer matches fails the query with the library's
    CorruptDataError, file and byte first, from both readers (processAllAvailable raised Spark's
    StreamingQueryException, ``[STREAM_FAILED] Query [id = ...] terminated with exception: Job aborted``)."""
    seen = []
    for name in READERS:
        path = tmp_path / name
        with segstore.open(str(path), "kafka", "a") as store:
            store.append_batch([segstore.Message("t", b"a%d" % i) for i in range(3)])
        stream = spark.readStream.format("segstore").options(reader=name, startingOffsets="earliest")
        query = stream.load(str(path)).writeStream.format("memory").queryName(f"damaged_{name}").start()
        try:
            query.processAllAvailable()
            with segstore.open(str(path), "kafka", "a") as store:
                store.append_batch([segstore.Message("t", b"b%d" % i) for i in range(3)])
            log = path / "t-0" / "00000000000000000000.log"
            with open(log, "r+b") as f:
                f.seek(-3, os.SEEK_END)
                f.write(b"???")      # the second batch's last value: its CRC-32C no longer matches
            expected = _library_error(path)
            with pytest.raises(CorruptDataError) as raised:
                query.processAllAvailable()
            seen.append(_first_line(raised.value))
            assert seen[-1] == str(expected)
            assert str(expected).startswith(f"{log}:")
        finally:
            query.stop()


@pytest.mark.parametrize(("where", "options", "error", "message"), [
    ("file", {"topic": "t"}, WrongFormatError,
     "a-file: expected a directory to write a store in, found a file"),
    ("rocketmq", {"topic": "t", "format": "kafka"}, WrongFormatError,
     "rocketmq: expected a kafka store, found a rocketmq store"),
    ("kafka", {"topic": "t", "format": "kafak"}, FormatNotFoundError,
     "unknown format 'kafak'; known formats: kafka, rocketmq (did you mean 'kafka'?)"),
    ("base", {"topic": "t"}, WrongFormatError, "bad-input0: not a store of any known format"),
])
def test_a_write_to_where_no_store_can_go_is_refused_before_any_task(spark, stores, where, options,  # noqa: F811
                                                                     error, message):
    """A write to a file, to the other format's store, to a directory of other files, or in an unknown format:
    the library's error from either writer before any task runs (the commit refused it, after every task
    had staged its rows: a frame whose tasks fail shows which came first), nothing written."""
    from pyspark.sql.functions import udf

    @udf("binary")
    def task_ran():
        raise ValueError("a task ran")

    path = stores[where]
    before = sorted(os.listdir(path)) if path.is_dir() else None
    frame = spark.range(1).select(task_ran().alias("value"))
    for name in READERS:
        with pytest.raises(error) as raised:
            frame.write.format("segstore").option("writer", name).options(**options).mode("append") \
                .save(str(path))
        assert message in _first_line(raised.value)
    assert (sorted(os.listdir(path)) if path.is_dir() else None) == before


@pytest.mark.parametrize(("options", "message"), [
    ({"topic": "../../etc", "format": "kafka"},
     "expected a topic of the characters [a-zA-Z0-9._-], found '../../etc'"),
    ({"topic": "a/b"}, "expected a topic of the characters [%|a-zA-Z0-9_-], found 'a/b'"),
])
def test_a_write_of_a_topic_the_format_refuses_is_the_library_s_error(spark, tmp_path, options,  # noqa: F811
                                                                      message):
    """From either writer, and the new store is removed again."""
    frame = spark.createDataFrame([(b"x",)], "value binary")
    for name in READERS:
        with pytest.raises(InvalidTopicError) as raised:
            frame.write.format("segstore").option("writer", name).options(**options).mode("append") \
                .save(str(tmp_path / "new"))
        assert message in _first_line(raised.value)
    assert not (tmp_path / "new").exists()
