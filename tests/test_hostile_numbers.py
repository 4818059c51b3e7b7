"""Numbers of hostile size given to the command line, to ``write --input``/``--spec`` and to the library
(found by huntB3's black-box runs): a number no field can hold is refused naming it by its digit count,
never echoed whole nor met by a traceback.

- ``query --offset <5,000 digits>`` (any integer option: ``--queue``, ``--count``, ``--max``,
  ``--max-bytes``, ``delete-records --before``, ``compact --dedupe-buffer-size``): argparse echoed the
  whole text (``invalid int value: '999...'``); of 20-4,300 digits the number was taken and echoed whole
  by the error it met (``no record at offset 999...``).  Every such option is now a whole number within
  a Java long, as every offset, count, queue and partition of both brokers is: exit 2, ``found a number
  of N digits`` past 20 digits (``errors.shown_number``).
- A text time of ``write --input`` (``{"timestamp": "\\u00b2"}`` or 5,000 digits in a string) ended in a
  ``ValueError`` traceback from ``int()``; the same text to ``--begin`` was ``invalid time_ms value``.
- ``--by-duration PT<5,000 digits>S``: argparse echoed the text whole (``invalid duration_ns value``).
- ``write --spec`` of JSON nested past the interpreter's recursion limit: a ``RecursionError`` traceback.
- The library: ``store.find(t, k, max_hits=-10**5000)`` raised Python's ``ValueError`` from the error
  message's own ``repr()`` of the number; ``read(..., offset=-10**300)`` echoed 301 digits.
- ``write --spec`` and ``write --input`` disagreed on the exit code of a message's bad topic (2 against
  1): what an input file holds is the input's problem, exit 1 (docs/cli.md), the spec's invalid JSON and
  numbers past 4,300 digits too.
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, cli_run, copy_writable

import segstore
from segstore.errors import ConfigError, OffsetOutOfRangeError, shown_number, shown_text

ROCKETMQ = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA_PART = FIXTURES / "kafka" / "txn" / "topic-0"
KAFKA_LOG = next(KAFKA_PART.glob("*.log"))


def _said_briefly(err: str) -> None:
    assert "Traceback" not in err and max(map(len, err.splitlines())) < 400, err[:2000]


def test_shown_number_names_an_integer_past_twenty_digits_by_its_digits():
    assert [shown_number(v) for v in (0, -5, 2**64, -(2**63) - 1, 10**20, -(10**300), 10**5000, 1.5)] == [
        "0", "-5", "18446744073709551616", "-9223372036854775809", "a number of 21 digits",
        "a number of 301 digits", "a number of 5001 digits", "1.5"]
    assert [shown_text(t) for t in ("9" * 20, " -" + "9" * 5000, "x" * 5000, "1.5")] == [
        "'99999999999999999999'", "a number of 5000 digits", repr("x" * 120) + "... (4880 more characters)",
        "'1.5'"]


@pytest.mark.parametrize("argv", [
    ["query", ROCKETMQ, "--topic", "TopicA", "--queue", "0", "--offset", "N"],
    ["query", ROCKETMQ, "--topic", "TopicA", "--queue", "N", "--offset", "0"],
    ["query", ROCKETMQ, "--topic", "TopicA", "--queue", "0", "--offset", "0", "--count", "N"],
    ["query", ROCKETMQ, "--topic", "TopicA", "--key", "k", "--max", "N"],
    ["dump", KAFKA_LOG, "--max-bytes", "N"],
    ["delete-records", KAFKA_PART, "--before", "N", "--dry-run"],
    ["compact", KAFKA_PART, "--dry-run", "--dedupe-buffer-size", "N"],
    ["dump", ROCKETMQ, "--begin", "N"],
    ["consumers", KAFKA_PART, "--group", "g", "--reset-offsets", "--to-offset", "N"],
    ["transactions", KAFKA_PART, "--find-hanging", "--max-transaction-timeout", "N"]])
@pytest.mark.parametrize("digits", [300, 5000])
def test_a_number_option_past_a_java_long_is_named_by_its_digits(argv, digits):
    code, out, err = cli_run(*[("9" * digits if arg == "N" else arg) for arg in argv])
    assert (code, out) == (2, ""), err
    assert f"found a number of {digits} digits" in err, err[-500:]
    _said_briefly(err)


def test_a_number_option_just_past_a_java_long_is_shown_whole():
    code, _, err = cli_run("query", ROCKETMQ, "--topic", "TopicA", "--queue", "0", "--offset", str(2**63))
    assert code == 2
    assert err.endswith("argument --offset: expected a whole number from -2^63 to 2^63-1 (a Java long), "
                        "found 9223372036854775808\n"), err


@pytest.mark.parametrize("text", ["PT" + "9" * 5000 + "S", "P" + "9" * 5000 + "D", "x" * 70000])
def test_a_duration_of_thousands_of_characters_is_refused_briefly(tmp_path, text):
    code, _, err = cli_run("consumers", KAFKA_PART, "--group", "g", "--reset-offsets", "--by-duration", text)
    assert code == 2 and "expected an ISO-8601 duration" in err
    _said_briefly(err)


@pytest.mark.parametrize(("value", "found"), [("\u00b2", "'\u00b2'"), ("9" * 5000, "a number of 5000 digits"),
                                              ("9" * 30, "a number of 30 digits")])
@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_a_text_time_that_is_no_long_is_refused_naming_its_line(tmp_path, fmt, value, found):
    lines = tmp_path / "in.jsonl"
    first = json.dumps({"topic": "t", "value": "a"}) + "\n"
    lines.write_text(first + json.dumps({"topic": "t", "value": "b", "timestamp": value}) + "\n")
    code, out, err = cli_run("write", tmp_path / "s", "--format", fmt, "--input", lines)
    assert (code, out) == (1, ""), err
    assert err == (f"{lines}:{len(first)}: line 2: timestamp: expected milliseconds since the epoch (a Java "
                   f"long) or an ISO-8601 time, found {found}\n")
    assert not (tmp_path / "s").exists()
    code, _, err = cli_run("dump", ROCKETMQ, "--begin", value)
    assert code == 2 and f"argument --begin: expected milliseconds since the epoch (a Java long) or an " \
                         f"ISO-8601 time, found {found}" in err


def test_an_integer_time_of_hundreds_of_digits_is_named_by_its_digits(tmp_path):
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "t", "value": "a", "timestamp": ' + "9" * 300 + "}\n")
    code, _, err = cli_run("write", tmp_path / "s", "--input", lines)
    assert code == 1
    assert err.endswith("line 1: expected a timestamp of at most 9223372036854775807 ms (a Java long, as "
                        "both brokers keep times), found a number of 300 digits\n"), err


def test_a_spec_nested_past_the_recursion_limit_is_a_data_error(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text("[" * 100_000 + "]" * 100_000)
    code, out, err = cli_run("write", tmp_path / "s", "--spec", spec)
    assert (code, out) == (1, "")
    assert err.startswith(f"{spec}: expected a JSON spec, found invalid JSON (maximum recursion depth"), err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("text", "said"), [
    ('{"messages": [{"topic": "T", "queueId": 1' + "0" * 5000 + "}]}",
     "expected integers a field can hold (a Java long at most: 19 digits), found a number of 5001 digits at "
     "messages[0].queueId"),
    ('{"messages": [', "expected a JSON spec, found invalid JSON (Expecting value: line 1 column 15 "
                       "(char 14))"),
    ("[1]", "expected a spec with 'messages' (rocketmq) or 'batches' (kafka), found an array [1]"),
    ('{"partitions": []}', "expected a spec with 'messages' (rocketmq) or 'batches' (kafka), found neither")])
def test_a_spec_that_does_not_read_is_the_inputs_problem_as_a_line_is(tmp_path, text, said):
    spec = tmp_path / "spec.json"
    spec.write_text(text)
    code, out, err = cli_run("write", tmp_path / "s", "--spec", spec)
    assert (code, out, err) == (1, "", f"{spec}: {said}\n")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("topic", ["../x", "a b", "x" * 300])
def test_a_bad_topic_exits_1_from_a_spec_as_from_input_lines(tmp_path, topic):
    spec, lines = tmp_path / "spec.json", tmp_path / "in.jsonl"
    spec.write_text(json.dumps({"messages": [{"topic": topic, "body": "a"}]}))
    lines.write_text(json.dumps({"topic": topic, "body": "a"}) + "\n")
    from_spec = cli_run("write", tmp_path / "s", "--spec", spec)
    from_lines = cli_run("write", tmp_path / "i", "--input", lines)
    assert (from_spec[0], from_lines[0]) == (1, 1), (from_spec, from_lines)
    assert from_spec[2].startswith(f"{spec}: expected a topic")
    assert not (tmp_path / "s").exists() and not (tmp_path / "i").exists()


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_library_arguments_of_hundreds_of_digits_are_named_by_their_digits(tmp_path, fmt):
    source = ROCKETMQ if fmt == "rocketmq" else KAFKA_PART
    with segstore.open(copy_writable(source, tmp_path / source.name)) as store:
        topic = "TopicA" if fmt == "rocketmq" else "topic"
        with pytest.raises(OffsetOutOfRangeError, match=r"found a number of 301 digits$"):
            list(store.read(topic, 0, offset=-(10**300)))
        with pytest.raises(ConfigError, match=r"found a number of 301 digits$"):
            list(store.read(topic, 0, count=-(10**300)))
        # repr() of the number in the message raised Python's ValueError (past 4,300 digits)
        with pytest.raises(ConfigError, match=r"found int a number of 5001 digits$"):
            store.find(topic, "k", max_hits=-(10**5000))


def test_an_index_option_of_thousands_of_digits_is_named_by_its_digits(tmp_path):
    part = copy_writable(KAFKA_PART, tmp_path / "t-0")
    for value, found in (("9" * 5000, "an integer for key.index.entries, found a number of 5000 digits"),
                         ("-" + "9" * 300, "a positive key.index.entries, found a number of 300 digits")):
        code, _, err = cli_run("index", "build", "--index", "key", "--option", f"key.index.entries={value}",
                               part)
        assert code == 2 and f"expected {found}" in err, err
        _said_briefly(err)
    assert not (part / ".segstore").exists()

