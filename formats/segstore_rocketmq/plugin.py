"""The ``rocketmq`` format plugin (entry point ``segstore.formats``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from segstore import files
from segstore.errors import ConversionError, InvalidTopicError
from segstore.javatext import parse_int
from segstore.plugin import FormatPlugin, NativeIndex, NativeIndexes

from .dirnames import COMMITLOG_DIR, CONSUMEQUEUE_DIR, INDEX_DIR, is_rocketmq_store

if TYPE_CHECKING:
    from .store import RocketMQStore
# The store's modules load when a store opens: detect, run on every store a command opens
# (Kafka's too), needs only the names of the files.

#: ``spec.json`` ``shutdown`` values: a clean shutdown, or a halt (files left as a killed broker leaves them).
SHUTDOWN_CLEAN = "clean"


class RocketMQFormat(FormatPlugin):
    """Apache RocketMQ broker stores (``DefaultMessageStore``: commitlog, consume queues, index)."""

    name = "rocketmq"
    description = "Apache RocketMQ broker store directory (commitlog/, consumequeue/, index/)"
    native_indexes: ClassVar[Mapping[str, NativeIndex]] = NativeIndexes(
        queue=("segstore.indexes.dense:ConsumeQueue",
               "consumequeue/TOPIC/QUEUEID/%020d (first entry's byte offset)"),
        key=("segstore.indexes.keyhash:IndexService", "index/yyyyMMddHHmmssSSS (local creation time)"),
    )
    #: a message's body through the value decoder, a commitlog file up to a byte count; every message is
    #: its own record (deep by nature).  No key payload (keys are a property, on each line), no internal
    #: topic records, no offset or time index to sanity-check, no record metadata to leave out.
    file_dump_options = frozenset({"print_data", "deep", "value_decoder", "max_bytes"})

    def detect(self, path: str) -> bool:
        """A directory holding ``commitlog/`` (20-digit file names) or ``consumequeue/``."""
        return files.is_dir(path) and is_rocketmq_store(path)

    def refuses_topic(self, topic: str) -> str | None:
        """``TopicValidator.validateTopic`` (what a producer's send is refused for): empty, a character
        outside ``[%|a-zA-Z0-9_-]``, or longer than the longest topic any store style writes (a v2
        message's)."""
        from .config import TOPIC_MAX_LENGTH_V2, validate_topic

        try:
            validate_topic(topic, TOPIC_MAX_LENGTH_V2)
        except InvalidTopicError as err:
            return err.message
        return None

    def refuses_new_dir(self, parent: str, name: str, store_format: str | None) -> str | None:
        """The directories whose every entry the broker loads as a file of its own: ``commitlog/`` and a
        queue directory (4.9.7 ``MappedFileQueue.load`` refuses to start on an entry of another length:
        "length not matched message store config value"; ``loadConsumeQueue`` makes a queue of any name
        ``Integer.parseInt`` reads in a topic directory) and ``index/`` (``IndexService.load`` opens
        every entry as an IndexFile).  Elsewhere the broker reads only the names it knows."""
        up, kind = os.path.split(os.path.abspath(parent))
        if kind in (COMMITLOG_DIR, INDEX_DIR) and is_rocketmq_store(up):
            return (f"the broker loads every entry of {kind}/ as a {kind} file and refuses to start on a "
                    "directory there (MappedFileQueue.load, IndexService.load)")
        grand, up_name = os.path.split(up)
        # parent is consumequeue/TOPIC/N (a queue directory), or consumequeue/TOPIC (name: a queue id)
        queue_dir = parse_int(kind) is not None and os.path.basename(grand) == CONSUMEQUEUE_DIR \
            and is_rocketmq_store(os.path.dirname(grand))
        new_queue = parse_int(name) is not None and up_name == CONSUMEQUEUE_DIR and is_rocketmq_store(grand)
        if queue_dir or new_queue:
            return ("the broker loads a consume-queue directory's every entry as a consume-queue file and "
                    "refuses to start on one of another length (MappedFileQueue.load); a topic directory's "
                    "entry named by a queue id is such a directory (DefaultMessageStore.loadConsumeQueue)")
        return None

    def open(self, path: str, mode: str = "r", **config: Any) -> RocketMQStore:
        """Open a store; ``indexes=[...]`` and layout options go to ``segstore.layouts`` (extra indexes)."""
        from segstore.layouts import attach, split_options

        from .store import RocketMQStore

        indexes, layout_options, config = split_options(config)
        return attach(RocketMQStore(path, mode, config), indexes, layout_options)

    def config_from_file(self, entries: Sequence[tuple[str, str, int]], path: str,
                         overrides: Mapping[str, Any]) -> dict[str, Any]:
        """A ``broker.conf`` as the 4.9.7 broker applies it to its config classes
        (:func:`.config.from_properties`): the store's names taken, the others ignored."""
        from .config import from_properties

        return from_properties(entries, path, overrides)

    def config_file_notes(self, entries: Sequence[tuple[str, str, int]], path: str,
                          store: str) -> list[tuple[str, int | None]]:
        """A ``broker.conf`` whose store paths name another place than ``store``, or that names nothing a
        RocketMQ broker reads (:func:`.config.file_notes`)."""
        from .config import file_notes

        return file_notes(entries, store)

    def write_jsonl(self, path: str, lines: Iterable[dict[str, Any]], config: dict[str, Any]) -> int:
        """Append message lines (:mod:`.jsonl`): plain ones in RocketMQ field names (``topic, queue_id,
        body, tags, keys, properties, ...``) or the common Message names, string bodies UTF-8 and
        ``bodyBase64`` binary; and ``dump --json`` lines, written back as they were stored."""
        from .jsonl import write_lines

        with self.open(path, "a", **config) as store:     # its extra index layouts kept up too
            return write_lines(store, lines)

    def reads_dump_line(self, obj: Mapping[str, Any]) -> bool:
        """A RocketMQ ``dump --json`` object: one with a field only a dump has (``msg_id``, ...)."""
        from .jsonl import is_dump_line

        return is_dump_line(obj)

    def write_spec(self, path: str, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Replay ``spec`` into a new store at ``path`` with the spec's config overridden by ``config``.

        :raises ConversionError: ``path`` already holds a store.
        """
        from .spec import replay
        from .store import RocketMQStore

        if files.exists(path) and files.list_dir(path):
            raise ConversionError("expected an empty or missing directory to write a spec into, "
                                  "found one with files", path)
        store = RocketMQStore(path, "a", {**spec.get("config", {}), **config})
        try:
            replay(store, spec)
        except BaseException:
            store.close()
            raise
        if spec.get("shutdown", SHUTDOWN_CLEAN) == SHUTDOWN_CLEAN:
            store.close()
        else:
            store.flush()
            store.abandon()

    def file_kind(self, path: str) -> str | None:
        """A RocketMQ store file: a commitlog or consume-queue file (20 digits), an IndexFile (17
        digits) or ``checkpoint``."""
        from .dumpfile import file_kind

        return file_kind(os.fspath(path)) if files.is_file(path) else None

    def dump_file(self, path: str, options: Any) -> Any:
        """The lines of one store file (see :mod:`.dumpfile`)."""
        from .dumpfile import dump_file

        return dump_file(os.fspath(path), options)

    def conversion(self) -> Any:
        """The RocketMQ side of ``segstore convert`` (one shared :class:`.conversion.RocketMQConversion`)."""
        from .conversion import RocketMQConversion  # loads segstore.convert only when a conversion runs

        return RocketMQConversion.shared()
