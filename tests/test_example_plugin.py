"""A third-party format plugin (``tests/example_plugin/linelog.py``) through the conformance suite.

It is registered programmatically (``segstore.registry.register``) for this module, implements
``LogView`` and declares no native index: every layout is one of the core's generic ones, built,
kept, recovered, verified and dropped with no index code in the plugin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from example_plugin.linelog import LineLogFormat, LineLogStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import segstore
from segstore import cli, registry
from segstore.layouts import LAYOUT_NAMES, layout_class
from segstore.layouts.base import INDEX_ROOT, Stream
from segstore.records import Message
from segstore.testing.conformance import StoreTests

LAYOUT_OPTIONS = {"layout.interval.bytes": 200, "layout.index.bytes": 48, "layout.queue.file.bytes": 20 * 16,
                  "key.index.headers": "h", "key.index.slots": 4, "key.index.entries": 12}


@pytest.fixture(autouse=True, scope="module")
def linelog() -> Iterator[None]:
    registry.register(LineLogFormat())
    yield
    registry.unregister("linelog")


class TestLineLogConformance(StoreTests):
    format = "linelog"
    config: ClassVar[dict[str, Any]] = {}


def test_every_layout_is_an_extra_one() -> None:
    assert [layout_class(name, "linelog").native for name in LAYOUT_NAMES] == [False] * 4
    assert LineLogFormat.native_indexes == {}


_MESSAGES = st.lists(st.builds(
    Message, topic=st.sampled_from(["A", "B"]), partition=st.integers(0, 1),
    key=st.one_of(st.none(), st.sampled_from([b"k1", b"k2", "ü".encode(), b"\xff\xfe"])),
    value=st.binary(max_size=120),
    headers=st.lists(st.tuples(st.sampled_from(["h", "x"]), st.sampled_from([b"k1", b"hv", b"\xc3"])),
                     max_size=2),
    timestamp=st.integers(1_700_000_000_000, 1_700_000_100_000)), min_size=1, max_size=60)


def _expected(messages: list[Message]) -> dict[Stream, list[Message]]:
    out: dict[Stream, list[Message]] = {}
    for m in messages:
        out.setdefault(Stream(m.topic, m.partition), []).append(m)
    return out


def _check_lookups(store: segstore.Store, messages: list[Message]) -> None:
    indexes = store.indexes
    assert indexes is not None
    for stream, msgs in _expected(messages).items():
        for offset in range(len(msgs)):
            for name in ("queue", "offset"):
                record = indexes[name].read_at(stream, offset)
                assert record is not None and store.to_common(record).value == msgs[offset].value
        assert indexes["queue"].read_at(stream, len(msgs)) is None
        for when in [*sorted({m.timestamp for m in msgs}), msgs[0].timestamp - 1, 2**62]:
            want = next((i for i, m in enumerate(msgs) if m.timestamp >= when), None)
            assert indexes["time"].offset_for_time(stream, when) == want
        for key in (b"k1", b"k2", "ü".encode(), b"\xff\xfe", b"hv", b"\xc3", b"none"):
            want = [i for i, m in enumerate(msgs)
                    if m.key == key or any(n == "h" and v == key for n, v in m.headers)]
            assert indexes["key"].find_key(stream, key) == want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_MESSAGES, min_size=1, max_size=4))
def test_layouts_kept_on_append_answer_like_a_scan(tmp_path_factory: pytest.TempPathFactory,
                                                  batches: list[list[Message]]) -> None:
    path = str(tmp_path_factory.mktemp("ll") / "store")
    with segstore.open(path, format="linelog", mode="a", indexes=list(LAYOUT_NAMES),
                       **LAYOUT_OPTIONS) as store:
        for batch in batches:
            store.append_batch(batch)
        _check_lookups(store, [m for b in batches for m in b])
        assert store.indexes is not None and store.indexes.verify() == []
    # reopened read-only, the extra indexes on disk are found and answer the same
    with segstore.open(path, format="linelog", mode="r") as store:
        assert store.indexes is not None and sorted(store.indexes.layouts) == sorted(LAYOUT_NAMES)
        _check_lookups(store, [m for b in batches for m in b])


def test_build_verify_drop_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "store"
    messages = [Message(topic="T", partition=0, key=f"k{i % 7}".encode(), value=bytes(i), timestamp=1000 + i)
                for i in range(300)]
    with segstore.open(str(path), format="linelog", mode="a") as store:
        store.append_batch(messages)
    before = {p.relative_to(path) for p in path.rglob("*") if p.is_file()}
    index_args = [arg for name in LAYOUT_NAMES for arg in ("--index", name)]
    assert cli.main(["index", "build", str(path), *index_args]) == 0
    added = {p.relative_to(path) for p in path.rglob("*") if p.is_file()} - before
    assert added and all(p.parts[0] == INDEX_ROOT for p in added)
    # the four generic layouts, each in the core's files: dense queue, sparse offset/time, key-hash
    assert {p.parts[1] for p in added if len(p.parts) > 2} == set(LAYOUT_NAMES)
    assert any(p.parts[1] == "queue" and "consumequeue" in p.parts for p in added)
    assert any(p.suffix == ".timeindex" for p in added) and any(p.suffix == ".index" for p in added)
    assert cli.main(["index", "verify", str(path), *index_args]) == 0
    with segstore.open(str(path), format="linelog", mode="r", indexes=["key", "time"]) as store:
        assert [store.to_common(r).offset for r in store.find("T", b"k3")] == list(range(3, 300, 7))
        assert store.indexes is not None and store.indexes.offset_for_time("T", 0, 1100) == 100
    # a wrong entry is reported, with where it is
    target = sorted((path / INDEX_ROOT / "offset").rglob("*.index"))[0]
    data = bytearray(target.read_bytes())
    moved = int.from_bytes(data[12:16], "big") + 1
    data[12:16] = moved.to_bytes(4, "big")      # the second entry's position, still in order
    target.write_bytes(bytes(data))
    capsys.readouterr()
    assert cli.main(["index", "verify", str(path), "--index", "offset"]) == 1
    captured = capsys.readouterr()
    assert f"{target}:8: expected entry" in captured.out + captured.err
    assert cli.main(["index", "drop", str(path), *index_args]) == 0
    assert not (path / INDEX_ROOT).exists()


def test_crash_then_reopen_recovers_the_extra_indexes(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    first = [Message(topic="T", partition=0, key=b"a", value=b"x" * i, timestamp=i) for i in range(50)]
    store = segstore.open(path, format="linelog", mode="a", indexes=list(LAYOUT_NAMES), **LAYOUT_OPTIONS)
    store.append_batch(first)
    store.abandon()                  # nothing flushed, no clean mark
    states = [json.loads(p.read_text()) for p in Path(path, INDEX_ROOT).rglob("state.json")]
    assert states and not any(s["clean"] for s in states)
    more = [Message(topic="T", partition=0, key=b"b", value=b"y", timestamp=100 + i) for i in range(30)]
    with segstore.open(path, format="linelog", mode="a", **LAYOUT_OPTIONS) as store:
        store.append_batch(more)     # the indexes on disk are kept up to date, not left behind
        assert store.indexes is not None and store.indexes.verify() == []
        _check_lookups(store, first + more)


# -- the conformance suite fails a plugin whose native lookups are wrong -------------------------
class _HashOnlyKeyStore(LineLogStore):
    """A native key lookup that returns every record whose key has the key's Java hash, unchecked (what a
    RocketMQ IndexFile chain holds: ``"Aa"`` and ``"BB"`` share one)."""

    format = "linelog-hashkey"

    def key_offsets(self, topic: str, partition: int, key: bytes, max_hits: int | None = None) -> list[int]:
        from segstore.indexes.javahash import string_hash

        want = string_hash(f"{topic}#{key.decode()}")
        hits = [r.offset for r in self.read(topic, partition)
                if r.key is not None and string_hash(f"{topic}#{r.key.decode()}") == want]
        return hits if max_hits is None else hits[-max_hits:] if max_hits > 0 else []


class _BinarySearchTimeStore(LineLogStore):
    """A native time lookup that binary searches the records' timestamps as if they were ordered."""

    format = "linelog-bisect"

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        from segstore.search import first_true

        start, end = self.offset_range(topic, partition)
        stamps = [r.timestamp for r in self.read(topic, partition)]
        found = first_true(lambda o: stamps[o - start] >= timestamp, start, end)
        return None if found >= end else found


