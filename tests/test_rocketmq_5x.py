"""RocketMQ 5.x store files (issue 16): checkpoint fields, v2 messages, batch consume queue, timer store.

Sources: apache/rocketmq tag rocketmq-all-5.3.0; each test names the file and method it follows.
Files a 5.x broker writes that segstore does not write itself are laid out by the independent writer in
``tests/rocketmq_broker_files.py`` (from those sources), since no 5.x broker runs here.
"""

from __future__ import annotations

import io
import json
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq_5x_files import BCQ_UNIT as W_BCQ_UNIT
from rocketmq_5x_files import TimerStoreWriter, message_v2_bytes, write_batch_queue
from rocketmq_broker_files import Msg
from segstore_rocketmq import batchconsumequeue, timerstore
from segstore_rocketmq.batchconsumequeue import BCQ_UNIT
from segstore_rocketmq.config import BrokerConfig, validate_topic
from segstore_rocketmq.message import MESSAGE_MAGIC, MESSAGE_MAGIC_V2, magic_for

import segstore
from segstore.cli import main
from segstore.convert import convert
from segstore.errors import InvalidTopicError
from segstore.records import Message

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200,
         "maxHashSlotNum": 64, "maxIndexNum": 256}


def _checkpoint(path: Path) -> tuple[int, int, int, int, int]:
    # store/.../StoreCheckpoint.java flush: five big-endian longs at 0, 8, 16, 24, 32
    return struct.unpack_from(">5q", (path / "checkpoint").read_bytes())


def _append(path: Path, version: str, n: int) -> list[int]:
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion=version, **SMALL) as store:
        return [store.append({"topic": "abc", "queue_id": i % 2, "body": b"m%d" % i}).position
                for i in range(n)]


@pytest.mark.parametrize("version", ["5.0.0", "5.3.0"])
def test_5x_recovery_sets_confirm_phy_offset(tmp_path: Path, version: str) -> None:
    """CommitLog.recoverNormally / recoverAbnormally (not in controller mode): setConfirmOffset(
    lastValidMsgPhyOffset), the start of the last valid message; StoreCheckpoint.flush writes it at
    32.  DefaultMessageStore.load reads masterFlushedOffset back and nothing offline changes it."""
    path = tmp_path / "s"
    first = _append(path, version, 3)      # a new store: nothing to recover, the field stays 0
    assert _checkpoint(path)[4] == 0
    second = _append(path, version, 4)     # opening recovered the 3 messages: the last one's start
    assert _checkpoint(path)[4] == first[-1]
    data = bytearray((path / "checkpoint").read_bytes())
    data[24:32] = struct.pack(">q", 777)   # as a slave's sync left it
    (path / "checkpoint").write_bytes(bytes(data))
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion=version, **SMALL) as store:
        store.append({"topic": "abc", "queue_id": 0, "body": b"x"})
        store.abandon()                    # a crash: the abort file stays, the checkpoint unflushed
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion=version, **SMALL):
        pass                               # recoverAbnormally walks to the message of the crashed run
    cp = _checkpoint(path)
    assert cp[3] == 777
    with segstore.open(path, "rocketmq") as store:
        last = max(m.physical_offset for m in store.scan())
    assert cp[4] == last > second[-1]


def test_4x_store_leaves_the_5x_fields_alone(tmp_path: Path) -> None:
    """A 4.x StoreCheckpoint has three fields; the bytes from 24 stay as they were (zero)."""
    path = tmp_path / "s"
    _append(path, "4.9.7", 3)
    _append(path, "4.9.7", 1)
    assert _checkpoint(path)[3:] == (0, 0)


# -- batch consume queue ----------------------------------------------------------------------------

T = 1_700_000_000_000


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


def _messages(path: Path, n: int) -> list[tuple[int, int]]:
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion="5.3.0", **SMALL) as store:
        results = [store.append({"topic": "bt", "queue_id": 0, "body": b"m%d" % i}) for i in range(n)]
    return [(r.position, r.size) for r in results]


