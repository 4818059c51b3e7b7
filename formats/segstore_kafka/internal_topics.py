"""Decoders for the records of Kafka's internal topics, as ``kafka-dump-log`` prints them.

Record layouts (Kafka 3.8.0; schemas transcribed from the JSON message definitions named
below, read by :mod:`.schema`)::

    __consumer_offsets  (group-coordinator/src/main/resources/common/message/*.json;
                         GroupCoordinatorRecordSerde: the key's version names the record type)
        key    int16 version | key struct      0, 1 OffsetCommitKey; 2 GroupMetadataKey;
                                               3..8 the KIP-848 consumer-group records (ConsumerGroup*Key)
        value  int16 version | value struct    OffsetCommitValue v0-4 / GroupMetadataValue v0-4
                                               (flexible from v4); a null value is a tombstone
    __transaction_state (core/src/main/resources/common/message/TransactionLog{Key,Value}.json;
                         kafka.coordinator.transaction.TransactionLog)
        key    int16 version (0) | TransactionalId string
        value  int16 version | TransactionLogValue v0-1 (flexible from v1); null: tombstone
    __cluster_metadata  (metadata/src/main/resources/common/metadata/*.json;
                         server-common AbstractApiMessageSerde)
        value  unsigned varint frame version (1) | unsigned varint apiKey | unsigned varint
               version | the record (every metadata record is flexible from v0); no key

Each ``decode_*`` takes a record's key and value bytes and returns ``(key_text, value_text)``
in ``DumpLogSegments``' parsers' shapes (JSON text, ``<DELETE>`` for a tombstone, ``None``
where the tool prints nothing); a record that does not decode gives the tool's
``Error at offset N, skipping. ...`` text rather than an exception, as the tool does.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from segstore.errors import CorruptDataError

from .schema import Field, Schema, read, read_int16, read_uvarint

VERSION_SIZE = 2  # the int16 version in front of every coordinator key and value
TOMBSTONE = "<DELETE>"

# -- __consumer_offsets ---------------------------------------------------------------------------

OFFSET_COMMIT_KEY = Schema(
    "OffsetCommitKey",
    "0-1",
    "none",
    (
        Field("group", "string", "0-1"),
        Field("topic", "string", "0-1"),
        Field("partition", "int32", "0-1"),
    ),
)
OFFSET_COMMIT_VALUE = Schema(
    "OffsetCommitValue",
    "0-4",
    "4+",
    (
        Field("offset", "int64", "0+"),
        Field("leaderEpoch", "int32", "3+", default=-1),
        Field("metadata", "string", "0+"),
        Field("commitTimestamp", "int64", "0+"),
        Field("expireTimestamp", "int64", "1", default=-1),
    ),
)
GROUP_METADATA_KEY = Schema("GroupMetadataKey", "2", "none", (Field("group", "string", "2"),))
MEMBER_METADATA = (
    Field("memberId", "string", "0+"),
    Field("groupInstanceId", "string", "3+", nullable="3+"),
    Field("clientId", "string", "0+"),
    Field("clientHost", "string", "0+"),
    Field("rebalanceTimeout", "int32", "1+", default=-1),
    Field("sessionTimeout", "int32", "0+"),
    Field("subscription", "bytes", "0+"),
    Field("assignment", "bytes", "0+"),
)
GROUP_METADATA_VALUE = Schema(
    "GroupMetadataValue",
    "0-4",
    "4+",
    (
        Field("protocolType", "string", "0+"),
        Field("generation", "int32", "0+"),
        Field("protocol", "string", "0+", nullable="0+"),
        Field("leader", "string", "0+", nullable="0+"),
        Field("currentStateTimestamp", "int64", "2+", default=-1),
        Field("members", "[]MemberMetadata", "0+", fields=MEMBER_METADATA),
    ),
)
# The KIP-848 consumer-group records (Kafka 3.8.0 group-coordinator ConsumerGroup*{Key,Value}.json): keys are
# not flexible and their version is the record type; values are flexible from v0.
_TOPIC_PARTITIONS = (Field("TopicId", "uuid"), Field("Partitions", "[]int32"))
CONSUMER_GROUP_RECORDS: dict[int, tuple[Schema, Schema]] = {
    3: (
        Schema("ConsumerGroupMetadataKey", "3", "none", (Field("GroupId", "string", "3"),)),
        Schema("ConsumerGroupMetadataValue", "0", "0+", (Field("Epoch", "int32"),)),
    ),
    4: (
        Schema("ConsumerGroupPartitionMetadataKey", "4", "none", (Field("GroupId", "string", "4"),)),
        Schema(
            "ConsumerGroupPartitionMetadataValue",
            "0",
            "0+",
            (
                Field(
                    "Topics",
                    "[]TopicMetadata",
                    fields=(
                        Field("TopicId", "uuid"),
                        Field("TopicName", "string"),
                        Field("NumPartitions", "int32"),
                        Field(
                            "PartitionMetadata",
                            "[]PartitionMetadata",
                            fields=(Field("Partition", "int32"), Field("Racks", "[]string")),
                        ),
                    ),
                ),
            ),
        ),
    ),
    5: (
        Schema(
            "ConsumerGroupMemberMetadataKey",
            "5",
            "none",
            (Field("GroupId", "string", "5"), Field("MemberId", "string", "5")),
        ),
        # ClassicMemberMetadata (tag 0, a nullable struct) is not read: it shows in _unknownTaggedFields.
        Schema(
            "ConsumerGroupMemberMetadataValue",
            "0",
            "0+",
            (
                Field("InstanceId", "string", nullable="0+"),
                Field("RackId", "string", nullable="0+"),
                Field("ClientId", "string"),
                Field("ClientHost", "string"),
                Field("SubscribedTopicNames", "[]string"),
                Field("SubscribedTopicRegex", "string", nullable="0+"),
                Field("RebalanceTimeoutMs", "int32", default=-1),
                Field("ServerAssignor", "string", nullable="0+"),
            ),
        ),
    ),
    6: (
        Schema("ConsumerGroupTargetAssignmentMetadataKey", "6", "none", (Field("GroupId", "string", "6"),)),
        Schema("ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", (Field("AssignmentEpoch", "int32"),)),
    ),
    7: (
        Schema(
            "ConsumerGroupTargetAssignmentMemberKey",
            "7",
            "none",
            (Field("GroupId", "string", "7"), Field("MemberId", "string", "7")),
        ),
        Schema(
            "ConsumerGroupTargetAssignmentMemberValue",
            "0",
            "0+",
            (Field("TopicPartitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS),),
        ),
    ),
    8: (
        Schema(
            "ConsumerGroupCurrentMemberAssignmentKey",
            "8",
            "none",
            (Field("GroupId", "string", "8"), Field("MemberId", "string", "8")),
        ),
        Schema(
            "ConsumerGroupCurrentMemberAssignmentValue",
            "0",
            "0+",
            (
                Field("MemberEpoch", "int32"),
                Field("PreviousMemberEpoch", "int32"),
                Field("State", "int8"),
                Field("AssignedPartitions", "[]TopicPartitions", fields=_TOPIC_PARTITIONS),
                Field("PartitionsPendingRevocation", "[]TopicPartitions", fields=_TOPIC_PARTITIONS),
            ),
        ),
    ),
}
#: key version -> (key schema, value schema) for the records this module decodes.
OFFSETS_RECORDS: dict[int, tuple[Schema, Schema]] = {
    0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    **CONSUMER_GROUP_RECORDS,
}

# -- __transaction_state ----------------------------------------------------------------------------

TRANSACTION_LOG_KEY = Schema("TransactionLogKey", "0", "none", (Field("TransactionalId", "string", "0"),))
TRANSACTION_LOG_VALUE = Schema(
    "TransactionLogValue",
    "0-1",
    "1+",
    (
        Field("ProducerId", "int64", "0+"),
        Field("ProducerEpoch", "int16", "0+"),
        Field("TransactionTimeoutMs", "int32", "0+"),
        Field("TransactionStatus", "int8", "0+"),
        Field(
            "TransactionPartitions",
            "[]PartitionsSchema",
            "0+",
            nullable="0+",
            fields=(
                Field("Topic", "string", "0+"),
                Field("PartitionIds", "[]int32", "0+"),
            ),
        ),
        Field("TransactionLastUpdateTimestampMs", "int64", "0+"),
        Field("TransactionStartTimestampMs", "int64", "0+"),
    ),
)
#: ``TransactionState.fromId`` (core kafka/coordinator/transaction/TransactionMetadata.scala).
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)

# -- KRaft control records ----------------------------------------------------------------------------

#: The control records of the KRaft log and snapshots that ``DumpLogSegments`` (3.8) prints as JSON (their
#: ``*JsonConverter``), by control type: the label it prints and the record's schema
#: (clients/src/main/resources/common/message/*Record.json; ``ControlRecordUtils`` reads each value
#: as version 0, its ``*_CURRENT_VERSION``).  LEADER_CHANGE it prints by name only.
_ENDPOINT = (Field("Name", "string"), Field("Host", "string"), Field("Port", "uint16"))
_KRAFT_VERSION_FEATURE = (Field("MinSupportedVersion", "int16"), Field("MaxSupportedVersion", "int16"))
_VOTER = (Field("VoterId", "int32"), Field("VoterDirectoryId", "uuid"),
          Field("Endpoints", "[]Endpoint", fields=_ENDPOINT),
          Field("KRaftVersionFeature", "KRaftVersionFeature", fields=_KRAFT_VERSION_FEATURE))
CONTROL_RECORDS: dict[str, tuple[str, Schema]] = {
    "SNAPSHOT_HEADER": ("SnapshotHeader", Schema("SnapshotHeaderRecord", "0", "0+", (
        Field("Version", "int16"), Field("LastContainedLogTimestamp", "int64")))),
    "SNAPSHOT_FOOTER": ("SnapshotFooter", Schema("SnapshotFooterRecord", "0", "0+",
                                                 (Field("Version", "int16"),))),
    "KRAFT_VERSION": ("KRaftVersion", Schema("KRaftVersionRecord", "0", "0+", (
        Field("Version", "int16"), Field("KRaftVersion", "int16")))),
    "KRAFT_VOTERS": ("KRaftVoters", Schema("VotersRecord", "0", "0+", (
        Field("Version", "int16"), Field("Voters", "[]Voter", fields=_VOTER)))),
}


def decode_control_record(kind: str, value: bytes | None, *, path: str = "<memory>",
                          pos: int = 0) -> tuple[str, str] | None:
    """``(label, JSON)`` of a KRaft control record as ``DumpLogSegments`` prints it (``SnapshotHeader
    {"version":0,"lastContainedLogTimestamp":...}``); None for a control type it prints by name.

    :raises CorruptDataError: a value that does not read as the record.
    """
    found = CONTROL_RECORDS.get(kind)
    if found is None:
        return None
    label, schema = found
    if value is None:
        raise CorruptDataError(f"expected a {schema.name} value, found null", path, pos)
    data, _ = read(schema, memoryview(value), 0, path=path, base_pos=pos, whole=False)
    data.pop("_unknownTaggedFields", None)      # the generated JSON converters write known fields only
    return label, _json(data)


# -- __cluster_metadata -----------------------------------------------------------------------------

METADATA_FRAME_VERSION = 1
_BROKER_ENDPOINT = (
    Field("Name", "string"),
    Field("Host", "string"),
    Field("Port", "uint16"),
    Field("SecurityProtocol", "int16"),
)
_BROKER_FEATURE = (
    Field("Name", "string"),
    Field("MinSupportedVersion", "int16"),
    Field("MaxSupportedVersion", "int16"),
)
METADATA_RECORDS: dict[int, Schema] = {
    s.api_key: s
    for s in (
        Schema(
            "RegisterBrokerRecord",
            "0-3",
            "0+",
            api_key=0,
            fields=(
                Field("BrokerId", "int32"),
                Field("IsMigratingZkBroker", "bool", "2+", default=False),
                Field("IncarnationId", "uuid"),
                Field("BrokerEpoch", "int64"),
                Field("EndPoints", "[]BrokerEndpoint", fields=_BROKER_ENDPOINT),
                Field("Features", "[]BrokerFeature", fields=_BROKER_FEATURE),
                Field("Rack", "string", nullable="0+"),
                Field("Fenced", "bool", default=True),
                Field("InControlledShutdown", "bool", "1+", default=False),
                Field("LogDirs", "[]uuid", "3+", tag=0, tagged="3+", default=[]),
            ),
        ),
        Schema(
            "UnregisterBrokerRecord",
            "0",
            "0+",
            api_key=1,
            fields=(
                Field("BrokerId", "int32"),
                Field("BrokerEpoch", "int64"),
            ),
        ),
        Schema(
            "TopicRecord",
            "0",
            "0+",
            api_key=2,
            fields=(
                Field("Name", "string"),
                Field("TopicId", "uuid"),
            ),
        ),
        Schema(
            "PartitionRecord",
            "0-2",
            "0+",
            api_key=3,
            fields=(
                Field("PartitionId", "int32", default=-1),
                Field("TopicId", "uuid"),
                Field("Replicas", "[]int32"),
                Field("Isr", "[]int32"),
                Field("RemovingReplicas", "[]int32"),
                Field("AddingReplicas", "[]int32"),
                Field("Leader", "int32", default=-1),
                Field("LeaderRecoveryState", "int8", tag=0, tagged="0+", default=0),
                Field("LeaderEpoch", "int32", default=-1),
                Field("PartitionEpoch", "int32", default=-1),
                Field("Directories", "[]uuid", "1+"),
                Field("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=1, tagged="2+"),
                Field("LastKnownElr", "[]int32", "2+", nullable="2+", tag=2, tagged="2+"),
            ),
        ),
        Schema(
            "ConfigRecord",
            "0",
            "0+",
            api_key=4,
            fields=(
                Field("ResourceType", "int8"),
                Field("ResourceName", "string"),
                Field("Name", "string"),
                Field("Value", "string", nullable="0+"),
            ),
        ),
        Schema(
            "PartitionChangeRecord",
            "0-2",
            "0+",
            api_key=5,
            fields=(
                Field("PartitionId", "int32", default=-1),
                Field("TopicId", "uuid"),
                Field("Isr", "[]int32", nullable="0+", tag=0, tagged="0+"),
                Field("Leader", "int32", tag=1, tagged="0+", default=-2),
                Field("Replicas", "[]int32", nullable="0+", tag=2, tagged="0+"),
                Field("RemovingReplicas", "[]int32", nullable="0+", tag=3, tagged="0+"),
                Field("AddingReplicas", "[]int32", nullable="0+", tag=4, tagged="0+"),
                Field("LeaderRecoveryState", "int8", tag=5, tagged="0+", default=-1),
                Field("Directories", "[]uuid", "1+", nullable="1+", tag=8, tagged="1+"),
                Field("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=6, tagged="2+"),
                Field("LastKnownElr", "[]int32", "2+", nullable="2+", tag=7, tagged="2+"),
            ),
        ),
        Schema(
            "FenceBrokerRecord", "0", "0+", api_key=7, fields=(Field("Id", "int32"), Field("Epoch", "int64"))
        ),
        Schema(
            "UnfenceBrokerRecord",
            "0",
            "0+",
            api_key=8,
            fields=(Field("Id", "int32"), Field("Epoch", "int64")),
        ),
        Schema("RemoveTopicRecord", "0", "0+", api_key=9, fields=(Field("TopicId", "uuid"),)),
        Schema(
            "FeatureLevelRecord",
            "0",
            "0+",
            api_key=12,
            fields=(
                Field("Name", "string"),
                Field("FeatureLevel", "int16"),
            ),
        ),
        Schema(
            "ProducerIdsRecord",
            "0",
            "0+",
            api_key=15,
            fields=(
                Field("BrokerId", "int32"),
                Field("BrokerEpoch", "int64", default=-1),
                Field("NextProducerId", "int64"),
            ),
        ),
        Schema(
            "BrokerRegistrationChangeRecord",
            "0-2",
            "0+",
            api_key=17,
            fields=(
                Field("BrokerId", "int32"),
                Field("BrokerEpoch", "int64"),
                Field("Fenced", "int8", tag=0, tagged="0+", default=0),
                Field("InControlledShutdown", "int8", "1+", tag=1, tagged="1+", default=0),
                Field("LogDirs", "[]uuid", "2+", tag=2, tagged="2+", default=[]),
            ),
        ),
        Schema("NoOpRecord", "0", "0+", api_key=20, fields=()),
        # a KRaft cluster's first controller writes one (ZK migration state 0, None) with its first metadata
        Schema("ZkMigrationStateRecord", "0", "0+", api_key=21, fields=(Field("ZkMigrationState", "int8"),)),
    )
    if s.api_key is not None   # every metadata record schema has one
}
#: Every metadata record type of Kafka 3.8.0 (apiKey → message name), for the fallback of the types
#: without a schema here.
METADATA_RECORD_NAMES = {
    0: "RegisterBrokerRecord",
    1: "UnregisterBrokerRecord",
    2: "TopicRecord",
    3: "PartitionRecord",
    4: "ConfigRecord",
    5: "PartitionChangeRecord",
    7: "FenceBrokerRecord",
    8: "UnfenceBrokerRecord",
    9: "RemoveTopicRecord",
    10: "DelegationTokenRecord",
    11: "UserScramCredentialRecord",
    12: "FeatureLevelRecord",
    14: "ClientQuotaRecord",
    15: "ProducerIdsRecord",
    17: "BrokerRegistrationChangeRecord",
    18: "AccessControlEntryRecord",
    19: "RemoveAccessControlEntryRecord",
    20: "NoOpRecord",
    21: "ZkMigrationStateRecord",     # ZkMigrationRecord.json's "name"
    22: "RemoveUserScramCredentialRecord",
    23: "BeginTransactionRecord",
    24: "EndTransactionRecord",
    25: "AbortTransactionRecord",
    26: "RemoveDelegationTokenRecord",
    27: "RegisterControllerRecord",
}


def metadata_type_name(api_key: int) -> str:
    """``MetadataRecordType.toString()``: the message name in upper snake case (``MessageGenerator.
    toSnakeCase``: an underscore before a capital that follows a lower-case letter)."""
    name = METADATA_RECORD_NAMES.get(api_key)
    if name is None:
        return f"UNKNOWN_{api_key}"
    out = []
    previous_capital = True
    for char in name:
        if char.isupper() and not previous_capital:
            out.append("_")
        previous_capital = char.isupper()
        out.append(char.upper())
    return "".join(out)


#: A ``\uXXXX`` escape json.dumps wrote (one not itself escaped: an even run of backslashes before it).
_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-f]{4})")


def _json(obj: Any) -> str:
    r"""Compact JSON as Jackson's ``JsonNode.toString`` writes it (no spaces, insertion order; a control
    character other than ``\b \t \n \f \r`` as ``\u001F``, upper-case hex: Jackson's ``CharTypes``
    hex digits, where json.dumps writes ``\u001f``)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    if "\\u" not in text:
        return text
    return _HEX_ESCAPE.sub(lambda m: f"{m.group(1)}\\u{m.group(2).upper()}", text)


