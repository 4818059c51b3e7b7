"""Replay a compat-fixture spec (``compat_fixtures/rocketmq/NAME/spec.json``) into a store.

A spec holds the broker config used and, per message, what the producer sent plus
the store time the broker gave it (format in ``compat_fixtures/README.md``).  Each
message becomes one append item of :meth:`RocketMQStore.append_batch`, whose store
semantics (delay levels, transactions, properties order) are the broker's; with
the spec's store times and hosts the result is byte-identical to the broker's files.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from segstore import progress
from segstore.errors import InvalidMessageError
from segstore.plugin import WRITE_CHUNK, chunks

#: spec field name -> append field name (those that only change name).
_RENAMED = {
    "topic": "topic", "queueId": "queue_id", "bornTimestamp": "born_timestamp", "bornHost": "born_host",
    "flag": "flag", "tags": "tags", "keys": "keys", "properties": "properties",
    "reconsumeTimes": "reconsume_times", "sysFlag": "sys_flag",
    "preparedTransactionOffset": "prepared_transaction_offset", "delayLevel": "delay_level",
    "storeHost": "store_host", "storeTimestamp": "store_timestamp",
}


_BODY_FIELDS = ("body", "bodyBase64")


def append_item(message: Mapping[str, Any]) -> dict[str, Any]:
    """The append dict for one spec message.

    :raises InvalidMessageError: an unknown spec field, or both ``body`` and ``bodyBase64``.
    """
    item: dict[str, Any] = {}
    for name, value in message.items():
        if name == "body":
            item["body"] = value.encode("utf-8")
        elif name == "bodyBase64":
            item["body"] = base64.b64decode(value)
        elif name in _RENAMED:
            item[_RENAMED[name]] = value
        else:
            raise InvalidMessageError(f"expected spec message fields {sorted([*_RENAMED, *_BODY_FIELDS])}, "
                                      f"found {name!r}")
    if "body" in message and "bodyBase64" in message:
        raise InvalidMessageError("expected one of body and bodyBase64 in a spec message, found both")
    return item


def replay(store: Any, spec: Mapping[str, Any]) -> int:
    """Append every message of ``spec`` to an open store, in order, :data:`WRITE_CHUNK` messages a batch
    (reported to the open :func:`progress.task`, a message a unit); returns the count."""
    count = 0
    for chunk in chunks(spec.get("messages", []), WRITE_CHUNK):
        store.append_batch([append_item(m) for m in chunk])
        count += len(chunk)
        progress.advance(len(chunk))
    return count
