"""Kafka's sparse offset index (``%020d.index``): the core's sparse offset entries.

The 8-byte entry, preallocation/trim and Kafka's sanity checks live in
:mod:`segstore.indexes.sparse`; Kafka declares them as its native ``offset``
files.  This module names them for the plugin's code.
"""

from segstore.indexes.sparse import (
    OFFSET_ENTRY,
    KafkaIndex,
    OffsetIndex,
    OffsetPosition,
    check_length,
)

__all__ = [
    "OFFSET_ENTRY",
    "KafkaIndex",
    "OffsetIndex",
    "OffsetPosition",
    "check_length",
]
