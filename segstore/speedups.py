"""The optional C accelerators of the format plugins: loaded here, with one warning when missing.

A plugin asks for its extension module with :func:`load`; it gets the module, or None
and then runs its pure-Python reference code (same results, slower).  Setting the
environment variable ``SEGSTORE_PURE_PYTHON=1`` forces the pure-Python paths (the
test-suite and benchmarks compare both); a module that was built but fails to import,
or was never built, is reported once per process with a :class:`RuntimeWarning`
rather than silently costing several times the run time.
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
        return importlib.import_module(name)
    except ImportError as err:
        if name not in missing:
            missing[name] = str(err)
            warnings.warn(f"{name}: the C accelerator is not available ({err}); the pure-Python code runs "
                          "instead (same results, several times slower). Reinstall with a C compiler "
                          f"(`pip install .`), or set {PURE_PYTHON_ENV}=1 to choose the pure-Python code "
                          "without this warning", SpeedupsWarning, stacklevel=2)
        return None
