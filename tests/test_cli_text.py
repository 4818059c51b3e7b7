"""What the command line prints for people (issue 28, item 12): human text, never Python reprs; only
what changed; advice in the CLI's own terms; every batch header over its own records.

Through the real entry point (``main()`` with captured output).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, copy_writable
from segstore_kafka import batch as codec

import segstore
from segstore import cli, files

BASIC = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA_PART = FIXTURES / "kafka" / "uncompressed" / "topic-0"
#: What a Python repr looks like in a line: a list or dict literal, None, a bytes literal.
REPR = re.compile(r"\[['\[{]|\{'|\bNone\b|=b'|=b\"|=\[\]|'\]")


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


def _no_reprs(text: str) -> None:
    found = [line for line in text.splitlines() if REPR.search(line)]
    assert not found, found


# -- one-line messages and info -----------------------------------------------------------------

def test_rocketmq_message_lines_are_human_text(capsys):
    code, out, _ = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "0", "--offset", "0",
                       "--count", "2")
    assert code == 0
    _no_reprs(out)
    first, second = out.splitlines()
    assert first == ("TopicA/0@0 phy=0 size=208 store=1795334929308 keys=key-0,shared-0,ключ-0 tags=TagA "
                     "msgId=7F00000100002A9F0000000000000000")
    assert ' keys=key-8 tags="tag with space" ' in second
    with segstore.open(BASIC) as store:
        plain = next(m for m in store.scan() if not m.keys and m.tags is None)
        line = store.describe(plain)
    assert " keys=- tags=- " in line
    code, out, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--queue", "0")
    _no_reprs(out)
    assert ' keys=key-8 tags="tag with space" body="' in out and "body='" not in out


@pytest.mark.parametrize("store", [BASIC, KAFKA_PART], ids=["rocketmq", "kafka"])
def test_info_lines_are_human_text(capsys, store):
    code, out, _ = run(capsys, "info", store)
    assert code == 0
    _no_reprs(out)
    if store is BASIC:
        assert "topics: SCHEDULE_TOPIC_XXXX, TopicA, TopicB\n" in out
    else:
        assert "leader_epochs=0 0; 1 123; 3 238" in out


def test_an_empty_map_in_info_prints_a_dash_not_a_dangling_key():
    """A KRaft topic without configs (``configs: {}``) reads ``configs: -``, as None does, not a bare
    ``configs:`` that reads as the start of a nested block with nothing under it."""
    out = io.StringIO()
    compacted = {"partitions": 50, "configs": {"cleanup.policy": "compact"}}
    cli._print_info({"topics": {"orders": {"partitions": 1, "configs": {}}, "__consumer_offsets": compacted},
                     "replay_stopped": None}, out)
    assert out.getvalue() == ("topics:\n  orders:\n    partitions: 1\n    configs: -\n"
                              "  __consumer_offsets:\n    partitions: 50\n"
                              "    configs:\n      cleanup.policy: compact\n"
                              "replay_stopped: -\n")


# -- retention, delete-records, compact: what changed, then a summary ----------------------------

def test_retention_prints_what_it_deletes_and_a_summary(tmp_path, capsys):
    logdir = tmp_path / "logs"
    copy_writable(KAFKA_PART, logdir / "topic-0")
    copy_writable(KAFKA_PART, logdir / "other-0")
    code, out, _ = run(capsys, "retention", logdir, "--topic", "topic", "--config", "retention.bytes=8000",
                       "--dry-run")
    assert code == 0
    _no_reprs(out)
    # segments of 6521, 6062, 6803, 6265 and 1289 bytes: 18940 over the limit, so the first two go
    # (UnifiedLog.deleteRetentionSizeBreachedSegments: while the excess covers the next segment)
    assert out.splitlines() == [
        "topic-0: would delete 2 segments, offsets 0-136 (12583 bytes; retention.bytes); "
        "log start offset 0 -> 137",
        "retention (dry run): 1 partition would change, 0 unchanged; nothing was changed",
    ]
    code, out, _ = run(capsys, "retention", logdir, "--config", "retention.bytes=100000000")
    assert code == 0
    assert out.splitlines() == ["retention: nothing to delete in 2 partitions"]


def test_retention_that_keeps_old_data_for_want_of_a_limit_says_so(tmp_path, capsys):
    """The fixture's records are of 2023: a first ``segstore retention LOGDIR --dry-run`` said only
    "nothing to delete in 2 partitions", as though nothing were old, where it is segstore's default
    ``retention.ms`` of -1 (the broker's 7 days, ``LogConfig.DEFAULT_RETENTION_MS`` in 3.8.0) that keeps
    them; the line says so, and a limit given deletes them (JSON results carry each partition's limits)."""
    logdir = tmp_path / "logs"
    copy_writable(KAFKA_PART, logdir / "topic-0")
    copy_writable(KAFKA_PART, logdir / "other-0")
    later = str(10**13)     # past every record's time, whatever the clock says
    code, out, _ = run(capsys, "retention", logdir, "--dry-run", "--now-ms", later)
    assert (code, out.splitlines()) == (0, [
        "retention (dry run): nothing to delete in 2 partitions: retention.ms and retention.bytes are -1 "
        "(keep forever) on each, segstore's default where no topic config, --config or --config-file sets "
        "them (the broker's retention.ms is 604800000, 7 days)"])
    code, out, _ = run(capsys, "retention", logdir, "--dry-run", "--now-ms", later, "--json")
    assert {tuple(json.loads(line)["limits"].values()) for line in out.splitlines()} == {(-1, -1)}
    code, out, _ = run(capsys, "retention", logdir, "--dry-run", "--now-ms", later,
                       "--config", "retention.ms=604800000")
    assert code == 0 and out.splitlines()[-1] == ("retention (dry run): 2 partitions would change, "
                                                  "0 unchanged; nothing was changed")
    code, out, _ = run(capsys, "retention", logdir, "--dry-run", "--config", "retention.bytes=100000000")
    assert out.splitlines() == ["retention (dry run): nothing to delete in 2 partitions"]   # a limit: no hint


def test_delete_records_and_compact_print_human_text(tmp_path, capsys):
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    code, out, _ = run(capsys, "delete-records", part, "--before", "100", "--dry-run")
    assert code == 0
    _no_reprs(out)
    assert out.splitlines() == [
        "topic-0: would delete 1 segment, offsets 0-72 (6521 bytes; log-start-offset); "
        "log start offset 0 -> 100",
        "delete-records (dry run): 1 partition would change, 0 unchanged; nothing was changed",
    ]
    code, out, _ = run(capsys, "compact", part, "--config", "cleanup.policy=compact", "--dry-run")
    assert code == 0
    _no_reprs(out)
    assert out.splitlines()[0].startswith("topic-0: would clean offsets 0-288: keep 79 of 289 records, "
                                          "25651 -> 9343 bytes")
    assert out.splitlines()[-1].startswith("compact (dry run): 1 partition would change")


def test_rocketmq_retention_prints_human_text(tmp_path, capsys, monkeypatch):
    # a disk a tenth full: on the machine's own disk past 75% (diskMaxUsedSpaceRatio), as a CI machine's
    # may be, retention deletes for space too and the text differs
    monkeypatch.setattr(files, "disk_space", lambda path: (100 << 30, 90 << 30, 90 << 30))
    store = copy_writable(BASIC, tmp_path / "store")
    code, out, _ = run(capsys, "retention", store, "--dry-run", "--now-ms", str(2**62))
    assert code == 0
    _no_reprs(out)
    first = out.splitlines()[0]
    assert first.startswith(f"{store}: would delete 2 commitlog files, 8 consume-queue files, 1 index file")
    assert "commitlog min offset 0 -> 524288" in first
    code, out, _ = run(capsys, "retention", store, "--dry-run")
    assert out.splitlines() == [f"retention (dry run): nothing to delete in {store}"]


# -- advice in the CLI's terms ------------------------------------------------------------------

def test_convert_does_not_suggest_a_format_option_it_lacks(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "x").write_text("")
    code, _, err = run(capsys, "convert", tmp_path / "src", tmp_path / "dst", "--to", "kafka")
    assert code == 2
    assert "not a store of any known format" in err and "--format" not in err
    code, _, err = run(capsys, "info", tmp_path / "src")
    assert code == 2 and "pass --format" in err      # info has --format: the advice stays


def test_a_locked_store_is_explained_without_library_words(tmp_path, capsys):
    store = copy_writable(BASIC, tmp_path / "store")
    with segstore.open(store, mode="a"):
        code, _, err = run(capsys, "recover", store)
    assert code == 1
    assert "mode=" not in err
    assert "another writer holds this store's lock" in err and "segstore dump" in err


def test_a_url_for_a_writing_command_is_explained_without_library_words(capsys):
    url = f"file://{BASIC}"
    code, _, err = run(capsys, "recover", url)
    assert code == 2
    assert "mode=" not in err and "read-only" in err
    code, _, err = run(capsys, "index", "build", url, "--index", "time")
    assert code == 2
    assert "mode=" not in err and "read-only" in err


# -- dump --json --index, and Kafka batch headers -----------------------------------------------

@pytest.mark.parametrize("store", [BASIC, KAFKA_PART], ids=["rocketmq", "kafka"])
def test_dump_json_with_index_is_refused_by_name(capsys, store):
    code, out, err = run(capsys, "dump", store, "--json", "--index")
    assert (code, out) == (2, "")
    assert "--index" in err and "--json" in err and "segstore dump" in err


def test_a_kafka_offset_query_prints_each_batch_header_over_its_own_records(capsys):
    log = KAFKA_PART / "00000000000000000000.log"
    batches = list(codec.iter_batches(log.read_bytes()))
    first = next(b for b in batches if b.last_offset > b.base_offset)
    start = first.last_offset - 1   # two records of this batch, then the next batches
    code, out, _ = run(capsys, "query", KAFKA_PART, "--offset", str(start), "--count", "6")
    assert code == 0
    owner = None
    shown = []
    for line in out.splitlines():
        if line.startswith("baseOffset: "):
            owner = (int(line.split()[1]), int(line.split()[3]))
        else:
            offset = int(line.split()[2])
            assert owner is not None and owner[0] <= offset <= owner[1], (line, owner)
            shown.append(offset)
    assert shown == list(range(start, start + 6))
    assert sum(line.startswith("baseOffset: ") for line in out.splitlines()) >= 2
    code, out, _ = run(capsys, "query", KAFKA_PART, "--offset", str(start), "--count", "6", "--json")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == shown


def test_a_kafka_key_query_prints_one_line_a_hit_whatever_the_key_holds(tmp_path, capsys):
    """``query --key K`` prints one line a hit (docs/cli.md), so ``| wc -l`` counts the hits: a Kafka
    hit's line printed the key as asked, so a key holding a line break split its line in two (and one
    that is not UTF-8 went out as raw bytes).  The key is now written as the store's one-line
    ``describe`` writes it and as RocketMQ's lines write keys and tags: JSON-quoted where it holds white
    space, quotes or a control character (or is empty), bytes that are not UTF-8 as ``\\xNN``."""
    logs = tmp_path / "logs"
    keys = [b"a b\nc", b"", b"plain", b"\xffab", b"k\x1b[31m", "d\x7fe\x9b".encode()]
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "t", "partition": 0, "key": k, "value": b"v"} for k in keys])
    lines = []
    for key in keys:
        asked = key.decode("utf-8", "surrogateescape")
        code, out, _ = run(capsys, "query", logs, "--topic", "t", "--key", asked)
        assert code == 0 and out.count("\n") == 1, (key, out)
        lines.append(out.split(" key ", 1)[1].rstrip("\n"))
    # a control character is quoted as white space is, DEL and C1 escaped too (json.dumps leaves them)
    assert lines == ['"a b\\nc"', '""', "plain", "\\xffab", '"k\\u001b[31m"', '"d\\u007fe\\u009b"']


