"""The entry points of one group, listed without importing :mod:`importlib.metadata`.

``importlib.metadata`` costs 45-60 ms to import (it pulls in ``email``, ``zipfile``, ``csv`` and
more), a fifth of what ``segstore info`` may take in all (issue 31: 0.25 s).  What the registry
needs of it is small: the ``[segstore.formats]`` section of every installed distribution's
``entry_points.txt``.  :func:`group` reads exactly that, the way ``importlib.metadata`` finds it for
the standard path finder: each ``sys.path`` directory (``''`` is the working directory) in order,
its ``*.dist-info`` and ``*.egg-info`` directories, the first distribution of a normalized name
winning.  Where something else could add distributions (a ``sys.path`` entry that is a zip file, a
meta-path finder with its own ``find_distributions``) it hands over to ``importlib.metadata``.

The file's layout (``importlib.metadata``'s ``Sectioned``): ``[group]`` headers; ``name = value``
lines; blank lines and lines starting ``#`` or ``;`` ignored; a value is ``module[:attr[.attr]]``,
optionally followed by ``[extras]``.

Thread-safety: pure functions over the file system; safe from any thread.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

_SUFFIXES = (".dist-info", ".egg-info")
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


class EntryPoint:
    """One entry point: ``name = value`` in ``group`` of the distribution in ``path``."""

    __slots__ = ("_path", "group", "name", "value")

    def __init__(self, name: str, value: str, group: str, path: str | None) -> None:
        self.name, self.value, self.group, self._path = name, value, group, path

    def load(self) -> Any:
        """The object the value names, its module imported (``ImportError`` as the import raises it)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"expected an entry point value module:attr, found {self.value!r}")
        found: Any = importlib.import_module(match.group("module"))
        for attr in (match.group("attr") or "").split("."):
            if attr:
                found = getattr(found, attr)
        return found

    @property
    def distribution(self) -> str | None:
        """``name version`` of the distribution that declares it, from its metadata headers."""
        if self._path is None:
            return None
        headers: dict[str, str] = {}
        for file in ("METADATA", "PKG-INFO"):
            try:
                with open(os.path.join(self._path, file), encoding="utf-8") as f:
                    for line in f:
                        if not line.strip():
                            break       # the headers end at the first blank line
                        key, sep, value = line.partition(":")
                        if sep and key in ("Name", "Version"):
                            headers.setdefault(key, value.strip())
                break
            except OSError:
                continue
        return f"{headers.get('Name', '?')} {headers.get('Version', '?')}"

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _normalized(stem: str) -> str:
    """The distribution name a ``*.dist-info`` / ``*.egg-info`` directory stem stands for (PEP 503: each
    run of ``-``, ``_`` and ``.`` one ``_``; the name has no ``-``, which ends it), without a regular
    expression (one per distribution on the path)."""
    name = stem.partition("-")[0].replace(".", "_").lower()
    while "__" in name:
        name = name.replace("__", "_")
    return name


def _plain_path() -> bool:
    """Whether the standard path finder alone finds the distributions, over directories alone."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and getattr(finder, "find_distributions", None) is not None:
            return False
    for entry in sys.path:
        if isinstance(entry, str) and os.path.isfile(entry or "."):
            return False
    return True


def _sections(text: str, wanted: str) -> Iterator[tuple[str, str]]:
    group = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
            continue
        if group == wanted:
            name, sep, value = line.partition("=")
            if sep:
                yield name.strip(), value.strip()


def group(wanted: str) -> list[Any]:
    """Every entry point of group ``wanted`` over the installed distributions, in ``sys.path`` order
    (each distribution once: the first of its normalized name).  ``O(directories on sys.path)``:
    one directory listing each, one small read per distribution that has entry points."""
    if not _plain_path():
        from importlib.metadata import entry_points

        return list(entry_points(group=wanted))
    seen: set[str] = set()
    found: list[Any] = []
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        root = entry or "."
        try:
            # os.path.splitext's extension one of _SUFFIXES in any case, found without calling it for each
            # of the hundreds of files of site-packages and the standard library (nor sorting them)
            names = sorted(child for child in os.listdir(root) if child.lower().endswith(_SUFFIXES))
        except OSError:
            continue
        prefix = os.path.join(root, "")     # os.path.join(root, child) for each child, without a call each
        for child in names:
            stem = child[:child.rindex(".")]
            if not stem.strip("."):
                continue    # ".dist-info", "..dist-info": splitext sees a name of dots, no extension
            key = _normalized(stem)
            if key in seen:
                continue
            seen.add(key)
            dist = prefix + child
            path = f"{dist}{os.sep}entry_points.txt"
            if not os.access(path, os.R_OK):
                continue    # most distributions have none: asked without raising (and catching) an error
            try:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8")
            except OSError:
                continue
            if wanted not in text:
                continue    # (its header holds the name: most files name only other groups)
            found.extend(EntryPoint(name, value, wanted, dist) for name, value in _sections(text, wanted))
    return found
