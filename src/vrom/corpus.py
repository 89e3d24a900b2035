"""`Corpus`: the search core every facade stands on.

A corpus is one store, one embedder binding and the vector indexes over the store's chunk and
memory vectors. `Corpus.search` is the only ranking path for chunks (keyword, vector, hybrid,
rerank), and `Corpus.recall` the only one for memories; `Vault`, `Collection`, `AgentMemory`
and `Memories` add their own words (notes and links; add/remove; mount/evict; remember/archive)
around them and never rank by themselves.

    corpus = Corpus(store, EmbedderBinding.of(Embedder.fake()))
    corpus.embed_missing()
    corpus.search("network switch", k=5, mode="hybrid")
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from vrom.embed import Embedder, EmbedderBinding
from vrom.errors import NotFoundError, ValidationError, shown
from vrom.index import (
    ENCODED_BYTES,
    GRAPH_SUFFIX,
    MATRIX_SUFFIX,
    MEMORY_GRAPH_SUFFIX,
    MEMORY_MATRIX_SUFFIX,
)
from vrom.ingest.embed_job import claimed
from vrom.ingest.embedding import (
    EmbedProgress,
    bind_embedder,
    bind_memory_embedder,
    embed_missing_chunks,
    embed_missing_memories,
    stored_fingerprint,
)
from vrom.results import Hit, SearchReport, VectorInfo
from vrom.search.fusion import first_k, first_pool, fuse_arrays, fuse_rankings, widen
from vrom.search.keyword import KeywordRanker, check_k, make_hit, prior_factor, rank_keyword
from vrom.search.query import as_filter, check_query, parse_query, query_words
from vrom.search.vector import HNSW_THRESHOLD, VectorIndex, check_ef_search, check_mode
from vrom.store import (
    KeywordQuery,
    MemoryFilter,
    MemoryKeywordRow,
    MemoryRecord,
    Store,
    StoredChunk,
    Where,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Parts = dict[str, float]
"""A hit's score parts: ``bm25``, ``vector``, ``fused``, ``rrf``, ``prior`` (whichever took
part; see `vrom.search.fusion.fuse`)."""


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


class Corpus:
    """A store searched by meaning and keyword through one embedder; see the module docstring.

    ``index`` (``auto``, ``flat``, ``hnsw``), ``metric``, ``hnsw_threshold`` and ``ef_search``
    configure the vector indexes, or ``vector_index`` is one opened already (a pack's graph);
    ``encoding`` (``float32``, ``int8``, None: the store's) the vectors written; ``turns``
    embeds each document with the turns before it from its source (a collection's documents:
    `vrom.ingest.embedding.context_text`). The embedder loads when first needed.
    """

    def __init__(
        self,
        store: Store,
        embedder: EmbedderBinding,
        *,
        index: str = "auto",
        metric: str = "cosine",
        hnsw_threshold: int = HNSW_THRESHOLD,
        ef_search: int | None = None,
        encoding: str | None = None,
        vector_index: VectorIndex | None = None,
        turns: bool = False,
    ) -> None:
        self.store = store
        self._turns = turns
        self._binding = embedder
        self._encoding = encoding
        self._metric = metric
        self._checked: tuple[int, str] | None = None  # (vector generation, `_vector_state`)
        self._memories_embedded: tuple[int, int] | None = None  # (newest key, vector generation)
        options: dict[str, Any] = {
            "metric": metric,
            "kind": index,
            "hnsw_threshold": hnsw_threshold,
            "ef_search": ef_search,
        }
        self.index = vector_index or VectorIndex(
            store.vectors,
            store.sidecar(GRAPH_SUFFIX),
            matrix_cache=store.sidecar(MATRIX_SUFFIX),
            **options,
        )
        self._memory_index = VectorIndex(
            store.memories.vectors,
            store.sidecar(MEMORY_GRAPH_SUFFIX),
            matrix_cache=store.sidecar(MEMORY_MATRIX_SUFFIX),
            **options,
        )
        self.keyword = KeywordRanker(store.documents)
        self._counted: tuple[tuple[int, bytes], tuple[int, int]] | None = None  # see `_counts`

    # -- the model -------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder | None:
        """The embedder of documents, memories and queries (None: keyword only); loads lazily."""
        return self._binding.get()

    def require_embedder(self, what: str) -> Embedder:
        """Return the embedder, or raise `ValidationError` saying ``what`` needs one."""
        embedder = self.embedder
        if embedder is None:
            raise ValidationError(f"{what} needs an embedder, and none is configured")
        return embedder

    def bind(self, *, rebuild: bool = False) -> None:
        """Make the embedder the store's model; refuse another model's vectors unless rebuilding.

        ``rebuild`` drops every chunk and memory vector, to be embedded again.
        """
        embedder = self.require_embedder("embedding")
        bind_embedder(self.store, embedder, rebuild=rebuild, encoding=self._encoding)
        if rebuild:
            bind_memory_embedder(self.store, embedder, rebuild=True)

    def embed_missing(
        self, progress: EmbedProgress | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        """Embed every chunk without a vector, a committed batch at a time; return how many.

        ``stop()`` is asked before each batch (True ends the run; the next one resumes).
        While it runs it holds the store's embedding claim (`vrom.ingest.embed_job`): a run
        in another process raises `EmbeddingBusy` instead of writing the same vectors twice.
        """
        embedder = self.require_embedder("embedding")
        bind_embedder(self.store, embedder, encoding=self._encoding)
        with claimed(self.store) as claim:
            counts = self.store.counts()

            def report(done: int, total: int) -> None:
                claim.report(counts.vectors + done, counts.chunks, done)
                if progress is not None:
                    progress(done, total)

            done = embed_missing_chunks(self.store, embedder, report, stop=stop, turns=self._turns)
            claim.report(counts.vectors + done, counts.chunks, done, final=True)
            return done

    @property
    def embedding_configured(self) -> bool:
        """True unless the corpus is keyword only (known without loading the model)."""
        return self._binding.configured

    def has_vectors(self) -> bool:
        """True when there is an embedder and the store holds chunk vectors (of any model)."""
        return (
            self._binding.configured
            and self.embedder is not None
            and stored_fingerprint(self.store) is not None
            and self.store.vectors.has_any()
        )

    def default_mode(self) -> str:
        """Return ``hybrid`` when the store holds vectors of the configured model, else keyword.

        Another model's vectors raise `ModelError` (a search by meaning would too).
        """
        return "hybrid" if self._vector_state() == "ready" else "keyword"

    def _vector_state(self) -> str:
        """Return whether searches by meaning can run: ``ready``; ``empty`` (nothing stored
        yet: nothing to find); ``no-model`` (keyword only); ``no-vectors`` (documents, but no
        vector yet). Another model's vectors raise `ModelError`, naming both models.

        Checked once per vector generation: the model can only change with a rebuild, which
        clears the vectors and so moves the generation.
        """
        generation = self.store.vectors.generation()
        if self._checked is not None and self._checked[0] == generation:
            return self._checked[1]
        embedder = self.embedder
        if embedder is None:
            state = "no-model"
        elif not self.store.vectors.has_any():
            state = "no-vectors" if self.store.documents.count() else "empty"
        else:
            stored = stored_fingerprint(self.store)
            if stored is None:
                state = "no-vectors"
            else:
                if stored != embedder.fingerprint:
                    bind_embedder(self.store, embedder)  # raises, naming both models and the fix
                state = "ready"
        self._checked = (generation, state)
        return state

    def _why_not(self, state: str, mode: str) -> str:
        if state == "no-model":
            return (
                f"{mode} search needs an embedder (an embedding model), and none is configured:"
                " search by keyword, or choose a model (--embedder, $VROM_EMBEDDER)"
            )
        return (
            f"{mode} search needs vectors, and none of the store's chunks has one yet: run"
            " 'vrom embed' (or let indexing finish), or search by keyword"
        )

    def vector_info(self) -> VectorInfo:
        """Return the store's chunk vectors and how searches by meaning run on them now: the
        model, how vectors are stored, the index settings and the state of the graph file.

        Read from the store and the graph's sidecar: no model and no index is loaded.
        """
        with self.store.snapshot():
            vectors = self.store.vectors.count()
            chunks = self.store.documents.chunk_count()
            memory_vectors = self.store.memories.vectors.count()
            fingerprint = stored_fingerprint(self.store)
            dtype = self.store.vectors.encoding()
            mode = self.index.mode()
            graph = self.index.graph()
        dims = None if fingerprint is None else fingerprint.dims
        return VectorInfo(
            vector_mode=mode,
            vectors=vectors,
            chunks=chunks,
            dims=dims,
            dtype=dtype,
            bytes_per_vector=None if dims is None else ENCODED_BYTES[dtype](dims),
            embedding_model=None if fingerprint is None else fingerprint.describe(),
            embedding_fingerprint=None
            if fingerprint is None
            else {**dataclasses.asdict(fingerprint), "id": fingerprint.digest()},
            index_settings=self.index.settings(),
            graph=graph,
            memory_vectors=memory_vectors,
        )

    # -- chunks ----------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        where: Mapping[str, Any] | Where | None = None,
        mode: str | None = None,
        *,
        per_document: bool = False,
        ef_search: int | None = None,
    ) -> list[Hit]:
        """Return the ``k`` best chunks for ``query``, best first.

        ``mode``: ``keyword`` (BM25 with the human-relevance prior), ``vector`` (nearest in
        meaning; ``score`` is the cosine similarity), ``hybrid`` (both fused,
        `vrom.search.fusion.fuse`, times the prior), ``rerank`` (keyword candidates rescored by
        meaning, prior and text quality); None is `default_mode`. ``where`` filters inside every
        retriever, so ``k`` hits come back whenever ``k`` chunks pass it. ``per_document`` keeps
        each document's best chunk (``k`` documents; hybrid fuses by document, its best chunk
        in each ranking: `FusedCandidates.by_group`). ``ef_search`` widens an HNSW search. A
        blank ``query`` is a `ValidationError`.
        """
        check_query(query)
        check_k(k)
        check_ef_search(ef_search, k)
        mode = check_mode(self.default_mode() if mode is None else mode)
        parsed, where_filter = parse_query(query), as_filter(where)
        if mode == "keyword":
            return self._keyword(parsed, k, where_filter, per_document)
        state = self._vector_state()
        if state == "empty":
            return []
        if state == "no-model":
            raise ValidationError(self._why_not(state, mode))
        if state == "no-vectors":
            raise NotFoundError(self._why_not(state, mode))
        vector = self.require_embedder(f"{mode} search").embed_query(query)
        if mode == "rerank":
            from vrom.search.rerank import rerank_search  # numpy: only with vectors

            return rerank_search(
                self.store, vector, parsed, k, where_filter, per_document, self.keyword.search
            )
        allowed = (
            None if where_filter is None else self.store.documents.chunk_ids_matching(where_filter)
        )
        if mode == "vector":
            return self._vector(parsed, vector, k, allowed, ef_search, per_document)
        return self._hybrid(parsed, vector, k, where_filter, allowed, ef_search, per_document)

    def search_report(
        self,
        query: str,
        k: int = 10,
        where: Mapping[str, Any] | Where | None = None,
        mode: str | None = None,
        *,
        per_document: bool = False,
        ef_search: int | None = None,
    ) -> SearchReport:
        """Return what `search` finds, and how: the mode that ran, why it is not the one asked
        for, and how many chunks have vectors.

        Where `search` refuses a mode by meaning that cannot run (no embedder, no vector yet),
        this searches by keyword and says why in ``fallback``; the default mode says so too
        when vectors exist but no embedder is configured, or an embedder but no vector yet.
        Another model's vectors are still refused: a mistake to fix, not a state to work around.
        """
        check_query(query)  # before the vector state is read: a blank query is the problem
        fallback = None
        if mode is None:  # hybrid once it can run; keyword-only stores are not told off
            state = self._vector_state()
            ran = "hybrid" if state == "ready" else "keyword"
            if state == "no-vectors" or (state == "no-model" and self.store.vectors.has_any()):
                fallback = self._why_not(state, "hybrid")
        else:
            ran = check_mode(mode)
            if ran != "keyword":
                state = self._vector_state()
                if state in ("no-model", "no-vectors"):
                    ran, fallback = "keyword", self._why_not(state, ran)
        hits = self.search(query, k, where, ran, per_document=per_document, ef_search=ef_search)
        vectors, chunks = self._counts()
        return SearchReport(hits, ran, fallback, vectors, chunks)

    def _keyword(
        self, parsed: KeywordQuery, k: int, where: Where | None, per_document: bool
    ) -> list[Hit]:
        with self.store.snapshot():  # the chunks read last are the ones ranked first
            ranked = rank_keyword(self.keyword.search, parsed, k, where, per_document=per_document)
            # whole chunks are read only for the hits returned
            chunks = self._chunks([row.chunk_id for _, row in ranked])
        words = query_words(parsed)
        return [
            make_hit(
                chunks[row.chunk_id],
                score,
                {"bm25": row.bm25, "prior": prior_factor(row.human_relevance_score)},
                words,
                kind="bm25",
            )
            for score, row in ranked
            if row.chunk_id in chunks
        ]

    def _vector(
        self,
        parsed: KeywordQuery,
        vector: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None,
        ef_search: int | None,
        per_document: bool,
    ) -> list[Hit]:
        chunks: dict[int, StoredChunk] = {}
        owners: dict[int, tuple[int, float]] = {}  # candidate -> (document, prior)

        def rank(pool: int) -> tuple[list[tuple[int, float, int]], bool]:
            ef = None if ef_search is None else max(ef_search, pool)
            nearest = self.index.nearest(vector, pool, allowed, ef)
            unseen = [i for i, _ in nearest if i not in owners]
            if per_document:  # a wider pool than the hits: only each candidate's document
                owners.update(self._owners(unseen))
            else:  # the first k candidates that exist are the hits: read them whole
                chunks.update(self._chunks(unseen))
                owners.update(
                    (i, (chunks[i].document_id, chunks[i].human_relevance_score))
                    for i in unseen
                    if i in chunks
                )
            kept = first_k(
                ((i, score, owners[i][0]) for i, score in nearest if i in owners),
                k,
                itemgetter(2) if per_document else None,
            )
            return kept, len(nearest) == pool

        with self.store.snapshot():  # the chunks read are the ones ranked
            kept = widen(rank, k, 2 * k if per_document else k)
            unread = [i for i, _, _ in kept if i not in chunks]
            if unread:
                chunks.update(self._chunks(unread))
        words = query_words(parsed)
        # the score is the metric's similarity: cosine, dot, or minus the euclidean distance
        return [
            make_hit(chunks[i], score, {"vector": score}, words, kind=self._metric)
            for i, score, _ in kept
            if i in chunks
        ]

    def _hybrid(
        self,
        parsed: KeywordQuery,
        vector: npt.NDArray[np.float32],
        k: int,
        where: Where | None,
        allowed: Sequence[int] | None,
        ef_search: int | None,
        per_document: bool,
    ) -> list[Hit]:
        import numpy as np  # loaded with the vectors

        owners: dict[int, tuple[int, float]] = {}  # candidate -> (document, prior)
        # while embedding runs, the vector ranking sees only the chunks that have vectors
        vectors, total = self._counts()
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
        words = query_words(parsed)
        return [
            make_hit(chunks[i], score, parts, words, kind="fused")
            for score, i, parts, _ in scored
            if i in chunks
        ]

    def _counts(self) -> tuple[int, int]:
        """Return (chunk vectors, chunks) in the store.

        Counting reads every row of both tables (vectors are wide: ~7 ms on 11k chunks), so the
        counts are kept until the vector generation or the keyword index's version moves: every
        write of a chunk changes the one, of a vector the other. A store without a keyword
        version (PostgreSQL) is counted every time.
        """
        with self.store.snapshot():
            version = self.keyword.version()
            key = None if version is None else (self.store.vectors.generation(), version)
            if key is not None and self._counted is not None and self._counted[0] == key:
                return self._counted[1]
            counts = (self.store.vectors.count(), self.store.documents.chunk_count())
        self._counted = None if key is None else (key, counts)
        return counts

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

    # -- memories --------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        k: int,
        where: MemoryFilter,
        mode: str | None = None,
        half_life_days: float | None = None,
    ) -> builtins.list[tuple[MemoryRecord, float, Parts]]:
        """Return the ``k`` memories best matching ``query`` with their score and its parts.

        ``mode``: ``hybrid`` (BM25 and cosine similarity fused, `vrom.search.fusion.fuse`;
        the default with an embedder), ``keyword`` (BM25 alone; the default without one) or
        ``vector``. With ``half_life_days`` a memory's score is multiplied by ``recency``,
        ``0.5 ** (age in days / half_life_days)`` (its age from its timestamp to now; 1 for a
        memory timed in the future), among the candidates the retrievers found. Memories not
        embedded yet are embedded first. Ties go to the newer memory.
        """
        check_query(query)
        check_k(k)
        embedder = self.embedder
        if mode is None:
            mode = "keyword" if embedder is None else "hybrid"
        elif mode not in ("keyword", "vector", "hybrid"):
            raise ValidationError(f"mode must be one of keyword, vector, hybrid, not {shown(mode)}")
        pool = first_pool(k)
        parsed = parse_query(query)
        keyword_rows = (
            [] if mode == "vector" else self.store.memories.keyword_search(parsed, pool, where)
        )
        records = {row.memory.id: row.memory for row in keyword_rows}
        # the candidates: their ids, scores and RRF (ties), and their score parts by position
        ids: list[str]
        scores: list[float]
        rrf: list[float] | None = None
        parts_at: Callable[[int], Parts]
        if mode == "keyword":
            ids = [row.memory.id for row in keyword_rows]
            scores = [row.bm25 for row in keyword_rows]
            parts_at = functools.partial(_one_part, "bm25", scores)
        else:
            embedder = self.require_embedder(f"{mode} recall")
            self._embed_new_memories(embedder)
            allowed = self.store.memories.keys_matching(where)
            nearest = self._memory_index.nearest(embedder.embed_query(query), pool, allowed)
            by_key = self.store.memories.by_keys([key for key, _ in nearest])
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

    def _embed_new_memories(self, embedder: Embedder) -> None:
        """Embed the memories without a vector, unless none was added and no vector dropped
        since the last time all had one: finding none reads every memory (~9 ms at 5,000)."""
        vectors = self.store.memories.vectors
        marker = (self.store.memories.newest_key(), vectors.generation())
        if marker == self._memories_embedded:
            return
        embed_missing_memories(self.store, embedder)
        # read again: embedding moved the generation; a memory added meanwhile moves the key
        self._memories_embedded = (marker[0], vectors.generation())

    # -- life ------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Catch the vector index up with what other processes wrote."""
        self.index.refresh()

    def close(self) -> None:
        """Save and let go of the indexes, close a model vrom made, and close the store."""
        try:
            self.index.close()
            self._memory_index.close()
        finally:
            self._binding.close()
            self.store.close()
