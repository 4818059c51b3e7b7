"""RocketMQ IndexFile (``index/``): the core's key-hash file.

The file layout, ``IndexFile.put`` and the Java string hash live in
:mod:`segstore.indexes.keyhash` / :mod:`segstore.indexes.javahash` (one copy);
RocketMQ declares them as its native ``key`` files and lends its C ``index_put``
to the core put (:func:`segstore.indexes.keyhash.use_accelerator`, tested equal
to the numpy reference).  This module names them for the plugin's code.
"""

from segstore import speedups
from segstore.indexes.keyhash import (
    DEFAULT_MAX_HASH_SLOT_NUM,
    DEFAULT_MAX_INDEX_NUM,
    ENTRY,
    ENTRY_DTYPE,
    FILE_NAME_LENGTH,
    FIRST_ENTRY,
    GEOMETRY_SEARCH_LIMIT,
    HEADER,
    INDEX_COUNT_POS,
    INT32_MAX,
    INT32_MIN,
    INVALID_INDEX,
    KEY_SEPARATOR,
    MS_PER_SECOND,
    SLOT_DTYPE,
    SMALL_PUT,
    TOPIC_KEY_SEPARATOR,
    TRANSACTION_ROLLBACK,
    TRANSACTION_TYPE_MASK,
    IndexFile,
    IndexHeader,
    IndexRequest,
    IndexService,
    Int64s,
    abs_hashes,
    build_key,
    end_timestamps,
    file_name_for,
    file_size,
    geometry_of,
    geometry_on_disk,
    index_key_hash,
    index_key_hashes,
    index_keys,
    use_accelerator,
)

__all__ = [
    "DEFAULT_MAX_HASH_SLOT_NUM",
    "DEFAULT_MAX_INDEX_NUM",
    "ENTRY",
    "ENTRY_DTYPE",
    "FILE_NAME_LENGTH",
    "FIRST_ENTRY",
    "GEOMETRY_SEARCH_LIMIT",
    "HEADER",
    "INDEX_COUNT_POS",
    "INT32_MAX",
    "INT32_MIN",
    "INVALID_INDEX",
    "KEY_SEPARATOR",
    "MS_PER_SECOND",
    "SLOT_DTYPE",
    "SMALL_PUT",
    "TOPIC_KEY_SEPARATOR",
    "TRANSACTION_ROLLBACK",
    "TRANSACTION_TYPE_MASK",
    "IndexFile",
    "IndexHeader",
    "IndexRequest",
    "IndexService",
    "Int64s",
    "abs_hashes",
    "build_key",
    "end_timestamps",
    "file_name_for",
    "file_size",
    "geometry_of",
    "geometry_on_disk",
    "index_key_hash",
    "index_key_hashes",
    "index_keys",
    "use_accelerator",
]

# The broker plugin's C put (built without a compiler, or SEGSTORE_PURE_PYTHON=1: numpy).
use_accelerator(speedups.load("segstore_rocketmq._speedups"))
