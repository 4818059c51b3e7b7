"""Bytes as Java's ``new String(bytes, StandardCharsets.UTF_8)`` reads them: the text both brokers make of
what they store (a Kafka record header key, ``RecordHeader.key()`` through ``Utils.utf8``; a RocketMQ
message's properties, ``CommitLog.checkMessageAndReturnSize`` and ``MessageDecoder.decodeMessage``).

Java never fails there: each malformed sequence becomes one U+FFFD.  Its extents are Python's ``replace``
ones (the Unicode "maximal subpart" practice: JDK ``String.decodeUTF8_UTF16``, ``malformed3``,
``malformed4``) but for the three-byte form of a surrogate, ``ED A0..BF``: Java reads the lead and its
second byte as one malformed character (with a third byte when it is a continuation byte, else without
it), where Python's ``replace`` writes a U+FFFD for each byte.

:data:`JAVA_REPLACE` names the codec error handler doing this (``bytes.decode("utf-8", JAVA_REPLACE)``,
and ``PyUnicode_DecodeUTF8(..., "segstore.java_replace")`` from C once this module is imported);
:data:`SURROGATEPASS_JAVA_REPLACE` keeps an encoded surrogate as the lone surrogate it stands for
(``surrogatepass``) and replaces the rest as Java does; :func:`java_text` gives the bytes with Java's
text (:class:`JavaText`) where they are not UTF-8.  Stateless, thread-safe.
"""

from __future__ import annotations

import codecs

JAVA_REPLACE = "segstore.java_replace"
SURROGATEPASS_JAVA_REPLACE = "segstore.surrogatepass_java_replace"

_REPLACEMENT = "\ufffd"


def _surrogate_end(data: bytes, start: int) -> int:
    """Where an encoded surrogate's malformed character ends (``start`` at its ``ED``), or -1 where
    ``data[start:]`` holds none (Java's ``isSurrogate(c)`` after a three-byte read, or ``malformed3``'s 2
    before a byte that is no continuation, or its end of input)."""
    if data[start] != 0xED or start + 1 >= len(data) or not 0xA0 <= data[start + 1] <= 0xBF:
        return -1
    if start + 2 < len(data) and data[start + 2] & 0xC0 == 0x80:
        return start + 3
    return start + 2


def _java_replace(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeDecodeError):
        raise err
    end = _surrogate_end(err.object, err.start)
    return _REPLACEMENT, err.end if end < 0 else end


def _surrogatepass_java_replace(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeDecodeError):
        raise err
    data, start = err.object, err.start
    if _surrogate_end(data, start) == start + 3:
        return chr(0xD000 | (data[start + 1] & 0x3F) << 6 | data[start + 2] & 0x3F), start + 3
    return _java_replace(err)


codecs.register_error(JAVA_REPLACE, _java_replace)
codecs.register_error(SURROGATEPASS_JAVA_REPLACE, _surrogatepass_java_replace)


def java_utf8(data: bytes | bytearray | memoryview) -> str:
    """``new String(data, UTF_8)``.  ``O(len(data))``."""
    return bytes(data).decode("utf-8", JAVA_REPLACE)


class JavaText(str):
    """The text Java makes of stored bytes that are not UTF-8 (:func:`java_utf8`), which keeps them:
    ``raw``.  A str everywhere (what a Java reader sees); a writer wanting the bytes as stored (a
    ``dump --json`` line's ``keyBase64``) asks ``raw``.  Its ``repr`` is ``java_text(raw)``, which gives it
    again: two such texts of other bytes read alike, their reprs do not (a ``--verify`` problem)."""

    raw: bytes

    def __repr__(self) -> str:
        return f"java_text({self.raw!r})"


def java_text(data: bytes | bytearray | memoryview) -> str:
    """``new String(data, UTF_8)``: a plain str where ``data`` is UTF-8, else a :class:`JavaText` holding
    ``data``.  ``O(len(data))``."""
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        text = JavaText(raw.decode("utf-8", JAVA_REPLACE))
        text.raw = raw
        return text
