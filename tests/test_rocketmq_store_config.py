"""The RocketMQ 4.9.7 ``MessageStoreConfig`` names a broker.conf holds: taken and honoured where they change
what the store writes or recovers, taken and named as ignored where they only tune a running broker."""

from __future__ import annotations

import time

import pytest
from segstore_rocketmq import config
from segstore_rocketmq.config import BrokerConfig
from segstore_rocketmq.flush import FlushPolicy

import segstore
from segstore.errors import ConfigError
from segstore.indexes import keyhash


def _wait(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_flush_thorough_intervals_are_taken_and_used():
    """4.9.7 ``CommitLog.FlushRealTimeService.run`` reads ``flushCommitLogThoroughInterval`` and
    ``DefaultMessageStore.FlushConsumeQueueService.doFlush`` ``flushConsumeQueueThoroughInterval``: once
    that long has passed, the flush takes every dirty byte (least pages 0).  Before: a ConfigError."""
    cfg = BrokerConfig.from_mapping({"flushCommitLogThoroughInterval": "2000",
                                     "flushConsumeQueueThoroughInterval": "3000"})
    policy = FlushPolicy.from_config(cfg)
    assert (policy.thorough_commitlog, policy.thorough_consume_queue) == (2000, 3000)
    defaults = FlushPolicy.from_config(BrokerConfig())
    assert (defaults.thorough_commitlog, defaults.thorough_consume_queue) == (10_000, 60_000)


def test_a_short_thorough_interval_flushes_a_message_below_the_least_pages(tmp_path):
    """One small message is less than ``flushCommitLogLeastPages`` (4 pages) and
    ``flushConsumeQueueLeastPages`` (2 pages): only the thorough flush takes it, after the configured
    interval (``FlushRealTimeService.run``: ``flushPhysicQueueLeastPages = 0``)."""
    config = {"flushIntervalCommitLog": "5", "flushIntervalConsumeQueue": "5",
              "flushCommitLogThoroughInterval": "0", "flushConsumeQueueThoroughInterval": "0"}
    with segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a", **config) as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x"})
        flusher = store._flusher
        end = store.commitlog.end
        assert _wait(lambda: flusher.durable_offset == end)
    with segstore.open(str(tmp_path / "d"), format="rocketmq", mode="a", flushIntervalCommitLog="5",
                       flushIntervalConsumeQueue="5") as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x"})
        time.sleep(0.3)      # the default thorough intervals (10 s, 60 s) have not passed
        assert store._flusher.durable_offset == 0


@pytest.mark.parametrize("name", ["flushCommitLogThoroughInterval", "flushConsumeQueueThoroughInterval"])
def test_a_thorough_interval_is_a_java_int(name):
    with pytest.raises(ConfigError, match=f"expected a valid value for {name}, found '2147483648'"):
        BrokerConfig.from_mapping({name: "2147483648"})


