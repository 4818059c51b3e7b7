"""``segstore.open``: the library's entry point."""

from __future__ import annotations

import os
from typing import Any

from . import files, registry
from .errors import NotFoundError
from .store import Store


def open(path: str | os.PathLike[str], format: str | None = None, mode: str = "r",
         **config: Any) -> Store:
    """Open the store at ``path``.

    :param format: ``"rocketmq"``, ``"kafka"`` or another registered name; detected
        from the files when omitted (a new store in mode ``"a"`` defaults to RocketMQ).
    :param mode: ``"r"`` to read (never writes, never blocks), ``"a"`` to append
        (creates the store if missing, takes the writer lock, recovers a crash).
    :raises NotFoundError: ``mode="r"`` and nothing exists at ``path`` (reading never creates a store).
    :raises WrongFormatError: the format is detected and no (or more than one) format recognises ``path``.
    :param config: the format's own config names (RocketMQ's ``mappedFileSizeCommitLog``...;
        Kafka's ``segment.bytes`` passed as ``**{"segment.bytes": n}`` or ``segment_bytes=n``).
    """
    path = os.fspath(path)
    if mode == "r" and not files.exists(path):
        raise NotFoundError("expected a store directory to read, found no such file or directory", path)
    if format is None:
        if mode == "a" and not _has_content(path):
            format = "rocketmq"
        else:
            format = registry.detect(path)
    return registry.get(format).open(path, mode, **config)


def _has_content(path: str) -> bool:
    return files.is_dir(path) and bool(files.list_dir(path))
