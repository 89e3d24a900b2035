"""Which vault the server serves, opened once, and the lock its one store connection needs.

The vault is chosen in this order: ``--vault``; the client's MCP roots (the first ``file://``
root that is a folder); ``$VAULT_ROOT`` or ``$VROM_VAULT`` (`vrom.settings.Settings.vault_variable`);
the current directory. With ``--vault`` it is opened and indexed at start; otherwise on the
first tool call, when the client can be asked for its roots, and the server says on stderr
which it chose and why.

A server whose clients do not start it (HTTP: any local user can connect to 127.0.0.1) does
not let a client choose (``roots=False``): it serves ``--vault``, else the folder a variable
names, chosen and opened at start, and refuses to start without either; a client could
otherwise name any folder the server's user can read and write.
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from mcp.server.session import ServerSession
from mcp.types import ListRootsResult

from vrom._background_embedding import BackgroundEmbedding
from vrom.embed.rerank import RerankerChoice, Reranking
from vrom.errors import NotFoundError, ValidationError
from vrom.results import IndexSummary
from vrom.server.logs import ClientLog
from vrom.server.watch import Watcher
from vrom.settings import VAULT_ROOT_ENV, Settings
from vrom.vault import EmbedderChoice, Vault

T = TypeVar("T")


@dataclass(frozen=True)
class IndexingProgress:
    """How many of the vault's files an indexing run has read (``done`` of ``total``)."""

    done: int
    total: int


class ServerState:
    """The served vault (opened lazily), a lock around it, and its file watcher."""

    def __init__(
        self,
        vault_path: str | os.PathLike[str] | None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        embedder: EmbedderChoice = "auto",
        watch: bool = True,
        log: Callable[[str], None] | None = None,
        database_url: str | None = None,
        namespace: str | None = None,
        roots: bool = True,
        settings: Settings | None = None,
        reranker: RerankerChoice = None,
    ) -> None:
        """``roots``: whether a client's MCP roots may choose the vault when ``vault_path`` is
        None (False: a variable must name it; see the module's docstring). ``settings``: what
        the environment configures, resolved now when not given: every vault the server opens
        uses it. ``reranker``: what ``vault_search`` with ``rerank`` reorders with, loaded now
        (a bad spec stops the server before it serves)."""
        self._settings = Settings.from_environment() if settings is None else settings
        if vault_path is not None and not os.fspath(vault_path).strip():
            # Path("") is ".": an empty --vault must not quietly serve the current folder
            raise ValidationError("the vault path is empty: give a folder ('.' for this one)")
        self._explicit = None if vault_path is None else Path(vault_path).expanduser()
        self._why: str | None = None  # why the vault is the one served, when not --vault
        if vault_path is None:
            self._settings.vault_variable()  # refused at start, as an empty --vault is: empty, or two
        if vault_path is None and not roots:
            named = _named_root(self._settings)
            if named is None:
                raise ValidationError(
                    "no vault to serve: a server clients connect to (HTTP) serves the folder "
                    f"it is started with, never one a client names: pass --vault FOLDER or set "
                    f"${VAULT_ROOT_ENV} (or --allow-roots to let the first client's MCP roots "
                    "choose it)",
                    code="vault_required",
                )
            self._explicit, self._why = named
        self._reranking = Reranking(reranker)  # loaded once the vault to serve is known
        self._state_dir = state_dir
        self._embedder = embedder
        self._watch = watch
        # where the vault's store is (None: $VROM_DATABASE_URL, else the state dir); the URL
        # may hold a password, so it is never logged: the store shows itself masked
        self._database_url = database_url
        self._namespace = namespace
        self.log = ClientLog(log)
        """Where the server's parts log: stderr, and the clients that set a log level."""
        # One SQLite connection serves every tool call; calls run in worker threads, so they
        # take turns (searches are milliseconds; the watcher's re-index holds it briefly).
        self.lock = threading.RLock()
        self._vault: Vault | None = None
        self._opening: asyncio.Lock | None = None
        self.watcher: Watcher | None = None
        self.embedding: BackgroundEmbedding | None = None
        self._indexing: IndexingProgress | None = None

    @property
    def state_dir(self) -> str | os.PathLike[str] | None:
        """The ``--state-dir`` the server was started with (None: the usual state directory)."""
        return self._state_dir

    @property
    def embedder_spec(self) -> str | None:
        """The embedder spec a client config should pin to start this same server: ``none``
        for a keyword-only server, the ``--embedder`` spec, or None for the default (and for
        an `Embedder` object, which no config can name)."""
        if self._embedder is None:
            return "none"
        return self._embedder if isinstance(self._embedder, str) else None

    @property
    def explicit(self) -> bool:
        """True when the vault was chosen at start (``--vault``, or a variable without roots)."""
        return self._explicit is not None

    def open(self, root: Path) -> Vault:
        """Open and watch the vault at ``root``: bring its keyword index up to date (seconds,
        progress logged), then embed what has no vector in the background."""
        with self.lock:
            if self._vault is not None:
                return self._vault
            vault = Vault.open(
                root,
                self._state_dir,
                embedder=self._embedder,
                database_url=self._database_url,
                namespace=self._namespace,
                settings=self._settings,
                reranker=self._reranking.reranker,  # the state's: closed with it
            )
            self._index(vault, force=False)
            vault.corpus.keyword.prepare()  # the server is there to search: copy it now
            self._vault = vault
            embedder = vault.embedder
            if embedder is not None:
                self.embedding = BackgroundEmbedding(
                    vault.root,
                    self._state_dir,
                    embedder,
                    self.log,
                    database_url=self._database_url,
                    namespace=vault.namespace,
                    settings=self._settings,
                )
                self.embedding.start()
            if self._watch:
                wake = None if self.embedding is None else self.embedding.wake
                self.watcher = Watcher(vault, self.lock, self.log, embed_later=wake)
                self.watcher.start()
            return vault

    def reindex(
        self, vault: Vault, paths: Sequence[str] | None = None, *, force: bool = False
    ) -> IndexSummary:
        """Re-index the vault (or just ``paths``) by keyword, logging as the first indexing
        does, and have the background worker embed what changed (call it holding the lock)."""
        if paths:
            summary = vault.reindex_paths(paths, embed=False)
        else:
            summary = self._index(vault, force=force)
        if self.embedding is not None:
            self.embedding.wake()
        return summary

    @property
    def indexing(self) -> IndexingProgress | None:
        """How far the running (or last) whole-vault indexing has got; None before the first."""
        return self._indexing

    @property
    def ready(self) -> bool:
        """True once the vault is open and indexed by keyword (tool calls no longer wait)."""
        return self._vault is not None

    def _index(self, vault: Vault, *, force: bool) -> IndexSummary:
        self._indexing = None  # not the last run's count: progress is this run's
        self.log(f"vrom: indexing {vault.root} ...")
        summary = vault.index(self._indexed, force=force, embed=False)  # embedded by the worker
        self.log(
            f"vrom: {summary.notes} notes, {summary.chunks} chunks "
            f"({summary.added} added, {summary.changed} changed, {summary.removed} removed) "
            f"in {summary.seconds:.1f} s: searchable by keyword"
        )
        for warning in summary.warnings[:20]:
            self.log(f"vrom: warning: {warning.path}: {warning.reason}")
        return summary

    def _indexed(self, done: int, total: int, path: str) -> None:
        self._indexing = IndexingProgress(done, total)
        if done == total or done % 500 == 0:
            self.log(f"vrom: indexed {done}/{total} files")

    def open_in_background(self) -> threading.Thread | None:
        """Start opening the ``--vault`` vault in a thread, so the server answers at once.

        Tool calls wait for the keyword index (they take the lock ``open`` holds); a failure
        is logged here and met again, as an error result, by the first tool call.
        """
        if self._explicit is None:
            return None
        explicit = self._explicit
        if self._why is not None:
            self.log(f"vrom: serving {explicit} ({self._why})")

        def open_logged() -> None:
            try:
                self.open(explicit)
            except Exception as exc:  # told to the client by the first tool call
                self.log(f"vrom: error: cannot open {explicit}: {exc}")

        thread = threading.Thread(target=open_logged, name="vrom-open", daemon=True)
        thread.start()
        return thread

    def open_explicit(self) -> Vault | None:
        """Open the ``--vault`` vault now, if one was named."""
        return None if self._explicit is None else self.open(self._explicit)

    async def vault(self, roots: Callable[[], Any] | None = None) -> Vault:
        """Return the served vault, choosing and opening it on first use.

        ``roots`` is an async callable returning the client's roots (None if it has none).
        """
        if self._vault is not None:
            return self._vault
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._vault is not None:
                return self._vault
            root = self._explicit
            if root is None:
                root, reason = await _chosen_root(roots, self._settings)
                self.log(f"vrom: serving {root} ({reason})")
            return await asyncio.to_thread(self.open, root)

    def run(self, work: Callable[[Vault], T], vault: Vault) -> T:
        """Run ``work(vault)`` holding the lock (call it from a worker thread)."""
        with self.lock:
            return work(vault)

    def written(self, value: T) -> T:
        """Return ``value`` after a tool wrote notes, having the background worker embed what
        the write could not (its inline embedding is skipped while the worker holds the
        store's embedding claim)."""
        if self.embedding is not None:
            self.embedding.wake()
        return value

    def close(self) -> None:
        """Stop the watcher and close the vault (saving its index)."""
        if self.watcher is not None:
            self.watcher.stop()
        if self.embedding is not None:
            self.embedding.stop()  # after the batch it is on: the next start resumes
        with self.lock:
            if self._vault is not None:
                self._vault.close()
                self._vault = None
            self._reranking.close()


