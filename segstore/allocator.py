"""Keep freed heap memory for the next batch: glibc's ``malloc`` and Arrow's memory pool tuned for a
process that converts, scans or recovers big stores.

A columnar read or conversion allocates and frees buffers of a few MB per batch (numpy columns,
encoded record batches, gathered messages).  By default glibc hands memory at the top of a heap
back to the kernel once more than its trim threshold is free there (128 KiB at first, later twice
the largest block it mapped and freed), so the next batch's buffers are fresh pages again, each
one a page fault and a page zeroed: 110-145k faults per 1M messages converted, 0.1-0.15 s of
about 1 s on our 2-core machine kind.  :func:`retain` asks glibc to keep :data:`TOP_PAD` bytes of
free memory at the top of each heap (and to serve blocks below :data:`MMAP_THRESHOLD` from its
heaps, which it then reuses, rather than from a mapping of their own each time).

Arrow's jemalloc pool (where the columnar decoders' buffers come from, :mod:`segstore.columns`)
gives freed pages back on its own terms: pyarrow starts it with ``oversize_threshold:0``,
``dirty_decay_ms:1000`` and ``muzzy_decay_ms:1000``, and a block freed and taken again a second
later faults its pages in again.  A read that holds one chunk at a time reuses its memory before
that; a conversion from Kafka, which merges its sixteen partitions' streams holding a chunk of
each, did not: 101k page faults per 1M records in the decoder, which took 0.50 s (2026-11-29;
decays of 30 s changed nothing there, only turning the decay off did).  :func:`retain` also asks
that pool (:data:`ARROW_POOL_CONF`, through ``JE_ARROW_MALLOC_CONF``, which jemalloc reads when it
starts: only where pyarrow has not loaded yet, and only if unset) never to force freed pages back:
they are given back lazily (``MADV_FREE``; the kernel takes them when it needs memory), and until
then a new chunk reuses them without a fault (the same conversion: 32k faults, 0.31 s).  Resident
memory counts the lazily freed pages until the kernel takes them (10-20 MB more at the peak of a
1M-message conversion).

Process-wide, and not undone (glibc has no call that gives back its default, self-adjusting
thresholds): the ``segstore`` command calls it when it starts; a library user whose process
converts or scans big stores may too, one that would rather give memory back between calls should
not.  Resident memory can then stay up to :data:`TOP_PAD` above what the process uses, per heap
(one per thread that allocated, at most eight per core).  Nothing is done where the C library is
not glibc.  Thread-safe (``mallopt`` takes the allocator's locks).
"""

from __future__ import annotations

import ctypes
import os
import sys

#: ``mallopt`` parameters (glibc's ``malloc.h``).
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: glibc heaps (arenas) at most: threads share them beyond this
ARENA_MAX = 4
#: Free bytes each heap keeps at its top instead of giving them back.
TOP_PAD = 64 << 20
#: Blocks of at least this many bytes get a mapping of their own (glibc's upper bound for its own
#: adjusting threshold); smaller ones come from the heaps.
MMAP_THRESHOLD = 32 << 20
#: Arrow's jemalloc pool: pages of freed extents given back lazily (``MADV_FREE``) and never forced
#: back (``MADV_DONTNEED``, after which their reuse faults again) by the pool itself.
ARROW_POOL_CONF = "muzzy_decay_ms:-1"
#: The variable jemalloc, as pyarrow builds it (prefix ``je_arrow_``), reads its options from.
ARROW_POOL_ENV = "JE_ARROW_MALLOC_CONF"


def retain() -> bool:
    """Keep freed memory for reuse (see the module docstring); True if glibc took the settings.

    Arrow's pool takes :data:`ARROW_POOL_CONF` where pyarrow has not loaded yet and the process sets no
    options of its own for it (:data:`ARROW_POOL_ENV`).
    """
    if "pyarrow.lib" not in sys.modules:    # jemalloc reads its options once, when pyarrow loads it
        os.environ.setdefault(ARROW_POOL_ENV, ARROW_POOL_CONF)
        # Arrow's default pool (what a call without memory_pool= takes: pa.nulls of an empty batch)
        # jemalloc too: mimalloc reserves a 1 GiB arena of address space at its first allocation
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    # Cheap checks: every command calls this first (platform.libc_ver reads the interpreter's
    # binary, ctypes.util.find_library runs ldconfig: 0.045 s together).
    if not _is_glibc():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)     # the process's own symbols: its C library's
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # at most ARENA_MAX heaps (64 MiB of address space each, every one of them committed with TOP_PAD)
    # instead of one per thread up to 8 per core
    return (bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TOP_PAD, TOP_PAD))
            and bool(mallopt(M_ARENA_MAX, ARENA_MAX)))


def _is_glibc() -> bool:
    """Whether the process runs on glibc (``confstr(_CS_GNU_LIBC_VERSION)``: ``"glibc 2.36"``)."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):   # not a name this platform knows, or no confstr
        return False
    return (version or "").startswith("glibc ")
