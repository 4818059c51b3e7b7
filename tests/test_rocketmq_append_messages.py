"""RocketMQ ``append_batch`` of :class:`segstore.records.Message` objects (what the Spark writer's
commit appends) takes the plain C path where the message is plain (no headers), writing what the
general path writes for them, byte for byte; a Message it cannot take still raises the general
path's typed error.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_rocketmq import fastappend
from segstore_rocketmq.store import RocketMQStore
from test_rocketmq_append_arrow import SMALL, store_files

from segstore.errors import SegstoreError
from segstore.records import Message

message = st.builds(
    Message,
    topic=st.sampled_from(["A", "Bee"]),
    partition=st.integers(0, 3),
    key=st.one_of(st.none(), st.binary(max_size=5), st.sampled_from([b"k1", b"a b", b"\xff"])),
    value=st.one_of(st.none(), st.binary(max_size=40)),
    timestamp=st.one_of(st.just(-1), st.integers(0, 1 << 41)),
    headers=st.one_of(st.just([]), st.lists(st.tuples(st.sampled_from(["h", "TAGS"]), st.binary(max_size=3)),
                                            max_size=2)),
)


def appended(path: Path, messages: list[Message], plain: bool, monkeypatch) -> tuple[dict, str | None]:
    """The store's files after ``append_batch(messages)`` and the error raised, if any; ``plain``
    False: the plain path switched off (the general path, the reference)."""
    with monkeypatch.context() as patch:
        if not plain:
            patch.setattr(fastappend, "encode_batch", lambda *args: None)   # the store takes it from there
        error = None
        try:
            with RocketMQStore(str(path), "a", SMALL, clock=lambda: 1_700_000_000_000) as store:
                store.append_batch(messages)
        except SegstoreError as err:
            error = f"{type(err).__name__}: {err}"
    return store_files(path), error


@given(st.lists(message, min_size=1, max_size=20))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_messages_are_written_as_the_general_path_writes_them(tmp_path_factory, monkeypatch, messages):
    root = tmp_path_factory.mktemp("messages")
    assert appended(root / "plain", messages, True, monkeypatch) == \
        appended(root / "general", messages, False, monkeypatch)


def test_plain_messages_take_the_plain_path(tmp_path, monkeypatch):
    written = []
    real = RocketMQStore._write_plain
    monkeypatch.setattr(RocketMQStore, "_write_plain",
                        lambda self, batch: written.append(1) or real(self, batch))
    messages = [Message(topic="T", value=bytes([i]) * i, key=f"k{i}".encode(), partition=i % 4,
                        timestamp=1_000 + i) for i in range(50)]
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        store.append_batch(messages)
        assert [(m.body, m.properties, m.born_timestamp) for m in store.scan()] == \
            [(bytes([i]) * i, {"KEYS": f"k{i}"}, 1_000 + i) for i in range(50)]
    assert written == [1]


@pytest.mark.skipif(fastappend._speedups is None, reason="segstore_rocketmq._speedups not built")
def test_the_c_paths_results_are_not_walked_by_the_collector(tmp_path):
    """A result the C paths make holds a str, ints and a dict of atomic values (no cycle through it):
    untracked, live results cost the garbage collector nothing (1 us an append when they were)."""
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        single = store.append({"topic": "T", "body": b"x", "keys": ["k"]})
        batch = store.append_batch([{"topic": "T", "body": b"y"}, {"topic": "T", "queue_id": 1}])
    assert [gc.is_tracked(r) for r in (single, *batch)] == [False] * 3
    assert single.extra["msg_id"] and batch[1].offset == 0
