"""Collections: documents without files, searched by meaning and by keyword, for agents.

A collection is the same engine as a vault (one store, chunks, FTS5, vectors, an exact or HNSW
index); its documents come from ``add`` instead of a folder. A document is an id, a text and a
metadata mapping; a long text is cut into chunks like a note, and a document is found by its
best chunk, once per search. The store keeps each document's text once, as it was added (its
chunks are slices of it), and a hit carries that whole text with the best chunk and its offsets.

    docs = Collection.open("handbook", storage="~/.agent/memory")
    docs.add([{"id": "leave", "text": "Annual leave is 25 days a year.", "metadata": {"section": "hr"}}])
    docs.search("how many days of annual leave", k=5, where={"section": "hr"})

Every method is safe to call from several threads (calls run one at a time); `AsyncCollection`
runs them in worker threads for asyncio code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from vrom._async import in_thread
from vrom.corpus import Corpus
from vrom.documents import (
    MAX_ID_BYTES,
    MAX_METADATA_BYTES,
    MAX_TEXT_CHARS,
    Document,
    validated_batch,
)
from vrom.embed import AUTO, Embedder, EmbedderBinding, EmbedderChoice
from vrom.embed.rerank import Reranker, RerankerChoice, Reranking
from vrom.errors import ModelError, StorageError, ValidationError, shown
from vrom.ingest.chunk import ChunkStrategy
from vrom.ingest.collection_write import add_documents, remove_document
from vrom.ingest.embedding import bind_embedder
from vrom.queryable import Queryable
from vrom.results import SearchReport
from vrom.search.query import parse_metadata_where
from vrom.search.vector import INDEX_KINDS, check_ef_search, check_mode
from vrom.seed_views import whole_documents
from vrom.settings import STORAGE_KEY_ENV, Settings
from vrom.store import (
    Location,
    Store,
    database_file,
    is_server_url,
    open_store,
)
from vrom.tools import SearchTool

__all__ = [  # the limits and Document live in vrom.documents; they are named here too
    "MAX_ID_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_TEXT_CHARS",
    "AsyncCollection",
    "Collection",
    "Document",
    "storage_path",
]
KEY_ENV = STORAGE_KEY_ENV
"""The environment variable an encrypted collection's key is read from when none is given."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KIND_META_KEY = "collection_name"
_Where = Mapping[str, Any] | None  # a filter of the one grammar over documents' metadata


