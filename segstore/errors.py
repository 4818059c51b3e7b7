"""The one exception hierarchy of segstore.

Every error segstore raises on purpose is a :class:`SegstoreError`.  Low-level
errors (``struct.error``, ``OSError``, ``zlib.error``, codec errors) become one of
these at one boundary, with ``raise ... from err``.  Each class also inherits
from the builtin a caller would already catch (``ValueError``, ``OSError``,
``LookupError``...), so existing ``except`` clauses keep working.

Messages render as ``path:pos: what was expected, what was found`` whenever a
file and a byte position are known, like a compiler error, so that a user can
jump straight to the byte.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

#: Characters of a value from a file that an error message shows (a value may be a megabyte long).
MAX_SHOWN = 120


def cut(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` cut to ``limit`` characters, saying how much was left out.

    For values read from files in error messages: a damaged length can make a
    name or a line a million characters long, and a message must stay readable.
    ``O(limit)`` for ``str``/``bytes`` (only the shown part is formatted).
    """
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        size = len(value)
        if size <= limit:
            return repr(bytes(value) if isinstance(value, memoryview) else value)
        head = value[:limit]
        shown = repr(bytes(head) if isinstance(head, memoryview) else head)
        return f"{shown}... ({size - limit} more {'characters' if isinstance(value, str) else 'bytes'})"
    if isinstance(value, int) and not isinstance(value, bool) and _too_long(value):
        return shown_number(value)     # repr() of one past 4,300 digits raises ValueError
    try:
        text = repr(value)
    except ValueError:      # a container holding an int past 4,300 digits
        return f"{type(value).__name__} holding a number of more than 4300 digits"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def digits(value: int) -> int:
    """The decimal digits of ``value`` (its sign not counted), for an int too long for ``str()`` (Python
    refuses more than ``sys.get_int_max_str_digits()``, 4,300): from its bit length, ``O(digits)``."""
    size = abs(value)
    count = int((max(size.bit_length(), 1) - 1) * 0.30102999566398120) + 1    # log10(2)
    return count + 1 if size >= 10 ** count else count


#: The most digits of an integer an error message writes whole: any 64-bit value, signed or not, so a
#: number just past a Java long reads as it was given.  A longer one is named by its digit count: hundreds
#: of digits bury the message (and ``str()`` refuses past 4,300).
MAX_SHOWN_DIGITS = 20


def _too_long(value: int) -> bool:
    return value.bit_length() > 64 and digits(value) > MAX_SHOWN_DIGITS


def shown_number(value: Any) -> str:
    """A number as an error message shows it: ``str(value)``, but an integer of more than
    :data:`MAX_SHOWN_DIGITS` digits ``a number of N digits``.  ``O(1)`` but for such a number
    (``O(digits)``)."""
    if isinstance(value, int) and _too_long(value):
        return f"a number of {digits(value)} digits"
    return str(value)


def shown_text(text: str) -> str:
    """A text given for a number (an option's, a config value) as its refusal shows it: a whole number of
    more than :data:`MAX_SHOWN_DIGITS` digits by its digit count (as :func:`shown_number`), anything
    else as :func:`cut` shows it.  ``O(len(text))``."""
    digits_only = text.strip().lstrip("+-")
    if digits_only.isascii() and digits_only.isdigit() and len(digits_only) > MAX_SHOWN_DIGITS:
        return f"a number of {len(digits_only)} digits"
    return cut(text)


def shown(value: Any) -> str:
    """``value`` as a JSON line shows it, naming its kind, for an error about a value of the wrong kind:
    ``the number 65536`` (not ``'65536'``), ``'x'`` (a string quoted, as :func:`cut` shows it), ``null``,
    ``true``, ``an array [1]``, ``an object {...}``, else the Python type and :func:`cut`.  An integer of
    more than :data:`MAX_SHOWN_DIGITS` digits is ``a number of N digits`` (:func:`shown_number`).
    ``O(MAX_SHOWN)`` but for such a number."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int) and _too_long(value):
        return shown_number(value)
    if isinstance(value, (int, float)):
        return f"the number {cut(value)}"
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, (list, tuple)):
        return f"an array {cut(list(value))}"
    if isinstance(value, dict):
        return f"an object {cut(value)}"
    return f"{type(value).__name__} {cut(value)}"


#: The byte no path can hold: the kernel's calls take C strings, and Python refuses one before any call
#: (``ValueError: embedded null byte``); a terminal shows it as nothing, or as a space.
NUL = "\x00"


def shown_path(path: str) -> str:
    """``path`` as a message shows it: as given, but a NUL byte written ``\\x00``, as :func:`cut` writes it
    (printed raw, the user read ``/tmp/a b`` for ``/tmp/a\\x00b``).  ``O(len(path))``."""
    return path.replace(NUL, "\\x00") if NUL in path else path


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'X'?)"`` for the name of ``known`` closest to ``name``, else ``""``: for the
    messages that refuse an unknown config or option name (a typo names what was meant).  Closest: the
    same name but for case and separators (``.``, ``_``, ``-``), else the most alike by
    ``difflib`` (a ratio of at least 0.75).  ``O(len(known))`` comparisons."""
    def key(text: str) -> str:
        return text.lower().replace(".", "").replace("_", "").replace("-", "")

    names = {key(k): k for k in sorted(known)}
    wanted = key(name)
    if wanted in names:
        return f" (did you mean {names[wanted]!r}?)"
    import difflib  # only when a name is refused: the command's start-up does not pay for it

    close = difflib.get_close_matches(wanted, list(names), n=1, cutoff=0.75)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


