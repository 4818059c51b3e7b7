"""``--config-file FILE`` / ``segstore.config_file``: the broker's own config file, read and applied as the
broker does.

RocketMQ 4.9.7 ``BrokerStartup.createBrokerController``: ``Properties.load`` of ``broker.conf``, then
``MixAll.properties2Object`` into ``BrokerConfig``, ``NettyServerConfig``, ``NettyClientConfig`` and
``MessageStoreConfig`` (each takes its setters' names, ignores every other, and hands the text untrimmed to
``Integer.parseInt`` / ``Boolean.parseBoolean``, swallowing what they throw).  Kafka 3.8 ``Utils.loadProps``
of ``server.properties`` into ``KafkaConfig``, whose log configs are every topic's defaults
(``KafkaConfig.extractLogConfigMap``), under the metadata log's dynamic broker configs
(``DynamicBrokerConfig.updateCurrentConfig``/``overrideProps``) and each topic's own configs.
The sample files are the distributions' own (compat_fixtures/broker-configs/PROVENANCE.txt).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, cli_run, copy_writable

import segstore
from segstore.errors import ConfigError

CONFIGS = FIXTURES / "broker-configs"
ROCKETMQ_CONF = CONFIGS / "rocketmq-4.9.7"
KAFKA_CONF = CONFIGS / "kafka-3.8.0"
KRAFT_DIR = FIXTURES / "real" / "kraft-confluent-7.5.1"


def _conf(tmp_path: Path, text: str, name: str = "broker.conf") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    return path


# -- RocketMQ ------------------------------------------------------------------------------------------

def test_the_distributions_broker_conf_takes_the_store_names_and_ignores_the_others():
    """distribution/conf/broker.conf: brokerClusterName, brokerName, brokerId (BrokerConfig) are no store
    names; deleteWhen, fileReservedTime, brokerRole, flushDiskType are."""
    assert segstore.config_file(ROCKETMQ_CONF / "broker.conf", "rocketmq") == {
        "deleteWhen": "04", "fileReservedTime": "48", "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH"}
    slave = segstore.config_file(ROCKETMQ_CONF / "broker-a-s.properties", "rocketmq")
    assert slave["brokerRole"] == "SLAVE"


def test_a_dledger_broker_conf_is_refused_naming_its_line():
    """distribution/conf/dledger/broker-n0.conf sets enableDLegerCommitLog=true: a commitlog segstore does
    not read, refused where --config refuses it, naming the file and the byte of the line."""
    path = ROCKETMQ_CONF / "broker-n0.conf"
    with pytest.raises(ConfigError) as err:
        segstore.config_file(path, "rocketmq")
    assert err.value.path == str(path)
    assert path.read_bytes()[err.value.pos:].startswith(b"enableDLegerCommitLog=true")


def test_a_name_no_config_class_knows_is_ignored_as_the_broker_ignores_it(tmp_path):
    """properties2Object looks up only its setters' names: a typo or another tool's name changes nothing
    on the broker, and nothing here (the store keeps the default, as that broker does)."""
    path = _conf(tmp_path, "mapedFileSizeCommitLog=1024\nnamesrvAddr=127.0.0.1:9876\nlistenPort=10911\n")
    assert segstore.config_file(path, "rocketmq") == {"listenPort": "10911"}


@pytest.mark.parametrize(("line", "why"), [
    ("mappedFileSizeCommitLog=262144 ", "Integer.parseInt"),     # the broker keeps 1 GiB files
    ("fileReservedTime = 48\t", "Integer.parseInt"),
    ("transactionTimeOut=6000 ", "Long.parseLong"),
    ("messageIndexEnable=true ", "reads 'true ' as false"),        # Boolean.parseBoolean: false
    ("messageIndexEnable=yes", "reads 'yes' as false"),
    ("deleteWhen=04 ", "blanks and all"),                         # UtilAll.isItTimeToDo throws on '04 '
    ("flushDiskType=SYNC_FLUSH ", "SYNC_FLUSH"),                  # FlushDiskType.valueOf throws
])
def test_a_value_the_broker_reads_otherwise_is_refused_not_trimmed(tmp_path, line, why):
    """MixAll.properties2Object (4.9.7) does not trim: 'mappedFileSizeCommitLog=262144 ' makes
    Integer.parseInt throw, which it swallows, and the broker maps 1 GiB files.  Trimmed, segstore would
    read the store with other file sizes than the broker; refused, naming the line."""
    path = _conf(tmp_path, "brokerName=a\n" + line + "\n")
    with pytest.raises(ConfigError, match=why) as err:
        segstore.config_file(path, "rocketmq")
    assert (err.value.path, err.value.pos) == (str(path), len("brokerName=a\n"))


def test_an_error_names_the_line_as_an_editor_counts_it(tmp_path):
    """Lines end at \\n, \\r or \\r\\n (Properties.LineReader); a continued line is named by its first."""
    path = _conf(tmp_path, "# c\r\nbrokerName=a\rlistenPort=\\\n  10911\nfileReservedTime=x\n")
    with pytest.raises(ConfigError, match=r"^.*:\d+: line 5: expected fileReservedTime") as err:
        segstore.config_file(path, "rocketmq")
    assert path.read_bytes()[err.value.pos:].startswith(b"fileReservedTime=x")


def test_values_the_broker_reads_as_they_are_are_taken(tmp_path):
    path = _conf(tmp_path, "messageIndexEnable=TRUE\nmappedFileSizeCommitLog=+262144\n"
                           "messageDelayLevel=1s 5s \nbrokerRole=SLAVE\n")
    config = segstore.config_file(path, "rocketmq")
    assert config["messageDelayLevel"] == "1s 5s "      # String.split(" ") drops the trailing empty part
    from segstore_rocketmq.config import BrokerConfig

    parsed = BrokerConfig.from_mapping(config)
    assert (parsed.messageIndexEnable, parsed.mappedFileSizeCommitLog) == (True, 262144)


def test_broker_ip_and_listen_port_make_the_store_host_of_written_messages(tmp_path):
    """BrokerController.getStoreHost: new InetSocketAddress(brokerIP1, listenPort)."""
    path = _conf(tmp_path, "brokerIP1 = 10.1.2.3\nlistenPort : 30911\n")
    store_dir = tmp_path / "store"
    with segstore.open(store_dir, "rocketmq", "a", **segstore.config_file(path, "rocketmq")) as store:
        store.append({"topic": "T", "body": b"x"})
    with segstore.open(store_dir) as store:
        assert str(next(iter(store.scan())).store_host) == "10.1.2.3:30911"


def test_config_overrides_the_files_value(tmp_path):
    path = _conf(tmp_path, "fileReservedTime=48\nbrokerIP1=10.1.2.3\nlistenPort=30911\n")
    assert segstore.config_file(path, "rocketmq", fileReservedTime="1", listenPort="1") == {
        "fileReservedTime": "1", "brokerIP1": "10.1.2.3", "listenPort": "1"}
    # storeHost given replaces what brokerIP1/listenPort would make (else: both given, refused)
    assert segstore.config_file(path, "rocketmq", storeHost="1.2.3.4:5") == {
        "fileReservedTime": "48", "storeHost": "1.2.3.4:5"}
    # an override is taken as --config takes it, the file's bad value under it never looked at
    bad = _conf(tmp_path, "mappedFileSizeCommitLog=262144 \n", "bad.conf")
    assert segstore.config_file(bad, "rocketmq", mappedFileSizeCommitLog="262144") == {
        "mappedFileSizeCommitLog": "262144"}


def test_cli_config_file_sizes_the_files_write_makes(tmp_path):
    conf = _conf(tmp_path, "brokerClusterName = DefaultCluster\nbrokerName = broker-a\n"
                           "mappedFileSizeCommitLog = 262144\nmappedFileSizeConsumeQueue 640\n")
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "T", "body": "x"}\n')
    store_dir = tmp_path / "store"
    code, _, err = cli_run("write", store_dir, "--input", lines, "--config-file", conf)
    assert code == 0, err
    assert [os.path.getsize(p) for p in (store_dir / "commitlog").iterdir()] == [262144]
    assert [os.path.getsize(p) for p in (store_dir / "consumequeue" / "T" / "0").iterdir()] == [640]


def test_cli_config_file_errors_exit_2(tmp_path):
    store = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    code, out, err = cli_run("info", store, "--config-file", tmp_path / "missing.conf")
    assert (code, out) == (2, "")
    assert "expected a broker config file (--config-file), found no such file" in err
    bad = _conf(tmp_path, "mappedFileSizeCommitLog=262144 \n")
    code, out, err = cli_run("info", store, "--config-file", bad)
    assert (code, out) == (2, "") and f"{bad}:0: line 1: expected mappedFileSizeCommitLog" in err
    code, out, err = cli_run("info", store, "--config-file", bad,
                             "--config", "mappedFileSizeCommitLog=262144")
    assert code == 0, err
    malformed = _conf(tmp_path, "a=\\u00G0\n", "malformed.conf")
    code, out, err = cli_run("info", store, "--config-file", malformed)
    assert (code, out) == (2, "") and "Malformed" in err


# -- Kafka ---------------------------------------------------------------------------------------------

def test_the_distributions_server_properties_give_the_log_configs():
    """config/kraft/server.properties: log.retention.hours and log.segment.bytes are log configs; node.id,
    log.dirs, listeners... make no file segstore reads, and are left out."""
    assert segstore.config_file(KAFKA_CONF / "kraft-server.properties", "kafka") == {
        "server.properties": {"log.retention.hours": "168", "log.segment.bytes": "1073741824"}}
    assert segstore.config_file(KAFKA_CONF / "server.properties", "kafka") == {
        "server.properties": {"log.retention.hours": "168"}}


def test_server_properties_are_each_topics_default_under_its_own_config(tmp_path):
    """The KRaft log dir's __consumer_offsets has its own cleanup.policy=compact and segment.bytes=104857600
    in the metadata log: they win over the file's log.cleanup.policy / log.segment.bytes, as the broker's
    LogManager takes a topic's own configs over the broker's defaults; the other topics take the file's.
    Given as --config (topic names), the same values would override every topic's own."""
    conf = _conf(tmp_path, "node.id=1\nlog.dirs=/var/lib/kafka/data\nlog.segment.bytes=1048576\n"
                           "log.cleanup.policy=delete\nlog.retention.hours=24\n", "server.properties")
    config = segstore.config_file(conf, "kafka")
    with segstore.open(KRAFT_DIR, "kafka", **config) as store:
        offsets = store.topic_configs.config_for("__consumer_offsets")
        other = store.topic_configs.config_for("delivery-create-request")
    assert (offsets.segment_bytes, offsets.cleanup_policy) == (104857600, "compact")
    assert (other.segment_bytes, other.cleanup_policy, other.retention_ms) == (1048576, "delete", 86_400_000)
    with segstore.open(KRAFT_DIR, "kafka", **segstore.config_file(conf, "kafka", **{"segment.bytes": 2048})) \
            as store:
        assert store.topic_configs.config_for("__consumer_offsets").segment_bytes == 2048


