"""Every command's options as its ``--help`` and docs/cli.md state them: an option that takes one value
given twice is a usage error (exit 2), never the last kept and the first dropped without a word."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from conftest import cli_run

from segstore import cli


@pytest.fixture(scope="module")
def kafka_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("options")
    lines = root / "k.jsonl"
    lines.write_text("".join(json.dumps({"topic": topic, "partition": 0, "value": f"v{n}"}) + "\n"
                             for n, topic in enumerate(("a", "b", "a"))))
    assert cli_run("write", root / "logs", "--format", "kafka", "--input", lines)[0] == 0
    return root / "logs"


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# (command, options): the one option given twice
@pytest.mark.parametrize("argv", [
    ("dump", "--topic", "a", "--topic", "b"),              # dumped b alone
    ("dump", "--partition", "0", "--partition", "1"),
    ("dump", "--isolation", "read_committed", "--isolation", "read_uncommitted"),
    ("dump", "--begin", "0", "--begin", "5"),
    ("dump", "--json", "--group", "g", "--group", "h"),
    ("info", "--topic", "a", "--topic", "b"),
    ("info", "--format", "kafka", "--format", "rocketmq"),
    ("verify", "--threads", "1", "--threads", "2"),
    ("query", "--topic", "a", "--key", "x", "--key", "y"),
    ("query", "--topic", "a", "--offset", "0", "--count", "1", "--count", "2"),
    ("query", "--topic", "a", "--timestamp", "0", "--timestamp", "latest"),
    ("consumers", "--list", "--state", "Stable", "--state", "Empty"),
    ("consumers", "--group", "g", "--reset-offsets", "--to-offset", "0", "--to-offset", "1", "--execute"),
    ("transactions", "--transactional-id", "t1", "--transactional-id", "t2"),
    ("retention", "--now-ms", "0", "--now-ms", "1"),
    ("delete-records", "--topic", "a", "--partition", "0", "--before", "1", "--before", "2"),
    ("compact", "--dedupe-buffer-size", "1000000", "--dedupe-buffer-size", "2000000", "--dry-run"),
])
def test_an_option_of_one_value_given_twice_is_refused(kafka_logs, argv):
    """argparse keeps an option's last value: ``dump --topic a --topic b`` dumped b and said nothing of
    a, ``delete-records --before 1 --before 2`` moved the log start to 2.  Kafka's tools (jopt-simple's
    ``valueOf`` of an option given twice: ``OptionException``, 'multiple arguments') and mqadmin (commons-cli
    keeps the first) do not agree on which to keep; segstore keeps neither: exit 2, nothing read or
    written, the option and both values named."""
    before = _tree(kafka_logs)
    command, *options = argv
    code, out, err = cli_run(command, kafka_logs, *options)
    assert (code, out) == (2, ""), err
    flag = next(option for option in options if option.startswith("--") and options.count(option) == 2)
    assert f"argument {flag}: " in err and "given twice" in err and "segstore takes one" in err, err
    assert _tree(kafka_logs) == before


def test_convert_and_index_refuse_an_option_given_twice(kafka_logs, tmp_path):
    """The commands their own packages add (convert, index build/verify/drop) are parsed alike."""
    for argv in (("convert", kafka_logs, tmp_path / "out", "--to", "rocketmq", "--to", "kafka"),
                 ("convert", kafka_logs, tmp_path / "out", "--to", "rocketmq", "--compression", "gzip",
                  "--compression", "none"),
                 ("index", "verify", kafka_logs, "--index", "key", "--format", "kafka", "--format", "kafka")):
        code, out, err = cli_run(*argv)
        assert (code, out) == (2, "") and "given twice" in err, (argv, err)
    assert not (tmp_path / "out").exists()


def test_repeatable_options_and_flags_stay_repeatable(kafka_logs):
    """What is meant to repeat still does: ``--config`` (several names), a flag given twice means what
    it means once."""
    code, out, _ = cli_run("dump", kafka_logs, "--json", "--json", "--topic", "a")
    assert code == 0 and len(out.splitlines()) == 2
    code, _, err = cli_run("info", kafka_logs, "--config", "retention.ms=5", "--config",
                           "segment.bytes=1048576")
    assert code == 0, err


def _value_actions(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:   # argparse has no public way to walk them
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                found += _value_actions(child, f"{name} {child_name}".strip())
        elif action.option_strings and isinstance(action, argparse._StoreAction):
            found.append((name, action))
    return found


def test_every_single_valued_option_of_every_command_is_taken_once():
    """The rule is the parser's, not each command's: every option that stores one value, of every
    command (those convert, index and the maintenance commands add included), takes it once."""
    actions = _value_actions(cli.build_parser(), "")
    assert len({name for name, _ in actions}) >= 14
    plain = [f"{name} {action.option_strings[0]}" for name, action in actions
             if not isinstance(action, cli._OnceAction)]
    assert plain == []


@pytest.mark.parametrize("argv", [
    ("info", "{logs}", "--config", "retention.ms=5", "--config", "retention.ms=6"),
    ("retention", "{logs}", "--config", "retention.ms=0", "--config", " retention.ms =604800000"),
    ("convert", "{logs}", "{out}", "--to", "rocketmq", "--config", "mappedFileSizeCommitLog=4096",
     "--config", "mappedFileSizeCommitLog=1073741824"),
    ("index", "build", "{logs}", "--index", "key", "--config", "retention.ms=1", "--config",
     "retention.ms=1"),
    ("index", "build", "{logs}", "--index", "key", "--option", "key.index.headers=a", "--option",
     "key.index.headers=b"),
])
def test_a_config_name_given_twice_is_refused(kafka_logs, tmp_path, argv):
    """``--config``/``--option`` repeat, one name a time; the same name twice kept the last value and
    dropped the first without a word (``retention --config retention.ms=0 --config retention.ms=604800000``
    judged by 7 days, not by 0).  A name is taken once: exit 2 naming it and both values, nothing read
    or written."""
    before = _tree(kafka_logs)
    code, out, err = cli_run(*(arg.format(logs=kafka_logs, out=tmp_path / "out") for arg in argv))
    assert (code, out) == (2, ""), err
    flag = "--option" if "--option" in argv else "--config"
    assert f"expected each {flag} name once, found " in err and " twice (" in err, err
    assert _tree(kafka_logs) == before and not (tmp_path / "out").exists()


def test_the_library_refuses_a_config_name_given_twice():
    from segstore.convert import parse_config
    from segstore.errors import ConfigError

    assert parse_config(["a=1", "b = 2"]) == {"a": "1", "b": "2"}
    with pytest.raises(ConfigError, match=r"expected each --config name once, found 'a' twice "
                                          r"\('1', then '2'\)"):
        parse_config(["a=1", "a=2"])


@pytest.mark.parametrize("argv, words", [
    (("--interval", "5"), "--interval goes with --follow"),
    (("--interval", "0.5", "--json"), "--interval goes with --follow"),
])
def test_dump_refuses_interval_without_follow(kafka_logs, argv, words):
    """``--interval`` is how often ``--follow`` looks again; without ``--follow`` it was taken and did
    nothing (the dump ran once, exit 0), so ``dump --interval 5`` (meaning to poll) returned at once."""
    code, out, err = cli_run("dump", kafka_logs, *argv)
    assert (code, out) == (2, "") and words in err, err


@pytest.mark.parametrize("argv", [("--threads", "2"), ("--interval", "1")])
def test_a_file_dump_refuses_the_store_directorys_flags(kafka_logs, argv):
    """A single file is dumped whole, on one thread, once (kafka-dump-log has neither flag): ``--threads``
    and ``--interval`` were taken and changed nothing, where the other store-only flags are refused."""
    segment = next(kafka_logs.glob("a-0/*.log"))
    code, out, err = cli_run("dump", segment, *argv)
    assert (code, out) == (2, "") and f"{argv[0]}: expected a store directory, found single files" in err, err


def test_dump_group_refuses_interval_without_follow(kafka_logs):
    code, out, err = cli_run("dump", kafka_logs, "--group", "g", "--interval", "5")
    assert (code, out) == (2, "") and "--interval goes with --follow" in err, err


def test_query_msg_id_refuses_read_committed(tmp_path):
    """docs/cli.md: ``--msg-id`` takes ``--topic`` and nothing of another lookup.  ``--isolation
    read_committed`` was taken and not applied (exit 0): a msgId lookup reads the message at its commitlog
    offset whatever its transaction state, a prepared one no consumer is given included."""
    lines = tmp_path / "r.jsonl"
    lines.write_text(json.dumps({"topic": "T", "queue_id": 0, "body": "b"}) + "\n")
    store = tmp_path / "store"
    assert cli_run("write", store, "--format", "rocketmq", "--input", lines)[0] == 0
    code, out, _ = cli_run("query", store, "--topic", "T", "--queue", "0", "--offset", "0", "--json")
    msg_id = json.loads(out)["msg_id"]
    assert code == 0 and cli_run("query", store, "--msg-id", msg_id)[0] == 0
    code, out, err = cli_run("query", store, "--msg-id", msg_id, "--isolation", "read_committed")
    assert (code, out) == (2, "") and "--msg-id goes alone" in err, err
    assert "--isolation read_committed" in err, err


@pytest.fixture()
def rocketmq_store(tmp_path: Path) -> Path:
    lines = tmp_path / "r.jsonl"
    lines.write_text("".join(json.dumps({"topic": "T", "queue_id": 0, "body": f"b{n}"}) + "\n"
                             for n in range(3)))
    assert cli_run("write", tmp_path / "store", "--format", "rocketmq", "--input", lines)[0] == 0
    offsets = tmp_path / "offsets.csv"
    offsets.write_text("T,0,1\n")
    assert cli_run("consumers", tmp_path / "store", "--group", "g", "--reset-offsets", "--from-file", offsets,
                   "--execute")[0] == 0
    return tmp_path / "store"


@pytest.mark.parametrize("argv", [
    ("--now-ms", "1000"),
    ("--group", "g", "--now-ms", "1000"),
    ("--group", "g", "--reset-offsets", "--to-earliest", "--now-ms", "1000", "--execute"),
    ("--group", "g", "--delete", "--now-ms", "1000", "--execute"),
])
def test_consumers_of_a_rocketmq_store_refuse_now_ms(rocketmq_store, argv):
    """``--now-ms`` is Kafka's: the time offsets expire by (``offsets.retention.minutes``) and a commit's
    time.  RocketMQ's ``consumerOffset.json`` keeps neither, so it was taken and changed nothing (exit 0),
    as ``--offsets-retention-minutes`` is refused for the same reason; it stays for ``--by-duration``, whose
    now it is."""
    before = _tree(rocketmq_store)
    code, out, err = cli_run("consumers", rocketmq_store, *argv)
    assert (code, out) == (2, "") and "--now-ms" in err and "RocketMQ" in err, err
    assert _tree(rocketmq_store) == before


def test_consumers_by_duration_of_a_rocketmq_store_takes_now_ms(rocketmq_store):
    """A second before 2100: after every message stored, so the queue's end (the clock's now would give 0)."""
    code, out, err = cli_run("consumers", rocketmq_store, "--group", "g", "--reset-offsets", "--by-duration",
                             "PT1S", "--now-ms", "2100-01-01", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"group": "g", "topic": "T", "partition": 0, "new_offset": 3}]


@pytest.mark.parametrize("argv", [
    ("consumers", "--now-ms", "-5"),
    ("consumers", "--now-ms", "1969-06-01"),
    ("retention", "--now-ms", "-5", "--dry-run"),
    ("compact", "--now-ms", "-1", "--dry-run"),
    ("transactions", "--producers", "--now-ms", "-5"),
])
def test_a_now_before_the_epoch_is_refused(kafka_logs, argv):
    """``--now-ms`` is the clock a command judges by (offset expiry, retention, the cleaner's horizons,
    transaction ages): a time before 1970 is a slip (a sign, a date), and was taken: ``consumers``,
    ``retention`` and ``compact`` judged by it (nothing old enough, exit 0), where ``transactions``
    refused it.  Every command refuses it alike (exit 2), as ``dump --begin`` refuses such a time."""
    command, *options = argv
    code, out, err = cli_run(command, kafka_logs, *options)
    assert (code, out) == (2, "") and "argument --now-ms: expected a time at or after the epoch" in err, err


@pytest.mark.parametrize("command", [("verify",), ("index", "verify")])
def test_verify_quiet_with_json_prints_nothing_when_clean(kafka_logs, command):
    """``--quiet``: "print nothing when the store is clean"; with ``--json`` it was taken and changed
    nothing (the clean object printed all the same).  Now it prints nothing then; problems still print
    their JSON object (exit 1)."""
    extra = ("--index", "key") if command[0] == "index" else ()
    if extra:
        assert cli_run("index", "build", kafka_logs, *extra)[0] == 0
    code, out, _ = cli_run(*command, kafka_logs, *extra, "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    code, out, err = cli_run(*command, kafka_logs, *extra, "--json", "-q")
    assert (code, out, err) == (0, "", "")
    segment = next(kafka_logs.glob("a-0/*.log"))
    damaged = bytearray(segment.read_bytes())
    damaged[-1] ^= 0xFF
    segment.write_bytes(bytes(damaged))
    try:
        code, out, _ = cli_run("verify", kafka_logs, "--json", "-q")
        assert code == 1 and json.loads(out)["ok"] is False
    finally:
        damaged[-1] ^= 0xFF
        segment.write_bytes(bytes(damaged))
        if extra:
            assert cli_run("index", "drop", kafka_logs, *extra)[0] == 0


@pytest.mark.parametrize("action", ["build", "verify", "drop"])
def test_index_refuses_a_layout_named_twice(kafka_logs, action):
    """``--index`` repeats, a layout each: ``--index key --index key`` built the key index twice over
    (``key: built`` twice).  A layout named twice is a usage error, as a second value of any option."""
    before = _tree(kafka_logs)
    code, out, err = cli_run("index", action, kafka_logs, "--index", "key", "--index", "key")
    assert (code, out) == (2, "") and "expected each --index layout once, found 'key' twice" in err, err
    assert _tree(kafka_logs) == before


def test_recover_help_says_what_threads_does_for_both_formats(capsys):
    """``recover --threads`` recovers Kafka partitions at once (``KafkaStore.recover(threads=)``) as well as
    walking a RocketMQ commitlog; the help said "RocketMQ: ..." only, as if Kafka took it and ignored it."""
    code, _, _ = cli_run("recover", "--help")     # argparse prints help on sys.stdout
    text = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "Kafka: recover the partitions and decode their logs" in text, text


def test_a_rocketmq_time_query_refuses_decompress_bodies(rocketmq_store):
    """A RocketMQ ``--timestamp`` query answers an offset, no message body: ``--decompress-bodies`` was
    taken and changed nothing (exit 0), where ``--count`` is refused for the same reason (docs/cli.md)."""
    code, out, _ = cli_run("query", rocketmq_store, "--topic", "T", "--timestamp", "0")
    assert code == 0 and "offset 0 is the first stored at or after 0" in out
    code, out, err = cli_run("query", rocketmq_store, "--topic", "T", "--timestamp", "0",
                             "--decompress-bodies")
    assert (code, out) == (2, "") and "--decompress-bodies: a RocketMQ time query answers an offset" in err, \
        err


@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_format_name_is_refused(tmp_path, name):
    """``write NEW --format '' --input F`` wrote a RocketMQ store (the empty name taken as no name, and
    the default used), where every other command refuses an unknown format (exit 2)."""
    lines = tmp_path / "one.jsonl"
    lines.write_text(json.dumps({"topic": "T", "value": "x"}) + "\n")
    for argv in (("write", tmp_path / "new", "--format", name, "--input", lines),
                 ("info", tmp_path, "--format", name)):
        code, out, err = cli_run(*argv)
        assert (code, out) == (2, "") and "expected a format name (kafka, rocketmq), found" in err, \
            (argv, err)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("argv", [
    ("--key-decoder", "hex"),
    ("--offsets-decoder",),
    ("--transaction-log-decoder",),
    ("--cluster-metadata-decoder",),
    ("--index-sanity-check",),
    ("--verify-index-only",),
    ("--print-data-log", "--skip-record-metadata"),
])
def test_a_rocketmq_file_dump_refuses_kafka_dump_logs_kafka_only_flags(rocketmq_store, argv):
    """kafka-dump-log's flags that a RocketMQ file has nothing for (no key payload: keys are a property
    on each line; no internal-topic records; no offset or time index to sanity-check) were taken and
    changed nothing: the same lines, exit 0.  Each is refused naming it (exit 2); what a RocketMQ file
    does take (``--print-data-log``, ``--value-decoder``, ``--max-bytes``) still works."""
    commitlog = next((rocketmq_store / "commitlog").iterdir())
    code, plain, _ = cli_run("dump", commitlog, "--print-data-log", "--value-decoder", "hex", "--max-bytes",
                             "100000")
    assert code == 0 and "Dumping" in plain
    code, out, err = cli_run("dump", commitlog, *argv)
    flag = next(arg for arg in reversed(argv) if arg.startswith("--"))
    assert (code, out) == (2, "") and f"{flag}: expected a Kafka file" in err, err


@pytest.mark.parametrize("flag", ["--topic", "--queue", "--partition"])
def test_rocketmq_retention_names_the_selector_given(rocketmq_store, flag):
    """RocketMQ retention is store-wide; ``--partition 0`` (``--queue``'s alias) was refused as "expected no
    --topic/--queue", naming two flags the user had not given and not the one they had."""
    value = "T" if flag == "--topic" else "0"
    code, out, err = cli_run("retention", rocketmq_store, flag, value, "--dry-run")
    assert (code, out) == (2, "") and flag in err and "RocketMQ retention is store-wide" in err, err


@pytest.mark.parametrize("argv", [["index", "build", "S", "--index", "X"], ["dump", "S", "--isolation", "X"],
                                  ["X"], ["dump", "S", "--X"], ["dump", "S", "--topic", "a", "--topic", "X"]])
def test_an_argument_of_thousands_of_characters_is_refused_cut_to_a_readable_length(kafka_logs, argv):
    """argparse echoed a value outside an option's choices, an unknown command or argument, and a value
    given twice whole (70,000 characters on one line); now cut as every value in a message is."""
    long = "x" * 70_000
    code, _, err = cli_run(*[str(kafka_logs) if a == "S" else a.replace("X", long) for a in argv])
    assert code == 2 and ("(69880 more characters)" in err or "(69882 more characters)" in err), err[-300:]
    assert max(map(len, err.splitlines())) < 500
