"""``key``: a key-hash index (RocketMQ IndexFile entries) over any :class:`~segstore.logview.LogView`.

Per stream, the core's key-hash files (:mod:`segstore.indexes.keyhash`) under
``HOME/.segstore/key/``, keyed by ``topic#key`` for the record key and for the
values of the headers named in ``key.index.headers`` (the ``key`` and
``headers`` columns of ``scan_arrow``); entries hold the record's offset where
RocketMQ holds a commitlog position, and the store's
:attr:`~segstore.logview.LogView.time_column` as their time.  Records marked by
the store's :attr:`~segstore.logview.LogView.control_column` carry no data and
are not indexed.  Candidates are checked against the log, so a hash collision
never returns another key's record.

Hashes are computed in numpy over the keys' bytes (an ASCII key's bytes are its
UTF-16 code units); only keys with other bytes are decoded one by one.
Thread-safety: as the owning store.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segstore import arrays, files
from segstore.columns import binary_buffers
from segstore.errors import CorruptIndexError
from segstore.indexes.javahash import string_hash, unit_hashes
from segstore.indexes.keyhash import TOPIC_KEY_SEPARATOR, IndexService, abs_hashes
from segstore.logview import int64_column
from segstore.store import Problem

from .base import ExtraLayout, Stream, StreamIndex

TIME_MIN, TIME_MAX = -(2**63), 2**63 - 1
_UINT32 = 0xFFFFFFFF
_ASCII_END = 0x80


def key_text(value: bytes) -> str:
    """A key as the string the index hashes (bytes that are not UTF-8 kept by surrogate escapes)."""
    return bytes(value).decode("utf-8", "surrogateescape")


def key_hashes(topic: str, values: pa.Array) -> np.ndarray:
    """The index hash of ``topic#value`` for each (non-null) binary value: ``abs(String.hashCode)``.

    ``O(total bytes)`` in numpy; values with non-ASCII bytes are decoded one by one
    (their UTF-16 units are not their bytes).
    """
    n = len(values)
    if not n:
        return np.zeros(0, dtype=np.int64)
    offsets32, buffer = binary_buffers(values)
    offsets = offsets32.astype(np.int64)
    data = np.frombuffer(buffer, dtype=np.uint8)
    units = data[offsets[0]:offsets[-1]]
    lengths = np.diff(offsets)
    prefix = string_hash(f"{topic}{TOPIC_KEY_SEPARATOR}") & _UINT32
    signed = unit_hashes(units, lengths, prefix)
    wide = units >= _ASCII_END
    if wide.any():
        before = np.concatenate(([0], np.cumsum(wide, dtype=np.int64)))     # wide bytes before each byte
        per_value = before[offsets[1:] - offsets[0]] - before[offsets[:-1] - offsets[0]]
        for i in np.flatnonzero(per_value).tolist():
            signed[i] = string_hash(f"{topic}{TOPIC_KEY_SEPARATOR}{key_text(values[i].as_py())}")
    return abs_hashes(signed)


class KeyStreamIndex(StreamIndex):
    """``topic#key`` -> offset entries of one stream in key-hash files."""

    def _open_files(self) -> None:
        self.service = IndexService(self.directory, self.options["key.index.slots"],
                                    self.options["key.index.entries"], writable=self.writable)
        bad = self.service.load()
        if bad:
            self.service.close()
            raise CorruptIndexError(f"expected index files of {self.options['key.index.slots']} slots and "
                                    f"{self.options['key.index.entries']} entries, found others: {bad}",
                                    self.directory)

    @property
    def header_names(self) -> list[str]:
        """The headers indexed as keys (``key.index.headers``, as the index was built)."""
        return [name for name in self.options["key.index.headers"].split(",") if name]

    def _columns(self) -> list[str]:
        control = self.store.control_column
        return ["key", self.store.time_column, *(["headers"] if self.header_names else []),
                *([control] if control else [])]

    def _data_rows(self, batch: pa.RecordBatch) -> np.ndarray:
        """Which rows carry data (not the store's control records)."""
        control = self.store.control_column
        if control is None:
            return np.ones(batch.num_rows, dtype=bool)
        return ~arrays.to_numpy(batch.column(control), np.bool_)

    def _keyed(self, batch: pa.RecordBatch) -> tuple[np.ndarray, pa.Array, np.ndarray]:
        """``(row, value, rank)`` of every key a batch's records are indexed under: each record's key,
        then its named headers in header order (``rank`` orders them within a record)."""
        data = self._data_rows(batch)
        keys = batch.column("key")
        has_key = data & ~arrays.to_numpy(keys.is_null(), np.bool_)
        rows = [np.flatnonzero(has_key)]
        values = [keys.filter(arrays.from_numpy(has_key))]
        ranks = [np.zeros(len(rows[0]), dtype=np.int64)]
        names = self.header_names
        if names:
            headers = batch.column("headers")
            flat = headers.flatten()
            if len(flat):
                parent = arrays.int64s(pc.list_parent_indices(headers))
                value = flat.field("value")
                chosen = (arrays.to_numpy(pc.is_in(flat.field("key"), value_set=arrays.texts(names))
                                          .fill_null(False), np.bool_)
                          & ~arrays.to_numpy(value.is_null(), np.bool_) & data[parent])
                rows.append(parent[chosen])
                values.append(value.filter(arrays.from_numpy(chosen)))
                ranks.append(1 + np.flatnonzero(chosen))
        return (np.concatenate(rows), pa.concat_arrays([v.cast(pa.binary()) for v in values]),
                np.concatenate(ranks))

    def _entries(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(hashes, offsets, times)`` of a batch's entries in put order.  ``O(n)`` in numpy."""
        rows, values, ranks = self._keyed(batch)
        order = np.lexsort((ranks, rows))
        hashes = key_hashes(self.stream.topic, values)[order]
        rows = rows[order]
        return (hashes, int64_column(batch, "offset")[rows],
                int64_column(batch, self.store.time_column)[rows])

    def _index_from(self, start: int) -> int:
        """Put one entry per key, a ``scan_arrow`` batch at a time."""
        done = start
        for batch in self.batches(start, self.log_end(), self._columns()):
            hashes, offsets, times = self._entries(batch)
            self.service.put_hashes(hashes, offsets, times)
            done = int(int64_column(batch, "offset")[-1]) + 1
        return done

    def _cut_to(self, offset: int) -> int:
        """Drop the files holding entries at or past ``offset``, and the last file before them (the one a
        crash leaves part written); indexing restarts at that file's first record.

        A file fills up part way through a record's keys, so that record's first keys may be in the
        file before: that file goes too (and so on), so that indexing again puts no key twice.
        """
        service = self.service
        keep = [f for f in service.files if f.count and f.header.begin_phy_offset < offset]
        for f in [f for f in service.files if f not in keep]:
            f.close()
            files.remove(f.path)
        restart = self.log_start()
        while keep:
            last = keep.pop()
            restart = last.header.begin_phy_offset
            last.close()
            files.remove(last.path)
            if not keep or keep[-1].header.end_phy_offset < restart:
                break
        service.files = keep
        return min(restart, offset)

    def _drop_below(self, offset: int) -> None:
        # the entries hold offsets where RocketMQ's hold commitlog positions: the broker's rule applies
        self.service.delete_expired(offset)

    def _carries(self, offset: int, key: bytes) -> bool:
        """Whether the record at ``offset`` is indexed under ``key`` (one record read, as a candidate
        check: the candidates are data records, entries are put for nothing else)."""
        record = next(self.store.read(self.stream.topic, self.stream.partition, offset, 1), None)
        if record is None:
            return False
        common = self.store.to_common(record)
        names = self.header_names
        return common.offset == offset and (common.key == key or any(
            name in names and value == key for name, value in common.headers))

    def _carrying(self, start: int, end: int, key: bytes) -> list[int]:
        """Offsets in ``[start, end)`` of records indexed under ``key`` (a scan, compared in numpy)."""
        hits: list[int] = []
        for batch in self.batches(start, end, self._columns()):
            rows, values, _ = self._keyed(batch)
            equal = arrays.to_numpy(pc.equal(values, arrays.binary_scalar(key)), np.bool_)
            hits.extend(int64_column(batch, "offset")[arrays.unique(rows[equal])].tolist())
        return hits

    def find_key(self, key: bytes, max_hits: int | None) -> list[int]:
        """Offsets of records carrying ``key``: the hash chain for indexed offsets, a scan for the tail
        (the whole stream when the log changed under the index: :attr:`stale`).

        ``O(chain length)`` index reads plus one record check per candidate.
        """
        start = self.log_start()
        indexed = start if self.stale is not None else self.state.indexed_end
        hits: set[int] = set()
        for offset in self.service.query(self.stream.topic, key_text(key), TIME_MIN, TIME_MAX):
            if offset not in hits and start <= offset < indexed and self._carries(offset, key):
                hits.add(offset)
        hits.update(self._carrying(max(indexed, start), self.log_end(), key))
        ordered = sorted(hits)
        # ordered[-max_hits:]: every hit when fewer than max_hits (len - max_hits would go negative)
        return ordered if max_hits is None else ordered[-max_hits:] if max_hits > 0 else []

    def _expected_problems(self) -> list[Problem]:
        return [*self._structure_problems(), *self._entry_problems()]

    def _structure_problems(self) -> list[Problem]:
        """Each file's slots and chains (a lookup walks only its slot's chain: a slot or link that
        points elsewhere hides keys, though every entry is there), as RocketMQ's own verify checks them."""
        problems = []
        for f in self.service.files:
            past = f.slots_past_entries()
            if len(past):
                s = int(past[0])
                problems.append(Problem(f.path, f.slot_pos(s), f"expected slot {s} to hold an entry "
                                                               f"below {f.header.index_count}, "
                                                               f"found {int(f.slots[s])}"))
            problems.extend(Problem(f.path, pos, message) for pos, message in f.chain_faults())
        return problems

    def _entry_problems(self) -> list[Problem]:
        parts = [self._entries(batch)[:2]
                 for batch in self.batches(self.log_start(), self.state.indexed_end, self._columns())]
        expected = np.zeros(sum(len(h) for h, _ in parts), dtype=[("hash", "<i8"), ("offset", "<i8")])
        if parts:
            expected["hash"] = np.concatenate([h for h, _ in parts])
            expected["offset"] = np.concatenate([o for _, o in parts])
        stored = [f.entries for f in self.service.files]
        found_rows = np.concatenate(stored) if stored else np.zeros(0, dtype=expected.dtype)
        found = np.zeros(len(found_rows), dtype=expected.dtype)
        if len(found_rows):
            found["hash"] = found_rows["hash"]
            found["offset"] = found_rows["phy_offset"]
            # entries past indexed_end (a crash, or set back before a rewrite) are never looked up,
            # and the next writer cuts them
            found = found[(found["offset"] >= self.log_start()) & (found["offset"] < self.state.indexed_end)]
        expected.sort(order=["offset", "hash"])
        found.sort(order=["offset", "hash"])
        if len(expected) != len(found) or np.any(expected != found):
            n = min(len(expected), len(found))
            diff = np.flatnonzero(expected[:n] != found[:n])
            slot = int(diff[0]) if len(diff) else n
            want = tuple(expected[slot].tolist()) if slot < len(expected) else "no entry"
            got = tuple(found[slot].tolist()) if slot < len(found) else "no entry"
            return [Problem(self.directory, None, f"expected (hash, offset) entry {want} "
                            f"(entry {slot} in offset order), found {got}")]
        return []

    def _flush_files(self) -> None:
        self.service.flush()

    def _close_files(self) -> None:
        if hasattr(self, "service"):
            self.service.close()
            del self.service


class KeyLayout(ExtraLayout[KeyStreamIndex]):
    """``key`` kept by segstore: a key-hash index per stream."""

    name = "key"
    answers = frozenset({"key"})
    stream_class = KeyStreamIndex
    option_names = ("key.index.headers", "key.index.slots", "key.index.entries")

    def find_key(self, stream: Stream, key: bytes, max_hits: int | None = None) -> list[int]:
        return self._index(stream).find_key(bytes(key), max_hits)
