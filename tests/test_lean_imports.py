"""Read paths import only what they use: no pandas behind pyarrow, nothing heavy behind ``--help``.

pyarrow imports pandas (when installed) the first time ``pa.array``, ``pa.scalar`` or
``Array.to_numpy`` runs in a process (its pandas bridge checks for categoricals and
initialises its NaT constants): 0.2 s a user waits for on a read that never needs
pandas.  numpy 2's plain ``np.unique`` imports ``numpy.ma`` (9-14 ms; ``arrays.unique`` does not).
Each check runs in a fresh interpreter, since the parent's modules are already loaded; ``sys.modules``
is the behaviour asserted, not time.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import segstore
from segstore import arrays
from segstore.columns import HEADERS, TIMESTAMP

ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SEGSTORE_PURE_PYTHON", None)   # the C path: the pure-Python column builders are the
    # reference the C ones are tested against, built with ``pa.array`` over lists
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "formats"), env.get("PYTHONPATH", "")])
    return env


def _run(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints a JSON object on its last line."""
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=_env(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _kafka(path: Path) -> Path:
    """Headers, null keys, two codecs, a transaction and its ABORT marker, two partitions."""
    with segstore.open(path, format="kafka", mode="a", **{"segment.bytes": 2000}) as store:
        for i in range(30):
            store.append_batch([{"topic": "t", "partition": i % 2, "key": b"k%d" % j if j % 3 else None,
                                 "value": b"v" * (i + j), "timestamp": 1_700_000_000_000 + i,
                                 "headers": [("h", b"x" * j)] if j % 2 else []} for j in range(1 + i % 4)])
        part = store.partition_of("t", 0)
        part.append_records([(b"t", b"txn", 5)], producer_id=9, producer_epoch=0, transactional=True,
                            compression="zstd")
        part.append_control("ABORT", producer_id=9, producer_epoch=0, coordinator_epoch=1, timestamp=6)
        part.append_records([(b"z", b"lz4", 7)] * 5, compression="lz4")
    return path


def _rocketmq(path: Path) -> Path:
    """Tags, keys, properties, two queues."""
    with segstore.open(path, format="rocketmq", mode="a") as store:
        for i in range(40):
            store.append({"topic": "t", "queue_id": i % 2, "body": b"x" * i, "tags": f"tag{i % 3}",
                          "keys": [f"k{i}", f"j{i}"], "properties": {"p": str(i)}})
    return path


_LIBRARY = """
import json, sys
import segstore
fmt, path = sys.argv[1], sys.argv[2]
with segstore.open(path, format=fmt) as store:
    rows = sum(batch.num_rows for batch in store.scan_arrow())
    if fmt == "kafka":
        rows += sum(batch.num_rows for batch in store.scan_arrow(isolation="read_committed"))
    read = sum(1 for partition in (0, 1) for _ in store.read("t", partition))
    problems = store.verify()
unused = ("pandas", "numpy.ma", "shutil", "segstore_kafka.partitioner", "crc32c", "importlib.metadata")
print(json.dumps({"rows": rows, "read": read, "problems": len(problems),
                  "loaded": sorted(m for m in unused if m in sys.modules)}))
"""


def test_library_reads_do_not_import_pandas(tmp_path) -> None:
    """Nor what deletes trees (shutil: bz2, lzma, 2-3 ms), routes keys to partitions (appends), or the
    crc32c package where the C accelerator's CRC-32C runs (the package reads its own metadata on
    import: importlib.metadata, 10-20 ms; a read_committed scan loads the producer snapshots' codec)."""
    for fmt, path in (("kafka", _kafka(tmp_path / "k")), ("rocketmq", _rocketmq(tmp_path / "r"))):
        result = _run(_LIBRARY, fmt, str(path))
        assert result["rows"] > 0 and result["read"] > 0 and result["problems"] == 0
        assert result["loaded"] == [], fmt


_ARROW_APPEND = """
import json, sys
import segstore
fmt, source, target = sys.argv[1], sys.argv[2], sys.argv[3]
with segstore.open(source, format=fmt) as store:
    batches = list(store.scan_arrow(isolation="read_committed") if fmt == "kafka" else store.scan_arrow())
with segstore.open(target, format=fmt, mode="a") as store:
    rows = sum(store.append_arrow(batch) for batch in batches)
print(json.dumps({"rows": rows, "loaded": sorted(m for m in ("pandas", "numpy.ma") if m in sys.modules)}))
"""


def test_columnar_appends_do_not_import_pandas(tmp_path) -> None:
    """``append_arrow`` of both formats (pandas took 0.25 s of a first RocketMQ call of 100 rows)."""
    for fmt, source in (("rocketmq", _rocketmq(tmp_path / "r")), ("kafka", _kafka(tmp_path / "k"))):
        result = _run(_ARROW_APPEND, fmt, str(source), str(tmp_path / f"{fmt}-copy"))
        assert result["rows"] > 0 and result["loaded"] == [], fmt


def test_conversions_do_not_import_pandas(tmp_path) -> None:
    """``segstore convert`` both ways (pandas took 0.3 s of converting 100 messages)."""
    kafka, rocketmq = _kafka(tmp_path / "k"), _rocketmq(tmp_path / "r")
    argvs = [["convert", str(rocketmq), str(tmp_path / "to-kafka"), "--to", "kafka"],
             ["convert", str(kafka), str(tmp_path / "to-rocketmq"), "--to", "rocketmq"]]
    for argv in argvs:    # each in its own interpreter
        [result] = _run(_CLI, json.dumps([argv]))
        assert result["code"] == 0 and result["loaded"] == [], result


def test_the_spark_writers_commit_columns_do_not_import_pandas(tmp_path) -> None:
    """The columns the Spark writer's commit appends (``staged_columns``), the options' topic and
    partition filling null rows: the driver's warm worker loaded pandas (0.2 s) on its first write."""
    staged = tmp_path / "part-00000-0.arrow"
    table = pa.table({"topic": pa.array(["t", None], pa.string()),
                      "partition": pa.array([None, 2], pa.int32()),
                      "value": pa.array([b"v", None], pa.binary()),
                      "timestamp": pa.array([-5, None], pa.int64()).cast(pa.timestamp("us", tz="UTC"))})
    with pa.ipc.new_stream(str(staged), table.schema) as writer:
        writer.write_table(table)
    result = _run(_STAGED_COLUMNS, str(staged))
    assert result["loaded"] == []
    assert result["columns"] == {"topic": ["t", "opt"], "partition": [3, 2], "key": [None, None],
                                 "value": ["v", None], "timestamp": [-1, None]}


_STAGED_COLUMNS = """
import json, sys
import pyarrow as pa
from segstore.spark.datasource import staged_columns
from segstore.spark.options import WriteOptions
table = pa.ipc.open_stream(pa.memory_map(sys.argv[1])).read_all()
out = staged_columns(table, WriteOptions("/unused", "kafka", topic="opt", partition=3))
loaded = sorted(m for m in ("pandas", "numpy.ma") if m in sys.modules)
columns = {name: [None if v is None else v.decode() if isinstance(v, bytes) else v
                  for v in out.column(name).to_pylist()] for name in out.column_names}
print(json.dumps({"loaded": loaded, "columns": columns}))
"""


#: The commands of argv[1] (JSON) one after another in one interpreter; each result says which of the
#: modules of argv[2] (JSON; by default pandas and numpy.ma) were loaded once it had run.
_CLI = """
import io, json, sys
from segstore import cli
watched = json.loads(sys.argv[2]) if len(sys.argv) > 2 else ["pandas", "numpy.ma"]
results = []
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    code = cli.main(argv, out)
    results.append({"argv": argv, "code": code, "lines": out.getvalue().count("\\n"),
                    "loaded": sorted(m for m in watched if m in sys.modules)})
print(json.dumps(results))
"""


def test_cli_reads_do_not_import_pandas(tmp_path) -> None:
    paths = (str(_kafka(tmp_path / "k")), str(_rocketmq(tmp_path / "r")))
    for path in paths:   # one interpreter per store, the commands one after another in it
        argvs = [[*command, path] for command in (["info"], ["dump"], ["dump", "--json"], ["verify"],
                                                  ["query", "--topic", "t", "--key", "k1"],
                                                  ["query", "--topic", "t", "--key", "k1", "--begin",
                                                   "1700000000000"])]
        for result in _run(_CLI, json.dumps(argvs)):
            assert result["code"] == 0 and (result["lines"] > 0 or result["argv"][0] == "verify"), result
            assert result["loaded"] == [], result


def test_extra_key_index_and_compaction_import_neither_pandas_nor_numpy_ma(tmp_path) -> None:
    """``index build --index key`` read its batches' columns with ``Array.to_numpy`` (pandas, 0.2 s) and a
    compaction's key digests grouped keys by ``np.unique`` (``numpy.ma``)."""
    path = _kafka(tmp_path / "k")
    policy = ["--config", "cleanup.policy=compact"]
    argvs = [["index", "build", str(path), "--index", "key"],
             ["query", "--topic", "t", "--key", "k1", str(path)],
             ["compact", "--dry-run", *policy, str(path / "t-0")],
             ["compact", *policy, "--now-ms", str(2**62), str(path / "t-1")]]
    for argv in argvs:    # each in its own interpreter
        [result] = _run(_CLI, json.dumps([argv]))
        assert result["code"] == 0 and result["lines"] > 0 and result["loaded"] == [], result


def test_kafka_consumer_group_reads_do_not_import_pandas(tmp_path) -> None:
    """``consumers`` and ``dump --group`` load the group's offsets from ``__consumer_offsets`` (each
    key's latest record): pandas took 0.2 s there, and a Ctrl-C landing in its import left a
    half-made module that failed the command with a traceback (``dump --follow --group``)."""
    path = _kafka(tmp_path / "k")
    with segstore.open(path, format="kafka", mode="a") as store:
        store.partition_of("__consumer_offsets", 3, create=True)   # g's: its id's hash modulo 50
        store.commit_offsets("g", {("t", 0): 3, ("t", 1): 2})
        store.commit_offsets("g", {("t", 0): 5})
    argvs = [["consumers", str(path)], ["consumers", str(path), "--json"],
             ["dump", str(path), "--group", "g"]]
    for result in _run(_CLI, json.dumps(argvs)):
        assert result["code"] == 0 and result["lines"] > 0 and result["loaded"] == [], result


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-2**63, 2**63 - 1), max_size=70), st.sampled_from(
    [np.int8, np.int16, np.int32, np.int64, np.uint8, np.float64, np.bool_]), st.integers(0, 9))
