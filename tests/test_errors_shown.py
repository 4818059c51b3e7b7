"""``segstore.errors.shown`` and ``digits``: a value of the wrong kind named as a JSON line shows it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from segstore.errors import digits, shown


@given(st.integers(min_value=-(10 ** 2000), max_value=10 ** 2000))
def test_digits_counts_what_str_writes(value):
    assert digits(value) == len(str(abs(value)))


def test_digits_counts_an_int_past_what_str_writes():
    assert digits(10 ** 5000) == 5001
    assert digits(-(10 ** 5000 - 1)) == 5000


def test_each_kind_is_named():
    assert [shown(v) for v in (65536, -1.5, None, False, "65536", [1], {"a": 1})] == [
        "the number 65536", "the number -1.5", "null", "false", "'65536'", "an array [1]",
        "an object {'a': 1}"]
    assert shown(10 ** 5000) == "a number of 5001 digits"     # str() would raise
