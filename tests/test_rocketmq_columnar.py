"""The RocketMQ columnar decode (segstore_rocketmq.columnar) and RocketMQStore.scan_arrow.

The C path (``_speedups``) is checked against the pure-Python reference, which
decodes through ``message.decode``: on generated regions (both magics, IPv6
hosts, odd property strings) with and without damage (flipped bytes, cut
records), the rows, where the walk stops and why, and the Arrow columns must be
equal.  scan_arrow is checked against the object API (scan, read) on the broker
fixtures and on damaged stores (same typed error, same position).
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import FIXTURES, ROCKETMQ_FIXTURES, copy_writable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_rocketmq import columnar
from segstore_rocketmq.javacompat import string_hash
from segstore_rocketmq.message import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    PREFIX,
    SYSFLAG_HOST_MASK,
    Host,
    RocketMQMessage,
    body_crc,
    encode,
    encode_parts,
    encode_topic,
    encoded_size,
    host_flags,
)
from segstore_rocketmq.store import RocketMQStore

import segstore
from segstore import cli, files, jsontext
from segstore.columns import ROCKETMQ_SCHEMA, project
from segstore.errors import (
    ConfigError,
    CorruptDataError,
    NotFoundError,
    OffsetOutOfRangeError,
    SegstoreError,
    UnrepairedDataError,
)
from segstore.indexes.keyhash import index_key_hash
from segstore.records import Message

needs_c = pytest.mark.skipif(columnar._speedups is None, reason="segstore_rocketmq._speedups not built")
ROOT = FIXTURES / "rocketmq"


@pytest.fixture(params=["c", "python"])
def accel(request, monkeypatch):
    """Run a test with the C accelerator and with the pure-Python reference."""
    if request.param == "c" and columnar._speedups is None:
        pytest.skip("segstore_rocketmq._speedups not built")
    if request.param == "python":
        monkeypatch.setattr(columnar, "_speedups", None)
    return request.param


# -- generated regions ---------------------------------------------------------------------

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
               max_size=8)
#: Raw properties strings, including what encode never writes: repeated names, items without
#: a separator, empty names, trailing separators, surrogates and bad UTF-8 (both refused by the walk,
#: as by message.decode(java_text=False): see columnar.java_row).
prop_item = st.one_of(
    st.tuples(st.sampled_from(["TAGS", "KEYS", "a", "", "UNIQ_KEY"]), text).map(
        lambda kv: f"{kv[0]}\x01{kv[1]}"),
    st.tuples(st.just("KEYS"), st.lists(st.sampled_from(["k1", "", " ", "κ"]), max_size=4)).map(
        lambda kv: f"KEYS\x01{' '.join(kv[1])}"),
    text,
)
raw_props = st.one_of(
    st.lists(prop_item, max_size=5).map(lambda items: "\x02".join(items).encode("utf-8")),
    st.sampled_from([b"", b"\x02", b"a\x01\xed\xa0\x80", b"a\x01\xff",
                     b"\x01\x01\x02TAGS\x01x\x02TAGS\x01y"]),
)
ipv4 = st.binary(min_size=4, max_size=4)
ipv6 = st.binary(min_size=16, max_size=16)
host = st.builds(Host, st.one_of(ipv4, ipv6), st.integers(-(2**31), 2**31 - 1))
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def stored(draw, pos: int) -> bytes:
    """One message as stored at view position ``pos`` (its physical offset), with a raw properties string."""
    magic = draw(st.sampled_from([MESSAGE_MAGIC, MESSAGE_MAGIC_V2]))
    msg = RocketMQMessage(
        topic=draw(st.sampled_from(["T", "TopicA", "ünï", ""])), queue_id=draw(i32),
        body=draw(st.binary(max_size=40)),
        flag=draw(i32), queue_offset=draw(i64), physical_offset=pos, sys_flag=draw(st.integers(0, 0xFF)),
        born_timestamp=draw(i64), born_host=draw(host), store_timestamp=draw(i64), store_host=draw(host),
        reconsume_times=draw(i32), prepared_transaction_offset=draw(i64), magic=magic)
    props = draw(raw_props)
    topic_field = encode_topic(msg.topic, magic)
    msg.sys_flag = (msg.sys_flag & ~SYSFLAG_HOST_MASK) | host_flags(msg.born_host, msg.store_host)
    msg.size = encoded_size(len(msg.body), len(topic_field), len(props), msg.sys_flag)
    crc = body_crc(msg.body) if draw(st.integers(0, 9)) else draw(i32)     # sometimes a wrong CRC
    return b"".join(encode_parts(msg, topic_field, props, crc))


@st.composite
def region(draw) -> bytes:
    """Messages, then a BLANK, zeros or nothing; sometimes damaged (bytes changed, cut short)."""
    data = b""
    for _ in range(draw(st.integers(0, 6))):
        data += draw(stored(len(data)))
    tail = draw(st.sampled_from(["none", "zeros", "blank", "short"]))
    if tail == "zeros":
        data += bytes(draw(st.integers(1, 100)))
    elif tail == "blank":
        data += PREFIX.pack(draw(st.sampled_from([8, 16, 3])), BLANK_MAGIC) + bytes(8)
    elif tail == "short":
        data += bytes(draw(st.integers(0, 7))) + b"\x01"
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        if data:
            at = draw(st.integers(0, len(data) - 1))
            data[at] = draw(st.integers(0, 255))
    if data and draw(st.booleans()):
        del data[draw(st.integers(0, len(data) - 1)):]
    return bytes(data)


def both_decode(data: bytes, strict: bool, cap: int = 16):
    view = memoryview(data)
    rows_c, rows_py = columnar.rows_of(cap), columnar.rows_of(cap)
    c = columnar._speedups.decode_region(view, 0, len(data), len(data), 1000, rows_c.i8, rows_c.i4, rows_c.u8,
                                         strict)
    rows_c.n = c[0]
    py = columnar.decode_region_py(view, 0, len(data), len(data), 1000, rows_py, strict)
    return view, c, py, rows_c, rows_py


@needs_c
@given(region(), st.booleans())
def test_c_region_decode_equals_the_message_py_reference(data, strict):
    view, c, py, rows_c, rows_py = both_decode(data, strict)
    assert c == py
    assert rows_c.equals(rows_py)
    if c[0]:
        c_batch = columnar.build_batch(view, rows_c)
        saved = columnar._speedups
        try:
            columnar._speedups = None
            py_batch = columnar.build_batch(view, rows_py)
        finally:
            columnar._speedups = saved
        for name in ROCKETMQ_SCHEMA.names:
            assert c_batch.column(name).equals(py_batch.column(name)), name
        c_codes = columnar.tags_hashes(view, rows_c)
        c_counts, c_hashes, c_tags = columnar.index_entries(view, rows_c)
        try:
            columnar._speedups = None
            py_codes = columnar.tags_hashes(view, rows_py)
            py_counts, py_hashes, py_tags = columnar.index_entries(view, rows_py)
        finally:
            columnar._speedups = saved
        assert c_codes.tolist() == py_codes.tolist() == c_tags.tolist() == py_tags.tolist()
        assert (c_counts.tolist(), c_hashes.tolist()) == (py_counts.tolist(), py_hashes.tolist())


#: Values long enough for the C hash's 8- and 4-byte ASCII blocks, ASCII mixed with 2- to 4-byte UTF-8.
long_value = st.text(alphabet=st.one_of(st.characters(min_codepoint=0x21, max_codepoint=0x7E),
                                        st.sampled_from(["é", "€", "😀", "κ"])), max_size=40)


@needs_c
@given(st.lists(st.tuples(st.sampled_from(["T", "TopicA", "ünï"]), long_value, long_value,
                          st.lists(long_value, max_size=3)), min_size=1, max_size=4))
def test_c_key_and_tags_hashes_of_long_values_equal_java_string_hashcode(messages):
    """The C hash takes ASCII runs 8 and then 4 bytes at a time (``java_hash_utf8``): a message's TAGS
    hash and its index entries (topic#UNIQ_KEY, topic#token per KEYS token) equal Java's
    ``String.hashCode`` of them (``javacompat.string_hash``, ``keyhash.index_key_hash``) whatever the
    values' lengths and where the multi-byte characters fall."""
    data, tpos, tlen, ppos, plen, expected_tags, expected = b"", [], [], [], [], [], []
    for topic, tags, uniq, keys in messages:
        topic_bytes = topic.encode()
        props = f"TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}\x02KEYS\x01{' '.join(keys)}".encode()
        tpos.append(len(data))
        tlen.append(len(topic_bytes))
        ppos.append(len(data) + len(topic_bytes))
        plen.append(len(props))
        data += topic_bytes + props
        expected_tags.append(string_hash(tags) if tags else 0)
        own = ([uniq] if uniq else []) + [k for k in " ".join(keys).split(" ") if k]
        expected.append([index_key_hash(f"{topic}#{k}") for k in own])
    n = len(messages)
    tags_out, counts, hashes = np.zeros(n, np.int64), np.zeros(n, np.int32), np.zeros(64, np.int64)
    columnar._speedups.tags_hashes(memoryview(data), np.array(ppos, np.int64), np.array(plen, np.int32),
                                   tags_out)
    total = columnar._speedups.index_entries(
        memoryview(data), np.array(tpos, np.int64), np.array(tlen, np.int32), np.array(ppos, np.int64),
        np.array(plen, np.int32), np.zeros(n, np.int32), counts, hashes, np.zeros(n, np.int64))
    assert tags_out.tolist() == expected_tags
    assert counts.tolist() == [len(e) for e in expected]
    assert hashes[:total].tolist() == [h for e in expected for h in e]


def _indexed_as_in_two_passes(data: bytes, cap: int, known: tuple[str, ...] = (),
                              cut: int | None = None) -> int:
    """``decode_region_indexed`` of ``data`` stops where ``decode_region`` stops, with the same rows, and
    finds for them what ``index_entries`` finds over those rows; and numbers the topics of their first
    ``cut`` rows (all: None) as the pure-Python ``topic_codes`` does over those rows, into a numbering
    that holds the topics ``known`` already (a walk's earlier batches)."""
    view = memoryview(data)
    rows_a, rows_b = columnar.rows_of(cap), columnar.rows_of(cap)
    walked, keys, numbered = columnar.decode_region_indexed(view, 0, len(data), len(data), 1000, rows_a)
    assert walked == columnar.decode_region(view, 0, len(data), len(data), 1000, rows_b)
    assert rows_a.equals(rows_b)
    assert keys is not None and numbered is not None
    found = keys.first(len(rows_a))
    expected = columnar.index_entries(view, rows_b)
    assert [a.tolist() for a in found] == [b.tolist() for b in expected]
    n = len(rows_a) if cut is None else min(cut, len(rows_a))
    codes_c = {name: k for k, name in enumerate(known)}
    codes_py = dict(codes_c)
    numbers = numbered.codes(view, rows_a, n, codes_c) if n else np.zeros(0, np.int32)
    saved = columnar._speedups
    try:
        columnar._speedups = None
        reference = columnar.topic_codes(view, rows_b.select(slice(0, n)), codes_py)
    finally:
        columnar._speedups = saved
    assert numbers.dtype == reference.dtype == np.int32
    assert numbers.tolist() == reference.tolist() and list(codes_c.items()) == list(codes_py.items())
    return len(rows_a)


topic_names = st.lists(st.sampled_from(["T", "TopicA", "ünï", "", "Other"]), unique=True, max_size=3)


@needs_c
@given(region(), st.integers(1, 8), topic_names, st.one_of(st.none(), st.integers(0, 8)))
def test_c_decode_with_index_entries_equals_the_decode_then_index_entries(data, cap, known, cut):
    _indexed_as_in_two_passes(data, cap, tuple(known), cut)


@needs_c
@pytest.mark.parametrize("bad_crc_at", [None, 700, 1500, 2047, 2048])
def test_c_decode_with_index_entries_over_thousands_of_rows_and_a_bad_crc(bad_crc_at):
    """The index entries are found 1,024 rows after their decode (``INDEX_ROWS``): over 2,600 rows of
    varied keys, and where a bad body CRC (strict) ends the rows before or after such a step, the same as
    two passes; and the topics' numbers, of all rows and of the rows before a cut (a torn row)."""
    data = bytearray()
    for i in range(2600):
        keys = " ".join(f"k{i * j}" for j in range(i % 4)) + (" ü" if i % 7 == 0 else "")
        props = {"TAGS": f"tag-{i % 5}", "KEYS": keys} if i % 3 else {"UNIQ_KEY": f"{i:032X}"}
        msg = RocketMQMessage(topic=("TopicA", "TopicB")[i % 11 == 0], queue_id=i % 4, body=bytes(i % 50),
                              queue_offset=i, physical_offset=len(data), properties=props,
                              sys_flag=0xC if i % 13 == 0 else 0)
        stored = encode(msg)
        if i == bad_crc_at:
            stored[11] ^= 1        # BODYCRC's last byte (after TOTALSIZE and MAGICCODE)
        data += stored
    assert _indexed_as_in_two_passes(bytes(data), 4096) == (2600 if bad_crc_at is None else bad_crc_at)
    assert _indexed_as_in_two_passes(bytes(data), 4096, ("TopicB",), cut=1200)


def _walk(data: bytes, strict: bool) -> tuple[list, tuple | None]:
    """A walk of ``data`` as one commitlog file (:func:`columnar.walk_file`): each batch's columns, tags
    hashes and index entries, then the error it ends in (type, position, message), if any."""
    view = memoryview(data)
    made = []
    try:
        for rows in columnar.walk_file(view, 0, len(data), 0, len(data), "f", strict=strict, batch_rows=3):
            own = columnar.view_of(view, rows)
            counts, hashes, tags = columnar.index_entries(own, rows)
            made.append((columnar.build_batch(own, rows), columnar.tags_hashes(own, rows).tolist(),
                         counts.tolist(), hashes.tolist(), tags.tolist()))
    except CorruptDataError as err:
        return made, (type(err), err.pos, err.message)
    return made, None


@needs_c
@given(region(), st.booleans())
def test_a_walk_reads_properties_that_are_not_utf8_as_java_in_c_as_in_the_reference(data, strict):
    """RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` reads properties with ``new String(bytes,
    UTF_8)``: a message whose properties are not UTF-8 (or hold a surrogate's three bytes) is no damage.
    The C walk stops at one and builds its row as Java reads it (``columnar.java_row``), then goes on in
    C: the same batches, hashes and error as the message-by-message reference."""
    c = _walk(data, strict)
    saved = columnar._speedups
    try:
        columnar._speedups = None
        py = _walk(data, strict)
    finally:
        columnar._speedups = saved
    assert c[1] == py[1] and len(c[0]) == len(py[0])
    for (c_batch, *c_hashes), (py_batch, *py_hashes) in zip(c[0], py[0], strict=True):
        assert c_batch.equals(py_batch) and c_hashes == py_hashes


@needs_c
@given(region(), st.booleans(), st.integers(0, columnar.FILL_ALL))
def test_c_decode_of_some_fields_fills_them_as_the_reference_and_refuses_the_others(data, strict, fill):
    view = memoryview(data)
    rows_c, rows_py = columnar.rows_of(64), columnar.rows_of(64)
    for block in (rows_c.i8, rows_c.i4, rows_c.u8):
        block.fill(0x5A)            # pooled memory may hold an earlier decode's values: not these
    c = columnar.decode_region(view, 0, len(data), len(data), 1000, rows_c, strict, fill)
    py = columnar.decode_region_py(view, 0, len(data), len(data), 1000, rows_py, strict)
    assert c == py                       # the same records decoded and checked, whatever is filled
    assert rows_c.filled == fill
    assert rows_c.equals(rows_py)        # field for field, those filled
    positions = rows_py["position"] - 1000
    at_c = columnar.rows_of(max(1, len(positions)))
    for block in (at_c.i8, at_c.i4, at_c.u8):
        block.fill(0x5A)
    assert columnar.decode_at(view, positions, len(data), 0, at_c, strict, fill) == len(positions)
    for name in (*columnar.I8_FIELDS, *columnar.I4_FIELDS, "born_ip", "store_ip"):
        group = columnar._FIELD_GROUP.get(name, 0)
        if group and not fill & group:
            with pytest.raises(LookupError, match=name):
                rows_c[name]
        elif name != "position":
            assert np.array_equal(at_c[name], rows_py[name]), name
    if c[0]:
        names = [n for n in ROCKETMQ_SCHEMA.names if not columnar.fill_for([n]) & ~fill]
        built = columnar.build_batch(view, rows_c, project(ROCKETMQ_SCHEMA, names))
        full = columnar.build_batch(view, rows_py)
        for name in names:
            assert built.column(name).equals(full.column(name)), name
        assert rows_c.select(slice(0, 1)).equals(rows_py.select(slice(0, 1)))


def test_every_column_names_the_fields_it_is_built_from():
    assert set(columnar._COLUMN_GROUPS) == set(ROCKETMQ_SCHEMA.names)
    assert columnar.fill_for(ROCKETMQ_SCHEMA.names) == columnar.FILL_ALL
    assert columnar.fill_for(["value", "offset"]) == 0
    assert columnar.fill_for(["no such column"]) == columnar.FILL_ALL


@needs_c
@settings(max_examples=30)
@given(region())
def test_a_projection_of_property_columns_builds_the_full_batch_columns(data):
    """A batch of some property columns (the keys alone skip copying every property) holds the
    columns the full batch holds."""
    view, c, _, rows, _ = both_decode(data, False)
    if not c[0]:
        return
    whole = columnar.build_batch(view, rows)
    for wanted in (["key"], ["key", "value", "keys"], ["key", "tags"], ["properties"], ["key", "headers"]):
        part = columnar.build_batch(view, rows, project(ROCKETMQ_SCHEMA, wanted))
        for name in wanted:
            assert part.column(name).equals(whole.column(name)), (wanted, name)


@needs_c
@settings(max_examples=60)
@given(region(), st.lists(st.sampled_from(ROCKETMQ_SCHEMA.names), min_size=1, max_size=8, unique=True),
       st.booleans())
def test_a_batch_exported_in_one_call_equals_its_arrays_wrapped_one_by_one(data, names, whole):
    """``build_batch``'s one C call (``_speedups.export_arrays``, through the Arrow C data interface) gives
    the batch pyarrow's ``from_buffers`` gives a call an array (``exported=False``), every column and any
    projection, in its order; the batch outlives its rows and the view's other references."""
    view, c, _, rows, _ = both_decode(data, False)
    if not c[0]:
        return
    schema = ROCKETMQ_SCHEMA if whole else project(ROCKETMQ_SCHEMA, names)
    exported = columnar.build_batch(view, rows, schema)
    wrapped = columnar.build_batch(view, rows, schema, exported=False)
    assert exported.schema == wrapped.schema == schema
    exported.validate(full=True)
    assert exported.equals(wrapped)
    def ipc(batch) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        return sink.getvalue().to_pybytes()

    expected = ipc(wrapped)
    del rows, wrapped
    assert ipc(exported) == expected


@needs_c
def test_export_arrays_refuses_a_layout_its_buffers_do_not_hold():
    """A spec whose buffers hold less than its lengths say is a ValueError, never memory handed to Arrow
    past a buffer's end."""
    e = columnar._speedups.export_arrays
    ints = np.arange(4, dtype=np.int64)
    offsets = np.array([0, 2, 5], np.int32)
    data = np.zeros(5, np.uint8)
    good = (b"t", 2, 0, (None,), ((b"f\x08", 2, 0, (None, ints), ()),
                                  (b"s", 2, 0, (None, offsets, data), ())))
    columnar._speedups.release_arrays(e(good))
    for bad, said in [
        ((b"f\x08", 5, 0, (None, ints), ()), "at least 40 bytes"),
        ((b"s", 2, 0, (None, offsets, data[:4]), ()), "at least 5 bytes"),
        ((b"s", 3, 0, (None, offsets, data), ()), "at least 16 bytes"),
        ((b"s", 2, 1, (None, offsets, data), ()), "a buffer, found None"),
        ((b"l", 2, 0, (None, offsets), ((b"f\x08", 4, 0, (None, ints), ()),)), "a child of at least 5"),
        ((b"t", 3, 0, (None,), ((b"f\x08", 2, 0, (None, ints), ()),)), "a child of at least 3"),
        ((b"x", 2, 0, (None,), ()), "a known kind"),
        ((b"s", 2, 0, (None, np.array([1, 2, 5], np.int32), data), ()), "offsets from 0 up"),
        ((b"f\x08", -1, 0, (None, ints), ()), "a known kind"),
    ]:
        with pytest.raises(ValueError, match=said):
            e(bad)
    nested = good
    for _ in range(9):
        nested = (b"t", 2, 0, (None,), (nested,))
    with pytest.raises(ValueError, match="nested at most 8 deep"):
        e(nested)


@needs_c
@settings(max_examples=30)
@given(region())
def test_rows_of_a_known_topic_build_the_topic_column_the_gather_builds(data):
    """Rows whose topic the reader knows (``Rows.topic``: a queue-range read of one topic) build their
    topic column as that name repeated: the column a gather of each row's topic builds."""
    view, c, _, rows, _ = both_decode(data, False)
    if not c[0]:
        return
    schema = project(ROCKETMQ_SCHEMA, ["value", "topic", "offset"])
    gathered = columnar.build_batch(view, rows, schema)
    topics = {bytes(view[p:p + n]) for p, n in zip(rows["topic_pos"], rows["topic_len"], strict=True)}
    for picked in ([rows.select(np.array([t == topic for t in gathered.column("topic").to_pylist()]))
                    for topic in {t.decode() for t in topics}] if len(topics) > 1 else [rows]):
        expected = columnar.build_batch(view, picked, schema)
        picked.topic = expected.column("topic")[0].as_py().encode() if len(picked) else b"T"
        repeated = columnar.build_batch(view, picked, schema)
        assert repeated.equals(expected)
        offsets = [batch.column("topic").buffers()[1].to_pybytes() for batch in (repeated, expected)]
        assert offsets[0] == offsets[1]


@needs_c
@given(region(), st.integers(1, 4))
def test_columns_gathered_a_chunk_of_rows_at_a_time_equal_one_pass(data, chunk):
    view, c, _, rows, _ = both_decode(data, False)
    if not c[0]:
        return
    saved = columnar.GATHER_CHUNK
    try:
        whole = columnar.build_batch(view, rows)
        columnar.GATHER_CHUNK = chunk
        chunked = columnar.build_batch(view, rows)
    finally:
        columnar.GATHER_CHUNK = saved
    assert chunked.equals(whole)


@needs_c
def test_gather_columns_refuses_slices_outside_the_view_and_uncovered_items():
    view = memoryview(b"abcdef")
    starts, lengths = np.array([0, 4], np.int64), np.array([2, 2], np.int32)
    offsets, out = np.empty(3, np.int32), np.empty(4, np.uint8)
    columnar._speedups.gather_columns(view, 2, 1, ((starts, lengths, None, offsets, out),))
    assert bytes(out) == b"abef" and offsets.tolist() == [0, 2, 4]
    items = np.array([0, 1, 2], np.int32)
    columnar._speedups.gather_columns(view, 2, 2, ((starts, lengths, items, offsets, out),))
    assert bytes(out) == b"abef"
    bad = [((np.array([0, 5], np.int64), lengths, None, offsets, out),),     # past the view's end
           ((starts, lengths, np.array([0, 1, 1], np.int32), offsets, out),),   # item 1 in no row
           ((starts, lengths, None, offsets, np.empty(3, np.uint8)),),         # output too small
           ((starts, lengths, None, offsets),)]                                # not a spec
    for specs in bad:
        with pytest.raises((ValueError, TypeError)):
            columnar._speedups.gather_columns(view, 2, 1, specs)


def _property_outputs(n: int, total: int, cap: int) -> list[np.ndarray]:
    """property_columns' outputs after the view, starts and lengths, of the given sizes."""
    def off(k):
        return np.empty(k, np.int32)

    def data():
        return np.empty(total, np.uint8)

    return [off(n + 1), off(cap), data(), off(cap), data(), off(n + 1), data(), np.empty(n, np.uint8),
            off(n + 1), off(cap), data(), off(n + 1), data(), np.empty(n, np.uint8)]


@needs_c
def test_property_columns_refuse_properties_outside_the_view_and_small_outputs():
    props = b"TAGS\x01a\x02KEYS\x01k1 k2\x02"
    view = memoryview(props + bytes(64))
    starts, lengths = np.array([0], np.int64), np.array([len(props)], np.int32)
    outs = _property_outputs(1, len(props), len(props))
    assert columnar._speedups.property_columns(view, starts, lengths, *outs) == (2, 2, 0, 0)
    assert bytes(outs[2][:outs[1][2]]) == b"TAGSKEYS" and bytes(outs[12][:outs[11][1]]) == b"k1"
    for bad_starts, bad_lengths, bad_outs in [
            (np.array([len(view) - 4], np.int64), lengths, outs),             # past the view's end
            (np.array([-1], np.int64), lengths, outs),                        # before its start
            (starts, lengths, _property_outputs(1, 3, len(props))),           # data outputs too small
            (starts, lengths, _property_outputs(1, len(props), 1))]:          # item offsets too small
        with pytest.raises(ValueError):
            columnar._speedups.property_columns(view, bad_starts, bad_lengths, *bad_outs)


_PROPERTY_PIECES = st.sampled_from([b"KEYS", b"KEY", b"TAGS", b"\x01", b"\x02", b" ", b"  ", b"k", b"ab",
                                    b"x" * 20])
#: items of names (KEYS among them) and values of spaces and tokens, 0x02 between them
_PROPERTY_VALUES = st.lists(st.sampled_from([b" ", b"k", b"ab", b"\x01", b"y" * 9]), max_size=6).map(b"".join)
_PROPERTY_ITEMS = st.lists(st.tuples(st.sampled_from([b"KEYS", b"KEY", b"TAGS", b"", b"UNIQ_KEY"]),
                                     st.sampled_from([b"\x01", b"", b"\x01\x01"]), _PROPERTY_VALUES)
                           .map(b"".join), max_size=6).map(b"\x02".join)


@needs_c
@settings(max_examples=300)
@given(st.lists(st.one_of(_PROPERTY_ITEMS, st.lists(_PROPERTY_PIECES, max_size=40).map(b"".join)), min_size=1,
                max_size=8), st.integers(0, 70))
def test_the_key_alone_is_the_first_token_the_full_split_finds(properties, tail):
    """property_columns for the key alone (its masks over properties under 64 bytes, each other one
    split in full) gives the key the split of every item gives, for properties near the view's end
    too (``tail``: the bytes after the last one)."""
    data = b"".join(properties) + b"p" * tail
    view = memoryview(data)
    lengths = np.array([len(p) for p in properties], np.int32)
    starts = np.cumsum([0, *lengths[:-1]], dtype=np.int64)
    total = len(data)
    keys = []
    for key_only in (True, False):
        outs = _property_outputs(len(properties), total, total // 2 + len(properties) + 1)
        _, _, _, nulls = columnar._speedups.property_columns(view, starts, lengths, *outs, not key_only,
                                                             not key_only)
        offsets, data_out, valid = outs[11], outs[12], outs[13]
        keys.append(([bytes(data_out[offsets[i]:offsets[i + 1]]) if valid[i] else None
                      for i in range(len(properties))], nulls))
    assert keys[0] == keys[1]
    assert keys[0][1] == keys[0][0].count(None)


@needs_c
@given(st.lists(st.integers(0, 299), min_size=1, max_size=600), st.integers(0, 2))
def test_c_topic_codes_number_many_topics_by_first_appearance(picks, width):
    # many distinct topics, in any order: the hash table, its probing and the previous-row shortcut
    names = [f"topic-{k:0{width}d}".encode() for k in range(300)]
    data = b"".join(names)
    where = np.cumsum([0] + [len(n) for n in names])
    positions = np.array([where[k] for k in picks], np.int64)
    lengths = np.array([len(names[k]) for k in picks], np.int32)
    codes = np.empty(len(picks), np.int32)
    firsts = columnar._speedups.topic_codes(memoryview(data), positions, lengths, codes)
    numbering: dict[int, int] = {}
    assert codes.tolist() == [numbering.setdefault(k, len(numbering)) for k in picks]
    assert [picks[f] for f in firsts] == list(numbering)
    with pytest.raises(ValueError):
        columnar._speedups.topic_codes(memoryview(data), positions + len(data), lengths, codes)


@needs_c
@given(region(), st.booleans())
def test_bad_status_is_exactly_where_message_decode_raises(data, strict):
    view, c, _, _, _ = both_decode(data, strict)
    _, pos, status, _ = c
    if status == columnar.BAD:
        with pytest.raises(CorruptDataError) as err:
            columnar.raise_bad(view, pos, len(data), "f", strict)
        assert err.value.path == "f"
        assert not err.value.message.startswith("expected a message, found")   # decode itself refused it


@st.composite
def long_run(draw) -> tuple[bytes, list[int]]:
    """8-30 messages of 0-70 byte bodies (the C checks CRCs eight rows at a time, four bodies of 16
    bytes or more together), one of them sometimes with a wrong CRC; and their positions."""
    data, positions = b"", []
    count = draw(st.integers(8, 30))
    wrong = draw(st.integers(0, count))        # count: none wrong
    for k in range(count):
        body = draw(st.binary(min_size=16 if draw(st.integers(0, 5)) else 0, max_size=70))
        msg = RocketMQMessage(topic="T", queue_id=0, body=body, queue_offset=k, physical_offset=len(data),
                              born_host=Host(b"\x7f\0\0\1", 1), store_host=Host(b"\x7f\0\0\1", 2))
        topic_field = encode_topic(msg.topic, MESSAGE_MAGIC)
        msg.size = encoded_size(len(body), len(topic_field), 0, msg.sys_flag)
        crc = body_crc(body) ^ (1 if k == wrong else 0)
        positions.append(len(data))
        data += b"".join(encode_parts(msg, topic_field, b"", crc))
    return data, positions


@needs_c
@settings(max_examples=40)
@given(long_run(), st.booleans(), st.sampled_from([5, 8, 64]))
def test_c_crc_checks_of_long_runs_equal_the_reference(run, strict, cap):
    data, positions = run
    view = memoryview(data)
    rows_c, rows_py = columnar.rows_of(cap), columnar.rows_of(cap)
    c = columnar._speedups.decode_region(view, 0, len(data), len(data), 1000, rows_c.i8, rows_c.i4, rows_c.u8,
                                         strict)
    rows_c.n = c[0]
    assert c == columnar.decode_region_py(view, 0, len(data), len(data), 1000, rows_py, strict)
    assert rows_c.equals(rows_py)
    at = np.array(positions, dtype=np.int64)
    rows_c, rows_py = columnar.rows_of(len(at)), columnar.rows_of(len(at))
    rows_c.n = columnar._speedups.decode_at(view, at, len(data), 0, rows_c.i8, rows_c.i4, rows_c.u8, strict)
    assert rows_c.n == columnar.decode_at_py(view, at, len(data), 0, rows_py, strict)
    assert rows_c.equals(rows_py)


def _run_of(bodies: list[bytes], wrong: int) -> bytes:
    """Messages of ``bodies``, the one at ``wrong`` with a wrong body CRC (none where it is past them)."""
    data = b""
    for k, body in enumerate(bodies):
        msg = RocketMQMessage(topic="T", queue_id=0, body=body, queue_offset=k, physical_offset=len(data),
                              born_host=Host(b"\x7f\0\0\1", 1), store_host=Host(b"\x7f\0\0\1", 2))
        topic_field = encode_topic(msg.topic, MESSAGE_MAGIC)
        msg.size = encoded_size(len(body), len(topic_field), 0, msg.sys_flag)
        data += b"".join(encode_parts(msg, topic_field, b"", body_crc(body) ^ (1 if k == wrong else 0)))
    return data


@needs_c
def test_c_crc_checks_of_every_tail_length_equal_the_reference():
    # the C CRC folds 16 bytes at a time, a length not a multiple of 16 as if zeros came before it
    # (from the register they take to the initial one): bodies of every length up to 300, one after
    # another (so rarely four of one length in step), each CRC right, then each length's wrong
    rng = np.random.default_rng(7)
    bodies = [rng.integers(0, 256, length, dtype=np.uint8).tobytes() for length in range(301)]
    for wrong in (len(bodies), *range(0, 301, 7)):
        data = _run_of(bodies, wrong)
        view = memoryview(data)
        rows_c, rows_py = columnar.rows_of(len(bodies)), columnar.rows_of(len(bodies))
        c = columnar._speedups.decode_region(view, 0, len(data), len(data), 0,
                                             rows_c.i8, rows_c.i4, rows_c.u8, False)
        rows_c.n = c[0]
        assert c == columnar.decode_region_py(view, 0, len(data), len(data), 0, rows_py, False)
        assert rows_c.equals(rows_py), wrong
        assert rows_c["crc_ok"].tolist() == [k != wrong for k in range(len(bodies))], wrong


@needs_c
@pytest.mark.parametrize("strict", [True, False])
def test_c_crc_checks_of_bodies_of_one_length_equal_the_reference(strict):
    # four bodies of one length are folded in step (the usual batch), a length not a multiple of 16
    # padded before its first byte: every length from 16 to 80 (each remainder of 16, some whole
    # blocks after), none or one CRC wrong at each place of a group of four
    rng = np.random.default_rng(11)
    for length in range(16, 81):
        bodies = [rng.integers(0, 256, length, dtype=np.uint8).tobytes() for _ in range(12)]
        for wrong in (*range(8), 12):
            data = _run_of(bodies, wrong)
            view = memoryview(data)
            rows_c, rows_py = columnar.rows_of(12), columnar.rows_of(12)
            c = columnar._speedups.decode_region(view, 0, len(data), len(data), 0, rows_c.i8, rows_c.i4,
                                                 rows_c.u8, strict)
            rows_c.n = c[0]
            reference = columnar.decode_region_py(view, 0, len(data), len(data), 0, rows_py, strict)
            assert c == reference, (length, wrong)
            assert rows_c.equals(rows_py), (length, wrong)
            assert c[0] == (wrong if strict and wrong < 12 else 12)


@needs_c
@given(region(), st.lists(st.integers(-3, 400), max_size=8), st.booleans())
def test_c_decode_at_equals_the_reference(data, positions, strict):
    view = memoryview(data)
    at = np.array(positions, dtype=np.int64)
    rows_c, rows_py = columnar.rows_of(len(at)), columnar.rows_of(len(at))
    rows_c.n = columnar._speedups.decode_at(view, at, len(data), 0, rows_c.i8, rows_c.i4, rows_c.u8, strict)
    assert rows_c.n == columnar.decode_at_py(view, at, len(data), 0, rows_py, strict)
    assert rows_c.equals(rows_py)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])   # accel only patches a module
