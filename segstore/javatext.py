"""Java's text: bytes as Java's ``new String(bytes, StandardCharsets.UTF_8)`` reads them: the text both
brokers make of what they store (a Kafka record header key, ``RecordHeader.key()`` through
``Utils.utf8``; a RocketMQ message's properties, ``CommitLog.checkMessageAndReturnSize`` and
``MessageDecoder.decodeMessage``).

Java never fails there: each malformed sequence becomes one U+FFFD.  Its extents are Python's ``replace``
ones (the Unicode "maximal subpart" practice: JDK ``String.decodeUTF8_UTF16``, ``malformed3``,
``malformed4``) but for the three-byte form of a surrogate, ``ED A0..BF``: Java reads the lead and its
second byte as one malformed character (with a third byte when it is a continuation byte, else without
it), where Python's ``replace`` writes a U+FFFD for each byte.

:data:`JAVA_REPLACE` names the codec error handler doing this (``bytes.decode("utf-8", JAVA_REPLACE)``,
and ``PyUnicode_DecodeUTF8(..., "segstore.java_replace")`` from C once this module is imported);
:data:`SURROGATEPASS_JAVA_REPLACE` keeps an encoded surrogate as the lone surrogate it stands for
(``surrogatepass``) and replaces the rest as Java does; :func:`java_text` gives the bytes with Java's
text (:class:`JavaText`) where they are not UTF-8.

And whole numbers as Java reads them from text (a file name, a checkpoint line, a config value, a
property, an option): :func:`parse_int` and :func:`parse_long` are JDK 17's ``Integer.parseInt(String)``
and ``Long.parseLong(String)`` (``Integer.valueOf(String)``, ``Long.valueOf(String)`` and Scala's
``toInt``/``toLong`` call them), each caller naming the broker method whose text it reads.  Every place
that reads a whole number the broker reads with them goes through these two: Python's ``int`` takes text
Java refuses (blanks around it, ``_`` between digits, a digit outside the BMP) and an ASCII-only pattern
refuses text Java takes (``"\\u0665"``, twenty leading zeros).

Stateless, thread-safe.
"""

from __future__ import annotations

import codecs
import unicodedata

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


#: ``Integer.MIN_VALUE``, ``Integer.MAX_VALUE``
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
#: ``Long.MIN_VALUE``, ``Long.MAX_VALUE``
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
#: What ``String.trim`` cuts: U+0000..U+0020.
_TRIMMED = "".join(map(chr, range(0x21)))
#: The most digits a long takes without leading zeros (``Long.MIN_VALUE`` has 19).
_LONG_DIGITS = 19


def java_trim(text: str) -> str:
    """``String.trim``: the chars up to U+0020 (blanks, tabs, line ends, other controls) cut from both
    ends; no other whitespace (U+00A0 stays).  ``O(len(text))``."""
    return text.strip(_TRIMMED)


def parse_int(text: str) -> int | None:
    """``Integer.parseInt(text)`` of JDK 17: its value, or None where it throws ``NumberFormatException``.

    Java's text is one optional ``+`` or ``-`` then at least one digit, each a UTF-16 char that
    ``Character.digit(char, 10)`` reads: any decimal digit (Unicode category Nd) of the BMP, ``"\u0665"``
    and ``"\uff15"`` as 5 too, but no digit outside it (its surrogates are no digits), no blank, no
    ``_``; leading zeros of any number; the value within ``INT_MIN..INT_MAX``.  ``O(len(text))``.

    >>> parse_int("+\u0664\u0662"), parse_int("0" * 30 + "7"), parse_int(" 1"), parse_int("2147483648")
    (42, 7, None, None)
    """
    return _parse(text, INT_MIN, INT_MAX)


def parse_long(text: str) -> int | None:
    """``Long.parseLong(text)`` of JDK 17: :func:`parse_int`'s text, within ``LONG_MIN..LONG_MAX``; None
    where it throws ``NumberFormatException``.  ``O(len(text))``.

    >>> parse_long("-9223372036854775808"), parse_long("9223372036854775808"), parse_long("\U0001d7ce")
    (-9223372036854775808, None, None)
    """
    return _parse(text, LONG_MIN, LONG_MAX)


def _parse(text: str, low: int, high: int) -> int | None:
    negative = text[:1] == "-"
    digits = text[1:] if negative or text[:1] == "+" else text
    # str.isdecimal is Unicode category Nd, which Character.digit(char, 10) reads in the BMP (the same
    # 370 chars in JDK 17 and in Python 3.10 to 3.13: Unicode 13 to 15 added Nd past the BMP only); it is
    # False for "" (a lone sign, or no text)
    if not digits.isdecimal() or (not digits.isascii() and max(digits) > "\uffff"):
        return None
    if len(digits) > _LONG_DIGITS:
        # leading zeros, which Java reads as any other digit (and int() would refuse past 4300 digits)
        first = next((i for i, char in enumerate(digits) if unicodedata.decimal(char)), len(digits))
        digits = digits[first:] or "0"
        if len(digits) > _LONG_DIGITS:
            return None
    value = -int(digits) if negative else int(digits)
    return value if low <= value <= high else None
