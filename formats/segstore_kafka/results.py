"""What a partition's append and a segment's recovery report back: :class:`Appended`, :class:`RecoverResult`.

Apart from :mod:`.partition` and :mod:`.segment`, which load this module where they make one: a frozen
dataclass's methods are compiled from generated source when its class is made (~3.5M instructions each
here), which opening a store and reading it never need.  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Appended", "RecoverResult"]


@dataclass(frozen=True, slots=True)
class Appended:
    """Where one batch landed."""

    base_offset: int
    last_offset: int
    position: int
    size: int
    segment: int
    log_append_time: int | None


@dataclass(frozen=True, slots=True)
class RecoverResult:
    """What :meth:`.segment.LogSegment.recover` did."""

    valid_bytes: int
    truncated_bytes: int
    saved_to: str | None
    error: str | None
    #: the position of the first batch the rebuilt indexes had no room for (None: all had)
    index_full_at: int | None = None
