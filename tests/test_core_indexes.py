"""The core's index entry types (segstore.indexes): the one Java hash, the key hashes the generic
key layout computes in numpy over raw key bytes equal to it, and the dense queue's two appends."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segstore.errors import CorruptIndexError
from segstore.indexes.dense import CQ_DTYPE, ConsumeQueue
from segstore.indexes.javahash import string_hash, string_hashes, unit_hashes
from segstore.indexes.keyhash import build_key, index_key_hash, index_key_hashes
from segstore.layouts.key import key_hashes, key_text

# Any text, astral characters included (two UTF-16 units each); lone surrogates come from key
# bytes that are not UTF-8 (surrogateescape), one unit each as in Java.
_TEXT = st.text(max_size=80)


def _java(text: str) -> int:
    """String.hashCode spelled out from its definition, the reference for the reference."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.lists(_TEXT, max_size=20))
def test_string_hashes_equal_the_java_definition(texts: list[str]) -> None:
    assert [string_hash(t) for t in texts] == [_java(t) for t in texts]
    assert string_hashes(texts).tolist() == [_java(t) for t in texts]


@given(_TEXT, st.lists(_TEXT, max_size=10))
def test_unit_hashes_continue_from_a_prefix(prefix: str, texts: list[str]) -> None:
    encoded = [t.encode("utf-16-be", "surrogatepass") for t in texts]
    units = np.frombuffer(b"".join(encoded), dtype=">u2")
    got = unit_hashes(units, [len(e) // 2 for e in encoded], string_hash(prefix) & 0xFFFFFFFF)
    assert got.tolist() == [_java(prefix + t) for t in texts]


@given(st.text(max_size=10), st.lists(st.one_of(st.binary(max_size=40), _TEXT.map(
    lambda t: t.encode("utf-8", "surrogatepass"))), max_size=20))
def test_key_hashes_over_raw_bytes_equal_the_index_hash(topic: str, keys: list[bytes]) -> None:
    values = pa.array(keys, type=pa.binary())
    want = [index_key_hash(build_key(topic, key_text(k))) for k in keys]
    assert key_hashes(topic, values).tolist() == want
    assert index_key_hashes([build_key(topic, key_text(k)) for k in keys]).tolist() == want
    # a slice of an Arrow array (its buffers start before it) hashes the same
    assert key_hashes(topic, pa.array([b"pad", *keys], type=pa.binary()).slice(1)).tolist() == want


_ROWS = st.lists(st.tuples(st.integers(0, 2**62), st.integers(1, 2**31 - 1), st.integers(-2**63, 2**63 - 1)),
                 max_size=9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_ROWS, max_size=8), per_file=st.integers(1, 5))
def test_packed_rows_append_as_arrays_do(tmp_path_factory, batches, per_file) -> None:
    """A dense queue fed the rows' bytes (the RocketMQ append's C-encoded rows) holds the files an
    array append writes, rolling included: same names, same bytes, same entries."""
    root = tmp_path_factory.mktemp("cq")
    queues = [ConsumeQueue(str(root / name), "T", 0, per_file * CQ_DTYPE.itemsize, writable=True)
              for name in ("array", "packed")]
    for rows in batches:
        arr = np.array(rows, dtype=CQ_DTYPE)
        queues[0].append_array(arr)
        queues[1].append_packed(memoryview(arr.tobytes()))
    for q in queues:
        q.flush()
    assert queues[1].max_offset == queues[0].max_offset == sum(map(len, batches))
    assert queues[1].entries(0).tolist() == queues[0].entries(0).tolist()
    names = [sorted(p.name for p in (root / name).iterdir()) if (root / name).exists() else []
             for name in ("array", "packed")]
    assert names[0] == names[1]
    for name in names[0]:
        assert (root / "packed" / name).read_bytes() == (root / "array" / name).read_bytes()
    for q in queues:
        q.close()


def test_packed_rows_must_be_whole_entries(tmp_path) -> None:
    queue = ConsumeQueue(str(tmp_path / "q"), "T", 0, 4 * CQ_DTYPE.itemsize, writable=True)
    queue.append_array(np.zeros(1, dtype=CQ_DTYPE))
    with pytest.raises(CorruptIndexError, match="whole entries of 20 bytes, found 21"):
        queue.append_packed(bytes(21))
    assert queue.max_offset == 1
    queue.close()
