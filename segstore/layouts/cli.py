"""``segstore index build|verify|drop PATH --index NAME ...``.

The store itself is opened read-only: building an extra index never opens the
broker's files for writing, so they stay byte-identical.  Native layouts have
nothing to build or drop (the broker keeps them); ``verify`` checks them with
the store's own ``verify``.  ``verify`` without ``--index`` checks every extra
layout built for the store (:func:`~segstore.layouts.present_layouts`), ``drop
--all`` drops them all (``drop`` names its layouts or says ``--all``: nothing is
deleted on a forgotten flag).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from segstore.api import open as open_store
from segstore.cli import CONFIG_FILE_HELP, format_name
from segstore.errors import ConfigError

from . import LAYOUT_NAMES, IndexSet, extra_layout_class, layout_class, present_layouts

EXIT_OK, EXIT_DATA = 0, 1


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    from segstore.convert import parse_config  # as every command's --config: each name once

    return parse_config(values, flag)


def _open(args: argparse.Namespace) -> Any:
    from segstore.cli import resolve_store, store_config  # the path must exist and hold the format asked for

    fmt = resolve_store(args.path, args.format)
    return open_store(args.path, format=fmt, mode="r", **store_config(args, fmt))


def _native_and_extra(store: Any, names: list[str]) -> tuple[list[str], list[str]]:
    """The layouts ``--index`` names, those the format keeps itself and the extra ones.

    :raises ConfigError: a layout named twice (it would be built, verified or dropped twice over).
    """
    twice = next((name for n, name in enumerate(names) if name in names[:n]), None)
    if twice is not None:
        raise ConfigError(f"expected each --index layout once, found {twice!r} twice")
    native = [n for n in names if layout_class(n, store.format).native]
    return native, [n for n in names if n not in native]


def cmd_build(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as store:
        native, extra = _native_and_extra(store, args.index)
        # the options are checked (and the index locks taken) before anything is said done
        indexes = IndexSet(store, extra, _pairs(args.option, "--option"), writable=True, building=True)
        for name in native:
            out.write(f"{args.path}: {name}: native to {store.format} stores, kept by the broker\n")
        try:
            indexes.build()
        except BaseException:
            # a build cut short (a full disk) leaves an index whose files it let go of: released as a
            # killed build's, nothing marked clean (the next open rebuilds what it cannot trust);
            # close() flushed files it no longer held (an AttributeError over the full disk's error)
            indexes.abandon()
            raise
        try:
            for line in indexes.actions:
                out.write(f"{line}\n")
        finally:
            indexes.close()
        for name in extra:
            out.write(f"{args.path}: {name}: built\n")
    return EXIT_OK


def _none_built(args: argparse.Namespace) -> str:
    return f"{args.path}: no extra index layouts built (name one with --index)"


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as store:
        names = args.index or present_layouts(store)     # none named: every extra layout built
        if not names:
            if args.json and not args.quiet:
                out.write(json.dumps({"path": args.path, "ok": True, "problems": []}, sort_keys=True) + "\n")
            elif not args.quiet:
                sys.stderr.write(f"{_none_built(args)}\n")
            return EXIT_OK
        native, extra = _native_and_extra(store, names)
        problems = list(store.verify()) if native else []
        indexes = IndexSet(store, extra, writable=False)
        try:
            problems.extend(indexes.verify())
        finally:
            indexes.close()
    if args.json:
        if problems or not args.quiet:     # --quiet: nothing when clean, whatever the output's form
            found = [{"path": p.path, "pos": p.pos, "message": p.message} for p in problems]
            out.write(json.dumps({"path": args.path, "ok": not problems, "problems": found}, sort_keys=True)
                      + "\n")
        return EXIT_DATA if problems else EXIT_OK
    for problem in problems:
        out.write(f"{problem}\n")
    if not problems and not args.quiet:
        sys.stderr.write(f"{args.path}: {', '.join(names)}: ok\n")
    return EXIT_DATA if problems else EXIT_OK


def cmd_drop(args: argparse.Namespace, out: TextIO) -> int:
    from segstore.cli import UsageError

    from .options import parse_options

    if bool(args.index) == args.all:
        raise UsageError("expected --index NAME or --all, found both" if args.all else
                         "expected --index NAME or --all (every extra layout built), found neither")
    with _open(args) as store:
        names = args.index or present_layouts(store)
        if not names:
            out.write(f"{_none_built(args)}\n")
            return EXIT_OK
        native, extra = _native_and_extra(store, names)
        for name in native:
            out.write(f"{args.path}: {name}: native to {store.format} stores, not dropped\n")
        options = parse_options({})
        for name in extra:
            layout = extra_layout_class(name, store.format)(store, options, writable=True,
                                                            open_streams=False)
            removed = layout.drop()
            for directory in removed:
                out.write(f"removed {directory}\n")
            if not removed:     # said, as a native one's line: a silent exit 0 looked like a drop
                out.write(f"{args.path}: {name}: not built, nothing to drop\n")
    return EXIT_OK


def add_commands(subparsers: Any) -> None:
    """Register ``index`` with its ``build``, ``verify`` and ``drop`` subcommands."""
    parser = subparsers.add_parser("index", help="build, verify or drop extra index layouts "
                                                 f"({', '.join(LAYOUT_NAMES)})")
    actions = parser.add_subparsers(dest="index_command", required=True, metavar="{build,verify,drop}")
    for name, func, text in (
            ("build", cmd_build, "build (or rebuild) extra indexes from a scan; broker files stay untouched"),
            ("verify", cmd_verify, "check indexes against the log; exit 1 with a path:pos line per problem"),
            ("drop", cmd_drop, "delete extra indexes")):
        p = actions.add_parser(name, help=text)
        p.add_argument("path", help="store directory (RocketMQ) or partition / log directory (Kafka)")
        p.add_argument("--index", action="append", required=name == "build", choices=LAYOUT_NAMES,
                       help={"build": "a layout (repeatable)",
                             "verify": "a layout (repeatable); default: every extra layout built",
                             "drop": "a layout (repeatable); or --all"}[name])
        p.add_argument("--format", type=format_name, help="the format PATH must hold; detected if omitted")
        p.add_argument("--config", action="append", metavar="NAME=VALUE",
                       help="a format config value, by the broker's own name (repeatable)")
        p.add_argument("--config-file", metavar="FILE", help=CONFIG_FILE_HELP)
        if name == "build":
            p.add_argument("--option", action="append", metavar="NAME=VALUE",
                           help="a layout option (key.index.headers=h1,h2; layout.interval.bytes=N; ...)")
        if name == "drop":
            p.add_argument("--all", action="store_true",
                           help="every extra layout built for the store (instead of --index)")
        if name == "verify":
            p.add_argument("--quiet", "-q", action="store_true",
                           help="print nothing when the indexes are clean")
            p.add_argument("--json", action="store_true",
                           help='one object {"path", "ok", "problems": [{"path", "pos", "message"}]}')
        p.set_defaults(func=func, command=f"index {name}")
