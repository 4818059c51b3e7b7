"""segstore: message-log storage files of Apache RocketMQ and Apache Kafka, read and written byte for byte.

``segstore.open(path, format=None, mode="r", **config)`` returns a store; see
:class:`segstore.store.Store` for what every store offers.

The names below load on first use (PEP 562): importing a module of the package, as the
``segstore`` executable's entry point (:mod:`segstore.launch`) does first, costs nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import config_file, config_file_notes, open
    from .errors import SegstoreError
    from .records import Message, Record
    from .store import AppendResult, DumpLine, Problem, QueryRequest, QueryResult, Store

__all__ = ["AppendResult", "DumpLine", "Message", "Problem", "QueryRequest", "QueryResult", "Record",
           "SegstoreError", "Store", "config_file", "config_file_notes", "open"]
__version__ = "0.1.0"

#: the module each name of :data:`__all__` comes from
_HOMES = {"open": ".api", "config_file": ".api", "config_file_notes": ".api", "SegstoreError": ".errors",
          "Message": ".records", "Record": ".records",
          **{name: ".store" for name in ("AppendResult", "DumpLine", "Problem", "QueryRequest", "QueryResult",
                                         "Store")}}


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, or a submodule (``segstore.errors``: what importing the package
    used to load along)."""
    home = _HOMES.get(name)
    if home is None:
        try:
            return importlib.import_module(f"{__name__}.{name}")    # sets itself on the package
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value     # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
