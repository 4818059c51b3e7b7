"""Damaged ``config/topics.json`` and ``config/consumerOffset.json`` (issue 28, item 11: "Tracebacks"):
every command ended in a Python traceback (``ValueError`` past 4300 digits, ``RecursionError``,
``AttributeError`` on ``null`` or ``[]``, ``TypeError``).  Now each file is read as the broker's
managers read it through fastjson 1.2.69 (RocketMQ 4.9.7's; each reading checked with fastjson's
own ``JSON.parseObject`` into ``TopicConfigSerializeWrapper`` and a ``ConcurrentMap<String,
ConcurrentMap<Integer, Long>>`` table): where fastjson accepts the text, its reading; where it
throws (and the broker's ``ConfigManager.load`` fails), a typed error naming the file.
"""

from __future__ import annotations

import json

import damage
import pytest
from segstore_rocketmq import topicconfig

import segstore
from segstore import cli
from segstore.errors import CorruptDataError

TOPICS, OFFSETS = "topics.json", "consumerOffset.json"
DEEP_ARRAY = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a":' * 1000 + "1" + "}" * 1000

CASES = [
    # (file, text, what fastjson makes of it: None = it throws; else the topics / offset table read)
    (TOPICS, '{"topicConfigTable": {}, "x": ' + "9" * 5000 + "}", {}),      # an unknown member: ignored
    (OFFSETS, '{"offsetTable": {"a@b": {"0": ' + "9" * 5000 + "}}}", None),  # parseLong error
    (OFFSETS, '{"offsetTable": {"a@b": {"0": ' + "9" * 1_000_000 + "}}}", None),
    (TOPICS, '{"offsetTable": {"a@b": {"0": ' + "9" * 1_000_000 + "}}}", {}),
    (OFFSETS, '{"offsetTable": {"TopicA@g": {"0": 1e999}}}', None),
    (TOPICS, '{"topicConfigTable": {"A": {"topicName": "A", "readQueueNums": 1e999}}}', None),
    (TOPICS, DEEP_ARRAY, None),
    (OFFSETS, DEEP_OBJECT, None),             # fastjson passes over it; refused as too deep, typed
    (TOPICS, "null", {}),
    (OFFSETS, "null", {}),
    (TOPICS, "[]", {}),
    (OFFSETS, "[]", {}),
    (TOPICS, '{"topicConfigTable": 5}', None),
    (OFFSETS, '{"topicConfigTable": 5}', {}),
    (OFFSETS, '{"offsetTable": 5}', None),
    (OFFSETS, '{"offsetTable": {"a@b": {"x": "y"}}}', None),               # parseInt error
    (TOPICS, '{"offsetTable": {"a@b": {"x": "y"}}}', {}),
    (OFFSETS, '{"offsetTable": {"a@b": {"0": "17", "1": 2.9}}}', {"a@b": {0: 17, 1: 2}}),
    (OFFSETS, '{"offsetTable": {"a@b": {"2147483648": 1}}}', None),
    (OFFSETS, '{"offsetTable": {"a@b": null}}', None),
    (TOPICS, '{"topicConfigTable": {"A": {"topicName": "A", "readQueueNums": "4"}}}', {"A": 4}),
    (TOPICS, '{"topicConfigTable": {}, "dataVersion": {"counter": "x"}}', None),
    # a string holding what looks like an integer key is a string (it was quoted as a key and broke)
    (OFFSETS, '{"offsetTable": {"a@b": {0: 1}}, "note": "x,1:y"}', {"a@b": {0: 1}}),
    # no readQueueNums: TopicConfig's default (defaultReadQueueNums, 16) fastjson leaves it at
    (TOPICS, '{"topicConfigTable": {"A": {"topicName": "A", "attributes": {"+k": "{7:x"}}}}', {"A": 16}),
]


@pytest.mark.parametrize(("name", "text", "expected"), CASES,
                         ids=[f"{n}-{t[:30]}-{i}" for i, (n, t, _) in enumerate(CASES)])