def _versioned(buf: bytes, what: str, path: str, pos: int) -> tuple[int, memoryview]:
    version = read_int16(buf, 0, path=path, base_pos=pos, what=f"the {what} version")
    return version, memoryview(buf)[VERSION_SIZE:]


def decode_offsets(
    key: bytes | None, value: bytes | None, offset: int, *, path: str = "<memory>", pos: int = 0
) -> tuple[str | None, str | None]:
    """A ``__consumer_offsets`` record as ``--offsets-decoder`` prints it: key
    ``{"type":"V","data":{...}}``, value ``{"version":"V","data":{...}}`` or ``<DELETE>``."""
    if key is None:
        return (
            f"Error at offset {offset}, skipping. Failed to decode message at offset {offset} using offset "
            "topic decoder (message had a missing key)",
            None,
        )
    try:
        key_version, key_body = _versioned(key, "key", path, pos)
        schemas = OFFSETS_RECORDS.get(key_version)
        if schemas is None:
            return f"Unknown record type {key_version} at offset {offset}, skipping.", None
        # CoordinatorRecordSerde.readMessage reads the fields and never looks at bytes after them
        key_data, _ = read(schemas[0], key_body, key_version, path=path, base_pos=pos + VERSION_SIZE,
                           whole=False)
        key_text = _json({"type": str(key_version), "data": key_data})
        if value is None:
            return key_text, TOMBSTONE
        value_version, value_body = _versioned(value, "value", path, pos)
        value_data, _ = read(schemas[1], value_body, value_version, path=path, base_pos=pos + VERSION_SIZE,
                             whole=False)
        if value_data.get("protocolType") == "consumer":
            for member in value_data.get("members") or ():
                decode_consumer_protocol(member)
        return key_text, _json({"version": str(value_version), "data": value_data})
    except CorruptDataError as err:
        return f"Error at offset {offset}, skipping. {err.message}", None


