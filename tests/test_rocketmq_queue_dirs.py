"""Which entries under ``consumequeue/`` are queues: the broker's rule (RocketMQ 4.9.7
``DefaultMessageStore.loadConsumeQueue``).

A topic entry that is not a directory (``listFiles()`` null) is skipped, a queue entry whose name
``Integer.parseInt`` refuses is skipped (``NumberFormatException``: ``continue``): the broker starts and
serves every message beside such strays, so every reader does too.  A RocksDB consume-queue store
(RocketMQ 5.2+ ``RocksDBConsumeQueueStore``, in the same directory) is refused by name rather than read
as a file store without queues.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import cli_run
from segstore_rocketmq.dirnames import queue_dirs

import segstore
from segstore.errors import CorruptDataError, UnsupportedOperationError
from segstore.javatext import parse_int

CONFIG = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 16,
          "maxIndexNum": 64}


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "rb"
    with segstore.open(str(path), "rocketmq", "a", **CONFIG) as store:
        store.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"v" * 50, "keys": [f"k{i % 5}"]}
                            for i in range(60)])
    return path


def _dump(path) -> list[dict]:
    code, out, err = cli_run("dump", path, "--json")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("stray", ["README", "T/README", "T/abc/", "T/99999999999/", "T/1x/", "T/%/"])
def test_a_stray_entry_under_consumequeue_is_skipped_as_the_broker_skips_it(store_path, stray):
    """4.9.7 loadConsumeQueue: a file where a topic directory would be, a queue name Integer.parseInt
    refuses (a file or a directory; out of the int range too): skipped, every message still read."""
    before = _dump(store_path)
    target = store_path / "consumequeue" / stray.rstrip("/")
    if stray.endswith("/"):
        target.mkdir()
        (target / "00000000000000000000").write_bytes(bytes(200))
    else:
        target.write_text("x\n")
    assert _dump(store_path) == before
    for argv in (("info",), ("verify",), ("query", "--topic", "T", "--queue", "0", "--offset", "0"),
                 ("query", "--topic", "T", "--key", "k1")):
        code, _, err = cli_run(argv[0], store_path, *argv[1:])
        assert code == 0, (argv, err)
    with segstore.open(str(store_path), "rocketmq") as store:
        assert store.partitions("T") == [0, 1]
        assert store.verify() == []
    with segstore.open(str(store_path), "rocketmq", "a", **CONFIG) as store:    # a writer too
        store.append({"topic": "T", "queue_id": 0, "body": b"after"})
    assert len(_dump(store_path)) == 61


def test_a_topic_directory_named_by_bytes_that_are_not_utf8_is_named_once(store_path):
    """4.9.7 loadConsumeQueue lists ``consumequeue/`` through java.io.File, which decodes each name (a
    U+FFFD for a malformed sequence) and builds the topic's path from that text: ``T\\xff`` becomes a
    path with EF BF BD, no directory, so ``fileTopic.listFiles()`` is null and none of its queues loads.
    verify listed every entry of it as a stranger's (60 lines of ``found (T\\udcff, ...)``); it names
    the directory once, its bytes escaped, and the messages of T then lack their entries, as they do for
    the broker (a line per queue: the run of its 30 messages).  Readers hold no such topic; recover
    rebuilds T's queues and leaves the directory."""
    with segstore.open(str(store_path), "rocketmq", "a", **CONFIG) as store:   # a store with queues still
        store.append({"topic": "U", "queue_id": 0, "body": b"u"})
    root = store_path / "consumequeue"
    os.rename(bytes(root / "T"), bytes(root) + b"/T\xff")
    (root / "Fine").mkdir()
    os.rename(bytes(root / "Fine"), bytes(root) + b"/README\xfe")     # no queue in it: a stray
    code, out, _ = cli_run("verify", store_path)
    lines = out.splitlines()
    assert code == 1 and len(lines) == 1 + 2
    bad = os.fsdecode(bytes(root) + b"/T\xff")
    assert lines[0] == (f"{bad}: expected a topic directory name that is UTF-8 text, found the bytes "
                        "'T\\xff', holding queues 0, 1: the broker loads none of them (4.9.7 "
                        "DefaultMessageStore.loadConsumeQueue: java.io.File decodes the name, a U+FFFD for "
                        "each malformed sequence, and finds no directory of that text), nor does segstore; "
                        "rename it to the topic its entries are of, or remove it (segstore recover rebuilds "
                        "a topic's missing entries from the commitlog)")
    assert all("expected entries for the 30 messages at commitlog offsets" in line for line in lines[1:])
    assert not any("\udcff" in line for line in lines[1:])
    with segstore.open(str(store_path), "rocketmq") as store:
        assert store.topics() == ["U"]
    code, out, _ = cli_run("recover", store_path)
    assert code == 0 and "consumequeue T/0: rebuilt 30 entries" in out
    code, out, _ = cli_run("verify", store_path)
    assert (code, out.splitlines()[1:]) == (1, [])      # the directory alone, still there
    assert len(_dump(store_path)) == 61


