"""The RocketMQ text dump in C (issue 31): ``columnar.TextWriter`` and ``RocketMQStore.dump_text``
write the bytes of the pure-Python reference, ``RocketMQStore.dump`` (``store.message_line``: the
body preview quoted as JSON with ``ensure_ascii=False`` and cut at 40 characters, the hex of 20
bytes for a body that is not UTF-8, the topic, keys and tags JSON-quoted when they hold a space as
``str.isspace`` knows them, a quote or a control character (C0, DEL, C1), ``-`` for none; DEL and the
C1 controls, which ``json.dumps`` leaves as they are, escaped too: ``segstore.store.text_word``).

Generated messages in a decoded region; the broker fixtures through every selector, both
isolation levels, ``--index`` and threads; the command line with and without the accelerator.
"""

from __future__ import annotations

import io
import json
import re
import unicodedata

import pytest
from conftest import FIXTURES, ROCKETMQ_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import columnar
from segstore_rocketmq.message import RocketMQMessage, body_crc, encode_parts, encode_topic, encoded_size
from segstore_rocketmq.store import RocketMQStore, message_line

from segstore import cli

needs_c = pytest.mark.skipif(columnar._speedups is None, reason="segstore_rocketmq._speedups not built")
ROOT = FIXTURES / "rocketmq"