def test_arrays_match_pyarrows_own_bridges(ints, dtype, cut) -> None:
    values = np.array(ints, np.int64).astype(dtype)
    built = arrays.from_numpy(values)
    assert built.equals(pa.array(values)) and built.null_count == 0
    sliced = built.slice(min(cut, len(values)))    # a nonzero offset into the buffers
    assert np.array_equal(arrays.to_numpy(sliced, dtype), sliced.to_numpy(zero_copy_only=False))
    chunked = pa.chunked_array([built, sliced], built.type)
    assert np.array_equal(arrays.to_numpy(chunked, dtype), chunked.to_numpy())
    with np.errstate(invalid="ignore"):     # a float64 past int64's range casts to its minimum, both sides
        as_int64 = values.astype(np.int64)
    stamps = arrays.from_numpy(as_int64, TIMESTAMP)
    assert stamps.equals(pa.array(as_int64).cast(TIMESTAMP))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-2**63, 2**63 - 1), max_size=70), st.sampled_from(
    [np.int8, np.int32, np.int64, np.uint32]))
def test_unique_is_np_unique(ints, dtype) -> None:
    """arrays.unique (no numpy.ma import) gives what np.unique gives, repeats and empty arrays too."""
    values = np.array(ints + ints[::3], np.int64).astype(dtype)
    got = arrays.unique(values)
    assert got.dtype == values.dtype and np.array_equal(got, np.unique(values))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-2**63, 2**63 - 1), max_size=40), st.sampled_from(
    [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(), pa.bool_(), TIMESTAMP]),
    st.integers(0, 9))
