"""The right kind of error, naming the file (issue 28, item 11: "Wrong kind of error" and "Hostile
input"): exit 1 with ``path:pos`` for damaged data, exit 2 for the user's mistakes, the typed
segstore errors from the library, never ``ValueError``/``TypeError`` from deep inside.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import crc32c
import damage
import pytest
from conftest import FIXTURES

import segstore
from segstore import cli
from segstore.errors import CorruptDataError, InvalidMessageError, InvalidTopicError, WrongFormatError

BODY_POS = 88                     # a v1 message's body (MessageDecoder)
ATTRIBUTES = struct.calcsize(">qiibI")     # a RecordBatch's attributes (after the CRC)


def _cli(capsys, *argv: object) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    got = capsys.readouterr()
    return rc, got.out, got.err


@pytest.mark.parametrize("byte", [0x00, ord("/"), ord(" ")])
def test_convert_names_a_damaged_topic_byte_as_data(tmp_path, capsys, byte):
    """The first byte of a stored topic changed to one no topic holds: exit 2 ("expected a RocketMQ topic
    name ..."), as if the user had typed it; the broker never stores such a name, so it is damage at
    the message (exit 1, ``path:pos``), as verify and recover take it."""
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    victim = damage.dump_records(str(store))[1][3]
    body = base64.b64decode(victim["body"])
    first = store / "commitlog" / f"{0:020d}"
    raw = bytearray(first.read_bytes())
    raw[victim["physical_offset"] + BODY_POS + len(body) + 1] = byte       # after the topic length
    first.write_bytes(bytes(raw))
    rc, _, err = _cli(capsys, "convert", "--to", "kafka", store, tmp_path / "out")
    assert rc == 1
    assert f"{first}:{victim['physical_offset']}: expected a stored topic the broker accepts" in err


@pytest.fixture
def codec_6(tmp_path) -> Path:
    """The first batch of a Kafka log with codec id 6 in its attributes (CRC recomputed: the damage is
    the value, not the checksum)."""
    logdir = damage.make_pristine("kafka", "uncompressed", tmp_path / "copy")
    log = logdir / "topic-0" / f"{0:020d}.log"
    raw = bytearray(log.read_bytes())
    size = struct.unpack_from(">i", raw, 8)[0] + 12
    raw[ATTRIBUTES:ATTRIBUTES + 2] = struct.pack(">h", 6)
    raw[ATTRIBUTES - 4:ATTRIBUTES] = struct.pack(">I", crc32c.crc32c(bytes(raw[ATTRIBUTES:size])))
    log.write_bytes(bytes(raw))
    return logdir


@pytest.mark.parametrize("command", [["dump", "--json"], ["verify"], ["query", "--offset", "0"]])
def test_a_batch_of_compression_6_names_the_file(codec_6, capsys, command):
    """Kafka's ``CompressionType.forId`` throws on ids 5 to 7; the error named no file."""
    rc, out, err = _cli(capsys, *command, codec_6)
    log = codec_6 / "topic-0" / f"{0:020d}.log"
    expected = f"{log}:61: expected a compression codec id of 0 to 4 (none, gzip, snappy, lz4, zstd), found 6"
    assert rc == 1 and expected in out + err
    with segstore.open(str(codec_6)) as s, pytest.raises(CorruptDataError) as caught:
        list(s.scan())
    assert caught.value.path == str(log)


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_query_offset_minus_one_is_the_users_mistake_and_names_the_store(tmp_path, capsys, fmt):
    store = damage.make_pristine(fmt, "basic" if fmt == "rocketmq" else "uncompressed", tmp_path / "copy")
    where = ["--topic", "TopicA", "--queue", "0"] if fmt == "rocketmq" else []
    rc, out, err = _cli(capsys, "query", *where, "--offset", "-1", store)
    assert rc == 2 and out == ""
    assert f"{store}: expected an --offset of at least 0 (offsets start at 0), found -1" in err


@pytest.mark.parametrize("headers", [[("a", b"1", "extra")], 5, ["ab"], {"a": b"1"}, "ab"],
                         ids=["triple", "int", "string-pair", "dict", "string"])
def test_kafka_append_with_headers_that_are_not_pairs(tmp_path, headers):
    """``ValueError``/``TypeError`` escaped, and ``["ab"]`` was stored as the header ``a`` = ``b``."""
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as s, \
            pytest.raises(InvalidMessageError, match="expected header"):
        s.append({"topic": "t", "value": b"x", "headers": headers})
    assert not (tmp_path / "logs" / "t-0").exists()          # refused before anything was written


@pytest.mark.parametrize("partition", [2 ** 40, 2 ** 31, -1, "3"])
def test_kafka_partitions_are_int32(tmp_path, partition):
    """A partition of 2**40 was stored as ``t-1099511627776``; every later open of the log dir then
    failed on its checkpoint line (``Integer.parseInt``)."""
    logs = tmp_path / "logs"
    with segstore.open(str(logs), format="kafka", mode="a") as s, pytest.raises(InvalidTopicError):
        s.append({"topic": "t", "partition": partition, "value": b"x"})
    assert not [p for p in logs.iterdir() if p.is_dir()]
    with segstore.open(str(logs), format="kafka", mode="a") as s:
        assert s.append({"topic": "t", "partition": 2 ** 31 - 1, "value": b"x"}).partition == 2 ** 31 - 1
    with segstore.open(str(logs)) as s:
        assert [m.value for m in s.read("t", 2 ** 31 - 1)] == [b"x"]


# -- a refused name names what was meant ------------------------------------------------

@pytest.mark.parametrize(("name", "known", "meant"), [
    ("mappedFileSizeCommitlog", ["mappedFileSizeCommitLog", "maxMessageSize"], "mappedFileSizeCommitLog"),
    ("retention_ms", ["retention.ms", "retention.bytes"], "retention.ms"),        # separators
    ("retention.msec", ["retention.ms", "segment.ms"], "retention.ms"),           # a typo
    ("startingoffset", ["startingoffsets", "endingoffsets"], "startingoffsets"),
    ("zzz", ["retention.ms", "segment.ms"], None),                               # nothing alike
])
def test_did_you_mean_names_the_closest_known_name_or_nothing(name, known, meant):
    from segstore.errors import did_you_mean

    assert did_you_mean(name, known) == (f" (did you mean {meant!r}?)" if meant else "")


def test_a_config_name_typo_on_the_command_line_says_which_name_was_meant(capsys):
    rc, out, err = _cli(capsys, "info", FIXTURES / "rocketmq" / "basic" / "store",
                        "--config", "mappedFileSizeCommitlog=4096")
    assert rc == 2 and out == ""
    assert "found 'mappedFileSizeCommitlog' (did you mean 'mappedFileSizeCommitLog'?)" in err


@pytest.mark.parametrize(("config", "meant"), [({"retention.msec": "5"}, "retention.ms"),
                                                ({"segmentbytes": "1024"}, "segment.bytes")])
def test_a_kafka_topic_config_typo_says_which_name_was_meant(config, meant):
    from segstore_kafka.partition import KafkaConfig

    from segstore.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"\(did you mean '{meant}'\?\)"):
        KafkaConfig.from_mapping(config)


