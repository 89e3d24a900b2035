"""The store: the source of truth for a vault's notes, chunks, links and tags.

Everything above this package talks to a `Store` — a handful of methods over plain records — so a
PostgreSQL + pgvector backend can be added beside `SQLiteStore` without changing the engines or
the SDK. A store never imports from the layers above it.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class DocumentRecord:
    """A note as it is written to the store (``path_key``/``name_key`` resolve links to it)."""

    path: str
    path_key: str
    name_key: str
    title: str
    frontmatter: Mapping[str, Any]
    content_hash: str
    mtime: float
    size: int
    human_relevance_score: float
    chunk_strategy: str


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk as it is written to the store; ``text == note_text[char_start:char_end]``."""

    position: int
    heading_path: str
    text: str
    char_start: int
    char_end: int
    content_hash: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LinkRecord:
    """A link as written in a note, with the key used to resolve its target."""

    kind: str
    target: str
    target_key: str
    heading: str | None
    alias: str | None
    position: int


@dataclass(frozen=True)
class DocumentState:
    """What incremental indexing needs to know about a stored note.

    ``chunk_strategy`` identifies how the note was chunked, so a note is re-chunked when the
    strategy changes even if an earlier run that changed it was interrupted.
    """

    document_id: int
    content_hash: str
    mtime: float
    size: int
    chunk_strategy: str


@dataclass(frozen=True)
class StoredDocument:
    """A note row read back from the store."""

    document_id: int
    path: str
    path_key: str
    name_key: str
    title: str
    frontmatter: Mapping[str, Any]
    content_hash: str
    mtime: float
    size: int
    human_relevance_score: float
    chunk_count: int