def _crashed_store_of_three_files(path, **config) -> None:
    """Three 4 KiB commitlog files whose first messages were stored at 10 s, 20 s and 30 s; the checkpoint
    says the commitlog and queues were flushed up to 35 s, the index up to 15 s; the abort file present."""
    import os

    from segstore_rocketmq.checkpoint import Checkpoint

    with segstore.open(str(path), format="rocketmq", mode="a", mappedFileSizeCommitLog="4096",
                       **config) as store:
        for i in range(9):      # three messages of 1 KiB a file
            store.append({"topic": "T", "queue_id": 0, "body": b"b" * 1000, "keys": [f"k{i}"],
                          "store_timestamp": 10_000 * (1 + i // 3) + i})
        assert [seg.base for seg in store.commitlog.log.segments] == [0, 4096, 8192]
    cp_path = os.path.join(path, "checkpoint")
    with open(cp_path, "rb") as f:
        cp = Checkpoint.unpack(f.read())
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = 35_000
    cp.index_msg_timestamp = 15_000
    with open(cp_path, "wb") as f:
        f.write(cp.pack())
    open(os.path.join(path, "abort"), "wb").close()


def _walk_start(lines: list[str]) -> int:
    line = next(line for line in lines if line.startswith("commitlog: unclean shutdown"))
    return int(line.split(" from ")[1].split()[0])


def test_message_index_safe_starts_the_crash_recovery_where_the_index_needs_it(tmp_path):
    """4.9.7 ``CommitLog.isMappedFileMatchedRecover``: with ``messageIndexEnable`` and ``messageIndexSafe``
    the recovery after a crash starts at the last file whose first store time is at most
    ``StoreCheckpoint.getMinTimestampIndex`` (min of ``getMinTimestamp`` and ``indexMsgTimestamp``), here
    the first file (10 s <= 15 s); without it at the last file at most ``getMinTimestamp`` (32 s): the
    third.  Before: ``messageIndexSafe`` was a ConfigError."""
    _crashed_store_of_three_files(tmp_path / "safe")
    with segstore.open(str(tmp_path / "safe"), format="rocketmq", mode="a", mappedFileSizeCommitLog="4096",
                       messageIndexSafe="true") as store:
        assert _walk_start(store.recovery_lines) == 0
    _crashed_store_of_three_files(tmp_path / "plain")
    with segstore.open(str(tmp_path / "plain"), format="rocketmq", mode="a",
                       mappedFileSizeCommitLog="4096") as store:
        assert _walk_start(store.recovery_lines) == 8192
    _crashed_store_of_three_files(tmp_path / "noindex", messageIndexEnable="false")
    with segstore.open(str(tmp_path / "noindex"), format="rocketmq", mode="a", mappedFileSizeCommitLog="4096",
                       messageIndexEnable="false", messageIndexSafe="true") as store:
        assert _walk_start(store.recovery_lines) == 8192     # messageIndexSafe needs the index on


def test_names_that_tune_only_a_running_broker_are_taken_and_ignored(tmp_path):
    """4.9.7 ``MessageStoreConfig`` names a broker.conf holds that change nothing the store writes or
    recovers: ``syncFlushTimeout`` (``CommitLog.submitFlushRequest``: how long a SYNC_FLUSH put waits for
    ``GroupCommitService`` before answering FLUSH_DISK_TIMEOUT; segstore's append waits until the bytes are
    durable), ``flushCommitLogTimed`` (``FlushRealTimeService.run``: sleep or wait), the transient store
    pool, pull limits, HA.  Before: each was a ConfigError (exit 2)."""
    from conftest import cli_run

    config = {"syncFlushTimeout": "100", "flushCommitLogTimed": "false", "transientStorePoolEnable": "true",
              "maxTransferBytesOnMessageInMemory": "262144", "flushLeastPagesWhenWarmMapedFile": "4096",
              "warmMapedFileEnable": "false", "brokerRole": "SYNC_MASTER", "haListenPort": "10912",
              "storePathRootDir": "/data/store", "flushDelayOffsetInterval": "10000",
              "mappedFileSizeConsumeQueueExt": "50331648", "bitMapLengthConsumeQueueExt": "64"}
    assert BrokerConfig.from_mapping(config) == BrokerConfig()
    with segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a", flushDiskType="SYNC_FLUSH",
                       **config) as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x"})
        assert store._flusher.flushed_offset == store.commitlog.end      # durable once append returned
    code, _, err = cli_run("recover", tmp_path / "s", "--config", "syncFlushTimeout=100",
                           "--config", "brokerRole=SLAVE")
    assert code == 0, err


@pytest.mark.parametrize(("name", "value"), [("syncFlushTimeout", "5s"), ("syncFlushTimeout", "2147483648"),
                                             ("flushCommitLogTimed", "yes"), ("brokerRole", "master"),
                                             ("osPageCacheBusyTimeOutMills", "1.5")])
def test_an_ignored_name_of_a_bad_value_is_refused_naming_it(tmp_path, name, value):
    """``MixAll.properties2Object`` parses the value into the field's type (``Integer.parseInt``,
    ``Long.parseLong``, ``BrokerRole.valueOf``); a value it cannot parse is no value the broker took."""
    from conftest import cli_run

    from segstore.errors import ConfigError

    with pytest.raises(ConfigError, match=f"expected a valid value for {name}, found '{value}'"):
        BrokerConfig.from_mapping({name: value})
    segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a").close()
    code, out, err = cli_run("recover", tmp_path / "s", "--config", f"{name}={value}")
    assert (code, out) == (2, "") and f"expected a valid value for {name}" in err and "Traceback" not in err


@pytest.mark.parametrize(("name", "value", "default"), [("checkCRCOnRecover", "false", "true"),
                                                        ("duplicationEnable", "true", "false"),
                                                        ("enableDLegerCommitLog", "true", "false"),
                                                        ("enableConsumeQueueExt", "true", "false")])
def test_a_name_asking_for_what_segstore_does_not_do_is_refused_at_any_other_value(name, value, default):
    """``checkCRCOnRecover=false`` (``CommitLog.recoverAbnormally``/``checkMessageAndReturnSize``: a message
    failing its body CRC dispatched), ``duplicationEnable=true`` (``recoverAbnormally`` dispatches only below
    the confirm offset), a DLedger commitlog, ``enableConsumeQueueExt=true``
    (``ConsumeQueue.putMessagePositionInfo`` writes an ext unit and its address): refused naming the name,
    the default taken."""
    from segstore.errors import ConfigError

    with pytest.raises(ConfigError, match=f"expected {name}={default} .*, found '{value}'"):
        BrokerConfig.from_mapping({name: value})
    assert BrokerConfig.from_mapping({name: default}) == BrokerConfig()


def test_zero_least_pages_flush_whatever_is_dirty_and_the_checkpoint_each_interval(tmp_path):
    """4.9.7 ``MappedFile.isAbleToFlush``: least pages 0 (or less) flushes whatever is written past the
    flushed position; ``FlushConsumeQueueService.doFlush`` with ``flushConsumeQueueLeastPages`` 0 flushes the
    checkpoint too, every interval.  A broker.conf may set both to 0.  Before: refused as not positive."""
    import os

    from segstore_rocketmq.checkpoint import Checkpoint

    cfg = BrokerConfig.from_mapping({"flushCommitLogLeastPages": "0", "flushConsumeQueueLeastPages": "0"})
    assert (cfg.flushCommitLogLeastPages, cfg.flushConsumeQueueLeastPages) == (0, 0)
    path = tmp_path / "s"
    with segstore.open(str(path), format="rocketmq", mode="a", flushIntervalCommitLog="5",
                       flushIntervalConsumeQueue="5", flushCommitLogLeastPages="0",
                       flushConsumeQueueLeastPages="0") as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x", "store_timestamp": 1_700_000_000_000})
        end = store.commitlog.end
        assert _wait(lambda: store._flusher.durable_offset == end)

        def on_disk() -> Checkpoint:
            with open(os.path.join(path, "checkpoint"), "rb") as f:
                return Checkpoint.unpack(f.read())

        assert _wait(lambda: on_disk().logics_msg_timestamp == 1_700_000_000_000)
        assert on_disk().physic_msg_timestamp == 1_700_000_000_000


def test_broker_ip_and_listen_port_make_the_store_host_messages_store(tmp_path):
    """A broker.conf sets ``brokerIP1`` (``BrokerConfig``) and ``listenPort`` (``NettyServerConfig``); 4.9.7
    ``BrokerController.getStoreHost`` is ``new InetSocketAddress(brokerIP1, listenPort)``, which
    ``SendMessageProcessor`` stores as every message's STOREHOST (and its offset msgId).  Before: both
    names were a ConfigError, so a store written with a broker.conf's values carried 127.0.0.1:10911."""
    from segstore.errors import ConfigError

    assert BrokerConfig.from_mapping({"brokerIP1": "10.0.0.7", "listenPort": "10921"}).storeHost == \
        "10.0.0.7:10921"
    assert BrokerConfig.from_mapping({"brokerIP1": "10.0.0.7"}).storeHost == "10.0.0.7:10911"
    assert BrokerConfig.from_mapping({"listenPort": "10921"}).storeHost == "127.0.0.1:10921"
    assert BrokerConfig.from_mapping({"brokerIP1": "2001:db8::11"}).storeHost == "[2001:db8::11]:10911"
    with segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a", brokerIP1="10.0.0.7",
                       listenPort="10921") as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x"})
    with segstore.open(str(tmp_path / "s"), format="rocketmq") as store:
        (msg,) = list(store.scan())
        assert str(msg.store_host) == "10.0.0.7:10921"
    for bad, name in (({"listenPort": "70000"}, "listenPort"), ({"listenPort": "x"}, "listenPort"),
                      ({"brokerIP1": "broker-a.local"}, "brokerIP1"),
                      ({"brokerIP1": "10.0.0.7", "storeHost": "10.0.0.8:1"}, "storeHost or brokerIP1")):
        with pytest.raises(ConfigError, match=name):
            BrokerConfig.from_mapping(bad)


@pytest.mark.parametrize("text", ["1s  5s", " 1s 5s", "1s\t5s", "1s 5S"])
def test_delay_levels_the_broker_cannot_parse_are_refused(text):
    """4.9.7 ``ScheduleMessageService.parseDelayLevel`` splits at each single space (``split(" ")``): an
    empty part (two spaces, a leading one) or a tab inside a part throws, ``load`` fails and the broker does
    not start.  Before: segstore split at any whitespace and took these as the levels 1s and 5s."""
    from segstore.errors import ConfigError

    with pytest.raises(ConfigError, match="expected delay levels like"):
        BrokerConfig.from_mapping({"messageDelayLevel": text})


def test_delay_levels_as_the_broker_parses_them():
    """``String.split`` drops trailing empty parts; ``Long.parseLong`` takes a sign."""
    assert BrokerConfig.from_mapping({"messageDelayLevel": "1s 5s  "}).delay_levels_ms == (1000, 5000)
    assert BrokerConfig.from_mapping({"messageDelayLevel": "+2m 1d"}).delay_levels_ms == (120_000, 86_400_000)


def test_the_store_lines_of_the_distributions_broker_conf_are_taken_and_its_broker_names_refused(tmp_path):
    """4.9.7's ``distribution/conf/broker.conf``: the store names (``deleteWhen``, ``fileReservedTime``,
    ``brokerRole``, ``flushDiskType``) are taken as ``--config``; a ``BrokerConfig`` name segstore has no use
    for (``brokerName``) is a usage error naming it (exit 2).  Before: ``brokerRole`` was refused too."""
    from conftest import cli_run

    segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a").close()
    store_lines = ["deleteWhen=04", "fileReservedTime=48", "brokerRole=ASYNC_MASTER",
                   "flushDiskType=ASYNC_FLUSH"]
    args = [arg for line in store_lines for arg in ("--config", line)]
    code, _, err = cli_run("recover", tmp_path / "s", *args)
    assert code == 0, err
    code, out, err = cli_run("recover", tmp_path / "s", *args, "--config", "brokerName=broker-a")
    assert (code, out) == (2, "") and "found 'brokerName'" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["sync_flush", "Sync_Flush", "async_flush", " SYNC_FLUSH", "SYNC_FLUSH "])
