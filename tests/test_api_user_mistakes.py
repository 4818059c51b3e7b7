"""The Python API as a new user meets it: a wrong argument to a store method is a typed
``segstore.errors`` error saying what was expected and what was found, on both formats, never a
``TypeError`` or ``AttributeError`` from deep inside, and nothing is written."""

from __future__ import annotations

import os
import re

import pytest

import segstore
from segstore.errors import (
    ConfigError,
    InvalidMessageError,
    OffsetOutOfRangeError,
    StoreClosedError,
    WrongFormatError,
)

SMALL_ROCKETMQ = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 20 * 1000,
                  "maxHashSlotNum": 100, "maxIndexNum": 400}
ONE = {"kafka": {"topic": "orders", "partition": 0, "key": b"k", "value": b"v"},
       "rocketmq": {"topic": "orders", "queue_id": 0, "body": b"v", "keys": ["k"]}}


@pytest.fixture(params=["kafka", "rocketmq"])
def store(request, tmp_path):
    fmt = request.param
    config = SMALL_ROCKETMQ if fmt == "rocketmq" else {}
    with segstore.open(tmp_path / "s", format=fmt, mode="a", **config) as s:
        s.append(ONE[fmt])
        yield s


def _unchanged(store):
    assert store.offset_range("orders", 0) == (0, 1)


@pytest.mark.parametrize(("batch", "found"), [
    (None, "found NoneType$"),
    (5, "found int$"),
    ("orders", "found str$"),
    ({"topic": "orders"}, r"found dict \(append\(\) takes one message\)"),
])
def test_append_batch_of_what_is_not_a_list_of_messages_is_refused(store, batch, found):
    # before: TypeError "'NoneType' object is not iterable" from the store's list(messages); a dict
    # was taken as its keys (RocketMQ: "'str' object has no attribute 'keys'")
    with pytest.raises(InvalidMessageError, match=r"expected an iterable of messages .*" + found):
        store.append_batch(batch)
    _unchanged(store)


@pytest.mark.parametrize("message", [None, 5, [("topic", "orders")]])
def test_append_of_what_is_not_a_message_is_refused(store, message):
    # before, on Kafka: TypeError from Message.coerce's dict(obj) (a list of pairs was taken as a dict)
    with pytest.raises(InvalidMessageError):
        store.append(message)
    with pytest.raises(InvalidMessageError):
        store.append_batch([ONE[store.format], message])
    _unchanged(store)


@pytest.mark.parametrize("data", [None, [{"topic": "orders"}], {"topic": ["orders"]}])
def test_append_arrow_of_what_is_not_arrow_is_refused(store, data):
    # before, on Kafka: AttributeError "'NoneType' object has no attribute 'num_rows'"
    with pytest.raises(InvalidMessageError, match="expected a pyarrow RecordBatch or Table of the "
                                                  "segstore.columns schema, found " + type(data).__name__):
        store.append_arrow(data)
    _unchanged(store)


@pytest.mark.parametrize(("call", "said"), [
    (lambda s: list(s.read("orders", 0, offset="1")), "expected an offset as an integer, found str '1'"),
    (lambda s: list(s.read("orders", 0, count="1")), "expected a count as an integer, found str '1'"),
    (lambda s: list(s.read("orders", "0")), "expected a partition as an integer, found str '0'"),
    (lambda s: list(s.read("orders", 0, offset=1.0)), "expected an offset as an integer, found float 1.0"),
    (lambda s: s.find("orders", None), "expected a key as str or bytes, found NoneType None"),
    (lambda s: s.find("orders", 5), "expected a key as str or bytes, found int 5"),
    (lambda s: s.offset_for_time("orders", 0, "2024-01-01"),
     "expected a lookup time in ms since the epoch, found str '2024-01-01'"),
    (lambda s: s.offsets_between("orders", 0, begin="0"),
     "expected a begin time in ms since the epoch, found str '0'"),
])
def test_a_lookup_argument_of_the_wrong_kind_is_a_config_error(store, call, said):
    # before: TypeError ("'>' not supported between instances of 'int' and 'str'", "cannot convert
    # 'NoneType' object to bytes"); find(topic, 5) looked up bytes(5), five zero bytes, and found nothing;
    # read(topic, "0") said there was no such queue
    with pytest.raises(ConfigError, match=re.escape(f"{store.path}: {said}")):
        call(store)


@pytest.mark.parametrize("call", [
    lambda s: list(s.read("orders", 0, offset=-5)),
    lambda s: list(s.scan_arrow(topic="orders", partition=0, offset=-5)),
])
def test_a_negative_offset_is_refused_by_read_and_scan_alike(store, call):
    # before: RocketMQ's read gave every message and its scan_arrow refused; Kafka's read and scan both
    # gave every record.  No record has a negative offset: Kafka 3.8's KafkaConsumer.seek refuses one
    # (IllegalArgumentException "seek offset must not be a negative number")
    with pytest.raises(OffsetOutOfRangeError, match=re.escape(
            f"{store.path}: expected an offset of at least 0 (offsets start at 0), found -5")):
        call(store)


def test_a_negative_count_is_refused(store):
    # before: read(..., count=-1) gave nothing, as if the queue were empty; no limit is None
    with pytest.raises(ConfigError, match=re.escape(
            f"{store.path}: expected a count of at least 0 (None: no limit), found -1")):
        list(store.read("orders", 0, count=-1))
    assert list(store.read("orders", 0, count=0)) == []


def test_lookups_take_numpy_integers_and_bytes_like_keys(store):
    import numpy as np

    assert [r.offset for r in store.read("orders", np.int32(0), offset=np.int64(0), count=np.int64(1))] == [0]
    assert [r.offset for r in store.find("orders", bytearray(b"k"))] == [0]
    assert [r.offset for r in store.find("orders", memoryview(b"k"))] == [0]
    assert store.offset_for_time("orders", 0, 0.5) == 0


