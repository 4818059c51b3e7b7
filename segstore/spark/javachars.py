"""Sets of characters as ``java.util.regex.Pattern`` builds them for a character class: code point ranges
with union, intersection and complement, and the Unicode properties ``\\p{...}`` names (Java 17
``CharPredicates``), for :mod:`.javaregex`.

A set is a tuple of disjoint, sorted, non-adjacent ``(low, high)`` code point ranges (inclusive), over
U+0000..U+10FFFF.  General categories come from :mod:`unicodedata` (Python 3.11: Unicode 14.0, where
Java 17 has 13.0: the two differ only on characters assigned in 14.0, never on the ASCII that topic
names hold); the ``Other_Alphabetic``, ``Other_Lowercase`` and ``Other_Uppercase`` ranges, which
:mod:`unicodedata` lacks, were listed by Java 17's own ``Character.isAlphabetic`` / ``isLowerCase`` /
``isUpperCase`` (each: the characters it takes beyond the letters of its category).

Pure; thread-safe (the category table is built once, on first use, O(0x110000)).
"""

from __future__ import annotations

import functools
import itertools
import unicodedata
from collections.abc import Iterable

CharSet = tuple[tuple[int, int], ...]

MAX_CODE_POINT = 0x10FFFF
EMPTY: CharSet = ()
EVERYTHING: CharSet = ((0, MAX_CODE_POINT),)