def test_a_flush_disk_type_not_spelled_as_the_enum_is_refused(tmp_path, value):
    """4.9.7 ``MessageStoreConfig.setFlushDiskType(String)`` is ``FlushDiskType.valueOf(type)``: exact and
    upper case.  ``MixAll.properties2Object`` swallows what it throws on ``flushDiskType=sync_flush`` and
    that broker keeps ``ASYNC_FLUSH``; segstore took it for ``SYNC_FLUSH``.  Refused, exit 2 on the CLI (the
    CLI strips a ``--config`` value, so only the library meets the blanks)."""
    from conftest import cli_run

    from segstore.errors import ConfigError

    with pytest.raises(ConfigError, match="expected a valid value for flushDiskType"):
        BrokerConfig.from_mapping({"flushDiskType": value})
    assert BrokerConfig.from_mapping({"flushDiskType": "SYNC_FLUSH"}).flushDiskType == "SYNC_FLUSH"
    if value.strip() != value:
        return
    segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a").close()
    code, out, err = cli_run("recover", tmp_path / "s", "--config", f"flushDiskType={value}")
    assert (code, out) == (2, "") and "expected a valid value for flushDiskType" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("slots", "entries"), [(5_000_000, 107_374_182), (536_870_912, 2), (1, 2**31 - 1)])
