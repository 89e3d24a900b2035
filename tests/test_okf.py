"""OKF v0.2 as pure functions: a note's format, what breaks conformance (errors) or advice
(warnings), the frontmatter enrichment suggests, and the dates lifecycle fields hold."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrom.dates import parse_instant
from vrom.ingest.okf import (
    CONCEPT,
    INDEX,
    LOG,
    MARKDOWN,
    OBSIDIAN,
    check_note,
    index_entries,
    instant_problem,
    is_demoted,
    stale_after,
)
from vrom.ingest.okf_enrich import first_sentence, suggest_enrichment

CONCEPT_TEXT = """---
type: Metric
title: Revenue
description: Recognized revenue for a period.
tags: [finance, revenue]
status: stable
stale_after: 2026-12-31T00:00:00Z
generated: { by: reference_agent/gemini-2.5-pro, at: 2026-06-30T14:00:00Z }
verified:
  - { by: human:jsmith@acme, at: 2026-07-01T09:00:00Z }
sources:
  - id: revenue-policy
    resource: policies/revenue-recognition.md
    author: team:finance
    usage_count: 12
    last_modified: 2026-06-15T00:00:00Z
usage_window: { from: 2026-06-01T00:00:00Z, to: 2026-06-30T00:00:00Z }
not:
  - term: a producer's own field
---

# Definition

Revenue is recognized on delivery.[^revenue-policy]

