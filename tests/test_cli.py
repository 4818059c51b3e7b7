"""The ``segstore`` command line as a user meets it: paths, formats, bad input, exit codes, JSON.

Every test goes through the real entry point: ``main()`` with captured output, or
``python -m segstore.cli`` in a subprocess where what matters is the process (exit
status, no traceback, files left on disk).  Exit codes: 0 ok, 1 data problem or
no match, 2 usage.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, cli_run, copy_writable

import segstore
from segstore import cli
from segstore.errors import ConfigError

BASIC = FIXTURES / "rocketmq" / "basic" / "store"
ABORT = FIXTURES / "rocketmq" / "abort" / "store"
KAFKA_PART = FIXTURES / "kafka" / "uncompressed" / "topic-0"
KAFKA_SPEC = FIXTURES / "kafka" / "uncompressed" / "spec.json"
ROCKETMQ_SPEC = FIXTURES / "rocketmq" / "basic" / "spec.json"
COMMANDS_ON_A_STORE = [["info"], ["dump"], ["verify"], ["recover"],
                       ["query", "--topic", "T", "--offset", "0"], ["consumers"],
                       ["index", "verify", "--index", "key"], ["index", "build", "--index", "key"]]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


def run_process(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")])}
    return subprocess.run([sys.executable, "-m", "segstore.cli", *map(str, argv)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120, check=False)


def _argv(command: list[str], path: Path) -> list[str]:
    """``command`` with ``path`` placed after the (sub)command words."""
    words = 2 if command[0] == "index" else 1
    return [*command[:words], str(path), *command[words:]]


# -- 1. paths and formats ------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS_ON_A_STORE, ids=lambda c: " ".join(c[:2]))
def test_a_missing_path_is_a_usage_error_and_nothing_is_created(tmp_path, capsys, command):
    missing = tmp_path / "typo" / "path"
    code, _out, err = run(capsys, *_argv(command, missing))
    assert code == 2
    assert f"{missing}: expected an existing store directory, found no such file or directory" in err
    assert "known format" not in err
    assert not missing.exists() and not missing.parent.exists()


def test_recover_of_a_typo_creates_nothing_in_a_real_process(tmp_path):
    done = run_process("recover", tmp_path / "typo")
    assert done.returncode == 2, done.stderr
    assert "no such file or directory" in done.stderr and "Traceback" not in done.stderr
    assert "nothing to recover" not in done.stdout
    assert os.listdir(tmp_path) == []


def test_python_m_segstore_cli_gives_the_subcommand_modules_usage_errors_exit_2(tmp_path):
    """``python -m segstore.cli`` ran the module as ``__main__``, whose ``except UsageError`` is not the
    ``segstore.cli.UsageError`` that maintenance, convert and index raise: exit 1 with no command name."""
    part = copy_writable(FIXTURES / "kafka" / "uncompressed" / "topic-0", tmp_path / "t-0")
    for argv, words in (
        (["delete-records", part, "--before", "-5"], "segstore delete-records: "),
        (["retention", tmp_path / "typo"], "segstore retention: "),
        (["compact", tmp_path / "typo"], "segstore compact: "),
        (["convert", tmp_path / "typo", tmp_path / "out", "--to", "rocketmq"], "segstore convert: "),
        (["index", "build", tmp_path / "typo", "--index", "key"], "segstore index build: "),
    ):
        done = run_process(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stderr.startswith(words) and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS_ON_A_STORE, ids=lambda c: " ".join(c[:2]))
def test_a_store_of_another_format_is_refused_by_name(tmp_path, capsys, command):
    store = copy_writable(BASIC, tmp_path / "store")
    code, out, err = run(capsys, *_argv(command, store), "--format", "kafka")
    assert code == 2
    assert f"{store}: expected a kafka store, found a rocketmq store" in err
    assert out == ""
    partition = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    code, out, err = run(capsys, *_argv(command, partition), "--format", "rocketmq")
    assert code == 2
    assert "expected a rocketmq store, found a kafka store" in err


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq", None])
def test_an_empty_directory_is_no_store(tmp_path, capsys, fmt):
    extra = ["--format", fmt] if fmt else []
    code, out, err = run(capsys, "info", tmp_path, *extra)
    assert code == 2
    assert out == ""
    expected = f"expected a {fmt} store, found no {fmt} files" if fmt else "not a store of any known format"
    assert expected in err
    assert os.listdir(tmp_path) == []


def test_a_file_is_not_a_store(tmp_path, capsys):
    path = tmp_path / "x.log"
    path.write_bytes(b"")
    code, _, err = run(capsys, "verify", path)
    assert (code, err.strip()) == (2, f"segstore verify: {path}: expected a store directory, found a file")


def test_the_library_refuses_to_read_a_missing_path(tmp_path):
    with pytest.raises(segstore.errors.NotFoundError, match="no such file or directory"):
        segstore.open(tmp_path / "nothere")
    with pytest.raises(segstore.errors.NotFoundError):
        segstore.open(tmp_path / "nothere", format="kafka")
    assert os.listdir(tmp_path) == []


def test_verify_reports_an_unclean_shutdown(tmp_path, capsys):
    code, out, _err = run(capsys, "verify", ABORT)
    assert code == 1
    assert out.splitlines() == [f"{ABORT / 'abort'}: expected no abort file (a clean shutdown removes it), "
                                "found one: the last writer did not shut down cleanly or is still running; "
                                "`segstore recover` repairs what it left"]
    store = copy_writable(ABORT, tmp_path / "store")
    code, out, _ = run(capsys, "recover", store)
    assert code == 0 and "unclean shutdown" in out
    assert run(capsys, "verify", store, "-q")[:2] == (0, "")


# -- 1. writing: only write creates, a failed write leaves nothing ---------------------

def test_write_spec_takes_the_format_from_the_spec(tmp_path, capsys):
    code, out, _ = run(capsys, "write", tmp_path / "topic-0", "--spec", KAFKA_SPEC)
    assert code == 0, out
    assert run(capsys, "verify", tmp_path / "topic-0", "--format", "kafka", "-q")[0] == 0
    code, out, _ = run(capsys, "write", tmp_path / "rmq", "--spec", ROCKETMQ_SPEC)
    assert code == 0
    assert "wrote rocketmq store" in out


@pytest.mark.parametrize("existing", [True, False], ids=["empty-dir", "missing-dir"])
def test_write_spec_into_a_plain_dir_names_the_rule_and_leaves_nothing(tmp_path, capsys, existing):
    plain = tmp_path / "plain"
    if existing:
        plain.mkdir()
    code, _out, err = run(capsys, "write", plain, "--spec", KAFKA_SPEC)
    assert code == 2
    assert f"{plain}: expected a partition directory named TOPIC-PARTITION, found 'plain'" in err
    assert (os.listdir(plain) == []) if existing else not plain.exists()


@pytest.mark.parametrize("existing", [True, False], ids=["empty-dir", "missing-dir"])
def test_a_write_that_fails_half_way_leaves_nothing_behind(tmp_path, capsys, existing):
    """The Kafka spec's config names are no RocketMQ names: the store was already being created."""
    target = tmp_path / "store"
    if existing:
        target.mkdir()
    code, _, err = run(capsys, "write", target, "--spec", KAFKA_SPEC, "--format", "rocketmq")
    assert code == 2
    assert "found 'segment.bytes'" in err
    assert (os.listdir(target) == []) if existing else not target.exists()


