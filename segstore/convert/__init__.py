"""Format conversion: a RocketMQ store to Kafka partitions and back, lossless and streaming.

``convert(src, dst, to="kafka")`` is the library call; ``add_cli(subparsers)`` adds the
``segstore convert`` subcommand.  The field mapping lives in :mod:`.mapping`, topic
names in :mod:`.topicnames`, the streaming, resumable, verified run in :mod:`.pipeline`.
``docs/conversion.md`` documents every rule.  Importing this package (the CLI does, to add
its subcommand) loads no format plugin; a conversion does.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

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


def _cmd_convert(args: argparse.Namespace, out: TextIO) -> int:
    from segstore.cli import _parse_config, resolve_store

    resolve_store(args.src, None)  # a missing or unknown source is a usage error (exit 2), said first
    report = convert(args.src, args.dst, to=args.to, topics=args.topic, compression=args.compression,
                     config=_parse_config(args.config), resume=args.resume, verify=args.verify,
                     force=args.force, skip_corrupt=args.skip_corrupt, timestamp=args.timestamp)
    for line in report.lines():
        out.write(line + "\n")
    return 0


def add_cli(subparsers: Any) -> None:
    """Add ``segstore convert SRC DST --to kafka|rocketmq ...`` to the CLI's subparsers."""
    p = subparsers.add_parser("convert", help="convert a RocketMQ store to Kafka partitions or back")
    p.add_argument("src", help="source: a RocketMQ store directory or a Kafka log directory")
    p.add_argument("dst", help="destination directory (must not exist unless --force or --resume)")
    p.add_argument("--to", required=True, choices=TARGETS, help="destination format")
    p.add_argument("--topic", action="append", metavar="T",
                   help="convert only this source topic (repeatable)")
    p.add_argument("--compression", default="none", choices=COMPRESSIONS, help="Kafka batch compression")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a destination config value, by the broker's own name (repeatable)")
    p.add_argument("--timestamp", default="born", choices=("born", "store"),
                   help="Kafka timestamp: RocketMQ born time (CreateTime) or store time (LogAppendTime)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted conversion into DST")
    p.add_argument("--verify", action="store_true", help="re-read the result and compare it with the source")
    p.add_argument("--force", action="store_true", help="replace an existing DST")
    p.add_argument("--skip-corrupt", action="store_true",
                   help="report corrupt source regions and continue past them")
    p.set_defaults(func=_cmd_convert)


__all__ = ["COMPRESSIONS", "TARGETS", "add_cli", "convert"]
