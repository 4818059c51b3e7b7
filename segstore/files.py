"""Files and memory maps: the only module of segstore that opens files.

Format plugins and codecs never call ``open``/``os.*``/``mmap`` themselves; they
ask this module for a :class:`MappedFile` (fixed size, preallocated, the
RocketMQ commitlog / consume queue / index file and the Kafka index files) or an
:class:`AppendFile` (a growing file, the Kafka ``.log``), and for the few
whole-file operations below.  Every ``OSError`` becomes a segstore error here,
naming the file: ``ENOSPC`` becomes :class:`StorageFullError`, a missing file
:class:`NotFoundError`, anything else :class:`StorageIOError`.

Thread-safety: a :class:`MappedFile` may be read from several threads while one
thread writes disjoint byte ranges (the mmap is shared memory); ``resize`` and
``close`` need exclusive access.  :class:`AppendFile` is not thread-safe.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import itertools
import mmap
import os
import re
import resource
import stat
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from . import jsontext
from .errors import (
    ConfigError,
    MissingDependencyError,
    NotFoundError,
    ReadOnlyError,
    SegstoreError,
    StorageFullError,
    StorageIOError,
    StoreClosedError,
    StoreLockedError,
    TruncatedDataError,
)

if TYPE_CHECKING:   # numpy is imported where an array is made: `segstore --help` needs none
    import numpy as np

PAGE_SIZE = mmap.PAGESIZE
_T = TypeVar("_T")
#: Appended bytes after which :meth:`AppendFile.append` starts their writeback (see there).
WRITEBACK_BYTES = 8 << 20
_SYNC_FILE_RANGE_WRITE = 2      # <linux/fs.h>: start writing the dirty pages of the range, no wait
#: The most buffers one ``pwritev`` takes (POSIX's ``IOV_MAX``; Linux's 1024)
IOV_MAX = 1024


def _writeback_starter() -> Any:
    """libc's ``sync_file_range`` (Linux; ``os`` has none), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_sync_file_range = _writeback_starter()


def _start_writeback(fd: int, before: int, after: int) -> None:
    """Start (no wait; the GIL released) the writeback of the whole :data:`WRITEBACK_BYTES`
    chunks of a file that appending bytes ``[before, after)`` completed.

    The kernel would otherwise hold every appended page dirty until the close's fsync (far
    below its dirty-background threshold), which then waited for all of them (0.3 s of a
    1M-message conversion's 375 MB) while the disk sat idle during the appends.  Advisory:
    the fsync still decides durability; errors are the fsync's to report.
    """
    if _sync_file_range is not None and before // WRITEBACK_BYTES != after // WRITEBACK_BYTES:
        start = before // WRITEBACK_BYTES * WRITEBACK_BYTES
        end = after // WRITEBACK_BYTES * WRITEBACK_BYTES
        _sync_file_range(fd, start, end - start, _SYNC_FILE_RANGE_WRITE)