[^revenue-policy]: Revenue Recognition Policy
"""


def codes(issues: tuple[object, ...]) -> list[str]:
    return [issue.code for issue in issues]  # type: ignore[attr-defined]


# -- formats ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        ("metrics/revenue.md", CONCEPT_TEXT, CONCEPT),
        ("metrics/index.md", "# Metric\n\n* [Revenue](revenue.md) - Revenue.\n", INDEX),
        ("log.md", "# Log\n\n## 2026-05-22\n* **Update**: x\n", LOG),
        ("Projects/Atlas.md", "---\nstatus: active\n---\n# Atlas\n", OBSIDIAN),
        ("Journal/today.md", "# Today\n\nNothing happened.\n", MARKDOWN),
        ("Index.md", "# Not reserved: OKF names are lower case\n", MARKDOWN),
    ],
)
def test_each_format_is_detected(path: str, text: str, expected: str) -> None:
    assert check_note(path, text).format == expected


def test_a_full_concept_is_valid_and_its_unknown_fields_are_no_problem() -> None:
    check = check_note("metrics/revenue.md", CONCEPT_TEXT)
    assert (check.errors, check.warnings) == ((), ())
    assert check.frontmatter is not None and "not" in check.frontmatter


def test_a_concept_carrying_only_type_is_fully_conformant() -> None:
    check = check_note("a.md", "---\ntype: Playbook\n---\nSteps.\n")
    assert (check.format, check.errors, check.warnings) == (CONCEPT, (), ())


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("# Plain\n\nNo frontmatter at all.\n", "no_frontmatter"),
        ("---\ntitle: Has frontmatter\n---\nbody\n", "missing_type"),
        ("---\ntype:\n---\nbody\n", "empty_type"),
        ("---\ntype: '  '\n---\nbody\n", "empty_type"),
        ("---\ntype: [a, b]\n---\nbody\n", "bad_type"),
        ("---\ntype: Metric\ntitle: [unclosed\n---\nbody\n", "bad_frontmatter"),
        ("---\ntype: Metric\nbody without a closing line\n", "bad_frontmatter"),
        ("---\n- a list\n- not a mapping\n---\nbody\n", "bad_frontmatter"),
    ],
)
def test_what_conformance_requires_is_an_error(text: str, code: str) -> None:
    check = check_note("concepts/x.md", text)
    assert code in codes(check.errors), check
    assert all("\n" not in issue.message for issue in check.errors)


def test_text_that_is_not_utf8_is_an_error() -> None:
    assert codes(check_note("x.md", None, "it holds NUL bytes").errors) == ["not_text"]
    damaged = check_note("x.md", "---\ntype: Metric\n---\nbad \ufffd\n", "invalid UTF-8 at byte 9")
    assert codes(damaged.errors) == ["not_utf8"] and damaged.format == CONCEPT


@pytest.mark.parametrize(
    ("frontmatter", "code"),
    [
        ("status: retired", "unknown_status"),
        ("stale_after: 2026-12-31", "bad_datetime"),
        ("stale_after: 2026-12-31T00:00:00", "bad_datetime"),
        ("stale_after: soon", "bad_datetime"),
        ("generated: { at: 2026-06-30T14:00:00Z }", "missing_actor"),
        ("generated: { by: jsmith, at: 2026-06-30T14:00:00Z }", "bad_actor"),
        ("generated: yesterday", "bad_generated"),
        ("verified: { by: human:ana }", "missing_at"),
        ("verified: [ana, bo]", "bad_verified"),
        ("sources: [{ id: x, title: no resource }]", "missing_source_resource"),
        ("sources: [{ resource: a.md, usage_count: -1 }]", "bad_usage_count"),
        ("sources: [{ resource: a.md, last_modified: June }]", "bad_datetime"),
        ("usage_window: { from: 2026-06-01T00:00:00Z }", "bad_usage_window"),
        ("tags: finance", "bad_tags"),
        ("title: [a, b]", "bad_field"),
    ],
)
def test_what_the_spec_advises_is_a_warning(frontmatter: str, code: str) -> None:
    check = check_note("x.md", f"---\ntype: Metric\n{frontmatter}\n---\nbody\n")
    assert check.errors == ()
    assert code in codes(check.warnings), check.warnings


def test_a_bare_verified_mapping_is_a_one_element_list() -> None:
    text = "---\ntype: Metric\nverified: { by: human:ana, at: 2026-06-25T09:00:00Z }\n---\nx\n"
    assert check_note("x.md", text).warnings == ()


def test_footnotes_must_name_a_source_id_once_sources_are_given() -> None:
    text = (
        "---\ntype: Metric\nsources: [{ id: known, resource: a.md }]\n---\n"
        "One claim.[^known] Another.[^unknown]\n\n`[^in-code]` is not a citation.\n"
    )
    (warning,) = check_note("x.md", text).warnings
    assert warning.code == "unknown_source_id" and "[^unknown]" in warning.message
    assert "in-code" not in warning.message
    plain = "---\ntype: Metric\n---\nA footnote without sources.[^1]\n\n[^1]: fine\n"
    assert check_note("x.md", plain).warnings == ()


def test_an_attested_computation_needs_its_runtime_and_typed_parameters() -> None:
    text = (
        "---\ntype: Attested Computation\nparameters: [year]\nexecutor: skills/run.md\n---\n"
        "# Computation\n"
    )
    assert codes(check_note("c.md", text).warnings) == [
        "missing_runtime",
        "bad_parameters",
        "bad_contract",
    ]


# -- index.md and log.md --------------------------------------------------------------------


def test_an_index_is_sections_of_link_entries() -> None:
    good = "# Metric\n\n* [Revenue](revenue.md) - Recognized revenue.\n* [Sub](sub/) - More.\n"
    assert check_note("metrics/index.md", good).errors == ()
    bad = (
        "* [Orphan](orphan.md) - before any heading\n\n# Metric\n\n"
        "* just words, no link\n* [Bare](bare.md)\n\n```\n* [in code](x.md)\n```\n"
    )
    check = check_note("metrics/index.md", bad)
    assert [(i.code, i.message.split(":")[0]) for i in check.errors] == [
        ("index_entry_outside_section", "line 1"),
        ("bad_index_entry", "line 5"),
    ]
    assert [(i.code, i.message.split(":")[0]) for i in check.warnings] == [
        ("missing_entry_description", "line 6")
    ]
    assert codes(check_note("index.md", "just text\n").errors) == ["no_index_section"]


def test_only_okf_version_may_sit_in_an_index_frontmatter() -> None:
    assert check_note("index.md", '---\nokf_version: "0.2"\n---\n# Tables\n').errors == ()
    other = check_note("index.md", '---\nokf_version: "0.1"\n---\n# Tables\n')
    assert codes(other.warnings) == ["okf_version"] and other.errors == ()
    typed = check_note("tables/index.md", "---\ntype: Metric\n---\n# Tables\n")
    assert codes(typed.errors) == ["index_frontmatter"]


def test_a_log_has_iso_date_headings_newest_first() -> None:
    good = "---\ntype: Log\n---\n# History\n\n## 2026-07-01\n- x\n\n## 2026-04-15\n- y\n"
    assert check_note("log.md", good).errors == check_note("log.md", good).warnings == ()
    bad = "# History\n\n## July 1st\n- x\n\n## 2026-02-30\n- y\n\n## 2025-01-01\n\n## 2026-01-01\n"
    check = check_note("sub/log.md", bad)
    assert [(i.code, i.message.split(":")[0]) for i in check.errors] == [
        ("bad_log_date", "line 3"),
        ("bad_log_date", "line 6"),
    ]
    assert codes(check.warnings) == ["log_order"]
    assert codes(check_note("log.md", "# History\n").warnings) == ["no_log_entries"]


def test_index_entries_map_notes_to_their_section() -> None:
    text = (
        "# BigQuery Table\n\n* [Orders](orders.md) - x\n* [Up](../up.md#part) - y\n\n"
        "# Subdirectories\n\n* [deep](deep/index.md) - z\n* [Root](/root.md) - r\n"
    )
    assert index_entries(text, "bundle/tables/index.md") == {
        "bundle/tables/orders.md": "BigQuery Table",
        "bundle/up.md": "BigQuery Table",
        "bundle/tables/deep/index.md": "Subdirectories",
        "root.md": "Subdirectories",
    }


# -- enrichment -----------------------------------------------------------------------------


def test_enrichment_takes_each_field_from_the_note_itself() -> None:
    text = (
        "# Project Atlas\n\nAtlas maps **every** office [switch](https://x.y) and "
        "[[Beacon|the beacon]].[^1] It runs nightly.\n\n#project #infra/net\n"
    )
    check = check_note("Projects/atlas.md", text)
    mtime = dt.datetime(2026, 6, 30, 14, 0, 5, 123, tzinfo=dt.timezone.utc).timestamp()
    found = {e.field: (e.value, e.source) for e in suggest_enrichment(check, "x.md", mtime)}
    assert found == {
        "type": ("Note", "default"),
        "title": ("Project Atlas", "first heading"),
        "description": ("Atlas maps every office switch and the beacon.", "first paragraph"),
        "tags": (["project", "infra/net"], "inline tags"),
        "timestamp": ("2026-06-30T14:00:05+00:00", "file mtime"),
    }


def test_the_type_comes_from_the_index_then_the_siblings() -> None:
    check = check_note("tables/orders.md", "---\ntitle: Orders\n---\nOne row per order.\n")

    def kind(listed_under: str | None = None, sibling_types: tuple[str, ...] = ()) -> object:
        counts = {name: sibling_types.count(name) for name in sibling_types}
        found = suggest_enrichment(
            check, "tables/orders.md", 0, listed_under=listed_under, sibling_types=counts
        )
        (kind,) = [(e.value, e.source) for e in found if e.field == "type"]
        return kind

    assert kind("BigQuery Table", ("Metric",)) == (
        "BigQuery Table",
        "index.md section",
    )
    assert kind(None, ("Metric", "Table", "Table", "Metric", "Policy")) == (
        "Metric",
        "sibling concepts",
    ), "the most common; a tie goes to the first alphabetically"
    assert kind() == ("Note", "default")


def test_enrichment_never_replaces_a_value_and_skips_what_it_cannot_merge() -> None:
    check = check_note("a.md", CONCEPT_TEXT)
    assert suggest_enrichment(check, "a.md", 0) == []
    legacy = check_note("a.md", "---\ntype: Metric\ntimestamp: '2026-05-28T22:53:05+00:00'\n---\n")
    assert [e.field for e in suggest_enrichment(legacy, "gross_margin-v2.md", 0)] == ["title"]
    assert suggest_enrichment(legacy, "gross_margin-v2.md", 0)[0].value == "gross margin v2"
    broken = check_note("a.md", "---\ntitle: [x\n---\nbody\n")
    assert suggest_enrichment(broken, "a.md", 0) == []
    assert suggest_enrichment(check_note("index.md", "# A\n"), "index.md", 0) == []


def test_the_first_sentence_skips_what_is_not_prose() -> None:
    text = (
        "# Title\n\n| a | b |\n|---|---|\n\n- a list\n> a quote\n\n```\ncode. Not prose.\n```\n\n"
        "The `events_` table holds one row per event, e.g. page views. Then more.\n"
    )
    assert first_sentence(text) == "The events_ table holds one row per event, e.g. page views."
    assert first_sentence("# Only a heading\n") is None
    long = "word " * 100
    cut = first_sentence(long)
    assert cut is not None and len(cut) <= 241 and cut.endswith("…")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("-#*[]()^:\n\r `|>ab1 .:!_{}"), max_size=200))
def test_checking_and_enriching_never_crash(text: str) -> None:
    for path in ("a.md", "index.md", "log.md"):
        check = check_note(path, text)
        suggest_enrichment(check, path, 0.0)
        assert all("\n" not in i.message for i in (*check.errors, *check.warnings))


# -- lifecycle --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-09-23T00:00:00Z", "2026-09-23T00:00:00+00:00"),
        ("2026-09-23T02:30:00+02:30", "2026-09-23T00:00:00+00:00"),
        ("2026-09-23T00:00:00.5-0100", "2026-09-23T01:00:00.500000+00:00"),
        ("2026-09-23", "2026-09-23T00:00:00+00:00"),
        ("2026-09-23 08:00", "2026-09-23T08:00:00+00:00"),
        ("2026-13-01", None),
        ("2026-09-23T25:00:00Z", None),
        ("next year", None),
        (20260923, None),
    ],
)
def test_instants_parse_to_utc(value: object, expected: str | None) -> None:
    parsed = parse_instant(value)
    assert (None if parsed is None else parsed.isoformat()) == expected


def test_a_timestamp_needs_a_time_and_an_offset() -> None:
    assert instant_problem("2026-09-23T00:00:00Z") is None
    assert "date" in (instant_problem("2026-09-23") or "")
    assert "offset" in (instant_problem("2026-09-23T00:00:00") or "")
    assert "not an ISO 8601" in (instant_problem("Sept 23") or "")


def test_status_and_stale_after_as_search_reads_them() -> None:
    assert is_demoted({"status": "deprecated"}) and is_demoted({"status": " Superseded "})
    assert not is_demoted({"status": "stable"}) and not is_demoted({"status": ["deprecated"]})
    assert not is_demoted({})
    when = stale_after({"stale_after": "2026-12-31"})
    assert when == dt.datetime(2026, 12, 31, tzinfo=dt.timezone.utc)
    assert stale_after({"stale_after": "whenever"}) is None and stale_after({}) is None
