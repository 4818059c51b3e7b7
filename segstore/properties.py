"""A broker's own config file, read as ``java.util.Properties.load(InputStream)`` reads it.

Both brokers read their config file that way: RocketMQ 4.9.7 ``BrokerStartup.createBrokerController``
(``properties.load(new BufferedInputStream(new FileInputStream(file)))`` for ``broker.conf``), Kafka 3.8
``Utils.loadProps`` (``props.load(Files.newInputStream(...))`` for ``server.properties``).

Layout (the JDK's ``Properties.load(InputStream)`` documentation and ``Properties.LineReader``)::

    bytes             ISO-8859-1: each byte is one character (UTF-8 text comes out as its bytes)
    natural line      ends at \\n, \\r or \\r\\n; white space (' ', '\\t', '\\f') at its start is skipped
    comment line      '#' or '!' first on a logical line: the rest of the natural line is skipped
    continuation      an odd number of '\\' at a line's end joins the next line, whose leading white
                      space is skipped; at the end of the file the '\\' is dropped
    key               up to the first unescaped '=', ':', ' ', '\\t' or '\\f'
    separator         white space, then at most one '=' or ':' (unless the key ended at one), then
                      white space: all skipped, so a value keeps its trailing blanks, never leading ones
    escapes           \\uXXXX (exactly 4 hex digits, else the load throws IllegalArgumentException
                      "Malformed \\uxxxx encoding."), \\t \\n \\r \\f, any other '\\c' is 'c'
    duplicates        a later key replaces an earlier one (Hashtable.put)

Pure: bytes in, a dict out (:func:`parse_properties`); :func:`read_properties` reads a file through
:mod:`segstore.files`.  A malformed escape raises :class:`segstore.errors.ConfigError` naming the
file and the byte of its line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import files
from .errors import ConfigError, cut

#: What ``LineReader`` skips at a natural line's start and ``load0`` around the separator.
WHITE_SPACE = " \t\f"
#: What ends a key (unescaped), besides white space.
SEPARATORS = "=:"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = "0123456789abcdefABCDEF"


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``key=value`` as ``Properties.load`` puts it; ``pos``: the byte its logical line starts at."""

    key: str
    value: str
    pos: int


def _logical_lines(text: str) -> list[tuple[str, int]]:
    """``Properties.LineReader.readLine`` over the whole text: each logical line (continuations joined,
    comments and blank lines gone) with the position of its first character."""
    lines: list[tuple[str, int]] = []
    n = len(text)
    i = 0
    while True:
        chars: list[str] = []
        start = i
        skip_white = True           # at a natural line's start
        joined = False              # ... that continues the line before
        backslash = False           # the last character kept is an unescaped '\'
        while True:
            if i >= n:              # the end of the file ends the line; a '\' there is dropped
                if chars:
                    lines.append(("".join(chars[:-1] if backslash else chars), start))
                return lines
            char = text[i]
            i += 1
            if skip_white:
                if char in WHITE_SPACE or (not joined and char in "\r\n"):
                    continue
                skip_white = joined = False
            if not chars and char in "#!":      # a comment: the rest of the natural line
                while i < n and text[i] not in "\r\n":
                    i += 1
                if i >= n:
                    return lines
                i += 1
                skip_white = True
                continue
            if char not in "\r\n":
                if not chars:
                    start = i - 1
                chars.append(char)
                backslash = char == "\\" and not backslash
                continue
            if not chars:                       # a blank line
                skip_white = True
                continue
            if backslash and i < n:             # '\' at the line's end: the next line continues it
                chars.pop()
                backslash = False
                skip_white = joined = True
                if char == "\r" and text[i] == "\n":
                    i += 1
                continue
            lines.append(("".join(chars[:-1] if backslash else chars), start))
            break


def _unescape(raw: str, what: str, path: str, pos: int) -> str:
    """``Properties.loadConvert``: the escapes of a key or value replaced by what they stand for."""
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        char = raw[i]
        i += 1
        if char != "\\":
            out.append(char)
            continue
        char = raw[i]       # never past the end: a line never ends in an unescaped '\'
        i += 1
        if char == "u":
            digits = raw[i:i + 4]
            if len(digits) < 4 or any(d not in _HEX for d in digits):
                raise ConfigError(f"expected \\uXXXX (4 hex digits) in the {what} {cut(raw)}, found "
                                  f"{cut(chr(92) + 'u' + digits)} (java.util.Properties.load: Malformed "
                                  f"\\uxxxx encoding; the broker does not start)", path, pos)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """``Properties.load0``: a logical line's key (raw) and value (raw, leading white space gone)."""
    key_end = len(line)
    value_start = len(line)
    has_sep = False
    escaped = False
    for k, char in enumerate(line):
        if not escaped and char in SEPARATORS:
            key_end, value_start, has_sep = k, k + 1, True
            break
        if not escaped and char in WHITE_SPACE:
            key_end, value_start = k, k + 1
            break
        escaped = char == "\\" and not escaped
    v = value_start
    while v < len(line):
        char = line[v]
        if char not in WHITE_SPACE:
            if has_sep or char not in SEPARATORS:
                break
            has_sep = True
        v += 1
    return line[:key_end], line[v:]


def parse_entries(data: bytes, path: str = "<memory>") -> list[Entry]:
    """Every ``key=value`` in ``data`` in file order (a key may come twice: the last one counts).

    :raises ConfigError: a malformed ``\\uXXXX`` escape, naming ``path`` and the line's byte.
    """
    text = data.decode("latin-1")
    entries = []
    for line, pos in _logical_lines(text):
        raw_key, raw_value = _split(line)
        entries.append(Entry(_unescape(raw_key, "key", path, pos), _unescape(raw_value, "value", path, pos),
                             pos))
    return entries


def parse_properties(data: bytes, path: str = "<memory>") -> dict[str, str]:
    """``data`` as the ``Properties`` object ``load`` makes of it: key -> value, a later key winning.

    :raises ConfigError: a malformed ``\\uXXXX`` escape.
    """
    return {entry.key: entry.value for entry in parse_entries(data, path)}


def line_number(data: bytes, pos: int) -> int:
    """The natural line (from 1) that byte ``pos`` of ``data`` is on: lines end at \\n, \\r or \\r\\n,
    as ``LineReader`` ends them."""
    head = data[:pos].replace(b"\r\n", b"\n")
    return head.count(b"\n") + head.count(b"\r") + 1


def read_properties(path: str | os.PathLike[str]) -> list[Entry]:
    """The entries of the properties file at ``path`` (:func:`parse_entries`).

    :raises ConfigError: a malformed escape.
    :raises SegstoreError: the file cannot be read (:func:`segstore.files.read_bytes`).
    """
    return parse_entries(files.read_bytes(path), os.fspath(path))
