"""``--json`` output is JSON a strict reader takes: UTF-8 lines (Jackson, ``jq``, ``json.loads`` of a
line read as text), whatever the store holds.

Through the real CLI (``main()`` with captured output).  A RocketMQ property stored as the bytes
``ED A0 80`` (a lone surrogate's CESU form, which no Java producer writes but a file may hold) was read
with ``surrogatepass`` (``"\\ud800"``, escaped so the JSON stays UTF-8); RocketMQ 4.9.7 reads it with
``new String(bytes, UTF_8)`` (``CommitLog.checkMessageAndReturnSize``), JDK 17's
``String.decodeUTF8_UTF16`` making one U+FFFD of a surrogate's three bytes, and so does segstore now.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest

from segstore import cli


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, bytes, str]:
    out = io.BytesIO()
    text = io.TextIOWrapper(out, encoding="utf-8", newline="")   # the CLI's strict stdout
    code = cli.main([str(a) for a in argv], text)
    text.flush()
    return code, out.getvalue(), capsys.readouterr().err


def surrogate_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"topic": "Orders", "queue_id": 0, "body": "x", "keys": ["k1"],
                                 "properties": {"p": "b\u00e9"}}) + "\n")
    store = tmp_path / "store"
    assert run(capsys, "write", store, "--input", lines, "--format", "rocketmq")[0] == 0
    commitlog = next((store / "commitlog").iterdir())
    data = bytearray(commitlog.read_bytes())
    at = data.index("b\u00e9".encode())
    data[at:at + 3] = b"\xed\xa0\x80"        # same length: properties are outside the body CRC
    commitlog.write_bytes(bytes(data))
    return store


@pytest.mark.parametrize("argv", [["dump", "--json"], ["dump", "--json", "--threads", "2"],
                                  ["query", "--topic", "Orders", "--key", "k1", "--json"],
                                  ["query", "--topic", "Orders", "--queue", "0", "--offset", "0", "--json"]])
def test_a_stored_lone_surrogate_is_read_as_java_reads_it_never_written_as_bytes_that_are_not_utf8(
        tmp_path, capsys, argv):
    store = surrogate_store(tmp_path, capsys)
    code, out, err = run(capsys, argv[0], store, *argv[1:])
    assert code == 0, err
    rows = [json.loads(line) for line in out.decode("utf-8").splitlines()]   # strict UTF-8
    assert [row["properties"]["p"] for row in rows] == ["\ufffd"]
    assert b"\\ud800" not in out


KAFKA = Path(__file__).resolve().parents[1] / "compat_fixtures" / "kafka" / "logappendtime"


@pytest.mark.parametrize("argv", [["--offset", "0", "--count", "500"], ["--timestamp", "0", "--count", "500"],
                                  ["--topic", "topic", "--key", "key-0"]])
def test_query_json_lines_are_the_dump_json_lines_of_the_same_records(capsys, argv):
    """A Kafka header key outside ASCII (``ü-hdr``): ``dump --json`` writes it ``\\u00fc-hdr``
    (``json.dumps`` as its C loop writes every line), and ``query --json`` wrote it raw, so the hits'
    lines were not the dump's lines of the same records (``grep -F -f hits.jsonl dump.jsonl``)."""
    code, dump, _ = run(capsys, "dump", KAFKA, "--json")
    assert code == 0 and b"\\u00fc" in dump
    code, hits, err = run(capsys, "query", KAFKA, *argv, "--json")
    assert code == 0, err
    hit_lines = hits.splitlines()
    assert any(b"\\u00fc" in line for line in hit_lines)
    assert [line for line in hit_lines if line not in set(dump.splitlines())] == []


def test_a_commitlog_file_dump_reads_a_stored_lone_surrogate_as_java_too(tmp_path, capsys):
    """``dump FILE --json`` of the same commitlog died with a UnicodeEncodeError traceback; the stored
    bytes are its ``properties_base64``."""
    store = surrogate_store(tmp_path, capsys)
    code, out, err = run(capsys, "dump", next((store / "commitlog").iterdir()), "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.decode("utf-8").splitlines()]
    assert [row["properties"]["p"] for row in rows if row["kind"] == "message"] == ["\ufffd"]
    assert [b"p\x01\xed\xa0\x80" in base64.b64decode(row["properties_base64"]) for row in rows
            if row["kind"] == "message"] == [True]
