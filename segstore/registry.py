"""The format registry: entry points of group ``segstore.formats``.

Entry points are *listed* when first needed and *loaded* on first use of a name,
so importing segstore never imports a plugin (nor its optional dependencies).
Built-in formats register exactly as third-party ones do, in ``pyproject.toml``.
Two plugins claiming one name is an error, never a silent choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import entrypoints
from .errors import (
    FormatNotFoundError,
    MissingDependencyError,
    NotFoundError,
    SegstoreError,
    WrongFormatError,
    cut,
    did_you_mean,
)
from .plugin import FormatPlugin

GROUP = "segstore.formats"

_entry_points: dict[str, Any] | None = None
_loaded: dict[str, FormatPlugin] = {}


def _listed() -> dict[str, Any]:
    global _entry_points
    if _entry_points is None:
        found: dict[str, Any] = {}
        for ep in entrypoints.group(GROUP):
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


#: What a message says where no format is registered at all (a checkout on ``PYTHONPATH``, not installed:
#: the built-in formats register through the package's entry points).
NONE_INSTALLED = "none installed: is segstore installed with `pip install -e .`?"


def names_words() -> str:
    """The registered formats for a message, ``"kafka, rocketmq"``, or :data:`NONE_INSTALLED`."""
    return ", ".join(names()) or NONE_INSTALLED


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
        rows.append(Listed(name, ep.value, _distribution(ep)))
    return rows


def _distribution(ep: Any) -> str | None:
    """``name version`` of the package declaring ``ep`` (ours, or ``importlib.metadata``'s)."""
    if isinstance(ep, entrypoints.EntryPoint):
        return ep.distribution
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else None


def register(plugin: FormatPlugin) -> None:
    """Register a plugin instance directly (tests, embedded use)."""
    _loaded[plugin.name] = plugin


def unregister(name: str) -> None:
    """Forget a plugin :func:`register` gave (a test's plugin, after the test); entry points stay listed."""
    _loaded.pop(name, None)


def get(name: str) -> FormatPlugin:
    """The plugin of that name, loaded on first use.

    :raises FormatNotFoundError: no such format; a name that is no str (``format=["kafka"]`` was a
        TypeError, unhashable).
    :raises MissingDependencyError: the plugin needs a package that is not installed.
    """
    if not isinstance(name, str):
        raise FormatNotFoundError(f"expected a format name as a str ({', '.join(names()) or 'none'}), "
                                  f"found {type(name).__name__} {cut(name)}")
    plugin = _loaded.get(name)
    if plugin is not None:
        return plugin
    ep = _listed().get(name)
    if ep is None:
        # a typo or another case of a known name says which was meant (did_you_mean), not to reinstall
        hint = did_you_mean(name, names()) or " (is segstore installed with `pip install -e .`?)"
        raise FormatNotFoundError(f"unknown format {cut(name)}; known formats: {', '.join(names()) or 'none'}"
                                  f"{hint}")
    try:
        cls = ep.load()
    except ImportError as err:
        raise MissingDependencyError(
            f"format {name!r} needs the package {err.name!r}: install it with `pip install {err.name}`"
        ) from err
    plugin = cls()
    _loaded[name] = plugin
    return plugin


def other_formats(path: str, name: str) -> list[str]:
    """The formats other than ``name`` that recognise ``path`` when ``name`` does not (else ``[]``):
    what makes opening ``path`` as ``name`` a mistake (a Kafka writer would add partition
    directories beside a RocketMQ store's commitlog, a reader would find nothing in it)."""
    if get(name).detect(path):
        return []
    return [other for other in names() if other != name and get(other).detect(path)]


def check_new_store(path: str, name: str, *, whole: bool = False) -> None:
    """Refuse to make a new store of format ``name`` at ``path`` inside a store whose broker would
    then fail to load it (:meth:`FormatPlugin.refuses_new_dir` of each format, asked of the nearest
    part of ``path`` that exists, for the first directory to be made below it).  ``whole``: the new
    store is never a member of another (a conversion writes a Kafka log directory, not a partition
    directory), so it is asked of as any other directory.  A local path only.

    :raises WrongFormatError: naming ``path``, the store it would be made in and why.
    """
    import os

    from . import files

    if files.is_url(path):
        return
    made = os.path.abspath(path)
    parent = os.path.dirname(made)
    while not files.exists(parent) and os.path.dirname(parent) != parent:
        made, parent = parent, os.path.dirname(parent)
    if not files.is_dir(parent):
        return
    first = os.path.basename(made)
    member = name if made == os.path.abspath(path) and not whole else None
    for other in names():
        why = get(other).refuses_new_dir(parent, first, member)
        if why:
            raise WrongFormatError(f"expected a new {name} store outside other stores, found it in {parent}, "
                                   f"of the {other} store: {why}", path)


#: How many directories up :func:`detect` looks for the store a directory lies inside (RocketMQ's
#: ``consumequeue/TOPIC/QUEUE`` is three).
_AROUND_DEPTH = 3


def _store_around(path: str) -> tuple[str, str] | None:
    """``(format, directory)`` of the one store of a known format ``path`` (a directory no format takes, or
    a file) lies inside, :data:`_AROUND_DEPTH` levels up at most; None where there is none (or the path
    is a URL)."""
    import os

    from . import files

    if files.is_url(path):
        return None
    here = os.path.abspath(path)     # a file's first parent is its directory
    for _ in range(_AROUND_DEPTH):
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
        found = [name for name in names() if get(name).detect(here)]
        if len(found) == 1:
            shown = os.path.relpath(here) if not os.path.isabs(path) else here
            return found[0], shown
    return None


#: Directories :func:`_stores_within` looks at in all, and stores it names at most.
_WITHIN_LOOKED = 64
_HELD_SHOWN = 3
#: How many directories down :func:`_stores_within` looks (``compat_fixtures/rocketmq/basic/store`` is three
#: below ``compat_fixtures``).
_WITHIN_DEPTH = 3


def _stores_within(path: str) -> list[tuple[str, str]]:
    """``(format, directory)`` of the stores of a known format inside ``path`` (a directory no format
    takes: ``compat_fixtures/rocketmq/basic`` holding ``store/``, ``compat_fixtures`` holding the
    fixtures), :data:`_WITHIN_DEPTH` levels down at most, level by level in name order, not inside a
    store found, among the first :data:`_WITHIN_LOOKED` directories; empty for a URL or a file."""
    import os

    from . import files

    if files.is_url(path) or not files.is_dir(path):
        return []
    held: list[tuple[str, str]] = []
    level, looked = [path], 0
    for _ in range(_WITHIN_DEPTH):
        deeper = []
        for parent in level:
            try:
                names_here = sorted(files.list_dir(parent))
            except SegstoreError:       # unreadable: nothing to name there
                continue
            for name in names_here:
                child = os.path.join(parent, name)
                if not files.is_dir(child):
                    continue
                if looked == _WITHIN_LOOKED:
                    return held
                looked += 1
                found = [fmt for fmt in names() if get(fmt).detect(child)]
                if len(found) == 1:
                    held.append((found[0], child))
                elif not found:
                    deeper.append(child)
        level = deeper
    return held


def _shown_stores(held: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The stores of :func:`_stores_within` a message names (:data:`_HELD_SHOWN`): the first of each
    format, then the next ones, in the order found."""
    firsts = [store for i, store in enumerate(held) if all(fmt != store[0] for fmt, _ in held[:i])]
    shown = firsts[:_HELD_SHOWN]
    shown += [store for store in held if store not in shown][:_HELD_SHOWN - len(shown)]
    return sorted(shown, key=held.index)


def not_a_directory(path: str) -> WrongFormatError:
    """The error for a ``path`` that is a file where a store directory is asked for (``segstore.open``
    of a segment or commitlog file): it names the store the file belongs to, where one is around it,
    and that ``segstore dump FILE`` reads a single file."""
    around = _store_around(path)
    of = f" of the {around[0]} store {around[1]}; pass that store's directory" if around is not None else ""
    return WrongFormatError(f"not a store of any known format ({names_words()}): expected a store directory, "
                            f"found a file{of} (segstore dump FILE reads a single file)", path)


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
    if not names():
        raise WrongFormatError(f"not a store of any known format ({NONE_INSTALLED})", path)
    if not matches and not files.is_url(path) and not files.is_dir(path):
        raise not_a_directory(path)
    if not matches:
        around = _store_around(path)
        if around is not None:
            fmt, store = around
            raise WrongFormatError(f"not a store of any known format ({names_words()}): a directory inside "
                                   f"the {fmt} store {store}; pass that store's directory (or one of its "
                                   "files to dump)", path)
        held = _stores_within(path)
        if held:
            shown = ", ".join(f"{store} ({fmt})" for fmt, store in _shown_stores(held))
            more = f" and {len(held) - _HELD_SHOWN} more" if len(held) > _HELD_SHOWN else ""
            raise WrongFormatError(f"not a store of any known format ({names_words()}): a directory holding "
                                   f"{'a store' if len(held) == 1 else 'stores'}, {shown}{more}; pass "
                                   f"{'its' if len(held) == 1 else 'one'} directory", path)
        raise WrongFormatError(f"not a store of any known format ({names_words()}); "
                               "pass --format to say which it should be", path)
    raise WrongFormatError(f"looks like several formats ({', '.join(matches)}); pass --format", path)
