"""Ranking memories for the search core: keyword, vector and hybrid, with recency.

`rank_memories` is what `vrom.corpus.Corpus.recall` runs inside its one snapshot, after the
store state is read and new memories are embedded; fusion lives in `vrom.search.fusion`. Its
keyword candidates come from `MemoryKeyword`: the store's search, ranked from an in-memory
copy of the memories' keyword index when one is current (`vrom.search.keyword_copy`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vrom.search.fusion import first_pool, fuse_rankings
from vrom.search.keyword_copy import KeywordCopy
from vrom.search.vector import VectorIndex
from vrom.store import (
    MOST_FAILING,
    KeywordPostingsSource,
    KeywordQuery,
    MemoryFilter,
    MemoryKeywordRow,
    MemoryRecord,
    MemoryStore,
    RankedMatches,
    Store,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Parts = dict[str, float]
"""A memory's score parts: ``bm25``, ``vector``, ``fused``, ``rrf``, ``recency``."""


class MemoryKeyword(KeywordCopy):
    """Keyword candidates among one store's memories: what its `keyword_search` returns, the
    matches ranked by the in-memory copy when it is current and the query is plain terms."""

    def __init__(self, memories: MemoryStore) -> None:
        source = memories if isinstance(memories, KeywordPostingsSource) else None
        super().__init__(source, lambda: memories.count())
        self._memories = memories

    def search(
        self, query: KeywordQuery, limit: int, where: MemoryFilter
    ) -> list[MemoryKeywordRow]:
        """Return what the store's `keyword_search` returns for these arguments."""
        tokens = self._plain_tokens(query)
        if tokens is None:
            return self._memories.keyword_search(query, limit, where)
        stale = False

        def copied() -> RankedMatches | None:  # inside the store's snapshot
            nonlocal stale
            index = self._current()
            stale = index is None
            return None if index is None else index.matches(tokens)

        started = time.thread_time()
        rows = self._memories.keyword_search(query, limit, where, copied)
        if stale:
            self._charge(time.thread_time() - started)
        return rows


def _one_part(name: str, scores: Sequence[float], at: int) -> Parts:
    """Return the score parts of a candidate ranked by one retriever: its score, named."""
    return {name: scores[at]}


def _fused_memories(
    keyword_rows: Sequence[MemoryKeywordRow], similar: Sequence[tuple[str, float]]
) -> tuple[list[str], list[float], list[float], Callable[[int], Parts]]:
    """Return recall's hybrid candidates fused (`fuse_rankings`): their memory ids, fused
    scores, RRF and a function giving the score parts of the one at a position."""
    candidates, fused = fuse_rankings([(row.memory.id, row.bm25) for row in keyword_rows], similar)
    ids = [candidates[n] for n in fused.ids.tolist()]
    return ids, fused.fused.tolist(), fused.rrf.tolist(), fused.parts


def nearest_memories(
    store: Store,
    index: VectorIndex,
    vector: npt.NDArray[np.float32],
    pool: int,
    where: MemoryFilter,
) -> list[tuple[int, float]]:
    """Return the (key, score) pairs of the ``pool`` memory vectors nearest ``vector`` among the
    memories passing ``where``, as ``index.nearest`` among `keys_matching`'s keys gives them.

    Reading every passing key (all active memories, for the default filter) costs a search
    linear time in the memories held, and filtering the index against them as much again. So a
    filter of status alone is turned around: the few memories failing it are read through the
    status index (`keys_failing`), the index is asked for that many more neighbours unfiltered
    (at most twice ``pool`` at first, then all the failing's worth) and the failing ones are
    dropped. Exact search gives the same pairs in the same order: an allowed key among the best
    ``pool`` has fewer than ``pool`` allowed and fewer than all the failing keys ahead of it.
    With too few left (an index gives fewer than asked only when it holds no more), another
    filter, or many failing, the passing keys are read.
    """
    failing = store.memories.keys_failing(where, MOST_FAILING)
    if failing is not None:
        dropped = set(failing)
        for wanted in dict.fromkeys((pool + min(len(failing), pool), pool + len(failing))):
            found = index.nearest(vector, wanted)
            kept = [(key, s) for key, s in found if key not in dropped]
            if len(kept) >= pool or len(found) < wanted:  # enough left, or no more held
                return kept[:pool]
    return index.nearest(vector, pool, store.memories.keys_matching(where))


def rank_memories(
    store: Store,
    index: VectorIndex,
    keyword: MemoryKeyword,
    parsed: KeywordQuery,
    vector: npt.NDArray[np.float32] | None,
    k: int,
    where: MemoryFilter,
    mode: str,
    half_life_days: float | None,
) -> list[tuple[MemoryRecord, float, Parts]]:
    """Return the ``k`` memories best matching, with their score and its parts (see
    `vrom.corpus.Corpus.recall`); ``vector`` is the query's (None in keyword mode)."""
    pool = first_pool(k)
    keyword_rows = [] if mode == "vector" else keyword.search(parsed, pool, where)
    records = {row.memory.id: row.memory for row in keyword_rows}
    # the candidates: their ids, scores and RRF (ties), and their score parts by position
    ids: list[str]
    scores: list[float]
    rrf: list[float] | None = None
    parts_at: Callable[[int], Parts]
    if vector is None:
        ids = [row.memory.id for row in keyword_rows]
        scores = [row.bm25 for row in keyword_rows]
        parts_at = functools.partial(_one_part, "bm25", scores)
    else:
        nearest = nearest_memories(store, index, vector, pool, where)
        by_key = store.memories.by_keys([key for key, _ in nearest])
        records.update((memory.id, memory) for memory in by_key.values())
        similar = [(by_key[key].id, s) for key, s in nearest if key in by_key]
        if mode == "vector":
            ids = [memory_id for memory_id, _ in similar]
            scores = [score for _, score in similar]
            parts_at = functools.partial(_one_part, "vector", scores)
        else:
            ids, scores, rrf, parts_at = _fused_memories(keyword_rows, similar)
    recency: list[float] | None = None
    if half_life_days is not None:
        now = time.time()
        recency = [
            0.5 ** (max(0.0, now - records[memory_id].created_unix) / 86_400 / half_life_days)
            for memory_id in ids
        ]
        scores = [score * factor for score, factor in zip(scores, recency, strict=True)]
    order = sorted(
        range(len(ids)),
        key=lambda at: (
            -scores[at],
            -(rrf[at] if rrf is not None else 0.0),
            -records[ids[at]].created_unix,
            ids[at],
        ),
    )
    recalled = []
    for at in order[:k]:  # parts only for the memories returned
        parts = parts_at(at)
        if recency is not None:
            parts["recency"] = recency[at]
        recalled.append((records[ids[at]], scores[at], parts))
    return recalled
