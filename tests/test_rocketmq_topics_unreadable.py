"""A ``config/topics.json`` that cannot be decoded (and no ``.bak`` that can) blocked every command and
library open (``STORE/config/topics.json:26: expected a fastjson document, found ...``), reads
included.

The broker refuses to start on it: rocketmq-all-4.9.7 ``ConfigManager.load`` decodes the file, then
``loadBak`` its ``.bak``, and ``BrokerController.initialize`` gives up when ``TopicConfigManager.load``
returns false.  But the commitlog and the consume queues hold the messages and need no topic config
(``DefaultMessageStore.getMessage`` reads a consume queue, then the commitlog), so an offline tool reads
and diagnoses the store: a read-only open works, ``info`` shows the error, ``verify`` reports it (exit 1).
What needs the table or rewrites the file (an append, a recovery, a commit: every open for append) is
refused with that typed error before anything changes, so the file stays as it was for its repair.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rocketmq_5x_files import write_batch_queue
from rocketmq_damaged_configs import BODIES, bodies_read, damaged_store, run_cli, store_files
from segstore_rocketmq.topicconfig import TopicConfigs

import segstore
from segstore.errors import CorruptDataError

DAMAGED = '{"topicConfigTable":{"T":{'       # cut inside the first topic: fastjson throws


def test_a_reader_reads_the_messages_and_keeps_the_topics_error(tmp_path: Path) -> None:
    """The commitlog and consume queues are read without topics.json; the error is kept (not lost) as
    ``topic_configs.error`` and ``info()["topic_configs_error"]``, naming the file and position."""
    store = damaged_store(tmp_path, "topics.json", DAMAGED)
    path = str(store / "config" / "topics.json")
    with segstore.open(store) as s:
        error = s.topic_configs.error
        assert isinstance(error, CorruptDataError) and error.path == path and error.pos == len(DAMAGED)
        assert bodies_read(s) == {"read": BODIES, "scan": BODIES, "scan_arrow": BODIES}
        info = s.info()
        assert info["topic_configs"] == {}
        assert info["topic_configs_error"] == str(error)
        assert str(error).startswith(f"{path}:{len(DAMAGED)}: expected a fastjson document, found ")
        assert s.topic_configs.batch_cq_topics() == frozenset()    # no batchconsumequeue/: none
    # a readable file: no such field
    (store / "config" / "topics.json").unlink()
    with segstore.open(store) as s:
        assert s.topic_configs.error is None and "topic_configs_error" not in s.info()


def test_reading_commands_work_and_verify_reports_the_file(tmp_path: Path, capsys) -> None:
    """``info``, ``dump``, ``query`` and ``consumers`` exit 0; ``verify`` names the file as a problem, exit 1
    (docs/cli.md: 1 for ``verify`` findings)."""
    store = damaged_store(tmp_path, "topics.json", DAMAGED)
    path = store / "config" / "topics.json"
    code, out, err = run_cli(capsys, "info", store)
    assert code == 0 and f"topic_configs_error: {path}:{len(DAMAGED)}: expected a fastjson document" in out
    code, out, err = run_cli(capsys, "info", "--json", store)
    assert code == 0 and json.loads(out)["topic_configs_error"].startswith(f"{path}:{len(DAMAGED)}: expected")
    code, out, err = run_cli(capsys, "dump", "--json", store)
    bodies = [json.loads(line)["body"] for line in out.splitlines()]
    assert code == 0 and bodies == ["bTA=", "bTE=", "bTI="]       # m0, m1, m2 in base64
    code, out, err = run_cli(capsys, "query", store, "--topic", "T", "--queue", "0", "--offset", "1")
    assert code == 0 and out.startswith("T/0@1 ")
    code, out, err = run_cli(capsys, "consumers", "--json", store)
    assert code == 0 and '"g"' in out
    code, out, err = run_cli(capsys, "verify", "--json", store)
    problems = json.loads(out)["problems"]
    assert code == 1 and "Traceback" not in err
    assert [(p["path"], p["pos"]) for p in problems] == [(str(path), len(DAMAGED))]
    assert problems[0]["message"].startswith("expected a fastjson document, found ")


def test_writes_are_refused_and_change_no_byte(tmp_path: Path, capsys) -> None:
    """An append would rewrite topics.json (``TopicConfigManager.persist`` of its new queue) over what the
    user may repair, and recovery takes its BatchCQ topics from it: every open for append is refused with
    the file's error before recovery runs or anything is written, the store byte for byte as it was."""
    store = damaged_store(tmp_path, "topics.json", DAMAGED)
    path = str(store / "config" / "topics.json")
    before = store_files(store)
    with pytest.raises(CorruptDataError) as caught:
        segstore.open(store, mode="a")
    assert caught.value.path == path and caught.value.pos == len(DAMAGED)
    assert store_files(store) == before
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"topic":"T","body":"m3"}\n')
    commands = [("write", store, "--input", jsonl), ("recover", store),
                ("consumers", store, "--group", "g", "--reset-offsets", "--to-earliest", "--execute")]
    for argv in commands:
        code, out, err = run_cli(capsys, *argv)
        assert code == 1, argv
        assert err.startswith(f"{path}:{len(DAMAGED)}: expected a fastjson document")
        assert "Traceback" not in err
        assert store_files(store) == before, argv
    # the plan of a reset reads only: printed, exit 0
    code, out, err = run_cli(capsys, "consumers", store, "--group", "g", "--reset-offsets", "--to-earliest")
    assert code == 0 and "T" in out
    # repaired (here: removed, the broker starts on an empty table), the store takes appends again
    os.remove(path)
    with segstore.open(store, mode="a") as s:
        s.append({"topic": "T", "body": b"m3"})
    with segstore.open(store) as s:
        assert [m.body for m in s.read("T", 0)] == [b"m0", b"m1", b"m2", b"m3"]
        assert s.topic_configs.topics["T"]["writeQueueNums"] == 1