def test_an_index_geometry_whose_file_size_is_past_a_java_int_is_refused(tmp_path, slots, entries):
    """4.9.7 ``IndexFile``: ``int fileTotalSize = IndexHeader.INDEX_HEADER_SIZE + (hashSlotNum * hashSlotSize)
    + (indexNum * indexSize)`` in int arithmetic: past ``Integer.MAX_VALUE`` it wraps, so the broker maps a
    file of another size (a negative one throws) and ``putKey`` writes past it.  segstore made a sparse
    file of the full size (2.1 GB for 107,374,182 entries at the default slots) that no broker reads."""
    with pytest.raises(ConfigError, match=r"IndexFile size \(40 \+ 4 \* slots \+ 20 \* entries\) is at most "
                                          r"2147483647"):
        segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a", maxHashSlotNum=slots,
                      maxIndexNum=entries)
    assert not (tmp_path / "s" / "index").exists()


def test_the_largest_index_geometry_a_java_int_holds_is_taken():
    """40 + 4 * 1 + 20 * 107,374,180 = 2,147,483,644: the broker's int holds it."""
    made = BrokerConfig.from_mapping({"maxHashSlotNum": 1, "maxIndexNum": 107_374_180})
    assert (made.maxHashSlotNum, made.maxIndexNum) == (1, 107_374_180)
    # the sizes this module checks with are the layout's (segstore.indexes.keyhash)
    assert (config.INDEX_HEADER_SIZE, config.INDEX_SLOT_SIZE, config.INDEX_ENTRY_SIZE) == \
        (keyhash.HEADER.size, keyhash.SLOT_DTYPE.itemsize, keyhash.ENTRY_DTYPE.itemsize)
