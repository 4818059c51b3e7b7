"""Kafka's sparse time index (``%020d.timeindex``): the core's time entries.

The 12-byte entry and its rules live in :mod:`segstore.indexes.timeindex`; Kafka
declares them as its native ``time`` files.  This module names them for the
plugin's code.
"""

from segstore.indexes.timeindex import (
    NO_TIMESTAMP,
    TIME_ENTRY,
    TimeIndex,
    TimestampOffset,
)

__all__ = [
    "NO_TIMESTAMP",
    "TIME_ENTRY",
    "TimeIndex",
    "TimestampOffset",
]
