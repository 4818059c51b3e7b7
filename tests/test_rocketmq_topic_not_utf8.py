"""A RocketMQ commitlog message whose stored topic is not UTF-8, read as the 4.9.7 broker reads it.

RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` (the recovery walk and the dispatch) reads the
topic as ``new String(bytesContent, 0, topicLen, MessageDecoder.CHARSET_UTF8)`` and
``MessageDecoder.decode`` (what a consumer is served) as ``new String(topic, CHARSET_UTF8)``: a U+FFFD
for each malformed sequence, never an error, and the recovery keeps the message (it validates no
topic).  No producer stores such a topic (``TopicValidator.validateTopic`` takes
``[%|a-zA-Z0-9_-]`` only), so it is a topic the broker refuses, its Java text, as ``T#$x`` is: read
and dumped, reported by ``verify``, left in place by ``recover``.  Before, segstore took the message
as damage (``'utf-8' codec can't decode``): ``dump`` stopped at it (exit 1) and ``recover`` cut the
last one away as a torn tail, a message the broker keeps.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from conftest import cli_run
from segstore_rocketmq import columnar

import segstore

CONFIG = {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 600}
ARGS = [arg for name, value in CONFIG.items() for arg in ("--config", f"{name}={value}")]
#: the topic written, then the bytes put in its place (the same length: every length checks out)
WRITTEN, STORED = b"TQQx", b"T\xff\xfex"
JAVA_TOPIC = "T\ufffd\ufffdx"       # new String(STORED, UTF_8)
MESSAGES = 4                        # every other one of topic STORED, the last one too


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as rmq:
        for i in range(MESSAGES):
            rmq.append_batch([{"topic": WRITTEN.decode() if i % 2 else "Plain", "queue_id": 0,
                               "body": b"body%d" % i, "keys": [f"k{i}"]}])
    (log,) = (path / "commitlog").iterdir()
    data = log.read_bytes()
    assert data.count(WRITTEN) == MESSAGES // 2
    log.write_bytes(data.replace(WRITTEN, STORED))
    return path


@pytest.fixture(params=["C", "reference"])
def walk(request, monkeypatch):
    if request.param == "reference":
        monkeypatch.setattr(columnar, "_speedups", None)
    return request.param


def test_reads_give_the_topic_as_java_reads_it(store, walk):
    """``scan``, ``scan_arrow``, ``dump`` and ``dump`` of the commitlog file read every message, the
    topic as Java's text (before: exit 1 at the first, ``expected a well-formed message``)."""
    with segstore.open(store, format="rocketmq", **CONFIG) as rmq:
        assert [m.topic for m in rmq.scan()] == ["Plain", JAVA_TOPIC] * 2
        topics = [t for b in rmq.scan_arrow() for t in b.column("topic").to_pylist()]
        assert topics == ["Plain", JAVA_TOPIC] * 2
        assert [s for b in rmq.scan_arrow() for s in b.column("size").to_pylist()] == [108, 107] * 2
    code, out, err = cli_run("dump", store, *ARGS)
    assert code == 0, err
    assert [line.split()[1].split("/")[0] for line in out.splitlines()] == ["Plain", JAVA_TOPIC] * 2
    code, out, err = cli_run("dump", store / "commitlog" / "00000000000000000000")
    assert code == 0, err
    assert out.count(f"topic: {JAVA_TOPIC} ") == MESSAGES // 2


def test_verify_reports_a_topic_the_broker_refuses(store, walk):
    """``verify`` names the message's topic as one ``TopicValidator`` refuses, as for any such topic
    (before: a decode error, ``'utf-8' codec can't decode byte 0xff``)."""
    code, out, _ = cli_run("verify", store, *ARGS)
    assert code == 1
    assert f":108: expected a topic of the characters [%|a-zA-Z0-9_-], found '{JAVA_TOPIC}'" in out, out
    assert "codec" not in out


