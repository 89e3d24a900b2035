"""What the layers above need from a backend, as four roles.

A `Store` is the metadata and transaction role, and holds the other three as attributes:
``documents`` (notes or collection documents, their chunks, links and tags, keyword search and
filters), ``vectors`` (one vector per chunk, with a change log) and ``memories`` (agent
memories, with their own vectors). The roles are written once, in SQL both backends speak
(`DocumentStore` is `vrom.store.sql_documents.SqlDocuments`, `MemoryStore` is
`vrom.store.sql_memories.SqlMemories`, the vector roles are in `vrom.store.sql_vectors`), each
backend adding what truly differs; the optional capabilities and the `Store` are protocols
here. `vrom.store.open_store` opens a store from a location. Every method raises
`StorageError` on failure.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vrom.store.records import KeywordPostings, Sidecar, StoreCounts, StoreState
from vrom.store.sql_documents import SqlDocuments
from vrom.store.sql_memories import SqlMemories
from vrom.store.sql_vectors import SqlChunkVectors, SqlMemoryVectors, SqlVectors

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


DocumentStore = SqlDocuments
"""Documents (notes), their chunks, links and tags, keyword search and filters."""
MemoryStore = SqlMemories
"""Agent memories: rows, their keyword index, and their vectors (``vectors``)."""
VectorSource = SqlVectors
"""Vectors by integer key, with numbered changes: what a vector index is built from."""
VectorStore = SqlChunkVectors
"""The chunks' vectors: one per chunk, gone with its chunk."""
MemoryVectors = SqlMemoryVectors
"""The memories' vectors, keyed by each memory's integer key."""


@runtime_checkable
class NearestVectors(Protocol):
    """A vector source that finds nearest vectors itself, in its database (pgvector's HNSW).

    An optional capability of a backend's vector roles: the search core asks it for the
    nearest keys instead of building an index of its own from `VectorSource.rows`, so there
    is still one search path, and the store only answers "nearest k".
    """

    def search_engine(self) -> dict[str, Any]:
        """Return how it searches: ``kind`` (``pgvector-hnsw``) and the index's settings."""
        ...

    def nearest(
        self,
        vector: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None = None,
        *,
        ef_search: int | None = None,
        exact: bool = False,
        metric: str = "cosine",
    ) -> list[tuple[int, float]]:
        """Return up to ``k`` (key, score) pairs nearest ``vector``, best first, among
        ``allowed`` keys if given; ``exact`` scores every vector instead of using the index.

        Scores are as an exact index gives them: cosine similarity for ``cosine`` and ``dot``
        (vectors are unit length), minus the euclidean distance for ``euclidean``.
        """
        ...


@runtime_checkable
class KeywordPostingsSource(Protocol):
    """A document store whose keyword index can be read whole (SQLite's FTS5).

    An optional capability of a backend's document role: the search core keeps an in-memory
    copy of the index (`vrom.index.keyword`) that ranks plain-term queries exactly as the
    store's `DocumentStore.keyword_search` would, and asks the store whenever it cannot (a
    phrase, a prefix, an exclusion, or an index changed since the copy).
    """

    def keyword_version(self) -> bytes:
        """Return a value that changes whenever the keyword index changes (a cheap read)."""
        ...

    def keyword_postings(self) -> KeywordPostings:
        """Return the whole keyword index, read in the caller's snapshot."""
        ...

    def keyword_postings_apart(self) -> KeywordPostings | None:
        """Return the whole keyword index read on a connection of its own, safe to call from
        another thread while the store is used; None when the store has no second
        connection (one in memory)."""
        ...

    def keyword_tokens(self, text: str) -> tuple[str, ...]:
        """Return the index tokens ``text`` becomes as a quoted query string, in order."""
        ...


class Store(Protocol):
    """One store: its metadata and transactions, and its three other roles as attributes."""

    @property
    def documents(self) -> DocumentStore:
        """Documents, chunks, links, tags and keyword search."""
        ...

    @property
    def vectors(self) -> VectorStore:
        """The chunks' vectors."""
        ...

    @property
    def memories(self) -> MemoryStore:
        """Agent memories."""
        ...

    @property
    def location(self) -> str:
        """Where the store lives (a file path, ``:memory:``, or a URL without secrets)."""
        ...

    def get_meta(self, key: str) -> str | None:
        """Return a value of the store's metadata, or None."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the store's metadata."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Return a context manager under which writes commit together or not at all."""
        ...

    def state(self) -> StoreState:
        """Return the vector generations, keyword version and newest memory key in one read.

        Inside a `snapshot` (which nothing writes in) it is read once: the generations and the
        keyword version are answered from it until the snapshot ends, so a search reads them
        once however many of its parts ask.
        """
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """Return a context manager under which reads see one state (no write lands between)."""
        ...

    def counts(self) -> StoreCounts:
        """Return row counts and the store's size on disk."""
        ...

    def describe(self) -> dict[str, Any]:
        """Return backend facts: name, schema version, where writes land first
        (``index_write_mode``), tokenizers, capabilities."""
        ...

    def integrity_problems(self) -> builtins.list[str]:
        """Return what is inconsistent in the store (empty when it is sound)."""
        ...

    def sidecar(self, suffix: str) -> Sidecar | None:
        """Return where a derived file (an ANN graph) may be cached beside the store, or None.

        None for a store with no file of its own (in memory, on a server) and for an encrypted
        one (a derived file would hold its content in the clear).
        """
        ...

    def compact_copy(self, target: Path) -> None:
        """Write a compact, self-contained, read-only-ready copy of the store to ``target``."""
        ...

    def close(self) -> None:
        """Release the connection; later calls raise `StorageError`."""
        ...