# ConsumerProtocolSubscription / ConsumerProtocolAssignment (clients/src/main/resources/common/message/),
# the bytes of a "consumer" group's members: int16 version, then the struct (flexible from none).
SUBSCRIPTION = Schema(
    "ConsumerProtocolSubscription",
    "0-3",
    "none",
    (
        Field("Topics", "[]string", "0+"),
        Field("UserData", "bytes", "0+", nullable="0+"),
        Field(
            "OwnedPartitions",
            "[]TopicPartition",
            "1+",
            fields=(
                Field("Topic", "string", "1+"),
                Field("Partitions", "[]int32", "1+"),
            ),
        ),
        Field("GenerationId", "int32", "2+", default=-1),
        Field("RackId", "string", "3+", nullable="3+"),
    ),
)
ASSIGNMENT = Schema(
    "ConsumerProtocolAssignment",
    "0-3",
    "none",
    (
        Field(
            "AssignedPartitions",
            "[]TopicPartition",
            "0+",
            fields=(
                Field("Topic", "string", "0+"),
                Field("Partitions", "[]int32", "0+"),
            ),
        ),
        Field("UserData", "bytes", "0+", nullable="0+"),
    ),
)


def decode_consumer_protocol(member: dict[str, Any]) -> None:
    """Replace a consumer group member's subscription and assignment bytes by their decoded form, keeping
    the bytes where they do not decode (as ``DumpLogSegments`` does)."""
    for name, schema in (("subscription", SUBSCRIPTION), ("assignment", ASSIGNMENT)):
        raw = member.get(name)
        if not raw:
            continue
        data = base64.b64decode(raw)
        try:
            version = read_int16(data, 0, what=f"the {name} version")
            # Newer clients may write versions past those known: decode the fields known, as Kafka does.
            decoded, _ = read(
                schema, data[VERSION_SIZE:], min(version, schema.valid_versions()[1]), whole=False
            )
        except CorruptDataError:
            continue
        member[name] = decoded


