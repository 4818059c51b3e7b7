"""segstore.jsontext: every JSON text is a value or a typed error, whatever its shape or depth."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segstore import jsontext
from segstore.errors import ConfigError, CorruptDataError


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,          # RecursionError inside json
    "1" * 5000,                              # int longer than Python's 4,300-digit limit
    "{\"a\": ",                              # cut short
    b"\xff\xfe\x00",                         # not UTF-8/16/32
    "",
])
def test_bad_json_is_the_callers_typed_error(text) -> None:
    with pytest.raises(CorruptDataError, match=r"^cfg\.json: expected a JSON object, found ") as info:
        jsontext.loads(text, "expected a JSON object", path="cfg.json", error=CorruptDataError)
    assert len(str(info.value)) < 300          # the echoed text is cut


@pytest.mark.parametrize("text", ["[]", "1", '"s"', "null", "1e999"])
def test_loads_object_refuses_other_shapes(text) -> None:
    with pytest.raises(ConfigError, match="option x must be a JSON object"):
        jsontext.loads_object(text, "option x must be a JSON object")


@given(st.text(max_size=40))
def test_any_text_is_a_value_or_a_config_error(text) -> None:
    try:
        expected = json.loads(text)
    except (ValueError, RecursionError):
        with pytest.raises(ConfigError):
            jsontext.loads(text, "expected JSON")
    else:
        got = jsontext.loads(text, "expected JSON")
        assert got == expected or (got != got and expected != expected)   # NaN equals nothing
