"""Broker config names the RocketMQ store understands, their defaults, and topic-name rules.

Names are the broker's own (``MessageStoreConfig`` / ``BrokerConfig``) so that a
value copied from a ``broker.conf`` works unchanged.  Values may arrive as strings
(``--config name=value`` on the CLI) and are converted here; an unknown name or a
bad value is a :class:`ConfigError`.

Topic names follow ``TopicValidator`` (rocketmq-common): characters ``[%|a-zA-Z0-9_-]``,
1 to 127 characters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from segstore.errors import ConfigError, InvalidTopicError, cut, did_you_mean, shown
from segstore.javatext import parse_int, parse_long

#: ``ConsumeQueue.CQ_STORE_UNIT_SIZE``.
CQ_UNIT_SIZE = 20
#: ``IndexHeader``'s ``indexCount`` starts at 1: an IndexFile never uses entry 0.
INDEX_FIRST_ENTRY = 1
#: ``IndexHeader.INDEX_HEADER_SIZE``, ``IndexFile.hashSlotSize`` and ``IndexFile.indexSize`` (the layout
#: itself: :mod:`segstore.indexes.keyhash`, which this module does not load)
INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INDEX_ENTRY_SIZE = 40, 4, 20
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
FLUSH_DISK_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

TOPIC_MAX_LENGTH = 127
#: What a put may store beyond a ``maxMessageSize`` body: headers, topic and properties (4.9.7
#: ``CommitLog.MessageExtEncoder``'s "Reserve 64kb for encoding buffer outside body").
ENCODER_RESERVE = 64 * 1024
JAVA_INT_MAX = 2**31 - 1
#: The longest topic a v2 message (2-byte topic length, ``MessageVersion.MESSAGE_VERSION_V2``) holds.
TOPIC_MAX_LENGTH_V2 = 0x7FFF
#: ``autoMessageVersionOnTopicLen`` exists from rocketmq-all-5.1.0 (MessageStoreConfig); 5.0.x and
#: 4.x write every message as v1.
V2_FROM_VERSION = (5, 1, 0)
_TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")
_DELAY_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

#: The broker version whose store the fixtures hold, and the default style of a new store.
REFERENCE_VERSION = "4.9.7"
#: ``MessageDecoder.messageProperties2String`` deletes the 0x02 after the last pair from
#: 4.9.1 (``sb.deleteCharAt``, rocketmq-all-4.9.1) until 5.2.0 removed that again
#: (rocketmq-all-5.2.0, the commitlog CRC change); older and newer brokers keep it.
NO_TRAILING_SEPARATOR = ((4, 9, 1), (5, 2, 0))
_VERSION_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def validate_topic(topic: object, max_length: int = TOPIC_MAX_LENGTH) -> str:
    """``topic`` if the broker accepts it as a topic name.

    ``max_length``: 127 (``TopicValidator``), or :data:`TOPIC_MAX_LENGTH_V2` where the store
    writes long topics as v2 messages (:attr:`BrokerConfig.topic_max_length`).

    :raises InvalidTopicError: not a string, empty, longer than ``max_length`` characters, or a
        character outside ``[%|a-zA-Z0-9_-]`` (so no path separators or ``..``).
    """
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError(f"expected a non-empty topic name, found {shown(topic)}")
    if len(topic) > max_length:
        raise InvalidTopicError(f"expected a topic of at most {max_length} characters, "
                                f"found {len(topic)}")
    if not _TOPIC_PATTERN.fullmatch(topic):
        raise InvalidTopicError(f"expected a topic of the characters [%|a-zA-Z0-9_-], found {cut(topic)}")
    return topic


#: ``Validators.CHARACTER_MAX_LENGTH`` (4.9.7 client): the longest consumer group name
GROUP_MAX_LENGTH = 255


def validate_group(group: str, path: str | None = None) -> str:
    """``group`` if a RocketMQ client takes it as a consumer group name (4.9.7 ``Validators.checkGroup``:
    not blank, at most 255 characters of ``[%|a-zA-Z0-9_-]``, so no ``@``, which would make its
    ``topic@group`` key in ``consumerOffset.json`` one the broker's ``ConsumerOffsetManager`` never reads).

    :raises ConfigError: any other name, naming ``path``.
    """
    if len(group) > GROUP_MAX_LENGTH:
        raise ConfigError(f"expected a consumer group of at most {GROUP_MAX_LENGTH} characters, found "
                          f"{len(group)}", path)
    if not _TOPIC_PATTERN.fullmatch(group):
        raise ConfigError(f"expected a consumer group of the characters [%|a-zA-Z0-9_-], found {cut(group)}",
                          path)
    return group


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``messageDelayLevel`` (``"1s 5s 1m 2h"``) as delays in milliseconds, level 1 first.

    As 4.9.7 ``ScheduleMessageService.parseDelayLevel`` reads it: parts split at each single space
    (``String.split(" ")``, which drops only trailing empty parts), each a ``Long.parseLong`` number and a
    unit s, m, h or d.  A text it throws on (two spaces in a row, a leading space, a tab) makes that broker's
    ``load`` fail and the broker not start: refused here too, not read as other levels.
    """
    parts = text.split(" ")
    while parts and not parts[-1]:
        parts.pop()
    levels = []
    for token in parts:
        unit = _DELAY_UNITS_MS.get(token[-1:])
        number = parse_long(token[:-1])
        if unit is None or number is None:
            raise ConfigError(f"expected delay levels like '1s 5m 2h 1d' (one space between), "
                              f"found {token!r} in {text!r}")
        levels.append(number * unit)
    if not levels:
        raise ConfigError("expected at least one delay level, found none")
    return tuple(levels)


def is_delivery_time(tags_code: Any, store_timestamp: Any) -> Any:
    """Whether a ``SCHEDULE_TOPIC_XXXX`` consume-queue tags code is a delivery time under *some*
    ``messageDelayLevel``: store time plus a whole number of seconds, as every delay 4.9.7
    ``ScheduleMessageService.parseDelayLevel`` builds is (units s, m, h, d).  The levels are the broker's
    config, not the store's: an entry written under other levels than the ones segstore is given is the
    broker's, not damage.  Element-wise on numpy arrays."""
    delay = tags_code - store_timestamp
    return (delay >= 0) & (delay % 1000 == 0)


def parse_version(text: str) -> tuple[int, int, int]:
    """``"4.9.7"`` as ``(4, 9, 7)``; a ``rocketmq-all-``/``v`` prefix or a suffix is allowed."""
    match = _VERSION_PATTERN.search(str(text))
    if match is None:
        raise ValueError(f"{text!r} is not a version like 4.9.7")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def trailing_separator_for(version: str) -> bool:
    """Whether a broker of ``version`` ends the properties string with 0x02."""
    first, until = NO_TRAILING_SEPARATOR
    return not first <= parse_version(version) < until


def _version(value: Any) -> str:
    parse_version(str(value))
    return str(value)


def _positive_int(value: Any) -> int:
    """A positive ``int`` field of the broker's config (:func:`_java_int`): a file size past a Java int
    is no file the broker maps (and Python's ``mmap`` met it as an ``OverflowError``)."""
    number = _java_int(value)
    if number <= 0:
        raise ValueError(f"{number} is not positive")
    return number


def _index_num(value: Any) -> int:
    """``maxIndexNum``: a file of no usable entry takes no key, and the broker's ``IndexService.putKey``
    (4.9.7) then creates file after file forever; refused."""
    number = _java_int(value)
    if number <= INDEX_FIRST_ENTRY:
        raise ValueError(f"an index file of {number} entries has none to use (entry 0 never is); "
                         f"at least {INDEX_FIRST_ENTRY + 1}")
    return number


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{value!r} is not true or false")
    return text == "true"


def _flush_type(value: Any) -> str:
    """``flushDiskType``: 4.9.7 ``MessageStoreConfig.setFlushDiskType(String)`` is ``FlushDiskType.valueOf``
    (exact, upper case).  ``MixAll.properties2Object`` swallows what it throws on ``sync_flush``, and that
    broker keeps ``ASYNC_FLUSH``: refused here, not taken for ``SYNC_FLUSH``."""
    if str(value) not in FLUSH_DISK_TYPES:
        raise ValueError(f"{value!r} is not one of {', '.join(FLUSH_DISK_TYPES)} (exact, upper case: "
                         f"FlushDiskType.valueOf)")
    return str(value)


def _host(value: Any) -> str:
    from .message import Host

    Host.parse(str(value))
    return str(value)


def _delete_when(value: Any) -> str:
    """``deleteWhen``: hours of the day separated by ``;`` (``UtilAll.isItTimeToDo``), or empty.  Each is
    what ``Integer.parseInt`` reads; one that is no hour (``99``, the usual way to turn the time rule
    off) never comes, as on the broker.  ``String.split`` drops only trailing empty parts (``04;``): an
    empty part before another (``;04``) or one with blanks (``04; 05``) makes ``isItTimeToDo`` throw,
    and that broker's clean-up never deletes, so they are refused."""
    text = str(value).strip()
    parts = text.split(";")
    while parts and not parts[-1]:
        parts.pop()
    for hour in parts:
        if parse_int(hour) is None:
            raise ValueError(f"{hour!r} is not a whole number (an hour of the day, 0-23; "
                             f"the broker's Integer.parseInt refuses it)")
    return text


def _whole(value: Any) -> int:
    """A whole number as ``Long.parseLong`` reads its text (:func:`segstore.javatext.parse_long`, the
    text stripped: ``--config`` values are), an int field's narrower range its caller's check; an
    integer as it is.  A float or a bool is refused: ``int()`` would cut 1.5 to 1 and take ``True`` for
    1."""
    if isinstance(value, (bool, float)):
        raise TypeError(f"{value!r} is not a whole number")
    if isinstance(value, str):
        number = parse_long(value.strip())
        if number is None:
            raise ValueError(f"{value!r} is not a whole number")
        return number
    return int(value)


def _java_int(value: Any) -> int:
    """An ``int`` field of the broker's config: what ``Integer.parseInt`` reads (``MixAll.properties2Object``
    ignores a line it throws on, and the broker keeps its default: such a value is refused here)."""
    number = _whole(value)
    if not -2**31 <= number <= JAVA_INT_MAX:
        raise ValueError(f"{number} is past a Java int (-2147483648..{JAVA_INT_MAX})")
    return number


def _non_negative_java_int(value: Any) -> int:
    number = _java_int(value)
    if number < 0:
        raise ValueError(f"{number} is negative")
    return number


#: ``Long.parseLong``'s range
JAVA_LONG_MAX = 2**63 - 1


def _non_negative_java_long(value: Any) -> int:
    """A ``long`` field of the broker's config (``transactionTimeOut``): what ``Long.parseLong`` reads
    (:func:`_java_long`), not negative."""
    number = _java_long(value)
    if number < 0:
        raise ValueError(f"{number} is negative")
    return number


def _delay_levels(value: Any) -> str:
    parse_delay_levels(str(value))
    return str(value)


def _java_long(value: Any) -> int:
    """A ``long`` field of the broker's config: what ``Long.parseLong`` reads."""
    number = _whole(value)
    if not -2**63 <= number <= JAVA_LONG_MAX:
        raise ValueError(f"{number} is past a Java long (-2**63..{JAVA_LONG_MAX})")
    return number


_BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


def _broker_role(value: Any) -> str:
    """``brokerRole``: ``BrokerRole.valueOf`` (exact, upper case)."""
    if str(value) not in _BROKER_ROLES:
        raise ValueError(f"{value!r} is not one of {', '.join(_BROKER_ROLES)}")
    return str(value)


_TIMING = "tunes a running broker's threads and timing, not what the store holds"
_SERVING = "limits what a running broker serves a pull or query; segstore's reads take their own options"
_HA = "configures replication to or from another broker"
_MEMORY = "chooses how a running broker buffers or pre-touches files; the bytes written are the same"
_PATHS = "names directories; segstore's store is the PATH given (its commitlog PATH/commitlog)"
_DLEDGER = "configures a DLedger commitlog, which segstore does not read (enableDLegerCommitLog)"
_EXT = "sizes consumequeue_ext/ units, which segstore reads as the files hold them and never writes"

#: 4.9.7 ``MessageStoreConfig`` names that change nothing an offline store writes or recovers: taken (the
#: value checked as ``MixAll.properties2Object`` would parse it into the field's type) and ignored, with why
IGNORED: dict[str, tuple[Callable[[Any], Any], str]] = {
    "syncFlushTimeout": (_java_int, "a SYNC_FLUSH append returns only once its bytes are durable "
                                    "(GroupCommitService's FLUSH_DISK_TIMEOUT answer never comes)"),
    "flushCommitLogTimed": (_bool, _TIMING),
    "commitIntervalCommitLog": (_java_int, _TIMING),
    "commitCommitLogLeastPages": (_java_int, _TIMING),
    "commitCommitLogThoroughInterval": (_java_int, _TIMING),
    "flushDelayOffsetInterval": (_java_long, _TIMING),
    "cleanResourceInterval": (_java_int, _TIMING),
    "deleteCommitLogFilesInterval": (_java_int, _TIMING),
    "deleteConsumeQueueFilesInterval": (_java_int, _TIMING),
    "destroyMapedFileIntervalForcibly": (_java_int, _TIMING),
    "redeleteHangedFileInterval": (_java_int, _TIMING),
    "putMsgIndexHightWater": (_java_int, _TIMING),
    "osPageCacheBusyTimeOutMills": (_java_long, _TIMING),
    "useReentrantLockWhenPutMessage": (_bool, _TIMING),
    "debugLockEnable": (_bool, _TIMING),
    "diskFallRecorded": (_bool, _TIMING),
    "enableScheduleMessageStats": (_bool, _TIMING),
    "enableScheduleAsyncDeliver": (_bool, _TIMING),
    "scheduleAsyncDeliverMaxPendingLimit": (_java_int, _TIMING),
    "scheduleAsyncDeliverMaxResendNum2Blocked": (_java_int, _TIMING),
    "transientStorePoolEnable": (_bool, _MEMORY),
    "transientStorePoolSize": (_java_int, _MEMORY),
    "fastFailIfNoBufferInStorePool": (_bool, _MEMORY),
    "warmMapedFileEnable": (_bool, _MEMORY),
    "flushLeastPagesWhenWarmMapedFile": (_java_int, _MEMORY),
    "maxTransferBytesOnMessageInMemory": (_java_int, _SERVING),
    "maxTransferCountOnMessageInMemory": (_java_int, _SERVING),
    "maxTransferBytesOnMessageInDisk": (_java_int, _SERVING),
    "maxTransferCountOnMessageInDisk": (_java_int, _SERVING),
    "accessMessageInMemoryMaxRatio": (_java_int, _SERVING),
    "maxMsgsNumBatch": (_java_int, _SERVING),
    "defaultQueryMaxNum": (_java_int, _SERVING),
    "brokerRole": (_broker_role, _HA),
    "haListenPort": (_java_int, _HA),
    "haSendHeartbeatInterval": (_java_int, _HA),
    "haHousekeepingInterval": (_java_int, _HA),
    "haTransferBatchSize": (_java_int, _HA),
    "haMasterAddress": (str, _HA),
    "haSlaveFallbehindMax": (_java_int, _HA),
    "slaveTimeout": (_java_int, _HA),
    "offsetCheckInSlave": (_bool, _HA),
    "enableBatchPush": (_bool, _HA),
    "storePathRootDir": (str, _PATHS),
    "storePathCommitLog": (str, _PATHS),
    "readOnlyCommitLogStorePaths": (str, _PATHS),
    "storePathDLedgerCommitLog": (str, _PATHS),
    "dLegerGroup": (str, _DLEDGER),
    "dLegerPeers": (str, _DLEDGER),
    "dLegerSelfId": (str, _DLEDGER),
    "preferredLeaderId": (str, _DLEDGER),
    "mappedFileSizeConsumeQueueExt": (_java_int, _EXT),
    "bitMapLengthConsumeQueueExt": (_java_int, _EXT),
    "maxLmqConsumeQueueNum": (_java_int, "bounds the LMQ queues a running broker creates; not enforced"),
}

#: 4.9.7 ``MessageStoreConfig`` names taken at the broker's default only: another value asks the store for
#: what segstore does not do, and is a :class:`ConfigError` saying so (name: parser, default, why)
DEFAULT_ONLY: dict[str, tuple[Callable[[Any], Any], Any, str]] = {
    "checkCRCOnRecover": (_bool, True, "segstore checks every body's CRC: a message failing it is "
                                       "damage, never dispatched; the broker would dispatch it"),
    "duplicationEnable": (_bool, False, "recovery dispatching only below a replica's confirm offset "
                                        "(CommitLog.recoverAbnormally) is not supported"),
    "enableDLegerCommitLog": (_bool, False, "a DLedger commitlog is not supported"),
    "enableConsumeQueueExt": (_bool, False, "segstore reads consumequeue_ext/ whatever this says, and "
                                            "never writes it: appends would write tags hashes, not unit "
                                            "addresses"),
}


@dataclass(frozen=True)
class BrokerConfig:
    """The store's configuration, under the broker's names.  Immutable, thread-safe."""

    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300_000 * CQ_UNIT_SIZE
    maxMessageSize: int = 4 * 1024 * 1024
    flushDiskType: str = "ASYNC_FLUSH"
    storeHost: str = "127.0.0.1:10911"
    maxHashSlotNum: int = 5_000_000
    maxIndexNum: int = 20_000_000
    messageIndexEnable: bool = True
    #: with ``messageIndexEnable``, a recovery after a crash starts early enough for the index too
    #: (4.9.7 ``CommitLog.isMappedFileMatchedRecover``: ``StoreCheckpoint.getMinTimestampIndex``)
    messageIndexSafe: bool = False
    messageDelayLevel: str = DEFAULT_DELAY_LEVELS
    flushIntervalCommitLog: int = 500
    flushCommitLogLeastPages: int = 4
    flushIntervalConsumeQueue: int = 1000
    flushConsumeQueueLeastPages: int = 2
    #: after this many ms a flush takes whatever is dirty, however few pages (4.9.7
    #: ``FlushRealTimeService.run``, ``FlushConsumeQueueService.doFlush``: least pages 0)
    flushCommitLogThoroughInterval: int = 10_000
    flushConsumeQueueThoroughInterval: int = 60_000
    #: the broker version a new store's messages are written as (an existing store keeps its own style)
    rocketmqVersion: str = REFERENCE_VERSION
    # Retention (retention.py).  deleteWhen is the broker's "04" only when given: offline, a run with
    # no deleteWhen is the admin's manual delete (CleanCommitLogService.executeDeleteFilesManually).
    fileReservedTime: int = 72
    deleteWhen: str = ""
    diskMaxUsedSpaceRatio: int = 75
    cleanFileForciblyEnable: bool = True
    #: 5.1.0+: a topic longer than 127 characters is stored as a v2 message (CommitLog.asyncPutMessage)
    autoMessageVersionOnTopicLen: bool = True
    # Transaction checks (BrokerConfig, read by `transactions --find-hanging`, halfmessages.py): how old a
    # half message gets before the broker asks its producer, and how many times it asks.
    transactionTimeOut: int = 6_000
    transactionCheckMax: int = 15
    # Multi-dispatch / LMQ (MessageStoreConfig, 4.9.7; .multidispatch): a message carrying
    # INNER_MULTI_DISPATCH gets an entry in each queue it names (recovery re-dispatches them, an append
    # assigns INNER_MULTI_QUEUE_OFFSET); enableLmq puts a %LMQ% queue at queue id 0.  Off, as on the broker.
    enableMultiDispatch: bool = False
    enableLmq: bool = False

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None = None) -> BrokerConfig:
        """A config from broker names to values (strings accepted).

        :raises ConfigError: an unknown name or a value of the wrong kind.
        """
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        config = _store_host_from_broker_names(config or {})
        for name, value in config.items():
            if name in IGNORED or name in DEFAULT_ONLY:
                _check_broker_only(name, value)
                continue
            if name not in known:
                raise ConfigError(f"expected one of the RocketMQ config names {sorted(known)} (or a "
                                  f"MessageStoreConfig name segstore ignores), found {cut(name)}"
                                  f"{did_you_mean(str(name), known | set(IGNORED) | set(DEFAULT_ONLY))}")
            try:
                values[name] = _PARSERS[name](value)
            except (TypeError, ValueError) as err:
                raise ConfigError(f"expected a valid value for {name}, found {value!r} ({err})") from err
        made = cls(**values)
        index_size = (INDEX_HEADER_SIZE + made.maxHashSlotNum * INDEX_SLOT_SIZE
                      + made.maxIndexNum * INDEX_ENTRY_SIZE)
        if index_size > JAVA_INT_MAX:
            # 4.9.7 IndexFile: int fileTotalSize = 40 + hashSlotNum * 4 + indexNum * 20, in int arithmetic:
            # past Integer.MAX_VALUE it wraps, and the broker maps a file of another size (or none: a
            # negative size throws) and puts entries past its end
            raise ConfigError(f"expected maxHashSlotNum and maxIndexNum whose IndexFile size (40 + 4 * slots "
                              f"+ 20 * entries) is at most {JAVA_INT_MAX} (IndexFile computes it as a Java "
                              f"int), found {index_size} ({made.maxHashSlotNum} slots, {made.maxIndexNum} "
                              "entries)")
        return made

    @property
    def consume_queue_file_size(self) -> int:
        """``mappedFileSizeConsumeQueue`` rounded up to whole 20-byte entries, as the broker does."""
        units = -(-self.mappedFileSizeConsumeQueue // CQ_UNIT_SIZE)
        return units * CQ_UNIT_SIZE

    @property
    def max_stored_size(self) -> int:
        """The largest whole message a put stores (a commitlog file aside): ``maxMessageSize`` bounds the
        body, and the message with its headers, topic and properties may take 64 KiB more (RocketMQ
        4.9.7 ``CommitLog.MessageExtEncoder``: ``maxMessageBodySize + 64 * 1024``, at most
        ``Integer.MAX_VALUE``; ``encode`` refuses a larger body, then a larger message)."""
        return min(self.maxMessageSize + ENCODER_RESERVE, JAVA_INT_MAX)

    @property
    def trailing_separator(self) -> bool:
        """Whether messages of a new store end their properties with 0x02 (by :attr:`rocketmqVersion`)."""
        return trailing_separator_for(self.rocketmqVersion)

    @property
    def writes_v2(self) -> bool:
        """Whether a topic longer than 127 characters is written as a v2 message (5.1.0+ with
        ``autoMessageVersionOnTopicLen``); otherwise such a topic is refused."""
        return self.autoMessageVersionOnTopicLen and parse_version(self.rocketmqVersion) >= V2_FROM_VERSION

    @property
    def topic_max_length(self) -> int:
        """The longest topic an append accepts (:func:`validate_topic`)."""
        return TOPIC_MAX_LENGTH_V2 if self.writes_v2 else TOPIC_MAX_LENGTH

    @property
    def is_5x(self) -> bool:
        """Whether the store is kept as a 5.x broker keeps it (the checkpoint's 5.x fields maintained)."""
        return parse_version(self.rocketmqVersion) >= (5, 0, 0)

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.messageDelayLevel)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _port(value: Any) -> int:
    number = _java_int(value)
    if not 0 <= number <= 0xFFFF:
        raise ValueError(f"{number} is not a port (0..65535: InetSocketAddress)")
    return number


