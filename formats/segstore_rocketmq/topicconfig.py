"""``config/topics.json`` and ``config/consumerOffset.json`` in the broker's fastjson shape.

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

CONFIG_DIR = "config"
TOPICS_FILE = "topics.json"
CONSUMER_OFFSET_FILE = "consumerOffset.json"
BACKUP_SUFFIX = ".bak"
TOPIC_GROUP_SEPARATOR = "@"
DEFAULT_PERM = 6                   # PermName.PERM_READ | PERM_WRITE
_UNQUOTED_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def loads_fastjson(text: str, path: str) -> Any:
    """Parse fastjson output (unquoted integer keys allowed).

    :raises CorruptDataError: not parseable, naming ``path`` and the position.
    """
    try:
        return json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text))
    except json.JSONDecodeError as err:
        raise CorruptDataError(f"expected fastjson, found {err.msg}", path, err.pos) from err


def _pretty(value: Any, depth: int) -> str:
    """fastjson's PrettyFormat: tabs, ``"key":value``, no spaces."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        pad = "\t" * (depth + 1)
        items = [f"{pad}{json.dumps(str(k), ensure_ascii=False)}:{_pretty(v, depth + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "\t" * depth + "}"
    return json.dumps(value, ensure_ascii=False)


def _offsets_object(offsets: dict[int, int], depth: int) -> str:
    """A queue-id -> offset map as fastjson writes it: unquoted keys on one line."""
    body = ",".join(f"{qid}:{off}" for qid, off in sorted(offsets.items()))
    return "{" + body + "\n" + "\t" * depth + "}"


def _persist(path: str, text: str) -> None:
    """Write ``text`` atomically, keeping the old content as ``.bak``."""
    if files.exists(path):
        files.write_atomic(path + BACKUP_SUFFIX, files.read_bytes(path))
    files.write_atomic(path, text)


class TopicConfigs:
    """The topics the store knows, with their queue counts (``config/topics.json``)."""

    def __init__(self, store_dir: str) -> None:
        self.path = os.path.join(store_dir, CONFIG_DIR, TOPICS_FILE)
        self.topics: dict[str, dict[str, Any]] = {}
        self.counter = 0
        self.timestamp = 0
        if files.exists(self.path):
            data = loads_fastjson(files.read_text(self.path), self.path)
            self.topics = dict(data.get("topicConfigTable", {}))
            version = data.get("dataVersion", {})
            self.counter = int(version.get("counter", 0))
            self.timestamp = int(version.get("timestamp", 0))

    def ensure(self, topic: str, queue_id: int) -> bool:
        """Record that ``topic`` has queue ``queue_id``; True if that changed anything."""
        entry = self.topics.get(topic)
        needed = queue_id + 1
        if entry is not None and entry.get("writeQueueNums", 0) >= needed:
            return False
        self.topics[topic] = {
            "order": False, "perm": DEFAULT_PERM, "readQueueNums": needed, "topicFilterType": "SINGLE_TAG",
            "topicName": topic, "topicSysFlag": 0, "writeQueueNums": needed,
        }
        self.counter += 1
        return True

    def dumps(self) -> str:
        table = {name: self.topics[name] for name in sorted(self.topics)}
        return _pretty({"dataVersion": {"counter": self.counter, "timestamp": self.timestamp},
                        "topicConfigTable": table}, 0)

    def save(self, now_ms: int) -> None:
        self.timestamp = now_ms
        files.make_dirs(os.path.dirname(self.path))
        _persist(self.path, self.dumps())


class ConsumerOffsets:
    """Committed consumer offsets, ``topic@group`` -> queue id -> offset (``config/consumerOffset.json``)."""

    def __init__(self, store_dir: str) -> None:
        self.path = os.path.join(store_dir, CONFIG_DIR, CONSUMER_OFFSET_FILE)
        self.table: dict[str, dict[int, int]] = {}
        if files.exists(self.path):
            data = loads_fastjson(files.read_text(self.path), self.path)
            for name, offsets in data.get("offsetTable", {}).items():
                self.table[name] = {int(q): int(o) for q, o in offsets.items()}

    def commit(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset

    def get(self, topic: str, group: str, queue_id: int) -> int | None:
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id)

    def dumps(self) -> str:
        if not self.table:
            return '{\n\t"offsetTable":{}\n}'
        items = [f"\t\t{json.dumps(name, ensure_ascii=False)}:{_offsets_object(self.table[name], 2)}"
                 for name in sorted(self.table)]
        return '{\n\t"offsetTable":{\n' + ",\n".join(items) + "\n\t}\n}"

    def save(self) -> None:
        files.make_dirs(os.path.dirname(self.path))
        _persist(self.path, self.dumps())
