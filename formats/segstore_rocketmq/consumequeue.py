"""RocketMQ consume queues (``consumequeue/TOPIC/QUEUEID/``): the core's dense queue entries.

The 20-byte entry, the ``%020d`` byte-offset file naming and the broker's
recovery rule live in :mod:`segstore.indexes.dense` (one copy for every format
that keeps a dense index); RocketMQ declares them as its native ``queue`` files
(:class:`segstore_rocketmq.plugin.RocketMQPlugin.native_indexes`).  This module
names them for the plugin's code.
"""

import os

from segstore.indexes.dense import (
    CQ_DTYPE,
    FILE_NAME_DIGITS,
    ConsumeQueue,
    ConsumeQueueFile,
    file_name,
    name_offset,
    parse_file_name,
    valid_entries,
)

#: segstore's own directory at the store root (``segstore.layouts`` keeps its indexes there too)
SEGSTORE_DIR = ".segstore"
#: under it, the bytes recovery cut, by the directory they were cut from
CUT_DIR = "cut"


def queue_cut_dir(store: str, topic: str, queue_id: int) -> str:
    """Where a writer keeps the bytes it cuts off consume-queue files of ``topic``/``queue_id``."""
    return os.path.join(store, SEGSTORE_DIR, CUT_DIR, "consumequeue", topic, str(queue_id))


__all__ = [
    "CQ_DTYPE",
    "CUT_DIR",
    "FILE_NAME_DIGITS",
    "SEGSTORE_DIR",
    "ConsumeQueue",
    "ConsumeQueueFile",
    "file_name",
    "name_offset",
    "parse_file_name",
    "queue_cut_dir",
    "valid_entries",
]