@pytest.mark.parametrize("path", [None, 5])
def test_open_of_what_is_not_a_path_is_a_config_error(path):
    # before: TypeError from os.fspath deep in segstore.open
    with pytest.raises(ConfigError, match=f"expected a store path \\(str or os.PathLike\\), found "
                                          f"{type(path).__name__} {path}"):
        segstore.open(path)


@pytest.mark.parametrize(("typo", "meant"), [("fromat", "format"), ("mdoe", "mode"),
                                             ("storage_option", "storage_options"), ("indxes", "indexes")])
def test_a_typo_of_opens_own_keywords_names_the_keyword(store, typo, meant):
    """``segstore.open(path, fromat="kafka")`` was refused as an unknown Kafka topic config (or RocketMQ
    broker config) name, listing a dozen names but not the argument the user meant."""
    with pytest.raises(ConfigError, match=rf"expected open\(\)'s own arguments .* or {store.format} config "
                                          rf"names, found '{typo}' \(did you mean '{meant}'\?\)"):
        segstore.open(store.path, **{typo: "r"})


@pytest.mark.parametrize(("indexes", "said"), [
    (5, "found int 5"), (b"time", "found bytes b'time'"), ({"time": 1}, "found dict"),
    ([5], r"expected indexes of layout names \(str\), found int 5")])
def test_indexes_of_the_wrong_kind_are_a_config_error(store, indexes, said):
    """``segstore.open(path, indexes=5)`` raised a bare ``TypeError`` ('int' object is not iterable)."""
    with pytest.raises(ConfigError, match=said):
        segstore.open(store.path, indexes=indexes)
    with segstore.open(store.path, indexes="time,offset") as again:      # a str is the CLI's list
        assert again.indexes is not None and list(again.indexes.layouts) == ["time", "offset"]


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_open_takes_a_bytes_path(tmp_path, fmt):
    # before, on Kafka: TypeError "cannot use a string pattern on a bytes-like object" from the
    # segment-name patterns
    config = SMALL_ROCKETMQ if fmt == "rocketmq" else {}
    with segstore.open(tmp_path / "s", format=fmt, mode="a", **config) as store:
        store.append(ONE[fmt])
    with segstore.open(os.fsencode(tmp_path / "s")) as store:
        assert store.path == str(tmp_path / "s")
        assert [r.offset for r in store.read("orders", 0)] == [0]


def test_a_closed_store_refuses_a_with_block(store):
    # before: ``with`` a closed store entered, and the first call inside raised instead
    store.close()
    with pytest.raises(StoreClosedError, match="store is closed"), store:
        pass


@pytest.mark.parametrize(("options", "said"), [
    ({"offset": "1"}, "expected an offset as an integer, found str '1'"),
    ({"partition": "0"}, "expected a partition as an integer, found str '0'"),
])
def test_scan_arrow_arguments_of_the_wrong_kind_are_config_errors(store, options, said):
    # before: TypeError from a comparison in the offset lookup; a str partition: no such partition
    with pytest.raises(ConfigError, match=re.escape(f"{store.path}: {said}")):
        list(store.scan_arrow(**{"topic": "orders", "partition": 0, **options}))


@pytest.mark.parametrize("threads", [0, "2", 2.0])
def test_dump_text_refuses_a_thread_count_as_dump_json_does(store, threads):
    # before, on Kafka: dump_text took any threads value (it uses one) where dump_json refused it
    for dump in (store.dump_json, store.dump_text):
        with pytest.raises(ConfigError, match="expected threads of at least 1"):
            list(dump(threads=threads))


@pytest.mark.parametrize(("options", "said"), [
    ({"max_hits": "3"}, "expected max_hits as an integer of at least 0, found str '3'"),
    ({"max_hits": -1}, "expected max_hits as an integer of at least 0, found int -1"),
    ({"max_hits": 1.5}, "expected max_hits as an integer of at least 0, found float 1.5"),
    ({"partition": "0"}, "expected partition as an integer of at least 0, found str '0'"),
    ({"begin": "x"}, "expected a begin time in ms since the epoch, found str 'x'"),
    ({"end": "x"}, "expected an end time in ms since the epoch, found str 'x'"),
])
def test_find_options_of_the_wrong_kind_are_config_errors(store, options, said):
    # before: TypeError from a comparison or a slice, numpy's UFuncTypeError (Kafka's begin/end);
    # max_hits=-1 found nothing, partition="0" nothing
    with pytest.raises(ConfigError, match=re.escape(f"{store.path}: {said}")):
        store.find("orders", "k", **options)
    assert [r.offset for r in store.find("orders", "k", partition=0, begin=0, max_hits=1)] == [0]


@pytest.mark.parametrize("to", ["kafka", "rocketmq"])
@pytest.mark.parametrize("how", ["record", "to_message"])
def test_a_record_read_from_either_format_appends_to_either(tmp_path, store, to, how):
    # before: append(record) raised InvalidMessageError "found KafkaRecord" (Kafka) or "'list' object is not
    # callable" (RocketMQ); and RocketMQ refused a RocketMQ message's own to_message(), "expected one of key
    # or a KEYS header, found both": its key is the first KEYS token and its headers hold KEYS
    record = next(store.read("orders", 0))
    config = SMALL_ROCKETMQ if to == "rocketmq" else {}
    with segstore.open(tmp_path / "copy", format=to, mode="a", **config) as copy:
        done = copy.append(record if how == "record" else record.to_message())
        back = next(copy.read("orders", 0, offset=done.offset))
    assert (back.key, back.keys, back.value) == (b"k", ["k"], b"v")


def test_rocketmq_refuses_a_key_the_keys_header_does_not_start_with(tmp_path):
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **SMALL_ROCKETMQ) as store:
        message = segstore.Message(topic="orders", value=b"v", key=b"other", headers=[("KEYS", b"k1 k2")])
        with pytest.raises(InvalidMessageError, match=r"expected one of key or a KEYS header .*found key "
                                                      r"b'other' and KEYS b'k1 k2'"):
            store.append(message)
        assert store.topics() == []
        message.key = b"k1"     # the header's first key: nothing lost
        store.append(message)
        assert next(store.read("orders", 0)).keys == ["k1", "k2"]


