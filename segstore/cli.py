"""The ``segstore`` command line.

Exit codes: 0 ok, 1 a data problem (corrupt or torn files, verify findings, nothing
found), 2 a usage problem (bad arguments, unknown format or config name).
Errors go to stderr as ``path:pos: what was expected, what was found``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from . import files, registry
from .api import open as open_store
from .errors import (
    ConfigError,
    FormatNotFoundError,
    InvalidTopicError,
    SegstoreError,
    UnsupportedOperationError,
)
from .store import QueryRequest

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
_USAGE_ERRORS = (ConfigError, FormatNotFoundError, InvalidTopicError, UnsupportedOperationError)


class UsageError(SegstoreError, ValueError):
    """The command line is wrong (exit code 2)."""


def _parse_config(pairs: Sequence[str] | None) -> dict[str, str]:
    config: dict[str, str] = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--config expects name=value, found {pair!r}")
        config[name.strip()] = value.strip()
    return config


def _open(args: argparse.Namespace, mode: str = "r") -> Any:
    return open_store(args.path, format=args.format, mode=mode, **_parse_config(args.config))


def _partition(args: argparse.Namespace) -> int | None:
    return args.queue if args.queue is not None else args.partition


# -- commands ----------------------------------------------------------------

def cmd_dump(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as store:
        store.dump(out, json=args.json, topic=args.topic, partition=_partition(args),
                   index=args.index)
    return EXIT_OK


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as store:
        info = store.info()
    if args.json:
        out.write(json.dumps(info, sort_keys=True) + "\n")
    else:
        _print_info(info, out)
    return EXIT_OK


def _print_info(info: dict[str, Any], out: TextIO, indent: str = "") -> None:
    for key, value in info.items():
        if isinstance(value, dict):
            out.write(f"{indent}{key}:\n")
            _print_info(value, out, indent + "  ")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            out.write(f"{indent}{key}:\n")
            for item in value:
                out.write(f"{indent}  - " + ", ".join(f"{k}={v}" for k, v in item.items()) + "\n")
        else:
            out.write(f"{indent}{key}: {value}\n")


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as store:
        problems = store.verify()
    for problem in problems:
        out.write(f"{problem}\n")
    if not problems and not args.quiet:
        sys.stderr.write(f"{args.path}: ok\n")
    return EXIT_DATA if problems else EXIT_OK


def cmd_recover(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, mode="a") as store:
        lines = store.recover()
    for line in lines:
        out.write(f"{line}\n")
    if not lines:
        out.write(f"{args.path}: nothing to recover\n")
    return EXIT_OK


def cmd_query(args: argparse.Namespace, out: TextIO) -> int:
    request = QueryRequest(topic=args.topic, partition=_partition(args), key=args.key, offset=args.offset,
                           count=args.count, timestamp=args.timestamp, begin=args.begin, end=args.end,
                           max=args.max, json=args.json)
    if request.key is None and request.offset is None and request.timestamp is None:
        raise UsageError("query needs one of --key, --offset or --timestamp")
    with _open(args) as store:
        code = store.query(request, out)
        for note in getattr(store, "notes", ()):    # where the answer came from (stderr: --json stays JSON)
            sys.stderr.write(f"{args.path}: {note}\n")
        return code


def cmd_write(args: argparse.Namespace, out: TextIO) -> int:
    config: dict[str, Any] = _parse_config(args.config)
    if args.spec:
        spec = json.loads(files.read_text(args.spec))
        fmt = args.format or "rocketmq"
        merged = {**spec.get("config", {}), **config}
        registry.get(fmt).write_spec(args.path, spec, merged)
        out.write(f"{args.path}: wrote {fmt} store from {args.spec}\n")
        return EXIT_OK
    if args.input:
        lines = [json.loads(line) for line in files.read_text(args.input).splitlines() if line.strip()]
        fmt = args.format or ("rocketmq" if not files.list_dir(args.path) else registry.detect(args.path))
        count = registry.get(fmt).write_jsonl(args.path, lines, config)
        out.write(f"{args.path}: appended {count} messages\n")
        return EXIT_OK
    raise UsageError("write needs --spec SPEC.json or --input FILE.jsonl")


# -- parser --------------------------------------------------------------------

def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="store directory (RocketMQ) or partition / log directory (Kafka)")
    p.add_argument("--format", help=f"force the format ({', '.join(registry.names())}); detected if omitted")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a format config value, by the broker's own name (repeatable)")


def _selectors(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic")
    p.add_argument("--queue", type=int, help="RocketMQ queue id")
    p.add_argument("--partition", type=int, help="Kafka partition (alias of --queue)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="segstore", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("dump", help="print every message (human-readable, or --json one object a line)")
    _common(p)
    _selectors(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--index", action="store_true", help="also dump the index files and check them against the log")
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser("info", help="topics, queues/partitions, offset ranges, files and sizes")
    _common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("verify", help="check every file; exit 1 with one path:pos line per problem")
    _common(p)
    p.add_argument("--quiet", "-q", action="store_true")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("recover", help="repair what a crash left (torn tails kept aside) and print what was done")
    _common(p)
    p.set_defaults(func=cmd_recover)

    p = sub.add_parser("query", help="look messages up by key, offset or timestamp")
    _common(p)
    _selectors(p)
    p.add_argument("--key")
    p.add_argument("--offset", type=int)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--timestamp", type=int, help="milliseconds since the epoch")
    p.add_argument("--begin", type=int, help="key query window start (ms)")
    p.add_argument("--end", type=int, help="key query window end (ms)")
    p.add_argument("--max", type=int, default=32, help="at most this many key hits")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("write", help="write a store from a fixture spec or a JSON-lines file of messages")
    _common(p)
    p.add_argument("--spec", help="a compat-fixture spec.json")
    p.add_argument("--input", help="a file of one JSON message per line")
    p.set_defaults(func=cmd_write)

    # Conversion and extra index layouts are packages of their own; they add their subcommands.
    from . import convert, layouts

    convert.add_cli(sub)
    layouts.add_cli(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code."""
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args, out)
    except UsageError as err:
        sys.stderr.write(f"segstore {args.command}: {err}\n")
        return EXIT_USAGE
    except _USAGE_ERRORS as err:
        sys.stderr.write(f"{err}\n")
        return EXIT_USAGE
    except SegstoreError as err:
        sys.stderr.write(f"{err}\n")
        return EXIT_DATA
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
