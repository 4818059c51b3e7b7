"""Kafka's transaction index (``%020d.txnindex``): the aborted transactions of one segment.

Layout (big-endian, ``AbortedTxn.java``), 34 bytes per aborted transaction, in
the order their ABORT markers were written::

     0  int16  version            (0)
     2  int64  producer id
    10  int64  first offset       (the transaction's first data offset)
    18  int64  last offset        (the ABORT marker's offset)
    26  int64  last stable offset (first offset of the earliest other open transaction,
                                   else last offset + 1)

The file is created on the first append, so a segment without aborted
transactions has none.  Readers use it to drop aborted records
(:meth:`TransactionIndex.aborted_in`).

Thread-safety: not thread-safe; the owning partition serialises access.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from segstore import files
from segstore.errors import CorruptIndexError
from segstore.files import AppendFile
from segstore.search import Bound, search

from .offsetindex import check_length

ABORTED_TXN = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                        ("last_offset", ">i8"), ("last_stable_offset", ">i8")])
assert ABORTED_TXN.itemsize == 34

CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One aborted transaction."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The ``.txnindex`` file of one segment (opened lazily, created on first append)."""

    def __init__(self, path: str, *, writable: bool = False) -> None:
        self.path = path
        self.writable = writable
        self._file: AppendFile | None = None
        self._last_offset: int | None = None
        if files.exists(path):
            self._file = AppendFile(path, writable=writable)
            rows = self.entries()
            if len(rows):
                self._last_offset = int(rows["last_offset"][-1])

    def entries(self) -> np.ndarray:
        """Every entry as a structured array (a copy).  ``O(n)``.

        :raises CorruptIndexError: the file is not whole entries, or holds an unknown version.
        """
        if self._file is None or self._file.size == 0:
            return np.zeros(0, dtype=ABORTED_TXN)
        check_length(self.path, self._file.size, ABORTED_TXN.itemsize)
        rows = np.frombuffer(self._file.read(0, self._file.size), dtype=ABORTED_TXN)
        bad = np.flatnonzero(rows["version"] != CURRENT_VERSION)
        if len(bad):
            slot = int(bad[0])
            raise CorruptIndexError(f"expected aborted-transaction version {CURRENT_VERSION}, "
                                    f"found {int(rows['version'][slot])}", self.path,
                                    slot * ABORTED_TXN.itemsize)
        return rows

    def all(self) -> list[AbortedTxn]:
        """Every aborted transaction, in file order."""
        return [AbortedTxn(*map(int, row[1:])) for row in self.entries().tolist()]

    def append(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction; their last offsets must increase.  ``O(1)``."""
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise CorruptIndexError(f"expected a last offset above {self._last_offset}, "
                                    f"found {txn.last_offset}",
                                    self.path, self.size)
        if self._file is None:
            self._file = AppendFile(self.path, create=True)
        row = np.array([(CURRENT_VERSION, *txn)], dtype=ABORTED_TXN)
        self._file.append(row.tobytes())
        self._last_offset = txn.last_offset

    def aborted_in(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping offsets ``[start, end)`` (Kafka ``collectAbortedTxns``)."""
        rows = self.entries()
        hit = (rows["last_offset"] >= start) & (rows["first_offset"] < end)
        return [AbortedTxn(*map(int, row[1:])) for row in rows[hit].tolist()]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose ABORT marker is at or after ``offset``."""
        rows = self.entries()
        keep = search(rows["last_offset"], offset, Bound.SMALLEST_UPPER)
        if self._file is not None and keep < len(rows):
            self._file.truncate(keep * ABORTED_TXN.itemsize)
            self._last_offset = int(rows["last_offset"][keep - 1]) if keep else None

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them)."""
        if self._file is not None:
            self._file.truncate(0)
        self._last_offset = None

    @property
    def size(self) -> int:
        return self._file.size if self._file is not None else 0

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
