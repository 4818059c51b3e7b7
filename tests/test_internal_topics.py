"""Decoders for Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``, KRaft
``__cluster_metadata``) and the schema-driven reader under them.

No broker-written internal-topic segments are in the fixtures, so the vectors are built two ways:
- by hand, byte by byte, from Kafka 3.8.0's JSON message definitions
  (group-coordinator/src/main/resources/common/message/OffsetCommit{Key,Value}.json,
  GroupMetadata{Key,Value}.json; core/.../TransactionLog{Key,Value}.json;
  metadata/src/main/resources/common/metadata/{Topic,FeatureLevel}Record.json) and the encoding
  rules of ``ByteBufferAccessor``/``MessageUtil`` (flexible versions: compact lengths + tagged fields);
- by kafka-python's own schema-driven encoder (``kafka.protocol.api_data.ApiData``, an independent
  implementation of the same rules) fed the segstore schemas, for every version of every schema.
The CLI tests write the records into a real segment and dump it as ``kafka-dump-log`` would, with
the output shapes of ``DumpLogSegments.OffsetsMessageParser`` / ``TransactionLogMessageParser`` /
``ClusterMetadataLogMessageParser`` and ``TransactionLog.formatRecordKeyAndValue``.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from segstore_kafka import batch as codec
from segstore_kafka import internal_topics as it
from segstore_kafka import schema
from segstore_kafka.varint import encode_unsigned_varint as uvarint

from segstore import cli
from segstore.errors import CorruptDataError


def s16(text: str | None) -> bytes:
    """A non-flexible string: int16 length (-1 null) + UTF-8."""
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def compact(text: str | None) -> bytes:
    """A flexible (compact) string: unsigned varint length + 1 (0 null)."""
    if text is None:
        return uvarint(0)
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


# -- hand-built vectors --------------------------------------------------------------------------


def test_offset_commit_key_and_values_by_hand():
    key = struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 7)
    v1 = struct.pack(">h", 1) + struct.pack(">q", 42) + s16("meta") + struct.pack(">qq", 1000, 2000)
    v3 = struct.pack(">h", 3) + struct.pack(">qi", 42, 5) + s16("") + struct.pack(">q", 1000)
    # v4: flexible: compact string, then an empty tagged-field section (one unsigned varint 0).
    v4 = (
        struct.pack(">h", 4) + struct.pack(">qi", 42, 5) + compact("m") + struct.pack(">q", 1000) + uvarint(0)
    )
    k, v = it.decode_offsets(key, v1, 9)
    assert json.loads(k) == {"type": "1", "data": {"group": "grp", "topic": "orders", "partition": 7}}
    assert json.loads(v) == {
        "version": "1",
        "data": {"offset": 42, "metadata": "meta", "commitTimestamp": 1000, "expireTimestamp": 2000},
    }
    assert json.loads(it.decode_offsets(key, v3, 9)[1])["data"] == {
        "offset": 42,
        "leaderEpoch": 5,
        "metadata": "",
        "commitTimestamp": 1000,
    }
    assert json.loads(it.decode_offsets(key, v4, 9)[1])["data"]["metadata"] == "m"
    assert it.decode_offsets(key, None, 9) == (k, "<DELETE>")
    # Jackson's compact form, in field order
    assert k == '{"type":"1","data":{"group":"grp","topic":"orders","partition":7}}'


def test_group_metadata_with_a_consumer_member_by_hand():
    key = struct.pack(">h", 2) + s16("grp")
    subscription = struct.pack(">h", 0) + struct.pack(">i", 1) + s16("orders") + struct.pack(">i", -1)
    assignment = (
        struct.pack(">h", 0)
        + struct.pack(">i", 1)
        + s16("orders")
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">i", -1)
    )
    member = (
        s16("m-1")
        + s16(None)
        + s16("client")
        + s16("/10.0.0.1")
        + struct.pack(">ii", 300000, 45000)
        + struct.pack(">i", len(subscription))
        + subscription
        + struct.pack(">i", len(assignment))
        + assignment
    )
    value = (
        struct.pack(">h", 3)
        + s16("consumer")
        + struct.pack(">i", 4)
        + s16("range")
        + s16("m-1")
        + struct.pack(">q", 1700000000000)
        + struct.pack(">i", 1)
        + member
    )
    k, v = it.decode_offsets(key, value, 0)
    assert json.loads(k) == {"type": "2", "data": {"group": "grp"}}
    data = json.loads(v)["data"]
    assert data["protocolType"] == "consumer" and data["generation"] == 4 and data["leader"] == "m-1"
    (m,) = data["members"]
    assert m["groupInstanceId"] is None and m["rebalanceTimeout"] == 300000 and m["sessionTimeout"] == 45000
    assert m["subscription"] == {"topics": ["orders"], "userData": None}
    assert m["assignment"] == {
        "assignedPartitions": [{"topic": "orders", "partitions": [0, 1]}],
        "userData": None,
    }


def test_consumer_group_records_by_hand():
    # ConsumerGroupMetadataKey (key version 3, not flexible) and ConsumerGroupMetadataValue v0 (flexible)
    key = struct.pack(">h", 3) + s16("grp")
    value = struct.pack(">h", 0) + struct.pack(">i", 12) + uvarint(0)
    assert it.decode_offsets(key, value, 0) == (
        '{"type":"3","data":{"groupId":"grp"}}',
        '{"version":"0","data":{"epoch":12}}',
    )
    # ConsumerGroupCurrentMemberAssignmentValue v0: compact arrays of (uuid, compact []int32) structs
    key = struct.pack(">h", 8) + s16("grp") + s16("m")
    tp = bytes(15) + b"\x01" + uvarint(3) + struct.pack(">ii", 0, 2) + uvarint(0)
    value = struct.pack(">h", 0) + struct.pack(">iib", 5, 4, 0) + uvarint(2) + tp + uvarint(1) + uvarint(0)
    data = json.loads(it.decode_offsets(key, value, 0)[1])["data"]
    assert data == {
        "memberEpoch": 5,
        "previousMemberEpoch": 4,
        "state": 0,
        "assignedPartitions": [{"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": [0, 2]}],
        "partitionsPendingRevocation": [],
    }


def test_unknown_and_bad_offsets_records_are_reported_not_raised():
    assert it.decode_offsets(struct.pack(">h", 99) + b"x", b"", 5) == (
        "Unknown record type 99 at offset 5, skipping.",
        None,
    )
    key = struct.pack(">h", 1) + s16("grp")  # cut short: no topic, no partition
    text, value = it.decode_offsets(key, None, 6)
    assert text.startswith("Error at offset 6, skipping. expected ") and value is None
    assert it.decode_offsets(None, b"", 7)[0].startswith("Error at offset 7")


def test_transaction_log_by_hand():
    key = struct.pack(">h", 0) + s16("tx-1")
    partitions = (
        struct.pack(">i", 2) + s16("a") + struct.pack(">iii", 2, 0, 3) + s16("b") + struct.pack(">ii", 1, 1)
    )
    v0 = (
        struct.pack(">h", 0)
        + struct.pack(">qhib", 4000, 2, 60000, 1)
        + partitions
        + struct.pack(">qq", 11, 10)
    )
    assert it.decode_transaction_log(key, v0, 0) == (
        "transaction_metadata::transactionalId=tx-1",
        "producerId:4000,producerEpoch:2,state=Ongoing,partitions=[a-0,a-3,b-1],"
        "txnLastUpdateTimestamp=11,txnTimeoutMs=60000",
    )
    # v1 is flexible: compact array/strings, a tagged-field section after each struct.
    flex = uvarint(2) + compact("a") + uvarint(2) + struct.pack(">i", 9) + uvarint(0)
    v1 = (
        struct.pack(">h", 1)
        + struct.pack(">qhib", 4000, 2, 60000, 0)
        + flex
        + struct.pack(">qq", 11, 10)
        + uvarint(0)
    )
    assert it.decode_transaction_log(key, v1, 0)[1] == (
        "producerId:4000,producerEpoch:2,state=Empty,partitions=[],txnLastUpdateTimestamp=11,txnTimeoutMs=60000"
    )
    assert it.decode_transaction_log(key, None, 0)[1] == "<DELETE>"
    assert it.decode_transaction_log(struct.pack(">h", 3), None, 0) == ("unknown::version=3", None)


def test_a_null_is_read_only_where_the_field_is_nullable():
    """Kafka 3.8.0 generator/.../MessageDataGenerator.java ``generateVariableLengthReader``: a negative length
    or count is null where the field's ``nullableVersions`` hold the version, else ``throw new
    RuntimeException("non-nullable field X was serialized as null")``; an array's strings are never null."""
    # OffsetCommitKey.json: group, topic are "string" with no nullableVersions
    key = s16(None) + s16("orders") + struct.pack(">i", 0)
    with pytest.raises(CorruptDataError, match="non-nullable field group, found null"):
        schema.read(it.OFFSET_COMMIT_KEY, key, 1)
    # GroupMetadataValue.json: protocol and leader are nullable ("0+"); a length below -1 is null too
    value = s16("consumer") + struct.pack(">i", 0) + s16(None) + struct.pack(">h", -7) + struct.pack(">i", 0)
    data, _ = schema.read(it.GROUP_METADATA_VALUE, value, 0)
    assert data["protocol"] is None and data["leader"] is None and data["members"] == []
    # ... but members ([]MemberMetadata) is not, nor is a member's clientId
    with pytest.raises(CorruptDataError, match="non-nullable field members, found null"):
        schema.read(it.GROUP_METADATA_VALUE, value[:-4] + struct.pack(">i", -1), 0)
    # TransactionLogValue.json: TransactionPartitions is nullable, its Topic and PartitionIds are not
    head = struct.pack(">qhib", 4000, 2, 60000, 1)
    times = struct.pack(">qq", 11, 10)
    data, _ = schema.read(it.TRANSACTION_LOG_VALUE, head + struct.pack(">i", -1) + times, 0)
    assert data["transactionPartitions"] is None
    for partitions, field in ((struct.pack(">i", 1) + s16(None) + struct.pack(">ii", 1, 0), "Topic"),
                              (struct.pack(">i", 1) + s16("a") + struct.pack(">i", -1), "PartitionIds")):
        with pytest.raises(CorruptDataError, match=f"non-nullable field {field}, found null"):
            schema.read(it.TRANSACTION_LOG_VALUE, head + partitions + times, 0)
    # flexible versions: a compact length of 0 is null; ConsumerGroupMemberMetadataValue's ClientId is not
    # nullable (InstanceId and RackId are)
    member = compact(None) + compact(None) + compact(None)
    with pytest.raises(CorruptDataError, match="non-nullable field ClientId, found null"):
        schema.read(it.CONSUMER_GROUP_RECORDS[5][1], member, 0)
    # ConsumerProtocolSubscription.json: Topics is a non-nullable []string, and its elements are never null
    with pytest.raises(CorruptDataError, match="non-nullable field Topics, found null"):
        schema.read(it.SUBSCRIPTION, struct.pack(">ii", -1, -1), 0)
    with pytest.raises(CorruptDataError, match="non-nullable field Topics element, found null"):
        schema.read(it.SUBSCRIPTION, struct.pack(">i", 1) + s16(None) + struct.pack(">i", -1), 0)


