"""Kafka's text checkpoint files and the leader epoch cache.

Every checkpoint file is UTF-8 text, ``\\n``-terminated lines (``CheckpointFile.java``)::

    0                      version (always 0)
    N                      number of entries
    <entry>                N lines

- ``leader-epoch-checkpoint`` (in a partition directory): entries ``EPOCH START_OFFSET``.
- ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (in a log directory): entries ``TOPIC PARTITION OFFSET``.

An empty file, or one holding only the version line, reads as no entries, as
Kafka 3.8's ``CheckpointFile.CheckpointReadBuffer.read`` reads it: brokers create
``leader-epoch-checkpoint`` empty and real log dirs hold many such files.

Files are replaced atomically (``.tmp`` written, fsynced, renamed) through
:func:`segstore.files.write_atomic`.  Parse errors are :class:`CorruptDataError`
naming the file and the byte position of the offending line.

Thread-safety: not thread-safe; the owning partition or log directory serialises access (the parsed
offset checkpoints kept by path are shared: each is replaced whole, a dict operation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from segstore import files
from segstore.errors import CorruptDataError, cut
from segstore.javatext import parse_int, parse_long

VERSION = 0
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
#: The formatters' ``WHITE_SPACES_PATTERN`` (``\s+``: Java's ``\s`` is these six ASCII blanks only)
_WHITE_SPACES = re.compile(r"[ \t\n\x0b\f\r]+")
#: the high watermarks (``ReplicaManager.HighWatermarkFilename``)
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


def split_fields(line: str) -> list[str]:
    """``WHITE_SPACES_PATTERN.split(line)`` (``Pattern.compile("\\\\s+")``, as 3.8's checkpoint formatters and
    ``PartitionMetadataReadBuffer`` split a line): at runs of the six ASCII blanks only, a blank at the
    start leaving an empty first field, trailing empty fields dropped."""
    tokens = _WHITE_SPACES.split(line)
    while tokens and not tokens[-1]:
        tokens.pop()
    return tokens


def _parse(path: str, text: str, fields: int) -> list[tuple[int, list[str]]]:
    """The entry lines of a checkpoint, split into ``fields`` tokens each, with the position each line
    starts at (for the error a token of it raises).

    No line, or a version line alone, is no entries (``CheckpointReadBuffer.read``).  The version and the
    count are what ``CheckpointReadBuffer.toInt`` reads (``Integer.parseInt`` of the whole line: Unicode
    decimal digits of the BMP and leading zeros too, no blank).
    """
    # Lines end at \n, \r or \r\n, as Java's BufferedReader.readLine splits them.
    matches = [m for m in _LINE.finditer(text) if m.end() > m.start()]
    lines = [m.group(1) for m in matches]
    starts = [m.start() for m in matches] + [len(text)]
    if not lines:
        return []
    if parse_int(lines[0]) != VERSION:
        raise CorruptDataError(f"expected checkpoint version {VERSION}, found {cut(lines[0])}", path, 0)
    if len(lines) == 1:
        return []
    count = parse_int(lines[1])
    if count is None or count < 0:
        raise CorruptDataError(f"expected an entry count, found {cut(lines[1])}", path, starts[1])
    body = lines[2:]
    if count != len(body):
        raise CorruptDataError(f"expected {count} entries, found {len(body)}", path, starts[2])
    out = []
    for i, line in enumerate(body):
        tokens = split_fields(line)
        if len(tokens) != fields:
            raise CorruptDataError(f"expected {fields} space-separated fields, found {cut(line)}", path,
                                   starts[2 + i])
        out.append((starts[2 + i], tokens))
    return out


def _int(path: str, pos: int, token: str, what: str, *, long: bool = True) -> int:
    """``token`` as Kafka's checkpoint formatters parse it: offsets ``Long.parseLong``, partitions and
    epochs ``Integer.parseInt`` (``OffsetCheckpointFile.Formatter.fromString``'s ``toLong``/``toInt``,
    ``LeaderEpochCheckpointFile.Formatter.fromString``); what they throw on is a malformed line."""
    value = parse_long(token) if long else parse_int(token)
    if value is None:
        kind = "long" if long else "int"
        raise CorruptDataError(f"expected an integer {what} (a Java {kind}), found {cut(token)}", path, pos)
    return value


def format_checkpoint(lines: list[str]) -> str:
    """The text of a checkpoint holding ``lines`` as entries."""
    return "".join(f"{line}\n" for line in [str(VERSION), str(len(lines)), *lines])


def read_leader_epochs(path: str) -> list[EpochEntry]:
    """The entries of a ``leader-epoch-checkpoint`` (``[]`` if the file is missing)."""
    if not files.exists(path):
        return []
    return [EpochEntry(_int(path, pos, e, "epoch", long=False), _int(path, pos, o, "start offset"))
            for pos, (e, o) in _parse(path, files.read_text(path), 2)]


def write_leader_epochs(path: str, entries: Iterable[EpochEntry]) -> None:
    """Replace a ``leader-epoch-checkpoint`` atomically."""
    files.write_atomic(path, format_checkpoint([f"{e.epoch} {e.start_offset}" for e in entries]))


#: Log-dir offset checkpoints as last parsed, by path, with the file identity they were parsed at: one
#: entry is read for each of a log directory's partitions, and parsing the whole file each time made a
#: command over N partitions O(N^2).  Replaced whole when the file changes.
_PARSED: dict[str, tuple[tuple[int, int, int, int], dict[tuple[str, int], int]]] = {}


def _parsed_offsets(path: str) -> dict[tuple[str, int], int]:
    """The checkpoint's entries, parsed once per version of the file; callers must not change them."""
    identity = files.identity(path)
    if identity is None:
        return {}
    kept = _PARSED.get(path)
    if kept is not None and kept[0] == identity:
        return kept[1]
    offsets = {(t, _int(path, pos, p, "partition", long=False)): _int(path, pos, o, "offset")
               for pos, (t, p, o) in _parse(path, files.read_text(path), 3)}
    _PARSED[path] = (identity, offsets)
    return offsets


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """A log-dir offset checkpoint as ``{(topic, partition): offset}`` (``{}`` if missing), a copy the
    caller may change.  Parsed once per version of the file."""
    return dict(_parsed_offsets(path))