#: Characters a key or tag may hold: every kind of str.isspace() space, quotes, escapes, many-byte ones.
SPACES = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
#: Control characters that are no space: C0 (\x01 and \x02 split the properties), DEL, C1 (U+009B: CSI).
CONTROLS = "\x00\x03\x07\x08\x1b\x7f\x80\x9b\x9f"
word = st.text(alphabet=st.one_of(
    st.sampled_from(SPACES + CONTROLS + '"\\a,é✓😀\u2030\u200b'),
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02")), max_size=6)
body = st.one_of(
    st.binary(max_size=50),                                          # mostly not UTF-8
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=60).map(str.encode),  # UTF-8, long or not
    st.text(st.sampled_from('aé✓😀"\\\n\x01'), min_size=35, max_size=45).map(str.encode),  # near the cut
    st.sampled_from([b"", b"\xed\xa0\x80", b"abc\xff", "x" * 40 + "é", b"\xc3"]).map(
        lambda b: b if isinstance(b, bytes) else b.encode()),
)


@st.composite
def stored(draw, pos: int) -> bytes:
    """One message as stored at view position ``pos``, with KEYS and TAGS that may need quoting."""
    msg = RocketMQMessage(topic=draw(st.sampled_from(["T", "TopicA", "ünï", "T\x1b[2J", "a b", "T\x9b", ""])),
                          queue_id=draw(st.integers(0, 3)),
                          body=draw(body), queue_offset=draw(st.integers(0, 2**40)), physical_offset=pos,
                          born_timestamp=draw(st.integers(-(2**63), 2**63 - 1)),
                          store_timestamp=draw(st.integers(0, 2**42)))
    items = []
    keys = draw(st.one_of(st.none(), st.lists(word, max_size=3).map(" ".join)))
    if keys is not None:
        items.append(f"KEYS\x01{keys}")
    tags = draw(st.one_of(st.none(), word))
    if tags is not None:
        items.append(f"TAGS\x01{tags}")
    props = "\x02".join(draw(st.permutations(items))).encode()
    topic_field = encode_topic(msg.topic)
    msg.size = encoded_size(len(msg.body), len(topic_field), len(props), msg.sys_flag)
    return b"".join(encode_parts(msg, topic_field, props, body_crc(msg.body)))


@needs_c
@settings(max_examples=150)
@given(st.integers(1, 6).flatmap(lambda n: st.lists(st.just(None), min_size=n, max_size=n)), st.data())
def test_c_text_lines_equal_the_python_lines_of_each_message(slots, data):
    region = b""
    for _ in slots:
        region += data.draw(stored(len(region)))
    view = memoryview(region)
    rows = columnar.rows_of(16)
    columnar.decode_region(view, 0, len(region), len(region), 0, rows, False)
    assert len(rows) == len(slots)
    writer = columnar.TextWriter()
    writer.lines(view, rows.select(slice(0, 1)))       # a small buffer first, grown after
    lines = writer.lines(view, rows)
    expected = "".join(message_line(m) + "\n" for m in columnar.messages(view, rows))
    assert str(lines, "utf-8") == expected


def one_message(tags: str | None, keys: str | None, payload: bytes = b"x") -> bytes:
    msg = RocketMQMessage(topic="T", queue_id=0, body=payload)
    items = [f"TAGS\x01{tags}"] if tags is not None else []
    items += [f"KEYS\x01{keys}"] if keys is not None else []
    props = "\x02".join(items).encode()
    topic_field = encode_topic("T")
    msg.size = encoded_size(len(payload), len(topic_field), len(props), 0)
    return b"".join(encode_parts(msg, topic_field, props, body_crc(payload)))


def c_and_python_lines(region: bytes) -> tuple[str, str]:
    view = memoryview(region)
    rows = columnar.rows_of(4)
    columnar.decode_region(view, 0, len(region), len(region), 0, rows, False)
    expected = "".join(message_line(m) + "\n" for m in columnar.messages(view, rows))
    return str(columnar.TextWriter().lines(view, rows), "utf-8"), expected


@needs_c
@pytest.mark.parametrize("char", [*SPACES, *CONTROLS, '"', "\u200b", "\u2030", ",", "😀", "\xa1"],
                         ids=lambda c: f"U+{ord(c):04X}")
def test_c_quotes_a_key_or_tag_exactly_where_python_does(char):
    region = one_message(f"a{char}b", f"k{char}z") + one_message(char, f"{char}x")
    got, expected = c_and_python_lines(region)
    assert got == expected
    quoted = char.isspace() or char == '"' or unicodedata.category(char) == "Cc"
    assert (f"tags=a{char}b " in expected) == (not quoted)
    escaped = char == '"' or unicodedata.category(char) == "Cc"      # \", \n, \u001b, \u009b...
    assert (f'tags="a{char}b" ' in expected) == (quoted and not escaped)


@pytest.mark.parametrize("accelerated", [True, False])
def test_a_line_shows_no_control_character_of_a_topic_key_tag_or_body(monkeypatch, accelerated):
    """A key holding ``ESC [ 3 1 m`` (or a tag holding U+009B, CSI in one character, or DEL) went into
    the dump and query lines as it is, unquoted: a terminal shown them (``| less -R``, ``| cat``) acts on
    them, and a carriage return-free line could still be overprinted or forged.  Such a word is now
    quoted as one holding white space is, its control characters written as JSON's ``\\u001b``
    escapes, DEL and C1 included (``json.dumps`` leaves those as they are), in the Python lines and the C
    writer alike; ``json.loads`` reads each word back.  (RocketMQ 4.9.7 ``Validators.checkTopic`` /
    ``TopicValidator`` refuse such a topic at the producer, but the commitlog holds whatever bytes were
    written, and a decode reads them.)"""
    from segstore_rocketmq.message import encode

    if not accelerated:
        monkeypatch.setattr(columnar, "_speedups", None)
    elif columnar._speedups is None:
        pytest.skip("segstore_rocketmq._speedups not built")
    msg = RocketMQMessage(topic="T\x1bx", queue_id=0, body="b\x7f\x9b\x1b[2J".encode(),
                          properties={"KEYS": "k\x1b[31m k2", "TAGS": "t\x9b"})
    msg.size = len(encode(msg))
    region = encode(msg)
    view = memoryview(region)
    rows = columnar.rows_of(4)
    columnar.decode_region(view, 0, len(region), len(region), 0, rows, False)
    (line,) = (str(columnar.TextWriter().lines(view, rows), "utf-8") if accelerated else
               "".join(message_line(m) + "\n" for m in columnar.messages(view, rows))).splitlines()
    assert not any(unicodedata.category(c) == "Cc" for c in line), line
    where, fields = line.split()[1], line.split("  ")[-1]
    assert where == '"T\\u001bx"/0@0'
    words = dict(w.split("=", 1) for w in re.findall(r'\w+=(?:"(?:[^"\\]|\\.)*"|\S+)', fields))
    assert json.loads(words["keys"]) == "k\x1b[31m,k2"      # KEYS split at spaces, joined by commas
    assert json.loads(words["tags"]) == "t\x9b"
    assert json.loads(words["body"]) == "b\x7f\x9b\x1b[2J"


@needs_c
@pytest.mark.parametrize("payload", [b"", "é" * 40, "é" * 41, "😀" * 39 + "ab", b"\xff" * 20, b"\xff" * 21,
                                     b"a" * 19 + b"\xc3"], ids=repr)
def test_c_body_preview_cuts_characters_and_bytes_as_python(payload):
    payload = payload.encode() if isinstance(payload, str) else payload
    got, expected = c_and_python_lines(one_message(None, None, payload) + one_message("", "", payload))
    assert got == expected and "keys=- tags=-" in expected


def python_dump(path, **selection) -> bytes:
    with RocketMQStore(str(path), "r") as store:
        return "".join(line.text + "\n" for line in store.dump(**selection)).encode()


@needs_c
@pytest.mark.parametrize(("topic", "partition"), [(None, None), ("TopicA", None), (None, 1), ("TopicB", 2)])
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_dump_text_equals_the_message_by_message_dump(topic, partition, isolation):
    for name in ROCKETMQ_FIXTURES:
        path = ROOT / name / "store"
        for index in (False, True):
            selection = {"topic": topic, "partition": partition, "isolation": isolation, "index": index}
            expected = python_dump(path, **selection)
            for threads in (1, 3):
                with RocketMQStore(str(path), "r") as store:
                    got = b"".join(bytes(block) for block in store.dump_text(**selection, threads=threads))
                assert got == expected, (name, index, threads)
        assert expected


def test_read_committed_text_dump_leaves_out_the_fixture_transactions():
    path = ROOT / "basic" / "store"
    committed = python_dump(path, isolation="read_committed").splitlines()
    assert len(committed) < len(python_dump(path).splitlines())


@pytest.mark.parametrize("argv", [[], ["--index"], ["--topic", "TopicA", "--threads", "2"],
                                  ["--isolation", "read_committed"]])
@pytest.mark.parametrize("accelerated", [True, False])
def test_cli_text_dump_prints_the_reference_lines(monkeypatch, argv, accelerated):
    if not accelerated:
        monkeypatch.setattr(columnar, "_speedups", None)
    out = io.StringIO()
    path = ROOT / "basic" / "store"
    assert cli.main(["dump", str(path), *argv], out) == 0
    index = "--index" in argv
    topic = argv[argv.index("--topic") + 1] if "--topic" in argv else None
    isolation = argv[argv.index("--isolation") + 1] if "--isolation" in argv else "read_uncommitted"
    assert out.getvalue().encode() == python_dump(path, topic=topic, index=index, isolation=isolation)