def test_a_string_that_is_not_utf8_reads_as_java_reads_it():
    """Kafka 3.8.0 Readable.readString is ``new String(arr, StandardCharsets.UTF_8)``: malformed bytes become
    U+FFFD, never an error (so the record loads, and DumpLogSegments prints it)."""
    key = s16("grp") + struct.pack(">h", 3) + b"o\xffr" + struct.pack(">i", 0)
    data, _ = schema.read(it.OFFSET_COMMIT_KEY, key, 1)
    assert data == {"group": "grp", "topic": "o\ufffdr", "partition": 0}


def test_the_dump_decoders_name_a_null_kafka_refuses():
    """DumpLogSegments.OffsetsMessageParser.parse prints ``Error at offset N, skipping. ...`` for what
    CoordinatorRecordSerde cannot read; TransactionLog.readTxnRecordValue (3.8.0) throws on a null field the
    schema does not allow, and on null partitions of a transaction past Empty (its ``forEach`` over them)."""
    key = struct.pack(">h", 1) + s16(None) + s16("orders") + struct.pack(">i", 0)
    value = struct.pack(">h", 3) + struct.pack(">qi", 42, 5) + s16("") + struct.pack(">q", 1000)
    assert it.decode_offsets(key, value, 4) == (
        "Error at offset 4, skipping. expected a value of the non-nullable field group, found null (-1)",
        None)
    txn_key = struct.pack(">h", 0) + s16("tx-1")
    head = struct.pack(">h", 0) + struct.pack(">qhib", 4000, 2, 60000, 1)
    null_ids = head + struct.pack(">i", 1) + s16("a") + struct.pack(">i", -1) + struct.pack(">qq", 11, 10)
    text, payload = it.decode_transaction_log(txn_key, null_ids, 5)
    assert text == ("Error at offset 5, skipping. expected a value of the non-nullable field PartitionIds, "
                    "found null (-1)") and payload is None
    null_partitions = head + struct.pack(">i", -1) + struct.pack(">qq", 11, 10)
    assert it.decode_transaction_log(txn_key, null_partitions, 6)[0] == (
        "Error at offset 6, skipping. expected the partitions of a transaction in state Ongoing, found null")
    # an Empty transaction's partitions are not read: null is fine there
    empty = struct.pack(">h", 0) + struct.pack(">qhib", 4000, 2, 60000, 0) + struct.pack(">i", -1) \
        + struct.pack(">qq", 11, 10)
    assert it.decode_transaction_log(txn_key, empty, 7)[1].startswith(
        "producerId:4000,producerEpoch:2,state=Empty")


