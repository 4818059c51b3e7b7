"""The optional C accelerators of the format plugins: loaded here, with one warning when missing.

A plugin asks for its extension module with :func:`load`; it gets the module, or None
and then runs its pure-Python reference code (same results, slower).  Setting the
environment variable ``SEGSTORE_PURE_PYTHON=1`` forces the pure-Python paths (the
test-suite and benchmarks compare both); a module that was built but fails to import,
or was never built, is reported once per process with a :class:`RuntimeWarning`
rather than silently costing several times the run time.  So is a stale build: a module
whose ``SOURCE_HASH`` (stamped by setup.py) is not the hash of the ``.c`` file beside it
(a checkout updated without rebuilding), whose functions may take other arguments than
the Python code now passes.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

#: Set to anything but ``""`` or ``"0"`` to use the pure-Python code even where C is built.
PURE_PYTHON_ENV = "SEGSTORE_PURE_PYTHON"

#: Accelerators that could not be imported, by module name: why.
missing: dict[str, str] = {}

#: The modules :func:`stale` already checked, by name: the module object and its answer.  Every
#: plugin module that uses an accelerator loads it; the check reads and hashes the whole C source
#: (170 KB for Kafka's), so it runs once per module object (a module imported anew is checked anew).
_checked: dict[str, tuple[ModuleType, str | None]] = {}


class SpeedupsWarning(RuntimeWarning):
    """A C accelerator is not available; the slower pure-Python code runs instead."""


def pure_python() -> bool:
    """True when ``SEGSTORE_PURE_PYTHON`` asks for the pure-Python paths."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The C extension module ``name``; None when forced off or not importable (warned once).

    Thread-safety: call at import time (module imports are serialised by Python).
    """
    if pure_python():
        return None
    try:
        module = importlib.import_module(name)
        seen = _checked.get(name)
        if seen is not None and seen[0] is module:
            why = seen[1]
        else:
            why = stale(module)
            _checked[name] = (module, why)
    except ImportError as err:
        module, why = None, str(err)
    if why is None:
        return module
    if name not in missing:
        missing[name] = why
        warnings.warn(f"{name}: the C accelerator is not available ({why}); the pure-Python code runs "
                      "instead (same results, several times slower). Reinstall with a C compiler "
                      f"(`pip install .`), or set {PURE_PYTHON_ENV}=1 to choose the pure-Python code "
                      "without this warning", SpeedupsWarning, stacklevel=2)
    return None


#: The helpers every accelerator includes: part of each build's source (setup.py hashes it too).
COMMON_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "speedups_common.h")


def source_hash(data: bytes) -> str:
    """What setup.py stamps a build with: the CRC-32 (zlib's) and the length (mod 2**32) of the C source
    (:func:`source_files`, one after another) followed by :data:`COMMON_HEADER`, 8 hex digits each.

    A fingerprint that an edit, a checkout or a pull changes, not a guard against forged source: zlib's
    CRC of the 170 KB of Kafka's source takes ~0.03 ms, a SHA-256 0.46 ms (CPython's own; OpenSSL's
    hashlib 2-7 ms more to import), on the first load of every process run from a source tree (the only
    one whose .c files lie beside the builds)."""
    import zlib

    return f"{zlib.crc32(data):08x}{len(data) & 0xFFFFFFFF:08x}"


def source_files(source: str) -> list[str]:
    """``source`` (a module's ``_speedups.c``) and the files it includes, one per concern: every
    ``_speedups_*.c`` beside it, sorted (setup.py hashes the same files in the same order)."""
    directory, name = os.path.split(source)
    stem = os.path.splitext(name)[0] + "_"
    return [source, *sorted(os.path.join(directory, n) for n in os.listdir(directory or ".")
                            if n.startswith(stem) and n.endswith(".c"))]


def stale(module: ModuleType) -> str | None:
    """Why ``module`` was built from other source than the ``.c`` file beside it; None when it was
    not, or when no source sits beside it (an installed wheel) or the build was not stamped."""
    source = os.path.splitext(os.path.splitext(module.__file__ or "")[0])[0] + ".c"
    if not os.path.isfile(source):
        return None
    built = getattr(module, "SOURCE_HASH", None)
    if built == "":
        return None
    data = b""
    for path in source_files(source):
        with open(path, "rb") as f:
            data += f.read()
    if os.path.isfile(COMMON_HEADER) and b'#include "speedups_common.h"' in data:
        with open(COMMON_HEADER, "rb") as f:
            data += f.read()
    current = source_hash(data)
    if built != current:
        return (f"{module.__file__} was built from other source than {source} ({built or 'no stamp'}, "
                f"now {current}): a stale build, rebuild it")
    return None
