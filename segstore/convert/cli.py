"""``segstore convert``: the command line of :mod:`segstore.convert` (part of the CLI, not the library)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from segstore import registry
from segstore.cli import (
    _directory_name_hint,
    _store_partitions,
    _threads_flag,
    check_store_path,
    open_store,
    resolve_store,
    store_config,
)
from segstore.errors import NotFoundError

from . import COMPRESSIONS, convert


def _cmd_convert(args: argparse.Namespace, out: TextIO) -> int:
    fmt = resolve_store(args.src, None)  # a missing or unknown source is a usage error (exit 2), said first
    check_store_path(args.dst)
    try:
        report = convert(args.src, args.dst, to=args.to, topics=args.topic, compression=args.compression,
                         config=store_config(args, args.to), resume=args.resume, verify=args.verify,
                         force=args.force, skip_corrupt=args.skip_corrupt, timestamp=args.timestamp,
                         decompress_bodies=args.decompress_bodies, threads=args.threads)
    except NotFoundError as err:
        hint = _topic_hints(args, fmt) if err.path == args.src and args.topic else ""
        if not hint:
            raise
        raise NotFoundError(err.message + hint, err.path, err.pos) from None
    for line in report.lines():
        out.write(line + "\n")
    return 0


def _topic_hints(args: argparse.Namespace, fmt: str) -> str:
    """The hints of the ``--topic`` values the source does not hold that name a partition directory
    (``orders-1``: ``--topic orders``), as the other commands give them."""
    with open_store(args.src, format=fmt, mode="r") as source:
        held = set(source.topics())
        partitions = _store_partitions(source)
        return "".join(_directory_name_hint(fmt, topic, partitions, form="topic")
                       for topic in dict.fromkeys(args.topic) if topic not in held)


def add_cli(subparsers: Any) -> None:
    """Add ``segstore convert SRC DST --to kafka|rocketmq ...`` to the CLI's subparsers."""
    p = subparsers.add_parser("convert", help="convert a store into another format (RocketMQ <-> Kafka...)")
    p.add_argument("src", help="source: a store of any registered format (RocketMQ store, Kafka log dir...)")
    p.add_argument("dst", help="destination directory (must not exist unless --force or --resume)")
    p.add_argument("--to", required=True, choices=registry.names(), help="destination format")
    p.add_argument("--topic", action="append", metavar="T",
                   help="convert only this source topic (repeatable)")
    p.add_argument("--compression", default="none", choices=COMPRESSIONS, help="batch compression (Kafka)")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a destination config value, by the broker's own name (repeatable)")
    p.add_argument("--config-file", metavar="FILE",
                   help="the destination broker's own config file (RocketMQ broker.conf, Kafka "
                        "server.properties), read as that broker reads it; --config wins over it")
    p.add_argument("--timestamp", default="born", choices=("born", "store"),
                   help="Kafka timestamp: RocketMQ born time (CreateTime) or store time (LogAppendTime)")
    p.add_argument("--decompress-bodies", action="store_true",
                   help="RocketMQ source: write bodies its producers compressed inflated, as consumers "
                        "read them (default: as stored, so that converting back gives the same bytes)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted conversion into DST")
    p.add_argument("--verify", action="store_true", help="re-read the result and compare it with the source")
    p.add_argument("--force", action="store_true",
                   help="replace an existing DST: a store of the --to format or an empty directory")
    p.add_argument("--skip-corrupt", action="store_true",
                   help="report corrupt source regions and continue past them")
    _threads_flag(p, "read, write and verify")
    p.set_defaults(func=_cmd_convert)