def test_batch_consume_queue_unit_is_46_bytes() -> None:
    """BatchConsumeQueue.CQ_STORE_UNIT_SIZE = 46; MSG_TAG_OFFSET_INDEX 12, MSG_STORE_TIME_OFFSET_INDEX 20,
    MSG_BASE_OFFSET_INDEX 28, MSG_BATCH_SIZE_INDEX 36, MSG_COMPACT_OFFSET_INDEX 38."""
    assert BCQ_UNIT.itemsize == W_BCQ_UNIT.size == 46
    assert [BCQ_UNIT.fields[n][1] for n in ("tags_code", "store_time", "base_offset", "batch_size",
                                            "compacted_offset")] == [12, 20, 28, 36, 38]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(1, 2**20), st.integers(-2**63, 2**63 - 1),
                          st.integers(0, 2**42), st.integers(1, 2**15 - 1)), max_size=12),
       st.integers(0, 1000))
def test_batch_queue_units_decode_as_written(batches: list, first: int) -> None:
    """putBatchMessagePositionInfo's units read back field by field; msgBaseOffset counts on by batchSize."""
    with tempfile.TemporaryDirectory() as tmp:
        (path,) = write_batch_queue(tmp, "t", 0, batches, file_size=46 * 12, first_offset=first)
        decoded = batchconsumequeue.read_file(path)
    assert decoded.problems == ()
    assert [tuple(u) for u in decoded.units[["offset", "size", "tags_code", "store_time", "batch_size"]]
            .tolist()] == batches
    expected_bases = [first + sum(b[4] for b in batches[:i]) for i in range(len(batches))]
    assert decoded.units["base_offset"].tolist() == expected_bases
    assert set(decoded.units["compacted_offset"].tolist()) <= {-1}


def test_batch_consume_queue_reads_dumps_and_verifies(tmp_path: Path, capsys) -> None:
    """A BatchCQ topic's queue (StorePathConfigHelper.getStorePathBatchConsumeQueue): info gives its
    offsets (maxOffsetInQueue = msgBaseOffset + batchSize), dump lists the units, verify checks them
    (BatchConsumeQueue.recover's unit rule; queue offsets contiguous; inside the commitlog)."""
    path = tmp_path / "s"
    msgs = _messages(path, 7)
    batches = [(pos, size, 11, T + i, 3) for i, (pos, size) in enumerate(msgs)]
    paths = write_batch_queue(str(path), "bt", 0, batches, file_size=5 * 46)
    with segstore.open(path) as store:
        assert store.verify() == []
        assert store.info()["batch_queues"] == [
            {"topic": "bt", "queue_id": 0, "min_offset": 0, "max_offset": 21, "files": 2}]
    code, out, _ = _run(capsys, "dump", paths[1], "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [(r["unit"], r["commitlog_offset"], r["msg_base_offset"], r["batch_size"]) for r in rows] == [
        (5, msgs[5][0], 15, 3), (6, msgs[6][0], 18, 3)]
    # a gap in the queue offsets, then bytes after the end of the queue
    data = bytearray(Path(paths[0]).read_bytes())
    struct.pack_into(">q", data, 2 * 46 + 28, 7)
    Path(paths[0]).write_bytes(bytes(data))
    data = bytearray(Path(paths[1]).read_bytes())
    data[2 * 46 + 40] = 1
    Path(paths[1]).write_bytes(bytes(data))
    with segstore.open(path) as store:
        found = [str(p) for p in store.verify()]
    assert any(f"{paths[0]}:92: expected msgBaseOffset 6" in p for p in found)
    assert any(f"{paths[1]}:92: expected a unit with commitLogOffset" in p for p in found)
    code, _, err = _run(capsys, "dump", paths[1])
    assert code == 1 and f"{paths[1]}:92:" in err


