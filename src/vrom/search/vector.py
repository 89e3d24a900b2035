"""Vector and hybrid search: nearest chunks by meaning, and their fusion with keyword search.

Hybrid search is reciprocal rank fusion (k=60) of the BM25 and the vector candidate lists, scaled
by the human-relevance prior. Filters apply inside both retrievers: the keyword query carries
them, and the vector search runs over exactly the chunks that pass them.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from vrom.embed import Embedder
from vrom.errors import ValidationError
from vrom.results import Hit
from vrom.search.keyword import (
    CANDIDATE_FACTOR,
    MAX_POOL,
    check_k,
    first_k,
    make_hit,
    prior_factor,
)
from vrom.search.query import as_filter, parse_query, query_words
from vrom.store import KeywordQuery, Store, StoredChunk, Where

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from vrom.index.exact import ExactIndex
    from vrom.index.hnsw import HnswIndex

RRF_K = 60
HNSW_THRESHOLD = 50_000
"""Stores with at least this many vectors are searched with an HNSW graph, smaller ones exactly.

Exact numpy search answers in a few ms up to ~50k vectors of 384 dims on two cores, is exact and
needs no build; past that its latency grows linearly while the graph's barely moves."""
MODES = ("hybrid", "keyword", "vector", "rerank")
INDEX_KINDS = ("auto", "flat", "hnsw")


