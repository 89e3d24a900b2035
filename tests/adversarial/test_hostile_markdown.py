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

from hypothesis import given, settings
from hypothesis import strategies as st

from vrom import Vault
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
