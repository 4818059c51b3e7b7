"""The ``headers`` column of RocketMQ -> Kafka batches built in one C pass (``_speedups.header_lists``)
equals its numpy reference (``conversion._header_lists``) on generated slots and properties, and the C
pass refuses offsets outside their buffers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import columnar, conversion

pytestmark = pytest.mark.skipif(columnar._speedups is None, reason="the C accelerator is not built")

texts = st.text(max_size=12)
blobs = st.binary(max_size=12)


@st.composite
def header_inputs(draw: st.DrawFn) -> tuple:
    """``(n, slots, prop_offsets, names, values)`` as ``_native_batch`` hands them over, with sliced
    arrays (a non-zero Arrow offset) and slots some rows lack."""
    n = draw(st.integers(0, 12))
    lead = draw(st.integers(0, 3))          # rows sliced off the front of every column
    slots = []
    for i in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["int", "string", "binary", "const"]))
        if kind == "int":           # int64 (offsets, times) and int32 (flags, queue ids) columns
            bits = draw(st.sampled_from([64, 32]))
            ints = st.integers(-2**(bits - 1), 2**(bits - 1) - 1)
            values = pa.array(draw(st.lists(ints, min_size=n + lead, max_size=n + lead)), pa.int64() if
                              bits == 64 else pa.int32())
        elif kind == "string":
            values = pa.array(draw(st.lists(texts, min_size=n + lead, max_size=n + lead)), pa.string())
        elif kind == "binary":
            values = pa.array(draw(st.lists(blobs, min_size=n + lead, max_size=n + lead)), pa.binary())
        else:
            values = draw(blobs)
        if not isinstance(values, bytes):
            values = values.slice(lead)
        mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
        slots.append((f"rmq.slot{i}", values, mask))
    rows = draw(st.lists(st.lists(st.tuples(texts, blobs), max_size=4), min_size=n + lead, max_size=n + lead))
    kind = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    props = pa.array([[{"key": k, "value": v} for k, v in row] for row in rows], kind).slice(lead)
    offsets = np.asarray(props.offsets.to_numpy(), np.int64)
    names, values = props.flatten().flatten()
    return n, slots, offsets - offsets[0], names, values


@given(header_inputs())
@settings(max_examples=300, deadline=None)
def test_c_header_lists_equal_the_numpy_reference(inputs: tuple) -> None:
    n, slots, offsets, names, values = inputs
    built = conversion._header_lists_c(n, slots, offsets, names, values)
    assert built is not None
    reference = conversion._header_lists(n, slots, offsets, names, values) if slots else None
    if reference is None:       # the reference needs a slot (np.stack); compare with the rows made by hand
        reference = pa.array([[{"key": conversion.RMQ_PROPERTY_PREFIX + k, "value": v}
                               for k, v in zip(names[offsets[i]:offsets[i + 1]].to_pylist(),
                                               values[offsets[i]:offsets[i + 1]].to_pylist(), strict=True)]
                              for i in range(n)], built.type)
    assert built.to_pylist() == reference.to_pylist()
    built.validate(full=True)


def test_c_header_lists_refuse_offsets_outside_their_buffers() -> None:
    speedups = columnar._speedups
    empty = np.zeros(1, np.int32)
    props = (b"rmq.p.", np.zeros(2, np.int64), empty, b"", empty, b"")
    bad = np.array([0, 99], np.int32)           # a value past the end of its 3 bytes
    with pytest.raises(ValueError, match="offsets inside their buffers"):
        speedups.header_lists(1, ((b"rmq.x", 1, bad, b"abc", None),), props)
    with pytest.raises(ValueError, match="offsets inside their buffers"):
        speedups.header_lists(1, (), (b"rmq.p.", np.array([0, 1], np.int64), empty, b"", empty, b""))
    with pytest.raises(ValueError, match="offsets inside their buffers"):
        speedups.header_lists(2, ((b"rmq.x", 0, np.zeros(1, np.int64), None, None),), props)


def test_c_header_lists_write_ints_as_str_at_every_length() -> None:
    """The decimal texts at each digit count's edges (the length comes from the bit length and
    one comparison, the digits two at a time): ``str()`` of every one."""
    edges = [0, 1, -1, 2**63 - 1, -2**63, -2**63 + 1]
    for digits in range(1, 19):
        edges += [10**digits - 1, 10**digits, 10**digits + 1, -(10**digits - 1), -(10**digits)]
    edges += [2**k for k in range(63)] + [-(2**k) for k in range(63)]
    n = len(edges)
    slots = [("rmq.n", pa.array(edges, pa.int64()), np.ones(n, bool))]
    empty = pa.array([], pa.string())
    built = conversion._header_lists_c(n, slots, np.zeros(n + 1, np.int64), empty, empty.cast(pa.binary()))
    assert built is not None
    assert [row[0]["value"] for row in built.to_pylist()] == [str(v).encode() for v in edges]
