"""What the layers above need from a backend, as four roles.

A `Store` is the metadata and transaction role, and holds the other three as attributes:
``documents`` (notes or collection documents, their chunks, links and tags, keyword search and
filters), ``vectors`` (one vector per chunk, with a change log) and ``memories`` (agent
memories, with their own vectors). A backend implements each role as its own class over a shared
connection; `vrom.store.open_store` opens one from a location. Every method raises `StorageError`
on failure.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vrom.store.records import (
    ChunkRecord,
    DocumentRecord,
    DocumentState,
    DocumentWrite,
    KeywordPostings,
    KeywordQuery,
    KeywordRow,
    LinkRecord,
    MemoryCounts,
    MemoryFilter,
    MemoryKeywordRow,
    MemoryRecord,
    Sidecar,
    StoreCounts,
    StoredChunk,
    StoredDocument,
    StoreState,
    VectorChanges,
    Where,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


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


class DocumentStore(Protocol):
    """Documents (notes), their chunks, links and tags, keyword search and filters."""

    def states(self, paths: Sequence[str] | None = None) -> dict[str, DocumentState]:
        """Return path → state for every stored document, or for those at ``paths``."""
        ...

    def state(self, path: str) -> DocumentState | None:
        """Return the state of one stored document, or None."""
        ...

    def put(
        self,
        document: DocumentRecord,
        chunks: Sequence[ChunkRecord],
        links: Sequence[LinkRecord],
        tags: Sequence[str],
        document_id: int | None = None,
    ) -> int:
        """Write a document with its chunks, links and tags, replacing what ``document_id`` held.

        Safe against another writer that added or removed the same document meanwhile: one
        that already holds ``document.path`` is replaced, and a vanished ``document_id`` is
        re-added. Chunks whose text another chunk already has a vector for get that vector.
        Returns the document's id.
        """
        ...

    def put_many(self, writes: Sequence[DocumentWrite]) -> list[int]:
        """Write several documents in one transaction, each as `put` writes it, in fewer round
        trips; return their ids in order. Raises `ValidationError` before writing anything when
        one holds text no store holds (`vrom.store.storable`)."""
        ...

    def touch(self, document_id: int, mtime: float, size: int) -> None:
        """Record a new mtime and size for a document whose content did not change."""
        ...

    def delete(self, document_id: int) -> None:
        """Remove a document and everything derived from it."""
        ...

    def get(self, document_id: int) -> StoredDocument | None:
        """Return a document by id."""
        ...

    def find(self, key: str) -> list[StoredDocument]:
        """Return documents whose path (without suffix) or file stem matches a lower-cased key.

        An exact path match comes first; a key with ``/`` also matches a trailing part of a path.
        """
        ...

    def count(self) -> int:
        """Return how many documents there are."""
        ...

    def chunk_count(self) -> int:
        """Return how many chunks there are."""
        ...

    def chunks_of(self, document_id: int) -> list[StoredChunk]:
        """Return a document's chunks in order."""
        ...

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[StoredChunk]:
        """Return the chunks with these ids (those that still exist), in the order given."""
        ...

    def chunk_owners(self, chunk_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        """Return chunk id → (document id, human-relevance prior) for the chunks that still
        exist: what ranking needs of a candidate, light (no text, no metadata)."""
        ...

    def texts(self, document_ids: Sequence[int]) -> dict[int, str]:
        """Return id → whole text of those documents stored with one (`DocumentRecord.text`)."""
        ...

    def turns_before(self, source: str, document_id: int | None, count: int) -> list[str]:
        """Return the whole texts of the last ``count`` documents whose metadata ``source`` is
        ``source`` (a string), stored before document ``document_id`` (None: before any new
        one), oldest first; documents stored without their text are left out."""
        ...

    def turns_after(self, source: str, document_id: int, count: int) -> list[int]:
        """Return the ids of the first ``count`` documents whose metadata ``source`` is
        ``source`` (a string), stored after document ``document_id``, oldest first: the
        documents whose `turns_before` it is among. Documents without their text are left out."""
        ...

    def has_shared_source(self) -> bool:
        """True if two documents or more have the same metadata ``source`` (a string; or
        one held in a list, which errs towards True)."""
        ...

    def links_of(self, document_id: int) -> list[LinkRecord]:
        """Return the links written in a document, in order."""
        ...

    def links_to_keys(self, keys: Sequence[str]) -> list[tuple[int, LinkRecord]]:
        """Return (source document id, link) for links whose target key is one of ``keys``."""
        ...

    def unresolved_link_count(self) -> int:
        """Return how many links point to no stored document."""
        ...

    def tags_of(self, document_id: int) -> list[str]:
        """Return a document's tags."""
        ...

    def sharing_tags(self, document_id: int, limit: int) -> list[tuple[int, list[str]]]:
        """Return (document id, shared tags) for others sharing tags, most shared first."""
        ...

    def tag_counts(self) -> list[tuple[str, int]]:
        """Return (tag, number of documents) for every tag, most used first, then by name."""
        ...

    def with_tag(self, tag: str) -> list[StoredDocument]:
        """Return the documents tagged ``tag`` or a tag nested under it (``tag/...``), by path."""
        ...

    def in_folder(self, folder: str) -> list[StoredDocument]:
        """Return the documents directly in ``folder`` ("" for the root), by path."""
        ...

    def after_path(self, after: str, limit: int) -> list[StoredDocument]:
        """Return up to ``limit`` documents whose paths sort after ``after``, by path."""
        ...

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: Where | None = None
    ) -> list[KeywordRow]:
        """Return up to ``limit`` chunks matching the query and filter, best BM25 first."""
        ...

    def chunk_ids_matching(self, where: Where) -> Sequence[int]:
        """Return the ids of the chunks whose document passes the filter, by id.

        The sequence may be shared with later calls (a backend may keep it while the store is
        unchanged): read it, never change it.
        """
        ...


