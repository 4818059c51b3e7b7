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