def test_control_characters_from_the_files_are_escaped_on_a_terminal_only(tmp_path, monkeypatch):
    """A group name, key or tag holding ``ESC [ 2 J`` would clear the terminal it is printed on: on a
    terminal the CLI writes control characters as ``\\u001b`` (as the dump writes bodies); redirected,
    the output stays as the files hold it (a group name).  A key or tag is a word of a message's line,
    quoted wherever it holds a control character (``segstore.store.text_word``), as the terminal shows
    it: redirected or not, ``keys="k\\u001b[31m"``."""
    from segstore.cli import main

    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", messageIndexEnable=False) as s:
        s.append_batch([{"topic": "T", "queue_id": 0, "body": b"x", "keys": ["k\x1b[31m"], "tags": "t\x9b"}])
    # a name no client would give (segstore refuses to commit it), as fastjson writes it in a file
    (store / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"T@g\\u001B[2J":{0:1\n\t\t}\n\t}\n}')

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for argv in (["dump", str(store)], ["consumers", str(store)], ["query", str(store), "--topic", "T",
                                                                   "--queue", "0", "--offset", "0"]):
        shown, piped = Terminal(), io.StringIO()
        assert main(argv, shown) == 0 and main(argv, piped) == 0
        assert "\x1b" not in shown.getvalue(), argv
        if argv[0] == "consumers":
            assert "\x1b" in piped.getvalue()
        else:
            assert piped.getvalue() == shown.getvalue()
            assert 'keys="k\\u001b[31m" tags="t\\u009b"' in piped.getvalue(), argv
        assert "\\u001b" in shown.getvalue() and shown.getvalue().count("\n") == piped.getvalue().count("\n")
    out = Terminal()
    assert main(["dump", str(store)], out) == 0 and 'tags="t\\u009b"' in out.getvalue()     # C1 too
    # messages on a terminal's stderr name what the files hold as well (here: the groups there are)
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["consumers", str(store), "--group", "other"], Terminal()) == 1
    assert "found groups g\\u001b[2J" in err.getvalue() and sys.stderr is err