@pytest.mark.parametrize("batch_rows", [0, "x", 2.0])
def test_scan_arrow_refuses_a_batch_size_below_one_or_not_a_number(store, batch_rows):
    # before: TypeError for "x" on both formats; RocketMQ took 0
    with pytest.raises(ConfigError, match="expected batch_rows of at least 1"):
        list(store.scan_arrow(batch_rows=batch_rows))


def test_rocketmq_read_refuses_a_tag_that_is_not_text(tmp_path):
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **SMALL_ROCKETMQ) as store:
        store.append(ONE["rocketmq"])
        # before: AttributeError "'int' object has no attribute 'encode'" (the tag's hash code)
        with pytest.raises(ConfigError, match="expected a tag as a string, found int 5"):
            list(store.read("orders", 0, tag=5))


@pytest.mark.parametrize(("columns", "names"), [("value", ["value"]), (["key", "key"], ["key"]),
                                                (["offset", "value", "offset"], ["offset", "value"])])
def test_scan_arrow_columns_one_name_alone_and_each_name_once(store, columns, names):
    # before: "value" was taken as its characters (expected columns among ..., found v, a, l, u, e) and
    # a name given twice gave a batch of two fields of that name (batch.column(name) refuses those)
    batch = next(store.scan_arrow(columns))
    assert batch.schema.names == names and batch.num_rows == 1


@pytest.mark.parametrize(("group", "offsets", "said"), [
    (None, {("orders", 0): 1}, "expected a group id as a non-empty str, found NoneType None"),
    ("g", {("orders", 0): 1.5}, "expected an integer offset for orders/0, found float 1.5"),
    ("g", {("orders", 0): "1"}, "expected an integer offset for orders/0, found str '1'"),
    ("g", {"orders": 1}, "expected offsets keyed by (topic, partition), found 'orders'"),
    ("g", [(("orders", 0), 1)], "expected offsets as a mapping of (topic, partition) to offset, found list"),
])
def test_commit_offsets_of_the_wrong_kind_is_a_config_error_and_commits_nothing(store, group, offsets, said):
    # before, on RocketMQ: group None committed a group named "None", offset 1.5 was written as 1.5 into
    # consumerOffset.json; a str offset raised TypeError, a bare topic key ValueError, a list AttributeError
    with pytest.raises(ConfigError, match=re.escape(f"{store.path}: {said}")):
        store.commit_offsets(group, offsets)
    assert store.consumer_groups().rows == []


@pytest.mark.parametrize(("call", "said"), [
    (lambda s: s.consumer_groups(5), "expected a group id as a str, found int 5"),
    (lambda s: s.consumer_groups(now_ms="x"), "expected now_ms as whole ms since the epoch, found str 'x'"),
    (lambda s: s.commit_offsets("g", {("orders", 0): 1}, now_ms="x"),
     "expected now_ms as whole ms since the epoch, found str 'x'"),
    (lambda s: s.delete_offsets(5), "expected a group id as a str, found int 5"),
    (lambda s: s.delete_offsets("g", 5), "expected a topic as a str, found int 5"),
    (lambda s: s.delete_offsets("g", now_ms=1.5),
     "expected now_ms as whole ms since the epoch, found float 1.5"),
    # before, on Kafka: "expected records that Kafka can encode, found: int too big to convert", no path
    (lambda s: s.commit_offsets("g", {("orders", 0): 1}, now_ms=1 << 63),
     f"expected now_ms within a 64-bit timestamp, found {1 << 63}"),
])
def test_group_calls_of_the_wrong_kind_are_config_errors(store, call, said):
    # before: consumer_groups(5) answered no rows (no group is the int 5), now_ms "x" raised TypeError deep
    # in the expiry, delete_offsets(5) AttributeError ('int' object has no attribute 'encode') on Kafka
    with pytest.raises(ConfigError, match=re.escape(f"{store.path}: {said}")):
        call(store)
    assert store.consumer_groups().rows == []


def test_offsets_retention_ms_of_the_wrong_kind_is_a_config_error(tmp_path):
    # before: ValueError (invalid literal for int() with base 10: 'x')
    with segstore.open(tmp_path / "s", format="kafka", mode="a") as s:
        s.append(ONE["kafka"])
        with pytest.raises(ConfigError, match="expected offsets_retention_ms as whole ms, found str 'x'"):
            s.consumer_groups(offsets_retention_ms="x")


@pytest.mark.parametrize("partition", [0.0, 1.0, "0", True])
def test_append_refuses_a_partition_that_is_no_integer_even_where_the_partition_exists(store, partition):
    # before, on Kafka: partition 0.0 (or True) found the existing orders-0 by equal keys and was
    # appended to, answering AppendResult(partition=0.0), while a new partition refused the same value;
    # RocketMQ refuses it everywhere
    message = {"topic": "orders", "partition": partition, "value": b"v"}
    with pytest.raises(InvalidMessageError, match="partition"):
        store.append(message)
    with pytest.raises(InvalidMessageError, match="partition"):
        store.append(segstore.Message(**message))
    _unchanged(store)


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_append_takes_a_numpy_integer_partition_new_or_existing(tmp_path, fmt):
    # a partition column of scan_arrow fed back; before, on Kafka: a new partition refused np.int64(1)
    # ("expected an integer partition") and an existing one answered AppendResult(partition=np.int64(0))
    np = pytest.importorskip("numpy")
    config = SMALL_ROCKETMQ if fmt == "rocketmq" else {}
    with segstore.open(tmp_path / "s", format=fmt, mode="a", **config) as s:
        for number in (np.int64(1), np.int32(1)):
            for message in ({"topic": "orders", "partition": number, "value": b"v"},
                            segstore.Message(topic="orders", partition=number, value=b"v")):
                result = s.append(message)
                assert type(result.partition) is int and result.partition == 1
        assert s.offset_range("orders", 1) == (0, 4)
        assert s.partitions("orders") == [1]