def test_write_spec_refuses_a_directory_with_files(tmp_path, capsys):
    (tmp_path / "x").write_text("hi")
    code, _, err = run(capsys, "write", tmp_path, "--spec", ROCKETMQ_SPEC)
    assert code == 2
    assert "expected an empty or missing directory to write a spec into, found one with 1 entries" in err
    assert os.listdir(tmp_path) == ["x"]


@pytest.mark.parametrize(("spec", "store"), [
    ({"messages": 5}, "s"), ({"messages": [[1]]}, "s"), ({"config": [1], "messages": []}, "s"),
    ({"messages": [{"topic": "T", "body": 5}]}, "s"),
    ({"messages": [{"topic": "T", "bodyBase64": "A"}]}, "s"),
    ({"batches": [{"records": [{"value": 5, "timestamp": 0}]}]}, "T-0"),
    ({"batches": [{"records": [{"value": "v"}]}]}, "T-0"), ({"batches": [7]}, "T-0"),
    ({"batches": [], "now_ms": "x"}, "T-0")])
def test_write_spec_with_fields_of_other_kinds_is_a_data_error_naming_the_spec(tmp_path, capsys, spec, store):
    """A spec whose fields are of other kinds than compat_fixtures/README.md's (a number for a body, a list
    for a message) ended in a traceback (TypeError, AttributeError, KeyError from the replay): exit 1 naming
    the spec, nothing left behind."""
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    code, out, err = run(capsys, "write", tmp_path / store, "--spec", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}: expected a spec of the fields compat_fixtures/README.md lists, each of "
                          "its kind, found "), err
    assert not (tmp_path / store).exists()


@pytest.mark.parametrize(("spec", "at"), [
    ('{"messages": [{"topic": "T", "queueId": 1%s}]}', "messages[0].queueId"),
    ('{"batches": [], "now_ms": -1%s}', "now_ms")])
def test_write_spec_with_an_integer_of_thousands_of_digits_names_it(tmp_path, capsys, spec, at):
    """It said Python's "Exceeds the limit (4300 digits) for integer string conversion ... use
    sys.set_int_max_str_digits()": the number is named by its digits and where it stands."""
    path = tmp_path / "spec.json"
    path.write_text(spec % ("0" * 5000))
    code, out, err = run(capsys, "write", tmp_path / "s", "--spec", path)
    assert (code, out) == (1, "")     # the input's problem, as a line of --input's (it was exit 2)
    assert err == (f"{path}: expected integers a field can hold (a Java long at most: 19 digits), found a "
                   f"number of 5001 digits at {at}\n")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("message", "code", "said"), [
    ({"topic": "../x"}, 1, "a topic of the characters [%|a-zA-Z0-9_-], found '../x'"),
    ({"topic": "T", "queueId": -1}, 1, "a queue id in [0, 2147483646]"),
    ({"topic": "T", "properties": {"a": 1}}, 1, "a property value as a str or UTF-8 bytes, found int")])
def test_write_spec_with_a_message_the_store_refuses_names_the_spec(tmp_path, capsys, message, code, said):
    """A RocketMQ spec's message with a topic, a queue id or a property the store refuses was said without
    naming the spec (the replay's error has no file of its own), where every other error of a spec names
    it."""
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"messages": [{"body": "a", **message}]}))
    got, out, err = run(capsys, "write", tmp_path / "s", "--spec", path)
    assert (got, out) == (code, "")
    assert f"{path}: expected {said}" in err, err
    assert not (tmp_path / "s").exists()


def test_write_spec_with_a_bad_config_of_the_command_line_does_not_blame_the_spec(tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"messages": [{"topic": "T", "body": "a"}]}))
    code, _, err = run(capsys, "write", tmp_path / "s", "--spec", path, "--config", "maxMessageSize=-1")
    assert code == 2
    assert str(path) not in err and "maxMessageSize" in err


def test_write_input_into_a_store_of_another_format_is_refused(tmp_path, capsys):
    store = copy_writable(BASIC, tmp_path / "store")
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "t", "value": "v"}\n')
    code, _, err = run(capsys, "write", store, "--input", lines, "--format", "kafka")
    assert code == 2
    assert "expected a kafka store, found a rocketmq store" in err


@pytest.mark.parametrize("flag", ["--input", "--spec"])
@pytest.mark.parametrize("given", ["missing", "directory"])
def test_write_from_a_missing_file_or_a_directory_is_a_usage_error_and_creates_nothing(tmp_path, capsys,
                                                                                       flag, given):
    source = tmp_path / "in"
    if given == "directory":
        source.mkdir()
    code, out, err = run(capsys, "write", tmp_path / "new", flag, source)
    assert code == 2 and out == ""
    what = "a JSON-lines file" if flag == "--input" else "a JSON spec file"
    found = "no such file or directory" if given == "missing" else "a directory"
    assert f"{source}: expected {what}, found {found}" in err
    assert not (tmp_path / "new").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_write_input_reads_a_fifo_as_it_reads_a_pipe(tmp_path, capsys):
    """``--input <(cmd)``: the lines come through a FIFO, which can be read once only (the command reads
    its input twice: it checks every line before it appends any)."""
    import threading

    fifo = tmp_path / "lines"
    os.mkfifo(fifo)
    lines = "".join(json.dumps({"topic": "T", "body": f"m{i}"}) + "\n" for i in range(3))

    def feed() -> None:
        with open(fifo, "w") as f:
            f.write(lines)

    feeder = threading.Thread(target=feed, daemon=True)   # never blocks the exit if the command fails
    feeder.start()
    try:
        code, out, err = run(capsys, "write", tmp_path / "store", "--input", fifo)
    finally:
        feeder.join(timeout=30)
    assert code == 0, err
    assert "appended 3 messages" in out
    with segstore.open(tmp_path / "store") as store:
        assert [m.body for m in store.scan()] == [b"m0", b"m1", b"m2"]


# -- 2. bad input files: typed errors naming file and line, never a traceback ----------

@pytest.mark.parametrize(("text", "line", "what"), [
    ('{"topic": "a", "value": "x"}\n{bad\n', 2, "invalid JSON (Expecting property name"),
    ('\n{"topic": "a", "value": "x"}\n[1, 2]\n', 3, "found list"),
    ('{"topic": "a", "value": "x"}\n{"topic": "a", "value": "ü"\n', 2, "invalid JSON"),
])
def test_a_bad_jsonl_line_names_file_line_and_byte(tmp_path, text, line, what):
    path = tmp_path / "in.jsonl"
    path.write_text(text, encoding="utf-8")
    start = len("".join(text.splitlines(keepends=True)[:line - 1]).encode("utf-8"))
    done = run_process("write", tmp_path / "store", "--input", path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"{path}:{start}: line {line}: expected a JSON object, ")
    assert what in done.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b""])
