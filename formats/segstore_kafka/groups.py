"""Consumer groups as the group coordinator loads them from ``__consumer_offsets``, described as
``kafka-consumer-groups --describe`` describes them.

The latest record per key (:mod:`.coordinator`) gives, by record type (the key's
version; group-coordinator ``CoordinatorRecordType``, Kafka 4.0):

- 0, 1 ``OffsetCommit``: a group's committed offset of a topic partition;
- 2 ``GroupMetadata``: a classic group (protocol type and name, generation, leader, the
  members with their subscription and assignment); loaded ``Stable`` with members,
  ``Empty`` without (``GroupMetadataManager.readGroupMessageValue``).  A group that only
  committed offsets (a "simple" consumer) is loaded ``Empty`` with no protocol type;
- 3..8 the KIP-848 consumer groups (``ConsumerGroup*``): the group epoch, members
  (client, host, subscribed topics), the target assignment epoch and each member's
  current assignment (topic ids, named through the group's partition metadata record
  or the KRaft metadata image); the state is ``ConsumerGroup.maybeUpdateGroupState``'s
  (Kafka 3.8.0): ``Empty`` without members, ``Assigning`` while the group epoch is past
  the target assignment epoch, ``Reconciling`` while a member is not ``STABLE`` at it,
  else ``Stable``;
- 9..16 (share groups, consumer-group regular expressions) and any other type: counted
  and named, not read.  So is a record that does not read (a version the schemas here do
  not define, a null where the schema allows none, bytes that end early: the broker's load
  stops at it), with the batch holding the first of each kind.  Bytes after a record's last
  field are not read, as Kafka's readers do not read them.

Offsets expire as the broker's offset cleanup expires them at a given time
(``GroupMetadata.removeExpiredOffsets``, Kafka 3.8.0): an ``Empty`` group's offsets once
``offsets.retention.minutes`` passed since it became empty (else since the commit), a
``Stable`` consumer group's offsets of topics no member subscribes to once that passed
since the commit, a simple group's likewise; a v1 commit's own expire timestamp wins.
An ``Empty`` group left with no offsets is ``Dead`` and gone.

Only consumer groups are listed, as the tool's admin client keeps them: a classic group of protocol
type ``consumer`` or none (offsets only); a group of another protocol type (Kafka Connect's
``connect``, Schema Registry's ``sr``) is left out and named in a note, and answered only when named
(with a note: the tool describes none, but the broker deletes any group, and its offsets).

Rows (``ConsumerGroupCommand.collectGroupsOffsets``): each member with partitions
assigned, most partitions first, its partitions by number; then the committed
partitions no member holds, without member columns.  Log end offsets are the high
watermarks of the partitions this log directory holds (others are unknown, ``-``).

Pure apart from the caller's column batches; not thread-safe.
"""

from __future__ import annotations

import base64
import numbers
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from segstore.consumers import ConsumerGroups, ConsumerOffset, GroupMember, lag
from segstore.errors import ConfigError, CorruptDataError, TruncatedDataError

from . import internal_topics as it
from . import offsetcommit
from .coordinator import SHORT_KEY, VERSION_BYTES, CoordinatorLog, Latest, key_version
from .schema import Schema, read, read_int16

if TYPE_CHECKING:
    from .partition import Partition

OFFSETS_TOPIC = "__consumer_offsets"
#: ``offsets.retention.minutes`` (Kafka's default, 7 days) in ms.
DEFAULT_OFFSETS_RETENTION_MS = 7 * 24 * 60 * 60 * 1000
#: ``offsets.retention.minutes``' range: an INT at least 1 (Kafka 3.8.0 ``KafkaConfig``'s definition of
#: ``GroupCoordinatorConfig.OFFSETS_RETENTION_MINUTES_CONFIG``: ``INT``, ``atLeast(1)``).
OFFSETS_RETENTION_MINUTES_RANGE = (1, 2**31 - 1)
#: ``offsets.topic.num.partitions`` (Kafka's default).
DEFAULT_OFFSETS_PARTITIONS = 50
#: ``CoordinatorRecordType``: key version -> record type.
RECORD_TYPES = {
    0: "OffsetCommit", 1: "OffsetCommit", 2: "GroupMetadata", 3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata", 7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment", 9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata", 12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
}
OFFSET_COMMIT_VERSIONS = (0, 1)
GROUP_METADATA = 2
(CONSUMER_GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA,
 TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT) = range(3, 9)