def test_tail_error_of_no_such_queue_or_a_closed_store_is_refused_on_both_formats(store):
    # Store.tail_error promises NotFoundError for no such partition / queue; before, RocketMQ (the base
    # class's default) answered None (no torn tail) for any queue, a closed store's too, as Kafka refused
    from segstore.errors import NotFoundError

    assert store.tail_error("orders", 0) is None
    for topic, partition in (("nope", 0), ("orders", 7)):
        with pytest.raises(NotFoundError):
            store.tail_error(topic, partition)
    with pytest.raises(ConfigError, match="expected a partition as an integer"):
        store.tail_error("orders", "0")
    store.close()
    with pytest.raises(StoreClosedError):
        store.tail_error("orders", 0)


def test_segment_infos_refuses_a_partition_that_is_no_integer(store):
    # before: NotFoundError "expected a partition orders-0, found none" for "0", as offset_range's ConfigError
    assert [info["start_offset"] for info in store.segment_infos("orders", 0)] == [0]
    with pytest.raises(ConfigError, match="expected a partition as an integer, found str '0'"):
        store.segment_infos("orders", "0")


@pytest.mark.parametrize("message", [None, 5, "orders", [("topic", "orders")]])
def test_what_is_not_a_message_is_named_alike_on_both_formats(store, message):
    # before, on RocketMQ: "found \"'int' object has no attribute 'keys'\"" (Python's words, not what was
    # expected); Kafka's Message.coerce names the kinds taken
    with pytest.raises(InvalidMessageError, match=r"expected a message as a dict or a segstore\.Message, "
                                                  rf"found {type(message).__name__}$"):
        store.append(message)
    _unchanged(store)


@pytest.mark.parametrize(("headers", "said"), [
    ({"a": "b"}, r"expected headers as a list of \(key, value\) pairs, found \"\{'a': 'b'\}\""),
    ("abc", r"expected headers as a list of \(key, value\) pairs, found \"'abc'\""),
    ([("a",)], r"expected header 0 as a \(key, value\) pair, found \"\('a',\)\""),
    ([("a", "b"), "cd"], r"expected header 1 as a \(key, value\) pair, found \"'cd'\""),
])
def test_headers_of_the_wrong_shape_are_named_alike_on_both_formats(store, headers, said):
    # before, on RocketMQ: "found 'not enough values to unpack (expected 2, got 1)'", and a header
    # "cd" unpacked into the name "c" and the value "d"
    with pytest.raises(InvalidMessageError, match=said):
        store.append({"topic": "orders", "value": b"v", "headers": headers})
    with pytest.raises(InvalidMessageError, match=said):
        store.append(segstore.Message(topic="orders", value=b"v", headers=headers))
    _unchanged(store)


@pytest.mark.parametrize(("timestamp", "said"), [
    (1.5, "expected timestamp as an integer, found float 1.5"),
    ("1", "expected timestamp as an integer, found str '1'"),
    (True, "expected timestamp as an integer, found bool True"),
    (2**64, r"expected timestamp in \[0, 9223372036854775807\].*found 18446744073709551616"),
])
def test_a_timestamp_that_is_no_int64_is_refused_naming_the_field_on_both_formats(store, timestamp, said):
    # before, on Kafka: "found: 'float' object cannot be interpreted as an integer" (the encoder's
    # words), "int too big to convert", and True stored as the time 1 ms; RocketMQ names the field
    for message in ({"topic": "orders", "value": b"v", "timestamp": timestamp},
                    segstore.Message(topic="orders", value=b"v", timestamp=timestamp)):
        with pytest.raises(InvalidMessageError, match=said):
            store.append(message)
    _unchanged(store)


def test_a_numpy_timestamp_is_stored_as_its_value(store):
    np = pytest.importorskip("numpy")
    store.append({"topic": "orders", "value": b"v", "timestamp": np.int64(1_700_000_000_123)})
    assert [r.timestamp for r in store.read("orders", 0, 1)] == [1_700_000_000_123]


_POSITION = "position as an integer (a byte position in the log), found"


@pytest.mark.parametrize(("options", "said"), [
    ({"start": "0"}, f"expected a start {_POSITION} str '0'"),
    ({"end": "9"}, f"expected an end {_POSITION} str '9'"),
    ({"start": 1.5}, f"expected a start {_POSITION} float 1.5"),
    ({"end": 100.5}, f"expected an end {_POSITION} float 100.5"),
    ({"start": True}, f"expected a start {_POSITION} bool True"),
])
def test_scan_arrow_byte_range_of_the_wrong_kind_is_a_config_error(store, options, said):
    # before: TypeError "'<' not supported between instances of 'int' and 'str'" from inside the walk,
    # "'float' object cannot be interpreted as an integer" for an end, and a start of 1.5 or True read
    # from byte 1 (the first message left out)
    with pytest.raises(ConfigError, match=re.escape(f"{store.path}: {said}")):
        list(store.scan_arrow(**options))


def test_scan_arrow_byte_range_takes_numpy_integers(store):
    np = pytest.importorskip("numpy")
    assert sum(b.num_rows for b in store.scan_arrow(start=np.int64(0), end=np.int64(1 << 20))) == 1


@pytest.mark.parametrize(("columns", "said"), [(5, "expected columns as a column name or names, found int 5"),
                                               (["key", 5], "found 5"), ([b"key"], "found b'key'")])
def test_scan_arrow_columns_that_are_no_names_are_a_config_error(store, columns, said):
    # before: TypeError "'int' object is not iterable" / from pyarrow's get_field_index
    with pytest.raises(ConfigError, match=re.escape(said)):
        list(store.scan_arrow(columns))


