"""Two steps of a columnar read run at once: the next region decoded while this one is built.

A columnar read is a chain: walk a region of the log into rows (C, the GIL released), then
build the batch the caller gets from them (C again, with some Python between).  The two
touch different memory (each region gets its own rows) and read the same mapped bytes, so
:func:`overlapped` runs the walk of region ``k + 1`` in a worker thread while this thread
builds batch ``k``: on a machine with a free core a scan costs about its longer step instead
of their sum.

No worker runs while the generator is suspended: each step waits for the worker before it
yields, so the caller sees the single-threaded order of events (a store it closes or
truncates between two batches is never being read by a worker), and an error the walk
raises comes after the batches before it, as it would single-threaded.  The steps run in
a process-wide pool (one thread per core at most); a step never waits on another step,
so scans from many threads share the pool without deadlock.

:func:`shared` is the same pool for a writer: a list of independent steps (record batches queued
for encoding) that this thread and a pool thread take in turn.

:func:`in_rounds` splits a read over several pool threads: independent tasks (byte ranges of a log)
run a round at a time, their results handed back in task order, each with the error it raised.

:func:`ahead` is the same split for a caller that consumes the results inside one call of its own
(a ``verify``): the tasks run ahead of it, also while it handles a result, up to a window.

:func:`beside` runs one independent step on a thread of its own while the caller goes on (the
index checks of a ``verify`` beside its commitlog walk).

:func:`pipelined` is the looser chain of a conversion: its source runs in a thread of its own, up
to a bounded number of items ahead, also while the consumer holds an item (a conversion's reading
costs unevenly from item to item, its writing evenly: a queued item evens them out).

:func:`overlapped`, :func:`shared` and :func:`pipelined` take the thread count their caller was asked
for, as it was given (``threads``; None: the default): one thread asked for (``threads=1``, or
``$SEGSTORE_THREADS=1`` or :func:`asked_for` ``(1)`` for a call given none) keeps them on the calling
thread (:func:`overlaps`), so that ``threads=1`` is one thread busy.  The default keeps them on a
second core, also on 2 cores where it reads one range (:func:`default_threads`).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
import os
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any, Generic, TypeVar, cast

from .errors import ConfigError, OutOfMemoryError, cut

T = TypeVar("T")
U = TypeVar("U")


def cores() -> int:
    """The cores this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # no affinity on this platform (macOS, Windows)
        return os.cpu_count() or 1


#: Whether to overlap: there is a second core, and ``SEGSTORE_OVERLAP=0`` does not turn it off
#: (a process that wants one core, or a benchmark of one thread's work).
ENABLED = cores() > 1 and os.environ.get("SEGSTORE_OVERLAP", "1") != "0"

_pool: _Pool | None = None
_pool_lock = threading.Lock()


def single_threaded() -> None:
    """Run every step on the calling thread from now on, in this process (:data:`ENABLED` off): for a
    process whose cores are taken by others already (a Spark executor's Python worker: Spark runs a
    task per core, and a second thread per worker competes with them and costs a hand-off per step)."""
    global ENABLED
    ENABLED = False


_END = object()


class _Thread(threading.Thread):
    """A thread whose ``start`` returns when the thread dies before it began.

    CPython's ``Thread.start`` waits for the new thread to set ``_started``; a thread whose bootstrap
    fails before that (a ``MemoryError`` getting its first objects in a capped address space: its stack
    was mapped, a few KiB more were not) never sets it, and ``start`` waits forever (CPython
    gh-140746, open, every version from 3.10).  This one sets it on the way out and says so."""

    failed = False

    def _bootstrap(self) -> None:
        try:
            super()._bootstrap()        # type: ignore[misc]
        except BaseException:
            if self._started.is_set():  # type: ignore[attr-defined]
                raise
        finally:
            if not self._started.is_set():      # type: ignore[attr-defined]
                self.failed = True
                self._started.set()     # type: ignore[attr-defined]


