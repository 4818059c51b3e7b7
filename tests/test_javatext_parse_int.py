"""``segstore.javatext.parse_int`` / ``parse_long``: JDK 17 ``Integer.parseInt(String)`` and
``Long.parseLong(String)`` (``java/lang/Integer.java``, ``java/lang/Long.java``: ``parseInt(String s, int
radix)`` with radix 10).

The reference below is written from that method's rules, not from the helper: an optional ``+``/``-`` as the
first char (a lone sign refused), then each UTF-16 char through ``Character.digit(char, 10)`` (a BMP char
of type ``DECIMAL_DIGIT_NUMBER``, its digit value; a surrogate is none), the value accumulated negatively
against ``limit`` and ``multmin`` (so ``MIN_VALUE`` is read and one past either end refused).  Where a JDK
is installed, a few thousand random strings are also run through the real ``Integer.parseInt`` and
``Long.parseLong``.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segstore.javatext import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, parse_int, parse_long


def _java_chars(text: str) -> list[str]:
    """``text`` as Java's ``String`` holds it: UTF-16 chars (a character past the BMP is two surrogates)."""
    units = text.encode("utf-16-le", "surrogatepass")
    return [chr(int.from_bytes(units[i:i + 2], "little")) for i in range(0, len(units), 2)]


def _character_digit(char: str) -> int:
    """``Character.digit(char, 10)``: the value of a ``DECIMAL_DIGIT_NUMBER`` char, else -1."""
    return unicodedata.decimal(char) if unicodedata.category(char) == "Nd" else -1


