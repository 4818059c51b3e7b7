"""The KRaft metadata image of a log directory: what ``__cluster_metadata-0`` says the cluster is.

A KRaft node keeps the cluster's metadata as a log of metadata records (the value of
each record, no key; framing in :mod:`.internal_topics`) in ``__cluster_metadata-0/``,
plus snapshots of the image at an offset (``%020d-%010d.checkpoint``: end offset,
epoch; record batches, a SnapshotHeader control record first and a SnapshotFooter
last).  The broker's ``MetadataLoader`` loads the newest snapshot, then replays the log
from the snapshot's end offset (Kafka 3.8.0 ``metadata/.../image/loader/MetadataLoader``,
``MetadataBatchLoader``; the records are applied by ``MetadataDelta.replay``):

- ``TopicRecord`` creates a topic (name, id); ``PartitionRecord`` a partition of it;
  ``PartitionChangeRecord`` merges into one (``PartitionRegistration.merge``: a field the
  record leaves null, or a leader of -2, is unchanged; a new leader bumps the leader epoch;
  every change bumps the partition epoch); ``RemoveTopicRecord`` deletes a topic and its
  configs (``ConfigurationsDelta.replay(RemoveTopicRecord, name)``);
- ``ConfigRecord`` sets (or, with a null value, deletes) one config of a resource (type 2:
  a topic, 4: a broker or, with an empty name, the cluster default);
- ``FeatureLevelRecord`` sets a feature's level (0 removes it; ``metadata.version`` is the
  level the metadata is written at);
- ``RegisterBrokerRecord``, ``UnregisterBrokerRecord``, ``FenceBrokerRecord``,
  ``UnfenceBrokerRecord`` and ``BrokerRegistrationChangeRecord`` (fencing 1 fence, -1
  unfence; controlled shutdown 1) keep the brokers; ``ProducerIdsRecord`` the next producer
  id block; ``NoOpRecord`` nothing;
- ``BeginTransactionRecord`` .. ``EndTransactionRecord`` apply the records between them
  together, ``AbortTransactionRecord`` drops them (KIP-868);
- the other types (ACLs, quotas, SCRAM credentials, delegation tokens, controller
  registrations, ZooKeeper migration state) are counted by name, not decoded.

Offline there is no quorum: every record in the files is applied (a node's log can end
past the committed offset by the records of an unfinished election).  A torn or corrupt
tail ends the replay there and is kept in :attr:`MetadataImage.problems`.

Reading: a snapshot file's batches through :func:`.columnar.decode`, the log through the
partition's column chunks; ``NoOpRecord`` values (most of a quiet cluster's log) and
control records are dropped with Arrow compute, so only the records that change the
image are decoded one by one.  Not thread-safe.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from segstore import files
from segstore.columns import project
from segstore.errors import CorruptDataError, SegstoreError

from . import columnar
from .dirnames import METADATA_PARTITION_DIR, METADATA_TOPIC, kraft_snapshot_id
from .partition import KafkaConfig, Partition

# pyarrow and the record schemas (.internal_topics, .schema: 5 ms) load where a metadata log is replayed
# (segstore info or a scan of a store without one: never)
if TYPE_CHECKING:
    import pyarrow as pa

#: ``Uuid.METADATA_TOPIC_ID``: the id of ``__cluster_metadata`` in its ``partition.metadata``.
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"

#: ``ConfigResource.Type`` ids in ``ConfigRecord.ResourceType``.
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
#: ``PartitionRegistration.NO_LEADER_CHANGE``
NO_LEADER_CHANGE = -2
#: ``BrokerRegistrationFencingChange``: FENCE 1, NONE 0, UNFENCE -1.
FENCE, UNFENCE = 1, -1
#: ``BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN``
IN_CONTROLLED_SHUTDOWN = 1
#: ``LeaderRecoveryState.changeTo``: -1 in a PartitionChangeRecord leaves it as it is.
NO_RECOVERY_STATE_CHANGE = -1

METADATA_VERSION_FEATURE = "metadata.version"
#: ``MetadataVersion`` (server-common, Kafka 3.9): feature level -> release and sub-version.
METADATA_VERSIONS = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1", 14: "3.6-IV2",
    15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0",
}

# apiKeys the replay needs by number (MetadataRecordType).
REGISTER_BROKER, UNREGISTER_BROKER, TOPIC, PARTITION, CONFIG, PARTITION_CHANGE = 0, 1, 2, 3, 4, 5
FENCE_BROKER, UNFENCE_BROKER, REMOVE_TOPIC, FEATURE_LEVEL, PRODUCER_IDS = 7, 8, 9, 12, 15
BROKER_REGISTRATION_CHANGE, NO_OP = 17, 20
BEGIN_TRANSACTION, END_TRANSACTION, ABORT_TRANSACTION = 23, 24, 25


@functools.cache
def _columns() -> pa.Schema:
    """The columns the replay reads."""
    from segstore.columns import KAFKA_SCHEMA

    return project(KAFKA_SCHEMA, ["offset", "value", "isControl"])


def _no_op_prefix() -> bytes:
    """A metadata value starts with its frame version and apiKey, one varint byte each below 128."""
    from .internal_topics import METADATA_FRAME_VERSION

    return bytes([METADATA_FRAME_VERSION, NO_OP])


@dataclass(slots=True)
class PartitionState:
    """One partition as the image holds it (``PartitionRegistration``)."""

    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int = 0
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicState:
    """One topic: its name, id and partitions."""

    name: str
    topic_id: str
    partitions: dict[int, PartitionState] = field(default_factory=dict)


@dataclass(slots=True)
class BrokerState:
    """One registered broker (``BrokerRegistration``)."""

    broker_id: int
    epoch: int
    incarnation_id: str
    fenced: bool
    in_controlled_shutdown: bool
    rack: str | None
    endpoints: list[str]


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """The snapshot a replay started from."""

    path: str
    end_offset: int
    epoch: int


def _check_frame(frame: int, path: str, pos: int) -> None:
    from .internal_topics import METADATA_FRAME_VERSION

    if frame != METADATA_FRAME_VERSION:
        raise CorruptDataError(f"expected metadata frame version {METADATA_FRAME_VERSION}, found {frame}",
                               path, pos)


class MetadataImage:
    """The cluster metadata image a replay of metadata records builds (see the module docstring)."""

    def __init__(self) -> None:
        self.topics_by_id: dict[str, TopicState] = {}
        #: ``(resource type, resource name)`` -> config name -> value
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.features: dict[str, int] = {}
        self.brokers: dict[int, BrokerState] = {}
        self.next_producer_id: int | None = None
        #: records applied, by type name (``TOPIC_RECORD``...)
        self.counts: Counter[str] = Counter()
        #: records of types this image counts but does not decode, by type name
        self.not_decoded: Counter[str] = Counter()
        #: the offset of the last record read (log or snapshot); -1 before any
        self.last_offset = -1
        self.snapshot: SnapshotInfo | None = None
        #: the metadata partition directory read (``__cluster_metadata-0``)
        self.partition_dir = METADATA_PARTITION_DIR
        #: ``path:pos: message`` lines: the records that did not decode (skipped)
        self.problems: list[str] = []
        #: why the replay stopped before the end of the files (a torn or corrupt tail), if it did
        self.stopped: str | None = None
        #: records of an open metadata transaction, applied at its EndTransactionRecord
        self._pending: list[tuple[int, int, dict[str, Any]]] | None = None

    # -- what the image says ---------------------------------------------------------------
    @property
    def topics(self) -> dict[str, TopicState]:
        """Topics by name."""
        return {t.name: t for t in self.topics_by_id.values()}

    def topic(self, name: str) -> TopicState | None:
        return next((t for t in self.topics_by_id.values() if t.name == name), None)

    def topic_configs(self, name: str) -> dict[str, str]:
        """The configs set on topic ``name`` (its non-default configs), by Kafka's names."""
        return dict(self.configs.get((TOPIC_RESOURCE, name), {}))

    @property
    def metadata_version(self) -> tuple[int, str] | None:
        """``(feature level, release name)`` of ``metadata.version``, None when no record set it."""
        level = self.features.get(METADATA_VERSION_FEATURE)
        if level is None:
            return None
        return level, METADATA_VERSIONS.get(level, f"level {level}")

    # -- replay ---------------------------------------------------------------------------
    def replay_value(self, value: bytes, offset: int, *, path: str = "<memory>", pos: int = 0) -> None:
        """Apply one metadata record value (frame version, apiKey, version, the record).

        A record that does not decode is kept in :attr:`problems` and skipped (the replay goes on).
        """
        from .internal_topics import METADATA_RECORDS
        from .schema import read, read_uvarint

        self.last_offset = offset
        try:
            frame, at = read_uvarint(value, 0, path=path, base_pos=pos, what="the frame version")
            _check_frame(frame, path, pos)
            api_key, at = read_uvarint(value, at, path=path, base_pos=pos, what="the record type")
            version, at = read_uvarint(value, at, path=path, base_pos=pos, what="the record version")
            schema = METADATA_RECORDS.get(api_key)
            if schema is None:
                self._control_or_count(api_key)
                return
            data, _ = read(schema, memoryview(value)[at:], version, path=path, base_pos=pos + at)
        except CorruptDataError as err:
            self.problems.append(f"{err} (record at offset {offset})")
            return
        if self._pending is not None:
            self._pending.append((api_key, version, data))
        else:
            self.replay(api_key, data)

    def _control_or_count(self, api_key: int) -> None:
        """A record without a schema here: the metadata transaction markers, else counted by name."""
        from .internal_topics import metadata_type_name

        name = metadata_type_name(api_key)
        if api_key == BEGIN_TRANSACTION:
            self._pending = []
        elif api_key == END_TRANSACTION:
            pending, self._pending = self._pending or [], None
            for key, _version, data in pending:
                self.replay(key, data)
        elif api_key == ABORT_TRANSACTION:
            self._pending = None
        else:
            self.not_decoded[name] += 1
            return
        self.counts[name] += 1

    def replay(self, api_key: int, data: dict[str, Any]) -> None:
        """Apply one decoded record (``data`` as :func:`.schema.read` gives it)."""
        from .internal_topics import metadata_type_name

        self.counts[metadata_type_name(api_key)] += 1
        if api_key == TOPIC:
            self.topics_by_id[data["topicId"]] = TopicState(data["name"], data["topicId"])
        elif api_key == PARTITION:
            topic = self.topics_by_id.get(data["topicId"])
            if topic is not None:
                topic.partitions[data["partitionId"]] = PartitionState(
                    list(data["replicas"]), list(data["isr"]), data["leader"], data["leaderEpoch"],
                    data["partitionEpoch"], data["leaderRecoveryState"], list(data["removingReplicas"]),
                    list(data["addingReplicas"]))
        elif api_key == PARTITION_CHANGE:
            self._change_partition(data)
        elif api_key == REMOVE_TOPIC:
            gone = self.topics_by_id.pop(data["topicId"], None)
            if gone is not None:
                self.configs.pop((TOPIC_RESOURCE, gone.name), None)
        elif api_key == CONFIG:
            key = (data["resourceType"], data["resourceName"])
            if data["value"] is None:
                self.configs.get(key, {}).pop(data["name"], None)
                if not self.configs.get(key, True):
                    del self.configs[key]
            else:
                self.configs.setdefault(key, {})[data["name"]] = data["value"]
        elif api_key == FEATURE_LEVEL:
            if data["featureLevel"] == 0 and data["name"] != METADATA_VERSION_FEATURE:
                self.features.pop(data["name"], None)
            else:
                self.features[data["name"]] = data["featureLevel"]
        elif api_key == PRODUCER_IDS:
            self.next_producer_id = data["nextProducerId"]
        else:
            self._replay_broker(api_key, data)

    def _change_partition(self, data: dict[str, Any]) -> None:
        topic = self.topics_by_id.get(data["topicId"])
        part = topic.partitions.get(data["partitionId"]) if topic is not None else None
        if part is None:
            return
        for name, attr in (("replicas", "replicas"), ("isr", "isr"),
                           ("removingReplicas", "removing_replicas"), ("addingReplicas", "adding_replicas")):
            if data[name] is not None:
                setattr(part, attr, list(data[name]))
        if data["leader"] != NO_LEADER_CHANGE:
            part.leader = data["leader"]
            part.leader_epoch += 1
        if data["leaderRecoveryState"] != NO_RECOVERY_STATE_CHANGE:
            part.leader_recovery_state = data["leaderRecoveryState"]
        part.partition_epoch += 1

    def _replay_broker(self, api_key: int, data: dict[str, Any]) -> None:
        if api_key == REGISTER_BROKER:
            self.brokers[data["brokerId"]] = BrokerState(
                data["brokerId"], data["brokerEpoch"], data["incarnationId"], data["fenced"],
                data.get("inControlledShutdown", False), data["rack"],
                [f"{e['name']}://{e['host']}:{e['port']}" for e in data["endPoints"]])
        elif api_key == UNREGISTER_BROKER:
            self.brokers.pop(data["brokerId"], None)
        elif api_key in (FENCE_BROKER, UNFENCE_BROKER):
            broker = self.brokers.get(data["id"])
            if broker is not None:
                broker.fenced = api_key == FENCE_BROKER
        elif api_key == BROKER_REGISTRATION_CHANGE:
            broker = self.brokers.get(data["brokerId"])
            if broker is not None:
                if data["fenced"] in (FENCE, UNFENCE):
                    broker.fenced = data["fenced"] == FENCE
                if data.get("inControlledShutdown") == IN_CONTROLLED_SHUTDOWN:
                    broker.in_controlled_shutdown = True

    def replay_rows(self, batch: pa.RecordBatch, *, path: str, from_offset: int = 0) -> None:
        """Apply the metadata records of a column batch (``offset``, ``value``, ``isControl``) from
        ``from_offset`` on: control records and ``NoOpRecord`` values are dropped in Arrow first."""
        import pyarrow as pa
        import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs

        from .internal_topics import metadata_type_name

        no_op_prefix = _no_op_prefix()

        last = int(batch.column("offset")[-1].as_py()) if batch.num_rows else self.last_offset
        values = batch.column("value")
        keep = pc.and_(pc.invert(batch.column("isControl")),
                       pc.greater_equal(batch.column("offset"), pa.scalar(from_offset, pa.int64())))
        no_op = pc.equal(pc.binary_slice(values, 0, len(no_op_prefix)),
                         pa.scalar(no_op_prefix, pa.binary()))
        dropped = pc.sum(pc.and_(keep, pc.fill_null(no_op, False))).as_py()
        if dropped:
            self.counts[metadata_type_name(NO_OP)] += dropped
        rest = batch.filter(pc.and_(keep, pc.invert(pc.fill_null(no_op, False))))
        for offset, value in zip(rest.column("offset").to_pylist(), rest.column("value").to_pylist(),
                                 strict=True):
            if value is None:
                self.problems.append(f"{path}: expected a metadata record value, found null "
                                     f"(record at offset {offset})")
                continue
            self.replay_value(value, offset, path=path)
        self.last_offset = max(self.last_offset, last)

    # -- what info shows --------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The image for ``info``: metadata version, features, brokers, counts (topics separately)."""
        version = self.metadata_version
        return {
            "metadata_version": version[1] if version else None,
            "metadata_version_level": version[0] if version else None,
            "features": dict(sorted(self.features.items())),
            "metadata_offset": self.last_offset,
            "snapshot": None if self.snapshot is None else os.path.basename(self.snapshot.path),
            "brokers": [{"id": b.broker_id, "epoch": b.epoch, "fenced": b.fenced, "rack": b.rack,
                         "endpoints": ",".join(b.endpoints)} for _, b in sorted(self.brokers.items())],
            "next_producer_id": self.next_producer_id,
            "records": dict(sorted(self.counts.items())),
            "records_not_decoded": dict(sorted(self.not_decoded.items())),
            "records_not_read": len(self.problems),
            "replay_stopped": self.stopped,
        }


