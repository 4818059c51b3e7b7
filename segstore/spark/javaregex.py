"""A ``java.util.regex.Pattern`` as Python's :mod:`re` can run it: the ``subscribePattern`` of Spark's Kafka
connector, which compiles the option with Java's ``Pattern`` (Scala's ``topicPattern.r``) and takes the
topics it finds a match in (Spark 4 ConsumerStrategy.scala, SubscribePatternStrategy.assignedTopicPartitions:
``topicRegex.findFirstIn(name)``, a search, not a whole-name match).

Java's syntax is translated where Python's reads the same text otherwise, or not at all:

- ``\\Q...\\E`` quotes; ``(?<name>...)`` and ``\\k<name>`` are Python's ``(?P<name>...)`` and ``(?P=name)``;
- ``\\w``, ``\\d``, ``\\s``, ``\\b`` and ``(?i)`` are ASCII in Java unless asked otherwise (compiled with
  :data:`re.ASCII`);
- ``\\z`` is Python's ``\\Z``, Java's ``\\Z`` allows a final line terminator; ``\\h``, ``\\v``, ``\\R``,
  ``\\e``, ``\\cX``, ``\\0ooo`` (octal), ``\\x{h...h}`` and the POSIX classes ``\\p{Alpha}``... (ASCII in
  Java) are spelled out;
- an inline flag group ``(?i)`` after the start applies from there to the end of its group, every
  alternative after it included (Python takes global flags only at the start): scoped groups carry it.

What Python cannot express the same way is a :class:`ConfigError` naming it, never a different match:
nested classes and intersections (``[a[b]]``, ``[a-z&&[^b]]``), Unicode properties and scripts (``\\p{L}``,
``\\p{IsLatin}``), the flags ``u``, ``U``, ``x`` and ``\\G``, ``\\X``, ``\\N{...}``; and text Java's
``Pattern.compile`` refuses (a ``{`` that starts no repetition, ``(?P...)``, ``(?#...)``, an escaped
letter Java gives no meaning) is refused too.  Pure; thread-safe.
"""

from __future__ import annotations

import re

from ..errors import ConfigError

#: Java's POSIX character classes (``java.util.regex.Pattern``: US-ASCII only), as class members.
_POSIX = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\\x00-\\x7f", "Alpha": "a-zA-Z", "Digit": "0-9",
    "Alnum": "a-zA-Z0-9", "Punct": "!-/:-@\\[-`{-~", "Graph": "!-~", "Print": " -~", "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f", "XDigit": "0-9a-fA-F", "Space": " \\t\\n\\x0b\\f\\r",
}
#: ``\h`` (horizontal) and ``\v`` (vertical whitespace) of Java 8+, as class members.
_HORIZONTAL = " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"
_VERTICAL = "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"
#: Escapes both read alike (with :data:`re.ASCII`).
_SAME = set("dDsSwWbBAtnrfa")
_GROUP_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9]*")
_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def _refuse(pattern: str, pos: int, what: str) -> ConfigError:
    return ConfigError(f"option subscribePattern: {pattern!r}:{pos}: expected a Java regular expression "
                       f"segstore can run, found {what}")


def _escape(char: str) -> str:
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}" if ord(char) < 0x10000 \
        else f"\\U{ord(char):08x}"


def _escape_at(pattern: str, pos: int, in_class: bool) -> tuple[str, int]:
    """The Python text of the escape at ``pattern[pos]`` (a backslash) and where the pattern goes on."""
    if pos + 1 >= len(pattern):
        raise _refuse(pattern, pos, "a trailing backslash")
    char = pattern[pos + 1]
    end = pos + 2
    if char in _SAME or (char.isdigit() and char != "0" and not in_class):
        return "\\" + char, end
    if char == "0":
        digits = re.match(r"[0-7]{1,3}", pattern[end:])
        if digits is None:
            raise _refuse(pattern, pos, "\\0 with no octal digit")
        text = digits.group()
        if len(text) == 3 and text[0] > "3":
            text = text[:2]
        return _escape(chr(int(text, 8))), end + len(text)
    if char == "x" and pattern[end:end + 1] == "{":
        close = pattern.find("}", end)
        if close < 0 or not re.fullmatch(r"[0-9a-fA-F]+", pattern[end + 1:close]) \
                or int(pattern[end + 1:close], 16) > 0x10FFFF:
            raise _refuse(pattern, pos, "a malformed \\x{...}")
        return _escape(chr(int(pattern[end + 1:close], 16))), close + 1
    if char in "xu":
        return "\\" + char, end
    if char == "e":
        return "\\x1b", end
    if char == "c":
        if end >= len(pattern):
            raise _refuse(pattern, pos, "\\c with no character")
        return _escape(chr(ord(pattern[end]) ^ 64)), end + 1
    if char == "z" and not in_class:
        return "\\Z", end
    if char == "Z" and not in_class:
        return "(?=(?:\\r\\n|[\\n\\r\\x85\\u2028\\u2029])?\\Z)", end
    if char in "hHvV":
        members = _HORIZONTAL if char in "hH" else _VERTICAL
        negated = char.isupper()
        if in_class:
            if negated:
                raise _refuse(pattern, pos, f"\\{char} inside a character class")
            return members, end
        return f"[{'^' if negated else ''}{members}]", end
    if char == "R" and not in_class:
        return f"(?:\\r\\n|[{_VERTICAL}])", end
    if char == "k" and not in_class:
        found = re.match(r"<([a-zA-Z][a-zA-Z0-9]*)>", pattern[end:])
        if found is None:
            raise _refuse(pattern, pos, "a malformed \\k<name>")
        return f"(?P={found.group(1)})", end + found.end()
    if char in "pP":
        found = re.match(r"\{(\w+)\}|([A-Za-z])", pattern[end:])
        name = (found.group(1) or found.group(2)) if found is not None else ""
        posix = _POSIX.get(name.removeprefix("Is"))
        if found is None or posix is None:
            raise _refuse(pattern, pos, f"the character property \\{char}{pattern[end:end + 12]!r} (only the "
                                        "POSIX classes \\p{Alpha}, \\p{Digit}... translate)")
        if in_class:
            if char == "P":
                raise _refuse(pattern, pos, "\\P inside a character class")
            return posix, end + found.end()
        return f"[{'^' if char == 'P' else ''}{posix}]", end + found.end()
    if char.isascii() and char.isalnum():
        raise _refuse(pattern, pos, f"the escape \\{char}, which Java's Pattern gives no meaning here or "
                                    "segstore does not translate")
    return "\\" + char, end


