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
    MemoryHead,
    MemoryKeywordRow,
    MemoryRecord,
    MemoryStore,
    RankedMatches,
    Store,
    failing_windows,
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
    status index (`keys_failing`), the index is asked for more neighbours unfiltered
    (`failing_windows`: a quarter of ``pool`` more at first, up to all the failing's worth)
    and the failing ones are dropped. Exact search gives the same pairs in the same order: an
    allowed key among the best ``pool`` has fewer than ``pool`` allowed and fewer than all the
    failing keys ahead of it. With too few left (an index gives fewer than asked only when it
    holds no more), another filter, or many failing, the passing keys are read.
    """
    failing = store.memories.keys_failing(where, MOST_FAILING)
    if failing is not None:
        for wanted in failing_windows(pool, len(failing)):
            found = index.nearest(vector, wanted)
            kept = [(key, s) for key, s in found if key not in failing]
            if len(kept) >= pool or len(found) < wanted:  # enough left, or no more held
                return kept[:pool]
    return index.nearest(vector, pool, store.memories.keys_matching(where))


def _contenders(scores: Sequence[float], rrf: Sequence[float] | None, k: int) -> list[int]:
    """Return the positions of the candidates that can be among the ``k`` returned when
    recency reorders nothing: the ``k`` best by score (and RRF), and any tied with the last."""

    def rank(at: int) -> tuple[float, float]:
        return (scores[at], rrf[at] if rrf is not None else 0.0)

    order = sorted(range(len(scores)), key=rank, reverse=True)
    if len(order) <= k:
        return order
    cut = rank(order[k - 1])
    return order[:k] + [at for at in order[k:] if rank(at) == cut]


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
    `vrom.corpus.Corpus.recall`); ``vector`` is the query's (None in keyword mode).

    Candidates are ordered by score, then the newer memory, then id: keyword matches come
    with their heads (key, id, time), a vector's nearest with their keys alone. Only the
    memories returned are read whole, and the caller holds one snapshot over the reads: of
    the nearest, those that can be returned (the ``k`` best, and any tied with the last)
    are read whole to be ordered; with recency, which reorders every candidate, each one's
    head is read.
    """
    pool = first_pool(k)
    keyword_rows: list[MemoryKeywordRow] = []
    if mode == "keyword" and half_life_days is None:  # by score alone: k, and ties at the cut
        keyword_rows = keyword.search(parsed, k, where)
    elif mode != "vector":  # fused, or reordered by recency: the pool (a tie cut at it)
        keyword_rows = keyword.search(parsed, pool, where)[:pool]
    # the candidates: their keys, scores and RRF (ties), and their score parts by position
    keys: list[int]
    scores: list[float]
    rrf: list[float] | None = None
    parts_at: Callable[[int], Parts]
    if vector is None:
        keys = [row.head.key for row in keyword_rows]
        scores = [row.bm25 for row in keyword_rows]
        parts_at = functools.partial(_one_part, "bm25", scores)
    else:
        similar = nearest_memories(store, index, vector, pool, where)
        if mode == "vector":
            keys = [key for key, _ in similar]
            scores = [score for _, score in similar]
            parts_at = functools.partial(_one_part, "vector", scores)
        else:
            lexical = [(row.head.key, row.bm25) for row in keyword_rows]
            keys, fused = fuse_rankings(lexical, similar)
            keys = [keys[n] for n in fused.ids.tolist()]
            scores, rrf, parts_at = fused.fused.tolist(), fused.rrf.tolist(), fused.parts
    recency: list[float] | None = None
    known: dict[int, MemoryHead | MemoryRecord] = {row.head.key: row.head for row in keyword_rows}
    if half_life_days is None:  # only the k best, and those tied with the last, can be returned
        missing = [keys[at] for at in _contenders(scores, rrf, k) if keys[at] not in known]
        known.update(store.memories.by_keys(missing))
    else:  # recency reorders every candidate: each one's head
        known.update(store.memories.heads([key for key in keys if key not in known]))
        now = time.time()
        recency = [
            0.5 ** (max(0.0, now - known[key].created_unix) / 86_400 / half_life_days)
            if key in known
            else 0.0
            for key in keys
        ]
        scores = [score * factor for score, factor in zip(scores, recency, strict=True)]
    order = sorted(
        # every key an index holds is a memory's; one not read is left out, not a KeyError
        (at for at in range(len(keys)) if keys[at] in known),
        key=lambda at: (
            -scores[at],
            -(rrf[at] if rrf is not None else 0.0),
            -known[keys[at]].created_unix,
            known[keys[at]].id,
        ),
    )[:k]
    returned = [keys[at] for at in order]  # whole: those read to be ordered, the rest now
    records = {key: m for key in returned if isinstance(m := known[key], MemoryRecord)}
    records.update(store.memories.by_keys([key for key in returned if key not in records]))
    recalled = []
    for at in order:  # parts only for the memories returned
        parts = parts_at(at)
        if recency is not None:
            parts["recency"] = recency[at]
        recalled.append((records[keys[at]], scores[at], parts))
    return recalled