@pytest.mark.parametrize("decompress", ["no", "yes", 1, None])
@pytest.mark.parametrize("call", ["read", "scan_arrow", "dump_json", "dump_text", "dump"])
def test_decompress_that_is_no_bool_is_refused_on_both_formats(store, call, decompress):
    # before, on RocketMQ: taken for its truth, so decompress="no" inflated the bodies; Kafka refused it
    args = ("orders", 0) if call == "read" else ()
    with pytest.raises(ConfigError, match=re.escape(f"expected decompress as True or False, found "
                                                    f"{type(decompress).__name__} {decompress!r}")):
        list(getattr(store, call)(*args, decompress=decompress))


@pytest.mark.parametrize("topic", [None, 5, b"orders"])
def test_find_of_a_topic_that_is_no_str_is_a_config_error(store, topic):
    # before, on Kafka: find(None, "k") scanned every topic's partition 0 and read each hit from the last
    # topic's (orders' and other's hits as [('other', 0)] * 4); RocketMQ answered []
    other = dict(ONE[store.format], topic="other")
    store.append(other)
    with pytest.raises(ConfigError, match=re.escape(f"{store.path}: expected a topic as a str, found "
                                                    f"{type(topic).__name__} {topic!r}")):
        store.find(topic, "k")
    assert [r.topic for r in store.find("orders", "k")] == ["orders"]


@pytest.mark.parametrize("fmt", [["kafka"], {"kafka": 1}, 5])
def test_open_of_a_format_that_is_no_name_is_a_format_not_found_error(tmp_path, fmt):
    # before: TypeError "unhashable type: 'list'" from the plugin registry's dict; 5 was "unknown format 5"
    from segstore.errors import FormatNotFoundError

    said = rf"expected a format name as a str \([^)]*kafka[^)]*\), found {type(fmt).__name__} "
    said += re.escape(repr(fmt))
    with pytest.raises(FormatNotFoundError, match=said):
        segstore.open(tmp_path / "s", format=fmt, mode="a")
    assert not os.path.exists(tmp_path / "s")


@pytest.mark.parametrize(("fmt", "said"), [
    ("Kafka", "unknown format 'Kafka'; known formats: kafka, rocketmq (did you mean 'kafka'?)"),
    ("rocketMQ", "unknown format 'rocketMQ'; known formats: kafka, rocketmq (did you mean 'rocketmq'?)"),
    ("parquet", "unknown format 'parquet'; known formats: kafka, rocketmq (is segstore installed with `pip"),
])
def test_a_format_name_in_another_case_is_named_as_meant(tmp_path, fmt, said):
    # before: "unknown format 'Kafka'; ... (is segstore installed with `pip install -e .`?)" sent a user
    # who had written the name capitalised (Spark's .option("format", "Kafka")) to reinstall
    from segstore.errors import FormatNotFoundError

    with pytest.raises(FormatNotFoundError) as raised:
        segstore.open(tmp_path / "s", format=fmt, mode="a")
    assert str(raised.value).startswith(said)
    assert not os.path.exists(tmp_path / "s")


@pytest.mark.parametrize("what", ["other format", "message", None, "dict"])
def test_to_json_of_what_is_not_this_formats_record_is_a_config_error(tmp_path, store, what):
    # before: AttributeError "'RocketMQMessage' object has no attribute 'batch'" (or 'queue_id', 'topic')
    other = "rocketmq" if store.format == "kafka" else "kafka"
    with segstore.open(tmp_path / "o", format=other, mode="a",
                       **(SMALL_ROCKETMQ if other == "rocketmq" else {})) as o:
        o.append(ONE[other])
        record = {"other format": next(o.read("orders", 0), None), None: None, "dict": {"topic": "orders"},
                  "message": segstore.Message("orders", b"v")}[what]
        said = f"expected a {store.format} record (read from a {store.format} store), found "
        with pytest.raises(ConfigError, match=re.escape(said + type(record).__name__)):
            store.to_json(record)
        if what == "other format":      # to_common takes a record of any format
            assert store.to_common(record).value == b"v"
    assert store.to_json(next(store.read("orders", 0)))["topic"] == "orders"
    with pytest.raises(ConfigError, match="expected a record read from a store, found NoneType"):
        store.to_common(None)


@pytest.mark.parametrize(("options", "said"), [(5, "storage_options must be a mapping, found int"),
                                               ("notjson", "storage_options must be a JSON object"),
                                               ("[1]", "storage_options must be a JSON object")])
def test_storage_options_of_the_wrong_kind_are_refused_for_a_local_path_too(store, options, said):
    # before: taken without a word for a local path (only a URL parsed them)
    with pytest.raises(ConfigError, match=re.escape(said)):
        segstore.open(store.path, storage_options=options)
    with segstore.open(store.path, storage_options={"anon": True}) as s:     # unused here, not refused
        assert s.topics() == ["orders"]


def test_rocketmq_scan_arrow_refuses_an_offset_without_a_queue(tmp_path):
    # before: scan_arrow(offset=2) walked the whole commitlog and gave every message, the offset dropped
    # without a word (Kafka's starts each partition there; RocketMQ's queue offsets need a queue)
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **SMALL_ROCKETMQ) as s:
        s.append_batch([ONE["rocketmq"]] * 3)
        with pytest.raises(ConfigError, match=re.escape(f"{s.path}: expected a queue (topic and partition) "
                                                        "for offset 2, found none")):
            list(s.scan_arrow(offset=2))
        assert sum(b.num_rows for b in s.scan_arrow(topic="orders", partition=0, offset=2)) == 1
        assert sum(b.num_rows for b in s.scan_arrow(offset=0)) == 3


def test_a_kafka_key_that_is_not_utf8_is_found_by_its_keys_text(tmp_path):
    """A Kafka record's ``keys`` keeps a key that is not UTF-8 as surrogateescape text (records.py);
    ``find`` with that text (and ``query --key`` of those bytes on the command line, which Python
    decodes the same way) raised UnicodeEncodeError instead of finding the record."""
    from segstore.cli import main
    path = str(tmp_path / "k")
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "t", "partition": 0, "key": b"\xffab", "value": b"v"},
                            {"topic": "t", "partition": 0, "key": b"other", "value": b"w"}])
    with segstore.open(path, format="kafka") as store:
        first = next(iter(store.scan()))
        assert first.keys == ["\udcffab"]
        assert [r.value for r in store.find("t", first.keys[0])] == [b"v"]
    assert main(["query", path, "--key", b"\xffab".decode("utf-8", "surrogateescape"), "--json"]) == 0


