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

What Kafka 3.8 (``TransactionIndex.java``) makes of a damaged file, and so segstore:

- bytes after the last whole entry (an append a crash tore) are not an entry: its iterator
  stops where fewer than 34 bytes are left (``hasNext``), so readers use the whole entries;
- an entry of a version above 0 stops every read of the file (``next``: "Unexpected aborted
  transaction version");
- an entry whose last offset is below the segment's base fails ``sanityCheck``, and
  ``LogLoader`` rebuilds the segment's indexes (``recoverSegment``).

:meth:`TransactionIndex.problems` names each; ``verify`` reports them and a writable open
rebuilds the file from the log, as ``LogSegment.recover`` does (``reset``, then the aborts).

Thread-safety: not thread-safe; the owning partition serialises access.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from segstore import files
from segstore.errors import CorruptIndexError
from segstore.files import AppendFile
from segstore.search import Bound, search

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
        #: why the entries do not read (an unknown version), raised by every read of them
        self.error: CorruptIndexError | None = None
        if files.exists(path):
            self._file = AppendFile(path, writable=writable)
            try:
                rows = self.entries()
            except CorruptIndexError as err:
                # Opening does not fail on it: reads that do not need the aborts go on
                # (read_uncommitted), those that do raise it, and a writable open rebuilds the file.
                self.error = err
            else:
                if len(rows):
                    self._last_offset = int(rows["last_offset"][-1])

    def entries(self) -> np.ndarray:
        """Every whole entry as a structured array (a copy); bytes after the last whole one are not
        an entry (:attr:`torn_bytes`).  ``O(n)``.

        :raises CorruptIndexError: an entry of a version above 0.
        """
        whole = self.size // ABORTED_TXN.itemsize * ABORTED_TXN.itemsize
        if self._file is None or whole == 0:
            return np.zeros(0, dtype=ABORTED_TXN)
        rows = np.frombuffer(self._file.read(0, whole), dtype=ABORTED_TXN)
        # Kafka refuses a newer version only (AbortedTxn.CURRENT_VERSION): others read as version 0
        bad = np.flatnonzero(rows["version"] > CURRENT_VERSION)
        if len(bad):
            slot = int(bad[0])
            raise CorruptIndexError(f"expected aborted-transaction version {CURRENT_VERSION}, "
                                    f"found {int(rows['version'][slot])}", self.path,
                                    slot * ABORTED_TXN.itemsize)
        return rows

    @property
    def torn_bytes(self) -> int:
        """Bytes after the last whole entry (0 unless an append was torn)."""
        return self.size % ABORTED_TXN.itemsize

    def problems(self, base: int) -> list[tuple[str, int, str]]:
        """``(path, pos, message)`` of what Kafka 3.8 would not load as it is, for the segment whose
        base offset is ``base`` (see the module docstring): an unknown version, a torn last entry, an
        abort below the base.  ``O(n)``."""
        if self.error is not None:
            return [(self.path, self.error.pos or 0, self.error.message)]
        found: list[tuple[str, int, str]] = []
        rows = self.entries()
        below = np.flatnonzero(rows["last_offset"] < base)
        if len(below):
            slot = int(below[0])
            found.append((self.path, slot * ABORTED_TXN.itemsize,
                          f"expected aborted transactions ending at or after the segment's base offset "
                          f"{base}, found one ending at {int(rows['last_offset'][slot])}"))
        if self.torn_bytes:
            found.append((self.path, len(rows) * ABORTED_TXN.itemsize,
                          f"expected whole {ABORTED_TXN.itemsize}-byte entries, found {self.torn_bytes} "
                          "bytes after the last (an append a crash tore)"))
        return found

    def all(self) -> list[AbortedTxn]:
        """Every aborted transaction, in file order."""
        return [AbortedTxn(*map(int, row[1:])) for row in self.entries().tolist()]

    def append(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction; their last offsets must increase.  ``O(1)``.

        :raises CorruptIndexError: the file has :meth:`problems` (recovery rebuilds it first).
        """
        if self.error is not None:
            raise self.error
        if self.torn_bytes:
            raise CorruptIndexError(f"expected whole {ABORTED_TXN.itemsize}-byte entries before appending, "
                                    f"found {self.torn_bytes} bytes after the last", self.path, self.size)
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

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka 3.8.0 ``TransactionIndex.collectAbortedTxns``: the aborted transactions ending at or
        after ``fetch_offset`` and starting before ``upper_bound``, in file order, read up to the first
        entry whose last stable offset is at or past ``upper_bound``; and whether one was found
        (``isComplete``: no later segment can hold a transaction the range needs).

        The stop is the last stable offset, not the marker's offset: an entry whose marker lies past
        the bound can still have an LSO below it (another transaction, started before the bound, was
        open when it was written; its own marker is in a later segment).  ``O(n)``."""
        rows = self.entries()
        done = np.flatnonzero(rows["last_stable_offset"] >= upper_bound)
        if len(done):
            rows = rows[:int(done[0]) + 1]
        hit = (rows["last_offset"] >= fetch_offset) & (rows["first_offset"] < upper_bound)
        return [AbortedTxn(*map(int, row[1:])) for row in rows[hit].tolist()], bool(len(done))

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
        self.error = None

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
