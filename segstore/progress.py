"""Progress of long work: reported by the code doing it, shown only where a caller asked.

Library code (plugins, the conversion pipeline, index layouts) never prints.  Around a long
step it opens a :func:`task` with a total and calls the ``advance(n)`` it yields (or the
module's :func:`advance`, for code deeper down) as work gets done; with no :class:`Sink`
installed that costs one context-variable lookup a call.  The CLI installs a sink (tqdm bars
with total and ETA, on a terminal only) with :func:`reporting`; that sink is the callback
through which plugins report.

Calls are meant for coarse steps (a segment, a file, a chunk of messages), never one per
message.  The sink and the open task are context variables: each thread (and asyncio task)
sees those of the context it runs in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol


class Bar(Protocol):
    """One task's display: ``update(n)`` adds done work, ``close()`` ends it."""

    def update(self, n: int) -> object: ...

    def close(self) -> None: ...


class Sink(Protocol):
    """Where progress goes: ``open(what, total, unit)`` gives the :class:`Bar` of one task."""

    def open(self, what: str, total: int | None, unit: str) -> Bar: ...


class _Silent:
    """A sink that shows nothing (installed to keep a library default from drawing a bar)."""

    def open(self, what: str, total: int | None, unit: str) -> Bar:
        raise AssertionError("the silent sink never opens bars")


#: Install this to show nothing (``--json``, piped output).
SILENT: Sink = _Silent()

_sink: ContextVar[Sink | None] = ContextVar("segstore_progress_sink", default=None)


def _ignore(n: int) -> None:
    """``advance`` when nobody watches."""


_current: ContextVar[Callable[[int], Any]] = ContextVar("segstore_progress_task", default=_ignore)


def advance(n: int) -> None:
    """Add ``n`` done units to the innermost open :func:`task` (nothing when none is open or watched);
    for code deep inside a task that was not handed its ``advance``."""
    _current.get()(n)


@contextlib.contextmanager
def bar(what: str, total: int | None, unit: str = "B") -> Iterator[Bar | None]:
    """A long step of ``total`` units (None: unknown) as the installed sink's :class:`Bar`, or None
    when nothing is shown.  Inside it :func:`advance` updates this bar."""
    sink = _sink.get()
    if sink is None or sink is SILENT:
        yield None
        return
    shown = sink.open(what, total, unit)
    token = _current.set(shown.update)
    try:
        yield shown
    finally:
        _current.reset(token)
        shown.close()


@contextlib.contextmanager
def task(what: str, total: int | None, unit: str = "B") -> Iterator[Callable[[int], Any]]:
    """A long step of ``total`` units (None: unknown); yields ``advance(n)``.  Nothing is shown
    unless a sink is installed; nested tasks each get their own bar."""
    with bar(what, total, unit) as shown:
        yield _ignore if shown is None else shown.update


@contextlib.contextmanager
def reporting(sink: Sink | None) -> Iterator[None]:
    """Send the progress of the tasks run inside the block to ``sink`` (:data:`SILENT` or None: show
    nothing; None also lets library defaults decide)."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def installed() -> Sink | None:
    """The sink of the current context (:data:`SILENT` included), None when none was installed."""
    return _sink.get()


class TqdmSink:
    """Bars on ``stream`` (stderr by default) through tqdm: rate, and with a total the percentage and ETA."""

    def __init__(self, stream: Any | None = None) -> None:
        self.stream = stream

    def open(self, what: str, total: int | None, unit: str) -> Bar:
        import sys

        from tqdm import tqdm

        return tqdm(
            desc=what,
            total=total,
            unit=unit,
            unit_scale=True,
            unit_divisor=1024 if unit == "B" else 1000,
            file=self.stream or sys.stderr,
            mininterval=0.5,
            dynamic_ncols=True,
        )
