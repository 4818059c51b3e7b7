"""``segstore retention``, ``delete-records`` and ``compact``: what the brokers do to old data.

The rules are the plugins' (``Store.retention``, ``Store.delete_records``,
``Store.compact``); this module adds the subcommands and prints what the plugin
returns: in words, one line for each partition (or store) that changes and a
summary (``--json``: every result, one object a line).  Exit codes as the
rest of the CLI: 0 ok, 1 a data problem, 2 usage (an offset the log cannot start
at, a config name the format does not know, an operation it does not have).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from .cli import (
    EXIT_OK,
    UsageError,
    _common,
    _missing_selection,
    _open,
    _partition,
    _selectors,
    human,
    now_ms,
    whole_number,
)
from .errors import OffsetOutOfRangeError

#: Result fields each command's text speaks of itself; any other field a plugin adds is shown as
#: ``name: value``.  Kafka retention and delete-records (per partition), RocketMQ retention (per
#: store), Kafka compaction (per partition).
_KNOWN = frozenset({
    "topic", "partition", "queue_id", "dry_run", "high_watermark", "log_start_offset_before",
    "log_start_offset", "rolled_at", "removed_files", "deleted_segments", "min_offset_before", "min_offset",
    "commitlog_files", "consume_queue_files", "index_files", "runs", "triggers", "first_dirty_offset",
    "first_uncleanable_offset", "end_offset", "groups", "records_read", "records_kept", "bytes_before",
    "bytes_after", "passes", "map_full", "limits",
})


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 'es' if noun.endswith('s') else 's'}"


def _where(result: dict[str, Any], path: str) -> str:
    """What a result is about: ``TOPIC-PARTITION`` (Kafka's directory name), ``TOPIC/QUEUE``, or the store."""
    if "topic" in result and "partition" in result:
        return f"{result['topic']}-{result['partition']}"
    if "topic" in result and "queue_id" in result:
        return f"{result['topic']}/{result['queue_id']}"
    return path


def _changes(result: dict[str, Any]) -> list[str]:
    """What a result did (or, in a dry run, would do), in words; empty when it changes nothing."""
    would = result.get("dry_run", False)
    phrases: list[str] = []
    segments = result.get("deleted_segments") or []
    if segments:
        reasons = sorted({seg.get("reason") for seg in segments if seg.get("reason")})
        size = sum(seg.get("bytes", 0) for seg in segments)
        first, last = segments[0].get("base_offset"), segments[-1].get("end_offset")
        span = f", offsets {first}-{last - 1}" if isinstance(first, int) and isinstance(last, int) else ""
        phrases.append(f"{'would delete' if would else 'deleted'} {_count(len(segments), 'segment')}{span} "
                       f"({size} bytes{'; ' + ', '.join(reasons) if reasons else ''})")
    # removed_files: the files of the deleted segments, counted with them
    kinds = [(key, noun) for key, noun in (("commitlog_files", "commitlog file"),
                                            ("consume_queue_files", "consume-queue file"),
                                            ("index_files", "index file"), ("removed_files", "file"))
             if result.get(key) and not (key == "removed_files" and segments)]
    if kinds:
        phrases.append(f"{'would delete' if would else 'deleted'} "
                       + ", ".join(_count(len(result[key]), noun) for key, noun in kinds))
    for before, after, name in (("log_start_offset_before", "log_start_offset", "log start offset"),
                                ("min_offset_before", "min_offset", "commitlog min offset")):
        if before in result and result.get(after) != result[before]:
            phrases.append(f"{name} {result[before]} -> {result.get(after)}")
    if result.get("rolled_at") is not None:
        phrases.append(f"{'would roll' if would else 'rolled'} a new segment at offset {result['rolled_at']}")
    # a dry run plans the first pass only: one whose map filled says so even where that pass drops
    # nothing, as the run goes on past it (and its later passes may)
    if "records_kept" in result and (result["records_kept"] != result.get("records_read")
                                     or result.get("bytes_after") != result.get("bytes_before")
                                     or (would and result.get("map_full"))):
        end = result.get("end_offset")
        cleaned = (f"offsets {result.get('first_dirty_offset')}-{end - 1}" if isinstance(end, int)
                   else "the dirty segments")
        passes = result.get("passes")
        first = " in its first pass" if result.get("map_full") else ""
        keep = "keep" if would else "kept"
        phrases.append(f"{'would clean' if would else 'cleaned'} {cleaned}{first}: {keep} "
                       f"{result['records_kept']} of {result.get('records_read')} records, "
                       f"{result.get('bytes_before')} -> {result.get('bytes_after')} bytes"
                       + (f", {_count(passes, 'pass')}" if isinstance(passes, int) and passes > 1 else "")
                       + (" (the key map filled: the run cleans the rest in more passes, which a dry run "
                          "does not plan)" if result.get("map_full") else ""))
    if phrases and result.get("triggers"):
        phrases.append(f"triggers: {human(result['triggers'])}")
    return phrases


def _print_results(command: str, results: list[dict[str, Any]], out: TextIO, as_json: bool,
                   path: str) -> None:
    """``--json``: every result, one object a line.  Text: one line for each result that changes
    something (what, in words), then one summary line; results that change nothing are only counted."""
    if as_json:
        for result in results:
            out.write(json.dumps(result, sort_keys=True) + "\n")
        return
    dry_run = any(result.get("dry_run") for result in results)
    changed = 0
    for result in results:
        phrases = _changes(result)
        others = [f"{key}: {human(value)}" for key, value in result.items() if key not in _KNOWN]
        if phrases:
            changed += 1
        if phrases or others:
            out.write(f"{_where(result, path)}: {'; '.join(phrases + others)}\n")
    per_partition = any("topic" in result for result in results)
    unit = "partition" if per_partition else "store"
    label = f"{command} (dry run)" if dry_run else command
    if not changed:
        where = _count(len(results), unit) if per_partition else path
        out.write(f"{label}: nothing to {'clean' if command == 'compact' else 'delete'} in {where}"
                  f"{_no_limits(results)}\n")
        return
    if per_partition:
        summary = (f"{_count(changed, unit)} {'would change' if dry_run else 'changed'}, "
                   f"{len(results) - changed} unchanged")
        out.write(f"{label}: {summary}{'; nothing was changed' if dry_run else ''}\n")
    elif dry_run:
        out.write(f"{label}: nothing was changed\n")


def _no_limits(results: list[dict[str, Any]]) -> str:
    """Why a Kafka retention run deleted nothing where no partition it ran on has a limit (its results'
    ``limits`` all -1): segstore's default ``retention.ms`` is -1 where the broker's is 7 days, so old
    data on a log dir without a topic config for it is kept, which "nothing to delete" alone hid."""
    limits = [result["limits"] for result in results if isinstance(result.get("limits"), dict)]
    if not limits or any(value >= 0 for each in limits for value in each.values()):
        return ""
    where = "each" if len(limits) > 1 else "it"
    return (f": retention.ms and retention.bytes are -1 (keep forever) on {where}, segstore's default where "
            "no topic config, --config or --config-file sets them (the broker's retention.ms is 604800000, "
            "7 days)")


def _config_notes(store: Any, args: argparse.Namespace) -> None:
    """Say on stderr where ``--config`` overrides what the store's files set for a topic."""
    for line in store.config_notes(args.topic):
        sys.stderr.write(f"segstore {args.command}: {line}\n")


def _check_selection(store: Any, args: argparse.Namespace) -> None:
    """A ``--topic``/``--partition`` the store does not hold is the user's typo (exit 1, naming what it
    holds), not a store with nothing to do."""
    missing = _missing_selection(store, args)
    if missing is not None:
        raise missing


def cmd_retention(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, mode="r" if args.dry_run else "a") as store:
        _check_selection(store, args)
        _config_notes(store, args)
        results = store.retention(dry_run=args.dry_run, now_ms=args.now_ms, topic=args.topic,
                                  partition=_partition(args))
    _print_results("retention", results, out, args.json, args.path)
    return EXIT_OK


def cmd_delete_records(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, mode="r" if args.dry_run else "a") as store:
        _check_selection(store, args)
        _config_notes(store, args)
        try:
            results = store.delete_records(args.before, dry_run=args.dry_run, topic=args.topic,
                                           partition=_partition(args))
        except OffsetOutOfRangeError as err:  # --before names an offset the log cannot start at
            raise UsageError(str(err)) from err
    _print_results("delete-records", results, out, args.json, args.path)
    return EXIT_OK


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, mode="r" if args.dry_run else "a") as store:
        _check_selection(store, args)
        _config_notes(store, args)
        results = store.compact(dry_run=args.dry_run, now_ms=args.now_ms, topic=args.topic,
                                partition=_partition(args), dedupe_buffer_size=args.dedupe_buffer_size)
    _print_results("compact", results, out, args.json, args.path)
    return EXIT_OK