def test_natural_and_int64s_read_what_to_numpy_reads(ints, kind, cut) -> None:
    """natural (the type's own dtype) and int64s (widened) against Array.to_numpy, sliced arrays too;
    number and empty_list against pa.scalar."""
    values = np.array(ints, np.int64)
    if pa.types.is_boolean(kind):
        column = pa.array(values % 2 == 1)
    else:
        column = pa.array(values).cast(kind, safe=False)
    column = column.slice(min(cut, len(column)))
    want = column.to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(kind):
        want = want.astype(np.int64)
    got = arrays.natural(column)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    widened = arrays.int64s(column)
    assert widened.dtype == np.int64 and np.array_equal(widened, want.astype(np.int64))
    if ints and not pa.types.is_boolean(kind):
        assert arrays.number(int(want[0]) if len(want) else 0, kind).equals(
            pa.scalar(int(want[0]) if len(want) else 0, pa.int64()).cast(kind))
    for list_type in (HEADERS, pa.map_(pa.string(), pa.string()), pa.list_(kind)):
        assert arrays.empty_list(list_type).equals(pa.scalar([], list_type))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=6), max_size=12), st.booleans())
def test_texts_and_string_scalar_equal_pyarrows(values, binary) -> None:
    given_values = [v.encode() for v in values] if binary else values
    kind = pa.binary() if binary else pa.string()
    assert arrays.texts(given_values, kind).equals(pa.array(given_values, kind))
    for value in values[:3]:
        assert arrays.string_scalar(value).equals(pa.scalar(value, pa.string()))
    batch = arrays.empty_batch(pa.schema([("a", kind), ("b", HEADERS)]))
    assert batch.num_rows == 0 and batch.schema.names == ["a", "b"]


