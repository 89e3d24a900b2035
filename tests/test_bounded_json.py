"""`vrom.bounded_json`: JSON from a peer is read within a size and a nesting bound, without
recursing, and refused with a `ValidationError` (issue 26, item 9)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vrom.bounded_json import loads_bounded, nesting_depth, top_level
from vrom.errors import ValidationError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=20,
)


def test_issue26_item9_deep_or_large_json_is_refused_without_recursing() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValidationError, match="nested 100,000 levels deep") as refused:
        loads_bounded(deep, max_depth=64, max_bytes=1_000_000, what="the registry")
    assert refused.value.code == "json_too_deep" and "the registry" in str(refused.value)
    with pytest.raises(ValidationError, match="more than the 10 allowed") as large:
        loads_bounded(b'"' + b"x" * 10 + b'"', max_depth=64, max_bytes=10, what="the manifest")
    assert large.value.code == "json_too_large"
    with pytest.raises(ValidationError, match="not valid JSON") as bad:
        loads_bounded("1" * 5_000, max_depth=64, max_bytes=10_000, what="x")  # past int digits
    assert bad.value.code == "invalid_json"


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": '[[[[{{{{ \\" ]]', "b": [["x"]]})
    assert nesting_depth(text) == 3
    assert loads_bounded(text, max_depth=3, max_bytes=1_000, what="x")["b"] == [["x"]]


@given(JSON)
def test_within_bounds_it_reads_what_json_reads(value: object) -> None:
    text = json.dumps(value)
    depth = nesting_depth(text)
    assert loads_bounded(text, max_depth=depth, max_bytes=len(text.encode()), what="x") == value
    if depth:
        with pytest.raises(ValidationError):
            loads_bounded(text, max_depth=depth - 1, max_bytes=10**9, what="x")


def test_top_level_reads_the_outermost_object_whatever_is_nested_in_it() -> None:
    line = '{"jsonrpc":"2.0","params":{"x":' + "[" * 50_000 + "]" * 50_000 + '},"id":7}'
    assert top_level(line, max_bytes=10**6, what="the message") == {
        "jsonrpc": "2.0",
        "params": None,
        "id": 7,
    }
    assert top_level('[1, {"a": [2]}, "[3"]', max_bytes=100, what="x") == [1, None, "[3"]
