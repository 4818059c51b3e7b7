"""The log cleaner's key map of fixed memory: Kafka 3.8's ``SkimpyOffsetMap``, over numpy columns.

Source (apache/kafka 3.8.0): ``storage/src/main/java/org/apache/kafka/storage/internals/log/
SkimpyOffsetMap.java`` (``bytesPerEntry``, ``slots``, ``put``, ``get``, ``updateLatestOffset``) and
``core/src/main/scala/kafka/log/LogCleaner.scala`` (``Cleaner`` requires ``slots * dupBufferLoadFactor > 1``;
``buildOffsetMapForSegment`` stops once ``map.size`` reaches ``slots * dupBufferLoadFactor``).

- A key is stored as its 16-byte MD5 digest (the broker's default ``log.cleaner.hash.algorithm``),
  next to an 8-byte offset: ``bytesPerEntry = 24``, ``slots = memory / 24`` where ``memory`` is
  ``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` (128 MiB / 1 by default).
- Entries are kept as two sorted columns (:data:`ENTRY`: the digest, compared bytewise, and the
  offset) instead of Kafka's open-addressing table: lookups and updates are the same (a digest maps
  to the latest offset put for it), the memory is the same 24 bytes per entry, and a whole column of
  keys is looked up or put with one ``searchsorted``.
- :meth:`OffsetMap.put_until_full` applies the cleaner's stopping rule to a run of keys in log
  order: keys are put while the map holds fewer than ``max_entries`` digests; the first key met
  with the map at ``max_entries`` (new or not) is where the map is full.

:func:`md5_digests` is MD5 (RFC 1321) vectorised over the keys of a column chunk: the keys are padded
into ``(n, blocks * 64)`` byte matrices, grouped by block count, and the 64 steps of each block run on
``uint32`` columns (one numpy operation per step for all keys).  Not thread-safe (one cleaner).
"""

from __future__ import annotations

import numpy as np

from segstore.arrays import unique
from segstore.errors import ConfigError

from .brokerconfig import DEDUPE_BUFFER_SIZE

#: ``log.cleaner.io.buffer.load.factor`` (broker default)
DEDUPE_LOAD_FACTOR = 0.9
HASH_SIZE = 16
#: One map entry as ``SkimpyOffsetMap`` stores it: the key's MD5 digest, then the offset.
ENTRY = np.dtype([("digest", f"S{HASH_SIZE}"), ("offset", ">i8")])
assert ENTRY.itemsize == HASH_SIZE + 8 == 24

# -- MD5 (RFC 1321), column-wise ------------------------------------------------------------