class MemoryStore(Protocol):
    """Agent memories: rows, their keyword index, and their vectors (``vectors``)."""

    @property
    def vectors(self) -> MemoryVectors:
        """The memories' vectors."""
        ...

    def put(self, memory: MemoryRecord) -> None:
        """Add a memory, or replace the one with its id (whose vector goes if its text changed)."""
        ...

    def get(self, memory_id: str) -> MemoryRecord | None:
        """Return a memory by id, or None."""
        ...

    def by_keys(self, keys: Sequence[int]) -> dict[int, MemoryRecord]:
        """Return the memories with these integer keys (those that still exist), by key."""
        ...

    def newest_key(self) -> int:
        """Return the largest integer key (0 without memories): keys only grow, and memories
        are never deleted, so it moves exactly when a memory is added."""
        ...

    def keys_matching(self, where: MemoryFilter) -> builtins.list[int]:
        """Return the integer keys of the memories passing the filter, by key."""
        ...

    def preceding(
        self, source: str, memory_id: str | None, count: int
    ) -> builtins.list[MemoryRecord]:
        """Return the last ``count`` memories from ``source`` stored before memory
        ``memory_id`` (before any new one: None, or an id not stored), oldest first."""
        ...

    def list(self, where: MemoryFilter, limit: int) -> builtins.list[MemoryRecord]:
        """Return up to ``limit`` memories passing the filter, newest first."""
        ...

    def set_status(
        self, memory_id: str, status: str, superseded_by: str | None, updated_unix: float
    ) -> bool:
        """Set a memory's status (and successor); False when no memory has that id."""
        ...

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: MemoryFilter
    ) -> builtins.list[MemoryKeywordRow]:
        """Return up to ``limit`` memories matching the query and filter, best BM25 first."""
        ...

    def counts(self) -> MemoryCounts:
        """Return how many memories there are, by status, type and project."""
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
