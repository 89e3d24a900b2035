"""Keyword recall from the in-memory copy of the memories' index returns exactly what FTS5 does.

`vrom.search.recall.MemoryKeyword` ranks a plain-term query's matches from a copy of the
memories' FTS5 index (`vrom.index.keyword`) when one is current. The reference is the store's
own ``keyword_search`` with no copy: the same memories, in the same order (ties by memory id),
with the same scores, for common words (FTS5's floor IDF) and tied duplicates, under status
filters, and after another connection wrote; a store whose index cannot be copied (PostgreSQL)
is searched as before.
"""

from __future__ import annotations

import dataclasses
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
from vrom.search.recall import MemoryKeyword
from vrom.store import MemoryHead, MemoryKeywordRow, Store
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


DURABLE = {"type": {"$ne": "no-such-type"}}
"""Passes every memory, but is not status alone: the store ranks and reads in one statement,
with no heads kept (the reference for the kept heads)."""


def _durable_same(store: Store, keyword: MemoryKeyword) -> None:
    for status in ("active", "archived", "any"):
        where = _memory_filter(None, None, None, status)
        durable = _memory_filter(DURABLE, None, None, status)
        for query in QUERIES:
            parsed = parse_query(query)
            for limit in (1, 5, 40):
                reference = store.memories.keyword_search(parsed, limit, durable)
                _same(store.memories.keyword_search(parsed, limit, where), reference, query)
                _same(keyword.search(parsed, limit, where), reference, query)


@pytest.mark.parametrize("store_spot", ["sqlite"], indirect=True)
def test_kept_memory_heads_follow_writes_from_another_connection(
    store: Store, store_spot: StoreSpot
) -> None:
    """The heads of FTS5 rows' memories are kept while the index and the statuses stand (the
    copy reads them all): a memory written again elsewhere, perhaps under its old FTS5 row,
    with another time, an archive and new memories are seen as the durable ranking sees them."""
    corpus = Corpus(store, EmbedderBinding.of(Embedder.fake()))
    memories = Memories(corpus, Embedder.fake())
    ids = _fill(memories, 120, seed=8)
    keyword = corpus.memory_keyword
    assert keyword.copy_index() is not None
    _durable_same(store, keyword)  # heads read with the copy
    newest, newest_key = store.memories.get(ids[-1]), store.memories.newest_key()
    assert newest is not None
    other_store = store_spot.open()
    try:
        # the newest written again: its FTS5 row deleted, then added (the last rowid again)
        other_store.memories.put(dataclasses.replace(newest, created_unix=1.0))
        Memories(other_store).archive(ids[5])
    finally:
        other_store.close()
    _durable_same(store, keyword)
    found = store.memories.keyword_search(
        parse_query(newest.title), 500, _memory_filter(None, None, None, "any")
    )
    assert MemoryHead(newest_key, newest.id, 1.0) in {row.head for row in found}, "its new time"
    other_store = store_spot.open()
    try:
        _fill(Memories(other_store), 30, seed=9)
    finally:
        other_store.close()
    _durable_same(store, keyword)


@pytest.mark.parametrize("store_spot", ["sqlite"], indirect=True)
def test_with_the_copy_a_keyword_recall_reads_no_memory_head(store: Store) -> None:
    corpus = Corpus(store, EmbedderBinding.of(Embedder.fake()))
    memories = Memories(corpus, Embedder.fake())
    _fill(memories, 80, seed=10)
    assert corpus.memory_keyword.copy_index() is not None
    statements: list[str] = []
    connection = store.memories._db.conn  # type: ignore[attr-defined]
    connection.set_trace_callback(statements.append)
    try:
        hits = memories.recall("coffee river everywhere", k=5, mode="keyword")
    finally:
        connection.set_trace_callback(None)
    assert len(hits) == 5
    assert not [s for s in statements if "memories_fts_content" in s], statements
    assert [s for s in statements if "FROM memories m WHERE m.key" in s], "the 5 read whole"