@pytest.mark.parametrize("policy", ["compact", "delete,compact"])
@pytest.mark.parametrize("how", ["append", "append_batch", "message", "append_arrow", "transaction",
                                 "append_records"])
def test_a_compacted_kafka_topic_refuses_a_record_without_a_key_and_writes_nothing(tmp_path, policy, how):
    # Kafka 3.8 LogValidator.validateKey: with cleanup.policy holding compact (LogConfig.compact) a record
    # without a key fails the whole batch, InvalidRecordException "Compacted topic cannot accept message
    # without key"; an empty key is a key (Record.hasKey).  Before: every append path wrote it, and
    # Partition.append_encoded (append_records, write --spec) after the others were fixed.
    pa = pytest.importorskip("pyarrow")
    keyless = {"topic": "c", "value": b"v"}
    calls = {
        "append": lambda s: s.append(keyless),
        "append_batch": lambda s: s.append_batch([{**keyless, "key": b"k"}, keyless]),
        "message": lambda s: s.append(segstore.Message(topic="c", value=b"v")),
        "append_arrow": lambda s: s.append_arrow(pa.table({"topic": ["c", "c"], "key": [b"k", None],
                                                           "value": [b"v", b"v"]})),
        "transaction": lambda s: s.transaction(7).append_batch([{**keyless, "key": b"k"}, keyless]),
        "append_records": lambda s: s.partition_of("c", 0).append_records([(b"k", b"v", 1), (None, b"v", 1)]),
    }
    with segstore.open(tmp_path / "s", format="kafka", mode="a", **{"cleanup.policy": policy}) as s:
        s.append({"topic": "c", "value": b"v", "key": b""})
        with pytest.raises(InvalidMessageError, match="Compacted topic cannot accept message without key: "
                                                      "expected a key on every record"):
            calls[how](s)
        assert s.offset_range("c", 0) == (0, 1)


def test_write_spec_refuses_a_record_without_a_key_on_a_compacted_topic(tmp_path, capsys):
    # Kafka 3.8 LogValidator.validateRecord -> validateKey, as above: write --spec (Partition.append_encoded)
    # checked the records' times, not their keys, and wrote the keyless record (exit 0)
    import json

    from segstore.cli import main

    spec = tmp_path / "spec.json"
    records = [{"key": "a", "value": "1", "timestamp": 1}, {"key": None, "value": "2", "timestamp": 2}]
    spec.write_text(json.dumps({"config": {"cleanup.policy": "compact"}, "batches": [{"records": records}]}))
    out = tmp_path / "out" / "t-0"
    assert main(["write", str(out), "--format", "kafka", "--spec", str(spec)]) == 1
    assert "Compacted topic cannot accept message without key: expected a key on every record " \
           "(cleanup.policy=compact), found none on the record at offset 1" in capsys.readouterr().err
    assert not out.exists()
    records[1]["key"] = ""      # an empty key is a key
    spec.write_text(json.dumps({"config": {"cleanup.policy": "compact"}, "batches": [{"records": records}]}))
    assert main(["write", str(out), "--format", "kafka", "--spec", str(spec)]) == 0


@pytest.mark.parametrize("timestamp", [-2, -5, -(2**63)])
def test_a_timestamp_below_minus_one_is_refused_not_stamped_now_on_both_formats(store, timestamp):
    # Kafka 3.8 ProducerRecord's constructor: "Timestamp should always be non-negative or null" (-1 and None
    # are the append's time here, as a producer's null).  Before: any negative time was silently stamped
    # with the append's clock on both formats (Kafka's append_arrow and transactions too).
    said = rf"expected timestamps? in \[0, 9223372036854775807\] ms since the epoch .*found {timestamp}"
    calls = [lambda: store.append({"topic": "orders", "value": b"v", "timestamp": timestamp}),
             lambda: store.append(segstore.Message(topic="orders", value=b"v", timestamp=timestamp)),
             lambda: store.append_batch([ONE[store.format], {"topic": "orders", "value": b"v",
                                                             "timestamp": timestamp}])]
    if store.format == "kafka":
        pa = pytest.importorskip("pyarrow")
        calls.append(lambda: store.append_arrow(pa.table({"topic": ["orders"], "value": [b"v"],
                                                          "timestamp": pa.array([timestamp], pa.int64())})))
        calls.append(lambda: store.transaction(3).append({"topic": "orders", "value": b"v",
                                                          "timestamp": timestamp}))
    for call in calls:
        with pytest.raises(InvalidMessageError, match=said):
            call()
    _unchanged(store)
    store.append({"topic": "orders", "value": b"v", "timestamp": -1})     # -1: the append's time
    assert list(store.read("orders", 0))[-1].timestamp > 0


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_a_bytes_like_key_or_header_value_is_taken_on_both_formats(store, kind):
    # Kafka took a bytearray or memoryview key and header value (as bytes), and so did RocketMQ for a
    # body; RocketMQ refused them for a key or a property: "expected a key as a string, found bytearray",
    # bytes being taken
    store.append({"topic": "orders", "value": b"v", "key": kind(b"k2"), "headers": [("h", kind(b"x"))]})
    got = list(store.read("orders", 0, 1))
    assert [(r.key, dict(r.headers)["h"]) for r in got] == [(b"k2", b"x")]


