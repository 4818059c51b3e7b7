"""A log directory's identity files: ``meta.properties`` and each partition's ``partition.metadata``.

Layouts (UTF-8 text, Kafka 3.8.0)::

    meta.properties      (metadata/.../properties/MetaProperties.java; java.util.Properties text,
                          read by segstore.properties as PropertiesUtils.readPropertiesFile reads it)
        #comment lines            '#' or '!' first
        version=1                 0: a ZooKeeper broker's (broker.id), 1: a KRaft node's (node.id)
        cluster.id=EpwKlK0lR6qKZW0cGwZz8w
        node.id=1                 (version 1) / broker.id=1 (version 0)
        directory.id=...          (3.7+)

    partition.metadata   (storage/.../checkpoint/PartitionMetadataReadBuffer.java)
        version: 0                the first line: two whitespace-separated tokens, version >= 0
        topic_id: cp-NpW6vRj6q1bIA5SUr8g   the topic id (Uuid.toString: URL-safe base64, no padding)

Pure parsers over text; :func:`read_meta_properties` (and :func:`node_identity`, the node it names) and
:func:`read_partition_metadata` read the file through :mod:`segstore.files`.  A file that is not
what the broker reads raises :class:`segstore.errors.CorruptDataError` naming the file and the byte of
the bad line.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass

from segstore import files
from segstore.errors import CorruptDataError, cut
from segstore.javatext import parse_int
from segstore.properties import parse_properties

from .checkpoints import split_fields
from .dirnames import META_PROPERTIES, PARTITION_METADATA

#: ``Uuid.ZERO_UUID`` as text: the reader refuses it as a topic id.
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_LINE_END = re.compile(r"(\r\n|\r|\n)")


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    """The log directory's ``meta.properties`` as a dict (None when the file is absent), read as 3.8
    ``PropertiesUtils.readPropertiesFile`` reads it: ``Properties.load`` of the file's bytes
    (:func:`segstore.properties.parse_properties`: ISO-8859-1, so any byte in a comment is read).

    :raises ConfigError: a malformed ``\\uXXXX`` escape (that broker's load throws).
    """
    path = os.path.join(log_dir, META_PROPERTIES)
    if not files.is_file(path):
        return None
    return parse_properties(files.read_bytes(path), path)


def topic_id_bytes(text: str) -> bytes | None:
    """The 16 bytes of a topic id written as ``Uuid.toString`` does, None when it is not one."""
    if len(text) != 22:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 16 else None


def parse_partition_metadata(text: str, path: str = "<memory>") -> str:
    """The topic id a ``partition.metadata`` holds, read as ``PartitionMetadataReadBuffer.read`` reads it.

    :raises CorruptDataError: a malformed line, a version below 0, or a topic id that is not one
        (or is the zero id).
    """
    # BufferedReader.readLine: lines end at \n, \r or \r\n; each split by WHITE_SPACES_PATTERN, untrimmed
    first, end, rest = [*_LINE_END.split(text, 1), "", ""][:3]
    version_fields = split_fields(first)
    version = parse_int(version_fields[1]) if len(version_fields) == 2 else None   # Integer.parseInt
    if version is None:
        raise CorruptDataError(f"expected a line 'version: N', found {cut(first)}", path, 0)
    if version < 0:
        raise CorruptDataError(f"expected partition metadata version 0 or later, found {version_fields[1]}",
                               path, 0)
    second = _LINE_END.split(rest, 1)[0]
    pos = len(first) + len(end)
    id_fields = split_fields(second)
    if len(id_fields) != 2 or topic_id_bytes(id_fields[1]) is None:
        raise CorruptDataError(f"expected a line 'topic_id: ID' with a 22-character topic id, found "
                               f"{cut(second)}", path, pos)
    if id_fields[1] == ZERO_UUID:
        raise CorruptDataError("expected a topic id other than the zero id, found it", path, pos)
    return id_fields[1]


def read_partition_metadata(partition_dir: str) -> str | None:
    """The topic id in a partition directory's ``partition.metadata`` (None when the file is absent)."""
    path = os.path.join(partition_dir, PARTITION_METADATA)
    if not files.is_file(path):
        return None
    return parse_partition_metadata(files.read_text(path), path)


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """What ``meta.properties`` says of the node that wrote a log directory."""

    cluster_id: str | None
    node_id: int | None
    version: int | None


def node_identity(log_dir: str) -> NodeIdentity | None:
    """Cluster id and node id from ``meta.properties`` (``node.id``, or a ZooKeeper broker's ``broker.id``);
    None without the file."""
    props = read_meta_properties(log_dir)
    if props is None:
        return None

    def number(name: str) -> int | None:
        # PropertiesUtils.loadRequiredIntProp: Integer.parseInt of the text as it is (no trim)
        return parse_int(props.get(name, ""))

    node = number("node.id")
    return NodeIdentity(props.get("cluster.id"), node if node is not None else number("broker.id"),
                        number("version"))
