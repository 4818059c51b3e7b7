"""Format conversion: a RocketMQ store to Kafka partitions and back, lossless and streaming.

``convert(src, dst, to="kafka")`` is the library call; :mod:`.cli` adds the
``segstore convert`` subcommand.  The field mapping lives in :mod:`.mapping`, topic
names in :mod:`.topicnames`, the streaming, resumable, verified run in :mod:`.pipeline`.
``docs/conversion.md`` documents every rule.  Importing this package (the CLI does, to add
its subcommand) loads no format plugin; a conversion does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pipeline import ConversionReport

#: Destination formats, and the Kafka batch compressions a conversion can write.
TARGETS = ("kafka", "rocketmq")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str], to: str = "kafka",
            topics: Iterable[str] | None = None, compression: str = "none",
            config: Mapping[str, Any] | None = None, resume: bool = False, verify: bool = False,
            force: bool = False, skip_corrupt: bool = False, progress: bool | None = None,
            timestamp: str = "born") -> ConversionReport:
    """Convert the store at ``src`` into a new store of format ``to`` at ``dst``.

    :param to: ``"kafka"`` (``dst`` becomes a log directory of ``TOPIC-PARTITION``
        directories) or ``"rocketmq"`` (``dst`` becomes a store directory).
    :param topics: only these source topics (source names); all when None.
    :param compression: Kafka batch compression (``none gzip snappy lz4 zstd``).
    :param config: the destination format's config names (``segment.bytes``,
        ``mappedFileSizeCommitLog``...).
    :param resume: continue an interrupted conversion into the same ``dst``.
    :param verify: re-read the result and compare every record with the source.
    :param force: replace an existing ``dst``.
    :param skip_corrupt: report corrupt source regions and continue past them.
    :param progress: a progress bar on stderr; by default only when stderr is a terminal.
    :param timestamp: RocketMQ -> Kafka: ``"born"`` (CreateTime) or ``"store"`` (LogAppendTime).
    :raises ConversionError: bad input or destination; other :class:`SegstoreError`
        subclasses for corrupt sources (``path:pos:``).
    """
    from .pipeline import run  # the plugins load here, not when the CLI builds its parser

    return run(os.fspath(src), os.fspath(dst), to=to, topics=None if topics is None else list(topics),
               compression=compression, config=dict(config or {}), resume=resume, verify=verify,
               force=force, skip_corrupt=skip_corrupt, progress=progress, timestamp=timestamp)


__all__ = ["COMPRESSIONS", "TARGETS", "convert"]