def test_log_retention_synonyms_resolve_as_the_broker_resolves_them():
    """KafkaConfig.logRetentionTimeMillis: ms over minutes over hours, a negative time -1; a dynamic broker
    config replaces the static one's synonyms (DynamicBrokerConfig.overrideProps removes them)."""
    from segstore_kafka.brokerconfig import resolve

    assert resolve([{"log.retention.hours": "2", "log.retention.minutes": "3"}])["retention.ms"] == "180000"
    assert resolve([{"log.retention.hours": "-1"}])["retention.ms"] == "-1"
    assert resolve([{"log.retention.ms": "5"}, {"log.retention.hours": "1"}])["retention.ms"] == "3600000"
    assert resolve([{"log.roll.hours": "1"}])["segment.ms"] == "3600000"


def test_a_value_the_broker_refuses_is_refused_naming_its_line(tmp_path):
    conf = _conf(tmp_path, "node.id=1\nlog.retention.hours=a week\n", "server.properties")
    with pytest.raises(ConfigError) as err:
        segstore.config_file(conf, "kafka")
    assert (err.value.path, err.value.pos) == (str(conf), len("node.id=1\n"))
    assert "log.retention.hours" in err.value.message


def test_cli_convert_takes_the_destination_brokers_server_properties(tmp_path):
    conf = _conf(tmp_path, "log.segment.bytes=100000\nlog.message.timestamp.type=LogAppendTime\n",
                 "server.properties")
    dst = tmp_path / "logs"
    src = FIXTURES / "rocketmq" / "basic" / "store"
    # LogAppendTime batches are what --timestamp store writes: --timestamp born contradicts the file
    code, _, err = cli_run("convert", src, dst, "--to", "kafka", "--config-file", conf)
    assert code == 2 and "expected --timestamp store" in err and not dst.exists()
    code, _, err = cli_run("convert", src, dst, "--to", "kafka", "--config-file", conf,
                           "--timestamp", "store")
    assert code == 0, err
    sizes = [os.path.getsize(p) for p in (dst / "TopicB-1").glob("*.log")]
    assert len(sizes) > 1 and max(sizes) <= 100000
    with segstore.open(dst) as store:
        assert {r.timestamp_type for r in store.read("TopicB", 1)} == {"LogAppendTime"}