@given(region(), st.integers(1, 3))
def test_a_walk_in_small_row_buffers_resumes_where_it_stopped(accel, data, cap):
    view = memoryview(data)
    whole = columnar.rows_of(16)
    n_all, end_all, status_all, _ = columnar.decode_region(view, 0, len(data), len(data), 0, whole)
    parts, pos = [], 0
    while True:
        rows = columnar.rows_of(cap)
        n, pos, status, _ = columnar.decode_region(view, pos, len(data), len(data), 0, rows)
        assert n <= cap
        parts.extend(rows.select(slice(i, i + 1)) for i in range(n))
        if status != columnar.DONE or pos >= len(data):
            break
    assert (pos, status) == (end_all, status_all)
    assert len(parts) == n_all
    assert all(part.equals(whole.select(slice(i, i + 1))) for i, part in enumerate(parts))


def test_unknown_columns_are_a_config_error(tmp_path):
    with RocketMQStore(str(ROOT / "basic" / "store"), "r") as store, pytest.raises(ConfigError):
        next(store.scan_arrow(["nope"]))


# -- the broker's fixtures ----------------------------------------------------------------------

def expected_messages(name: str) -> list[dict]:
    with open(ROOT / name / "dump.jsonl", encoding="utf-8") as f:
        return [m for m in map(json.loads, f) if m["type"] == "message"]


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_scan_arrow_reads_the_brokers_messages_field_for_field(name, accel):
    with RocketMQStore(str(ROOT / name / "store"), "r") as store:
        table = pa.Table.from_batches(list(store.scan_arrow()), schema=ROCKETMQ_SCHEMA)
        objects = list(store.scan())
    rows = table.to_pylist()
    by_position = {row["position"]: row for row in rows}
    expected = expected_messages(name)
    assert expected and table.num_rows == len(objects)
    for exp in expected:          # the broker's own decode of the messages it serves
        row = by_position[exp["physicalOffset"]]
        assert (row["topic"], row["partition"], row["offset"], row["size"], row["bodyCrc"]) == (
            exp["topic"], exp["queueId"], exp["queueOffset"], exp["storeSize"], exp["bodyCRC"])
        assert (row["bornHost"], row["storeHost"], row["msgId"]) == (exp["bornHost"], exp["storeHost"],
                                                                     exp["msgId"])
        assert dict(row["properties"]) == exp["properties"]
    for row, msg in zip(rows, objects, strict=True):
        assert row["position"] == msg.physical_offset and row["topic"] == msg.topic
        assert (row["bornHost"], row["storeHost"], row["msgId"]) == (str(msg.born_host), str(msg.store_host),
                                                                     msg.msg_id)
        assert row["value"] == msg.body and row["tags"] == msg.tags and row["keys"] == msg.keys
        assert row["key"] == (msg.keys[0].encode() if msg.keys else None)
        assert [(h["key"], h["value"].decode()) for h in row["headers"]] == list(msg.properties.items())
        assert row["timestamp"].timestamp() * 1000 == msg.born_timestamp
        assert row["storeTimestamp"].timestamp() * 1000 == msg.store_timestamp
        assert (row["sysFlag"], row["flag"], row["reconsumeTimes"], row["magic"], row["physicalOffset"],
                row["preparedTransactionOffset"]) == (msg.sys_flag, msg.flag, msg.reconsume_times, msg.magic,
                                                      msg.physical_offset, msg.prepared_transaction_offset)


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_scan_arrow_of_a_queue_equals_read(name, accel):
    with RocketMQStore(str(ROOT / name / "store"), "r") as store:
        for topic in store.topics():
            for qid in store.partitions(topic):
                lo, hi = store.offset_range(topic, qid)
                for start in sorted({lo, (lo + hi) // 2, hi}):
                    batches = list(store.scan_arrow(["offset", "position", "value"], topic=topic,
                                                    partition=qid, offset=start, batch_rows=3))
                    got = [(r["offset"], r["position"], r["value"]) for b in batches for r in b.to_pylist()]
                    want = [(m.queue_offset, m.physical_offset, m.body)
                            for m in store.read(topic, qid, start)]
                    assert got == want
                    assert all(b.num_rows <= 3 for b in batches)


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_scan_arrow_of_a_byte_range_keeps_the_messages_starting_in_it(name, accel):
    with RocketMQStore(str(ROOT / name / "store"), "r") as store:
        phys = [m.physical_offset for m in store.scan()]
        end = store.commitlog.end
        for start, stop in [(0, end), (phys[3] + 1, phys[-5]), (70000, 140000), (end, end + 10), (5, 6)]:
            got = [p for b in store.scan_arrow(["position"], start=start, end=stop)
                   for p in b.column(0).to_pylist()]
            assert got == [p for p in phys if start <= p < stop]


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_each_column_alone_is_the_column_of_every_column_on_every_read_path(name, accel):
    # a projection decodes only the fields its columns are built from (columnar.fill_for)
    with RocketMQStore(str(ROOT / name / "store"), "r") as store:
        queues = [(t, q, 0, store.queues[(t, q)].max_offset) for t, q in sorted(store.queues)]
        topic, qid = sorted(store.queues)[0]
        paths = {"log": {}, "threads": {"threads": 2}, "queues": {"queues": queues},
                 "queue": {"topic": topic, "partition": qid}}
        for path, kwargs in paths.items():
            whole = pa.Table.from_batches(list(store.scan_arrow(**kwargs)), schema=ROCKETMQ_SCHEMA)
            for column in ROCKETMQ_SCHEMA.names:
                alone = pa.Table.from_batches(list(store.scan_arrow([column], **kwargs)),
                                              schema=project(ROCKETMQ_SCHEMA, [column]))
                assert alone.column(0).equals(whole.column(column)), (path, column)


def test_projection_builds_the_columns_in_the_order_asked(accel):
    with RocketMQStore(str(ROOT / "basic" / "store"), "r") as store:
        batch = next(store.scan_arrow(["msgId", "offset", "tags"]))
    assert batch.schema.names == ["msgId", "offset", "tags"]
    assert batch.schema == pa.schema([ROCKETMQ_SCHEMA.field(n) for n in ["msgId", "offset", "tags"]])


def test_queue_and_range_arguments_are_checked():
    with RocketMQStore(str(ROOT / "basic" / "store"), "r") as store:
        with pytest.raises(ConfigError):
            next(store.scan_arrow(topic="TopicA"))
        with pytest.raises(ConfigError):
            next(store.scan_arrow(topic="TopicA", partition=0, start=0))
        with pytest.raises(NotFoundError):
            next(store.scan_arrow(topic="Nope", partition=0))


# -- damaged stores: the same typed error as the object API -------------------------------------

def damaged_copy(tmp_path: Path, at: int, value: bytes) -> Path:
    store = copy_writable(ROOT / "basic" / "store", tmp_path / "s")
    path = store / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    data[at:at + len(value)] = value
    path.write_bytes(bytes(data))
    return store


def first_error(fn) -> tuple[type, str]:
    with pytest.raises(CorruptDataError) as err:
        fn()
    return type(err.value), str(err.value)


@pytest.mark.parametrize(("at", "value"), [
    (0, b"\x7f\xff\xff\xff"),     # TOTALSIZE past the file
    (4, b"\x00\x00\x00\x01"),     # magic
    (90, b"\xff"),                # body byte: CRC mismatch
    (84, b"\x7f\xff\xff\xff"),    # BODYLENGTH
])
def test_a_damaged_commitlog_raises_what_scan_raises(tmp_path, accel, at, value):
    with RocketMQStore(str(ROOT / "basic" / "store"), "r") as clean:
        second = [m.physical_offset for m in clean.scan()][1]
    store = damaged_copy(tmp_path, second + at, value)
    with RocketMQStore(str(store), "r") as s:
        assert first_error(lambda: list(s.scan_arrow())) == first_error(lambda: list(s.scan()))


def test_a_queue_entry_pointing_elsewhere_raises_what_read_raises(tmp_path, accel):
    store = copy_writable(ROOT / "basic" / "store", tmp_path / "s")
    cq = next((store / "consumequeue").glob("*/*/0*"))
    data = bytearray(cq.read_bytes())
    data[20:28] = data[0:8]                      # entry 1 points at entry 0's message
    cq.write_bytes(bytes(data))
    topic, qid = cq.parent.parent.name, int(cq.parent.name)
    with RocketMQStore(str(store), "r") as s:
        got = first_error(lambda: list(s.scan_arrow(topic=topic, partition=qid)))
        assert got == first_error(lambda: list(s.read(topic, qid)))
        # the messages before the bad entry still come out
        assert next(s.scan_arrow(["offset"], topic=topic, partition=qid)).column(0).to_pylist() == [0]


def test_batches_are_bounded_and_cover_every_file(tmp_path, accel):
    shutil.copytree(ROOT / "abort" / "store", tmp_path / "s", copy_function=shutil.copyfile)
    with RocketMQStore(str(tmp_path / "s"), "r") as store:
        batches = list(store.scan_arrow(["position"], batch_rows=7))
        want = [m.physical_offset for m in store.scan()]
        files = {m // store.commitlog.file_size for m in want}
    assert [p for b in batches for p in b.column(0).to_pylist()] == want
    assert all(0 < b.num_rows <= 7 for b in batches) and len(files) > 1


def test_batches_kept_by_the_caller_keep_their_values(accel):
    # the scan decodes every batch into the same rows: what a batch holds must be its own copy
    with RocketMQStore(str(ROOT / "abort" / "store"), "r") as store:
        small = pa.Table.from_batches(list(store.scan_arrow(batch_rows=3)), schema=ROCKETMQ_SCHEMA)
        whole = pa.Table.from_batches(list(store.scan_arrow(batch_rows=1 << 20)), schema=ROCKETMQ_SCHEMA)
    assert small.num_rows > 3 and small.equals(whole)


@needs_c
def test_many_properties_and_keys_take_the_sure_bound(accel):
    keys = " ".join(f"k{i}" for i in range(300))
    props = "\x02".join([f"p{i}\x01v{i}" for i in range(200)] + [f"KEYS\x01{keys}"])
    msg = RocketMQMessage(topic="T", queue_id=0, body=b"b")
    topic_field = encode_topic("T")
    msg.size = encoded_size(1, len(topic_field), len(props.encode()), 0)
    data = b"".join(encode_parts(msg, topic_field, props.encode(), body_crc(b"b")))
    rows = columnar.rows_of(2)
    columnar.decode_region(memoryview(data), 0, len(data), len(data), 0, rows)
    row = columnar.build_batch(memoryview(data), rows).to_pylist()[0]
    assert len(row["properties"]) == 201 and row["key"] == b"k0"
    assert row["keys"] == [f"k{i}" for i in range(300)]


def json_reference(msg: RocketMQMessage) -> str:
    """store.to_json of a message outside any delay topic, as dump --json writes it (a lone surrogate
    of stored ED A0 80 escaped: the line is UTF-8)."""
    return jsontext.dumps({
        "topic": msg.topic, "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
        "physical_offset": msg.physical_offset, "size": msg.size, "body_crc": msg.body_crc, "flag": msg.flag,
        "sys_flag": msg.sys_flag, "born_timestamp": msg.born_timestamp, "born_host": str(msg.born_host),
        "store_timestamp": msg.store_timestamp, "store_host": str(msg.store_host),
        "reconsume_times": msg.reconsume_times,
        "prepared_transaction_offset": msg.prepared_transaction_offset,
        "body": base64.b64encode(msg.body).decode("ascii"), "properties": dict(msg.properties),
        "tags": msg.tags, "keys": msg.keys, "tags_code": string_hash(msg.tags) if msg.tags else 0,
        "msg_id": msg.msg_id,
    }) + "\n"


@needs_c
@given(region())
def test_c_json_lines_equal_json_dumps_of_each_message(data):
    view = memoryview(data)
    rows = columnar.rows_of(16)
    columnar.decode_region(view, 0, len(data), len(data), 0, rows, False)
    writer = columnar.JsonWriter()
    first = rows.select(slice(0, min(1, len(rows))))       # a small buffer first, grown after
    writer.lines(view, first, columnar.tags_hashes(view, first))
    lines = writer.lines(view, rows, columnar.tags_hashes(view, rows))
    expected = "".join(json_reference(m) for m in columnar.messages(view, rows))
    assert str(lines, "utf-8") == expected


@needs_c
def test_c_json_lines_refuses_rows_outside_the_view():
    """The checks run before a byte is written (both passes without the GIL): a clear error."""
    name = next(iter(ROCKETMQ_FIXTURES))
    view = memoryview(next((ROOT / name / "store" / "commitlog").iterdir()).read_bytes())
    rows = columnar.rows_of(16)
    columnar.decode_region(view, 0, len(view), len(view), 0, rows, False)
    assert len(rows)
    writer = columnar.JsonWriter()
    codes = columnar.tags_hashes(view, rows)
    assert writer.lines(view, rows, codes).nbytes
    rows["body_pos"][0] = len(view)
    with pytest.raises(ValueError, match="expected slices inside the view"):
        writer.lines(view, rows, codes)


@pytest.mark.parametrize(("topic", "partition"), [(None, None), ("TopicA", None), (None, 1), ("TopicB", 2)])
def test_dump_json_in_c_equals_the_message_by_message_dump(monkeypatch, topic, partition):
    for name in ROCKETMQ_FIXTURES:
        outs = []
        for accelerated in (True, False):
            if not accelerated:
                monkeypatch.setattr(columnar, "_speedups", None)
            with RocketMQStore(str(ROOT / name / "store"), "r") as store:
                blocks = store.dump_json(topic=topic, partition=partition)
                outs.append(b"".join(bytes(block) for block in blocks))
        monkeypatch.undo()
        assert outs[0] == outs[1] and outs[0]


def test_data_ranges_cover_every_written_byte_of_a_sparse_file(tmp_path):
    path = tmp_path / "sparse"
    with open(path, "wb") as f:
        f.truncate(64 << 20)
    at = 40 << 20
    files.write_bytes(str(path), b"x" * 10, at)
    ranges = files.data_ranges(str(path), 0, 64 << 20)
    assert any(lo <= at and at + 10 <= hi for lo, hi in ranges)
    data = path.read_bytes()
    outside = bytearray(data)
    for lo, hi in ranges:
        outside[lo:hi] = bytes(hi - lo)
    assert not any(outside)          # what lies outside the ranges is zeros
    assert files.data_ranges(str(path), at + (8 << 20), 64 << 20) in ([], [(at + (8 << 20), 64 << 20)])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])   # accel only patches a module
@given(st.lists(st.sampled_from(["T", "TopicA", "ünï", "", "T\x00", "Topic"]), min_size=1, max_size=12))
def test_topic_codes_number_each_distinct_topic_once(accel, topics):
    data = b""
    for topic in topics:
        msg = RocketMQMessage(topic=topic, queue_id=0, body=b"", physical_offset=len(data))
        data += encode(msg)
    view = memoryview(data)
    rows = columnar.rows_of(len(topics))
    columnar.decode_region(view, 0, len(data), len(data), 0, rows)
    codes: dict[str, int] = {"Topic": 0}
    numbers = columnar.topic_codes(view, rows, codes)
    assert [list(codes)[k] for k in numbers.tolist()] == topics


def _damage_store(store: Path, damage: str | None) -> None:
    if damage == "commitlog":      # a body byte in the middle of the first file
        path = store / "commitlog" / "00000000000000000000"
        data = bytearray(path.read_bytes())
        data[30_000] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "queue":        # an entry pointing elsewhere
        cq = sorted((store / "consumequeue").glob("*/*/0*"))[0]
        data = bytearray(cq.read_bytes())
        data[20:28] = data[0:8]
        cq.write_bytes(bytes(data))
    elif damage == "index":        # the IndexFile and the queues lost
        shutil.rmtree(store / "index")
        shutil.rmtree(store / "consumequeue")


def _checked(store: Path) -> tuple[list[str], list[str], dict[str, bytes]]:
    with RocketMQStore(str(store), "r") as s:
        problems = [str(p).replace(str(store), "STORE") for p in s.verify()]
    with RocketMQStore(str(store), "a") as s:
        opened = s.recovery_lines
        try:
            done = s.recover()
        except UnrepairedDataError as err:      # damage left in place: the lines are still compared
            done = [*err.actions, str(err)]
        lines = [line.replace(str(store), "STORE") for line in opened + done]
    kept = {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and p.parts[len(store.parts)] in ("commitlog", "consumequeue")}
    # new index files are named by the clock: compare them in name order
    kept.update({f"index/{n}": p.read_bytes() for n, p in enumerate(sorted((store / "index").iterdir()))})
    lines = [re.sub(r"index/\d{17}", "index/NAME", line) for line in lines]
    return problems, lines, kept


@needs_c
@pytest.mark.parametrize("damage", [None, "commitlog", "queue", "index"])
def test_verify_and_recovery_are_the_same_with_and_without_c(tmp_path, monkeypatch, damage):
    results = []
    for accelerated in (True, False):
        if not accelerated:
            monkeypatch.setattr(columnar, "_speedups", None)
        store = copy_writable(ROOT / "abort" / "store", tmp_path / f"s{accelerated}")
        _damage_store(store, damage)
        results.append(_checked(store))
    problems, lines, kept = results[0]
    assert results[0] == results[1]
    damage_found = [p for p in problems if "abort file" not in p]     # the fixture's crash leaves one
    assert lines and (bool(damage_found) if damage in ("commitlog", "queue") else True)
    assert not damage_found or damage is not None
    assert any(name.startswith("index") for name in kept)


@pytest.mark.parametrize("name", ["basic", "abort"])
def test_lost_index_is_rebuilt_in_the_recovery_walk_as_the_broker_wrote_it(tmp_path, monkeypatch, name):
    """recovery.recover rebuilds an index without entries during its one walk of the commitlog:
    the same files and lines as indexing in a second walk, and (all messages walked after a crash)
    the broker's own index bytes."""
    from segstore_rocketmq import recovery

    theirs = [p.read_bytes() for p in sorted((ROOT / name / "store" / "index").iterdir())]
    config = json.loads((ROOT / name / "spec.json").read_text(encoding="utf-8"))["config"]
    results = []
    for one_walk in (True, False):
        if not one_walk:
            monkeypatch.setattr(recovery, "_holds_no_entry", lambda index: False)
        store = copy_writable(ROOT / name / "store", tmp_path / f"s{one_walk}")
        shutil.rmtree(store / "index")
        (store / "abort").touch()
        with RocketMQStore(str(store), "a", config) as s:
            lines = [re.sub(r"index/\d{17}", "index/NAME", line.replace(str(store), "STORE"))
                     for line in s.recovery_lines]
        results.append((lines, [p.read_bytes() for p in sorted((store / "index").iterdir())]))
    assert results[0] == results[1]
    lines, mine = results[0]
    assert any(line.startswith("index: rebuilt") for line in lines)
    assert mine == theirs


def test_dump_json_to_a_utf8_file_writes_the_same_bytes(tmp_path, monkeypatch):
    outs = []
    for accelerated in (True, False):
        if not accelerated:
            monkeypatch.setattr(columnar, "_speedups", None)
        path = tmp_path / f"dump{accelerated}.jsonl"
        with open(path, "w", encoding="utf-8") as out, RocketMQStore(str(ROOT / "basic" / "store"), "r") as s:
            out.write("first\n")
            cli._write_blocks(s.dump_json(), out)
            out.write("last\n")
        outs.append(path.read_bytes())
    assert outs[0] == outs[1] and outs[0].startswith(b"first\n{") and outs[0].endswith(b"}\nlast\n")


# -- queue ranges in commitlog order ------------------------------------------------------------

QUEUE_COLUMNS = ["topic", "partition", "offset", "position", "value", "properties"]


def _queue_rows(store: RocketMQStore, ranges) -> list[dict]:
    """The rows of each range read through its consume queue, queue after queue."""
    rows = []
    for topic, qid, start, end in ranges:
        for batch in store.scan_arrow(QUEUE_COLUMNS, topic=topic, partition=qid, offset=start):
            rows += [r for r in batch.to_pylist() if r["offset"] < end]
    return rows


def _log_rows(store: RocketMQStore, ranges, batch_rows: int = columnar.SCAN_BATCH_ROWS) -> list[dict]:
    rows = [r for b in store.scan_arrow(QUEUE_COLUMNS, queues=ranges, batch_rows=batch_rows)
            for r in b.to_pylist()]
    for key in {(r["topic"], r["partition"]) for r in rows}:       # each queue in offset order
        offsets = [r["offset"] for r in rows if (r["topic"], r["partition"]) == key]
        assert offsets == sorted(offsets)
    positions = [r["position"] for r in rows]
    assert positions == sorted(positions)                         # the commitlog's order
    return rows


def _place(row: dict) -> tuple:
    return row["topic"], row["partition"], row["offset"]


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_queue_ranges_in_log_order_are_the_queues_rows(name, accel):
    with RocketMQStore(str(ROOT / name / "store"), "r") as store:
        queues = [(t, q, *store.offset_range(t, q)) for t in store.topics() for q in store.partitions(t)]
        some = [(t, q, lo + (hi - lo) // 3, hi - 1) for t, q, lo, hi in queues[::2]]
        # the queues of one topic too: their rows' topic column is the name repeated (Rows.topic)
        of_topics = [[r for r in queues if r[0] == t] for t in store.topics()]
        for ranges in (queues, some, queues[-1:], [(t, q, 5, 5) for t, q, *_ in queues], *of_topics):
            got = _log_rows(store, ranges, batch_rows=5)
            assert sorted(got, key=_place) == sorted(_queue_rows(store, ranges), key=_place)
        # prepared transactional messages lie in the commitlog but in no queue: never read
        held = sum(hi - lo for *_, lo, hi in queues)
        assert len(_log_rows(store, queues)) == held < len(list(store.scan()))
        with pytest.raises(ConfigError):
            next(store.scan_arrow(queues=queues, start=0))
        with pytest.raises(NotFoundError):
            next(store.scan_arrow(queues=[("Nope", 0, 0, 1)]))
        # a negative offset is refused; queue ranges below a queue's first too
        topic, qid, lo, hi = queues[0]
        assert lo == 0
        with pytest.raises(OffsetOutOfRangeError):
            next(store.scan_arrow(topic=topic, partition=qid, offset=-1))
        with pytest.raises(OffsetOutOfRangeError):
            next(store.scan_arrow(queues=[(topic, qid, lo - 1, hi)]))


def test_a_queue_whose_first_messages_were_deleted_scans_from_its_first_offset(tmp_path):
    """Before: ``scan_arrow(topic=, partition=)``, its offset the default 0, raised OffsetOutOfRangeError
    on a queue whose oldest files the broker's clean-up had deleted, where ``read`` (and Kafka's
    ``scan_arrow``) start at the first offset held, as the broker answers a pull below it (4.9.7
    ``DefaultMessageStore.getMessage``: ``OFFSET_TOO_SMALL``, ``nextBeginOffset`` the queue's min)."""
    path = tmp_path / "store"
    config = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 16,
              "maxIndexNum": 64}
    with RocketMQStore(str(path), "a", config) as store:
        for _ in range(60):
            store.append({"topic": "T", "queue_id": 0, "body": b"v" * 50})
    for name in ("consumequeue/T/0/00000000000000000000", "commitlog/00000000000000000000"):
        (path / name).unlink()     # what the broker's clean-up deletes first
    with RocketMQStore(str(path), "r", config) as store:
        first, end = store.offset_range("T", 0)
        assert 0 < first < end
        expected = [m.queue_offset for m in store.read("T", 0)]
        assert expected == list(range(first, end))
        for offset in (0, first - 1, first):
            got = [o for b in store.scan_arrow(["offset"], topic="T", partition=0, offset=offset)
                   for o in b.column("offset").to_pylist()]
            assert got == expected
        with pytest.raises(OffsetOutOfRangeError):
            next(store.scan_arrow(topic="T", partition=0, offset=-1))


INTERLEAVED_CONFIG = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 20 * 8}


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory) -> Path:
    """180 messages of three topics of two queues each, interleaved, over 4 KiB commitlog files and
    consume-queue files of 8 entries."""
    path = tmp_path_factory.mktemp("interleaved") / "store"
    with segstore.open(str(path), format="rocketmq", mode="a", **INTERLEAVED_CONFIG) as store:
        store.append_batch([Message(topic=f"T{i % 3}", partition=i % 2, value=bytes(40 + i % 50))
                            for i in range(180)])
    return path


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(0, 40_000), max_size=6), picks=st.integers(1, 7))
def test_byte_ranges_cut_anywhere_read_each_queue_message_once(interleaved, cuts, picks):
    """Cut the commitlog at any byte (inside messages, on file rolls): each piece's queue offsets
    (``queue_offsets_at``) read in log order give every row of the chosen queues once."""
    with RocketMQStore(str(interleaved), "r", INTERLEAVED_CONFIG) as store:
        assert store.commitlog.end > 4 * 4096       # several file rolls
        queues = [(t, q, *store.offset_range(t, q)) for t in store.topics() for q in store.partitions(t)]
        chosen = [r for k, r in enumerate(queues) if picks >> (k % 3) & 1]
        bounds = sorted({0, *cuts, store.commitlog.end})
        pieces = []
        for a, b in itertools.pairwise(bounds):
            ranges = []
            for topic, qid, lo, hi in chosen:
                first, stop = store.queue_offsets_at(topic, qid, [a, b])
                ranges.append((topic, qid, max(first, lo), min(stop, hi)))
            pieces += _log_rows(store, ranges, batch_rows=4)
        whole = _queue_rows(store, chosen)
        assert len(pieces) == len(whole) and sorted(pieces, key=_place) == sorted(whole, key=_place)