@dataclass(frozen=True)
class StoredChunk:
    """A chunk row read back from the store, with the fields of its note that hits cite.

    ``metadata`` is the note's frontmatter (a collection document's metadata).
    """

    chunk_id: int
    document_id: int
    position: int
    heading_path: str
    text: str
    char_start: int
    char_end: int
    prev_id: int | None
    next_id: int | None
    content_hash: str
    path: str
    title: str
    mtime: float
    human_relevance_score: float
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KeywordQuery:
    """A parsed keyword query: any of ``terms``/``phrases`` may match; ``excluded`` must not.

    A term ending in ``*`` is a prefix. The store turns this into its own query dialect, so no
    user text ever reaches the database's query parser unescaped.
    """

    terms: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when there is nothing positive to match."""
        return not (self.terms or self.phrases)


Scalar = str | int | float | bool

CONDITION_OPS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte")


@dataclass(frozen=True)
class Condition:
    """A test of one metadata field.

    ``eq``: the field equals ``value`` or is a list holding it; ``in``: the same for any of the
    values (``value`` is a tuple); ``ne``/``nin``: the negations (a missing field passes);
    ``gt``/``gte``/``lt``/``lte``: the field is a number and compares so with ``value``.
    """

    field: str
    op: str
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class Where:
    """A metadata filter: a path prefix, required tags (nested tags match), field conditions.

    All parts must hold.
    """

    path_prefix: str | None = None
    tags: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class KeywordRow:
    """A keyword match: the chunk's id, its note's id and prior, and its BM25 (higher is better).

    Rows are light on purpose: a search ranks many candidates and reads whole chunks
    (`Store.get_chunks`) only for the few it returns.
    """

    chunk_id: int
    document_id: int
    human_relevance_score: float
    bm25: float


@dataclass(frozen=True)
class VectorChanges:
    """The chunks whose vector was added, replaced or removed after some change number.

    ``latest`` is the change number the list is complete up to; pass it as ``after`` next time.
    """

    latest: int
    chunk_ids: tuple[int, ...]


@dataclass(frozen=True)
class StoreCounts:
    """Row counts of a store."""

    documents: int
    chunks: int
    links: int
    vectors: int
    tags: int
    bytes: int


class Store(Protocol):
    """What the engines need from a backend. All methods raise `StorageError` on failure."""

    @property
    def location(self) -> str:
        """Where the store lives (a file path or a URL without secrets)."""
        ...

    def get_meta(self, key: str) -> str | None:
        """Return a value of the ``meta`` table, or None."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Return a context manager under which writes commit together or not at all."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """Return a context manager under which reads see one state (no write lands between)."""
        ...

    def document_states(self) -> dict[str, DocumentState]:
        """Return path → state for every stored note."""
        ...

    def document_state(self, path: str) -> DocumentState | None:
        """Return the state of one stored note, or None."""
        ...

    def put_document(
        self,
        document: DocumentRecord,
        chunks: Sequence[ChunkRecord],
        links: Sequence[LinkRecord],
        tags: Sequence[str],
        document_id: int | None = None,
    ) -> int:
        """Write a note with its chunks, links and tags, replacing what ``document_id`` held.

        Safe against another writer that added or removed the same note meanwhile: a note that
        already holds ``document.path`` is replaced, and a vanished ``document_id`` is re-added.
        Returns the note's id.
        """
        ...

    def touch_document(self, document_id: int, mtime: float, size: int) -> None:
        """Record a new mtime and size for a note whose content did not change."""
        ...

    def delete_document(self, document_id: int) -> None:
        """Remove a note and everything derived from it."""
        ...

    def get_document(self, document_id: int) -> StoredDocument | None:
        """Return a note by id."""
        ...

    def find_documents(self, key: str) -> list[StoredDocument]:
        """Return notes whose path (without suffix) or file stem matches a lower-cased key.

        An exact path match comes first; a key with ``/`` also matches a trailing part of a path.
        """
        ...

    def chunks_of(self, document_id: int) -> list[StoredChunk]:
        """Return a note's chunks in order."""
        ...

    def links_of(self, document_id: int) -> list[LinkRecord]:
        """Return the links written in a note, in order."""
        ...

    def links_to_keys(self, keys: Sequence[str]) -> list[tuple[int, LinkRecord]]:
        """Return (source note id, link) for links whose target key is one of ``keys``."""
        ...

    def tags_of(self, document_id: int) -> list[str]:
        """Return a note's tags."""
        ...

    def notes_sharing_tags(self, document_id: int, limit: int) -> list[tuple[int, list[str]]]:
        """Return (note id, shared tags) for other notes sharing tags, most shared first."""
        ...

    def tag_counts(self) -> list[tuple[str, int]]:
        """Return (tag, number of notes) for every tag, most used first, then by name."""
        ...

    def documents_with_tag(self, tag: str) -> list[StoredDocument]:
        """Return the notes tagged ``tag`` or a tag nested under it (``tag/...``), by path."""
        ...

    def documents_in_folder(self, folder: str) -> list[StoredDocument]:
        """Return the notes directly in ``folder`` ("" for the root, no trailing /), by path."""
        ...

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: Where | None = None
    ) -> list[KeywordRow]:
        """Return up to ``limit`` chunks matching the query and filter, best BM25 first."""
        ...

    def chunks_missing_vectors(self, limit: int, after: int = 0) -> list[StoredChunk]:
        """Return up to ``limit`` chunks with ids above ``after`` that have no vector, by id."""
        ...

    def put_vectors(self, vectors: Sequence[tuple[int, bytes]]) -> int:
        """Store encoded vectors by chunk id; chunks deleted meanwhile are skipped."""
        ...

    def clear_vectors(self) -> None:
        """Remove every vector."""
        ...

    def vector_rows(self) -> list[tuple[int, bytes]]:
        """Return (chunk id, vector bytes) for every stored vector, by chunk id."""
        ...

    def has_vectors(self) -> bool:
        """Return True when at least one chunk has a vector."""
        ...

    def vector_generation(self) -> int:
        """Return a number that changes whenever any vector is added or removed."""
        ...

    def vector_change_number(self) -> int:
        """Return the number of the latest vector change (0 before any)."""
        ...

    def vector_changes(self, after: int) -> VectorChanges | None:
        """Return the chunks whose vector changed after change number ``after``.

        None when the store no longer remembers that far back (an index then rebuilds).
        """
        ...

    def vectors_for_hashes(self, content_hashes: Sequence[str]) -> dict[str, bytes]:
        """Return a stored vector for each of these chunk text hashes that has one."""
        ...

    def chunk_ids_matching(self, where: Where) -> list[int]:
        """Return the ids of the chunks whose note passes the filter."""
        ...

    def vectors_of(self, chunk_ids: Sequence[int]) -> dict[int, bytes]:
        """Return the stored vector bytes of these chunks, by chunk id, where they exist."""
        ...

    def chunk_document_ids(self) -> list[tuple[int, int]]:
        """Return (chunk id, note id) for every chunk that has a vector."""
        ...

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[StoredChunk]:
        """Return the chunks with these ids (those that still exist), in the order given."""
        ...

    def counts(self) -> StoreCounts:
        """Return row counts and the store's size on disk."""
        ...

    def document_count(self) -> int:
        """Return how many documents (notes) the store holds."""
        ...

    def unresolved_link_count(self) -> int:
        """Return how many links point to no stored note."""
        ...

    def describe(self) -> dict[str, Any]:
        """Return backend facts: name, schema version, tokenizers, capabilities."""
        ...

    def integrity_problems(self) -> list[str]:
        """Return what is inconsistent in the store (empty when it is sound)."""
        ...

    def close(self) -> None:
        """Release the connection; later calls raise `StorageError`."""
        ...


