"""What the layers above need from a backend, as four roles.

A `Store` is the metadata and transaction role, and holds the other three as attributes:
``documents`` (notes or collection documents, their chunks, links and tags, keyword search and
filters), ``vectors`` (one vector per chunk, with a change log) and ``memories`` (agent
memories, with their own vectors). The documents and memories roles are written once, in SQL
both backends speak (`DocumentStore` is `vrom.store.sql_documents.SqlDocuments`, `MemoryStore`
is `vrom.store.sql_memories.SqlMemories`), each backend adding what truly differs; the vector
roles are protocols here. `vrom.store.open_store` opens a store from a location. Every method
raises `StorageError` on failure.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vrom.store.records import (
    KeywordPostings,
    MemoryRecord,
    Sidecar,
    StoreCounts,
    StoredChunk,
    StoreState,
    VectorChanges,
)
from vrom.store.sql_documents import SqlDocuments
from vrom.store.sql_memories import SqlMemories

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


DocumentStore = SqlDocuments
"""Documents (notes), their chunks, links and tags, keyword search and filters."""
MemoryStore = SqlMemories
"""Agent memories: rows, their keyword index, and their vectors (``vectors``)."""


class VectorSource(Protocol):
    """Vectors by integer key, numbered changes included: what a vector index is built from.

    Keys are chunk ids (`VectorStore`) or memory keys (`MemoryVectors`). The source is the
    truth; an index over it is a cache that catches up by replaying `changes`.
    """

    def identity(self) -> str:
        """Return a stamp of the store these vectors live in (a re-created store differs)."""
        ...

    def encoding(self) -> str:
        """Return how the vectors are encoded: ``float32`` or ``int8``."""
        ...

    def rows(self) -> list[tuple[int, bytes]]:
        """Return (key, vector bytes) for every vector, by key."""
        ...

    def of(self, keys: Sequence[int]) -> dict[int, bytes]:
        """Return the vector bytes of these keys, where they exist."""
        ...

    def count(self) -> int:
        """Return how many vectors there are."""
        ...

    def generation(self) -> int:
        """Return a number that changes whenever any vector is added or removed."""
        ...

    def change_number(self) -> int:
        """Return the number of the latest vector change (0 before any)."""
        ...

    def changes(self, after: int) -> VectorChanges | None:
        """Return the keys whose vector changed after change number ``after``.

        None when the log no longer reaches back that far (an index then rebuilds).
        """
        ...


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


class VectorStore(VectorSource, Protocol):
    """The chunks' vectors: one per chunk, gone with its chunk."""

    def put(self, vectors: Sequence[tuple[int, bytes]], inputs: Sequence[str] | None = None) -> int:
        """Store encoded vectors by chunk id (chunks deleted meanwhile are skipped); return
        how many were written.

        ``inputs``: the hash of the text each vector was embedded from, in the same order
        (`vrom.ingest.embedding.input_hash`). A vector stored without one serves its own
        chunk only: it is never reused for another (`for_inputs`, a note written again).
        """
        ...

    def clear(self) -> None:
        """Remove every vector."""
        ...

    def loading(self) -> AbstractContextManager[None]:
        """Run the block's `put` calls as one transaction, written as fast as the backend can
        (PostgreSQL builds its HNSW index once at the end when the store held no vectors)."""
        ...

    def missing(self, limit: int, after: int = 0) -> list[StoredChunk]:
        """Return up to ``limit`` chunks with ids above ``after`` that have no vector, by id."""
        ...

    def for_inputs(self, input_hashes: Sequence[str]) -> dict[str, bytes]:
        """Return a stored vector for each of these embedded-input hashes that has one."""
        ...

    def document_ids(self) -> list[tuple[int, int]]:
        """Return (chunk id, document id) for every chunk that has a vector, by chunk id."""
        ...

    def has_any(self) -> bool:
        """Return True when at least one chunk has a vector."""
        ...


class MemoryVectors(VectorSource, Protocol):
    """The memories' vectors, keyed by each memory's integer key."""

    def put(self, vectors: Sequence[tuple[str, bytes]]) -> int:
        """Store vectors by memory id (memories gone meanwhile are skipped); return how many."""
        ...

    def clear(self) -> None:
        """Remove every memory vector."""
        ...

    def missing(self, limit: int, after: str = "") -> list[MemoryRecord]:
        """Return up to ``limit`` memories with ids above ``after`` that have no vector, by id."""
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
