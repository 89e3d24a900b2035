"""Keyword recall from the in-memory copy of the memories' index returns exactly what FTS5 does.

`vrom.search.recall.MemoryKeyword` ranks a plain-term query's matches from a copy of the
memories' FTS5 index (`vrom.index.keyword`) when one is current. The reference is the store's
own ``keyword_search`` with no copy: the same memories, in the same order (ties by memory id),
with the same scores, for common words (FTS5's floor IDF) and tied duplicates, under status
filters, and after another connection wrote; a store whose index cannot be copied (PostgreSQL)
is searched as before.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from postgres_server import StoreSpot

from vrom import Embedder
from vrom.corpus import Corpus
from vrom.embed import EmbedderBinding
from vrom.memories import Memories, _memory_filter
from vrom.search import keyword_copy
from vrom.search.query import parse_query
from vrom.store import MemoryKeywordRow, Store
from vrom.store import sqlite_memories as sqlite_memories_module

WORDS: tuple[str, ...] = (
    "deploy",
    "pipeline",
    "espresso",
    "coffee",
    "python",
    "typing",
    "river",
    "chess",
)
WORDS += ("running", "runs", "café", "cafe", "東京", "opening", "fishing", "ledger")
QUERIES: tuple[str, ...] = (
    "deploy",
    "coffee river",
    "running café",
    "everywhere",
    "everywhere chess",
    "东京",
)
QUERIES += ("ledger opening python fishing", "absentword", "RIVER Typing", "東京")


@pytest.fixture
def store(store_spot: StoreSpot) -> Iterator[Store]:
    s = store_spot.open()
    yield s
    s.close()


def _fill(memories: Memories, count: int, seed: int) -> list[str]:
    """Remember ``count`` memories of random words, "everywhere" in every one (a floor term),
    every seventh a copy of the one before (tied scores); archive or supersede some."""
    rng = random.Random(seed)
    made: list[str] = []
    title = content = ""
    tags: list[str] = []
    for n in range(count):
        if n % 7 != 6:
            title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
            words = [rng.choice(WORDS) if rng.random() < 0.3 else f"w{rng.randrange(500)}"]
            words += [rng.choice(WORDS) for _ in range(rng.randint(0, 30))]
            content = " ".join(words) + " everywhere"
            tags = rng.sample(("ops", "chess", "coffee"), rng.randint(0, 2))
        made.append(memories.remember(title, content, tags=tags).id)
    for n, memory_id in enumerate(made):
        if n % 11 == 3:
            memories.archive(memory_id)
        elif n % 11 == 8:
            memories.archive(memory_id, "superseded", superseded_by=made[0])
    return made


def _same(copied: list[MemoryKeywordRow], stored: list[MemoryKeywordRow], what: str) -> None:
    assert [row.head for row in copied] == [row.head for row in stored], what
    assert [row.bm25 for row in copied] == pytest.approx([row.bm25 for row in stored], abs=1e-6)


def _compare(corpus: Corpus, monkeypatch: pytest.MonkeyPatch, *, copied: bool) -> int:
    """Compare every query, limit and status filter; return how many found something.
    ``copied``: the copy must answer each (FTS5 ranks none of them)."""
    store, keyword = corpus.store, corpus.memory_keyword
    found = 0
    for status in ("active", "archived", "any"):
        where = _memory_filter(None, None, None, status)
        for query in QUERIES:
            parsed = parse_query(query)
            for limit in (1, 4, 30, 500):
                stored = store.memories.keyword_search(parsed, limit, where)
                with monkeypatch.context() as patch:
                    if copied:
                        patch.setattr(sqlite_memories_module._StoredMatches, "best", _refused)
                    rows = keyword.search(parsed, limit, where)
                _same(rows, stored, f"{query!r} {status} {limit}")
                found += bool(stored)
    return found


def _refused(*_: object) -> list[tuple[int, float]]:
    raise AssertionError("ranked by FTS5 where the copy should answer")


@pytest.mark.parametrize("store_spot", ["sqlite"], indirect=True)
def test_the_memory_copy_ranks_exactly_as_fts5(
    store: Store, store_spot: StoreSpot, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = Corpus(store, EmbedderBinding.of(Embedder.fake()))
    memories = Memories(corpus, Embedder.fake())
    ids = _fill(memories, 400, seed=3)
    keyword = corpus.memory_keyword
    assert keyword.copy_index() is not None
    postings = store.memories.keyword_postings()  # type: ignore[attr-defined]
    assert "everywher" in postings.floor_terms, "a word in every memory: FTS5's floor IDF"
    assert _compare(corpus, monkeypatch, copied=True) >= 90
    tied = keyword.search(parse_query("everywhere"), 500, _memory_filter(None, None, None, "any"))
    assert len({row.bm25 for row in tied}) < len(tied), "copies tie"

    # another connection adds, archives and forgets: the copy is stale, FTS5 answers exactly
    before = keyword.index
    other_store = store_spot.open()
    try:
        other = Memories(other_store, Embedder.fake())
        _fill(other, 60, seed=4)
        other.archive(ids[1])
    finally:
        other_store.close()
    monkeypatch.setattr(keyword_copy, "COPY_SECONDS_PER_CHUNK", 0.0)
    monkeypatch.setattr(keyword, "_copy_seconds", 0.0)  # priced at nothing: stale searches copy
    assert _compare(corpus, monkeypatch, copied=False) >= 90
    # the stale copy was replaced, not used, and the new one answers alone
    assert keyword.wait_for_copy() is not before and keyword.index is not None
    assert keyword.index.version == store.memories.keyword_version()  # type: ignore[attr-defined]
    assert _compare(corpus, monkeypatch, copied=True) >= 90
    recalled = memories.recall("deploy everywhere", k=50, mode="keyword")
    assert ids[1] not in {hit.memory.id for hit in recalled}, "archived elsewhere"


def test_keyword_recall_is_the_stores_own_where_no_copy_can_be_made(
    store: Store, store_spot: StoreSpot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the memories' index is not copied; on SQLite the copy is only made once
    searches paid for it. Either way keyword recall is what the store ranks."""
    corpus = Corpus(store, EmbedderBinding.of(Embedder.fake()))
    memories = Memories(corpus, Embedder.fake())
    _fill(memories, 80, seed=5)
    monkeypatch.setattr(keyword_copy, "COPY_SECONDS_PER_CHUNK", 1e6)  # never paid for
    assert _compare(corpus, monkeypatch, copied=False) >= 20
    assert corpus.memory_keyword.index is None
    copyable = corpus.memory_keyword.version() is not None
    assert copyable == (store_spot.backend == "sqlite")
