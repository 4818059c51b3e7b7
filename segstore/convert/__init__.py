"""Format conversion between any two registered formats (RocketMQ stores, Kafka partitions...),
lossless and streaming.

``convert(src, dst, to="kafka")`` is the library call; :mod:`.cli` adds the
``segstore convert`` subcommand.  What a plugin provides is :mod:`.interchange` (each
format's side, found through the registry: ``FormatPlugin.conversion()``); the field
mappings live in the plugins, topic names in :mod:`.topicnames`, the streaming,
resumable, verified run in :mod:`.pipeline`.  ``docs/conversion.md`` documents every
rule.  Importing this package (the CLI does, to add its subcommand) loads no format
plugin; a conversion does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from segstore.errors import ConfigError, ConversionOptionError, check_path, cut

if TYPE_CHECKING:
    from .pipeline import ConversionReport

#: Batch compressions a target may write (each target's side says which it can).
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def parse_config(pairs: Sequence[str] | None, flag: str = "--config") -> dict[str, str]:
    """``NAME=VALUE`` strings (``--config``, or ``flag``) as a dict; the destination format checks names
    and values.  A name is given once: twice, one value would be dropped without a word.

    :raises ConfigError: a pair without ``=`` or without a name, a name given twice.
    """
    config: dict[str, str] = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise ConfigError(f"expected {flag} NAME=VALUE, found {cut(pair)}")
        if name in config:
            raise ConfigError(f"expected each {flag} name once, found {cut(name)} twice "
                              f"({cut(config[name])}, then {cut(value)})")
        config[name] = value
    return config


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str], to: str = "kafka",
            topics: Iterable[str] | None = None, compression: str = "none",
            config: Mapping[str, Any] | None = None, resume: bool = False, verify: bool = False,
            force: bool = False, skip_corrupt: bool = False, progress: bool | None = None,
            timestamp: str = "born", decompress_bodies: bool = False,
            threads: int | None = None) -> ConversionReport:
    """Convert the store at ``src`` into a new store of format ``to`` at ``dst``.

    :param to: a registered format: ``"kafka"`` (``dst`` becomes a log directory of
        ``TOPIC-PARTITION`` directories), ``"rocketmq"`` (``dst`` becomes a store directory)...
    :param topics: only these source topics (source names; a str is one); all when None.
    :param compression: batch compression, where the target has it (Kafka: ``none gzip snappy lz4 zstd``).
    :param config: the destination format's config names (``segment.bytes``,
        ``mappedFileSizeCommitLog``...).
    :param resume: continue an interrupted conversion into the same ``dst``.
    :param verify: re-read the result and compare every record with the source.
    :param force: replace an existing ``dst``: a store of format ``to`` or an empty directory (anything
        else is refused, :class:`ConversionOptionError`).
    :param skip_corrupt: report corrupt source regions and continue past them.
    :param progress: a progress bar on stderr; by default only when stderr is a terminal.
    :param timestamp: RocketMQ -> Kafka: ``"born"`` (CreateTime) or ``"store"`` (LogAppendTime).
    :param decompress_bodies: RocketMQ source: write the bodies its producers compressed inflated,
        as consumers read them, with their sysFlag's 0x1 cleared: an export for Kafka consumers,
        which is not converted back (the inflated messages no longer fit their commitlog places).
        By default the bodies are copied as stored, and the way back is exact.
    :param threads: the thread count of everything the conversion runs (its reading, its writing, the
        recovery of a resumed destination, the verify), 1 to 256, as ``SEGSTORE_THREADS`` gives it
        (which it wins over) for this call alone; by default ``SEGSTORE_THREADS``, else as the reads'
        default (docs/cli.md, "Threads").  1 runs everything on the calling thread (no reading thread
        beside the writing, no second encoding thread); the same bytes with any count.
    :raises ConversionError: bad input or destination; other :class:`SegstoreError`
        subclasses for corrupt sources (``path:pos:``).
    :raises ConversionOptionError: with ``force``, a ``dst`` that is neither a store of format ``to`` nor
        an empty directory (naming it and what it holds); a ``src`` or ``dst`` that is not a path (or holds a
        NUL byte, refused before any call to the system), ``threads`` that is not a whole number from 1
        to 256,
        ``topics`` that are not names (one name alone is taken as ``[name]``), a ``config`` that is not
        a mapping.
    """
    from segstore.overlap import asked_for, thread_count

    from .pipeline import run  # the plugins load here, not when the CLI builds its parser

    paths = []
    for name, path in (("src", src), ("dst", dst)):
        if not isinstance(path, (str, os.PathLike)):
            raise ConversionOptionError(f"expected {name} as a path, found {type(path).__name__} {cut(path)}")
        paths.append(check_path(os.fsdecode(path), f"{name} as a path", ConversionOptionError))
    if isinstance(topics, str):     # one name, not its characters
        topics = [topics]
    if topics is not None and not isinstance(topics, Iterable):     # list(-1) was a TypeError
        raise ConversionOptionError(f"expected topics as names (str), found {type(topics).__name__} "
                                    f"{cut(topics)}")
    names = None if topics is None else list(topics)
    if names is not None and not all(isinstance(n, str) for n in names):
        raise ConversionOptionError(f"expected topics as names (str), found {cut(names)}")
    if config is not None and not isinstance(config, Mapping):
        raise ConversionOptionError(f"expected config as a mapping of name to value ({{'segment.bytes': "
                                    f"1048576}}), found {type(config).__name__} {cut(config)}")
    if threads is not None:
        try:
            thread_count(threads)
        except ConfigError as err:      # an argument of the call, as the others (exit 2)
            raise ConversionOptionError(err.message) from None
    with asked_for(threads):    # the count of every path the run takes, on every thread it starts
        return run(paths[0], paths[1], to=to, topics=names,
                   compression=compression, config=dict(config or {}), resume=resume, verify=verify,
                   force=force, skip_corrupt=skip_corrupt, progress=progress, timestamp=timestamp,
                   decompress_bodies=decompress_bodies)


__all__ = ["COMPRESSIONS", "convert", "parse_config"]
