"""Ranking chunks for the search core: keyword, vector and hybrid, inside the caller's snapshot.

`ChunkRanking` holds what a ranking reads (the store, the keyword ranker, the vector index and
its metric); `vrom.corpus.Corpus` calls it with one store state read (`vrom.store.StoreState`)
and one snapshot per search, so the chunks read are those the ranks came from. Fusion and pool
widening live in `vrom.search.fusion`; rerank, a mode of the same path, in `vrom.search.rerank`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

from vrom.results import Hit
from vrom.search.fusion import first_k, first_pool, fuse_arrays, widen
from vrom.search.keyword import KeywordRanker, make_hit, prior_factor
from vrom.search.query import query_words
from vrom.search.vector import VectorIndex
from vrom.store import KeywordQuery, Store, StoredChunk, Where

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Parts = dict[str, float]
"""A hit's score parts: ``bm25``, ``vector``, ``fused``, ``rrf``, ``prior`` (whichever took
part; see `vrom.search.fusion.fuse`)."""
Freshness = Callable[[Iterable[StoredChunk]], Mapping[str, bool]]
"""Whether the files of the chunks' documents still hold what was indexed, by path (a vault's:
`vrom.ingest.freshness.fresh_notes`): each hit's ``fresh``."""


@dataclass
class ChunkRanking:
    """The chunk rankings of one store; call them inside a store snapshot."""

    store: Store
    keyword: KeywordRanker
    index: VectorIndex
    metric: str
    freshness: Freshness | None = None

    def keyword_hits(
        self, parsed: KeywordQuery, k: int, where: Where | None, per_document: bool
    ) -> list[Hit]:
        """Return the ``k`` best chunks by BM25 times the human-relevance prior."""
        with self.store.snapshot():  # the chunks read last are the ones ranked first
            ranked = self.keyword.ranked(parsed, k, where, per_document=per_document)
            # whole chunks are read only for the hits returned
            chunks = self._chunks([row.chunk_id for _, row in ranked])
        ranks = (
            (
                row.chunk_id,
                score,
                {"bm25": row.bm25, "prior": prior_factor(row.human_relevance_score)},
            )
            for score, row in ranked
        )
        return self.hits(chunks, ranks, parsed, "bm25")

    def vector_hits(
        self,
        parsed: KeywordQuery,
        vector: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None,
        ef_search: int | None,
        per_document: bool,
    ) -> list[Hit]:
        """Return the ``k`` chunks nearest ``vector`` among ``allowed`` (None: all).

        Rows are read only as far as the hits need: the first ``k`` candidates that exist are
        most often the hits, so they are read whole at once; with ``per_document`` each later
        candidate's document is looked up (read light) only when those ``k`` hold fewer than
        ``k`` documents, unless the keyword copy knows every candidate's document already.
        """
        chunks: dict[int, StoredChunk] = {}
        owners: dict[int, tuple[int, float]] = {}  # candidate -> (document, prior)
        asked: set[int] = set()  # candidates read or looked up, those gone included

        def read(ids: list[int], whole: bool) -> None:
            unseen = [i for i in ids if i not in asked]
            asked.update(unseen)
            if not unseen:
                return
            if whole:
                found = self._chunks(unseen)
                chunks.update(found)
                owners.update(
                    (i, (c.document_id, c.human_relevance_score)) for i, c in found.items()
                )
            else:
                owners.update(self._owners(unseen))

        def rank(pool: int) -> tuple[list[tuple[int, float, int]], bool]:
            ef = None if ef_search is None else max(ef_search, pool)
            nearest = self.index.nearest(vector, pool, allowed, ef)
            ids = [i for i, _ in nearest]
            copied = None
            if per_document:  # in memory, when the keyword copy is current: no read at all
                unseen = [i for i in ids if i not in asked]
                copied = self.keyword.owners(unseen) if unseen else None
                if copied is not None:
                    asked.update(unseen)
                    owners.update(copied)
            if copied is None:
                read(ids[:k] if per_document else ids, whole=True)
            kept = first_k(
                ((i, score, owners[i][0]) for i, score in nearest if i in owners),
                k,
                itemgetter(2) if per_document else None,
            )
            if per_document and len(kept) < k:  # chunks of the same documents: look further
                read(ids, whole=False)
                kept = first_k(
                    ((i, score, owners[i][0]) for i, score in nearest if i in owners),
                    k,
                    itemgetter(2),
                )
            return kept, len(nearest) == pool

        with self.store.snapshot():  # the chunks read are the ones ranked
            kept = widen(rank, k, 2 * k if per_document else k)
            unread = [i for i, _, _ in kept if i not in chunks]
            if unread:
                chunks.update(self._chunks(unread))
        # the score is the metric's similarity: cosine, dot, or minus the euclidean distance
        ranks = ((i, score, {"vector": score}) for i, score, _ in kept)
        return self.hits(chunks, ranks, parsed, self.metric)

    def hybrid_hits(
        self,
        parsed: KeywordQuery,
        vector: npt.NDArray[np.float32],
        k: int,
        where: Where | None,
        allowed: Sequence[int] | None,
        ef_search: int | None,
        per_document: bool,
        coverage: tuple[int, int],
    ) -> list[Hit]:
        """Return the ``k`` best chunks by keyword and vector scores fused; ``coverage`` is
        (chunk vectors, chunks): while embedding runs, the vector ranking sees only the chunks
        that have vectors."""
        import numpy as np  # loaded with the vectors

        owners: dict[int, tuple[int, float]] = {}  # candidate -> (document, prior)
        vectors, total = coverage
        share = min(1.0, vectors / total) if total else 1.0
        passing = None if allowed is None or share >= 1 else set(allowed)

        def rank(pool: int) -> tuple[list[tuple[float, int, Parts, int]], bool]:
            keyword_rows = self.keyword.search(parsed, pool, where)
            ef = None if ef_search is None else max(ef_search, pool)
            nearest = self.index.nearest(vector, pool, allowed, ef)
            unseen: set[int] = set()
            if share < 1:  # a keyword hit without a vector yet: its keyword part stands in
                seeable = [row.chunk_id for row in keyword_rows]
                if passing is not None:
                    seeable = [i for i in seeable if i in passing]
                have = (
                    {i for i, _ in self.index.nearest(vector, len(seeable), seeable, None)}
                    if seeable
                    else set()
                )
                unseen = {row.chunk_id for row in keyword_rows if row.chunk_id not in have}
            fused = fuse_arrays(
                np.fromiter((r.chunk_id for r in keyword_rows), np.int64, len(keyword_rows)),
                np.fromiter((r.bm25 for r in keyword_rows), np.float64, len(keyword_rows)),
                np.fromiter((i for i, _ in nearest), np.int64, len(nearest)),
                np.fromiter((score for _, score in nearest), np.float64, len(nearest)),
                share,
                np.fromiter((r.chunk_id in unseen for r in keyword_rows), bool) if unseen else None,
            )
            owners.update(
                (row.chunk_id, (row.document_id, row.human_relevance_score)) for row in keyword_rows
            )
            ids = fused.ids.tolist()
            if not ids:
                return [], False
            # vector-only candidates: their document and its prior
            owners.update(self._owners([i for i in ids if i not in owners]))
            known = [i in owners for i in ids]  # the others were deleted between the retrievals
            if not all(known):
                fused = fused.take(np.fromiter(known, bool, len(known)))
            cited = fused.ids
            if per_document:  # each document matched by its best chunk in each ranking
                fused, cited = fused.by_group(
                    np.fromiter((owners[i][0] for i in cited.tolist()), np.int64, len(cited))
                )
                documents = fused.ids.tolist()
            else:
                documents = [owners[i][0] for i in cited.tolist()]
            relevance = [owners[i][1] for i in cited.tolist()]
            factors = {score: prior_factor(score) for score in set(relevance)}
            priors = np.fromiter((factors[r] for r in relevance), np.float64, len(relevance))
            scores = fused.fused * priors
            kept: list[tuple[float, int, Parts, int]] = []
            for at in np.lexsort((cited, -fused.rrf, -scores))[:k].tolist():
                parts = fused.parts(at)
                parts["prior"] = float(priors[at])
                kept.append((float(scores[at]), int(cited[at]), parts, documents[at]))
            return kept, len(keyword_rows) == pool or len(nearest) == pool

        with self.store.snapshot():  # chunks are read from the state the ranks came from
            scored = widen(rank, k, first_pool(k))
            chunks = self._chunks([i for _, i, _, _ in scored])
        return self.hits(
            chunks, ((i, score, parts) for score, i, parts, _ in scored), parsed, "fused"
        )

    def hits(
        self,
        chunks: Mapping[int, StoredChunk],
        ranks: Iterable[tuple[int, float, Parts]],
        parsed: KeywordQuery,
        kind: str,
    ) -> list[Hit]:
        """Return the hits of the ranked ``(chunk id, score, parts)`` whose chunks were read
        (those deleted since are left out), each marked ``fresh`` when the ranking knows how
        to check its file (once a document)."""
        found = [(chunks[i], score, parts) for i, score, parts in ranks if i in chunks]
        fresh = {} if self.freshness is None else self.freshness(c for c, _, _ in found)
        words = query_words(parsed)
        return [
            make_hit(chunk, score, parts, words, kind=kind, fresh=fresh.get(chunk.path))
            for chunk, score, parts in found
        ]

    def _chunks(self, chunk_ids: list[int]) -> dict[int, StoredChunk]:
        """Return the whole chunks of the hits returned, by id, from one read."""
        return {c.chunk_id: c for c in self.store.documents.get_chunks(chunk_ids)}

    def _owners(self, chunk_ids: list[int]) -> dict[int, tuple[int, float]]:
        """Return ranked candidates' (document id, prior), those gone left out: from the
        keyword copy's arrays when it is current, else read light (no text, no metadata)."""
        if not chunk_ids:
            return {}
        owners = self.keyword.owners(chunk_ids)
        return self.store.documents.chunk_owners(chunk_ids) if owners is None else owners