CONSUMER_PROTOCOL = "consumer"
#: ``MemberState.STABLE``
MEMBER_STABLE = 0
EMPTY, STABLE, ASSIGNING, RECONCILING = "Empty", "Stable", "Assigning", "Reconciling"
#: How many groups of other protocol types a note names.
OTHERS_NAMED = 5


def retention_ms(options: Mapping[str, Any]) -> int:
    """The ``offsets_retention_ms`` option (default 7 days), as ``offsets.retention.minutes`` allows it.

    :raises ConfigError: less than a minute, or more minutes than an INT holds (the broker's config
        refuses those).
    """
    given = options.get("offsets_retention_ms", DEFAULT_OFFSETS_RETENTION_MS)
    if not isinstance(given, numbers.Integral) or isinstance(given, bool):
        raise ConfigError(f"expected offsets_retention_ms as whole ms, found {type(given).__name__} "
                          f"{given!r:.100}")
    value = int(given)
    low, high = OFFSETS_RETENTION_MINUTES_RANGE
    if not low * 60_000 <= value <= high * 60_000:
        raise ConfigError(f"expected offsets_retention_ms of {low} to {high} minutes "
                          f"(offsets.retention.minutes, an INT at least {low}), found {value} ms")
    return value


def batch_words(partition: int, batch_offset: int) -> str:
    """Where a record lies when nothing better is known: its partition and its batch's base offset."""
    return f"{OFFSETS_TOPIC}-{partition} (the batch at offset {batch_offset})"


class Notes:
    """What a load could not apply, for the caller to pass on: a count by what, and for the records that
    do not read the batch of the first of each kind (``where(partition, batch base offset)`` names it)."""

    def __init__(self, where: Callable[[int, int], str] = batch_words) -> None:
        self.counts: Counter[str] = Counter()
        self.first: dict[str, tuple[int, int]] = {}
        self.where = where

    def unreadable(self, what: str, partition: int, batch_offset: int) -> None:
        """One record that does not read, in the batch at ``batch_offset`` of ``partition``."""
        self.counts[what] += 1
        at = (partition, batch_offset)
        if what not in self.first or at < self.first[what]:
            self.first[what] = at

    def lines(self) -> list[str]:
        """One line per what, sorted: ``what: count``, and where the first unreadable one lies."""
        lines = []
        for what, count in sorted(self.counts.items()):
            line = f"{what}: {count}" if count else what
            if what in self.first:
                line += f", the first in the batch at {self.where(*self.first[what])}"
            lines.append(line)
        return lines


def record_type(version: int) -> str:
    if version == SHORT_KEY:
        return "keys shorter than their version"
    return RECORD_TYPES.get(version, f"unknown record type {version}")


def same_offset_key(key: bytes) -> bytes:
    """An OffsetCommitKey v0 as the v1 key of the same group, topic and partition (the same fields:
    3.8 ``GroupMetadataManager.readMessageKey`` reads both as one ``GroupTopicPartition``, so a v1
    commit or tombstone replaces a v0 commit); any other key as it is."""
    return b"\x00\x01" + key[VERSION_BYTES:] if key[:VERSION_BYTES] == b"\x00\x00" else key


def is_offset_commit(key: bytes) -> bool:
    """An offset commit's key (what a transactional batch holds back until its COMMIT marker)."""
    return key_version(key) in OFFSET_COMMIT_VERSIONS


