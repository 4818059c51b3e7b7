"""A worker child's arena: shared memory its JVM maps, where the decoders' big column buffers are made.

A worker put each record batch into its ring (:mod:`segstore.spark.worker`) by copying every buffer
there, and the buffers were themselves what the decoders had just filled (the values gathered from
the log): two copies of every value.  With an arena, ``segstore.columns.pooled`` takes its blocks of
at least :data:`MIN_BLOCK` bytes from this shared memory (:func:`segstore.columns.set_arena`), so the
columns of a batch already lie where the JVM can read them: the worker sends their places, not their
bytes (the 'A' frame), and copies only the small buffers made elsewhere (a timestamp column turned
into microseconds).  A worker's CPU per query of the benchmark's 4M messages (a plan and every
partition): Kafka every column 0.22 -> 0.20 s, its value column 0.18 -> 0.16-0.17 s, RocketMQ's value
column 0.36-0.37 -> 0.32-0.33 s.

A block is given back when nothing uses its memory any more: each is handed out as a ``ctypes``
array (the exporter numpy's and Arrow's views keep alive) with a finalizer, which queues the block;
the next :meth:`Arena.take` merges the queued blocks into the free list.  The worker keeps a batch it
sent until the JVM releases it, so the JVM never reads a block given to another batch.  A ``take``
the arena has no room for returns None and the caller uses Arrow's pool instead.

Not thread-safe except :meth:`Arena.take`'s finalizers, which only append to a list (a worker child
reads on one thread).
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import weakref
from typing import Any

from .. import files

#: Smallest block the arena serves: smaller ones (a batch's validity bitmaps, a chunk's row offsets
#: of a few rows) cost a copy of little, and each block costs a finalizer.
MIN_BLOCK = 64 << 10
#: Blocks are whole multiples of this: the ``ctypes`` array type of each size is made once (17 us
#: each) and kept, and a block is at most this much larger than asked for.
SIZE_STEP = 64 << 10


_BLOCK_TYPES: dict[int, Any] = {}


def _block_size(nbytes: int) -> int:
    return -(-max(nbytes, 1) // SIZE_STEP) * SIZE_STEP


def _block_type(size: int) -> Any:
    kind = _BLOCK_TYPES.get(size)
    if kind is None:
        kind = _BLOCK_TYPES[size] = ctypes.c_char * size
    return kind


class Arena:
    """``size`` bytes (a whole number of ``SIZE_STEP``) of shared memory at ``path`` (its blocks reserved:
    a full ``/dev/shm`` fails here, not with SIGBUS later), handed out in blocks by first fit.

    :raises StorageFullError: no room in the filesystem for ``size`` bytes.
    """

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size
        self.map: mmap.mmap = files.shared_map(path, size)     # mapped while the child lives
        self._anchor: Any = ctypes.c_char.from_buffer(self.map)    # holds the map's address
        self.address = ctypes.addressof(self._anchor)
        #: free blocks as (start, size), by start, none adjacent to another
        self._starts: list[int] = [0]
        self._sizes: list[int] = [size]
        #: blocks whose last user went (appended by finalizers, merged by take)
        self._given_back: list[tuple[int, int]] = []
        self.unlinked = False
        #: the smallest block to ask for (``segstore.columns.set_arena``)
        self.min_block = MIN_BLOCK

    def take(self, nbytes: int) -> Any:
        """A writable ``ctypes`` array of at least ``nbytes`` (a whole number of ``SIZE_STEP``, starting
        on one: more than Arrow's 64-byte alignment) in the arena (the block goes back when the array
        and every view of it are gone), or None where no free block is big enough.  ``O(free blocks)``."""
        self._merge_given_back()
        size = _block_size(nbytes)
        for k, free in enumerate(self._sizes):
            if free >= size:
                start = self._starts[k]
                if free == size:
                    del self._starts[k], self._sizes[k]
                else:
                    self._starts[k] += size
                    self._sizes[k] -= size
                block = _block_type(size).from_address(self.address + start)
                weakref.finalize(block, self._given_back.append, (start, size))
                return block
        return None

    def _merge_given_back(self) -> None:
        while self._given_back:
            start, size = self._given_back.pop()
            k = bisect.bisect_left(self._starts, start)
            if k < len(self._starts) and start + size == self._starts[k]:     # joins the next
                size += self._sizes[k]
                del self._starts[k], self._sizes[k]
            if k > 0 and self._starts[k - 1] + self._sizes[k - 1] == start:    # joins the previous
                self._sizes[k - 1] += size
            else:
                self._starts.insert(k, start)
                self._sizes.insert(k, size)

    def offset_of(self, address: int, size: int) -> int | None:
        """Where ``size`` bytes at ``address`` lie in the arena, or None where they are not all inside."""
        at = address - self.address
        return at if 0 <= at and at + size <= self.size else None

    def free_bytes(self) -> int:
        """Bytes in free blocks, those given back since the last take included."""
        self._merge_given_back()
        return sum(self._sizes)

    def unlink(self) -> None:
        """Remove the arena's file name (the JVM maps it by name first); the mappings stay.  Once."""
        if not self.unlinked:
            self.unlinked = True
            files.remove(self.path)
