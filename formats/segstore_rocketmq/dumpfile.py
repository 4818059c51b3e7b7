"""``segstore dump FILE`` for single RocketMQ store files.

Which file is which (RocketMQ 4.9.7 ``DefaultMessageStore`` directory layout):
``commitlog/%020d`` (messages from the offset the name gives), ``consumequeue/TOPIC/QUEUE/%020d``
(20-byte entries: commitlog offset, size, tags code), ``index/yyyyMMddHHmmssSSS`` (an IndexFile:
40-byte header, hash slots, 20-byte entries) and ``checkpoint`` (StoreCheckpoint).  A 20-digit
file outside those directories is told apart by content: a commitlog file starts with a message
or BLANK magic at byte 4, a consume queue does not.

The layouts are in the codec modules (:mod:`.message`, :mod:`.consumequeue`, :mod:`.indexfile`,
:mod:`.checkpoint`); this module only walks one file and returns lines.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError, SegstoreError
from segstore.javatext import java_utf8
from segstore.plugin import DumpLine, FileDumpOptions
from segstore.store import text_word

from . import batchconsumequeue, timerstore
from . import checkpoint as cp
from .consumequeue import CQ_DTYPE, name_offset
from .indexfile import (
    ENTRY_DTYPE,
    FILE_NAME_LENGTH,
    FIRST_ENTRY,
    HEADER,
    SLOT_DTYPE,
    IndexHeader,
    geometry_of,
)
from .message import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    PREFIX,
    Blank,
    End,
    RocketMQMessage,
    decode,
    stored_properties_of,
    stored_topic_field,
)

COMMITLOG_DIR, CONSUMEQUEUE_DIR, INDEX_DIR = "commitlog", "consumequeue", "index"
_MAGICS = (MESSAGE_MAGIC, MESSAGE_MAGIC_V2, BLANK_MAGIC)


def file_kind(path: str) -> str | None:
    """``commitlog``, ``consumequeue``, ``indexfile`` or ``checkpoint``, or a 5.x file: ``timerlog``,
    ``timerwheel``, ``timercheck``, ``timermetrics``, ``batchconsumequeue``; None otherwise."""
    name = os.path.basename(path)
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if name == cp.FILE_NAME:
        return "checkpoint"
    if name in (timerstore.TIMERWHEEL_FILE, "timercheck", "timermetrics"):
        return name
    if name_offset(name) is not None and parent == timerstore.TIMERLOG_DIR:
        return "timerlog"
    great = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path)))))
    if name_offset(name) is not None and great == batchconsumequeue.BCQ_DIR:
        return "batchconsumequeue"
    if len(name) == FILE_NAME_LENGTH and name.isdigit():
        return "indexfile"
    if name_offset(name) is None:
        return None
    if parent == COMMITLOG_DIR:
        return "commitlog"
    grand = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path)))))
    if grand == CONSUMEQUEUE_DIR:
        return "consumequeue"
    return "commitlog" if _starts_with_magic(path) else "consumequeue"


def _starts_with_magic(path: str) -> bool:
    mapped = files.MappedFile(path)
    try:
        head = mapped.view(0, PREFIX.size)
        return len(head) == PREFIX.size and PREFIX.unpack(head)[1] in _MAGICS
    finally:
        mapped.close()


def dump_file(path: str, options: FileDumpOptions) -> Iterator[DumpLine]:
    """The dump lines of one RocketMQ file (see the module docstring)."""
    kind = file_kind(path)
    if kind == "commitlog":
        yield from dump_commitlog(path, options)
    elif kind == "consumequeue":
        yield from dump_consume_queue(path)
    elif kind == "indexfile":
        yield from dump_index_file(path)
    elif kind == "checkpoint":
        yield from dump_checkpoint(path)
    elif kind == "batchconsumequeue":
        yield from batchconsumequeue.dump(path)
    elif kind in timerstore.DUMPERS:
        yield from timerstore.DUMPERS[kind](path)
    else:
        raise CorruptDataError(
            "expected a RocketMQ commitlog, consume-queue, index, checkpoint, batch consume queue or "
            "timer store file name, "
            f"found {os.path.basename(path)!r}",
            path,
        )


def _text(data: bytes, decoder: Any) -> str:
    return decoder(data) if decoder is not None else java_utf8(data)


def dump_commitlog(path: str, options: FileDumpOptions) -> Iterator[DumpLine]:
    """Every message of one commitlog file (physical offsets from its name) to its BLANK or unwritten
    space (zeros to the end of the file), up to ``max_bytes`` (whole messages only); a record that
    does not decode, or zeros with data after them, ends the dump with a problem line."""
    base = int(os.path.basename(path))
    mapped = files.MappedFile(path)
    try:
        whole = mapped.view()
        limit = len(whole) if options.max_bytes is None else min(len(whole), max(options.max_bytes, 0))
        pos = 0
        while pos < limit:
            raw_properties = None
            try:
                try:
                    record = decode(whole[:limit], pos, path=path, java_text=False)
                except CorruptDataError:
                    # properties or a topic that are not UTF-8: read as the broker reads them (new
                    # String(bytes, UTF_8), CommitLog.checkMessageAndReturnSize), their bytes kept for
                    # --json (the properties' only where they are not UTF-8: a topic alone stopped it)
                    record = decode(whole[:limit], pos, path=path, java_text=True)
                    raw_properties = stored_properties_of(record.properties) \
                        if isinstance(record, RocketMQMessage) else None
            except SegstoreError as err:
                if options.max_bytes is not None and limit < len(whole):
                    break  # --max-bytes cut this message off on purpose
                yield DumpLine(
                    f"{path}:{pos}: {err.message}",
                    {"kind": "error", "position": pos, "error": err.message},
                    problem=True,
                )
                break
            if isinstance(record, End):
                header_end = min(pos + PREFIX.size, len(whole))
                if limit < len(whole) and mapped.first_nonzero(pos, header_end) is not None:
                    break   # --max-bytes cut the next record's header (its size starts with zero bytes)
                later = mapped.first_nonzero(pos, limit)
                if later is not None:
                    # zeros over a message's header, not the unwritten tail: RocketMQ 4.9.7
                    # CommitLog.checkMessageAndReturnSize takes magic 0 for an illegal magic code
                    why = f"expected a message or a BLANK, found zeros before non-zero bytes at {later}"
                    yield DumpLine(f"{path}:{pos}: {why}", {"kind": "error", "position": pos, "error": why},
                                   problem=True)
                    break
                yield DumpLine(
                    f"end of data at position {pos} ({base + pos})",
                    {"kind": "end", "position": pos, "physical_offset": base + pos},
                )
                break
            if isinstance(record, Blank):
                yield DumpLine(
                    f"BLANK at position {pos} ({base + pos}) size: {record.size}",
                    {"kind": "blank", "position": pos, "physical_offset": base + pos, "size": record.size},
                )
                break
            yield _message_line(record, base + pos, options, raw_properties)
            pos += record.size
    finally:
        mapped.close()


def _message_line(msg: Any, physical_offset: int, options: FileDumpOptions,
                  raw_properties: bytes | None = None) -> DumpLine:
    """A message's line; ``raw_properties``: its PROPERTIES bytes where they are not UTF-8 (``properties``
    then holds them as the broker reads them, a U+FFFD for each malformed sequence), given in the JSON
    as ``properties_base64``."""
    data: dict[str, Any] = {
        "kind": "message",
        "physical_offset": physical_offset,
        "topic": msg.topic,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "size": msg.size,
        "body_crc": msg.body_crc,
        "flag": msg.flag,
        "sys_flag": msg.sys_flag,
        "born_timestamp": msg.born_timestamp,
        "born_host": str(msg.born_host),
        "store_timestamp": msg.store_timestamp,
        "store_host": str(msg.store_host),
        "reconsume_times": msg.reconsume_times,
        "prepared_transaction_offset": msg.prepared_transaction_offset,
        "properties": dict(msg.properties),
        "msg_id": msg.msg_id,
    }
    if raw_properties is not None:
        data["properties_base64"] = base64.b64encode(raw_properties).decode("ascii")
    data.update(stored_topic_field(msg))
    keys = ",".join(msg.keys)
    text = (
        f"physicalOffset: {physical_offset} topic: {text_word(msg.topic)} queueId: {msg.queue_id} "
        f"queueOffset: {msg.queue_offset} size: {msg.size} bornTimestamp: {msg.born_timestamp} "
        f"storeTimestamp: {msg.store_timestamp} sysFlag: {msg.sys_flag} msgId: {msg.msg_id} "
        f"keys: {text_word(keys) if keys else '-'} "
        f"tags: {text_word(msg.tags) if msg.tags else '-'}"
    )
    if options.print_data:
        body = _text(bytes(msg.body), options.value_decoder)
        text += f" payload: {body}"
        data["payload"] = body
    else:
        data["body"] = base64.b64encode(bytes(msg.body)).decode("ascii")
    return DumpLine(text, data)


def dump_consume_queue(path: str) -> Iterator[DumpLine]:
    """Every entry of one consume-queue file up to the first unwritten one (queue offsets from its name)."""
    base = int(os.path.basename(path))
    mapped = files.MappedFile(path)
    try:
        data = mapped.view()
        if base % CQ_DTYPE.itemsize:
            raise CorruptDataError(
                f"expected a name that is a multiple of {CQ_DTYPE.itemsize}, found {base}", path
            )
        rows = np.frombuffer(data, dtype=CQ_DTYPE, count=len(data) // CQ_DTYPE.itemsize).copy()
        left = len(data) % CQ_DTYPE.itemsize
    finally:
        mapped.close()
    first = base // CQ_DTYPE.itemsize
    bad = np.flatnonzero((rows["offset"] < 0) | (rows["size"] <= 0))
    used = int(bad[0]) if len(bad) else len(rows)
    for i, (offset, size, tags_code) in enumerate(rows[:used].tolist()):
        yield DumpLine(
            f"offset: {first + i} commitlogOffset: {offset} size: {size} tagsCode: {tags_code}",
            {
                "kind": "entry",
                "queue_offset": first + i,
                "commitlog_offset": offset,
                "size": size,
                "tags_code": tags_code,
            },
        )
    if used < len(rows) and (rows[used:]["offset"].any() or rows[used:]["size"].any()):
        why = (f"expected an entry or unwritten zeros, found commitlogOffset {int(rows['offset'][used])} "
               f"size {int(rows['size'][used])}")
        yield DumpLine(f"{path}:{used * CQ_DTYPE.itemsize}: {why}",
                       {"kind": "error", "position": used * CQ_DTYPE.itemsize, "error": why}, problem=True)
    elif left:
        # a consume-queue file is mappedFileSizeConsumeQueue long, whole entries (RocketMQ 4.9.7
        # MappedFileQueue.load refuses a file of another length): bytes left over are a torn file
        at = len(rows) * CQ_DTYPE.itemsize
        why = f"expected a whole {CQ_DTYPE.itemsize}-byte entry, found {left} byte{'s' if left > 1 else ''}"
        yield DumpLine(f"{path}:{at}: {why}", {"kind": "error", "position": at, "error": why}, problem=True)


def dump_index_file(path: str) -> Iterator[DumpLine]:
    """The header and every used entry of one IndexFile (its slot count found from its size and header)."""
    mapped = files.MappedFile(path)
    try:
        data = mapped.view()
        if len(data) < HEADER.size:
            raise CorruptDataError(
                f"expected an IndexFile header of {HEADER.size} bytes, found {len(data)}", path
            )
        header = IndexHeader.unpack(data)
        geometry = geometry_of(data)
        if not geometry:
            raise CorruptDataError(
                f"expected a size of {HEADER.size} + 4 * slots + 20 * entries holding "
                f"{header.index_count} entries, found {len(data)} bytes",
                path,
            )
        start = HEADER.size + geometry["maxHashSlotNum"] * SLOT_DTYPE.itemsize
        rows = np.frombuffer(data, dtype=ENTRY_DTYPE, count=header.index_count, offset=start).copy()
    finally:
        mapped.close()
    yield DumpLine(
        f"beginTimestamp: {header.begin_timestamp} endTimestamp: {header.end_timestamp} "
        f"beginPhyOffset: {header.begin_phy_offset} endPhyOffset: {header.end_phy_offset} "
        f"hashSlotCount: {header.hash_slot_count} indexCount: {header.index_count} "
        f"maxHashSlotNum: {geometry['maxHashSlotNum']} maxIndexNum: {geometry['maxIndexNum']}",
        {
            "kind": "header",
            "begin_timestamp": header.begin_timestamp,
            "end_timestamp": header.end_timestamp,
            "begin_phy_offset": header.begin_phy_offset,
            "end_phy_offset": header.end_phy_offset,
            "hash_slot_count": header.hash_slot_count,
            "index_count": header.index_count,
            # the geometry under the names of the header's other fields (snake case), not the config's
            "max_hash_slot_num": geometry["maxHashSlotNum"],
            "max_index_num": geometry["maxIndexNum"],
        },
    )
    for number, (key_hash, phy_offset, time_diff, prev) in enumerate(
        rows[FIRST_ENTRY:].tolist(), FIRST_ENTRY
    ):
        yield DumpLine(
            f"entry: {number} keyHash: {key_hash} commitlogOffset: {phy_offset} timeDiff: {time_diff} "
            f"prevIndex: {prev}",
            {
                "kind": "entry",
                "entry": number,
                "key_hash": key_hash,
                "commitlog_offset": phy_offset,
                "time_diff": time_diff,
                "prev_index": prev,
            },
        )


def dump_checkpoint(path: str) -> Iterator[DumpLine]:
    """The StoreCheckpoint fields, then every problem :func:`.checkpoint.check` finds."""
    data = files.read_bytes(path)
    point = cp.Checkpoint.unpack(data, path=path)
    yield DumpLine(
        f"physicMsgTimestamp: {point.physic_msg_timestamp} logicsMsgTimestamp: "
        f"{point.logics_msg_timestamp} indexMsgTimestamp: {point.index_msg_timestamp} "
        f"masterFlushedOffset: {point.master_flushed_offset} confirmPhyOffset: {point.confirm_phy_offset}",
        # the broker's field names (StoreCheckpoint), as ``info``'s ``checkpoint`` gives them
        {"kind": "checkpoint", **{name: getattr(point, attr)
                                  for name, attr in zip(cp.FIELD_NAMES, cp.FIELD_ATTRS, strict=True)}},
    )
    for pos, message in cp.check(data, path=path):
        yield DumpLine(
            f"{path}:{pos}: {message}", {"kind": "error", "position": pos, "error": message}, problem=True
        )