def start_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A daemon thread running ``target``, started: for every thread segstore starts.  ``target`` runs
    in a copy of this thread's context (so :func:`asked_for` holds on the thread too).

    :raises OutOfMemoryError: the thread could not start (no memory for its stack, or for its first
        objects), instead of ``RuntimeError`` or of waiting forever (see :class:`_Thread`).
    """
    thread = _Thread(target=contextvars.copy_context().run, args=(target,), name=name, daemon=True)
    try:
        thread.start()
    except RuntimeError as err:     # pthread_create failed: no room for the stack
        raise OutOfMemoryError(f"expected memory for a new thread ({name}), found none: {err}") from None
    if thread.failed:
        with threading._active_limbo_lock:     # type: ignore[attr-defined]
            threading._limbo.pop(thread, None)  # type: ignore[attr-defined]
        raise OutOfMemoryError(f"expected memory for a new thread ({name}), found none: it died "
                               "starting (a capped address space: ulimit -v)")
    return thread


class _Step(Generic[U]):
    """One step submitted to the pool: what ``concurrent.futures.Future`` gives the callers here
    (:meth:`result`, :meth:`exception`, :meth:`cancel`), without importing that package and the
    ``logging`` it imports (8 ms of CPU, which a fresh process's first read on two threads paid
    inside its work).  Either a pool thread takes the step to run it or :meth:`cancel` does, never
    both: each pops the one claim (``list.pop`` is atomic).  Waiting is on a lock held until the
    step is finished or cancelled.  Thread-safe."""

    __slots__ = ("_cancelled", "_claim", "_done", "_error", "_result")

    def __init__(self) -> None:
        self._claim = [True]
        self._cancelled = False
        self._done = threading.Lock()
        self._done.acquire()            # released once: when the step is finished or cancelled
        self._result: U | None = None
        self._error: BaseException | None = None

    def _take(self) -> bool:
        try:
            return self._claim.pop()
        except IndexError:
            return False

    def cancel(self) -> bool:
        """Cancel the step if no thread took it yet (then it never runs); whether it is cancelled."""
        if self._take():
            self._cancelled = True
            self._done.release()
        return self._cancelled

    def _run(self, fn: Callable[..., U], args: tuple[Any, ...]) -> None:
        """Run the step on this pool thread, unless it was cancelled."""
        if not self._take():
            return
        try:
            self._result = fn(*args)
        except BaseException as err:
            self._error = err
        self._done.release()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the step (at most ``timeout`` seconds: then ``TimeoutError``); the exception it
        raised, or None (a cancelled step raised none)."""
        if not self._done.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError(f"expected the step done within {timeout} s, found it running")
        self._done.release()            # every waiter passes
        return self._error

    def result(self, timeout: float | None = None) -> U:
        """Wait for the step (as :meth:`exception`); its result, or raise its exception."""
        error = self.exception(timeout)
        if error is not None:
            raise error
        return cast(U, self._result)


class _Pool:
    """The steps' pool: up to ``size`` daemon threads (:func:`start_thread`), one more started when a
    step is submitted and none is idle; a step runs in a copy of its submitter's context.  A thread is
    started before its step is queued, so a failed start queues nothing (no step left behind to run
    later, after its caller has gone on); it raises only where the pool has no thread at all, else
    the step waits for one of those."""

    def __init__(self, size: int) -> None:
        import queue

        self._max_workers = size
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, fn: Callable[..., U], *args: Any) -> _Step[U]:
        with self._lock:    # as ThreadPoolExecutor: a thread counts as idle once it finished a step
            grow = self._idle == 0 and self._threads < self._max_workers
            if self._idle:
                self._idle -= 1
            elif grow:
                self._threads += 1
        if grow:
            try:
                start_thread(self._work, f"segstore-overlap_{self._threads - 1}")
            except OutOfMemoryError:
                with self._lock:
                    self._threads -= 1
                    if self._threads == 0:
                        raise
        step: _Step[U] = _Step()
        # in the submitter's context (:func:`asked_for`), as on its own thread
        self._queue.put((step, contextvars.copy_context().run, (fn, *args)))
        return step

    def _work(self) -> None:
        while True:
            step, fn, args = self._queue.get()
            step._run(fn, args)
            # An idle thread holds nothing of its last step while it waits: its step's result
            # (a walk's region, views of a file's map) and arguments (the walk) would stay alive
            # until this thread's next step, out of the collector's sight, and a map with a view
            # alive cannot be closed (a kept map of a deleted file keeps its disk space).
            del step, fn, args
            with self._lock:
                self._idle += 1