def offset_of(path: str, key: tuple[str, int]) -> int | None:
    """One partition's entry in a log-dir offset checkpoint (None: none).  ``O(1)`` once the file's
    version was parsed."""
    return _parsed_offsets(path).get(key)


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    """Replace a log-dir offset checkpoint atomically (entries sorted by topic, partition)."""
    _PARSED.pop(path, None)
    files.write_atomic(path, format_checkpoint([f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]))
    _PARSED.pop(path, None)


def _assign_to(kept: list[EpochEntry], entry: EpochEntry) -> bool:
    """``LeaderEpochFileCache.assign`` of ``entry`` onto ``kept`` (ordered by epoch and start offset):
    ``isUpdateNeeded``, then ``maybeTruncateNonMonotonicEntries``; whether ``kept`` changed."""
    if kept and entry.epoch == kept[-1].epoch and entry.start_offset >= kept[-1].start_offset:
        return False
    while kept and (kept[-1].epoch >= entry.epoch or kept[-1].start_offset >= entry.start_offset):
        kept.pop()
    kept.append(entry)
    return True


class LeaderEpochCache:
    """The leader epochs of one partition and the offset each started at (``LeaderEpochFileCache``).

    Held in memory, persisted to ``leader-epoch-checkpoint`` by :meth:`flush`.
    """

    def __init__(self, path: str, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._entries: list[EpochEntry] = list(entries)
        self._dirty = False

    @classmethod
    def load(cls, path: str) -> LeaderEpochCache:
        """The cache as Kafka 3.8.0's ``LeaderEpochFileCache`` constructor loads the file: each entry
        assigned in turn (``assign``: ``isUpdateNeeded``, then ``maybeTruncateNonMonotonicEntries``), so
        an entry that goes back in epoch or offset drops the later ones it conflicts with.  The file is
        left as it is until the cache changes, as the broker leaves it.  ``O(entries)``."""
        kept: list[EpochEntry] = []
        for entry in read_leader_epochs(path):
            _assign_to(kept, entry)
        return cls(path, kept)

    def merge(self, entries: Iterable[EpochEntry]) -> None:
        """Assign each entry in turn as Kafka 3.8.0 ``LeaderEpochFileCache.assign`` does (an entry of the
        latest epoch at or after its start is no update; one that goes back in epoch or offset drops
        the later ones it conflicts with): the epochs of a copied log, where its batches alone would
        start an epoch later than its source's cache says.  ``O(entries)``."""
        for entry in entries:
            if _assign_to(self._entries, EpochEntry(*entry)):
                self._dirty = True

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than the latest.  ``O(1)``."""
        if epoch < 0 or (self._entries and epoch <= self._entries[-1].epoch):
            return False
        self._entries.append(EpochEntry(epoch, start_offset))
        self._dirty = True
        return True

    def epoch_for(self, offset: int) -> int | None:
        """The epoch an offset was written in (None before the first entry)."""
        found = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was cut there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if kept != self._entries:
            self._entries, self._dirty = kept, True

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly before ``start_offset``; the one holding it now starts there."""
        before = [e for e in self._entries if e.start_offset <= start_offset]
        after = [e for e in self._entries if e.start_offset > start_offset]
        kept = ([EpochEntry(before[-1].epoch, start_offset)] if before else []) + after
        if kept != self._entries:
            self._entries, self._dirty = kept, True

    def clear(self) -> None:
        if self._entries:
            self._entries, self._dirty = [], True

    def flush(self, *, force: bool = False) -> None:
        """Write the checkpoint if anything changed (or ``force``)."""
        if self._dirty or force:
            write_leader_epochs(self.path, self._entries)
            self._dirty = False