def test_recover_keeps_the_last_message(store, walk):
    """The broker's recovery keeps the message (``checkMessageAndReturnSize`` succeeds), so ``recover``
    leaves it in place as it leaves any message of a topic the broker refuses: the commitlog keeps every
    byte.  Before, the last such message was cut as a torn tail (moved to .segstore/cut/)."""
    log = store / "commitlog" / "00000000000000000000"
    before = log.read_bytes()
    code, out, _ = cli_run("recover", store, *ARGS)
    assert code == 1        # (a message left in place, as for any topic the broker refuses)
    assert "torn tail" not in out and "cut" not in out, out
    assert ":323: a whole message of 107 bytes left in place" in out, out
    assert log.read_bytes() == before
    with segstore.open(store, format="rocketmq", **CONFIG) as rmq:
        assert [m.body for m in rmq.scan()] == [b"body%d" % i for i in range(MESSAGES)]


@pytest.mark.parametrize("threads", ["1", "3"])
def test_dump_json_carries_the_stored_topic_bytes_and_write_input_refuses_the_line(store, tmp_path, walk,
                                                                                     threads):
    """``dump --json`` gives such a message's stored topic bytes as ``topic_base64`` (its ``topic`` is
    Java's text, which other bytes read as too: ``T\\xfe\\xffx`` dumped the same line), the other lines
    none; ``write --input`` of the dump refuses the line, exit 1, naming it, those bytes and why
    (4.9.7 ``TopicValidator`` refuses any such topic, so no copy holds the message as stored), and
    creates nothing.  Before, the copy's refusal named only Java's text (``found 'T\\ufffd\\ufffdx'``),
    and the dump did not say which bytes the store held."""
    code, out, err = cli_run("dump", store, "--json", "--threads", threads, *ARGS)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line.get("topic_base64") for line in lines] == [None, "VP/+eA=="] * 2     # b"T\xff\xfex"
    assert base64.b64decode(lines[1]["topic_base64"]) == STORED and lines[1]["topic"] == JAVA_TOPIC
    assert all("properties_base64" not in line for line in lines)     # its properties are UTF-8
    source = tmp_path / "dump.jsonl"
    source.write_text(out, encoding="utf-8")
    copy = tmp_path / "copy"
    code, _, err = cli_run("write", copy, "--input", source, *ARGS)
    assert code == 1
    assert ": line 2: expected a topic the broker stores" in err, err
    assert "found the stored bytes b'T\\xff\\xfex' (topic_base64: not UTF-8" in err, err
    assert not copy.exists()


def test_dump_of_the_file_carries_the_topic_bytes_and_no_properties_bytes_that_are_utf8(store):
    """``dump FILE --json`` gives ``topic_base64`` too; before, a message whose topic alone was not UTF-8
    got a ``properties_base64`` of properties that are (``KEYS\\x01k1``), which the field's contract
    (bytes that are not UTF-8, what ``write --input`` takes) refuses."""
    code, out, err = cli_run("dump", store / "commitlog" / "00000000000000000000", "--json")
    assert code == 0, err
    messages = [m for m in map(json.loads, out.splitlines()) if m["kind"] == "message"]
    assert [m.get("topic_base64") for m in messages] == [None, "VP/+eA=="] * 2
    assert all("properties_base64" not in m for m in messages)


@pytest.mark.parametrize(("value", "found"), [
    ("not base64!", "expected a dump line's topic_base64 as base64"),
    ("VFFReA==", "found the stored bytes b'TQQx'")])
def test_a_line_with_topic_base64_is_refused_whatever_it_holds(tmp_path, value, found):
    """A hand-made line with ``topic_base64`` is refused too: the field says the stored topic was not
    UTF-8, which no copy can hold; its own mistakes (not base64) are named first."""
    with segstore.open(tmp_path / "src", format="rocketmq", mode="a", **CONFIG) as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"b"}])
    code, out, err = cli_run("dump", tmp_path / "src", "--json", *ARGS)
    line = {**json.loads(out), "topic_base64": value}
    source = tmp_path / "line.jsonl"
    source.write_text(json.dumps(line) + "\n", encoding="utf-8")
    code, _, err = cli_run("write", tmp_path / "copy", "--input", source, *ARGS)
    assert code == 1 and found in err and ": line 1: " in err, err
    assert not (tmp_path / "copy").exists()