@dataclass(frozen=True, slots=True)
class Commit:
    """One committed offset (``OffsetAndMetadata``)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    expire_ms: int | None


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    #: the topics it subscribes to (None: not known)
    subscribed: list[str] | None
    #: its assigned partitions, as (topic, partition)
    assigned: list[tuple[str, int]] = field(default_factory=list)
    #: static membership's ``group.instance.id`` (None: dynamic)
    instance_id: str | None = None


@dataclass(slots=True)
class Group:
    """One group as the coordinator holds it after loading."""

    group_id: str
    #: "classic" (JoinGroup protocol) or "consumer" (KIP-848)
    kind: str
    protocol_type: str | None
    protocol: str | None
    #: the classic generation, or the consumer group's epoch
    generation: int
    state: str
    current_state_ms: int | None
    members: list[Member] = field(default_factory=list)
    offsets: dict[tuple[str, int], Commit] = field(default_factory=dict)
    #: the ``__consumer_offsets`` partition it lives in
    coordinator_partition: int = 0

    def subscribed_topics(self) -> set[str] | None:
        """``GroupMetadata.computeSubscribedTopics``: the members' topics; None when one's are unknown."""
        topics: set[str] = set()
        for member in self.members:
            if member.subscribed is None:
                return None
            topics.update(member.subscribed)
        return topics

    def expire(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """``GroupMetadata.removeExpiredOffsets`` (a KIP-848 group: ``OffsetMetadataManager``'s rule);
        returns the partitions whose offsets expired, in the order they were committed."""
        subscribed: set[str] = set()
        base: Callable[[Commit], int] = _commit_time
        if self.kind == "consumer":
            # OffsetMetadataManager.cleanupExpiredOffsets: a KIP-848 group's offsets of the topics no member
            # subscribes to, by commit time, whatever its state
            subscribed = self.subscribed_topics() or set()
        elif self.protocol_type is not None and self.state == EMPTY:
            state_ms = self.current_state_ms
            if state_ms is not None:
                base = _at(state_ms)
        elif self.protocol_type == CONSUMER_PROTOCOL and self.state == STABLE:
            known = self.subscribed_topics()
            if known is None:
                return []
            subscribed = known
        elif self.protocol_type is not None:
            return []
        expired = [tp for tp, commit in self.offsets.items()
                   if tp[0] not in subscribed and (now_ms >= commit.expire_ms if commit.expire_ms is not None
                                                   else now_ms - base(commit) >= retention_ms)]
        for tp in expired:
            del self.offsets[tp]
        return expired

    def cleanup_keys(self, now_ms: int, retention_ms: int) -> list[bytes]:
        """The record keys the broker's offset cleanup tombstones for this group at ``now_ms``
        (``GroupMetadataManager.cleanupGroupMetadata``, Kafka 3.8.0): its expired offsets' commit keys,
        then its ``GroupMetadataKey`` when it is left ``Empty`` without offsets (``Dead``) after a
        generation past 0 (a KIP-848 group's own records are not written here).  Expires the offsets."""
        keys = [offsetcommit.commit_key(self.group_id, topic, partition)
                for topic, partition in self.expire(now_ms, retention_ms)]
        if self.kind == "classic" and self.state == EMPTY and not self.offsets and self.generation > 0:
            keys.append(offsetcommit.group_key(self.group_id))
        return keys


@dataclass(slots=True)
class GroupHome:
    """Where a consumer group's records go (``KafkaStore._group_home``): here, not in the store module,
    where its generated methods were compiled at every store's first open."""

    #: ``__consumer_offsets-N``
    name: str
    part: Partition
    #: the group as loaded there, None for none
    group: Group | None
    notes: list[str]


def _commit_time(commit: Commit) -> int:
    return commit.commit_ms


def _at(ms: int) -> Callable[[Commit], int]:
    return lambda commit: ms


class _Reader:
    """Decodes the records a partition ends with, counting by name what it cannot read."""

    def __init__(self, notes: Notes, partition: int) -> None:
        self.notes = notes
        self.partition = partition

    def decode(self, key: bytes, latest: Latest, schemas: tuple[Schema, Schema]) \
            -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        version = key_version(key)
        value = latest.value
        try:
            # GroupMetadataManager.readMessageKey / readOffsetMessageValue / readGroupMessageValue and
            # CoordinatorRecordSerde.readMessage (3.8.0) read the fields and never look past the last one
            key_data, _ = read(schemas[0], memoryview(key)[VERSION_BYTES:], version, whole=False)
        except CorruptDataError as err:
            self.unreadable(f"{schemas[0].name} v{version} records that do not read ({err.message})", latest)
            return None
        if value is None:
            return key_data, None
        if len(value) < VERSION_BYTES:
            self.unreadable(f"{schemas[1].name} values without a version", latest)
            return None
        value_version = read_int16(value, 0)
        low, high = schemas[1].valid_versions()
        if not low <= value_version <= high:
            self.unreadable(f"{schemas[1].name} v{value_version} (this reader knows v{low}-{high})", latest)
            return None
        try:
            value_data, _ = read(schemas[1], memoryview(value)[VERSION_BYTES:], value_version, whole=False)
        except CorruptDataError as err:
            self.unreadable(f"{schemas[1].name} v{value_version} records that do not read ({err.message})",
                            latest)
            return None
        return key_data, value_data

    def unreadable(self, what: str, latest: Latest) -> None:
        self.notes.unreadable(what, self.partition, latest.batch_offset)


def load_partition(log: CoordinatorLog, partition: int, notes: Notes,
                   topic_names: Mapping[str, str]) -> dict[str, Group]:
    """The groups of one ``__consumer_offsets`` partition, from its loaded log (before expiry)."""
    reader = _Reader(notes, partition)
    offsets: dict[str, dict[tuple[str, int], Commit]] = {}
    classic: dict[str, Group] = {}
    consumer: dict[str, dict[int, list[tuple[dict[str, Any], dict[str, Any]]]]] = {}
    for key, latest in log.final().items():
        version = key_version(key)
        if version in OFFSET_COMMIT_VERSIONS:
            decoded = reader.decode(key, latest, (it.OFFSET_COMMIT_KEY, it.OFFSET_COMMIT_VALUE))
            if decoded is None:
                continue
            k, v = decoded
            if v is None:
                continue
            expire = v.get("expireTimestamp", -1)
            offsets.setdefault(k["group"], {})[(k["topic"], k["partition"])] = Commit(
                v["offset"], v.get("leaderEpoch", -1), v["metadata"], v["commitTimestamp"],
                None if expire == -1 else expire)
        elif version == GROUP_METADATA:
            decoded = reader.decode(key, latest, (it.GROUP_METADATA_KEY, it.GROUP_METADATA_VALUE))
            if decoded is None or decoded[1] is None:
                continue
            group_id = decoded[0]["group"]
            try:
                classic[group_id] = _classic_group(group_id, decoded[1], partition)
            except CorruptDataError as err:
                reader.unreadable(f"{it.GROUP_METADATA_VALUE.name} records with a consumer subscription that "
                                  f"does not read ({err.message})", latest)
        elif version in it.CONSUMER_GROUP_RECORDS:
            decoded = reader.decode(key, latest, it.CONSUMER_GROUP_RECORDS[version])
            if decoded is not None and decoded[1] is not None:
                group_records = consumer.setdefault(decoded[0]["groupId"], {})
                group_records.setdefault(version, []).append((decoded[0], decoded[1]))
    groups = dict(classic)
    for group_id, records in consumer.items():
        built = _consumer_group(group_id, records, partition, topic_names)
        if built is not None:
            groups[group_id] = built
    for group_id, commits in offsets.items():
        group = groups.get(group_id)
        if group is None:     # offsets only: a simple consumer's group, loaded Empty
            group = groups[group_id] = Group(group_id, "classic", None, None, 0, EMPTY, None,
                                             coordinator_partition=partition)
        group.offsets.update(commits)
    return groups


def _subscribed_topics(subscription: str) -> list[str] | None:
    """The topics of a classic consumer group member's subscription (base64), as Kafka 3.8.0
    ``GroupMetadata.computeSubscribedTopics`` reads them when the group loads: the version, then the
    fields of ``ConsumerProtocolSubscription`` v0 (the prefix of every version); None where the bytes
    end inside a number (``ConsumerProtocol`` turns the ``BufferUnderflowException`` into a
    ``SchemaException``: the coordinator does not know the topics).

    :raises CorruptDataError: bytes it refuses otherwise (a null topic list or topic, more topics than
        bytes, a topic name cut short): another ``RuntimeException``, which that method does not catch,
        so the group does not load.
    """
    data = base64.b64decode(subscription)
    try:
        read_int16(data, 0, what="the subscription version")
        decoded, _ = read(it.SUBSCRIPTION, memoryview(data)[VERSION_BYTES:], 0, whole=False)
    except TruncatedDataError:
        return None
    return list(decoded["topics"])


def _classic_group(group_id: str, value: dict[str, Any], partition: int) -> Group:
    """A classic group from its ``GroupMetadataValue`` (``readGroupMessageValue``,
    ``GroupMetadata.loadGroup``).

    :raises CorruptDataError: a consumer member's subscription the loader refuses
        (:func:`_subscribed_topics`).
    """
    members = []
    consumer = value["protocolType"] == CONSUMER_PROTOCOL
    for m in value["members"]:
        # computeSubscribedTopics reads the subscriptions only once the group has a protocol
        subscribed = _subscribed_topics(m["subscription"]) if consumer and value["protocol"] is not None \
            else None
        if consumer:
            it.decode_consumer_protocol(m)
        assignment = m.get("assignment")
        assigned = ([(p["topic"], n) for p in assignment["assignedPartitions"] for n in p["partitions"]]
                    if isinstance(assignment, dict) else [])
        members.append(Member(m["memberId"], m["clientId"], m["clientHost"], subscribed, assigned,
                              m.get("groupInstanceId")))
    state_ms = value.get("currentStateTimestamp", -1)
    return Group(group_id, "classic", value["protocolType"] or None, value["protocol"], value["generation"],
                 STABLE if members else EMPTY, None if state_ms == -1 else state_ms, members,
                 coordinator_partition=partition)


def _consumer_group(group_id: str, records: dict[int, list[tuple[dict[str, Any], dict[str, Any]]]],
                    partition: int, topic_names: Mapping[str, str]) -> Group | None:
    """A KIP-848 group from its live records; None without a group metadata record (no group)."""
    metadata = records.get(CONSUMER_GROUP_METADATA)
    if not metadata:
        return None
    epoch = metadata[0][1]["epoch"]
    names = dict(topic_names)
    for _, value in records.get(PARTITION_METADATA, ()):
        names.update({t["topicId"]: t["topicName"] for t in value["topics"]})
    target = records.get(TARGET_ASSIGNMENT_METADATA)
    target_epoch = target[0][1]["assignmentEpoch"] if target else -1
    current = {k["memberId"]: v for k, v in records.get(CURRENT_MEMBER_ASSIGNMENT, ())}
    members, reconciled, assignors = [], True, set()
    for k, v in sorted(records.get(MEMBER_METADATA, ()), key=lambda kv: kv[0]["memberId"]):
        assignment = current.get(k["memberId"], {})
        assigned = [(names.get(t["topicId"], t["topicId"]), n)
                    for t in assignment.get("assignedPartitions", ()) for n in t["partitions"]]
        members.append(Member(k["memberId"], v["clientId"], v["clientHost"], list(v["subscribedTopicNames"]),
                              assigned, v.get("instanceId")))
        reconciled &= (assignment.get("state") == MEMBER_STABLE
                       and assignment.get("memberEpoch") == target_epoch)
        if v.get("serverAssignor"):
            assignors.add(v["serverAssignor"])
    if not members:
        state = EMPTY
    elif epoch > target_epoch:
        state = ASSIGNING
    else:
        state = STABLE if reconciled else RECONCILING
    return Group(group_id, "consumer", CONSUMER_PROTOCOL, ",".join(sorted(assignors)) or None, epoch, state,
                 None, members, coordinator_partition=partition)


def describe(groups: Mapping[str, Group], log_end: Callable[[str, int], int | None]) -> list[ConsumerOffset]:
    """``kafka-consumer-groups --describe`` rows of every group, by group id (see the module docstring)."""
    rows: list[ConsumerOffset] = []
    for group_id in sorted(groups):
        group = groups[group_id]
        extras = {"kind": group.kind, "protocol_type": group.protocol_type, "protocol": group.protocol,
                  "generation": group.generation, "members": len(group.members),
                  "coordinator_partition": group.coordinator_partition}

        def row(topic: str, partition: int, member: Member | None, group: Group = group,
                extras: dict[str, Any] = extras) -> ConsumerOffset:
            commit = group.offsets.get((topic, partition))
            end = log_end(topic, partition)
            offset = commit.offset if commit is not None else None
            own = {} if commit is None else {"leader_epoch": commit.leader_epoch, "metadata": commit.metadata,
                                              "commit_timestamp": commit.commit_ms,
                                              "expire_timestamp": commit.expire_ms}
            return ConsumerOffset(group.group_id, topic, partition, offset, end, lag(offset, end),
                                  member.member_id if member else None, member.host if member else None,
                                  member.client_id if member else None, group.state, {**extras, **own})

        assigned: set[tuple[str, int]] = set()
        for member in sorted((m for m in group.members if m.assigned), key=lambda m: -len(m.assigned)):
            for topic, partition in sorted(member.assigned, key=lambda tp: (tp[1], tp[0])):
                assigned.add((topic, partition))
                rows.append(row(topic, partition, member))
        rest = sorted((tp for tp in group.offsets if tp not in assigned), key=lambda tp: (tp[1], tp[0]))
        rows.extend(row(topic, partition, None) for topic, partition in rest)
        if not assigned and not rest:
            rows.append(ConsumerOffset(group.group_id, None, None, None, None, None, state=group.state,
                                       extras=extras))
    return rows


def consumer_groups(logs: Mapping[int, CoordinatorLog], *, log_end: Callable[[str, int], int | None],
                    topic_names: Mapping[str, str] | None = None, now_ms: int | None = None,
                    retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS,
                    group: str | None = None, where: Callable[[int, int], str] = batch_words
                    ) -> ConsumerGroups:
    """Every live group of the loaded ``__consumer_offsets`` partitions (``logs``: partition -> its log),
    offsets expired at ``now_ms`` (by default the newest record's timestamp: the files' own time); only
    ``group``'s when given (``all_groups`` then names every live group).  ``where(partition, batch base
    offset)`` names the batch of a record that does not read (the store: its file and byte position)."""
    notes = Notes(where)
    groups: dict[str, Group] = {}
    newest = max((log.max_timestamp for log in logs.values()), default=-1)
    now = newest if now_ms is None else now_ms
    for partition in sorted(logs):
        log = logs[partition]
        groups.update(load_partition(log, partition, notes, topic_names or {}))
        for version, count in log.key_versions.items():
            if version not in OFFSET_COMMIT_VERSIONS and version != GROUP_METADATA \
                    and version not in it.CONSUMER_GROUP_RECORDS:
                notes.counts[f"{record_type(version)} records (not read)"] += count
        if log.keyless:
            notes.counts["records without a key (the broker stops loading there)"] += log.keyless
        if log.open_transactions():
            notes.counts["producers with transactional offset commits still pending (not shown)"] += \
                log.open_transactions()
    expired = 0
    for group_id in list(groups):
        expired += len(groups[group_id].expire(now, retention_ms))
        if groups[group_id].state == EMPTY and not groups[group_id].offsets:
            del groups[group_id]          # Dead
    # KafkaAdminClient.listConsumerGroups and DescribeConsumerGroupsHandler (3.8.0) keep only the groups of
    # protocol type "consumer" or none: Kafka Connect's workers ("connect"), Schema Registry's ("sr")... are
    # not consumer groups to kafka-consumer-groups (--describe of one: "GroupId G is not a consumer group");
    # one named is answered all the same (the broker's DeleteGroups and OffsetDelete take any group)
    others = sorted((group_id, g.protocol_type) for group_id, g in groups.items()
                    if g.protocol_type not in (None, CONSUMER_PROTOCOL))
    all_groups = None
    lines = notes.lines()
    if group is not None:
        all_groups = sorted(set(groups) - {group_id for group_id, _ in others})
        groups = {group: groups[group]} if group in groups else {}
        protocol = dict(others).get(group)
        if protocol is not None:
            lines.append(f"group {group!r} is of protocol type {protocol!r}, not a consumer group: "
                         "kafka-consumer-groups neither lists nor describes it")
    elif others:
        for group_id, _ in others:
            del groups[group_id]
        named = ", ".join(f"{group_id} ({protocol})" for group_id, protocol in others[:OTHERS_NAMED])
        more = f" and {len(others) - OTHERS_NAMED} more" if len(others) > OTHERS_NAMED else ""
        lines.append(f"groups of another protocol type than consumer, which kafka-consumer-groups neither "
                     f"lists nor describes, left out: {named}{more}")
    if expired:
        minutes = retention_ms // 60000
        lines.append(f"offsets expired at {now} (offsets.retention.minutes={minutes}): {expired}")
    if logs and group is None and not groups:
        # said, as a log dir without the topic says it: an empty table alone reads as a failed read
        held = f"{len(logs)} {OFFSETS_TOPIC} partition{'' if len(logs) == 1 else 's'}"
        lines.append(f"no consumer group in the {held} here: none committed offsets, or each was deleted, "
                     "its offsets expired or of another protocol type")
    members = [GroupMember(group_id, m.member_id, m.host, m.client_id, m.instance_id,
                           tuple(sorted(m.assigned)))
               for group_id in sorted(groups)
               for m in sorted(groups[group_id].members, key=lambda m: m.member_id)]
    return ConsumerGroups(describe(groups, log_end), lines, now, members=members, all_groups=all_groups)