def test_a_jsonl_line_cut_short_names_the_column_where_it_ends(tmp_path, end):
    """A line whose object is cut short said "at column 1" where it ended in a newline (the decoder's
    column counts from that newline); the column is where the line's text ends, newline or not."""
    path = tmp_path / "in.jsonl"
    first = b'{"topic": "a", "value": "x"}\n'
    cut = b'{"topic": "a", "value": "xyz"'
    path.write_bytes(first + cut + end)
    start = len(first)
    code, out, err = cli_run("write", tmp_path / "store", "--input", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}:{start}: line 2: expected a JSON object, found invalid JSON "
                          f"(Expecting ',' delimiter at column {len(cut) + 1})"), err


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("topic", [["a"], {"a": 1}])
def test_a_jsonl_topic_that_is_not_text_is_refused_naming_the_line(tmp_path, fmt, topic):
    """A Kafka line whose topic is a list or an object ended in "TypeError: unhashable type: 'list'" (a
    traceback): exit 1 naming the line, nothing created, as RocketMQ refuses it."""
    path = tmp_path / "in.jsonl"
    first = json.dumps({"topic": "a", "value": "x"}) + "\n"
    path.write_text(first + json.dumps({"topic": topic, "value": "y"}) + "\n", encoding="utf-8")
    code, out, err = cli_run("write", tmp_path / "store", "--format", fmt, "--input", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}:{len(first)}: line 2: expected "), err
    assert "Traceback" not in err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize(("line", "name"), [
    ('{"topic": "a", "value": "x", "topic": "b"}', "topic"),
    ('{"topic": "a", "value": "x", "value": "y"}', "value"),
    # a nested object too: a RocketMQ line's properties are one, and Kafka refuses the field by name after
    ('{"topic": "a", "value": "x", "properties": {"p": "1", "q": "2", "p": "3"}}', "p"),
])
def test_a_jsonl_line_giving_a_name_twice_is_refused_naming_it(tmp_path, fmt, line, name):
    """``json.loads`` keeps the last of a repeated name: the line was written to topic b (or value y)
    without a word, where the input's rule is refused rather than written with one of two dropped."""
    path = tmp_path / "in.jsonl"
    first = '{"topic": "a", "value": "x"}\n'
    path.write_text(first + line + "\n", encoding="utf-8")
    code, out, err = cli_run("write", tmp_path / "store", "--format", fmt, "--input", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}:{len(first)}: line 2: expected each name once in a JSON object, found "
                          f"{name!r} twice"), err
    assert not (tmp_path / "store").exists()


