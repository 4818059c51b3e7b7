"""Store paths and topic names at the edges: what a command may create where, named as the brokers load it.

- A new store inside a Kafka log directory: Kafka 3.8 ``LogManager.loadLogs`` passes every
  subdirectory of a log directory to ``UnifiedLog.parseTopicPartitionName``
  (``LocalLog.parseTopicPartitionName``), which throws a ``KafkaException`` for a name that is not
  ``TOPIC-PARTITION`` (``sub``, ``.x.tmp``): the broker fails to start on the log directory.
  ``segstore write LOGDIR/sub`` and ``convert SRC LOGDIR/sub`` made one there (exit 0), and ``verify
  LOGDIR`` then reported the very directory they made.  Only a Kafka partition directory (``TOPIC-N``)
  may be made in a log directory.
- A path holding a NUL byte: no file system takes one (the kernel's calls take C strings).
  ``segstore.open(mode="r")`` looked for it as the path without it (``os.path.exists`` is False) and
  said "no such file", ``mode="a"`` raised Python's bare ``ValueError: embedded null byte``, and the
  messages echoed the byte raw (a space on a terminal).  It is refused with a typed error before any
  call to the system, the byte shown escaped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import cli_run

import segstore
from segstore.errors import (
    ConfigError,
    ConversionOptionError,
    CorruptDataError,
    InvalidTopicError,
    WrongFormatError,
)


def _jsonl(path: Path, *objs: dict) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in objs))
    return path


@pytest.fixture()
def log_dir(tmp_path: Path) -> Path:
    lines = _jsonl(tmp_path / "k.jsonl", {"topic": "orders", "value": "v"})
    assert cli_run("write", tmp_path / "logs", "--format", "kafka", "--input", lines)[0] == 0
    return tmp_path / "logs"


@pytest.fixture()
def rocketmq_store(tmp_path: Path) -> Path:
    lines = _jsonl(tmp_path / "r.jsonl", {"topic": "Orders", "value": "v"})
    assert cli_run("write", tmp_path / "rmq", "--format", "rocketmq", "--input", lines)[0] == 0
    return tmp_path / "rmq"


@pytest.mark.parametrize("argv", [
    ["write", "{logs}/sub", "--format", "kafka", "--input", "{lines}"],
    ["write", "{logs}/sub", "--format", "rocketmq", "--input", "{lines}"],
    ["write", "{logs}/sub", "--input", "{lines}"],
    ["write", "{logs}/a/b", "--format", "kafka", "--input", "{lines}"],
    ["write", "{logs}/orders-7", "--format", "rocketmq", "--input", "{lines}"],
    ["convert", "{rmq}", "{logs}/imported", "--to", "kafka"],
    # a conversion writes a log directory: named like a partition, Kafka loads it as an empty one
    ["convert", "{rmq}", "{logs}/imported-0", "--to", "kafka"],
])
def test_a_new_store_inside_a_kafka_log_dir_is_refused(log_dir, rocketmq_store, tmp_path, argv):
    """LocalLog.parseTopicPartitionName / LogManager.loadLogs (Kafka 3.8): a directory in a log
    directory that is not a partition fails the whole log directory; nothing is made there."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    before = sorted(p.name for p in log_dir.iterdir())
    code, out, err = cli_run(*(a.format(logs=log_dir, lines=lines, rmq=rocketmq_store) for a in argv))
    assert (code, out) == (2, ""), err
    assert f"in {log_dir}, of the kafka store" in err
    assert "LocalLog.parseTopicPartitionName" in err
    assert sorted(p.name for p in log_dir.iterdir()) == before
    assert cli_run("verify", log_dir)[0] == 0


def test_a_partition_directory_may_still_be_written_into_a_log_dir(log_dir, tmp_path):
    """A ``TOPIC-N`` directory is what a log directory holds: a Kafka partition store may be made there."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    code, _, err = cli_run("write", log_dir / "T-0", "--format", "kafka", "--input", lines)
    assert code == 0, err
    assert cli_run("verify", log_dir)[0] == 0


def test_open_refuses_a_new_store_inside_a_kafka_log_dir(log_dir):
    with pytest.raises(WrongFormatError, match="of the kafka store"):
        segstore.open(log_dir / "sub", format="rocketmq", mode="a")
    assert not (log_dir / "sub").exists()


def test_a_store_inside_a_rocketmq_store_is_left_to_the_user(rocketmq_store, tmp_path):
    """RocketMQ 4.9.7 ``DefaultMessageStore.load`` reads only its own subdirectories (commitlog,
    consumequeue, index, config): another directory beside them breaks nothing."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    assert cli_run("write", rocketmq_store / "sub", "--format", "kafka", "--input", lines)[0] == 0
    assert cli_run("verify", rocketmq_store)[0] == 0


