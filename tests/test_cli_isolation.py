"""``segstore dump|query --isolation read_committed`` through the real command line (a subprocess).

Kafka: the broker-written ``txn`` fixture holds committed and aborted transactions; the
oracle (:func:`test_kafka_isolation._oracle`) comes from its ``spec.json`` and the broker's
own ``dump.jsonl``, not from the reader under test.  A read_committed consumer
(``CompletedFetch`` with ``UnifiedLog.collectAbortedTransactions``) is given neither the
aborted records nor the transaction markers.

RocketMQ: the broker-written ``basic`` store holds a prepared (sysFlag 0x4) and a
rolled-back (0xC) transaction message; ``CommitLogDispatcherBuildConsumeQueue.dispatch``
gives them no consume-queue entry, so no consumer is given them, while ``IndexService.buildIndex``
still indexes the prepared one by key.  read_committed leaves them out where a commitlog
walk or a key lookup would show them.
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES
from test_cli import run_process
from test_kafka_isolation import PART, _oracle

import segstore

BASIC = FIXTURES / "rocketmq" / "basic" / "store"
PREPARED, ROLLBACK, TRANSACTION_MASK = 0x4, 0xC, 0xC


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _committed_offsets() -> tuple[list[int], list[int]]:
    every, aborted, control = _oracle()
    assert aborted and control
    return every, [o for o in every if o not in aborted and o not in control]


@pytest.mark.parametrize("flags", [[], ["--isolation", "read_uncommitted"]], ids=["default", "explicit"])
def test_kafka_dump_json_is_read_uncommitted_by_default(flags):
    every, _ = _committed_offsets()
    done = run_process("dump", PART, "--json", *flags)
    assert done.returncode == 0, done.stderr
    assert [obj["offset"] for obj in _json_lines(done.stdout)] == every


def test_kafka_dump_json_read_committed_hides_aborted_records_and_markers():
    _, committed = _committed_offsets()
    done = run_process("dump", PART, "--json", "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    dumped = _json_lines(done.stdout)
    assert [obj["offset"] for obj in dumped] == committed
    assert not any(obj["batch"]["is_control"] for obj in dumped)
    # the objects are those of the plain dump, only fewer
    every = {obj["offset"]: obj for obj in _json_lines(run_process("dump", PART, "--json").stdout)}
    assert dumped == [every[obj["offset"]] for obj in dumped]


def test_kafka_dump_text_read_committed_lists_only_committed_records():
    _, committed = _committed_offsets()
    done = run_process("dump", PART, "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    records = [int(line.split()[2]) for line in lines if line.startswith("| offset: ")]
    assert records == committed
    assert not [line for line in lines if "isControl: true" in line]
    plain = run_process("dump", PART).stdout
    assert "isControl: true" in plain and "endTxnMarker: ABORT" in plain


def test_kafka_query_offset_read_committed_starts_at_the_next_committed_record():
    every, committed = _committed_offsets()
    hidden = [o for o in every if o not in committed]
    start = hidden[0]
    args = ("query", PART, "--offset", start, "--count", 3, "--json")
    plain = run_process(*args)
    assert [obj["offset"] for obj in _json_lines(plain.stdout)] == [o for o in every if o >= start][:3]
    done = run_process(*args, "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    assert [obj["offset"] for obj in _json_lines(done.stdout)] == [o for o in committed if o >= start][:3]


def test_kafka_query_key_read_committed_leaves_out_aborted_hits():
    every, committed = _committed_offsets()
    with segstore.open(str(PART)) as store:
        keys = {r.offset: r.key for r in store.read("topic", 0)}
    # a key carried by an aborted record and by no committed one
    aborted_only = next(k for o, k in keys.items() if k and k.startswith(b"key-") and o not in committed
                        and all(keys[c] != k for c in committed))
    key = aborted_only.decode()
    plain = run_process("query", PART, "--key", key, "--json")
    assert plain.returncode == 0, plain.stderr
    hits = [o for o in every if keys[o] == aborted_only]
    assert [obj["offset"] for obj in _json_lines(plain.stdout)] == hits
    done = run_process("query", PART, "--key", key, "--json", "--isolation", "read_committed")
    assert (done.returncode, done.stdout) == (1, "")
    assert f"no record with key {key!r}" in done.stderr


def test_rocketmq_dump_read_committed_leaves_out_prepared_and_rolled_back_messages():
    plain = _json_lines(run_process("dump", BASIC, "--json").stdout)
    kinds = [obj["sys_flag"] & TRANSACTION_MASK for obj in plain]
    assert PREPARED in kinds and ROLLBACK in kinds
    done = run_process("dump", BASIC, "--json", "--isolation", "read_committed")
    assert done.returncode == 0, done.stderr
    assert _json_lines(done.stdout) == [obj for obj, kind in zip(plain, kinds, strict=True)
                                        if kind not in (PREPARED, ROLLBACK)]
    text = run_process("dump", BASIC, "--isolation", "read_committed")
    assert text.returncode == 0 and len(text.stdout.splitlines()) == len(plain) - 2


def test_rocketmq_query_key_read_committed_leaves_out_a_prepared_message():
    plain = _json_lines(run_process("dump", BASIC, "--json").stdout)
    prepared = next(obj for obj in plain if obj["sys_flag"] & TRANSACTION_MASK == PREPARED)
    key = prepared["keys"][0]
    args = ("query", BASIC, "--topic", prepared["topic"], "--key", key, "--json")
    found = run_process(*args)
    assert found.returncode == 0, found.stderr
    assert [obj["physical_offset"] for obj in _json_lines(found.stdout)] == [prepared["physical_offset"]]
    done = run_process(*args, "--isolation", "read_committed")
    assert (done.returncode, done.stdout) == (1, "")


def test_an_unknown_isolation_level_is_a_usage_error():
    done = run_process("dump", PART, "--isolation", "committed")
    assert done.returncode == 2 and "invalid choice: 'committed'" in done.stderr
    assert "Traceback" not in done.stderr
