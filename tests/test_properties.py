"""``segstore.properties``: a broker config file read as ``java.util.Properties.load(InputStream)`` reads it
(RocketMQ 4.9.7 ``BrokerStartup.createBrokerController``, Kafka 3.8 ``Utils.loadProps``).

The vectors below are what the JDK's own ``Properties.load`` (OpenJDK 17, ``Properties.LineReader.readLine``,
``load0``, ``loadConvert``) made of each input, fed through a ``BufferedInputStream`` as RocketMQ does;
``None`` where it throws ``IllegalArgumentException("Malformed \\uxxxx encoding.")``.  The parser was also
checked against that JDK on 60,000 random inputs of these characters.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segstore.errors import ConfigError
from segstore.properties import parse_entries, parse_properties, read_properties

JDK_VECTORS = [
    (b'a=b', {'a': 'b'}),
    (b'a = b', {'a': 'b'}),
    (b'a:b', {'a': 'b'}),
    (b'a : b', {'a': 'b'}),
    (b'a b', {'a': 'b'}),
    (b'a\t\x0cb', {'a': 'b'}),
    (b'a  =  b  ', {'a': 'b  '}),
    (b'a==b', {'a': '=b'}),
    (b'a = = b', {'a': '= b'}),
    (b'a := b', {'a': '= b'}),
    (b'a', {'a': ''}),
    (b'a=', {'a': ''}),
    (b'=b', {'': 'b'}),
    (b':b', {'': 'b'}),
    (b' =b', {'': 'b'}),
    (b'\\=a=b', {'=a': 'b'}),
    (b'a\\ b=c', {'a b': 'c'}),
    (b'a\\:b:c', {'a:b': 'c'}),
    (b'a\\\\=b', {'a\\': 'b'}),
    (b'# c\na=b', {'a': 'b'}),
    (b'  ! c\na=b', {'a': 'b'}),
    (b'a=b # not a comment', {'a': 'b # not a comment'}),
    (b'a=b\\\n  c', {'a': 'bc'}),
    (b'a=b\\\r\n\tc', {'a': 'bc'}),
    (b'a=b\\\rc', {'a': 'bc'}),
    (b'a=b\\\\\nc=d', {'a': 'b\\', 'c': 'd'}),
    (b'a=b\\', {'a': 'b'}),
    (b'a=b\\\n', {'a': 'b'}),
    (b'\\', {'': ''}),
    (b'\\\n#x\nc=d', {'c': 'd'}),
    (b'a=b\\\n\nc=d', {'a': 'b', 'c': 'd'}),
    (b'a=b\\\n# c\n', {'a': 'b# c'}),
    (b'a=\\u0041\\u00e9', {'a': 'Aé'}),
    (b'a=\\uFFFF', {'a': '\uffff'}),
    (b'a=\\u12', None),
    (b'a=\\u12G4', None),
    (b'\\u0061=b', {'a': 'b'}),
    (b'a=\\t\\n\\r\\f\\q', {'a': '\t\n\r\x0cq'}),
    (b'a=\xe9\xff', {'a': 'éÿ'}),
    (b'a=\xc3\xa9', {'a': 'Ã©'}),
    (b'a=1\na=2', {'a': '2'}),
    (b'a=b\r\nc=d\rd=e\n', {'a': 'b', 'c': 'd', 'd': 'e'}),
    (b'\n\n  \t\n', {}),
    (b'a=\\ b', {'a': ' b'}),
    (b'a=b \t', {'a': 'b \t'}),
    (b'  a = b', {'a': 'b'}),
    (b'a\\\n=b', {'a': 'b'}),
    (b'a\\\n b', {'ab': ''}),
    (b'#c\\\na=b', {'a': 'b'}),
    (b'a=\\\\u0041', {'a': '\\u0041'}),
]


@pytest.mark.parametrize(("data", "expected"), JDK_VECTORS)
def test_what_the_jdks_properties_load_makes_of_it(data, expected):
    if expected is None:
        with pytest.raises(ConfigError, match="Malformed"):
            parse_properties(data)
    else:
        assert parse_properties(data) == expected


def _escape(text: str, key: bool) -> str:
    """``Properties.store``'s escaping (``saveConvert``): what any text is written as so that ``load``
    reads it back."""
    out = []
    for k, char in enumerate(text):
        if char == " " and (key or k == 0):
            out.append("\\ ")
        elif char in "\\=:#!":
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif not " " <= char <= "~":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return "".join(out)


_TEXT = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=12)
_SEPARATORS = st.sampled_from(["=", ":", " ", " = ", "\t:\f", "  "])
_NOISE = st.sampled_from(["", "\n", "# a comment = x\n", "! another: y\n", "   \t\n", "\r\n"])


@given(st.dictionaries(_TEXT, _TEXT, max_size=6), st.data())
def test_any_map_written_as_properties_store_writes_it_reads_back(mapping, data):
    lines = []
    for name, value in mapping.items():
        lines.append(data.draw(_NOISE))
        # an empty key takes '=' (a line of blanks alone is no entry), as Properties.store writes it
        line = _escape(name, True) + (data.draw(_SEPARATORS) if name else "=") + _escape(value, False)
        if len(line) > 2 and data.draw(st.booleans()):     # a continuation anywhere not inside an escape
            cut_at = data.draw(st.integers(1, len(line) - 1))
            if not line[:cut_at].endswith("\\") and line[cut_at] not in " \t\f":
                line = line[:cut_at] + "\\\n" + data.draw(st.sampled_from(["", "  ", "\t"])) + line[cut_at:]
        lines.append(line + data.draw(st.sampled_from(["\n", "\r\n", "\r"])))
    assert parse_properties("".join(lines).encode("ascii")) == mapping


@given(st.binary(max_size=200))
def test_any_bytes_load_or_raise_config_error(data):
    try:
        entries = parse_entries(data)
    except ConfigError as err:
        assert "Malformed" in err.message and err.pos is not None
        return
    for entry in entries:                   # each entry's position is its first key byte
        assert 0 <= entry.pos < len(data)


_PRINTABLE = st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="\\")


@given(st.text(_PRINTABLE, min_size=1, max_size=10),
       st.sampled_from([" ", "\t", " \t ", "\f"]))
def test_trailing_blanks_of_a_value_are_kept(value, blanks):
    """``load0`` skips white space before a value only: 'a=1024 ' is '1024 ' (RocketMQ's
    ``MixAll.properties2Object`` then hands that to ``Integer.parseInt``, which throws)."""
    assert parse_properties(f"k = {value}{blanks}".encode()) == {"k": value + blanks}


def test_bytes_are_iso_8859_1_characters():
    """``Properties.load(InputStream)``: each byte one character; a UTF-8 file's 'é' is two of them."""
    assert parse_properties("name=é".encode()) == {"name": "Ã©"}
    assert parse_properties(b"name=\\u00e9") == {"name": "é"}


def test_positions_name_the_line(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_bytes(b"# c\nbrokerName = a\n  listenPort=1\\\n  0911\nbad=\\u00G0\n")
    with pytest.raises(ConfigError) as err:
        read_properties(path)
    assert err.value.path == str(path) and err.value.pos == 42
    entries = parse_entries(b"# c\nbrokerName = a\n  listenPort=1\\\n  0911\n")
    assert [(e.key, e.value, e.pos) for e in entries] == [("brokerName", "a", 4), ("listenPort", "10911", 21)]
