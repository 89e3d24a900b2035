"""Which vault the server serves, opened once, and the lock its one store connection needs.

The vault is chosen in this order: ``--vault``; the client's MCP roots (the first ``file://``
root that is a folder); ``$VROM_VAULT``; the current directory. With ``--vault`` (or no client
involvement needed) it is opened and indexed at start; otherwise on the first tool call, when
the client can be asked for its roots.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from vrom import settings
from vrom._background_embedding import BackgroundEmbedding
from vrom.errors import NotFoundError
from vrom.server.watch import Watcher
from vrom.settings import VAULT_ENV
from vrom.vault import EmbedderChoice, Vault

T = TypeVar("T")


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
    ) -> None:
        self._explicit = None if vault_path is None else Path(vault_path).expanduser()
        self._state_dir = state_dir
        self._embedder = embedder
        self._watch = watch
        self._log = log or _to_stderr
        # One SQLite connection serves every tool call; calls run in worker threads, so they
        # take turns (searches are milliseconds; the watcher's re-index holds it briefly).
        self.lock = threading.RLock()
        self._vault: Vault | None = None
        self._opening: asyncio.Lock | None = None
        self.watcher: Watcher | None = None
        self.embedding: BackgroundEmbedding | None = None

    @property
    def explicit(self) -> bool:
        """True when the vault was named with ``--vault``."""
        return self._explicit is not None

    def open(self, root: Path) -> Vault:
        """Open and watch the vault at ``root``: bring its keyword index up to date (seconds,
        progress on stderr), then embed what has no vector in the background."""
        with self.lock:
            if self._vault is not None:
                return self._vault
            vault = Vault.open(root, self._state_dir, embedder=self._embedder)
            self._log(f"vrom: indexing {vault.root} ...")
            summary = vault.index(progress=_progress(self._log), embed=False)
            self._log(
                f"vrom: {summary.notes} notes, {summary.chunks} chunks "
                f"({summary.added} added, {summary.changed} changed, {summary.removed} removed) "
                f"in {summary.seconds:.1f} s: searchable by keyword"
            )
            for warning in summary.warnings[:20]:
                self._log(f"vrom: warning: {warning.path}: {warning.reason}")
            self._vault = vault
            embedder = vault.embedder
            if embedder is not None:
                self.embedding = BackgroundEmbedding(
                    vault.root, self._state_dir, embedder, self._log
                )
                self.embedding.start()
            if self._watch:
                wake = None if self.embedding is None else self.embedding.wake
                self.watcher = Watcher(vault, self.lock, self._log, embed_later=wake)
                self.watcher.start()
            return vault

    def open_in_background(self) -> threading.Thread | None:
        """Start opening the ``--vault`` vault in a thread, so the server answers at once.

        Tool calls wait for the keyword index (they take the lock ``open`` holds); a failure
        is logged here and met again, as an error result, by the first tool call.
        """
        if self._explicit is None:
            return None
        explicit = self._explicit

        def open_logged() -> None:
            try:
                self.open(explicit)
            except Exception as exc:  # told to the client by the first tool call
                self._log(f"vrom: cannot open {explicit}: {exc}")

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
            root = self._explicit or await _root_from_client(roots) or _fallback_root()
            return await asyncio.to_thread(self.open, root)

    def run(self, work: Callable[[Vault], T], vault: Vault) -> T:
        """Run ``work(vault)`` holding the lock (call it from a worker thread)."""
        with self.lock:
            return work(vault)

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


def _fallback_root() -> Path:
    env = settings.vault()
    if env:
        folder = Path(env).expanduser()
        if not folder.is_dir():
            raise NotFoundError(f"${VAULT_ENV} names {env!r}, which is not a folder")
        return folder
    return Path.cwd()


def _progress(log: Callable[[str], None]) -> Callable[[int, int, str], None]:
    def report(done: int, total: int, path: str) -> None:
        if done == total or done % 500 == 0:
            log(f"vrom: indexed {done}/{total} files")

    return report


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
