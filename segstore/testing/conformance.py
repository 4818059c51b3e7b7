"""Store conformance tests and a stateful model test, shared by every format plugin."""

from __future__ import annotations

import datetime
import itertools
import json
import random
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

import pyarrow as pa
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import segstore
from segstore.columns import COMMON_SCHEMA, project
from segstore.errors import ReadOnlyError, StoreClosedError, UnsupportedOperationError
from segstore.layouts import LAYOUT_NAMES
from segstore.layouts.base import Stream
from segstore.logview import LogView
from segstore.records import Message

# Keys without spaces (RocketMQ's KEYS property is space-separated) and header
# values that are UTF-8 and not empty (RocketMQ properties are strings, and RocketMQ 4.9.7
# MessageDecoder.string2messageProperties drops a pair with an empty value, so its append refuses
# one): what every format carries.
_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12).map(str.encode)
_VALUES = st.binary(min_size=0, max_size=300)
_HEADER_NAMES = st.sampled_from(["h0", "h1", "trace-id", "ü-hdr"])
# Surrogates cannot be UTF-8 encoded.  Typed as the Literal hypothesis expects: its decorated
# ``characters`` gives mypy no context to infer it from a bare tuple.
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
_HEADER_VALUES = st.text(alphabet=st.characters(exclude_categories=_SURROGATES,
                                                exclude_characters="\x00\x01\x02"),
                         min_size=1, max_size=20).map(lambda s: s.encode("utf-8"))


