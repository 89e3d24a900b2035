"""Keyword search: BM25 over the store's full-text index, with the human-relevance prior."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from vrom.errors import ValidationError
from vrom.results import Hit
from vrom.search.excerpt import excerpt
from vrom.search.query import as_filter, parse_query, query_words
from vrom.store import Store, StoredChunk, Where

MAX_K = 1000
# the prior scales BM25 by 0.75 (system notes) .. 1.25 (notes written for people); 0.5 → 1.0
PRIOR_SPREAD = 0.5
# candidates fetched per requested hit, so the prior can reorder within a wider pool
CANDIDATE_FACTOR = 4
# one hit per document: a pool crowded by one document's chunks widens 4x, up to this many
MAX_POOL = MAX_K * CANDIDATE_FACTOR


T = TypeVar("T")


def first_k(ranked: Iterable[T], k: int, document_of: Callable[[T], int] | None) -> list[T]:
    """Return the first ``k`` of ``ranked``; with ``document_of``, only each document's first."""
    kept: list[T] = []
    seen: set[int] = set()
    for item in ranked:
        if len(kept) == k:
            break
        if document_of is not None:
            document = document_of(item)
            if document in seen:
                continue
            seen.add(document)
        kept.append(item)
    return kept


def check_k(k: object) -> None:
    """Raise `ValidationError` unless ``k`` is an integer from 1 to `MAX_K`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, not {k!r}")


def prior_factor(human_relevance_score: float) -> float:
    """Return the multiplier the human-relevance prior applies to a text score."""
    return 1.0 + PRIOR_SPREAD * (human_relevance_score - 0.5)


def make_hit(
    chunk: StoredChunk, score: float, scores: Mapping[str, float], words: list[str]
) -> Hit:
    """Return the `Hit` for a stored chunk, with an excerpt around ``words``."""
    return Hit(
        chunk_id=chunk.chunk_id,
        path=chunk.path,
        title=chunk.title,
        heading_path=chunk.heading_path,
        excerpt=excerpt(chunk.text, words),
        score=round(score, 6),
        content_hash=chunk.content_hash,
        modified_unix=chunk.mtime,
        human_relevance_score=chunk.human_relevance_score,
        note_id=chunk.document_id,
        position=chunk.position,
        char_start=chunk.char_start,
        char_end=chunk.char_end,
        text=chunk.text,
        scores={k: round(v, 6) for k, v in scores.items()},
        id=chunk.path,
        metadata=chunk.metadata,
    )


def keyword_search(
    store: Store,
    query: str,
    k: int = 10,
    where: Mapping[str, Any] | Where | None = None,
    *,
    per_document: bool = False,
) -> list[Hit]:
    """Return the best ``k`` chunks for a keyword query, best first.

    ``per_document`` returns each document's best chunk only (``k`` documents).
    """
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, not {type(query).__name__}")
    check_k(k)
    parsed = parse_query(query)
    document_of = (lambda pair: pair[1].document_id) if per_document else None
    where_filter = as_filter(where)
    pool = max(50, k * CANDIDATE_FACTOR)
    with store.snapshot():  # the chunks read last are the ones ranked first
        while True:
            rows = store.keyword_search(parsed, pool, where_filter)
            ranked = first_k(
                sorted(
                    ((row.bm25 * prior_factor(row.human_relevance_score), row) for row in rows),
                    key=lambda pair: (-pair[0], pair[1].chunk_id),
                ),
                k,
                document_of,
            )
            if len(ranked) == k or len(rows) < pool or pool >= MAX_POOL:
                break
            pool = min(pool * 4, MAX_POOL)  # a few long documents filled the pool
        # whole chunks are read only for the hits returned
        chunks = {c.chunk_id: c for c in store.get_chunks([row.chunk_id for _, row in ranked])}
    words = query_words(parsed)
    return [
        make_hit(
            chunks[row.chunk_id],
            score,
            {"bm25": row.bm25, "prior": prior_factor(row.human_relevance_score)},
            words,
        )
        for score, row in ranked
    ]