def snapshots(partition_dir: str) -> list[tuple[int, int, str]]:
    """The KRaft snapshots of a metadata partition directory: ``(end offset, epoch, path)``, oldest first."""
    found = []
    for name in files.list_dir(partition_dir):
        path = os.path.join(partition_dir, name)
        snapshot_id = kraft_snapshot_id(path)
        if snapshot_id is not None:
            found.append((*snapshot_id, path))
    return sorted(found)


def _file_rows(path: str) -> Iterator[pa.RecordBatch]:
    mapped = files.MappedFile(path)
    try:
        for chunk in columnar.decode(mapped.view(), path=path, want=columnar.WANT_VALUE):
            yield columnar.to_arrow(chunk, _columns(), topic=METADATA_TOPIC, partition=0, segment=0)
    finally:
        mapped.close()


def replay_batches(image: MetadataImage, batches: Iterable[pa.RecordBatch], *, path: str,
                   from_offset: int = 0) -> None:
    """Apply column batches in order; a torn or corrupt tail ends the replay and becomes a problem."""
    try:
        for batch in batches:
            image.replay_rows(batch, path=path, from_offset=from_offset)
    except SegstoreError as err:
        image.stopped = str(err)


def load_image(log_dir: str) -> MetadataImage | None:
    """The metadata image of a KRaft log directory (None without ``__cluster_metadata-0/``): the newest
    snapshot, then the log from its end offset.  ``O(records)``; reads, never writes."""
    partition_dir = os.path.join(log_dir, METADATA_PARTITION_DIR)
    if not files.is_dir(partition_dir):
        return None
    image = MetadataImage()
    image.partition_dir = partition_dir
    start = 0
    found = snapshots(partition_dir)
    if found:
        end, epoch, path = found[-1]
        image.snapshot = SnapshotInfo(path, end, epoch)
        replay_batches(image, _file_rows(path), path=path)
        start = end
    part = Partition(partition_dir, KafkaConfig(), writable=False)
    try:
        rows = (columnar.to_arrow(chunk, _columns(), topic=METADATA_TOPIC, partition=0, segment=seg.base)
                for seg, chunk in part.column_chunks(columnar.WANT_VALUE))
        replay_batches(image, rows, path=partition_dir, from_offset=start)
    finally:
        part.close()
    return image