def test_entry_parts_are_the_entries_file_by_file(interleaved):
    """``entry_parts``: the entries ``entries`` copies, as views of each consume-queue file's entries."""
    with RocketMQStore(str(interleaved), "r", INTERLEAVED_CONFIG) as store:
        cq = store.queues[("T0", 0)]
        low, high = store.offset_range("T0", 0)
        for start, count in ((low, None), (low + 3, 9), (high - 1, 5), (high, 2)):
            parts = cq.entry_parts(start, count)
            whole = cq.entries(start, count)
            files = {seg.first_offset for seg in cq.segment_files()
                     if seg.first_offset < start + len(whole) and start < seg.first_offset + len(seg)}
            assert len(parts) == len(files)
            assert np.array_equal(np.concatenate(parts) if parts else whole[:0], whole)
            assert all(not part.flags.owndata for part in parts)
        assert len(cq.entry_parts(low)) > 1           # files of 8 entries


@needs_c
@settings(max_examples=200)
@given(st.lists(st.lists(st.integers(0, 30) | st.just(2**63 - 1), max_size=12), max_size=11), st.booleans())
def test_merge_entries_merges_ascending_ranges_as_the_stable_sort_orders_them(ranges, sort_them):
    """Ranges (a read's queue ranges, empty ones and more than a power of two of them) each ascending,
    with ties within and across them, the largest position too: the merge is numpy's stable argsort,
    and the positions and sizes come in its order; a range that descends (a damaged queue) is sorted
    instead, to the same end."""
    if sort_them:
        ranges = [sorted(r) for r in ranges]
    positions = np.array([p for r in ranges for p in r], np.int64)
    sizes = np.arange(len(positions), dtype=np.int64) * 7 + 1
    bounds = np.cumsum([0, *map(len, ranges)], dtype=np.int64)
    expected = np.argsort(positions, kind="stable")
    phys, order, ordered = columnar.merge_entries(positions, sizes, bounds)
    assert order.tolist() == expected.tolist()
    assert phys.tolist() == positions[expected].tolist() and ordered.tolist() == sizes[expected].tolist()
    ascending = all(r == sorted(r) for r in ranges)
    order = np.empty(len(positions), np.int64)
    assert columnar._speedups.merge_order(positions, bounds, order) is ascending
    if ascending:
        assert order.tolist() == expected.tolist()


