"""``subscribePattern`` selects the topics Java's ``java.util.regex.Pattern`` finds a match in, and refuses
what it refuses (segstore/spark/javaregex.py, javachars.py, javaunicode.py): tables of patterns and topic
names run through Java 17 (OpenJDK 17.0.15, ``tools/JavaPatterns.java find``:
``Pattern.compile(p).matcher(topic).find()``, the connector's ``findFirstIn``), each pattern with the indexes
of the topics it found a match in, or the description of the ``PatternSyntaxException`` it threw.
Non-ASCII topics are there for Unicode properties, scripts and blocks.  Where a JDK 17 is on PATH, the
tables are checked against it again, each property's code points against what Java's ``\\p{...}`` matches,
and ``segstore/spark/javaunicode.py`` against what ``tools/JavaUnicodeTables.java`` prints."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

from segstore.errors import ConfigError
from segstore.spark import javachars, javaregex
from segstore.spark.javaregex import compile_java, remove_qe_quoting

TOOLS = Path(__file__).resolve().parent.parent / "tools"

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

#: Topics for scripts, blocks, binary properties and java.lang.Character's: Greek, Cyrillic, Han, Hiragana,
#: Hangul, Latin-1, a letter number (U+2173), Arabic-Indic digits, a zero width joiner (Inherited,
#: Join_Control), a modifier letter, a titlecase letter, a supplementary letter (U+1D400), an unassigned
#: code point (U+0378, in the Greek block), ASCII symbols (Punct, not Punctuation), a letter Unicode 14.0
#: assigned (U+0870: unassigned in Java 17's 13.0).
UNICODE_TOPICS = [
    'orders', 'Ωmega', 'Привет', '日本', 'ひらがな', '한국', 'café', 'über-x', 'x_1', 'ⅳ', '٣٤', 'a\u200db',
    'ʰ', 'A1', 'ǅ', '\U0001d400', '\u0378', 'a|b^c', '\u0870',
]

#: (pattern, the indexes of UNICODE_TOPICS Java found a match in, or the description of Java's error):
#: script names in any case and their ISO 15924 aliases; block names as forName takes them (canonical,
#: without spaces, field name, in any case: not with an underscore for a space that is not in the field
#: name); Is* names: binary properties first, POSIX names in their Unicode sense, then categories and
#: java* methods, then scripts; character names as Java names them.
UNICODE = [
    ('\\p{IsLatin}', (0, 1, 6, 7, 8, 9, 11, 12, 13, 14, 17)),
    ('^\\p{IsLatin}+$', (0, 6, 9, 12, 14)),
    ('\\p{IsGreek}', (1,)),
    ('\\p{script=Greek}', (1,)),
    ('\\p{sc=Han}', (3,)),
    ('\\p{sc=Hani}', (3,)),
    ('\\p{IsHani}', (3,)),
    ('\\p{IsCyrillic}', (2,)),
    ('\\p{IsCyrl}', (2,)),
    ('\\p{Iscyrillic}', (2,)),
    ('\\p{IsHiragana}', (4,)),
    ('\\p{IsHangul}', (5,)),
    ('\\p{IsCommon}', (7, 8, 13, 15, 17)),
    ('\\p{IsInherited}', (11,)),
    ('\\p{IsZinh}', (11,)),
    ('\\p{IsUnknown}', (16, 18)),
    ('\\p{sc=Zzzz}', (16, 18)),
    ('\\p{IsArabic}', (10,)),
    ('\\p{sc=old_italic}', ()),
    ('\\p{sc=Old Italic}', 'Unknown Unicode property {name=<sc>, value=<Old Italic>}'),
    ('\\p{InGreek}', (1, 16)),
    ('\\p{InGreek_and_Coptic}', 'Unknown character property name {InGreek_and_Coptic}'),
    ('\\p{InGreek and Coptic}', (1, 16)),
    ('\\p{InGreekAndCoptic}', (1, 16)),
    ('\\p{block=BasicLatin}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('\\p{blk=Basic Latin}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('\\p{blk=basic_latin}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('\\p{BLK=Basic_Latin}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('\\p{InBasic_Latin}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('^\\p{InBasic_Latin}+$', (0, 8, 13, 17)),
    ('\\p{InLatin-1 Supplement}', (6, 7)),
    ('\\p{InLatin_1_Supplement}', (6, 7)),
    ('\\p{InLatin-1Supplement}', (6, 7)),
    ('\\p{InLatin 1 Supplement}', 'Unknown character property name {InLatin 1 Supplement}'),
    ('\\p{InCyrillic}', (2,)),
    ('\\p{InCJK_Unified_Ideographs}', (3,)),
    ('\\p{InHiragana}', (4,)),
    ('\\p{InHangul_Syllables}', (5,)),
    ('\\p{InArabic}', (10,)),
    ('\\p{InMathematical_Alphanumeric_Symbols}', (15,)),
    ('\\p{InSurrogates_Area}', ()),
    ('\\p{InNumber Forms}', (9,)),
    ('\\p{InSpacing_Modifier_Letters}', (12,)),
    # a long s and a dotless i: String.toUpperCase makes them S and I, as str.upper
    ('\\p{InBa\u017fic_Latin}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('\\p{IsLat\u0131n}', (0, 1, 6, 7, 8, 9, 11, 12, 13, 14, 17)),
    ('\\P{IsLatin}', (1, 2, 3, 4, 5, 7, 8, 10, 11, 13, 15, 16, 17, 18)),
    ('^\\P{InBasic_Latin}+$', (2, 3, 4, 5, 9, 10, 12, 14, 15, 16, 18)),
    ('[\\p{IsGreek}\\p{IsCyrillic}]', (1, 2)),
    ('[\\p{InBasic_Latin}&&[^a-z]]', (7, 8, 13, 17)),
    ('[^\\p{IsLatin}\\d]', (1, 2, 3, 4, 5, 7, 8, 10, 11, 15, 16, 17, 18)),
    ('(?i)\\p{IsLatin}', (0, 1, 6, 7, 8, 9, 11, 12, 13, 14, 17)),
    ('(?i)[\\p{IsGreek}]', (1,)),
    ('(?i)\\p{InGreek}', (1, 16)),
    ('\\p{L}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 17)),
    ('\\p{Cn}', (16, 18)),
    ('\\P{Cn}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('\\p{IsAssigned}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('\\p{javaDefined}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('\\p{IsAlphabetic}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 17)),
    ('^\\p{IsAlpha}+$', (0, 1, 2, 3, 4, 5, 6, 9, 12, 14, 15)),
    ('\\p{IsPunct}', (7, 8)),
    ('\\p{IsPunctuation}', (7, 8)),
    ('^\\p{IsAlnum}+$', (0, 1, 2, 3, 4, 5, 6, 9, 10, 12, 13, 14, 15)),
    ('\\p{IsIdeographic}', (3,)),
    ('\\p{IsJoin_Control}', (11,)),
    ('\\p{IsJoinControl}', (11,)),
    ('\\p{IsNoncharacter_Code_Point}', ()),
    ('^\\p{IsWord}+$', (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15)),
    ('\\p{IsLower}', (0, 1, 2, 6, 7, 8, 9, 11, 12, 17)),
    ('\\p{IsUpper}', (1, 2, 13, 15)),
    ('(?i)\\p{IsUpper}', (0, 1, 2, 6, 7, 8, 9, 11, 12, 13, 14, 15, 17)),
    ('\\p{IsGraph}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('^\\p{IsPrint}+$', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('\\p{IsSpace}', ()),
    ('\\p{IsBlank}', ()),
    ('\\p{IsXDigit}', (0, 1, 6, 7, 8, 10, 11, 13, 17)),
    ('\\p{IsCntrl}', ()),
    ('\\p{IsASCII}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('^\\p{IsASCII}+$', (0, 8, 13, 17)),
    ('\\p{Isall}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18)),
    ('\\p{IsL1}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('\\p{javaLowerCase}', (0, 1, 2, 6, 7, 8, 9, 11, 12, 17)),
    ('\\p{javaUpperCase}', (1, 2, 13, 15)),
    ('(?i)\\p{javaUpperCase}', (0, 1, 2, 6, 7, 8, 9, 11, 12, 13, 14, 15, 17)),
    ('\\p{javaLetter}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 17)),
    ('^\\p{javaJavaIdentifierPart}+$', (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15)),
    ('^\\p{javaUnicodeIdentifierStart}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 17)),
    ('\\p{javaIdentifierIgnorable}', (11,)),
    ('\\p{javaMirrored}', ()),
    ('\\p{javaDefined}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('\\p{javaAlphabetic}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 17)),
    ('\\p{javaIdeographic}', (3,)),
    ('\\p{IsjavaLetter}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 17)),
    ('\\p{gc=javaDigit}', (8, 10, 13)),
    ('\\p{IsEmoji}', 'Unknown character property name {IsEmoji}'),
    ('\\p{IsFoo}', 'Unknown character property name {IsFoo}'),
    ('\\p{InFoo}', 'Unknown character property name {InFoo}'),
    ('\\p{In}', 'Unknown character property name {In}'),
    ('\\p{Is}', 'Unknown character property name {Is}'),
    ('\\p{sc=Foo}', 'Unknown Unicode property {name=<sc>, value=<Foo>}'),
    ('\\p{sc=}', 'Unknown Unicode property {name=<sc>, value=<>}'),
    ('\\p{blk=Foo}', 'Unknown Unicode property {name=<blk>, value=<Foo>}'),
    ('\\p{script=Latin_Extended}', 'Unknown Unicode property {name=<script>, value=<Latin_Extended>}'),
    ('\\p{foo=Latin}', 'Unknown Unicode property {name=<foo>, value=<Latin>}'),
    ('\\p{In Basic Latin}', 'Unknown character property name {In Basic Latin}'),
    ('\\p{isLatin}', 'Unknown character property name {isLatin}'),
    ('\\p{inGreek}', 'Unknown character property name {inGreek}'),
    ('\\p{Latin}', 'Unknown character property name {Latin}'),
    ('\\p{javalowercase}', 'Unknown character property name {javalowercase}'),
    ('\\p{IsLatin', 'Unclosed character family'),
    ('\\p{gc=Latin}', 'Unknown Unicode property {name=<gc>, value=<Latin>}'),
    ('\\p{sc=Lu}', 'Unknown Unicode property {name=<sc>, value=<Lu>}'),
    # \N{name}: Character.codePointOf: trimmed, any case; Character.getName's names only (no alias, no named
    # sequence, CJK ideographs and Hangul syllables by block and code), none Unicode 14.0 added
    ('\\N{LATIN SMALL LETTER A}', (1, 6, 11, 17)),
    ('\\N{ latin small letter a\t}', (1, 6, 11, 17)),
    ('\\N{Latin Small Letter A}', (1, 6, 11, 17)),
    ('\\N{LATIN CAPITAL LETTER A WITH MACRON AND GRAVE}',
     'Unknown character name [LATIN CAPITAL LETTER A WITH MACRON AND GRAVE]'),
    ('[\\N{LATIN CAPITAL LETTER A WITH MACRON AND GRAVE}]',
     'Unknown character name [LATIN CAPITAL LETTER A WITH MACRON AND GRAVE]'),
    ('\\N{LATIN CAPITAL LETTER GHA}', 'Unknown character name [LATIN CAPITAL LETTER GHA]'),
    ('\\N{BYTE ORDER MARK}', 'Unknown character name [BYTE ORDER MARK]'),
    ('\\N{CJK UNIFIED IDEOGRAPH-65E5}', 'Unknown character name [CJK UNIFIED IDEOGRAPH-65E5]'),
    ('\\N{CJK UNIFIED IDEOGRAPHS 65E5}', (3,)),
    ('[\\N{CJK UNIFIED IDEOGRAPHS 65E5}-\\N{CJK UNIFIED IDEOGRAPHS 672C}]+$', (3,)),
    ('\\N{HANGUL SYLLABLE HAN}', 'Unknown character name [HANGUL SYLLABLE HAN]'),
    ('\\N{HANGUL SYLLABLES D55C}', (5,)),
    ('\\N{NULL}', ()),
    ('\\N{LINE FEED (LF)}', ()),
    ('\\N{LINE FEED}', 'Unknown character name [LINE FEED]'),
    ('\\N{BASIC LATIN 61}', 'Unknown character name [BASIC LATIN 61]'),
    ('\\N{GREEK AND COPTIC 378}', 'Unknown character name [GREEK AND COPTIC 378]'),
    ('\\N{ARABIC LETTER ALEF WITH ATTACHED FATHA}',
     'Unknown character name [ARABIC LETTER ALEF WITH ATTACHED FATHA]'),
    ('\\N{LATIN 1 SUPPLEMENT 84}', ()),
    ('\\N{CJK UNIFIED IDEOGRAPHS 065E5}', 'Unknown character name [CJK UNIFIED IDEOGRAPHS 065E5]'),
    ('\\N{cjk unified ideographs 65e5}', (3,)),
    ('\\N{ZERO WIDTH JOINER}', (11,)),
    ('\\N{MATHEMATICAL BOLD CAPITAL A}', (15,)),
    ('\\N{MODIFIER LETTER SMALL H}', (12,)),
    ('\\N{}', 'Unknown character name []'),
    ('\\N{ }', 'Unknown character name [ ]'),
    ('\\N{GREEK CAPITAL LETTER OMEGA}', (1,)),
    ('\\N{OHM SIGN}', ()),
    # UNICODE_CHARACTER_CLASS ((?U), scoped as the other flags): \w, \d, \s, \b and the POSIX classes
    # Unicode's; UNICODE_CASE ((?u)) changes nothing without CASE_INSENSITIVE
    ('(?U)\\w+$', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('(?U)^\\w+$', (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15)),
    ('^\\w+$', (0, 8, 13)),
    ('(?U)\\d', (8, 10, 13)),
    ('(?U)\\D', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18)),
    ('(?U)^\\d+$', (10,)),
    ('(?U)\\s', ()),
    ('(?U)\\S', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18)),
    ('(?U)\\W', (7, 16, 17, 18)),
    ('(?U)\\bmega', ()),
    ('(?U)\\Bmega', (1,)),
    ('(?U)x\\b', (7,)),
    ('(?U)\\b\\w', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('(?U)a\\B', (6, 11)),
    ('(?U)[\\w&&[^a-z]]', (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)),
    ('(?U)[^\\w]', (7, 16, 17, 18)),
    ('(?U)[\\d\\s]', (8, 10, 13)),
    ('(?U)[\\W]', (7, 16, 17, 18)),
    ('(?U)\\p{Alpha}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 17)),
    ('(?U)^\\p{alpha}+$', (0, 1, 2, 3, 4, 5, 6, 9, 12, 14, 15)),
    ('(?U)\\p{Lower}', (0, 1, 2, 6, 7, 8, 9, 11, 12, 17)),
    ('(?U)\\p{Upper}', (1, 2, 13, 15)),
    ('(?U)\\p{Punct}', (7, 8)),
    ('(?U)\\p{ASCII}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('(?U)\\p{L}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 17)),
    ('(?U)\\p{XDigit}', (0, 1, 6, 7, 8, 10, 11, 13, 17)),
    ('(?U)\\p{Graph}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('(?U)^\\p{Print}+$', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('(?U)\\p{Blank}', ()),
    ('(?U)\\p{Cntrl}', ()),
    ('(?U)\\p{Alnum}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('(?U:\\w)x', ()),
    ('a(?U)\\w$|^\\w', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17)),
    ('(?U)(?-U)\\w+$', (0, 1, 7, 8, 11, 13, 17)),
    ('(?U-U)^\\w+$', (0, 8, 13)),
    ('^(?:(?U)\\w)+$', (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15)),
    ('(?u)^\\w+$', (0, 8, 13)),
    ('(?u)\\p{Alpha}', (0, 1, 6, 7, 8, 11, 13, 17)),
    ('(?U)\\p{IsAlpha}', (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 17)),
    ('(?U)\\p{javaLowerCase}', (0, 1, 2, 6, 7, 8, 9, 11, 12, 17)),
    ('(?U)\\p{Lu}', (1, 2, 13, 15)),
    ('(?U)\\p{alpha', 'Unclosed character family'),
    ('(?U)[\\p{Punct}&&\\p{ASCII}]', (7, 8)),
    ('(?i)(?-i)(?u)a', (1, 6, 11, 17)),
    ('(?U)(?-i)(?-u)(?i)a', (1, 6, 11, 13, 17)),
]


@pytest.mark.parametrize(("pattern", "java"), JAVA)
def test_a_pattern_selects_the_topics_java_selects(pattern, java):
    _check(pattern, java, TOPICS)


@pytest.mark.parametrize(("pattern", "java"), UNICODE)
def test_scripts_blocks_and_properties_select_the_topics_java_selects(pattern, java):
    _check(pattern, java, UNICODE_TOPICS)


def _check(pattern, java, topics):
    if isinstance(java, str):
        with pytest.raises(ConfigError, match="subscribePattern: .*" + _words(java)):
            compile_java(pattern)
        return
    found = compile_java(pattern)
    assert tuple(i for i, topic in enumerate(topics) if found.search(topic)) == java


def _words(description: str) -> str:
    # Java's description, as the error quotes it (its braces and brackets escaped for the match)
    return "".join("\\" + c if c in "{}[]()" else c for c in description)


@pytest.mark.parametrize("pattern", [r"(?iu)a", r"(?U)(?i)a", r"(?i:(?U)a)", r"(?Ux)a", r"(?x)a b", r"\Ga",
                                     r"a\X"])
def test_what_java_takes_and_segstore_does_not_translate_is_refused(pattern):
    """Unicode case folding (CASE_INSENSITIVE with UNICODE_CASE, which (?U) sets too), comments mode, \\G
    and grapheme clusters: Java runs them, Python's re cannot alike: refused by name, never matched
    otherwise."""
    with pytest.raises(ConfigError, match=r"segstore does not translate|segstore translates"):
        compile_java(pattern)


@pytest.mark.parametrize(("pattern", "rewritten"), [
    (r"\Qa.b\E", r"a\.b"), (r"\Q1\E2", r"\x312"), (r"\Qa\d\E", "a\\\\d"), (r"[\Qa\E-c]", "[a-c]"),
    (r"\Qopen", "open"), (r"x\\Qy", r"x\\Qy"),
])
def test_quotes_are_rewritten_as_java_rewrites_them(pattern, rewritten):
    """Java 17 Pattern.RemoveQEQuoting, before it parses: in a quote ASCII punctuation is escaped, letters
    and non-ASCII stay, a digit first in its quote is \\x3 and the digit."""
    assert remove_qe_quoting(pattern) == rewritten


# --- against the JDK itself, where a Java 17 is on PATH (CI has one) ---------------------------------------

@functools.cache
def _java_17() -> bool:
    if shutil.which("java") is None:
        return False
    version = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    return 'version "17.' in version


needs_java_17 = pytest.mark.skipif("not _java_17()", reason="no Java 17 on PATH")


def _run_java(tmp_path, mode, lines):
    (tmp_path / "input.txt").write_text("".join(line + "\n" for line in lines))
    done = subprocess.run(["java", str(TOOLS / "JavaPatterns.java"), mode, str(tmp_path / "input.txt")],
                          capture_output=True, text=True, timeout=300, check=True)
    return done.stdout.splitlines()


def _hex(text):
    return text.encode().hex()


@needs_java_17
@pytest.mark.parametrize(("table", "topics"), [(JAVA, TOPICS), (UNICODE, UNICODE_TOPICS)],
                         ids=["java", "unicode"])
def test_the_tables_are_what_java_17_says(tmp_path, table, topics):
    said = _run_java(tmp_path, "find", [*map(_hex, topics), "-", *(_hex(p) for p, _ in table)])
    assert [("error " + java) if isinstance(java, str) else " ".join(["ok", *map(str, java)])
            for _, java in table] == said


#: Properties whose every code point is checked against Java's: each kind of name, in each spelling rule.
PROPERTIES = [
    r"\p{Cn}", r"\p{L}", r"\p{Lu}", r"(?i)\p{Ll}", r"\p{C}", r"\p{IsAlphabetic}", r"\p{IsIdeographic}",
    r"\p{IsWord}", r"\p{IsPrint}", r"\p{IsGraph}", r"\p{IsPunct}", r"\p{IsXDigit}", r"\p{IsBlank}",
    r"\p{IsNoncharacterCodePoint}", r"\p{IsWhite_Space}", r"\p{IsLowercase}", r"(?i)\p{IsUppercase}",
    r"\p{javaWhitespace}", r"\p{javaIdentifierIgnorable}", r"\p{javaSpaceChar}", r"\p{javaMirrored}",
    r"\p{javaUnicodeIdentifierPart}", r"(?i)\p{javaTitleCase}", r"\p{javaLetterOrDigit}", r"\p{IsLatin}",
    r"\p{IsCommon}", r"\p{sc=Zinh}", r"\p{IsUnknown}", r"\p{sc=hani}", r"\p{InGreek}",
    r"\p{blk=Latin-1 Supplement}", r"\p{InHIGH_SURROGATES}", r"\p{InCJKUnifiedIdeographsExtensionB}",
    r"\p{InSurrogates_Area}", r"\P{InBasic_Latin}",
]


@needs_java_17
def test_each_property_holds_the_code_points_java_17_gives_it(tmp_path):
    said = _run_java(tmp_path, "members", [_hex(p) for p in PROPERTIES])
    for pattern, line in zip(PROPERTIES, said, strict=True):
        mode = javaregex._Mode(case_insensitive=pattern.startswith("(?i)"))
        members, _ = javaregex._family(pattern, pattern.index("\\"), mode)
        java = javachars.of((int(low, 16), int(high, 16)) for low, _, high in
                            (item.partition("-") for item in line.split()[1:]))
        assert (pattern, members) == (pattern, java)


@needs_java_17
def test_character_names_are_java_17s(tmp_path):
    """\\N{name}: javachars.java_name is Character.getName, and code_point_of reads each name back, on every
    37th code point and each control character (every code point agreed while building: 283,440 names)."""
    codes = sorted({*range(0, 0x110000, 37), *range(0x20), *range(0x7F, 0xA0)})
    said = _run_java(tmp_path, "names", [f"{code:x}" for code in codes])
    assert [(code, javachars.java_name(code)) for code in codes] == \
        [(code, None if name == "null" else name) for code, name in zip(codes, said, strict=True)]
    named = [(code, name) for code, name in zip(codes, said, strict=True) if name != "null"]
    assert [(code, javachars.code_point_of(name)) for code, name in named] == \
        [(code, code) for code, _ in named]


@needs_java_17
def test_the_unicode_tables_are_what_the_generator_prints():
    """segstore/spark/javaunicode.py is tools/JavaUnicodeTables.java's output, as committed (but for the
    line naming the Java 17 update that printed it: another update prints the same tables)."""
    printed = subprocess.run(["java", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
                              str(TOOLS / "JavaUnicodeTables.java")], capture_output=True, text=True,
                             timeout=300, check=True).stdout
    committed = (TOOLS.parent / "segstore" / "spark" / "javaunicode.py").read_text()
    assert _without_version(printed) == _without_version(committed)


def _without_version(module):
    return [line for line in module.splitlines() if not line.startswith("JAVA_VERSION = ")]
