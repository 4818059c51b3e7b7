"""What a format plugin provides.

A plugin is a class registered under the entry-point group ``segstore.formats``.
It is instantiated lazily (on first use) with no arguments.  Plugins never open
files themselves: they go through :mod:`segstore.files`.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from .store import Store


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
