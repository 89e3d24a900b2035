"""Keyword search: ranking, excerpts, filters, query syntax and CJK text, on both store backends
(SQLite's FTS5 BM25 and PostgreSQL's ts_rank must agree on every answer here)."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrom import ValidationError, Vault
from vrom.filters import AllOf
from vrom.results import Deferred, Hit, SearchReport, changed_hit, new_hit, to_jsonable
from vrom.search.excerpt import EXCERPT_CHARS, excerpt
from vrom.search.query import parse_query, parse_where
from vrom.store import Condition, StoredChunk

FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 3


@pytest.fixture
def vault(write_vault, open_backend_vault) -> Vault:
    root = write_vault(
        {
            "Gardening.md": f"---\ntags: [hobby]\n---\n# Gardening\n{FILLER}\n",
            "Cooking.md": f"# Cooking\n## Gardening herbs\n{FILLER}\n",
            "Notes.md": f"# Notes\n{FILLER} I mentioned gardening once here.\n",
            "Tokyo.md": "# 旅行\n東京タワーに行きました。京都も楽しかった。\n",
            "Seoul.md": "# 여행\n서울에서 맛있는 음식을 먹었습니다.\n",
            "Human.md": "---\naudience: human\n---\n# H\nshared ranking word\n",
            "Machine.md": "---\naudience: system\n---\n# M\nshared ranking word\n",
            "projects/Atlas.md": "---\nstatus: active\ntags: [project/atlas]\n---\n# Atlas\nmaps\n",
            "projects/Beacon.md": "---\nstatus: paused\ntags: [project]\n---\n# Beacon\nmaps\n",
            "Exclude.md": "# Exclude\nbackup to the cloud\n",
            "Keep.md": "# Keep\nbackup to a disk\n",
            "Long.md": "# Long\n"
            + "padding words here. " * 60
            + "the needle is here. "
            + "more padding. " * 60,
        }
    )
    v: Vault = open_backend_vault(root)
    v.index()
    return v


def test_title_beats_heading_beats_body(vault: Vault) -> None:
    assert [h.path for h in vault.search("gardening")] == ["Gardening.md", "Cooking.md", "Notes.md"]


def test_hits_carry_provenance(vault: Vault) -> None:
    hit = vault.search("needle")[0]
    assert hit.path == "Long.md" and hit.title == "Long" and hit.heading_path == "Long"
    assert "needle" in hit.excerpt and len(hit.excerpt) <= EXCERPT_CHARS + 2
    assert hit.excerpt != hit.text
    assert hit.score > 0 and set(hit.scores) == {"bm25", "prior"}
    text = (vault.root / "Long.md").read_text()
    assert text[hit.char_start : hit.char_end] == hit.text
    assert len(hit.content_hash) == 64 and hit.modified_unix > 0


def test_human_relevance_prior_orders_equal_text(vault: Vault) -> None:
    hits = vault.search('"shared ranking word"')
    assert [h.path for h in hits] == ["Human.md", "Machine.md"]
    assert hits[0].scores["bm25"] == pytest.approx(hits[1].scores["bm25"])
    assert hits[0].human_relevance_score == 0.9 and hits[1].human_relevance_score == 0.1


def test_phrases_exclusions_and_prefixes(vault: Vault) -> None:
    assert {h.path for h in vault.search("backup")} == {"Exclude.md", "Keep.md"}
    assert [h.path for h in vault.search("backup -cloud")] == ["Keep.md"]
    assert [h.path for h in vault.search('"to a disk"')] == ["Keep.md"]
    assert [h.path for h in vault.search("neadle needl*")] == ["Long.md"]


def test_cjk_words_are_found_inside_sentences(vault: Vault) -> None:
    assert [h.path for h in vault.search("東京")] == ["Tokyo.md"]
    assert [h.path for h in vault.search("京都")] == ["Tokyo.md"]
    assert [h.path for h in vault.search("タワー")] == ["Tokyo.md"]
    assert [h.path for h in vault.search("서울")] == ["Seoul.md"]
    assert [h.path for h in vault.search("음식")] == ["Seoul.md"]
    assert [h.path for h in vault.search("旅")] == ["Tokyo.md"]
    assert vault.search("大阪") == []
    assert "東京" in vault.search("東京")[0].excerpt


def test_where_filters(vault: Vault) -> None:
    assert {h.path for h in vault.search("maps", tags="project")} == {
        "projects/Atlas.md",
        "projects/Beacon.md",
    }
    assert [h.path for h in vault.search("maps", tags=["project/atlas"])] == ["projects/Atlas.md"]
    assert [h.path for h in vault.search("maps", where={"status": "paused"})] == [
        "projects/Beacon.md"
    ]
    assert vault.search("gardening", path="projects/") == []
    assert [h.path for h in vault.search("maps", where={"status": {"$in": ["paused", "x"]}})] == [
        "projects/Beacon.md"
    ]
    assert [h.path for h in vault.search("maps", where={"status": {"$ne": "paused"}})] == [
        "projects/Atlas.md"
    ]
    for bad in ({"$in": "paused"}, {"$bogus": 1}, {"$gt": "2"}, {}, ["paused"]):
        with pytest.raises(ValidationError):
            vault.search("maps", where={"status": bad})
    with pytest.raises(ValidationError):
        vault.search("maps", path="")


@pytest.mark.parametrize("k", [0, -1, 1001, 2.5, "3", True])
def test_bad_k_is_a_validation_error(vault: Vault, k: object) -> None:
    with pytest.raises(ValidationError, match="k must be"):
        vault.search("maps", k=k)


HOSTILE = [
    '"',
    '"unbalanced',
    "AND OR NOT",
    "NEAR(a b)",
    "title:gardening",
    "^start",
    "*",
    "a*b*",
    "-",
    "--",
    "-gardening",
    "(((",
    "'; DROP TABLE chunks; --",
    "🙂 emoji",
    "???!!!",
    "gardening " * 300,
    "\x00\x01",
    '"" AND ""',
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(vault: Vault, query: str) -> None:
    hits = vault.search(query)
    assert isinstance(hits, SearchReport)  # a sequence of hits
    assert vault.store.integrity_problems() == []


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=80))
def test_any_query_text_is_safe(vault: Vault, query: str) -> None:
    if query.strip():
        vault.search(query, k=3)
    else:
        with pytest.raises(ValidationError, match="blank"):
            vault.search(query, k=3)


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\u3000"])
def test_a_blank_query_is_refused_by_every_search(vault: Vault, query: str) -> None:
    """Not an empty list (keyword) or noise (the embedding of nothing): an error that says so."""
    for mode in (None, "keyword", "vector", "hybrid", "rerank"):
        with pytest.raises(ValidationError, match="query is blank"):
            vault.search(query, mode=mode)
        with pytest.raises(ValidationError, match="query is blank"):
            vault.search(query, mode=mode, fallback=True)
    with pytest.raises(ValidationError, match="query is blank"):
        vault.context(query)
    with pytest.raises(ValidationError, match="query is blank"):
        vault.memories.recall(query)
    with pytest.raises(ValidationError, match="must be a string"):
        vault.search(None)  # type: ignore[arg-type]


def test_parse_query_shapes() -> None:
    parsed = parse_query('alpha "beta gamma" -delta -"eps zeta" pre* foo-bar')
    assert parsed.terms == ("alpha", "pre*", "foo", "bar")
    assert parsed.phrases == ("beta gamma",)
    assert parsed.excluded == ("delta", "eps zeta")
    assert parse_query("!!! ???").is_empty


def test_stopwords_are_dropped_only_while_other_words_remain() -> None:
    assert parse_query("the history of The Atlas project").terms == ("history", "Atlas", "project")
    assert parse_query("to be or not to be").terms == ("to", "be", "or", "not")
    assert parse_query('"the who" and the*').phrases == ("the who",)
    assert parse_query('"the who" and the*').terms == ("the*",)
    assert parse_query("the -atlas").terms == ("the",)  # nothing positive would be left
    assert parse_query("When did Melanie paint a sunrise?").terms == ("Melanie", "paint", "sunrise")
    assert parse_query("who did what").terms == ("who", "did", "what"), "all form: kept"
    assert parse_query('"what it does" How').phrases == ("what it does",), "phrases are kept"


def test_stopwords_neither_rank_nor_stop_a_search(vault: Vault) -> None:
    # "the" is in nearly every note: the query ranks by "needle" alone, and still finds it
    assert [h.path for h in vault.search("the needle", mode="keyword", k=1)] == ["Long.md"]
    assert {h.path for h in vault.search("to the", mode="keyword", k=5)} >= {"Exclude.md"}


def test_keyword_search_reads_whole_chunks_only_for_the_hits(vault: Vault) -> None:
    asked: list[int] = []
    get_chunks = vault.store.documents.get_chunks

    def counting(ids: Sequence[int]) -> list[StoredChunk]:
        asked.extend(ids)
        return get_chunks(ids)

    vault.store.documents.get_chunks = counting  # type: ignore[method-assign]
    hits = vault.corpus.search("maps gardening shared word", k=2, mode="keyword")
    assert len(hits) == 2 and sorted(asked) == sorted(h.chunk_id for h in hits)


def test_a_changed_hit_is_what_dataclasses_replace_gives(vault: Vault) -> None:
    (hit,) = vault.search("needle", k=1)
    changes = {"text": "whole", "chunk_text": hit.text, "fresh": False, "stale": True}
    assert changed_hit(hit, **changes) == dataclasses.replace(hit, **changes) != hit
    assert changed_hit(hit) == hit
    with pytest.raises(TypeError):
        changed_hit(hit, no_such_field=1)


def test_parse_where_shapes() -> None:
    where = parse_where({"n": 3, "ok": True}, path="./notes/", tags=["#A", "b"])
    assert where is not None
    assert where.path_prefix == "notes/" and where.tags == ("a", "b")
    assert where.conditions == (AllOf((Condition("n", "eq", 3), Condition("ok", "eq", True))),)
    assert parse_where(None) is None and parse_where({}) is None


def test_excerpt_is_bounded_and_centred_on_the_densest_window() -> None:
    text = "a " * 500 + "alpha beta " + "b " * 500
    short = excerpt(text, ["alpha", "beta"])
    assert "alpha beta" in short and len(short) <= EXCERPT_CHARS + 2
    assert short.startswith("…") and short.endswith("…")
    assert excerpt("short text", ["x"]) == "short text"


def test_an_excerpt_is_made_when_first_read_and_reads_as_one_made_at_once(vault: Vault) -> None:
    """A hit's excerpt is computed on first read; equality, repr, JSON, `changed_hit`,
    `dataclasses.replace` and pickling see what an excerpt made at once gives."""
    (hit,) = vault.search("needle", k=1)
    assert type(vars(hit)["excerpt"]) is Deferred  # not made by the search
    made = excerpt(hit.text, ["needle"])
    eager = dataclasses.replace(hit, excerpt=made)
    assert hit.excerpt == made and vars(hit)["excerpt"] == made  # made once, then kept
    assert hit == eager
    for fresh in (vault.search("needle", k=1)[0] for _ in range(5)):
        assert type(vars(fresh)["excerpt"]) is Deferred
    later = [vault.search("needle", k=1)[0] for _ in range(5)]
    assert repr(later[0]) == repr(eager)
    assert to_jsonable(later[1]) == to_jsonable(eager)
    assert later[2] == eager and eager == later[3]
    carried = changed_hit(later[4], fresh=None)
    assert type(vars(carried)["excerpt"]) is Deferred and carried.excerpt == made
    assert pickle.loads(pickle.dumps(vault.search("needle", k=1)[0])) == eager
    with pytest.raises(dataclasses.FrozenInstanceError):
        hit.excerpt = "other"  # type: ignore[misc]


def test_new_hit_is_what_hit_gives(vault: Vault) -> None:
    (found,) = vault.search("needle", k=1)
    given = {name: value for name, value in vars(found).items() if name != "scores"}
    assert new_hit(**given) == Hit(**given) and new_hit(**given).scores == {}
    assert new_hit(**given).scores is not new_hit(**given).scores  # a default made anew
    assert repr(new_hit(**given)) == repr(Hit(**given))
    with pytest.raises(TypeError):
        new_hit(**{**given, "no_such_field": 1})
    with pytest.raises(TypeError):
        new_hit(**{name: value for name, value in given.items() if name != "path"})