def test_bytes_after_a_coordinator_records_fields_are_not_read():
    """The coordinators' readers (GroupMetadataManager.readOffsetMessageValue, TransactionLog.
    readTxnRecordValue, CoordinatorRecordSerde.readMessage, Kafka 3.8.0) hand the buffer to the generated
    ``read``, which reads the fields and never looks at the remainder: trailing bytes load (a metadata
    record's do not: AbstractApiMessageSerde.read, in test_metadata_records_by_hand)."""
    key = struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 0)
    value = struct.pack(">h", 3) + struct.pack(">qi", 42, 5) + s16("") + struct.pack(">q", 1000)
    assert it.decode_offsets(key + b"\x07", value + b"\x00\x01", 0) == it.decode_offsets(key, value, 0)
    txn_key = struct.pack(">h", 0) + s16("tx-1")
    txn = (struct.pack(">h", 0) + struct.pack(">qhib", 4000, 2, 60000, 1) + struct.pack(">i", 1) + s16("a")
           + struct.pack(">ii", 1, 3) + struct.pack(">qq", 11, 10))
    assert it.decode_transaction_log(txn_key, txn + b"\x00", 0) == (
        "transaction_metadata::transactionalId=tx-1",
        "producerId:4000,producerEpoch:2,state=Ongoing,partitions=[a-3],txnLastUpdateTimestamp=11,"
        "txnTimeoutMs=60000")


