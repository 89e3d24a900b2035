"""Keyword ranking: BM25 over the store's full-text index, with the human-relevance prior; hits."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from vrom.errors import ValidationError, shown
from vrom.ingest.okf import stale_after
from vrom.results import Hit
from vrom.search.excerpt import excerpt
from vrom.search.fusion import MAX_K, first_k, first_pool, widen
from vrom.store import KeywordQuery, KeywordRow, Store, StoredChunk, Where

# the prior scales BM25 by 0.75 (system notes) .. 1.25 (notes written for people); 0.5 → 1.0
PRIOR_SPREAD = 0.5


def check_k(k: object) -> None:
    """Raise `ValidationError` unless ``k`` is an integer from 1 to `MAX_K`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, not {shown(k)}")


def prior_factor(human_relevance_score: float) -> float:
    """Return the multiplier the human-relevance prior applies to a text score."""
    return 1.0 + PRIOR_SPREAD * (human_relevance_score - 0.5)


def make_hit(
    chunk: StoredChunk, score: float, scores: Mapping[str, float], words: list[str], *, kind: str
) -> Hit:
    """Return the `Hit` for a stored chunk, with an excerpt around ``words``; ``kind`` says what
    ``score`` is (`Hit.score_kind`).

    A note whose ``stale_after`` (OKF v0.2 §5.5) has passed gives a hit marked ``stale``: it is
    decided now, at search time, since a note goes stale without changing.
    """
    expires = stale_after(chunk.metadata)
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
        prev_chunk_id=chunk.prev_id,
        next_chunk_id=chunk.next_id,
        score_kind=kind,
        stale=expires is not None and dt.datetime.now(dt.timezone.utc) >= expires,
        stale_after=None if expires is None else expires.isoformat(),
    )


def rank_keyword(
    store: Store, query: KeywordQuery, k: int, where: Where | None, *, per_document: bool
) -> list[tuple[float, KeywordRow]]:
    """Return the ``k`` best (score, row) keyword matches: BM25 scaled by the prior, best first.

    ``per_document`` keeps each document's best chunk only, widening the pool as needed. Call
    it inside a store snapshot when whole chunks are read afterwards.
    """

    def rank(pool: int) -> tuple[list[tuple[float, KeywordRow]], bool]:
        rows = store.documents.keyword_search(query, pool, where)
        scored = sorted(
            ((row.bm25 * prior_factor(row.human_relevance_score), row) for row in rows),
            key=lambda pair: (-pair[0], pair[1].chunk_id),
        )
        return first_k(scored, k, document_of if per_document else None), len(rows) == pool

    return widen(rank, k, first_pool(k))


def document_of(pair: tuple[float, KeywordRow]) -> int:
    """Return the document of a (score, keyword row) pair."""
    return pair[1].document_id
