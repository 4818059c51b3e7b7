"""The format registry: entry points of group ``segstore.formats``.

Entry points are *listed* when first needed and *loaded* on first use of a name,
so importing segstore never imports a plugin (nor its optional dependencies).
Built-in formats register exactly as third-party ones do, in ``pyproject.toml``.
Two plugins claiming one name is an error, never a silent choice.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from .errors import FormatNotFoundError, MissingDependencyError, SegstoreError, WrongFormatError
from .plugin import FormatPlugin

GROUP = "segstore.formats"

_entry_points: dict[str, EntryPoint] | None = None
_loaded: dict[str, FormatPlugin] = {}


def _listed() -> dict[str, EntryPoint]:
    global _entry_points
    if _entry_points is None:
        found: dict[str, EntryPoint] = {}
        for ep in entry_points(group=GROUP):
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


def register(plugin: FormatPlugin) -> None:
    """Register a plugin instance directly (tests, embedded use)."""
    _loaded[plugin.name] = plugin


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

    :raises WrongFormatError: none or several recognise it.
    """
    matches = [name for name in names() if get(name).detect(path)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise WrongFormatError(f"not a store of any known format ({', '.join(names())}); "
                               "pass --format to say which it should be", path)
    raise WrongFormatError(f"looks like several formats ({', '.join(matches)}); pass --format", path)
