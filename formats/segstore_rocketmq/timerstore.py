"""The RocketMQ 5.x timer store (timed messages): ``timerlog/``, ``timerwheel``, ``config/timercheck``,
``config/timermetrics`` (read-only).

Sources: apache/rocketmq ``rocketmq-all-5.3.0``, ``store/.../timer/``: ``TimerLog.java``
(``UNIT_SIZE``, ``BLANK_MAGIC_CODE``, ``append``), ``TimerMessageStore.java`` (``doEnqueue`` writes
a unit; ``recoverAndRevise`` reads them; ``isMagicOK``; ``slotsTotal = TIMER_WHEEL_TTL_DAY *
DAY_SECS``; ``getTimerWheelPath``/``getTimerLogPath``), ``TimerWheel.java`` (the constructor refuses
a file of another length; ``putSlot``, ``getSlotIndex``), ``Slot.java``, ``TimerCheckpoint.java``
(``flush``), ``TimerMetrics.java`` (``persist``: fastjson) and broker ``BrokerPathConfigHelper``
(``getTimerCheckPath``, ``getTimerMetricsPath``).  All big-endian.

``timerlog/%020d`` (``mappedFileSizeTimerLog``, 100 MiB by default): 52-byte units (:data:`UNIT`),
each a timed message's enqueue; a file ends with a 16-byte blank (:data:`BLANK`: the bytes left,
``0``, ``BLANK_MAGIC_CODE``) when the next unit does not fit with 16 bytes to spare, or with unwritten
zeros.  ``prevPos`` chains the units of one wheel slot (``-1`` ends it).

``timerwheel``: ``2 * slotsTotal`` slots of 32 bytes (:data:`SLOT`), slot ``i`` holding the units due
at ``timeMs / precisionMs`` with ``that % (2 * slotsTotal) == i``: first and last unit of its chain.
``slotsTotal`` is 7 days of seconds in 5.3.0 (604800), whatever ``timerPrecisionMs``.

``config/timercheck``: one 4096-byte page, :data:`CHECKPOINT` then zeros.  ``config/timermetrics``:
fastjson ``{"dataVersion": ..., "timingCount": {topic: {"count": n, "timeStamp": ms}}}``.

Pure decoding (numpy over mapped files opened by :mod:`segstore.files`); thread-safe for readers.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError, SegstoreError
from segstore.plugin import DumpLine
from segstore.store import Problem

from .consumequeue import name_offset
from .dirnames import TIMERCHECK_FILE, TIMERLOG_DIR, TIMERMETRICS_FILE, TIMERWHEEL_FILE
from .topicconfig import loads_fastjson

#: ``TimerMessageStore.doEnqueue``: one unit of ``timerlog/``
UNIT = np.dtype([
    ("size", ">i4"),          # UNIT_SIZE
    ("prev_pos", ">i8"),      # the slot's previous unit (its lastPos then), -1 for the first
    ("magic", ">i4"),         # MAGIC_DEFAULT 1 | MAGIC_ROLL 2 | MAGIC_DELETE 4
    ("write_time", ">i8"),    # currWriteTimeMs when enqueued
    ("delay", ">i4"),         # delayedTime - currWriteTime
    ("offset_py", ">i8"),     # the message in the commitlog
    ("size_py", ">i4"),
    ("topic_hash", ">i4"),    # hashTopicForMetrics(real topic)
    ("reserved", ">i8"),      # 0
])
assert UNIT.itemsize == 52
#: ``TimerLog.append``: the end-of-file blank (``MIN_BLANK_LEN``)
BLANK = struct.Struct(">iqi")   # bytes left in the file, 0, BLANK_MAGIC_CODE
assert BLANK.size == 16
#: ``0xBBCCDDEE ^ 1880681586 + 8`` (Java: the addition first), as a signed int
BLANK_MAGIC_CODE = struct.unpack(">i", struct.pack(">I", (0xBBCCDDEE ^ (1880681586 + 8)) & 0xFFFFFFFF))[0]
MAGIC_DEFAULT, MAGIC_ROLL, MAGIC_DELETE = 1, 2, 4
#: ``mappedFileSizeTimerLog`` (MessageStoreConfig, 5.3.0)
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024

#: ``TimerWheel.putSlot``: one slot of ``timerwheel``
SLOT = np.dtype([
    ("time", ">i8"),          # timeMs / precisionMs
    ("first_pos", ">i8"),
    ("last_pos", ">i8"),
    ("num", ">i4"),
    ("magic", ">i4"),
])
assert SLOT.itemsize == 32
SLOTS_TOTAL = 7 * 24 * 3600     # TIMER_WHEEL_TTL_DAY * DAY_SECS
WHEEL_SIZE = 2 * SLOTS_TOTAL * SLOT.itemsize

#: ``TimerCheckpoint.flush``
CHECKPOINT = struct.Struct(
    ">q"  # lastReadTimeMs
    "q"   # lastTimerLogFlushPos
    "q"   # lastTimerQueueOffset
    "q"   # masterTimerQueueOffset
    "q"   # dataVersion.stateVersion
    "q"   # dataVersion.timestamp
    "q"   # dataVersion.counter
)
assert CHECKPOINT.size == 56
CHECKPOINT_FILE_SIZE = 4096
CHECKPOINT_FIELDS = ("lastReadTimeMs", "lastTimerLogFlushPos", "lastTimerQueueOffset",
                     "masterTimerQueueOffset", "stateVersion", "timestamp", "counter")


def magic_ok(magic: np.ndarray) -> np.ndarray:
    """``TimerMessageStore.isMagicOK``: only the four low bits may be set."""
    return (magic | 0xF) == 0xF


# -- timerlog --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TimerLogFile:
    """The units of one ``timerlog`` file, how it ends, and its problems ``(pos, message)``."""

    path: str
    base: int
    units: np.ndarray                 # UNIT rows, in file order
    end: int                          # bytes of units
    ending: str                       # "blank", "unwritten" or "full"
    problems: tuple[tuple[int, str], ...]


def decode_timerlog_file(data: bytes | memoryview, *, path: str, base: int) -> TimerLogFile:
    """Units from byte 0 while each has size 52 and a valid magic; then a blank (its length the rest of
    the file), unwritten zeros, or an end exactly at the file's end.  Anything else is a problem at
    its position (the broker's ``recoverAndRevise`` with ``checkTimerLog`` cuts the file there)."""
    count = len(data) // UNIT.itemsize
    rows = np.frombuffer(data, UNIT, count=count)
    good = (rows["size"] == UNIT.itemsize) & magic_ok(rows["magic"])
    bad = np.flatnonzero(~good)
    used = int(bad[0]) if len(bad) else count
    end = used * UNIT.itemsize
    problems: list[tuple[int, str]] = []
    rest = len(data) - end
    if rest == 0:
        ending = "full"
    elif rest >= BLANK.size and BLANK.unpack_from(data, end)[2] == BLANK_MAGIC_CODE:
        ending = "blank"
        left, zero, _ = BLANK.unpack_from(data, end)
        if left != rest or zero != 0:
            problems.append((end, f"expected a blank of the {rest} bytes left with 0 after its length, "
                                  f"found length {left} and {zero}"))
        elif rest >= UNIT.itemsize + BLANK.size:
            problems.append((end, f"expected a blank only where a {UNIT.itemsize}-byte unit no longer fits "
                                  f"with {BLANK.size} bytes to spare, found {rest} bytes left"))
    elif not np.frombuffer(data, np.uint8, offset=end).any():
        ending = "unwritten"
    else:
        ending = "unwritten"
        size, _prev, magic = BLANK.unpack_from(data, end) if rest >= BLANK.size else (0, 0, 0)
        problems.append((end, f"expected a timer log unit (size {UNIT.itemsize}, magic within 0xF), a "
                              f"blank (magic {BLANK_MAGIC_CODE}) or unwritten zeros, found size {size} "
                              f"magic {magic}"))
    units = rows[:used].copy()
    positions = base + np.arange(used, dtype=np.int64) * UNIT.itemsize
    back = np.flatnonzero((units["prev_pos"] >= positions) | (units["prev_pos"] < -1))
    for i in back[:1].tolist():
        problems.append((i * UNIT.itemsize, f"expected prevPos -1 or an earlier unit, found "
                                            f"{int(units['prev_pos'][i])} at {int(positions[i])}"))
    return TimerLogFile(path, base, units, end, ending, tuple(problems))


def read_timerlog(store_dir: str) -> list[TimerLogFile]:
    """Every ``timerlog/%020d`` file of a store, in order (empty without the directory)."""
    root = os.path.join(store_dir, TIMERLOG_DIR)
    if not files.is_dir(root):
        return []
    out = []
    for name in sorted(n for n in files.list_dir(root) if name_offset(n) is not None):
        out.append(read_timerlog_file(os.path.join(root, name)))
    return out


def read_timerlog_file(path: str) -> TimerLogFile:
    mapped = files.MappedFile(path)
    try:
        return decode_timerlog_file(mapped.view(), path=path, base=name_offset(os.path.basename(path)) or 0)
    finally:
        mapped.close()


def unit_positions(logs: list[TimerLogFile]) -> np.ndarray:
    """The timer-log offset of every unit, in order."""
    parts = [f.base + np.arange(len(f.units), dtype=np.int64) * UNIT.itemsize for f in logs]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


# -- timerwheel ------------------------------------------------------------------------------

def decode_wheel(data: bytes | memoryview, *, path: str) -> np.ndarray:
    """The slots of a ``timerwheel`` file.

    :raises CorruptDataError: the length is not ``2 * slotsTotal * 32`` (the broker refuses to start).
    """
    if len(data) != WHEEL_SIZE:
        raise CorruptDataError(f"expected a timer wheel of {WHEEL_SIZE} bytes (2 * {SLOTS_TOTAL} slots of "
                               f"{SLOT.itemsize}), found {len(data)}", path, min(len(data), WHEEL_SIZE))
    return np.frombuffer(data, SLOT).copy()


def used_slots(wheel: np.ndarray) -> np.ndarray:
    """Indexes of the slots ever written (any field non-zero)."""
    return np.flatnonzero(wheel.view(np.uint8).reshape(len(wheel), SLOT.itemsize).any(axis=1))


def check_wheel(wheel: np.ndarray, positions: np.ndarray, *, path: str) -> list[Problem]:
    """Slots where ``getSlotIndex`` puts them, and their first/last units units of the timer log
    (``positions``: every unit's offset), first <= last.  The first problem of each kind."""
    out: list[Problem] = []
    used = used_slots(wheel)
    slots = wheel[used]
    misplaced = np.flatnonzero(slots["time"] % (2 * SLOTS_TOTAL) != used)
    for i in misplaced[:1].tolist():
        out.append(Problem(path, int(used[i]) * SLOT.itemsize,
                           f"expected a slot for a time t with t % {2 * SLOTS_TOTAL} == {int(used[i])}, "
                           f"found t = {int(slots['time'][i])}"))
    for field in ("first_pos", "last_pos"):
        pos = slots[field]
        at = np.searchsorted(positions, pos)
        found = at < len(positions)
        found[found] = positions[at[found]] == pos[found]
        missing = np.flatnonzero(~found & (pos != -1))
        for i in missing[:1].tolist():
            out.append(Problem(path, int(used[i]) * SLOT.itemsize,
                               f"expected {field.replace('_pos', 'Pos')} of slot {int(used[i])} at a timer "
                               f"log unit, found {int(pos[i])}"))
    order = np.flatnonzero(slots["first_pos"] > slots["last_pos"])
    for i in order[:1].tolist():
        out.append(Problem(path, int(used[i]) * SLOT.itemsize,
                           f"expected firstPos <= lastPos in slot {int(used[i])}, found "
                           f"{int(slots['first_pos'][i])} > {int(slots['last_pos'][i])}"))
    return out


# -- timercheck, timermetrics ------------------------------------------------------------------

def decode_checkpoint(data: bytes | memoryview, *, path: str) -> dict[str, int]:
    """The timer checkpoint's fields by their Java names.

    :raises CorruptDataError: fewer than the 32 bytes of the four offsets (``TimerCheckpoint.decode``
        reads the data version only when present).
    """
    if len(data) < 32:
        raise CorruptDataError(f"expected a timer checkpoint of {CHECKPOINT_FILE_SIZE} bytes, found "
                               f"{len(data)}", path, len(data))
    padded = bytes(data[:CHECKPOINT.size]).ljust(CHECKPOINT.size, b"\0")
    return dict(zip(CHECKPOINT_FIELDS, CHECKPOINT.unpack(padded), strict=True))


def check_checkpoint(data: bytes | memoryview, *, path: str, timerlog_end: int | None) -> list[Problem]:
    out: list[Problem] = []
    if len(data) != CHECKPOINT_FILE_SIZE:
        out.append(Problem(path, min(len(data), CHECKPOINT_FILE_SIZE),
                           f"expected a timer checkpoint of {CHECKPOINT_FILE_SIZE} bytes, found {len(data)}"))
    try:
        fields = decode_checkpoint(data, path=path)
    except CorruptDataError as err:
        return [*out, Problem(path, err.pos, err.message)]
    for i, name in enumerate(CHECKPOINT_FIELDS[:4]):
        if fields[name] < 0:
            out.append(Problem(path, i * 8, f"expected {name} >= 0, found {fields[name]}"))
    flushed = fields["lastTimerLogFlushPos"]
    if timerlog_end is not None and flushed > timerlog_end:
        out.append(Problem(path, 8, f"expected lastTimerLogFlushPos within the timer log "
                                    f"(end {timerlog_end}), found {flushed}"))
    tail = np.frombuffer(bytes(data[CHECKPOINT.size:CHECKPOINT_FILE_SIZE]), np.uint8)
    if tail.any():
        first = int(np.flatnonzero(tail)[0])
        out.append(Problem(path, CHECKPOINT.size + first, f"expected zeros after byte {CHECKPOINT.size}, "
                                                          f"found 0x{int(tail[first]):02x}"))
    return out


def read_metrics(path: str) -> dict[str, Any]:
    """``config/timermetrics`` parsed (fastjson).

    :raises CorruptDataError: not the JSON the broker writes.
    """
    value = loads_fastjson(files.read_text(path), path)
    if not isinstance(value, dict) or not isinstance(value.get("timingCount", {}), dict):
        raise CorruptDataError("expected a JSON object with a timingCount object", path, 0)
    return value


# -- a store's timer files ---------------------------------------------------------------------

def info(store_dir: str) -> dict[str, Any]:
    """What ``segstore info`` shows of the timer store: units, used slots, checkpoint, metrics."""
    logs = read_timerlog(store_dir)
    out: dict[str, Any] = {
        "timerlog": {"files": [{"path": f.path, "units": len(f.units), "ending": f.ending} for f in logs],
                     "units": sum(len(f.units) for f in logs),
                     "end": logs[-1].base + logs[-1].end if logs else 0},
    }
    wheel_path = os.path.join(store_dir, TIMERWHEEL_FILE)
    if files.exists(wheel_path):
        try:
            out["timerwheel"] = {"used_slots": len(used_slots(_read_wheel(wheel_path)))}
        except SegstoreError as err:
            out["timerwheel"] = {"error": str(err)}
    check_path = os.path.join(store_dir, TIMERCHECK_FILE)
    if files.exists(check_path):
        try:
            out["timercheck"] = decode_checkpoint(files.read_bytes(check_path), path=check_path)
        except SegstoreError as err:
            out["timercheck"] = {"error": str(err)}
    metrics_path = os.path.join(store_dir, TIMERMETRICS_FILE)
    if files.exists(metrics_path):
        try:
            counts = read_metrics(metrics_path).get("timingCount", {})
            out["timermetrics"] = {topic: (m or {}).get("count") for topic, m in counts.items()}
        except SegstoreError as err:
            out["timermetrics"] = {"error": str(err)}
    return out


def _read_wheel(path: str) -> np.ndarray:
    mapped = files.MappedFile(path)
    try:
        return decode_wheel(mapped.view(), path=path)
    finally:
        mapped.close()


def verify(store_dir: str) -> list[Problem]:
    """Every problem of a store's timer files (empty when it has none or they are sound)."""
    out: list[Problem] = []
    logs = read_timerlog(store_dir)
    for i, f in enumerate(logs):
        out.extend(Problem(f.path, pos, msg) for pos, msg in f.problems)
        if i + 1 < len(logs) and f.ending == "unwritten":
            out.append(Problem(f.path, f.end, f"expected the file to be filled (units then a blank) before "
                                              f"{logs[i + 1].path}, found unwritten space"))
    positions = unit_positions(logs)
    wheel_path = os.path.join(store_dir, TIMERWHEEL_FILE)
    if files.exists(wheel_path):
        try:
            out.extend(check_wheel(_read_wheel(wheel_path), positions, path=wheel_path))
        except SegstoreError as err:
            out.append(Problem(err.path or wheel_path, err.pos, err.message))
    check_path = os.path.join(store_dir, TIMERCHECK_FILE)
    if files.exists(check_path):
        end = logs[-1].base + logs[-1].end if logs else None
        out.extend(check_checkpoint(files.read_bytes(check_path), path=check_path, timerlog_end=end))
    metrics_path = os.path.join(store_dir, TIMERMETRICS_FILE)
    if files.exists(metrics_path):
        try:
            read_metrics(metrics_path)
        except SegstoreError as err:
            out.append(Problem(err.path or metrics_path, err.pos, err.message))
    return out


# -- segstore dump FILE --------------------------------------------------------------------------

def _problem_line(path: str, pos: int | None, message: str) -> DumpLine:
    return DumpLine(f"{path}:{pos}: {message}" if pos is not None else f"{path}: {message}",
                    {"kind": "error", "position": pos, "error": message}, problem=True)


def dump_timerlog(path: str) -> Iterator[DumpLine]:
    """Every unit of one ``timerlog`` file (offsets from its name), how it ends, then its problems."""
    f = read_timerlog_file(path)
    for i, row in enumerate(f.units.tolist()):
        size, prev, magic, write_time, delay, offset_py, size_py, topic_hash, _reserved = row
        pos = f.base + i * UNIT.itemsize
        yield DumpLine(
            f"unit: {pos} prevPos: {prev} magic: {magic} writeTime: {write_time} delay: {delay} "
            f"delayedTime: {write_time + delay} commitlogOffset: {offset_py} size: {size_py} "
            f"topicHash: {topic_hash}",
            {"kind": "unit", "position": pos, "size": size, "prev_pos": prev, "magic": magic,
             "write_time": write_time, "delay": delay, "delayed_time": write_time + delay,
             "commitlog_offset": offset_py, "commitlog_size": size_py, "topic_hash": topic_hash})
    yield DumpLine(f"end: {f.base + f.end} ({f.ending})", {"kind": "end", "position": f.base + f.end,
                                                            "ending": f.ending})
    for pos, message in f.problems:
        yield _problem_line(path, pos, message)


def dump_wheel(path: str) -> Iterator[DumpLine]:
    """Every slot ever written of a ``timerwheel`` file."""
    wheel = _read_wheel(path)
    used = used_slots(wheel)
    for index, row in zip(used.tolist(), wheel[used].tolist(), strict=True):
        time, first, last, num, magic = row
        yield DumpLine(f"slot: {index} time: {time} firstPos: {first} lastPos: {last} num: {num} "
                       f"magic: {magic}",
                       {"kind": "slot", "slot": index, "time": time, "first_pos": first, "last_pos": last,
                        "num": num, "magic": magic})


def dump_checkpoint(path: str) -> Iterator[DumpLine]:
    """The ``timercheck`` fields, then their problems."""
    data = files.read_bytes(path)
    fields = decode_checkpoint(data, path=path)
    yield DumpLine(" ".join(f"{k}: {v}" for k, v in fields.items()), {"kind": "timercheck", **fields})
    for problem in check_checkpoint(data, path=path, timerlog_end=None):
        yield _problem_line(problem.path, problem.pos, problem.message)


def dump_metrics(path: str) -> Iterator[DumpLine]:
    """One line per topic of ``timermetrics``: its count and time stamp."""
    for topic, metric in sorted(read_metrics(path).get("timingCount", {}).items()):
        metric = metric if isinstance(metric, dict) else {}
        yield DumpLine(f"topic: {topic} count: {metric.get('count')} timeStamp: {metric.get('timeStamp')}",
                       {"kind": "metric", "topic": topic, "count": metric.get("count"),
                        "time_stamp": metric.get("timeStamp")})


DUMPERS = {"timerlog": dump_timerlog, "timerwheel": dump_wheel, "timercheck": dump_checkpoint,
           "timermetrics": dump_metrics}