_SHIFTS = np.array([7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4 + [6, 10, 15, 21] * 4,
                   np.uint32)
_K = np.floor(np.abs(np.sin(np.arange(1, 65, dtype=np.float64))) * 2.0**32).astype(np.uint32)
_WORD = [i if i < 16 else (5 * i + 1) % 16 if i < 32 else (3 * i + 5) % 16 if i < 48 else (7 * i) % 16
         for i in range(64)]
_INIT = (0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476)


def _md5_blocks(words: np.ndarray) -> np.ndarray:
    """Digests of ``n`` padded messages given as ``uint32[n, blocks, 16]`` little-endian words."""
    n = words.shape[0]
    state = [np.full(n, v, np.uint32) for v in _INIT]
    for block in range(words.shape[1]):
        m = words[:, block, :]
        a, b, c, d = state
        for i in range(64):
            if i < 16:
                f = (b & c) | (~b & d)
            elif i < 32:
                f = (d & b) | (~d & c)
            elif i < 48:
                f = b ^ c ^ d
            else:
                f = c ^ (b | ~d)
            f = f + a + _K[i] + m[:, _WORD[i]]
            s = _SHIFTS[i]
            a, d, c = d, c, b
            b = b + ((f << s) | (f >> (np.uint32(32) - s)))
        state = [state[0] + a, state[1] + b, state[2] + c, state[3] + d]
    return np.stack(state, axis=1).astype("<u4").view(f"S{HASH_SIZE}").reshape(n)


def md5_digests(offsets: np.ndarray, data: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """MD5 of the binaries ``data[offsets[r]:offsets[r + 1]]`` for each ``r`` in ``rows``, as ``S16``.

    ``O(total key bytes)``; memory ``O(largest group of keys with the same block count)``.
    """
    out = np.empty(len(rows), f"S{HASH_SIZE}")
    if not len(rows):
        return out
    starts = offsets[rows].astype(np.int64)
    lengths = offsets[rows + 1].astype(np.int64) - starts
    blocks = (lengths + 9 + 63) // 64           # message, 0x80, 8-byte bit length
    for nb in unique(blocks).tolist():
        sel = np.flatnonzero(blocks == nb)
        width = nb * 64
        lens = lengths[sel]
        padded = np.zeros((len(sel), width), np.uint8)
        total = int(lens.sum())
        if total:
            row_of = np.repeat(np.arange(len(sel)), lens)
            col = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
            padded[row_of, col] = data[np.repeat(starts[sel], lens) + col]
        padded[np.arange(len(sel)), lens] = 0x80
        padded[:, width - 8:] = (lens * 8).astype("<u8").view(np.uint8).reshape(len(sel), 8)
        out[sel] = _md5_blocks(padded.view("<u4").reshape(len(sel), int(nb), 16).astype(np.uint32))
    return out


# -- the map ---------------------------------------------------------------------------------

class OffsetMap:
    """Key digest -> latest offset in fixed memory (``SkimpyOffsetMap`` with the cleaner's load factor).

    :raises ConfigError: the memory holds no more than one entry at the load factor (the cleaner's
        ``require``: cleaning would never make progress).
    """

    def __init__(self, memory: int = DEDUPE_BUFFER_SIZE, load_factor: float = DEDUPE_LOAD_FACTOR) -> None:
        self.slots = memory // ENTRY.itemsize
        if not self.slots * load_factor > 1:
            raise ConfigError(f"expected log.cleaner.dedupe.buffer.size to hold more than one "
                              f"{ENTRY.itemsize}-byte entry at load factor {load_factor}, "
                              f"found {memory} bytes")
        self.max_entries = int(self.slots * load_factor)
        self.latest_offset = -1
        self._digests = np.empty(0, ENTRY["digest"])
        self._offsets = np.empty(0, np.int64)

    @property
    def size(self) -> int:
        """Digests held (``entries``)."""
        return len(self._digests)

    def clear(self) -> None:
        self.latest_offset = -1
        self._digests = np.empty(0, ENTRY["digest"])
        self._offsets = np.empty(0, np.int64)

    def _find(self, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self._digests, digests)
        found = pos < len(self._digests)
        found[found] = self._digests[pos[found]] == digests[found]
        return pos, found

    def get(self, digests: np.ndarray) -> np.ndarray:
        """The offset put last for each digest, -1 where none (``get``).  ``O(k log n)``."""
        pos, found = self._find(digests)
        out = np.full(len(digests), -1, np.int64)
        out[found] = self._offsets[pos[found]]
        return out

    def put_until_full(self, digests: np.ndarray, offsets: np.ndarray) -> int:
        """Put ``(digest, offset)`` pairs in order until the map is full; the number put.

        Less than ``len(digests)`` when the map filled: the pair at the returned index met the map
        at ``max_entries`` (``buildOffsetMapForSegment`` returns ``true`` there).  The latest offset
        becomes the last offset put (``put`` sets ``lastOffset``).  ``O((k + n) log(k + n))``.
        """
        k = len(digests)
        if not k:
            return 0
        _, found = self._find(digests)
        new_rows = np.flatnonzero(~found)
        _, first = np.unique(digests[new_rows], return_index=True)
        firsts = np.sort(new_rows[first])       # where each digest not yet held first appears
        room = self.max_entries - self.size
        if len(firsts) < room:
            stop = k
        elif room <= 0:
            stop = 0
        else:
            stop = int(firsts[room - 1]) + 1    # the map is at max_entries from the next pair on
        if stop:
            order = np.argsort(digests[:stop], kind="stable")
            sorted_digests = digests[:stop][order]
            last = np.ones(stop, np.bool_)
            last[:-1] = sorted_digests[1:] != sorted_digests[:-1]
            put_digests, put_offsets = sorted_digests[last], offsets[:stop][order][last]
            pos, held = self._find(put_digests)
            self._offsets[pos[held]] = put_offsets[held]
            self._digests = np.insert(self._digests, pos[~held], put_digests[~held])
            self._offsets = np.insert(self._offsets, pos[~held], put_offsets[~held])
            self.latest_offset = int(offsets[stop - 1])
        return stop

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset
