"""Consumer groups' committed offsets: one record type for every format (``Store.consumer_groups``).

A :class:`ConsumerOffset` is one row of ``kafka-consumer-groups --describe``: a group, a
topic partition (RocketMQ: a queue) it consumes, the offset it committed there, the
log end offset and the lag between them, the member it is assigned to, and the group's
state.  Each format fills what its files keep (a RocketMQ store keeps no members or
states: ``None``); ``extras`` carries the format's own fields (Kafka: the commit's
metadata and timestamps, the group's protocol and generation).

:func:`to_arrow` gives the rows as an Arrow table of :data:`CONSUMER_SCHEMA` (what the
Spark source ``segstore_consumers`` reads).  Pure and thread-safe.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # pyarrow is imported where a table is made: `segstore info` needs none
    import pyarrow as pa

    CONSUMER_SCHEMA: pa.Schema

#: The states a group may be in, as Kafka names them (``ConsumerGroupState``, 3.8.0); a format without
#: states gives None.
STATES = ("Unknown", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning",
          "Reconciling")

#: The columns, in ``kafka-consumer-groups --describe``'s order, then the group's state.
COLUMNS = ("group", "topic", "partition", "committed_offset", "log_end_offset", "lag", "consumer_id", "host",
           "client_id", "state")


def __getattr__(name: str) -> Any:
    """:data:`CONSUMER_SCHEMA`, made on first use (with pyarrow)."""
    if name != "CONSUMER_SCHEMA":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import pyarrow as pa

    schema = pa.schema([
        pa.field("group", pa.string(), nullable=False),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("committed_offset", pa.int64()),
        pa.field("log_end_offset", pa.int64()),
        pa.field("lag", pa.int64()),
        pa.field("consumer_id", pa.string()),
        pa.field("host", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("state", pa.string()),
        pa.field("extras", pa.string()),      # the format's own fields, as one JSON object
    ])
    globals()["CONSUMER_SCHEMA"] = schema   # the same value whichever thread gets here first
    return schema


def lag(committed: int | None, log_end: int | None) -> int | None:
    """``ConsumerGroupCommand.getLag``: the log end minus the committed offset when both are known (a
    committed offset of -1 is none)."""
    if committed is None or committed == -1 or log_end is None:
        return None
    return log_end - committed


@dataclass(frozen=True, slots=True)
class ConsumerOffset:
    """One partition (RocketMQ queue) of one consumer group; see the module docstring.

    ``topic`` and ``partition`` are None on the one row of a group that has neither a
    committed offset nor an assigned partition (so that every live group is listed).
    """

    group: str
    topic: str | None
    partition: int | None
    committed_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None = None
    host: str | None = None
    client_id: str | None = None
    state: str | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON object: the columns, then ``extras``."""
        return {**{name: getattr(self, name) for name in COLUMNS}, "extras": dict(self.extras)}


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member of a consumer group as its coordinator last stored it (``kafka-consumer-groups
    --describe --members``), whether or not it holds partitions."""

    group: str
    consumer_id: str
    host: str
    client_id: str
    #: static membership's ``group.instance.id`` (None: a dynamic member)
    group_instance_id: str | None = None
    #: its assigned partitions, as (topic, partition), sorted
    assignment: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The member as a JSON object (``assignment`` as ``[topic, partition]`` pairs)."""
        return {"group": self.group, "consumer_id": self.consumer_id,
                "group_instance_id": self.group_instance_id, "host": self.host,
                "client_id": self.client_id, "partitions": len(self.assignment),
                "assignment": [list(tp) for tp in self.assignment]}


@dataclass(slots=True)
class ConsumerGroups:
    """What ``Store.consumer_groups`` answers: the rows, and what the reader could not apply."""

    rows: list[ConsumerOffset] = field(default_factory=list)
    #: one line each: records of types or versions not read (named and counted), open transactions...
    notes: list[str] = field(default_factory=list)
    #: the time offset expiry was judged at (ms), where the format expires offsets
    as_of_ms: int | None = None
    #: ``(header, extras key)`` of the format's own columns the text table shows after the common
    #: ones (RocketMQ: ``consumerProgress``'s LastTime); a key ending in ``timestamp`` holds ms, 0 none
    columns: tuple[tuple[str, str], ...] = ()
    #: every member of the groups listed, by group then consumer id, where the format keeps members
    #: (RocketMQ: none); a member holding no partition is here though no row names it
    members: list[GroupMember] = field(default_factory=list)
    #: one line each (``path:pos: what``): files that did not read whole, whose groups and offsets past
    #: that point are missing from the rows (what was read is there; a caller acting on it must not)
    damage: list[str] = field(default_factory=list)
    #: with a group asked for, every group the store holds (what a miss names), where the format says;
    #: None: not said (ask again without the group)
    all_groups: list[str] | None = None

    def groups(self) -> list[str]:
        """The groups listed, sorted."""
        return sorted({row.group for row in self.rows})

    def by_group(self) -> dict[str, list[ConsumerOffset]]:
        """Each group's rows, in their order, the groups sorted.  ``O(rows)``."""
        found: dict[str, list[ConsumerOffset]] = {}
        for row in self.rows:
            found.setdefault(row.group, []).append(row)
        return dict(sorted(found.items()))


def to_arrow(rows: Iterable[ConsumerOffset]) -> pa.Table:
    """The rows as a table of :data:`CONSUMER_SCHEMA` (``extras`` as JSON text)."""
    import pyarrow as pa

    rows = list(rows)
    columns: dict[str, list[Any]] = {name: [getattr(row, name) for row in rows] for name in COLUMNS}
    columns["extras"] = [json.dumps(dict(row.extras), sort_keys=True) for row in rows]
    return pa.Table.from_pydict(columns, schema=__getattr__("CONSUMER_SCHEMA"))