def of(ranges: Iterable[tuple[int, int]]) -> CharSet:
    """The set of the code points in ``ranges`` (any order, overlapping or not)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(r for r in ranges if r[0] <= r[1]):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def chars(text: str) -> CharSet:
    return of((ord(c), ord(c)) for c in text)


def union(a: CharSet, b: CharSet) -> CharSet:
    return of(a + b)


def complement(a: CharSet) -> CharSet:
    out, start = [], 0
    for low, high in a:
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return tuple(out)


def intersection(a: CharSet, b: CharSet) -> CharSet:
    return complement(union(complement(a), complement(b)))


def ascii_case_closed(a: CharSet) -> CharSet:
    """``a`` with the other ASCII case of each ASCII letter it holds: a member of a class under Java's
    CASE_INSENSITIVE without UNICODE_CASE (``ASCII.toUpper`` / ``toLower`` of the character tried)."""
    extra = [(c ^ 0x20, c ^ 0x20) for low, high in a for c in range(max(low, 0x41), min(high, 0x7A) + 1)
             if chr(c).isascii() and chr(c).isalpha()]
    return of(a + tuple(extra))


def _table(text: str) -> CharSet:
    ranges = []
    for item in text.split():
        low, _, high = item.partition("-")
        ranges.append((int(low, 16), int(high or low, 16)))
    return of(ranges)


#: Java 17 ``Character.isAlphabetic`` beyond the letters (L) and letter numbers (Nl): Other_Alphabetic.
OTHER_ALPHABETIC = _table(
    "0x345 0x5B0-0x5BD 0x5BF 0x5C1-0x5C2 0x5C4-0x5C5 0x5C7 0x610-0x61A 0x64B-0x657 0x659-0x65F 0x670 "
    "0x6D6-0x6DC 0x6E1-0x6E4 0x6E7-0x6E8 0x6ED 0x711 0x730-0x73F 0x7A6-0x7B0 0x816-0x817 0x81B-0x823 "
    "0x825-0x827 0x829-0x82C 0x8D4-0x8DF 0x8E3-0x8E9 0x8F0-0x903 0x93A-0x93B 0x93E-0x94C 0x94E-0x94F "
    "0x955-0x957 0x962-0x963 0x981-0x983 0x9BE-0x9C4 0x9C7-0x9C8 0x9CB-0x9CC 0x9D7 0x9E2-0x9E3 "
    "0xA01-0xA03 0xA3E-0xA42 0xA47-0xA48 0xA4B-0xA4C 0xA51 0xA70-0xA71 0xA75 0xA81-0xA83 0xABE-0xAC5 "
    "0xAC7-0xAC9 0xACB-0xACC 0xAE2-0xAE3 0xAFA-0xAFC 0xB01-0xB03 0xB3E-0xB44 0xB47-0xB48 0xB4B-0xB4C "
    "0xB56-0xB57 0xB62-0xB63 0xB82 0xBBE-0xBC2 0xBC6-0xBC8 0xBCA-0xBCC 0xBD7 0xC00-0xC03 0xC3E-0xC44 "
    "0xC46-0xC48 0xC4A-0xC4C 0xC55-0xC56 0xC62-0xC63 0xC81-0xC83 0xCBE-0xCC4 0xCC6-0xCC8 0xCCA-0xCCC "
    "0xCD5-0xCD6 0xCE2-0xCE3 0xD00-0xD03 0xD3E-0xD44 0xD46-0xD48 0xD4A-0xD4C 0xD57 0xD62-0xD63 "
    "0xD81-0xD83 0xDCF-0xDD4 0xDD6 0xDD8-0xDDF 0xDF2-0xDF3 0xE31 0xE34-0xE3A 0xE4D 0xEB1 0xEB4-0xEB9 "
    "0xEBB-0xEBC 0xECD 0xF71-0xF81 0xF8D-0xF97 0xF99-0xFBC 0x102B-0x1036 0x1038 0x103B-0x103E "
    "0x1056-0x1059 0x105E-0x1060 0x1062-0x1064 0x1067-0x106D 0x1071-0x1074 0x1082-0x108D 0x108F "
    "0x109A-0x109D 0x1712-0x1713 0x1732-0x1733 0x1752-0x1753 0x1772-0x1773 0x17B6-0x17C8 0x1885-0x1886 "
    "0x18A9 0x1920-0x192B 0x1930-0x1938 0x1A17-0x1A1B 0x1A55-0x1A5E 0x1A61-0x1A74 0x1ABF-0x1AC0 "
    "0x1B00-0x1B04 0x1B35-0x1B43 0x1B80-0x1B82 0x1BA1-0x1BA9 0x1BAC-0x1BAD 0x1BE7-0x1BF1 0x1C24-0x1C36 "
    "0x1DE7-0x1DF4 0x24B6-0x24E9 0x2DE0-0x2DFF 0xA674-0xA67B 0xA69E-0xA69F 0xA802 0xA80B 0xA823-0xA827 "
    "0xA880-0xA881 0xA8B4-0xA8C3 0xA8C5 0xA8FF 0xA926-0xA92A 0xA947-0xA952 0xA980-0xA983 0xA9B4-0xA9BF "
    "0xA9E5 0xAA29-0xAA36 0xAA43 0xAA4C-0xAA4D 0xAA7B-0xAA7D 0xAAB0 0xAAB2-0xAAB4 0xAAB7-0xAAB8 0xAABE "
    "0xAAEB-0xAAEF 0xAAF5 0xABE3-0xABEA 0xFB1E 0x10376-0x1037A 0x10A01-0x10A03 0x10A05-0x10A06 "
    "0x10A0C-0x10A0F 0x10D24-0x10D27 0x10EAB-0x10EAC 0x11000-0x11002 0x11038-0x11045 0x11082 "
    "0x110B0-0x110B8 0x11100-0x11102 0x11127-0x11132 0x11145-0x11146 0x11180-0x11182 0x111B3-0x111BF "
    "0x111CE-0x111CF 0x1122C-0x11234 0x11237 0x1123E 0x112DF-0x112E8 0x11300-0x11303 0x1133E-0x11344 "
    "0x11347-0x11348 0x1134B-0x1134C 0x11357 0x11362-0x11363 0x11435-0x11441 0x11443-0x11445 "
    "0x114B0-0x114C1 0x115AF-0x115B5 0x115B8-0x115BE 0x115DC-0x115DD 0x11630-0x1163E 0x11640 "
    "0x116AB-0x116B5 0x1171D-0x1172A 0x1182C-0x11838 0x11930-0x11935 0x11937-0x11938 0x1193B-0x1193C "
    "0x11940 0x11942 0x119D1-0x119D7 0x119DA-0x119DF 0x119E4 0x11A01-0x11A0A 0x11A35-0x11A39 "
    "0x11A3B-0x11A3E 0x11A51-0x11A5B 0x11A8A-0x11A97 0x11C2F-0x11C36 0x11C38-0x11C3E 0x11C92-0x11CA7 "
    "0x11CA9-0x11CB6 0x11D31-0x11D36 0x11D3A 0x11D3C-0x11D3D 0x11D3F-0x11D41 0x11D43 0x11D47 "
    "0x11D8A-0x11D8E 0x11D90-0x11D91 0x11D93-0x11D96 0x11EF3-0x11EF6 0x16F4F 0x16F51-0x16F87 "
    "0x16F8F-0x16F92 0x16FF0-0x16FF1 0x1BC9E 0x1E000-0x1E006 0x1E008-0x1E018 0x1E01B-0x1E021 "
    "0x1E023-0x1E024 0x1E026-0x1E02A 0x1E947 0x1F130-0x1F149 0x1F150-0x1F169 0x1F170-0x1F189")
#: Java 17 ``Character.isLowerCase`` beyond Ll: Other_Lowercase.
OTHER_LOWERCASE = _table(
    "0xAA 0xBA 0x2B0-0x2B8 0x2C0-0x2C1 0x2E0-0x2E4 0x345 0x37A 0x1D2C-0x1D6A 0x1D78 0x1D9B-0x1DBF "
    "0x2071 0x207F 0x2090-0x209C 0x2170-0x217F 0x24D0-0x24E9 0x2C7C-0x2C7D 0xA69C-0xA69D 0xA770 "
    "0xA7F8-0xA7F9 0xAB5C-0xAB5F")
#: Java 17 ``Character.isUpperCase`` beyond Lu: Other_Uppercase.
OTHER_UPPERCASE = _table(
    "0x2160-0x216F 0x24B6-0x24CF 0x1F130-0x1F149 0x1F150-0x1F169 0x1F170-0x1F189")


@functools.cache
def _categories() -> dict[str, CharSet]:
    """Every two-letter general category (``Lu``, ``Nd``...) and its ranges, unassigned ones as ``Cn``."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    start = 0
    for name, run in itertools.groupby(map(unicodedata.category, map(chr, range(MAX_CODE_POINT + 1)))):
        length = sum(1 for _ in run)
        ranges.setdefault(name, []).append((start, start + length - 1))
        start += length
    return {name: of(spans) for name, spans in ranges.items()}


