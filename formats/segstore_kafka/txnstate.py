"""Transactional ids as the transaction coordinator loads them from ``__transaction_state``.

``TransactionStateManager.loadTransactionMetadata`` (Kafka 3.8.0) keeps the latest value per
transactional id (a tombstone removes it); each value is a ``TransactionLogValue``
(:mod:`.internal_topics`): producer id and epoch, the transaction's timeout, state and
partitions (not kept for ``Empty``), start and last-update times.  One dict per id, in
``kafka-transactions describe``'s terms; an id in state ``Dead`` (being expired) is left out, as
``TransactionCoordinator.handleDescribeTransactions`` and ``TransactionStateManager.
listTransactionStates`` leave it out.  A record this reader cannot decode is a dict with ``error``
(named, with the batch holding it, never a crash).  Pure; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from segstore.errors import CorruptDataError

from . import internal_topics as it
from .coordinator import CoordinatorLog
from .schema import read, read_int16

TRANSACTION_TOPIC = "__transaction_state"
VERSION_BYTES = 2
#: The state the coordinators' list and describe answers leave out.
DEAD = "Dead"


def batch_words(partition: int, batch_offset: int) -> str:
    """Where a record lies when nothing better is known: its partition and its batch's base offset."""
    return f"{TRANSACTION_TOPIC}-{partition} (the batch at offset {batch_offset})"


def _state(partition: int, key: bytes, value: bytes) -> dict[str, Any]:
    try:
        key_version = read_int16(key, 0, what="the key version")
        # TransactionLog.readTxnRecordKey / readTxnRecordValue never look past the last field
        key_data, _ = read(it.TRANSACTION_LOG_KEY, memoryview(key)[VERSION_BYTES:], key_version, whole=False)
    except CorruptDataError as err:
        return {"transactional_id": None, "coordinator_partition": partition,
                "error": f"a TransactionLogKey in this batch does not read: {err.message}"}
    txn_id = key_data["transactionalId"]
    try:
        value_version = read_int16(value, 0, what="the value version")
        data, _ = read(it.TRANSACTION_LOG_VALUE, memoryview(value)[VERSION_BYTES:], value_version,
                       whole=False)
        state, partitions = it.transaction_state(data)
    except CorruptDataError as err:
        return {"transactional_id": txn_id, "coordinator_partition": partition,
                "error": f"the TransactionLogValue of transactional id {txn_id!r} in this batch does not "
                         f"read: {err.message}"}
    return {"transactional_id": txn_id, "producer_id": data["producerId"],
            "producer_epoch": data["producerEpoch"], "state": state,
            "timeout_ms": data["transactionTimeoutMs"],
            "start_timestamp": data["transactionStartTimestampMs"],
            "last_update_timestamp": data["transactionLastUpdateTimestampMs"],
            "partitions": [f"{t}-{n}" for t, n in sorted(set(partitions))],
            "coordinator_partition": partition}


def transaction_states(logs: Mapping[int, CoordinatorLog], transactional_id: str | None = None, *,
                       where: Callable[[int, int], str] = batch_words) -> list[dict[str, Any]]:
    """Every live transactional id of the loaded ``__transaction_state`` partitions (``transactional_id``'s
    only), by id, ``Dead`` ones left out.  ``where(partition, batch base offset)`` names the batch of a
    record that does not read (the store: its file and byte position)."""
    found = []
    for partition in sorted(logs):
        for key, latest in logs[partition].final().items():
            if latest.value is None:
                continue
            state = _state(partition, key, latest.value)
            if "error" in state:
                state["error"] = f"{where(partition, latest.batch_offset)}: {state['error']}"
            elif state["state"] == DEAD:
                continue
            # a key that does not read may be the id asked for: it is named whatever the id asked
            if transactional_id is None or state["transactional_id"] in (transactional_id, None):
                found.append(state)
    return sorted(found, key=lambda s: (s["transactional_id"] is None, s["transactional_id"] or ""))