def _canonical(obj: Any) -> str:
    """A dump object as one comparable string (JSON, keys sorted)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def sample_messages(seed: int, count: int, topics: dict[str, int], value_size: int = 64) -> list[Message]:
    """Deterministic messages spread over ``topics`` (name -> partition count)."""
    rng = random.Random(seed)
    names = sorted(topics)
    out = []
    for i in range(count):
        topic = names[i % len(names)]
        out.append(Message(topic=topic, partition=rng.randrange(topics[topic]),
                           key=f"key-{rng.randrange(1000)}".encode(),
                           value=rng.randbytes(rng.randrange(value_size + 1)),
                           headers=[("h0", f"v{i}".encode())], timestamp=1_700_000_000_000 + i))
    return out


#: The common columns compared with the object API (timestamps as UTC datetimes in Arrow).
COMPARED_COLUMNS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]


def common_row(m: Message) -> tuple:
    """A common-model record as the row :data:`COMPARED_COLUMNS` give back from Arrow."""
    when = datetime.datetime.fromtimestamp(m.timestamp / 1000, tz=datetime.timezone.utc)
    return (m.topic, m.partition, m.offset, when, m.key, m.value,
            [{"key": k, "value": v} for k, v in m.headers])


def _group(messages: list[Message]) -> dict[tuple[str, int], list[Message]]:
    groups: dict[tuple[str, int], list[Message]] = {}
    for m in messages:
        groups.setdefault((m.topic, m.partition), []).append(m)
    return groups


def assert_same_message(got: Message, want: Message, offset: int) -> None:
    """``got`` (read back, common model) carries what ``want`` (appended) said."""
    assert (got.topic, got.partition, got.offset) == (want.topic, want.partition, offset)
    assert got.value == want.value
    assert got.key == want.key
    for name, value in want.headers:
        assert (name, value) in got.headers, f"header {name!r} lost: {got.headers}"


class StoreTests:
    """Subclass in a plugin's tests; set ``format`` and ``config``."""

    format: ClassVar[str]
    config: ClassVar[dict[str, Any]] = {}
    topics: ClassVar[dict[str, int]] = {"TopicA": 2, "TopicB": 1}

    @pytest.fixture
    def path(self, tmp_path: Path) -> str:
        return str(tmp_path / "store")

    def open(self, path: str, mode: str = "a") -> segstore.Store:
        return segstore.open(path, format=self.format, mode=mode, **self.config)

    def write(self, path: str, messages: list[Message], batch: int = 50) -> None:
        with self.open(path) as store:
            for i in range(0, len(messages), batch):
                store.append_batch(messages[i:i + batch])

    def read_all(self, store: segstore.Store) -> dict[tuple[str, int], list[Message]]:
        out = {}
        for topic in store.topics():
            for part in store.partitions(topic):
                out[(topic, part)] = [store.to_common(r) for r in store.read(topic, part, 0)]
        return out

    def test_append_then_read(self, path: str) -> None:
        messages = sample_messages(1, 400, self.topics)
        self.write(path, messages)
        with self.open(path, "r") as store:
            got = self.read_all(store)
        want = _group(messages)
        assert set(got) == set(want)
        for tp, msgs in want.items():
            assert len(got[tp]) == len(msgs)
            for i, (g, w) in enumerate(zip(got[tp], msgs, strict=True)):
                assert_same_message(g, w, i)

    def test_append_results_are_offsets(self, path: str) -> None:
        messages = sample_messages(2, 60, self.topics)
        with self.open(path) as store:
            results = store.append_batch(messages[:30]) + [store.append(m) for m in messages[30:]]
        seen: dict[tuple[str, int], int] = {}
        for m, r in zip(messages, results, strict=True):
            expected = seen.get((m.topic, m.partition), 0)
            assert (r.topic, r.partition, r.offset) == (m.topic, m.partition, expected)
            seen[(m.topic, m.partition)] = expected + 1

    def test_reopen_continues_offsets(self, path: str) -> None:
        first, second = sample_messages(3, 100, self.topics), sample_messages(4, 100, self.topics)
        self.write(path, first)
        self.write(path, second)
        with self.open(path, "r") as store:
            for tp, msgs in _group(first + second).items():
                assert store.offset_range(*tp) == (0, len(msgs))
                got = [store.to_common(r) for r in store.read(*tp, offset=0)]
                for i, (g, w) in enumerate(zip(got, msgs, strict=True)):
                    assert_same_message(g, w, i)

    def test_read_from_offset_and_count(self, path: str) -> None:
        messages = sample_messages(5, 200, self.topics)
        self.write(path, messages)
        tp, msgs = max(_group(messages).items(), key=lambda kv: len(kv[1]))
        with self.open(path, "r") as store:
            got = [store.to_common(r) for r in store.read(*tp, offset=7, count=5)]
        assert [g.offset for g in got] == list(range(7, 12))
        assert [g.value for g in got] == [m.value for m in msgs[7:12]]

    def test_scan_sees_every_message_once(self, path: str) -> None:
        messages = sample_messages(6, 300, self.topics)
        self.write(path, messages)
        with self.open(path, "r") as store:
            scanned = [store.to_common(r) for r in store.scan()]
        assert sorted((m.topic, m.partition, m.offset) for m in scanned) == sorted(
            (tp[0], tp[1], i) for tp, msgs in _group(messages).items() for i in range(len(msgs)))

    # -- the columnar API (segstore.columns): the same records as the object API ----------
    def _rows(self, store: segstore.Store, **where: Any) -> list[tuple]:
        rows: list[tuple[Any, ...]] = []
        for batch in store.scan_arrow(columns=COMPARED_COLUMNS, **where):
            assert batch.schema == project(COMMON_SCHEMA, COMPARED_COLUMNS)
            rows.extend(zip(*(batch.column(name).to_pylist() for name in COMPARED_COLUMNS), strict=True))
        return rows

    def test_scan_arrow_equals_scan(self, path: str) -> None:
        self.write(path, sample_messages(12, 300, self.topics))
        with self.open(path, "r") as store:
            want = [common_row(store.to_common(r)) for r in store.scan()]
            assert self._rows(store) == want
            full = list(store.scan_arrow())
            # Every format's schema starts with the common columns; its own fields follow.
            assert full and all(b.schema == full[0].schema for b in full)
            assert full[0].schema.names[:len(COMMON_SCHEMA)] == COMMON_SCHEMA.names
            assert sum(b.num_rows for b in full) == len(want)

    def test_scan_arrow_one_partition_from_offset(self, path: str) -> None:
        messages = sample_messages(13, 300, self.topics)
        self.write(path, messages)
        with self.open(path, "r") as store:
            for (topic, part), msgs in _group(messages).items():
                for offset in (0, 5, len(msgs) - 1, len(msgs)):
                    want = [common_row(store.to_common(r)) for r in store.read(topic, part, offset)]
                    assert self._rows(store, topic=topic, partition=part, offset=offset) == want

    def test_scan_arrow_position_range(self, path: str) -> None:
        self.write(path, sample_messages(14, 200, self.topics))
        with self.open(path, "r") as store:
            positions = [p for b in store.scan_arrow(columns=["position"])
                         for p in b.column("position").to_pylist()]
            if any(a >= b for a, b in itertools.pairwise(positions)):
                pytest.skip("positions are per log file here, not one increasing log position")
            everything = self._rows(store)
            # A range from one record's position to another's holds exactly the records between.
            start, end = positions[len(positions) // 3], positions[2 * len(positions) // 3]
            want = [row for row, pos in zip(everything, positions, strict=True) if start <= pos < end]
            assert self._rows(store, start=start, end=end) == want

    def test_read_only_store_refuses_appends(self, path: str) -> None:
        self.write(path, sample_messages(7, 5, self.topics))
        with self.open(path, "r") as store, pytest.raises(ReadOnlyError):
            store.append(sample_messages(8, 1, self.topics)[0])

    def test_closed_store_refuses_use(self, path: str) -> None:
        store = self.open(path)
        store.close()
        store.close()  # idempotent
        with pytest.raises(StoreClosedError):
            store.append(sample_messages(9, 1, self.topics)[0])

    def test_verify_clean_after_writes(self, path: str) -> None:
        self.write(path, sample_messages(10, 300, self.topics))
        with self.open(path, "r") as store:
            assert store.verify() == []

    def test_dump_text_is_the_dump_lines(self, path: str) -> None:
        # what the CLI's text dump writes (dump_text, a format's batch path) is dump's lines
        messages = sample_messages(16, 120, self.topics)
        self.write(path, messages)
        topic, partition = messages[0].topic, messages[0].partition
        with self.open(path, "r") as store:
            for where in ({}, {"topic": topic, "partition": partition}, {"index": True}):
                want = "".join(line.text + "\n" for line in store.dump(**where))
                got = b"".join(bytes(block) for block in store.dump_text(**where))
                assert got.decode("utf-8", "surrogatepass") == want
                assert want

    def test_dump_between_two_times_is_the_dump_of_those_offsets(self, path: str) -> None:
        # dump_json(begin=, end=): the whole dump's objects of the records at offsets_between's
        # offsets (a seek by the format's own lookup time), in any order the format dumps in; and
        # dump_json(offsets=) those of the offsets given
        messages = sample_messages(17, 160, self.topics)
        self.write(path, messages[:80])
        wall = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
        time.sleep(0.005)       # a time between the halves for formats that look up by store time
        self.write(path, messages[80:])
        middle = messages[80].timestamp
        with self.open(path, "r") as store:
            whole = sum(store.offset_range(t, p)[1] - store.offset_range(t, p)[0]
                        for t in store.topics() for p in store.partitions(t))
            # offsets= (what dump --follow asks): each partition but its first and last record
            offsets = {(t, p): (store.offset_range(t, p)[0] + 1, store.offset_range(t, p)[1] - 1)
                       for t in store.topics() for p in store.partitions(t)}
            want = sorted(_canonical(store.to_json(r)) for (t, p), (a, b) in offsets.items() if a < b
                          for r in store.read(t, p, a, b - a))
            got = sorted(_canonical(json.loads(line)) for line in b"".join(
                bytes(block) for block in store.dump_json(offsets=offsets)).splitlines())
            assert got == want and 0 < len(want) < whole
            topic = messages[0].topic
            try:
                store.offset_for_time(topic, store.partitions(topic)[0], middle)
            except UnsupportedOperationError:       # no lookups by time: no windows either, said so
                with pytest.raises(UnsupportedOperationError):
                    list(store.dump_json(begin=middle))
                return
            held_counts = []
            for begin, end in ((None, None), (wall, None), (None, wall), (middle, None),
                               (middle - 20, middle + 20), (wall + 86_400_000, None), (0, 0)):
                windows = store.time_windows(None, None, begin, end)
                windows = windows if windows is not None else {
                    (t, p): store.offset_range(t, p) for t in store.topics() for p in store.partitions(t)}
                want = sorted(_canonical(store.to_json(r)) for (t, p), (a, b) in windows.items()
                              for r in store.read(t, p, a, b - a))
                got = sorted(_canonical(json.loads(line)) for line in b"".join(
                    bytes(block) for block in store.dump_json(begin=begin, end=end)).splitlines())
                assert got == want, (begin, end)
                held_counts.append(len(want))
            assert held_counts[0] == whole
            assert any(0 < held < whole for held in held_counts), held_counts

    # -- LogView and the index layouts: what the core's generic code needs of every store --------
    def test_store_is_a_log_view(self, path: str) -> None:
        self.write(path, sample_messages(15, 50, self.topics))
        with self.open(path, "r") as store:
            assert isinstance(store, LogView)
            for topic in store.topics():
                for part in store.partitions(topic):
                    start, end = store.offset_range(topic, part)
                    columns = ["offset", "position", "size", "key", store.time_column]
                    batches = list(store.scan_arrow(columns, topic=topic, partition=part, offset=start))
                    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
                    assert offsets == list(range(start, end))
                    positions = [p for b in batches for p in b.column("position").to_pylist()]
                    sizes = [n for b in batches for n in b.column("size").to_pylist()]
                    # positions(): the same placements, from any offset on, in chunks of equal columns
                    for first in (start, (start + end) // 2, end):
                        chunks = list(store.positions(topic, part, first))
                        assert all(len(o) == len(p) == len(n) for o, p, n in chunks)
                        got = [[int(v) for chunk in chunks for v in chunk[i]] for i in range(3)]
                        cut = first - start
                        assert got == [offsets[cut:], positions[cut:], sizes[cut:]]
                    for offset, position in list(zip(offsets, positions, strict=True))[::7]:
                        record = store.record_at(topic, part, offset, position)
                        assert record is not None and store.to_common(record).offset == offset
                    home, _ = store.index_home(topic, part)
                    assert home.startswith(store.path)

    def test_index_layouts_answer_like_a_scan(self, path: str) -> None:
        """Every layout, native or extra, over this format: lookups equal a scan of the log.

        Timestamps repeat and go back (Kafka takes any order: a time lookup is the first offset at or
        after the time, not what a binary search over unordered times lands on), two keys have one
        Java hash (``"Aa"`` and ``"BB"``: a key index that returns its hash's records unchecked gives
        the other key's), and lookups ask before the start, past the end, for a key no record has
        and for the newest ``max_hits``."""
        messages = sample_messages(16, 240, self.topics)
        rng = random.Random(16)
        for i, m in enumerate(messages):
            m.timestamp = 1_700_000_000_000 + 10 * (i // 3) - rng.choice([0, 0, 0, 25])
            m.key = rng.choice([b"key-Aa", b"key-BB", m.key, m.key])
        with segstore.open(path, format=self.format, mode="a", indexes=list(LAYOUT_NAMES),
                           **self.config) as store:
            for i in range(0, len(messages), 40):
                store.append_batch(messages[i:i + 40])
        with segstore.open(path, format=self.format, mode="r", indexes=list(LAYOUT_NAMES),
                           **self.config) as store:
            indexes = store.indexes
            assert isinstance(store, LogView) and indexes is not None and indexes.verify() == []
            for topic in store.topics():
                for part in store.partitions(topic):
                    stream = Stream(topic, part)
                    start, end = store.offset_range(topic, part)
                    cols: dict[str, list[Any]] = {name: [] for name in ("offset", "key", store.time_column)}
                    for batch in store.scan_arrow(list(cols), topic=topic, partition=part):
                        for name, values in cols.items():
                            values.extend(batch.column(name).cast(pa.int64()).to_pylist()
                                          if name == store.time_column else batch.column(name).to_pylist())
                    offsets, keys, times = cols["offset"], cols["key"], cols[store.time_column]
                    for name in ("queue", "offset"):
                        for offset in offsets[::9]:
                            record = indexes[name].read_at(stream, offset)
                            assert record is not None and store.to_common(record).offset == offset
                        assert indexes[name].read_at(stream, start - 1) is None, (name, stream)
                        assert indexes[name].read_at(stream, end) is None, (name, stream)
                    for when in [min(times) - 1, *sorted(set(times)), max(times) + 1]:
                        want = next((o for o, t in zip(offsets, times, strict=True) if t >= when), None)
                        assert indexes["time"].offset_for_time(stream, when) == want, (stream, when)
                    for key in [*sorted({k for k in keys if k is not None})[::4], b"key-Aa", b"key-BB",
                                b"no-such-key"]:
                        want = [o for o, k in zip(offsets, keys, strict=True) if k == key]
                        assert indexes["key"].find_key(stream, key) == want, (stream, key)
                        assert indexes["key"].find_key(stream, key, 2) == want[-2:], (stream, key)

    def test_crash_keeps_everything_appended(self, path: str) -> None:
        messages = sample_messages(11, 150, self.topics)
        store = self.open(path)
        store.append_batch(messages)
        store.abandon()
        with self.open(path) as again:   # append mode recovers
            got = self.read_all(again)
            assert again.verify() == []
        for tp, msgs in _group(messages).items():
            assert [g.value for g in got[tp]] == [m.value for m in msgs]


def make_state_machine(format: str, config: dict[str, Any], topics: dict[str, int]) -> type:
    """A ``RuleBasedStateMachine`` class comparing a ``format`` store with an in-memory model.

    Use as ``TestX = make_state_machine(...).TestCase`` in a test module.
    """
    import tempfile

    partitions = [(t, p) for t, n in sorted(topics.items()) for p in range(n)]

    class StoreModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self._tmp = tempfile.TemporaryDirectory()
            self.path = str(Path(self._tmp.name) / "store")
            self.store = segstore.open(self.path, format=format, mode="a", **config)
            self.model: dict[tuple[str, int], list[Message]] = {tp: [] for tp in partitions}

        @rule(where=st.sampled_from(partitions), data=st.data())
        def append_batch(self, where: tuple[str, int], data: Any) -> None:
            batch = data.draw(st.lists(st.builds(
                Message, topic=st.just(where[0]), partition=st.just(where[1]), key=_KEYS, value=_VALUES,
                headers=st.lists(st.tuples(_HEADER_NAMES, _HEADER_VALUES), max_size=2,
                                 unique_by=lambda h: h[0]),
                timestamp=st.integers(1_600_000_000_000, 1_800_000_000_000)), min_size=1, max_size=8))
            results = self.store.append_batch(batch)
            start = len(self.model[where])
            assert [r.offset for r in results] == list(range(start, start + len(batch)))
            self.model[where].extend(batch)

        @rule()
        def reopen(self) -> None:
            self.store.close()
            self.store = segstore.open(self.path, format=format, mode="a", **config)

        @rule()
        def crash(self) -> None:
            self.store.abandon()
            self.store = segstore.open(self.path, format=format, mode="a", **config)

        @precondition(lambda self: any(self.model.values()))
        @rule(data=st.data())
        def read_from(self, data: Any) -> None:
            tp = data.draw(st.sampled_from([tp for tp, msgs in self.model.items() if msgs]))
            offset = data.draw(st.integers(0, len(self.model[tp]) - 1))
            topic, partition = tp
            got = [self.store.to_common(r) for r in self.store.read(topic, partition, offset=offset, count=3)]
            want = self.model[tp][offset:offset + 3]
            assert len(got) == len(want)
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                assert_same_message(g, w, offset + i)

        @invariant()
        def offsets_match_model(self) -> None:
            for tp, msgs in self.model.items():
                if msgs:
                    assert self.store.offset_range(*tp) == (0, len(msgs))

        def teardown(self) -> None:
            self.store.close()
            self._tmp.cleanup()

    StoreModel.TestCase.settings = settings(max_examples=15, stateful_step_count=12, deadline=None)
    return StoreModel