#: How match_entries' generated entries differ from the message at their place (none, a position inside
#: the message, its size, its queue offset, the slot of another queue id of its topic, the slot of its
#: queue id in another topic: slots are sorted, three topics of two queues each).
ENTRY_AS_IS, ENTRY_INSIDE, ENTRY_SIZE, ENTRY_OFFSET, ENTRY_QUEUE, ENTRY_TOPIC = range(6)


def _picked_entries(store, view, window, picks):
    """The interleaved store's first file walked: the rows of ``window`` (skip, count), the store's
    (topic, queue id) slots sorted, and for each ``(message, how)`` of ``picks`` the entry
    ``(slot, queue offset, position, size)`` of that message, wrong as ``how`` says (``ENTRY_*``)."""
    seg = store.commitlog.file_for(4096)
    walked = next(columnar.walk_file(view, 0, seg.wrote, seg.base, store.commitlog.file_size, seg.path))
    skip, count = window
    rows = walked.select(slice(min(skip, len(walked) - 1), skip + count))    # entries lie around them
    slots = sorted((t, q) for t in store.topics() for q in store.partitions(t))
    topics = [bytes(memoryview(view)[p:p + n]).decode()
              for p, n in zip(walked["topic_pos"], walked["topic_len"], strict=True)]
    entries = []
    for pick, how in picks or [(0, ENTRY_AS_IS)]:
        k = min(pick, len(walked) - 1)
        slot = slots.index((topics[k], int(walked["queue_id"][k])))
        slot = slot ^ 1 if how == ENTRY_QUEUE else (slot + 2) % len(slots) if how == ENTRY_TOPIC else slot
        entries.append((slot, int(walked["queue_offset"][k]) + (how == ENTRY_OFFSET),
                        int(walked["position"][k]) + 7 * (how == ENTRY_INSIDE),
                        int(walked["size"][k]) + (how == ENTRY_SIZE)))
    return rows, slots, entries


