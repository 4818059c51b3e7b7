"""Read-only maps kept across opens (``files.keep_read_maps``): what a Spark worker, which opens the
same store for every query's plan, uses so that each open does not fault the files in again.

A kept map must be indistinguishable from a new one: the same file's bytes as they are now, a
file replaced or resized getting a map of its own, and nothing kept of a file deleted once
:func:`files.forget_changed_maps` has run.
"""

from __future__ import annotations

import os

import pytest

import segstore
from segstore import files
from segstore.errors import TruncatedDataError


@pytest.fixture
def kept():
    files.keep_read_maps(limit=3, limit_bytes=1 << 30)
    try:
        yield files._kept_maps
    finally:
        files.stop_keeping_read_maps()


def _write(path, data: bytes) -> None:
    with open(path, "wb") as out:
        out.write(data)


def _map_of(path, **kwargs):
    mapped = files.MappedFile(path, **kwargs)
    try:
        return mapped.buffer(), mapped.read(0, mapped.size)
    finally:
        mapped.close()


def test_without_keeping_a_closed_file_unmaps(tmp_path):
    path = tmp_path / "f"
    _write(path, b"abcd" * 1024)
    mm, data = _map_of(path)
    assert data == b"abcd" * 1024 and mm.closed


def test_a_reopened_file_gets_its_kept_map_with_the_bytes_written_since(kept, tmp_path):
    path = tmp_path / "f"
    _write(path, b"a" * 8192)
    first, _ = _map_of(path)
    assert not first.closed
    files.write_bytes(path, b"new", 100)        # a writer's change shows through the shared map
    second, data = _map_of(path)
    assert second is first and data[100:103] == b"new" and len(kept.maps) == 1


def test_a_replaced_file_gets_a_new_map_and_its_own_bytes(kept, tmp_path):
    path, other = tmp_path / "f", tmp_path / "g"
    _write(path, b"a" * 8192)
    first, _ = _map_of(path)
    _write(other, b"b" * 8192)                  # same name and size, another inode
    os.replace(other, path)
    second, data = _map_of(path)
    assert second is not first and data == b"b" * 8192


def test_an_append_file_that_grew_gets_a_map_of_its_new_length_and_the_old_one_goes(kept, tmp_path):
    path = tmp_path / "00000000000000000000.log"
    _write(path, b"x" * 5000)
    log = files.AppendFile(path)
    old = log.view().obj
    log.close()
    with open(path, "ab") as out:
        out.write(b"y" * 3000)
    log = files.AppendFile(path)
    view = log.view()
    assert len(view) == 8000 and bytes(view[5000:5003]) == b"yyy" and view.obj is not old
    view.release()
    log.close()
    assert old.closed and len(kept.maps) == 1


def test_a_shrunk_file_is_mapped_again_at_its_new_length(kept, tmp_path):
    """A file cut shorter (a Kafka recovery truncating a torn tail) must never be read through a map
    longer than it: touching such a map past the new end kills the reader with SIGBUS."""
    path = tmp_path / "00000000000000000000.log"
    _write(path, b"z" * 12288)
    log = files.AppendFile(path)
    log.view()
    log.close()
    os.truncate(path, 4096)
    log = files.AppendFile(path)
    view = log.view()
    assert len(view) == 4096 and bytes(view[-3:]) == b"zzz"
    view.release()
    log.close()


def test_forgetting_drops_the_maps_of_files_deleted_replaced_or_shrunk(kept, tmp_path):
    kept.limit = 10
    paths = [tmp_path / name for name in ("deleted", "shrunk", "replaced")]
    for path in paths:
        _write(path, b"q" * 8192)
    maps = [_map_of(path)[0] for path in paths]
    still = tmp_path / "still"
    _write(still, b"s" * 8192)
    kept_map, _ = _map_of(still)
    os.unlink(paths[0])
    os.truncate(paths[1], 4096)
    _write(tmp_path / "new", b"r" * 8192)
    os.replace(tmp_path / "new", paths[2])
    assert files.forget_changed_maps() == 3
    assert all(mm.closed for mm in maps) and not kept_map.closed and len(kept.maps) == 1
    assert files.forget_changed_maps() == 0


def test_the_least_recently_used_map_goes_past_the_limit(kept, tmp_path):
    paths = [tmp_path / str(i) for i in range(4)]
    for path in paths:
        _write(path, b"m" * 4096)
    first, _ = _map_of(paths[0])
    second, _ = _map_of(paths[1])
    _map_of(paths[2])
    assert _map_of(paths[0])[0] is first        # used again: now the most recent
    _map_of(paths[3])                           # a fourth over the limit of 3: the least recent goes
    assert second.closed and not first.closed and len(kept.maps) == 3


