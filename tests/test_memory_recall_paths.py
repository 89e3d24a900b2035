"""Recall's fast path for status filters returns exactly what reading every passing key returns.

`vrom.search.recall.nearest_memories` turns a filter of status alone around: it reads the few
memories failing it (`keys_failing`) and drops them from an unfiltered search, instead of
reading every active memory's key (`keys_matching`). These tests compare it, and whole recalls,
with the durable path (a filter that is not status alone takes it), on both store backends:
ids, order within ties, scores to 1e-6, after writes from another connection, with archived
and superseded memories, and over an HNSW graph.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_server import StoreSpot

from vrom import Embedder
from vrom.corpus import Corpus
from vrom.embed import EmbedderBinding
from vrom.index.hnsw import HnswIndex
from vrom.memories import Memories, _memory_filter
from vrom.search.fusion import first_pool
from vrom.search.query import parse_query
from vrom.search.recall import nearest_memories
from vrom.store import MemoryFilter, MemoryRecord, Store, failing_windows, rows
from vrom.store.sqlite import SQLiteStore

TOPICS = ("deploy pipeline", "espresso coffee", "python typing", "river fishing", "chess opening")
QUERIES = ("deploy coffee", "python river", "chess", "fishing espresso typing", "pipeline")
DURABLE = {"type": {"$ne": "no-such-type"}}
"""Passes every memory, but is not status alone: recall reads the passing keys."""


@pytest.fixture
def store(store_spot: StoreSpot) -> Iterator[Store]:
    s = store_spot.open()
    yield s
    s.close()


def _fill(memories: Memories, count: int, start: int = 0) -> list[str]:
    """Remember ``count`` memories, every fifth a copy of the one before (tied scores)."""
    made: list[str] = []
    for n in range(start, start + count):
        m = n - 1 if n % 5 == 4 else n
        topic = TOPICS[m % len(TOPICS)]
        made.append(memories.remember(f"{topic} {m % 7}", f"about {topic}, note {m}").id)
    return made


def _retire(memories: Memories, ids: list[str]) -> None:
    for n, memory_id in enumerate(ids):
        if n % 9 == 3:
            memories.archive(memory_id)
        elif n % 9 == 7:
            memories.archive(memory_id, "superseded", superseded_by=ids[0])


def _recalled(memories: Memories, query: str, mode: str, **words: Any) -> list[Any]:
    return [
        (hit.memory.id, hit.score, hit.scores)
        for hit in memories.recall(query, k=12, mode=mode, **words)
    ]


def _same(fast: list[Any], durable: list[Any]) -> None:
    assert [row[0] for row in fast] == [row[0] for row in durable]
    for (_, score, parts), (_, durable_score, durable_parts) in zip(fast, durable, strict=True):
        assert score == pytest.approx(durable_score, abs=1e-6)
        assert parts.keys() == durable_parts.keys()
        for name, value in parts.items():
            assert value == pytest.approx(durable_parts[name], abs=1e-6)


def _check_recalls(memories: Memories) -> None:
    for query in QUERIES:
        for mode in ("keyword", "vector", "hybrid"):
            _same(_recalled(memories, query, mode), _recalled(memories, query, mode, where=DURABLE))
            archived = {"status": "archived"}
            _same(
                _recalled(memories, query, mode, **archived),
                _recalled(memories, query, mode, where=DURABLE, **archived),
            )


def _check_nearest(corpus: Corpus, memories: Memories) -> None:
    embedder = memories.embedder
    assert embedder is not None
    store, index = corpus.store, corpus._memory_index
    filters = [_memory_filter(None, None, None, status) for status in ("active", "archived", "any")]
    filters += [
        _memory_filter({"status": {"$in": ["archived", "superseded"]}}, None, None, "any"),
        _memory_filter(DURABLE, None, None, "active"),
    ]
    for query in QUERIES:
        vector = embedder.embed_query(query)
        for pool in (first_pool(10), 3):
            for where in filters:
                durable = index.nearest(vector, pool, store.memories.keys_matching(where))
                fast = nearest_memories(store, index, vector, pool, where)
                assert [key for key, _ in fast] == [key for key, _ in durable]
                assert [s for _, s in fast] == pytest.approx([s for _, s in durable], abs=1e-6)


def test_recall_over_status_filters_is_the_durable_recall(
    store: Store, store_spot: StoreSpot
) -> None:
    corpus = Corpus(store, EmbedderBinding.of(Embedder.fake()))
    memories = Memories(corpus, Embedder.fake())
    ids = _fill(memories, 90)
    _retire(memories, ids)
    _check_recalls(memories)
    _check_nearest(corpus, memories)

    # another connection (another process, on PostgreSQL another machine) adds and retires
    other_store = store_spot.open()
    try:
        other = Memories(other_store, Embedder.fake())
        more = _fill(other, 40, start=90)
        _retire(other, more + ids[:20])
        other.archive(ids[1])
    finally:
        other_store.close()
    _check_recalls(memories)
    _check_nearest(corpus, memories)
    assert all(hit.memory.id != ids[1] for hit in memories.recall("deploy pipeline", k=50))


def test_recall_with_more_failing_than_the_limit_reads_the_passing_keys(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = Memories(store, Embedder.fake())
    ids = _fill(memories, 30)
    _retire(memories, ids)
    where = _memory_filter(None, None, None, "active")
    assert store.memories.keys_failing(where, 100) is not None
    assert store.memories.keys_failing(where, 2) is None, "more fail than the limit"
    assert store.memories.keys_failing(_memory_filter(DURABLE, None, None, "active"), 100) is None
    assert store.memories.keys_failing(MemoryFilter(), 100) == frozenset()
    before = {mode: _recalled(memories, "deploy coffee", mode) for mode in ("keyword", "hybrid")}
    monkeypatch.setattr("vrom.search.recall.MOST_FAILING", 1)
    monkeypatch.setattr("vrom.store.sqlite_memories.MOST_FAILING", 1)
    for mode, recalled in before.items():
        _same(_recalled(memories, "deploy coffee", mode), recalled)


def test_recall_over_an_hnsw_graph_is_the_durable_recall(tmp_path: Path) -> None:
    """vrom's own graph (pgvector's HNSW orders equal distances its own way, either path)."""
    store = SQLiteStore(tmp_path / "store.db")
    corpus = Corpus(store, EmbedderBinding.of(Embedder.fake()), hnsw_threshold=20)
    try:
        memories = Memories(corpus, Embedder.fake())
        ids = _fill(memories, 70)
        _retire(memories, ids)
        memories.recall("warm", mode="vector")
        assert isinstance(corpus._memory_index.wait_for_graph(), HnswIndex)
        _check_recalls(memories)  # a graph as small as its search beam answers exactly
        _check_nearest(corpus, memories)
    finally:
        corpus.close()


def test_recall_with_the_default_filter_reads_no_passing_key(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = Memories(store, Embedder.fake())
    _retire(memories, _fill(memories, 60))
    before = _recalled(memories, "python river", "hybrid")

    def refused(where: MemoryFilter) -> list[int]:
        raise AssertionError("the passing keys were read")

    monkeypatch.setattr(store.memories, "keys_matching", refused)
    _same(_recalled(memories, "python river", "hybrid"), before)
    for status in ("any", "archived"):
        assert _recalled(memories, "python river", "vector", status=status)


def test_keyword_search_takes_a_tie_across_its_cut_whole(store: Store) -> None:
    """Twenty memories score the same for "river": the durable ranking orders them by id (the
    lowest, here, FTS5's last rows) and returns the whole tie with the last of ``limit``."""
    memories = Memories(store)
    tied = [memories.remember("river notes", "the river bank").id for _ in range(20)]
    ids = _fill(memories, 12)
    for memory_id in tied[:10]:  # written again: last in FTS5's rowid order, first by id
        record = store.memories.get(memory_id)
        assert record is not None
        store.memories.put(record)
    for memory_id in (tied[0], tied[5], ids[2]):
        memories.archive(memory_id)
    for query in ("river", "river coffee", "bank espresso", "deploy"):
        parsed = parse_query(query)
        for limit in (1, 3, 8, 25):
            for status in ("active", "archived", "any"):
                where = _memory_filter(None, None, None, status)
                durable = _memory_filter(DURABLE, None, None, status)
                fast = store.memories.keyword_search(parsed, limit, where)
                slow = store.memories.keyword_search(parsed, limit, durable)
                assert [r.head for r in fast] == [r.head for r in slow]
                assert [r.bm25 for r in fast] == pytest.approx([r.bm25 for r in slow], abs=1e-6)
                # the best ``limit``, and every match tied with the last of them
                deep = store.memories.keyword_search(parsed, 500, durable)
                cut = deep[min(limit, len(deep)) - 1].bm25 if deep else 0.0
                assert [r.head for r in slow] == [r.head for r in deep if r.bm25 >= cut]


def test_after_a_first_look_recall_embeds_the_memories_added_or_changed_since(
    store: Store, store_spot: StoreSpot, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = Memories(store, Embedder.fake())
    ids = _fill(memories, 30)
    memories.recall("deploy", mode="hybrid")  # the first look: at every memory
    vectors = store.memories.vectors
    looks: list[tuple[Any, ...]] = []
    look = vectors.missing
    monkeypatch.setattr(vectors, "missing", lambda *a: looks.append(a) or look(*a))
    other_store = store_spot.open()
    try:  # another connection, with no model: a memory without a vector, a vector dropped
        added = Memories(other_store).remember("trout at dawn", "fishing the river early").id
        record = other_store.memories.get(ids[3])
        assert record is not None
        other_store.memories.put(dataclasses.replace(record, content="a changed text"))
    finally:
        other_store.close()
    hits = memories.recall("trout dawn", k=40, mode="vector")
    assert looks and all(len(args) == 3 and args[2] is not None for args in looks), looks
    assert look(100) == [], "both embedded: a whole look finds none missing"
    assert added in [hit.memory.id for hit in hits]
    assert ids[3] in [hit.memory.id for hit in hits]


def test_a_recall_reads_whole_only_the_memories_it_returns(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidates are ranked on their scores, and on heads (key, id, time) for ties and
    recency: a recall of k with no ties at its cut reads k memories whole."""
    memories = Memories(store, Embedder.fake())
    # texts of distinct lengths: no two score alike
    ids = [memories.remember(f"note {n}", "deploy coffee" + " more" * n).id for n in range(60)]
    _retire(memories, ids)
    read: list[str] = []

    def counted(*values: Any) -> MemoryRecord:  # every memory read from a row is made here
        read.append(values[0])
        return MemoryRecord(*values)

    monkeypatch.setattr(rows, "MemoryRecord", counted)
    for mode in ("keyword", "vector", "hybrid"):
        for half_life in (None, 30.0):
            read.clear()
            hits = memories.recall("deploy coffee", k=5, mode=mode, half_life_days=half_life)
            assert len(hits) == 5 and sorted(read) == sorted(h.memory.id for h in hits), mode


def test_failing_windows_grow_to_all_the_failing() -> None:
    assert failing_windows(40, 0) == [40]
    assert failing_windows(40, 3) == [43]
    assert failing_windows(40, 30) == [51, 70]
    assert failing_windows(40, 2000) == [51, 80, 2040]


def test_a_tie_at_the_cut_goes_to_the_newer_memory(store: Store) -> None:
    """Ties at the k-th score are read whole and ordered newer first, then by id: a recall of
    k is the first k of a recall deep enough to hold every tied memory, in keyword and vector
    modes (where a memory's score does not depend on how many are asked for)."""
    memories = Memories(store, Embedder.fake())
    for n in range(12):  # twelve alike, timed out of order; others around them
        memories.remember("espresso", "espresso crema", timestamp=1_600_000_000 + (n * 7) % 12)
        memories.remember(f"notes {n}", "espresso" + " crema tea" * (n % 4 + 1))
    tied_times = {1_600_000_000 + n for n in range(12)}
    for mode in ("keyword", "vector"):
        deep = memories.recall("espresso crema", k=24, mode=mode)
        times = [h.memory.created_unix for h in deep]
        first = min(at for at, t in enumerate(times) if t in tied_times)
        assert times[first : first + 12] == sorted(tied_times, reverse=True), "newer first"
        for k in (first + 1, first + 3, first + 12, first + 13):
            hits = memories.recall("espresso crema", k=k, mode=mode)
            assert [(h.memory.id, h.score) for h in hits] == [
                (h.memory.id, h.score) for h in deep[:k]
            ], (mode, k)


def test_identical_memories_come_newer_first_in_every_mode(store: Store) -> None:
    """Memories alike in every score are ordered newer first in hybrid recall too: fusion's
    reciprocal ranks used to count the order each retriever listed the tie in (by key, the
    oldest first), which put the oldest memory first."""
    memories = Memories(store, Embedder.fake())
    times = [1_600_000_000 + (n * 5) % 6 for n in range(6)]  # not in the order they are kept
    for at in times:
        memories.remember("deploy key", "The deploy key lives in the vault", timestamp=at)
    memories.remember("cats", "Something else about cats")
    for mode in ("keyword", "vector", "hybrid"):
        hits = memories.recall("deploy key vault", k=6, mode=mode)
        assert [h.memory.created_unix for h in hits] == sorted(times, reverse=True), mode
        assert len({h.score for h in hits}) == 1, mode