def _slot_tables(slots):
    """The slots' ``queue_ids``, ``topic_offsets`` and ``topic_data``, as QueueEntries and QueueRanges
    hold them."""
    names = [t.encode() for t, _ in slots]
    return (np.array([q for _, q in slots], np.int64), np.cumsum([0, *map(len, names)], dtype=np.int64),
            b"".join(names))


@needs_c
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.integers(0, 180), st.sampled_from([ENTRY_AS_IS] * 6 + [*range(1, 6)])),
                      max_size=40),
       window=st.tuples(st.integers(0, 60), st.integers(1, 60)))
def test_match_entries_in_c_is_the_reference(interleaved, monkeypatch, picks, window):
    """Entries at, inside, or wrong for a walk's messages (sizes, queue offsets, another queue, two at
    one place): the C merge gives the reference's hits, first wrong entry, identity and met entries."""
    with RocketMQStore(str(interleaved), "r", INTERLEAVED_CONFIG) as store:
        view = store.commitlog.file_for(4096).file.view()
        rows, slots, entries = _picked_entries(store, view, window, picks)     # one range per entry
        part_slots, part_firsts, positions, sizes = (np.array(c, np.int64)
                                                     for c in zip(*entries, strict=True))
        order = np.argsort(positions, kind="stable")     # as a read sorts them: by position
        table = columnar.QueueEntries(positions[order], order, sizes[order], np.arange(len(entries) + 1),
                                      part_slots, part_firsts, *_slot_tables(slots))
        first = int(np.searchsorted(table.phys, rows["position"][0]))
        last = int(np.searchsorted(table.phys, rows["position"][-1], side="right"))
        results = []
        for python in (False, True):
            with monkeypatch.context() as patch:      # undone before the next example
                if python:
                    patch.setattr(columnar, "_speedups", None)
                met = np.zeros(len(entries), bool)
                hits, wrong, identity = columnar.match_entries(view, rows, table, first, last, met)
            results.append((hits.tolist(), wrong, identity, met.tolist()))
    assert results[0] == results[1]