def java_parse(text: str, bits: int) -> int | None:
    """``Integer.parseInt`` (``bits`` 32) / ``Long.parseLong`` (64) step by step; None where it throws."""
    chars = _java_chars(text)
    if not chars:
        return None
    negative, i, limit = False, 0, -((1 << (bits - 1)) - 1)
    if chars[0] < "0":
        if chars[0] == "-":
            negative, limit = True, -(1 << (bits - 1))
        elif chars[0] != "+":
            return None
        if len(chars) == 1:
            return None
        i = 1
    multmin = -(-limit // 10)       # Java's division truncates toward zero
    result = 0
    for char in chars[i:]:
        digit = _character_digit(char)
        if digit < 0 or result < multmin:
            return None
        result *= 10
        if result < limit + digit:
            return None
        result -= digit
    return result if negative else -result


#: (text, Integer.parseInt, Long.parseLong): None where Java throws NumberFormatException
NAMED = [
    ("", None, None),
    ("+", None, None),
    ("-", None, None),
    ("+-1", None, None),
    ("-+1", None, None),
    ("--1", None, None),
    ("+0", 0, 0),
    ("-0", 0, 0),
    ("007", 7, 7),
    ("0" * 40 + "5", 5, 5),                      # leading zeros of any number
    ("-" + "0" * 5000 + "5", -5, -5),           # past int()'s 4300-digit limit
    ("0" * 5000, 0, 0),
    ("\u0664\u0662", 42, 42),                     # ARABIC-INDIC DIGIT FOUR, TWO
    ("\u0660" * 25 + "\u0665", 5, 5),
    ("\uff11\uff10", 10, 10),                     # FULLWIDTH DIGIT ONE, ZERO
    ("1\u0662\uff13", 123, 123),                  # scripts mixed in one number
    ("\U0001d7ce", None, None),                   # MATHEMATICAL BOLD DIGIT ZERO: a surrogate pair
    ("1\U0001d7cf", None, None),
    ("\u00b2", None, None),                       # SUPERSCRIPT TWO: a digit, not a decimal one
    ("\u2460", None, None),                       # CIRCLED DIGIT ONE
    ("\u216b", None, None),                       # ROMAN NUMERAL TWELVE
    ("\uff21", None, None),                       # FULLWIDTH A: a digit only for radix > 10
    ("a", None, None),
    (" 1", None, None),
    ("1 ", None, None),
    ("1\n", None, None),
    ("1_000", None, None),
    ("1.0", None, None),
    ("0x10", None, None),
    ("1e3", None, None),
    ("\ud835", None, None),                       # a lone surrogate
    (str(INT_MAX), INT_MAX, INT_MAX),
    (str(INT_MIN), INT_MIN, INT_MIN),
    (str(INT_MAX + 1), None, INT_MAX + 1),
    (str(INT_MIN - 1), None, INT_MIN - 1),
    ("+" + str(INT_MAX), INT_MAX, INT_MAX),
    (str(LONG_MAX), None, LONG_MAX),
    (str(LONG_MIN), None, LONG_MIN),
    (str(LONG_MAX + 1), None, None),
    (str(LONG_MIN - 1), None, None),
    ("0" * 30 + str(LONG_MAX), None, LONG_MAX),
    ("-" + "0" * 30 + str(-LONG_MIN), None, LONG_MIN),
    ("99999999999999999999", None, None),
]


@pytest.mark.parametrize(("text", "as_int", "as_long"), NAMED)
def test_named_cases_as_the_jdk_reads_them(text, as_int, as_long):
    assert parse_int(text) == as_int
    assert parse_long(text) == as_long
    assert java_parse(text, 32) == as_int
    assert java_parse(text, 64) == as_long


#: Every BMP decimal digit there is, and some characters around them.
_DIGITS = "".join(chr(c) for c in range(0x10000) if unicodedata.category(chr(c)) == "Nd")
_TEXT = st.text(st.sampled_from(_DIGITS + "0123456789+- _.\u00b2\u2460\U0001d7ce\U0001d7d7\uff21a\t"),
                max_size=25)
_NUMBERS = st.one_of(st.integers(LONG_MIN - 10, LONG_MAX + 10),
                     st.integers(INT_MIN - 10, INT_MAX + 10)).map(str)


@given(st.one_of(_TEXT, _NUMBERS, st.text(max_size=8),
                 st.builds(lambda sign, zeros, n: sign + "0" * zeros + n, st.sampled_from(["", "+", "-"]),
                           st.integers(0, 30), _NUMBERS.map(lambda s: s.lstrip("-")))))
def test_as_the_jdk_algorithm_reads_it(text):
    assert parse_int(text) == java_parse(text, 32)
    assert parse_long(text) == java_parse(text, 64)


def test_every_bmp_decimal_digit_is_read_with_its_value():
    for char in _DIGITS:
        assert parse_int(char) == unicodedata.decimal(char)
        assert parse_long("-1" + char) == -(10 + unicodedata.decimal(char))


_JAVA_PROGRAM = """
public class ParseNumbers {
    public static void main(String[] args) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(
            new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            StringBuilder text = new StringBuilder();
            for (int i = 0; i < line.length(); i += 4)
                text.append((char) Integer.parseInt(line.substring(i, i + 4), 16));
            String s = text.toString();
            try { out.append(Integer.parseInt(s)); } catch (NumberFormatException e) { out.append('x'); }
            out.append(' ');
            try { out.append(Long.parseLong(s)); } catch (NumberFormatException e) { out.append('x'); }
            out.append('\\n');
        }
        System.out.print(out);
    }
}
"""


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("java") is None, reason="no JDK")
def test_as_the_installed_jdk_reads_it(tmp_path):
    rng = random.Random(20240517)
    alphabet = _DIGITS + "0123456789" * 20 + "+-  _\u00b2\U0001d7ce\uff21a"
    texts = [name for name, _, _ in NAMED if len(name) < 100]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 22))) for _ in range(3000)]
    texts += [str(rng.randint(LONG_MIN - 5, LONG_MAX + 5)) for _ in range(500)]
    texts += ["0" * rng.randint(0, 25) + str(rng.randint(0, INT_MAX + 5)) for _ in range(500)]
    (tmp_path / "ParseNumbers.java").write_text(_JAVA_PROGRAM)
    subprocess.run(["javac", "ParseNumbers.java"], cwd=tmp_path, check=True, timeout=60)
    lines = "".join("".join(f"{ord(c):04x}" for c in _java_chars(text)) + "\n" for text in texts)
    done = subprocess.run(["java", "-Xshare:auto", "-cp", str(tmp_path), "ParseNumbers"], input=lines,
                          capture_output=True, text=True, check=True, timeout=60)
    answers = done.stdout.splitlines()
    assert len(answers) == len(texts)
    for text, answer in zip(texts, answers, strict=True):
        as_int, as_long = (None if word == "x" else int(word) for word in answer.split(" "))
        assert (parse_int(text), parse_long(text)) == (as_int, as_long), text