def _executor() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool(min(32, os.cpu_count() or 2))
        return _pool


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads are not there (a pool that counted one idle
    would never run a step), and its lock may have been held by one of them."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def overlapped(source: Iterator[T], build: Callable[[T], U], threads: int | None = None) -> Iterator[U]:
    """``build(item)`` for each item of ``source``, in order (``source`` closed with the generator);
    ``next(source)`` for the following item runs in a worker thread while ``build`` runs on this
    one (when :func:`overlaps` ``(threads)``: ``threads`` is the count the caller was given, None
    where it was given none; one thread asked for runs both on this one).

    ``source`` must not share mutable state with ``build``'s item (a walk that reuses one rows
    buffer for every region cannot be overlapped).  Thread-safety: as ``source`` and ``build``;
    the worker has finished whenever this generator yields, raises or is closed.
    """
    ahead: _Step[Any] | None = None
    try:
        if not overlaps(threads):
            for item in source:
                yield build(item)
            return
        pool = _executor()
        ahead = pool.submit(next, source, _END)
        while True:
            item = ahead.result()       # the walk's error, if any, after every batch before it
            if item is _END:
                return
            ahead = pool.submit(next, source, _END)
            try:
                batch = build(item)
            finally:
                ahead.exception()       # wait, without raising: the worker is done before we go on
            yield batch
    finally:
        if ahead is not None:
            ahead.exception()
        close = getattr(source, "close", None)
        if close is not None:
            close()


def shared(fn: Callable[[T], U], items: list[T], threads: int | None = None) -> list[U]:
    """``[fn(item) for item in items]``, this thread and a pool thread taking the next item in turn
    (when :func:`overlaps` ``(threads)``, ``threads`` as :func:`overlapped`'s, and there are two items
    or more): for independent steps that are mostly C releasing the GIL (encoding the record batches
    a write has queued).  Whichever thread is freer takes more (the pool thread may share its core
    with the other step of an overlap).

    ``fn`` must be safe to call from two threads at once on different items.  A thread stops at
    the first exception it gets; the one of the earliest item is raised here once both threads are
    done (items after it may have run).  The pool thread has finished whenever this returns or
    raises, and it never waits for one to be free: called from a pool thread too (every one busy),
    this thread runs all the items.  ``O(len(items))`` besides ``fn``.
    """
    if len(items) < 2 or not overlaps(threads):
        return [fn(item) for item in items]
    results: list[Any] = [None] * len(items)
    errors: dict[int, BaseException] = {}
    turns = itertools.count()           # next() of a count is atomic: each item is taken once

    def take() -> None:
        for i in turns:
            if i >= len(items) or errors:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as err:
                errors[i] = err
                return

    helper = _executor().submit(take)
    try:
        take()
    finally:
        # a helper not started yet (every pool thread busy, maybe with steps calling this) is
        # cancelled, not waited for: the items are done; a started one is waited for
        if not helper.cancel():
            helper.exception()
    if errors:
        raise errors[min(errors)]
    return results


def _taken_in_turn(fn: Callable[[T], U], items: list[T], threads: int
                   ) -> list[tuple[U | None, BaseException | None]]:
    """``(fn(item), None)`` or ``(None, error)`` for each item: this thread and ``threads - 1`` pool
    threads take the next item in turn; every item runs, whatever the others raise.  Helpers
    not started once the items are done are cancelled, not waited for (so this never waits for a
    pool thread to be free: called from a pool thread it runs the items itself)."""
    outcomes: list[Any] = [None] * len(items)
    turns = itertools.count()           # next() of a count is atomic: each item is taken once

    def take() -> None:
        for i in turns:
            if i >= len(items):
                return
            try:
                outcomes[i] = (fn(items[i]), None)
            except BaseException as err:
                outcomes[i] = (None, err)

    helpers = [] if not ENABLED else [_executor().submit(take)
                                      for _ in range(min(threads, len(items)) - 1)]
    try:
        take()
    finally:
        for helper in helpers:
            if not helper.cancel():
                helper.exception()
    return outcomes


