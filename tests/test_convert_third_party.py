"""Conversion reaches formats only through the registry: a third-party format registered in code (a
store of conversion entries kept as JSON, with a conversion side of its own) converts to and from
both built-in formats, and a RocketMQ store comes back from it byte for byte."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from test_convert_mapping import kafka_batches, write_kafka

import segstore
from segstore import registry
from segstore.convert import convert
from segstore.convert.interchange import Entry, FormatConversion, Options, Sized, Verifier, Writer
from segstore.convert.pipeline import kafka_entry_of
from segstore.convert.topicnames import WORD_CHARS, TopicRules
from segstore.errors import UnsupportedOperationError
from segstore.plugin import FormatPlugin
from segstore.records import Message
from segstore.store import AppendResult, Problem, Store

FILE = "entries.json"
ROCKETMQ_CONFIG = {"maxHashSlotNum": 64, "maxIndexNum": 256}


def _text(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode()


def _blob(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _encode(entry: Entry) -> dict[str, Any]:
    return {**dataclasses.asdict(entry), "key": _text(entry.key), "value": _text(entry.value),
            "headers": [[k, _text(v)] for k, v in entry.headers]}


def _decode(data: dict[str, Any]) -> Entry:
    return Entry(**{**data, "key": _blob(data["key"]), "value": _blob(data["value"]),
                    "headers": [(k, _blob(v)) for k, v in data["headers"]]})


class EntriesStore(Store):
    """Conversion entries per ``TOPIC@PARTITION``, in one JSON file written at close."""

    format = "entries"

    def __init__(self, path: str, mode: str) -> None:
        super().__init__(path, mode)
        file = os.path.join(path, FILE)
        if mode == "a":
            os.makedirs(path, exist_ok=True)
        raw = json.loads(Path(file).read_text()) if os.path.isfile(file) else {}
        self.parts: dict[tuple[str, int], list[Entry]] = {
            (name.rsplit("@", 1)[0], int(name.rsplit("@", 1)[1])): [_decode(e) for e in entries]
            for name, entries in raw.items()}

    def close(self) -> None:
        if self.mode == "a" and not self.closed:
            data = {f"{t}@{p}": [_encode(e) for e in entries] for (t, p), entries in self.parts.items()}
            Path(self.path, FILE).write_text(json.dumps(data))
        super().close()

    def append_batch(self, messages: Iterable[Message | dict]) -> list[AppendResult]:
        raise UnsupportedOperationError("entries stores are written by conversions only")

    def scan(self) -> Iterator[Entry]:
        for key in sorted(self.parts):
            yield from self.parts[key]

    def read(self, topic: str, partition: int, offset: int = 0, count: int | None = None) -> Iterator[Entry]:
        return iter([e for e in self.parts.get((topic, partition), []) if e.offset >= offset][:count])

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.parts})

    def partitions(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.parts if t == topic)

    def offset_range(self, topic: str, partition: int) -> tuple[int, int]:
        entries = self.parts.get((topic, partition), [])
        return (entries[0].offset, entries[-1].offset + 1) if entries else (0, 0)

    def to_common(self, record: Entry) -> Message:
        return Message(record.topic, record.value, record.key, record.partition, record.offset,
                       record.timestamp, record.headers, record.timestamp_type)

    def to_json(self, record: Entry) -> dict[str, Any]:
        return _encode(record)

    def info(self) -> dict[str, Any]:
        return {"partitions": len(self.parts)}

    def verify(self) -> list[Problem]:
        return []


class EntriesWriter(Writer):
    def __init__(self, dest: EntriesStore) -> None:
        self.dest = dest

    def add(self, entry: Entry, size: int) -> bool:
        self.dest.parts.setdefault((entry.topic, entry.partition), []).append(entry)
        return True

    def flush_all(self) -> None:
        pass


class EntriesVerifier(Verifier):
    def __init__(self, dest: EntriesStore) -> None:
        self.readers = {key: iter(entries) for key, entries in dest.parts.items()}

    def check(self, entry: Entry) -> str | None:
        found = next(self.readers.get((entry.topic, entry.partition), iter(())), None)
        return None if found == entry else f"expected {entry}, found {found}"

    def rest(self) -> list[str]:
        return [f"{key}: an extra entry" for key, reader in self.readers.items() if next(reader, None)]


class EntriesConversion(FormatConversion):
    """A format whose records are entries, with topic names of both built-in alphabets."""

    topics = TopicRules("Entries", WORD_CHARS + "._-%|", "[a-zA-Z0-9._%|-]", 300, "~")

    def streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        store: Any = source
        return [iter([(e, len(e.value or b"")) for e in entries])
                for (topic, _), entries in sorted(store.parts.items())
                if options.topics is None or topic in options.topics]

    def writer(self, dest: Store, options: Options) -> Writer:
        assert isinstance(dest, EntriesStore)
        return EntriesWriter(dest)

    def verifier(self, dest: Store, options: Options) -> Verifier:
        assert isinstance(dest, EntriesStore)
        return EntriesVerifier(dest)


class EntriesFormat(FormatPlugin):
    name = "entries"

    def detect(self, path: str) -> bool:
        return os.path.isfile(os.path.join(path, FILE))

    def open(self, path: str, mode: str = "r", **config: Any) -> EntriesStore:
        return EntriesStore(os.fspath(path), mode)

    def write_spec(self, path: str, spec: dict[str, Any], config: dict[str, Any]) -> None:
        raise UnsupportedOperationError("no specs")

    def conversion(self) -> FormatConversion:
        return CONVERSION


CONVERSION = EntriesConversion()


@pytest.fixture
def entries_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """The third-party format, registered for one test (as ``registry.register`` does)."""
    monkeypatch.setitem(registry._loaded, "entries", EntriesFormat())


def test_a_rocketmq_store_goes_through_a_third_party_format_and_back(tmp_path: Path, entries_format: None
                                                                       ) -> None:
    src = FIXTURES / "rocketmq" / "basic" / "store"
    convert(src, tmp_path / "e", to="entries", verify=True)
    with segstore.open(tmp_path / "e") as store:
        assert store.format == "entries" and "TopicA" in store.topics()
    convert(tmp_path / "e", tmp_path / "back", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    with segstore.open(src, "rocketmq") as a:
        end = a.commitlog.end
    original = b"".join(p.read_bytes() for p in sorted((src / "commitlog").iterdir()))[:end]
    ours = b"".join(p.read_bytes() for p in sorted((tmp_path / "back" / "commitlog").iterdir()))[:end]
    assert ours == original


@given(kafka_batches())
@settings(max_examples=5, deadline=None)
def test_a_kafka_log_dir_goes_through_a_third_party_format_and_back(tmp_path_factory: pytest.TempPathFactory,
                                                                   batches: list[dict]) -> None:
    root = tmp_path_factory.mktemp("third")
    write_kafka(root / "k", "orders.v1", 0, batches)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry._loaded, "entries", EntriesFormat())
        convert(root / "k", root / "e", to="entries", verify=True)
        convert(root / "e", root / "back", to="kafka", verify=True)
    with segstore.open(root / "k", "kafka") as a, segstore.open(root / "back", "kafka") as b:
        assert [kafka_entry_of(r) for r in a.scan()] == [kafka_entry_of(r) for r in b.scan()]
