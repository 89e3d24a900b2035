"""Keyword ranking: BM25 over the store's full-text index, with the human-relevance prior; hits.

`KeywordRanker` answers the search core's keyword candidates from an in-memory copy of the
store's index (`vrom.index.keyword`) when the store offers one, the copy is current and the
query is plain terms, common words included; otherwise from the store's own `keyword_search`
(phrases, prefixes and exclusions always go there). Both give the same rows in the same order.
`KeywordRanker.ranked` gives the search core's keyword ranking (the prior applied, one chunk a
document if asked): from the copy's arrays when it answers, else `rank_keyword` over those rows.

When and how the copy is made (a rent-or-buy choice, beside the searches):
`vrom.search.keyword_copy`, which `KeywordRanker` extends.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping

from vrom.errors import ValidationError, shown
from vrom.ingest.okf import stale_after
from vrom.results import Hit, deferred, new_hit
from vrom.search.excerpt import excerpt
from vrom.search.fusion import MAX_K, first_k, first_pool, widen
from vrom.search.keyword_copy import KeywordCopy
from vrom.store import (
    DocumentStore,
    KeywordPostingsSource,
    KeywordQuery,
    KeywordRow,
    StoredChunk,
    Where,
)

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
    chunk: StoredChunk,
    score: float,
    scores: Mapping[str, float],
    words: list[str],
    *,
    kind: str,
    fresh: bool | None = None,
) -> Hit:
    """Return the `Hit` for a stored chunk, with an excerpt around ``words``; ``kind`` says what
    ``score`` is (`Hit.score_kind`), ``fresh`` whether its file still holds it (`Hit.fresh`).

    A note whose ``stale_after`` (OKF v0.2 §5.5) has passed gives a hit marked ``stale``: it is
    decided now, at search time, since a note goes stale without changing.
    """
    expires = stale_after(chunk.metadata)
    return new_hit(
        chunk_id=chunk.chunk_id,
        path=chunk.path,
        title=chunk.title,
        heading_path=chunk.heading_path,
        excerpt=deferred(excerpt, chunk.text, tuple(words)),
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
        fresh=fresh,
    )


KeywordSearch = Callable[[KeywordQuery, int, "Where | None"], list[KeywordRow]]
"""A keyword retriever: (query, limit, filter) → rows, best BM25 first."""


class KeywordRanker(KeywordCopy):
    """Keyword candidates for one store's chunks; see the module docstring."""

    def __init__(self, documents: DocumentStore) -> None:
        source = documents if isinstance(documents, KeywordPostingsSource) else None
        super().__init__(source, lambda: documents.chunk_count())
        self._documents = documents

    def search(self, query: KeywordQuery, limit: int, where: Where | None) -> list[KeywordRow]:
        """Return what the store's `keyword_search` returns for these arguments.

        Call it inside a store snapshot when chunks are read afterwards.
        """
        tokens = self._plain_tokens(query)
        if tokens is None or self._source is None:
            return self._documents.keyword_search(query, limit, where)
        index = self._current()
        if index is None:
            started = time.thread_time()
            rows = self._documents.keyword_search(query, limit, where)
            self._charge(time.thread_time() - started)
            return rows
        allowed = None if where is None else self._documents.chunk_ids_matching(where)
        return index.rank(tokens, limit, allowed)

    def ranked(
        self, query: KeywordQuery, k: int, where: Where | None, *, per_document: bool
    ) -> list[tuple[float, KeywordRow]]:
        """Return what `rank_keyword` returns over this ranker's `search`; from the copy's
        arrays when it answers the query (prior, order and one chunk a document in numpy).

        Call it inside a store snapshot when chunks are read afterwards.
        """
        tokens = self._plain_tokens(query)
        index = None if tokens is None else self._current()
        if tokens is None or index is None:
            return rank_keyword(self.search, query, k, where, per_document=per_document)
        allowed = None if where is None else self._documents.chunk_ids_matching(where)

        def rank(pool: int) -> tuple[list[tuple[float, KeywordRow]], bool]:
            return index.rank_with_prior(
                tokens, k, pool, allowed, per_document=per_document, spread=PRIOR_SPREAD
            )

        return widen(rank, k, first_pool(k))

    def owners(self, chunk_ids: list[int]) -> dict[int, tuple[int, float]] | None:
        """Return chunk id → (document id, human relevance) from a current copy, or None
        when there is none (read the chunks instead). Chunks not held are left out."""
        index = self._current()
        return None if index is None else index.owners(chunk_ids)


def rank_keyword(
    search: KeywordSearch, query: KeywordQuery, k: int, where: Where | None, *, per_document: bool
) -> list[tuple[float, KeywordRow]]:
    """Return the ``k`` best (score, row) keyword matches: BM25 scaled by the prior, best first.

    ``search`` returns keyword rows as `DocumentStore.keyword_search` does (a store's, or a
    `KeywordRanker`'s). ``per_document`` keeps each document's best chunk only, widening the
    pool as needed. Call it inside a store snapshot when whole chunks are read afterwards.
    """

    def rank(pool: int) -> tuple[list[tuple[float, KeywordRow]], bool]:
        rows = search(query, pool, where)
        scored = sorted(
            ((row.bm25 * prior_factor(row.human_relevance_score), row) for row in rows),
            key=lambda pair: (-pair[0], pair[1].chunk_id),
        )
        return first_k(scored, k, document_of if per_document else None), len(rows) == pool

    return widen(rank, k, first_pool(k))


def document_of(pair: tuple[float, KeywordRow]) -> int:
    """Return the document of a (score, keyword row) pair."""
    return pair[1].document_id