def test_config_json_is_read_as_fastjson_reads_it_or_refused_naming_the_file(tmp_path, capsys, name, text,
                                                                            expected):
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    path = store / "config" / name
    path.write_text(text)
    if expected is None:
        # the messages are read without it: the error kept, appends refused
        # (tests/test_rocketmq_topics_unreadable.py, tests/test_rocketmq_offsets_unreadable.py)
        with segstore.open(str(store)) as s:
            kept = s.topic_configs if name == TOPICS else s.consumer_offsets
            assert kept.error is not None and kept.error.path == str(path)
        with pytest.raises(CorruptDataError) as caught:
            segstore.open(str(store), mode="a")
        assert caught.value.path == str(path)
        rc = cli.main(["verify", str(store)])
        got = capsys.readouterr()
        assert rc == 1 and f"{path}: expected " in got.out + got.err and "Traceback" not in got.err
        return
    with segstore.open(str(store)) as s:
        if name == OFFSETS:
            assert s.consumer_offsets.table == expected
        else:
            assert {t: c.get("readQueueNums") for t, c in s.topic_configs.topics.items()} == \
                {t: n for t, n in expected.items()}
    assert cli.main(["dump", "--json", str(store)]) == 0
    capsys.readouterr()


# ConfigManager.load (rocketmq-all-4.9.7 common) takes NAME.bak where NAME is missing, empty, or throws in
# decode; MixAll.string2File (.tmp written, old content copied to .bak, NAME deleted, .tmp renamed) leaves
# exactly "no NAME, a good .bak" when the broker dies between its delete and its rename.
BACKUP_CASES = [
    ("missing", None),
    ("empty", ""),
    ("undecodable", '{"offsetTable": {"a@b": {"x": "y"}}}'),     # parseInt throws in decode
]


@pytest.mark.parametrize(("case", "main_text"), BACKUP_CASES, ids=[c for c, _ in BACKUP_CASES])
def test_offsets_are_read_from_the_bak_file_where_the_broker_takes_it(tmp_path, capsys, case, main_text):
    store = tmp_path / "s"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=200) as s:
        s.append({"topic": "T1", "queue_id": 0, "body": b"x"})
        s.commit_offset("g1", "T1", 0, 1)
    config = store / "config"
    (config / OFFSETS).rename(config / (OFFSETS + ".bak"))
    if main_text is not None:
        (config / OFFSETS).write_text(main_text)
    with segstore.open(str(store)) as s:
        assert s.consumer_offsets.table == {"T1@g1": {0: 1}}
    assert cli.main(["consumers", str(store), "--json"]) == 0
    assert '"g1"' in capsys.readouterr().out
    # a commit now starts from what the broker would hold: g1 is written into the new file, not lost
    with segstore.open(str(store), format="rocketmq", mode="a") as s:
        s.commit_offset("g2", "T1", 0, 1)
    with segstore.open(str(store)) as s:
        assert s.consumer_offsets.table == {"T1@g1": {0: 1}, "T1@g2": {0: 1}}
    rc = cli.main(["verify", str(store)])
    assert rc == 0, capsys.readouterr()


