"""`Pack`: a knowledge pack from the cache, opened read-only and searched by the one read half.

What `vrom.AgentMemory` mounts: the pack's store opens read-only and immutable, its HNSW graph
memory-mapped, so opening costs no copying and no embedding. A pack is to a vault what
sqlite-utils' ``View`` is to its ``Table``: the same reads (`search`, `context`), no writes.

    with Pack.open(cache.load_index("python-docs"), Embedder.default()) as pack:
        report = pack.search("read a file", k=5, mode="vector")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vrom.corpus import Corpus
from vrom.embed import Embedder, EmbedderBinding
from vrom.errors import PackError, StorageError, ValidationError
from vrom.index.hnsw import HnswIndex
from vrom.packs.cache import CachedPack
from vrom.queryable import Queryable
from vrom.results import SearchReport
from vrom.search.query import parse_where
from vrom.search.vector import VectorIndex
from vrom.store import Store, open_store

__all__ = ["Pack"]

_Where = Mapping[str, Any] | None  # a filter of the one grammar over the notes' frontmatter


class Pack(Queryable):
    """A cached pack, read-only: `search` and `context` over its store; `close` lets it go.

    Open one with `Pack.open`. A pack's ``where`` filters its notes' frontmatter (the one
    grammar, docs/filters.md); the default mode is hybrid once its vectors are of ``embedder``.
    """

    def __init__(self, cached: CachedPack, corpus: Corpus) -> None:
        self.cached = cached
        """The pack in the cache: its manifest, files and version."""
        self.manifest = cached.manifest
        """The pack's manifest: id, version, model, counts, source."""
        self.corpus = corpus
        """The search core over the pack's store and graph."""

    @classmethod
    def open(cls, cached: CachedPack, embedder: Embedder) -> Pack:
        """Return the cached pack opened for searching, its queries embedded by ``embedder``
        (which stays the caller's: closing the pack leaves it loaded).

        An unreadable store or graph is a `PackError` naming the pack.
        """
        name = f"pack {cached.manifest.vrom_id} {cached.version}"
        try:
            store = open_store(cached.store_path, read_only=True)
        except StorageError as exc:
            raise PackError(f"{name}: its store is unreadable: {exc}") from exc
        try:
            ef = int(cached.manifest.hnsw_config.get("ef_search", 64))
            graph = HnswIndex.open_file(
                store.vectors, cached.index_path, expansion_search=max(ef, 1)
            )
        except StorageError as exc:
            store.close()
            raise PackError(f"{name}: the index is unreadable after download: {exc}") from exc
        index = VectorIndex.opened(graph, store.vectors)
        return cls(cached, Corpus(store, EmbedderBinding.of(embedder), vector_index=index))

    def close(self) -> None:
        """Let go of the pack's graph and store (the model stays loaded; the files stay cached)."""
        self.corpus.close()

    def __repr__(self) -> str:
        return f"Pack({self.manifest.vrom_id!r}, version={self.cached.version!r})"

    def _report(
        self,
        query: str,
        k: int,
        where: _Where,
        mode: str | None,
        *,
        ef_search: int | None = None,
        rerank: bool | int = False,
    ) -> SearchReport:
        if rerank is not False and self.corpus.reranking.reranker is None:
            raise ValidationError(
                "rerank needs a reranker, and none is configured: AgentMemory(reranker='onnx:DIR')"
            )
        notes = parse_where(where)
        self.cached.wait_until_hashed()  # with trusted keys: no text of a changed file
        return self.corpus.search_report(
            query, k, notes, mode, ef_search=ef_search, fallback=False, rerank=rerank
        )

    def _expansion_store(self) -> Store:
        return self.corpus.store