def test_a_store_beside_a_copied_partition_directory_is_no_store_inside_a_log_dir(tmp_path):
    """A directory a copied ``TOPIC-N`` sits in is no broker's log directory (it holds none of the
    checkpoints a broker writes there from its first start, ``LogManager``): stores may be made in it."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    assert cli_run("write", tmp_path / "work" / "T-0", "--format", "kafka", "--input", lines)[0] == 0
    work = tmp_path / "work"
    code, _, err = cli_run("convert", work / "T-0", work / "rmq", "--to", "rocketmq")
    assert code == 0, err


def test_two_directories_of_one_partition_are_refused_not_one_dropped(log_dir, tmp_path):
    """``orders-0`` and ``orders-00`` both parse as partition 0 (``LocalLog.parseTopicPartitionName``:
    ``Integer.parseInt``), and Kafka 3.8 ``LogManager.loadLog`` refuses the second (``Duplicate log
    directories for orders-0 are found in both ...``): the broker does not start.  segstore read the
    last one listed and dropped the other's records without a word (dump exit 0, verify "ok")."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "orders", "value": "other"})
    assert cli_run("write", tmp_path / "elsewhere", "--format", "kafka", "--input", lines)[0] == 0
    (tmp_path / "elsewhere" / "orders-0").rename(log_dir / "orders-00")
    for argv in (["dump", log_dir], ["verify", log_dir], ["info", log_dir]):
        code, out, err = cli_run(*argv)
        assert (code, out) == (1, ""), (argv, out, err)
        assert "orders-0" in err and "orders-00" in err and "LogManager.loadLog" in err
    with pytest.raises(CorruptDataError, match="expected one directory of partition orders-0"):
        segstore.open(log_dir, format="kafka")