def category(*names: str) -> CharSet:
    """The union of general categories, each a two-letter name or a one-letter group (``L``: Lu, Ll...)."""
    table = _categories()
    found: list[tuple[int, int]] = []
    for name in names:
        for key, spans in table.items():
            if key == name or (len(name) == 1 and key[0] == name):
                found += spans
    return of(found)


_ONE_LETTER = {"L", "M", "N", "Z", "C", "P", "S"}
_TWO_LETTER = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Me", "Mc", "Nd", "Nl", "No", "Zs", "Zl", "Zp", "Cc",
               "Cf", "Co", "Cs", "Pd", "Ps", "Pe", "Pc", "Po", "Sm", "Sc", "Sk", "So", "Pi", "Pf"}
#: Java's POSIX classes (US-ASCII only), as ranges.
POSIX = {
    "Lower": ((0x61, 0x7A),), "Upper": ((0x41, 0x5A),), "ASCII": ((0, 0x7F),),
    "Alpha": ((0x41, 0x5A), (0x61, 0x7A)), "Digit": ((0x30, 0x39),),
    "Alnum": ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)),
    "Punct": ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)), "Graph": ((0x21, 0x7E),),
    "Print": ((0x20, 0x7E),), "Blank": ((0x09, 0x09), (0x20, 0x20)), "Cntrl": ((0, 0x1F), (0x7F, 0x7F)),
    "XDigit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)), "Space": ((0x09, 0x0D), (0x20, 0x20)),
}


def _cased() -> CharSet:
    return category("Lu", "Ll", "Lt")


def for_property(name: str, case_insensitive: bool) -> CharSet | None:
    """Java 17 ``CharPredicates.forProperty``: a general category (two letters, one letter, ``LC``,
    ``LD``, ``L1``, ``all``) or a POSIX class; under CASE_INSENSITIVE ``Lu``, ``Ll`` and ``Lt`` take every
    cased letter and ``Lower`` and ``Upper`` every ASCII letter, as there.  None: a name it does not know,
    or one segstore does not translate (``javaLowerCase``...)."""
    if name in ("Lu", "Ll", "Lt") and case_insensitive:
        return _cased()
    if name in ("Lower", "Upper") and case_insensitive:
        return POSIX["Alpha"]
    if name in _TWO_LETTER or name in _ONE_LETTER:
        return category(name)
    if name == "LC":
        return _cased()
    if name == "LD":
        return category("L", "Nd")
    if name == "L1":
        return ((0, 0xFF),)
    if name == "all":
        return EVERYTHING
    return POSIX.get(name)


def for_unicode_property(name: str, case_insensitive: bool) -> CharSet | None:
    """Java 17 ``CharPredicates.forUnicodeProperty`` (``\\p{IsAlphabetic}``..., the name in any case) for
    the binary properties segstore translates: Alphabetic, Letter, Digit, Lowercase, Uppercase,
    Titlecase (all three every cased character under CASE_INSENSITIVE, as there), White_Space,
    Hex_Digit, Punctuation, Control and Assigned.  None: another name."""
    key = name.upper()
    if key in ("LOWERCASE", "UPPERCASE", "TITLECASE") and case_insensitive:
        return union(_cased(), union(OTHER_LOWERCASE, OTHER_UPPERCASE))
    if key == "ALPHABETIC":
        return union(category("L", "Nl"), OTHER_ALPHABETIC)
    if key == "LETTER":
        return category("L")
    if key == "DIGIT":
        return category("Nd")
    if key == "LOWERCASE":
        return union(category("Ll"), OTHER_LOWERCASE)
    if key == "UPPERCASE":
        return union(category("Lu"), OTHER_UPPERCASE)
    if key == "TITLECASE":
        return category("Lt")
    if key in ("WHITE_SPACE", "WHITESPACE"):
        return union(category("Zs", "Zl", "Zp"), ((0x09, 0x0D), (0x85, 0x85)))
    if key in ("HEX_DIGIT", "HEXDIGIT"):
        return union(category("Nd"), ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66), (0xFF10, 0xFF19),
                                      (0xFF21, 0xFF26), (0xFF41, 0xFF46)))
    if key == "PUNCTUATION":
        return category("P")
    if key == "CONTROL":
        return category("Cc")
    if key == "ASSIGNED":
        return complement(category("Cn"))
    return None


def python_class(a: CharSet) -> str:
    """A Python pattern matching one character of ``a``: a class of escaped ranges, ``(?!)`` for none."""
    if not a:
        return "(?!)"
    return "[" + "".join(_escape(low) if low == high else f"{_escape(low)}-{_escape(high)}"
                         for low, high in a) + "]"


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