@needs_c
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.integers(0, 180), st.sampled_from([ENTRY_AS_IS] * 6 + [*range(1, 6)])),
                      max_size=40),
       window=st.tuples(st.integers(0, 60), st.integers(1, 60)), cursor_skips=st.lists(st.integers(0, 3)))
def test_claim_entries_in_c_is_the_reference(interleaved, monkeypatch, picks, window, cursor_skips):
    """Ranges of one queue each (ascending entries at, inside, or wrong for a walk's messages: sizes,
    queue offsets, another queue, two at one place), their cursors anywhere before the rows: the C
    claims give the reference's hits, entries passed, identity, cursors and met entries, and so do the
    claims the C decode found as it walked the rows (``decode_region``'s ``ranges``)."""
    with RocketMQStore(str(interleaved), "r", INTERLEAVED_CONFIG) as store:
        view = store.commitlog.file_for(4096).file.view()
        rows, slots, entries = _picked_entries(store, view, window, picks)
        by_slot: dict[int, list[tuple[int, int, int]]] = {}     # slot: (queue offset, position, size) each
        for slot, *entry in entries:
            by_slot.setdefault(slot, []).append(tuple(entry))
        part_slots, part_firsts, positions, sizes, bounds = [], [], [], [], [0]
        for slot, entries in sorted(by_slot.items()):
            entries.sort(key=lambda e: e[1])            # a range ascends; its first entry's offset starts it
            part_slots.append(slot)
            part_firsts.append(entries[0][0])
            positions += [e[1] for e in entries]
            sizes += [e[2] for e in entries]
            bounds.append(len(positions))
        ranges = columnar.QueueRanges(np.array(positions, np.int64), np.array(sizes, np.int64),
                                      np.array(bounds, np.int64), np.array(part_slots, np.int64),
                                      np.array(part_firsts, np.int64), *_slot_tables(slots))
        assert ranges.claimable()
        skips = cursor_skips + [0] * len(bounds)
        start = np.array([min(b + k, e) for b, e, k in zip(bounds, bounds[1:], skips, strict=False)],
                         np.int64)
        seg = store.commitlog.file_for(4096)
        walked = next(columnar.walk_file(view, 0, seg.wrote, seg.base, store.commitlog.file_size, seg.path,
                                         ranges=ranges))
        assert walked.claims is not None and len(walked.claims) == len(walked)
        skip = min(window[0], len(walked) - 1)
        decoded = rows.select(slice(None))
        decoded.claims = walked.claims[skip:skip + len(rows)]
        results = []
        for python, picked in ((False, rows), (False, decoded), (True, rows)):
            with monkeypatch.context() as patch:      # undone before the next example
                if python:
                    patch.setattr(columnar, "_speedups", None)
                met, cursors = np.zeros(len(positions), bool), start.copy()
                hits, passed, identity = columnar.claim_entries(view, picked, ranges, cursors, met)
            results.append((hits.tolist(), passed, identity, cursors.tolist(), met.tolist()))
    assert results[0] == results[1] == results[2]


