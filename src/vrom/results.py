"""Plain result types that the SDK returns and the CLI (``--json``) and MCP server serialise.

Every type is a frozen dataclass with documented fields; `to_jsonable` is the one function that
turns any of them (or a list of them) into JSON-ready dicts, so all faces return the same shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hit:
    """One search result: a chunk of a note, with the provenance needed to cite it exactly.

    Fields:
        chunk_id: the chunk's id in the store; ids are never reused, and a note's chunks get
            new ids each time the note is rewritten (``content_hash`` identifies the text).
        path: the note's path relative to the vault root, with ``/`` separators.
        title: the note's title (frontmatter ``title`` › first H1 › file name).
        heading_path: the headings above the chunk, joined with `` > `` ("Setup > Install").
        excerpt: a bounded excerpt of the chunk around the best match.
        score: the final ranking score (higher is better); its parts are in ``scores``, and
            what it measures in ``score_kind``.
        content_hash: SHA-256 of the chunk's text, hex.
        modified_unix: the note file's modification time (seconds since the epoch).
        human_relevance_score: the note's human-relevance prior in [0, 1].
        note_id: the note's id in the store.
        position: the chunk's position in the note (0-based).
        char_start, char_end: the chunk's character offsets in the note's (or the collection
            document's) text.
        text: the chunk's whole text; in a `vrom.Collection` hit, the document's whole text as
            it was added (the chunk is ``chunk_text``).
        scores: the parts of ``score`` (``bm25``, ``vector``, ``fused``, ``rrf``, ``prior``).
        context_text: with ``expand_context``, the chunk joined with its neighbours in the note.
        context_chunk_ids: the ids of the chunks ``context_text`` spans, in order.
        prev_chunk_id, next_chunk_id: the chunks before and after this one in its note (None
            at either end): the links context expansion follows.
        id: the document's id: its path in a vault, the id it was added with in a collection.
        metadata: the document's metadata: a note's frontmatter, a collection document's
            ``metadata``.
        chunk_text: in a `vrom.Collection` hit, the best-matching chunk's text,
            ``text[char_start:char_end]``; None elsewhere, where ``text`` is the chunk.
        fts_score, vector_score, text_quality_score, ranking_runtime: set by the ``rerank``
            mode (the VaultLayer hybrid-search contract): BM25 normalised to [0, 1] among the
            candidates, cosine similarity, a [0, 1] estimate of how much the chunk is prose
            (not link lists, code or fragments), and the reranking's wall time in milliseconds.
        score_kind: what ``score`` is, so it can be labelled and never compared across kinds:
            ``bm25`` (keyword: BM25 times the human-relevance prior), ``fused`` (hybrid: the
            keyword and vector scores, each normalised to [0, 1], combined by
            `vrom.search.fusion.fuse`, times the prior), ``cosine`` (vector: cosine similarity;
            ``dot`` or ``euclidean``, minus the distance, on stores opened with those metrics),
            ``rerank`` (the rerank mode's weighted sum, in [0, 1]).
        fresh: for a vault's hit, whether the note on disk still holds what was indexed
            (checked at search time: its size and modification time, or its SHA-256 when they
            differ); False when it changed or is gone since, so the hit's text may no longer
            be the note's (``vrom index`` brings it up to date). None where there is no file
            (collections, packs, memories).
        stale: True when the note's ``stale_after`` instant (OKF v0.2 §5.5) has passed at the
            time of the search: the content may no longer hold.
        stale_after: the note's ``stale_after`` as an ISO 8601 UTC datetime (a date alone is
            its midnight UTC), or None when it has none (or one that is not a date).
    """

    chunk_id: int
    path: str
    title: str
    heading_path: str
    excerpt: str
    score: float
    content_hash: str
    modified_unix: float
    human_relevance_score: float
    note_id: int
    position: int
    char_start: int
    char_end: int
    text: str
    scores: Mapping[str, float] = field(default_factory=dict)
    id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    chunk_text: str | None = None
    context_text: str | None = None
    context_chunk_ids: Sequence[int] = ()
    fts_score: float | None = None
    vector_score: float | None = None
    text_quality_score: float | None = None
    ranking_runtime: float | None = None
    prev_chunk_id: int | None = None
    next_chunk_id: int | None = None
    score_kind: str = ""
    stale: bool = False
    stale_after: str | None = None
    fresh: bool | None = None


@dataclass(frozen=True)
class SearchReport:
    """What a search found, and how (what the MCP server's ``vault_search`` returns).

    Fields:
        results: the hits, best first.
        mode: the mode that ran: ``keyword``, ``vector``, ``hybrid`` or ``rerank``.
        fallback: why ``mode`` is keyword when another mode was asked for (or is the default
            once vectors exist): no embedder is configured, or no chunk has a vector yet. None
            when the search ran as asked.
        vectors, chunks: how many of the store's chunks have a vector: searches by meaning
            see only those (keyword search sees every chunk).
    """

    results: Sequence[Hit]
    mode: str
    fallback: str | None
    vectors: int
    chunks: int


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
class Context:
    """LLM-ready text built from search hits within a token budget.

    ``text`` holds numbered passages followed by a ``Sources:`` list; ``sources`` are the hits
    it used, in order; ``tokens`` is the estimated size of ``text``.
    """

    query: str
    text: str
    tokens: int
    sources: Sequence[Hit]


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


def changed_hit(hit: Hit, **changes: Any) -> Hit:
    """Return ``hit`` with ``changes``: `dataclasses.replace` at half the cost, for the steps
    that finish every hit a search returns (a collection's whole text, a note's freshness)."""
    return Hit(**{**vars(hit), **changes})


def to_jsonable(value: Any, *, omit_empty: bool = False) -> Any:
    """Return ``value`` (a result dataclass, or lists/dicts of them) as JSON-ready data.

    ``omit_empty`` leaves out the dataclass fields that are None, and the optional ones (those
    with a default) that are an empty list: a smaller reply, whose required fields are always
    there (a search with no hits still has ``results: []``); a mapping's entries, such as a
    note's frontmatter, are kept as they are.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name), omit_empty=omit_empty)
            for f in dataclasses.fields(value)
            if not (omit_empty and _empty(f, getattr(value, f.name)))
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, omit_empty=omit_empty) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, omit_empty=omit_empty) for v in value]
    return value