def test_the_byte_limit_holds_too(tmp_path):
    files.keep_read_maps(limit=100, limit_bytes=10000)
    try:
        paths = [tmp_path / str(i) for i in range(3)]
        for path in paths:
            _write(path, b"m" * 4096)
        maps = [_map_of(path)[0] for path in paths]
        assert maps[0].closed and not maps[1].closed and files._kept_maps.bytes == 8192
    finally:
        files.stop_keeping_read_maps()


def test_writable_and_in_memory_files_are_never_kept(kept, tmp_path):
    path = tmp_path / "f"
    _write(path, b"w" * 8192)
    writable, _ = _map_of(path, writable=True)
    assert writable.closed
    mapped = files.MappedFile(path, in_memory=True)
    mapped.close()
    log = files.AppendFile(path, writable=True)
    view = log.view()
    mm = view.obj
    view.release()
    log.close()
    assert mm.closed and not kept.maps


def test_stopping_unmaps_what_is_kept(tmp_path):
    path = tmp_path / "f"
    _write(path, b"a" * 8192)
    files.keep_read_maps()
    mm, _ = _map_of(path)
    files.stop_keeping_read_maps()
    assert mm.closed and files._kept_maps is None


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
def test_a_store_read_again_on_kept_maps_after_a_writer_changed_it(kept, tmp_path, format_name):
    """What the Spark worker does: open a store, read, close; a writer appends (and, for Kafka, a
    recovery cuts a torn tail); open again, read: the rows of the store as it is now."""
    kept.limit = 256
    path = str(tmp_path / "store")
    with segstore.open(path, mode="a", format=format_name) as store:
        for i in range(50):
            store.append({"topic": "t", "partition": 0, "value": b"v%d" % i})

    def values():
        with segstore.open(path) as store:
            return [v for batch in store.scan_arrow(["value"]) for v in batch.column("value").to_pylist()]

    assert values() == [b"v%d" % i for i in range(50)] and kept.maps
    with segstore.open(path, mode="a") as store:
        for i in range(50, 80):
            store.append({"topic": "t", "partition": 0, "value": b"v%d" % i})
    assert values() == [b"v%d" % i for i in range(80)]
    if format_name == "kafka":
        log = next(os.path.join(root, name) for root, _, names in os.walk(path) for name in names
                   if name.endswith(".log"))
        os.truncate(log, os.path.getsize(log) - 3)      # the last batch torn: read at its new length
        with pytest.raises(TruncatedDataError) as torn:
            values()
        assert torn.value.path == log and "found 68 bytes" in str(torn.value)
        os.truncate(log, torn.value.pos)                  # as a recovery cuts it
        assert values() == [b"v%d" % i for i in range(79)]


def test_a_map_dropped_from_the_cache_stays_mapped_while_its_file_is_open(kept, tmp_path):
    kept.limit = 1
    first_path, second_path = tmp_path / "a", tmp_path / "b"
    _write(first_path, b"a" * 8192)
    _write(second_path, b"b" * 8192)
    first = files.MappedFile(first_path)
    second = files.MappedFile(second_path)          # over the limit: the first map leaves the cache
    assert len(kept.maps) == 1
    assert first.read(0, 4) == b"aaaa" and not first.buffer().closed
    mm = first.buffer()
    first.close()
    assert mm.closed
    second.close()
    assert not kept.maps[next(iter(kept.maps))].map.closed


def test_a_close_a_view_refused_is_done_at_the_next_forget_once_the_view_went(kept, tmp_path):
    """Forgetting the map of a deleted file while a view of it is alive (a batch a reader still
    holds) cannot close it; once the view went, the next forget does, even where something else
    still refers to the map object: until then it keeps the deleted file's disk space."""
    path = tmp_path / "f"
    _write(path, b"z" * 8192)
    mm, _ = _map_of(path)
    view = memoryview(mm)
    os.unlink(path)
    assert files.forget_changed_maps() == 1
    assert not mm.closed and not kept.maps             # the view refused the close
    assert files.forget_changed_maps() == 0 and not mm.closed       # still held: tried, refused again
    view.release()
    files.forget_changed_maps()
    assert mm.closed                                    # `mm` still refers to it: closed all the same
