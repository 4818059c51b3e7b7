"""``java.lang.String.hashCode``: the one Java string hash every index byte depends on.

RocketMQ's consume queue stores it as the tags code; the IndexFile hashes
``topic#key`` with it (:mod:`segstore.indexes.keyhash`), for any format whose
key index is one.  It is ``s[0]*31^(n-1) + ... + s[n-1]`` over the UTF-16 code
units of ``s``, wrapping at 32 bits, signed.

:func:`string_hash` is the reference for one string; :func:`string_hashes` is
the same function over many strings at once in numpy (tests keep them equal,
and the C accelerators of the RocketMQ plugin equal to them).  Pure, thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_INT_MASK = 0xFFFFFFFF
_INT_SIGN = 0x80000000
#: Units above which one string is hashed block-wise in numpy rather than in a Python loop.
_SHORT = 64
# Powers of 31 modulo 2**32 are exact in uint64 products once reduced; we reduce
# after every multiply-add of a block, so no intermediate exceeds 2**64.
_BLOCK = 4096


def _to_int32(value: int) -> int:
    value &= _INT_MASK
    return value - (1 << 32) if value & _INT_SIGN else value


def string_hash(text: str) -> int:
    """``String.hashCode`` of ``text``: signed 32-bit, over its UTF-16 code units.

    Characters outside the BMP count as two code units (a surrogate pair), as in
    Java; lone surrogates (``surrogateescape`` bytes) count as one.  Short strings
    (the common case: tags, keys) take a tight integer loop; long ones are reduced
    block-wise with numpy.  Runtime complexity: ``O(n)``.
    """
    units = text.encode("utf-16-be", "surrogatepass")
    n = len(units) // 2
    if n <= _SHORT:
        h = 0
        for unit in np.frombuffer(units, dtype=">u2").tolist():
            h = (h * 31 + unit) & _INT_MASK
        return _to_int32(h)
    codes = np.frombuffer(units, dtype=">u2").astype(np.uint64)
    h = 0
    for start in range(0, n, _BLOCK):
        block = codes[start:start + _BLOCK]
        k = len(block)
        # weights 31^(k-1) ... 31^0 mod 2^32, computed exactly in uint64 with reduction
        weights = np.empty(k, dtype=np.uint64)
        w = 1
        for i in range(k - 1, -1, -1):
            weights[i] = w
            w = (w * 31) & _INT_MASK
        part = int(((block * weights) & np.uint64(_INT_MASK)).sum(dtype=np.uint64)) & _INT_MASK
        h = (h * w + part) & _INT_MASK
    return _to_int32(h)


def unit_hashes(units: np.ndarray, lengths: np.ndarray, start: int = 0) -> np.ndarray:
    """:func:`string_hash` of strings given as concatenated UTF-16 code ``units`` and per-string ``lengths``,
    each continued from ``start`` (the hash of a common prefix: ``string_hash(prefix + s)``).

    uint32 arithmetic wraps exactly like Java's int.  Returns signed int64 hashes.
    Runtime complexity: ``O(total units)`` in numpy, no per-string Python.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(len(lengths), dtype=np.int64)
    if not len(lengths):
        return out
    units = np.asarray(units, dtype=np.uint32)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    longest = int(lengths.max())
    # 31**k mod 2**32 for k in 0..longest
    powers = np.full(longest + 1, 31, dtype=np.uint32)
    powers[0] = 1
    powers = np.cumprod(powers, dtype=np.uint32)
    # exponent of each unit: distance to the end of its own string, minus one
    exponent = np.repeat(ends, lengths) - 1 - np.arange(len(units), dtype=np.int64)
    terms = units * powers[exponent]
    nonempty = lengths > 0
    sums = np.zeros(len(lengths), dtype=np.uint32)
    if nonempty.any():
        sums[nonempty] = np.add.reduceat(terms, starts[nonempty], dtype=np.uint32)
    if start:
        sums += np.uint32(start & _INT_MASK) * powers[lengths]
    out[:] = sums.view(np.int32)
    return out


def string_hashes(texts: Sequence[str]) -> np.ndarray:
    """:func:`string_hash` of each string (signed, as int64), all at once in numpy."""
    if not texts:
        return np.zeros(0, dtype=np.int64)
    encoded = [t.encode("utf-16-be", "surrogatepass") for t in texts]
    lengths = np.fromiter((len(b) // 2 for b in encoded), dtype=np.int64, count=len(encoded))
    units = np.frombuffer(b"".join(encoded), dtype=">u2")
    return unit_hashes(units, lengths)