def test_a_jsonl_line_giving_each_name_once_is_written_as_before(tmp_path):
    """The same names in other objects of a line, and in other lines, are no repeat."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"topic": "a", "value": "x", "properties": {"topic": "t", "value": "v"}}\n'
                    '{"topic": "a", "value": "y"}\n', encoding="utf-8")
    code, _, err = cli_run("write", tmp_path / "store", "--input", path)
    assert code == 0, err
    with segstore.open(tmp_path / "store") as store:
        assert [r.value for r in store.scan()] == [b"x", b"y"]


@pytest.mark.parametrize(("data", "said"), [
    # json.loads of bytes guessed UTF-16 for a line starting with FF FE: "'utf-16-le' codec can't decode
    # byte 0x0a in position 10: truncated data at column ?"
    (b'{"topic": "a", "value": "x"}\n\xff\xfe garbage\n',
     "line 2: expected UTF-8 text, found byte 0xff at column 1 (invalid start byte)"),
    (b'{"topic": "a", "value": "x"}\n{"topic": "a", "value": "\xc3("}\n',
     "line 2: expected UTF-8 text, found byte 0xc3 at column 26 (invalid continuation byte)"),
    # "... from a unicode string at column ?": no column is known
    (b'{"topic": "a", "value": "x"}\n' + b"[" * 100_000 + b"\n",
     "line 2: expected a JSON object, found invalid JSON (maximum recursion depth exceeded"),
])
def test_a_jsonl_line_that_is_not_utf8_or_too_deep_says_so(tmp_path, data, said):
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    code, out, err = cli_run("write", tmp_path / "store", "--input", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}:29: {said}"), err
    assert "column ?" not in err
    assert not (tmp_path / "store").exists()


def test_a_jsonl_file_may_start_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"topic": "a", "value": "x"}\n{"topic": "a", "value": "y"}\n')
    assert cli_run("write", tmp_path / "store", "--input", path)[0] == 0
    with segstore.open(tmp_path / "store") as store:
        assert [m.body for m in store.scan()] == [b"x", b"y"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [["info"], ["info", "--json"], ["dump"], ["dump", "--json"],
                                  ["verify", "--json"]])
def test_output_to_a_full_disk_or_a_closed_stdout_is_a_line_not_a_traceback(tmp_path, argv):
    """``segstore info STORE > /dev/full`` ended in ``OSError: [Errno 28] No space left on device`` (a
    traceback), and with stdout closed (``>&-``) in ``AttributeError: 'NoneType' object has no attribute
    'write'``.  A write of the output that fails is a line on stderr and exit 1, as a full disk for a store
    file is."""
    store = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")])}
    command = [sys.executable, "-m", "segstore.cli", argv[0], str(store), *argv[1:]]
    with open("/dev/full", "w") as full:
        done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120,
                              check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (f"segstore {argv[0]}: <stdout>: expected room on the device, found no space left "
                           "on the device (No space left on device)\n")
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *command], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (
        1, f"segstore {argv[0]}: <stdout>: expected an open output to write to, found it closed\n")


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_a_misspelled_field_is_named(tmp_path, fmt):
    path = tmp_path / "in.jsonl"
    path.write_text('{"topic": "a", "valu": "x"}\n')
    target = tmp_path / ("a-0" if fmt == "kafka" else "store")
    done = run_process("write", target, "--input", path, "--format", fmt)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"{path}:0: line 1: expected ")
    assert "'valu'" in done.stderr
    assert not target.exists()


# -- 3. query: JSON only on stdout, no-hit exit 1, no silent cap ------------------------

def _store_with_repeated_key(tmp_path: Path, fmt: str, count: int) -> Path:
    if fmt == "rocketmq":
        path = tmp_path / "store"
        with segstore.open(path, format="rocketmq", mode="a") as store:
            store.append_batch([{"topic": "T", "queue_id": 0, "body": f"m{i}".encode(), "keys": ["k"]}
                                for i in range(count)])
        return path
    path = tmp_path / "T-0"
    with segstore.open(path, format="kafka", mode="a") as store:
        for i in range(count):  # one batch each: the key index reads every batch
            store.append({"topic": "T", "partition": 0, "key": b"k", "value": f"m{i}".encode()})
    code = cli.main(["index", "build", str(path), "--index", "key"], io.StringIO())
    assert code == 0
    return path


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_a_key_query_returns_every_hit_and_max_says_what_it_left_out(tmp_path, capsys, fmt):
    path = _store_with_repeated_key(tmp_path, fmt, 40)
    code, out, err = run(capsys, "query", path, "--topic", "T", "--key", "k", "--json")
    assert code == 0
    hits = [json.loads(line) for line in out.splitlines()]
    assert len(hits) == 40
    assert err == ""
    code, out, err = run(capsys, "query", path, "--topic", "T", "--key", "k", "--json", "--max", "5")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == hits[-5:]
    assert "5 of 40 hits shown (the newest; --max 5), 35 left out" in err
    code, out, err = run(capsys, "query", path, "--topic", "T", "--key", "k", "--max", "40")
    assert code == 0 and len(out.splitlines()) == 40 and err == ""


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@pytest.mark.parametrize("ask", [["--key", "nope"], ["--offset", "99"]], ids=["key", "offset"])
def test_no_hit_exits_1_with_stdout_json_only(tmp_path, capsys, fmt, ask):
    path = _store_with_repeated_key(tmp_path, fmt, 3)
    code, out, err = run(capsys, "query", path, "--topic", "T", "--queue", "0", *ask, "--json")
    assert (code, out) == (1, "")
    assert err.startswith("segstore query: T/0: no record ")
    code, out, err = run(capsys, "query", path, "--topic", "T", "--queue", "0", *ask)
    assert (code, out) == (1, "")


def test_a_kafka_time_query_past_the_end_exits_1_without_stdout(capsys):
    code, out, err = run(capsys, "query", KAFKA_PART, "--timestamp", str(2**62), "--json")
    assert (code, out) == (1, "")
    assert f"no record stored at or after timestamp {2**62}" in err


# -- 4. small things ---------------------------------------------------------------------

def test_version():
    done = run_process("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"segstore {segstore.__version__}"


def test_formats_lists_every_plugin_with_its_origin(capsys):
    code, out, _ = run(capsys, "formats", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert set(rows) == {"kafka", "rocketmq"}
    for name, row in rows.items():
        plugin = segstore.registry.get(name)
        assert row["description"] == plugin.description
        assert row["entry_point"] == f"{type(plugin).__module__}:{type(plugin).__qualname__}"
        assert row["error"] is None
    code, out, _ = run(capsys, "formats")
    assert out.count("entry point") == 2


@pytest.mark.parametrize("argv", [["info"], ["info", "-h"], ["info", "--bogus", "x"], ["nosuch", "x"],
                                  ["dump", "--format"], ["index", "build"], ["index", "verify", "-h"],
                                  ["convert"], ["verify", "--threads", "x", "p"]])
def test_a_command_lines_usage_errors_and_help_read_as_with_every_parser_built(argv, capsys):
    """main builds only the named command's parser (the others are registered by name and help):
    what argparse prints and exits with is what the parser with every command built gives."""
    seen = []
    for parser in (cli.build_parser(argv[0]), cli.build_parser()):
        with pytest.raises(SystemExit) as done:
            parser.parse_args(argv)
        seen.append((done.value.code, capsys.readouterr()))
    assert seen[0] == seen[1] and seen[0][1].out + seen[0][1].err


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--help", "info", "x"], ["--version"],
                                  ["--version", "dump"]])
def test_help_or_version_first_makes_no_commands_parser(argv, capsys, monkeypatch):
    """A command line starting with ``--help`` or ``--version`` prints and exits before any command is
    parsed: main makes the top level's parser alone (the commands' parsers made 207 of the 209
    ``add_argument`` calls of ``segstore --help``), and prints what the parser with every command built
    prints."""
    made = []
    make = cli._Parser.__init__

    def counting(self, *args, **kwargs):
        made.append(kwargs.get("prog"))
        make(self, *args, **kwargs)

    with pytest.raises(SystemExit) as full:
        cli.build_parser().parse_args(argv)
    want = capsys.readouterr()
    monkeypatch.setattr(cli._Parser, "__init__", counting)
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert (done.value.code, capsys.readouterr()) == (full.value.code, want) and want.out
    assert made == ["segstore"]


def test_a_bad_flag_prints_that_commands_usage():
    done = run_process("dump", "--bogus", BASIC)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: segstore dump ")
    assert "segstore dump: error: unrecognized arguments: --bogus" in done.stderr
    done = run_process("index", "verify", BASIC, "--index", "key", "--bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: segstore index verify ")


def _walk(parser, name="segstore"):
    import argparse

    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                yield from _walk(child, f"{name} {child_name}")


def test_every_option_has_help_text():
    missing = [f"{name} {'/'.join(action.option_strings) or action.dest}"
               for name, parser in _walk(cli.build_parser())
               for action in parser._actions
               if action.help is None and not action.__class__.__name__.startswith("_SubParsers")]
    assert missing == []


def test_help_text_reads_as_plain_text():
    """What --help prints is for a terminal: no reStructuredText markup of the docstrings."""
    texts = [(name, text) for name, parser in _walk(cli.build_parser())
             for text in (parser.description, parser.epilog, *(action.help for action in parser._actions))
             if text]
    markup = ("``", ":func:", ":meth:", ":class:")
    assert [(name, text) for name, text in texts if any(mark in text for mark in markup)] == []
    assert "RocketMQ" in cli.build_parser().format_help()


def test_info_json_and_human_output_hold_every_queue(capsys):
    code, out, _ = run(capsys, "info", BASIC, "--json")
    info = json.loads(out)
    code, text, _ = run(capsys, "info", BASIC)
    assert code == 0
    assert "more lines" not in text
    for queue in info["queues"]:
        row = f"topic={queue['topic']}, queue_id={queue['queue_id']}, min_offset={queue['min_offset']}"
        assert row in text
    queue_lines = [line for line in text.splitlines() if "queue_id=" in line and "level=" not in line]
    assert len(queue_lines) == len(info["queues"])      # (delay_queues' lines name their level)


def test_verify_and_recover_json(tmp_path, capsys):
    code, out, err = run(capsys, "verify", BASIC, "--json")
    assert (code, json.loads(out), err) == (0, {"path": str(BASIC), "ok": True, "problems": []}, "")
    code, out, _ = run(capsys, "verify", ABORT, "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert report["problems"][0]["path"] == str(ABORT / "abort")
    store = copy_writable(ABORT, tmp_path / "store")
    code, out, _ = run(capsys, "recover", store, "--json")
    assert code == 0
    assert any("unclean shutdown" in line for line in json.loads(out)["actions"])


def test_rocketmq_dump_index_prints_every_queue_entry_and_index_entry(capsys):
    code, text, _ = run(capsys, "dump", BASIC, "--index", "--topic", "TopicA", "--queue", "1")
    assert code == 0
    code, out, _ = run(capsys, "dump", BASIC, "--json", "--topic", "TopicA", "--queue", "1")
    messages = sorted((m["queue_offset"], m["physical_offset"], m["size"]) for m in map(json.loads,
                                                                                    out.splitlines()))
    lines = text.splitlines()
    start = lines.index(f"Dumping {BASIC / 'consumequeue' / 'TopicA' / '1'} (offsets 0..{len(messages)})")
    entries = [line.split() for line in lines[start + 1:start + 1 + len(messages)]]
    assert [(int(e[1]), int(e[3]), int(e[5])) for e in entries] == messages
    assert not any("consumequeue/TopicB" in line for line in lines)
    headers = [i for i, line in enumerate(lines) if line.startswith(f"Dumping {BASIC / 'index'}")]
    assert len(headers) == len(os.listdir(BASIC / "index"))
    for i in headers:
        index_count = int(lines[i + 1].rsplit(" ", 1)[1])
        numbered = [line for line in lines[i + 2:i + 1 + index_count] if line.startswith("entry: ")]
        assert len(numbered) == index_count - 1  # entry 0 is never used (IndexFile.putKey)


def test_rocketmq_dump_index_reports_a_bad_consume_queue_entry(tmp_path, capsys):
    store = copy_writable(BASIC, tmp_path / "store")
    cq_file = store / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    data = bytearray(cq_file.read_bytes())
    data[20:28] = (10**9).to_bytes(8, "big")  # entry 1 points past the commitlog
    cq_file.write_bytes(bytes(data))
    _code, text, _ = run(capsys, "dump", store, "--index", "--topic", "TopicA", "--queue", "0")
    assert "offset: 1 commitlogOffset: 1000000000 " in text
    assert any(line.startswith(f"{cq_file}:20: ") for line in text.splitlines())


def test_kafka_dump_index_reports_a_bad_index(tmp_path, capsys):
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    index = next(p for p in sorted(part.glob("*.index")) if p.stat().st_size >= 16)
    data = bytearray(index.read_bytes())
    data[0:8] = (1).to_bytes(4, "big") + (10**6).to_bytes(4, "big")  # positions no longer increase
    index.write_bytes(bytes(data))
    code, _out, err = run(capsys, "dump", part, "--index")
    assert code == 1
    assert err.startswith(f"{index}:8: expected strictly increasing positions")


# -- 5. packaging: the C accelerators ----------------------------------------------------

_BLOCK_SPEEDUPS = """
import sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.endswith("._speedups"):
            raise ImportError(f"{name} blocked for the test", name=name)
sys.meta_path.insert(0, Block())
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import segstore_kafka.batch, segstore_rocketmq.fastappend, segstore_rocketmq.indexfile
    import segstore_kafka.store, segstore_rocketmq.store
for w in caught:
    print(w.category.__name__, str(w.message).split(":")[0])
print(segstore_kafka.batch._speedups, segstore_rocketmq.fastappend._speedups)
"""


def test_a_missing_accelerator_warns_once_per_module_and_the_env_switch_forces_pure_python():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")])}
    env.pop("SEGSTORE_PURE_PYTHON", None)
    done = subprocess.run([sys.executable, "-c", _BLOCK_SPEEDUPS], capture_output=True, text=True, env=env,
                          timeout=120, check=True)
    assert done.stdout.splitlines() == ["SpeedupsWarning segstore_kafka._speedups",
                                        "SpeedupsWarning segstore_rocketmq._speedups", "None None"]
    done = subprocess.run([sys.executable, "-c", _BLOCK_SPEEDUPS], capture_output=True, text=True,
                          env={**env, "SEGSTORE_PURE_PYTHON": "1"}, timeout=120, check=True)
    assert done.stdout.splitlines() == ["None None"]


@pytest.mark.parametrize("path", [BASIC, KAFKA_PART], ids=["rocketmq", "kafka"])
def test_pure_python_and_c_paths_dump_the_same(path):
    both = []
    for pure in ("1", "0"):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")]),
               "SEGSTORE_PURE_PYTHON": pure}
        done = subprocess.run([sys.executable, "-m", "segstore.cli", "dump", str(path), "--json"],
                              capture_output=True, text=True, env=env, timeout=300, check=True)
        both.append(done.stdout)
    assert both[0] == both[1]
    assert len(both[0].splitlines()) > 100


# -- 6. mqadmin's read commands ------------------------------------------------------------

def _fixture_lines(name: str, kind: str) -> list[dict]:
    lines = (FIXTURES / "rocketmq" / "basic" / name).read_text(encoding="utf-8").splitlines()
    return [obj for obj in map(json.loads, lines) if obj.get("type") == kind]


def test_query_msg_id_finds_every_message_by_the_brokers_own_msg_id(capsys):
    """The 4.9.7 broker's msgIds (CommitLog.DefaultAppendMessageCallback via
    MessageDecoder.createMessageId: store IP, port, commitlog offset) as put.jsonl recorded them."""
    puts = _fixture_lines("put.jsonl", "put")
    for put in puts[:: max(1, len(puts) // 25)]:
        code, out, _ = run(capsys, "query", BASIC, "--msg-id", put["msgId"].lower(), "--json")
        assert code == 0
        found = json.loads(out)
        assert (found["topic"], found["queue_id"], found["queue_offset"], found["physical_offset"],
                found["msg_id"]) == (put["topic"], put["queueId"], put["queueOffset"], put["physicalOffset"],
                                     put["msgId"])


def test_query_msg_id_of_no_message_exits_1(capsys):
    first = _fixture_lines("put.jsonl", "put")[0]["msgId"]
    inside = first[:-1] + "1"  # one byte into the first message: no message starts there
    code, out, err = run(capsys, "query", BASIC, "--msg-id", inside, "--json")
    assert (code, out) == (1, "")
    assert f"no message with msgId {inside}" in err
    code, _, err = run(capsys, "query", KAFKA_PART, "--msg-id", first)
    assert code == 2 and "kafka stores have no message ids" in err


@pytest.mark.parametrize("msg_id", ["zz", "7F0000010000000000000000", "Z" * 32, "7F00000100002A9F" + "G" * 16,
                                    "0" * 57, "7F00000100002A9F000000000000_000"])
def test_query_msg_id_that_is_no_offset_msg_id_is_a_usage_error(capsys, msg_id):
    """An offset msgId is 32 hex digits (IPv4 store host: 4 address bytes, the port's 4, the commitlog
    offset's 8) or 56 (IPv6: 16 address bytes): 4.9.7 ``MessageDecoder.decodeMessageId`` reads
    ``UtilAll.string2bytes(msgId)`` as ``msgId.length() == 32 ? 4 : 16`` address bytes, a port and an
    offset.  ``query --msg-id zz`` exited 1, "no message with msgId zz", as if the store held no such
    message: it names no message of any store, a usage error (exit 2) saying what an id is.  With
    ``--topic`` it may be a client msgId, which ``DefaultMQAdminExtImpl.viewMessage(topic, msgId)`` looks
    up when ``decodeMessageId`` throws: the index is asked, exit 1 when it holds none."""
    code, out, err = run(capsys, "query", BASIC, "--msg-id", msg_id)
    assert (code, out) == (2, ""), err
    assert "expected an offset msgId: 32 hex digits" in err and f"found {msg_id!r}" in err, err
    assert "looked up with --topic" in err
    code, out, err = run(capsys, "query", BASIC, "--msg-id", msg_id, "--topic", "TopicA")
    assert (code, out) == (1, "") and f"no message with msgId {msg_id}" in err, err
    with segstore.open(BASIC) as store, pytest.raises(ConfigError, match="expected an offset msgId"):
        store.find_msg_id(msg_id)


def test_query_msg_id_falls_back_to_the_client_msg_id_with_a_topic(capsys):
    message = next(m for m in _fixture_lines("dump.jsonl", "message") if "UNIQ_KEY" in m["properties"])
    uniq = message["properties"]["UNIQ_KEY"]
    code, out, err = run(capsys, "query", BASIC, "--msg-id", uniq)
    assert code == 1 and "pass --topic" in err
    code, out, _ = run(capsys, "query", BASIC, "--msg-id", uniq, "--topic", message["topic"], "--json")
    assert code == 0
    assert [json.loads(line)["physical_offset"] for line in out.splitlines()] == [message["physicalOffset"]]


def test_query_client_msg_id_is_the_uniq_key_not_a_keys_token(tmp_path, capsys):
    """A client msgId is a message's UNIQ_KEY: RocketMQ 4.9.7 ``MQAdminImpl.queryMessage`` with
    ``isUniqKey`` (``mqadmin queryMsgByUniqueKey``, and ``DefaultMQAdminExt.viewMessage``'s fallback) keeps
    a hit of the index only where ``msgExt.getMsgId()``, the UNIQ_KEY, equals the id.  The fallback went
    through ``--key`` and also answered a message carrying the id as one of its KEYS (here the second,
    whose own UNIQ_KEY is another); a retry's duplicate with the same UNIQ_KEY is still shown."""
    uniq = "AC11000100002A9F0000000000000001"
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", mappedFileSizeCommitLog=1 << 20,
                       maxHashSlotNum=64, maxIndexNum=256) as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"a",
                      "properties": {"UNIQ_KEY": uniq, "KEYS": "x"}})
        store.append({"topic": "T", "queue_id": 0, "body": b"b",
                      "properties": {"UNIQ_KEY": uniq[:-1] + "2", "KEYS": uniq}})
        store.append({"topic": "T", "queue_id": 1, "body": b"c", "properties": {"UNIQ_KEY": uniq}})
    for extra in ([], ["--decompress-bodies"]):
        code, out, _ = run(capsys, "query", path, "--msg-id", uniq, "--topic", "T", "--json", *extra)
        assert code == 0
        assert [base64.b64decode(json.loads(line)["body"]) for line in out.splitlines()] == [b"a", b"c"]
    code, out, _ = run(capsys, "query", path, "--msg-id", uniq, "--topic", "T")
    assert code == 0 and len(out.splitlines()) == 2 and "keys=x" in out.splitlines()[0]
    # the key lookup still finds the KEYS token and the UNIQ_KEY alike
    code, out, _ = run(capsys, "query", path, "--key", uniq, "--topic", "T", "--json")
    assert [base64.b64decode(json.loads(line)["body"]) for line in out.splitlines()] == [b"a", b"b", b"c"]
    code, out, err = run(capsys, "query", path, "--msg-id", uniq[:-1] + "3", "--topic", "T")
    assert (code, out) == (1, "") and "no message with msgId" in err


