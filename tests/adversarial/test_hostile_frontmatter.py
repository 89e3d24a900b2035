"""Hostile frontmatter never stops the index: one note's bad YAML costs, at most, its frontmatter.

Issue 15, items 1 and 3, as named regression tests, and hypothesis over frontmatter values and
YAML structures: any frontmatter gives a JSON round-trippable mapping or a one-line warning,
never an exception, and never a lost note.
"""

from __future__ import annotations

import json
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hostile import (
    GOOD_NOTES,
    HOSTILE_NOTES,
    UNBUILDABLE_FRONTMATTER,
    UNBUILDABLE_NOTES,
    alias_bomb,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrom import Vault
from vrom.errors import VromError
from vrom.ingest.frontmatter import split_frontmatter
from vrom.ingest.okf import check_note
from vrom.ingest.okf_enrich import suggest_enrichment
from vrom.ingest.parse import parse_note

WriteVault = Callable[[dict[str, str | bytes]], Path]
OpenVault = Callable[[Path], Vault]


def assert_one_line(warnings: Any) -> None:
    for warning in warnings:
        reason = warning if isinstance(warning, str) else warning.reason
        assert reason and "\n" not in reason and "\r" not in reason, warning


def assert_good_notes_indexed(vault: Vault) -> None:
    for path in GOOD_NOTES:
        assert vault.get_note(path).chunk_count >= 1
    hits = vault.search("orchard", k=50)
    assert {hit.path for hit in hits} >= set(GOOD_NOTES)


# -- named regressions ------------------------------------------------------------------------


def test_issue15_item1_inf_and_nan_frontmatter_do_not_stop_the_index(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    vault = open_vault(write_vault({**GOOD_NOTES, **HOSTILE_NOTES}))
    summary = vault.index()
    assert summary.notes == len(GOOD_NOTES) + len(HOSTILE_NOTES), "every note is indexed"
    assert summary.skipped == 0
    assert_good_notes_indexed(vault)
    assert vault.get_note("inf.md").frontmatter == {"x": "inf", "y": "-inf"}
    assert vault.get_note("nan.md").frontmatter == {"x": "nan"}
    assert vault.get_note("huge-int.md").frontmatter["n"] == "9" * 4000
    assert vault.get_note("huge-int.md").human_relevance_score == 1.0
    assert_one_line(summary.warnings)
    warned = {warning.path for warning in summary.warnings}
    for path in ("bomb.md", "self.md", "deep.md"):
        assert path in warned
        assert vault.get_note(path).frontmatter == {}
    # issue 26, item 4: a value YAML cannot build is kept as its text, the rest as YAML says
    assert "too-many-digits.md" in warned and "odd-types.md" in warned and "tag.md" in warned
    assert vault.get_note("too-many-digits.md").frontmatter == {"n": "9" * 5000}
    assert vault.get_note("odd-types.md").frontmatter == {
        "b": "aGk=",
        "s": ["a"],
        "d": "2026-13-45",
    }
    assert vault.get_note("tag.md").frontmatter == {"x": "ls"}
    # a where filter reads the frontmatter as JSON inside SQLite: it must parse there too
    assert [hit.path for hit in vault.search("infinities", where={"x": "inf"})] == ["inf.md"]


def test_issue15_item1_a_note_written_through_the_api_does_not_break_the_next_index(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    vault = open_vault(write_vault(GOOD_NOTES))
    vault.index()
    for path, text in HOSTILE_NOTES.items():
        result = vault.write_note(path, text)
        assert result.indexed, result
    summary = vault.index(force=True)
    assert summary.notes == len(GOOD_NOTES) + len(HOSTILE_NOTES)
    assert_good_notes_indexed(vault)


def test_issue15_item3_alias_bomb_is_refused_before_it_is_expanded() -> None:
    text = alias_bomb()
    assert len(text.encode()) < 400
    tracemalloc.start()
    try:
        note = parse_note(text, "bomb.md")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"{peak:,} bytes: expanding 4.8 million values took 228 MB"
    assert note.frontmatter == {} and note.body_start == 0
    assert note.warnings == [
        "frontmatter refused (its aliases expand it by over 100,000 values): indexed as plain text"
    ]
    assert note.title == "Bomb"


def test_issue15_item3_alias_bomb_through_write_note_is_indexed_as_text(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    vault = open_vault(write_vault(GOOD_NOTES))
    result = vault.write_note("inbox/bomb.md", alias_bomb())
    assert result.indexed
    assert result.warning is not None and "aliases expand it" in result.warning
    assert vault.get_note("inbox/bomb.md").frontmatter == {}


def test_issue26_item4_a_value_yaml_cannot_build_is_kept_as_text_and_the_note_indexed(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    vault = open_vault(write_vault({**GOOD_NOTES, **UNBUILDABLE_NOTES}))
    summary = vault.index()
    assert summary.notes == len(GOOD_NOTES) + len(UNBUILDABLE_NOTES), summary.warnings
    assert summary.skipped == 0
    assert_one_line(summary.warnings)
    warned = {warning.path: warning.reason for warning in summary.warnings}
    for path, frontmatter in UNBUILDABLE_FRONTMATTER.items():
        note = vault.get_note(path)
        assert note.frontmatter == frontmatter, path
        assert note.title == frontmatter["title"], "the rest of the frontmatter is kept"
        field = next(iter(frontmatter))
        assert warned[path].startswith(
            f"frontmatter values YAML cannot build, kept as text: {field} (not a valid !!"
        ), warned[path]
    assert warned["feb-30.md"].endswith(
        "d (not a valid !!timestamp: day is out of range for month)"
    )
    assert warned["digits.md"].endswith("n (not a valid !!int: an integer of over 4,300 digits)")
    assert [hit.path for hit in vault.search("thirtieth", where={"type": "concept"})] == [
        "feb-30.md"
    ]
    assert_good_notes_indexed(vault)


def test_issue26_item4_each_value_is_kept_as_text_where_it_is_and_named_there() -> None:
    note = parse_note(
        "---\n"
        "title: Kept\n"
        "when: {start: 2023-02-30, end: 2023-03-01}\n"
        "steps: [1, !!int x, !!float y, !custom {a: 1}]\n"
        "base: &b {p: !!timestamp q}\n"
        "merged: {<<: *b, r: 1}\n"
        "bad_merge: {<<: 3, s: 2}\n"
        "---\n# Body\n",
        "kept.md",
    )
    assert note.title == "Kept" and note.body_start > 0
    assert note.frontmatter == {
        "title": "Kept",
        "when": {"start": "2023-02-30", "end": "2023-03-01"},
        "steps": [1, "x", "y", "!custom {a: 1}"],
        "base": {"p": "q"},
        "merged": {"p": "q", "r": 1},
        "bad_merge": {"<<": "3", "s": 2},
    }
    assert note.warnings == [
        "frontmatter values YAML cannot build, kept as text:"
        " when.start (not a valid !!timestamp: day is out of range for month),"
        " steps[1] (not a valid !!int: invalid literal for int() with base 10: 'x'),"
        " steps[2] (not a valid !!float: could not convert string to float: 'y') and 3 more"
    ]


# -- hypothesis -------------------------------------------------------------------------------

SCALAR_TOKENS = [
    ".inf", "-.inf", ".nan", ".NaN", "~", "null", "yes", "off", "0x" + "f" * 40, "0o17",
    "1_000", "0b101", "190:20:30", "1.0e400", "-0.0", "9" * 30, "9" * 4400, "2026-01-02",
    "2026-13-45", "2026-01-02 10:30:00+02:00", "2026-01-02T25:00:00", "!!binary aGk=",
    "!!binary ???", "!!set {a, b}", "!!omap [a: 1, b: 2]", "!!pairs [a: 1, a: 2]",
    "!!python/object:os.system ls", "!foo bar", "!!str 1", "!!int x", "!!float y",
    '"\\udce9"', '"\\x00"', '"\\U0001F600"', "'it''s'", "|\n  block", ">\n  folded",
    "[a, [b, [c]]]", "{a: {b: c}}", "[", "{", "]", "? [a, b]\n: c", "*missing", "&a",
    "&a [1, 2]", "*a", "<<: *a", "--- x", "...", "%YAML 1.1", "\t", "",
    "!!timestamp not-a-date", "!!timestamp", "2023-02-30", "!!int", "!!int 0x", "!!float",
    "!!bool maybe", "!!null x", "!!set [a]", "!!omap {a: 1}", "!!map [a]", "!!seq {a: 1}",
    "!foo {a: 1}", "<<: 3", "<<: [1, *a]", "9" * 4301, "0x" + "f" * 4000,
]  # fmt: skip
KEY_TOKENS = ["title", "tags", "tag", "human_relevance_score", "audience", "x", "<<", "? x", "1"]


@st.composite
def yaml_soup(draw: st.DrawFn) -> str:
    """YAML-looking lines from hostile tokens: keys, anchors, aliases, tags, flows, indents."""
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        indent = " " * draw(st.sampled_from([0, 0, 0, 2, 4]))
        key = draw(st.sampled_from(KEY_TOKENS) | st.text(max_size=6))
        anchor = draw(st.sampled_from(["", "", "&a ", "&b "]))
        value = draw(st.sampled_from(SCALAR_TOKENS) | st.text(max_size=12))
        if draw(st.booleans()):
            value = f"[{value}, *a, *b]"
        lines.append(f"{indent}{key}: {anchor}{value}")
    return "\n".join(lines)


plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**200)
    | st.floats()  # inf and nan included
    | st.text(max_size=20)
    | st.dates()
    | st.datetimes()
    | st.binary(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=5) | st.integers() | st.booleans(), inner, max_size=4)
    ),
    max_leaves=20,
)


def check_frontmatter(text: str) -> dict[str, Any]:
    frontmatter, body_start, warnings = split_frontmatter(text)
    assert json.loads(json.dumps(frontmatter, allow_nan=False)) == frontmatter
    assert all(isinstance(key, str) for key in frontmatter)
    assert 0 <= body_start <= len(text)
    assert_one_line(warnings)
    if warnings and not frontmatter:
        assert text[body_start:], "the note keeps its text"
    return frontmatter


@settings(max_examples=400, deadline=None)
@given(yaml_soup())
def test_any_yaml_soup_gives_json_ready_frontmatter_or_a_warning(raw: str) -> None:
    check_frontmatter(f"---\n{raw}\n---\nbody\n")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), plain_values, max_size=5), st.booleans())