_HELP = """
import contextlib, io, json, sys
from segstore import cli
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        cli.main(sys.argv[1:])
    except SystemExit as done:
        code = done.code
print(json.dumps({"code": code, "text": out.getvalue(),
                  "loaded": sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "pyarrow", "pandas",
                                   "segstore_kafka", "segstore_rocketmq"})}))
"""


def test_help_imports_neither_numpy_nor_pyarrow_nor_a_format() -> None:
    for argv in (["--help"], ["dump", "--help"], ["index", "--help"], ["convert", "--help"]):
        result = _run(_HELP, *argv)
        assert result["code"] == 0 and "usage: segstore" in result["text"], argv
        assert result["loaded"] == [], argv


_INFO = """
import io, json, sys
from segstore import cli
code = cli.main(["info", sys.argv[1]], io.StringIO())
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.modules
                                                 if m.startswith("segstore_") or m == "pyarrow.compute")}))
"""


def test_info_loads_only_the_store_formats_code(tmp_path) -> None:
    """Detecting the format reads file names: the other format's store modules stay unloaded; and
    pyarrow.compute (0.05 s) loads only where a computation runs."""
    for path, own, other in ((_kafka(tmp_path / "k"), "segstore_kafka", "segstore_rocketmq"),
                             (_rocketmq(tmp_path / "r"), "segstore_rocketmq", "segstore_kafka")):
        result = _run(_INFO, str(path))
        assert result["code"] == 0
        assert f"{own}.store" in result["loaded"] and "pyarrow.compute" not in result["loaded"]
        # its plugin and what it names files with: no store, no codec, no columns
        assert {m for m in result["loaded"] if m.startswith(other)} <= \
            {other, f"{other}.plugin", f"{other}.dirnames", f"{other}.checkpoint", f"{other}.checkpoints"}


_COMMAND = """
import json, os, sys
from segstore import cli
before = "numpy" in sys.modules
sys.argv = ["segstore", "info", sys.argv[1]]
code = cli.command()
print(json.dumps({"code": code, "numpy_before": before, "numpy_after": "numpy" in sys.modules,
                  "blas": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


def test_the_command_asks_for_one_blas_thread_before_numpy_loads(tmp_path) -> None:
    """numpy's OpenBLAS reads ``OPENBLAS_NUM_THREADS`` when numpy loads, so the command sets it
    first; a value the user set stays."""
    store = str(_rocketmq(tmp_path / "r"))
    env = _env()
    env.pop("OPENBLAS_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _COMMAND, store], capture_output=True, text=True, env=env,
                         check=True)
    result = json.loads(out.stdout.splitlines()[-1])
    assert result == {"code": 0, "numpy_before": False, "numpy_after": True, "blas": "1"}
    out = subprocess.run([sys.executable, "-c", _COMMAND, store], capture_output=True, text=True,
                         env={**env, "OPENBLAS_NUM_THREADS": "3"}, check=True)
    assert json.loads(out.stdout.splitlines()[-1])["blas"] == "3"


@settings(max_examples=20, deadline=None)
@given(st.binary(max_size=40))
def test_binary_scalar_equals_pyarrows(value) -> None:
    assert arrays.binary_scalar(value).equals(pa.scalar(value, pa.binary()))


_INFO_LEAN = """
import io, json, sys
from segstore import cli
out = io.StringIO()
code = cli.main(["info", *sys.argv[1:]], out)
print(json.dumps({"code": code, "text": out.getvalue(),
                  "loaded": sorted({m.split(".")[0] for m in sys.modules} & {
                      "pyarrow", "pandas", "zstandard", "lz4", "cramjam", "crc32c", "concurrent"}),
                  "metadata": "importlib.metadata" in sys.modules,
                  "segstore": sorted(m for m in sys.modules if m.startswith("segstore"))}))