def test_consumers_lists_committed_max_and_lag_per_queue(tmp_path, capsys):
    """mqadmin consumerProgress's Consumer Offset, Broker Offset, Diff and LastTime (4.9.7
    AdminBrokerProcessor.getConsumeStats: the store time of the message at the committed offset - 1,
    none for a queue with nothing consumed)."""
    path = tmp_path / "store"
    base = 1_700_000_000_000
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"x", "store_timestamp": base + i}
                            for i in range(10)])
        store.append_batch([{"topic": "U", "queue_id": 0, "body": b"y", "store_timestamp": base + 100 + i}
                            for i in range(3)])
        store.commit_offset("g1", "T", 0, 2)
        store.commit_offset("g2", "U", 0, 3)
    code, out, _ = run(capsys, "consumers", path, "--json")
    assert code == 0
    none = {"consumer_id": None, "host": None, "client_id": None, "state": None}
    assert json.loads(out) == [
        {"group": "g1", "topic": "T", "partition": 0, "committed_offset": 2, "log_end_offset": 5, "lag": 3,
         **none, "extras": {"last_timestamp": base + 2}},        # T/0@1 is message 2
        {"group": "g1", "topic": "T", "partition": 1, "committed_offset": None, "log_end_offset": 5,
         "lag": 5, **none, "extras": {"last_timestamp": 0}},     # Diff takes no commit as 0
        {"group": "g2", "topic": "U", "partition": 0, "committed_offset": 3, "log_end_offset": 3, "lag": 0,
         **none, "extras": {"last_timestamp": base + 102}},
    ]
    code, out, _ = run(capsys, "consumers", path, "--group", "g1")
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
         "CLIENT-ID", "STATE", "LAST-TIME"],
        ["g1", "T", "0", "2", "5", "3", "-", "-", "-", "-", "2023-11-14T22:13:20.002Z"],
        ["g1", "T", "1", "-", "5", "5", "-", "-", "-", "-", "-"]]
    # a commit past the queue's max offset (a reset, a queue recovery cut) is a negative Diff
    offsets = path / "config" / "consumerOffset.json"
    offsets.write_text(offsets.read_text().replace('"U@g2":{0:3', '"U@g2":{0:7'))
    code, out, _ = run(capsys, "consumers", path, "--group", "g2", "--json")
    rows = [(row["committed_offset"], row["log_end_offset"], row["lag"]) for row in json.loads(out)]
    assert rows == [(7, 3, -4)]
    code, out, err = run(capsys, "consumers", path, "--group", "nogroup")
    assert (code, out) == (1, "") and "expected consumer group 'nogroup', found groups g1, g2" in err
    # a Kafka partition of another topic: no __consumer_offsets, no groups, and it says so
    code, out, err = run(capsys, "consumers", KAFKA_PART)
    assert (code, out) == (0, "") and "no __consumer_offsets partition here" in err


