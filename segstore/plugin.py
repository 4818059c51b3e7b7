"""What a format plugin provides.

A plugin is a class registered under the entry-point group ``segstore.formats``.
It is instantiated lazily (on first use) with no arguments.  Plugins never open
files themselves: they go through :mod:`segstore.files`.
"""

from __future__ import annotations

import abc
import importlib
import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .errors import UnsupportedOperationError
from .store import DumpLine, Store

__all__ = ["WRITE_CHUNK", "DumpLine", "FileDumpOptions", "FormatPlugin", "NativeIndexes", "chunks"]

#: Messages :meth:`FormatPlugin.write_jsonl` appends at a time (memory is bounded by this, not the input).
WRITE_CHUNK = 4096

T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` as lists of ``size`` (the last one shorter), consumed lazily."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk



@dataclass(slots=True)
class FileDumpOptions:
    """What ``segstore dump FILE`` asks of a plugin (``kafka-dump-log``'s flags).

    ``key_decoder``/``value_decoder`` turn payload bytes into text (the CLI's utf-8, hex,
    base64 or json); ``decoder`` names an internal-topic decoder of the format
    (``offsets``, ``transaction-log``, ``cluster-metadata`` for Kafka).
    """

    print_data: bool = False
    deep: bool = False
    key_decoder: Callable[[bytes], str] | None = None
    value_decoder: Callable[[bytes], str] | None = None
    decoder: str | None = None
    max_bytes: int | None = None
    index_sanity_check: bool = False
    verify_index_only: bool = False
    skip_record_metadata: bool = False


@dataclass(frozen=True, slots=True)
class NativeIndex:
    """One index the format's broker keeps itself, in one of the core's entry types.

    ``entries`` is the core type (:mod:`segstore.indexes`) whose byte layout the
    files have; ``files`` says where they are and how they are named (for
    documentation and ``info``).  The layout of that name over a store of the
    format only looks up through the store (never writes these files).
    """

    entries: type
    files: str


class NativeIndexes(Mapping[str, NativeIndex]):
    """A plugin's :attr:`FormatPlugin.native_indexes` whose entry types are named ``"module:Class"``
    and imported on the first lookup of their index, not with the plugin: detecting a store's format
    asks every plugin, and the other format's index modules (their classes and dataclasses) are not
    what a command on this store uses.  Membership and iteration import nothing.

    Thread-safety: two threads looking one index up at once may both import it; both get equal values.
    """

    def __init__(self, **named: tuple[str, str]) -> None:
        """``name=("module:Class", files)`` for each index, ``files`` as :class:`NativeIndex` has it."""
        self._named = named
        self._made: dict[str, NativeIndex] = {}

    def __getitem__(self, name: str) -> NativeIndex:
        made = self._made.get(name)
        if made is None:
            where, files = self._named[name]
            module, _, attr = where.partition(":")
            made = self._made[name] = NativeIndex(getattr(importlib.import_module(module), attr), files)
        return made

    def __contains__(self, name: object) -> bool:
        return name in self._named

    def __iter__(self) -> Iterator[str]:
        return iter(self._named)

    def __len__(self) -> int:
        return len(self._named)


class FormatPlugin(abc.ABC):
    """A log format: how to recognise, open and create stores of it.

    Its stores implement :class:`segstore.logview.LogView`, which is all the core's
    generic code (index layouts, conversion) uses of them.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: The index layouts (``queue``, ``offset``, ``time``, ``key``) the broker keeps itself, by name.
    #: The others are kept by segstore as extra indexes (:mod:`segstore.layouts`) in the same entry
    #: types.  A ``key`` one needs the store to implement :class:`segstore.logview.KeyLookup`.
    native_indexes: ClassVar[Mapping[str, NativeIndex]] = {}
    #: The :class:`FileDumpOptions` fields :meth:`dump_file` acts on; None: every one.  ``segstore dump
    #: FILE`` refuses a flag of another field for this format's files, rather than take it and ignore it.
    file_dump_options: ClassVar[frozenset[str] | None] = None

    @abc.abstractmethod
    def detect(self, path: str) -> bool:
        """True if ``path`` holds a store of this format. Cheap: looks at names and a few bytes."""

    @abc.abstractmethod
    def open(self, path: str, mode: str = "r", **config: Any) -> Store:
        """Open (mode ``"a"`` creates if missing) a store; config values may be strings from the CLI."""

    @abc.abstractmethod
    def write_spec(self, path: str, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Replay a compat-fixture spec into a new store at ``path`` (``segstore write --spec``)."""

    def config_from_file(self, entries: Sequence[tuple[str, str, int]], path: str,
                         overrides: Mapping[str, Any]) -> dict[str, Any]:
        """The config (:meth:`open`'s ``**config``) that the broker's own config file at ``path`` gives,
        under ``overrides`` (names of :meth:`open`'s config, which replace what the file says): the file
        read as ``java.util.Properties.load`` reads it (:mod:`segstore.properties`), ``entries`` its
        ``(name, value, byte position)`` in file order.  Names the broker takes that do not concern the
        store are left out, as the broker's storage never sees them.

        :raises ConfigError: a value the store cannot take as the broker takes it, naming ``path``.
        :raises UnsupportedOperationError: the format reads no broker config file (the default).
        """
        raise UnsupportedOperationError(f"{self.name} stores take no broker config file", path)

    def config_file_notes(self, entries: Sequence[tuple[str, str, int]], path: str,
                          store: str) -> list[tuple[str, int | None]]:
        """What a user should be told of the broker config file at ``path`` (``entries`` as
        :meth:`config_from_file` takes them) given for the store at ``store``, though nothing in it is
        refused: settings the broker follows and segstore does not (a store directory other than
        ``store``), or a file no name of which this broker reads (another broker's file).  Each note is
        ``(message, byte position of its line or None)``; the CLI prints them on stderr.  None by
        default."""
        return []

    def refuses_new_dir(self, parent: str, name: str, store_format: str | None) -> str | None:
        """Why a new directory ``name`` may not be made in ``parent`` where ``parent`` holds a store of
        this format (its broker would then fail to load that store), else None (the default: a format
        whose broker reads only the names it knows).  ``store_format``: the format of the store the new
        directory is, None for a directory on the way to one.  Cheap: looks at names."""
        return None

    def refuses_topic(self, topic: str) -> str | None:
        """Why no broker of this format ever stores a message under ``topic`` (a name its producers are
        refused), else None (the default: any name may appear).  For a follower waiting for a topic the
        store does not hold yet (``dump --follow --topic T``): a name that can never appear is said at
        once rather than waited for.  Cheap: looks at the name."""
        return None

    def fixed_topics(self, path: str) -> frozenset[str] | None:
        """The only topics the store at ``path`` can ever hold, where its path fixes them (a Kafka
        partition directory: the topic its name gives), else None (the default: a store new topics
        may appear in).  For a follower waiting for a topic the store does not hold yet (``dump
        --follow --topic T``): a topic outside them is said at once rather than waited for.  Cheap:
        looks at names."""
        return None

    def change_marker(self, path: str) -> Hashable | None:
        """A cheap value that differs whenever what a reader of the store at ``path`` reads may have
        changed since it was taken, for a follower (``dump --follow``) to skip a look that would find
        nothing new; None where the format cannot tell that cheaply (the default: every look reads).
        Thread-safe; ``O(files)`` ``stat`` calls at most."""
        return None

    def write_jsonl(self, path: str, lines: Iterable[dict[str, Any]], config: dict[str, Any]) -> int:
        """Append message lines (``segstore write --input FILE.jsonl``); returns the count.

        Plain lines in the common :class:`segstore.records.Message` names, strings as UTF-8 text and
        ``valueBase64``/``keyBase64`` as base64 (:func:`segstore.records.decode_base64_fields`).  A
        format whose ``dump --json`` lines should come back as they were stored overrides this (and
        :meth:`reads_dump_line`).  ``lines`` is consumed :data:`WRITE_CHUNK` at a time, so memory does
        not grow with it.
        """
        from .records import Message, check_line_fields, decode_base64_fields

        count = 0
        with self.open(path, "a", **config) as store:
            for chunk in chunks(lines, WRITE_CHUNK):
                for line in chunk:
                    check_line_fields(line)
                store.append_batch([Message.coerce(decode_base64_fields(line)) for line in chunk])
                count += len(chunk)
        return count

    def reads_dump_line(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is an object this format's ``dump --json`` writes, which :meth:`write_jsonl`
        writes back as it was stored.  Cheap: looks at the field names."""
        return False

    def file_kind(self, path: str) -> str | None:
        """What single file of this format ``path`` is (e.g. ``"log"``, ``"index"``), judged from its
        name, its directory and its first bytes; None if it is not one.  Cheap."""
        return None

    def dump_file(self, path: str, options: FileDumpOptions) -> Iterator[DumpLine]:
        """The lines of ``segstore dump FILE`` for one file :meth:`file_kind` recognised.

        :raises CorruptDataError: the file cannot be read at all (a partial dump's problems are
            :class:`DumpLine` s with ``problem=True``).
        """
        raise UnsupportedOperationError(f"{self.name} files cannot be dumped one by one", path)

    def conversion(self) -> Any:
        """This format's side of ``segstore convert``: a ``segstore.convert.interchange.FormatConversion``
        (the same object on every call).

        :raises UnsupportedOperationError: the format cannot be converted.
        """
        raise UnsupportedOperationError(f"{self.name} stores cannot be converted")
