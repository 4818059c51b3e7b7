"""Test support: an encoder for Kafka's generated-message encoding, and writers of internal-topic logs.

The encoder is written here, independently of :mod:`segstore_kafka.schema` (the reader), from the same
rules (``clients/.../common/protocol/Writable``, ``ByteBufferAccessor``, ``MessageUtil``; the generated
``write`` methods of ``MessageGenerator``): non-flexible versions write int16/int32 lengths, flexible
versions unsigned-varint ``length + 1`` and, after the fields of the message and of every nested struct,
the tagged fields in tag order (count, then tag, size, bytes each), a field written there only where it
differs from its default.  Fields are given in the reader's JSON form (names with a lower-case first
letter, uuids as ``Uuid.toString`` text, bytes as base64).

The writers build what a broker leaves: ``__cluster_metadata-0`` batches of metadata records
(``MetadataRecordSerde``: frame version 1, apiKey, version, the record; no key), KRaft snapshot files,
and ``__consumer_offsets`` / ``__transaction_state`` records (int16 version + struct, key and value);
:func:`marked_transaction` a producer's transaction closed by a control batch of any record, as a
recovery test needs one; :func:`pre_0_10_1_segments` a partition's segments as a Kafka 0.10.0 broker
wrote them; :func:`v0_then_v2_segments` a log of v0 messages (no timestamps) continued by a 3.8 broker.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from segstore_kafka import batch as codec
from segstore_kafka import internal_topics as it
from segstore_kafka import schema
from segstore_kafka.varint import encode_unsigned_varint as uvarint

_FIXED = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "int64": ">q", "float64": ">d"}


def _uuid(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "==")
    assert len(raw) == 16
    return raw


def _length(n: int, flexible: bool, wide: bool) -> bytes:
    if flexible:
        return uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def _scalar(kind: str, value: Any, flexible: bool) -> bytes:
    if kind in _FIXED:
        return struct.pack(_FIXED[kind], value)
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind == "uuid":
        return _uuid(value)
    if kind == "string":
        if value is None:
            return _length(-1, flexible, False)
        raw = value.encode("utf-8")
        return _length(len(raw), flexible, False) + raw
    if kind in ("bytes", "records"):
        if value is None:
            return _length(-1, flexible, True)
        raw = base64.b64decode(value)
        return _length(len(raw), flexible, True) + raw
    raise ValueError(kind)


def _value(f: schema.Field, value: Any, version: int, flexible: bool) -> bytes:
    if f.type.startswith("[]"):
        if value is None:
            return _length(-1, flexible, True)
        out = [_length(len(value), flexible, True)]
        for item in value:
            out.append(_struct(f.fields, item, version, flexible) if f.fields
                       else _scalar(f.type[2:], item, flexible))
        return b"".join(out)
    return _scalar(f.type, value, flexible)


def _in(version: int, text: str) -> bool:
    low, high = schema.versions(text)
    return low <= version <= high


def _struct(fields: Iterable[schema.Field], data: dict[str, Any], version: int, flexible: bool) -> bytes:
    body: list[bytes] = []
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not _in(version, f.versions):
            continue
        value = data[f.json_name]
        if f.tag is not None and _in(version, f.tagged):
            if value != f.default:          # a tagged field is written only when not its default
                tagged.append((f.tag, _value(f, value, version, flexible)))
            continue
        if f.tag is not None and not flexible:
            continue
        body.append(_value(f, value, version, flexible))
    if flexible:
        body.append(uvarint(len(tagged)))
        for tag, raw in sorted(tagged):
            body.append(uvarint(tag) + uvarint(len(raw)) + raw)
    return b"".join(body)


def encode(s: schema.Schema, data: dict[str, Any], version: int) -> bytes:
    """The bytes of one ``s`` message of ``version`` holding ``data`` (the reader's JSON form)."""
    return _struct(s.fields, data, version, s.is_flexible(version))


# -- __cluster_metadata -------------------------------------------------------------------------

#: Each decoded metadata record type and the Kafka 3.8.0 schema file it follows.
METADATA_SCHEMA_FILES = {
    s.name: f"metadata/src/main/resources/common/metadata/{s.name}.json" for s in it.METADATA_RECORDS.values()
}
BEGIN_TRANSACTION, END_TRANSACTION, ABORT_TRANSACTION = 23, 24, 25


def metadata_value(name: str, data: dict[str, Any], version: int = 0) -> bytes:
    """A metadata record value (``MetadataRecordSerde``): frame version 1, apiKey, version, the record."""
    s = next(s for s in it.METADATA_RECORDS.values() if s.name == name)
    assert s.api_key is not None
    frame = uvarint(it.METADATA_FRAME_VERSION) + uvarint(s.api_key) + uvarint(version)
    return frame + encode(s, data, version)


def marker_value(api_key: int) -> bytes:
    """A Begin/End/AbortTransactionRecord (KIP-868) with no fields set: frame, apiKey, version 0, no tags."""
    return uvarint(it.METADATA_FRAME_VERSION) + uvarint(api_key) + uvarint(0) + uvarint(0)


def topic(name: str, topic_id: str) -> bytes:
    return metadata_value("TopicRecord", {"name": name, "topicId": topic_id})


def partition(topic_id: str, partition_id: int, replicas: list[int], leader: int | None = None) -> bytes:
    return metadata_value("PartitionRecord", {
        "partitionId": partition_id, "topicId": topic_id, "replicas": replicas, "isr": replicas,
        "removingReplicas": [], "addingReplicas": [], "leader": replicas[0] if leader is None else leader,
        "leaderRecoveryState": 0, "leaderEpoch": 0, "partitionEpoch": 0})


def config(resource: str, name: str, value: str | None, resource_type: int = 2) -> bytes:
    return metadata_value("ConfigRecord", {"resourceType": resource_type, "resourceName": resource,
                                           "name": name, "value": value})


def feature(name: str, level: int) -> bytes:
    return metadata_value("FeatureLevelRecord", {"name": name, "featureLevel": level})


def remove_topic(topic_id: str) -> bytes:
    return metadata_value("RemoveTopicRecord", {"topicId": topic_id})


def no_op() -> bytes:
    return metadata_value("NoOpRecord", {})


def snapshot_bytes(values: list[bytes], *, timestamp: int = 1_700_000_000_000) -> bytes:
    """A KRaft snapshot file's batches: the records at offsets 0.. in one batch (the header and footer
    control records a real snapshot carries are control batches the replay skips; one is written first)."""
    header = codec.encode_batch([(b"\x00\x00\x00\x04", b"\x00\x00\x00\x00" + b"\x00" * 8, timestamp, [])],
                                base_offset=0, is_control=True)
    return header + codec.encode_batch([(None, v, timestamp, []) for v in values], base_offset=1)


# -- __consumer_offsets / __transaction_state ---------------------------------------------------

def versioned(s: schema.Schema, version: int, data: dict[str, Any]) -> bytes:
    """An int16 version, then the struct (a coordinator record's key or value)."""
    return struct.pack(">h", version) + encode(s, data, version)


def offset_commit(group: str, topic: str, partition: int, offset: int | None, *, commit_ms: int = 0,
                  expire_ms: int | None = None, metadata: str = "", leader_epoch: int = -1,
                  value_version: int = 3) -> tuple[bytes, bytes | None]:
    """``OffsetCommitKey`` v1 and ``OffsetCommitValue`` (v1 with an expire timestamp; None: a tombstone)."""
    key = versioned(it.OFFSET_COMMIT_KEY, 1, {"group": group, "topic": topic, "partition": partition})
    if offset is None:
        return key, None
    if expire_ms is not None:
        value_version = 1
    data = {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata, "commitTimestamp": commit_ms,
            "expireTimestamp": -1 if expire_ms is None else expire_ms}
    return key, versioned(it.OFFSET_COMMIT_VALUE, value_version, data)


def subscription(topics: list[str]) -> str:
    data = {"topics": topics, "userData": None, "ownedPartitions": [], "generationId": -1, "rackId": None}
    return base64.b64encode(versioned(it.SUBSCRIPTION, 1, data)).decode()


def assignment(parts: dict[str, list[int]]) -> str:
    data = {"assignedPartitions": [{"topic": t, "partitions": p} for t, p in parts.items()], "userData": None}
    return base64.b64encode(versioned(it.ASSIGNMENT, 1, data)).decode()


def group_metadata(group: str, *, generation: int = 1, protocol: str | None = "range",
                   members: list[dict[str, Any]] | None = None, state_ms: int = -1,
                   protocol_type: str = "consumer", tombstone: bool = False) -> tuple[bytes, bytes | None]:
    """``GroupMetadataKey`` and ``GroupMetadataValue`` v3 (None: a tombstone).  ``members``: dicts with
    ``memberId``, ``clientId``, ``clientHost``, ``topics`` (subscribed) and ``assigned``
    (topic -> partitions), and ``groupInstanceId`` for a static member."""
    key = versioned(it.GROUP_METADATA_KEY, 2, {"group": group})
    if tombstone:
        return key, None
    rows = []
    for m in members or []:
        rows.append({"memberId": m["memberId"], "groupInstanceId": m.get("groupInstanceId"),
                     "clientId": m["clientId"], "clientHost": m["clientHost"], "rebalanceTimeout": 300000,
                     "sessionTimeout": 45000,
                     "subscription": subscription(m["topics"]), "assignment": assignment(m["assigned"])})
    leader = rows[0]["memberId"] if rows else None
    data = {"protocolType": protocol_type, "generation": generation, "protocol": protocol if rows else None,
            "leader": leader, "currentStateTimestamp": state_ms, "members": rows}
    return key, versioned(it.GROUP_METADATA_VALUE, 3, data)


def transaction(txn_id: str, *, producer_id: int, epoch: int = 0, state: str = "Ongoing",
                partitions: dict[str, list[int]] | None = None, timeout_ms: int = 60000, start_ms: int = 0,
                update_ms: int = 0, tombstone: bool = False) -> tuple[bytes, bytes | None]:
    """``TransactionLogKey`` v0 and ``TransactionLogValue`` v0 (None: a tombstone)."""
    key = versioned(it.TRANSACTION_LOG_KEY, 0, {"transactionalId": txn_id})
    if tombstone:
        return key, None
    data = {"producerId": producer_id, "producerEpoch": epoch, "transactionTimeoutMs": timeout_ms,
            "transactionStatus": it.TRANSACTION_STATES.index(state),
            "transactionPartitions": [{"topic": t, "partitionIds": p} for t, p in (partitions or {}).items()],
            "transactionLastUpdateTimestampMs": update_ms, "transactionStartTimestampMs": start_ms}
    return key, versioned(it.TRANSACTION_LOG_VALUE, 0, data)


def marked_transaction(key: bytes | None, value: bytes | None, *, compression: str = "none",
                       open_txn: bool = True, marker_transactional: bool = True
                       ) -> tuple[bytes, bytes, bytes]:
    """``(data, marker, after)``: producer 5's batch at offset 0 (transactional with ``open_txn``), a
    control batch of it at offset 1 holding one record of ``key`` and ``value`` (well-formed marker or
    not), compressed with ``compression``, and a plain batch at offset 2: a log the recovery reads the
    marker of."""
    data = codec.encode_batch([(b"k", b"v", 1)], base_offset=0, producer_id=5, producer_epoch=0,
                              base_sequence=0, is_transactional=open_txn)
    records = codec._encode_records_py([(key, value, 2)], None)[0]
    marker = codec._build(records, record_count=1, base_offset=1, last_offset_delta=0, base_timestamp=2,
                          max_timestamp=2, compression=compression, partition_leader_epoch=0, producer_id=5,
                          producer_epoch=0, base_sequence=-1, is_transactional=marker_transactional,
                          is_control=True, log_append=False)
    return data, marker, codec.encode_batch([(b"k2", b"v2", 3)], base_offset=2)


def pre_0_10_1_segments(part: Path) -> None:
    """Segments 0 and 4 of partition directory ``part`` as a Kafka 0.10.0 broker left them: four v1
    messages each (keys ``k0``..``k3``, value ``v``, timestamps from 1_600_000_000_000 + the offset), an
    empty ``.index`` and no ``.timeindex`` (0.10.1 brought it)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    for base in (0, 4):
        builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
        for i in range(4):
            builder.append(base + i, 1_600_000_000_000 + base + i, b"k%d" % i, b"v")
        (part / f"{base:020d}.log").write_bytes(bytes(builder.build()))
        (part / f"{base:020d}.index").write_bytes(b"")


def v0_then_v2_segments(part: Path) -> None:
    """Segment 0 of partition directory ``part``: four v0 messages (Kafka before 0.10.0: no timestamp,
    ``RecordBatch.NO_TIMESTAMP``), keys ``k0``..``k3``, an empty ``.index`` and ``.timeindex``; segment 4:
    one v2 batch of four records stamped 1_600_000_000_004 .. 007 (keys ``k4``..``k7``), and the
    ``.timeindex`` entry of its max timestamp and offset that a 3.8 broker writes at the roll and at
    close (``LogSegment.onBecomeInactiveSegment``, ``close``: ``timeIndex.maybeAppend(maxTimestampSoFar,
    shallowOffsetOfMaxTimestampSoFar, true)``)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(0, 0, 1 << 20)
    for i in range(4):
        builder.append(i, None, b"k%d" % i, b"v")
    (part / f"{0:020d}.log").write_bytes(bytes(builder.build()))
    stamps = [1_600_000_000_000 + i for i in range(4, 8)]
    (part / f"{4:020d}.log").write_bytes(codec.encode_batch(
        [(b"k%d" % (4 + i), b"v", stamp) for i, stamp in enumerate(stamps)], base_offset=4))
    for base, entry in ((0, b""), (4, struct.pack(">qi", stamps[-1], 3))):
        (part / f"{base:020d}.index").write_bytes(b"")
        (part / f"{base:020d}.timeindex").write_bytes(entry)