def test_verify_reports_an_undecodable_config_file_and_says_the_broker_takes_its_bak(tmp_path, capsys):
    store = tmp_path / "s"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=200) as s:
        s.append({"topic": "T1", "queue_id": 0, "body": b"x"})
    config = store / "config"
    (config / TOPICS).rename(config / (TOPICS + ".bak"))
    (config / TOPICS).write_text('{"topicConfigTable": 5}')
    with segstore.open(str(store)) as s:
        assert list(s.topic_configs.topics) == ["T1"]
    assert cli.main(["verify", str(store)]) == 1
    out = capsys.readouterr().out
    assert f"{config / TOPICS}: expected " in out and f"the broker loads {TOPICS}.bak instead" in out
    # both undecodable: the broker's load fails; the main file's error, typed (kept by a reader, raised
    # by an open for append: tests/test_rocketmq_topics_unreadable.py)
    (config / (TOPICS + ".bak")).write_text("[[")
    with segstore.open(str(store)) as s:
        assert s.topic_configs.error is not None and s.topic_configs.error.path == str(config / TOPICS)
    with pytest.raises(CorruptDataError) as caught:
        segstore.open(str(store), mode="a")
    assert caught.value.path == str(config / TOPICS)
    # the main file empty: the .bak's error
    (config / TOPICS).write_text("")
    with pytest.raises(CorruptDataError) as caught:
        segstore.open(str(store), mode="a")
    assert caught.value.path == str(config / (TOPICS + ".bak"))
    assert cli.main(["verify", str(store)]) == 1
    got = capsys.readouterr()
    assert f"{config / (TOPICS + '.bak')}:2: expected " in got.out + got.err and "Traceback" not in got.err


@pytest.mark.parametrize(("name", "text", "at"), [
    (OFFSETS, '{"offsetTable":{"T@g":{0:12,1:3,2:x}}}', 34),          # the x, after three integer keys
    (OFFSETS, '{\n\t"offsetTable":{\n\t\t"T@g":{0:12,1:3\n\t\t},\n\t\t"U@g":{0:', 53),    # cut short: its end
    ("delayOffset.json", '{"offsetTable":{1:5,2:7,3', 24),        # a key without its colon
])
def test_the_position_named_is_in_the_files_text(tmp_path, name, text, at):
    """fastjson's unquoted integer keys (``{0:12}``) are quoted before Python's parser reads the text; the
    error's position was in that rewritten text, 8 characters further per key before it.  It is the
    file's own now, as ``info`` and ``verify`` say it."""
    from segstore_rocketmq.topicconfig import loads_fastjson

    assert len(text) >= at
    with pytest.raises(CorruptDataError) as caught:
        loads_fastjson(text, "f")
    assert caught.value.pos == at
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    path = store / "config" / name
    path.write_text(text)
    with segstore.open(str(store)) as s:
        info = s.info()
    said = [value for key, value in info.items() if key.endswith("_error")]
    assert len(said) == 1 and said[0].startswith(f"{path}:{at}: expected a fastjson document")


# What the storage oracle (rocketmq-all-4.9.7 TopicConfigManager.decode through fastjson 1.2.69) printed
# for each entry: a TopicConfig field missing, or read as null (JSON null; for the primitive int fields and
# the boolean ``order`` also "", "null", "NULL": TypeUtils.castToInt/castToBoolean), keeps the class's
# default: readQueueNums = writeQueueNums = 16 (defaultReadQueueNums/defaultWriteQueueNums),
# perm 6 (PERM_READ | PERM_WRITE, "RW-"), topicSysFlag 0, order false, topicFilterType SINGLE_TAG where it
# is missing (an explicit null sets the enum field to null).  segstore read a missing count as no queues.
DEFAULTED = {"order": False, "perm": 6, "readQueueNums": 16, "topicSysFlag": 0, "writeQueueNums": 16}
DEFAULT_CASES = [
    ('{"topicName":"T"}', {**DEFAULTED, "topicFilterType": "SINGLE_TAG", "topicName": "T"}),
    ('{"topicName":"T","readQueueNums":null,"writeQueueNums":null,"perm":null,"topicSysFlag":null,'
     '"order":null,"topicFilterType":null}', {**DEFAULTED, "topicFilterType": None, "topicName": "T"}),
    ("{}", {**DEFAULTED, "topicFilterType": "SINGLE_TAG"}),
    ('{"readQueueNums":"","perm":"null","order":""}', {**DEFAULTED, "topicFilterType": "SINGLE_TAG"}),
    ('{"readQueueNums":2,"perm":4}', {**DEFAULTED, "readQueueNums": 2, "perm": 4,
                                      "topicFilterType": "SINGLE_TAG"}),
]