# -- the log directory's own meta.properties -------------------------------------------------------------

def test_meta_properties_is_read_as_kafka_reads_it(tmp_path):
    """3.8 PropertiesUtils.readPropertiesFile: Properties.load of an InputStream, ISO-8859-1.  A comment an
    operator wrote in Latin-1 (not UTF-8) is read past by the broker; it made segstore drop the whole file
    (node id unknown, a verify problem).  Escapes are the file's too (Properties.store writes them)."""
    log_dir = copy_writable(KRAFT_DIR, tmp_path / "logs")
    (log_dir / "meta.properties").write_bytes(b"#\n# g\xe9r\xe9 par ops\nnode.id=\\\n  1\nversion=1\n"
                                              b"cluster.id=EpwKlK0lR6qKZW0cGwZz8\\u0077\n")
    with segstore.open(log_dir) as store:
        assert (store.identity.node_id, store.identity.cluster_id) == (1, "EpwKlK0lR6qKZW0cGwZz8w")
    code, _, err = cli_run("verify", log_dir)
    assert code == 0 and "meta.properties" not in err, err



@pytest.mark.parametrize(("text", "node"), [("+1", 1), ("-0", 0), ("\\u0661", 1), ("2147483648", None),
                                            ("9999999999", None), ("1 ", None)])
def test_meta_properties_node_id_is_read_as_integer_parseint_reads_it(tmp_path, text, node):
    """3.8 MetaProperties: PropertiesUtils.loadRequiredIntProp is Integer.parseInt of the text as it is:
    '+1' is node 1 (segstore knew no node, so none of node 1's dynamic broker configs applied), a number
    past an int is none (the broker throws; segstore took node 9999999999)."""
    log_dir = copy_writable(KRAFT_DIR, tmp_path / "logs")
    meta = f"version=1\ncluster.id=EpwKlK0lR6qKZW0cGwZz8w\nnode.id={text}\n"
    (log_dir / "meta.properties").write_text(meta, encoding="latin-1")
    with segstore.open(log_dir) as store:
        assert store.identity.node_id == node

def test_server_properties_offsets_retention_minutes_expires_group_offsets(tmp_path):
    """The group coordinator expires an Empty group's offsets after offsets.retention.minutes (3.8
    KafkaConfig: GroupCoordinatorConfig.OFFSETS_RETENTION_MINUTES_CONFIG, INT, atLeast(1)); the file's value
    is the default of consumers' --offsets-retention-minutes, which wins over it."""
    conf = _conf(tmp_path, "offsets.retention.minutes=1\n", "server.properties")
    argv = ("consumers", KRAFT_DIR, "--all-groups", "--now-ms", "2025-01-24")
    code, out, err = cli_run(*argv)
    assert code == 0 and "order-group" in out, err
    code, out, err = cli_run(*argv, "--config-file", conf)
    assert "order-group" not in out and "offsets.retention.minutes=1" in err
    code, out, err = cli_run(*argv, "--config-file", conf, "--offsets-retention-minutes", "100000")
    assert code == 0 and "order-group" in out, err
    bad = _conf(tmp_path, "offsets.retention.minutes=0\n", "bad.properties")
    with pytest.raises(ConfigError, match=r"offsets\.retention\.minutes") as err_info:
        segstore.config_file(bad, "kafka")
    assert err_info.value.pos == 0


def test_a_broker_name_given_to_config_says_where_it_goes(tmp_path):
    """--config takes topic config names; log.retention.hours is the broker's synonym of retention.ms
    (ServerTopicConfigSynonyms): the refusal says so, and names --config-file for the broker's file."""
    code, out, err = cli_run("info", FIXTURES / "kafka" / "uncompressed" / "topic-0",
                             "--config", "log.retention.hours=24")
    assert (code, out) == (2, "")
    assert "the broker's synonym of retention.ms" in err and "--config-file" in err


def test_cli_config_file_from_a_pipe(tmp_path):
    """--config-file <(cmd) (a FIFO, read once), as write --input <(cmd) is taken; errors name the FIFO."""
    import threading

    store = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    fifo = tmp_path / "conf.fifo"
    for text, expected_code in (("brokerName=a\nmappedFileSizeCommitLog=262144\n", 0),
                                ("brokerName=a\nmappedFileSizeCommitLog=262144 \n", 2)):
        os.mkfifo(fifo)
        writer = threading.Thread(target=fifo.write_text, args=(text,))
        writer.start()
        code, out, err = cli_run("info", store, "--config-file", fifo, "--json")
        writer.join()
        fifo.unlink()
        assert code == expected_code, err
        if code:
            assert f"{fifo}:13: line 2: expected mappedFileSizeCommitLog" in err
        else:
            assert '"mappedFileSizeCommitLog": 262144' in out


def test_server_properties_values_are_trimmed_as_configdef_trims_them(tmp_path):
    """3.8 ConfigDef.parseType trims every value (String.trim) before parsing it, strings too: a blank
    after LogAppendTime or gzip is no other value to the broker, and was refused here."""
    conf = _conf(tmp_path, "log.message.timestamp.type=LogAppendTime \ncompression.type=gzip\t\n"
                           "log.segment.bytes = 2048\\u0000\n", "server.properties")
    config = segstore.config_file(conf, "kafka")
    assert config["server.properties"] == {"log.message.timestamp.type": "LogAppendTime",
                                           "compression.type": "gzip", "log.segment.bytes": "2048"}
    from segstore_kafka.partition import KafkaConfig

    parsed = KafkaConfig.from_mapping(config)
    assert (parsed.message_timestamp_type, parsed.compression_type, parsed.segment_bytes) == \
        ("LogAppendTime", "gzip", 2048)


