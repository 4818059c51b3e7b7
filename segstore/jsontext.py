"""The one parse boundary for JSON text segstore is given (options, environment, small files), and
:func:`dumps`, the JSON text its ``--json`` output writes.

``json.loads`` fails in more ways than ``JSONDecodeError``: deep nesting raises
``RecursionError``, an integer of more than 4,300 digits ``ValueError``; a value
of the wrong shape fails later, far from its source.  :func:`loads` and
:func:`loads_object` turn every one of those into the caller's
:class:`~segstore.errors.SegstoreError` subclass with the caller's wording, and
cut echoed text to a readable length.  Thread-safe (no state).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .errors import ConfigError, SegstoreError, cut


def loads(text: str | bytes, what: str, *, path: str | os.PathLike[str] | None = None,
          error: type[SegstoreError] = ConfigError) -> Any:
    """``text`` parsed as JSON; any failure is ``error("<what>, found <text>", path)``.

    ``what`` says what was expected (``"option config must be a JSON object"``).
    ``O(len(text))``.
    """
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError, UnicodeDecodeError) as err:
        raise error(f"{what}, found {cut(text)}", path) from err


def loads_object(text: str | bytes, what: str, *, path: str | os.PathLike[str] | None = None,
                 error: type[SegstoreError] = ConfigError) -> dict[str, Any]:
    """:func:`loads` for text that must hold a JSON object."""
    value = loads(text, what, path=path, error=error)
    if not isinstance(value, dict):
        raise error(f"{what}, found {cut(text)}", path)
    return value


class _Digits(str):
    """An integer's text that ``int()`` refuses (past ``sys.get_int_max_str_digits()``, 4,300 digits)."""


def _first_digits(value: Any, at: str) -> str | None:
    """Where in ``value`` its first :class:`_Digits` stands (``partition``, ``messages[0].queueId``)."""
    if isinstance(value, _Digits):
        return at
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        name = (f"{at}.{key}" if at else key) if isinstance(key, str) else f"{at}[{key}]"
        found = _first_digits(item, name)
        if found is not None:
            return found
    return None


def too_long_number(text: str) -> str | None:
    """What refused ``text`` if ``json.loads`` raised Python's "Exceeds the limit (4300 digits) for integer
    string conversion" (with advice to call ``sys.set_int_max_str_digits``: nothing a user of segstore
    can do): ``"a number of N digits at NAME"``, NAME the field holding the first such integer
    (``partition``, ``messages[0].queueId``; left out where the rest of ``text`` does not parse), else
    ``None``.  No field segstore reads holds more than a Java long (19 digits).  ``O(len(text))``, for
    the error path."""
    seen: list[str] = []

    def parse_int(digits: str) -> int | str:
        try:
            return int(digits)
        except ValueError:
            seen.append(digits)
            return _Digits(digits)

    try:
        at = _first_digits(json.JSONDecoder(parse_int=parse_int).decode(text), "")
    except (ValueError, RecursionError):
        at = None
    if not seen:
        return None
    return f"a number of {len(seen[0].lstrip('-'))} digits" + (f" at {at}" if at else "")


#: A lone surrogate: a str decoded from stored bytes with ``surrogatepass`` (RocketMQ properties keep
#: ``ED A0 80``... so that what is stored is written back byte for byte) may hold one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any, *, sort_keys: bool = False) -> str:
    """``obj`` as ``json.dumps(obj, ensure_ascii=False)`` writes it, but a lone surrogate escaped
    (``\\ud800``), as ``ensure_ascii=True`` escapes it: text that encodes as UTF-8, so a strict
    reader (Jackson, ``jq``, ``json.loads`` of a line read as UTF-8) takes every line, and
    ``json.loads`` gives the same str back.  Surrogates stand only inside strings.  ``O(len)``.
    """
    text = json.dumps(obj, ensure_ascii=False, sort_keys=sort_keys)
    if text.isascii():
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
