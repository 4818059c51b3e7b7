"""What a format plugin provides.

A plugin is a class registered under the entry-point group ``segstore.formats``.
It is instantiated lazily (on first use) with no arguments.  Plugins never open
files themselves: they go through :mod:`segstore.files`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .errors import UnsupportedOperationError
from .store import Store


@dataclass(frozen=True, slots=True)
class DumpLine:
    """One line of ``segstore dump FILE``: ``text`` for a terminal, ``data`` for ``--json``.

    A ``problem`` line (an index entry that disagrees with the log, torn bytes, a bad CRC)
    goes to stderr and makes the command exit 1, as ``kafka-dump-log`` reports mismatches
    after the dump.
    """

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    problem: bool = False


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


class FormatPlugin(abc.ABC):
    """A log format: how to recognise, open and create stores of it."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    @abc.abstractmethod
    def detect(self, path: str) -> bool:
        """True if ``path`` holds a store of this format. Cheap: looks at names and a few bytes."""

    @abc.abstractmethod
    def open(self, path: str, mode: str = "r", **config: Any) -> Store:
        """Open (mode ``"a"`` creates if missing) a store; config values may be strings from the CLI."""

    @abc.abstractmethod
    def write_spec(self, path: str, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Replay a compat-fixture spec into a new store at ``path`` (``segstore write --spec``)."""

    def write_jsonl(self, path: str, lines: list[dict[str, Any]], config: dict[str, Any]) -> int:
        """Append plain message lines (``segstore write --input FILE.jsonl``); returns the count."""
        from .records import Message

        with self.open(path, "a", **config) as store:
            store.append_batch([Message.coerce(line) for line in lines])
        return len(lines)

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