def test_consumers_of_a_store_without_offsets_says_so(tmp_path, capsys):
    """A RocketMQ store no group committed to printed nothing at all, exit 0 (a Kafka log directory
    without __consumer_offsets says so); it says why on stderr, and so for a file that holds none."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append({"topic": "T", "body": b"x"})
    code, out, err = run(capsys, "consumers", path)
    assert (code, out) == (0, "")
    assert err == (f"segstore consumers: {path}: no config/consumerOffset.json here: no consumer group "
                   "committed offsets\n")
    (path / "config").mkdir(exist_ok=True)
    (path / "config" / "consumerOffset.json").write_text('{"offsetTable":{}}')
    code, out, err = run(capsys, "consumers", path, "--json")
    assert (code, out) == (0, "[]\n") and "config/consumerOffset.json holds no offsets: no consumer" in err


def test_consumers_list_every_queue_topics_json_configures(tmp_path, capsys):
    """4.9.7 AdminBrokerProcessor.getConsumeStats walks queues 0 .. topicConfig.getReadQueueNums() - 1,
    a queue without files answering getMaxOffsetInQueue 0: consumerProgress shows T's four queues though
    messages went to two, and a reset covers them all (here --to-latest commits 0 for the empty ones)."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "queue_id": q, "body": b"x"} for q in (0, 1, 1)])
        store.commit_offset("g", "T", 0, 1)
    topics = path / "config" / "topics.json"
    topics.write_text(topics.read_text().replace('"readQueueNums":2', '"readQueueNums":4')
                      .replace('"writeQueueNums":2', '"writeQueueNums":4'))
    code, out, _ = run(capsys, "consumers", path, "--json")
    assert code == 0
    assert [(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"]) for r in json.loads(out)] \
        == [(0, 1, 1, 0), (1, None, 2, 2), (2, None, 0, 0), (3, None, 0, 0)]
    code, out, _ = run(capsys, "consumers", path, "--group", "g", "--reset-offsets", "--to-latest",
                       "--execute", "--export")
    assert (code, out) == (0, "T,0,1\nT,1,2\nT,2,0\nT,3,0\n")
    with segstore.open(path) as store:
        assert [store.committed_offset("g", "T", q) for q in range(4)] == [1, 2, 0, 0]
    # a count no broker holds queues for (a queue id written far out) lists only the queues there are
    topics.write_text(topics.read_text().replace('"readQueueNums":4', '"readQueueNums":2147483647'))
    code, out, _ = run(capsys, "consumers", path, "--json")
    assert code == 0 and [r["partition"] for r in json.loads(out)] == [0, 1, 2, 3]


def test_consumers_list_the_rows_consumer_progress_lists(tmp_path, capsys):
    """4.9.7 AdminBrokerProcessor.getConsumeStats skips a committed topic whose selectTopicConfig is null
    and walks only queues 0 .. readQueueNums - 1.  After mqadmin deleteTopic (deleteTopicConfig, then
    cleanUnusedTopic removes its consume queues) the group's offsets stay in consumerOffset.json: segstore
    listed them as Gone 0 5 0 -5, a negative lag (and a total Diff) consumerProgress never shows.  A
    %RETRY% topic topics.json lacks is listed (the broker makes its config on the group's first
    heartbeat, TopicConfigManager.createTopicInSendMessageBackMethod); the rows left out are named on
    stderr, --hidden lists them, --delete --topic still deletes them, and a store without topics.json
    lists every row as before."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "queue_id": q, "body": b"x"} for q in (0, 1, 1)])
        store.append_batch([{"topic": "Gone", "queue_id": 0, "body": b"y"} for _ in range(5)])
        store.commit_offsets("g", {("T", 0): 1, ("T", 3): 0, ("Gone", 0): 5, ("%RETRY%g", 0): 0})
    topics = path / "config" / "topics.json"
    document = json.loads(topics.read_text())
    del document["topicConfigTable"]["Gone"]            # mqadmin deleteTopic -t Gone
    topics.write_text(json.dumps(document))
    shutil.rmtree(path / "consumequeue" / "Gone")
    code, out, err = run(capsys, "consumers", path, "--json")
    assert code == 0
    assert [(r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"])
            for r in json.loads(out)] == [("%RETRY%g", 0, 0, 0, 0), ("T", 0, 1, 1, 0), ("T", 1, None, 2, 2)]
    assert "group 'g': Gone queues 0 not listed: config/topics.json has no topic 'Gone'" in err
    assert "group 'g': T queues 3 not listed: past the topic's readQueueNums 2" in err
    assert "consumers --hidden" in err
    code, out, err = run(capsys, "consumers", path, "--hidden", "--json")
    assert code == 0 and "not listed" not in err
    assert [(r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"])
            for r in json.loads(out)] == [("%RETRY%g", 0, 0, 0, 0), ("Gone", 0, 5, 0, -5), ("T", 0, 1, 1, 0),
                                          ("T", 1, None, 2, 2), ("T", 3, 0, 0, 0)]
    with segstore.open(path) as store:
        assert store.consumer_groups("g", hidden=True).rows[1].topic == "Gone"
        with pytest.raises(ConfigError, match="expected hidden as a bool"):
            store.consumer_groups("g", hidden="yes")
    # a reset plans what the broker's resetOffset walks: the listed queues only
    code, out, _ = run(capsys, "consumers", path, "--group", "g", "--reset-offsets", "--to-earliest",
                       "--export")
    assert (code, out) == (0, "%RETRY%g,0,0\nT,0,0\nT,1,0\n")
    code, _, err = run(capsys, "consumers", path, "--hidden", "--group", "g", "--reset-offsets",
                       "--to-earliest")
    assert code == 2 and "--hidden goes with the view of groups" in err
    code, _, err = run(capsys, "consumers", KAFKA_PART, "--hidden")
    assert code == 2 and "a Kafka store's rows are all listed" in err
    # without topics.json (nor its .bak, which the broker's ConfigManager.load would read) every row is
    # listed, as before
    saved = topics.read_text()
    topics.unlink()
    (path / "config" / "topics.json.bak").unlink()
    code, out, err = run(capsys, "consumers", path, "--json")
    assert code == 0 and "not listed" not in err
    assert ("Gone", 0, -5) in [(r["topic"], r["partition"], r["lag"]) for r in json.loads(out)]
    topics.write_text(saved)
    # the way to clean a deleted topic's offsets still finds them
    code, out, _ = run(capsys, "consumers", path, "--group", "g", "--delete", "--topic", "Gone", "--execute")
    assert code == 0 and out.splitlines()[1].split() == ["g", "Gone", "0", "5"]
    code, out, err = run(capsys, "consumers", path, "--hidden", "--json")
    assert "Gone" not in out and "Gone" not in err


def test_tag_filters_dump_and_offset_queries(capsys):
    messages = _fixture_lines("dump.jsonl", "message")
    tagged = sorted((m["topic"], m["queueId"], m["queueOffset"]) for m in messages
                    if m.get("tags") == "TagA" and m["topic"] == "TopicA")
    assert tagged
    code, out, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--tag", "TagA", "--json")
    assert code == 0
    assert sorted((m["topic"], m["queue_id"], m["queue_offset"]) for m in map(json.loads, out.splitlines())) \
        == tagged
    first = [t for t in tagged if t[1] == 1][:2]
    code, out, _ = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "1", "--offset", "0",
                       "--count", "2", "--tag", "TagA", "--json")
    found = [(m["topic"], m["queue_id"], m["queue_offset"]) for m in map(json.loads, out.splitlines())]
    assert found == first
    code, out, err = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "1", "--offset", "0",
                         "--tag", "NoSuchTag", "--json")
    assert (code, out) == (1, "") and "no record tagged 'NoSuchTag'" in err
    code, _, err = run(capsys, "dump", KAFKA_PART, "--tag", "x")
    assert code == 2 and "kafka records have no tags" in err


def test_a_tagged_dump_prints_the_dumps_own_lines(capsys):
    """``dump --tag`` prints the lines (and JSON objects) ``dump`` prints for the same messages, queue by
    queue as ``mqadmin printMsg -s`` walks them, not lookup lines; a tag no message carries is a miss."""
    code, whole, _ = run(capsys, "dump", BASIC, "--topic", "TopicA")
    assert code == 0
    code, out, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--tag", "TagA")
    assert code == 0
    expected = [line for line in whole.splitlines() if " tags=TagA " in line]

    def queue_order(line: str) -> tuple[int, int]:
        queue, offset = line.split()[1].split("/")[1].split("@")
        return int(queue), int(offset)

    assert out.splitlines() == sorted(expected, key=queue_order) and len(expected) > 1
    code, whole_json, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--json")
    code, out_json, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--json", "--tag", "TagA")
    assert sorted(out_json.splitlines()) == sorted(line for line in whole_json.splitlines()
                                                   if json.loads(line).get("tags") == "TagA")
    code, out, err = run(capsys, "dump", BASIC, "--tag", "NoSuchTag")
    assert (code, out) == (1, "") and "segstore dump: */*: no message tagged 'NoSuchTag'" in err


def test_tag_takes_a_subscription_expression_as_printmsg_s_does(capsys):
    """``mqadmin printMsg -s`` pulls with a subscription expression, which 4.9.7
    ``FilterAPI.buildSubscriptionData`` splits on ``||`` (each tag trimmed) and reads ``*`` as every
    message; ``--tag 'TagA || TagB'`` used to match only a literal tag of that text, exit 1."""
    code, whole, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--json")
    lines = [json.loads(line) for line in whole.splitlines()]

    def shown(out: str) -> list[tuple[int, int]]:
        return sorted((m["queue_id"], m["queue_offset"]) for m in map(json.loads, out.splitlines()))

    either = sorted((m["queue_id"], m["queue_offset"]) for m in lines if m["tags"] in ("TagA", "TagB"))
    assert either and any(m["tags"] == "TagB" for m in lines) and any(m["tags"] is None for m in lines)
    for expression in ("TagA || TagB", "TagB||TagA", " TagA ||  TagB || "):
        code, out, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--json", "--tag", expression)
        assert code == 0 and shown(out) == either, expression
    code, out, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--json", "--tag", "*")
    assert code == 0 and shown(out) == sorted((m["queue_id"], m["queue_offset"]) for m in lines)
    code, out, _ = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "0", "--offset", "0",
                       "--count", "3", "--tag", "TagA || TagB", "--json")
    assert code == 0 and shown(out) == [t for t in either if t[0] == 0][:3]
    # tags that trim to nothing (Java's split keeps the non-empty " ") subscribe to no tag: none matches
    code, out, err = run(capsys, "dump", BASIC, "--topic", "TopicA", "--tag", "|| ||")
    assert (code, out) == (1, "") and "no message tagged '|| ||'" in err


@pytest.mark.parametrize("expression", ["||", "||||", " || "])
def test_a_tag_expression_of_bars_alone_is_a_usage_error(capsys, expression):
    """4.9.7 ``FilterAPI.buildSubscriptionData`` splits the expression with ``split("\\|\\|")``, which
    drops trailing empty strings: ``||`` (``mqadmin printMsg -s`` trims the option first) gives no
    element, and it throws "subString split error" (the pull consumer: "parse subscription error").
    ``dump --tag '||'`` and ``query --tag '||'`` exited 1, "no message tagged '||'", as if the store
    held no such message: the expression is wrong, exit 2, whatever the store holds."""
    for args in (["dump", BASIC], ["dump", BASIC, "--json", "--topic", "TopicA"],
                 ["dump", BASIC, "--topic", "TopicA", "--begin", "0", "--end", "1"],
                 ["query", BASIC, "--topic", "TopicA", "--queue", "0", "--offset", "0"],
                 ["query", BASIC, "--topic", "TopicA", "--queue", "0", "--offset", "99999"]):
        code, out, err = run(capsys, *args, "--tag", expression)
        assert (code, out) == (2, ""), (args, err)
        assert "expected a subscription expression" in err and f"found {expression.strip()!r}" in err, err
    with segstore.open(BASIC) as store, pytest.raises(ConfigError, match="subString split error"):
        next(store.read("TopicA", 0, tag=expression))


@pytest.mark.parametrize(("text", "ms"), [
    ("1795334929500", 1795334929500),
    ("2026-11-22T08:08:49.5Z", 1795334929500),
    ("2026-11-22T10:08:49.500+02:00", 1795334929500),
    ("2026-11-22 08:08:49.500", 1795334929500),
    ("2026-11-22", 1795305600000),
])
def test_times_are_epoch_ms_or_iso_8601(text, ms):
    assert cli.time_ms(text) == ms


def test_an_iso_time_query_answers_as_the_ms_one(capsys):
    by_ms = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "1", "--timestamp", "1795334929500",
                "--json")
    by_iso = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "1", "--timestamp",
                 "2026-11-22T08:08:49.500Z", "--json")
    assert by_ms == by_iso and by_ms[0] == 0
    done = run_process("query", BASIC, "--topic", "TopicA", "--timestamp", "yesterday")
    assert done.returncode == 2 and "expected milliseconds since the epoch or an ISO-8601 time" in done.stderr


def test_index_verify_json(tmp_path, capsys):
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    assert run(capsys, "index", "build", part, "--index", "key")[0] == 0
    code, out, err = run(capsys, "index", "verify", part, "--index", "key", "--json")
    assert (code, json.loads(out), err) == (0, {"path": str(part), "ok": True, "problems": []}, "")
    code, out, _ = run(capsys, "index", "verify", ABORT, "--index", "queue", "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert [p["path"] for p in report["problems"]] == [str(ABORT / "abort")]



def test_index_verify_without_index_checks_every_extra_layout_built(tmp_path, capsys):
    """``index verify PATH`` without ``--index`` was a usage error (exit 2): it checks every extra layout
    built for the store (as ``present_layouts`` finds them; the broker's own files are ``verify``'s),
    exit 1 for a problem in any; a store with none built says so, exit 0."""
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    assert run(capsys, "index", "verify", part) == (
        0, "", f"{part}: no extra index layouts built (name one with --index)\n")
    assert run(capsys, "index", "verify", part, "-q") == (0, "", "")
    code, out, _ = run(capsys, "index", "verify", part, "--json")
    assert (code, json.loads(out)) == (0, {"path": str(part), "ok": True, "problems": []})
    assert run(capsys, "index", "build", part, "--index", "key", "--index", "queue")[0] == 0
    assert run(capsys, "index", "verify", part) == (0, "", f"{part}: queue, key: ok\n")
    queue = part / ".segstore" / "queue" / "consumequeue" / "00000000000000000000"
    with open(queue, "r+b") as f:     # offset 1's entry points elsewhere
        f.seek(20)
        f.write(b"\x00\x00\x00\x00\x00\x00\x7f\x7f")
    code, out, _ = run(capsys, "index", "verify", part)
    assert code == 1 and out == f"{queue}:20: expected (77, 82, 0) for offset 1, found (32639, 82, 0)\n"
    assert run(capsys, "index", "verify", part, "--index", "key")[0] == 0


def test_index_drop_names_its_layouts_or_all(tmp_path, capsys):
    """``index drop PATH`` deletes nothing on a forgotten ``--index`` (exit 2, as before); ``--all``
    drops every extra layout built, and says so when there is none."""
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    assert run(capsys, "index", "build", part, "--index", "key", "--index", "queue")[0] == 0
    code, _, err = run(capsys, "index", "drop", part)
    assert code == 2 and "expected --index NAME or --all" in err
    code, _, err = run(capsys, "index", "drop", part, "--all", "--index", "key")
    assert code == 2 and "found both" in err
    assert sorted(os.listdir(part / ".segstore")) == ["key", "key.lock", "queue", "queue.lock"]
    code, out, _ = run(capsys, "index", "drop", part, "--all")
    assert code == 0 and sorted(out.splitlines()) == [f"removed {part / '.segstore' / 'key'}",
                                                      f"removed {part / '.segstore' / 'queue'}"]
    assert not (part / ".segstore" / "key").exists() and not (part / ".segstore" / "queue").exists()
    assert run(capsys, "index", "drop", part, "--all") == (
        0, f"{part}: no extra index layouts built (name one with --index)\n", "")
    # a layout named that is not built: said, not a silent exit 0 that looked like a drop
    assert run(capsys, "index", "drop", part, "--index", "key") == (0, f"{part}: key: not built, nothing to "
                                                                       "drop\n", "")
    assert not (part / ".segstore" / "key").exists()

@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_write_input_streams_in_chunks_and_a_late_bad_line_writes_nothing(tmp_path, capsys, fmt):
    """``write --input`` reads the file line by line (twice: check, then append chunk by chunk), so a
    file of any size fits in memory, and a bad line after thousands of good ones still writes nothing."""
    from segstore.plugin import WRITE_CHUNK

    target = tmp_path / ("t-0" if fmt == "kafka" else "store")
    count = 2 * WRITE_CHUNK + 7
    good = "".join(f'{{"topic": "t", "value": "v{i}"}}\n' for i in range(count))
    path = tmp_path / "in.jsonl"
    path.write_text(good)
    code, out, _ = run(capsys, "write", target, "--input", path, "--format", fmt)
    assert (code, out.strip()) == (0, f"{target}: appended {count} messages")
    with segstore.open(str(target)) as store:
        values = [m.value for m in store.read("t", 0)] if fmt == "kafka" else \
            [m.body for q in store.partitions("t") for m in store.read("t", q)]
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(count))
    before = {p: p.read_bytes() for p in target.rglob("*") if p.is_file() and "lock" not in p.name}
    path.write_text(good + "{broken\n")
    code, _, err = run(capsys, "write", target, "--input", path, "--format", fmt)
    assert code == 1 and f"line {count + 1}: expected a JSON object" in err
    after = {p: p.read_bytes() for p in target.rglob("*") if p.is_file() and "lock" not in p.name}
    assert after == before