MEMORY_STATUSES = ("active", "archived", "superseded")


@dataclass(frozen=True)
class MemoryRecord:
    """An agent memory as written to and read back from the store.

    ``tags`` and ``related`` (note paths) are kept in order; ``superseded_by`` is set exactly
    when ``status`` is ``superseded``.
    """

    id: str
    created_unix: float
    updated_unix: float
    project: str | None
    type: str
    title: str
    content: str
    tags: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    source: str | None = None
    status: str = "active"
    superseded_by: str | None = None


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a read sees: every given part must hold (None: any)."""

    project: str | None = None
    type: str | None = None
    status: str | None = None


@dataclass(frozen=True)
class MemoryKeywordRow:
    """A keyword match among memories: the memory and its BM25 score (higher is better)."""

    memory: MemoryRecord
    bm25: float


@dataclass(frozen=True)
class MemoryCounts:
    """How many memories a store holds: in all, by status, type and project, and with a vector.

    Memories without a project are not in ``by_project``.
    """

    total: int
    by_status: Mapping[str, int]
    by_type: Mapping[str, int]
    by_project: Mapping[str, int]
    embedded: int


# builtins.list in the annotations below: the method `list` shadows the type in the class body
class MemoryStore(Protocol):
    """What `vrom.memories.Memories` needs from a backend. Methods raise `StorageError`."""

    @property
    def location(self) -> str:
        """Where the store lives (a file path or a URL without secrets)."""
        ...

    def get_meta(self, key: str) -> str | None:
        """Return a value of the ``meta`` table, or None."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Return a context manager under which writes commit together or not at all."""
        ...

    def put(self, memory: MemoryRecord) -> None:
        """Add a memory, or replace the one with its id (whose vector goes if its text changed)."""
        ...

    def get(self, memory_id: str) -> MemoryRecord | None:
        """Return a memory by id, or None."""
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

    def missing_vectors(self, limit: int, after: str = "") -> builtins.list[MemoryRecord]:
        """Return up to ``limit`` memories with ids above ``after`` that have no vector, by id."""
        ...

    def put_vectors(self, vectors: Sequence[tuple[str, bytes]]) -> int:
        """Store vectors by memory id (memories gone meanwhile are skipped); return how many."""
        ...

    def clear_vectors(self) -> None:
        """Remove every memory vector (before embedding with another model)."""
        ...

    def vectors(self, where: MemoryFilter) -> builtins.list[tuple[str, bytes]]:
        """Return (memory id, vector bytes) for the memories passing the filter, by id."""
        ...

    def counts(self) -> MemoryCounts:
        """Return how many memories there are, by status, type and project."""
        ...