def client_roots(session: ServerSession) -> Callable[[], Awaitable[ListRootsResult]] | None:
    """Return the call that asks the client for its roots (None when it declared none)."""
    capabilities = session.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    return session.list_roots


async def _root_from_client(roots: Callable[[], Any] | None) -> Path | None:
    if roots is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in the newest protocol
            listed = await roots()
    except Exception:
        return None
    for root in getattr(listed, "roots", None) or ():
        url = urlparse(str(root.uri))
        if url.scheme == "file":
            folder = Path(unquote(url.path))
            if folder.is_dir():
                return folder
    return None


async def _chosen_root(roots: Callable[[], Any] | None, settings: Settings) -> tuple[Path, str]:
    """Return the vault to serve when no ``--vault`` names one, and why it is that one."""
    from_client = await _root_from_client(roots)
    if from_client is not None:
        return from_client, "the client's MCP roots"
    named = _named_root(settings)
    if named is not None:
        return named
    return Path.cwd(), f"the current directory: no --vault, MCP roots or ${VAULT_ROOT_ENV}"


def _named_root(settings: Settings) -> tuple[Path, str] | None:
    """Return the folder ``$VAULT_ROOT`` or ``$VROM_VAULT`` names and why, or None if neither
    is set."""
    named = settings.vault_variable()
    if named is None:
        return None
    variable, value = named
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise NotFoundError(f"${variable} names {value!r}, which is not a folder")
    return folder, f"${variable}"