def test_table_columns_are_measured_in_utf16_units_as_java_pads_them(tmp_path, capsys):
    """``kafka-consumer-groups`` (3.8 ``ConsumerGroupCommand.printOffsetFormat``) sizes a column by
    ``String.length()`` and pads with ``%-Ns``: UTF-16 units, two for a character past the BMP.  A group
    ``g😀`` is 3 long there; segstore counted 2 and padded it one space more than the tool."""
    store = tmp_path / "rmq"
    with segstore.open(store, format="rocketmq", mode="a") as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"x"}] * 2)
    (store / "config" / "consumerOffset.json").write_text(
        json.dumps({"offsetTable": {"T@g\U0001f600": {"0": 1}}}, ensure_ascii=False), encoding="utf-8")
    code, out, err = run(capsys, "consumers", store)
    assert code == 0, err
    row = out.splitlines()[1]
    assert row.startswith("g\U0001f600" + " " * 12 + " T" + " " * 14 + " 0 "), row


def test_info_quotes_a_name_from_the_files_that_would_split_its_line(tmp_path):
    """``info`` writes a partition as ``topic=T, partition=P, ...``: a partition directory ``a b-0`` or
    ``x, partition=9-0`` (Kafka 3.8.0 ``LocalLog.parseTopicPartitionName`` takes any topic before the
    last ``-``; only the clients' ``Topic.validate`` refuses such names) printed a line whose fields
    split otherwise than they were, and one holding ``ESC`` a line a terminal acts on when piped.  A
    text value is one word as the dump's are (``segstore.store.text_word``): quoted where it holds white
    space, a quote or a control character."""
    from segstore.cli import main

    logs = tmp_path / "logs"
    names = ["a b", "x, partition=9", "t\x1bx", "plain"]
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "plain", "partition": 0, "value": b"v"}])
    for name in names[:-1]:
        shutil.copytree(logs / "plain-0", logs / f"{name}-0")
    out = io.StringIO()
    assert main(["info", str(logs)], out) == 0
    shown = {m.group(1) for m in re.finditer(r'^  - topic=("(?:[^"\\]|\\.)*"|[^,]*), ', out.getvalue(), re.M)}
    assert shown == {"plain", *(json.dumps(n) for n in names[:-1])}
    assert {json.loads(t) for t in shown if t.startswith('"')} == set(names[:-1])
    assert "\x1b" not in out.getvalue()