def in_rounds(tasks: Iterator[T], run: Callable[[T], U], threads: int, per_round: int
              ) -> Generator[tuple[T, U | None, BaseException | None], None, None]:
    """``(task, run(task), None)`` or ``(task, None, error)`` for each task of ``tasks``, in task order;
    the runs of ``per_round`` tasks at a time spread over this thread and ``threads - 1`` pool
    threads (:func:`_taken_in_turn`).  The caller decides what an error means (a task started at a
    boundary its predecessor did not confirm is run again; an error is raised at its place).

    As :func:`overlapped`, no task runs while this generator is suspended: a round is done before
    its first result is yielded.  Memory: the results of one round.  An error ``tasks`` raises
    comes after the results of the tasks before it.  ``run`` must be safe to call from several
    threads at once on different tasks; ``tasks`` runs on the caller's thread.
    """
    per_round = max(1, per_round)
    while True:
        taken: list[T] = []
        failure: BaseException | None = None
        try:
            while len(taken) < per_round:
                taken.append(next(tasks))
        except StopIteration:
            pass
        except BaseException as err:     # raised after the results of the tasks before it
            failure = err
        outcomes = _taken_in_turn(run, taken, threads) if threads > 1 else [_outcome(run, t) for t in taken]
        # each result let go of as it is handed out: held here, a round's results would stay alive
        # while the next round runs (twice the memory, each new page a fault)
        outcomes.reverse()
        for task in taken:
            yield (task, *outcomes.pop())
        if failure is not None:
            raise failure
        if len(taken) < per_round:
            return


def ahead(tasks: Iterator[T], run: Callable[[T], U], threads: int, window: int
          ) -> Generator[tuple[T, U | None, BaseException | None], None, None]:
    """``(task, run(task), None)`` or ``(task, None, error)`` for each task of ``tasks``, in task order,
    as :func:`in_rounds` gives them; but ``threads`` threads of their own take the next task as soon
    as they are free, up to ``window`` tasks past the one the caller has (no round to wait for), also
    while this generator is suspended.

    For a caller that consumes the generator inside one call of its own and closes it before it
    returns (or lets it end): closing waits for the running tasks and stops the threads, so nothing
    runs once the call is done.  ``tasks`` is advanced by the threads, one at a time (under a lock);
    an error it raises comes after the results of the tasks before it.  ``run`` must be safe to call
    from several threads at once on different tasks.  Memory: ``window`` results.
    """
    if not ENABLED or threads < 2:
        for task in tasks:
            yield (task, *_outcome(run, task))
        return
    window = max(window, threads)
    lock = threading.Condition()
    done: dict[int, tuple[T, Any, BaseException | None]] = {}
    taken = 0           # tasks taken from ``tasks`` (the next one's number)
    handed = 0          # results handed to the caller
    end: int | None = None      # the number of tasks, once ``tasks`` ended
    failure: BaseException | None = None
    stop = False

    def work() -> None:
        nonlocal taken, end, failure
        while True:
            with lock:
                while not stop and end is None and taken - handed >= window:
                    lock.wait()
                if stop or end is not None:
                    return
                number = taken
                try:
                    task = next(tasks)
                except StopIteration:
                    end = number
                    lock.notify_all()
                    return
                except BaseException as err:    # raised after the results of the tasks before it
                    end, failure = number, err
                    lock.notify_all()
                    return
                taken += 1
            try:
                outcome: tuple[T, Any, BaseException | None] = (task, run(task), None)
            except BaseException as err:
                outcome = (task, None, err)
            with lock:
                done[number] = outcome
                lock.notify_all()

    workers: list[threading.Thread] = []
    try:
        for _ in range(threads):
            try:
                workers.append(start_thread(work, "segstore-ahead"))
            except OutOfMemoryError:
                if not workers:     # no thread would ever take a task
                    raise
                break               # fewer threads take them
        while True:
            with lock:
                while handed not in done and (end is None or handed < end):
                    lock.wait()
                if handed not in done:
                    if failure is not None:
                        raise failure
                    return
                outcome = done.pop(handed)
                handed += 1
                lock.notify_all()
            yield outcome
    finally:
        with lock:
            stop = True
            lock.notify_all()
        for worker in workers:
            worker.join()