def decode_transaction_log(
    key: bytes | None, value: bytes | None, offset: int, *, path: str = "<memory>", pos: int = 0
) -> tuple[str | None, str | None]:
    """A ``__transaction_state`` record as ``--transaction-log-decoder`` prints it (``TransactionLog.
    formatRecordKeyAndValue``): ``transaction_metadata::transactionalId=ID`` and ``producerId:...``."""
    if key is None:
        return f"Error at offset {offset}, skipping. expected a transaction log key, found none", None
    try:
        key_version, key_body = _versioned(key, "key", path, pos)
        if key_version > TRANSACTION_LOG_KEY.valid_versions()[1]:
            return f"unknown::version={key_version}", None
        # TransactionLog.readTxnRecordKey / readTxnRecordValue read the fields, never what follows them
        key_data, _ = read(TRANSACTION_LOG_KEY, key_body, key_version, path=path, base_pos=pos + VERSION_SIZE,
                           whole=False)
        key_text = f"transaction_metadata::transactionalId={key_data['transactionalId']}"
        if value is None:
            return key_text, TOMBSTONE
        value_version, value_body = _versioned(value, "value", path, pos)
        data, _ = read(TRANSACTION_LOG_VALUE, value_body, value_version, path=path,
                       base_pos=pos + VERSION_SIZE, whole=False)
        state, topic_partitions = transaction_state(data, path=path, pos=pos)
    except CorruptDataError as err:
        return f"Error at offset {offset}, skipping. {err.message}", None
    partitions = [f"{topic}-{n}" for topic, n in topic_partitions]
    return key_text, (
        f"producerId:{data['producerId']},producerEpoch:{data['producerEpoch']},"
        f"state={state},partitions=[{','.join(partitions)}],"
        f"txnLastUpdateTimestamp={data['transactionLastUpdateTimestampMs']},"
        f"txnTimeoutMs={data['transactionTimeoutMs']}"
    )