"""


def test_info_on_a_small_store_imports_no_arrow_codec_checksum_or_pool(tmp_path) -> None:
    """``info`` reads file names, consume queues, checkpoints and index headers: no Arrow, no codec,
    no checksum, no thread pool, no ``importlib.metadata`` (pyarrow 0.03 s beside numpy, crc32c 0.01 s,
    the codecs 0.01 s, concurrent.futures with logging 0.008 s, importlib.metadata 0.05 s, of a 0.25 s
    budget).  Its output is the same as in a process that has every module loaded already (this one)."""
    from segstore import cli

    kafka = _kafka(tmp_path / "k")
    for args in ([str(_rocketmq(tmp_path / "r"))], ["--json", str(tmp_path / "r")], [str(kafka)],
                 ["--json", str(kafka / "t-0")]):
        result = _run(_INFO_LEAN, *args)
        here = io.StringIO()
        assert result["code"] == 0 == cli.main(["info", *args], here), args
        assert result["text"] == here.getvalue() and "topic" in result["text"], args
        assert result["loaded"] == [], args
        assert not result["metadata"], args     # the plugins listed by segstore.entrypoints
        # what writes, recovers or reads transactions, and a log dir's retention rules: none is read;
        # nor the KRaft metadata image's replay (2.4 ms) in a log directory without a metadata log
        unused = {"segstore_rocketmq.recovery", "segstore_rocketmq.fastappend", "segstore_kafka.transactions",
                  "segstore_kafka.compaction", "segstore_kafka.internal_topics", "segstore_kafka.retention",
                  "segstore_kafka.kraft"}
        assert not unused & set(result["segstore"]), args


def test_info_on_a_small_store_loads_no_consumer_retention_or_other_format_index_code(tmp_path) -> None:
    """``info`` lists no consumer groups, applies no retention rule, flushes nothing, uses no index
    layout (a store without extra indexes needs only the layouts' option names) and reads no 5.x
    batch consume queue or timer store where the store has none, and detecting
    the format asks the other format's plugin only whether it recognises the files: none of those modules
    (their dataclasses and the other format's index classes, several ms of a 0.25 s budget) load.
    numpy does, and must: opening a store maps its consume queues and index files as arrays."""
    kafka = _kafka(tmp_path / "k")
    cases = ((str(_rocketmq(tmp_path / "r")), {"segstore_rocketmq.retention", "segstore_rocketmq.flush",
                                                "segstore.indexes.sparse", "segstore.indexes.timeindex",
                                                "segstore.logview", "segstore_rocketmq.batchconsumequeue",
                                                "segstore_rocketmq.timerstore"}),
             (str(kafka), {"segstore.indexes.dense", "segstore.indexes.keyhash"}),
             (str(kafka / "t-0"), {"segstore.indexes.dense", "segstore.indexes.keyhash"}))
    for path, unused in cases:
        result = _run(_INFO_LEAN, path)
        assert result["code"] == 0 and "topic" in result["text"], path
        assert not ({"segstore.consumers", "segstore.layouts.base"} | unused) & set(result["segstore"]), path


def test_native_indexes_import_their_entry_types_on_lookup() -> None:
    """What the plugins' lazy :class:`NativeIndexes` give is what naming the classes gave; the RocketMQ
    file-name width ``detect`` uses is the core's."""
    from segstore_kafka.plugin import KafkaFormat
    from segstore_rocketmq import dirnames
    from segstore_rocketmq.plugin import RocketMQFormat

    from segstore.indexes import dense
    from segstore.indexes.keyhash import IndexService
    from segstore.indexes.sparse import OffsetIndex
    from segstore.indexes.timeindex import TimeIndex
    from segstore.plugin import NativeIndex

    assert dict(RocketMQFormat.native_indexes) == {
        "queue": NativeIndex(dense.ConsumeQueue,
                             "consumequeue/TOPIC/QUEUEID/%020d (first entry's byte offset)"),
        "key": NativeIndex(IndexService, "index/yyyyMMddHHmmssSSS (local creation time)")}
    assert dict(KafkaFormat.native_indexes) == {
        "offset": NativeIndex(OffsetIndex, "TOPIC-N/%020d.index (base offset of the segment)"),
        "time": NativeIndex(TimeIndex, "TOPIC-N/%020d.timeindex (base offset of the segment)")}
    assert "queue" in RocketMQFormat.native_indexes and "offset" not in RocketMQFormat.native_indexes
    assert list(KafkaFormat.native_indexes) == ["offset", "time"] and len(KafkaFormat.native_indexes) == 2
    assert dirnames.FILE_NAME_DIGITS == dense.FILE_NAME_DIGITS


_SCAN = """
import json, sys
import segstore
with segstore.open(sys.argv[1], format="kafka") as store:
    rows = sum(batch.num_rows for batch in store.scan_arrow())
from segstore import speedups
others = ("hashlib", "_hashlib", "_sha256", "_sha2", "segstore.properties", "sortedcontainers")
print(json.dumps({"rows": rows, "loaded": sorted(m for m in sys.modules if m.startswith("segstore_kafka.")
                                                 or m in others),
                  "missing": sorted(speedups.missing)}))
"""


def test_first_kafka_scan_loads_no_transaction_compaction_retention_or_kraft_schema_code(tmp_path) -> None:
    """A read_uncommitted scan needs no last stable offset (.transactions, and the .compaction it
    imports), a store without a metadata log no KRaft record schemas (.internal_topics, .schema), and
    opening a partition directory only its log start from the log dir's checkpoint, no retention rule
    (.retention's dataclasses): modules a first scan in a process used to import (5-10 ms).  Nor a
    store of v2 batches the v0/v1 codec (.legacy), nor the cleaner's key map (.offsetmap's MD5
    tables, for a default of ``compact``), nor OpenSSL's hashlib (2-7 ms) nor CPython's own SHA-256 for
    the check that the C accelerator is not a stale build (zlib's CRC-32 fingerprints its source,
    once: 0.03 ms where SHA-256 took 0.46).  Nor the
    dataclasses a scan makes none of, whose generated methods are compiled from source as their
    classes are made (~3.5M instructions each): the record a read gives (.record), an append's and a
    recovery's reports (.results), a consumer group's home (.groups), and ``meta.properties``'s reader
    (.properties, and the core's properties parser with it) where the log directory has none.  Nor
    sortedcontainers where no segment map holds more than ``segstore.segments.FEW`` segments."""
    kafka = _kafka(tmp_path / "k")
    for path in (kafka, kafka / "t-0"):
        result = _run(_SCAN, str(path))
        assert result["rows"] > 0
        unused = {"segstore_kafka.transactions", "segstore_kafka.compaction", "segstore_kafka.schema",
                  "segstore_kafka.internal_topics", "segstore_kafka.retention", "segstore_kafka.legacy",
                  "segstore_kafka.offsetmap", "hashlib", "_hashlib", "_sha256", "_sha2",
                  "segstore_kafka.record", "segstore_kafka.results", "segstore_kafka.groups",
                  "segstore_kafka.properties", "segstore.properties", "sortedcontainers"}
        assert not unused & set(result["loaded"]), path
        if importlib.util.find_spec("segstore_kafka._speedups") is not None:
            assert result["missing"] == [], path    # the C accelerator loaded: its stale check ran


def test_the_store_module_names_what_moved_out_of_it() -> None:
    """``segstore_kafka.store.KafkaRecord`` (in its ``__all__``) and ``batch_json`` are still there, loaded
    from .record on first use; a name the store never had is still an AttributeError."""
    from segstore_kafka import record, store

    assert store.KafkaRecord is record.KafkaRecord and store.batch_json is record.batch_json
    with pytest.raises(AttributeError, match="no_such_name"):
        store.no_such_name  # noqa: B018


_MODULES_AFTER = """
import io, json, sys
from segstore import cli
code = cli.main(json.loads(sys.argv[1]), io.StringIO())
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.modules if m.startswith("segstore"))}))
"""


def test_verify_and_dump_load_no_code_for_files_the_store_does_not_hold(tmp_path) -> None:
    """A RocketMQ ``verify`` reads the 5.x batch consume queues and timer store only where the store
    has them (their modules load only then, as for ``info``: ~1 ms of a small store's verify), and a
    Kafka store's text dump loads no internal-topic decoder or schema (~1 ms) unless a control record
    other than a transaction marker, or ``--offsets-decoder`` and its like, asks for one."""
    cases = ((["verify", str(_rocketmq(tmp_path / "r"))],
              {"segstore_rocketmq.batchconsumequeue", "segstore_rocketmq.timerstore"}),
             (["dump", str(_kafka(tmp_path / "k"))],    # an ABORT marker among its batches
              {"segstore_kafka.internal_topics", "segstore_kafka.schema"}))
    for argv, unused in cases:
        result = _run(_MODULES_AFTER, json.dumps(argv))
        assert result["code"] == 0, argv
        assert not unused & set(result["loaded"]), argv


_PYARROW = json.dumps(["pyarrow", "pyarrow.compute"])


def test_a_small_stores_commands_load_no_pyarrow(tmp_path) -> None:
    """``verify``, ``dump`` (text and JSON), ``query`` by offset and by time and ``recover`` of a small
    store of each format build no Arrow column, and ask for no block big enough for Arrow's pool: a Kafka
    segment's chunk is sized to the segment (not the default 16k rows and megabytes), the RocketMQ
    recovery walk's first step takes 1,024 rows (not 64k rows, 10 MB, for a walk that stops at the end
    of the file), and blocks below ``columns.POOL_MIN`` come from numpy.  So pyarrow (18-19 ms
    of CPU, ~133M instructions with its pool's first block) does not load.  The commands run one
    after another in one interpreter, so the first to load it is the one named."""
    for path, store in ((_rocketmq(tmp_path / "r"), "rocketmq"), (_kafka(tmp_path / "k"), "kafka")):
        p = str(path)
        argvs = [["verify", p], ["dump", p], ["dump", "--json", p],
                 ["query", p, "--topic", "t", "--queue", "1", "--offset", "3"],
                 ["query", p, "--topic", "t", "--timestamp", "2000-01-01T00:00:00Z"],
                 ["recover", p]]
        for result in _run(_CLI, json.dumps(argvs), _PYARROW):
            assert result["code"] == 0, (store, result)
            assert result["lines"] > 0 or result["argv"][0] == "verify", (store, result)
            assert result["loaded"] == [], (store, result)
        # a Kafka key query without the key index scans the key column (Arrow batches: pyarrow loads),
        # compared in numpy: no pyarrow.compute (tens of ms to import)
        [result] = _run(_CLI, json.dumps([["query", p, "--topic", "t", "--key", "k1"]]), _PYARROW)
        assert result["code"] == 0 and result["lines"] > 0, (store, result)
        assert result["loaded"] == ([] if store == "rocketmq" else ["pyarrow"]), (store, result)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=4)), max_size=40), st.binary(max_size=4),
       st.integers(0, 9), st.booleans())
def test_equal_rows_is_compute_equal_with_nulls_false(values, wanted, cut, as_text) -> None:
    """columns.equal_rows (the Kafka key scan's, without pyarrow.compute) answers pc.equal, a null as False,
    over sliced arrays, string ones too."""
    import pyarrow.compute as pc

    from segstore import columns

    cut = min(cut, len(values))
    column = pa.array(values, pa.binary())
    want = pc.equal(column, pa.scalar(wanted, pa.binary())).fill_null(False).to_pylist()[cut:]
    column = column.slice(cut)
    if as_text and all(v is None or _utf8(v) for v in values):
        column = column.cast(pa.string())
    assert columns.equal_rows(column, wanted).tolist() == want


def _utf8(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True