def test_a_spark_option_typo_says_which_option_was_meant():
    from segstore.errors import ConfigError
    from segstore.spark.options import parse_read_options, parse_write_options

    # named as docs/spark.md spells it
    meant = r"unknown option\(s\) startingoffset \(did you mean 'startingOffsets'\?\)"
    with pytest.raises(ConfigError, match=meant):
        parse_read_options({"path": "/s", "startingOffset": "earliest"})
    with pytest.raises(ConfigError, match=r"stagedir \(did you mean 'stagingDir'\?\)"):
        parse_write_options({"path": "/s", "stageDir": "/tmp"})


@pytest.mark.parametrize("fmt, other, source", [("kafka", "rocketmq", "rocketmq/basic/store"),
                                                 ("rocketmq", "kafka", "kafka/txn")])
@pytest.mark.parametrize("mode", ["r", "a"])
def test_opening_a_store_as_the_other_format_is_refused_and_writes_nothing(tmp_path, fmt, other, source,
                                                                          mode):
    """A Kafka writer would add partition directories beside a RocketMQ store's commitlog (and a RocketMQ
    one a commitlog into a Kafka log dir), which no command then opens without --format; a reader
    would find nothing.  The library refuses both as the CLI does."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(FIXTURES / source, store)
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    with pytest.raises(WrongFormatError, match=f"store: expected a {fmt} store, found a {other} store"):
        segstore.open(str(store), format=fmt, mode=mode)
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
    with segstore.open(str(store), format=other) as opened:     # still one format's store
        assert opened.topics()


def test_kafka_batch_header_damage_says_what_was_expected(tmp_path, capsys):
    """``path:pos: expected ..., found ...`` (segstore.errors) for the checks of Kafka 3.8.0
    ``FileLogInputStream.nextBatch``: a length below the smallest record (12 zero bytes over the first
    batch: Kafka's "Record size 0 is less than the minimum record overhead (14)"), and a length
    running past the file (a ``.log`` holding other data).  Before: "a batch length of at least 14,
    found 0" and "a 100012-byte batch, found 4096 bytes", without the "expected"."""
    with segstore.open(tmp_path / "k", format="kafka", mode="a") as store:
        for _ in range(3):
            store.append({"topic": "t", "value": b"x" * 100})
    log = tmp_path / "k" / "t-0" / f"{0:020d}.log"
    raw = bytearray(log.read_bytes())
    raw[:12] = bytes(12)
    log.write_bytes(bytes(raw))
    rc, _, err = _cli(capsys, "dump", tmp_path / "k")
    assert rc == 1 and f"{log}:0: expected a batch length of at least 14, found 0" in err
    log.write_bytes(bytes(8) + struct.pack(">i", 100_000) + b"x" * (4096 - 12))
    rc, _, err = _cli(capsys, "dump", log)
    assert rc == 1 and "expected a 100012-byte batch, found 4096 bytes" in err


_FILE_SIZE_LIMIT = """
import resource, sys
import segstore
import segstore_kafka.store, segstore_rocketmq.store
from segstore.errors import StorageFullError
# after the imports (and without bytecode written: PYTHONDONTWRITEBYTECODE): a limit set first would
# cut the .pyc files Python caches at 100 KiB
resource.setrlimit(resource.RLIMIT_FSIZE, (102400, 102400))
fmt, path = sys.argv[1:]
config = {"mappedFileSizeCommitLog": 262144} if fmt == "rocketmq" else {}
try:
    with segstore.open(path, format=fmt, mode="a", **config) as store:
        store.append({"topic": "T", "value": b"x"})
except StorageFullError as err:
    print(type(err).__name__, err)
"""


@pytest.mark.parametrize(("fmt", "file", "size"), [
    ("rocketmq", f"commitlog/{0:020d}", 262144),      # mappedFileSizeCommitLog, preallocated
    ("kafka", f"T-0/{0:020d}.index", 10485760),       # segment.index.bytes, preallocated
])
def test_a_file_past_the_file_size_limit_is_a_full_store_naming_the_limit(tmp_path, fmt, file, size):
    """EFBIG (``ulimit -f``, or the file system's largest file) is a full store as ENOSPC is: a typed
    ``StorageFullError`` saying what room was expected and which limit was found.  Before: the bare
    ``commitlog/00000000000000000000: File too large`` of a ``StorageIOError``."""
    import subprocess
    import sys

    from conftest import ROOT

    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'formats'}", "PATH": "/usr/bin:/bin",
           "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", _FILE_SIZE_LIMIT, fmt, str(tmp_path / "s")],
                          capture_output=True, text=True, env=env, timeout=120, check=True)
    assert done.stdout.strip() == (
        f"StorageFullError {tmp_path / 's' / file}: expected room for {size} bytes, found the process's "
        "file size limit of 102400 bytes (ulimit -f) (File too large)"), done.stderr
