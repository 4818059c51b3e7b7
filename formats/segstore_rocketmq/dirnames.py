"""What a RocketMQ store directory holds by name, and the test for one (the plugin's ``detect``).

``DefaultMessageStore``/``StorePathConfigHelper``: ``commitlog/``, ``consumequeue/``,
``index/``, ``checkpoint``, ``lock``.  Kept apart from the store so that telling
whether a directory is RocketMQ's (run for every store a command opens, Kafka's
too) loads nothing more.  Pure except for the listing.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from segstore import files
from segstore.javatext import parse_int

from .checkpoint import FILE_NAME as CHECKPOINT_FILE
from .checkpoint import FILE_SIZE as CHECKPOINT_SIZE

COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
LOCK_FILE = "lock"
#: ``UtilAll.offset2FileName``: a commitlog (or consume-queue) file is named by its first byte's offset in
#: 20 digits, as the core's segment files are (``segstore.indexes.dense.FILE_NAME_DIGITS``, not imported
#: here: telling a Kafka store from a RocketMQ one would load the core's dense index).
FILE_NAME_DIGITS = 20
#: RocketMQ 5.x (``rocketmq-all-5.3.0``) files, each there only where a broker wrote it: the batch consume
#: queues (``BatchConsumeQueue``, :mod:`.batchconsumequeue`) and the timer store (``TimerMessageStore``,
#: :mod:`.timerstore`).  ``info`` looks for these names before it loads the modules that read them.
BCQ_DIR = "batchconsumequeue"
TIMERLOG_DIR = "timerlog"
TIMERWHEEL_FILE = "timerwheel"
TIMERCHECK_FILE = os.path.join("config", "timercheck")
TIMERMETRICS_FILE = os.path.join("config", "timermetrics")
#: The name part of files holding bytes recovery cut (``segstore.files.save_aside``): not commitlog files.
KEPT_ASIDE = ".cut-"

#: Files of a RocksDB database (RocketMQ 5.2+ ``storeType=defaultRocksDB``: ``RocksDBConsumeQueueStore``
#: opens its database in ``consumequeue/``): its ``CURRENT`` file names the live ``MANIFEST-*``.
ROCKSDB_MARKER, ROCKSDB_MANIFEST = "CURRENT", "MANIFEST-"


class QueueDirs(NamedTuple):
    """The queue directories under a ``consumequeue/``-style root, ``(topic, queue id, directory)``
    each, and whether the root holds a RocksDB database instead (RocketMQ 5.2+): a ``CURRENT`` file
    and a ``MANIFEST-*`` file (as files they are no topics: a topic of those names is a directory).
    ``unloadable``: the topic directories whose names are not UTF-8, which the broker loads no queue
    of (:func:`queue_dirs`), with the queue ids they would hold, ``(directory, ids)`` each: no queue of
    ``queues``."""

    queues: list[tuple[str, int, str]]
    rocksdb: bool
    unloadable: list[tuple[str, list[int]]]


def utf8_name(name: str) -> bool:
    """Whether a directory entry's name (``os.listdir``'s str, bytes that are not UTF-8 kept as
    ``surrogateescape`` characters) is UTF-8 text."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def queue_dirs(root: str) -> QueueDirs:
    """The queues under ``root`` (:class:`QueueDirs`) as RocketMQ 4.9.7
    ``DefaultMessageStore.loadConsumeQueue`` finds them: a topic entry that is no directory (its
    ``listFiles()`` is null) is skipped, and so is a queue entry whose name ``Integer.parseInt``
    refuses (``NumberFormatException``: ``continue``).  The broker starts and serves the store beside
    such strays (a README, an editor's backup), so readers do too.  So is a topic directory whose name
    is not UTF-8 (``QueueDirs.unloadable``): ``java.io.File.listFiles`` decodes the name (under a UTF-8
    or ASCII ``sun.jnu.encoding``, a U+FFFD or ``?`` for each malformed sequence), and the path of that
    text names no directory, so ``fileTopic.listFiles()`` is null and none of its queues loads.  A
    negative queue id (``-1``, which the broker loads) is listed: the caller decides.  A queue's
    directory is the one the broker reads, ``TOPIC/`` + the queue id as Java writes it
    (``ConsumeQueue``'s constructor: ``storePath + File.separator + topic + File.separator +
    queueId``), whatever name parsed to the id: ``00`` or ``+0`` beside ``0`` is never read, and one
    alone stands for a queue with no directory yet; so does a file of the queue's own name
    (``MappedFileQueue.load``: ``listFiles()`` of a file is null, a queue without files).
    """
    queues = []
    strays = []
    unloadable = []
    for topic in files.list_dir(root):
        directory = os.path.join(root, topic)
        if not files.is_dir(directory):
            strays.append(topic)
            continue
        names = set(files.list_dir(directory))
        ids = {queue_id for queue_id in map(parse_int, names) if queue_id is not None}
        held = [(topic, queue_id, os.path.join(directory, str(queue_id))) for queue_id in sorted(ids)
                if str(queue_id) in names and files.is_dir(os.path.join(directory, str(queue_id)))]
        if not utf8_name(topic):
            if held:
                unloadable.append((directory, [queue_id for _, queue_id, _ in held]))
            continue
        queues += held
    rocksdb = ROCKSDB_MARKER in strays and any(name.startswith(ROCKSDB_MANIFEST) for name in strays)
    return QueueDirs(queues, rocksdb, unloadable)


def is_rocketmq_store(path: str) -> bool:
    """A directory with ``commitlog/`` (empty, or holding a file named by 20 digits) or
    ``consumequeue/``, or an empty store: a ``checkpoint`` of at most 4096 bytes with ``config/`` or ``lock``.

    Other names inside ``commitlog/`` do not make it another format's: opening the store
    refuses them with an error naming each (the broker's loader refuses them too)."""
    commitlog = os.path.join(path, COMMITLOG_DIR)
    if files.is_dir(commitlog):
        names = [name for name in files.list_dir(commitlog) if KEPT_ASIDE not in name]
        return not names or any(len(name) == FILE_NAME_DIGITS and name.isdigit() for name in names)
    if files.is_dir(os.path.join(path, CONSUMEQUEUE_DIR)):
        return True
    # A broker that started and stored nothing leaves checkpoint, config/ and lock, no commitlog/.  One
    # killed as it started may leave the checkpoint shorter: StoreCheckpoint (4.9.7) creates the file,
    # then maps its 4096 bytes (which sizes it), and reads a short one as zeros.
    checkpoint = os.path.join(path, CHECKPOINT_FILE)
    return files.exists(checkpoint) and files.file_size(checkpoint) <= CHECKPOINT_SIZE and (
        files.is_dir(os.path.join(path, "config")) or files.exists(os.path.join(path, LOCK_FILE)))


def has_timer_store(path: str) -> bool:
    """Whether a store has any timer file."""
    return any(files.exists(os.path.join(path, name))
               for name in (TIMERLOG_DIR, TIMERWHEEL_FILE, TIMERCHECK_FILE, TIMERMETRICS_FILE))
