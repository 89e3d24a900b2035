"""`Corpus`: the search core every facade stands on.

A corpus is one store, one embedder binding and the vector indexes over the store's chunk and
memory vectors. `Corpus.search_report` (and `Corpus.search`, its hits) is the one entry point for
chunks in every mode (keyword, vector, hybrid, rerank) and `Corpus.recall` the one for memories:
each validates the query once, then reads one store state (`vrom.store.Store.state`) and ranks
in one snapshot (`vrom.search.ranking`, `vrom.search.recall`); `Vault`, `Collection`, `AgentMemory`
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
from collections.abc import Callable, Mapping
from typing import Any

from vrom.embed import Embedder, EmbedderBinding
from vrom.embed.rerank import Reranking
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
    EMBED_BATCH,
    EmbedProgress,
    bind_embedder,
    bind_memory_embedder,
    embed_missing_chunks,
    embed_missing_memories,
    memories_since,
    stored_fingerprint,
)
from vrom.results import Hit, SearchReport, VectorInfo
from vrom.search.keyword import KeywordRanker, check_k
from vrom.search.query import as_filter, check_query, parse_query
from vrom.search.ranking import ChunkRanking, Freshness
from vrom.search.recall import MemoryKeyword, Parts, rank_memories
from vrom.search.reranking import rerank_depth, reranked
from vrom.search.vector import HNSW_THRESHOLD, VectorIndex, check_ef_search, check_mode
from vrom.store import KeywordQuery, MemoryFilter, MemoryRecord, Store, StoreState, Where


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
        self._memories_looked: tuple[int, int] | None = None  # (newest key, vector change) then
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
        self.memory_keyword = MemoryKeyword(store.memories)
        self._ranking = ChunkRanking(store, self.keyword, self.index, metric)
        self._counted: tuple[tuple[int, bytes], tuple[int, int]] | None = None  # see `_counts`
        self.reranking = Reranking()  # what ``rerank`` reorders with: a facade's choice

    @property
    def freshness(self) -> Freshness | None:
        """How each hit's ``fresh`` is decided: whether its document's file still holds what
        was indexed, checked from the state read with the hit (a vault sets it:
        `vrom.ingest.freshness.fresh_notes`); None, for stores of no files: ``fresh`` is None."""
        return self._ranking.freshness

    @freshness.setter
    def freshness(self, check: Freshness | None) -> None:
        self._ranking.freshness = check

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
        with self.store.snapshot():
            return "hybrid" if self._vector_state(self.store.state()) == "ready" else "keyword"

    def _vector_state(self, store_state: StoreState) -> str:
        """Return whether searches by meaning can run: ``ready``; ``empty`` (nothing stored
        yet: nothing to find); ``no-model`` (keyword only); ``no-vectors`` (documents, but no
        vector yet). Another model's vectors raise `ModelError`, naming both models.

        Checked once per vector generation: the model can only change with a rebuild, which
        clears the vectors and so moves the generation.
        """
        generation = store_state.vector_generation
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

    # -- the one search entry point --------------------------------------------------------

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
        """Return the ``k`` best chunks for ``query``, best first (`search_report`'s hits,
        except that a mode by meaning that cannot run is refused, not run by keyword).

        ``mode``: ``keyword`` (BM25 with the human-relevance prior), ``vector`` (nearest in
        meaning; ``score`` is the cosine similarity), ``hybrid`` (both fused,
        `vrom.search.fusion.fuse`, times the prior), ``rerank`` (keyword candidates rescored by
        meaning, prior and text quality); None is `default_mode`. ``where`` filters inside every
        retriever, so ``k`` hits come back whenever ``k`` chunks pass it. ``per_document`` keeps
        each document's best chunk (``k`` documents; hybrid fuses by document, its best chunk
        in each ranking: `FusedCandidates.by_group`). ``ef_search`` widens an HNSW search. A
        blank ``query`` is a `ValidationError`.
        """
        return self._searched(query, k, where, mode, per_document, ef_search, report=False)[0]

    def search_report(
        self,
        query: str,
        k: int = 10,
        where: Mapping[str, Any] | Where | None = None,
        mode: str | None = None,
        *,
        per_document: bool = False,
        ef_search: int | None = None,
        fallback: bool = True,
        rerank: bool | int = False,
    ) -> SearchReport:
        """Return what `search` finds, and how: the mode that ran, why it is not the one asked
        for, and how many chunks have vectors.

        Where `search` refuses a mode by meaning that cannot run (no embedder, no vector yet),
        this searches by keyword and says why in ``fallback`` (with ``fallback=False`` it
        refuses as `search` does); the default mode says so too when vectors exist but no
        embedder is configured, or an embedder but no vector yet. Another model's vectors are
        still refused: a mistake to fix, not a state to work around. ``rerank`` (True, or a
        number of candidates) reorders the first hits with `reranking` (`vrom.search.reranking`).
        """
        depth, wide = rerank_depth(rerank, k, self.reranking.reranker, ef_search)
        hits, ran, why, counts = self._searched(
            query, depth or k, where, mode, per_document, wide, report=True, degrade=fallback
        )
        assert counts is not None
        report = SearchReport(hits, ran, why, *counts)
        return reranked(report, self.reranking.reranker, query, k, rerank) if depth else report

    def _searched(
        self,
        query: str,
        k: int,
        where: Mapping[str, Any] | Where | None,
        mode: str | None,
        per_document: bool,
        ef_search: int | None,
        *,
        report: bool,
        degrade: bool = False,
    ) -> tuple[list[Hit], str, str | None, tuple[int, int] | None]:
        """Return the hits, the mode that ran, why it is not the one asked for, and (with
        ``report``) the vector coverage: validated once, ranked in one snapshot from one read
        of the store's state (`vrom.store.Store.state`), in every mode. ``degrade`` runs an
        asked mode by meaning that cannot run by keyword instead of refusing it."""
        check_query(query)  # before the store is read: a blank query is the problem
        check_k(k)
        check_ef_search(ef_search, k)
        asked = None if mode is None else check_mode(mode)
        parsed, where_filter = parse_query(query), as_filter(where)
        with self.store.snapshot():
            state = self.store.state()
            vector_state = "" if asked == "keyword" else self._vector_state(state)
            ran, fallback = self._mode_to_run(asked, vector_state, report=report, degrade=degrade)
            # counted once a search (a store without a keyword version counts every search)
            counts = self._counts(state) if report or ran == "hybrid" else None
            hits = self._ranked(
                ran, vector_state, query, parsed, k, where_filter, per_document, ef_search, counts
            )
        return hits, ran, fallback, counts

    def _mode_to_run(
        self, asked: str | None, vector_state: str, *, report: bool, degrade: bool
    ) -> tuple[str, str | None]:
        """Return the mode to run and why it is not the one asked for (None: as asked)."""
        if asked is None:  # hybrid once it can run; keyword-only stores are not told off
            ran = "hybrid" if vector_state == "ready" else "keyword"
            if report and (
                vector_state == "no-vectors"
                or (vector_state == "no-model" and self.store.vectors.has_any())
            ):
                return ran, self._why_not(vector_state, "hybrid")
            return ran, None
        if degrade and asked != "keyword" and vector_state in ("no-model", "no-vectors"):
            return "keyword", self._why_not(vector_state, asked)
        return asked, None

    def _ranked(
        self,
        mode: str,
        vector_state: str,
        query: str,
        parsed: KeywordQuery,
        k: int,
        where: Where | None,
        per_document: bool,
        ef_search: int | None,
        counts: tuple[int, int] | None,
    ) -> list[Hit]:
        """Return the hits of ``mode`` (inside the search's snapshot); ``counts`` is the
        search's (chunk vectors, chunks), for hybrid's share of chunks with vectors."""
        if mode == "keyword":
            return self._ranking.keyword_hits(parsed, k, where, per_document)
        if vector_state == "empty":
            return []
        if vector_state == "no-model":
            raise ValidationError(self._why_not(vector_state, mode))
        if vector_state == "no-vectors":
            raise NotFoundError(self._why_not(vector_state, mode))
        vector = self.require_embedder(f"{mode} search").embed_query(query)
        if mode == "rerank":
            from vrom.search.rerank import rerank_search  # numpy: only with vectors

            return rerank_search(
                self.store,
                vector,
                parsed,
                k,
                where,
                per_document,
                self.keyword.search,
                self._ranking.freshness,
            )
        allowed = None if where is None else self.store.documents.chunk_ids_matching(where)
        if mode == "vector":
            return self._ranking.vector_hits(parsed, vector, k, allowed, ef_search, per_document)
        assert counts is not None  # counted for every hybrid search
        return self._ranking.hybrid_hits(
            parsed, vector, k, where, allowed, ef_search, per_document, counts
        )

    def _counts(self, state: StoreState) -> tuple[int, int]:
        """Return (chunk vectors, chunks) in the store, in the caller's snapshot.

        Counting reads every row of both tables (vectors are wide: ~7 ms on 11k chunks), so the
        counts are kept until the vector generation or the keyword index's version moves: every
        write of a chunk changes the one, of a vector the other. A store without a keyword
        version is counted every time.
        """
        version = state.keyword_version
        key = None if version is None else (state.vector_generation, version)
        if key is not None and self._counted is not None and self._counted[0] == key:
            return self._counted[1]
        counts = (self.store.vectors.count(), self.store.documents.chunk_count())
        self._counted = None if key is None else (key, counts)
        return counts

    # -- memories --------------------------------------------------------------------------

    def recall_mode(self, mode: str | None) -> str:
        """Return the mode `recall` runs for ``mode``: ``hybrid`` by default with an embedder,
        else ``keyword``; a mode other than keyword, vector, hybrid is a `ValidationError`."""
        if mode is None:
            return "keyword" if self.embedder is None else "hybrid"
        if mode not in ("keyword", "vector", "hybrid"):
            raise ValidationError(f"mode must be one of keyword, vector, hybrid, not {shown(mode)}")
        return mode

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
        embedded yet are embedded first. Ties go to the newer memory. Like `search`, it is
        validated once and ranked in one snapshot from one read of the store's state.
        """
        check_query(query)
        check_k(k)
        embedder = self.embedder
        mode = self.recall_mode(mode)
        if mode != "keyword":
            embedder = self.require_embedder(f"{mode} recall")
        parsed = parse_query(query)
        ranked = functools.partial(
            rank_memories, self.store, self._memory_index, self.memory_keyword, parsed
        )
        if embedder is None or mode == "keyword":  # no state to check: ranked, then read
            with self.store.snapshot():
                return ranked(None, k, where, mode, half_life_days)
        for attempt in range(2):
            with self.store.snapshot():
                state = self.store.state()
                marker = (state.newest_memory_key, state.memory_vector_generation)
                if marker == self._memories_embedded or attempt:
                    vector = embedder.embed_query(query)
                    return ranked(vector, k, where, mode, half_life_days)
            # new memories, or vectors dropped: embed them (a write) outside the snapshot
            self._embed_missing_memories(embedder, marker[0])
            # read again: embedding moved the generation; a memory added meanwhile moves the key
            self._memories_embedded = (marker[0], self.store.memories.vectors.generation())
        raise AssertionError("unreachable: the second attempt ranks")

    def _embed_missing_memories(self, embedder: Embedder, newest_key: int) -> None:
        """Embed the memories with no vector: after a first whole look, only among those added
        or whose vector changed since the last look (`memories_since`)."""
        change_number = self.store.memories.vectors.change_number()  # first: later ones next
        since = memories_since(self.store, self._memories_looked)
        embed_missing_memories(self.store, embedder, EMBED_BATCH, since)
        self._memories_looked = (newest_key, change_number)

    # -- life ------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Catch the vector index up with what other processes wrote."""
        self.index.refresh()

    def close(self) -> None:
        """Save and let go of the indexes, close the models vrom made, and close the store."""
        try:
            self.index.close()
            self._memory_index.close()
        finally:
            self._binding.close()
            self.reranking.close()
            self.store.close()