def test_topic_configs_refuse_to_write_over_an_unreadable_file(tmp_path: Path) -> None:
    """The table itself refuses what would rewrite the file (``ensure``, ``save``), whoever calls it."""
    store = damaged_store(tmp_path, "topics.json", DAMAGED)
    configs = TopicConfigs(str(store))
    assert configs.error is not None and configs.topics == {}
    for call in (lambda: configs.ensure("T", 0), lambda: configs.save(1), configs.dumps, configs.check):
        with pytest.raises(CorruptDataError):
            call()
    assert (store / "config" / "topics.json").read_text() == DAMAGED


def test_batch_cq_topics_are_unknown_only_where_batch_queues_are(tmp_path: Path, capsys) -> None:
    """Which topics are 5.x BatchCQ topics (``queue.type`` in topics.json, ``QueueTypeUtils.getCQType``,
    rocketmq-all-5.1.4) decides which messages need a consume-queue entry.  Without ``batchconsumequeue/``
    no topic has batch units, so none is one; with it only the file could say: the file's error, and
    ``verify`` stops on it (exit 1, naming the file) rather than report every batch message as missing
    its entry."""
    store = damaged_store(tmp_path, "topics.json", DAMAGED)
    with segstore.open(store) as s:
        positions = [(m.physical_offset, m.size) for m in s.read("T", 0)]
    units = [(pos, size, 0, 0, 1) for pos, size in positions]
    write_batch_queue(str(store), "T", 0, units, file_size=20 * 46)
    path = str(store / "config" / "topics.json")
    with pytest.raises(CorruptDataError) as caught:
        TopicConfigs(str(store)).batch_cq_topics()
    assert caught.value.path == path
    code, out, err = run_cli(capsys, "verify", store)
    assert code == 1 and err.startswith(f"{path}:{len(DAMAGED)}: expected a fastjson document")
    assert "expected an entry for the message" not in out
    code, out, err = run_cli(capsys, "dump", store)     # reading needs no BatchCQ topics: the queues say
    assert code == 0 and out.count("T/0@") == 3