def _pwritev(fd: int, views: list[memoryview], pos: int) -> int:
    """``os.pwritev``, or one ``pwrite`` of the buffers joined where the platform has none."""
    if hasattr(os, "pwritev"):
        return os.pwritev(fd, views, pos)
    return os.pwrite(fd, b"".join(views), pos)


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def _size_limit() -> str:
    """The limit an ``EFBIG`` met: the process's ``RLIMIT_FSIZE`` (``ulimit -f``) where one is set,
    else the file system's largest file."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft == resource.RLIM_INFINITY:
        return "the file system's largest file size"
    return f"the process's file size limit of {soft} bytes (ulimit -f)"


def too_large(err: OSError, path: str, pos: int | None = None, size: int | None = None) -> StorageFullError:
    """The error for ``EFBIG`` (a write or extension past the largest file allowed): a full store, as
    ``ENOSPC`` is: nothing acknowledged was lost, the write that needed room is refused.  ``size``:
    the length the file was to have, where known."""
    room = "room for the file to grow" if size is None else f"room for {size} bytes"
    return StorageFullError(f"expected {room}, found {_size_limit()} ({err.strerror or err})", path, pos)


#: The process (EMFILE) or the system (ENFILE) has no descriptor left to open a file with
_DESCRIPTOR_ERRNOS = {errno.EMFILE, errno.ENFILE}


def out_of_descriptors(err: OSError, path: str, pos: int | None = None) -> StorageIOError:
    """The error for ``EMFILE``/``ENFILE``: the limit met, named as a user raises it."""
    if err.errno == errno.ENFILE:
        limit = "the system's limit of open files (fs.file-max)"
    else:
        known = _descriptor_limit()
        limit = (f"the process's limit of {known} open files (ulimit -n)" if known
                 else "the process's limit of open files")
    return StorageIOError(f"expected a free file descriptor, found {limit}", path, pos)


def _translate(err: OSError, path: str, pos: int | None = None, size: int | None = None) -> SegstoreError:
    """The segstore error for an ``OSError`` on ``path``; ``size``: the bytes the call wanted room for,
    where known (a reservation)."""
    what = err.strerror or str(err)
    if err.errno in _FULL_ERRNOS:
        room = "room on the device" if size is None else f"room for {size} more bytes"
        return StorageFullError(f"expected {room}, found no space left on the device ({what})", path, pos)
    if err.errno == errno.EFBIG:
        return too_large(err, path, pos)
    if err.errno in _DESCRIPTOR_ERRNOS:
        return out_of_descriptors(err, path, pos)
    if isinstance(err, FileNotFoundError):
        return NotFoundError("expected an existing file or directory, found no such file or directory", path,
                             pos)
    if err.errno == errno.ENOTDIR:      # a part of the path is a file (afile/sub)
        return StorageIOError(f"expected a directory on the path, found a file in the way ({what})", path,
                              pos)
    if err.errno == errno.ENAMETOOLONG:     # a topic's directory past the file system's NAME_MAX
        return _name_too_long(what, path, pos)
    if err.errno == errno.EROFS:        # a write (retention, compact...) on a read-only mount
        return StorageIOError(f"expected a writable file system, found a read-only one ({what})", path, pos)
    if err.errno in (errno.EACCES, errno.EPERM):
        return StorageIOError(f"expected permission to access the file, found none ({what})", path, pos)
    return StorageIOError(what, path, pos)


#: The longest name one directory entry holds on Linux file systems (ext4, XFS: ``NAME_MAX``)
NAME_MAX = 255


def _name_too_long(what: str, path: str, pos: int | None) -> StorageIOError:
    """The error for ``ENAMETOOLONG``: the longest name on ``path`` and the limit it passed (else, every
    name within it, the whole path's length)."""
    longest = max((len(os.fsencode(part)) for part in path.split(os.sep)), default=0)
    if longest > NAME_MAX:
        return StorageIOError(f"expected names of at most {NAME_MAX} bytes, found one of {longest} bytes "
                              f"({what})", path, pos)
    return StorageIOError(f"expected a shorter path, found one of {len(os.fsencode(path))} bytes ({what})",
                          path, pos)


@contextlib.contextmanager
def _os_errors(path: str, pos: int | None = None) -> Iterator[None]:
    try:
        yield
    except OSError as err:
        if isinstance(err, SegstoreError):
            raise
        raise _translate(err, path, pos) from err


_KIND_NAMES = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _raise_descriptor_limit() -> bool:
    """Raise the process's soft limit of open descriptors (``ulimit -n``) to its hard limit, as
    HotSpot does when any JVM starts (``-XX:+MaxFDLimit``, on by default on Linux and macOS: the
    brokers run so, and a Kafka partition being written holds about seven descriptors); whether it
    rose.  Where the hard limit is unlimited, to 2^20 (what the kernel's ``nr_open`` allows by
    default); where the system refuses, nothing changes.  Asked only when an open met the limit, so a
    process that never needs more keeps the limit it was given."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= target:     # (no limit: nothing to raise)
        return False
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return False
    _open_readers.limit_changed()
    return True


def _with_descriptors(call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``call(*args, **kwargs)``, once more where the process had no descriptor left for it
    (``EMFILE``/``ENFILE``) after its soft limit rose to its hard one (:func:`_raise_descriptor_limit`:
    ``EMFILE`` only) or, else, after the idle readers let go of their descriptors
    (:meth:`_OpenReaders.shed`: something else holds more than the readers' budget supposed), else the
    idle writers.
    Before, a conversion of 250 queues into a Kafka log dir stopped at the common limit of 1024."""
    try:
        return call(*args, **kwargs)
    except OSError as err:
        if err.errno not in _DESCRIPTOR_ERRNOS or not (
                (err.errno == errno.EMFILE and _raise_descriptor_limit()) or _open_readers.shed()
                or _open_writers.shed()):
            raise
    return call(*args, **kwargs)


def _open_regular(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that only ever returns a descriptor of a regular file.

    ``O_NONBLOCK`` keeps the open of a FIFO from waiting for a writer (reads and
    verify would hang forever); a directory, FIFO, socket or device found where a
    file belongs is closed again and refused.  (``O_NONBLOCK`` changes nothing
    for regular files.)  Symlinks are followed; a loop is an ``OSError`` (ELOOP).

    :raises CorruptDataError: the path is not a regular file.
    """
    fd = _with_descriptors(os.open, path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        st_mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st_mode):
        os.close(fd)
        kind = next((name for test, name in _KIND_NAMES if test(st_mode)), "no regular file")
        from .errors import CorruptDataError

        raise CorruptDataError(f"expected a regular file, found {kind}", path)
    return fd


class _KeptMap:
    """One kept map (see :func:`keep_read_maps`): the map, the name it was opened by, how many open
    files use it, and whether the cache still holds it (a map dropped from the cache while files use
    it is unmapped when the last of them closes)."""

    __slots__ = ("cached", "map", "path", "users")

    def __init__(self, path: str, mm: mmap.mmap) -> None:
        self.path = path
        self.map = mm
        self.users = 0
        self.cached = True


class _KeptMaps:
    """Read-only maps kept open after their files close, handed to the next open of the same file at
    the same length (see :func:`keep_read_maps`).

    A key is ``(st_dev, st_ino, length)``: a map of the same file (the inode, not the name) and the
    same length is the same shared mapping of the page cache a new ``mmap`` would make, so handing it
    out again changes nothing a reader sees, only that its page tables are already there.  At most
    :attr:`limit` maps and :attr:`limit_bytes` bytes of them; the least recently used go first (a map
    an open file still uses stays mapped until that file closes).  Thread-safe (one lock; ``mmap``
    and ``stat`` run outside it).
    """

    def __init__(self, limit: int, limit_bytes: int) -> None:
        self.limit = limit
        self.limit_bytes = limit_bytes
        self.bytes = 0
        self.maps: OrderedDict[tuple[int, int, int], _KeptMap] = OrderedDict()
        # maps whose close met a view still alive: closed at the next forget_changed once the view
        # died, or unmapped when the last reference to them dies, whichever comes first
        self.refused: list[weakref.ref[mmap.mmap]] = []
        self.lock = threading.Lock()

    def get(self, fd: int, path: str, length: int) -> _KeptMap:
        """The kept map of ``fd``'s file at ``length`` bytes, else a new one, kept from now on; one
        more user of it until :meth:`release`."""
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino, length)
        with self.lock:
            kept = self.maps.get(key)
            if kept is not None:
                self.maps.move_to_end(key)
                kept.users += 1
                return kept
        made = _map(fd, path, length)
        unmap = []
        with self.lock:
            kept = self.maps.get(key)
            if kept is not None:            # another thread kept one meanwhile: use it
                unmap.append(made)
            else:
                for other in [k for k in self.maps if k[:2] == key[:2]]:   # the file's other lengths
                    unmap += self._drop(other)
                kept = self.maps[key] = _KeptMap(path, made)
                self.bytes += length
                while len(self.maps) > self.limit or (self.bytes > self.limit_bytes and len(self.maps) > 1):
                    unmap += self._drop(next(iter(self.maps)))
            kept.users += 1
        self._close(unmap)
        return kept

    def release(self, kept: _KeptMap) -> None:
        """A file using ``kept`` closed: unmap it if the cache dropped it and no file uses it now."""
        with self.lock:
            kept.users -= 1
            unused = kept.users == 0 and not kept.cached
        if unused:
            self._close([kept.map])

    def _drop(self, key: tuple[int, int, int]) -> list[mmap.mmap]:
        """Out of the cache (the lock held); the map to unmap now, if no file uses it."""
        kept = self.maps.pop(key)
        self.bytes -= key[2]
        kept.cached = False
        return [kept.map] if kept.users == 0 else []

    def forget_changed(self) -> int:
        """Drop the maps whose name no longer names their file with at least their length (deleted,
        replaced or shrunk since): what they keep is disk space and a descriptor.  The number
        dropped.  A map dropped before whose close a view refused then is closed now if that view
        has gone.  ``O(maps)`` ``stat`` calls."""
        with self.lock:
            entries = [(key, kept.path) for key, kept in self.maps.items()]
            retry, self.refused = self.refused, []
        self._close([mm for mm in (ref() for ref in retry) if mm is not None])
        changed = []
        for key, path in entries:
            try:
                st = os.stat(path)
            except OSError:
                changed.append(key)
                continue
            if (st.st_dev, st.st_ino) != key[:2] or st.st_size < key[2]:
                changed.append(key)
        unmap: list[mmap.mmap] = []
        dropped = 0
        with self.lock:
            for key in changed:
                if key in self.maps:
                    unmap += self._drop(key)
                    dropped += 1
        self._close(unmap)
        return dropped

    def clear(self) -> None:
        unmap: list[mmap.mmap] = []
        with self.lock:
            for key in list(self.maps):
                unmap += self._drop(key)
        self._close(unmap)

    def _close(self, maps: list[mmap.mmap]) -> None:
        """Unmap ``maps`` (the lock not held); one a view still holds is tried again at the next
        :meth:`forget_changed` (else it stays mapped for as long as anything refers to it)."""
        refused = [weakref.ref(mm) for mm in maps if not _unmap(mm)]
        if refused:
            with self.lock:
                self.refused += refused


def _unmap(mm: mmap.mmap) -> bool:
    """Close ``mm``; False where a view still holds it (it is unmapped when that view and the last
    reference to it have gone)."""
    try:
        mm.close()
    except BufferError:
        return False
    return True


_kept_maps: _KeptMaps | None = None


def keep_read_maps(limit: int = 256, limit_bytes: int = 16 << 30) -> None:
    """From now on in this process, keep the read-only maps of local files after their files close
    and hand them to the next open of the same file at the same length: for a process that opens
    the same store again and again (a Spark worker opens it for each query's plan), where each new
    map of a file faults every page it reads into its page tables again and its close tears them
    down (0.04-0.1 s of CPU per GB read).  What a read sees is unchanged: a kept map is the shared
    mapping of the file's page cache a new one would be, so writes made since show through it, and
    a file replaced (another inode) or grown or shrunk (another length) gets a new map.  At most
    ``limit`` maps (each holds a descriptor) and ``limit_bytes`` of address space; the least recently
    used are dropped first.  Call :func:`forget_changed_maps` now and then: a kept map of a deleted
    file keeps its disk space.  Writable and in-memory files are never kept.  Idempotent (a second
    call sets the limits)."""
    global _kept_maps
    if _kept_maps is None:
        _kept_maps = _KeptMaps(limit, limit_bytes)
    else:
        _kept_maps.limit, _kept_maps.limit_bytes = limit, limit_bytes


def forget_changed_maps() -> int:
    """Drop the kept maps (:func:`keep_read_maps`) of files deleted, replaced or shrunk since they were
    mapped; the number dropped (0 when maps are not kept)."""
    return _kept_maps.forget_changed() if _kept_maps is not None else 0


def stop_keeping_read_maps() -> None:
    """Keep no map from now on and unmap those kept (a map an open file uses, when that file closes)."""
    global _kept_maps
    kept, _kept_maps = _kept_maps, None
    if kept is not None:
        kept.clear()


def _kept_maps_after_fork() -> None:
    """In a forked child: a lock another thread of the parent held at the fork stays held."""
    if _kept_maps is not None:
        _kept_maps.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_kept_maps_after_fork)


def _map(fd: int, path: str, length: int, access: int = mmap.ACCESS_READ) -> mmap.mmap:
    """``mmap`` of ``length`` bytes of ``fd`` (``length > 0``).

    :raises TruncatedDataError: the file is shorter than ``length`` now: another process cut it
        since its size was taken (a broker's recovery cutting a torn tail, a replica truncating),
        which ``mmap`` answers with a bare ``ValueError``.  Its position is the file's end now.
    """
    while True:
        try:
            return _with_descriptors(mmap.mmap, fd, length, access=access)     # (it duplicates fd)
        except ValueError as err:   # with length > 0 and offset 0: only a file shorter than length
            found = os.fstat(fd).st_size
            if found < length:
                raise TruncatedDataError(f"expected at least {length} bytes to map, found {found} (the file "
                                         "was cut since its size was taken)", path, found) from err
            # cut and grown again between mmap's own fstat and this one: the map can be made now


def _read_map(fd: int, path: str, length: int) -> tuple[mmap.mmap, tuple[_KeptMaps, _KeptMap] | None]:
    """A read-only map of ``length`` bytes of ``fd``; with a kept one, its cache and entry (the file
    hands it back through :func:`_let_go` instead of closing it).

    :raises TruncatedDataError: the file is shorter than ``length`` now (:func:`_map`).
    """
    cache = _kept_maps
    if cache is None:
        return _map(fd, path, length), None
    kept = cache.get(fd, path, length)
    return kept.map, (cache, kept)


def _read_map_as_now(fd: int, path: str, length: int
                     ) -> tuple[mmap.mmap | None, tuple[_KeptMaps, _KeptMap] | None, int]:
    """:func:`_read_map` of ``length`` bytes, or of fewer where another process cut the file since
    ``length`` was taken (a broker's recovery cutting a torn tail, a follower replica truncating to
    its leader): the file as it is now.  The map (None for a file cut to nothing), its kept entry
    and the length mapped."""
    while True:
        try:
            mm, kept = _read_map(fd, path, length)
        except TruncatedDataError:
            length = min(length, os.fstat(fd).st_size)     # never grows: cut again, it is tried shorter
            if length == 0:
                return None, None, 0
        else:
            return mm, kept, length


def _let_go(mm: mmap.mmap, kept: tuple[_KeptMaps, _KeptMap] | None) -> None:
    """A file is done with its map: hand a kept one back, close any other."""
    if kept is not None:
        kept[0].release(kept[1])
    else:
        _unmap(mm)


def reserve_step(size: int) -> int:
    """How far ahead of its writer a reserving file of ``size`` bytes has its blocks reserved: a
    sixteenth of it, between :data:`RESERVE_STEP_MIN` and :data:`RESERVE_STEP_MAX`, whole pages."""
    step = min(RESERVE_STEP_MAX, max(RESERVE_STEP_MIN, size // 16))
    return -(-step // PAGE_SIZE) * PAGE_SIZE


#: The bounds of :func:`reserve_step` (a 1 GiB commitlog file reserves 8 MiB at a time, a 6 MB
#: consume-queue file 368 KiB, a 10 MiB Kafka index 640 KiB; a file under 64 KiB whole).
RESERVE_STEP_MIN = 64 << 10
RESERVE_STEP_MAX = 8 << 20


#: A :class:`MappedFile`'s descriptor once closed, and an in-memory one's while open: it holds none
_CLOSED, _READ_WHOLE = -1, -2
#: The descriptor of an open file that let go of it and of its map past its budget (:class:`_OpenFiles`),
#: taken again when the file is next used
_PARKED = -3


class _Budgeted:
    """What a file a budget of open files may park (:class:`MappedFile`, :class:`AppendFile`) does
    alike: let go of its map, park (descriptor and map let go of) and close, each under its lock
    (none: never parked).  The slots of what they share are here (its subclasses' keep no dict)."""

    __slots__ = ("_fd", "_kept", "_lock", "_mm", "writable")
    _lock: threading.Lock | None
    _fd: int
    _mm: Any
    _kept: tuple[_KeptMaps, _KeptMap] | None
    writable: bool

    def _close(self) -> None:
        raise NotImplementedError

    def _drop_map(self) -> None:
        """Let go of the map: a numpy view still referencing it keeps it (the OS unmaps it when the view
        dies; nothing it shows changes: the map is shared)."""
        if self._mm is not None:
            _let_go(self._mm, self._kept)
        self._mm, self._kept = None, None

    def _park(self) -> bool:
        """Let go of the descriptor and map unless another thread is using the file (for its budget);
        whether it did."""
        lock = self._lock
        if lock is None or not lock.acquire(blocking=False):
            return False
        try:
            if self._fd >= 0:
                self._drop_map()
                os.close(self._fd)
                self._fd = _PARKED
            return True
        finally:
            lock.release()

    def close(self) -> None:
        """Unmap and close. Idempotent; thread-safe against the budget parking the file."""
        if self._lock is None:
            self._close()
            return
        with self._lock:
            self._close()
        _budget(self.writable).discard(self)


class MappedFile(_Budgeted):
    """A fixed-size file mapped into memory.

    ``create=True`` makes the file if it is missing, preallocated to ``size`` as a
    sparse file (``ftruncate``: no disk blocks until written), as the brokers do.
    ``reserve=True`` (a writable file) keeps disk blocks reserved (``posix_fallocate``)
    ahead of its writer, a step (:func:`reserve_step`) at a time: the first step when
    the file is made, the next ones when :meth:`reserve_to` is asked for bytes past
    :attr:`reserved`.  So disk use follows the data, and a full disk fails there with
    :class:`StorageFullError` (a new file that gets no blocks is not left behind)
    instead of killing a later write through the map with SIGBUS.  A writer that
    writes through the map (or needs a batch refused whole) calls :meth:`reserve_to`
    first.  ``size=None`` maps an existing file at its current length.  Reads are
    zero-copy (:meth:`view`, :meth:`array`); writes go through the descriptor into
    the page cache the map shows (visible in it at once) and are durable after :meth:`flush`.

    An empty file cannot be mapped; it is represented with no map and size 0.

    ``parkable=True`` (a local file not read whole) puts the file in a budget of open files
    (:class:`_OpenFiles`: :data:`_open_writers` for a writable one, :data:`_open_readers` else): past it,
    while no thread uses it, it lets go of its descriptor and map, and opens the same file (by inode)
    again when next used, as a read-only :class:`AppendFile` does.  For files a store holds many of and
    uses few at a time (Kafka's active indexes: two descriptors each, the map's and the file's); not
    for those whose owners keep the map (:meth:`buffer`) between calls.

    ``zero_tail=True`` (read-only, ``size`` given) reads a local file shorter than ``size`` as a
    broker's ``MappedFile`` maps one (``FileChannel.map`` at full size): its bytes, then zeros up to
    ``size``.  Nothing is written to the file: its bytes are read into memory (``O(bytes held)``; the
    zeros cost no memory until read), and :attr:`short` says how many there were.
    """

    __slots__ = ("_ident", "_in_memory", "_reserving", "_used", "_zero_tail", "path", "reserved", "size")

    def __new__(cls, path: Any = None, *args: Any, **kwargs: Any) -> MappedFile:
        # A URL gets the read-only remote file (end of this module) behind the same API.
        return object.__new__(RemoteMappedFile if cls is MappedFile and is_url(path) else cls)

    def __init__(self, path: str | os.PathLike[str], size: int | None = None, *, create: bool = False,
                 writable: bool = False, in_memory: bool = False, reserve: bool = False,
                 parkable: bool = False, zero_tail: bool = False) -> None:
        self.path = os.fspath(path)
        self.writable = writable or create
        #: a parkable file's: held while its descriptor is used, and by its budget to park it
        self._lock: threading.Lock | None = None
        #: when it was last used (:data:`_ticks`), and the file's ``(st_dev, st_ino)`` (what it opens
        #: again once parked)
        self._used = 0
        self._ident = (0, 0)
        # in_memory: read the file once instead of mapping it.  For small read-only files
        # that another process may shrink (a Kafka writer trims its active index on roll
        # and close): touching a map past the new end kills the reader with SIGBUS.
        self._in_memory = in_memory and not self.writable
        #: the bytes the file held when it was shorter than asked and read with ``zero_tail``; None else
        self._zero_tail: int | None = None
        self._reserving = reserve and self.writable
        #: bytes from the start (or from where :meth:`reserve_to` was first asked to start) with
        #: their blocks reserved: a writer below it never finds the disk full
        self.reserved = 0
        flags = os.O_RDWR if self.writable else os.O_RDONLY
        if create:
            flags |= os.O_CREAT
        self._mm: mmap.mmap | None = None
        #: the cache and entry of a kept map (keep_read_maps), handed back instead of closed
        self._kept: tuple[_KeptMaps, _KeptMap] | None = None
        with _os_errors(self.path):
            self._fd = _open_regular(self.path, flags)
            try:
                self._size_to(size, reserve, zero_tail)
                self._map(as_now=size is None)
                st = os.fstat(self._fd)
            except BaseException:
                os.close(self._fd)
                raise
        if self._in_memory:
            # read whole: no descriptor held (a Kafka reader holds two index files per segment, and
            # a store of a thousand segments would reach the common limit of 1024)
            os.close(self._fd)
            self._fd = _READ_WHOLE
        elif parkable:
            self._ident = (st.st_dev, st.st_ino)
            self._lock = threading.Lock()
            self._used = next(_ticks)
            _budget(self.writable).add(self)

    def _in_use(self, use: Callable[..., _T], *args: Any) -> _T:
        """``use(*args)``; a parkable file (one with a lock) holds its lock meanwhile, opens its file again
        first if it let go of it, and is marked the most recently used."""
        lock = self._lock
        if lock is None:
            return use(*args)
        with lock:
            if self._fd == _PARKED:
                self._unpark()
            self._used = next(_ticks)
            return use(*args)

    def _unpark(self) -> None:
        """Open and map the file again after :meth:`_park` (its lock held): the same file, by inode,
        at the length it had.

        :raises NotFoundError: the file was removed or replaced since it was opened.
        :raises TruncatedDataError: it is shorter now.
        """
        fd = _reopen(self.path, os.O_RDWR if self.writable else os.O_RDONLY, self._ident)
        actual = os.fstat(fd).st_size
        if actual < self.size:
            os.close(fd)
            raise TruncatedDataError(f"expected a file of {self.size} bytes, found {actual} (cut since it "
                                     "was opened)", self.path, actual)
        self._fd = fd
        try:
            self._map()
        except BaseException:
            self._fd = _PARKED
            os.close(fd)
            raise
        _budget(self.writable).add(self)

    def _size_to(self, size: int | None, reserve: bool = False, zero_tail: bool = False) -> None:
        """Take the file's length (``size=None``), or make it ``size`` (writable files only; a read-only
        one with ``zero_tail`` reads as that long)."""
        actual = os.fstat(self._fd).st_size
        if size is None:
            size = actual
        elif actual < size and not self.writable:
            if not zero_tail:
                raise TruncatedDataError(f"expected a file of {size} bytes, found {actual}", self.path,
                                         actual)
            self._zero_tail = actual        # read with zeros past its end (_map): the file left as it is
            self._in_memory = True
        elif actual < size:
            try:
                if reserve:
                    self._allocate(actual, size)
                else:
                    self._extend(actual, size)
            except OSError as err:
                if err.errno == errno.EFBIG:    # name the size that found no room
                    raise too_large(err, self.path, size=size) from err
                raise
        self.size = size

    def _extend(self, actual: int, size: int) -> None:
        """Extend the file to ``size`` (sparse); on failure leave it as :meth:`_allocate` does (a file this
        call found empty is removed: a 0-byte commitlog file is one RocketMQ refuses to start on)."""
        try:
            os.ftruncate(self._fd, size)
        except OSError:
            if actual == 0:
                os.unlink(self.path)
            raise

    def _allocate(self, actual: int, size: int) -> None:
        """Extend the file to ``size`` (sparse), the blocks of its first step reserved; on failure
        leave it as it was (a file this call found empty is removed: a 0-byte file is what a crash
        leaves)."""
        first = min(size, max(actual, reserve_step(size)))
        try:
            os.posix_fallocate(self._fd, 0, first)
        except OSError as err:
            if err.errno in (errno.EOPNOTSUPP, errno.EINVAL):   # a filesystem without it: sparse
                self._reserving = False
                os.ftruncate(self._fd, size)
                return
            os.ftruncate(self._fd, actual)
            if actual == 0:
                os.unlink(self.path)
            raise
        os.ftruncate(self._fd, size)
        self.reserved = first

    def reserve_to(self, end: int, start: int = 0) -> None:
        """Have the blocks of bytes up to ``end`` reserved before they are written, and a step
        (:func:`reserve_step`) past it; nothing when they are (``end <= reserved``: ``O(1)``) or
        the file does not reserve.  ``start``: where the writer writes from, when the file was
        opened as it was left (what lies before it is written already: not reserved again).

        :raises StorageFullError: the disk is full; the writer must not write past
            :attr:`reserved` (nothing was reserved by this call).
        """
        if end <= self.reserved or not self._reserving:
            return
        self._in_use(self._reserve_to, end, start)

    def _reserve_to(self, end: int, start: int) -> None:
        lo = max(self.reserved, start - start % PAGE_SIZE)
        hi = min(self.size, -(-(end + reserve_step(self.size)) // PAGE_SIZE) * PAGE_SIZE)
        if hi > lo:
            try:
                os.posix_fallocate(self._fd, lo, hi - lo)
            except OSError as err:
                if err.errno in (errno.EOPNOTSUPP, errno.EINVAL):   # a filesystem without it: sparse
                    self._reserving = False
                    return
                raise _translate(err, self.path, lo, hi - lo) from err
        self.reserved = max(self.reserved, hi)

    def _map(self, *, as_now: bool = False) -> None:
        """Map :attr:`size` bytes (read them, in memory).  ``as_now``: the file as it is now was
        asked for (no size given), so a file cut since its size was taken maps at its new size."""
        if self.size == 0:
            self._mm = None
            return
        if self._zero_tail is not None:
            # an anonymous map: the zeros past the file's bytes take no memory until read
            self._mm = mmap.mmap(-1, self.size)
            with memoryview(self._mm) as into:
                got = 0
                while got < self.size and (n := os.preadv(self._fd, [into[got:]], got)) > 0:
                    got += n
            self._zero_tail = got
            return
        if self._in_memory:
            data = bytearray(self.size)
            got = os.preadv(self._fd, [data], 0)
            if got < self.size:   # shrunk by its writer since fstat: the snapshot is what was read
                del data[got:]
                self.size = got
            self._mm = data  # type: ignore[assignment]  # serves view/array/read like a map
            return
        if self.writable:
            self._mm = _map(self._fd, self.path, self.size, mmap.ACCESS_WRITE)
            return
        if as_now:
            self._mm, self._kept, self.size = _read_map_as_now(self._fd, self.path, self.size)
        else:
            self._mm, self._kept = _read_map(self._fd, self.path, self.size)

    @property
    def short(self) -> int | None:
        """How many bytes the file held where it was shorter than its size and read with ``zero_tail``
        (the rest reads as zeros); None where it held them all."""
        return self._zero_tail

    def _require_map(self) -> mmap.mmap:
        if self.closed:
            raise StoreClosedError("file is closed", self.path)
        if self._mm is None:
            raise StoreClosedError("file is empty and has no map", self.path)
        return self._mm

    def view(self, start: int = 0, end: int | None = None) -> memoryview:
        """A zero-copy view of bytes ``[start, end)``.  O(1).

        The view must be released before :meth:`close`/:meth:`resize`.
        """
        if self.size == 0:
            return memoryview(b"")
        return memoryview(self._in_use(self._require_map))[start:end]

    def buffer(self) -> mmap.mmap:
        """The map itself: a buffer over the whole file (writable if the file is), for a C function
        that copies into it during one call and keeps no reference (a view kept would stop
        :meth:`close` and :meth:`resize`; a buffer taken during a call is released at its end).

        :raises StoreClosedError: the file is closed, or empty (no map).
        """
        return self._in_use(self._require_map)

    def array(self, dtype: Any, start: int = 0, count: int = -1) -> np.ndarray:
        """``count`` items of ``dtype`` from byte ``start``, viewing the map (no copy)."""
        import numpy as np

        if self.size == 0:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(self._in_use(self._require_map), dtype=dtype, count=count, offset=start)

    def read(self, start: int, n: int) -> bytes:
        """A copy of ``n`` bytes from ``start`` (fewer at the end of the file)."""
        return self._in_use(self._read, start, n)

    def _read(self, start: int, n: int) -> bytes:
        mm = self._require_map()
        return mm[start:start + n]

    def pread(self, start: int, n: int) -> bytes:
        """A copy of ``n`` bytes from ``start`` (fewer at the end of the file) read through the
        descriptor, not the map: a hole reads as zeros without the file system giving it a page."""
        return self._in_use(self._pread, start, n)

    def _pread(self, start: int, n: int) -> bytes:
        if self._fd == _READ_WHOLE:
            return bytes(self._require_map()[start:start + max(0, n)]) if self.size else b""
        with _os_errors(self.path, start):
            return os.pread(self._fd, max(0, min(n, self.size - start)), start)

    def data_ranges(self, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` that may hold non-zero bytes (:func:`data_ranges`: all but
        the file's holes; reserved blocks count as data)."""
        end = self.size if end is None else min(end, self.size)
        if self._fd == _READ_WHOLE:     # read whole: its holes are zeros in memory
            return [(start, end)] if start < end else []
        return self._in_use(self._data_ranges, start, end)

    def _data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        return _data_ranges_fd(self._fd, start, end) if self._fd >= 0 else []

    def stat(self) -> os.stat_result | None:
        """``fstat`` of the file this maps, as it is now (a parked file is opened again first); None
        for one read whole into memory or a remote one (no descriptor).  ``O(1)``."""
        if self._fd == _READ_WHOLE or isinstance(self, RemoteMappedFile):
            return None
        return self._in_use(self._fstat)

    def _fstat(self) -> os.stat_result:
        with _os_errors(self.path):
            return os.fstat(self._fd)

    def data_end(self) -> int:
        """Where the file's first hole starts (its size if none): the bytes before it can be read
        through the map without the file system allocating a page (tmpfs does for a hole, and kills
        the reader with SIGBUS when it is full)."""
        ranges = self.data_ranges(0, self.size)
        return ranges[0][1] if ranges and ranges[0][0] == 0 else 0

    def first_nonzero(self, start: int, end: int | None = None, *, last: bool = False) -> int | None:
        """The first non-zero byte's position in ``[start, end)`` (``last``: one past the last one),
        None when they are all zeros.  Reads only the file's data ranges, through the descriptor a
        window at a time: never a hole through the map (pages a full tmpfs cannot give: SIGBUS) and
        no more memory than a window, whatever the file size.  ``O(data bytes in the range)``.
        """
        found = None
        # Looking for the first: windows from a page, doubling, since data usually starts at once
        # (a remote file then costs one block, not a window of them).  The last: whole windows.
        window = SCAN_WINDOW if last else PAGE_SIZE
        for lo, hi in self.data_ranges(start, end):
            at = lo
            while at < hi:
                size = min(window, hi - at)
                data = self.pread(at, size)
                # A window of zeros (a file copied without its holes: a preallocated file's tail
                # written out) is told by one memcmp, a fraction of an instruction a byte; numpy
                # searches only a window holding data
                if data != _zeros(len(data)):
                    import numpy as np

                    hits = np.flatnonzero(np.frombuffer(data, np.uint8))
                    if not last:
                        return at + int(hits[0])
                    found = at + int(hits[-1]) + 1
                at += size
                window = min(window * 2, SCAN_WINDOW)
        return found

    def write(self, pos: int, data: Any) -> None:
        """Write ``data`` (bytes-like) at ``pos``; it must fit in the file.

        Through the descriptor (``pwrite``), not the map: the page cache is the map's, so the
        map sees the bytes at once, and a page not yet written costs no write fault (the first
        store into a page of a shared map costs milliseconds on ext4 in a VM: every new index
        file paid it).
        """
        self._in_use(self._write, pos, data)

    def _write(self, pos: int, data: Any) -> None:
        self._require_map()
        view = memoryview(data).cast("B")
        n = view.nbytes
        if pos < 0 or pos + n > self.size:
            raise StorageIOError(f"write of {n} bytes at {pos} does not fit in a file of {self.size} bytes",
                                 self.path, pos)
        written = 0
        with _os_errors(self.path, pos):
            while written < n:
                written += os.pwrite(self._fd, view[written:], pos + written)

    def appended(self, before: int, after: int) -> None:
        """Bytes ``[before, after)`` were just written after those before them (a log written
        front to back, as the commitlog): their writeback starts as :meth:`AppendFile.append`'s."""
        if self.writable and self._fd >= 0:     # (a parked file: its writes were started before it parked)
            _start_writeback(self._fd, before, after)

    def flush(self, start: int = 0, end: int | None = None) -> None:
        """Make bytes ``[start, end)`` durable (``msync`` of the pages they touch; ``fdatasync`` when
        they are the whole file, which lets other threads run meanwhile: ``mmap.flush`` holds the GIL,
        so files closed in parallel would be flushed one after another).  An empty file (no map) is
        synced too (``fdatasync``): its length, a truncation to 0, must reach the disk as well.  A
        parked file opens its file again for it (what it wrote before it parked is synced with it)."""
        if self.writable:
            self._in_use(self._flush, start, end)

    def _flush(self, start: int, end: int | None) -> None:
        if self._fd < 0:
            return
        if self._mm is None:
            with _os_errors(self.path, 0):
                os.fdatasync(self._fd)
            return
        end = self.size if end is None else min(end, self.size)
        if end <= start:
            return
        aligned = start - start % PAGE_SIZE
        with _os_errors(self.path, start):
            if aligned == 0 and end == self.size:
                os.fdatasync(self._fd)
            else:
                self._mm.flush(aligned, end - aligned)

    def resize(self, size: int) -> None:
        """Truncate or extend the file to ``size`` bytes and map it again (what it extends by is
        sparse: reserved by :meth:`reserve_to` when written)."""
        self._in_use(self._resize, size)

    def _resize(self, size: int) -> None:
        if self._mm is not None:    # a writable file's (never kept): a view still alive raises here
            self._mm.close()
            self._mm = None
        with _os_errors(self.path, size):
            os.ftruncate(self._fd, size)
        self.size = size
        self.reserved = min(self.reserved, size)
        self._map()

    def _close(self) -> None:
        if isinstance(self._mm, bytearray):
            self._mm = None
        self._drop_map()
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = _CLOSED

    @property
    def closed(self) -> bool:
        return self._fd == _CLOSED

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, size={self.size})"


#: How long a reader's :meth:`AppendFile.view` goes on with the file's length it last took.
RESIZE_CHECK_SECONDS = 0.01


def _descriptor_limit() -> int:
    """The process's limit of open descriptors (``ulimit -n``, ``RLIMIT_NOFILE``'s soft limit);
    0 where it is unlimited."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 0 if soft == resource.RLIM_INFINITY else soft


def _descriptor_room() -> int:
    """The most descriptors the process may come to hold: its hard limit (the soft one rises to it
    when met, :func:`_raise_descriptor_limit`); 0 where it is unlimited."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 0 if hard == resource.RLIM_INFINITY else hard


class _OpenReaders:
    """The local read-only :class:`AppendFile` objects (and parkable read-only :class:`MappedFile`
    objects) that hold a descriptor, at most :attr:`limit` of them.  Past it the least recently used
    ones that no thread is reading let go of their descriptor and map (a map holds a descriptor of
    its own: ``mmap`` duplicates it) and take them again, of the same file (its inode checked), when
    next read; as RocksDB's table cache keeps a database of many files within ``max_open_files``.
    So reading a log directory of a thousand partitions, or a partition of a thousand segments, stays
    within the common ``ulimit -n`` of 1024, where every ``.log`` held two descriptors from open to
    close (and a RocketMQ store of a thousand queues, where every consume-queue file did).  The limit
    is a quarter of the process's hard limit (two descriptors a file: half of it, the rest for
    everything else), which the soft one rises to when an open meets it (as the writers' budget:
    a merged read of 2,000 queues under a soft limit of 1024 reopened each consume-queue file for
    every chunk of entries, 6,000 reopens, where it now raises the soft limit once and reopens none);
    where the hard limit is unlimited, a quarter of the soft one.  The descriptors of a file a view
    still reads are freed when the view is.
    Thread-safe: one lock for the set, each file's own for its descriptor (taken without waiting:
    a file being read is passed over).

    ``writers``: the budget of the local writable :class:`AppendFile` objects and parkable writable
    :class:`MappedFile` objects (:data:`_open_writers`), an eighth of the process's hard limit: a
    writer parked past it keeps everything it wrote (nothing is trimmed or synced for it; a flush
    opens the file again and syncs it), so a store writing thousands of Kafka partitions (a
    conversion: about five descriptors each) stays within a hard limit of a few hundred.  The hard
    limit: the soft one rises to it when met, so where the hard limit is large nothing parks.
    """

    def __init__(self, writers: bool = False) -> None:
        self.lock = threading.Lock()
        self.files: set[Any] = set()
        self._limit: int | None = None
        self.writers = writers

    @property
    def limit(self) -> int:
        if self._limit is None:
            room = _descriptor_room()
            if self.writers:
                self._limit = max(16, room // 8) if room else 1 << 16
            elif room:      # the soft limit rises to the hard one when an open meets it, as for writers
                self._limit = max(16, room // 4)
            else:           # no hard limit: the soft one's, as the raise to 2^20 may be refused (macOS)
                known = _descriptor_limit()
                self._limit = max(16, known // 4) if known else 1 << 16
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = value

    def limit_changed(self) -> None:
        """The process's descriptor limit changed: the budget is taken from it again when next asked."""
        self._limit = None

    def add(self, file: Any) -> None:
        """``file`` holds a descriptor now; the least recently used others let theirs go past the
        limit (an eighth of it at once, so that each new file does not scan the set)."""
        with self.lock:
            self.files.add(file)
            over = len(self.files) - self.limit
            if over > 0:
                self._park(over + self.limit // 8)

    def discard(self, file: Any) -> None:
        with self.lock:
            self.files.discard(file)

    def shed(self) -> int:
        """Have half of the files let go of their descriptors (the process ran out of them: other
        code holds more than the limit supposed); how many did."""
        with self.lock:
            return self._park(max(1, len(self.files) // 2))

    def _park(self, count: int) -> int:
        """Park up to ``count`` least recently used idle files (the set's lock held)."""
        parked = 0
        for file in sorted(self.files, key=_last_used):
            if parked >= count:
                break
            if file._park():
                self.files.discard(file)
                parked += 1
        return parked


def _last_used(file: Any) -> int:
    return int(file._used)


_open_readers = _OpenReaders()
_open_writers = _OpenReaders(writers=True)


def _budget(writable: bool) -> _OpenReaders:
    """The budget a parkable file belongs to."""
    return _open_writers if writable else _open_readers


def _reopen(path: str, flags: int, ident: tuple[int, int]) -> int:
    """A descriptor of ``path`` again, for a file that let go of its own: the same file, by inode.

    :raises NotFoundError: the file was removed or replaced since it was first opened.
    """
    try:
        fd = _open_regular(path, flags)
    except FileNotFoundError as err:
        raise NotFoundError("expected the file opened before, found it removed since (a file past its "
                            "open-files budget opens it again when next read or written)", path) from err
    except OSError as err:
        raise _translate(err, path) from err
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != ident:
        os.close(fd)
        raise NotFoundError("expected the file opened before, found another in its place (replaced since; "
                            "a file past its open-files budget opens it again when next read or written)",
                            path)
    return fd
#: :attr:`AppendFile._used` stamps (``next`` of a count is atomic: no lock)
_ticks = itertools.count()


def _open_readers_after_fork() -> None:
    """In a forked child: a lock another thread of the parent held at the fork stays held."""
    for budget in (_open_readers, _open_writers):
        budget.lock = threading.Lock()
        for file in budget.files:
            file._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_open_readers_after_fork)


class AppendFile(_Budgeted):
    """A file that grows by appends and is read by position (the Kafka ``.log``).

    Reads go through a map of the file refreshed when the file has grown, so a
    scan of a whole segment is zero-copy.  A local file may let go of its descriptor and map
    while it is not used, past the process's open-files budget (:class:`_OpenReaders`: one for readers,
    one for writers), and open the same file again when it is.

    :raises NotFoundError: (a read) a file opened again is found removed or replaced.
    """

    __slots__ = ("_ident", "_mm_size", "_sized_at", "_used", "path", "size")

    def __new__(cls, path: Any = None, *args: Any, **kwargs: Any) -> AppendFile:
        return object.__new__(RemoteAppendFile if cls is AppendFile and is_url(path) else cls)

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False, writable: bool = False) -> None:
        self.path = os.fspath(path)
        self.writable = writable or create
        flags = os.O_RDWR if self.writable else os.O_RDONLY
        if create:
            flags |= os.O_CREAT
        with _os_errors(self.path):
            self._fd = _open_regular(self.path, flags)
            st = os.fstat(self._fd)
        self.size = st.st_size
        #: the file's ``(st_dev, st_ino)``: what a reader that let go of its descriptor opens again
        self._ident = (st.st_dev, st.st_ino)
        self._mm: mmap.mmap | None = None
        self._mm_size = 0
        #: ``time.monotonic()`` when a reader last took the file's length (:meth:`view`)
        self._sized_at = time.monotonic()
        #: the cache and entry of a kept map (keep_read_maps), handed back instead of closed
        self._kept: tuple[_KeptMaps, _KeptMap] | None = None
        #: held while its descriptor is used, and by its budget (:class:`_OpenReaders`) to park it
        self._lock: threading.Lock | None = threading.Lock()
        #: when it was last used (:data:`_ticks`), for its budget
        self._used = next(_ticks)
        _budget(self.writable).add(self)

    def _unpark(self) -> None:
        """Open the file again after :meth:`_park` (its lock held): the same file, by inode.

        :raises NotFoundError: the file was removed or replaced since it was opened.
        """
        self._fd = _reopen(self.path, os.O_RDWR if self.writable else os.O_RDONLY, self._ident)
        self._sized_at = -RESIZE_CHECK_SECONDS     # its length is taken again at once
        _budget(self.writable).add(self)

    def append(self, data: Any) -> int:
        """Append ``data``; returns the position it was written at."""
        return self._in_use(self._append, data)

    def _append(self, data: Any) -> int:
        pos = self.size
        with _os_errors(self.path, pos):
            view = memoryview(data)
            written = 0
            try:
                while written < view.nbytes:
                    written += os.pwrite(self._fd, view[written:], pos + written)
            except OSError:
                os.ftruncate(self._fd, pos)     # a full disk leaves no part of ``data`` (no torn batch)
                raise
        self.size = pos + written
        _start_writeback(self._fd, pos, self.size)
        return pos

    def append_many(self, datas: Sequence[Any]) -> int:
        """Append the buffers ``datas`` one after another in one write (``pwritev``, :data:`IOV_MAX`
        buffers at a time) where :meth:`append` of each would take one each; returns the position the
        first was written at.  The same bytes, and the same all-or-nothing on a full disk."""
        return self._in_use(self._append_many, datas)

    def _append_many(self, datas: Sequence[Any]) -> int:
        pos = self.size
        views = [memoryview(data).cast("B") for data in datas]
        total = sum(view.nbytes for view in views)
        with _os_errors(self.path, pos):
            written = 0
            try:
                for first in range(0, len(views), IOV_MAX):
                    chunk = views[first:first + IOV_MAX]
                    want = sum(view.nbytes for view in chunk)
                    done = _pwritev(self._fd, chunk, pos + written) if want else 0
                    if done < want:     # a short write: the rest of the chunk one buffer at a time
                        rest = memoryview(b"".join(chunk)).cast("B")
                        while done < want:
                            done += os.pwrite(self._fd, rest[done:], pos + written + done)
                    written += want
            except OSError:
                os.ftruncate(self._fd, pos)     # a full disk leaves no part of ``datas`` (no torn batch)
                raise
        self.size = pos + total
        _start_writeback(self._fd, pos, self.size)
        return pos

    def _check_open(self) -> None:
        # a closed file's descriptor is -1, which mmap takes for an anonymous map: a read after close
        # would see the file's size in zeros (what a reader calls a damaged batch) instead of failing
        if self._fd == _CLOSED:
            raise StoreClosedError("file is closed", self.path)

    @property
    def closed(self) -> bool:
        """Closed by :meth:`close` (a parked file, its descriptor let go for the limit, is open)."""
        return self._fd == _CLOSED

    def read(self, pos: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``pos``.  :raises StoreClosedError: the file is closed."""
        return self._in_use(self._read, pos, n)

    def _in_use(self, use: Callable[..., _T], *args: Any) -> _T:
        """``use(*args)`` on the open file: a budgeted reader (one with a lock) that let go of its
        descriptor opens it again first, and is marked the most recently used.

        :raises StoreClosedError: the file is closed.
        """
        lock = self._lock
        if lock is None:
            self._check_open()
            return use(*args)
        with lock:
            if self._fd < 0:        # (under the lock: a close by another thread is seen, not a -1 read)
                self._check_open()
                self._unpark()
            self._used = next(_ticks)
            return use(*args)

    def _read(self, pos: int, n: int) -> bytes:
        with _os_errors(self.path, pos):
            return os.pread(self._fd, n, pos)

    #: False: :meth:`window` is the whole mapping; True on a remote file (ranges fetched)
    remote = False

    def window(self, start: int, end: int) -> memoryview:
        """A view of the whole file in which at least bytes ``[start, end)`` are the file's.

        What a reader that knows the byte range it needs asks for instead of
        :meth:`view`, which fetches a remote file whole.  Here (a local file) it is
        :meth:`view`: the mapping, nothing read until touched.  Positions are the
        file's and the view's length is the file's size in both cases.
        """
        return self.view()

    def view(self) -> memoryview:
        """The whole current content, mapped read-only (zero-copy).

        A reader's is what the file held when opened, or what it holds now where another process
        cut it since (a broker's recovery cutting a torn tail, a follower replica truncating to its
        leader): :attr:`size` follows, so a read of what was cut fails as a short file, where
        touching a mapped page past the file's end would kill the process (SIGBUS).  The length is
        taken again when :data:`RESIZE_CHECK_SECONDS` have passed since it last was (one ``fstat``;
        not on every call: a walk asks for a view per batch header), so a cut made while views are
        being read, or just before, still can (docs/kafka.md, "Recovery").

        :raises StoreClosedError: the file is closed.
        """
        return self._in_use(self._view)

    def _view(self) -> memoryview:
        if not self.writable and self.size:
            now = time.monotonic()
            if now - self._sized_at >= RESIZE_CHECK_SECONDS:
                with _os_errors(self.path):
                    self.size = min(self.size, os.fstat(self._fd).st_size)
                self._sized_at = now
        if self.size == 0:
            self._drop_map()
            return memoryview(b"")
        if self._mm is None or self._mm_size != self.size:
            self._drop_map()
            with _os_errors(self.path):
                if self.writable:       # its writer appends through the descriptor: kept maps are for readers
                    self._mm = _map(self._fd, self.path, self.size)
                else:   # cut since the fstat above: what it holds now (a reader never sees more)
                    self._mm, self._kept, self.size = _read_map_as_now(self._fd, self.path, self.size)
            self._mm_size = self.size
            if self._mm is None:
                return memoryview(b"")
        return memoryview(self._mm)

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes."""
        self._in_use(self._truncate, size)

    def _truncate(self, size: int) -> None:
        self._drop_map()
        with _os_errors(self.path, size):
            os.ftruncate(self._fd, size)
        self.size = size

    def flush(self) -> None:
        """``fsync`` the file (a parked writer opens it again for it: what it wrote before it parked is
        synced with it)."""
        if self.writable and not self.closed:
            self._in_use(self._fsync)

    def _fsync(self) -> None:
        with _os_errors(self.path):
            os.fsync(self._fd)

    def _close(self) -> None:
        self._drop_map()
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = _CLOSED

    def __repr__(self) -> str:
        return f"AppendFile({self.path!r}, size={self.size})"


# -- whole-file operations ---------------------------------------------------

def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The whole content of a file."""
    path = os.fspath(path)
    with _os_errors(path), os.fdopen(_open_regular(path, os.O_RDONLY), "rb") as f:
        return f.read()


def read_text(path: str | os.PathLike[str]) -> str:
    """The whole content of a UTF-8 text file.

    :raises CorruptDataError: the bytes are not UTF-8 (at the first bad byte).
    """
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        from .errors import CorruptDataError

        raise CorruptDataError(f"expected UTF-8 text, found byte 0x{data[err.start]:02x}",
                               os.fspath(path), err.start) from err


@contextlib.contextmanager
def spooled(stream: Any, *, chunk: int = 1 << 20) -> Iterator[str]:
    """The path of a temporary file holding everything ``stream`` (a binary file object, e.g. stdin)
    gives, read ``chunk`` bytes at a time; the file is removed on exit.  For input a command reads
    twice (``segstore write --input -``): a pipe can be read once only.

    :raises StorageFullError: the temporary directory's disk is full.
    """
    import tempfile

    fd, path = tempfile.mkstemp(prefix="segstore-input-", suffix=".jsonl")
    try:
        with _os_errors(path), os.fdopen(fd, "wb") as out:
            while data := stream.read(chunk):
                out.write(data)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@contextlib.contextmanager
def spooled_file(path: str | os.PathLike[str]) -> Iterator[str]:
    """:func:`spooled` of what the file at ``path`` gives: for a FIFO (``--input <(cmd)``), which, as a
    pipe, can be read once only.

    :raises NotFoundError: nothing at ``path``.
    :raises StorageFullError: the temporary directory's disk is full.
    """
    path = os.fspath(path)
    with _os_errors(path):
        stream = open(path, "rb")       # closed below, after the copy
    with stream, spooled(stream) as copy:
        yield copy


#: The longest line :func:`iter_lines` hands out: one message, well above any broker's maximum.
MAX_LINE = 256 << 20


def iter_lines(path: str | os.PathLike[str], *, chunk: int = 1 << 20,
               max_line: int = MAX_LINE) -> Iterator[tuple[int, bytes]]:
    """``(byte position, line)`` for each line of a file, newline included, read ``chunk`` bytes at
    a time: memory stays at ``chunk`` plus the longest line, whatever the file's size.

    :raises MessageTooLargeError: a line longer than ``max_line`` (at its start).
    """
    from .errors import MessageTooLargeError

    path = os.fspath(path)
    pos = 0
    parts: list[bytes] = []      # the start of a line that continues into the next chunk
    waiting = 0
    with _os_errors(path), os.fdopen(_open_regular(path, os.O_RDONLY), "rb") as f:
        while data := f.read(chunk):
            start = 0
            end = data.find(b"\n")
            if parts and end >= 0:
                line = b"".join(parts) + data[:end + 1]
                parts.clear()
                waiting = 0
                yield pos, line
                pos += len(line)
                start = end + 1
                end = data.find(b"\n", start)
            while end >= 0:
                yield pos, data[start:end + 1]
                pos += end + 1 - start
                start = end + 1
                end = data.find(b"\n", start)
            if start < len(data):
                parts.append(data[start:])
                waiting += len(data) - start
                if waiting > max_line:
                    raise MessageTooLargeError(f"expected lines of at most {max_line} bytes, "
                                               "found a longer one", path, pos)
    if parts:
        yield pos, b"".join(parts)


def write_atomic(path: str | os.PathLike[str], data: bytes | memoryview | str, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: write ``path.tmp``, fsync, rename, fsync the dir.

    A crash leaves either the old or the new content, never a mix.
    """
    path = os.fspath(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = path + ".tmp"
    with _os_errors(tmp):
        fd = _with_descriptors(os.open, tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


def write_bytes(path: str | os.PathLike[str], data: bytes, pos: int = 0) -> None:
    """Write ``data`` at ``pos`` of an existing (or new) file without truncating it."""
    path = os.fspath(path)
    with _os_errors(path, pos):
        fd = _open_regular(path, os.O_RDWR | os.O_CREAT)
        try:
            os.pwrite(fd, data, pos)
        finally:
            os.close(fd)


def save_aside(path: str | os.PathLike[str], pos: int, data: Any, *,
               into: str | os.PathLike[str] | None = None) -> str:
    """Keep bytes that recovery is about to cut from ``path`` at ``pos``.

    They go to ``{path}.cut-{pos}``, or to ``{into}/{name}.cut-{pos}`` (``into`` is
    created) where a broker refuses foreign files beside ``path``; a numbered
    suffix if that exists; fsynced before the caller truncates, so nothing cut is
    ever lost.  Returns that path.
    """
    if into is not None:
        make_dirs(into)
        path = os.path.join(os.fspath(into), os.path.basename(os.fspath(path)))
    base = f"{os.fspath(path)}.cut-{pos}"
    target, n = base, 1
    while os.path.exists(target):
        target, n = f"{base}.{n}", n + 1
    with _os_errors(target):
        with _with_descriptors(open, target, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    return target


def save_range_aside(path: str | os.PathLike[str], start: int, end: int | None = None, *,
                     into: str | os.PathLike[str] | None = None) -> tuple[str | None, int]:
    """Keep bytes ``[start, end)`` of ``path`` (to its end when None) that recovery is about to cut, as
    :func:`save_aside` does (``into`` as there), byte for byte, without reading or writing its zeros: a
    file preallocated to its full size (Kafka's ``preallocate``, a 1 GiB segment) and cut after a crash
    ends in a zero tail.  Copied a window at a time, an all-zero window (or a hole) left a hole of the
    copy, so neither memory nor disk grows with the zeros.  A range of zeros only holds nothing to keep:
    no file.  Returns ``(the path kept in, bytes kept)``; ``(None, 0)`` for zeros only.
    ``O(data bytes in the range)``.
    """
    import numpy as np

    path = os.fspath(path)
    with _os_errors(path):
        fd = _open_regular(path, os.O_RDONLY)
    try:
        stop = os.fstat(fd).st_size if end is None else end
        ranges = _data_ranges_fd(fd, start, stop)
        target = ""
        out = None
        try:
            for lo, hi in ranges:
                at = lo
                while at < hi:
                    size = min(SCAN_WINDOW, hi - at)
                    with _os_errors(path, at):
                        chunk = os.pread(fd, size, at)
                    if np.frombuffer(chunk, np.uint8).any():
                        if out is None:
                            if into is not None:
                                make_dirs(into)
                            beside = path if into is None else os.path.join(os.fspath(into),
                                                                            os.path.basename(path))
                            base = f"{beside}.cut-{start}"
                            target, n = base, 1
                            while os.path.exists(target):
                                target, n = f"{base}.{n}", n + 1
                            with _os_errors(target):
                                out = open(target, "wb")    # closed below, once every window is in
                        with _os_errors(target):
                            out.seek(at - start)
                            out.write(chunk)
                    at += size
            if out is None:
                return None, 0
            with _os_errors(target):
                out.truncate(stop - start)
                out.flush()
                os.fsync(out.fileno())
        finally:
            if out is not None:
                out.close()
        return target, stop - start
    finally:
        os.close(fd)


def data_ranges(path: str | os.PathLike[str], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` of a file that may hold non-zero bytes: all but its holes.

    A preallocated (sparse) file of 1 GiB holding a few MB is read in those MB, not
    in 1 GiB of zero pages.  Asks the file system (``SEEK_DATA``/``SEEK_HOLE``,
    which count written pages not yet on disk as data); where it cannot tell,
    the whole range.
    """
    if start >= end or is_url(path):
        return [(start, end)] if start < end else []
    with _os_errors(os.fspath(path)):
        fd = _open_regular(os.fspath(path), os.O_RDONLY)
    try:
        return _data_ranges_fd(fd, start, end)
    finally:
        os.close(fd)


#: Bytes :meth:`MappedFile.first_nonzero` reads at a time.
SCAN_WINDOW = 1 << 20
_ZERO_WINDOW = b""


def _zeros(n: int) -> bytes:
    """``n`` zero bytes: a whole window's are made once and kept (1 MiB), a shorter run's each time."""
    global _ZERO_WINDOW
    if len(_ZERO_WINDOW) != n:
        if n != SCAN_WINDOW:
            return bytes(n)
        _ZERO_WINDOW = bytes(n)
    return _ZERO_WINDOW


def _data_ranges_fd(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """:func:`data_ranges` of an open descriptor."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None or start >= end:
        return [(start, end)] if start < end else []
    ranges = []
    pos = start
    while pos < end:
        try:
            lo = os.lseek(fd, pos, seek_data)
        except OSError as err:
            if err.errno == errno.ENXIO:       # only a hole from pos to the end of the file
                break
            return [(start, end)]
        if lo >= end:
            break
        hi = min(os.lseek(fd, lo, seek_hole), end)
        if hi <= pos:           # no progress: not a file system that answers (the whole range)
            return [(start, end)]
        ranges.append((lo, hi))
        pos = hi
    return ranges


def exists(path: str | os.PathLike[str]) -> bool:
    return os.path.exists(path)


def is_dir(path: str | os.PathLike[str]) -> bool:
    return os.path.isdir(path)


def is_file(path: str | os.PathLike[str]) -> bool:
    return os.path.isfile(path)


def file_size(path: str | os.PathLike[str]) -> int:
    path = os.fspath(path)
    with _os_errors(path):
        return os.stat(path).st_size


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """What stands at ``path`` when it is not a regular file (symlinks followed): ``"a FIFO"``,
    ``"a directory"``, ``"a symlink loop"``, ``"a dangling symlink"``, ``"nothing"``...; None for a
    regular file.  For messages that name what was found where a store file belongs."""
    path = os.fspath(path)
    try:
        st_mode = os.stat(path).st_mode
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symlink loop"
        if isinstance(err, FileNotFoundError):
            return "a dangling symlink" if os.path.islink(path) else "nothing"
        raise _translate(err, path) from err
    if stat.S_ISREG(st_mode):
        return None
    return next((name for test, name in _KIND_NAMES if test(st_mode)), "no regular file")


def identity(path: str | os.PathLike[str]) -> tuple[int, int, int, int] | None:
    """What changes when a file is written or replaced: device, inode, size and modification time (ns);
    None when nothing is there.  For caches of small files read whole (a replaced file has a new inode)."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise _translate(err, path) from err
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def dirty_page_delay_ns() -> int | None:
    """How long the kernel may leave a page written through a shared map dirty before it writes it back
    (``vm.dirty_expire_centisecs`` plus a ``vm.dirty_writeback_centisecs`` period), in ns; None where
    that cannot be read (not Linux).  Until then further writes to the page take no fault, so they
    stamp no new ``st_mtime``/``st_ctime``."""
    try:
        total = 0
        for name in ("expire", "writeback"):
            with open(f"/proc/sys/vm/dirty_{name}_centisecs", "rb") as f:
                total += int(f.read())
    except (OSError, ValueError):
        return None
    return total * 10**7


def tree_identity(path: str | os.PathLike[str], depth: int) -> tuple[tuple[str, int, int, int], ...] | None:
    """``(relative name, inode, size, modification time in ns)`` of every entry under the directory
    ``path``, down to ``depth`` levels, in name order: what changes when a file there is added,
    removed, replaced, grown, cut or written with ``write``.  None where ``path`` is a URL or no
    directory.  An entry removed while it is listed is left out.  ``O(entries)`` ``stat`` calls."""
    path = os.fspath(path)
    if is_url(path) or not os.path.isdir(path):
        return None
    found: list[tuple[str, int, int, int]] = []

    def walk(directory: str, prefix: str, left: int) -> None:
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return
        except OSError as err:
            raise _translate(err, directory) from err
        for entry in entries:
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            except OSError as err:
                raise _translate(err, entry.path) from err
            name = prefix + entry.name
            found.append((name, st.st_ino, st.st_size, st.st_mtime_ns))
            if left > 1 and stat.S_ISDIR(st.st_mode):
                walk(entry.path, name + "/", left - 1)

    walk(path, "", depth)
    found.sort()
    return tuple(found)


def mtime_ms(path: str | os.PathLike[str]) -> int:
    """Last modification time in milliseconds (Java's ``File.lastModified``)."""
    path = os.fspath(path)
    with _os_errors(path):
        return os.stat(path).st_mtime_ns // 1_000_000


def allocated_size(path: str | os.PathLike[str]) -> int:
    """Bytes the file takes on disk (its allocated blocks; less than its size when sparse)."""
    path = os.fspath(path)
    with _os_errors(path):
        return os.stat(path).st_blocks * 512


def disk_space(path: str | os.PathLike[str]) -> tuple[int, int, int]:
    """``(total, free, usable)`` bytes of the file system holding ``path`` (Java's ``File.getTotalSpace``,
    ``getFreeSpace``, ``getUsableSpace``)."""
    path = os.fspath(path)
    with _os_errors(path):
        st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize, st.f_bavail * st.f_frsize


def list_dir(path: str | os.PathLike[str]) -> list[str]:
    """Sorted entry names of a directory; ``[]`` if it does not exist."""
    path = os.fspath(path)
    try:
        return sorted(_with_descriptors(os.listdir, path))     # (a listing takes a descriptor)
    except FileNotFoundError:
        return []
    except OSError as err:
        raise _translate(err, path) from err


def shared_map(path: str | os.PathLike[str], size: int) -> mmap.mmap:
    """A new file of ``size`` bytes (mode 0600), its blocks reserved, mapped shared and writable.

    For memory another process maps as well (the Spark reader's batch ring, in
    ``/dev/shm``): reserving first makes a full filesystem an error here rather than
    SIGBUS at a later write.  The caller removes the file when done.

    :raises StorageFullError: no room for ``size`` bytes.
    :raises StorageIOError: the file exists already, or another OS error.
    """
    path = os.fspath(path)
    with _os_errors(path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
            return _map(fd, path, size, mmap.ACCESS_WRITE)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)


def make_dirs(path: str | os.PathLike[str]) -> None:
    path = os.fspath(path)
    with _os_errors(path):
        os.makedirs(path, exist_ok=True)


def remove(path: str | os.PathLike[str]) -> None:
    """Delete a file; a missing file is fine."""
    path = os.fspath(path)
    try:
        os.remove(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise _translate(err, path) from err


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Delete a directory tree; a missing one is fine."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return
    # imported here: shutil loads bz2 and lzma (2-3 ms), which a library read need not pay
    import shutil

    with _os_errors(path):
        shutil.rmtree(path)


def remove_dir_if_empty(path: str | os.PathLike[str]) -> bool:
    """Delete a directory if it holds nothing; True if it is gone (a missing one is fine).

    Another process may be filling it meanwhile: then it stays, and that is not an error.
    """
    path = os.fspath(path)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise _translate(err, path) from err
    return True


def rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    src = os.fspath(src)
    with _os_errors(src):
        os.replace(src, dst)


def copy_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Copy a directory tree (files made writable)."""
    import shutil

    src = os.fspath(src)
    with _os_errors(src):
        shutil.copytree(src, dst, copy_function=shutil.copyfile)


def touch(path: str | os.PathLike[str]) -> None:
    """Create ``path`` if missing (empty), durable."""
    path = os.fspath(path)
    with _os_errors(path):
        os.close(_open_regular(path, os.O_WRONLY | os.O_CREAT))


class RemovedOnFailure:
    """A context for a write that may fail part way: on an exception it removes what the write created,
    the whole directory ``path`` if it was missing (and the missing directories above it, the first of
    them with everything in it: ``logs/t-0`` of a new ``logs``), its entries if it was empty; an
    existing store is left as the failed append left it (the format's recovery handles that).  Not
    thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.existed = exists(self.path)
        self.was_empty = self.existed and is_dir(self.path) and not list_dir(self.path)
        #: the first directory on the path that is missing (``path`` itself, or one above it)
        self.top = self.path
        parent = os.path.dirname(os.path.abspath(self.path))
        while not self.existed and not exists(parent) and os.path.dirname(parent) != parent:
            self.top, parent = parent, os.path.dirname(parent)

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is None:
            return
        if not self.existed:
            remove_tree(self.top)
        elif self.was_empty:
            for name in list_dir(self.path):
                entry = os.path.join(self.path, name)
                if is_dir(entry):
                    remove_tree(entry)
                else:
                    remove(entry)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """``fsync`` a directory so renames and creations in it are durable."""
    path = os.fspath(path)
    with _os_errors(path):
        fd = _with_descriptors(os.open, path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _Flock:
    """An exclusive ``flock`` held on an open descriptor (``_fd``, -1 when not held).

    The locks below differ in what they lock and how they open it; releasing is the same.
    """

    _fd: int

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0


class WriterLock(_Flock):
    """The store's writer lock: an exclusive ``flock`` on a small file.

    A second writer (another process, or another store object in this one) gets
    :class:`StoreLockedError` at once; readers never take it.  The file is left in
    place after release, as the brokers leave theirs.  ``content`` is written into a
    newly created lock file (RocketMQ's holds the 4 bytes ``lock``).
    """

    def __init__(self, path: str | os.PathLike[str], content: bytes = b"") -> None:
        self.path = os.fspath(path)
        self.content = content
        self._fd = -1

    def acquire(self) -> None:
        if is_url(self.path):
            raise _read_only(self.path)
        with _os_errors(self.path):
            fd = _open_regular(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            os.close(fd)
            raise StoreLockedError("another writer holds this store's lock; open it with mode='r' to read",
                                   self.path) from err
        if self.content and os.fstat(fd).st_size == 0:
            try:
                with _os_errors(self.path):     # a full disk: StorageFullError naming the lock file
                    os.pwrite(fd, self.content, 0)
            except SegstoreError:
                os.close(fd)                    # and the lock not held
                raise
        self._fd = fd


class DirectoryLock(_Flock):
    """A writer lock held on a directory itself: an exclusive ``flock`` on the directory's descriptor.

    For formats whose broker leaves no lock file of ours in its directories (Kafka's
    partition directories): nothing is created, so nothing is left behind.  A second
    holder (another process, or another object in this one) gets
    :class:`StoreLockedError` at once.  Readers never take it.  ``shared``: a lock that other shared
    holders share and an exclusive one excludes (``LOCK_SH``).
    """

    def __init__(self, path: str | os.PathLike[str], *, shared: bool = False) -> None:
        self.path = os.fspath(path)
        self._fd = -1
        self.shared = shared

    def acquire(self) -> None:
        if is_url(self.path):
            raise _read_only(self.path)
        with _os_errors(self.path):
            fd = _with_descriptors(os.open, self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError as err:
            os.close(fd)
            raise StoreLockedError("another writer holds this directory; open it with mode='r' to read",
                                   self.path) from err
        self._fd = fd


class BrokerLock:
    """A POSIX record lock (``fcntl(F_SETLK)``) on a lock file a broker made, if the file exists.

    Java's ``FileChannel.tryLock`` takes this kind of lock on Linux, so holding it
    keeps a running broker and a segstore writer out of each other's directory; a
    ``flock`` would not see the broker's lock.  The file is never created (a broker
    that is not running leaves none, or one that nobody holds; one this user may not
    open for writing is left alone).  Record locks
    belong to the process: a second holder in the same process is not refused
    (:class:`DirectoryLock` covers that).
    """

    def __init__(self, path: str | os.PathLike[str], holder: str = "a broker") -> None:
        self.path = os.fspath(path)
        self.holder = holder
        self._fd = -1

    def acquire(self) -> None:
        """Lock the file if it exists; nothing to do when it does not."""
        try:
            fd = _open_regular(self.path, os.O_RDWR)
        except (FileNotFoundError, PermissionError):
            # None, or one this user may not lock (another user's broker): nothing we can hold.
            return
        except OSError as err:
            raise _translate(err, self.path) from err
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EACCES, errno.EAGAIN):
                raise StoreLockedError(f"{self.holder} holds this lock; stop it first, or open with mode='r' "
                                       "to read", self.path) from err
            raise _translate(err, self.path) from err
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


# -- remote stores: URLs through fsspec (read-only) -------------------------------
#
# A path with a scheme (``s3://bucket/store``, ``s3a://``, ``hdfs://host/dir``,
# ``file:///dir``) names a file on a filesystem fsspec reaches; everything above keeps
# taking plain paths.  Plugins join paths with ``os.path.join``, which joins a URL with
# ``/`` as well, so they need no change.  A remote file cannot be mapped: its reads fetch
# byte ranges on demand, in aligned blocks kept in one bounded process-wide LRU cache; a
# whole-file view fetches the file once.  Remote stores are read-only: every write
# raises :class:`ReadOnlyError`.  Thread-safety: the block cache and the counters are
# locked; a remote file is as thread-safe as a local one for reads.

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

#: Bytes of one fetched block (aligned): a one-message read costs one or two blocks.
REMOTE_BLOCK_SIZE = 4 * 1024 * 1024
#: Bytes of blocks kept at most over all remote files (least recently used dropped first).
REMOTE_CACHE_BYTES = 256 * 1024 * 1024
#: JSON object of fsspec storage options used for every URL without its own (CLI, executors).
STORAGE_OPTIONS_ENV = "SEGSTORE_STORAGE_OPTIONS"

_remote_lock = threading.Lock()
_storage_options: dict[str, dict[str, Any]] = {}
_fetched = {"requests": 0, "bytes": 0}


def java_file_name(path: str) -> str:
    """``new java.io.File(path).toString()`` on Unix, as Java tools print a file named on their command
    line (``kafka-dump-log``'s ``Dumping FILE``): repeated slashes made one and a trailing one dropped
    (``UnixFileSystem.normalize``); ``.`` and ``..`` kept.  A URL as given.  ``O(len(path))``."""
    if is_url(path):
        return path
    name = re.sub(r"/{2,}", "/", path)
    return name.rstrip("/") if len(name) > 1 else name


def is_url(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a URL (``scheme://...``) rather than a local path."""
    return isinstance(path, str) and _URL.match(path) is not None


def _root(url: str) -> str:
    """``scheme://authority`` of a URL: the unit storage options are registered for."""
    scheme, rest = url.split("://", 1)
    return f"{scheme.lower()}://{rest.split('/', 1)[0]}"


def set_storage_options(url: str, options: Mapping[str, Any] | None) -> None:
    """Use fsspec ``options`` (credentials, ``client_kwargs``...) for every path under ``url``'s
    ``scheme://authority`` (the bucket, the namenode) in this process; None forgets them."""
    with _remote_lock:
        if options is None:
            _storage_options.pop(_root(url), None)
        else:
            _storage_options[_root(url)] = dict(options)


def remote_stats() -> dict[str, int]:
    """Range requests made and bytes fetched from remote files by this process so far."""
    with _remote_lock:
        return dict(_fetched)


def _default_options() -> dict[str, Any]:
    text = os.environ.get(STORAGE_OPTIONS_ENV)
    if not text:
        return {}
    return jsontext.loads_object(text, f"${STORAGE_OPTIONS_ENV} must be a JSON object of fsspec "
                                       "storage options")


def _filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the path it gives the file.

    :raises MissingDependencyError: fsspec, or the filesystem's package (s3fs, pyarrow...), is missing.
    :raises ConfigError: fsspec knows no such scheme.
    """
    try:
        import fsspec
    except ImportError as err:
        raise MissingDependencyError("reading a URL needs fsspec: install it with "
                                     "`pip install segstore[remote]`", url) from err
    with _remote_lock:
        options = _storage_options.get(_root(url))
    if options is None:
        options = _default_options()
    match = _URL.match(url)
    if match is None:
        raise ConfigError(f"expected a URL (SCHEME://...), found {url!r}", url)
    protocol = match.group(1).lower()
    try:
        fs = fsspec.filesystem(protocol, **options)
    except ImportError as err:
        # fsspec's message names the package ("Install s3fs to access S3").
        raise MissingDependencyError(f"{err}; or `pip install segstore[remote]`", url) from err
    except ValueError as err:
        raise ConfigError(f"expected a URL of a filesystem fsspec knows, found scheme {protocol!r} ({err})",
                          url) from err
    except TypeError as err:
        raise ConfigError(f"storage options {sorted(options)} do not fit {protocol}:// ({err})", url) from err
    except OSError as err:  # hdfs:// connects at once: no libjvm/libhdfs, a namenode down...
        raise StorageIOError(f"expected a reachable {protocol}:// filesystem, found {type(err).__name__}: "
                             f"{err}", url) from err
    return fs, fs._strip_protocol(url)


@contextlib.contextmanager
def _remote_errors(url: str, pos: int | None = None) -> Iterator[None]:
    """Every failure of a remote call as a segstore error naming the URL."""
    try:
        yield
    except SegstoreError:
        raise
    except OSError as err:
        raise _translate(err, url, pos) from err
    except ImportError as err:
        raise MissingDependencyError(str(err), url, pos) from err
    except Exception as err:  # botocore / pyarrow errors share no base class
        raise StorageIOError(f"{type(err).__name__}: {err}", url, pos) from err


def _read_only(url: str) -> ReadOnlyError:
    return ReadOnlyError("expected a local path to write, found a URL (remote stores are read-only: "
                         "open them with mode='r')", url)


class _BlockCache:
    """Fetched blocks of remote files, least recently used dropped beyond ``REMOTE_CACHE_BYTES``."""

    def __init__(self) -> None:
        self._blocks: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple[str, int, int]) -> bytes | None:
        with _remote_lock:
            block = self._blocks.get(key)
            if block is not None:
                self._blocks.move_to_end(key)
            return block

    def put(self, key: tuple[str, int, int], block: bytes) -> None:
        with _remote_lock:
            if key in self._blocks:
                return
            self._blocks[key] = block
            self._bytes += len(block)
            while self._bytes > REMOTE_CACHE_BYTES and len(self._blocks) > 1:
                _, dropped = self._blocks.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        with _remote_lock:
            self._blocks.clear()
            self._bytes = 0


_blocks = _BlockCache()


class _RemoteBytes:
    """The bytes of one remote file, fetched by range on demand (see the section comment)."""

    __slots__ = ("_fs", "_key", "_whole", "size", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self._fs, self._key = _filesystem(url)
        with _remote_errors(url):
            info = self._fs.info(self._key)
        if info.get("type") == "directory":
            raise StorageIOError("expected a file, found a directory", url)
        self.size = int(info["size"])
        self._whole: bytes | None = None

    def _fetch(self, start: int, end: int) -> bytes:
        with _remote_errors(self.url, start):
            data = self._fs.cat_file(self._key, start=start, end=end)
        with _remote_lock:
            _fetched["requests"] += 1
            _fetched["bytes"] += len(data)
        if len(data) != end - start:
            raise TruncatedDataError(f"expected {end - start} bytes at {start}, found {len(data)} "
                                     "(the file changed while read)", self.url, start)
        return data

    def view(self, start: int, end: int) -> memoryview:
        """Bytes ``[start, end)`` (clamped to the file): one block's slice without a copy, else joined."""
        start, end = max(0, start), min(end, self.size)
        if end <= start:
            return memoryview(b"")
        if self._whole is None and start == 0 and end == self.size and self.size > REMOTE_BLOCK_SIZE:
            self._whole = self._fetch(0, self.size)   # one request; smaller files are one cached block
        if self._whole is not None:
            return memoryview(self._whole)[start:end]
        first, last = start // REMOTE_BLOCK_SIZE, (end - 1) // REMOTE_BLOCK_SIZE
        parts = [self._block(i) for i in range(first, last + 1)]
        base = first * REMOTE_BLOCK_SIZE
        if len(parts) == 1:
            return memoryview(parts[0])[start - base:end - base]
        return memoryview(b"".join(parts))[start - base:end - base]

    def window(self, start: int, end: int) -> memoryview:
        """A view of the whole file in which only bytes ``[start, end)`` are fetched (by blocks).

        The other bytes read as zeros: they are in a zeroed buffer of the file's size whose
        pages are never touched (the operating system lends them lazily), so the cost is the
        range's.  Positions and length are the file's, as in :meth:`view`.
        """
        import numpy as np

        start, end = max(0, start), min(end, self.size)
        if self._whole is not None:
            return memoryview(self._whole)
        buf = np.zeros(self.size, dtype=np.uint8)
        if end > start:
            buf[start:end] = np.frombuffer(self.view(start, end), dtype=np.uint8)
        return memoryview(buf.data)

    def _block(self, i: int) -> bytes:
        key = (self.url, self.size, i)
        block = _blocks.get(key)
        if block is None:
            start = i * REMOTE_BLOCK_SIZE
            block = self._fetch(start, min(start + REMOTE_BLOCK_SIZE, self.size))
            _blocks.put(key, block)
        return block

    def release(self) -> None:
        self._whole = None


class RemoteMappedFile(MappedFile):
    """A :class:`MappedFile` over a URL: read-only, ranges fetched on demand (``MappedFile(url)``
    returns one).  ``view``/``array``/``read`` fetch only the blocks they touch."""

    __slots__ = ("_remote",)

    def __new__(cls, *args: Any, **kwargs: Any) -> RemoteMappedFile:
        return object.__new__(cls)

    def __init__(self, path: str, size: int | None = None, *, create: bool = False,
                 writable: bool = False, in_memory: bool = False, reserve: bool = False,
                 parkable: bool = False, zero_tail: bool = False) -> None:
        self.path = path
        if create or writable:
            raise _read_only(path)
        self.writable = False
        self._in_memory = False
        self._zero_tail = None      # a short remote file is refused (not read with zeros past it)
        self._mm = None
        self._kept = None
        self._fd = 0        # not a descriptor: only "open" (>= 0) or "closed" (-1)
        self._lock = None   # never parked
        self._reserving = False
        self.reserved = 0
        self._remote = _RemoteBytes(path)
        actual = self._remote.size
        if size is not None and actual < size:
            raise TruncatedDataError(f"expected a file of {size} bytes, found {actual}", path, actual)
        self.size = actual if size is None else size

    def view(self, start: int = 0, end: int | None = None) -> memoryview:
        if self._fd < 0:
            raise StoreClosedError("file is closed", self.path)
        return self._remote.view(start, self.size if end is None else end)

    def array(self, dtype: Any, start: int = 0, count: int = -1) -> np.ndarray:
        import numpy as np

        dtype = np.dtype(dtype)
        end = self.size if count < 0 else start + count * dtype.itemsize
        return np.frombuffer(self.view(start, end), dtype=dtype, count=count)

    def read(self, start: int, n: int) -> bytes:
        return bytes(self.view(start, start + n))

    def pread(self, start: int, n: int) -> bytes:
        """:meth:`read` (a remote file has no holes to keep away from)."""
        return self.read(start, max(0, min(n, self.size - start)))

    def data_ranges(self, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
        """The whole range: a remote file system is not asked where its holes are."""
        end = self.size if end is None else min(end, self.size)
        return [(start, end)] if start < end else []

    def write(self, pos: int, data: Any) -> None:
        raise _read_only(self.path)

    def flush(self, start: int = 0, end: int | None = None) -> None:
        return

    def resize(self, size: int) -> None:
        raise _read_only(self.path)

    def close(self) -> None:
        self._remote.release()
        self._fd = -1


class RemoteAppendFile(AppendFile):
    """An :class:`AppendFile` over a URL (``AppendFile(url)`` returns one): read-only."""

    __slots__ = ("_remote",)

    def __new__(cls, *args: Any, **kwargs: Any) -> RemoteAppendFile:
        return object.__new__(cls)

    def __init__(self, path: str, *, create: bool = False, writable: bool = False) -> None:
        self.path = path
        if create or writable:
            raise _read_only(path)
        self.writable = False
        self._mm = None
        self._mm_size = 0
        self._kept = None
        self._fd = 0
        self._remote = _RemoteBytes(path)
        self.size = self._remote.size

    def append(self, data: Any) -> int:
        raise _read_only(self.path)

    def append_many(self, datas: Sequence[Any]) -> int:
        raise _read_only(self.path)

    def read(self, pos: int, n: int) -> bytes:
        self._check_open()
        return bytes(self._remote.view(pos, pos + n))

    remote = True

    def window(self, start: int, end: int) -> memoryview:
        self._check_open()
        return self._remote.window(start, end)

    def view(self) -> memoryview:
        self._check_open()
        return self._remote.view(0, self.size)

    def truncate(self, size: int) -> None:
        raise _read_only(self.path)

    def flush(self) -> None:
        return

    def close(self) -> None:
        self._remote.release()
        self._fd = -1


def _remote_list_dir(url: str) -> list[str]:
    fs, key = _filesystem(url)
    try:
        with _remote_errors(url):
            entries = fs.ls(key, detail=False)
    except NotFoundError:
        return []
    prefix = key.rstrip("/") + "/"
    return sorted({e.rstrip("/")[len(prefix):] if e.startswith(prefix) else e.rstrip("/").rsplit("/", 1)[-1]
                   for e in entries} - {""})


def _remote_info(url: str) -> dict[str, Any] | None:
    fs, key = _filesystem(url)
    try:
        with _remote_errors(url):
            return fs.info(key)
    except NotFoundError:
        return None


def _remote_read_bytes(url: str) -> bytes:
    return bytes(_RemoteBytes(url).view(0, 1 << 62))


def _remote_file_size(url: str) -> int:
    info = _remote_info(url)
    if info is None:
        raise NotFoundError("no such file or directory", url)
    return int(info["size"])


def _url_aware(local: Any, remote: Any) -> Any:
    """``local`` for plain paths, ``remote`` for URLs (same signature)."""
    @functools.wraps(local)
    def dispatch(path: Any, *args: Any, **kwargs: Any) -> Any:
        if is_url(path):
            return remote(path, *args, **kwargs)
        return local(path, *args, **kwargs)
    return dispatch


def _refuse(url: Any, *args: Any, **kwargs: Any) -> Any:
    raise _read_only(url)


# The whole-file operations above, made to take URLs as well.  Reads go to fsspec;
# every write is refused, so no code path can modify a remote store.
read_bytes = _url_aware(read_bytes, _remote_read_bytes)
exists = _url_aware(exists, lambda url: _remote_info(url) is not None)
is_dir = _url_aware(is_dir, lambda url: (_remote_info(url) or {}).get("type") == "directory")
is_file = _url_aware(is_file, lambda url: (_remote_info(url) or {}).get("type") == "file")
file_size = _url_aware(file_size, _remote_file_size)
not_regular = _url_aware(not_regular, lambda url: None if (_remote_info(url) or {}).get("type") == "file"
                         else "no regular file")
list_dir = _url_aware(list_dir, _remote_list_dir)
write_atomic = _url_aware(write_atomic, _refuse)
write_bytes = _url_aware(write_bytes, _refuse)
save_aside = _url_aware(save_aside, _refuse)
make_dirs = _url_aware(make_dirs, _refuse)
remove = _url_aware(remove, _refuse)
remove_tree = _url_aware(remove_tree, _refuse)
remove_dir_if_empty = _url_aware(remove_dir_if_empty, _refuse)
rename = _url_aware(rename, _refuse)
copy_tree = _url_aware(copy_tree, _refuse)
touch = _url_aware(touch, _refuse)
fsync_dir = _url_aware(fsync_dir, _refuse)
