"""Pluggable index layouts: any of four indexes over any :class:`~segstore.logview.LogView` store.

========  =====================================  =================  ===================  ==========
name      what                                   RocketMQ store     Kafka partition      any other
========  =====================================  =================  ===================  ==========
queue     dense offset index, 20-byte entries    native (CQ)        extra                extra
offset    sparse offset index, 8-byte entries    extra              native (.index)      extra
time      sparse time index, 12-byte entries     extra              native (.timeindex)  extra
key       key hash index (IndexFile)             native (index/)    extra                extra
========  =====================================  =================  ===================  ==========

Four generic classes keep the extra ones (:mod:`.queue`, :mod:`.offset`,
:mod:`.time`, :mod:`.key`), built and caught up from the store's ``scan_arrow``
batches in the core's entry types (:mod:`segstore.indexes`); which layouts are
native is what the format's plugin declares
(:attr:`segstore.plugin.FormatPlugin.native_indexes`), and those look up through
the store (:mod:`.native`).  No layout knows a format by name.

A store opened with ``segstore.open(path, indexes=["time", "key"])`` keeps the
extra ones up to date on every append (:class:`IndexSet`); ``segstore index
build|verify|drop`` manage them from the command line (:mod:`.cli`).  Native
layouts are the broker's files, looked up through the plugin and never written
here; extra ones live in ``.segstore/`` directories the brokers never read
(see :mod:`.base`), so a store with extra indexes stays byte-identical for the
broker and loadable by it.

The hooks a store calls: :func:`split_options` and :func:`attach` when it is
opened (the plugin's ``open``), ``store.indexes.append()`` after each append,
``flush()``/``close()``/``abandon()`` with its own, ``offset_for_time`` through
``store.indexes`` when a time layout is attached, :func:`find_records` for
``Store.find`` (``query --key``), and :func:`forget_from` before the store rewrites
records where they lie (compaction).

Thread-safety: as the owning store.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from segstore import files, registry
from segstore.errors import ConfigError, NotFoundError, UnsupportedOperationError, cut
from segstore.store import Problem, Store, StoreT, check_natural, check_time, lookup_key

if TYPE_CHECKING:
    from segstore.logview import LogView

    from .base import ExtraLayout, Layout, Stream

# The layout classes (numpy, pyarrow.compute) load when a store uses a layout: the CLI imports this
# package to add its ``index`` command, and a store without extra indexes needs none of them.

LAYOUT_NAMES = ("queue", "offset", "time", "key")
INDEXES_OPTION = "indexes"


def extra_layouts() -> dict[str, type[ExtraLayout[Any]]]:
    """The generic class keeping each layout as an extra index, by name."""
    from .key import KeyLayout
    from .offset import OffsetLayout
    from .queue import QueueLayout
    from .time import TimeLayout

    return {cls.name: cls for cls in (QueueLayout, OffsetLayout, TimeLayout, KeyLayout)}


def layout_class(name: str, format_name: str) -> type[Layout]:
    """The class implementing layout ``name`` over ``format_name`` stores: the native one when the
    format's plugin declares the layout native, else the generic extra one.

    :raises UnsupportedOperationError: an unknown layout.
    :raises FormatNotFoundError: an unknown format.
    """
    if name not in LAYOUT_NAMES:
        raise UnsupportedOperationError(f"expected an index layout ({', '.join(LAYOUT_NAMES)}), "
                                        f"found {name!r}")
    if name in registry.get(format_name).native_indexes:
        from .native import NATIVE_LAYOUTS

        return NATIVE_LAYOUTS[name]
    return extra_layouts()[name]


def extra_layout_class(name: str, format_name: str) -> type[ExtraLayout[Any]]:
    """:func:`layout_class` for a layout segstore keeps in its own files.

    :raises UnsupportedOperationError: an unknown layout, or one native to the format.
    """
    from .base import ExtraLayout

    cls = layout_class(name, format_name)
    if not issubclass(cls, ExtraLayout):
        raise UnsupportedOperationError(f"expected an extra index layout, found {name!r}, "
                                        f"native to {format_name} stores")
    return cls


def split_options(config: Mapping[str, Any]) -> tuple[list[str] | None, dict[str, Any], dict[str, Any]]:
    """Split ``segstore.open`` keywords into ``(indexes, layout options, format config)``.

    ``indexes`` may be a list of names or a comma-separated string (CLI); None
    when not given (then :func:`attach` keeps the extra indexes found on disk).

    :raises ConfigError: a layout option's value is refused (:func:`~.options.parse_options`).
    """
    from .options import option_names, parse_options

    names = option_names()
    layout_options = {k: v for k, v in config.items() if k in names}
    if layout_options:     # a bad value is refused before the store is opened (or created)
        parse_options(layout_options)
    rest = {k: v for k, v in config.items() if k not in names and k != INDEXES_OPTION}
    raw = config.get(INDEXES_OPTION)
    if raw is None:
        return None, layout_options, rest
    if isinstance(raw, str):
        indexes = [n.strip() for n in raw.split(",")]
    elif isinstance(raw, Iterable) and not isinstance(raw, (bytes, Mapping)):
        indexes = list(raw)
    else:
        raise ConfigError(f"expected indexes as a list of layout names or a comma-separated str, found "
                          f"{type(raw).__name__} {cut(raw)}")
    wrong = [n for n in indexes if not isinstance(n, str)]
    if wrong:
        raise ConfigError(f"expected indexes of layout names (str), found {type(wrong[0]).__name__} "
                          f"{cut(wrong[0])}")
    return [n for n in indexes if n], layout_options, rest


def present_layouts(store: Store) -> list[str]:
    """The extra layouts that have files in ``store`` (cheap: looks for their state files).

    Without a ``.segstore`` directory (the common case) nothing else is looked at
    or imported.
    """
    from .options import INDEX_ROOT, parse_options

    if not hasattr(store, "index_homes"):     # not a LogView: no extra indexes
        return []
    roots = [os.path.join(home, INDEX_ROOT) for home in cast("LogView", store).index_homes()]
    if not any(files.is_dir(root) for root in roots):
        return []
    from .base import ExtraLayout
    options = parse_options({})
    found = []
    for name in LAYOUT_NAMES:
        cls = layout_class(name, store.format)
        if issubclass(cls, ExtraLayout) and cls(store, options, writable=False,
                                                 open_streams=False).has_files():
            found.append(name)
    return found


class IndexSet:
    """The layouts a store keeps, by name.

    :param store: the open store.
    :param names: layout names; native ones only add lookups.
    :param options: layout options (see :data:`segstore.layouts.options.DEFAULT_OPTIONS`).
    :param writable: write the extra layouts' files (default: the store's mode is ``"a"``).
    :param building: the options are those a :meth:`build` is about to rebuild the indexes with (an index
        keeps the others it was built with); else an option named in ``options`` that differs from the
        one an index on disk was built with is refused.
    :raises ConfigError: such an option (:meth:`ExtraLayout.check_options <.base.ExtraLayout.check_options>`).
    """

    def __init__(self, store: Store, names: Iterable[str], options: Mapping[str, Any] | None = None, *,
                 writable: bool | None = None, building: bool = False) -> None:
        from .base import ExtraLayout
        from .options import parse_options

        self.store = store
        self.options = parse_options(options or {})
        requested = {name: self.options[name] for name in (raw.replace("_", ".") for raw in options or {})}
        self.layouts: dict[str, Layout] = {}
        try:
            for name in dict.fromkeys(names):
                layout = self.layouts[name] = layout_class(name, store.format)(
                    store, self.options, writable=writable, requested=requested)
                if requested and not building and isinstance(layout, ExtraLayout):
                    layout.check_options(requested)
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> Layout:
        layout = self.layouts.get(name)
        if layout is None:
            raise NotFoundError(f"expected the {name!r} index among this store's "
                                f"({', '.join(self.layouts)}), "
                                "found none", self.store.path)
        return layout

    def __contains__(self, name: object) -> bool:
        return name in self.layouts

    def __iter__(self) -> Iterator[str]:
        """The layout names (without it, ``list(store.indexes)`` and ``for name in store.indexes`` fell
        back to ``__getitem__(0)``, a NotFoundError naming "the 0 index")."""
        return iter(list(self.layouts))

    def __len__(self) -> int:
        return len(self.layouts)

    @property
    def actions(self) -> list[str]:
        return [line for layout in self.layouts.values() for line in layout.actions]

    def append(self) -> None:
        """Index what the log gained (the store calls it after every append)."""
        for layout in self.layouts.values():
            layout.append()

    def build(self) -> None:
        for layout in self.layouts.values():
            layout.build()

    def flush(self) -> None:
        for layout in self.layouts.values():
            layout.flush()

    def verify(self) -> list[Problem]:
        return [p for layout in self.layouts.values() for p in layout.verify()]

    def close(self) -> None:
        layouts, self.layouts = self.layouts, {}
        for layout in layouts.values():
            layout.close()

    def abandon(self) -> None:
        """Release every file as a killed process would (the store's ``abandon``)."""
        layouts, self.layouts = self.layouts, {}
        for layout in layouts.values():
            layout.abandon()

    # -- lookups, by the first layout that answers them -----------------------------
    def _answering(self, what: str) -> Layout:
        for layout in self.layouts.values():
            if what in layout.answers:
                return layout
        raise UnsupportedOperationError(f"expected an index answering {what} lookups among "
                                        f"({', '.join(self.layouts)}), found none", self.store.path)

    def _stream(self, topic: str, partition: int) -> Stream:
        """The stream looked up, once the store holds it.

        :raises ConfigError: a partition that is not an integer (the store's check).
        :raises NotFoundError: the store holds no such stream (the store's own error: an index layout
            cannot make it), before the UnsupportedOperationError of a lookup no index answers.
        """
        from .base import Stream

        self.store.offset_range(topic, partition)
        return Stream(topic, partition)

    def read_at(self, topic: str, partition: int, offset: int) -> Any | None:
        """The record at absolute ``offset`` (None: none there), through the first layout answering it.

        :raises ConfigError: an offset that is not an integer; see :meth:`_stream`.
        """
        stream = self._stream(topic, partition)     # an unheld name first: the user's first mistake
        layout = self._answering("offset")
        if not isinstance(offset, numbers.Integral) or isinstance(offset, bool):
            raise ConfigError(f"expected an offset as an integer, found {type(offset).__name__} "
                              f"{cut(offset)}", self.store.path)
        return layout.read_at(stream, offset)

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The first absolute offset stored at or after ``timestamp`` (None: every record is older).

        :raises ConfigError: a time that is no number of ms (NaN included) or negative, as the store's
            ``offset_for_time``; see :meth:`_stream`.
        """
        stream = self._stream(topic, partition)     # an unheld name first: the user's first mistake
        layout = self._answering("time")
        check_time("lookup", timestamp, self.store.path)
        return layout.offset_for_time(stream, timestamp)

    def find_key(self, topic: str, partition: int, key: bytes | str,
                 max_hits: int | None = None) -> list[int]:
        """Absolute offsets of the records carrying ``key`` (a str as UTF-8), ascending; the newest
        ``max_hits``.

        :raises ConfigError: a key neither str nor bytes, a ``max_hits`` not an integer of at least 0, as
            ``Store.find``; see :meth:`_stream`.
        """
        stream = self._stream(topic, partition)     # an unheld name first: the user's first mistake
        layout = self._answering("key")
        raw = lookup_key(key, self.store.path)
        check_natural("max_hits", max_hits, self.store.path)
        return layout.find_key(stream, raw, max_hits)


def attach(store: StoreT, indexes: Iterable[str] | None = None,
           options: Mapping[str, Any] | None = None) -> StoreT:
    """Give ``store`` an :class:`IndexSet` as ``store.indexes`` (None when there are no indexes).

    ``indexes`` None keeps the extra layouts already on disk (so appends never
    leave them behind); ``[]`` opens none.  In append mode the extra layouts are
    recovered and caught up with the log here.  On failure the store is closed
    and the error raised.
    """
    names = present_layouts(store) if indexes is None else list(indexes)
    if not names:
        store.indexes = None
        return store
    try:
        store.indexes = IndexSet(store, names, options)
    except BaseException:
        store.indexes = None
        store.close()
        raise
    return store


def forget_from(store: Store, topic: str, partition: int, offset: int) -> None:
    """The store is about to rewrite the records of one stream from ``offset`` on where they lie
    (compaction moves them): every extra index of the stream drops its entries from there, durably,
    before (a crash part way through leaves no entry pointing at a moved record).

    The layouts attached to the store for writing cut theirs now, and index the records again at
    the store's next ``indexes.append()``; those on disk it did not attach (opened with
    ``indexes=[]``) have their state set back, under their writer lock, so that their next writer
    indexes them again and readers look them up in the log meanwhile.  A format plugin calls it
    (Kafka compaction).

    :raises StoreLockedError: another writer holds the lock of an index the store did not attach.
    """
    from .base import ExtraLayout, Stream
    from .options import parse_options

    stream = Stream(topic, partition)
    indexes = getattr(store, "indexes", None)
    attached = indexes.layouts if indexes is not None else {}
    for name in dict.fromkeys([*attached, *present_layouts(store)]):
        layout = attached.get(name)
        if isinstance(layout, ExtraLayout) and layout.writable:
            layout.forget_from(stream, offset)
        elif not layout_class(name, store.format).native:
            extra_layout_class(name, store.format)(store, parse_options({}), writable=True,
                                                   open_streams=False).forget_from(stream, offset)


def find_records(store: Store, topic: str, key: bytes, *, partition: int | None = None) -> list[Any]:
    """The records of ``topic`` (one ``partition`` or all) carrying ``key``, in partition then offset
    order (``Store.find`` picks among them).  Through the ``key`` layout attached to the store,
    else one opened read-only for the lookup (Kafka: segstore's extra key index; RocketMQ: the broker's
    own IndexFiles, through the store)."""
    from .options import parse_options

    attached = store.indexes if hasattr(store, "indexes") else None
    owned = None
    if attached is not None and "key" in attached:
        layout = attached["key"]
    else:
        layout = owned = layout_class("key", store.format)(store, parse_options({}), writable=False)
    try:
        streams = [s for s in layout.streams() if s.topic == topic
                   and (partition is None or s.partition == partition)]
        return [layout_record(store, stream, offset)
                for stream in streams for offset in layout.find_key(stream, key)]
    finally:
        if owned is not None:
            owned.close()


def layout_record(store: Store, stream: Stream, offset: int) -> Any:
    """The store's record at ``offset`` of ``stream``."""
    record = next(store.read(stream.topic, stream.partition, offset, 1), None)
    if record is None:
        raise NotFoundError(f"expected a record at offset {offset} of {stream}, found none", store.path)
    return record
