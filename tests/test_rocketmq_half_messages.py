"""``segstore transactions STORE --find-hanging`` on a RocketMQ store: the half messages the broker's
transaction check would still ask a producer about.

Expected values follow rocketmq-all-4.9.7, broker/.../transaction/queue/:
- TransactionalMessageBridge.java ``parseHalfMessageInner`` (half messages in RMQ_SYS_TRANS_HALF_TOPIC
  queue 0, REAL_TOPIC/REAL_QID/PGROUP/UNIQ_KEY properties) and ``addRemoveTagInTransactionOp`` (an op
  message in RMQ_SYS_TRANS_OP_HALF_TOPIC, tags ``d``, body the half message's queue offset);
- TransactionalMessageServiceImpl.java ``check`` (from CID_RMQ_SYS_TRANS's committed offset; younger than
  transactionTimeOut or CHECK_IMMUNITY_TIME_IN_SECONDS waits; ``checkPrepareQueueOffset``), ``needDiscard``
  (TRANSACTION_CHECK_TIMES >= transactionCheckMax) and ``needSkip`` (older than fileReservedTime hours);
- common/.../BrokerConfig.java: transactionTimeOut 6000 ms, transactionCheckMax 15.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_run as run
from segstore_rocketmq.halfmessages import done_offsets

import segstore

NOW = 1_800_000_000_000
HOUR = 3_600_000
HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def _half(i: int, age_ms: int, topic: str = "Orders", **props: str) -> dict:
    properties = {"REAL_TOPIC": topic, "REAL_QID": str(i % 2), "PGROUP": "pg", "UNIQ_KEY": f"K{i}",
                  "TRAN_MSG": "true", **props}
    return {"topic": HALF, "queue_id": 0, "body": b"order %d" % i, "tags": "t", "properties": properties,
            "born_timestamp": NOW - age_ms, "store_timestamp": NOW - age_ms + 1}


def _store(path: Path, *, checked_to: int | None = None) -> Path:
    """Half offsets 0-8: 0 committed and 1 rolled back (ops ``0``, ``1``); 2 waiting an hour; 3 two seconds
    old; 4 checked 15 times; 5 immune for two hours; 6 an immune put-back copy of 1
    (TRAN_PREPARED_QUEUE_OFFSET); 7 older than fileReservedTime (72 h); 8 of topic Payments, finished by an
    op batch ``8,x``."""
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([
            _half(0, HOUR), _half(1, HOUR), _half(2, HOUR), _half(3, 2_000),
            _half(4, HOUR, TRANSACTION_CHECK_TIMES="15"),
            _half(5, HOUR, CHECK_IMMUNITY_TIME_IN_SECONDS="7200"),
            _half(6, HOUR, CHECK_IMMUNITY_TIME_IN_SECONDS="7200", TRAN_PREPARED_QUEUE_OFFSET="1"),
            _half(7, 100 * HOUR),
            _half(8, HOUR, topic="Payments")])
        store.append_batch([{"topic": OP, "queue_id": 0, "body": body, "tags": "d"}
                            for body in (b"0", b"1", b"8,x")])
        if checked_to is not None:
            store.commit_offsets("CID_RMQ_SYS_TRANS", {(HALF, 0): checked_to})
    return path


def test_the_checker_would_ask_about_what_no_op_finished(tmp_path):
    path = _store(tmp_path / "store")
    code, out, err = run("transactions", path, "--find-hanging", "--now-ms", NOW, "--json")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert [(r["msg_id"], r["half_offset"], r["check_times"], r["next_check"]) for r in rows] == [
        ("K2", 2, 0, "check"), ("K4", 4, 15, "discard"), ("K7", 7, 0, "discard")]
    assert rows[0] == {"topic": "Orders", "queue_id": 0, "msg_id": "K2", "producer_group": "pg",
                       "half_queue_id": 0, "half_offset": 2, "commitlog_offset": rows[0]["commitlog_offset"],
                       "born_timestamp": NOW - HOUR, "store_timestamp": NOW - HOUR + 1, "check_times": 0,
                       "next_check": "check", "duration_min": 60}
    with segstore.open(path) as store:      # the commitlog offset is the half message's own
        (message,) = store.read(HALF, 0, 2, 1)
        assert rows[0]["commitlog_offset"] == message.physical_offset
    code, out, _ = run("transactions", path, "--find-hanging", "--now-ms", NOW)
    assert out.splitlines()[0].split() == ["Topic", "QueueId", "MsgId", "ProducerGroup", "HalfOffset",
                                           "BornTimestamp", "CheckTimes", "NextCheck", "Duration(min)"]
    assert out.splitlines()[1].split() == ["Orders", "0", "K2", "pg", "2", str(NOW - HOUR), "0", "check",
                                           "60"]


def test_the_half_table_keeps_a_property_with_a_tab_in_its_cell(tmp_path):
    """The producer group, msgId and real topic of a half message are its properties as the producer set
    them: a ``PGROUP`` holding a tab (or a line break, or ``ESC``) split the tab-separated table's columns
    (or rows) and went to a pipe as it is.  Such a cell is quoted as the dump's words are
    (``segstore.store.text_word``); ``--json`` gives the value as stored."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([_half(2, HOUR, PGROUP="p\tg\x1b[2J", UNIQ_KEY="K 2")])
    code, out, err = run("transactions", path, "--find-hanging", "--now-ms", NOW)
    assert (code, err) == (0, "")
    _, row = out.splitlines()
    assert [c.strip() for c in row.split("\t")][:5] == ["Orders", "0", '"K 2"', '"p\\tg\\u001b[2J"', "0"]
    code, out, _ = run("transactions", path, "--find-hanging", "--now-ms", NOW, "--json")
    assert json.loads(out)[0]["producer_group"] == "p\tg\x1b[2J"


@pytest.mark.parametrize("argv, expected", [
    (["--max-transaction-timeout", "0"], ["K2", "K3", "K4", "K7"]),      # the fresh one too (5 stays immune)
    (["--max-transaction-timeout", "90"], ["K4", "K7"]),     # needDiscard comes before the age
    (["--topic", "Orders", "--partition", "1"], ["K7"]),
    (["--config", "transactionTimeOut=1000"], ["K2", "K3", "K4", "K7"]),
    (["--config", "transactionCheckMax=16"], ["K2", "K4", "K7"]),
])
def test_timeouts_filters_and_the_brokers_config(tmp_path, argv, expected):
    path = _store(tmp_path / "store")
    code, out, _ = run("transactions", path, "--find-hanging", "--now-ms", NOW, "--json", *argv)
    rows = json.loads(out)
    assert code == 0 and [r["msg_id"] for r in rows] == expected
    if "transactionCheckMax=16" in argv:
        assert {r["msg_id"]: r["next_check"] for r in rows}["K4"] == "check"


def test_the_checkers_committed_offset_is_where_pending_starts(tmp_path):
    """Below CID_RMQ_SYS_TRANS's offset the checker already put each message back (or gave it up)."""
    path = _store(tmp_path / "store", checked_to=5)
    code, out, _ = run("transactions", path, "--find-hanging", "--now-ms", NOW, "--json")
    assert code == 0 and [r["msg_id"] for r in json.loads(out)] == ["K7"]


def test_a_store_without_transactions_says_so(tmp_path):
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": b"x"}])
    code, out, err = run("transactions", path, "--find-hanging")
    assert code == 0 and out.split() == ["Topic", "QueueId", "MsgId", "ProducerGroup", "HalfOffset",
                                         "BornTimestamp", "CheckTimes", "NextCheck", "Duration(min)"]
    assert "no RMQ_SYS_TRANS_HALF_TOPIC queue here" in err
    code, out, err = run("transactions", path, "--producers")
    assert (code, out) == (2, "") and "rocketmq stores keep no producer state" in err
    # the flag given, not a list with --find-hanging, which this same store just answered
    assert ": --producers: rocketmq stores keep no producer state" in err and "--find-hanging)" in err
    assert "--abort" not in err
    code, out, err = run("transactions", path)
    assert (code, out) == (2, "") and "transactions --find-hanging" in err


def test_op_bodies_name_offsets_one_or_several():
    """4.9.7 writes one offset a body, 5.x several, comma-separated; ``Long.parseLong`` takes a sign but no
    space, so `` 7 `` names nothing."""
    import pyarrow as pa

    bodies = pa.array([b"0", b"12,13", b" 7 ", b"x", None, b"", b"3,,y,4", b"+5"], pa.binary())
    assert done_offsets(bodies) == {0, 12, 13, 3, 4, 5}


def test_an_op_message_not_tagged_d_finishes_nothing(tmp_path):
    """4.9.7 TransactionalMessageServiceImpl.fillOpRemoveMap: only an op message whose tags are
    ``TransactionalMessageUtil.REMOVETAG`` (``d``) puts its offset in the remove map; any other tag (or
    none) is logged as illegal and the half message it names is still checked."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([_half(0, HOUR), _half(1, HOUR), _half(2, HOUR)])
        store.append_batch([{"topic": OP, "queue_id": 0, "body": b"0", "tags": "d"},
                            {"topic": OP, "queue_id": 0, "body": b"1", "tags": "x"},
                            {"topic": OP, "queue_id": 0, "body": b"2"}])
    code, out, _ = run("transactions", path, "--find-hanging", "--now-ms", NOW, "--json")
    assert code == 0 and [r["msg_id"] for r in json.loads(out)] == ["K1", "K2"]
    import pyarrow as pa

    bodies, tags = pa.array([b"3", b"4", b"5"], pa.binary()), pa.array(["d", None, "D"], pa.string())
    assert done_offsets(bodies, tags) == {3}


def test_the_checkers_order_discard_then_immunity_then_timeout(tmp_path):
    """4.9.7 TransactionalMessageServiceImpl.check, per half message from the committed offset: an offset
    in the remove map (an op tagged d naming an offset at or past the committed one) is done; then
    ``needDiscard``/``needSkip``, whatever its age; then a message stored after the check began waits;
    with CHECK_IMMUNITY_TIME_IN_SECONDS (``getImmunityTime``: ``getLong``, -1 meaning transactionTimeOut)
    one younger than it goes to ``checkPrepareQueueOffset`` (done or put back, not asked) and an older one
    is asked, TRAN_PREPARED_QUEUE_OFFSET or not; without it one younger than transactionTimeOut waits and
    one born after now is asked (``valueOfCurrentMinusBorn <= -1``).  Counts are ``Integer.parseInt``'s:
    a text it refuses is -1."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([
            _half(0, HOUR),                                                   # finished below: not read
            _half(1, 1_000, TRANSACTION_CHECK_TIMES="15"),                    # young, but given up
            _half(2, 2 * HOUR, CHECK_IMMUNITY_TIME_IN_SECONDS="3600", TRAN_PREPARED_QUEUE_OFFSET="0"),
            _half(3, 30 * 60_000, CHECK_IMMUNITY_TIME_IN_SECONDS="3600", TRAN_PREPARED_QUEUE_OFFSET="9"),
            _half(4, 2 * HOUR, CHECK_IMMUNITY_TIME_IN_SECONDS="-5"),           # -5000 ms: asked
            _half(5, 2 * HOUR, CHECK_IMMUNITY_TIME_IN_SECONDS=" 9999"),        # getLong -1: the timeout
            _half(6, HOUR, TRANSACTION_CHECK_TIMES=" 15"),                     # parseInt -1: not given up
            {**_half(7, -60_000), "store_timestamp": NOW - 1},                # born in the future: asked
            {**_half(8, HOUR), "store_timestamp": NOW},                       # stored as the check began
            {**_half(9, HOUR, TRANSACTION_CHECK_TIMES="15"), "store_timestamp": NOW},   # given up first
        ])
        store.append_batch([{"topic": OP, "queue_id": 0, "body": b"0", "tags": "d"}])
        store.commit_offsets("CID_RMQ_SYS_TRANS", {(HALF, 0): 1})
    code, out, _ = run("transactions", path, "--find-hanging", "--now-ms", NOW, "--json")
    assert code == 0
    assert [(r["msg_id"], r["check_times"], r["next_check"]) for r in json.loads(out)] == [
        ("K1", 15, "discard"), ("K2", 0, "check"), ("K4", 0, "check"), ("K5", 0, "check"),
        ("K6", 0, "check"), ("K7", 0, "check"), ("K9", 15, "discard")]