def test_any_dumped_value_reads_back_as_json(values: dict[str, Any], shared: bool) -> None:
    if shared and values:  # the same object twice: the dumper writes an anchor and an alias
        values = {**values, "again": values}
    try:
        raw = yaml.safe_dump(values, allow_unicode=True)
    except yaml.YAMLError:
        return
    check_frontmatter(f"---\n{raw}---\nbody\n")


TAGS = [
    "!!timestamp", "!!int", "!!float", "!!bool", "!!null", "!!binary", "!!str", "!!set",
    "!!omap", "!!pairs", "!!seq", "!!map", "!!merge", "!!value", "!foo", "!!python/tuple", "",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(TAGS),
    st.text(alphabet="abz019:-+._/ ", max_size=12) | st.sampled_from(SCALAR_TOKENS),
)
def test_issue26_item4_any_tag_on_any_value_keeps_the_other_fields(tag: str, value: str) -> None:
    frontmatter = check_frontmatter(f"---\nbefore: 1\nx: {tag} {value}\nafter: 2\n---\nbody\n")
    if frontmatter:  # unless the value broke the YAML itself, the fields around it are kept
        assert frontmatter["before"] == 1 and frontmatter["after"] == 2, frontmatter


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TAGS), st.sampled_from(SCALAR_TOKENS), yaml_soup())
def test_issue26_item10_format_checks_any_value_in_one_line_messages(
    tag: str, value: str, soup: str
) -> None:
    for raw in (f"x: {tag} {value}", soup):
        text = f"---\ntype: Runbook\n{raw}\n---\n# Title\n\nSome prose.\n"
        for path in ("a.md", "index.md", "log.md"):
            check = check_note(path, text)
            suggest_enrichment(check, path, 0.0)
            assert_one_line([issue.message for issue in (*check.errors, *check.warnings)])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_as_frontmatter_never_raises(raw: str) -> None:
    check_frontmatter(f"---\n{raw}\n---\nbody\n")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(yaml_soup() | st.text(max_size=80), min_size=1, max_size=4))
def test_a_vault_of_hostile_frontmatter_loses_no_note(raws: list[str]) -> None:
    raws = [raw.replace("\x00", "") for raw in raws]  # a NUL byte makes a file binary: skipped
    hostile = {f"hostile-{i}.md": f"---\n{raw}\n---\nbody {i}\n" for i, raw in enumerate(raws)}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "vault"
        for rel, text in {**GOOD_NOTES, **hostile}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        with Vault.open(root, state_dir=Path(scratch) / "state", embedder=None) as vault:
            summary = vault.index()
            assert summary.notes == len(GOOD_NOTES) + len(hostile), summary.warnings
            assert_one_line(summary.warnings)
            assert_good_notes_indexed(vault)
            for rel in hostile:
                note = vault.get_note(rel)
                assert json.loads(json.dumps(note.frontmatter, allow_nan=False)) == note.frontmatter
            try:
                vault.write_note("inbox/again.md", f"---\n{raws[0]}\n---\nwritten\n")
            except VromError as exc:
                assert "\n" not in str(exc)
            assert vault.index().notes >= len(GOOD_NOTES) + len(hostile)
