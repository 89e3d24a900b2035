"""`Vault`: a folder of Markdown notes, indexed into a store and searchable with provenance."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vrom import state
from vrom._vault_files import VaultFiles
from vrom._vault_format import VaultFormat
from vrom._vault_notes import VaultNotes
from vrom._vault_sync import VaultSync
from vrom._vault_writes import VaultWrites
from vrom.corpus import Corpus
from vrom.embed import AUTO, Embedder, EmbedderBinding, EmbedderChoice
from vrom.embed.rerank import RerankerChoice, Reranking
from vrom.errors import NotFoundError, ValidationError
from vrom.index import METRICS
from vrom.ingest.chunk import ChunkStrategy
from vrom.ingest.confine import ReadPurpose
from vrom.ingest.freshness import fresh_notes
from vrom.ingest.indexer import (
    STRATEGY_META_KEY,
    Indexer,
    IndexOptions,
)
from vrom.ingest.parse import is_utf8, shown_path
from vrom.ingest.walk import DEFAULT_MAX_FILE_BYTES
from vrom.memories import Memories
from vrom.queryable import Queryable
from vrom.results import (
    FolderListing,
    Note,
    NoteRef,
    Related,
    SearchReport,
    TagCount,
)
from vrom.search.query import parse_where
from vrom.search.vector import HNSW_THRESHOLD
from vrom.settings import VAULT_ENV, Settings
from vrom.store import Location, Store, is_server_url, mask_url, open_store

__all__ = ["AUTO", "VAULT_ENV", "EmbedderChoice", "Vault"]


class Vault(Queryable, VaultWrites):
    """A notes vault and its store. Open it with `Vault.open`; close it (or use ``with``).

    Its reading half (`search`, `context`) is `vrom.queryable.Queryable`'s, as for every
    facade; its writing half (index, embed, sync, write notes, formats, export) `VaultWrites`.
    """

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
        corpus.freshness = functools.partial(fresh_notes, root)  # each hit's ``fresh``
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
        settings: Settings | None = None,
        reranker: RerankerChoice = None,
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
        ``settings``: what the environment configures (`vrom.settings.Settings`), resolved
        from it now when not given; the arguments beat it. ``reranker`` (a `vrom.Reranker`, a
        spec such as ``onnx:DIR``, or None) is what ``search(..., rerank=True)`` reorders with.
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
        reranking = Reranking(reranker)  # a bad spec fails before anything opens
        config = Settings.from_environment() if settings is None else settings
        base = state.state_dir(state_dir, config)
        location = state.store_location(database_url, local, config)
        try:
            store = cls._opened_store(root, base, location, namespace, create)
        except BaseException:
            reranking.close()
            raise
        corpus = Corpus(
            store,
            EmbedderBinding(embedder, config.embedder_spec, api_key=config.openai_api_key),
            metric=metric,
            hnsw_threshold=hnsw_threshold,
            encoding=vector_encoding,
        )
        corpus.reranking = reranking  # closed with the corpus
        return cls(root, corpus, IndexOptions(max_file_bytes, strategy), base, namespace)

    @staticmethod
    def _opened_store(
        root: Path, base: Path, location: Location, namespace: str, create: bool
    ) -> Store:
        """Return the vault's store: its SQLite file under ``base``, or its namespace in the
        database at ``location``."""
        if location is None:
            path_of_store = state.store_path(root, base)
            if not create and not path_of_store.exists():
                raise NotFoundError(
                    f"vault {str(root)!r} is not indexed yet: run 'vrom index {root}'"
                )
            return open_store(path_of_store, create=create)
        return state.open_vault_store(location, namespace, root, create=create)

    @classmethod
    def open_store(
        cls,
        db_path: str | os.PathLike[str],
        *,
        embedder: EmbedderChoice = AUTO,
        vector_encoding: str | None = None,
        settings: Settings | None = None,
        reranker: RerankerChoice = None,
    ) -> Vault:
        """Return the vault whose store file is ``db_path`` (the store must exist).

        ``db_path`` is a path or a ``sqlite:///`` URL; a vault whose store is on a database
        server is opened from its folder instead (`open` with ``database_url``). Re-indexing
        through it keeps the chunk strategy the store was last indexed with. ``reranker`` as
        for `open`.
        """
        if is_server_url(db_path):
            raise ValidationError(
                f"{mask_url(os.fspath(db_path))} is a database, not a store file: open the vault"
                " from its folder with Vault.open(path, database_url=...) (--vault PATH --db URL)"
            )
        reranking = Reranking(reranker)  # a bad spec fails before anything opens
        try:
            store = open_store(db_path, create=False)
        except BaseException:
            reranking.close()
            raise
        root = store.get_meta("vault_root")
        if root is None:
            store.close()
            reranking.close()
            raise NotFoundError(f"store {store.location!r} has not indexed a vault yet")
        recorded = json.loads(store.get_meta(STRATEGY_META_KEY) or "{}")
        strategy = ChunkStrategy(
            target_chars=recorded.get("target_chars", ChunkStrategy.target_chars),
            overlap_chars=recorded.get("overlap_chars", ChunkStrategy.overlap_chars),
        )
        config = Settings.from_environment() if settings is None else settings
        binding = EmbedderBinding(embedder, config.embedder_spec, api_key=config.openai_api_key)
        corpus = Corpus(store, binding, encoding=vector_encoding)
        corpus.reranking = reranking  # closed with the corpus
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
        settings: Settings | None = None,
        reranker: RerankerChoice = None,
    ) -> Vault:
        """Return the vault to use when none is named (``reranker`` as for `open`).

        In order: ``VROM_VAULT`` or ``VAULT_ROOT`` (see `vrom.settings.Settings.vault_variable`); the
        nearest indexed vault at or above the current directory; the vault indexed last. With
        its store in a database (``database_url`` or ``$VROM_DATABASE_URL``; see `open`),
        after ``VROM_VAULT``: the vault indexed last on this machine, else the current
        directory (a database is not searched for the folders it holds).
        """
        config = Settings.from_environment() if settings is None else settings
        options: dict[str, Any] = {
            "settings": config,
            "create": False,
            "embedder": embedder,
            "vector_encoding": vector_encoding,
            "database_url": database_url,
            "namespace": namespace,
            "local": local,
            "reranker": reranker,
        }
        named = config.vault_variable()
        if named is not None:
            variable, folder = named
            try:
                return cls.open(folder, state_dir, **options)
            except NotFoundError as exc:  # say where the path came from: no --vault was given
                raise NotFoundError(f"${variable}: {exc}") from exc
        base = state.state_dir(state_dir, config)
        start = Path(cwd) if cwd is not None else Path.cwd()
        if state.store_location(database_url, local, config) is not None:
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

    def __repr__(self) -> str:
        return f"Vault({str(self.root)!r}, store={self.store.location!r})"

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
        fallback: bool = False,
        rerank: bool | int = False,
    ) -> SearchReport:
        """Return the ``k`` best chunks for a query, best first, and how they were found (a
        `SearchReport`: its hits, the mode that ran, why it fell back, the vector coverage);
        each hit says whether its note is still as indexed (``fresh``).

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
        A mode by meaning that cannot run (no embedder, no vector yet) is refused, unless
        ``fallback``: then it searches by keyword and says why in the report's ``fallback``
        (what the CLI and MCP do); the default mode always says why it is keyword.

        ``where`` filters frontmatter inside every retriever (docs/filters.md); ``path`` keeps
        notes under a folder or path prefix, ``tags`` notes holding every tag given. See
        `vrom.search.query` for the keyword query syntax. `context` gives the same hits as
        LLM-ready text (`vrom.queryable.Queryable.context`; ``path`` and ``tags`` apply).

        ``rerank`` (True: the first 30 hits; or a number) reorders them with the vault's
        cross-encoder (``reranker=`` at `open`; `vrom.search.reranking`) in any mode.
        """
        report = self._report(
            query,
            k,
            where,
            mode,
            ef_search=ef_search,
            path=path,
            tags=tags,
            per_note=per_note,
            fallback=fallback,
            rerank=rerank,
        )
        return self._finished(report, expand_context, context_window)

    def _report(
        self,
        query: str,
        k: int,
        where: Mapping[str, Any] | None,
        mode: str | None,
        *,
        ef_search: int | None = None,
        path: str | None = None,
        tags: str | Sequence[str] | None = None,
        per_note: bool = False,
        fallback: bool = False,
        rerank: bool | int = False,
    ) -> SearchReport:
        notes = parse_where(where, path=path, tags=tags)
        return self.corpus.search_report(
            query, k, notes, mode, per_document=per_note, ef_search=ef_search, fallback=fallback,
            rerank=rerank,
        )  # fmt: skip

    def _expansion_store(self) -> Store:
        return self.store

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
