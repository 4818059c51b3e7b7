"""The KRaft metadata log: every metadata record type decoded round-trips, and its replay builds the image
the broker's loader builds.

Sources (apache/kafka 3.8.0):
- the record schemas: metadata/src/main/resources/common/metadata/*.json, each decoded type's file named
  in ``kafka_messages.METADATA_SCHEMA_FILES`` (TopicRecord.json, PartitionRecord.json, ConfigRecord.json,
  PartitionChangeRecord.json, RemoveTopicRecord.json, FeatureLevelRecord.json, ProducerIdsRecord.json,
  RegisterBrokerRecord.json, UnregisterBrokerRecord.json, FenceBrokerRecord.json, UnfenceBrokerRecord.json,
  BrokerRegistrationChangeRecord.json, NoOpRecord.json);
- the framing: server-common/.../common/serialization/AbstractApiMessageSerde.java (MetadataRecordSerde);
- the replay: metadata/.../image/MetadataDelta.java (replay of each type), TopicsDelta.java,
  ConfigurationsDelta.java (``replay(RemoveTopicRecord, name)`` drops the topic's configs),
  FeaturesDelta.java (level 0 removes a feature), ClusterDelta.java, metadata/PartitionRegistration.java
  (``merge``), image/loader/MetadataBatchLoader.java (Begin/End/AbortTransactionRecord);
- the loader order: image/loader/MetadataLoader.java (the newest snapshot, then the log after it).
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_messages import (
    ABORT_TRANSACTION,
    BEGIN_TRANSACTION,
    END_TRANSACTION,
    METADATA_SCHEMA_FILES,
    config,
    encode,
    feature,
    marker_value,
    metadata_value,
    no_op,
    partition,
    remove_topic,
    snapshot_bytes,
    topic,
)
from segstore_kafka import internal_topics as it
from segstore_kafka import kraft, schema

import segstore
from segstore.records import Message

T1 = "AAAAAAAAAAAAAAAAAAAAEQ"   # a topic id (Uuid.toString of 16 bytes ending 0x11)
T2 = "AAAAAAAAAAAAAAAAAAAAIg"

# -- every decoded record type round-trips ----------------------------------------------------------

_INTS = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
         "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _scalar(kind: str) -> st.SearchStrategy:
    if kind in _INTS:
        return st.integers(*_INTS[kind])
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "bool":
        return st.booleans()
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16).map(schema.uuid_text)
    if kind == "string":
        return st.text(max_size=12)
    if kind in ("bytes", "records"):
        return st.binary(max_size=12).map(lambda raw: base64.b64encode(raw).decode())
    raise AssertionError(kind)


def _field(f: schema.Field, version: int) -> st.SearchStrategy:
    if f.type.startswith("[]"):
        element = _struct(f.fields, version) if f.fields else _scalar(f.type[2:])
        value = st.lists(element, max_size=3)
    else:
        value = _scalar(f.type)
    low, high = schema.versions(f.nullable)
    return st.one_of(st.none(), value) if low <= version <= high else value


def _struct(fields: tuple[schema.Field, ...], version: int) -> st.SearchStrategy:
    wanted = {f.json_name: _field(f, version) for f in fields
              if schema.versions(f.versions)[0] <= version <= schema.versions(f.versions)[1]}
    return st.fixed_dictionaries(wanted)


@st.composite
def _record(draw, s: schema.Schema):
    low, high = s.valid_versions()
    version = draw(st.integers(low, high))
    return version, draw(_struct(s.fields, version))


def test_every_decoded_metadata_type_names_its_schema_file():
    assert sorted(METADATA_SCHEMA_FILES) == sorted(s.name for s in it.METADATA_RECORDS.values())
    assert METADATA_SCHEMA_FILES["TopicRecord"] == \
        "metadata/src/main/resources/common/metadata/TopicRecord.json"


@pytest.mark.parametrize("s", list(it.METADATA_RECORDS.values()), ids=lambda s: s.name)
@settings(max_examples=60)
@given(data=st.data())
def test_every_metadata_record_type_round_trips(s, data):
    version, record = data.draw(_record(s))
    value = metadata_value(s.name, record, version)
    decoded = it.decode_metadata_value(value)
    assert decoded == {"type": it.metadata_type_name(s.api_key), "version": version, "data": record}
    # and byte for byte back: the encoder writes what the reader read
    assert encode(s, decoded["data"], version) == value[3:]


# -- the replay ---------------------------------------------------------------------------------------

def _image(values: list[bytes]) -> kraft.MetadataImage:
    image = kraft.MetadataImage()
    for offset, value in enumerate(values):
        image.replay_value(value, offset)
    return image


def test_topics_partitions_and_configs_replay_as_the_metadata_delta_does():
    image = _image([
        feature("metadata.version", 20),
        topic("orders", T1), partition(T1, 0, [1, 2]), partition(T1, 1, [2, 1]),
        config("orders", "cleanup.policy", "compact"), config("orders", "retention.ms", "1000"),
        config("orders", "retention.ms", None),                  # a null value deletes the config
        metadata_value("PartitionChangeRecord", {
            "partitionId": 1, "topicId": T1, "isr": [2], "leader": 2, "replicas": None,
            "removingReplicas": None, "addingReplicas": None, "leaderRecoveryState": -1,
            "directories": None}, 1),
        metadata_value("PartitionChangeRecord", {
            "partitionId": 0, "topicId": T1, "isr": None, "leader": -2, "replicas": None,
            "removingReplicas": None, "addingReplicas": None, "leaderRecoveryState": -1}, 0),
        topic("gone", T2), config("gone", "cleanup.policy", "compact"), remove_topic(T2),
        no_op(),
    ])
    assert image.metadata_version == (20, "3.8-IV0")
    assert list(image.topics) == ["orders"]                     # RemoveTopicRecord dropped "gone"...
    assert image.topic_configs("gone") == {}                    # ...and its configs with it
    assert image.topic_configs("orders") == {"cleanup.policy": "compact"}
    orders = image.topics["orders"]
    assert orders.topic_id == T1 and sorted(orders.partitions) == [0, 1]
    changed = orders.partitions[1]
    assert (changed.leader, changed.isr, changed.replicas) == (2, [2], [2, 1])
    assert (changed.leader_epoch, changed.partition_epoch) == (1, 1)          # new leader: both bumped
    same = orders.partitions[0]
    assert (same.leader, same.leader_epoch, same.partition_epoch) == (1, 0, 1)  # -2: leader unchanged
    assert image.counts["NO_OP_RECORD"] == 1 and image.counts["TOPIC_RECORD"] == 2


def test_metadata_transactions_apply_at_their_end_and_vanish_when_aborted():
    image = _image([
        marker_value(BEGIN_TRANSACTION), topic("kept", T1), config("kept", "segment.ms", "5"),
        marker_value(END_TRANSACTION),
        marker_value(BEGIN_TRANSACTION), topic("dropped", T2), marker_value(ABORT_TRANSACTION),
        marker_value(BEGIN_TRANSACTION), config("kept", "segment.ms", "6"),   # still open at the end
    ])
    assert list(image.topics) == ["kept"]
    assert image.topic_configs("kept") == {"segment.ms": "5"}


def test_unknown_types_are_counted_and_bad_records_reported_not_raised():
    image = _image([
        bytes([1, 18, 0]) + b"\x00" * 5,       # an AccessControlEntryRecord: counted, not decoded
        bytes([1, 2, 0, 0]),                   # a TopicRecord cut short
        bytes([2, 2, 0]),                      # frame version 2
        topic("t", T1),
    ])
    assert image.not_decoded == {"ACCESS_CONTROL_ENTRY_RECORD": 1}
    assert len(image.problems) == 2 and "offset 1" in image.problems[0]
    assert list(image.topics) == ["t"]


def write_metadata_log(log_dir: Path, values: list[bytes], *, snapshot: list[bytes] | None = None,
                       snapshot_end: int = 0) -> None:
    """A ``__cluster_metadata-0`` partition holding ``values`` as records (no key), and a snapshot file."""
    with segstore.open(log_dir, format="kafka", mode="a") as store:
        store.append_batch([Message("__cluster_metadata", value, timestamp=1) for value in values])
    if snapshot is not None:
        name = f"{snapshot_end:020d}-{1:010d}.checkpoint"
        (log_dir / "__cluster_metadata-0" / name).write_bytes(snapshot_bytes(snapshot))


def test_the_newest_snapshot_then_the_log_after_it(tmp_path):
    """MetadataLoader: the snapshot is the image below its end offset; the log replays from there."""
    log = [topic("old", T1), config("old", "retention.ms", "1"),        # offsets 0, 1 (in the snapshot)
           topic("new", T2), config("old", "retention.ms", "2")]        # offsets 2, 3
    write_metadata_log(tmp_path, log, snapshot=[topic("old", T1), config("old", "retention.ms", "9"),
                                                config("old", "segment.ms", "7")], snapshot_end=2)
    image = kraft.load_image(str(tmp_path))
    assert image is not None and image.snapshot is not None and image.snapshot.end_offset == 2
    # segment.ms only the snapshot holds; retention.ms from the log's offset 3, after the snapshot
    assert image.topic_configs("old") == {"retention.ms": "2", "segment.ms": "7"}
    assert sorted(image.topics) == ["new", "old"] and image.last_offset == 3
    assert kraft.load_image(str(tmp_path / "nothing")) is None
