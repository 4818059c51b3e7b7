"""``config/*.json`` in the broker's fastjson shape: topics.json and consumerOffset.json read and
written, delayOffset.json read, every other file left as it is.

The broker writes both with fastjson, pretty-printed with tabs, and keeps the
previous content as ``NAME.bak`` (``ConfigManager.persist``: ``MixAll.string2File``
writes ``.tmp``, copies the old file to ``.bak``, then renames); indents are tabs, drawn
here as 4 spaces::

    topics.json                              consumerOffset.json
    {                                        {
        "dataVersion":{                            "offsetTable":{
            "counter":1,                                   "TopicA@group":{0:12,1:3
            "timestamp":1700000000000                      }
        },                                         }
        "topicConfigTable":{                   }
            "TopicA":{
                "order":false, "perm":6, "readQueueNums":4, "topicFilterType":"SINGLE_TAG",
                "topicName":"TopicA", "topicSysFlag":0, "writeQueueNums":4
            }
        }
    }

fastjson writes integer map keys unquoted (``{0:12}``), which is not JSON;
:func:`loads_fastjson` quotes them before parsing.  Not thread-safe: one writer.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from segstore import files
from segstore.errors import CorruptDataError

from .javacompat import concurrent_hashmap_order, string_hash

CONFIG_DIR = "config"
TOPICS_FILE = "topics.json"
CONSUMER_OFFSET_FILE = "consumerOffset.json"
BACKUP_SUFFIX = ".bak"
TOPIC_GROUP_SEPARATOR = "@"
DEFAULT_PERM = 6                   # PermName.PERM_READ | PERM_WRITE
_UNQUOTED_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')
#: marks an unquoted integer key while the text goes through ``json`` (cannot occur in fastjson text)
_INT_KEY_MARK = "\x00"
#: the replacement: the key quoted, behind the marker written as a JSON escape (``\u0000``)
_MARK_INT_KEY = r'\1"\\u0000\2"\3'
DELAY_OFFSET_FILE = "delayOffset.json"
SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
#: ``ConsumerOffsetManager.offsetTable = new ConcurrentHashMap<>(512)`` and ``commitOffset``'s
#: ``new ConcurrentHashMap<Integer, Long>(32)`` (rocketmq-all-4.9.7): the tables of a broker that
#: started without the file; one that loaded it holds fastjson's ``new ConcurrentHashMap()``.
NEW_TABLE_CAPACITY = 512
#: ``TopicConfigManager.topicConfigTable = new ConcurrentHashMap<>(1024)`` (rocketmq-all-4.9.7).
TOPIC_TABLE_CAPACITY = 1024
NEW_QUEUE_MAP_CAPACITY = 32


#: ``PermName`` (rocketmq-all-4.9.7 common/constant): the permission bits of a topic.
PERM_READ, PERM_WRITE, PERM_INHERIT = 4, 2, 1


def perm_text(perm: int) -> str:
    """``PermName.perm2String``: ``R``, ``W``, ``X`` (inherit) or ``-`` in three places (``RW-`` for 6)."""
    return "".join(letter if perm & bit == bit else "-"
                   for letter, bit in (("R", PERM_READ), ("W", PERM_WRITE), ("X", PERM_INHERIT)))


def _int_keys(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    return {int(k[1:]) if k.startswith(_INT_KEY_MARK) else k: v for k, v in pairs}


def loads_fastjson(text: str, path: str) -> Any:
    """Parse fastjson output: unquoted integer keys (``{0:12}``) come back as ``int`` keys, quoted
    ones as ``str``, so :func:`dumps_fastjson` writes each back as it was.

    :raises CorruptDataError: not parseable, naming ``path`` and the position.
    """
    try:
        marked = _UNQUOTED_INT_KEY.sub(_MARK_INT_KEY, text)
        return json.loads(marked, object_pairs_hook=_int_keys)
    except json.JSONDecodeError as err:
        raise CorruptDataError(f"expected a fastjson document, found {err.msg}", path, err.pos) from err


def dumps_fastjson(value: Any, depth: int = 0) -> str:
    """``JSON.toJSONString(value, PrettyFormat)`` as fastjson 1.2.x writes it (``MapSerializer``,
    ``ListSerializer``): a string key goes on a new line indented by tabs, ``"key":value``; an
    integer key stays on the line, unquoted (``{0:12,1:3``); a non-empty map or list closes on
    a new line.  Maps are written in their iteration order."""
    if isinstance(value, dict):
        out = ["{"]
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            if isinstance(key, int):
                out.append(f"{key}:")
            else:
                out.append("\n" + "\t" * (depth + 1) + json.dumps(key, ensure_ascii=False) + ":")
            out.append(dumps_fastjson(item, depth + 1))
        if value:
            out.append("\n" + "\t" * depth)
        return "".join(out) + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [("\n" + "\t" * (depth + 1)) + dumps_fastjson(item, depth + 1) for item in value]
        return "[" + ",".join(items) + "\n" + "\t" * depth + "]"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _persist(path: str, text: str) -> None:
    """Write ``text`` atomically, keeping the old content as ``.bak``."""
    if files.exists(path):
        files.write_atomic(path + BACKUP_SUFFIX, files.read_bytes(path))
    files.write_atomic(path, text)


class TopicConfigs:
    """The topics the store knows, with their queue counts (``config/topics.json``).

    Written as ``TopicConfigManager.persist`` writes it: every member and topic field read
    is kept (5.x adds some), topics in the iteration order of the broker's
    ``new ConcurrentHashMap<>(1024)`` (filled from the file through fastjson's map).
    """

    def __init__(self, store_dir: str) -> None:
        self.path = os.path.join(store_dir, CONFIG_DIR, TOPICS_FILE)
        self.document: dict[str, Any] = {}
        self.topics: dict[str, dict[str, Any]] = {}
        self.counter = 0
        self.timestamp = 0
        if files.exists(self.path):
            self.document = loads_fastjson(files.read_text(self.path), self.path)
            loaded = dict(self.document.get("topicConfigTable") or {})
            # fastjson parses into a new ConcurrentHashMap(); the manager putAll()s that into its own
            order = concurrent_hashmap_order(list(loaded), [string_hash(n) for n in loaded])
            self.topics = {name: loaded[name] for name in order}
            version = self.document.get("dataVersion") or {}
            self.counter = int(version.get("counter", 0))
            self.timestamp = int(version.get("timestamp", 0))

    def summary(self, stored: dict[str, int]) -> dict[str, dict[str, Any]]:
        """Per topic of ``topics.json`` (by name): queue counts, permission (``perm2String``), order, system
        flag, and ``queues_stored``: how many consume queues the store holds for it (``stored``)."""
        out = {}
        for name in sorted(self.topics):
            entry = self.topics[name] if isinstance(self.topics[name], dict) else {}
            perm = entry.get("perm", DEFAULT_PERM)
            out[name] = {"read_queue_nums": entry.get("readQueueNums"),
                         "write_queue_nums": entry.get("writeQueueNums"),
                         "perm": perm_text(perm) if isinstance(perm, int) else str(perm),
                         "order": entry.get("order"), "topic_sys_flag": entry.get("topicSysFlag"),
                         "queues_stored": stored.get(name, 0)}
        return out

    def ensure(self, topic: str, queue_id: int) -> bool:
        """Record that ``topic`` has queue ``queue_id``; True if that changed anything."""
        entry = self.topics.get(topic)
        needed = queue_id + 1
        if entry is not None and entry.get("writeQueueNums", 0) >= needed:
            return False
        if entry is None:
            self.topics[topic] = {
                "order": False, "perm": DEFAULT_PERM, "readQueueNums": needed,
                "topicFilterType": "SINGLE_TAG", "topicName": topic, "topicSysFlag": 0,
                "writeQueueNums": needed,
            }
        else:
            entry["readQueueNums"] = entry["writeQueueNums"] = needed
        self.counter += 1
        return True

    def dumps(self) -> str:
        order = concurrent_hashmap_order(list(self.topics), [string_hash(n) for n in self.topics],
                                         TOPIC_TABLE_CAPACITY)
        version = {**(self.document.get("dataVersion") or {}), "counter": self.counter,
                   "timestamp": self.timestamp}
        return dumps_fastjson({**self.document, "dataVersion": version,
                               "topicConfigTable": {name: self.topics[name] for name in order}})

    def save(self, now_ms: int) -> None:
        self.timestamp = now_ms
        files.make_dirs(os.path.dirname(self.path))
        _persist(self.path, self.dumps())


class ConsumerOffsets:
    """Committed consumer offsets, ``topic@group`` -> queue id -> offset (``config/consumerOffset.json``).

    Written as the broker's ``ConsumerOffsetManager.persist`` writes it: every other member
    of the file (5.x adds ``dataVersion``) kept as read, the table in the iteration order
    of the broker's ``ConcurrentHashMap`` (:func:`.javacompat.concurrent_hashmap_order`).
    """

    def __init__(self, store_dir: str) -> None:
        self.path = os.path.join(store_dir, CONFIG_DIR, CONSUMER_OFFSET_FILE)
        self.document: dict[str, Any] = {}
        self.table: dict[str, dict[int, int]] = {}
        self._loaded: set[str] = set()
        self._capacity: int | None = NEW_TABLE_CAPACITY
        if files.exists(self.path):
            self.document = loads_fastjson(files.read_text(self.path), self.path)
            for name, offsets in (self.document.get("offsetTable") or {}).items():
                self.table[name] = {int(q): int(o) for q, o in offsets.items()}
            self._loaded = set(self.table)
            self._capacity = None

    def commit(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset

    def get(self, topic: str, group: str, queue_id: int) -> int | None:
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id)

    def dumps(self) -> str:
        names = concurrent_hashmap_order(list(self.table), [string_hash(n) for n in self.table],
                                         self._capacity)
        table = {}
        for name in names:
            offsets = self.table[name]
            capacity = None if name in self._loaded else NEW_QUEUE_MAP_CAPACITY
            order = concurrent_hashmap_order(list(offsets), list(offsets), capacity)
            table[name] = {q: offsets[q] for q in order}
        return dumps_fastjson({**self.document, "offsetTable": table})

    def save(self) -> None:
        files.make_dirs(os.path.dirname(self.path))
        _persist(self.path, self.dumps())


def read_delay_offsets(store_dir: str) -> dict[int, int]:
    """``config/delayOffset.json``: delay level -> offset delivered so far in its ``SCHEDULE_TOPIC_XXXX``
    queue (``ScheduleMessageService.offsetTable``); empty without the file.  segstore never rewrites it.

    :raises CorruptDataError: not fastjson.
    """
    path = os.path.join(store_dir, CONFIG_DIR, DELAY_OFFSET_FILE)
    if not files.exists(path):
        return {}
    table = loads_fastjson(files.read_text(path), path).get("offsetTable") or {}
    return {int(level): int(offset) for level, offset in table.items()}
