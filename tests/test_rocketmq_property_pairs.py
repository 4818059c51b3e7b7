"""Properties read as the broker reads them: RocketMQ 4.9.7 ``MessageDecoder.string2messageProperties``
keeps an item only where its first 0x01 has a name before it and a value after it
(``kvSepIndex > index && kvSepIndex < newIndex - 1``).  A pair with an empty name or value is
dropped, so an empty ``UNIQ_KEY`` is no key (``CommitLog.checkMessageAndReturnSize`` takes it from
that map, ``IndexService.buildIndex`` skips a null one) and an empty ``TAGS`` does not replace an
earlier one.  The Python reference (``message.decode_properties``) and the C decoders
(``split_properties``, ``property_columns``, ``known_properties``) read them alike; appends refuse
such pairs (``Message.putUserProperty`` refuses blank names and values: no consumer would see them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_run
from segstore_rocketmq import columnar
from segstore_rocketmq.message import (
    RocketMQMessage,
    body_crc,
    decode_properties,
    encode_parts,
    encode_topic,
    encoded_size,
)
from segstore_rocketmq.store import RocketMQStore

from segstore.columns import ROCKETMQ_SCHEMA, project
from segstore.errors import InvalidMessageError

ROOT = Path(__file__).resolve().parent.parent
needs_c = pytest.mark.skipif(columnar._speedups is None, reason="segstore_rocketmq._speedups not built")


def string2message_properties(properties: str) -> dict[str, str]:
    """RocketMQ 4.9.7 ``MessageDecoder.string2messageProperties``, line for line."""
    out: dict[str, str] = {}
    length, index = len(properties), 0
    while index < length:
        new_index = properties.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv_sep_index = properties.find("\x01", index)
            if index < kv_sep_index < new_index - 1:
                out[properties[index:kv_sep_index]] = properties[kv_sep_index + 1:new_index]
        index = new_index + 1
    return out


#: Raw properties strings with the pairs the broker drops, beside ones it keeps.
RAW = [b"empty\x01\x02x\x011", b"x\x011\x02empty\x01", b"\x01noname\x02y\x012",
       b"KEYS\x01k1\x02UNIQ_KEY\x01", b"UNIQ_KEY\x01u\x02UNIQ_KEY\x01", b"TAGS\x01t\x02TAGS\x01",
       b"TAGS\x01\x02KEYS\x01\x02a\x01b\x02", b"a\x01\x01b", b"a\x01b\x01c\x02\x01\x02",
       b"\x01\x01\x02TAGS\x01x\x02TAGS\x01y", b"\x01", b"a\x01", b"ab\x02c\x01d",
       b"KEYS\x01 \x02UNIQ_KEY\x01 u",
       # KEYS again: the last value, its first token (the key column alone finds it so too)
       b"KEYS\x01 a b\x02KEYS\x01  c d \x02x\x011", b"KEYS\x01a\x02KEYS\x01", b"KEYS\x01   ",
       b"KEYS\x01e\x02KEYS\x01\x01f", b"KEY\x01g\x02KEYSS\x01h",
       # longer than 64 bytes: property_columns' other (non-vector) split
       b"p" * 60 + b"\x01\x02" + b"q\x01" + b"\x02\x01r\x02TAGS\x01x\x02TAGS\x01\x02UNIQ_KEY\x01",
       b"KEYS\x01 i j\x02" + b"p" * 60 + b"\x01v\x02KEYS\x01 k l"]


@pytest.mark.parametrize("raw", RAW)
def test_the_python_reference_reads_properties_as_the_broker(raw):
    assert decode_properties(raw) == string2message_properties(raw.decode())


def _region(raws: list[bytes]) -> bytes:
    data = b""
    for raw in raws:
        msg = RocketMQMessage("T", 0, b"body", physical_offset=len(data), store_timestamp=5)
        topic_field = encode_topic("T")
        msg.size = encoded_size(len(msg.body), len(topic_field), len(raw), 0)
        data += b"".join(encode_parts(msg, topic_field, raw, body_crc(msg.body)))
    return data


@needs_c
def test_the_c_decoders_read_properties_as_the_python_reference():
    data = _region(RAW)
    view = memoryview(data)
    rows_c, rows_py = columnar.rows_of(len(RAW)), columnar.rows_of(len(RAW))
    rows_c.n = columnar._speedups.decode_region(view, 0, len(data), len(data), 1000, rows_c.i8, rows_c.i4,
                                                rows_c.u8, True)[0]
    columnar.decode_region_py(view, 0, len(data), len(data), 1000, rows_py, True)
    assert rows_c.n == len(RAW)
    expected = [string2message_properties(raw.decode()) for raw in RAW]
    c_batch = columnar.build_batch(view, rows_c)                    # property_columns
    split = columnar._Properties(view, rows_c)                      # split_properties (dump's writers)
    c_codes = columnar.tags_hashes(view, rows_c)                    # known_properties
    c_index = columnar.index_entries(view, rows_c)
    saved = columnar._speedups
    try:
        columnar._speedups = None
        py_batch = columnar.build_batch(view, rows_py)
        py_codes = columnar.tags_hashes(view, rows_py)
        py_index = columnar.index_entries(view, rows_py)
    finally:
        columnar._speedups = saved
    for name in c_batch.schema.names:
        assert c_batch.column(name).equals(py_batch.column(name)), name
    for wanted in (["key"], ["key", "keys"], ["key", "tags"]):     # the key alone, with tokens, with items
        part = columnar.build_batch(view, rows_c, project(ROCKETMQ_SCHEMA, wanted))
        assert part.column("key").equals(py_batch.column("key")), wanted
    assert [dict(p) for p in c_batch.column("properties").to_pylist()] == expected
    assert c_batch.column("tags").to_pylist() == [e.get("TAGS") for e in expected]
    for i, want in enumerate(expected):
        lo, hi = split.item_offsets[i], split.item_offsets[i + 1]
        got = {bytes(view[n:n + nl]).decode(): bytes(view[v:v + vl]).decode() for n, nl, v, vl in zip(
            split.names[lo:hi], split.name_lens[lo:hi], split.values[lo:hi], split.value_lens[lo:hi],
            strict=True)}
        assert got == want
        has_tags = split.tags_lens[i] >= 0
        assert has_tags == ("TAGS" in want)
    assert c_codes.tolist() == py_codes.tolist()
    assert [x.tolist() for x in c_index] == [x.tolist() for x in py_index]


@needs_c
def test_the_key_column_alone_finds_first_tokens_of_every_length_as_the_reference():
    # the key alone: a first token of at most 16 bytes from its first non-space to the value's end is
    # found by one vector compare, others by memchr (MessageExt.getKeys split on spaces, the first kept)
    raws = [b"KEYS\x01" + lead + b"k" * size + tail for size in range(1, 22) for lead in (b"", b"  ")
            for tail in (b"", b" x", b"  ", b" " + b"y" * 20)]
    data = _region(raws)
    view = memoryview(data)
    rows = columnar.rows_of(len(raws))
    rows.n = columnar._speedups.decode_region(view, 0, len(data), len(data), 0, rows.i8, rows.i4, rows.u8,
                                              True)[0]
    assert rows.n == len(raws)
    key = columnar.build_batch(view, rows, project(ROCKETMQ_SCHEMA, ["key"])).column("key")
    assert key.to_pylist() == [decode_properties(raw)["KEYS"].split()[0].encode() for raw in raws]


EMPTY = "expected property names and values that are not empty"


@pytest.mark.parametrize("properties", [{"empty": "", "x": "1"}, {"": "noname", "y": "2"}, {"UNIQ_KEY": ""}])
def test_an_append_refuses_a_pair_no_consumer_would_see(tmp_path, properties):
    """Message.putUserProperty refuses a blank name or value; stored, the decoder would drop it."""
    with RocketMQStore(str(tmp_path / "s"), "a") as store:
        with pytest.raises(InvalidMessageError, match=EMPTY):
            store.append({"topic": "T1", "body": b"a", "keys": ["k1"], "properties": properties})
        with pytest.raises(InvalidMessageError, match=EMPTY):
            store.append_batch([{"topic": "T1", "body": b"a", "properties": properties}])
        assert store.commitlog.end == 0


def test_stored_messages_with_such_pairs_read_and_index_as_the_broker(tmp_path):
    """Messages another writer stored with empty pairs: dump (C and pure Python) shows what the broker's
    MessageDecoder gives, and the index holds no topic#"" entry for the empty UNIQ_KEY."""
    path = tmp_path / "s"
    stored = [{"empty": "", "x": "1"}, {"": "noname", "y": "2"}, {"KEYS": "k1", "UNIQ_KEY": ""}]
    with RocketMQStore(str(path), "a", {"mappedFileSizeCommitLog": 65536}) as store:
        store.append_stored([RocketMQMessage("T1", 0, body, props, store_timestamp=5)
                             for body, props in zip([b"a", b"b", b"d"], stored, strict=True)])
        assert [k for m in store.scan() for k in m.properties] == ["x", "y", "KEYS"]
    code, out, err = cli_run("dump", path / "index" / os.listdir(path / "index")[0])
    assert code == 0, err
    # T1#k1 only (the broker's own rebuilt index of these messages)
    assert [line.split()[3] for line in out.splitlines() if line.startswith("entry:")] == ["79072524"]
    assert cli_run("query", path, "--topic", "T1", "--key", "")[0] != 0
    want = [{"x": "1"}, {"y": "2"}, {"KEYS": "k1"}]
    for pure in ("0", "1"):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")]),
               "SEGSTORE_PURE_PYTHON": pure}
        done = subprocess.run([sys.executable, "-c", "import sys; from segstore.cli import command; "
                               "sys.exit(command())", "dump", str(path), "--json"],
                              capture_output=True, text=True, env=env, timeout=120, check=True)
        assert [json.loads(line)["properties"] for line in done.stdout.splitlines()] == want, pure
    assert RocketMQStore(str(path)).verify() == []