def beside(fn: Callable[[], U]) -> Callable[[], U]:
    """Start ``fn()`` on a thread of its own and return a function that waits for it: its result, or
    the exception it raised.  For a step that shares no mutable state with what the caller does
    meanwhile and is mostly C releasing the GIL (numpy over an index file); the caller must call the
    returned function (also on its own errors) before what ``fn`` reads can change.  Not a pool
    thread: it may run as long as it needs without holding one of the pool's."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((fn(), None))
        except BaseException as err:
            outcome.append((None, err))

    thread = start_thread(run, "segstore-beside")

    def wait() -> U:
        thread.join()
        result, error = outcome[0]
        if error is not None:
            raise error
        return cast(U, result)

    return wait


def _outcome(run: Callable[[T], U], task: T) -> tuple[U | None, BaseException | None]:
    try:
        return run(task), None
    except BaseException as err:
        return None, err


def default_threads(available: int) -> int:
    """The threads a read splits into by default on ``available`` cores: all of them from 3 cores on,
    one on 1 or 2.  On 2 cores that one range still runs on both (the default keeps the overlap: the
    walk of the next region beside the build of this one, :func:`overlapped`; a conversion's reading
    beside its writing, :func:`pipelined`), and splitting by ranges measured 0.66-1.98x of it
    (benchmarks/bench_parallel.py, 500k and 4M messages: RocketMQ ``verify`` gains 1.5-2x, most other
    paths 0.8-1.3x, several lose): a range split cost up to 1.8x the CPU (imports inside a first
    split, since gone; page faults of a second thread's buffers; smaller batches:
    benchmarks/NOTES.md, "Threads"), which only more cores pay back.  An explicit ``threads=1`` is
    not this default: it is one thread, the overlap off too (:func:`overlaps`)."""
    return available if available > 2 else 1


#: The most threads a read, verify or recovery takes (``threads=N``, ``--threads N``,
#: ``$SEGSTORE_THREADS``).  A read holds the results of N byte ranges a round and a Kafka verify
#: starts N threads of its own: ``--threads 99999999`` held every range of the store at once and
#: started threads for minutes.  As zstd's ``-T`` (256 workers at most); a default of more cores
#: than this takes this many.
MAX_THREADS = 256

#: The thread count :func:`asked_for` gives the calls in its block (None: none given).
_ASKED: contextvars.ContextVar[int | None] = contextvars.ContextVar("segstore_threads", default=None)


@contextlib.contextmanager
def asked_for(threads: int | None) -> Iterator[None]:
    """Within the block, ``threads`` is the count of every path that takes one and is given none, as
    ``$SEGSTORE_THREADS`` (which it wins over) but for the calls this thread makes in the block and
    the threads segstore starts for them (:func:`start_thread`, the pool's steps), not another
    thread's: for a call that runs paths which take no count of their own (``convert(threads=N)``:
    its reading and writing, the recovery at a destination's open, a verify).  None changes nothing.
    Thread-safe (a context variable).

    :raises ConfigError: ``threads`` below 1 or above :data:`MAX_THREADS`.
    """
    if threads is None:
        yield
        return
    token = _ASKED.set(thread_count(threads))
    try:
        yield
    finally:
        _ASKED.reset(token)


def _asked(threads: int | None) -> int | None:
    """The thread count asked for, unchecked: ``threads``; where None, :func:`asked_for`'s, else
    ``$SEGSTORE_THREADS`` (checked); None where none was (the default).  ``O(1)``.

    :raises ConfigError: ``$SEGSTORE_THREADS`` not a whole number from 1 to :data:`MAX_THREADS`.
    """
    if threads is not None:
        return threads
    scoped = _ASKED.get()
    if scoped is not None:
        return scoped
    given = os.environ.get("SEGSTORE_THREADS")
    if not given:
        return None
    try:
        count = int(given)
    except ValueError:
        raise ConfigError(f"expected SEGSTORE_THREADS to be a whole number, found {given!r}") from None
    if count < 1:     # named: the caller passed no threads, the environment did
        raise ConfigError(f"expected SEGSTORE_THREADS of at least 1, found {given!r}")
    if count > MAX_THREADS:
        raise ConfigError(f"expected SEGSTORE_THREADS of at most {MAX_THREADS}, found {given!r}")
    return count


def thread_count(threads: int | None) -> int:
    """``threads`` checked (1 to :data:`MAX_THREADS`); when None the default: :func:`asked_for`'s
    count, else ``$SEGSTORE_THREADS`` when set (as ``OMP_NUM_THREADS``: for what takes no argument, a
    store's recovery at open), else :func:`default_threads` of :func:`cores` (at most
    :data:`MAX_THREADS`).  ``O(1)``; thread-safe.

    :raises ConfigError: ``threads`` (or ``$SEGSTORE_THREADS``) below 1 or above :data:`MAX_THREADS`.
    """
    asked = _asked(threads)
    if asked is None:
        return min(default_threads(cores()), MAX_THREADS)
    if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
        raise ConfigError(f"expected threads of at least 1, found {cut(asked)}")
    if asked > MAX_THREADS:
        raise ConfigError(f"expected threads of at most {MAX_THREADS}, found {cut(asked)}")
    return asked


def overlaps(threads: int | None = None) -> bool:
    """Whether a call given ``threads`` (as it was given; None: none) may run a second thread beside
    its own (:func:`overlapped`, :func:`shared`, :func:`pipelined`): :data:`ENABLED`, and one thread
    was not asked for (``threads=1``; given none, :func:`asked_for` or ``$SEGSTORE_THREADS`` of 1).
    The default is not such a request, though it reads one range on 2 cores (:func:`thread_count`
    gives 1 there): pass the count as given, not as :func:`thread_count` resolved it.  ``O(1)``;
    thread-safe.

    :raises ConfigError: as :func:`_asked`.
    """
    if not ENABLED:
        return False
    asked = _asked(threads)
    return not (asked == 1 and not isinstance(asked, bool))


class _Raised:
    """An exception the source of :func:`pipelined` raised, queued after the items before it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def pipelined(source: Iterator[T], build: Callable[[T], U], ahead: int = 1,
              name: str = "segstore-pipeline", threads: int | None = None) -> Iterator[U]:
    """``build(item)`` for each item of ``source``, in order (``source`` closed with the generator),
    ``next(source)`` running in a thread of its own (when :func:`overlaps` ``(threads)``, ``threads``
    as :func:`overlapped`'s; else on this one, in turn with ``build``): it makes the next item
    while ``build`` runs and while the caller holds a result, and waits once ``ahead`` made items
    are queued.  Up to ``ahead + 2`` items are alive at once (one built, ``ahead`` queued, one made).

    Unlike :func:`overlapped`, the source goes on while this generator is suspended: for a source
    whose reading does not depend on what the caller does between items (a conversion, whose
    stores only it uses).  Its thread is not one of the pool's, since it waits for room in the
    queue (a pool step never waits for anything but other steps), and its own steps may use the
    pool (a scan's :func:`overlapped`).

    An exception the source raises is raised here after the items before it.  Closing the generator,
    or an exception of ``build``, stops the thread after the step it is in and waits for it; then
    ``source`` is closed on this thread.  Thread-safety: ``source`` runs on one thread, ``build``
    on the caller's; they must not share mutable state.
    """
    if not overlaps(threads):
        try:
            for item in source:
                yield build(item)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
        return
    made: collections.deque[Any] = collections.deque()
    ready = threading.Condition()
    stop = False

    def produce() -> None:
        while True:
            try:
                item: Any = next(source)
            except StopIteration:
                item = _END
            except BaseException as err:        # raised on the caller's thread, in its place
                item = _Raised(err)
            with ready:
                while len(made) >= ahead and not stop:
                    ready.wait()
                if stop:
                    return
                made.append(item)
                ready.notify_all()
            if item is _END or isinstance(item, _Raised):
                return

    thread = start_thread(produce, name)
    try:
        while True:
            with ready:
                while not made:
                    ready.wait()
                item = made.popleft()
                ready.notify_all()
            if item is _END:
                return
            if isinstance(item, _Raised):
                raise item.error
            yield build(item)
    finally:
        with ready:
            stop = True
            ready.notify_all()
        thread.join()
        close = getattr(source, "close", None)
        if close is not None:
            close()
