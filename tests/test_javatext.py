"""``segstore.javatext``: bytes as Java's ``new String(bytes, StandardCharsets.UTF_8)`` reads them (JDK 17
``String.decodeUTF8_UTF16``, with ``malformed3``/``malformed4``: one U+FFFD per malformed sequence, never
an error), the text Kafka 3.8 makes of a record header key (``RecordHeader.key()``, ``Utils.utf8``).

The expected strings were printed by OpenJDK 17.0.15 (``new String(b, UTF_8)``, as UTF-16 units); they
differ from Python's ``errors="replace"`` for the three-byte form of a surrogate (``ED A0..BF``), which
Java reads as one malformed character.
"""

from __future__ import annotations

import pytest

from segstore.javatext import SURROGATEPASS_JAVA_REPLACE, JavaText, java_text, java_utf8

#: (bytes, what OpenJDK 17 makes of them)
JDK = [
    (b"a\xffb", "a\ufffdb"),
    (b"\xed\xa0\x80", "\ufffd"),            # Python's replace: three U+FFFD
    (b"\xed\xa0A", "\ufffdA"),              # malformed3 gives 2: ED A0 is one
    (b"\xed\xa0", "\ufffd"),                # cut at the end: one, then the decoding ends
    (b"\xed\xbf\xbfx", "\ufffdx"),
    (b"\xe2\x82A", "\ufffdA"),
    (b"\xe0\x80\x80", "\ufffd\ufffd\ufffd"),
    (b"\xf0\x90\x80", "\ufffd"),
    (b"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"),
    (b"\xc0\xaf", "\ufffd\ufffd"),
    (b"ok\xc3\xa9\xf0\x9f\x98\x80", "ok\u00e9\U0001f600"),
]


@pytest.mark.parametrize(("data", "text"), JDK)
def test_bytes_read_as_java_reads_them(data, text):
    assert java_utf8(data) == text
    got = java_text(data)
    assert got == text
    if isinstance(got, JavaText):
        assert got.raw == data
    else:
        assert data.decode("utf-8") == text        # only UTF-8 is a plain str


def test_python_replace_differs_where_java_reads_a_surrogate_as_one_character():
    assert b"\xed\xa0\x80".decode("utf-8", "replace") == "\ufffd" * 3
    assert java_utf8(b"\xed\xa0\x80") == "\ufffd"


def test_surrogatepass_variant_keeps_an_encoded_surrogate_and_replaces_the_rest():
    assert b"\xed\xa0\x80-\xff".decode("utf-8", SURROGATEPASS_JAVA_REPLACE) == "\ud800-\ufffd"
    assert b"\xed\xa0A".decode("utf-8", SURROGATEPASS_JAVA_REPLACE) == "\ufffdA"
