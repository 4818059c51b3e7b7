"""Layouts native to a format: the broker keeps the files; segstore only looks up through the store.

Which layouts are native is what the format's plugin declares
(:attr:`segstore.plugin.FormatPlugin.native_indexes`); the lookups go to the
store's :class:`~segstore.logview.LogView` (``read`` for offsets,
``offset_for_time``, :meth:`~segstore.logview.KeyLookup.key_offsets`), which
reads the broker's files in the core's entry types.

Thread-safety: as the owning store.
"""

from __future__ import annotations

from typing import Any

from segstore.errors import UnsupportedOperationError
from segstore.logview import KeyLookup

from .base import Layout, Stream


class NativeLayout(Layout):
    """A layout the broker keeps: lookups through the store, nothing built, written or dropped."""

    native = True

    def read_at(self, stream: Stream, offset: int) -> Any | None:
        """The store's own read (its native index): ``O(log files)`` plus one record."""
        if not self._check_range(stream, offset):
            return None
        return next(self.store.read(stream.topic, stream.partition, offset, 1), None)

    def offset_for_time(self, stream: Stream, timestamp: int) -> int | None:
        # every layout answers the first offset at or after the time, as a scan does; a store whose
        # own lookup answers as its broker (Kafka 3.8 searches only the first segment whose largest
        # timestamp reaches the time, so an emptied or v0 segment first answers none) says so apart
        first = getattr(self.store, "first_offset_from_time", None)
        if first is not None:
            return first(stream.topic, stream.partition, timestamp)
        return self.store.offset_for_time(stream.topic, stream.partition, timestamp)

    def find_key(self, stream: Stream, key: bytes, max_hits: int | None = None) -> list[int]:
        if not isinstance(self.store, KeyLookup):
            raise UnsupportedOperationError(f"expected a {self.store.format} store answering key lookups "
                                            "(key_offsets), found none", self.store.path)
        return self.store.key_offsets(stream.topic, stream.partition, bytes(key), max_hits)


class NativeQueueLayout(NativeLayout):
    """``queue`` native to the format (RocketMQ's consume queue)."""

    name = "queue"
    answers = frozenset({"offset"})


class NativeOffsetLayout(NativeLayout):
    """``offset`` native to the format (Kafka's ``.index``)."""

    name = "offset"
    answers = frozenset({"offset"})


class NativeTimeLayout(NativeLayout):
    """``time`` native to the format (Kafka's ``.timeindex``)."""

    name = "time"
    answers = frozenset({"time"})


class NativeKeyLayout(NativeLayout):
    """``key`` native to the format (RocketMQ's IndexFile)."""

    name = "key"
    answers = frozenset({"key"})


#: The native layout class of each layout name.
NATIVE_LAYOUTS: dict[str, type[NativeLayout]] = {
    cls.name: cls for cls in (NativeQueueLayout, NativeOffsetLayout, NativeTimeLayout, NativeKeyLayout)}
