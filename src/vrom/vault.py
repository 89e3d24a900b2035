"""`Vault`: a folder of Markdown notes, indexed into a store and searchable with provenance."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from vrom import settings, state
from vrom._vault_files import VaultFiles
from vrom._vault_format import VaultFormat
from vrom._vault_notes import VaultNotes
from vrom._vault_sync import VaultSync
from vrom.corpus import Corpus
from vrom.embed import AUTO, Embedder, EmbedderBinding, EmbedderChoice
from vrom.errors import NotFoundError, ValidationError, shown
from vrom.export import export_store
from vrom.index import METRICS
from vrom.ingest.chunk import ChunkStrategy
from vrom.ingest.confine import ReadPurpose, confine
from vrom.ingest.embed_job import EmbeddingBusy, embedding_status
from vrom.ingest.embedding import EmbedProgress, stored_fingerprint
from vrom.ingest.freshness import fresh_notes
from vrom.ingest.indexer import (
    STRATEGY_META_KEY,
    Indexer,
    IndexOptions,
    ProgressCallback,
)
from vrom.ingest.parse import is_utf8, shown_path
from vrom.ingest.sync import SyncProgress
from vrom.ingest.walk import DEFAULT_MAX_FILE_BYTES
from vrom.memories import Memories
from vrom.results import (
    BackendInfo,
    Context,
    DeleteResult,
    ExportSummary,
    FolderListing,
    FormatReport,
    Hit,
    IndexSummary,
    Note,
    NoteRef,
    Related,
    SearchReport,
    SyncSummary,
    TagCount,
    VaultStats,
    VectorInfo,
    WriteResult,
    changed_hit,
)
from vrom.search.context import RELATIVE_CUTOFF, expand_hits, format_context
from vrom.search.query import parse_where
from vrom.search.vector import HNSW_THRESHOLD
from vrom.store import Location, is_server_url, mask_url, open_store

VAULT_ENV = settings.VAULT_ENV
__all__ = ["AUTO", "VAULT_ENV", "EmbedderChoice", "Vault"]


class Vault:
    """A notes vault and its store. Open it with `Vault.open`; close it (or use ``with``)."""

    def __init__(
        self,
        root: Path,
        corpus: Corpus,
        options: IndexOptions,
        state_base: Path | None = None,
        namespace: str | None = None,
    ) -> None:
        self.root = root
        self.namespace = namespace or state.default_namespace(root)
        """The vault's namespace in a shared database: where `sync_to` copies it by default,
        and where its store is when that is on a database server."""
        self.corpus = corpus
        """The search core: this vault's store, model and vector indexes."""
        self.store = corpus.store
        self._options = options
        self._state_base = state_base
        self._indexer = Indexer(self.store, root, options)
        self._notes = VaultNotes(root, self.store)
        # through the public method, so a caller's wrapper of reindex_paths applies to writes too
        self._files = VaultFiles(
            root, self.store, options.max_file_bytes, lambda paths: self.reindex_paths(paths)
        )
        self._format = VaultFormat(root, self._files, options.max_file_bytes)
        self._sync = VaultSync(self.store, self.root, self.namespace)

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        state_dir: str | os.PathLike[str] | None = None,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        chunk_chars: int = 1000,
        chunk_overlap: int = 150,
        create: bool = True,
        embedder: EmbedderChoice = AUTO,
        metric: str = "cosine",
        hnsw_threshold: int = HNSW_THRESHOLD,
        vector_encoding: str | None = None,
        database_url: Location = None,
        namespace: str | None = None,
        local: bool = False,
    ) -> Vault:
        """Return the vault at ``path``, with its store in the state directory or a database.

        The vault's files stay in ``path``; its store is in ``database_url`` when given (a
        ``postgresql://USER:PASSWORD@HOST/DB`` URL, a ``sqlite:///FILE`` URL or a store file),
        else in ``$VROM_DATABASE_URL``, else in the vault's own SQLite file under the state
        directory (``local=True`` asks for that file whatever ``$VROM_DATABASE_URL`` says). In
        a database the vault's store is one namespace among many: ``namespace``, by default
        the vault folder's name (`vrom.state.default_namespace`), so the same vault on two
        machines shares one store; a SQLite file holds one store and ignores it.

        ``state_dir`` overrides ``VROM_STATE_DIR`` and the user data dir. ``max_file_bytes`` skips
        larger files; ``chunk_chars``/``chunk_overlap`` set the chunk strategy (a change re-chunks
        every note on the next index). With ``create=False`` a vault that was never indexed is a
        `NotFoundError` instead of a new, empty store. ``embedder``: an `Embedder`, a spec string
        (see `Embedder.from_spec`), None for keyword search only, or ``"auto"`` (the default:
        ``$VROM_EMBEDDER``, else the default local model); a model loads only when first needed.
        ``metric`` (cosine, dot, euclidean) and ``hnsw_threshold`` (the vector count from which
        search uses the HNSW index instead of exact search) configure vector search;
        ``vector_encoding`` stores vectors as ``float32`` (the default for a new store) or ``int8``
        with a per-vector scale (a quarter of the space); None keeps what the store has.
        """
        if not os.fspath(path):  # Path("") would be the current folder
            raise ValidationError("the vault path is empty: give a folder ('.' for this one)")
        root = Path(path).expanduser()
        if not root.is_dir():
            problem = "is not a folder" if root.exists() else "does not exist"
            raise NotFoundError(f"vault folder {os.fspath(path)!r} {problem}")
        root = root.resolve()
        if not is_utf8(str(root)):  # SQLite, JSON and MCP hold UTF-8 only
            raise ValidationError(
                f"vault folder '{shown_path(str(root))}' has a name that is not valid UTF-8:"
                " rename it to use it with vrom"
            )
        if max_file_bytes < 1:
            raise ValidationError(f"max_file_bytes must be positive, not {max_file_bytes}")
        try:
            strategy = ChunkStrategy(target_chars=chunk_chars, overlap_chars=chunk_overlap)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
        if metric not in METRICS:
            raise ValidationError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        namespace = state.checked_namespace(namespace) or state.default_namespace(root)
        base = state.state_dir(state_dir)
        location = state.store_location(database_url, local)
        if location is None:
            path_of_store = state.store_path(root, base)
            if not create and not path_of_store.exists():
                raise NotFoundError(
                    f"vault {str(root)!r} is not indexed yet: run 'vrom index {root}'"
                )
            store = open_store(path_of_store, create=create)
        else:
            store = state.open_vault_store(location, namespace, root, create=create)
        corpus = Corpus(
            store,
            EmbedderBinding(embedder, settings.embedder_spec()),
            metric=metric,
            hnsw_threshold=hnsw_threshold,
            encoding=vector_encoding,
        )
        return cls(root, corpus, IndexOptions(max_file_bytes, strategy), base, namespace)

    @classmethod
    def open_store(
        cls,
        db_path: str | os.PathLike[str],
        *,
        embedder: EmbedderChoice = AUTO,
        vector_encoding: str | None = None,
    ) -> Vault:
        """Return the vault whose store file is ``db_path`` (the store must exist).

        ``db_path`` is a path or a ``sqlite:///`` URL; a vault whose store is on a database
        server is opened from its folder instead (`open` with ``database_url``). Re-indexing
        through it keeps the chunk strategy the store was last indexed with.
        """
        if is_server_url(db_path):
            raise ValidationError(
                f"{mask_url(os.fspath(db_path))} is a database, not a store file: open the vault"
                " from its folder with Vault.open(path, database_url=...) (--vault PATH --db URL)"
            )
        store = open_store(db_path, create=False)
        root = store.get_meta("vault_root")
        if root is None:
            store.close()
            raise NotFoundError(f"store {store.location!r} has not indexed a vault yet")
        recorded = json.loads(store.get_meta(STRATEGY_META_KEY) or "{}")
        strategy = ChunkStrategy(
            target_chars=recorded.get("target_chars", ChunkStrategy.target_chars),
            overlap_chars=recorded.get("overlap_chars", ChunkStrategy.overlap_chars),
        )
        corpus = Corpus(
            store,
            EmbedderBinding(embedder, settings.embedder_spec()),
            encoding=vector_encoding,
        )
        return cls(Path(root), corpus, IndexOptions(strategy=strategy))

    @classmethod
    def open_default(
        cls,
        state_dir: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        *,
        embedder: EmbedderChoice = AUTO,
        vector_encoding: str | None = None,
        database_url: Location = None,
        namespace: str | None = None,
        local: bool = False,
    ) -> Vault:
        """Return the vault to use when none is named.

        In order: ``VROM_VAULT`` or ``VAULT_ROOT`` (see `vrom.settings.vault_variable`); the
        nearest indexed vault at or above the current directory; the vault indexed last. With
        its store in a database (``database_url`` or ``$VROM_DATABASE_URL``; see `open`),
        after ``VROM_VAULT``: the vault indexed last on this machine, else the current
        directory (a database is not searched for the folders it holds).
        """
        options: dict[str, Any] = {
            "create": False,
            "embedder": embedder,
            "vector_encoding": vector_encoding,
            "database_url": database_url,
            "namespace": namespace,
            "local": local,
        }
        named = settings.vault_variable()
        if named is not None:
            variable, folder = named
            try:
                return cls.open(folder, state_dir, **options)
            except NotFoundError as exc:  # say where the path came from: no --vault was given
                raise NotFoundError(f"${variable}: {exc}") from exc
        base = state.state_dir(state_dir)
        start = Path(cwd) if cwd is not None else Path.cwd()
        if state.store_location(database_url, local) is not None:
            return cls.open(
                state.last_vault(base, stored_here=False) or start, state_dir, **options
            )
        root = state.find_indexed_vault(start, base) or state.last_vault(base)
        if root is None:
            raise NotFoundError(
                "no indexed vault here: run 'vrom index PATH' first, or pass --vault PATH"
            )
        return cls.open(root, state_dir, **options)

    def close(self) -> None:
        """Close the store (and a model vrom loaded; never one the caller passed in); later
        calls raise `StorageError`."""
        self.corpus.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Vault({str(self.root)!r}, store={self.store.location!r})"

    # -- syncing ---------------------------------------------------------------------------

    def sync_to(
        self,
        database_url: Location,
        *,
        namespace: str | None = None,
        progress: SyncProgress | None = None,
    ) -> SyncSummary:
        """Copy this vault's store into a database (or another store file); return what was
        copied.

        The target (in ``namespace``, by default this vault's `namespace`) ends up holding this
        store's notes exactly, with their chunks, links, tags and vectors, plus the memories it
        lacked or held in an older version: only what changed is written, nothing is
        re-embedded, and a sync interrupted half way ends, when run again, as one that was not.
        Stores whose vectors come from different models are refused (`ModelError`).
        ``progress(done, total, path)`` follows the notes. See `vrom.ingest.sync`.
        """
        return self._sync.to(database_url, namespace, progress)

    def sync_from(
        self,
        database_url: Location,
        *,
        namespace: str | None = None,
        progress: SyncProgress | None = None,
    ) -> SyncSummary:
        """Copy a vault's store from a database (or a store file) into this vault's store;
        return what was copied.

        The way a new machine gets a local copy of a shared vault: as `sync_to` the other way
        round (``namespace`` by default this vault's `namespace`), the copy recording this
        machine's folder as its vault. The source must hold an indexed vault (`NotFoundError`).
        """
        return self._sync.from_(database_url, namespace, progress)

    # -- indexing --------------------------------------------------------------------------

    def index(
        self,
        progress: ProgressCallback | None = None,
        *,
        force: bool = False,
        embed_progress: EmbedProgress | None = None,
        embed: bool = True,
    ) -> IndexSummary:
        """Bring the store up to date with the vault; return what changed.

        Only notes whose content changed are rewritten; deleted notes are removed; renamed notes
        keep their id. ``force`` rewrites every note. ``progress(done, total, path)`` is called
        for each file. With an embedder, new and changed chunks are then embedded in batches
        (``embed_progress(embedded, total)``); unchanged text keeps its vector. ``embed=False``
        stops after the keyword index (seconds even for thousands of notes): embed later, or in
        the background (`vrom.vault.Vault.embed`, `vrom mcp`); another model's vectors are
        refused all the same.
        """

        def run() -> IndexSummary:
            summary = self._indexer.index(progress, force=force)
            if self._state_base is not None:
                state.remember_last_vault(self._state_base, self.root)
            return summary

        return self._index_then_embed(run, embed_progress, embed=embed)

    def _index_then_embed(
        self,
        run: Callable[[], IndexSummary],
        embed_progress: EmbedProgress | None = None,
        *,
        embed: bool = True,
    ) -> IndexSummary:
        """Run a keyword indexing pass, then embed what it left without vectors; time both.

        Another model's vectors are refused before anything is written.
        """
        started = time.perf_counter()
        embedding = self.corpus.embedder is not None
        if embedding:
            self.corpus.bind()
        summary = run()
        keyword_done = time.perf_counter()
        embedded, not_embedded = 0, None
        if embedding and embed:
            try:
                embedded = self.corpus.embed_missing(embed_progress)
            except EmbeddingBusy as exc:  # that run embeds what this one added too
                not_embedded = str(exc)
        finished = time.perf_counter()
        return dataclasses.replace(
            summary,
            embedded=embedded,
            not_embedded=not_embedded,
            seconds=round(finished - started, 4),
            index_seconds=round(max(0.0, keyword_done - started - summary.parse_seconds), 4),
            embed_seconds=round(finished - keyword_done, 4),
        )

    def embed(self, *, rebuild: bool = False, progress: EmbedProgress | None = None) -> int:
        """Embed every chunk that has no vector yet; return how many chunks were embedded.

        ``rebuild`` drops all vectors first, the memories' too, and embeds both again: the way
        to switch the store to another model.
        """
        if self.corpus.embedder is None:
            raise ValidationError("no embedder is configured (embedder=None)")
        self.corpus.bind(rebuild=rebuild)
        embedded = self.corpus.embed_missing(progress)
        if rebuild:
            self.memories.embed()
        return embedded

    @property
    def embedder(self) -> Embedder | None:
        """The embedder notes, queries and memories are embedded with (None: keyword only).

        It loads on first use.
        """
        return self.corpus.embedder

    @functools.cached_property
    def memories(self) -> Memories:
        """The agent's memories, kept in this vault's store (see `vrom.memories.Memories`)."""
        return Memories(self.corpus)

    def reindex_paths(
        self, paths: Iterable[str | os.PathLike[str]], *, embed: bool = True
    ) -> IndexSummary:
        """Re-index just these notes (vault-relative or absolute paths inside the vault).

        A path that no longer exists is removed from the store. A path that leads outside the
        vault raises `ValidationError` (code ``path_outside_vault``) before any is re-indexed.
        With an embedder, the notes' new chunks are embedded too, unless ``embed=False`` (as
        in `index`: they are then embedded later, or in the background).
        """
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        # all confined before any is re-indexed, so a refused path changes nothing
        paths = [confine(self.root, os.fspath(path), "reindex").relative for path in paths]
        return self._index_then_embed(lambda: self._indexer.reindex_paths(paths), embed=embed)

    # -- reading ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        mode: str | None = None,
        *,
        path: str | None = None,
        tags: str | Sequence[str] | None = None,
        expand_context: bool = False,
        context_window: int = 1,
        ef_search: int | None = None,
        per_note: bool = False,
    ) -> list[Hit]:
        """Return the ``k`` best chunks for a query, best first; each hit says whether its note
        is still as indexed (``fresh``).

        ``per_note`` returns ``k`` distinct notes instead, each with its best chunk (its first
        in the ranking: the order is the chunks' own), as ``vrom search`` and MCP's
        ``vault_search`` do by default. ``ef_search`` (at least ``k``) widens the HNSW search
        for this query on large stores.

        ``expand_context`` fills each hit's ``context_text`` with the chunk joined to
        ``context_window`` neighbouring chunks a side (following prev/next links).

        ``mode``: ``keyword`` (BM25), ``vector`` (meaning), ``hybrid`` (both, fused:
        `vrom.search.fusion.fuse`), ``rerank`` (keyword candidates reranked by vector
        similarity, human relevance and text quality: the VaultLayer hybrid-search contract); by
        default hybrid when the store holds vectors of the configured embedder, else keyword.

        ``where`` filters notes by frontmatter inside every retriever, in the one filter grammar
        (docs/filters.md: ``{"status": "done", "year": {"$gte": 2024}}``); ``path`` keeps
        notes under a folder or path prefix, ``tags`` notes holding every tag given. See
        `vrom.search.query` for the keyword query syntax.
        """
        notes = parse_where(where, path=path, tags=tags)
        hits = self.corpus.search(query, k, notes, mode, per_document=per_note, ef_search=ef_search)
        return self._finished(hits, expand_context, context_window)

    def search_report(
        self,
        query: str,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        mode: str | None = None,
        *,
        path: str | None = None,
        tags: str | Sequence[str] | None = None,
        expand_context: bool = False,
        context_window: int = 1,
        ef_search: int | None = None,
        per_note: bool = False,
    ) -> SearchReport:
        """Return `search`'s hits with how they were found (what agents and the CLI are told).

        Where `search` refuses a mode by meaning that cannot run (no embedder, no vector
        yet), this searches by keyword and says why; it also counts the chunks with vectors.
        ``per_note``, ``where``, ``path`` and ``tags`` as for `search` (the CLI and MCP pass
        ``per_note`` unless asked for chunks).
        """
        notes = parse_where(where, path=path, tags=tags)
        report = self.corpus.search_report(
            query, k, notes, mode, per_document=per_note, ef_search=ef_search
        )
        hits = self._finished(list(report.results), expand_context, context_window)
        return dataclasses.replace(report, results=hits)

    def _finished(self, hits: list[Hit], expand_context: bool, context_window: int) -> list[Hit]:
        """Return the core's ``hits`` as the vault gives them: joined to their neighbouring
        chunks when asked, and with ``fresh`` set: whether each note on disk still holds what
        was indexed (`vrom.ingest.freshness`; checked once per note)."""
        if expand_context:
            hits = expand_hits(self.store, hits, context_window)
        fresh = fresh_notes(self.root, self.store, (hit.path for hit in hits))
        return [changed_hit(hit, fresh=fresh[hit.path]) for hit in hits]

    def context(
        self,
        query: str,
        max_tokens: int = 2000,
        k: int = 20,
        where: Mapping[str, Any] | None = None,
        *,
        mode: str | None = None,
        path: str | None = None,
        tags: str | Sequence[str] | None = None,
        expand_context: bool = False,
        context_window: int = 1,
        include_sources: bool = True,
        relative_cutoff: float | None = RELATIVE_CUTOFF,
    ) -> Context:
        """Return LLM-ready text for a query: the best passages within ``max_tokens``, cited.

        ``expand_context`` joins each hit with ``context_window`` neighbouring chunks a side.
        Hits under ``relative_cutoff`` times the best score are left out, overlapping text is
        given once, and the budget is filled with the most relevant distinct text first (see
        `vrom.format_context`).
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 50:
            raise ValidationError(
                f"max_tokens must be an integer of at least 50, not {shown(max_tokens)}"
            )
        hits = self.search(
            query,
            k,
            where,
            mode=mode,
            path=path,
            tags=tags,
            expand_context=expand_context,
            context_window=context_window,
        )
        context = format_context(
            hits, max_tokens, include_sources, query, relative_cutoff=relative_cutoff
        )
        if hits and not context.sources:
            raise ValidationError(
                f"max_tokens={max_tokens} cannot hold one passage with its source: raise it"
            )
        return context

    def get_note(self, path_or_id: str | int, *, purpose: ReadPurpose = "reference") -> Note:
        """Return a note by path (with or without ``.md``), name, or id, with its current body.

        A path that leaves the vault (``..``, absolute elsewhere, symlinks out) or enters hidden
        folders raises `ValidationError` with code ``path_outside_vault``. An absolute path
        inside the vault is accepted, unless ``purpose="read"``: the rule for paths from an
        agent, which takes only paths from the vault root (and names and ids).
        """
        return self._notes.get_note(path_or_id, purpose)

    def related(
        self, path_or_id: str | int, k: int = 20, *, purpose: ReadPurpose = "reference"
    ) -> Related:
        """Return a note's links, backlinks, notes sharing its tags, and notes similar in meaning.

        Similar notes (cosine of mean chunk vectors) come only when the store has vectors. The
        note is named as for `get_note`, ``purpose`` included.
        """
        return self._notes.related(path_or_id, k, purpose, similar_too=self.corpus.has_vectors())

    def stats(self) -> VaultStats:
        """Return counts and sizes of the vault's store."""
        counts = self.store.counts()
        fingerprint = stored_fingerprint(self.store)
        last = self.store.get_meta("last_indexed_unix")
        return VaultStats(
            vault_root=str(self.root),
            store_path=self.store.location,
            notes=counts.documents,
            chunks=counts.chunks,
            links=counts.links,
            unresolved_links=self.store.documents.unresolved_link_count(),
            tags=counts.tags,
            store_bytes=counts.bytes,
            last_indexed_unix=None if last is None else float(last),
            chunk_strategy=json.loads(self.store.get_meta(STRATEGY_META_KEY) or "{}"),
            vectors=counts.vectors,
            embedding_model=None if fingerprint is None else fingerprint.describe(),
            embedding=embedding_status(self.store),
        )

    def backend_info(self) -> BackendInfo:
        """Return what the store backend is and can do, where writes land first, and how
        searches by meaning run (vector mode, model and fingerprint, index settings)."""
        vectors = self.corpus.vector_info()
        return BackendInfo(
            **self.store.describe(),
            vector_mode=vectors.vector_mode,
            embedding_model=vectors.embedding_model,
            embedding_fingerprint=vectors.embedding_fingerprint,
            vector_index=vectors.index_settings,
        )

    def vector_info(self) -> VectorInfo:
        """Return the vault's vectors and how they are searched: count, dims, dtype, model
        fingerprint, vector mode, index settings and the graph file's state (see
        `vrom.results.VectorInfo`)."""
        return self.corpus.vector_info()

    def export(
        self,
        out: str | os.PathLike[str],
        format: str | None = None,
        *,
        vectors: bool = False,
        full: bool = False,
    ) -> ExportSummary:
        """Export the vault's store for analytics (DuckDB, Parquet) and return what changed.

        Tables: notes, chunks, links, tags, fields, memories, and vectors with ``vectors``;
        ``format`` ``duckdb`` writes one file, ``parquet`` a folder (None: ``duckdb`` for a
        path ending in ``.duckdb`` or ``.db``). Re-exporting to the same ``out`` reads again
        only the notes that changed; ``full`` writes everything again. Needs the ``analytics``
        extra. See `vrom.export.export_store`.
        """
        return export_store(
            self.store, out, format, vectors=vectors, full=full, source=str(self.root)
        )

    # -- files -----------------------------------------------------------------------------
    # Every path below is confined to the vault by `vrom.ingest.confine.confine`:
    # escapes raise `ValidationError` with code ``path_outside_vault``.

    def resolve_note_path(self, path: str) -> str:
        """Return a note path confined to the vault, as a vault-relative POSIX path (for reads).

        Refuses ``..``, absolute paths, symlinks out of the vault and hidden folders; the file
        need not exist, and no ``.md`` is added.
        """
        return self._files.resolve_note_path(path)

    def list_folder(self, folder: str = "") -> FolderListing:
        """Return a folder's direct subfolders and the indexed notes directly in it.

        ``folder`` is vault-relative (``""``, ``"."`` or ``"/"`` is the vault root); a missing
        folder raises `NotFoundError`.
        """
        return self._files.list_folder(folder)

    def notes(self, after: str = "", limit: int = 100) -> list[NoteRef]:
        """Return up to ``limit`` indexed notes by path, those after the path ``after``.

        Pass the last path of one page as ``after`` to get the next: notes added or removed
        meanwhile shift no page.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError(f"limit must be a positive integer, not {limit!r}")
        if not isinstance(after, str):
            raise ValidationError(f"after is a note path, not {type(after).__name__}")
        return self._files.notes(after, limit)

    def tags(self) -> list[TagCount]:
        """Return every tag with the number of notes that have it, most used first."""
        return self._files.tags()

    def notes_with_tag(self, tag: str) -> list[NoteRef]:
        """Return the notes tagged ``tag`` (``#`` optional) or a tag nested under it, by path.

        ``project`` matches ``project`` and ``project/atlas``, not ``projects``.
        """
        return self._files.notes_with_tag(tag)

    def write_note(
        self,
        path: str,
        content: str,
        *,
        mode: str = "create",
        frontmatter: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """Write a note into the vault atomically, re-index it, and return what was done.

        ``path`` is vault-relative; ``.md`` is appended to a name without an extension, and
        only Markdown notes can be written (code ``not_a_note``). ``mode``: ``create`` (an
        existing file raises `ValidationError` with code ``exists``), ``overwrite`` (keeps the
        file's permission bits), or ``append`` (adds ``content`` after one blank line; the note
        must exist, else `NotFoundError`). ``frontmatter`` keys are merged into the resulting
        note's frontmatter (see `set_frontmatter`). Missing folders are created. Content over
        the vault's ``max_file_bytes`` is refused (code ``too_large``). If re-indexing fails,
        the file stays written and the result has ``indexed=False`` and a ``warning``.
        """
        return self._files.write_note(path, content, mode=mode, frontmatter=frontmatter)

    def set_frontmatter(self, path: str, values: Mapping[str, Any], *, merge: bool = True) -> Note:
        """Set a note's frontmatter, keep its body byte for byte, and return the re-indexed note.

        ``merge`` updates the keys given and keeps the others; ``merge=False`` replaces the
        whole frontmatter (an empty mapping removes it). Broken frontmatter is never
        overwritten: it raises `ValidationError` with code ``bad_frontmatter``.
        """
        return self.get_note(self._files.set_frontmatter(path, values, merge=merge))

    def delete_note(self, path: str, *, permanent: bool = False) -> DeleteResult:
        """Delete a note and drop it from the store; return where it went.

        By default the note moves to ``<vault>/.trash/<its path>`` (with a timestamp in the
        name if that is taken); ``permanent=True`` unlinks it.
        """
        return self._files.delete_note(path, permanent=permanent)

    # -- formats ---------------------------------------------------------------------------

    def check_format(self, path: str | None = None) -> FormatReport:
        """Return how the vault's notes stand against OKF v0.2 (the Open Knowledge Format).

        ``path`` is a note or a folder (vault-relative); None checks every note. Each note gets
        its format (an OKF concept, ``index.md``, ``log.md``, a note with frontmatter, plain
        Markdown) and what breaks OKF's conformance rules (errors: what the spec says MUST
        hold) or its advice (warnings: what it says SHOULD hold). Notes are read from disk,
        indexed or not; nothing is written. See `vrom.ingest.okf` for the rules.
        """
        return self._format.report(path, enrich=False)

    def enrich_format(self, path: str | None = None, *, apply: bool = False) -> FormatReport:
        """Return `check_format`'s report with the OKF frontmatter each note lacks (``type``,
        ``title``, ``description``, ``tags``, ``timestamp``), taken from its own content, its
        folder's ``index.md`` and concepts, and its file's modification time.

        Only with ``apply`` are the fields written, through `set_frontmatter`: merged into the
        frontmatter (every field already there is kept, unknown ones too), the body byte for
        byte, and the note re-indexed; a note's errors and warnings are then those of the note
        as written. See `vrom.ingest.okf_enrich` for where each value comes from.
        """
        return self._format.report(path, enrich=True, apply=apply)