def test_a_partition_of_none_names_none_on_both_formats(store):
    # Kafka 3.8 ProducerRecord: a null partition is "non-negative or null", the partitioner's to choose (a
    # key's murmur2 partition, as a dict naming none); RocketMQ's appends took None as queue 0.  Before:
    # Kafka refused it, "expected an integer partition, found 'None'"
    for p in (1, 2):
        store.append({**ONE[store.format], ("partition" if store.format == "kafka" else "queue_id"): p})
    absent = store.append({"topic": "orders", "value": b"v", "key": b"k1"}).partition
    assert absent == (2 if store.format == "kafka" else 0)        # Utils.murmur2(b"k1") % 3 == 2
    message = segstore.Message(topic="orders", value=b"v", key=b"k1", partition=None)  # type: ignore[arg-type]
    got = [store.append({"topic": "orders", "value": b"v", "key": b"k1", "partition": None}).partition,
           store.append(message).partition, store.append_batch([message])[0].partition]
    assert got == [absent] * 3
    assert message.partition is None       # the caller's message is not routed for its next append


def test_a_kraft_nodes_appends_create_only_the_partitions_the_metadata_log_assigns_it(tmp_path):
    # Kafka 3.8 LogManager.isStrayKraftReplica: a KRaft broker renames -stray, on start, a partition
    # directory without a partition.metadata topic id, or whose partition the metadata image does not
    # assign to its node; a produce there is UNKNOWN_TOPIC_OR_PARTITION.  Before: an append created
    # orders-3 (and new topics) without a topic id, records a broker would never serve
    from kafka_messages import partition, topic
    from test_kafka_metadata import write_metadata_log

    from segstore.errors import InvalidTopicError

    logs, orders = tmp_path / "logs", "AAAAAAAAAAAAAAAAAAAAMw"
    write_metadata_log(logs, [topic("orders", orders), partition(orders, 0, [1]), partition(orders, 1, [2])])
    (logs / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=1\n")
    with segstore.open(logs, format="kafka", mode="a") as store:
        for p, t in ((1, "orders"), (3, "orders"), (0, "other")):
            with pytest.raises(InvalidTopicError, match=f"assigns to node 1, found {t}-{p} .*-stray"):
                store.append({"topic": t, "partition": p, "value": b"v"})
        assert not (logs / "orders-1").exists() and not (logs / "orders-3").exists()
        store.append({"topic": "orders", "partition": 0, "value": b"v"})
        assert store.info()["partitions"][-1]["stray"] is False
    assert (logs / "orders-0" / "partition.metadata").read_text() == f"version: 0\ntopic_id: {orders}"


def test_rocketmq_append_arrow_refuses_a_property_name_twice_as_its_append_does(tmp_path):
    # RocketMQ 4.9.7 Message.putProperty: the properties are a HashMap, one value a name; append() refuses
    # a name twice.  Before: append_arrow's columnar path wrote both pairs (a 100-byte message) and its
    # pure-Python reference the last one (96 bytes), for the same table
    pa = pytest.importorskip("pyarrow")
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **SMALL_ROCKETMQ) as store:
        store.append(ONE["rocketmq"])
        table = pa.Table.from_batches(list(store.scan_arrow()))
        table = pa.concat_tables([table, table])
        column = table.schema.get_field_index("properties")
        table = table.set_column(column, "properties", pa.array([[("KEYS", "k")], [("p", "x"), ("p", "y")]],
                                                                table.schema.field(column).type))
        with pytest.raises(InvalidMessageError, match=r"expected each property name once .* found 'p' twice "
                                                      r"in row 1"):
            store.append_arrow(table)
        _unchanged(store)


@pytest.mark.parametrize("lookup", [
    lambda s: s.find("ordres", "k"),
    lambda s: s.find("orders", "k", partition=7),
    lambda s: s.offset_for_time("ordres", 0, 0),
    lambda s: s.offsets_between("orders", 7),
    lambda s: s.offset_range("ordres", 0),
], ids=["find", "find-partition", "offset_for_time", "offsets_between", "offset_range"])
def test_every_lookup_naming_what_the_store_does_not_hold_is_not_found(store, lookup):
    # before: find of a misspelt topic, or of a partition the topic does not have, answered [] ("no hits")
    # where read, offset_range and the CLI's query --key (exit 1) name it.  RocketMQ 4.9.7
    # MQAdminImpl.queryMessage throws TOPIC_NOT_EXIST ("not matched route info") for a topic without queues
    from segstore.errors import NotFoundError

    with pytest.raises(NotFoundError, match=r"ordres|orders.7"):
        lookup(store)
    assert [r.offset for r in store.find("orders", "k")] == [0]


@pytest.mark.parametrize("index", ["key", "time", "offset", "queue"])
@pytest.mark.parametrize("lookup", [
    lambda i: i.find_key("ordres", 0, "k"),
    lambda i: i.offset_for_time("ordres", 0, 0),
    lambda i: i.read_at("orders", 7, 0),
], ids=["find_key", "offset_for_time", "read_at"])
def test_an_index_lookup_naming_what_the_store_does_not_hold_is_not_found_before_unsupported(
        tmp_path, index, lookup):
    # before: UnsupportedOperationError ("expected an index answering offset lookups among (key)") where
    # the store held no such topic or partition; the name is the user's first mistake
    from segstore.errors import NotFoundError

    for fmt in ("kafka", "rocketmq"):
        config = SMALL_ROCKETMQ if fmt == "rocketmq" else {}
        with segstore.open(tmp_path / fmt, format=fmt, mode="a", indexes=[index], **config) as s:
            s.append(ONE[fmt])
            with pytest.raises(NotFoundError, match=r"ordres|orders.7"):
                lookup(s.indexes)


@pytest.mark.parametrize("topic", [["orders"], 5, 10**5000, b"orders"],
                         ids=["list", "int", "5001-digits", "bytes"])
@pytest.mark.parametrize("call", [
    lambda s, t: list(s.read(t, 0)), lambda s, t: s.offset_range(t, 0), lambda s, t: s.partitions(t),
    lambda s, t: list(s.scan_arrow(["offset"], topic=t, partition=0)),
    lambda s, t: s.offset_for_time(t, 0, 0)])
