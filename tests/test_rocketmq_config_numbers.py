"""Numbers in ``config/*.json`` as fastjson 1.2.69 (RocketMQ 4.9.7's) reads them, value by value.

Every expectation below is what fastjson's own classes answered (the storage oracle's build of
fastjson 1.2.69 and rocketmq-all-4.9.7; a program decoding each value in place):

- ``int``: ``{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":<V>}}}`` through
  ``RemotingSerializable.fromJson(.., TopicConfigSerializeWrapper.class)``, as
  ``TopicConfigManager.decode`` does (``writeQueueNums``, ``perm``, ``topicSysFlag`` answered the same);
  ``NULL``: the field keeps ``TopicConfig``'s default (fastjson read null): ``readQueueNums`` and
  ``writeQueueNums`` 16 (``defaultReadQueueNums``/``defaultWriteQueueNums``), ``perm`` 6
  (``PERM_READ | PERM_WRITE``), ``topicSysFlag`` 0.
- ``long``: ``{"offsetTable":{"a@b":{0:<V>}}}`` into ``ConcurrentMap<String, ConcurrentMap<Integer, Long>>``
  (``ConsumerOffsetManager``); ``DelayOffsetSerializeWrapper`` (``{"offsetTable":{1:<V>}}``) and
  ``DataVersion.counter`` answered the same, but for ``null`` (the counter: a NullPointerException
  in ``assignNewOne``; the broker's load fails either way).
- ``key``: a quoted ``V`` as the delay level key of ``DelayOffsetSerializeWrapper`` (an ``Integer``).

The rules (``TypeUtils.castToInt``/``castToLong``, ``TypeUtils.intValue``/``longValue``): decimals
are ``BigDecimal``s narrowed as Java narrows them (truncated, then the low 32/64 bits), ``true``/
``false`` are 1/0 for an int only, strings lose their commas (and, for an int, a trailing ``.0``),
then ``Integer.parseInt``/``Long.parseLong`` (no blanks).  Before, segstore stripped blanks,
refused ``true``, ``"1,000"``, ``"8.0"``, ``null`` and any decimal past the type.
Where segstore still refuses what fastjson takes (no JSON, or an ISO-8601 date as a long): see
``segstore_rocketmq.topicconfig.java_cast``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from segstore_rocketmq.topicconfig import (
    RawNumber,
    java_cast,
    read_consumer_offsets,
    read_delay_offset_file,
    read_subscription_group_file,
    read_topics,
)

from segstore.errors import CorruptDataError

ERR, NULL, NA = "ERR", "NULL", "-"
#: rocketmq-all-4.9.7 ``TopicConfig``'s field initialisers, which a field read as null keeps
TOPIC_CONFIG_DEFAULTS = {"readQueueNums": 16, "writeQueueNums": 16, "perm": 6, "topicSysFlag": 0}

TABLE = [
    # (V as written in the file, int field, long map value, int map key when V is a string)
    ('8', 8, 8, NA), ('"8"', 8, 8, 8), ('8.0', 8, 8, NA), ('8.9', 8, 8, NA), ('-8.9', -8, -8, NA),
    ('"8.9"', ERR, ERR, ERR), ('"0x8"', ERR, ERR, ERR), ('1e1', 10, 10, NA), ('1E1', 10, 10, NA),
    ('"1e1"', ERR, ERR, ERR), ('1.5e1', 15, 15, NA), ('true', 1, ERR, NA), ('false', 0, ERR, NA),
    ('"true"', ERR, ERR, ERR), ('null', NULL, ERR, NA), ('"null"', NULL, ERR, ERR), ('""', NULL, ERR, ERR),
    ('"NULL"', NULL, ERR, ERR), ('"Null"', ERR, ERR, ERR),
    ('" 8"', ERR, ERR, ERR), ('"8 "', ERR, ERR, ERR), ('"+8"', 8, 8, 8), ('-0', 0, 0, NA),
    ('"-8"', -8, -8, -8), ('2147483647', 2147483647, 2147483647, NA), ('2147483648', ERR, 2147483648, NA),
    ('-2147483648', -2147483648, -2147483648, NA), ('-2147483649', ERR, -2147483649, NA),
    ('4294967304', ERR, 4294967304, NA), ('9223372036854775807', ERR, 9223372036854775807, NA),
    ('9223372036854775808', ERR, ERR, NA), ('99999999999999999999', ERR, ERR, NA),
    ('2147483647.9', 2147483647, 2147483647, NA), ('2147483648.5', -2147483648, 2147483648, NA),
    ('1e10', 1410065408, 10000000000, NA), ('1e999', ERR, ERR, NA), ('[8]', ERR, ERR, NA),
    ('{}', ERR, ERR, NA), ('"abc"', ERR, ERR, ERR), ('"08"', 8, 8, 8), ('"1,000"', 1000, 1000, 1000),
    ('"8L"', ERR, ERR, ERR), ('"\uff18"', 8, 8, 8), ('"\u0668"', 8, 8, 8), ('"8.0"', 8, ERR, 8),
    ('"8."', 8, ERR, 8), ('"8.00"', 8, ERR, 8), ('"8.10"', ERR, ERR, ERR), ('"1,0,0"', 100, 100, 100),
    ('"-8.0"', -8, ERR, -8), ('"\uff18.0"', 8, ERR, 8), ('1e200', ERR, ERR, NA), ('1e-200', ERR, ERR, NA),
    ('4294967304.0', 8, 4294967304, NA), ('-1e10', -1410065408, -10000000000, NA),
    ('"1,000.0"', 1000, ERR, 1000), ('"2147483648"', ERR, 2147483648, ERR),
    ('"-2147483649"', ERR, -2147483649, ERR), ('",8"', 8, 8, 8), ('","', ERR, ERR, ERR),
    ('1e19', -1981284352, -8446744073709551616, NA), ('1e20', 1661992960, 7766279631452241920, NA),
    ('-1e19', 1981284352, 8446744073709551616, NA), ('9223372036854775808.0', 0, -9223372036854775808, NA),
    ('18446744073709551617', ERR, ERR, NA), ('-9223372036854775808', ERR, -9223372036854775808, NA),
    ('-9223372036854775809', ERR, ERR, NA), ('-99999999999999999999', ERR, ERR, NA),
    ('123456789012345678901234567890', ERR, ERR, NA), ('0.9', 0, 0, NA), ('-0.9', 0, 0, NA),
    ('1e2', 100, 100, NA), ('1.99e2', 199, 199, NA), ('"\\u0038"', 8, 8, 8),
]


def _read(tmp_path, text, reader):
    path = tmp_path / "f.json"
    path.write_text(text, encoding="utf-8")
    try:
        return reader(str(path))
    except CorruptDataError as err:
        assert err.path == str(path) and "expected" in str(err)
        return ERR


@pytest.mark.parametrize(("value", "as_int", "as_long", "as_key"), TABLE, ids=[row[0] for row in TABLE])
def test_a_number_is_read_as_fastjson_reads_it(tmp_path, value, as_int, as_long, as_key):
    for field in ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag"):
        text = '{"topicConfigTable":{"T":{"topicName":"T","FIELD":<V>}}}'.replace("FIELD", field)
        got = _read(tmp_path, text.replace("<V>", value),
                    lambda p, f=field: read_topics(p)[1]["T"][f])
        assert got == (TOPIC_CONFIG_DEFAULTS[field] if as_int == NULL else as_int), field
    assert _read(tmp_path, '{"offsetTable":{"a@b":{0:<V>}}}'.replace("<V>", value),
                 lambda p: read_consumer_offsets(p)[1]["a@b"][0]) == as_long
    assert _read(tmp_path, '{"offsetTable":{1:<V>}}'.replace("<V>", value),
                 lambda p: read_delay_offset_file(p)[1]) == as_long
    counter = _read(tmp_path, '{"dataVersion":{"counter":<V>},"topicConfigTable":{}}'.replace("<V>", value),
                    lambda p: read_topics(p)[2])
    assert counter == (ERR if as_long == NULL else as_long)
    if as_key != NA:
        assert _read(tmp_path, '{"offsetTable":{<V>:5}}'.replace("<V>", value),
                     lambda p: next(iter(read_delay_offset_file(p)))) == as_key


def test_a_null_int_field_of_a_group_keeps_its_default(tmp_path):
    """``SubscriptionGroupConfig.retryQueueNums`` (a primitive int, default 1) read as null by
    ``castToInt`` (``""``) keeps its default, as an absent one does."""
    got = _read(tmp_path, '{"subscriptionGroupTable":{"g":{"retryQueueNums":"","retryMaxTimes":"1,6"}}}',
                read_subscription_group_file)
    assert got["g"]["retryQueueNums"] == 1 and got["g"]["retryMaxTimes"] == 16


@given(st.decimals(allow_nan=False, allow_infinity=False).filter(lambda d: -100 < d.as_tuple().exponent < 60),
       st.sampled_from([32, 64]))
def test_a_decimal_is_narrowed_as_bigdecimal_narrows_it(number, bits):
    """``BigDecimal.intValue``/``longValue`` of a scale in [-100, 100]: the integer part (truncated
    toward zero), its low bits as a two's-complement number."""
    text = str(number)     # a JSON number literal: digits, a point or an exponent (E+n)
    if "." not in text and "E" not in text:
        text += ".0"
    whole = int(number)
    low = whole & ((1 << bits) - 1)
    expected = low - (1 << bits) if low >> (bits - 1) else low
    assert java_cast(RawNumber(text), "x", "p", long=bits == 64) == expected, text