def test_a_signed_partition_directory_counts_as_its_partition_for_duplicates(log_dir, tmp_path):
    """Kafka 3.8 ``LocalLog.parseTopicPartitionName`` reads ``orders-+0`` as partition 0 (Scala's
    ``toInt`` is ``Integer.parseInt``, which takes a leading ``+``), so ``LogManager.loadLog`` refuses
    ``orders-0`` beside it (``Duplicate log directories for orders-0``).  segstore (which does not read
    ``orders-+0``, docs/kafka.md) read ``orders-0`` alone, exit 0, in ``dump``/``info``; and ``write`` of a
    partition ``orders-+0`` stands for made ``orders-0`` beside it, a log directory the broker then
    refuses to start on.  Every command refuses the two now, and ``write`` refuses to make the second."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "orders", "value": "other"})
    assert cli_run("write", tmp_path / "elsewhere", "--format", "kafka", "--input", lines)[0] == 0
    (tmp_path / "elsewhere" / "orders-0").rename(log_dir / "orders-+0")
    for argv in (["dump", log_dir], ["verify", log_dir], ["info", log_dir],
                 ["retention", log_dir, "--dry-run"]):
        code, out, err = cli_run(*argv)
        assert (code, out) == (1, ""), (argv, out, err)
        assert "'orders-0' and 'orders-+0'" in err and "LogManager.loadLog" in err, argv
    (log_dir / "orders-0").rename(tmp_path / "moved")
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["orders-+0"]
    code, out, err = cli_run("write", log_dir, "--format", "kafka", "--input",
                             _jsonl(tmp_path / "n.jsonl", {"topic": "orders", "partition": 0, "value": "v"}))
    assert (code, out) == (1, "") and "found 'orders-+0', which Kafka loads as that partition" in err
    assert not (log_dir / "orders-0").exists()


def test_a_rocketmq_queue_is_read_from_the_directory_the_broker_reads(tmp_path):
    """RocketMQ 4.9.7 ``DefaultMessageStore.loadConsumeQueue`` takes ``Integer.parseInt`` of each queue
    directory's name, but ``ConsumeQueue``'s constructor opens ``consumequeue/TOPIC/`` + the queue id
    again (``storePath + File.separator + topic + File.separator + queueId``): a directory ``00`` beside
    ``0`` is never read.  segstore read the last listed, ``00``, for queue 0."""
    lines = _jsonl(tmp_path / "m.jsonl", *({"topic": "T1", "value": v} for v in "abc"))
    store = tmp_path / "rmq"
    assert cli_run("write", store, "--format", "rocketmq", "--input", lines)[0] == 0
    queue = store / "consumequeue" / "T1"
    (queue / "00").mkdir()
    data = bytearray((queue / "0" / "00000000000000000000").read_bytes())
    data[20:60] = bytes(40)         # a stale copy: one entry, then nothing
    (queue / "00" / "00000000000000000000").write_bytes(bytes(data))
    with segstore.open(store, format="rocketmq") as opened:
        assert opened.offset_range("T1", 0) == (0, 3)
        assert [bytes(r.body) for r in opened.read("T1", 0)] == [b"a", b"b", b"c"]
    code, out, err = cli_run("query", store, "--topic", "T1", "--queue", "0", "--offset", "2")
    assert code == 0 and out.startswith("T1/0@2 phy=188 "), err


def test_a_name_past_the_file_systems_limit_is_named_with_the_limit(tmp_path):
    """A 249-character topic (``Topic.MAX_NAME_LENGTH``, Kafka 3.8 ``Topic.validate`` takes it) of
    partition 2147483647 names a directory of 260 bytes, past the 255 a file system name holds: Kafka's
    ``LogManager.getOrCreateLog`` fails on ``Files.createDirectories`` (an IOException) and so does the
    write.  The error said only the OS's words (``PATH: File name too long``); it says what was expected
    and found, and nothing is left behind."""
    topic = "t" * 249
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": topic, "partition": 2147483647, "value": "v"})
    code, out, err = cli_run("write", tmp_path / "logs", "--format", "kafka", "--input", lines)
    assert (code, out) == (1, "")
    assert f"{topic}-2147483647: expected names of at most 255 bytes, found one of 260 bytes" in err
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("where", [".", "..", "link"])
def test_a_partition_directory_named_by_dot_or_a_link_is_read_as_its_partition(log_dir, monkeypatch, where):
    """A partition directory store takes its topic and partition from the directory's name
    (``LocalLog.parseTopicPartitionName``) and its log directory from the parent.  Named ``.`` (the
    working directory), ``..`` or by a link of another name, segstore took the name as written:
    ``expected a partition directory named TOPIC-PARTITION, found '.'`` (and ``..`` for the parent
    log directory); ``cd logs/orders-0 && segstore info .`` failed."""
    part = log_dir / "orders-0"
    if where == "..":
        (part / "sub").mkdir()
        monkeypatch.chdir(part / "sub")
    elif where == "link":
        (log_dir.parent / "link").symlink_to(part)
        monkeypatch.chdir(log_dir.parent)
    else:
        monkeypatch.chdir(part)
    code, out, err = cli_run("dump", where, "--json")
    assert code == 0, err
    assert [json.loads(line)["topic"] for line in out.splitlines()] == ["orders"]
    lines = _jsonl(log_dir.parent / "m.jsonl", {"topic": "orders", "value": "w"})
    code, out, err = cli_run("write", where, "--input", lines)
    assert code == 0, err
    with segstore.open(part, format="kafka") as store:
        assert store.offset_range("orders", 0) == (0, 2)
    assert sorted(p.name for p in log_dir.iterdir() if p.is_file()) == [
        "log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"]


@pytest.mark.parametrize("direction", ["to-kafka", "to-rocketmq"])
def test_a_topic_the_other_format_cannot_name_is_refused_naming_the_source(tmp_path, direction):
    """``convert``: a RocketMQ topic whose escaped Kafka name passes 249 characters (Kafka 3.8
    ``Topic.validate``; ``%`` becomes ``.25``), or a Kafka topic past RocketMQ 4.9.7's 127
    (``TopicValidator.validateTopic``), is refused (``InvalidTopicError``, exit 2) and nothing is made.
    The message named no path at all, and the whole 300-character name."""
    if direction == "to-kafka":
        fmt, to, topic = "rocketmq", "kafka", "%" * 100
    else:
        fmt, to, topic = "kafka", "rocketmq", "t." * 124 + "t"
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": topic, "value": "v"})
    src = tmp_path / "src"
    assert cli_run("write", src, "--format", fmt, "--input", lines)[0] == 0
    code, out, err = cli_run("convert", src, tmp_path / "dst", "--to", to)
    assert (code, out) == (2, "")
    assert err.startswith(f"{src}: expected "), err
    assert len(err) < 600, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl", "src"]


def test_a_file_named_like_a_queue_is_an_empty_queue_to_the_broker_not_an_error(tmp_path):
    """RocketMQ 4.9.7 ``loadConsumeQueue`` takes a *file* ``consumequeue/T2/0`` for queue 0 too
    (``Integer.parseInt`` of its name), and ``MappedFileQueue.load`` lists it (``listFiles()`` of a
    file is null) as a queue without files: the broker starts and serves the store.  Every segstore
    command failed on it (``expected a directory on the path, found a file in the way``, exit 1)."""
    lines = _jsonl(tmp_path / "m.jsonl", *({"topic": "T1", "value": v} for v in "abc"))
    store = tmp_path / "rmq"
    assert cli_run("write", store, "--format", "rocketmq", "--input", lines)[0] == 0
    (store / "consumequeue" / "T2").mkdir()
    (store / "consumequeue" / "T2" / "0").write_text("notes\n")
    code, out, err = cli_run("dump", store, "--json")
    assert code == 0, err
    assert [json.loads(line)["topic"] for line in out.splitlines()] == ["T1"] * 3
    code, _, err = cli_run("verify", store)
    assert (code, err) == (0, f"{store}: ok\n")


def test_convert_force_into_the_working_directory_named_dot(rocketmq_store, tmp_path, monkeypatch):
    """``cd out && segstore convert ../src . --to kafka --force``: ``.`` is an empty directory, which
    ``--force`` replaces (docs/cli.md); the install renamed ``.`` itself and failed with the OS's
    words (``.: Device or resource busy``, exit 1) after the whole conversion."""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    code, _, err = cli_run("convert", rocketmq_store, ".", "--to", "kafka", "--force")
    assert code == 0, err
    assert (out / "Orders-0").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "r.jsonl", "rmq"]


def test_a_topic_colliding_with_one_the_metadata_log_knows_is_refused(tmp_path):
    """Kafka 3.8 ``ReplicationControlManager.validateNewTopicNames`` checks a new topic against every
    topic of the cluster (``topicsWithCollisionChars``, replayed from the metadata log), not the
    partitions one broker holds: ``a_b`` collides with ``a.b`` though no ``a.b-N`` directory is here.
    segstore checked the local directories only and created ``a_b-0``."""
    from kafka_messages import partition, topic

    from segstore.records import Message

    logs = tmp_path / "logs"
    ident = "AAAAAAAAAAAAAAAAAAAAEQ"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("__cluster_metadata", value, timestamp=1)
                            for value in (topic("a.b", ident), partition(ident, 0, [2]))])
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "a_b", "value": "v"})
    code, out, err = cli_run("write", logs, "--input", lines)
    assert (code, out) == (1, "")
    assert "expected a topic that does not collide with existing topic 'a.b', found 'a_b'" in err
    assert not (logs / "a_b-0").exists()
    with segstore.open(logs, format="kafka", mode="a") as store, \
            pytest.raises(InvalidTopicError, match=r"collide with existing topic 'a\.b'"):
        store.append({"topic": "a_b", "value": b"v"})


def test_a_partition_directory_whose_name_is_no_utf8_is_no_partition(log_dir, tmp_path):
    """A directory ``t\\xff-0`` (bytes no UTF-8 text holds) in a log directory: Kafka's JVM lists it as
    ``t\\ufffd-0`` (``File.listFiles`` decodes the name, sun.jnu.encoding UTF-8) and opens that other,
    missing path, so it never reads the directory's records (``LocalLog.parseTopicPartitionName``
    parses the replaced name).  segstore loaded it as topic ``'t\\udcff'``, and the next write of the
    log directory died with a traceback writing ``recovery-point-offset-checkpoint``
    (UnicodeEncodeError).  It is no partition: verify names it, a write goes on."""
    import os
    import shutil

    bad = os.path.join(os.fsencode(log_dir), b"t\xff-0")
    shutil.copytree(os.fsencode(log_dir / "orders-0"), bad)
    with segstore.open(log_dir, format="kafka") as store:
        assert store.topics() == ["orders"]
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "orders", "value": "w"})
    code, _, err = cli_run("write", log_dir, "--input", lines)
    assert code == 0, err
    assert (log_dir / "recovery-point-offset-checkpoint").read_text().splitlines()[2:] == ["orders 0 2"]
    code, out, _ = cli_run("verify", log_dir)
    assert code == 1
    assert "expected partition directories named by UTF-8 text in a log directory, found b't\\xff-0'" in out


def test_partition_numbers_as_integer_parse_int_reads_them(log_dir):
    """``LocalLog.parseTopicPartitionName`` reads the partition with ``Integer.parseInt``: leading zeros
    of any count (``orders-00000000003``, 11 digits) and a ``+`` (``orders-+5``) are partitions Kafka
    loads.  verify said Kafka fails the log directory on the first (it allowed 10 digits at most), and
    said nothing of the second, whose records segstore does not read and Kafka serves as orders-5."""
    import shutil

    shutil.copytree(log_dir / "orders-0", log_dir / "orders-00000000003")
    code, out, _ = cli_run("verify", log_dir)
    assert code == 0, out
    shutil.copytree(log_dir / "orders-0", log_dir / "orders-+5")
    code, out, _ = cli_run("verify", log_dir)
    assert code == 1
    assert "Kafka loads it as partition 5 of topic 'orders'" in out


def test_a_partition_number_past_a_java_int_is_no_partition_to_any_command(log_dir):
    """``orders-99999999999``: ``Integer.parseInt`` refuses the number, so Kafka 3.8's
    ``LocalLog.parseTopicPartitionName`` throws and ``LogManager.loadLogs`` fails the log directory.
    verify named it, but info, dump and the library read it as partition 99999999999 of ``orders``."""
    import shutil

    shutil.copytree(log_dir / "orders-0", log_dir / "orders-99999999999")
    shutil.copytree(log_dir / "orders-0", log_dir / "orders-2147483647")    # the largest int: a partition
    with segstore.open(log_dir, format="kafka") as store:
        assert store.partitions("orders") == [0, 2147483647]
    code, out, _ = cli_run("info", log_dir, "--json")
    assert code == 0 and "99999999999" not in out, out
    code, out, _ = cli_run("verify", log_dir)
    assert code == 1 and "'orders-99999999999': Kafka's LogManager.loadLogs fails the log directory" in out
    code, _, err = cli_run("info", log_dir / "orders-99999999999")
    assert code == 2 and "of at most 2147483647 (Kafka reads it with Integer.parseInt)" in err


@pytest.mark.parametrize("where", ["commitlog/sub", "index/sub", "consumequeue/Orders/5",
                                   "consumequeue/Orders/0/x"])
def test_a_new_store_where_the_rocketmq_broker_loads_files_is_refused(rocketmq_store, tmp_path, where):
    """RocketMQ 4.9.7 ``MappedFileQueue.load`` takes every entry of ``commitlog/`` and of a queue
    directory (``consumequeue/T/N``: ``loadConsumeQueue`` makes one of any name ``Integer.parseInt``
    reads) as a mapped file and refuses to start on one of another length ("length not matched message
    store config value"); ``IndexService.load`` opens every entry of ``index/`` as an IndexFile.  A
    store written there made the broker (and segstore's verify) refuse the store it sits in."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    code, out, err = cli_run("write", rocketmq_store / where, "--format", "kafka", "--input", lines)
    assert (code, out) == (2, ""), err
    assert "of the rocketmq store" in err
    assert not (rocketmq_store / where).exists()
    assert cli_run("verify", rocketmq_store)[0] == 0


def test_a_new_store_in_a_rocketmq_topic_directory_under_another_name_is_left_alone(rocketmq_store, tmp_path):
    """``loadConsumeQueue`` skips a name ``Integer.parseInt`` refuses (``NumberFormatException``)."""
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    assert cli_run("write", rocketmq_store / "consumequeue" / "Orders" / "notes", "--input", lines)[0] == 0
    assert cli_run("verify", rocketmq_store)[0] == 0


@pytest.fixture()
def nul_system_calls(monkeypatch) -> list[tuple[str, tuple]]:
    """The calls to the system asked about a path holding a NUL byte (each recorded, then made)."""
    asked: list[tuple[str, tuple]] = []

    def watch(name: str) -> None:
        real = getattr(os, name)

        def call(*args, **kwargs):
            if any("\x00" in os.fsdecode(a) for a in args if isinstance(a, (str, bytes, os.PathLike))):
                asked.append((name, args))
            return real(*args, **kwargs)
        monkeypatch.setattr(os, name, call)

    for name in ("stat", "lstat", "open", "listdir", "scandir", "mkdir", "makedirs", "access", "rename",
                 "replace", "remove", "rmdir"):
        watch(name)
    return asked


NUL_PATH = "/tmp/store\x00name"
SHOWN = "/tmp/store\\x00name"


@pytest.mark.parametrize("given", [NUL_PATH, NUL_PATH.encode(), Path(NUL_PATH)], ids=["str", "bytes", "Path"])
@pytest.mark.parametrize("mode", ["r", "a"])
@pytest.mark.parametrize("format_name", [None, "rocketmq", "kafka"])
def test_a_store_path_with_a_nul_byte_is_refused_before_any_system_call(nul_system_calls, given, mode,
                                                                        format_name):
    with pytest.raises(ConfigError) as caught:
        segstore.open(given, format=format_name, mode=mode)
    assert str(caught.value) == (f"{SHOWN}: expected a store path without a NUL byte (no file system takes "
                                 "one), found one at character 10")
    assert "\x00" not in str(caught.value)
    assert nul_system_calls == []


def test_every_library_path_with_a_nul_byte_is_refused_and_shown_escaped(nul_system_calls, rocketmq_store):
    from segstore.convert import convert
    from segstore.spark.options import parse_read_options, parse_write_options

    config_file = r"^/tmp/store\\x00name: expected a broker config file's path without a NUL byte"
    with pytest.raises(ConfigError, match=config_file):
        segstore.config_file(NUL_PATH, "rocketmq")
    with pytest.raises(ConfigError, match=config_file):
        segstore.config_file_notes(NUL_PATH, "rocketmq", rocketmq_store)
    with pytest.raises(ConversionOptionError, match=r"^/tmp/store\\x00name: expected dst as a path without"):
        convert(rocketmq_store, NUL_PATH)
    with pytest.raises(ConversionOptionError, match=r"^/tmp/store\\x00name: expected src as a path without"):
        convert(NUL_PATH, rocketmq_store.parent / "out")
    # a Java string holds one: the Spark source's path option
    with pytest.raises(ConfigError, match=r"^/tmp/store\\x00name: expected a store path without a NUL byte"):
        parse_read_options({"path": NUL_PATH})
    with pytest.raises(ConfigError, match=r"^/tmp/store\\x00name: expected a store path without a NUL byte"):
        parse_write_options({"path": NUL_PATH})
    with pytest.raises(ConfigError, match=r"^/tmp/s\\x00: expected a stagingDir path without a NUL byte"):
        parse_write_options({"path": str(rocketmq_store), "stagingDir": "/tmp/s\x00"})
    assert nul_system_calls == []
    assert not (rocketmq_store.parent / "out").exists()


@pytest.mark.parametrize("argv", [
    ["verify", NUL_PATH], ["dump", NUL_PATH, "--json"], ["info", "--json", NUL_PATH],
    ["convert", "STORE", NUL_PATH, "--to", "kafka"], ["write", NUL_PATH, "--input", "LINES"],
    ["dump", "STORE", "--config-file", NUL_PATH],
], ids=["verify", "dump", "info", "convert-dst", "write", "config-file"])
def test_a_command_line_argument_with_a_nul_byte_is_a_usage_error_shown_escaped(
        nul_system_calls, rocketmq_store, tmp_path, argv):
    """No real command line holds one (execve takes C strings): only a caller of ``cli.main`` passes one.
    ``verify`` said ``/tmp/store name: expected an existing store directory, found no such file``."""
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "Orders", "value": "v"})
    argv = [{"STORE": str(rocketmq_store), "LINES": str(lines)}.get(arg, arg) for arg in argv]
    code, out, err = cli_run(*argv)
    assert (code, out) == (2, "")
    assert err == (f"segstore {argv[0]}: {SHOWN}: expected an argument without a NUL byte (no command line "
                   "holds one), found one at character 10\n")
    assert nul_system_calls == []