def test_a_queue_the_broker_loads_and_segstore_cannot_hold_is_still_named(store_path):
    """Integer.parseInt("-1") is -1: the broker loads that queue; segstore has no queue -1 and says so."""
    (store_path / "consumequeue" / "T" / "-1").mkdir()
    said = "expected queue directories named by a queue id of at least 0, found '-1'"
    with pytest.raises(CorruptDataError, match=said):
        segstore.open(str(store_path), "rocketmq")


@pytest.mark.parametrize("name, value", [("0", 0), ("7", 7), ("007", 7), ("+3", 3), ("-1", -1),
                                         ("2147483647", 2147483647), ("2147483648", None),
                                         ("-2147483649", None),
                                         ("", None), ("+", None), ("1x", None), (" 1", None), ("1_0", None),
                                         ("README", None), ("\u0663", 3), ("\uff13", 3),
                                         ("\U0001d7d1", None), ("1\U0001d7ce", None)])
def test_parse_int_is_javas(name, value):
    """java.lang.Integer.parseInt: an optional sign and decimal digits (Character.digit: Unicode ones
    too), within an int; no blanks or underscores, which Python's int() takes.  Digits outside the
    BMP (MATHEMATICAL BOLD DIGIT THREE) are two UTF-16 chars in Java, each a surrogate that
    Character.digit(char, 10) refuses: a DELAY or queue directory "\U0001d7d1" is no int to the
    broker, where Python's str.isdecimal took it for 3."""
    assert parse_int(name) == value


def _rocksdb(path) -> None:
    """What RocketMQ 5.2+ storeType=defaultRocksDB leaves in consumequeue/: a RocksDB database."""
    root = path / "consumequeue"
    for child in sorted(root.rglob("*"), reverse=True):
        child.unlink() if child.is_file() else child.rmdir()
    (root / "CURRENT").write_text("MANIFEST-000005\n")
    for name, data in [("IDENTITY", b"id\n"), ("LOCK", b""), ("LOG", b""), ("MANIFEST-000005", bytes(300)),
                       ("OPTIONS-000007", b"[Version]\n"), ("000004.log", bytes(1000)),
                       ("000009.sst", bytes(2000))]:
        (root / name).write_bytes(data)


def test_a_rocksdb_consume_queue_store_is_refused_by_name(store_path):
    """RocketMQ 5.2.0 RocksDBConsumeQueueStore opens its database in consumequeue/
    (StorePathConfigHelper.getStorePathConsumeQueue): read as a file store it would seem to hold no
    queue; every command says what it found instead (a usage error, exit 2)."""
    _rocksdb(store_path)
    root = store_path / "consumequeue"
    assert queue_dirs(str(root)).rocksdb
    with pytest.raises(UnsupportedOperationError, match="found a RocksDB consume-queue store") as caught:
        segstore.open(str(store_path), "rocketmq")
    assert caught.value.path == str(root)
    for command in ("info", "verify", "dump", "recover"):
        code, out, err = cli_run(command, store_path)
        assert code == 2, (command, out, err)
        assert f"{root}: expected consume-queue directories (RocketMQ's file store), found a RocksDB" in err


def test_topics_named_like_rocksdb_files_are_topics(store_path):
    """CURRENT and MANIFEST-1 are valid topic names: as directories they are queues' topics."""
    with segstore.open(str(store_path), "rocketmq", "a", **CONFIG) as store:
        store.append_batch([{"topic": "CURRENT", "body": b"c"}, {"topic": "MANIFEST-1", "body": b"m"}])
    with segstore.open(str(store_path), "rocketmq") as store:
        assert sorted(store.topics()) == ["CURRENT", "MANIFEST-1", "T"]


@pytest.mark.parametrize("where", ["commitlog", "consumequeue/T/0"])
def test_a_file_name_mappedfile_cannot_parse_is_named_not_a_crash(store_path, where):
    """4.9.7 ``MappedFile.init``: ``Long.parseLong(file.getName())`` of every file ``MappedFileQueue.load``
    lists; twenty SUPERSCRIPT TWOs are digits to ``str.isdigit`` but no decimal digits, so Java throws
    (the broker does not start), and ``int()`` raised ValueError out of every command."""
    (store_path / where / ("\u00b2" * 20)).write_bytes(b"")
    with pytest.raises(CorruptDataError, match="expected file names of 20 digits"):
        segstore.open(str(store_path), "rocketmq", **CONFIG)
    code, out, err = cli_run("verify", store_path)
    assert code == 1 and "Traceback" not in err and "expected file names of 20 digits" in out + err


def test_a_file_name_is_the_offset_long_parselong_reads():
    """``MappedFile.init``'s ``Long.parseLong``: any BMP decimal digit, a sign; 20 characters as the broker
    names files (``UtilAll.offset2FileName``), not negative."""
    from segstore_rocketmq.consumequeue import name_offset

    assert name_offset("00000000000000262144") == 262144
    assert name_offset("\u0660" * 19 + "\u0665") == 5
    assert name_offset("+" + "0" * 19) == 0
    for name in ("\u00b2" * 20, "-" + "0" * 18 + "1", "0" * 19, "0" * 21, "\U0001d7ce" * 10, "0" * 19 + "x"):
        assert name_offset(name) is None, name
