"""Java behaviour the RocketMQ broker's bytes depend on.

- :func:`string_hash`: ``java.lang.String.hashCode``, the core's
  (:mod:`segstore.indexes.javahash`, re-exported here): the consume queue stores it
  as the tags code; the IndexFile hashes ``topic#key`` with it.
- :func:`hashmap_order`: the iteration order of a ``java.util.HashMap`` after a
  sequence of insertions.  The broker serialises a message's properties map by
  iterating it, so the stored properties string follows this order.
- :func:`concurrent_hashmap_order`: the same for a ``ConcurrentHashMap`` (the broker's
  consumer-offset table, written to ``config/consumerOffset.json`` in that order).
- :func:`java_host`: how ``InetAddress.getHostAddress`` prints an address (IPv6
  in full, uncompressed, lowercase hex groups without leading zeros).

All functions are pure and thread-safe.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable, Iterable
from functools import lru_cache
from typing import TypeVar

import numpy as np

from segstore.indexes.javahash import string_hash

__all__ = ["concurrent_hashmap_order", "hashmap_order", "java_host", "spread_hash", "string_hash"]

_INT_MASK = 0xFFFFFFFF

#: ``HashMap.DEFAULT_INITIAL_CAPACITY`` and ``DEFAULT_LOAD_FACTOR``.
HASHMAP_DEFAULT_CAPACITY = 16
HASHMAP_LOAD_FACTOR = 0.75
#: ``HashMap.MAXIMUM_CAPACITY``.
HASHMAP_MAX_CAPACITY = 1 << 30

@lru_cache(maxsize=1 << 16)
def spread_hash(key: str) -> int:
    """``HashMap.hash(key)``: ``h ^ (h >>> 16)`` on the 32-bit pattern of ``key.hashCode()``.

    Cached: property names repeat across messages.
    """
    u = string_hash(key) & _INT_MASK
    return u ^ (u >> 16)


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the least power of two ``>= capacity`` (at least 1)."""
    n = 1
    while n < capacity:
        n <<= 1
    return min(n, HASHMAP_MAX_CAPACITY)


def hashmap_table_size(count: int, initial_capacity: int = HASHMAP_DEFAULT_CAPACITY) -> int:
    """The bucket-table length of a ``HashMap(initial_capacity)`` after ``count`` distinct puts.

    The table starts at ``tableSizeFor(initial_capacity)`` and doubles whenever the
    size exceeds ``length * 0.75`` (the threshold).
    """
    size = table_size_for(initial_capacity)
    while count > int(size * HASHMAP_LOAD_FACTOR) and size < HASHMAP_MAX_CAPACITY:
        size <<= 1
    return size


def hashmap_order(keys: Iterable[str], initial_capacity: int = HASHMAP_DEFAULT_CAPACITY) -> list[str]:
    """The order a ``java.util.HashMap`` iterates ``keys`` put in this order.

    Iteration walks the bucket table in index order (bucket ``spread(hash) & (n-1)``
    for the final table length ``n``) and each bucket's chain in insertion order
    (resizing splits chains keeping their relative order).  A key put again keeps
    its first position.  Not modelled: a bucket of 8 or more colliding keys in a
    table of 64+ buckets, which Java turns into a tree (never the case for a
    message's handful of properties).  Runtime complexity: ``O(k log k)``.
    """
    first: dict[str, int] = {}
    for key in keys:
        first.setdefault(key, len(first))
    if len(first) < 2:
        return list(first)
    mask = hashmap_table_size(len(first), initial_capacity) - 1
    return sorted(first, key=lambda k: (spread_hash(k) & mask, first[k]))


def java_host(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """``InetAddress.getHostAddress``: dotted IPv4, or IPv6 as 8 lowercase hex groups, uncompressed."""
    if address.version == 4:
        return str(address)
    return ":".join(f"{group:x}" for group in np.frombuffer(address.packed, dtype=">u2").tolist())


#: ``ConcurrentHashMap.HASH_BITS``: the spread hash drops the sign bit.
CHM_HASH_BITS = 0x7FFFFFFF


#: a map key (a topic name, ``topic@group``, a queue id)
_Key = TypeVar("_Key", bound=Hashable)


def concurrent_hashmap_order(keys: Iterable[_Key], hash_codes: Iterable[int],
                             initial_capacity: int | None = None) -> list[_Key]:
    """The order a ``java.util.concurrent.ConcurrentHashMap(initial_capacity)`` (None: the
    no-argument constructor, 16 bins) iterates ``keys`` put in this order (``hash_codes``:
    each key's ``hashCode()``; a key put again keeps its place).

    The broker keeps ``consumerOffset.json``'s table in one (fastjson parses the file into
    it, in file order, and writes it back by iterating it).  Unlike ``HashMap``, the table
    of 16 grows when the size *reaches* ``sizeCtl`` (0.75 n), and ``transfer`` splits a bin
    by keeping its last run of same-side nodes and prepending the nodes before it, which
    reverses them.  Not modelled: bins of 8+ colliding keys (``TreeBin``).
    Runtime complexity: ``O(k)`` amortised.
    """
    n = 16 if initial_capacity is None else table_size_for(initial_capacity + (initial_capacity >> 1) + 1)
    table: list[list[tuple[int, _Key]]] = [[] for _ in range(n)]
    seen: set[_Key] = set()
    count = 0
    for key, code in zip(keys, hash_codes, strict=True):
        if key in seen:
            continue
        seen.add(key)
        u = code & _INT_MASK
        h = (u ^ (u >> 16)) & CHM_HASH_BITS
        table[h & (n - 1)].append((h, key))
        count += 1
        if count >= n - (n >> 2):
            grown: list[list[tuple[int, _Key]]] = [[] for _ in range(2 * n)]
            for i, chain in enumerate(table):
                if not chain:
                    continue
                last = len(chain) - 1
                while last > 0 and (chain[last - 1][0] & n) == (chain[-1][0] & n):
                    last -= 1
                low = chain[last:] if not chain[-1][0] & n else []
                high = chain[last:] if chain[-1][0] & n else []
                for node in chain[:last]:
                    (high if node[0] & n else low).insert(0, node)
                grown[i], grown[i + n] = low, high
            table, n = grown, 2 * n
    return [key for chain in table for _, key in chain]
