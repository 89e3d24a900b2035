"""Plain result types of a vault's reads and writes and of the admin commands (indexing,
stats, backend and vector facts, export, sync, format checks).

Frozen dataclasses with documented fields, like the search results in `vrom.results` (which
re-exports them); `vrom.results.to_jsonable` turns any of them into JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class IndexWarning:
    """A file that was skipped or indexed with a caveat, and why (``reason`` is one line)."""

    path: str
    reason: str


@dataclass(frozen=True)
class IndexSummary:
    """What one indexing run did.

    Fields:
        added, changed, removed, renamed: notes written, rewritten, deleted and moved.
        unchanged: notes whose content was already indexed.
        skipped: files left out (binary, too large, unreadable, escaping symlinks, ...).
        notes, chunks: totals in the store after the run.
        seconds: the run's whole wall time, embedding included.
        warnings: one entry per skipped file or caveat (broken frontmatter, bad UTF-8, ...).
        embedded: chunks embedded by this run (0 without an embedder).
        parse_seconds: of ``seconds``, reading, parsing and chunking notes.
        index_seconds: of ``seconds``, the rest of the keyword part: walking the folder and
            writing notes, chunks and the keyword index.
        embed_seconds: of ``seconds``, embedding (the model's loading included).
        not_embedded: why this run embedded nothing although chunks lack vectors (another
            process is embedding the store), else None.
    """

    added: int
    changed: int
    removed: int
    renamed: int
    unchanged: int
    skipped: int
    notes: int
    chunks: int
    seconds: float
    warnings: Sequence[IndexWarning] = ()
    embedded: int = 0
    parse_seconds: float = 0.0
    index_seconds: float = 0.0
    embed_seconds: float = 0.0
    not_embedded: str | None = None


@dataclass(frozen=True)
class NoteRef:
    """A pointer to a note: its id, path and title."""

    note_id: int
    path: str
    title: str


@dataclass(frozen=True)
class Link:
    """A link written in a note.

    ``kind`` is ``wikilink``, ``embed`` or ``markdown``; ``target`` is as written; ``heading``
    and ``alias`` are the ``#heading`` and ``|alias`` parts; ``resolved_path`` is the path of the
    note it points to, or None when no note matches.
    """

    kind: str
    target: str
    heading: str | None
    alias: str | None
    resolved_path: str | None


@dataclass(frozen=True)
class Note:
    """A whole indexed note as the store holds it, plus its body re-read from the vault."""

    note_id: int
    path: str
    title: str
    frontmatter: Mapping[str, Any]
    headings: Sequence[str]
    tags: Sequence[str]
    links: Sequence[Link]
    content_hash: str
    modified_unix: float
    size: int
    human_relevance_score: float
    chunk_count: int
    body: str


@dataclass(frozen=True)
class SharedTags:
    """A note that shares tags with another, and which tags."""

    note: NoteRef
    tags: Sequence[str]


@dataclass(frozen=True)
class SimilarNote:
    """A note close in meaning to another; ``score`` is the cosine of their mean chunk vectors."""

    note: NoteRef
    score: float


@dataclass(frozen=True)
class Related:
    """Notes related to ``note``: links, backlinks, shared tags, and (with vectors) similar notes."""

    note: NoteRef
    links: Sequence[Link]
    backlinks: Sequence[NoteRef]
    shared_tags: Sequence[SharedTags]
    similar: Sequence[SimilarNote] = ()


@dataclass(frozen=True)
class EmbeddingStatus:
    """What a store's current or last embedding run reported (``vrom stats``, ``vault_stats``).

    Fields: ``running`` (a process is embedding the store now), ``pid`` (that process, or the
    last run's), ``vectors`` and ``chunks`` (the store's chunks with a vector, of all, at the
    last report), ``embedded`` (by that run), ``chunks_per_second`` (measured from its first
    committed batch on; None before), ``eta_seconds`` (time left while running, else None),
    ``updated_unix`` (when it last reported).
    """

    running: bool
    pid: int | None
    vectors: int
    chunks: int
    embedded: int
    chunks_per_second: float | None
    eta_seconds: float | None
    updated_unix: float | None


@dataclass(frozen=True)
class VaultStats:
    """Counts and sizes of one vault's store (``embedding_model`` names the vectors' model;
    ``embedding`` is what the store's current or last embedding run reported, if any)."""

    vault_root: str
    store_path: str
    notes: int
    chunks: int
    links: int
    unresolved_links: int
    tags: int
    store_bytes: int
    last_indexed_unix: float | None
    chunk_strategy: Mapping[str, Any]
    vectors: int = 0
    embedding_model: str | None = None
    embedding: EmbeddingStatus | None = None


@dataclass(frozen=True)
class BackendInfo:
    """What the store backend is and can do, and how vrom writes and searches it.

    Fields beyond the backend's own (``details`` holds backend-specific facts):
        index_write_mode: where a write lands first: ``sqlite-fts5-primary`` (the SQLite file
            and its FTS5 keyword index, in one transaction; vectors follow in the same file,
            and the HNSW graph is a cache rebuilt from them).
        vector_mode: how a search by meaning runs now (see `VectorInfo.vector_mode`).
        embedding_model: the model of the stored vectors (``all-MiniLM-L6-v2 (384 d)``), or
            None before any vector.
        embedding_fingerprint: that model's whole fingerprint (model, revision, dims, pooling,
            max_tokens, normalized) and its short ``id`` (`vrom.embed.Fingerprint.digest`).
        vector_index: the vector index settings (see `VectorInfo.index_settings`).
    """

    backend: str
    store_path: str
    schema_version: int
    fts_tokenizers: Sequence[str]
    capabilities: Sequence[str]
    details: Mapping[str, Any] = field(default_factory=dict)
    index_write_mode: str = ""
    vector_mode: str = ""
    embedding_model: str | None = None
    embedding_fingerprint: Mapping[str, Any] | None = None
    vector_index: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VectorInfo:
    """A store's chunk vectors and how vrom searches them (``vrom vector-info``).

    vrom keeps vectors in its own store and searches them with its own index, not sqlite-vec:
    exact search over a float32 matrix below ``hnsw_threshold`` vectors, a usearch HNSW graph
    (a cache file beside the store, rebuilt from it when missing or stale) from there on.

    Fields:
        vector_mode: how a search by meaning runs now: ``exact-float32`` (every vector scored;
            int8 vectors are decoded to float32 first), ``usearch-hnsw`` (the graph), or
            ``none`` (no vector yet).
        vectors: chunks with a vector; chunks: chunks in all.
        dims: dimensions of each vector (None before any vector).
        dtype: how vectors are stored: ``float32``, or ``int8`` with a per-vector scale.
        bytes_per_vector: what one stored vector takes (None before any vector).
        embedding_model, embedding_fingerprint: as in `BackendInfo`.
        index_settings: ``index`` (``auto``: exact below ``hnsw_threshold`` vectors, HNSW from
            there; ``flat`` or ``hnsw`` fix it), ``metric``, ``hnsw_threshold``, ``ef_search``
            (the graph's search width), ``connectivity`` (M) and ``ef_construction`` (its build
            width), ``graph_dtype`` (how the graph holds vectors: ``f16``).
        graph: the graph file: ``path``, ``bytes``, ``vectors``, ``changes_behind`` and
            ``state`` (``current``, ``behind``: the next search catches it up, ``rebuild``:
            the next search that needs it builds it again, ``missing``, or ``none``: the store
            keeps no file beside it).
        memory_vectors: agent memories with a vector (searched by an index of their own).
    """

    vector_mode: str
    vectors: int
    chunks: int
    dims: int | None
    dtype: str
    bytes_per_vector: int | None
    embedding_model: str | None
    embedding_fingerprint: Mapping[str, Any] | None
    index_settings: Mapping[str, Any]
    graph: Mapping[str, Any]
    memory_vectors: int = 0


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote (`vrom.export.export_store`, ``vrom export``).

    Fields:
        out: the DuckDB file or Parquet folder written.
        format: ``duckdb`` or ``parquet``.
        notes: notes in the export (all the store holds).
        added, changed, removed, unchanged: notes since the export ``out`` held (every note is
            ``added`` in a full export); ``changed`` counts notes whose content changed or that
            the store rewrote (re-chunked), whose chunks, links and tags were read again.
        incremental: True when only those notes' rows were read and rewritten.
        tables: rows per table (``notes``, ``chunks``, ``links``, ``tags``, ``fields``,
            ``memories``, and ``vectors`` when included).
        vectors: True when the chunk vectors are included.
        seconds: the export's wall time.
        note: why an export ``out`` held was not brought up to date but written again in full
            (another store, another export format version, a Parquet file changed since),
            or None.
    """

    out: str
    format: str
    notes: int
    added: int
    changed: int
    removed: int
    unchanged: int
    incremental: bool
    tables: Mapping[str, int]
    vectors: bool
    seconds: float
    note: str | None = None


@dataclass(frozen=True)
class SyncSummary:
    """What a sync copied from one store to another (`vrom.vault.Vault.sync_to`, ``vrom sync``).

    Fields:
        source, target: the two stores, as they may be shown (a URL's password masked).
        namespace: the namespace on the database side of the sync (None when neither side is a
            database server).
        notes: notes in the source, all of which the target now holds as the source does.
        added, changed, removed, unchanged: notes the target gained, had rewritten (their
            content or chunking differed), lost (gone from the source), and already held.
        vectors: chunk vectors copied (never re-embedded: a vector goes with its chunk text).
        memories: agent memories copied (new, or changed in the source since);
            memory_vectors: their vectors copied.
        seconds: the sync's wall time.
        skipped: source notes not copied because they hold text no store can hold (a NUL
            character: `vrom.store.storable`); warnings names each and why.
    """

    source: str
    target: str
    namespace: str | None
    notes: int
    added: int
    changed: int
    removed: int
    unchanged: int
    vectors: int
    memories: int
    memory_vectors: int
    seconds: float
    skipped: int = 0
    warnings: Sequence[IndexWarning] = ()


@dataclass(frozen=True)
class FolderListing:
    """What one vault folder holds.

    Fields:
        folder: the folder's path relative to the vault root (``""`` for the root).
        folders: its direct subfolders (vault-relative paths, sorted), without hidden folders,
            the folders vrom never indexes (``.git``, ``.obsidian``, ``.trash``,
            ``node_modules``) and symlinks that leave the vault or lead into such a folder.
        notes: the indexed notes directly in it, sorted by path.
    """

    folder: str
    folders: Sequence[str]
    notes: Sequence[NoteRef]


@dataclass(frozen=True)
class TagCount:
    """A tag (lower-case, without ``#``; nested tags keep their ``/``) and how many notes have it."""

    tag: str
    count: int


@dataclass(frozen=True)
class WriteResult:
    """What writing a note did.

    Fields:
        path: the note's path relative to the vault root (with ``.md`` if it was added).
        created: True when the file did not exist before.
        bytes: the size of the file as written.
        indexed: True when the store holds the note as written (searchable now); False when
            re-indexing failed: the file is written all the same, and ``warning`` says why.
        warning: one line about re-indexing (a failure, or a caveat such as broken
            frontmatter), or None.
    """

    path: str
    created: bool
    bytes: int
    indexed: bool
    warning: str | None = None


@dataclass(frozen=True)
class DeleteResult:
    """What deleting a note did.

    Fields:
        path: the deleted note's path relative to the vault root.
        trashed_to: where the note went, relative to the vault root (under ``.trash/``), or
            None when it was deleted permanently.
        index_updated: True when the note is gone from the store too; False when removing it
            failed (the file is deleted all the same, and ``warning`` says why; the next
            ``index`` removes it).
        warning: one line about updating the store, or None.
    """

    path: str
    trashed_to: str | None
    index_updated: bool = True
    warning: str | None = None


@dataclass(frozen=True)
class FormatIssue:
    """One way a note departs from OKF v0.2 (the Open Knowledge Format), found by a format check.

    Fields:
        code: a short stable name for the kind of problem (``missing_type``, ``bad_frontmatter``,
            ``bad_log_date``, ...).
        message: one line: what is wrong, where, and (when it helps) what to do.
    """

    code: str
    message: str


@dataclass(frozen=True)
class Enrichment:
    """A frontmatter field format enrichment adds to a note, and what its value was taken from.

    Fields:
        field: the frontmatter key (``type``, ``title``, ``description``, ``tags``,
            ``timestamp``).
        value: the value to write.
        source: where it comes from: ``index.md section``, ``sibling concepts``, ``default``
            (type); ``first heading``, ``file name`` (title); ``first paragraph``
            (description); ``inline tags`` (tags); ``file mtime`` (timestamp).
    """

    field: str
    value: Any
    source: str


@dataclass(frozen=True)
class NoteFormat:
    """What one note is, and how it stands against OKF v0.2.

    Fields:
        path: the note's path relative to the vault root.
        format: ``okf_concept`` (frontmatter with a ``type``), ``okf_index`` or ``okf_log``
            (the reserved ``index.md`` and ``log.md``), ``obsidian`` (frontmatter without a
            ``type``) or ``markdown`` (no frontmatter).
        errors: what OKF v0.2's conformance section says MUST hold and does not here.
        warnings: what the spec says SHOULD hold and does not here.
        enrichment: the fields enrichment adds (or added) to the note; empty for a check.
        enriched: True when enrichment was written to the note.
    """

    path: str
    format: str
    errors: Sequence[FormatIssue] = ()
    warnings: Sequence[FormatIssue] = ()
    enrichment: Sequence[Enrichment] = ()
    enriched: bool = False


@dataclass(frozen=True)
class FormatReport:
    """What a format check or enrichment found (`vrom format`, MCP's ``vault_format``).

    Fields:
        action: ``check`` or ``enrich``.
        scope: the note or folder looked at, relative to the vault root (``""``: the whole
            vault).
        applied: True when enrichment was asked to write (``apply``); else it only suggests.
        notes: every note looked at, by path. After a write, a note's errors and warnings are
            those of the note as written.
        formats: how many notes there are of each format.
        errors, warnings: how many errors and warnings there are in all.
        enrichable: how many notes enrichment has fields for.
        enriched: how many notes enrichment wrote.
        okf_version: the OKF version notes are checked against.
    """

    action: str
    scope: str
    applied: bool
    notes: Sequence[NoteFormat]
    formats: Mapping[str, int]
    errors: int
    warnings: int
    enrichable: int
    enriched: int
    okf_version: str