def _quoted(pattern: str, pos: int) -> tuple[str, int]:
    """The literal text of ``\\Q...\\E`` at ``pattern[pos]`` (to ``\\E`` or the end), escaped."""
    close = pattern.find("\\E", pos + 2)
    stop = len(pattern) if close < 0 else close
    return "".join(_escape(c) for c in pattern[pos + 2:stop]), stop if close < 0 else close + 2


def _class_at(pattern: str, pos: int) -> tuple[str, int]:
    """The Python text of the character class at ``pattern[pos]`` (``[``) and where the pattern goes on."""
    out = ["["]
    i = pos + 1
    if pattern[i:i + 1] == "^":
        out.append("^")
        i += 1
    first = True
    while i < len(pattern):
        char = pattern[i]
        if char == "]" and not first:
            out.append("]")
            return "".join(out), i + 1
        if char == "[":
            raise _refuse(pattern, i, "a nested character class (a union in Java)")
        if pattern.startswith("&&", i):
            raise _refuse(pattern, i, "a character class intersection (&&)")
        if pattern.startswith("\\Q", i):
            text, i = _quoted(pattern, i)
            out.append(text)
        elif char == "\\":
            text, i = _escape_at(pattern, i, in_class=True)
            out.append(text)
        else:
            out.append(_escape(char) if char in "]^" else char)
            i += 1
        first = False
    raise _refuse(pattern, pos, "an unclosed character class")


def translate(pattern: str) -> str:
    """``pattern`` (Java's syntax) as the Python pattern matching the same text under :data:`re.ASCII`.

    :raises ConfigError: a construct Python cannot run alike, or one Java refuses.
    """
    out: list[str] = []
    #: per open group: how many scoped flag groups opened in it are still open
    scoped: list[int] = [0]
    #: per open group: the flag groups opened in it, to reopen after a ``|``
    flags: list[list[str]] = [[]]
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("\\Q", i):
            text, i = _quoted(pattern, i)
            out.append(text)
        elif char == "\\":
            text, i = _escape_at(pattern, i, in_class=False)
            out.append(text)
        elif char == "[":
            text, i = _class_at(pattern, i)
            out.append(text)
        elif char == "{":
            found = _QUANTIFIER.match(pattern, i)
            if found is None:
                raise _refuse(pattern, i, "a '{' that starts no repetition {n}, {n,} or {n,m}")
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
            i += 1
        elif char == "(":
            i = _open_group(pattern, i, out, scoped, flags)
        else:
            out.append(char)
            i += 1
    if len(scoped) > 1:
        raise _refuse(pattern, len(pattern), "an unclosed group")
    out.append(")" * scoped[-1])
    return "".join(out)


def _open_group(pattern: str, i: int, out: list[str], scoped: list[int], flags: list[list[str]]) -> int:
    """Translate the group opening at ``pattern[i]``; return where the pattern goes on."""
    if not pattern.startswith("(?", i):
        out.append("(")
        scoped.append(0)
        flags.append([])
        return i + 1
    if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
        found = _GROUP_NAME.match(pattern, i + 3)
        if found is None or pattern[found.end():found.end() + 1] != ">":
            raise _refuse(pattern, i, "a malformed group name")
        out.append(f"(?P<{found.group()}>")
        scoped.append(0)
        flags.append([])
        return found.end() + 1
    if pattern.startswith(("(?:", "(?=", "(?!", "(?>", "(?<=", "(?<!"), i):
        width = 4 if pattern.startswith("(?<", i) else 3
        out.append(pattern[i:i + width])
        scoped.append(0)
        flags.append([])
        return i + width
    found = _FLAGS.match(pattern, i)
    if found is None:
        raise _refuse(pattern, i, f"the group {pattern[i:i + 4]!r}..., which Java's Pattern refuses")
    on, off, kind = found.group(1), found.group(2) or "", found.group(3)
    for flag in on + off:
        if flag not in "idms":
            raise _refuse(pattern, i, f"the inline flag {flag!r} (segstore translates i, d, m and s)")
    # d (UNIX_LINES) only changes which line terminators . ^ $ see: a topic name holds none
    on, off = on.replace("d", ""), off.replace("d", "")
    opener = f"(?{on}{'-' + off if off else ''}:" if on or off else "(?:"
    if kind == ":":
        out.append(opener)
        scoped.append(0)
        flags.append([])
    else:
        # (?i) holds to the end of the enclosing group, the alternatives after a | included
        out.append(opener)
        scoped[-1] += 1
        flags[-1].append(opener)
    return found.end()


def compile_java(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled as Java's ``Pattern.compile`` would read it (see the module's notes).

    :raises ConfigError: a pattern Java refuses, or one that cannot run alike here.
    """
    try:
        return re.compile(translate(pattern), re.ASCII)
    except re.error as err:
        raise ConfigError(f"option subscribePattern must be a regular expression, found {pattern!r}: "
                          f"{err}") from err