def transaction_state(data: dict[str, Any], *, path: str = "<memory>", pos: int = 0) \
        -> tuple[str, list[tuple[str, int]]]:
    """A decoded ``TransactionLogValue``'s state name and partitions as ``TransactionLog.readTxnRecordValue``
    (Kafka 3.8.0) loads them: ``TransactionState.fromId`` of the status, and the partitions in the order
    written, none for ``Empty`` (its partitions are not read).

    :raises CorruptDataError: a status ``fromId`` refuses, or null partitions in another state than
        ``Empty`` (the loader's ``forEach`` over them throws: the record does not load).
    """
    status = data["transactionStatus"]
    if not 0 <= status < len(TRANSACTION_STATES):
        raise CorruptDataError(
            f"expected a transaction state 0..{len(TRANSACTION_STATES) - 1}, found {status}", path, pos)
    state = TRANSACTION_STATES[status]
    if state == "Empty":
        return state, []
    if data["transactionPartitions"] is None:
        raise CorruptDataError(f"expected the partitions of a transaction in state {state}, found null",
                               path, pos)
    return state, [(p["topic"], n) for p in data["transactionPartitions"] for n in p["partitionIds"]]


def decode_metadata_value(value: bytes | None, *, path: str = "<memory>", pos: int = 0) -> dict[str, Any]:
    """One ``__cluster_metadata`` record value: ``{"type", "version", "data"}``; a type without a schema
    here gives ``{"type", "version", "apiKey", "bytes"}`` (the record's bytes as base64).

    :raises CorruptDataError: not a metadata frame, or bytes that do not fit the record's schema.
    """
    if value is None:
        raise CorruptDataError("expected a metadata record value, found null", path, pos)
    frame, at = read_uvarint(value, 0, path=path, base_pos=pos, what="the frame version")
    if frame != METADATA_FRAME_VERSION:
        raise CorruptDataError(
            f"expected metadata frame version {METADATA_FRAME_VERSION}, found {frame}", path, pos
        )
    api_key, at = read_uvarint(value, at, path=path, base_pos=pos, what="the record type")
    version, at = read_uvarint(value, at, path=path, base_pos=pos, what="the record version")
    schema = METADATA_RECORDS.get(api_key)
    name = metadata_type_name(api_key)
    if schema is None:
        return {
            "type": name,
            "version": version,
            "apiKey": api_key,
            "bytes": base64.b64encode(bytes(value[at:])).decode("ascii"),
        }
    data, _ = read(schema, memoryview(value)[at:], version, path=path, base_pos=pos + at)
    return {"type": name, "version": version, "data": data}


def decode_cluster_metadata(
    key: bytes | None, value: bytes | None, offset: int, *, path: str = "<memory>", pos: int = 0
) -> tuple[str | None, str | None]:
    """A ``__cluster_metadata`` record as ``--cluster-metadata-decoder`` prints it: no key, the value
    ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``."""
    try:
        return None, _json(decode_metadata_value(value, path=path, pos=pos))
    except CorruptDataError as err:
        return None, f"Error at {offset}, skipping. {err.message}"