def add_cli(sub: Any) -> None:
    """``retention``, ``delete-records`` and ``compact``: what the brokers do to old data."""
    p = sub.add_parser("retention", help="delete old data by the broker's retention rules (--config names)")
    _common(p)
    _selectors(p)
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted; change nothing")
    p.add_argument("--now-ms", type=now_ms, metavar="TIME",
                   help="the clock retention times are measured against (ms or ISO-8601; default: now)")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_retention)

    p = sub.add_parser("delete-records", help="Kafka DeleteRecords: move the log start offset forward")
    _common(p)
    _selectors(p)
    p.add_argument("--before", type=whole_number, required=True,
                   help="the new log start (-1: the high watermark)")
    p.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_delete_records)

    p = sub.add_parser("compact", help="compact partitions as Kafka's log cleaner (latest record per key)")
    _common(p)
    _selectors(p)
    p.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    p.add_argument("--now-ms", type=now_ms, metavar="TIME",
                   help="the clock delete.retention.ms and min.compaction.lag.ms are measured against (ms or "
                        "ISO-8601; default: now)")
    p.add_argument("--dedupe-buffer-size", type=whole_number, default=128 * 1024 * 1024, metavar="BYTES",
                   help="log.cleaner.dedupe.buffer.size: the key map's memory (24 bytes a key); a full "
                        "map cleans in several passes (default 128 MiB)")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_compact)
