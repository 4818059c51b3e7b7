"""A ``config/consumerOffset.json`` that cannot be decoded (and no ``.bak`` that can) blocked every command
and library open (``STORE/config/consumerOffset.json:23: expected a fastjson document, found ...``),
reads of the messages included.

The broker refuses to start on it: rocketmq-all-4.9.7 ``ConfigManager.load`` decodes the file, then
``loadBak`` its ``.bak``, and ``BrokerController.initialize`` gives up when ``ConsumerOffsetManager.load``
returns false (``result = result && this.consumerOffsetManager.load()``; ``BrokerStartup`` exits -3).  But
the commitlog and the consume queues hold the messages and need no committed offset
(``DefaultMessageStore.getMessage`` reads a consume queue, then the commitlog), so an offline tool reads
and diagnoses the store: a read-only open works, ``info`` shows the error, ``verify`` reports it (exit 1).
What needs the offsets (``consumers``, ``dump --group``, ``committed_offset``, the transaction check's
committed offset) raises the typed error naming file and position (exit 1, a data problem); every open for
append is refused with it before anything changes, as for ``topics.json``
(tests/test_rocketmq_topics_unreadable.py), so the file stays as it was for its repair.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rocketmq_damaged_configs import BODIES, bodies_read, damaged_store, run_cli, store_files
from segstore_rocketmq.topicconfig import ConsumerOffsets
from spark_support import reader, spark  # noqa: F401

import segstore
from segstore.errors import CorruptDataError

DAMAGED = '{"offsetTable":{"T@g":{'       # cut inside the first group's offsets: fastjson throws


def test_a_reader_reads_the_messages_and_keeps_the_offsets_error(tmp_path: Path) -> None:
    """The commitlog and consume queues are read without consumerOffset.json; the error is kept as
    ``consumer_offsets.error`` and ``info()["consumer_offsets_error"]``, naming the file and position;
    what needs a group's offsets raises it."""
    store = damaged_store(tmp_path, "consumerOffset.json", DAMAGED)
    path = str(store / "config" / "consumerOffset.json")
    with segstore.open(store) as s:
        error = s.consumer_offsets.error
        assert isinstance(error, CorruptDataError) and error.path == path and error.pos == len(DAMAGED)
        assert bodies_read(s) == {"read": BODIES, "scan": BODIES, "scan_arrow": BODIES}
        info = s.info()
        assert info["consumer_offsets_error"] == str(error)
        assert str(error).startswith(f"{path}:{len(DAMAGED)}: expected a fastjson document, found ")
        assert "topic_configs_error" not in info and info["topic_configs"]["T"]["write_queue_nums"] == 1
        for call in (lambda: s.consumer_groups(), lambda: s.consumer_groups("g"),
                     lambda: s.committed_offset("g", "T", 0)):
            with pytest.raises(CorruptDataError) as caught:
                call()
            assert caught.value is error
    # the .bak the broker would load instead: read, no error
    os.rename(path, path + ".bak")
    with segstore.open(store) as s:
        assert s.consumer_offsets.error is not None        # the damaged text, now the .bak
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{0:2}}}')
    with segstore.open(store) as s:
        assert s.consumer_offsets.error is None and "consumer_offsets_error" not in s.info()
        assert s.committed_offset("g", "T", 0) == 2


def test_reading_commands_work_and_what_needs_offsets_exits_1(tmp_path: Path, capsys) -> None:
    """``info``, ``dump``, ``query`` exit 0; ``verify`` names the file as a problem, exit 1; ``consumers``
    (list, describe, a reset's plan) and ``dump --group`` exit 1 with the error on stderr, no traceback
    (docs/cli.md: 1 a data problem, corrupt files)."""
    store = damaged_store(tmp_path, "consumerOffset.json", DAMAGED)
    path = store / "config" / "consumerOffset.json"
    said = f"{path}:{len(DAMAGED)}: expected a fastjson document"
    code, out, err = run_cli(capsys, "info", store)
    assert code == 0 and f"consumer_offsets_error: {said}" in out
    code, out, err = run_cli(capsys, "info", "--json", store)
    assert code == 0 and json.loads(out)["consumer_offsets_error"].startswith(said)
    code, out, err = run_cli(capsys, "dump", "--json", store)
    bodies = [json.loads(line)["body"] for line in out.splitlines()]
    assert code == 0 and bodies == ["bTA=", "bTE=", "bTI="]       # m0, m1, m2 in base64
    code, out, err = run_cli(capsys, "query", store, "--topic", "T", "--queue", "0", "--offset", "1")
    assert code == 0 and out.startswith("T/0@1 ")
    code, out, err = run_cli(capsys, "verify", "--json", store)
    problems = json.loads(out)["problems"]
    assert code == 1 and "Traceback" not in err
    assert [(p["path"], p["pos"]) for p in problems] == [(str(path), len(DAMAGED))]
    assert problems[0]["message"].startswith("expected a fastjson document, found ")
    for argv in (("consumers", store), ("consumers", "--json", store), ("consumers", store, "--group", "g"),
                 ("consumers", store, "--list"),
                 ("consumers", store, "--group", "g", "--reset-offsets", "--to-earliest"),
                 ("dump", store, "--group", "g"), ("dump", store, "--group", "g", "--topic", "T")):
        code, out, err = run_cli(capsys, *argv)
        assert code == 1 and out == "" and err.startswith(said) and "Traceback" not in err, argv