def test_a_batch_cq_topic_needs_no_consume_queue_and_recovery_makes_none(tmp_path: Path, capsys) -> None:
    """A topic with ``queue.type=BatchCQ`` (TopicAttributes.QUEUE_TYPE_ATTRIBUTE, rocketmq-all-5.1.4) is
    dispatched to ``batchconsumequeue/`` only (ConsumeQueueStore.findOrCreateConsumeQueue); a
    ``consumequeue/bt`` beside it makes ConsumeQueueStore.loadConsumeQueues (queueTypeShouldBe SimpleCQ)
    throw and the broker fail to load.  verify must not ask for entries, recover must not write them."""
    path = tmp_path / "s"
    msgs = _messages(path, 3)
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion="5.3.0", **SMALL) as store:
        store.append({"topic": "plain", "queue_id": 0, "body": b"p"})
    for f in (path / "consumequeue" / "bt" / "0").iterdir():
        f.unlink()
    (path / "consumequeue" / "bt" / "0").rmdir()
    (path / "consumequeue" / "bt").rmdir()
    write_batch_queue(str(path), "bt", 0, [(pos, size, 0, T, 1) for pos, size in msgs], file_size=20 * 46)
    topics = path / "config" / "topics.json"
    text = topics.read_text()
    assert '"topicName":"bt",' in text
    batch_cq = '"topicName":"bt",\n"attributes":{"queue.type":"BatchCQ"},'
    topics.write_text(text.replace('"topicName":"bt",', batch_cq))
    code, out, _ = _run(capsys, "verify", path)
    assert code == 0, out
    # an abnormal shutdown: the whole commitlog is dispatched again
    (path / "abort").write_bytes(b"")
    code, out, _ = _run(capsys, "recover", path)
    assert code == 0, out
    assert not (path / "consumequeue" / "bt").exists()
    assert (path / "consumequeue" / "plain" / "0").is_dir()
    # without the attribute the same messages do need entries (the check still works)
    topics.write_text(text)
    code, out, _ = _run(capsys, "verify", path)
    assert code == 1 and "expected entries for the 3 messages" in out


# -- timer store ------------------------------------------------------------------------------------

def _timer_store(path: Path) -> TimerStoreWriter:
    msgs = _messages(path, 6)
    writer = TimerStoreWriter(str(path), file_size=4 * 52 + 30)
    # four units a file (the fifth would leave < 16 bytes): files roll with a blank
    due = [T + 5000, T + 5000, T + 5400, T + 9000, T + 5000, T + 12000, T + 9999, T + 5000, T + 600]
    for i, when in enumerate(due):
        pos, size = msgs[i % len(msgs)]
        writer.enqueue(T + i, when, pos, size, "real-topic")
    writer.write(check=(T, writer.end, 9, 0, 0, T, 3), metrics={"real-topic": len(due)})
    return writer


def test_timer_units_and_slots_decode_as_written(tmp_path: Path) -> None:
    """TimerMessageStore.doEnqueue + TimerLog.append: 52-byte units, a 16-byte blank (BLANK_MAGIC_CODE)
    where the next unit leaves under MIN_BLANK_LEN; TimerWheel.putSlot at getSlotIndex, chains by prevPos."""
    path = tmp_path / "s"
    writer = _timer_store(path)
    assert timerstore.UNIT.itemsize == 52 and timerstore.SLOT.itemsize == 32
    assert timerstore.BLANK_MAGIC_CODE == -875286124
    logs = timerstore.read_timerlog(str(path))
    assert [f.ending for f in logs] == ["blank", "blank", "unwritten"]
    assert timerstore.unit_positions(logs).tolist() == writer.positions
    units = np.concatenate([f.units for f in logs])
    assert (units["write_time"] + units["delay"]).tolist()[:3] == [T + 5000, T + 5000, T + 5400]
    wheel = timerstore._read_wheel(str(path / "timerwheel"))
    used = timerstore.used_slots(wheel)
    assert sorted(used.tolist()) == sorted(writer.wheel)
    for index in used.tolist():
        t, first, last, num, _ = wheel[index].tolist()
        assert [t, first, last, num] == writer.wheel[index][:4]
        # the chain from lastPos back through prevPos holds num units, ending at firstPos
        chain, pos = [], last
        while pos != -1:
            chain.append(pos)
            pos = int(units["prev_pos"][writer.positions.index(pos)])
        assert len(chain) == num and chain[-1] == first