class Collection(Queryable):
    """Documents searched by meaning (and keywords); open one with `Collection.open`."""

    def __init__(self, name: str, corpus: Corpus, strategy: ChunkStrategy) -> None:
        self._name = name
        self._corpus = corpus
        self._store = corpus.store
        self._embedder = corpus.embedder
        self._strategy = strategy
        self._strategy_id = _strategy_id(strategy)
        self._lock = threading.RLock()
        self._closed = False

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        name: str,
        embedder: EmbedderChoice = AUTO,
        storage: str | os.PathLike[str] | None = None,
        index: str = "auto",
        ef_search: int | None = None,
        *,
        key: str | None = None,
        chunk_chars: int = 1000,
        chunk_overlap: int = 150,
        settings: Settings | None = None,
        reranker: RerankerChoice = None,
    ) -> Collection:
        """Return the collection ``name``: empty when new, else what was added before.

        ``embedder``: an `Embedder`, a spec string (see `Embedder.from_spec`), None for keyword
        search only, or ``"auto"`` (``$VROM_EMBEDDER``, else the default local model).
        ``storage``: None keeps the collection in memory; a folder holds one SQLite file per
        collection (``<folder>/<name>.db``); a file path (or a ``sqlite:///path`` URL) is the
        collection's SQLite file; a database URL (``postgresql://USER:PASSWORD@HOST/DB``) holds
        it in the namespace ``name``, beside other collections and vaults. Opening the same
        name on the same storage, in this or another process (or machine, for a database),
        finds the same documents. ``index``: ``flat`` (exact), ``hnsw`` (approximate,
        the graph cached beside the file) or ``auto`` (flat below 5k chunks). ``ef_search``
        sets the HNSW search breadth (default 128). ``key`` encrypts the file with SQLCipher
        (``pip install 'vrom[encrypted]'``); without it, ``$VROM_STORAGE_KEY`` is used if set.
        The key is never stored anywhere. An encrypted collection's HNSW graph is kept in
        memory only (a graph file would hold the vectors unencrypted). ``settings``: what the
        environment configures (`vrom.settings.Settings`), resolved from it now when not given.
        ``reranker``: what ``search(..., rerank=True)`` reorders the first hits with: a
        `vrom.Reranker`, a spec (``onnx:DIR``: `vrom.Reranker.from_spec`) or None (no reranking).
        """
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValidationError(
                f"collection name {name!r} must be 1-64 letters, digits, '_', '-' or '.', "
                "starting with a letter or digit"
            )
        if index not in INDEX_KINDS:
            raise ValidationError(
                f"index must be one of {', '.join(INDEX_KINDS)}, not {shown(index)}"
            )
        if ef_search is not None:
            check_ef_search(ef_search, 1)
        try:
            strategy = ChunkStrategy(target_chars=chunk_chars, overlap_chars=chunk_overlap)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
        config = Settings.from_environment() if settings is None else settings
        location: Location
        if is_server_url(storage):  # a database: the collection is the namespace `name`
            if key is not None:
                raise ValidationError(
                    "a key encrypts a SQLite file, not a database server's store: drop it"
                )
            location, namespace = storage, name
        else:
            location, namespace = storage_path(name, storage), None
            if location is None:
                if key is not None:
                    raise ValidationError("a key encrypts a file: give storage a path as well")
            elif key is None:
                key = config.storage_key
        reranking = Reranking(reranker)  # a bad spec fails before anything opens
        binding = EmbedderBinding(embedder, config.embedder_spec, api_key=config.openai_api_key)
        try:
            resolved = binding.get()
            store = open_store(location, key=key, namespace=namespace)
        except BaseException:
            binding.close()
            reranking.close()
            raise
        corpus = Corpus(store, binding, index=index, ef_search=ef_search, turns=True)
        corpus.reranking = reranking  # closed with the corpus
        try:
            _claim_store(store, name)
            if resolved is not None:
                try:
                    bind_embedder(store, resolved)
                except ModelError as exc:
                    raise ModelError(
                        f"collection {name!r} holds vectors of another model than "
                        f"{resolved.fingerprint.describe()}: open it with the model it was "
                        f"built with ({exc})"
                    ) from exc
        except BaseException:
            corpus.close()
            raise
        return cls(name, corpus, strategy)

    # -- properties ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The collection's name."""
        return self._name

    @property
    def location(self) -> str:
        """Where the collection lives: its SQLite file, ``:memory:``, or its database (the
        URL's password masked)."""
        return self._store.location

    @property
    def reranker(self) -> Reranker | None:
        """The reranker ``search(..., rerank=True)`` reorders with (None: it cannot rerank)."""
        return self._corpus.reranking.reranker

    @property
    def embedder(self) -> Embedder | None:
        """The embedder documents and queries are embedded with (None: keyword search only)."""
        return self._embedder

    # -- writing ---------------------------------------------------------------------------

    def add(self, documents: Iterable[Document | Mapping[str, Any]]) -> int:
        """Embed, store and index documents; return how many documents the collection holds.

        A document whose id is already held replaces it (its old chunks and vectors go), and
        when its text or its source changes, the turns after it in its conversation are
        embedded again with it (see `vrom.ingest.embedding.context_text`), in the same
        transaction: no crash leaves a turn with a vector of its old context. Every
        document is checked before anything is written: one bad document (an id over 256 bytes,
        a text over 100,000 characters or blank, metadata over 8 KiB as JSON, an unknown key)
        is a `ValidationError` with code ``invalid_value`` and nothing is written. An embedding
        failure is a `ModelError`, also with nothing written.
        """
        with self._lock:
            self._check_open()
            batch = validated_batch(documents)
            add_documents(
                self._store, self._embedder, batch, self._strategy, self._strategy_id, time.time()
            )
            return self._store.documents.count()

    def remove(self, id: str) -> bool:
        """Remove a document by id; return True if it was there.

        The turns after it in its conversation (its metadata ``source``) are embedded again
        without it, in the same transaction; if that fails (a `ModelError`) nothing is removed.
        """
        with self._lock:
            self._check_open()
            if not isinstance(id, str):
                raise ValidationError(f"id must be a string, not {type(id).__name__}")
            return remove_document(self._store, self._embedder, id)

    def reembed(self) -> int:
        """Drop every vector and embed every chunk again; return how many were embedded.

        The way to bring a collection whose vectors were made by an older embedding recipe
        (`vrom.ingest.embedding.EMBEDDING_RECIPE`) up to date: adding to it is refused until
        then, searching is not. A collection without an embedder is a `ValidationError`.
        """
        with self._lock:
            self._check_open()
            if self._embedder is None:
                raise ValidationError(f"collection {self._name!r} has no embedder to re-embed with")
            self._corpus.bind(rebuild=True)
            return self._corpus.embed_missing()

    # -- reading ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        where: Mapping[str, Any] | None = None,
        mode: str | None = None,
        ef_search: int | None = None,
        *,
        expand_context: bool = False,
        context_window: int = 1,
        rerank: bool | int = False,
    ) -> SearchReport:
        """Return up to ``k`` documents best matching ``query``, best first, one hit each.

        ``mode``: ``vector`` (the default with an embedder; ``score`` is the cosine similarity
        in [-1, 1]), ``hybrid`` (keyword and vector scores fused, `vrom.search.fusion.fuse`;
        ``score`` is the fused score in [0, 1], its parts in ``scores``) or ``keyword`` (BM25;
        the default without an embedder). ``where`` keeps documents whose metadata passes it,
        inside the search, so ``k`` hits come back whenever ``k`` documents match: ``{"section":
        "hr"}`` (equal, or a list holding it), ``{"year": {"$gte": 2020, "$lt": 2025}}``,
        ``{"tag": {"$in": ["a", "b"]}}``, ``{"status": {"$ne": "archived"}}`` (a missing field
        passes); operators: ``$eq $ne $in $nin $gt $gte $lt $lte``.

        Each hit's ``text`` is the document's whole text as it was added; ``chunk_text`` is its
        best-matching chunk, ``text[char_start:char_end]`` (the excerpt, score and ``chunk_id``
        are that chunk's). A document added by a vrom older than schema 8 kept no whole text:
        its ``text`` is the chunk, until it is added again. A `SearchReport` (equal to a list
        of its hits): the seed's view, `vrom.seed_views.whole_documents`, of the read half.

        ``rerank`` (True: the first 30; or a number of candidates) reorders the first documents
        found with the collection's reranker (``reranker=`` at `open`; `vrom.search.reranking`):
        each hit's ``score`` is then the reranker's, and the report's ``rerank_ms`` its time.
        """
        with self._lock:
            report = self._report(query, k, where, mode, ef_search=ef_search, rerank=rerank)
            report = self._finished(report, expand_context, context_window)
            return whole_documents(report, self._store.documents.texts([h.note_id for h in report]))

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
        with self._lock:
            self._check_open()
            mode = self._mode(mode)  # the query and k are validated once, by the core
            found = parse_metadata_where(where)
            return self._corpus.search_report(
                query, k, found, mode, per_document=True, ef_search=ef_search, fallback=False,
                rerank=rerank,
            )  # fmt: skip

    def _expansion_store(self) -> Store:
        return self._store

    def _finished(self, report: SearchReport, expand: bool, window: int) -> SearchReport:
        with self._lock:  # a context's expansion too runs one call at a time
            self._check_open()
            return super()._finished(report, expand, window)

    def count(self) -> int:
        """Return how many documents the collection holds."""
        with self._lock:
            self._check_open()
            return self._store.documents.count()

    def reload(self) -> int:
        """Bring the index up to date with the storage (another process wrote); return count()."""
        with self._lock:
            self._check_open()
            if self._embedder is not None:
                self._corpus.refresh()
            return self._store.documents.count()

    def as_tool(self, name: str, description: str) -> SearchTool:
        """Return a read-only search tool for an agent (JSON Schema, OpenAI/Anthropic/MCP)."""
        return SearchTool(self, name, description)

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> bool:
        """Save and let go of the index and the storage; return True if this call closed them,
        False if the collection was closed already. Later calls raise `StorageError`."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            self._corpus.close()
            return True

    def __repr__(self) -> str:
        state = "closed" if self._closed else self._store.location
        return f"<Collection {self._name!r} {state}>"

    # -- inside ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"collection {self._name!r} is closed: open it again")

    def _mode(self, mode: str | None) -> str:
        if mode is None:
            return "keyword" if self._embedder is None else "vector"
        if check_mode(mode) != "keyword" and self._embedder is None:
            raise ValidationError(
                f"collection {self._name!r} has no embedder: only mode='keyword' is possible"
            )
        return mode


class AsyncCollection:
    """A `Collection` for asyncio: each call runs in a worker thread, never blocking the loop.

        docs = await AsyncCollection.open("handbook", storage="memory-dir")
        await docs.add([...]); hits = await docs.search("annual leave", k=3)

    Calls made at once run one at a time (a collection serialises its calls).
    """

    def __init__(self, collection: Collection) -> None:
        self.sync = collection
        """The underlying `Collection` (for code that is not async)."""

    @classmethod
    async def open(cls, name: str, *args: Any, **options: Any) -> AsyncCollection:
        """Return the collection `Collection.open` would, opened in a worker thread."""
        return cls(await in_thread(Collection.open, name, *args, **options))

    @property
    def name(self) -> str:
        """The collection's name."""
        return self.sync.name

    async def add(self, documents: Iterable[Document | Mapping[str, Any]]) -> int:
        """See `Collection.add`."""
        return await in_thread(self.sync.add, list(documents))

    async def search(
        self,
        query: str,
        k: int = 5,
        where: Mapping[str, Any] | None = None,
        mode: str | None = None,
        ef_search: int | None = None,
        *,
        rerank: bool | int = False,
    ) -> SearchReport:
        """See `Collection.search`."""
        return await in_thread(self.sync.search, query, k, where, mode, ef_search, rerank=rerank)

    async def reembed(self) -> int:
        """`Collection.reembed`."""
        return await in_thread(self.sync.reembed)

    async def remove(self, id: str) -> bool:
        """See `Collection.remove`."""
        return await in_thread(self.sync.remove, id)

    async def count(self) -> int:
        """See `Collection.count`."""
        return await in_thread(self.sync.count)

    async def reload(self) -> int:
        """See `Collection.reload`."""
        return await in_thread(self.sync.reload)

    async def close(self) -> bool:
        """See `Collection.close`."""
        return await in_thread(self.sync.close)

    def as_tool(self, name: str, description: str) -> SearchTool:
        """See `Collection.as_tool` (the tool's ``acall`` suits async agent loops)."""
        return self.sync.as_tool(name, description)

    async def __aenter__(self) -> AsyncCollection:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