def test_writes_are_refused_and_change_no_byte(tmp_path: Path, capsys) -> None:
    """A commit would rewrite consumerOffset.json (``ConsumerOffsetManager.persist``) over what the user may
    repair, and the broker would not start on the store: every open for append is refused with the file's
    error before recovery runs or anything is written, the store byte for byte as it was."""
    store = damaged_store(tmp_path, "consumerOffset.json", DAMAGED)
    path = str(store / "config" / "consumerOffset.json")
    before = store_files(store)
    with pytest.raises(CorruptDataError) as caught:
        segstore.open(store, mode="a")
    assert caught.value.path == path and caught.value.pos == len(DAMAGED)
    assert store_files(store) == before
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"topic":"T","body":"m3"}\n')
    commands = [("write", store, "--input", jsonl), ("recover", store),
                ("consumers", store, "--group", "g", "--reset-offsets", "--to-earliest", "--execute"),
                ("consumers", store, "--group", "g", "--delete", "--execute")]
    for argv in commands:
        code, out, err = run_cli(capsys, *argv)
        assert code == 1 and out == "", argv
        assert err.startswith(f"{path}:{len(DAMAGED)}: expected a fastjson document"), argv
        assert "Traceback" not in err
        assert store_files(store) == before, argv
    # repaired (here: removed, the broker starts on an empty table), the store takes appends again
    os.remove(path)
    with segstore.open(store, mode="a") as s:
        s.append({"topic": "T", "body": b"m3"})
        s.commit_offset("g", "T", 0, 4)
    with segstore.open(store) as s:
        assert [m.body for m in s.read("T", 0)] == [b"m0", b"m1", b"m2", b"m3"]
        assert s.committed_offset("g", "T", 0) == 4


def test_consumer_offsets_refuse_to_give_or_write_over_an_unreadable_file(tmp_path: Path) -> None:
    """The table itself refuses what would read guessed offsets or rewrite the file (``table``, ``get``,
    ``commit``, ``dumps``, ``save``), whoever calls it."""
    store = damaged_store(tmp_path, "consumerOffset.json", DAMAGED)
    offsets = ConsumerOffsets(str(store))
    assert offsets.error is not None
    calls = (lambda: offsets.table, lambda: offsets.get("T", "g", 0), lambda: offsets.commit("T", "g", 0, 1),
             offsets.dumps, offsets.save, offsets.check)
    for call in calls:
        with pytest.raises(CorruptDataError):
            call()
    assert (store / "config" / "consumerOffset.json").read_text() == DAMAGED


def test_the_hanging_transaction_check_needs_the_checkers_offset(tmp_path: Path, capsys) -> None:
    """``half_messages`` starts each half queue at the offset the broker's checker group
    (``CID_RMQ_SYS_TRANS``, 4.9.7 ``TransactionalMessageServiceImpl.check`` through
    ``getConsumeOffset``) committed: without the file that is not known, so it raises the file's error
    rather than report messages already checked as hanging.  A store with no half queue needs none."""
    from segstore_rocketmq import halfmessages as hm

    store = damaged_store(tmp_path, "consumerOffset.json", DAMAGED)
    with segstore.open(store) as s:
        assert s.half_messages()[0] == []                      # no half queue: nothing to check
    os.remove(store / "config" / "consumerOffset.json")
    with segstore.open(store, mode="a") as s:
        s.append({"topic": hm.HALF_TOPIC, "queue_id": 0, "body": b"h",
                  "properties": {"REAL_TOPIC": "T", "REAL_QID": "0", "PGROUP": "pg", "TRAN_MSG": "true"}})
    (store / "config" / "consumerOffset.json").write_text(DAMAGED)
    with segstore.open(store) as s, pytest.raises(CorruptDataError) as caught:
        s.half_messages()
    assert caught.value.path == str(store / "config" / "consumerOffset.json")
    code, out, err = run_cli(capsys, "transactions", store, "--find-hanging")
    assert code == 1 and out == "" and err.startswith(f"{caught.value.path}:{len(DAMAGED)}: expected")


@pytest.mark.spark
def test_the_spark_source_reads_the_messages_and_its_consumers_table_fails(tmp_path: Path, spark,  # noqa: F811
                                                                           reader) -> None:  # noqa: F811
    """The ``segstore`` source reads the messages (each batch reader); the ``segstore_consumers`` table,
    which is the groups' offsets, fails naming the file, as ``segstore consumers`` exits 1."""
    store = damaged_store(tmp_path, "consumerOffset.json", DAMAGED)
    df = spark.read.format("segstore").option("reader", reader).load(str(store))
    assert sorted(row.value for row in df.select("value").collect()) == [b"m0", b"m1", b"m2"]
    with pytest.raises(Exception, match=r"consumerOffset\.json:23: expected a fastjson document"):
        spark.read.format("segstore_consumers").load(str(store)).collect()