@pytest.mark.parametrize(("entry", "expected"), DEFAULT_CASES, ids=[e for e, _ in DEFAULT_CASES])
def test_a_missing_or_null_topic_field_is_topic_configs_default(tmp_path, capsys, entry, expected):
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    (store / "config" / TOPICS).write_text('{"topicConfigTable":{"TopicA":' + entry + "}}")
    with segstore.open(str(store)) as s:
        assert s.topic_configs.topics["TopicA"] == expected
        # the fields in name order, as fastjson writes the TopicConfig bean back (persist)
        assert list(s.topic_configs.topics["TopicA"]) == sorted(expected)
        assert s.topic_configs.read_queue_count("TopicA") == expected["readQueueNums"]
        summary = s.topic_configs.summary({})["TopicA"]
    assert summary["read_queue_nums"] == expected["readQueueNums"]
    assert summary["perm"] == ("RW-" if expected["perm"] == 6 else "R--")
    assert summary["order"] is False and summary["topic_sys_flag"] == 0


# TopicConfig.topicFilterType as the oracle's fastjson 1.2.69 read each (TopicConfigSerializeWrapper.fromJson,
# rocketmq-all-4.9.7): EnumDeserializer.deserialze takes an ordinal, a name matched by its FNV hash as it is
# or with A-Z lowered, and reads "" and any unknown name as null; TopicConfigSerializeWrapper.toJson (what
# TopicConfigManager.persist writes) leaves a null field out.  segstore kept each value as read and wrote
# it back ("" stayed "", 1 stayed 1).
FILTER_TYPES = [
    ('""', None), ('" "', None), ('"BOGUS"', None), ('"SINGLE_TAG "', None), ('"\\uff2dULTI_TAG"', None),
    ("null", None), ('"single_tag"', "SINGLE_TAG"), ('"Multi_Tag"', "MULTI_TAG"),
    ('"MULTI_TAG"', "MULTI_TAG"), ("0", "SINGLE_TAG"), ("1", "MULTI_TAG"),
]


@pytest.mark.parametrize(("value", "expected"), FILTER_TYPES, ids=[v for v, _ in FILTER_TYPES])
def test_a_topic_filter_type_reads_and_persists_as_fastjson_does(tmp_path, value, expected):
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    path = store / "config" / TOPICS
    path.write_text('{"topicConfigTable":{"TopicA":{"perm":6,"readQueueNums":4,"topicFilterType":' + value
                    + ',"topicName":"TopicA","writeQueueNums":4}}}')
    with segstore.open(str(store)) as s:
        assert s.topic_configs.topics["TopicA"]["topicFilterType"] == expected
    with segstore.open(str(store), mode="a") as s:
        s.append({"topic": "Added", "queue_id": 0, "body": b"x"})       # a new topic: the table persisted
    written = json.loads(path.read_text())["topicConfigTable"]["TopicA"]
    bean = {"order": False, "perm": 6, "readQueueNums": 4, "topicName": "TopicA", "topicSysFlag": 0,
            "writeQueueNums": 4, **({"topicFilterType": expected} if expected is not None else {})}
    assert written == bean and list(written) == sorted(bean)


@pytest.mark.parametrize("value", ["2", "-1", "4294967297", "1.0", "true", "{}", "[]"])
def test_a_topic_filter_type_fastjson_throws_on_is_refused(tmp_path, value):
    """An ordinal past the constants, or a value neither string, integer nor null: the oracle's fastjson
    throws ``JSONException`` ("parse enum org.apache.rocketmq.common.TopicFilterType error"), so the
    broker's ``ConfigManager.load`` fails.  segstore kept it as read."""
    path = tmp_path / TOPICS
    path.write_text('{"topicConfigTable":{"T":{"topicFilterType":' + value + ',"topicName":"T"}}}')
    with pytest.raises(CorruptDataError) as caught:
        topicconfig.read_topics(str(path))
    assert caught.value.path == str(path)
    assert "expected topicFilterType of topic 'T' (a TopicFilterType: a name, or an ordinal 0 to 1)" \
        in str(caught.value)
