"""The writing half of a `Vault`: indexing and embedding, syncing, writing notes, formats, export,
and what the store holds (its stats, backend, vectors).

`Vault` inherits these methods; its read half (search, context, notes and links) stays in
`vrom.vault`. Each method works on the vault's parts built by `Vault.__init__`: the indexer,
the files (`vrom._vault_files`), the formats (`vrom._vault_format`) and the syncs
(`vrom._vault_sync`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrom import state
from vrom._vault_files import VaultFiles
from vrom._vault_format import VaultFormat
from vrom._vault_sync import VaultSync
from vrom.corpus import Corpus
from vrom.errors import ValidationError
from vrom.export import export_store
from vrom.ingest.confine import confine
from vrom.ingest.embed_job import EmbeddingBusy, embedding_status
from vrom.ingest.embedding import EmbedProgress, stored_fingerprint
from vrom.ingest.indexer import STRATEGY_META_KEY, Indexer, ProgressCallback
from vrom.ingest.sync import SyncProgress
from vrom.results import (
    BackendInfo,
    DeleteResult,
    ExportSummary,
    FormatReport,
    IndexSummary,
    Note,
    SyncSummary,
    VaultStats,
    VectorInfo,
    WriteResult,
)
from vrom.store import Location, Store

if TYPE_CHECKING:
    from vrom.ingest.confine import ReadPurpose
    from vrom.memories import Memories


class VaultWrites:
    """What changes a vault or its store; mixed into `Vault` (see the module docstring)."""

    root: Path
    namespace: str
    corpus: Corpus
    store: Store
    _state_base: Path | None
    _indexer: Indexer
    _files: VaultFiles
    _format: VaultFormat
    _sync: VaultSync

    if TYPE_CHECKING:  # defined by `Vault`

        @property
        def memories(self) -> Memories: ...

        def get_note(
            self, path_or_id: str | int, *, purpose: ReadPurpose = "reference"
        ) -> Note: ...

    # -- what the store holds -----------------------------------------------------------

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

    # -- export ----------------------------------------------------------------------------

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

    # -- writing notes ---------------------------------------------------------------------

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