def _native_plugin(store_class: type[LineLogStore], layout: str) -> LineLogFormat:
    from segstore.layouts import attach, split_options
    from segstore.plugin import NativeIndex

    class Plugin(LineLogFormat):
        name = store_class.format
        native_indexes: ClassVar[Mapping[str, NativeIndex]] = {layout: NativeIndex(object, "from the log")}

        def open(self, path: str, mode: str = "r", **config: Any) -> LineLogStore:
            indexes, layout_options, _ = split_options(config)
            return attach(store_class(path, mode), indexes, layout_options)

    return Plugin()


@pytest.mark.parametrize(("store_class", "layout", "found"), [(_HashOnlyKeyStore, "key", "b'key-(Aa|BB)'"),
                                                               (_BinarySearchTimeStore, "time", "17000")])
def test_the_conformance_suite_fails_wrong_native_lookups(tmp_path: Path, store_class: type[LineLogStore],
                                                          layout: str, found: str) -> None:
    """The suite's layout test appended keys of distinct hashes and timestamps in order: a native key
    lookup returning a colliding key's records, or a time lookup that is a binary search over
    unordered times (Kafka's timestamps may go back), passed it though neither answers like a scan."""
    plugin = _native_plugin(store_class, layout)
    registry.register(plugin)
    try:
        assert layout_class(layout, plugin.name).native

        class Conformance(StoreTests):
            format = plugin.name

        with pytest.raises(AssertionError, match=found):
            Conformance().test_index_layouts_answer_like_a_scan(str(tmp_path / "store"))
    finally:
        registry.unregister(plugin.name)
