"""Hostile names and files a demanding user (or an attacker) hands the CLI and the library.

- A ``--topic`` whose bytes are not UTF-8 (``segstore dump --topic $'a\\xffb' STORE``: Python reads
  the argument as ``os.fsdecode`` does, a lone surrogate for the byte): ``info`` said the RocketMQ
  store held no such topic (exit 1), ``dump`` died with a ``UnicodeEncodeError`` traceback
  (``columnar.topic_is`` encoded the name to compare it with the stored bytes).  The broker reads a
  stored topic as ``new String(bytes, UTF_8)``, which never holds a lone surrogate: no message is of
  that topic, and ``dump`` says what the store holds, as for any other name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import cli_run

import segstore

NOT_UTF8 = os.fsdecode(b"a\xffb")   # what argv holds for the bytes 61 FF 62


@pytest.fixture()
def rocketmq_store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", mappedFileSizeCommitLog=8192,
                       mappedFileSizeConsumeQueue=600) as rmq:
        rmq.append_batch([{"topic": "Plain", "queue_id": 0, "body": b"b%d" % i} for i in range(3)])
    return path


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_topic_that_is_not_utf8_is_no_topic_of_a_rocketmq_dump(rocketmq_store, json_flag):
    code, out, err = cli_run("dump", *json_flag, "--topic", NOT_UTF8, rocketmq_store)
    assert (code, out) == (1, "")
    assert "Traceback" not in err
    assert f"{rocketmq_store}: expected a topic named 'a\\udcffb', found topics Plain" in err


def test_a_topic_that_is_not_utf8_selects_no_rocketmq_record(rocketmq_store):
    with segstore.open(rocketmq_store) as rmq:
        assert list(rmq.dump_json(topic=NOT_UTF8)) == []
        assert list(rmq.dump_text(topic=NOT_UTF8)) == []
        assert len(list(rmq.dump_json(topic="Plain"))) > 0