# -- storage ---------------------------------------------------------------------------------


def storage_path(name: str, storage: str | os.PathLike[str] | None) -> Path | None:
    """Return the SQLite file of collection ``name`` on ``storage`` (None: in memory).

    A folder (an existing one, or a path without a suffix) holds ``<name>.db``; any other path
    is the file itself; ``sqlite:///relative/path`` and ``sqlite:////absolute/path`` are URL
    forms of a file, ``sqlite://`` and ``sqlite:///:memory:`` of memory.
    """
    path = database_file(storage)
    if path is None:
        return None
    if path.is_dir() or (not path.exists() and not path.suffix):
        return path / f"{name}.db"
    return path


def _claim_store(store: Store, name: str) -> None:
    """Mark a new store as collection ``name``'s; refuse one that holds something else."""
    if store.get_meta("vault_root") is not None:
        raise StorageError(f"{store.location} is a vault's store, not a collection's")
    with store.transaction():
        holder = store.get_meta(_KIND_META_KEY)
        if holder is None:
            store.set_meta(_KIND_META_KEY, name)
        elif holder != name:
            raise StorageError(
                f"{store.location} holds collection {holder!r}, not {name!r}: give a folder as "
                "storage to keep several collections"
            )


def _strategy_id(strategy: ChunkStrategy) -> str:
    text = json.dumps({"collection": True, **strategy.as_dict()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