class VectorSearcher:
    """Vector and hybrid search over one store with one embedder (the index loads lazily)."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        metric: str = "cosine",
        hnsw_threshold: int = HNSW_THRESHOLD,
        ef_search: int | None = None,
        index: str = "auto",
    ) -> None:
        if index not in INDEX_KINDS:
            raise ValidationError(f"index must be one of {', '.join(INDEX_KINDS)}, not {index!r}")
        self._kind = index
        self._store = store
        self._embedder = embedder
        self._metric = metric
        self._hnsw_threshold = hnsw_threshold
        self._ef_search = ef_search
        self._index: ExactIndex | HnswIndex | None = None
        self._chosen_at = -1  # the vector generation the index kind was chosen for

    @property
    def embedder(self) -> Embedder:
        """The embedder queries (and documents) are embedded with."""
        return self._embedder

    @property
    def index(self) -> ExactIndex | HnswIndex:
        """The vector index: exact below ``hnsw_threshold`` vectors, HNSW at or above.

        ``index="flat"`` or ``"hnsw"`` fixes the kind instead. It loads on first use (numpy and
        usearch are imported only then), and the choice is made again whenever the store's
        vectors change.
        """
        generation = self._store.vector_generation()
        if self._index is None or generation != self._chosen_at:
            # heavy imports: only vector search needs them
            from vrom.index.exact import ExactIndex
            from vrom.index.hnsw import HnswIndex, cached_vector_count

            use_hnsw = self._kind == "hnsw"
            if self._kind == "auto":
                count = cached_vector_count(self._store)
                if count is None:
                    count = self._store.counts().vectors
                use_hnsw = count >= self._hnsw_threshold
            if use_hnsw:
                if not isinstance(self._index, HnswIndex):
                    self._close_index()
                    self._index = (
                        HnswIndex(self._store, self._metric)
                        if self._ef_search is None
                        else HnswIndex(self._store, self._metric, expansion_search=self._ef_search)
                    )
            elif not isinstance(self._index, ExactIndex):
                self._close_index()
                self._index = ExactIndex(self._store, self._metric)
            self._chosen_at = generation
        return self._index

    def close(self) -> None:
        """Let the index go, saving an HNSW graph's unsaved changes (the embedder stays open)."""
        self._close_index()
        self._chosen_at = -1

    def _close_index(self) -> None:
        if self._index is not None:
            self._index.close()
        self._index = None

    def _query(
        self, query: str, where: Mapping[str, Any] | Where | None
    ) -> tuple[npt.NDArray[np.float32], list[int] | None]:
        """Return the query's vector and the chunk ids the filter allows (None: all)."""
        parsed_where = as_filter(where)
        allowed = None if parsed_where is None else self._store.chunk_ids_matching(parsed_where)
        return self._embedder.embed_query(query), allowed

    def vector_search(
        self,
        query: str,
        k: int = 10,
        where: Mapping[str, Any] | Where | None = None,
        ef_search: int | None = None,
        *,
        per_document: bool = False,
    ) -> list[Hit]:
        """Return the ``k`` chunks nearest to the query's meaning, best first.

        ``ef_search`` widens the HNSW search for this query (ignored by exact search).
        ``per_document`` returns each document's nearest chunk only (``k`` documents).
        """
        check_k(k)
        check_ef_search(ef_search, k)
        vector, allowed = self._query(query, where)
        pool = 2 * k if per_document else k
        while True:
            ef = None if ef_search is None else max(ef_search, pool)
            nearest = self.index.search(vector, pool, allowed, ef)
            chunks = {c.chunk_id: c for c in self._store.get_chunks([i for i, _ in nearest])}
            kept = first_k(
                ((i, score, chunks[i].document_id) for i, score in nearest if i in chunks),
                k,
                itemgetter(2) if per_document else None,
            )
            if len(kept) == k or len(nearest) < pool or pool >= MAX_POOL:
                break
            pool = min(pool * 4, MAX_POOL)  # a few long documents filled the pool
        words = query_words(parse_query(query))
        return [make_hit(chunks[i], score, {"vector": score}, words) for i, score, _ in kept]

    def hybrid_search(
        self,
        query: str,
        k: int = 10,
        where: Mapping[str, Any] | Where | None = None,
        ef_search: int | None = None,
        *,
        per_document: bool = False,
    ) -> list[Hit]:
        """Return the ``k`` best chunks by reciprocal rank fusion of keyword and vector ranks.

        ``per_document`` returns each document's best chunk only (``k`` documents).
        """
        check_k(k)
        check_ef_search(ef_search, k)
        pool = max(50, k * CANDIDATE_FACTOR)
        parsed = parse_query(query)
        where = as_filter(where)
        vector, allowed = self._query(query, where)
        with self._store.snapshot():  # chunks are read from the state the ranks came from
            while True:
                fused, chunks, documents, full = self._fuse(
                    parsed, vector, allowed, where, pool, ef_search
                )
                scored = first_k(
                    sorted(
                        (
                            (parts["rrf"] * parts["prior"], i, parts, documents[i])
                            for i, parts in fused.items()
                        ),
                        key=lambda item: (-item[0], item[1]),
                    ),
                    k,
                    itemgetter(3) if per_document else None,
                )
                if len(scored) == k or not full or pool >= MAX_POOL:
                    break
                pool = min(pool * 4, MAX_POOL)  # a few long documents filled the pool
            chunks.update(
                (c.chunk_id, c)
                for c in self._store.get_chunks([i for _, i, _, _ in scored if i not in chunks])
            )
        words = query_words(parsed)
        return [
            make_hit(chunks[i], score, parts, words) for score, i, parts, _ in scored if i in chunks
        ]

    def _fuse(
        self,
        parsed: KeywordQuery,
        vector: npt.NDArray[np.float32],
        allowed: list[int] | None,
        where: Where | None,
        pool: int,
        ef_search: int | None,
    ) -> tuple[dict[int, dict[str, float]], dict[int, StoredChunk], dict[int, int], bool]:
        """Fuse ``pool`` keyword and vector candidates by rank.

        Returns each candidate's score parts (``rrf``, ``prior``, ``bm25``, ``vector``), the
        chunks read to learn their note's prior, each candidate's document id, and whether
        either list was full (more candidates exist).
        """
        keyword_rows = self._store.keyword_search(parsed, pool, where)
        ef = None if ef_search is None else max(ef_search, pool)
        nearest = self.index.search(vector, pool, allowed, ef)
        fused: dict[int, dict[str, float]] = {}
        priors: dict[int, float] = {}
        documents: dict[int, int] = {}
        for rank, row in enumerate(keyword_rows, start=1):
            parts = fused.setdefault(row.chunk_id, {})
            parts["bm25"] = row.bm25
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank)
            priors[row.chunk_id] = row.human_relevance_score
            documents[row.chunk_id] = row.document_id
        for rank, (chunk_id, score) in enumerate(nearest, start=1):
            parts = fused.setdefault(chunk_id, {})
            parts["vector"] = score
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank)
        chunks = {
            c.chunk_id: c for c in self._store.get_chunks([i for i in fused if i not in priors])
        }
        for chunk_id, chunk in chunks.items():
            priors[chunk_id] = chunk.human_relevance_score
            documents[chunk_id] = chunk.document_id
        for chunk_id in [i for i in fused if i not in priors]:
            del fused[chunk_id]  # deleted between the two retrievals
        for chunk_id, parts in fused.items():
            parts["prior"] = prior_factor(priors[chunk_id])
        full = len(keyword_rows) == pool or len(nearest) == pool
        return fused, chunks, documents, full


def check_ef_search(ef_search: int | None, k: int) -> None:
    """Raise `ValidationError` unless ``ef_search`` is None or an integer of at least ``k``."""
    if ef_search is None:
        return
    if isinstance(ef_search, bool) or not isinstance(ef_search, int) or ef_search < k:
        raise ValidationError(f"ef_search must be an integer of at least k={k}, not {ef_search!r}")


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is a search mode, else raise `ValidationError`."""
    if mode not in MODES:
        raise ValidationError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode
