"""The ``segstore`` executable's entry point: a Ctrl-C is answered from its first line on.

The command line's modules, and numpy and pyarrow behind them, take most of a second to
import, and parsing the arguments comes after that; a Ctrl-C (SIGINT) meanwhile raised
``KeyboardInterrupt`` outside everything that answers it, and Python printed a traceback.
This module imports nothing of segstore's (the package loads its names on first use) until
it is ready to answer one: exit 130 and ``segstore COMMAND: interrupted``, as the command line
does once running (:func:`segstore.cli.main`), or exit 0 for ``dump --follow``, which Ctrl-C
ends (``docs/cli.md``).  What only the interpreter runs before this (its start-up, ``site``) it
answers itself.
"""

from __future__ import annotations

import sys

#: Interrupted (Ctrl-C, SIGINT): 128 + the signal's number, what shells report for it.
EXIT_INTERRUPTED = 130


def _follows(argv: list[str]) -> bool:
    """Whether the command line is a ``dump --follow`` (an option as argparse takes it: whole, or a
    prefix of at least ``--fol``)."""
    return bool(argv) and argv[0] == "dump" and any(
        len(arg) >= 5 and "--follow".startswith(arg) for arg in argv[1:])


def command() -> int:
    """:func:`segstore.cli.command`, a Ctrl-C before it answers one answered here."""
    try:
        from .cli import command as run

        return run()
    except KeyboardInterrupt:
        argv = sys.argv[1:]
        if _follows(argv):
            return 0
        words = f"segstore {argv[0]}" if argv and not argv[0].startswith("-") else "segstore"
        sys.stderr.write(f"{words}: interrupted\n")
        return EXIT_INTERRUPTED