class SegstoreError(Exception):
    """Base class of every error segstore raises on purpose.

    :param message: what was expected and what was found.
    :param path: the file (or directory) concerned, if any.
    :param pos: the byte position in ``path``, if known.
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None,
                 pos: int | None = None) -> None:
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.pos = pos
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        path = shown_path(self.path)
        if self.pos is None:
            return f"{path}: {self.message}"
        return f"{path}:{self.pos}: {self.message}"

    def __reduce__(self):  # picklable across Spark executors and processes
        return (self.__class__, (self.message, self.path, self.pos))


class CorruptDataError(SegstoreError, ValueError):
    """Bytes on disk do not decode as the format says they must."""


class TruncatedDataError(CorruptDataError):
    """A record, entry or header runs past the end of the bytes available."""


class CorruptIndexError(CorruptDataError):
    """An index file is inconsistent with itself or with the log it indexes."""


class UnrepairedDataError(CorruptDataError):
    """``recover`` did what it could, and damage remains that it cannot cut without losing intact
    records after it (it keeps every byte it cannot check).

    :param actions: one line per action recovery took (what ``recover`` would have returned).
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None, pos: int | None = None,
                 actions: list[str] | None = None) -> None:
        self.actions = list(actions or [])
        super().__init__(message, path, pos)

    def __reduce__(self):
        return (self.__class__, (self.message, self.path, self.pos, self.actions))


class WrongFormatError(SegstoreError, ValueError):
    """A path holds another format than the one asked for (or none known)."""


class FormatNotFoundError(SegstoreError, LookupError):
    """No format plugin of that name is registered."""


class MissingDependencyError(SegstoreError, ImportError):
    """An optional dependency a feature needs is not installed."""


class ConfigError(SegstoreError, ValueError):
    """A config name is unknown or its value is out of range."""


class InvalidMessageError(SegstoreError, ValueError):
    """A message or record the format cannot represent (bad field values)."""


class InvalidTopicError(InvalidMessageError):
    """A topic (or partition directory) name the format does not allow."""


class MessageTooLargeError(InvalidMessageError):
    """A message is larger than the store's ``maxMessageSize`` / segment allows."""


class OffsetOutOfRangeError(SegstoreError, IndexError):
    """An offset outside what the log holds."""


class NotFoundError(SegstoreError, LookupError):
    """A topic, queue, partition or file that does not exist."""


class StoreLockedError(SegstoreError, BlockingIOError):
    """Another process holds the store's writer lock."""


class ReadOnlyError(SegstoreError, PermissionError):
    """A write was attempted on a store opened for reading."""


class StoreClosedError(SegstoreError, ValueError):
    """An operation on a store (or file) that was already closed."""


class StorageFullError(SegstoreError, OSError):
    """The disk is full (ENOSPC / EDQUOT), or a file would pass the largest size allowed (EFBIG: the
    process's ``ulimit -f`` or the file system's limit); nothing acknowledged was lost."""


class OutOfMemoryError(SegstoreError, MemoryError):
    """The process could not get the memory an operation needs (a new thread's stack or its first
    objects): its address space is capped (``ulimit -v``, ``RLIMIT_AS``) or the system's memory is
    committed (``vm.overcommit_memory=2``).  Nothing acknowledged was lost."""


class StorageIOError(SegstoreError, OSError):
    """Any other operating-system error while reading or writing a file."""


class UnsupportedOperationError(SegstoreError, NotImplementedError):
    """The format or index layout does not offer this capability."""


class ConversionError(SegstoreError, ValueError):
    """A conversion between formats cannot proceed (destination exists, mixed input...)."""


class ConversionOptionError(ConversionError, ConfigError):
    """A conversion's options do not go together (a compression its target lacks, a setting its
    source has no use for): a :class:`ConfigError` too, so the command line calls it a usage error."""


def check_path(path: str, what: str, error: type[SegstoreError] = ConfigError) -> str:
    """``path`` as given, or ``error`` (a :class:`ConfigError` by default) where it holds a NUL byte,
    before any call to the system takes it (Python's ``embedded null byte`` ``ValueError``, or
    ``os.path.exists``' False: "no such file or directory").  The message names the path with the byte
    escaped (:func:`shown_path`).  ``what``: the path's part, ``"a store path"``.  ``O(len(path))``."""
    at = path.find(NUL)
    if at >= 0:
        raise error(f"expected {what} without a NUL byte (no file system takes one), found one at character "
                    f"{at}", path)
    return path
