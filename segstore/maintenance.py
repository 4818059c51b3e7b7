"""``segstore retention``, ``delete-records`` and ``compact``: what the brokers do to old data.

The rules are the plugins' (``Store.retention``, ``Store.delete_records``,
``Store.compact``); this module adds the subcommands and prints what the plugin
returns, one result a line (``--json``: one object a line).  Exit codes as the
rest of the CLI: 0 ok, 1 a data problem, 2 usage (an offset the log cannot start
at, a config name the format does not know, an operation it does not have).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from .cli import EXIT_OK, UsageError, _common, _open, _partition, _selectors
from .errors import OffsetOutOfRangeError


def _print_results(results: list[dict[str, Any]], out: TextIO, as_json: bool) -> None:
    for result in results:
        if as_json:
            out.write(json.dumps(result, sort_keys=True) + "\n")
        else:
            out.write(", ".join(f"{k}={v}" for k, v in result.items()) + "\n")


def _config_notes(store: Any, args: argparse.Namespace) -> None:
    """Say on stderr where ``--config`` overrides what the store's files set for a topic."""
    for line in store.config_notes(args.topic):
        sys.stderr.write(f"segstore {args.command}: {line}\n")


def cmd_retention(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, mode="r" if args.dry_run else "a") as store:
        _config_notes(store, args)
        results = store.retention(dry_run=args.dry_run, now_ms=args.now_ms, topic=args.topic,
                                  partition=_partition(args))
    _print_results(results, out, args.json)
    return EXIT_OK


def cmd_delete_records(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, mode="r" if args.dry_run else "a") as store:
        _config_notes(store, args)
        try:
            results = store.delete_records(args.before, dry_run=args.dry_run, topic=args.topic,
                                           partition=_partition(args))
        except OffsetOutOfRangeError as err:  # --before names an offset the log cannot start at
            raise UsageError(str(err)) from err
    _print_results(results, out, args.json)
    return EXIT_OK


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, mode="r" if args.dry_run else "a") as store:
        _config_notes(store, args)
        results = store.compact(dry_run=args.dry_run, now_ms=args.now_ms, topic=args.topic,
                                partition=_partition(args), dedupe_buffer_size=args.dedupe_buffer_size)
    _print_results(results, out, args.json)
    return EXIT_OK


def add_cli(sub: Any) -> None:
    """``retention``, ``delete-records`` and ``compact``: what the brokers do to old data."""
    p = sub.add_parser("retention", help="delete old data by the broker's retention rules (--config names)")
    _common(p)
    _selectors(p)
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted; change nothing")
    p.add_argument("--now-ms", type=int, help="the clock retention times are measured against (default: now)")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_retention)

    p = sub.add_parser("delete-records", help="Kafka DeleteRecords: move the log start offset forward")
    _common(p)
    _selectors(p)
    p.add_argument("--before", type=int, required=True, help="the new log start (-1: the high watermark)")
    p.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_delete_records)

    p = sub.add_parser("compact", help="compact partitions as Kafka's log cleaner (latest record per key)")
    _common(p)
    _selectors(p)
    p.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    p.add_argument("--now-ms", type=int, help="the clock delete.retention.ms is measured against")
    p.add_argument("--dedupe-buffer-size", type=int, default=128 * 1024 * 1024, metavar="BYTES",
                   help="log.cleaner.dedupe.buffer.size: the key map's memory (24 bytes a key); a full "
                        "map cleans in several passes (default 128 MiB)")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_compact)
