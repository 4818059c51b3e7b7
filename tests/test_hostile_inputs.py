"""Hostile names and files a demanding user (or an attacker) hands the CLI and the library.

- A ``--topic`` whose bytes are not UTF-8 (``segstore dump --topic $'a\\xffb' STORE``: Python reads
  the argument as ``os.fsdecode`` does, a lone surrogate for the byte): ``info`` said the RocketMQ
  store held no such topic (exit 1), ``dump`` died with a ``UnicodeEncodeError`` traceback
  (``columnar.topic_is`` encoded the name to compare it with the stored bytes).  The broker reads a
  stored topic as ``new String(bytes, UTF_8)``, which never holds a lone surrogate: no message is of
  that topic, and ``dump`` says what the store holds, as for any other name.
- ``segstore dump LOGDIR/__cluster_metadata-0/*``, the shell's glob over a real KRaft metadata
  partition, met ``quorum-state`` and refused the whole command (exit 2, "expected a file of a known
  format"), dumping nothing; so for the other files a Kafka 3.8 broker writes in a log directory
  (``.lock``, ``.kafka_cleanshutdown``, a checkpoint's ``NAME.tmp``) and for the partial snapshot a
  crash leaves (``Snapshots.createTempFile``: ``OFFSET-EPOCH-<random digits>.checkpoint.part``).
  Each is now passed over with ``Ignoring unknown file X`` (exit 0), as kafka-dump-log does for
  every name whose suffix is none of its five.
- A KRaft snapshot named past a Java long or int (``99999999999999999999-0000000189.checkpoint``:
  Kafka 3.8 ``Snapshots.parse`` throws ``NumberFormatException`` on it, in ``kafka-dump-log`` and in
  ``KafkaMetadataLog.recoverSnapshots``, so the broker does not start): every command that opened the
  log directory (``info``, ``verify``, ``consumers``...) died with an ``OverflowError`` traceback from
  pyarrow, and ``dump FILE`` printed ``Snapshot end offset: 99999999999999999999`` (exit 0).  Now the
  name is a problem naming the file: ``verify`` and ``dump FILE`` exit 1, ``info`` reads the rest.
- ``segstore dump 99999999999999999999.timeindex`` (a segment file named past a Java long: the tool's
  ``toLong`` of the name throws, and ``verify`` of the partition names it): an ``OverflowError``
  traceback; the ``.log`` printed ``Log starting offset: 99999999999999999999`` and the ``.index``
  offsets no Kafka log holds (exit 0).  Each now exits 1 naming the file.
- ``segstore dump STORE --follow --topic '../x'`` (or ``'orders '``, a name pasted with a blank) waited
  for the topic forever, though its broker refuses every producer that names it (Kafka 3.8
  ``Topic.validate``, RocketMQ 4.9.7 ``TopicValidator.validateTopic``): no message ever comes.  Such a
  name is now refused at once (exit 1, as ``dump`` without ``--follow``), through the format's
  ``refuses_topic``; a valid name the store does not hold yet is still waited for.
- ``segstore dump logs/orders-0 --follow --topic ordres`` (a typo, on a Kafka partition directory,
  whose name fixes its one topic) waited forever for a topic that can never appear there.  It now
  exits 1 at once naming the path and its topic, through the format's ``fixed_topics`` (None for a
  log directory or a RocketMQ store, where the topic is still waited for).
- A checkout run on ``PYTHONPATH`` without ``pip install`` registers no format (the built-ins register
  through entry points): ``segstore info STORE`` said ``not a store of any known format (); pass
  --format``, and ``dump FILE`` ``expected a file of a known format ()``; both now say none is
  installed and how to install them.
- A checkpoint line whose number is no Java int or long (``leader-epoch-checkpoint`` ``99999999999 5``)
  was named without its position, where every other finding in the file has one; now ``path:pos``.
- ``segstore index build --index key --option key.index.entries=99999999999999999999`` (an option past
  what a file can be sized to) died with an ``OverflowError`` traceback from ``ftruncate``, and
  ``=9999999999`` made a 200 GB sparse IndexFile (exit 0).  Every integer layout option is a Java int
  in the broker config it mirrors: past one it is a usage error (exit 2) naming the option.
- ``segstore index build --index key --option key.index.headers=$'a\xffb'`` (huntB3): a header name of
  bytes that are not UTF-8 died with a ``UnicodeEncodeError`` traceback, and so did every later
  ``query --key``; now a usage error before anything is written.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, cli_run, copy_writable

import segstore
from segstore import registry

NOT_UTF8 = os.fsdecode(b"a\xffb")   # what argv holds for the bytes 61 FF 62
KAFKA_SEGMENT = FIXTURES / "kafka" / "txn" / "topic-0" / "00000000000000000054"
REAL_KRAFT = FIXTURES / "real" / "kraft-confluent-7.5.1"
SNAPSHOT = "00000000000000028869-0000000189.checkpoint"


@pytest.fixture()
def rocketmq_store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", mappedFileSizeCommitLog=8192,
                       mappedFileSizeConsumeQueue=600) as rmq:
        rmq.append_batch([{"topic": "Plain", "queue_id": 0, "body": b"b%d" % i} for i in range(3)])
    return path


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_topic_that_is_not_utf8_is_no_topic_of_a_rocketmq_dump(rocketmq_store, json_flag):
    code, out, err = cli_run("dump", *json_flag, "--topic", NOT_UTF8, rocketmq_store)
    assert (code, out) == (1, "")
    assert "Traceback" not in err
    assert f"{rocketmq_store}: expected a topic named 'a\\udcffb', found topics Plain" in err


def test_a_topic_that_is_not_utf8_selects_no_rocketmq_record(rocketmq_store):
    with segstore.open(rocketmq_store) as rmq:
        assert list(rmq.dump_json(topic=NOT_UTF8)) == []
        assert list(rmq.dump_text(topic=NOT_UTF8)) == []
        assert len(list(rmq.dump_json(topic="Plain"))) > 0


@pytest.fixture()
def kraft_logs(tmp_path: Path) -> Path:
    return copy_writable(REAL_KRAFT, tmp_path / "logs")


def test_every_file_of_a_kraft_metadata_partition_dumps_or_is_passed_over(kraft_logs):
    metadata = kraft_logs / "__cluster_metadata-0"
    partial = metadata / "00000000000000028869-0000000189-8437561923847561234.checkpoint.part"
    partial.write_bytes((metadata / SNAPSHOT).read_bytes())
    (metadata / "quorum-state.tmp").write_bytes((metadata / "quorum-state").read_bytes())
    (kraft_logs / "recovery-point-offset-checkpoint.tmp").write_text("0\n0\n")
    (kraft_logs / "bootstrap.checkpoint.tmp").write_bytes((kraft_logs / "bootstrap.checkpoint").read_bytes())
    passed_over = [metadata / "quorum-state", metadata / "quorum-state.tmp", partial,
                   kraft_logs / ".lock", kraft_logs / ".kafka_cleanshutdown",
                   kraft_logs / "recovery-point-offset-checkpoint.tmp",
                   kraft_logs / "bootstrap.checkpoint.tmp"]
    code, out, err = cli_run("dump", *sorted(metadata.iterdir()), *passed_over[3:])
    assert code == 0
    assert "Snapshot end offset: 28869, epoch: 189" in out
    for path in passed_over:
        assert f"Dumping {path}\n" in out
        assert f"Ignoring unknown file {path}\n" in err
    (kraft_logs / "notes.txt").write_text("hi")            # not a name Kafka writes: still refused
    code, _, err = cli_run("dump", kraft_logs / "notes.txt")
    assert code == 2 and "expected a file of a known format" in err


@pytest.mark.parametrize("name", ["99999999999999999999-0000000189.checkpoint",    # past a Java long
                                  "00000000000000028869-9999999999.checkpoint"])   # past a Java int
def test_a_kraft_snapshot_name_past_a_java_number_is_named_not_a_traceback(kraft_logs, name):
    metadata = kraft_logs / "__cluster_metadata-0"
    bad = metadata / name
    bad.write_bytes((metadata / SNAPSHOT).read_bytes())
    code, out, err = cli_run("dump", bad)
    assert code == 1 and out == f"Dumping {bad}\n"
    assert err.startswith(f"{bad}: expected a KRaft snapshot name of an end offset below 2**63 and an epoch "
                          "below 2**31 (Snapshots.parse), found end offset ")
    code, out, err = cli_run("verify", kraft_logs)
    assert code == 1 and "Traceback" not in err
    assert f"{bad}: the metadata log not read: expected a KRaft snapshot name" in out
    for argv, said in ((["info"], "topic=__consumer_offsets, partition=14"),
                       (["info", "--json"], '"__consumer_offsets"'), (["consumers"], "order-group")):
        code, out, err = cli_run(*argv, kraft_logs)
        assert code == 0, err
        assert said in out


@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex"])
def test_a_segment_file_named_past_a_java_long_is_named_not_dumped(tmp_path, suffix):
    part = tmp_path / "t-0"
    part.mkdir()
    for each in (".log", ".index", ".timeindex"):
        (part / f"99999999999999999999{each}").write_bytes(KAFKA_SEGMENT.with_suffix(each).read_bytes())
    named = part / f"99999999999999999999{suffix}"
    code, out, err = cli_run("dump", named)
    assert (code, out) == (1, f"Dumping {named}\n")
    assert err == (f"{named}: expected a segment file named by an offset below 2**63 (a Java long), "
                   "found 99999999999999999999\n")


@pytest.mark.parametrize("name", ["../x", "orders ", NOT_UTF8])
@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_follow_refuses_a_topic_no_producer_can_ever_send_to(rocketmq_store, kraft_logs, fmt, name):
    store = rocketmq_store if fmt == "rocketmq" else kraft_logs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "segstore.cli", "dump", str(store), "--follow", "--interval",
                           "0.05", "--topic", os.fsencode(name)], capture_output=True, env=env, timeout=60,
                          check=False)
    assert (done.returncode, done.stdout) == (1, b"")
    said = done.stderr.decode("utf-8", "backslashreplace")
    assert said.startswith(f"{store}: expected a topic named {name!r}, found topics ")
    assert "(no message is ever stored under that name: expected a topic of the characters" in said


@pytest.fixture()
def orders_partition(tmp_path: Path) -> Path:
    """``logs/orders-0``: a Kafka partition directory, whose topic its name fixes."""
    with segstore.open(tmp_path / "logs", format="kafka", mode="a") as logs:
        logs.append_batch([{"topic": "orders", "partition": 0, "value": b"v%d" % i} for i in range(3)])
    return tmp_path / "logs" / "orders-0"


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_follow_still_waits_for_a_valid_topic_the_store_does_not_hold_yet(rocketmq_store, orders_partition,
                                                                          fmt):
    store, held = (rocketmq_store, "Plain") if fmt == "rocketmq" else (orders_partition.parent, "orders")
    assert registry.get(fmt).fixed_topics(str(store)) is None     # a log dir: topics may be created
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "segstore.cli", "dump", str(store), "--follow",
                             "--interval", "0.05", "--topic", "Later"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, env=env)
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline().decode()
        assert said == f"segstore dump: {store}: waiting for topic 'Later' (topics {held} now)\n"
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_follow_refuses_a_topic_a_partition_directory_never_holds(orders_partition):
    assert registry.get("kafka").fixed_topics(str(orders_partition)) == {"orders"}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "segstore.cli", "dump", str(orders_partition), "--follow",
                           "--interval", "0.05", "--topic", "ordres"], capture_output=True, env=env,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr.decode()) == (
        1, b"", f"{orders_partition}: expected a topic named 'ordres', found topics orders "
                "(no message is ever stored under that name: its path fixes the topics it holds: orders)\n")


def test_follow_of_a_partition_directory_still_follows_its_own_topic(orders_partition):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "segstore.cli", "dump", str(orders_partition), "--follow",
                             "--json", "--interval", "0.05", "--topic", "orders"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        lines = [json.loads(proc.stdout.readline()) for _ in range(3)]
        assert [(line["topic"], line["offset"], line["value"]) for line in lines] == [
            ("orders", i, base64.b64encode(b"v%d" % i).decode()) for i in range(3)]
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_no_format_installed_says_so_not_an_empty_list(rocketmq_store, monkeypatch):
    monkeypatch.setattr(registry, "_entry_points", {})
    monkeypatch.setattr(registry, "_loaded", {})
    code, _, err = cli_run("info", rocketmq_store)
    assert code == 2
    assert err.endswith(f"{rocketmq_store}: not a store of any known format (none installed: is segstore "
                        "installed with `pip install -e .`?)\n")
    checkpoint = rocketmq_store / "checkpoint"
    code, _, err = cli_run("dump", checkpoint)
    assert code == 2
    assert err.endswith(f"{checkpoint}: expected a file of a known format (none installed: is segstore "
                        "installed with `pip install -e .`?), found 'checkpoint'\n")


@pytest.mark.parametrize(("name", "text", "said"), [
    ("leader-epoch-checkpoint", "0\n2\n0 0\n99999999999 5\n", "8: expected an integer epoch (a Java int)"),
    ("recovery-point-offset-checkpoint", "0\n1\nt 0 99999999999999999999\n",
     "4: expected an integer offset (a Java long)"),
])
def test_a_checkpoint_number_past_java_is_named_with_its_line(tmp_path, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    code, _, err = cli_run("dump", path)
    assert code == 1 and err.startswith(f"{path}:{said}, found '99999999999")


@pytest.mark.parametrize("option", ["key.index.entries=99999999999999999999", "key.index.slots=2147483648",
                                    "layout.interval.bytes=9999999999"])
def test_an_index_layout_option_past_a_java_int_is_a_usage_error(tmp_path, option):
    part = copy_writable(KAFKA_SEGMENT.parent, tmp_path / "t-0")
    code, _, err = cli_run("index", "build", "--index", "key", "--index", "offset", "--option", option, part)
    name, value = option.split("=")
    assert code == 2
    assert f"expected {name} of at most 2147483647 (a Java int, as the broker config it mirrors), found " \
           f"{value}" in err
    assert not (part / ".segstore").exists()


@pytest.mark.parametrize("names", ["a\udcffb", "trace,\ud800"])
def test_index_header_names_that_are_no_utf8_are_a_usage_error(tmp_path, names):
    """``index build --option key.index.headers=$'a\\xffb'`` (bytes that are not UTF-8, a lone surrogate in
    Python's argument) died with a ``UnicodeEncodeError`` traceback while indexing, after writing the
    index's state; every later ``query --key`` died the same way.  No header of either broker is named
    so (a Java String's UTF-8): refused before anything is written (exit 2), by the library too."""
    part = copy_writable(KAFKA_SEGMENT.parent, tmp_path / "t-0")
    code, _, err = cli_run("index", "build", "--index", "key", "--option", f"key.index.headers={names}", part)
    assert code == 2 and "Traceback" not in err
    assert "expected key.index.headers as header names of UTF-8 text, found " in err, err
    assert not (part / ".segstore").exists()
    with pytest.raises(segstore.errors.ConfigError, match="header names of UTF-8 text"):
        segstore.open(part, indexes=["key"], **{"key.index.headers": names.split(",")})
    assert not (part / ".segstore").exists()