def test_queue_ranges_claimable_only_for_distinct_ascending_queues():
    """A queue named twice, or a range that descends (a damaged queue): the merge, not the claims."""
    def ranges(positions, slots):
        # slots: 0/A, 1/A, 0/B, and 0/A again (a read naming a queue twice)
        return columnar.QueueRanges(np.array(positions, np.int64), np.ones(len(positions), np.int64),
                                    np.array([0, 2, 4], np.int64), np.array(slots, np.int64),
                                    np.zeros(len(slots), np.int64), np.array([0, 1, 0, 0], np.int64),
                                    np.array([0, 1, 2, 3, 4], np.int64), b"AABA")
    assert ranges([5, 9, 1, 2], [0, 1]).claimable()           # a drop between ranges only
    assert ranges([5, 9, 1, 2], [1, 2]).claimable()           # queue 0 of another topic
    assert not ranges([5, 9, 1, 2], [0, 3]).claimable()       # one queue twice
    assert not ranges([5, 3, 1, 2], [0, 1]).claimable()       # range 0 descends
    assert not ranges([5, 9, 2, 1], [0, 1]).claimable()       # range 1 descends


#: Damage to a consume-queue entry (its 20 bytes: offset, size, tags code): (what, bytes at 0..12).
_ENTRY_DAMAGE = ("another entry's", "inside its message", "its size", "past the log", "its neighbour's size")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 29), st.sampled_from(_ENTRY_DAMAGE)),
                       max_size=3),
       cut=st.integers(0, 30), batch_rows=st.sampled_from([3, 7, 1000]))