def test_a_topics_own_string_config_is_trimmed_as_logconfig_parses_it(tmp_path):
    """The controller stores a topic config's text as given (ConfigRecord) and the broker parses it with
    ConfigDef.parseType, which trims it (3.8): 'LogAppendTime ' in the metadata log is LogAppendTime.
    It was 'not applied', and the topic written as CreateTime, uncompressed."""
    from kafka_messages import config, partition, topic
    from test_kafka_metadata import write_metadata_log

    logs = tmp_path / "logs"
    topic_id = "AAAAAAAAAAAAAAAAAAAAEQ"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append({"topic": "t", "value": b"v", "timestamp": 1})
    write_metadata_log(logs, [topic("t", topic_id), partition(topic_id, 0, [1]),
                              config("t", "message.timestamp.type", "LogAppendTime "),
                              config("t", "compression.type", "gzip\t")])
    (logs / "t-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}\n")
    (logs / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=1\n")
    with segstore.open(logs) as store:
        found = store.topic_configs.for_topic("t")
    assert (found.config.message_timestamp_type, found.config.compression_type, found.notes) == \
        ("LogAppendTime", "gzip", ())


def test_dump_follow_reads_a_piped_config_file_once(tmp_path):
    """dump --follow opens the store at each look; a --config-file <(cmd) is a pipe that gives its text
    once, and a second read of it waited forever for a writer: the follow printed nothing more."""
    import subprocess
    import sys
    import threading
    import time

    store = tmp_path / "store"
    with segstore.open(store, "rocketmq", "a", mappedFileSizeCommitLog=4096) as writer:
        writer.append({"topic": "T", "body": b"first"})
    fifo = tmp_path / "broker.conf"
    os.mkfifo(fifo)
    threading.Thread(target=fifo.write_text, args=("brokerName=a\nmappedFileSizeCommitLog=4096\n",),
                     daemon=True).start()
    root = FIXTURES.parent
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'formats'}"}
    proc = subprocess.Popen([sys.executable, "-m", "segstore.cli", "dump", str(store), "--json", "--follow",
                             "--interval", "0.05", "--config-file", str(fifo)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not lines and time.monotonic() < deadline:
            time.sleep(0.02)
        with segstore.open(store, "rocketmq", "a", mappedFileSizeCommitLog=4096) as writer:
            writer.append({"topic": "T", "body": b"second"})
        deadline = time.monotonic() + 20
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(lines) == 2, proc.stderr.read1() if proc.poll() is not None else lines
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_server_properties_given_as_a_path_is_a_config_error():
    """open(..., **{"server.properties": "/etc/kafka/server.properties"}) (the file's path where the
    mapping config_file gives belongs) was an AttributeError from deep inside; a ConfigError now, saying
    what goes there."""
    with pytest.raises(ConfigError, match=r"segstore\.config_file"):
        segstore.open(FIXTURES / "kafka" / "uncompressed" / "topic-0",
                      **{"server.properties": "/etc/kafka/server.properties"})
    with segstore.open(FIXTURES / "kafka" / "uncompressed" / "topic-0",
                       **{"server.properties": {"log.segment.bytes": 2048}}) as store:
        assert store.config.segment_bytes == 2048


# -- notes: settings the broker follows and segstore does not, another broker's file --------------------

def test_store_paths_of_another_place_are_noted_and_path_is_read(tmp_path):
    """4.9.7 ``MessageStoreConfig.storePathRootDir`` is the broker's store directory (its consumequeue,
    index, checkpoint and config under it: ``StorePathConfigHelper``), ``storePathCommitLog`` its commitlog
    directory (``getStorePathCommitLog``: ``storePathRootDir/commitlog`` when unset; several directories
    split at ``MULTI_PATH_SPLITTER`` ',' for ``MultiPathMappedFileQueue``, which also loads
    ``readOnlyCommitLogStorePaths``).  The broker's own conf naming other places than PATH was taken
    without a word and PATH read: segstore still reads PATH (a copy of the store, say), and says so on
    stderr, naming the line; settings naming PATH itself, or a path --config replaces, say nothing."""
    store = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    _, plain, _ = cli_run("info", store, "--json")
    elsewhere = _conf(tmp_path, "brokerName=a\nstorePathRootDir=/opt/rocketmq/store\n"
                                "storePathCommitLog=/opt/rocketmq/store/commitlog\n")
    code, out, err = cli_run("info", store, "--config-file", elsewhere, "--json")
    assert (code, out) == (0, plain), err
    (note,) = err.splitlines()
    assert note.startswith(f"segstore info: note: {elsewhere}:13: line 2: storePathRootDir "
                           "'/opt/rocketmq/store'")
    assert f"segstore reads {store} " in note
    apart = _conf(tmp_path, f"storePathRootDir={store}\nstorePathCommitLog=/disk2/commitlog\n"
                            "readOnlyCommitLogStorePaths=/disk3/commitlog\n", "apart.conf")
    code, _, err = cli_run("dump", store, "--config-file", apart, "--topic", "TopicA")
    notes = err.splitlines()
    assert code == 0 and len(notes) == 2, err
    assert f"{apart}:" in notes[0] and "line 2: storePathCommitLog '/disk2/commitlog' is not" in notes[0]
    assert f"segstore reads {store / 'commitlog'}" in notes[0]
    assert "line 3: readOnlyCommitLogStorePaths '/disk3/commitlog'" in notes[1]
    spread = _conf(tmp_path, "storePathCommitLog=/d1/commitlog,/d2/commitlog\n", "spread.conf")
    _, _, err = cli_run("info", store, "--config-file", spread)
    assert "spreads its commitlog over 2 directories (MultiPathMappedFileQueue" in err, err
    same = _conf(tmp_path, f"storePathRootDir={store}/\nstorePathCommitLog={store}/commitlog\n"
                           "storePathConsumeQueue=/x\nstorePathIndex=/y\n", "same.conf")
    assert cli_run("info", store, "--config-file", same)[2] == ""
    # --config wins over the file: its storePathRootDir is not looked at (the commitlog it names then
    # lies outside the store directory --config gives)
    err = cli_run("info", store, "--config-file", elsewhere, "--config", f"storePathRootDir={store}")[2]
    assert "storePathRootDir" not in err and "storePathCommitLog '/opt/rocketmq/store/commitlog'" in err
    # the library returns the notes; only the CLI prints them
    assert segstore.config_file_notes(same, "rocketmq", store) == []
    assert len(segstore.config_file_notes(elsewhere, "rocketmq", store)) == 1


def test_another_brokers_file_is_noted(tmp_path):
    """A Kafka ``server.properties`` given for a RocketMQ store names nothing a 4.9.7 broker reads (every
    name has a '.', which no setter ``MixAll.properties2Object`` calls has): the broker ignores all of it,
    as segstore does, and the user almost certainly gave the wrong file; a RocketMQ ``broker.conf`` given
    for a Kafka store names nothing a 3.8 ``KafkaConfig`` knows (all its names but ``listeners`` have a
    '.').  Both were taken without a word."""
    rocketmq = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    code, _, err = cli_run("info", rocketmq, "--config-file", KAFKA_CONF / "server.properties")
    said = f"segstore info: note: {KAFKA_CONF / 'server.properties'}: expected a RocketMQ broker.conf, "
    assert code == 0 and err.startswith(said + "found no name a RocketMQ broker reads"), err
    kafka = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    code, _, err = cli_run("info", kafka, "--config-file", ROCKETMQ_CONF / "broker.conf")
    assert code == 0 and "expected a Kafka server.properties, found no name a Kafka broker reads" in err, err
    assert cli_run("info", rocketmq, "--config-file", ROCKETMQ_CONF / "broker.conf")[2] == ""
    assert cli_run("info", kafka, "--config-file", KAFKA_CONF / "server.properties")[2] == ""


@pytest.mark.parametrize("line", ["log.retention.hours=\xb2", "log.retention.minutes=-\xb2",
                                  "log.retention.ms=+-5", "log.retention.hours=99999999999",
                                  "log.roll.hours=3000000000", "log.roll.jitter.hours=2147483648"])
def test_hours_and_minutes_are_refused_where_integer_parseint_throws(tmp_path, line):
    """3.8 KafkaConfig defines log.retention.hours/.minutes, log.roll.hours, log.roll.jitter.hours as INT
    (ConfigDef.parseType: Integer.parseInt, whose Character.digit takes no '²'): such a file keeps the
    broker from starting.  A ConfigError naming the line, not a ValueError traceback, nor hours made ms."""
    conf = _conf(tmp_path, f"node.id=1\n{line}\n", "server.properties")
    with pytest.raises(ConfigError) as err:
        segstore.config_file(conf, "kafka")
    assert (err.value.path, err.value.pos) == (str(conf), len("node.id=1\n"))
    assert line.split("=")[0] in err.value.message


def test_hours_in_any_decimal_digits_are_what_integer_parseint_reads():
    """Character.digit (Integer.parseInt) reads any Unicode decimal digit: '\\u0665' is 5."""
    from segstore_kafka.brokerconfig import from_properties, resolve

    static = from_properties([("log.retention.hours", "\u0665", 0)], "f")["server.properties"]
    assert resolve([static])["retention.ms"] == str(5 * 3_600_000)


@pytest.mark.parametrize("text", ["log.retention.minutes=0", "log.retention.hours=-0", "log.retention.ms=0",
                                  "log.retention.ms=0\nlog.retention.hours=5"])
def test_a_retention_time_of_0_is_refused_as_kafkaconfig_refuses_it(tmp_path, text):
    """3.8 KafkaConfig.validateValues: require(logRetentionTimeMillis >= 1 || logRetentionTimeMillis == -1):
    a retention time of 0 keeps the broker from starting; taken, it had retention delete every segment."""
    conf = _conf(tmp_path, text + "\n", "server.properties")
    with pytest.raises(ConfigError) as err:
        segstore.config_file(conf, "kafka")
    assert "validateValues" in err.value.message and err.value.pos == 0
    # the winning synonym's 0 only: the ms set, the minutes' 0 is never looked at
    ok = _conf(tmp_path, "log.retention.ms=5\nlog.retention.minutes=0\n", "ok.properties")
    assert segstore.config_file(ok, "kafka")["server.properties"]["log.retention.minutes"] == "0"


def test_a_files_value_that_config_replaces_is_not_looked_at(tmp_path):
    """docs/cli.md: --config NAME=VALUE wins over the file's synonyms of NAME, and a file value that
    --config replaces is not looked at (as RocketMQ's are not): log.retention.hours=abc under --config
    retention.ms=5 was refused."""
    conf = _conf(tmp_path, "log.retention.hours=abc\nlog.roll.hours=0\nlog.segment.bytes=2048\n",
                 "server.properties")
    config = segstore.config_file(conf, "kafka", **{"retention.ms": 5, "segment_ms": 60000})
    assert config["server.properties"] == {"log.segment.bytes": "2048"}
    assert config["retention.ms"] == 5
    with pytest.raises(ConfigError, match=r"log\.roll\.hours"):
        segstore.config_file(conf, "kafka", **{"retention.ms": 5})


def test_the_files_timestamp_difference_bounds_a_topic_that_sets_only_its_own_difference():
    """3.8 KafkaConfig.logMessageTimestampBeforeMaxMs/AfterMaxMs: the broker's before (after) unless it is
    Long.MAX_VALUE, else log.message.timestamp.difference.max.ms; extractLogConfigMap gives every topic
    those as its before and after, and LogConfig.getMessageTimestampBeforeMaxMs takes the topic's before
    over its difference.  So under a server.properties difference of 1000 a topic's own difference of
    5000 still refuses a record 2000 ms old; segstore took 5000 (before and after left at Long.MAX)."""
    from segstore_kafka.brokerconfig import resolve
    from segstore_kafka.partition import KafkaConfig

    static = {"log.message.timestamp.difference.max.ms": "1000"}
    assert resolve([static])["message.timestamp.before.max.ms"] == "1000"
    config = KafkaConfig.from_mapping({"server.properties": static,
                                       "message.timestamp.difference.max.ms": 5000})
    assert (config.timestamp_before_max_ms, config.timestamp_after_max_ms) == (1000, 1000)
    after = {**static, "log.message.timestamp.after.max.ms": "7"}
    own = KafkaConfig.from_mapping({"server.properties": after, "message.timestamp.difference.max.ms": 5000})
    assert (own.timestamp_before_max_ms, own.timestamp_after_max_ms) == (1000, 7)
    alone = KafkaConfig.from_mapping({"message.timestamp.difference.max.ms": 5000})
    assert alone.timestamp_before_max_ms == 5000


def test_a_number_followed_by_a_no_break_space_is_refused_as_string_trim_keeps_it(tmp_path):
    """3.8 ConfigDef.parseType trims with String.trim (characters up to U+0020 only), then
    Long.parseLong/Integer.parseInt: "4096" and the Latin-1 byte 0xA0 (U+00A0) throws, and the broker does
    not start; Python's str.strip took the U+00A0 away and segstore read 4096."""
    conf = _conf(tmp_path, "log.segment.bytes=4096\xa0\n", "server.properties")
    with pytest.raises(ConfigError, match=r"log\.segment\.bytes"):
        segstore.config_file(conf, "kafka")
    ok = _conf(tmp_path, "log.segment.bytes=\x1f4096\t\n", "ok.properties")    # String.trim cuts U+001F
    assert segstore.config_file(ok, "kafka")["server.properties"]["log.segment.bytes"] == "4096"


def test_broker_conf_numbers_in_any_decimal_digits_are_what_integer_parseint_reads(tmp_path):
    """4.9.7 MixAll.properties2Object: Integer.parseInt, whose Character.digit reads any Unicode decimal
    digit ('\\u0665' is 5; '\\u00b2' is none); segstore refused '\\u0665' saying Integer.parseInt throws."""
    conf = _conf(tmp_path, "fileReservedTime=\\u0665\\u0660\ndeleteWhen=\\u0660\\u0664\n")
    from segstore_rocketmq.config import BrokerConfig

    parsed = BrokerConfig.from_mapping(segstore.config_file(conf, "rocketmq"))
    assert (parsed.fileReservedTime, parsed.deleteWhen) == (50, "\u0660\u0664")
    with pytest.raises(ConfigError, match="fileReservedTime"):
        segstore.config_file(_conf(tmp_path, "fileReservedTime=\xb2\n", "sup.conf"), "rocketmq")


@pytest.mark.parametrize(("name", "value"), [
    ("fileReservedTime", "\U0001d7d3"),              # MATHEMATICAL BOLD DIGIT FIVE
    ("mappedFileSizeConsumeQueue", "\U0001d7d2" + "0" * 4),
    ("deleteWhen", "\U0001d7ce\U0001d7d2"),
    ("messageDelayLevel", "1s \U0001d7d3s"),
    ("transactionTimeOut", "1" + "0" * 19),           # past a long
])
def test_broker_config_numbers_java_refuses_are_refused(name, value):
    """4.9.7 ``MixAll.properties2Object`` (``Integer.parseInt`` / ``Long.parseLong``),
    ``UtilAll.isItTimeToDo`` (``Integer.parseInt`` of each hour) and
    ``ScheduleMessageService.parseDelayLevel`` (``Long.parseLong``) read Java's UTF-16 chars: a digit
    past the BMP is two surrogates, no digit, and they throw (the broker keeps its default, never
    deletes, does not start); ``\\d`` took it and segstore used 5."""
    from segstore_rocketmq.config import BrokerConfig

    with pytest.raises(ConfigError, match=name):
        BrokerConfig.from_mapping({name: value})


def test_broker_config_numbers_with_many_leading_zeros_are_what_java_reads():
    """The same methods read leading zeros of any number; Python's ``int`` refused a text past 4300 digits,
    so ``deleteWhen`` of hour 4 written so was refused ("Exceeds the limit")."""
    from segstore_rocketmq.config import BrokerConfig, parse_delay_levels
    from segstore_rocketmq.retention import is_time_to_delete

    zeros = "0" * 5000
    parsed = BrokerConfig.from_mapping({"deleteWhen": f"{zeros}4",
                                        "fileReservedTime": f"{zeros}\u0660\u0665"})
    assert parsed.fileReservedTime == 5
    four = next(ms for ms in range(0, 86_400_000, 3_600_000) if time.localtime(ms / 1000).tm_hour == 4)
    assert is_time_to_delete(parsed.deleteWhen, four)
    assert not is_time_to_delete(parsed.deleteWhen, four + 3_600_000)
    assert parse_delay_levels(f"{zeros}1s +\uff12m") == (1000, 120_000)


def test_offsets_retention_minutes_in_any_decimal_digits_is_what_integer_parseint_reads(tmp_path):
    """ConfigDef.parseType (INT): Integer.parseInt reads '\\u0665' as 5 (Character.digit); segstore took no
    value for it (a ConfigError, 'a whole number of minutes')."""
    from segstore_kafka.brokerconfig import offsets_retention_ms

    conf = _conf(tmp_path, "offsets.retention.minutes=\\u0665\n", "server.properties")
    static = segstore.config_file(conf, "kafka")["server.properties"]
    assert offsets_retention_ms(static) == 5 * 60_000
    assert offsets_retention_ms({"offsets.retention.minutes": "\xb2"}) is None


def test_server_properties_compression_none_is_refused_as_kafkaconfig_refuses_it(tmp_path):
    """3.8 KafkaConfig: compression.type is ValidString.in(BrokerCompressionType.names): uncompressed, zstd,
    lz4, snappy, gzip, producer.  'none' (segstore's --config alias of uncompressed) keeps the broker from
    starting; the file's 'uncompressed' is taken."""
    conf = _conf(tmp_path, "compression.type=none\n", "server.properties")
    with pytest.raises(ConfigError, match="BrokerCompressionType"):
        segstore.config_file(conf, "kafka")
    ok = _conf(tmp_path, "compression.type=uncompressed\n", "ok.properties")
    assert segstore.config_file(ok, "kafka")["server.properties"] == {"compression.type": "uncompressed"}


def test_a_digit_outside_the_bmp_is_refused_as_integer_parseint_refuses_it():
    """Integer.parseInt reads each UTF-16 unit with Character.digit(char, 10): a decimal digit outside the
    BMP ('\\U0001d7d3', MATHEMATICAL BOLD DIGIT FIVE) is two surrogates, no digit, so it throws; the
    partition names were read so (LocalLog.parseTopicPartitionName), the broker configs took it as 5."""
    from segstore_kafka.brokerconfig import java_whole
    from segstore_kafka.logdir import java_partition

    assert java_whole(" \u0665 ") == 5 and java_whole("\U0001d7d3") is None
    assert java_partition("t-\u0665") == 5 and java_partition("t-\U0001d7d3") is None


def test_server_properties_numbers_with_thousands_of_leading_zeros_read_as_configdef_reads_them(tmp_path):
    """3.8 ``ConfigDef.parseType`` (clients/.../common/config/ConfigDef.java): a LONG is ``Long.parseLong`` of
    the trimmed text, which reads leading zeros of any number; Python's ``int`` refuses a text of more than
    4300 digits, which ended ``config_file`` with a ValueError traceback."""
    text = "log.retention.ms=" + "0" * 5000 + "5\nlog.retention.hours=1\n"
    conf = _conf(tmp_path, text, "server.properties")
    static = segstore.config_file(conf, "kafka")["server.properties"]
    assert static["log.retention.ms"] == "0" * 5000 + "5"
    with segstore.open(FIXTURES / "kafka" / "uncompressed" / "topic-0", "kafka",
                       **segstore.config_file(conf, "kafka")) as store:
        assert store.config.retention_ms == 5
    too_big = _conf(tmp_path, "log.retention.hours=" + "0" * 5000 + "2147483648\n", "big.properties")
    with pytest.raises(ConfigError, match=r"log\.retention\.hours"):
        segstore.config_file(too_big, "kafka")


@pytest.mark.parametrize("path", [None, 5, ["broker.conf"]])
def test_a_config_file_path_that_is_no_path_is_a_config_error(path):
    # before (huntB3): TypeError "expected str, bytes or os.PathLike object, not NoneType" from os.fspath
    with pytest.raises(segstore.errors.ConfigError, match=r"expected a broker config file's path \(str or "
                                                          r"os.PathLike\), found "):
        segstore.config_file(path, "rocketmq")
    with pytest.raises(segstore.errors.ConfigError, match=r"expected a broker config file's path"):
        segstore.config_file_notes(path, "kafka", "store")