def _store_host_from_broker_names(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` with ``brokerIP1``/``listenPort`` (``BrokerConfig``/``NettyServerConfig``, as a broker.conf
    sets them) made into ``storeHost``: 4.9.7 ``BrokerController.getStoreHost`` is
    ``new InetSocketAddress(brokerIP1, listenPort)``, the STOREHOST every message the broker takes stores.
    The one not given is the default ``storeHost``'s.

    :raises ConfigError: either given with ``storeHost``, a ``listenPort`` that is no port, or a ``brokerIP1``
        that is no IP address.
    """
    if "brokerIP1" not in config and "listenPort" not in config:
        return config
    given = [name for name in ("brokerIP1", "listenPort") if name in config]
    if "storeHost" in config:
        raise ConfigError(f"expected storeHost or {'/'.join(given)}, found both "
                          f"(storeHost={config['storeHost']!r})")
    rest = {name: value for name, value in config.items() if name not in ("brokerIP1", "listenPort")}
    default_ip, _, default_port = BrokerConfig.storeHost.rpartition(":")
    ip = str(config.get("brokerIP1", default_ip)).strip()
    try:
        port = _port(config.get("listenPort", default_port))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"expected a valid value for listenPort, found {config['listenPort']!r} "
                          f"({err})") from err
    host = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    try:
        _host(host)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"expected an IP address for brokerIP1, found {ip!r} ({err})") from err
    return {**rest, "storeHost": host}


def _check_broker_only(name: str, value: Any) -> None:
    """A name of :data:`IGNORED` or :data:`DEFAULT_ONLY`: its value parsed as the broker's field type, and
    one of :data:`DEFAULT_ONLY` at its default.

    :raises ConfigError: a value of the wrong kind, or another value than the default where that is all
        segstore does.
    """
    if name in IGNORED:
        parser, _ = IGNORED[name]
    else:
        parser, default, why = DEFAULT_ONLY[name]
    try:
        parsed = parser(value)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"expected a valid value for {name}, found {value!r} ({err})") from err
    if name in DEFAULT_ONLY and parsed != default:
        raise ConfigError(f"expected {name}={str(default).lower()} ({why}), found {value!r}")


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "mappedFileSizeCommitLog": _positive_int,
    "mappedFileSizeConsumeQueue": _positive_int,
    "maxMessageSize": _positive_int,
    "flushDiskType": _flush_type,
    "storeHost": _host,
    "maxHashSlotNum": _positive_int,
    "maxIndexNum": _index_num,
    "messageIndexEnable": _bool,
    "messageIndexSafe": _bool,
    "messageDelayLevel": _delay_levels,
    "flushIntervalCommitLog": _positive_int,
    "flushCommitLogLeastPages": _java_int,     # 0 or less: whatever is dirty (MappedFile.isAbleToFlush)
    "flushIntervalConsumeQueue": _positive_int,
    "flushConsumeQueueLeastPages": _java_int,
    "flushCommitLogThoroughInterval": _java_int,
    "flushConsumeQueueThoroughInterval": _java_int,
    "rocketmqVersion": _version,
    "fileReservedTime": _non_negative_java_int,
    "deleteWhen": _delete_when,
    "diskMaxUsedSpaceRatio": _java_int,
    "cleanFileForciblyEnable": _bool,
    "autoMessageVersionOnTopicLen": _bool,
    "transactionTimeOut": _non_negative_java_long,
    "transactionCheckMax": _positive_int,
    "enableMultiDispatch": _bool,
    "enableLmq": _bool,
}
assert set(_PARSERS) == {f.name for f in fields(BrokerConfig)}

#: The parsers of names whose broker field is an ``int`` or ``long`` (``MixAll.properties2Object``:
#: ``Integer.parseInt`` / ``Long.parseLong`` of the text as the file holds it) and of ``boolean`` ones
#: (``Boolean.parseBoolean``).
_WHOLE_PARSERS = frozenset({_positive_int, _index_num, _java_int, _non_negative_java_int, _java_long,
                            _non_negative_java_long, _port})
#: ``BrokerConfig``/``NettyServerConfig`` names a ``broker.conf`` sets that make the store host
#: (:func:`_store_host_from_broker_names`), by the parser of their text.
_STORE_HOST_PARTS: dict[str, Callable[[Any], Any]] = {"brokerIP1": str, "listenPort": _port}
#: String fields whose text the broker uses untrimmed where segstore's parser trims it.
_UNTRIMMED_STRINGS = frozenset({"deleteWhen", "brokerIP1"})


def _broker_parser(name: str) -> Callable[[Any], Any] | None:
    """The parser of a name the store takes from a broker's config file; None for any other name."""
    if name in _PARSERS:
        return _PARSERS[name]
    if name in IGNORED:
        return IGNORED[name][0]
    if name in DEFAULT_ONLY:
        return DEFAULT_ONLY[name][0]
    return _STORE_HOST_PARTS.get(name)


def _check_file_text(name: str, text: str) -> None:
    """Refuse a value of a broker config file that the broker reads otherwise than segstore's parser
    (which trims it, as ``--config`` values are): ``MixAll.properties2Object`` (4.9.7) hands the text to
    ``Integer.parseInt`` / ``Long.parseLong`` / ``Boolean.parseBoolean`` / the setter as the file holds
    it, trailing blanks and all, and swallows what they throw.

    :raises ValueError: what the broker does with it instead.
    """
    parser = _broker_parser(name)
    if parser in _WHOLE_PARSERS and parse_long(text) is None:
        raise ValueError(f"Integer.parseInt/Long.parseLong throw on {text!r}: MixAll.properties2Object "
                         f"ignores the line and the broker keeps its default")
    if parser is _bool and text.lower() not in ("true", "false"):
        raise ValueError(f"Boolean.parseBoolean reads {text!r} as false (only 'true', in any case, is "
                         f"true)")
    if name in _UNTRIMMED_STRINGS and text != text.strip():
        raise ValueError(f"the broker uses the text as it is, blanks and all ({text!r})")


def from_properties(entries: Iterable[tuple[str, str, int]], path: str,
                    overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The config a RocketMQ ``broker.conf`` gives, under ``overrides`` (``--config``): the mapping
    :meth:`BrokerConfig.from_mapping` takes.

    4.9.7 ``BrokerStartup.createBrokerController`` loads the file as ``java.util.Properties`` and hands
    the one object to ``MixAll.properties2Object`` for ``BrokerConfig``, ``NettyServerConfig``,
    ``NettyClientConfig`` and ``MessageStoreConfig``, each taking the names of its setters and silently
    ignoring every other.  So here: the names :meth:`BrokerConfig.from_mapping` takes are taken (their
    text checked as the broker parses it, :func:`_check_file_text`), ``brokerIP1``/``listenPort`` make
    the store host, and every other name (``brokerName``, ``namesrvAddr``, a name no class knows) is
    ignored, as the broker ignores it.  A name of ``overrides`` replaces the file's (``storeHost`` the
    file's ``brokerIP1``/``listenPort``).

    :param entries: ``(name, value, byte position)`` in file order (a later name wins).
    :raises ConfigError: a value the broker reads otherwise or the store does not take, naming ``path``
        and the byte of its line.
    """
    taken: dict[str, tuple[str, int]] = {}
    for name, value, pos in entries:
        if _broker_parser(name) is not None:
            taken[name] = (value, pos)
    overrides = dict(overrides or {})
    if "storeHost" in overrides:
        for name in _STORE_HOST_PARTS:
            taken.pop(name, None)
    for name, (value, pos) in taken.items():
        if name in overrides:
            continue
        try:
            _check_file_text(name, value)
            BrokerConfig.from_mapping({name: value})
        except ValueError as err:       # ConfigError too
            reason = err.message if isinstance(err, ConfigError) else f"expected {name} as the broker " \
                f"reads it, found {value!r} ({err})"
            raise ConfigError(reason, path, pos) from err
    return {**{name: value for name, (value, _) in taken.items()}, **overrides}


#: ``MessageStoreConfig.MULTI_PATH_SPLITTER`` (4.9.7, the ``rocketmq.broker.multiPathSplitter`` default):
#: a ``storePathCommitLog`` holding it lists several directories (``MultiPathMappedFileQueue``)
MULTI_PATH_SPLITTER = ","


def _same_dir(a: str, b: str) -> bool:
    """Whether two directory names name the same place, by their text (absolute, normalised; nothing
    on disk is looked at): a URL is the same only as itself."""
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def file_notes(entries: Iterable[tuple[str, str, int]], store: str) -> list[tuple[str, int | None]]:
    """What a user giving this ``broker.conf`` for the store at ``store`` should be told, though
    :func:`from_properties` takes it (``(message, byte position of the line)``):

    - ``storePathRootDir`` (4.9.7 ``MessageStoreConfig``, the store's directory: its ``consumequeue``,
      ``index``, ``checkpoint``, ``config`` are there, ``StorePathConfigHelper``) naming another place
      than ``store``: segstore reads ``store`` all the same (a copy of that broker's store, say);
    - ``storePathCommitLog`` naming another directory than the store's own ``commitlog`` (and than
      ``storePathRootDir/commitlog``): that broker's commitlog is elsewhere, or, holding
      :data:`MULTI_PATH_SPLITTER`, spread over several directories (``MultiPathMappedFileQueue``);
      likewise ``readOnlyCommitLogStorePaths``, more directories that broker loads commitlog files
      from; segstore reads ``store/commitlog`` only;
    - a file none of whose names a RocketMQ broker reads: every name has a '.', which no setter of
      its config classes (``MixAll.properties2Object``) has, as in Kafka's ``server.properties``: the
      broker ignores every one, so the file was most likely not meant for it.

    4.9.7 has no ``storePathConsumeQueue`` or ``storePathIndex`` setting (``StorePathConfigHelper``
    puts them under ``storePathRootDir``): the broker ignores those names, as segstore does.
    """
    last: dict[str, tuple[str, int]] = {}
    for name, value, pos in entries:
        last[name] = (value, pos)
    notes: list[tuple[str, int | None]] = []
    root = last.get("storePathRootDir")
    if root is not None and not _same_dir(root[0], store):
        notes.append((f"storePathRootDir {root[0]!r} is not the store given, {store}: that broker's store is "
                      f"there; segstore reads {store} (its commitlog, consumequeue, index and config)",
                      root[1]))
    own = os.path.join(store, "commitlog")
    commitlog = last.get("storePathCommitLog")
    if commitlog is not None:
        text, pos = commitlog
        dirs = [d for d in text.split(MULTI_PATH_SPLITTER) if d.strip()]
        if len(dirs) > 1:
            notes.append((f"storePathCommitLog {text!r}: that broker spreads its commitlog over {len(dirs)} "
                          f"directories (MultiPathMappedFileQueue, split at {MULTI_PATH_SPLITTER!r}); "
                          f"segstore reads {own} only", pos))
        elif not _same_dir(text, own) and not (root is not None
                                                 and _same_dir(text, os.path.join(root[0], "commitlog"))):
            notes.append((f"storePathCommitLog {text!r} is not {own}: that broker keeps its commitlog there, "
                          f"outside its store directory; segstore reads {own}", pos))
    read_only = last.get("readOnlyCommitLogStorePaths")
    if read_only is not None and read_only[0].strip():
        notes.append((f"readOnlyCommitLogStorePaths {read_only[0]!r}: that broker also loads commitlog files "
                      f"from there; segstore reads {own} only", read_only[1]))
    if last and all("." in name for name in last):
        shown = ", ".join(sorted(last)[:3])
        notes.append((f"expected a RocketMQ broker.conf, found no name a RocketMQ broker reads ({shown}...: "
                      "names with a '.', as a Kafka server.properties holds; the broker's are camelCase, "
                      "brokerName, storePathRootDir): the broker ignores every one, and so does segstore "
                      "(its defaults stand)", None))
    return notes