def test_metadata_records_by_hand():
    topic_id = uuid.UUID("6d8f3f0a-3e1c-4c7e-9d1a-0b5c2f6a7e10").bytes
    topic = uvarint(1) + uvarint(2) + uvarint(0) + compact("orders") + topic_id + uvarint(0)
    assert it.decode_metadata_value(topic) == {
        "type": "TOPIC_RECORD",
        "version": 0,
        "data": {"name": "orders", "topicId": base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode()},
    }
    feature = (
        uvarint(1)
        + uvarint(12)
        + uvarint(0)
        + compact("metadata.version")
        + struct.pack(">h", 20)
        + uvarint(0)
    )
    assert it.decode_metadata_value(feature)["data"] == {"name": "metadata.version", "featureLevel": 20}
    # PartitionRecord v0 with LeaderRecoveryState (tag 0) set to 1 in the tagged section
    partition = (
        uvarint(1)
        + uvarint(3)
        + uvarint(0)
        + struct.pack(">i", 4)
        + topic_id
        + uvarint(3)
        + struct.pack(">ii", 1, 2)
        + uvarint(2)
        + struct.pack(">i", 1)
        + uvarint(1)
        + uvarint(1)
        + struct.pack(">iii", 1, 7, 9)
        + uvarint(1)
        + uvarint(0)
        + uvarint(1)
        + b"\x01"
    )
    data = it.decode_metadata_value(partition)["data"]
    assert data["replicas"] == [1, 2] and data["isr"] == [1] and data["leader"] == 1
    assert data["leaderEpoch"] == 7 and data["partitionEpoch"] == 9 and data["leaderRecoveryState"] == 1
    assert (
        it.decode_metadata_value(uvarint(1) + uvarint(20) + uvarint(0) + uvarint(0))["data"] == {}
    )  # NoOpRecord
    unknown = uvarint(1) + uvarint(14) + uvarint(0) + b"\x01\x02"  # ClientQuotaRecord: no schema here
    assert it.decode_metadata_value(unknown) == {
        "type": "CLIENT_QUOTA_RECORD",
        "version": 0,
        "apiKey": 14,
        "bytes": "AQI=",
    }
    with pytest.raises(CorruptDataError, match="frame version 1"):
        it.decode_metadata_value(uvarint(0) + uvarint(2))
    with pytest.raises(CorruptDataError, match="more bytes"):
        it.decode_metadata_value(feature + b"\x00")  # trailing garbage, as the serde refuses


