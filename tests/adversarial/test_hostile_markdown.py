"""Hostile note bodies cost time in proportion to their length, never its square.

Some regular expressions of the parser rescanned the rest of the text from every ``[``, ``<!--``,
unmatched backtick run or heading space: a 120 KB note of ``[a](`` took 253 s, 45 KB of unmatched
backtick runs 43 s, one 50 KB heading line of spaces 44 s, and the index (or an agent's
``vault_write``) waited for it. Those scans are now linear; the old expressions, kept below as the
reference meaning (an inline code span's opening run taken whole, as CommonMark says), check the
new code on small texts. A regression here shows as a test that does not finish, never as a
timed assert.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import tag_storm
from hypothesis import given, settings
from hypothesis import strategies as st

from vrom import Vault
from vrom.ingest import parse
from vrom.ingest.parse import _code_spans, find_headings, mask_code, parse_note

SIZE = 200_000
HOSTILE_BODIES = {
    "brackets": "[" * SIZE,
    "wikilink-opens": "[[a" * (SIZE // 3),
    "link-opens": "[a](" * (SIZE // 4),
    "comment-opens": "<!--" * (SIZE // 4),
    "unmatched-backticks": "".join("`" * i + "x" for i in range(1, 630)),
    "heading-spaces": "# a" + " " * SIZE + "b\n",
    "heading-tabs": "# a" + " \t" * (SIZE // 2) + "#b\n",
    "fences": "```\n" * (SIZE // 4),
}

# the old expressions: the meaning the linear code must keep
REFERENCE_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
REFERENCE_ATX = re.compile(
    r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$|^ {0,3}(#{1,6})[ \t]*$", re.MULTILINE
)


def test_long_hostile_bodies_parse_and_index(
    write_vault: Callable[[dict[str, str | bytes]], Path],
    open_vault: Callable[[Path], Vault],
) -> None:
    for name, body in HOSTILE_BODIES.items():
        note = parse_note(body, f"{name}.md")
        assert len(mask_code(body)) == len(body), name
        assert note.title
    notes: dict[str, str | bytes] = {f"{name}.md": body for name, body in HOSTILE_BODIES.items()}
    summary = open_vault(write_vault(notes)).index()
    assert summary.notes == len(HOSTILE_BODIES)


class CountedTag(str):
    """A tag that counts how often it is compared with another: what de-duplication costs."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        CountedTag.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_issue26_item13_tag_de_duplication_compares_each_tag_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cleaned = parse._clean_tag
    monkeypatch.setattr(parse, "_clean_tag", lambda raw: CountedTag(cleaned(raw)))
    distinct = 2_000  # 4,000 tags: a list's "not in" compared them 4 million times
    note = parse_note(tag_storm(distinct), "storm.md")
    assert note.tags == [f"t{i}" for i in range(distinct)]
    assert CountedTag.comparisons <= 2 * distinct, f"{CountedTag.comparisons:,} comparisons"


def test_issue26_item13_a_tag_storm_note_indexes_with_each_tag_once(
    write_vault: Callable[[dict[str, str | bytes]], Path],
    open_vault: Callable[[Path], Vault],
) -> None:
    vault = open_vault(write_vault({"storm.md": tag_storm()}))
    assert vault.index().notes == 1
    note = vault.get_note("storm.md")
    assert len(note.tags) == 40_000 and set(note.tags) == {f"t{i}" for i in range(40_000)}


markdownish = st.text(alphabet=st.sampled_from(list("ab #`\t\n\r[]()")), max_size=80)


@settings(max_examples=500, deadline=None)
@given(markdownish)
def test_code_spans_are_those_of_the_reference_expression(text: str) -> None:
    expected = [(m.start(), m.end()) for m in REFERENCE_CODE_SPAN.finditer(text)]
    assert list(_code_spans(text)) == expected


@settings(max_examples=500, deadline=None)
@given(markdownish)
def test_headings_are_those_of_the_reference_expression(text: str) -> None:
    expected = [
        (len(m.group(1) or m.group(3)), (m.group(2) or "").strip(), m.start())
        for m in REFERENCE_ATX.finditer(text)
    ]
    assert [(h.level, h.text, h.start) for h in find_headings(text, 0)] == expected