def test_queue_ranges_read_the_same_claimed_or_merged(interleaved, tmp_path_factory, monkeypatch, accel,
                                                      damage, cut, batch_rows):
    """A log-order read of queue ranges whose entries are damaged (pointing at another message, inside
    one, past the log, with a wrong size): the rows and the error are the same whether each row claims
    its entry (claim_entries, switching to the merge where one is not claimed) or every entry is merged
    and matched (match_entries) from the start."""
    path = tmp_path_factory.mktemp("claims") / "store"
    shutil.copytree(interleaved, path)
    queues = sorted(p for p in (path / "consumequeue").glob("*/*"))
    for queue, slot, how in damage:
        files = sorted(queues[queue].iterdir())
        data = bytearray(files[0].read_bytes())
        at, other = 20 * (slot % (len(data) // 20)), 20 * ((slot + 1) % (len(data) // 20))
        if how == "another entry's":
            data[at:at + 8] = data[other:other + 8]
        elif how == "inside its message":
            data[at:at + 8] = (int.from_bytes(data[at:at + 8], "big") + 5).to_bytes(8, "big")
        elif how == "its size":
            data[at + 8:at + 12] = (int.from_bytes(data[at + 8:at + 12], "big") + 1).to_bytes(4, "big")
        elif how == "past the log":
            data[at:at + 8] = (1 << 40).to_bytes(8, "big")
        else:
            data[at + 8:at + 12] = data[other + 8:other + 12]
        files[0].write_bytes(bytes(data))
    results = []
    for claimed in (True, False):
        with monkeypatch.context() as patch:
            if not claimed:
                patch.setattr(columnar.QueueRanges, "claimable", lambda self: False)
            got: list = []
            try:
                with RocketMQStore(str(path), "r", INTERLEAVED_CONFIG) as store:
                    ranges = [(t, q, cut // 3, 10 ** 6) for t in store.topics() for q in store.partitions(t)]
                    for batch in store.scan_arrow(QUEUE_COLUMNS, queues=ranges, batch_rows=batch_rows):
                        got.append(batch.to_pylist())
            except SegstoreError as err:
                got.append((type(err).__name__, str(err)))
        results.append(got)
    assert results[0] == results[1]


def test_a_wrong_queue_entry_raises_what_read_raises_in_log_order(tmp_path, accel):
    store = copy_writable(ROOT / "basic" / "store", tmp_path / "s")
    cq = next((store / "consumequeue").glob("TopicA/*/0*"))
    data = bytearray(cq.read_bytes())
    data[40:48] = data[20:28]                      # entry 2 points at entry 1's message
    cq.write_bytes(bytes(data))
    topic, qid = cq.parent.parent.name, int(cq.parent.name)
    with RocketMQStore(str(store), "r") as s:
        want = first_error(lambda: list(s.read(topic, qid)))
        assert first_error(lambda: list(s.scan_arrow(queues=[(topic, qid, 0, 10)]))) == want
        data[40:48] = (int.from_bytes(data[20:28], "big") + 7).to_bytes(8, "big")   # inside a message
        cq.write_bytes(bytes(data))
    with RocketMQStore(str(store), "r") as s:
        want = first_error(lambda: list(s.read(topic, qid)))
        assert first_error(lambda: list(s.scan_arrow(queues=[(topic, qid, 0, 10)]))) == want


def test_an_entry_pointing_at_another_topics_message_raises_in_log_order(tmp_path, accel):
    """Same queue id, queue offset and size, another topic: only the topic tells them apart."""
    path = tmp_path / "store"
    with segstore.open(str(path), format="rocketmq", mode="a") as store:
        store.append_batch([Message(topic=topic, partition=0, value=b"v" * 10) for _ in range(3)
                            for topic in ("A", "B")])
    cq = path / "consumequeue" / "A" / "0" / "00000000000000000000"
    other = (path / "consumequeue" / "B" / "0" / "00000000000000000000").read_bytes()
    data = bytearray(cq.read_bytes())
    data[20:28] = other[20:28]                     # A's entry 1 points at B's message 1
    cq.write_bytes(bytes(data))
    with RocketMQStore(str(path), "r") as s:
        want = first_error(lambda: list(s.read("A", 0)))
        assert first_error(lambda: list(s.scan_arrow(topic="A", partition=0))) == want
        assert first_error(lambda: list(s.scan_arrow(queues=[("A", 0, 0, 3), ("B", 0, 0, 3)]))) == want
