"""Frontmatter: bounded YAML, and every value mapped to one JSON holds and gives back unchanged.

The hostile inputs of issue 15 (and property tests over any YAML) are in
``tests/adversarial/test_hostile_frontmatter.py``; these pin the mapping and the limits.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from vrom.ingest.frontmatter import (
    MAX_ALIAS_VALUES,
    MAX_DEPTH,
    YamlRefusedError,
    json_ready,
    load_yaml,
    split_frontmatter,
)


def frontmatter_of(yaml_text: str) -> tuple[dict[str, Any], list[str]]:
    frontmatter, _, warnings = split_frontmatter(f"---\n{yaml_text}\n---\nbody\n")
    assert json.loads(json.dumps(frontmatter, allow_nan=False)) == frontmatter
    return frontmatter, warnings


def test_non_finite_numbers_become_strings() -> None:
    frontmatter, warnings = frontmatter_of("x: .inf\ny: -.Inf\nz: .NaN\nw: 1.5")
    assert frontmatter == {"x": "inf", "y": "-inf", "z": "nan", "w": 1.5}
    assert warnings == []


def test_values_stored_as_another_kind_are_named_in_one_warning_when_indexing() -> None:
    text = f"---\nx: .inf\nm: {{deep: [1, -.inf]}}\nn: {2**64}\nday: 2026-01-02\n---\nbody\n"
    frontmatter, _, warnings = split_frontmatter(text, note_changes=True)
    assert frontmatter == {
        "x": "inf",
        "m": {"deep": [1, "-inf"]},
        "n": str(2**64),
        "day": "2026-01-02",
    }
    assert warnings == [
        'frontmatter values stored as JSON holds them: x (.inf, kept as the string "inf"),'
        ' m.deep[1] (-.inf, kept as the string "-inf"),'
        " n (a 20-digit integer, kept as its decimal string)"
    ]  # a date is stored as ISO 8601 text without a warning: it means what it meant
    many = "".join(f"k{i}: .nan\n" for i in range(5))
    _, _, warnings = split_frontmatter(f"---\n{many}---\n", note_changes=True)
    assert warnings[0].endswith('k2 (.nan, kept as the string "nan") and 2 more')


def test_integers_beyond_64_bits_become_decimal_strings() -> None:
    frontmatter, _ = frontmatter_of(
        f"small: {2**63 - 1}\nlow: {-(2**63)}\nbig: {2**63}\nhex: 0x{'f' * 40}"
    )
    assert frontmatter == {
        "small": 2**63 - 1,
        "low": -(2**63),
        "big": str(2**63),
        "hex": str(int("f" * 40, 16)),
    }


def test_dates_binary_sets_and_ordered_maps() -> None:
    frontmatter, _ = frontmatter_of(
        "day: 2026-01-02\n"
        "at: 2026-01-02 10:30:00+02:00\n"
        "blob: !!binary aGVsbG8=\n"
        "kinds: !!set {b, a}\n"
        "steps: !!omap [one: 1, two: 2]"
    )
    assert frontmatter == {
        "day": "2026-01-02",
        "at": "2026-01-02T10:30:00+02:00",
        "blob": "aGVsbG8=",
        "kinds": ["a", "b"],
        "steps": [["one", 1], ["two", 2]],
    }


def test_keys_that_are_not_strings_are_written_as_json() -> None:
    frontmatter, _ = frontmatter_of("null: a\nfalse: b\n2: c\n2026-01-02: d\n.inf: e\n1.5: f")
    assert frontmatter == {
        "null": "a",
        "false": "b",
        "2": "c",
        "2026-01-02": "d",
        "inf": "e",
        "1.5": "f",
    }


def test_json_ready_replaces_lone_surrogates() -> None:
    assert json_ready({"t\udce9": ["caf\udce9"]}) == {"t\ufffd": ["caf\ufffd"]}


def test_aliases_and_merge_keys_within_the_budget_are_expanded() -> None:
    frontmatter, warnings = frontmatter_of(
        "base: &base {owner: ana, level: 2}\ncopy: *base\nmerged: {<<: *base, level: 3}"
    )
    assert warnings == []
    assert frontmatter["copy"] == {"owner": "ana", "level": 2}
    assert frontmatter["merged"] == {"owner": "ana", "level": 3}


def alias_levels(levels: int, width: int = 9) -> str:
    """Return YAML where each level is a list of ``width`` aliases of the level before."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines)


def test_aliases_may_add_up_to_the_budget_and_no_more() -> None:
    assert 9**5 < MAX_ALIAS_VALUES < 9**6
    frontmatter, warnings = frontmatter_of(alias_levels(5))
    assert warnings == [] and len(frontmatter["l4"]) == 9
    frontmatter, warnings = frontmatter_of(alias_levels(6))
    assert frontmatter == {}
    assert warnings == [
        f"frontmatter refused (its aliases expand it by over {MAX_ALIAS_VALUES:,} values):"
        " indexed as plain text"
    ]


def test_yaml_that_contains_itself_is_refused() -> None:
    for text in ("a: &a [*a]", "a: &a {b: *a}", "a: &a {<<: *a}"):
        with pytest.raises(YamlRefusedError, match="contains itself"):
            load_yaml(text)


def test_nesting_is_bounded_with_or_without_aliases() -> None:
    assert load_yaml("x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)) is not None
    with pytest.raises(YamlRefusedError, match="nests deeper"):
        load_yaml("x: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH)
    chain = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, MAX_DEPTH + 5)]
    with pytest.raises(YamlRefusedError, match="nests deeper"):
        load_yaml("\n".join(chain))


def test_refused_frontmatter_keeps_the_whole_text_as_the_body() -> None:
    text = "---\na: &a [*a]\n---\n# Title\n"
    frontmatter, body_start, warnings = split_frontmatter(text)
    assert (frontmatter, body_start) == ({}, 0)
    assert warnings == [
        "frontmatter refused (it contains itself through an alias): indexed as plain text"
    ]