def test_a_topic_of_the_wrong_kind_is_a_config_error(store, call, topic):
    # before (huntB3): TypeError "unhashable type: 'list'", AttributeError, or Python's ValueError from the
    # message's own str() of an int of 5,001 digits ("Exceeds the limit (4300 digits)...")
    with pytest.raises(ConfigError, match=r"expected a topic as a str, found "):
        call(store, topic)
    _unchanged(store)


def test_a_lookup_time_of_none_is_a_config_error(store):
    # before (huntB3): TypeError "'>=' not supported between instances of 'int' and 'NoneType'"
    with pytest.raises(ConfigError, match=r"expected a lookup time in ms since the epoch, found None"):
        store.offset_for_time("orders", 0, None)


@pytest.mark.parametrize("queue", [-5, 2**31 - 1, 2**40, 10**5000],
                         ids=["-5", "2^31-1", "2^40", "5001-digits"])
def test_a_rocketmq_commit_of_a_queue_id_no_topic_has_writes_nothing(tmp_path, queue):
    """``commit_offsets({("orders", -5): 0})`` wrote queue -5 into ``config/consumerOffset.json`` (2^40: a
    key the broker's ``ConcurrentMap<Integer, Long>`` cannot hold), every later ``consumers`` listed it,
    and 10**5000 failed the save half-way (huntB3)."""
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **SMALL_ROCKETMQ) as s:
        s.append(ONE["rocketmq"])
        s.commit_offsets("g", {("orders", 0): 1})
        before = (tmp_path / "s" / "config" / "consumerOffset.json").read_bytes()
        with pytest.raises(ConfigError, match=r"expected a queue id of orders in \[0, 2147483646\], found "):
            s.commit_offsets("g", {("orders", 0): 0, ("orders", queue): 0})
        assert (tmp_path / "s" / "config" / "consumerOffset.json").read_bytes() == before


@pytest.mark.parametrize("call", [
    lambda s: list(s.dump_json(topic=5)), lambda s: list(s.dump_text(topic=["a"])),
    lambda s: list(s.dump(partition="0")), lambda s: list(s.dump_text(partition=[]))])
def test_a_dump_selection_of_the_wrong_kind_is_a_config_error(store, call):
    # before (huntB3): AttributeError "'int' object has no attribute 'encode'" (RocketMQ), numpy's
    # "operands could not be broadcast together" for a list partition
    with pytest.raises(ConfigError, match=r"expected a (topic|partition) as"):
        call(store)


def test_a_rocketmq_dump_tag_of_the_wrong_kind_is_a_config_error(tmp_path):
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **SMALL_ROCKETMQ) as s:
        s.append(ONE["rocketmq"])
        for tag in (5, b"x"):     # before: AttributeError "'int' object has no attribute 'strip'", TypeError
            with pytest.raises(ConfigError, match=r"expected a tag as a str, found "):
                list(s.dump_json(tag=tag))


def test_columns_and_convert_topics_of_odd_values_are_config_errors(store, tmp_path):
    # before (huntB3): UnicodeEncodeError from pyarrow's Schema.get_field_index of a lone surrogate;
    # TypeError "'int' object is not iterable" from convert's list(topics)
    with pytest.raises(ConfigError, match=r"expected columns among .*, found \udcff"):
        list(store.scan_arrow(["\udcff"]))
    from segstore.convert import convert
    with pytest.raises(ConfigError, match=r"expected topics as names \(str\), found int -1"):
        convert(store.path, tmp_path / "out", to="kafka" if store.format == "rocketmq" else "rocketmq",
                topics=-1)


@pytest.mark.parametrize("now", ["0", float("nan"), -1])
def test_a_rocketmq_retention_clock_that_is_no_time_is_a_config_error(tmp_path, now):
    # before (huntB3): TypeError "'>=' not supported between instances of 'str' and 'int'"
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **SMALL_ROCKETMQ) as s:
        s.append(ONE["rocketmq"])
        with pytest.raises(ConfigError, match=r"expected a now time"):
            s.retention(dry_run=True, now_ms=now)


def test_a_kafka_value_of_a_lone_surrogate_is_named_briefly(tmp_path):
    # before (huntB3): "found: 'utf-8' codec can't encode character '\ud800' in position 1: surrogates not
    # allowed", Python's words
    with segstore.open(tmp_path / "orders-0", format="kafka", mode="a") as s:
        said = (r"^expected text UTF-8 can encode, found 'a\\ud800b+'\.\.\. \(69882 more characters\) "
                r"\(a lone surrogate at character 1\)$")
        with pytest.raises(InvalidMessageError, match=said):
            s.append({"topic": "orders", "partition": 0, "value": "a\ud800" + "b" * 70_000})
        assert s.offset_range("orders", 0) == (0, 0)


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("mode", ["r", "a"])
def test_open_of_a_file_of_a_store_names_the_store_alike_in_every_way(tmp_path, fmt, given, mode):
    """``segstore.open`` of a segment or commitlog file (a first try at opening "this log"): detection said
    "pass --format" (a command-line hint, and no format helps), Kafka's open "found nothing", RocketMQ's
    "a file in the way" of ``commitlog/``, mode "a" on Kafka the same.  Each now says what it is, the file
    of which store, as the command line's ``expected a store directory, found a file``; nothing written."""
    store_dir = tmp_path / "s"
    with segstore.open(store_dir, format=fmt, mode="a", **(SMALL_ROCKETMQ if fmt == "rocketmq" else {})) as s:
        s.append(ONE[fmt])
    if fmt == "kafka":
        store_dir = store_dir / "orders-0"
        one = store_dir / f"{0:020d}.log"
    else:
        one = store_dir / "commitlog" / f"{0:020d}"
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(WrongFormatError) as raised:
        segstore.open(one, format=fmt if given else None, mode=mode)
    assert str(raised.value) == (f"{one}: not a store of any known format (kafka, rocketmq): expected a "
                                 f"store directory, found a file of the {fmt} store {store_dir}; pass that "
                                 "store's directory (segstore dump FILE reads a single file)")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
