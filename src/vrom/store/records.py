"""The records a store writes and reads back: plain frozen dataclasses, no behaviour.

Every backend speaks in these; nothing here knows SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vrom.filters import Filter


@dataclass(frozen=True)
class DocumentRecord:
    """A note as it is written to the store (``path_key``/``name_key`` resolve links to it).

    ``text`` is the document's whole text when the store is its only copy (a collection's
    document; a vault's note lives in its file and leaves it None): the store keeps it once,
    and chunks that are slices of it are read back from it.
    """

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
    text: str | None = None


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk as it is written to the store; ``text == note_text[char_start:char_end]``.

    ``input_hash`` is the hash of the text its vector is embedded from, when the writer knows
    it (`vrom.ingest.embedding.input_hash`): a vector stored for that same input is reused, and
    none other. None: the chunk gets no stored vector (it is embedded, or given one after).
    """

    position: int
    heading_path: str
    text: str
    char_start: int
    char_end: int
    content_hash: str
    input_hash: str | None = None


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
class DocumentWrite:
    """One document to write with `vrom.store.DocumentStore.put_many`: what ``put`` takes."""

    document: DocumentRecord
    chunks: Sequence[ChunkRecord]
    links: Sequence[LinkRecord]
    tags: Sequence[str]
    document_id: int | None = None


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
    """A note row read back from the store.

    ``indexed_at`` is when the store last wrote the note with its chunks (a note rewritten
    with the same content gets new chunk ids and a new ``indexed_at``; a touched one keeps it).
    """

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
    indexed_at: float = 0.0


def path_ends(path_key: str) -> set[str]:
    """Return the keys a link with a ``/`` finds a document by: its path key and each of its
    trailing parts (``a/b/c``: ``a/b/c``, ``b/c``, ``c``)."""
    parts = path_key.split("/")
    return {"/".join(parts[i:]) for i in range(len(parts))}


