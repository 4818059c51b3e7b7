"""A C accelerator built from other source than the ``.c`` beside it is refused at import.

A checkout updated without rebuilding keeps the old ``_speedups*.so``, whose functions may check
their arguments differently from what the new Python passes (a ``ValueError`` traceback in the
middle of a dump).  setup.py stamps each build with the hash of its source
(``SOURCE_HASH``); :func:`segstore.speedups.load` compares it with the source beside the module
and runs the pure-Python paths, warning once, when they differ.
"""

from __future__ import annotations

import importlib
import sys
import uuid
import warnings

import pytest

from segstore import speedups


def _package(tmp_path, stamp: str | None, source: bytes | None, name: str):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    body = "" if stamp is None else f"SOURCE_HASH = {stamp!r}\n"
    (pkg / "_speedups.py").write_text(body + "def f():\n    return 1\n")
    if source is not None:
        (pkg / "_speedups.c").write_bytes(source)
    return f"{name}._speedups"


@pytest.mark.parametrize(("stamp", "source", "loads"), [
    (speedups.source_hash(b"int f(void) { return 1; }\n"), b"int f(void) { return 1; }\n", True),
    (speedups.source_hash(b"int f(void) { return 0; }\n"), b"int f(void) { return 1; }\n", False),
    (None, b"int f(void) { return 1; }\n", False),        # built before builds were stamped
    ("", b"int f(void) { return 1; }\n", True),           # built without setup.py: not checked
    ("0123456789abcdef", None, True),                     # no source beside it (an installed wheel)
], ids=["fresh", "stale", "unstamped", "unchecked", "no-source"])
def test_load_refuses_a_build_of_other_source(tmp_path, monkeypatch, stamp, source, loads):
    name = _package(tmp_path, stamp, source, f"stalecase_{uuid.uuid4().hex[:12]}")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delenv(speedups.PURE_PYTHON_ENV, raising=False)
    monkeypatch.setattr(speedups, "missing", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = speedups.load(name)
        again = speedups.load(name)
    if loads:
        assert module is importlib.import_module(name) and again is module
        assert not caught
    else:
        assert module is None and again is None
        assert len(caught) == 1 and caught[0].category is speedups.SpeedupsWarning   # once per module
        assert "stale build" in str(caught[0].message)
        assert "stale build" in speedups.missing[name]
    sys.modules.pop(name, None)


@pytest.mark.parametrize("name", ["segstore_kafka._speedups", "segstore_rocketmq._speedups"])
def test_the_built_accelerators_are_stamped_with_their_own_source(name):
    try:
        module = importlib.import_module(name)
    except ImportError:
        pytest.skip(f"{name} not built")
    assert module.SOURCE_HASH != ""
    assert speedups.stale(module) is None


def test_the_shared_header_is_part_of_a_builds_source(tmp_path, monkeypatch):
    """A ``.c`` that includes ``speedups_common.h`` is stamped with the hash of both (setup.py): a
    build whose stamp covers only the ``.c`` is stale, as after an edit of the header alone."""
    source = b'#include "speedups_common.h"\nint f(void) { return 1; }\n'
    with open(speedups.COMMON_HEADER, "rb") as f:
        header = f.read()
    stamps = ((speedups.source_hash(source + header), True), (speedups.source_hash(source), False))
    for stamp, loads in stamps:
        name = _package(tmp_path, stamp, source, f"stalecase_{uuid.uuid4().hex[:12]}")
        monkeypatch.syspath_prepend(str(tmp_path))
        importlib.invalidate_caches()
        monkeypatch.delenv(speedups.PURE_PYTHON_ENV, raising=False)
        monkeypatch.setattr(speedups, "missing", {})
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            assert (speedups.load(name) is not None) == loads
        sys.modules.pop(name, None)


def test_the_files_a_source_includes_are_part_of_a_builds_source(tmp_path, monkeypatch):
    """A ``_speedups.c`` split by concern includes its ``_speedups_*.c`` beside it: the stamp covers
    them, in name order (setup.py), so a build from before an edit of one of them is stale."""
    main, parts = b'#include "_speedups_b.c"\n#include "_speedups_a.c"\n', [b"int a;\n", b"int b;\n"]
    stamps = ((speedups.source_hash(main + parts[0] + parts[1]), True), (speedups.source_hash(main), False),
              (speedups.source_hash(main + parts[1] + parts[0]), False))
    for stamp, loads in stamps:
        name = _package(tmp_path, stamp, main, f"stalecase_{uuid.uuid4().hex[:12]}")
        for part, text in zip(("_speedups_a.c", "_speedups_b.c"), parts, strict=True):
            (tmp_path / name.split(".")[0] / part).write_bytes(text)
        monkeypatch.syspath_prepend(str(tmp_path))
        importlib.invalidate_caches()
        monkeypatch.delenv(speedups.PURE_PYTHON_ENV, raising=False)
        monkeypatch.setattr(speedups, "missing", {})
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            assert (speedups.load(name) is not None) == loads
        sys.modules.pop(name, None)


def test_each_module_is_checked_once_and_again_when_imported_anew(tmp_path, monkeypatch):
    """Every plugin module that uses an accelerator loads it, and the check reads and hashes the whole
    C source (170 KB for Kafka's): once per module object; a module imported anew (a rebuild picked up
    by a reload) is checked anew."""
    source = b"int f(void) { return 1; }\n"
    name = _package(tmp_path, speedups.source_hash(source), source, f"stalecase_{uuid.uuid4().hex[:12]}")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delenv(speedups.PURE_PYTHON_ENV, raising=False)
    checked = []
    check = speedups.stale
    monkeypatch.setattr(speedups, "stale", lambda module: checked.append(module) or check(module))
    first = speedups.load(name)
    assert first is not None and speedups.load(name) is first and checked == [first]
    sys.modules.pop(name)
    again = speedups.load(name)
    assert again is not None and again is not first and checked == [first, again]
    sys.modules.pop(name, None)


def test_the_source_hash_is_zlibs_crc32_and_the_length() -> None:
    """What setup.py stamps: zlib's CRC-32 of the source, then its length, 8 hex digits each (a
    fingerprint, 0.03 ms for Kafka's 170 KB where a SHA-256 took 0.46 ms).  A byte changed, added or
    dropped anywhere changes it (a CRC-32 sees every error of up to 32 bits in a row)."""
    import zlib

    data = bytes(range(256)) * 700
    stamp = speedups.source_hash(data)
    assert stamp == f"{zlib.crc32(data):08x}{len(data):08x}" and len(stamp) == 16
    assert speedups.source_hash(b"") == "0000000000000000"
    edits = [data[:i] + bytes([data[i] ^ flip]) + data[i + 1:] for i in range(0, len(data), 997)
             for flip in (1, 0x80, 0xFF)]
    edits += [data + b"\n", data[:-1], data[1:], data[:5000] + data[5001:]]
    assert stamp not in {speedups.source_hash(edit) for edit in edits}
