"""Vector and hybrid search: nearest chunks by meaning, and their fusion with keyword search.

Hybrid search is reciprocal rank fusion (k=60) of the BM25 and the vector candidate lists, scaled
by the human-relevance prior. Filters apply inside both retrievers: the keyword query carries
them, and the vector search runs over exactly the chunks that pass them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vrom.embed import Embedder
from vrom.errors import ValidationError
from vrom.results import Hit
from vrom.search.keyword import CANDIDATE_FACTOR, check_k, make_hit, prior_factor
from vrom.search.query import parse_query, parse_where, query_words
from vrom.store import Store, StoredChunk

if TYPE_CHECKING:
    from vrom.index.exact import ExactIndex

RRF_K = 60
MODES = ("hybrid", "keyword", "vector", "rerank")


class VectorSearcher:
    """Vector and hybrid search over one store with one embedder (the index loads lazily)."""

    def __init__(self, store: Store, embedder: Embedder, metric: str = "cosine") -> None:
        self._store = store
        self._embedder = embedder
        self._metric = metric
        self._index: ExactIndex | None = None

    @property
    def embedder(self) -> Embedder:
        """The embedder queries (and documents) are embedded with."""
        return self._embedder

    @property
    def index(self) -> ExactIndex:
        """The vector index, loaded on first use (numpy is imported only then)."""
        if self._index is None:
            from vrom.index.exact import ExactIndex  # heavy: only vector search needs it

            self._index = ExactIndex(self._store, self._metric)
        return self._index

    def _nearest(
        self, query: str, limit: int, where: Mapping[str, Any] | None
    ) -> list[tuple[int, float]]:
        parsed_where = parse_where(where)
        allowed = None if parsed_where is None else self._store.chunk_ids_matching(parsed_where)
        vector = self._embedder.embed_query(query)
        return self.index.search(vector, limit, allowed)

    def vector_search(
        self, query: str, k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Return the ``k`` chunks nearest to the query's meaning, best first."""
        check_k(k)
        nearest = self._nearest(query, k, where)
        chunks = {c.chunk_id: c for c in self._store.get_chunks([i for i, _ in nearest])}
        words = query_words(parse_query(query))
        return [
            make_hit(chunks[i], score, {"vector": score}, words)
            for i, score in nearest
            if i in chunks
        ]

    def hybrid_search(
        self, query: str, k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Return the ``k`` best chunks by reciprocal rank fusion of keyword and vector ranks."""
        check_k(k)
        pool = max(50, k * CANDIDATE_FACTOR)
        parsed = parse_query(query)
        keyword_rows = self._store.keyword_search(parsed, pool, parse_where(where))
        nearest = self._nearest(query, pool, where)
        fused: dict[int, dict[str, float]] = {}
        for rank, row in enumerate(keyword_rows, start=1):
            parts = fused.setdefault(row.chunk.chunk_id, {})
            parts["bm25"] = row.bm25
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank)
        for rank, (chunk_id, score) in enumerate(nearest, start=1):
            parts = fused.setdefault(chunk_id, {})
            parts["vector"] = score
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank)
        chunks: dict[int, StoredChunk] = {row.chunk.chunk_id: row.chunk for row in keyword_rows}
        chunks.update(
            (c.chunk_id, c) for c in self._store.get_chunks([i for i in fused if i not in chunks])
        )
        scored = []
        for chunk_id, parts in fused.items():
            chunk = chunks.get(chunk_id)
            if chunk is None:
                continue  # deleted between the two retrievals
            parts["prior"] = prior_factor(chunk.human_relevance_score)
            scored.append((parts["rrf"] * parts["prior"], chunk_id, parts))
        scored.sort(key=lambda item: (-item[0], item[1]))
        words = query_words(parsed)
        return [make_hit(chunks[i], score, parts, words) for score, i, parts in scored[:k]]


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is a search mode, else raise `ValidationError`."""
    if mode not in MODES:
        raise ValidationError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode
