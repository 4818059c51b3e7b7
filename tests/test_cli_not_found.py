"""What the command line says when what was asked for is not there (issue 28, items 7, 8 and 10).

A lookup that matches nothing, or a selector naming a topic, partition or group the store
does not hold, leaves stdout empty, names what is missing on stderr and exits 1 (README: 1
for not found / data, 2 for usage); nothing is created on disk.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from conftest import FIXTURES, copy_writable

from segstore import cli

BASIC = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA_PART = FIXTURES / "kafka" / "uncompressed" / "topic-0"
FUTURE = "9999999999999"


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


# -- item 10: a lookup that matched nothing prints nothing on stdout --------------------------------

NO_HIT_QUERIES = [
    (BASIC, ["--topic", "TopicA", "--queue", "0", "--timestamp", FUTURE], "no message stored at or after"),
    (BASIC, ["--topic", "TopicA", "--queue", "0", "--offset", "999"], "no record at offset 999"),
    (BASIC, ["--topic", "TopicA", "--key", "no-such-key"], "no record with key 'no-such-key'"),
    (BASIC, ["--msg-id", "7F0000010000000000000000"], "no message with msgId"),
    (BASIC, ["--msg-id", "7F0000010000000000000000", "--topic", "TopicA"], "no message with msgId"),
    (BASIC, ["--topic", "TopicA", "--queue", "0", "--offset", "0", "--tag", "NOTAG"], "no record tagged"),
    (KAFKA_PART, ["--timestamp", FUTURE], "no record stored at or after timestamp"),
    (KAFKA_PART, ["--offset", "999"], "no record at offset 999"),
    (KAFKA_PART, ["--key", "no-such-key"], "no record with key 'no-such-key'"),
]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(("store", "argv", "said"), NO_HIT_QUERIES,
                         ids=[f"{s.parent.name}:{' '.join(a[-2:])}" for s, a, _ in NO_HIT_QUERIES])
def test_a_query_that_matched_nothing_leaves_stdout_empty(capsys, store, argv, said, as_json):
    code, out, err = run(capsys, "query", store, *argv, *(["--json"] if as_json else []))
    assert (code, out) == (1, "")
    assert said in err


def test_the_rocketmq_time_lookup_says_where_the_queue_ends_on_stderr(capsys):
    code, out, err = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "0", "--timestamp", FUTURE)
    assert (code, out) == (1, "")
    assert err == (f"segstore query: TopicA/0: no message stored at or after {FUTURE} "
                   "(the queue ends at offset 45)\n")
    code, out, _ = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "0", "--timestamp", "0", "--json")
    assert code == 0 and json.loads(out)["offset"] == 0
