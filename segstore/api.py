"""``segstore.open``: the library's entry point."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from . import files, jsontext, registry
from .errors import ConfigError, NotFoundError, ReadOnlyError, WrongFormatError, check_path, cut, did_you_mean
from .store import Store, check_mode


def open(path: str | os.PathLike[str], format: str | None = None, mode: str = "r", *,
         storage_options: Mapping[str, Any] | str | None = None, **config: Any) -> Store:
    """Open the store at ``path``.

    :param format: ``"rocketmq"``, ``"kafka"`` or another registered name; detected
        from the files when omitted (a new store in mode ``"a"`` defaults to RocketMQ).
    :param mode: ``"r"`` to read (never writes, never blocks), ``"a"`` to append
        (creates the store if missing, takes the writer lock, recovers a crash).
    :raises NotFoundError: ``mode="r"`` and nothing exists at ``path`` (reading never creates a store).
    :raises WrongFormatError: the format is detected and no (or more than one) format recognises ``path``;
        or ``format`` is given and ``path`` holds a store of another format; ``path`` is a file.
    :param storage_options: for a URL path (``s3://bucket/store``, ``hdfs://...``, ``file://...``):
        the fsspec filesystem's options (credentials, ``client_kwargs``...), a dict or its JSON
        text; used for every path under the URL's ``scheme://authority`` in this process.
        Without them ``$SEGSTORE_STORAGE_OPTIONS`` and the filesystem's own defaults (AWS
        environment variables...) apply.  URLs open read-only (``mode="r"``).
    :raises ReadOnlyError: ``mode="a"`` on a URL.
    :raises ConfigError: a mode other than ``"r"`` and ``"a"``; a ``path`` that is not one (bytes are
        decoded as ``os.fsdecode`` does); ``storage_options`` neither a mapping nor a JSON object's text
        (for a local path too, which does not use them).
    :param config: the format's own config names (RocketMQ's ``mappedFileSizeCommitLog``...;
        Kafka's ``segment.bytes`` passed as ``**{"segment.bytes": n}`` or ``segment_bytes=n``).
    """
    path = _path(path, "a store path")    # a bytes path as the str the plugins' name patterns match
    check_mode(mode, path)      # before anything is looked at or created
    # checked for a local path too, where they are not used: a dict of the wrong kind or text that is no
    # JSON is a mistake to name whatever the path (it was taken without a word)
    options = None if storage_options is None else _storage_options(storage_options, path)
    if files.is_url(path):
        if mode != "r":
            raise ReadOnlyError(f"expected mode='r' for a URL, found mode={mode!r} "
                                "(remote stores are read-only)", path)
        if options is not None:
            files.set_storage_options(path, options)
    if mode == "r" and not files.exists(path):
        raise NotFoundError("expected a store directory to read, found no such file or directory", path)
    if not files.is_url(path) and files.exists(path) and not files.is_dir(path):
        # a segment or commitlog file: each format's own open answered differently ("found nothing",
        # a file in the way of commitlog/), detection "pass --format"
        raise registry.not_a_directory(path)
    if format is None:
        if mode == "a" and not _has_content(path):
            format = "rocketmq"
        else:
            format = registry.detect(path)
    elif files.exists(path):
        others = registry.other_formats(path, format)
        if others:
            raise WrongFormatError(f"expected a {format} store, found a {others[0]} store", path)
    plugin = registry.get(format)
    if mode == "a" and not files.is_url(path) and not _has_content(path):
        registry.check_new_store(path, format)      # a new store: not where another store's broker fails
    try:
        return plugin.open(path, mode, **config)
    except ConfigError as err:
        # a typo of open()'s own keywords (fromat=, mdoe=) lands among the format's config names,
        # whose refusal would not name the argument meant
        for name in config:
            hint = did_you_mean(name, _OPEN_KEYWORDS)
            if hint and f"found {cut(name)}" in str(err):
                raise ConfigError(f"expected open()'s own arguments ({', '.join(_OPEN_KEYWORDS)}) or "
                                  f"{format} config names, found {cut(name)}{hint}", path) from err
        raise


def config_file(path: str | os.PathLike[str], format: str, **overrides: Any) -> dict[str, Any]:
    """The config :func:`open` takes (``open(store, format, **config_file(...))``) from a broker's own
    config file: RocketMQ's ``broker.conf``, Kafka's ``server.properties``, under ``overrides``.

    The file is read as both brokers read it, with ``java.util.Properties.load`` (:mod:`.properties`),
    and its names applied as that broker applies them (the format's
    :meth:`~segstore.plugin.FormatPlugin.config_from_file`): the names concerning the store are taken,
    the others ignored, as the broker ignores what its storage does not use.  A name of ``overrides``
    (one of :func:`open`'s config names) wins over the file's value.

    :param format: the broker whose file it is (``"rocketmq"``, ``"kafka"``): the file does not say.
    :raises ConfigError: a malformed file (a bad ``\\uXXXX`` escape), or a value the store cannot take as
        the broker takes it, naming the file and the byte of its line.
    :raises NotFoundError: no file at ``path``.
    :raises UnsupportedOperationError: ``format`` reads no broker config file.
    :raises ConfigError: a ``path`` that is no path (None).
    """
    from .properties import line_number, parse_entries

    shown = _path(path, "a broker config file's path")    # None was os.fspath's TypeError
    data = files.read_bytes(shown)
    try:
        entries = [(entry.key, entry.value, entry.pos) for entry in parse_entries(data, shown)]
        return registry.get(format).config_from_file(entries, shown, overrides)
    except ConfigError as err:
        if err.path != shown or err.pos is None:
            raise
        # the line too, as an editor shows it (the position is its first byte)
        raise ConfigError(f"line {line_number(data, err.pos)}: {err.message}", shown, err.pos) from err


def config_file_notes(path: str | os.PathLike[str], format: str, store: str | os.PathLike[str],
                      overrides: Iterable[str] = ()) -> list[str]:
    """What to tell a user of the broker config file at ``path`` given for the store at ``store``, though
    :func:`config_file` takes it: a setting the broker follows and segstore does not (RocketMQ's
    ``storePathRootDir``/``storePathCommitLog`` naming another place than ``store``, which segstore reads
    all the same), or a file naming nothing this broker reads (another broker's file).  One line each,
    ``FILE:POS: line N: ...`` where a line is concerned
    (:meth:`~segstore.plugin.FormatPlugin.config_file_notes`); nothing is printed here.  A name of
    ``overrides`` (the config given beside the file, which wins over it) is not looked at.

    :raises ConfigError: a malformed file, as :func:`config_file`.
    """
    from .properties import line_number, parse_entries

    shown = _path(path, "a broker config file's path")
    data = files.read_bytes(shown)
    replaced = set(overrides)
    entries = [(entry.key, entry.value, entry.pos) for entry in parse_entries(data, shown)
               if entry.key not in replaced]
    notes = registry.get(format).config_file_notes(entries, shown, _path(store, "a store path"))
    return [f"{shown}:{pos}: line {line_number(data, pos)}: {message}" if pos is not None
            else f"{shown}: {message}" for message, pos in notes]


#: the keywords of :func:`open` itself (the rest are the format's config names)
_OPEN_KEYWORDS = ("format", "mode", "storage_options", "indexes")


def _path(path: Any, what: str) -> str:
    """``path`` as a str (bytes decoded as ``os.fsdecode`` does).

    :raises ConfigError: neither str, bytes nor ``os.PathLike``; one holding a NUL byte (no file system
        takes one: refused before any call to the system, named with the byte escaped)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise ConfigError(f"expected {what} (str or os.PathLike), found {type(path).__name__} {cut(path)}")
    return check_path(os.fsdecode(path), what)


def _has_content(path: str) -> bool:
    return files.is_dir(path) and bool(files.list_dir(path))


def _storage_options(options: Mapping[str, Any] | str, path: str) -> dict[str, Any]:
    if isinstance(options, str):
        return jsontext.loads_object(options, "storage_options must be a JSON object", path=path)
    if not isinstance(options, Mapping):
        raise ConfigError(f"storage_options must be a mapping, found {type(options).__name__}", path)
    return dict(options)