def test_timer_store_info_dump_and_verify(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s"
    writer = _timer_store(path)
    with segstore.open(path) as store:
        assert store.verify() == []
        timer = store.info()["timer"]
    assert timer["timerlog"]["units"] == 9 and timer["timerlog"]["end"] == writer.end
    assert timer["timerwheel"] == {"used_slots": len(writer.wheel)}
    assert timer["timercheck"]["lastTimerLogFlushPos"] == writer.end
    assert timer["timermetrics"] == {"real-topic": 9}
    code, out, _ = _run(capsys, "dump", path / "timerlog" / f"{0:020d}", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["position"] for r in rows if r["kind"] == "unit"] == writer.positions[:4]
    assert rows[-1]["ending"] == "blank"
    code, out, _ = _run(capsys, "dump", path / "timerwheel", "--json")
    assert code == 0 and {json.loads(line)["slot"] for line in out.splitlines()} == set(writer.wheel)
    code, out, _ = _run(capsys, "dump", path / "config" / "timercheck")
    assert code == 0 and f"lastTimerLogFlushPos: {writer.end}" in out
    code, out, _ = _run(capsys, "dump", path / "config" / "timermetrics")
    assert code == 0 and "topic: real-topic count: 9" in out


def test_timer_store_damage_is_reported(tmp_path: Path) -> None:
    """What the broker refuses or misreads: a wheel of another length (TimerWheel's constructor throws),
    a slot whose lastPos is not a unit, bytes after the last unit that are neither a unit nor a blank
    (recoverAndRevise with checkTimerLog cuts there), a checkpoint past the timer log."""
    path = tmp_path / "s"
    writer = _timer_store(path)
    wheel = path / "timerwheel"
    index = sorted(writer.wheel)[0]
    data = bytearray(wheel.read_bytes())
    struct.pack_into(">q", data, index * 32 + 16, writer.positions[0] + 1)
    wheel.write_bytes(bytes(data))
    last = path / "timerlog" / f"{2 * (4 * 52 + 30):020d}"
    data = bytearray(last.read_bytes())
    data[52 + 3] = 7
    last.write_bytes(bytes(data))
    check = path / "config" / "timercheck"
    data = bytearray(check.read_bytes())
    struct.pack_into(">q", data, 8, writer.end + 52 * 10)
    check.write_bytes(bytes(data))
    with segstore.open(path) as store:
        found = [str(p) for p in store.verify()]
    assert any(f"{wheel}:{index * 32}: expected lastPos of slot {index} at a timer log unit" in p
               for p in found), found
    assert any(f"{last}:52: expected a timer log unit" in p for p in found), found
    assert any(f"{check}:8: expected lastTimerLogFlushPos" in p for p in found), found
    wheel.write_bytes(wheel.read_bytes()[:-32])
    with segstore.open(path) as store:
        found = [str(p) for p in store.verify()]
    assert any(f"{wheel}" in p and "expected a timer wheel of 38707200 bytes" in p for p in found), found


# -- v2 messages -------------------------------------------------------------------------------------

LONG = "LongTopic_" + "x" * 190          # 200 characters: more than Byte.MAX_VALUE


@pytest.mark.parametrize(("version", "auto", "long_magic"), [
    ("5.3.0", True, MESSAGE_MAGIC_V2), ("5.1.0", True, MESSAGE_MAGIC_V2), ("5.3.0", False, None),
    ("5.0.0", True, None), ("4.9.7", True, None)])
def test_which_topics_are_v2(version: str, auto: bool, long_magic: int | None) -> None:
    """CommitLog.asyncPutMessage (rocketmq-all-5.1.0 .. 5.3.0): MESSAGE_VERSION_V2 when
    MessageStoreConfig.autoMessageVersionOnTopicLen (default true) and topic.length() > Byte.MAX_VALUE;
    5.0.0 and 4.x have no such rule (and TopicValidator refuses more than 127 characters)."""
    config = BrokerConfig.from_mapping({"rocketmqVersion": version, "autoMessageVersionOnTopicLen": auto})
    assert magic_for("t" * 127, writes_v2=config.writes_v2) == MESSAGE_MAGIC
    if long_magic is None:
        assert not config.writes_v2
        with pytest.raises(InvalidTopicError):
            validate_topic(LONG, config.topic_max_length)
    else:
        assert magic_for("t" * 128, writes_v2=config.writes_v2) == long_magic
        assert validate_topic(LONG, config.topic_max_length) == LONG


def test_long_topics_are_written_as_v2_read_recovered_and_converted(tmp_path: Path, capsys) -> None:
    """A 5.3.0 store writes a 200-character topic's messages as MessageExtEncoder does for
    MESSAGE_VERSION_V2 (the plain fast path hands them to the general encoder); they read back, a
    crash and a full recover rebuild their consume queue, and they convert to Kafka and back."""
    path = tmp_path / "s"
    config = {"rocketmqVersion": "5.3.0", **SMALL}
    with segstore.open(path, "rocketmq", mode="a", **config) as store:
        short = store.append({"topic": "abc", "queue_id": 0, "body": b"short"})
        plain = store.append({"topic": LONG, "queue_id": 1, "body": b"plain", "born_timestamp": T - 5,
                              "store_timestamp": T})
        general = store.append(Message(topic=LONG, partition=1, value=b"general", key=b"k1",
                                       headers=[("h", b"v")]))
        store.abandon()                              # a crash: recovery must walk the v2 messages
    data = b"".join(p.read_bytes() for p in sorted((path / "commitlog").iterdir()))
    assert struct.unpack_from(">i", data, short.position + 4)[0] == MESSAGE_MAGIC
    expected = message_v2_bytes(Msg(LONG, 1, b"plain", [], store_timestamp=T), 0, plain.position, T - 5)
    assert data[plain.position:plain.position + plain.size] == expected
    assert struct.unpack_from(">i", data, general.position + 4)[0] == MESSAGE_MAGIC_V2
    with segstore.open(path, "rocketmq", mode="a", **config) as store:    # recoverAbnormally
        assert store.verify() == []
    queue = path / "consumequeue" / LONG / "1"
    for f in queue.iterdir():
        f.unlink()
    assert main(["recover", str(path), *[f"--config={k}={v}" for k, v in config.items()]]) == 0
    capsys.readouterr()
    with segstore.open(path) as store:
        assert store.verify() == []
        got = [(m.topic, m.queue_id, m.queue_offset, bytes(m.body), m.magic) for m in store.scan()]
        assert [(m.topic, bytes(m.body)) for m in store.read(LONG, 1, 0)] == [(LONG, b"plain"),
                                                                              (LONG, b"general")]
    assert got == [("abc", 0, 0, b"short", MESSAGE_MAGIC), (LONG, 1, 0, b"plain", MESSAGE_MAGIC_V2),
                   (LONG, 1, 1, b"general", MESSAGE_MAGIC_V2)]
    convert(path, tmp_path / "kafka", to="kafka", verify=True, config={})
    convert(tmp_path / "kafka", tmp_path / "back", to="rocketmq", verify=True, config=config)
    back = b"".join(p.read_bytes() for p in sorted((tmp_path / "back" / "commitlog").iterdir()))
    assert back[:len(data.rstrip(b"\0"))] == data.rstrip(b"\0")


def test_a_4x_store_still_refuses_a_long_topic(tmp_path: Path) -> None:
    with segstore.open(tmp_path / "s", "rocketmq", mode="a", **SMALL) as store, \
            pytest.raises(InvalidTopicError):
        store.append({"topic": LONG, "queue_id": 0, "body": b"x"})


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 40_000), st.sampled_from([1, 3, 5])),
                min_size=1, max_size=30),
       st.integers(0, 6))
