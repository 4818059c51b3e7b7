"""Shared by the tests of RocketMQ stores whose ``config/*.json`` cannot be decoded: a small store with
one file replaced by damaged text, the CLI's answers, and the store's bytes (to show nothing changed)."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

import segstore
from segstore.cli import main

SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 200}
#: the bodies :func:`damaged_store` writes
BODIES = [b"m0", b"m1", b"m2"]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """``segstore ARGV``: exit code, stdout, stderr."""
    out = io.StringIO()
    code = main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


def damaged_store(tmp_path: Path, name: str, text: str) -> Path:
    """A store of three messages of topic T, group g committed at 1 on queue 0, ``config/NAME`` then
    replaced by ``text``."""
    store = tmp_path / "s"
    with segstore.open(store, "rocketmq", mode="a", **SMALL) as s:
        s.append_batch([{"topic": "T", "body": b"m%d" % i} for i in range(3)])
        s.commit_offset("g", "T", 0, 1)
    (store / "config" / name).write_text(text)
    return store


def store_files(store: Path) -> dict[str, bytes]:
    """Every file of ``store`` by relative path, with its bytes."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def bodies_read(store: segstore.Store) -> dict[str, list[bytes]]:
    """The bodies of queue T/0 by ``read``, of the store by ``scan`` and by ``scan_arrow``."""
    table = pa.Table.from_batches(list(store.scan_arrow(["value"])))
    return {"read": [m.body for m in store.read("T", 0)], "scan": [m.body for m in store.scan()],
            "scan_arrow": table.column("value").to_pylist()}
