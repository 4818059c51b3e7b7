"""The JSON options of Spark's Kafka connector (``assign``, ``startingOffsets``/``endingOffsets``,
``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``) read as the connector reads them (Spark 4
JsonUtils: Jackson's ``ObjectMapper`` with ``DefaultScalaModule``, ``Map[String, Seq[Int]]`` and
``Map[String, Map[Int, Long]]``; KafkaSourceProvider trims the offsets' and timestamps' text first and wants
``assign`` to start with ``{``): segstore/spark/options.py.

The table is what ``tools/JacksonOptions.java`` printed on the jars PySpark 4.3.0 ships (jackson-databind
2.21.2, jackson-module-scala 2.21.2, Scala 2.13.18): each text with the entries Jackson read from it, or
None where it threw (the connector's IllegalArgumentException).  Where javac and PySpark's jars are here,
the table is checked against them again."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

from segstore.errors import ConfigError
from segstore.javatext import java_trim
from segstore.spark.options import (
    EARLIEST,
    TIME_CODES,
    parse_assign,
    parse_bound,
    parse_read_options,
    parse_timestamps,
)

TOOLS = Path(__file__).resolve().parent.parent / "tools"

#: (p: assign's Map[String, Seq[Int]] / o: the offsets' and timestamps' Map[String, Map[Int, Long]], the
#: option's text, the sorted entries Jackson read, or None where it threw)
JACKSON = [
    ('p', '{"t": [0, 1]}', (('t', 0), ('t', 1))),
    ('p', '{"t": [1.5]}', (('t', 1),)),
    ('p', '{"t": ["1"]}', (('t', 1),)),
    ('p', '{"t": [null]}', (('t', 0),)),
    ('p', '{"t": [true]}', None),
    ('p', '{"t": [4294967296]}', None),
    ('p', '{"t": [1e2]}', (('t', 100),)),
    ('p', '{"t": " 1"}', None),
    ('p', '{"t": 1}', None),
    ('p', '{"t": []}', ()),
    ('p', '{}', ()),
    ('p', '{"t": [0]} x', (('t', 0),)),
    ('p', '{"t": [0], "t": [1]}', (('t', 1),)),
    ('p', '{"t": [0,]}', None),
    ('p', "{'t': [0]}", None),
    ('p', '{"t": [0]}{', (('t', 0),)),
    ('p', '{"t": [-1]}', (('t', -1),)),
    ('p', '{"t": [" 2 "]}', (('t', 2),)),
    ('p', '{"t": ["0x1"]}', None),
    ('p', '{"t": [[1]]}', None),
    ('p', '{"t": [{}]}', None),
    ('p', '{"t": null}', ()),
    ('p', '{"t": [NaN]}', None),
    ('p', '{"t": [01]}', None),
    ('p', '{"t": [0]}\n//x', (('t', 0),)),
    ('p', '{"t": ["\u0665"]}', (('t', 5),)),
    ('p', '{"t": ["1_0"]}', None),
    ('p', '{"t": [2147483647.9]}', None),
    ('p', '{"t": [-2147483648.5]}', None),
    ('p', '{"t": [2147483647.0]}', (('t', 2147483647),)),
    ('p', '{"t": [""]}', (('t', 0),)),
    ('p', '{"t": [1, null, "2", 3.7]}', (('t', 0), ('t', 1), ('t', 2), ('t', 3))),
    ('p', '{"t": [1E400]}', None),
    ('p', '{"t": ["\xa02"]}', None),
    ('p', '{"t": ["\\u001f2"]}', (('t', 2),)),
    ('p', '{"t": ["null"]}', (('t', 0),)),
    ('p', '{"t": ["NULL"]}', None),
    ('p', '{"\\ud800": [0]}', (('\ud800', 0),)),
    ('p', '{"t": [Infinity]}', None),
    ('p', '{"t": [-0.9]}', (('t', 0),)),
    ('p', '{"t": ["-0"]}', (('t', 0),)),
    ('p', '{"t": ["+7"]}', (('t', 7),)),
    ('p', '{"t": ["\U0001d7d5"]}', None),
    ('p', '{"t": [2147483648.0]}', None),
    ('p', '{"a": [0], "b": [0, 0]}', (('a', 0), ('b', 0))),
    ('p', '{"t": [0]}}}]', (('t', 0),)),
    ('p', '{"t": [0] /*c*/}', None),
    ('p', '{"t": [0], }', None),
    ('p', '\n\t {"t": [3]}', (('t', 3),)),
    ('p', '{"t": ["   "]}', (('t', 0),)),
    ('o', '{"t": {"0": 5}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": 5.9}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": "5"}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": null}}', (('t', 0, 0),)),
    ('o', '{"t": {"0": true}}', None),
    ('o', '{"t": {" 0": 5}}', None),
    ('o', '{"t": {"+0": 5}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": 9223372036854775808}}', None),
    ('o', '{"t": {"0": -2}}', (('t', 0, -2),)),
    ('o', '{"t": {"0": 1e3}}', (('t', 0, 1000),)),
    ('o', '{"t": {"x": 5}}', None),
    ('o', '{"t": null}', ()),
    ('o', '{"t": {"0": 5}, "t": {"1": 6}}', (('t', 1, 6),)),
    ('o', '{"t": {"0": 5, "00": 6}}', (('t', 0, 6),)),
    ('o', '{"t": {"0": [5]}}', None),
    ('o', '{"t": {"0": "-1"}}', (('t', 0, -1),)),
    ('o', '{"t": {"0": " 5"}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": "5.5"}}', None),
    ('o', '{"t": {"0": "1e3"}}', None),
    ('o', '{"t": {"\u0663": 5}}', (('t', 3, 5),)),
    ('o', '{"t": {"0": 5}} junk', (('t', 0, 5),)),
    ('o', '{"t": {"0": 1.0E20}}', None),
    ('o', '{"t": {"0": -0.5}}', (('t', 0, 0),)),
    ('o', '{"t": {"": 5}}', None),
    ('o', '{"t": {"0": ""}}', (('t', 0, 0),)),
    ('o', '{"t": {"0": "1_000"}}', None),
    ('o', '{"t": {"0": "\u30005"}}', None),
    ('o', '{"t": {"0": "\u0665"}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": "5\\n"}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": "\\u00a05"}}', None),
    ('o', '{"t": {"0": "+5"}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": "0x10"}}', None),
    ('o', '{"t": {"0": "05"}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": "\\u001f5"}}', (('t', 0, 5),)),
    ('o', '{"t": {"0": "9223372036854775808"}}', None),
    ('o', '{"t": {"0": "\U0001d7d3"}}', None),
    ('o', '{"t": {"0": 9223372036854775807.0}}', (('t', 0, 9223372036854775807),)),
    ('o', '{"t": {"0": 9.223372036854776E18}}', (('t', 0, 9223372036854775807),)),
    ('o', '{"t": {"0": 1E400}}', None),
    ('o', '{"t": {"0": -1E400}}', None),
    ('o', '{"t": {"0": "null"}}', (('t', 0, 0),)),
    ('o', '{"t": {"0": "  "}}', (('t', 0, 0),)),
    ('o', '{"t": {"0": "NaN"}}', None),
    ('o', '{"t": {"0": Infinity}}', None),
    ('o', '{"t": {"0": NaN}}', None),
    ('o', '{"t": {"2147483648": 5}}', None),
    ('o', '{"t": {"\U0001d7d3": 5}}', None),
    ('o', '{"t": {"1e0": 5}}', None),
    ('o', '{"t": {"0": 5}, "u": null}', (('t', 0, 5),)),
    ('o', '\x00{"t": {"0": 5}}\x1f', (('t', 0, 5),)),
    ('o', '{"t": {"0": 5}', None),
    ('o', '[{"t": {"0": 5}}]', None),
    ('o', '"{}"', None),
    ('o', 'null', ()),
    ('o', '', None),
    ('o', '{"t": {"0": {"1": 2}}}', None),
    ('o', '{"t": {"0": 12345678901234567}}', (('t', 0, 12345678901234567),)),
    ('o', '{"t": {"0": "12345678901234567"}}', (('t', 0, 12345678901234567),)),
    ('o', '{"t": {"0": 1.5e300}}', None),
    ('o', '{"t": {"0": -9223372036854775809.0}}', (('t', 0, -9223372036854775808),)),
]


@pytest.mark.parametrize(("kind", "text", "read"), [case for case in JACKSON if case[0] == "p"])
def test_assign_is_read_as_jackson_reads_it(kind, text, read):
    """Floats cut toward zero, numeric strings, null as partition 0, what follows the object unread: as
    Jackson; a string Long.parseLong refuses, a float past an int, a boolean: refused, as there."""
    if read is None:
        with pytest.raises(ConfigError, match="option assign"):
            parse_assign(text)
    else:
        assert parse_assign(text) == read


@pytest.mark.parametrize(("kind", "text", "read"), [case for case in JACKSON if case[0] == "o"])
def test_offsets_and_timestamps_are_read_as_jackson_reads_them(kind, text, read):
    """Python's int took "1_000", "\\u30005" and a digit past the BMP, which Jackson refuses, and 1E400
    raised OverflowError (no ConfigError: a traceback in Spark); Jackson reads null, "" and "null" as 0."""
    for name, parse, allowed in (
            ("startingOffsets", lambda t: parse_bound(t, "startingOffsets", EARLIEST).offsets, (-1, -2)),
            ("startingOffsetsByTimestamp", lambda t: parse_timestamps(t, "startingOffsetsByTimestamp"),
             TIME_CODES)):
        if read is None or any(value < 0 and value not in allowed for _, _, value in read):
            # segstore refuses the negatives the connector would refuse later, or hand to the broker
            with pytest.raises(ConfigError, match=f"option {name}"):
                parse(text)
        else:
            assert parse(text) == read


@pytest.mark.parametrize("text", ["null", " [0]", "", '"{}"'])
def test_assign_must_start_with_a_brace(text):
    """Spark 4 KafkaSourceProvider.validateGeneralOptions: ``assign`` not starting with ``{`` once trimmed
    is refused before Jackson reads it (which reads ``null`` as no partition)."""
    with pytest.raises(ConfigError, match="option assign must be a JSON object"):
        parse_read_options({"path": "/s", "assign": text})


# --- against Jackson itself, where javac and PySpark's jars are here -------------------------------------

@functools.cache
def _jars() -> list[str]:
    try:
        import pyspark
    except ImportError:
        return []
    jars = Path(pyspark.__file__).parent / "jars"
    return sorted(str(p) for pattern in ("jackson-*.jar", "scala-library-*.jar") for p in jars.glob(pattern))


def test_the_table_is_what_jackson_reads(tmp_path):
    if shutil.which("javac") is None or not _jars():
        pytest.skip("no javac or no PySpark jars")
    classpath = ":".join(_jars())
    subprocess.run(["javac", "-cp", classpath, "-d", str(tmp_path), str(TOOLS / "JacksonOptions.java")],
                   check=True, timeout=300, capture_output=True)
    # the connector trims the offsets' text before Jackson reads it, not assign's
    lines = [kind + " " + _hex(java_trim(text) if kind == "o" else text) for kind, text, _ in JACKSON]
    (tmp_path / "cases.txt").write_text("".join(line + "\n" for line in lines))
    said = subprocess.run(["java", "-cp", f"{classpath}:{tmp_path}", "JacksonOptions",
                           str(tmp_path / "cases.txt")],
                          check=True, timeout=300, capture_output=True, text=True).stdout.splitlines()
    assert [(kind, text, _entries(kind, line)) for (kind, text, _), line in zip(JACKSON, said, strict=True)] \
        == JACKSON


def _hex(text):
    # the text's UTF-16 chars, a lone surrogate too (the tool reads them so)
    return text.encode("utf-16-be", "surrogatepass").hex()


def _entries(kind, line):
    if line == "error":
        return None
    read = []
    for entry in line.split()[1:]:
        topic, _, rest = entry.partition("/")
        name = bytes.fromhex(topic).decode("utf-16-be", "surrogatepass")
        if kind == "p":
            read.append((name, int(rest)))
        else:
            partition, _, value = rest.partition("=")
            read.append((name, int(partition), int(value)))
    return tuple(sorted(set(read)))