def test_a_transactional_id_is_refused_with_the_producer_views(tmp_path):
    """kafka-transactions takes ``--transactional-id`` in ``describe`` only (3.8.0 TransactionsCommand:
    describe-producers, find-hanging and abort have no such argument): segstore refused it nowhere and
    listed every half message (or hanging transaction) as if it had filtered them."""
    path = _store(tmp_path / "store")
    for argv in (["--find-hanging"], ["--producers"], ["--abort", "--topic", "T", "--partition", "0",
                                                      "--start-offset", "0"]):
        code, out, err = run("transactions", path, *argv, "--transactional-id", "x", "--now-ms", NOW)
        assert (code, out) == (2, "") and "--transactional-id goes with" in err, argv


def test_op_bodies_and_half_properties_read_as_long_parselong_and_integer_parseint(tmp_path):
    """4.9.7 TransactionalMessageServiceImpl: ``fillOpRemoveMap`` reads an op body with ``getLong``
    (``Long.parseLong``), ``getImmunityTime`` CHECK_IMMUNITY_TIME_IN_SECONDS with ``getLong``, and
    ``needDiscard`` TRANSACTION_CHECK_TIMES with ``getInt`` (``Integer.parseInt``), -1 where they throw.
    Java reads any BMP decimal digit and leading zeros of any number, but no digit past the BMP (two
    surrogates): an op body ``\\u0663`` or 22 digits finished nothing here, and an immunity ``\\U0001d7d8``
    was 0 s (asked at once) where the broker's -1 makes it wait transactionTimeOut (6 s)."""
    import pyarrow as pa

    bodies = pa.array(["\u0663".encode(), b"0" * 20 + b"4", b"9223372036854775807", "\U0001d7d5".encode(),
                       b"9223372036854775808"], pa.binary())
    assert done_offsets(bodies) == {3, 4, 9223372036854775807}
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([
            _half(0, HOUR), _half(1, HOUR), _half(2, 3_000, CHECK_IMMUNITY_TIME_IN_SECONDS="\U0001d7d8"),
            _half(3, HOUR, TRANSACTION_CHECK_TIMES="\uff11\uff15"),        # FULLWIDTH 15: given up
            _half(4, HOUR, TRANSACTION_CHECK_TIMES="\U0001d7cf\U0001d7d3")])  # -1: asked
        store.append_batch([{"topic": OP, "queue_id": 0, "body": body, "tags": "d"}
                            for body in ("\u0660".encode(), b"0" * 25 + b"1")])
    code, out, _ = run("transactions", path, "--find-hanging", "--now-ms", NOW, "--json")
    assert code == 0
    assert [(r["msg_id"], r["check_times"], r["next_check"]) for r in json.loads(out)] == [
        ("K3", 15, "discard"), ("K4", 0, "check")]
