"""RocketMQ consume queues (``consumequeue/TOPIC/QUEUEID/``): the core's dense queue entries.

The 20-byte entry, the ``%020d`` byte-offset file naming and the broker's
recovery rule live in :mod:`segstore.indexes.dense` (one copy for every format
that keeps a dense index); RocketMQ declares them as its native ``queue`` files
(:class:`segstore_rocketmq.plugin.RocketMQPlugin.native_indexes`).  This module
names them for the plugin's code.
"""

from segstore.indexes.dense import (
    CQ_DTYPE,
    FILE_NAME_DIGITS,
    ConsumeQueue,
    ConsumeQueueFile,
    file_name,
    parse_file_name,
    valid_entries,
)

__all__ = [
    "CQ_DTYPE",
    "FILE_NAME_DIGITS",
    "ConsumeQueue",
    "ConsumeQueueFile",
    "file_name",
    "parse_file_name",
    "valid_entries",
]
