"""Transactional ids as the transaction coordinator loads them from ``__transaction_state``.

``TransactionStateManager.loadTransactionMetadata`` (Kafka 3.8.0) keeps the latest value per
transactional id (a tombstone removes it); each value is a ``TransactionLogValue``
(:mod:`.internal_topics`): producer id and epoch, the transaction's timeout, state and
partitions (not kept for ``Empty``), start and last-update times.  One dict per id, in
``kafka-transactions describe``'s terms; a record this reader cannot decode is a dict
with ``error`` (named, never a crash).  Pure; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segstore.errors import CorruptDataError

from . import internal_topics as it
from .coordinator import CoordinatorLog
from .schema import read, read_int16

TRANSACTION_TOPIC = "__transaction_state"
VERSION_BYTES = 2


def _state(partition: int, key: bytes, value: bytes) -> dict[str, Any]:
    try:
        key_version = read_int16(key, 0, what="the key version")
        key_data, _ = read(it.TRANSACTION_LOG_KEY, memoryview(key)[VERSION_BYTES:], key_version)
    except CorruptDataError as err:
        return {"transactional_id": None, "coordinator_partition": partition,
                "error": f"TransactionLogKey not read: {err.message}"}
    txn_id = key_data["transactionalId"]
    try:
        value_version = read_int16(value, 0, what="the value version")
        data, _ = read(it.TRANSACTION_LOG_VALUE, memoryview(value)[VERSION_BYTES:], value_version)
    except CorruptDataError as err:
        return {"transactional_id": txn_id, "coordinator_partition": partition,
                "error": f"TransactionLogValue not read: {err.message}"}
    status = data["transactionStatus"]
    if not 0 <= status < len(it.TRANSACTION_STATES):
        return {"transactional_id": txn_id, "coordinator_partition": partition,
                "error": f"expected a transaction state 0..{len(it.TRANSACTION_STATES) - 1}, found {status}"}
    state = it.TRANSACTION_STATES[status]
    partitions = [] if state == "Empty" else sorted(
        (p["topic"], n) for p in data["transactionPartitions"] or () for n in p["partitionIds"])
    return {"transactional_id": txn_id, "producer_id": data["producerId"],
            "producer_epoch": data["producerEpoch"], "state": state,
            "timeout_ms": data["transactionTimeoutMs"],
            "start_timestamp": data["transactionStartTimestampMs"],
            "last_update_timestamp": data["transactionLastUpdateTimestampMs"],
            "partitions": [f"{t}-{n}" for t, n in partitions], "coordinator_partition": partition}


def transaction_states(logs: Mapping[int, CoordinatorLog], transactional_id: str | None = None) \
        -> list[dict[str, Any]]:
    """Every live transactional id of the loaded ``__transaction_state`` partitions, by id."""
    found = []
    for partition in sorted(logs):
        for key, latest in logs[partition].final().items():
            if latest.value is None:
                continue
            state = _state(partition, key, latest.value)
            if transactional_id is None or state["transactional_id"] == transactional_id:
                found.append(state)
    return sorted(found, key=lambda s: (s["transactional_id"] is None, s["transactional_id"] or ""))
