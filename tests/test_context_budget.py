"""Contexts that respect the budget: a relative cut-off, no repeated text, the most relevant
distinct text first (`vrom.format_context`, `Vault.context`, `AgentMemory.format_context`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vrom import AgentMemory, Collection, Vault, format_context
from vrom.results import SearchResult
from vrom.search.context import (
    RELATIVE_CUTOFF,
    above_cutoff,
    distinct_passages,
    estimate_tokens,
    fill_budget,
    without_repeated_lines,
)

# 40 numbered sentences; "zebra" is in 12, 15 and 30, so hits land in neighbouring chunks
SENTENCES = [
    f"Sentence {i:02d} tells about {'zebra stripes' if i in (12, 15, 30) else 'plain things'}."
    for i in range(40)
]


@pytest.fixture
def long_note_vault(write_vault, tmp_path: Path):
    root = write_vault(
        {
            "Long.md": "# Long\n\n" + " ".join(SENTENCES) + "\n",
            "Other.md": "# Other\n\nNothing about that animal here, only plain words.\n",
        }
    )
    vault = Vault.open(root, tmp_path / "state", embedder=None, chunk_chars=240, chunk_overlap=80)
    vault.index()
    yield vault
    vault.close()


def _sentence_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for number in re.findall(r"Sentence (\d\d) ", text):
        counts[number] = counts.get(number, 0) + 1
    return counts


def test_overlapping_expanded_hits_are_given_once(long_note_vault: Vault) -> None:
    hits = long_note_vault.search("zebra", k=10, expand_context=True, context_window=2)
    assert len({hit.chunk_id for hit in hits}) >= 2, "the test needs several hits in one note"
    naive = "".join(hit.context_text or "" for hit in hits)
    assert max(_sentence_counts(naive).values()) > 1, "the windows must overlap to test merging"
    context = long_note_vault.context(
        "zebra", max_tokens=4000, expand_context=True, context_window=2
    )
    counts = _sentence_counts(context.text.split("\n\nSources:")[0])
    assert counts and max(counts.values()) == 1, counts
    for number in ("12", "15", "30"):
        assert number in counts
    # every chunk that was merged into a passage is cited on its source line
    cited = {
        int(n) for n in re.findall(r"\d+", " ".join(re.findall(r"chunks? ([\d, ]+)", context.text)))
    }
    assert {hit.chunk_id for hit in hits} <= cited


def test_chunk_overlap_is_not_repeated_without_expansion(long_note_vault: Vault) -> None:
    context = long_note_vault.context("zebra stripes", max_tokens=4000, relative_cutoff=None)
    body = context.text.split("\n\nSources:")[0]
    hits = long_note_vault.search("zebra stripes", k=20)
    naive = "".join(hit.text for hit in hits)
    assert max(_sentence_counts(naive).values()) > 1, "chunks must overlap to test this"
    assert max(_sentence_counts(body).values()) == 1


def test_a_passage_too_long_gives_way_to_its_own_chunk(long_note_vault: Vault) -> None:
    whole = long_note_vault.context("zebra", max_tokens=4000, expand_context=True, context_window=3)
    budget = 160
    assert whole.tokens > budget
    tight = long_note_vault.context(
        "zebra", max_tokens=budget, expand_context=True, context_window=3
    )
    assert tight.tokens <= budget and tight.sources
    assert "…" not in tight.text, "a chunk that fits whole is given whole, not cut"
    assert tight.sources[0].text.strip() in tight.text


def test_hits_far_below_the_best_are_left_out(write_vault, tmp_path: Path) -> None:
    filler = " ".join(f"word{i}" for i in range(150))
    root = write_vault(
        {
            "Strong.md": "# Strong\n\nquokka quokka quokka island\n",
            "Weak.md": f"# Weak\n\n{filler} quokka {filler}\n",
            **{f"Other {i}.md": f"# Other {i}\n\nplain words number {i}\n" for i in range(10)},
        }
    )
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        hits = vault.search("quokka", k=10, mode="keyword")
        below = [h.path for h in hits if h.score < RELATIVE_CUTOFF * hits[0].score]
        assert below, "the weak note must score under the cut-off for this test"
        kept = vault.context("quokka", max_tokens=4000)
        assert {hit.path for hit in kept.sources}.isdisjoint(below)
        everything = vault.context("quokka", max_tokens=4000, relative_cutoff=None)
        assert set(below) <= {hit.path for hit in everything.sources}


def test_above_cutoff_is_relative_to_the_best() -> None:
    assert above_cutoff([10.0, 5.0, 3.9, 4.0], 0.4) == [0, 1, 3]
    assert above_cutoff([0.02, 0.0075], 0.4) == [0]
    assert above_cutoff([10.0, 1.0], None) == [0, 1]
    assert above_cutoff([-1.0, -3.0], 0.4) == [0, 1], "no relative cut-off without a positive best"
    assert above_cutoff([]) == []


def test_distinct_passages_join_overlaps_of_one_source_only() -> None:
    first = "alpha beta gamma delta epsilon zeta eta theta"
    second = "epsilon zeta eta theta iota kappa lambda mu"  # starts with first's last 23 chars
    passages = distinct_passages(
        [
            ("a.md", first),
            ("b.md", second),  # another note: not joined, though it overlaps
            ("a.md", second),
            ("c.md", "delta epsilon zeta"),  # held whole by a.md's passage: adds nothing
        ]
    )
    assert [(p.source, p.text, p.members) for p in passages] == [
        ("a.md", "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu", [0, 2]),
        ("b.md", second, [1]),
    ]


def test_a_passage_that_grows_absorbs_a_later_one_of_its_note() -> None:
    one, two, three = (
        "one two three four five six seven eight",
        "five six seven eight nine ten eleven twelve",
        "nine ten eleven twelve thirteen fourteen fifteen",
    )
    passages = distinct_passages([("n.md", one), ("n.md", three), ("n.md", two)])
    assert len(passages) == 1
    assert passages[0].text == (
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
    )
    assert sorted(passages[0].members) == [0, 1, 2]


def test_fill_budget_skips_what_does_not_fit_and_tries_shorter_forms() -> None:
    def fits(chosen: list[str]) -> bool:
        return sum(map(len, chosen)) <= 10

    assert fill_budget([("aaaaaaaa",), ("bbbbbbbbbbbb", "bb"), ("ccc",)], fits) == [
        "aaaaaaaa",
        "bb",
    ]
    assert fill_budget([("x" * 20,), ("yyy",)], fits) == ["yyy"]


def test_format_context_cut_off_applies_to_hits(long_note_vault: Vault) -> None:
    hits = long_note_vault.search("zebra", k=10)
    assert format_context(hits, 4000).sources[0] == hits[0]


def _result(text: str, source: str, distance: float, chunk: str | None = None) -> SearchResult:
    metadata = {"source_file": source, "section_heading": source, "url": f"https://x.org/{source}"}
    if chunk is not None:
        metadata.update(text=chunk, _expanded=True)
    return SearchResult(text, metadata, distance, hash(text) % 1000)


def test_agent_memory_format_context_joins_and_drops_repeats() -> None:
    first = "Alpha one. Beta two. Gamma three. Delta four."
    second = "Gamma three. Delta four. Epsilon five. Zeta six."
    results = [
        _result(first, "doc.md", 0.10, chunk="Beta two."),
        _result(second, "doc.md", 0.15, chunk="Epsilon five."),
        _result("Beta two. Gamma three.", "copy.md", 0.20),  # another doc's copy: dropped
        _result("Far away text.", "far.md", 0.80),  # similarity 0.2 < 0.4 × 0.9: cut off
    ]
    text = AgentMemory.format_context(results)
    assert text == (
        "## doc.md\n\nAlpha one. Beta two. Gamma three. Delta four. Epsilon five. Zeta six."
        "\n\n[Source: https://x.org/doc.md]"
    )
    assert "Far away" in AgentMemory.format_context(results, relative_cutoff=None)
    # too small for the joined passage: its best chunk alone
    tight = AgentMemory.format_context(
        results,
        max_tokens=estimate_tokens("## doc.md\n\nBeta two.\n\n[Source: https://x.org/doc.md]"),
    )
    assert tight == "## doc.md\n\nBeta two.\n\n[Source: https://x.org/doc.md]"


def test_agent_memory_format_context_gives_a_heading_once_and_a_source_without_a_url() -> None:
    goals = SearchResult(
        "## Goals\n\nShip the beacon by May.",
        {"source_file": "plan.md", "section_heading": "Goals", "url": None},
        0.1,
        1,
    )
    plain = SearchResult(
        "Budgets are set in March.", {"source_file": "budget.md", "doc_title": "Budget"}, 0.1, 2
    )
    assert AgentMemory.format_context([goals]) == (
        "## Goals\n\nShip the beacon by May.\n\n[Source: plan.md]"
    )
    assert AgentMemory.format_context([plain]) == (
        "## Budget\n\nBudgets are set in March.\n\n[Source: budget.md]"
    )


def test_lines_given_by_an_earlier_passage_are_left_out() -> None:
    footer = "%% Hub footer: please don't edit anything below this line %%"
    texts = [f"First note body.\n{footer}", f"Second note body.\n\n{footer}\nshort", footer]
    assert without_repeated_lines(texts) == [
        f"First note body.\n{footer}",
        "Second note body.\n\nshort",
        "",
    ]


def test_boilerplate_shared_by_notes_is_given_once(write_vault, tmp_path: Path) -> None:
    footer = "%% Hub footer: please don't edit anything below this line %%"
    root = write_vault(
        {
            f"Plugin {i}.md": f"# Plugin {i}\n\nThe walrus plugin number {i}.\n\n{footer}\n"
            for i in range(4)
        }
    )
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        context = vault.context("walrus plugin", max_tokens=2000)
        assert len(context.sources) == 4
        assert context.text.count(footer) == 1


def test_a_collection_context_names_an_untitled_document_by_its_id() -> None:
    with Collection.open("handbook", embedder=None, storage=None) as docs:
        docs.add([{"id": "leave", "text": "Annual leave is 25 days a year."}])
        context = docs.context("annual leave", max_tokens=200)
    assert context.text.startswith("[1] leave\nAnnual leave is 25 days a year.\n"), context.text
