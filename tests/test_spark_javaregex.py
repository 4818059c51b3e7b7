"""``subscribePattern`` selects the topics Java's ``java.util.regex.Pattern`` finds a match in, and refuses
what it refuses (segstore/spark/javaregex.py, javachars.py): a table of patterns and topic names run through
Java 17 (OpenJDK 17.0.15: ``Pattern.compile(p).matcher(topic).find()``, the connector's ``findFirstIn``),
each pattern with the indexes of the topics it found a match in, or the description of the
``PatternSyntaxException`` it threw.  Non-ASCII topics are there for Unicode properties; general categories
come from Python's Unicode database, as the module says, and none of these characters differs there."""

from __future__ import annotations

import pytest

from segstore.errors import ConfigError
from segstore.spark.javaregex import compile_java, remove_qe_quoting

TOPICS = [
    'orders', 'Orders', 'old-orders', 'a.b_c', 'abc123', 'ABC', 'x', 'b', 'B', '_', '-', '9', 'Zeta.9',
    '%RETRY%g', 'rmq|sys', 'über', '日本', 'café', 'Αβ', 'Ⅳx', 'ª', 'ac', 'AC', 'a&b', '^', ']',
]

#: (pattern, the indexes of TOPICS Java found a match in, or the description of Java's error)
JAVA = [
    ('[a[b]]', (3, 4, 7, 12, 15, 17, 21, 23)),
    ('[a-z&&[^b]]', (0, 1, 2, 3, 4, 6, 12, 13, 14, 15, 17, 19, 21, 23)),
    ('[a-z&&[def]]', (0, 1, 2, 12, 15, 17)),
    ('[[a-c][x-z]]+', (3, 4, 6, 7, 12, 14, 15, 17, 19, 21, 23)),
    ('^[[a-c][x-z]]+$', (6, 7, 21)),
    ('[^[a-c]]', (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 23, 24, 25)),
    ('[^a[b]]', (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25)),
    ('[^a-z[B]]', (1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 23, 24, 25)),
    ('[\\w&&[^\\d]]+$', (0, 1, 2, 3, 5, 6, 7, 8, 9, 13, 14, 15, 19, 21, 22, 23)),
    ('^[a-z&&b-y&&[^c]]+$', (0, 6, 7)),
    ('[&&a]', (3, 4, 12, 17, 21, 23)),
    ('[a&&]', (3, 4, 12, 17, 21, 23)),
    ('[a-z&&]', (0, 1, 2, 3, 4, 6, 7, 12, 13, 14, 15, 17, 19, 21, 23)),
    ('[a&&&&b]', ()),
    ('[[^a]&&[a-c]]', (3, 4, 7, 15, 17, 21, 23)),
    ('[a-c&&[^b]x]', (3, 4, 12, 17, 21, 23)),
    ('[a-z&&[b]x]', (3, 4, 6, 7, 15, 19, 23)),
    ('[x&&[a-z]&&[^o]]', (6, 19)),
    ('[\\p{L}&&[^a-z]]', (1, 5, 8, 12, 13, 15, 16, 17, 18, 20, 22)),
    ('[\\P{Lu}]', (0, 1, 2, 3, 4, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25)),
    ('\\p{L}+', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)),
    ('^\\p{Lu}', (1, 5, 8, 12, 18, 22)),
    ('\\p{IsAlphabetic}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)),
    ('^\\p{IsAlphabetic}+$', (0, 1, 5, 6, 7, 8, 15, 16, 17, 18, 19, 20, 21, 22)),
    ('\\p{IsLetter}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)),
    ('^\\p{Lu}\\p{Ll}+$', (1, 18)),
    ('\\p{Ll}', (0, 1, 2, 3, 4, 6, 7, 12, 13, 14, 15, 17, 18, 19, 21, 23)),
    ('\\p{N}', (4, 11, 12, 19)),
    ('\\p{Nd}', (4, 11, 12)),
    ('^\\P{L}+$', (9, 10, 11, 24, 25)),
    ('\\p{IsLu}', (1, 5, 8, 12, 13, 18, 22)),
    ('\\p{gc=Lu}', (1, 5, 8, 12, 13, 18, 22)),
    ('\\p{general_category=Ll}', (0, 1, 2, 3, 4, 6, 7, 12, 13, 14, 15, 17, 18, 19, 21, 23)),
    ('\\p{Punct}', (2, 3, 9, 10, 12, 13, 14, 23, 24, 25)),
    ('\\p{IsPunctuation}', (2, 3, 9, 10, 12, 13, 23, 25)),
    ('^\\p{P}', (9, 10, 13, 25)),
    ('\\p{Pd}', (2, 10)),
    ('\\p{Pc}', (3, 9)),
    ('\\p{IsDigit}', (4, 11, 12)),
    ('\\p{IsWhite_Space}', ()),
    ('\\p{IsUppercase}', (1, 5, 8, 12, 13, 18, 19, 22)),
    ('\\p{IsLowercase}', (0, 1, 2, 3, 4, 6, 7, 12, 13, 14, 15, 17, 18, 19, 20, 21, 23)),
    ('(?i)^\\p{Lu}+$', (0, 1, 5, 6, 7, 8, 15, 17, 18, 21, 22)),
    ('(?i)^[A-C&&[^b]]+$', (21, 22)),
    ('(?i)^\\p{Upper}+$', (0, 1, 5, 6, 7, 8, 21, 22)),
    ('(?i)^[^a]', (0, 1, 2, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 24, 25)),
    ('\\p{Lo}', (16, 20)),
    ('\\p{Nl}', (19,)),
    ('\\pL', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)),
    ('\\PL', (2, 3, 4, 9, 10, 11, 12, 13, 14, 19, 23, 24, 25)),
    ('\\p{L', 'Unclosed character family'),
    ('\\p{Foo}', 'Unknown character property name {Foo}'),
    ('[a-z&&', 'Unclosed character class'),
    ('[a-z&&[b]', 'Unclosed character class'),
    ('[z-a]', 'Illegal character range'),
    ('[]', 'Unclosed character class'),
    ('[^]', 'Unclosed character class'),
    ('[]a]', (3, 4, 12, 17, 21, 23, 25)),
    ('[a-]', (2, 3, 4, 10, 12, 17, 21, 23)),
    ('[-a]', (2, 3, 4, 10, 12, 17, 21, 23)),
    ('[a-\\d]', 'Illegal character range'),
    ('\\p{IsL}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)),
    ('\\p{Sm}', (14,)),
    ('\\p{S}', (14, 24)),
    ('[\\p{Alpha}&&[^\\p{Upper}]]+$', (0, 1, 2, 3, 6, 7, 13, 14, 15, 19, 21, 23)),
    ('[\\s\\S&&[^a-z]]', (1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 23, 24, 25)),
    ('[[a]&&[b]]', ()),
    ('^[\\x{61}-\\x{63}]+$', (7, 21)),
    ('[\\Qa-c\\E]', (2, 3, 4, 10, 12, 17, 21, 23)),
    ('[a-cx-z&&]', (6, 14, 19)),
    ('[ab&&]', (3, 4, 7, 12, 15, 17, 21, 23)),
    ('[&&]', 'Bad class syntax'),
    ('[a-c&&de&&f]', ()),
    ('[a-z&&^b]', (3, 4, 7, 15, 23)),
    ('(?i)^\\p{IsUppercase}+$', (0, 1, 5, 6, 7, 8, 15, 17, 18, 19, 20, 21, 22)),
    ('(?i)^\\p{IsLowercase}+$', (0, 1, 5, 6, 7, 8, 15, 17, 18, 19, 20, 21, 22)),
    ('(?i)^\\p{Lt}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 14, 15, 17, 18, 21, 22, 23)),
    ('(?i)\\p{IsTitlecase}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23)),
    ('(?i)^\\p{Ll}+$', (0, 1, 5, 6, 7, 8, 15, 17, 18, 21, 22)),
    ('(?i)^[a&&[^A]]', ()),
    ('(?i)^[^a]', (0, 1, 2, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 24, 25)),
    ('^[a&b]+$', (7, 23)),
    ('[&]', (23,)),
    ('[a&]', (3, 4, 12, 17, 21, 23)),
    ('^[\\^]', (24,)),
    ('[\\]]', (25,)),
    ('[a-c-e]', (0, 1, 2, 3, 4, 7, 10, 12, 15, 17, 21, 23)),
    ('(?i)^\\p{Lower}+$', (0, 1, 5, 6, 7, 8, 21, 22)),
    ('^(?i)[[a]&&[A]]', (3, 4, 5, 21, 22, 23)),
    ('(?i:[a])[[a]&&[A]]', ()),
    ('\\p{IsL&}', 'Unknown character property name {IsL&}'),
    ('\\p{L&}', 'Unknown character property name {L&}'),
    ('\\p{LC}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 17, 18, 19, 21, 22, 23)),
    ('\\p{IsLC}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 17, 18, 19, 21, 22, 23)),
    ('\\p{Cn}', ()),
    ('\\p{C}', ()),
    ('\\p{Z}', ()),
    ('\\p{IsEmoji}', 'Unknown character property name {IsEmoji}'),
    ('\\p{IsControl}', ()),
    ('\\p{IsHex_Digit}', (0, 1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 15, 17, 21, 22, 23)),
    ('\\p{IsAssigned}', tuple(range(26))),
    ('\\p{all}', tuple(range(26))),
    ('\\p{Alnum}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 17, 19, 21, 22, 23)),
    ('[ab&&b&c]', (3, 4, 7, 15, 23)),
    ('[a-c&&b&x]', (3, 4, 7, 15, 23)),
    ('[ab&&[b]c]', (3, 4, 7, 15, 23)),
    ('[\\Qa\\E-c]', (3, 4, 7, 12, 15, 17, 21, 23)),
    ('\\Q1\\E', (4,)),
    ('[a\\-c]', (2, 3, 4, 10, 12, 17, 21, 23)),
    ('[\\d-z]', (2, 4, 10, 11, 12)),
    ('[a-\\x{63}]', (3, 4, 7, 12, 15, 17, 21, 23)),
    ('[\\x61-c]', (3, 4, 7, 12, 15, 17, 21, 23)),
    ('[\\u0061-c]', (3, 4, 7, 12, 15, 17, 21, 23)),
    ('(?i)[\\x41]', (3, 4, 5, 12, 17, 21, 22, 23)),
    ('[\\b]', 'Illegal/unsupported escape sequence'),
    ('[\\1]', 'Illegal/unsupported escape sequence'),
    ('[\\A]', 'Illegal/unsupported escape sequence'),
    ('[\\R]', 'Illegal/unsupported escape sequence'),
    ('[\\N{LATIN SMALL LETTER A}]', (3, 4, 12, 17, 21, 23)),
    ('\\p{}', 'Empty character family'),
    ('[^\\p{L}]', (2, 3, 4, 9, 10, 11, 12, 13, 14, 19, 23, 24, 25)),
    ('[\\p{L}-]', (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)),
    ('[\\w-z]', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 19, 21, 22, 23)),
    ('[z-\\w]', 'Illegal character range'),
    ('[a-&&b]', 'Illegal character range'),
    ('[a&&-b]', ()),
    ('[--/]', (2, 3, 10, 12)),
    ('orders', (0, 2)),
    ('^orders$', (0,)),
    ('(?i)ORDERS', (0, 1, 2)),
    ('a{', 'Illegal repetition'),
    ('\\y', 'Illegal/unsupported escape sequence'),
    ('(?i)^[a-c]+$|^X', (5, 6, 7, 8, 21, 22)),
    ('^a(?i)b|c', (3, 4, 5, 17, 21, 22)),
]


#: Names Java does not know that segstore cannot tell from a Unicode script it does not translate (Java 17
#: has no Emoji property; Java 21 has): refused, in segstore's words.
NOT_TOLD = {r"\p{IsEmoji}"}


@pytest.mark.parametrize(("pattern", "java"), JAVA)
def test_a_pattern_selects_the_topics_java_selects(pattern, java):
    if isinstance(java, str):
        words = "segstore does not translate" if pattern in NOT_TOLD else _words(java)
        with pytest.raises(ConfigError, match="subscribePattern: .*" + words):
            compile_java(pattern)
        return
    found = compile_java(pattern)
    assert tuple(i for i, topic in enumerate(TOPICS) if found.search(topic)) == java


def _words(description: str) -> str:
    # Java's description, as the error quotes it (its braces and brackets escaped for the match)
    return "".join("\\" + c if c in "{}[]()" else c for c in description)


@pytest.mark.parametrize("pattern", [r"\p{IsLatin}", r"\p{InBasic_Latin}", r"\p{javaLowerCase}",
                                     r"\p{sc=Latin}", r"[\p{IsGreek}a]"])
def test_what_java_takes_and_segstore_does_not_translate_is_refused(pattern):
    """Unicode scripts and blocks and java.lang.Character's properties Java knows (its tables), segstore
    does not: refused by name, never matched otherwise."""
    with pytest.raises(ConfigError, match="segstore does not translate"):
        compile_java(pattern)


@pytest.mark.parametrize(("pattern", "rewritten"), [
    (r"\Qa.b\E", r"a\.b"), (r"\Q1\E2", r"\x312"), (r"\Qa\d\E", "a\\\\d"), (r"[\Qa\E-c]", "[a-c]"),
    (r"\Qopen", "open"), (r"x\\Qy", r"x\\Qy"),
])
def test_quotes_are_rewritten_as_java_rewrites_them(pattern, rewritten):
    """Java 17 Pattern.RemoveQEQuoting, before it parses: in a quote ASCII punctuation is escaped, letters
    and non-ASCII stay, a digit first in its quote is \\x3 and the digit."""
    assert remove_qe_quoting(pattern) == rewritten