def _empty(field: dataclasses.Field[Any], item: object) -> bool:
    """True for None, and for an empty list in a field that has a default."""
    if item is None:
        return True
    optional = (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )
    return optional and isinstance(item, (list, tuple)) and not item


@dataclass(frozen=True)
class SearchResult:
    """One result of searching a mounted pack (`vrom.AgentMemory.search`): the seed's view of a
    `Hit` (see `vrom.agent_memory.search_result`).

    Fields:
        text: the chunk's text (with ``expand_context``, joined with its neighbours).
        metadata: ``chunk_id``, ``source_file``, ``section_heading``, ``prev_chunk_id``,
            ``next_chunk_id``, ``url``, ``doc_title``, ``content_hash``, and ``text`` (the chunk
            before any expansion); expanded results also carry ``_expanded`` (True) and
            ``_context_chunks`` (how many chunks were joined); outside vector mode, ``score``,
            its parts ``scores`` and what it is, ``score_kind`` (see `Hit`).
        distance: in vector mode the cosine distance in [0, 2], smaller is nearer; otherwise
            ``1 - score / best score`` (0 for the best). Results come best first.
        id: the chunk's id in the pack.
    """

    text: str
    metadata: Mapping[str, Any]
    distance: float
    id: int


@dataclass(frozen=True)
class MountStatus:
    """What `vrom.AgentMemory` has mounted: the pack id and version, whether it is ready to
    search, its vector count and dimensions, and the embedding model its queries use."""

    active_vrom: str | None
    version: str | None
    ready: bool
    vectors: int
    dim: int
    model: str | None


def vector_coverage(vectors: int, chunks: int) -> str:
    """Return how complete a store's vectors are: ``2,368 / 24,096 (10%)``."""
    share = 100 * vectors / chunks if chunks else 100.0
    percent = f"{share:.0f}%" if share >= 1 or not vectors else f"{share:.1f}%"
    if vectors < chunks and percent == "100%":
        percent = "99%"  # never round an unfinished store up to complete
    return f"{vectors:,} / {chunks:,} ({percent})"


def rough_duration(seconds: float) -> str:
    """Return a rough duration a person reads at a glance: ``45 s``, ``12 min``, ``1 h 20 min``."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