def test_metadata_type_names_follow_the_generator():
    # MessageGenerator.toSnakeCase upper-cased, of each schema's "name" (MetadataRecordTypeGenerator:
    # spec.name(), not the file's: ZkMigrationRecord.json names ZkMigrationStateRecord)
    assert it.metadata_type_name(17) == "BROKER_REGISTRATION_CHANGE_RECORD"
    assert it.metadata_type_name(21) == "ZK_MIGRATION_STATE_RECORD"
    assert it.metadata_type_name(200) == "UNKNOWN_200"


def test_the_zk_migration_state_record_a_kraft_controller_writes_is_decoded():
    """Kafka 3.8 ZkMigrationRecord.json: ZkMigrationStateRecord (apiKey 21, v0, flexible), one int8
    ZkMigrationState; every KRaft cluster's first controller writes one (state 0, None), which
    --cluster-metadata-decoder printed as ZK_MIGRATION_RECORD with its raw bytes."""
    record = uvarint(1) + uvarint(21) + uvarint(0) + b"\x00" + uvarint(0)   # frame, key, version, state, tags
    assert it.decode_metadata_value(record) == {
        "type": "ZK_MIGRATION_STATE_RECORD", "version": 0, "data": {"zkMigrationState": 0}}
    assert it.decode_metadata_value(record[:3] + b"\x03" + uvarint(0))["data"] == {"zkMigrationState": 3}


# -- every schema, every version, against kafka-python's encoder ---------------------------------------


def _kp_json(name: str, fields: tuple[schema.Field, ...]) -> list[dict]:
    out = []
    for f in fields:
        entry = {"name": f.name[:1].upper() + f.name[1:], "type": f.type, "versions": f.versions}
        if f.nullable != "none":
            entry["nullableVersions"] = f.nullable
        if f.tag is not None:
            entry.update(
                tag=f.tag,
                taggedVersions=f.tagged,
                default="null" if f.default is None or f.type.startswith("[]") else f.default,
            )
        if f.fields:
            entry["type"] = f"[]{name}{f.name[:1].upper() + f.name[1:]}"
            entry["fields"] = _kp_json(name, f.fields)
        out.append(entry)
    return out


