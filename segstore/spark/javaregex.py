"""A ``java.util.regex.Pattern`` as Python's :mod:`re` can run it: the ``subscribePattern`` of Spark's Kafka
connector, which compiles the option with Java's ``Pattern`` (Scala's ``topicPattern.r``) and takes the
topics it finds a match in (Spark 4 ConsumerStrategy.scala, SubscribePatternStrategy.assignedTopicPartitions:
``topicRegex.findFirstIn(name)``, a search, not a whole-name match).

Java's syntax is translated where Python's reads the same text otherwise, or not at all:

- ``\\Q...\\E`` quotes, rewritten first as Java's ``Pattern.RemoveQEQuoting`` rewrites it;
  ``(?<name>...)`` and ``\\k<name>`` are Python's ``(?P<name>...)`` and ``(?P=name)``;
- ``\\w``, ``\\d``, ``\\s``, ``\\b`` and ``(?i)`` are ASCII in Java unless asked otherwise (compiled with
  :data:`re.ASCII`);
- ``\\z`` is Python's ``\\Z``, Java's ``\\Z`` allows a final line terminator; ``\\h``, ``\\v``, ``\\R``,
  ``\\e``, ``\\cX``, ``\\0ooo`` (octal), ``\\x{h...h}`` are spelled out, and ``\\N{name}`` by Java's
  ``Character.codePointOf`` (:func:`.javachars.code_point_of`);
- a character class is evaluated as Java 17's ``Pattern.clazz`` builds it (nested classes as unions,
  ``&&`` intersections, ``^`` over the whole class, each member closed under ASCII case where
  CASE_INSENSITIVE is on) into explicit code point ranges (:mod:`.javachars`), and so are Unicode
  properties, every name Java 17's ``Pattern.family`` takes, from Java 17's own tables
  (:mod:`.javaunicode`): general categories (``\\p{L}``, ``\\p{Lu}``, ``\\p{IsLu}``, ``\\p{gc=Lu}``...), the
  POSIX classes (``\\p{Alpha}``...: ASCII in Java; ``\\p{IsAlpha}``...: Unicode's), binary properties
  (``\\p{IsAlphabetic}``, ``\\p{IsIdeographic}``...), ``java.lang.Character`` methods
  (``\\p{javaLowerCase}``...), scripts (``\\p{IsLatin}``, ``\\p{sc=Grek}``) and blocks (``\\p{InGreek}``,
  ``\\p{blk=Basic Latin}``), names matched as Java matches them;
- an inline flag group ``(?i)`` after the start applies from there to the end of its group, every
  alternative after it included (Python takes global flags only at the start): scoped groups carry it.
- UNICODE_CHARACTER_CLASS (``(?U)``, scoped as the other flags) makes ``\\w``, ``\\d``, ``\\s`` Java's
  WORD, DIGIT and WHITE_SPACE sets, ``\\b``/``\\B`` boundaries of WORD (lookarounds) and the POSIX
  classes Unicode's (``CharPredicates.forPOSIXName``); UNICODE_CASE (``(?u)``) alone changes nothing.

What Python cannot express the same way is a :class:`ConfigError` naming it, never a different match:
Unicode case folding (``(?i)`` with ``(?u)`` or ``(?U)``), the flag ``x``, ``\\G``, ``\\X``; and text
Java's ``Pattern.compile`` refuses (a ``{`` that starts no repetition, ``(?P...)``, ``(?#...)``, an escaped
letter Java gives no meaning, an unclosed class, a reversed range, an unknown property, script or block
name) is refused too, with Java's description.  Pure; thread-safe.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import ConfigError
from . import javachars
from .javachars import CharSet

#: Escapes both read alike (with :data:`re.ASCII`).
_SAME = set("dDsSwWbBAtnrfa")
_GROUP_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9]*")
_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


class _Mode(NamedTuple):
    """The flags a part of a pattern is read under that change what it matches here."""

    #: CASE_INSENSITIVE (``i``): ASCII letters in any case
    case_insensitive: bool = False
    #: UNICODE_CHARACTER_CLASS (``U``): ``\\w``, ``\\d``, ``\\s``, ``\\b`` and the POSIX classes Unicode's
    unicode_class: bool = False
    #: UNICODE_CASE (``u``, which ``U`` sets too): case-insensitivity beyond ASCII
    unicode_case: bool = False


def _refuse(pattern: str, pos: int, what: str) -> ConfigError:
    return ConfigError(f"option subscribePattern: {pattern!r}:{pos}: expected a Java regular expression "
                       f"segstore can run, found {what}")


def _java(pattern: str, pos: int, description: str) -> ConfigError:
    """What Java's ``Pattern.compile`` refuses, in its words (``PatternSyntaxException``: the description
    and the index near which it found it)."""
    return _refuse(pattern, pos, f"{description} near index {pos}, which Java's Pattern refuses")


def _escape(char: str) -> str:
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}" if ord(char) < 0x10000 \
        else f"\\U{ord(char):08x}"


def _escape_at(pattern: str, pos: int, mode: _Mode) -> tuple[str, int]:
    """The Python text of the escape at ``pattern[pos]`` (a backslash, outside a character class) and where
    the pattern goes on."""
    if pos + 1 >= len(pattern):
        raise _refuse(pattern, pos, "a trailing backslash")
    char = pattern[pos + 1]
    end = pos + 2
    if mode.unicode_class and char in "dDsSwW":
        members = javachars.unicode_class_escape(char.lower())
        return javachars.python_class(javachars.complement(members) if char.isupper() else members), end
    if mode.unicode_class and char in "bB":
        # Java 17 Bound with UNICODE_CHARACTER_CLASS: a boundary between a WORD character and another
        word = javachars.python_class(javachars.unicode_class_escape("w"))
        if char == "b":
            return f"(?:(?<={word})(?!{word})|(?<!{word})(?={word}))", end
        return f"(?:(?<={word})(?={word})|(?<!{word})(?!{word}))", end
    if char in _SAME or (char.isdigit() and char != "0"):
        return "\\" + char, end
    if char == "z":
        return "\\Z", end
    if char == "Z":
        return "(?=(?:\\r\\n|[\\n\\r\\x85\\u2028\\u2029])?\\Z)", end
    if char in "hHvV":
        members = _CLASS_ESCAPES[char.lower()]
        return javachars.python_class(javachars.complement(members) if char.isupper() else members), end
    if char == "R":
        return f"(?:\\r\\n|{javachars.python_class(_CLASS_ESCAPES['v'])})", end
    if char == "k":
        found = re.match(r"<([a-zA-Z][a-zA-Z0-9]*)>", pattern[end:])
        if found is None:
            raise _refuse(pattern, pos, "a malformed \\k<name>")
        return f"(?P={found.group(1)})", end + found.end()
    if char in "pP":
        chosen, end = _family(pattern, pos, mode)
        return javachars.python_class(chosen), end
    code, end = _char_escape(pattern, pos)
    return _escape(chr(code)), end


def _char_escape(pattern: str, pos: int, in_class: bool = False) -> tuple[int, int]:
    """The character the escape at ``pattern[pos]`` (a backslash) stands for, as Java 17's
    ``Pattern.escape`` reads it where it is one character, and where the pattern goes on.

    :raises ConfigError: an escape that is no character (Java's "Illegal/unsupported escape sequence"),
        or one segstore does not translate.
    """
    if pos + 1 >= len(pattern):
        raise _refuse(pattern, pos, "a trailing backslash")
    char = pattern[pos + 1]
    end = pos + 2
    if char == "0":
        digits = re.match(r"[0-7]{1,3}", pattern[end:])
        if digits is None:
            raise _java(pattern, pos, "Illegal octal escape sequence")
        text = digits.group()
        if len(text) == 3 and text[0] > "3":
            text = text[:2]
        return int(text, 8), end + len(text)
    if char == "x":
        if pattern[end:end + 1] == "{":
            close = pattern.find("}", end)
            if close < 0 or not re.fullmatch(r"[0-9a-fA-F]+", pattern[end + 1:close]) \
                    or int(pattern[end + 1:close], 16) > 0x10FFFF:
                raise _java(pattern, pos, "Illegal hexadecimal escape sequence")
            return int(pattern[end + 1:close], 16), close + 1
        if re.fullmatch(r"[0-9a-fA-F]{2}", pattern[end:end + 2]) is None:
            raise _java(pattern, pos, "Illegal hexadecimal escape sequence")
        return int(pattern[end:end + 2], 16), end + 2
    if char == "u":
        if re.fullmatch(r"[0-9a-fA-F]{4}", pattern[end:end + 4]) is None:
            raise _java(pattern, pos, "Illegal Unicode escape sequence")
        code = int(pattern[end:end + 4], 16)
        low = re.match(r"\\u(d[c-f][0-9a-f]{2})", pattern[end + 4:end + 10], re.IGNORECASE)
        if 0xD800 <= code <= 0xDBFF and low is not None:      # a surrogate pair is one code point
            return 0x10000 + ((code - 0xD800) << 10) + int(low.group(1), 16) - 0xDC00, end + 10
        return code, end + 4
    if char == "N":
        found = re.match(r"\{([^}]*)\}", pattern[end:])
        if found is None:
            raise _java(pattern, pos, "Unclosed character name escape sequence")
        named = javachars.code_point_of(found.group(1))
        if named is None:
            raise _java(pattern, pos, f"Unknown character name [{found.group(1)}]")
        return named, end + found.end()
    if char == "c":
        if end >= len(pattern):
            raise _java(pattern, pos, "Illegal control escape sequence")
        return ord(pattern[end]) ^ 64, end + 1
    simple = {"a": 7, "e": 27, "f": 12, "n": 10, "r": 13, "t": 9}
    if char in simple:
        return simple[char], end
    if char in "GX" and not in_class:
        raise _refuse(pattern, pos, f"the escape \\{char}, which segstore does not translate")
    if char.isascii() and char.isalnum():
        raise _java(pattern, pos, "Illegal/unsupported escape sequence")
    return ord(char), end


#: Class escapes that are sets (Java 17 ``Pattern.escape`` in a class, US-ASCII as Java's defaults).
_CLASS_ESCAPES: dict[str, CharSet] = {
    "d": ((0x30, 0x39),), "s": ((0x09, 0x0D), (0x20, 0x20)),
    "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    "h": javachars.of([(0x20, 0x20), (0x09, 0x09), (0xA0, 0xA0), (0x1680, 0x1680), (0x180E, 0x180E),
                       (0x2000, 0x200A), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]),
    "v": javachars.of([(0x0A, 0x0D), (0x85, 0x85), (0x2028, 0x2029)]),
}


def _family(pattern: str, pos: int, mode: _Mode) -> tuple[CharSet, int]:
    """The members of ``\\p{...}`` / ``\\P{...}`` (or ``\\pL``) at ``pattern[pos]``, as Java 17
    ``Pattern.family`` names them, and where the pattern goes on: ``sc=``/``script=``, ``blk=``/``block=``,
    ``gc=``/``general_category=`` (the key in any case); ``In`` a block; ``Is`` a binary property, then a
    category, then a script; else (a POSIX class in its Unicode sense first under UNICODE_CHARACTER_CLASS)
    a category, POSIX class or ``java.lang.Character`` method.

    :raises ConfigError: Java's errors (unclosed, empty, an unknown name).
    """
    case_insensitive = mode.case_insensitive
    complement = pattern[pos + 1] == "P"
    start = pos + 2
    if pattern[start:start + 1] == "{":
        close = pattern.find("}", start)
        if close < 0:
            raise _java(pattern, pos, "Unclosed character family")
        if close == start + 1:
            raise _java(pattern, pos, "Empty character family")
        name, end = pattern[start + 1:close], close + 1
    elif start < len(pattern):
        name, end = pattern[start], start + 1
    else:
        raise _java(pattern, pos, "Illegal/unsupported escape sequence")
    members: CharSet | None
    if "=" in name:
        key, _, value = name.partition("=")
        key = key.lower()
        if key in ("sc", "script"):
            members = javachars.script(value)
        elif key in ("blk", "block"):
            members = javachars.block(value)
        elif key in ("gc", "general_category"):
            members = javachars.for_property(value, case_insensitive)
        else:
            members = None
        if members is None:
            raise _java(pattern, pos, f"Unknown Unicode property {{name=<{key}>, value=<{value}>}}")
    elif name.startswith("In"):
        members = javachars.block(name[2:])
    elif name.startswith("Is"):
        members = javachars.for_unicode_property(name[2:], case_insensitive)
        if members is None:
            members = javachars.for_property(name[2:], case_insensitive)
        if members is None:
            members = javachars.script(name[2:])
    else:
        members = javachars.for_posix_name(name, case_insensitive) if mode.unicode_class else None
        if members is None:
            members = javachars.for_property(name, case_insensitive)
    if members is None:
        raise _java(pattern, pos, f"Unknown character property name {{{name}}}")
    return (javachars.complement(members) if complement else members), end


def remove_qe_quoting(pattern: str) -> str:
    """``pattern`` with its ``\\Q...\\E`` quotes rewritten as Java 17's ``Pattern.RemoveQEQuoting``
    rewrites them before it parses: in a quote, ASCII letters and other characters as they are, a digit
    first in its quote as ``\\x3`` and the digit, other ASCII characters (a backslash too) escaped; an
    unclosed quote runs to the end."""
    if "\\Q" not in pattern:
        return pattern
    out: list[str] = []
    i, quoting, first = 0, False, False
    while i < len(pattern):
        char = pattern[i]
        i += 1
        if not char.isascii() or char.isalpha():
            out.append(char)
        elif char.isdigit():
            out.append("\\x3" + char if first else char)
        elif char != "\\":
            out.append("\\" + char if quoting else char)
        elif quoting:
            if pattern[i:i + 1] == "E":
                i += 1
                quoting = False
            else:
                out.append("\\\\")
        elif pattern[i:i + 1] == "Q":
            i += 1
            quoting, first = True, True
            continue
        else:
            out.append(char + pattern[i:i + 1])
            i += 1
        first = False
    return "".join(out)


class _Class:
    """A character class as Java 17's ``Pattern.clazz`` reads it, evaluated to its members.

    Mirrors its structure: nested classes are unions; ``&&`` intersects what came before with what
    follows up to ``]`` or the next ``&&`` (an empty side leaving the other, or the last member read
    before it); ``^`` first in a bracket complements the whole class; single characters and ranges are
    closed under ASCII case where CASE_INSENSITIVE is on (``bits.add``, ``CIRange``).
    """

    def __init__(self, pattern: str, mode: _Mode) -> None:
        self.pattern = pattern
        self.mode = mode
        self.ci = mode.case_insensitive
        self.i = 0

    def _peek(self) -> str:
        return self.pattern[self.i] if self.i < len(self.pattern) else ""

    def _member(self, members: CharSet) -> CharSet:
        return javachars.ascii_case_closed(members) if self.ci else members

    def parse(self, consume: bool) -> CharSet:
        """The class at ``self.i`` (its ``[`` where ``consume``, else the first member of a class body
        after ``&&``); leaves ``self.i`` after its ``]`` (at it, where not ``consume``)."""
        if consume:
            self.i += 1
        negate = False
        if self._peek() == "^" and self.pattern[self.i - 1] == "[":
            self.i += 1
            negate = True
        prev: CharSet | None = None
        curr: CharSet | None = None
        bits: CharSet = javachars.EMPTY
        has_bits = False
        while True:
            char = self._peek()
            if char == "[":
                curr = self.parse(True)
                prev = curr if prev is None else javachars.union(prev, curr)
                continue
            if char == "&" and self.pattern.startswith("&&", self.i):
                self.i += 2
                right: CharSet | None = None
                while self._peek() not in ("]", "&"):
                    if self._peek() == "":
                        raise _java(self.pattern, self.i, "Unclosed character class")
                    part = self.parse(self._peek() == "[")
                    right = part if right is None else javachars.union(right, part)
                if has_bits:
                    if prev is None:
                        prev = curr = bits
                    else:
                        prev = javachars.union(prev, bits)
                    has_bits = False
                if right is not None:
                    curr = right
                if prev is None:
                    if right is None:
                        raise _java(self.pattern, self.i, "Bad class syntax")
                    prev = right
                else:
                    assert curr is not None
                    prev = javachars.intersection(prev, curr)
                continue
            if char == "":
                raise _java(self.pattern, self.i, "Unclosed character class")
            if char == "]" and (prev is not None or has_bits):
                if consume:
                    self.i += 1
                if prev is None:
                    prev = bits
                elif has_bits:
                    prev = javachars.union(prev, bits)
                return javachars.complement(prev) if negate else prev
            single, members = self._range()
            if single:
                bits = javachars.union(bits, members)
                has_bits = True
            else:
                curr = members
                prev = curr if prev is None else javachars.union(prev, curr)

    def _range(self) -> tuple[bool, CharSet]:
        """One member at ``self.i`` (Java's ``range``): ``(True, its character)`` for a single character,
        ``(False, members)`` for a range, a class escape or a property."""
        start = self.i
        if self._peek() == "\\":
            kind = self.pattern[self.i + 1:self.i + 2]
            if kind in ("p", "P"):
                members, self.i = _family(self.pattern, self.i, self.mode)
                return False, members
            if kind.lower() in _CLASS_ESCAPES:
                self.i += 2
                members = javachars.unicode_class_escape(kind.lower()) \
                    if self.mode.unicode_class and kind.lower() in "dsw" else _CLASS_ESCAPES[kind.lower()]
                return False, javachars.complement(members) if kind.isupper() else members
            code, self.i = _char_escape(self.pattern, self.i, in_class=True)
        else:
            code = ord(self.pattern[self.i])
            self.i += 1
        if self._peek() == "-":
            after = self.pattern[self.i + 1:self.i + 2]
            if after not in ("[", "]"):
                self.i += 1
                if after == "\\" and self.pattern[self.i + 1:self.i + 2].lower() in ("d", "s", "w", "h", "v"):
                    last = -1
                elif after == "\\":
                    last, self.i = _char_escape(self.pattern, self.i, in_class=True)
                elif after == "":
                    raise _java(self.pattern, self.i, "Unclosed character class")
                else:
                    last = ord(after)
                    self.i += 1
                if last < code:
                    raise _java(self.pattern, start, "Illegal character range")
                return False, self._member(((code, last),))
        return True, self._member(((code, code),))


def _class_at(pattern: str, pos: int, mode: _Mode) -> tuple[str, int]:
    """The Python text of the character class at ``pattern[pos]`` (``[``) and where the pattern goes on."""
    parser = _Class(pattern, mode)
    parser.i = pos
    return javachars.python_class(parser.parse(True)), parser.i


def translate(pattern: str) -> str:
    """``pattern`` (Java's syntax) as the Python pattern matching the same text under :data:`re.ASCII`.

    :raises ConfigError: a construct Python cannot run alike, or one Java refuses.
    """
    pattern = remove_qe_quoting(pattern)
    out: list[str] = []
    #: per open group: how many scoped flag groups opened in it are still open
    scoped: list[int] = [0]
    #: per open group: the flag groups opened in it, to reopen after a ``|``
    flags: list[list[str]] = [[]]
    #: per open group: the flags on there now (classes, escapes and properties depend on them)
    case: list[_Mode] = [_Mode()]
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            text, i = _escape_at(pattern, i, case[-1])
            out.append(text)
        elif char == "[":
            text, i = _class_at(pattern, i, case[-1])
            out.append(text)
        elif char == "{":
            found = _QUANTIFIER.match(pattern, i)
            if found is None:
                raise _java(pattern, i, "Illegal repetition")
            out.append(found.group())
            i = found.end()
        elif char == "|":
            out.append(")" * scoped[-1] + "|" + "".join(flags[-1]))
            i += 1
        elif char == ")":
            out.append(")" * scoped[-1] + ")")
            if len(scoped) == 1:
                raise _refuse(pattern, i, "an unmatched ')'")
            scoped.pop()
            flags.pop()
            case.pop()
            i += 1
        elif char == "(":
            i = _open_group(pattern, i, out, scoped, flags, case)
        else:
            out.append(char)
            i += 1
    if len(scoped) > 1:
        raise _refuse(pattern, len(pattern), "an unclosed group")
    out.append(")" * scoped[-1])
    return "".join(out)


def _open_group(pattern: str, i: int, out: list[str], scoped: list[int], flags: list[list[str]],
                case: list[_Mode]) -> int:
    """Translate the group opening at ``pattern[i]``; return where the pattern goes on.  ``case``: per open
    group, the flags on there (a group starts with its enclosing group's; ``(?i)`` turns one on to the
    group's end, ``(?i:...)`` inside its own)."""
    if not pattern.startswith("(?", i):
        out.append("(")
        scoped.append(0)
        flags.append([])
        case.append(case[-1])
        return i + 1
    if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
        found = _GROUP_NAME.match(pattern, i + 3)
        if found is None or pattern[found.end():found.end() + 1] != ">":
            raise _refuse(pattern, i, "a malformed group name")
        out.append(f"(?P<{found.group()}>")
        scoped.append(0)
        flags.append([])
        case.append(case[-1])
        return found.end() + 1
    if pattern.startswith(("(?:", "(?=", "(?!", "(?>", "(?<=", "(?<!"), i):
        width = 4 if pattern.startswith("(?<", i) else 3
        out.append(pattern[i:i + width])
        scoped.append(0)
        flags.append([])
        case.append(case[-1])
        return i + width
    found = _FLAGS.match(pattern, i)
    if found is None:
        raise _refuse(pattern, i, f"the group {pattern[i:i + 4]!r}..., which Java's Pattern refuses")
    on, off, kind = found.group(1), found.group(2) or "", found.group(3)
    for flag in on + off:
        if flag not in "idmsuU":
            raise _refuse(pattern, i, f"the inline flag {flag!r} (segstore translates i, d, m, s, u and U)")
    mode = _flagged(case[-1], on, off)
    if mode.case_insensitive and mode.unicode_case:
        raise _refuse(pattern, i, "CASE_INSENSITIVE with UNICODE_CASE (the inline flags i and u or U): "
                                  "Unicode case folding, which segstore does not translate")
    # d (UNIX_LINES) only changes which line terminators . ^ $ see: a topic name holds none; u and U are the
    # mode (what \w... and classes are translated to), no flag of Python's re
    on, off = (re.sub("[duU]", "", text) for text in (on, off))
    opener = f"(?{on}{'-' + off if off else ''}:" if on or off else "(?:"
    if kind == ":":
        out.append(opener)
        scoped.append(0)
        flags.append([])
        case.append(mode)
    else:
        # (?i) holds to the end of the enclosing group, the alternatives after a | included
        out.append(opener)
        scoped[-1] += 1
        flags[-1].append(opener)
        case[-1] = mode
    return found.end()


def _flagged(mode: _Mode, on: str, off: str) -> _Mode:
    """``mode`` with the inline flags ``on`` set and ``off`` cleared, as Java 17's ``Pattern.addFlag`` /
    ``subFlag`` (``U`` sets and clears UNICODE_CASE with UNICODE_CHARACTER_CLASS)."""
    ci, unicode_class, unicode_case = mode
    for flag in on:
        ci = ci or flag == "i"
        unicode_class = unicode_class or flag == "U"
        unicode_case = unicode_case or flag in "uU"
    for flag in off:
        ci = ci and flag != "i"
        unicode_class = unicode_class and flag != "U"
        unicode_case = unicode_case and flag not in "uU"
    return _Mode(ci, unicode_class, unicode_case)


def compile_java(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled as Java's ``Pattern.compile`` would read it (see the module's notes).

    :raises ConfigError: a pattern Java refuses, or one that cannot run alike here.
    """
    try:
        return re.compile(translate(pattern), re.ASCII)
    except re.error as err:
        raise ConfigError(f"option subscribePattern must be a regular expression, found {pattern!r}: "
                          f"{err}") from err
