"""Extra indexes on stores the real brokers wrote: broker files stay byte-identical.

Copies of ``compat_fixtures/rocketmq/basic/store`` and every
``compat_fixtures/kafka/*/topic-0`` get every extra layout through the CLI
(``segstore index build``), are verified and queried, and have their indexes
dropped; every file the broker wrote is hashed before and after.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from pathlib import Path

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES, cli_run, copy_writable, is_utf8

import segstore
from segstore import cli
from segstore.layouts import LAYOUT_NAMES, layout_class


def tree_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root``, by relative path."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(list(argv), out)
    return code, out.getvalue()


CASES = [("rocketmq", ("rocketmq", "basic", "store"))]
CASES += [("kafka", ("kafka", n, "topic-0")) for n in KAFKA_FIXTURES]


@pytest.mark.parametrize(("fmt", "parts"), CASES, ids=[p[1] for _, p in CASES])
def test_extra_indexes_leave_broker_files_byte_identical(tmp_path: Path, fmt: str,
                                                        parts: tuple[str, ...]) -> None:
    path = copy_writable(FIXTURES.joinpath(*parts), tmp_path / parts[1] / parts[2])
    before = tree_hashes(path)
    extra = [n for n in LAYOUT_NAMES if not layout_class(n, fmt).native]
    index_args = [a for n in LAYOUT_NAMES for a in ("--index", n)]

    code, out = run("index", "build", str(path), *index_args, "--option", "key.index.headers=h")
    assert code == 0, out
    for name in extra:
        assert (f"{name}: built") in out
    code, out = run("index", "verify", str(path), *index_args, "-q")
    assert code == 0, out

    after = tree_hashes(path)
    added = set(after) - set(before)
    assert {k: after[k] for k in before} == before
    assert added and all(p.startswith(".segstore/") for p in added)

    with segstore.open(path) as store:
        assert sorted(store.indexes.layouts) == sorted(extra)
        for topic in store.topics():
            for partition in store.partitions(topic):
                start, end = store.offset_range(topic, partition)
                for offset in range(start, end):
                    expected = next(store.read(topic, partition, offset, 1), None)
                    found = store.indexes.read_at(topic, partition, offset) if "queue" in extra else expected
                    assert (found is None) == (expected is None)
                    if found is not None:
                        assert store.to_json(found) == store.to_json(expected)

    code, out = run("index", "drop", str(path), *index_args)
    assert code == 0, out
    assert tree_hashes(path) == before
    assert not (path / ".segstore").exists()


def test_kafka_query_by_key_prints_dump_json(tmp_path: Path) -> None:
    """``segstore query PARTITION --key K --json`` prints the dump --json objects of the matching records."""
    path = copy_writable(FIXTURES / "kafka" / "uncompressed" / "topic-0", tmp_path / "topic-0")
    code, dump = run("dump", str(path), "--json")
    assert code == 0
    records = [json.loads(line) for line in dump.splitlines()]
    raw_keys = {base64.b64decode(r["key"]) for r in records if r["key"] is not None}
    keys = sorted(k.decode() for k in raw_keys if is_utf8(k))
    assert keys
    # without a key index the key column is scanned; with one the index answers: the same records
    for indexed in (False, True):
        if indexed:
            assert run("index", "build", str(path), "--index", "key")[0] == 0
        for key in keys:
            code, out = run("query", str(path), f"--key={key}", "--json")
            assert code == 0
            expected = [r for r in records
                        if r["key"] is not None and base64.b64decode(r["key"]) == key.encode()]
            assert [json.loads(line) for line in out.splitlines()] == expected
        assert run("query", str(path), "--key", "no-such-key")[0] == 1




def test_rocketmq_time_lookups_use_the_sparse_index(tmp_path: Path) -> None:
    """With a time index, ``offset_for_time`` agrees with the broker's binary search on the fixture."""
    path = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    with segstore.open(path, indexes=[]) as store:
        expected = {}
        for topic in store.topics():
            for queue in store.partitions(topic):
                stamps = [m.store_timestamp for m in store.read(topic, queue)]
                for ts in sorted({*stamps, min(stamps) - 1, max(stamps) + 1}):
                    expected[(topic, queue, ts)] = store.offset_for_time(topic, queue, ts)
    assert run("index", "build", str(path), "--index", "time")[0] == 0
    with segstore.open(path) as store:
        assert "time" in store.indexes
        for (topic, queue, ts), offset in expected.items():
            assert store.offset_for_time(topic, queue, ts) == offset


@pytest.mark.parametrize("digits", ["²" * 20, "\u0660" * 19 + "\u0665"], ids=["superscript", "arabic-indic"])
def test_sparse_layout_file_names_are_ascii_digits(tmp_path: Path, digits: str) -> None:
    """``.segstore/time`` and ``.segstore/offset`` files are named by 20 ASCII digits (Kafka's ``%020d``):
    a name of other Unicode digits is not one of them and is ignored, as every other name there is.
    Before, ``"²" * 20`` crashed every command opening the store with int()'s ValueError (a traceback),
    and ``"\\u0660" * 19 + "\\u0665"`` (Arabic-Indic digits) was read as a second index file based at
    offset 5."""
    path = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    assert cli_run("index", "build", path, "--index", "time", "--index", "offset")[0] == 0
    with segstore.open(path) as store:
        expected = {ts: store.offset_for_time("TopicB", 3, ts) for ts in (0, 2**62)}
    extra = path / ".segstore"
    (extra / "time" / "TopicB" / "3" / f"{digits}.timeindex").write_bytes(b"")
    (extra / "offset" / "TopicB" / "3" / f"{digits}-{0:020d}.index").write_bytes(b"")
    code, out, err = cli_run("index", "verify", path, "--index", "time", "--index", "offset")
    assert (code, out, err) == (0, "", f"{path}: time, offset: ok\n")
    code, out, err = cli_run("info", path)
    assert code == 0 and "Traceback" not in err
    with segstore.open(path) as store:
        assert {ts: store.offset_for_time("TopicB", 3, ts) for ts in expected} == expected