def test_timer_log_and_wheel_decode_as_enqueued(enqueues: list, extra: int) -> None:
    """Any run of TimerMessageStore.doEnqueue (units, blanks at file ends, slot chains) reads back:
    every unit at the position TimerLog.append gave it, every slot as TimerWheel.putSlot left it, and
    verify finds nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        writer = TimerStoreWriter(tmp, file_size=52 * (2 + extra) + 16 + extra)
        for i, (write_delta, delay, magic) in enumerate(enqueues):
            writer.enqueue(T + write_delta, T + write_delta + delay, 1000 * i, 100, f"t{i % 3}", magic)
        writer.write(check=(T, writer.end, len(enqueues), 0, 0, T, 1))
        logs = timerstore.read_timerlog(tmp)
        assert timerstore.unit_positions(logs).tolist() == writer.positions
        units = np.concatenate([f.units for f in logs])
        assert units["magic"].tolist() == [m for _, _, m in enqueues]
        assert units["offset_py"].tolist() == [1000 * i for i in range(len(enqueues))]
        wheel = timerstore._read_wheel(str(Path(tmp) / "timerwheel"))
        assert {i: wheel[i].tolist() for i in timerstore.used_slots(wheel).tolist()} == {
            i: tuple(s) for i, s in writer.wheel.items()}
        assert timerstore.verify(tmp) == []
