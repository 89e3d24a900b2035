"""Heading-aware chunking: exact slices, full coverage, sections respected, overlap."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrom.ingest.chunk import ChunkStrategy, chunk_note
from vrom.ingest.parse import parse_note

SMALL = ChunkStrategy(target_chars=200, overlap_chars=40)


def _chunks(text: str, strategy: ChunkStrategy = SMALL) -> list:
    return chunk_note(parse_note(text, "n.md"), strategy)


def assert_covers_body(text: str, strategy: ChunkStrategy) -> None:
    note = parse_note(text, "n.md")
    chunks = chunk_note(note, strategy)
    covered = [False] * len(text)
    for chunk in chunks:
        assert chunk.text == text[chunk.char_start : chunk.char_end]
        assert chunk.text.strip() == chunk.text and chunk.text
        assert (
            chunk.content_hash
            == hashlib.sha256(chunk.text.encode("utf-8", "surrogatepass")).hexdigest()
        )
        for i in range(chunk.char_start, chunk.char_end):
            covered[i] = True
    for i in range(note.body_start, len(text)):
        assert covered[i] or text[i].isspace(), f"character {i} ({text[i]!r}) is in no chunk"
    assert [c.position for c in chunks] == list(range(len(chunks)))
    starts = [c.char_start for c in chunks]
    assert starts == sorted(starts)


def test_small_note_is_one_chunk_without_frontmatter() -> None:
    text = "---\ntitle: t\n---\n# Title\nShort body.\n"
    chunks = _chunks(text)
    assert len(chunks) == 1
    assert chunks[0].text == "# Title\nShort body."
    assert chunks[0].heading_path == "Title"


def test_heading_paths_follow_nesting() -> None:
    body = "x " * 120
    text = f"# A\n{body}\n## B\n{body}\n### C\n{body}\n## D\n{body}\n# E\n{body}\n"
    paths = [c.heading_path for c in _chunks(text)]
    assert "A > B > C" in paths
    assert "A > D" in paths and "E" in paths
    assert "A > B > C > D" not in paths


def test_small_sections_merge_within_a_top_level_section_only() -> None:
    text = "## One\n### a\nalpha\n### b\nbeta\n## Two\n### c\ngamma\n"
    chunks = _chunks(text)
    assert [c.heading_path for c in chunks] == ["One", "Two"]
    assert "alpha" in chunks[0].text and "beta" in chunks[0].text
    assert "gamma" in chunks[1].text and "beta" not in chunks[1].text


def test_long_section_splits_with_overlap_at_boundaries() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 25 for i in range(12)]
    text = "# Long\n" + "\n\n".join(paragraphs) + "\n"
    chunks = _chunks(text)
    assert len(chunks) > 3
    assert all(len(c.text) <= SMALL.target_chars for c in chunks)
    for first, second in itertools.pairwise(chunks):
        assert second.char_start < first.char_end, "consecutive pieces overlap"
        assert second.char_start > first.char_start
    assert_covers_body(text, SMALL)


def test_text_without_any_boundary_is_still_split() -> None:
    text = "x" * 1000
    chunks = _chunks(text)
    assert len(chunks) >= 5
    assert_covers_body(text, SMALL)


def test_empty_and_blank_notes_have_no_chunks() -> None:
    assert _chunks("") == []
    assert _chunks("---\ntitle: only frontmatter\n---\n\n  \n") == []


def test_strategy_validates_its_numbers() -> None:
    with pytest.raises(ValueError):
        ChunkStrategy(target_chars=50)
    with pytest.raises(ValueError):
        ChunkStrategy(target_chars=200, overlap_chars=150)
    assert ChunkStrategy().as_dict()["splitter"] == "heading-aware"


note_text = st.lists(
    st.one_of(
        st.sampled_from(["# H1", "## H2", "### H3", "```", "---", "", "- item", "> quote"]),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120),
        st.text(alphabet="abc .\n", min_size=50, max_size=600),
    ),
    max_size=30,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(note_text, st.sampled_from([SMALL, ChunkStrategy(), ChunkStrategy(100, 0)]))
def test_chunks_are_exact_slices_that_cover_the_body(text: str, strategy: ChunkStrategy) -> None:
    assert_covers_body(text, strategy)


def test_issue27_item9_heading_path_reads_links_as_their_text() -> None:
    text = "# Setup\n\n## Install [NixOS](https://nixos.org) on [[Hardware|my box]]\n\nRun it.\n"
    chunks = chunk_note(parse_note(text, "setup.md"), ChunkStrategy())
    assert [chunk.heading_path for chunk in chunks] == ["Setup", "Setup > Install NixOS on my box"]