@dataclass(frozen=True)
class StoredChunk:
    """A chunk row read back from the store, with the fields of its note that hits cite.

    ``metadata`` is the note's frontmatter (a collection document's metadata);
    ``document_hash`` and ``document_size`` are the note file's SHA-256 and size as indexed
    (with ``mtime``, what tells whether the file still holds it: `vrom.ingest.freshness`).
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
    document_hash: str
    document_size: int
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


@dataclass(frozen=True)
class Where:
    """A document filter: a path prefix, required tags (nested tags match), and filters of the
    one grammar (`vrom.filters`) over the document's fields. All parts must hold.
    """

    path_prefix: str | None = None
    tags: tuple[str, ...] = ()
    conditions: tuple[Filter, ...] = ()


@dataclass(frozen=True)
class KeywordRow:
    """A keyword match: the chunk's id, its note's id and prior, and its BM25 (higher is better).

    Rows are light on purpose: a search ranks many candidates and reads whole chunks
    (`DocumentStore.get_chunks`) only for the few it returns.
    """

    chunk_id: int
    document_id: int
    human_relevance_score: float
    bm25: float


@dataclass(frozen=True)
class KeywordPostings:
    """A keyword index read whole, for ranking in memory exactly as the index ranks.

    ``version`` changes whenever the index does. ``rows`` and ``tokens`` are the index's totals
    (its average chunk length is ``tokens / rows``). ``terms[t]``'s postings are the pairs
    ``term_starts[t]`` to ``term_starts[t + 1]``: ``pair_chunks`` (chunk ids, ascending) and
    ``pair_frequencies`` (the term's occurrences, weighted by column). Per chunk, by ascending
    ``chunk_ids``: ``document_ids``, ``human_relevance`` and ``chunk_lengths`` (tokens). The
    arrays are numpy arrays. ``floor_terms`` are held by half the rows or more (their IDF is
    FTS5's floor) and kept apart from the pairs: ``floor_frequencies[i]`` holds
    ``floor_terms[i]``'s weighted frequency in each chunk (by ``chunk_ids``; 0 where absent).
    """

    version: bytes
    rows: int
    tokens: int
    terms: list[str]
    term_starts: Any
    pair_chunks: Any
    pair_frequencies: Any
    chunk_ids: Any
    document_ids: Any
    human_relevance: Any
    chunk_lengths: Any
    floor_terms: list[str] = field(default_factory=list)
    floor_frequencies: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class VectorChanges:
    """The keys (chunk ids, memory keys) whose vector was added, replaced or removed after some
    change number.

    ``latest`` is the change number the list is complete up to; pass it as ``after`` next time.
    """

    latest: int
    keys: tuple[int, ...]


@dataclass(frozen=True)
class Sidecar:
    """Where a derived file (an ANN graph) is cached beside a store, and the permission bits
    it should get (the store's own, so a shared store shares its caches)."""

    path: Path
    mode: int


@dataclass(frozen=True)
class StoreCounts:
    """Row counts of a store."""

    documents: int
    chunks: int
    links: int
    vectors: int
    tags: int
    bytes: int


@dataclass(frozen=True)
class StoreState:
    """What a search checks its caches against, read once at its start (`Store.state`).

    ``vector_generation`` and ``memory_vector_generation`` change whenever a chunk or memory
    vector is added or removed; ``keyword_version`` whenever the keyword index changes (SQLite:
    FTS5's own records; PostgreSQL: the document generation, since a chunk's tsvector changes
    only with a write of its document; None: a store with no version to read);
    ``newest_memory_key`` is the largest memory key (0 without memories).
    """

    vector_generation: int
    memory_vector_generation: int
    keyword_version: bytes | None
    newest_memory_key: int


MEMORY_STATUSES = ("active", "archived", "superseded")
MOST_FAILING = 10_000
"""Up to this many memories failing a filter of status alone, a recall searches without it and
drops them (`SqlMemories.keys_failing`); past it, it reads the memories passing."""


def failing_windows(wanted: int, failing: int) -> list[int]:
    """Return how many of a ranking to take, smallest first, to find ``wanted`` that pass a
    filter when ``failing`` memories fail it: a quarter more first (few fail, most often),
    then as many more, then all the failing's worth (which holds ``wanted`` passing, if that
    many are ranked)."""
    steps = (min(failing, wanted // 4 + 1), min(failing, wanted), failing)
    return list(dict.fromkeys(wanted + step for step in steps))


STATUS_WRITES_META_KEY = "memory_status_writes"
"""The ``meta`` counter of writes that may change which memories hold a status: each memory
put and status set counts one, so `SqlMemories.keys_failing` knows when the keys it read still
hold (a search's state read holds its value, read in the same statement)."""
VECTOR_ENCODING_META_KEY = "vector_encoding"
"""The metadata key recording how chunk vectors are encoded (``float32`` when absent)."""


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


MEMORY_FIELDS = {
    "project": "text",
    "type": "text",
    "status": "text",
    "source": "text",
    "tags": "list",
    "created": "date",
    "updated": "date",
}
"""The fields a memory filter tests (`vrom.filters.parse_filter`'s ``fields``): ``created`` is
the memory's timestamp, ``updated`` when it last changed."""


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a read sees: those passing ``where``, a filter over `MEMORY_FIELDS`
    (None: all)."""

    where: Filter | None = None


@dataclass(frozen=True)
class MemoryHead:
    """What ranking needs of a memory: its integer key, id and creation time (a recall reads
    whole only the memories it returns, by key)."""

    key: int
    id: str
    created_unix: float


@dataclass(frozen=True)
class MemoryKeywordRow:
    """A keyword match among memories: the memory's head and its BM25 score (higher is better)."""

    head: MemoryHead
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


class RankedMatches(Protocol):
    """A keyword query's matches among the keyword index's rows, ranked as FTS5 ranks them."""

    def best(self, limit: int) -> list[tuple[int, float]]:
        """Return up to ``limit`` (row id, score) pairs, best score first, ties by row id."""
        ...

    def tied(self, score: float) -> list[int]:
        """Return the row ids of every match scoring exactly ``score``."""
        ...


MemoryKeywordCopy = Callable[[], "RankedMatches | None"]
"""A memory search's query matched in an in-memory copy of the memories' keyword index
(SQLite's), or None when the copy is not current; called inside the search's snapshot, so a
current copy is current for all of it."""