def _kp_class(tmp_path, s: schema.Schema):
    """A kafka-python ApiData class for segstore schema ``s`` (kafka-python reads JSON from a package)."""
    from kafka.protocol.api_data import ApiData

    pkg = tmp_path / "kpschemas"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").touch()
    (pkg / f"{s.name}.json").write_text(
        json.dumps(
            {
                "type": "data",
                "name": s.name,
                "validVersions": s.valid,
                "flexibleVersions": s.flexible,
                "fields": _kp_json(s.name, s.fields),
            }
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib

        module = importlib.import_module("kpschemas")
        importlib.invalidate_caches()
        return type(s.name, (ApiData,), {}, load_json=module)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kpschemas", None)


def _sample(f: schema.Field, version: int, n: int):
    """A value for field ``f`` and what segstore's reader must return for it."""
    kind = f.type[2:] if f.type.startswith("[]") else f.type
    if f.type.startswith("[]"):
        if f.fields:
            return "struct", None
        items = [_sample(schema.Field("x", kind), version, n + i)[0] for i in range(2)]
        return items, [_sample(schema.Field("x", kind), version, n + i)[1] for i in range(2)]
    if kind == "string":
        return f"s{n}é", f"s{n}é"
    if kind == "bytes":
        return bytes([n % 256, 1, 2]), base64.b64encode(bytes([n % 256, 1, 2])).decode()
    if kind == "uuid":
        u = uuid.UUID(int=n * 7919 + 1)
        return u, schema.uuid_text(u.bytes)
    if kind == "bool":
        return bool(n % 2), bool(n % 2)
    return n, n


SCHEMAS = [
    it.OFFSET_COMMIT_KEY,
    it.OFFSET_COMMIT_VALUE,
    it.GROUP_METADATA_KEY,
    it.GROUP_METADATA_VALUE,
    it.TRANSACTION_LOG_KEY,
    it.TRANSACTION_LOG_VALUE,
    it.SUBSCRIPTION,
    it.ASSIGNMENT,
    *(s for pair in it.CONSUMER_GROUP_RECORDS.values() for s in pair),
    *it.METADATA_RECORDS.values(),
]


@pytest.mark.parametrize(
    "s", [s for s in SCHEMAS if s.fields], ids=lambda s: s.name
)  # kafka-python needs fields
@pytest.mark.filterwarnings(
    "ignore:(read|open)_text is deprecated:DeprecationWarning"
)  # kafka-python's loader
def test_every_version_reads_what_kafka_python_writes(tmp_path, s):
    cls = _kp_class(tmp_path, s)
    low, high = s.valid_versions()
    for version in range(low, high + 1):

        def build(fields, owner, n, version=version):
            kwargs, expected = {}, {}
            for i, f in enumerate(fields):
                if not schema._in(version, schema.versions(f.versions)):
                    continue
                value, want = _sample(f, version, n + i)
                if value == "struct":
                    sub = getattr(owner, f"{s.name}{f.name[:1].upper() + f.name[1:]}")
                    v_kw, v_want = build(f.fields, sub, n + 10 * i, version)
                    value, want = [sub(**v_kw)], [v_want]
                kwargs[_snake(f.name)] = value
                expected[f.json_name] = want
            return kwargs, expected

        kwargs, expected = build(s.fields, cls, 3)
        raw = cls(**kwargs).encode(version=version)
        assert struct.unpack(">h", raw[:2])[0] == version
        got, used = schema.read(s, raw[2:], version)
        assert used == len(raw) - 2
        assert got == expected, (s.name, version)


def _snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.lower())
    return "".join(out)


@pytest.mark.parametrize("s", SCHEMAS, ids=lambda s: s.name)
@given(data=st.binary(max_size=80), version=st.integers(0, 5))
def test_any_bytes_decode_or_raise_corrupt_data(s, data, version):
    try:
        got, used = schema.read(s, data, version, whole=False)
    except CorruptDataError:
        return
    assert 0 <= used <= len(data) and isinstance(got, dict)


# -- through the CLI ---------------------------------------------------------------------------------


def _segment(tmp_path, topic: str, records) -> str:
    part = tmp_path / f"{topic}-0"
    part.mkdir()
    path = part / "00000000000000000000.log"
    path.write_bytes(codec.encode_batch(records, base_offset=0))
    return str(path)


def run(capsys, *argv):
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


def test_offsets_decoder_through_the_cli(tmp_path, capsys):
    key = struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 0)
    value = struct.pack(">h", 3) + struct.pack(">qi", 42, 5) + s16("") + struct.pack(">q", 1000)
    log = _segment(tmp_path, "__consumer_offsets", [(key, value, 1000), (key, None, 1001)])
    code, out, err = run(capsys, "dump", log, "--offsets-decoder")
    assert code == 0, err
    records = [line for line in out.splitlines() if line.startswith("| ")]
    assert records[0].endswith(
        ' key: {"type":"1","data":{"group":"grp","topic":"orders","partition":0}} '
        'payload: {"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"",'
        '"commitTimestamp":1000}}'
    )
    assert records[1].endswith("payload: <DELETE>")


