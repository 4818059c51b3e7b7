"""The format registry: entry points of group ``segstore.formats``.

Entry points are *listed* when first needed and *loaded* on first use of a name,
so importing segstore never imports a plugin (nor its optional dependencies).
Built-in formats register exactly as third-party ones do, in ``pyproject.toml``.
Two plugins claiming one name is an error, never a silent choice.

The entry points are read the way ``importlib.metadata.entry_points(group=...)``
finds them, without importing it where sys.path holds only directories (20 ms a
command such as ``segstore info`` waits for: importlib.metadata imports email,
zipfile, csv...); see :func:`_scan`.  Anywhere else importlib.metadata lists them.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import (
    FormatNotFoundError,
    MissingDependencyError,
    NotFoundError,
    SegstoreError,
    WrongFormatError,
)
from .plugin import FormatPlugin

if TYPE_CHECKING:
    from importlib.metadata import Distribution, EntryPoint

GROUP = "segstore.formats"

_entry_points: dict[str, EntryPoint | Declared] | None = None
_loaded: dict[str, FormatPlugin] = {}


@dataclass(frozen=True)
class Declared:
    """An entry point as a distribution's ``entry_points.txt`` declares it: what
    ``importlib.metadata.EntryPoint`` holds (``name``, ``value`` and ``group``, :meth:`load`,
    :attr:`dist`), read by :func:`_scan`."""

    name: str
    value: str
    group: str
    #: the ``.dist-info`` / ``.egg-info`` directory it was read from
    path: str

    # importlib.metadata.EntryPoint.pattern
    _PATTERN = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")

    def load(self) -> Any:
        """The object the value names (``module:attr``), imported as ``EntryPoint.load`` does."""
        match = self._PATTERN.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} of {self.path}: not a module:attr, found "
                             f"{self.value!r}")
        obj = importlib.import_module(match.group("module"))
        for attr in (match.group("attr") or "").split("."):
            if attr:
                obj = getattr(obj, attr)
        return obj

    @property
    def dist(self) -> Distribution:
        """The distribution that declares it (importlib.metadata's, read on demand)."""
        import pathlib
        from importlib.metadata import PathDistribution

        return PathDistribution(pathlib.Path(self.path))


def _normalize(name: str) -> str:
    """A distribution name as importlib.metadata compares them (``Prepared.normalize``)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _scan(group: str) -> list[Declared] | None:
    """The entry points of ``group``, found as ``importlib.metadata.entry_points(group=group)`` finds
    them: the ``*.dist-info`` and ``*.egg-info`` entries of each sys.path directory in order (a
    directory's entries grouped by distribution name, first seen first), the first distribution of
    each name only, each one's ``entry_points.txt`` sections.  ``O(entries of the sys.path
    directories)`` plus one small file read per distribution.

    None where the path finder's view may differ from this one: a zip or egg on sys.path, an info
    entry named in other letter case, or a distribution finder other than the path finder; the
    caller asks importlib.metadata then.  Unlike it, a malformed ``entry_points.txt`` of a
    distribution that declares nothing in ``group`` is not read, so not refused.
    """
    from importlib.machinery import PathFinder

    if any(getattr(finder, "find_distributions", None) is not None and finder is not PathFinder
           for finder in sys.meta_path):
        return None
    header = f"[{group}]"
    seen: set[str] = set()
    found: list[Declared] = []
    for entry in sys.path:
        root = entry or "."
        if root.lower().endswith(".egg"):
            return None
        try:
            children = os.listdir(root)
        except NotADirectoryError:
            return None         # a zip: importlib.metadata reads those
        except OSError:
            continue            # missing or unreadable: nothing found there (as importlib.metadata)
        names: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            if not child.endswith((".dist-info", ".egg-info")):
                return None     # importlib.metadata names those by their metadata: ask it
            names.setdefault(_normalize(low.rpartition(".")[0].partition("-")[0]), []).append(child)
        for name, infos in names.items():
            for child in infos:
                if name in seen:
                    continue
                seen.add(name)
                path = os.path.join(entry, child)
                try:
                    with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as f:
                        text = f.read()
                except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
                    continue
                if header in text:
                    found.extend(_declared(text, group, path))
    return found


def _declared(text: str, group: str, path: str) -> list[Declared]:
    """The ``group`` section of an ``entry_points.txt`` (importlib.metadata's ``Sectioned`` reading:
    stripped lines, ``#`` comments, ``[section]`` headers, ``name = value``)."""
    out = []
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section == group:
            name, value = map(str.strip, line.split("=", 1))
            out.append(Declared(name, value, group, path))
    return out


def _listed() -> dict[str, EntryPoint | Declared]:
    global _entry_points
    if _entry_points is None:
        found: dict[str, EntryPoint | Declared] = {}
        scanned = _scan(GROUP)
        declared: list[EntryPoint | Declared]
        if scanned is None:
            from importlib.metadata import entry_points

            declared = list(entry_points(group=GROUP))
        else:
            declared = list(scanned)
        for ep in declared:
            other = found.get(ep.name)
            if other is not None and other.value != ep.value:
                raise SegstoreError(f"two plugins claim the format name {ep.name!r}: "
                                    f"{other.value} and {ep.value}; uninstall one")
            found[ep.name] = ep
        _entry_points = found
    return _entry_points


def names() -> list[str]:
    """Names of every registered format, sorted."""
    return sorted(set(_listed()) | set(_loaded))


@dataclass(frozen=True)
class Listed:
    """A registered format as its entry point names it (nothing imported)."""

    name: str
    value: str                 # ``module:Class``
    #: ``name version`` of the package that declares it; None when registered in code.
    distribution: str | None


def available() -> list[Listed]:
    """Every registered format, sorted by name, without importing any plugin."""
    rows = []
    for name in names():
        ep = _listed().get(name)
        if ep is None:
            plugin = _loaded[name]
            rows.append(Listed(name, f"{type(plugin).__module__}:{type(plugin).__qualname__}", None))
            continue
        dist = getattr(ep, "dist", None)
        rows.append(Listed(name, ep.value, f"{dist.name} {dist.version}" if dist is not None else None))
    return rows


def register(plugin: FormatPlugin) -> None:
    """Register a plugin instance directly (tests, embedded use)."""
    _loaded[plugin.name] = plugin


def unregister(name: str) -> None:
    """Forget a plugin :func:`register` gave (a test's plugin, after the test); entry points stay listed."""
    _loaded.pop(name, None)


def get(name: str) -> FormatPlugin:
    """The plugin of that name, loaded on first use.

    :raises FormatNotFoundError: no such format.
    :raises MissingDependencyError: the plugin needs a package that is not installed.
    """
    plugin = _loaded.get(name)
    if plugin is not None:
        return plugin
    ep = _listed().get(name)
    if ep is None:
        raise FormatNotFoundError(f"unknown format {name!r}; known formats: {', '.join(names()) or 'none'}"
                                  " (is segstore installed with `pip install -e .`?)")
    try:
        cls = ep.load()
    except ImportError as err:
        raise MissingDependencyError(
            f"format {name!r} needs the package {err.name!r}: install it with `pip install {err.name}`"
        ) from err
    plugin = cls()
    _loaded[name] = plugin
    return plugin


def detect(path: str) -> str:
    """The name of the one format whose plugin recognises ``path``.

    :raises NotFoundError: ``path`` does not exist.
    :raises WrongFormatError: none or several recognise it.
    """
    from . import files

    if not files.exists(path):
        raise NotFoundError("expected a store directory, found no such file or directory", path)
    matches = [name for name in names() if get(name).detect(path)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise WrongFormatError(f"not a store of any known format ({', '.join(names())}); "
                               "pass --format to say which it should be", path)
    raise WrongFormatError(f"looks like several formats ({', '.join(matches)}); pass --format", path)
