"""The index layouts' options and where their files live: what opening any store asks (is an option
a layout's or the format's? are there extra indexes?), kept apart from :mod:`.base` so that a store
without extra indexes loads no layout code.

Thread-safety: pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segstore.errors import ConfigError, cut, shown_number, shown_text

#: The directory extra indexes live in, in each of a store's index homes (see :mod:`.base`).
INDEX_ROOT = ".segstore"
#: Layout options (passed to ``segstore.open`` beside the format's config), with defaults.
DEFAULT_OPTIONS: dict[str, Any] = {
    # sparse layouts: one entry per this many bytes of the stream's messages (Kafka index.interval.bytes)
    "layout.interval.bytes": 4096,
    # sparse layouts: bytes preallocated per index file (Kafka segment.index.bytes)
    "layout.index.bytes": 10 * 1024 * 1024,
    # dense layout: bytes per file (RocketMQ mappedFileSizeConsumeQueue: 300,000 entries)
    "layout.queue.file.bytes": 300_000 * 20,
    # key layout: header names whose values are indexed as keys too (comma-separated)
    "key.index.headers": "",
    # key layout: hash slots and entries per IndexFile
    "key.index.slots": 1 << 17,
    "key.index.entries": 1 << 19,
}
_INT_OPTIONS = frozenset(k for k, v in DEFAULT_OPTIONS.items() if isinstance(v, int))
#: The largest value of an integer option: each is a Java int in the broker config it mirrors (Kafka's
#: ``index.interval.bytes`` and ``segment.index.bytes``, RocketMQ's ``mappedFileSizeConsumeQueue``,
#: ``maxHashSlotNum`` and ``maxIndexNum``; an IndexFile's slots hold entry numbers as int32).
MAX_INT_OPTION = (1 << 31) - 1


def _holds_no_entry(name: str, value: int) -> str | None:
    """What option ``name`` must be for a file to hold an entry, when ``value`` is not (None: it is).

    A file that takes no entry would have filling open one file after another, forever.
    """
    from segstore.indexes.dense import CQ_DTYPE
    from segstore.indexes.keyhash import FIRST_ENTRY
    from segstore.indexes.timeindex import TIME_ENTRY

    if name == "layout.index.bytes" and value < 2 * TIME_ENTRY.itemsize:
        # the offset layout's 8-byte entries fit in these too
        return (f"at least {2 * TIME_ENTRY.itemsize} (two {TIME_ENTRY.itemsize}-byte time entries: a file "
                "keeps its last slot for the entry forced in when it rolls, as Kafka's TimeIndex.isFull)")
    if name == "layout.queue.file.bytes" and value % CQ_DTYPE.itemsize:
        return f"whole {CQ_DTYPE.itemsize}-byte entries (a multiple of {CQ_DTYPE.itemsize})"
    if name == "key.index.entries" and value <= FIRST_ENTRY:
        return (f"at least {FIRST_ENTRY + 1} (an IndexFile never uses the entries before entry "
                f"{FIRST_ENTRY}: RocketMQ 4.9.7 IndexHeader's indexCount starts at 1)")
    return None


def parse_options(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Layout options with defaults; names may use ``_`` for ``.``; values may be CLI strings.

    :raises ConfigError: an unknown name, a value that is not a positive integer, one past a Java int
        (a 200 GB sparse IndexFile, or past what a file can be sized to: an ``OverflowError``), or one too
        small for a file to hold an entry.
    """
    out = dict(DEFAULT_OPTIONS)
    for raw_name, value in raw.items():
        name = raw_name.replace("_", ".")
        if name not in DEFAULT_OPTIONS:
            raise ConfigError(f"expected an index layout option ({', '.join(sorted(DEFAULT_OPTIONS))}), "
                              f"found {raw_name!r}")
        if name == "key.index.headers":
            value = _header_names(raw_name, value)
        if name in _INT_OPTIONS:
            try:
                value = int(value)
            except (TypeError, ValueError) as err:
                found = shown_text(value) if isinstance(value, str) else cut(value)
                raise ConfigError(f"expected an integer for {raw_name}, found {found}") from err
            if value <= 0:
                raise ConfigError(f"expected a positive {raw_name}, found {shown_number(value)}")
            if value > MAX_INT_OPTION:
                raise ConfigError(f"expected {raw_name} of at most {MAX_INT_OPTION} (a Java int, as the "
                                  f"broker config it mirrors), found {shown_number(value)}")
            wanted = _holds_no_entry(name, value)
            if wanted is not None:
                raise ConfigError(f"expected {raw_name} of {wanted}, found {value}")
        out[name] = value
    return out


def _header_names(raw_name: str, value: Any) -> str:
    """``key.index.headers`` as the index keeps it: names joined by commas, each stripped of the spaces
    around it (``"trace, id"`` names ``id``, not `` id``), from a comma-separated str or a list or tuple
    of str.

    :raises ConfigError: anything else (a list would have failed at the first append, a traceback), or a
        name that is no UTF-8 text (a lone surrogate).
    """
    if isinstance(value, str):
        names = value.split(",")
    elif isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value):
        names = [part for n in value for part in n.split(",")]
    else:
        raise ConfigError(f"expected {raw_name} as header names (a comma-separated str, or a list of str), "
                          f"found {type(value).__name__} {cut(value)}")
    joined = ",".join(dict.fromkeys(n.strip() for n in names if n.strip()))
    if not joined.isascii():
        try:
            joined.encode("utf-8")
        except UnicodeEncodeError as err:
            # a lone surrogate (a command line's bytes that are not UTF-8, "\udcff"): no header of either
            # broker is named so (a Java String's UTF-8), and the index's lookups encode the names (the
            # build and every later query died with a UnicodeEncodeError traceback)
            raise ConfigError(f"expected {raw_name} as header names of UTF-8 text, found "
                              f"{cut(joined)} ({err.reason} at character {err.start})") from None
    return joined


def option_names() -> frozenset[str]:
    """Every layout option name, in both spellings (``key.index.headers``, ``key_index_headers``)."""
    return frozenset(DEFAULT_OPTIONS) | frozenset(n.replace(".", "_") for n in DEFAULT_OPTIONS)