def test_transaction_and_cluster_metadata_decoders_through_the_cli(tmp_path, capsys):
    key = struct.pack(">h", 0) + s16("tx-1")
    value = (
        struct.pack(">h", 0)
        + struct.pack(">qhib", 4000, 2, 60000, 4)
        + struct.pack(">i", 0)
        + struct.pack(">qq", 11, 10)
    )
    log = _segment(tmp_path, "__transaction_state", [(key, value, 1000)])
    code, out, _ = run(capsys, "dump", log, "--transaction-log-decoder")
    assert code == 0
    assert (
        "key: transaction_metadata::transactionalId=tx-1 payload: producerId:4000,producerEpoch:2,"
        "state=CompleteCommit,partitions=[],txnLastUpdateTimestamp=11,txnTimeoutMs=60000" in out
    )
    feature = (
        uvarint(1)
        + uvarint(12)
        + uvarint(0)
        + compact("metadata.version")
        + struct.pack(">h", 20)
        + uvarint(0)
    )
    log = _segment(tmp_path, "__cluster_metadata", [(None, feature, 1000), (None, b"\x00", 1001)])
    code, out, _ = run(capsys, "dump", log, "--cluster-metadata-decoder", "--json")
    assert code == 0
    payloads = [
        json.loads(line)["payload"] for line in out.splitlines() if json.loads(line).get("kind") == "record"
    ]
    assert json.loads(payloads[0]) == {
        "type": "FEATURE_LEVEL_RECORD",
        "version": 0,
        "data": {"name": "metadata.version", "featureLevel": 20},
    }
    assert payloads[1].startswith("Error at 1, skipping.")


def test_a_kraft_snapshot_file_is_dumped_as_a_log(tmp_path, capsys):
    # Snapshots.parse: %020d-%010d.checkpoint (end offset, epoch); DumpLogSegments dumps it as a log.
    topic = uvarint(1) + uvarint(2) + uvarint(0) + compact("orders") + bytes(16) + uvarint(0)
    path = tmp_path / "__cluster_metadata-0" / "00000000000000000100-0000000002.checkpoint"
    path.parent.mkdir()
    path.write_bytes(codec.encode_batch([(None, topic, 1000)], base_offset=0))
    code, out, _ = run(capsys, "dump", path, "--cluster-metadata-decoder")
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == "Snapshot end offset: 100, epoch: 2"
    assert lines[3].endswith(
        'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders",'
        '"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}'
    )


def test_decoded_json_escapes_control_characters_as_jackson_does():
    """Kafka 3.8's decoders print ``ObjectNode.toString()``: Jackson escapes a control character other
    than \\b \\t \\n \\f \\r as ``\\u00XX`` with upper-case hex digits (CharTypes.HC); json.dumps
    writes lower case, so an offset commit's metadata holding one printed differently.  A backslash
    that is itself escaped is left alone."""
    key = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    metadata = "a\x1fb\\u001f\n"
    value = (struct.pack(">hq", 1, 5) + struct.pack(">h", len(metadata)) + metadata.encode()
             + struct.pack(">qq", 7, -1))
    _key, text = it.decode_offsets(key, value, 0)
    assert text == ('{"version":"1","data":{"offset":5,"metadata":"a\\u001Fb\\\\u001f\\n",'
                    '"commitTimestamp":7,"expireTimestamp":-1}}')
