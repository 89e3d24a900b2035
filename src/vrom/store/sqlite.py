"""The default store backend: one SQLite database file (WAL mode, FTS5) per vault or collection.

Every write happens inside a transaction (`vrom.store.sqlite_database`), so a process killed
at any moment leaves each document either fully written or not at all. `SQLiteStore` is made of
parts that share one `Database` connection: `SQLiteDocuments` (documents, chunks, links, tags,
keyword search), `SQLiteChunkVectors` and `SQLiteMemories` (with their `SQLiteMemoryVectors`).
It keeps what is SQLite's own: the state read, the integrity check, the files beside the
database.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from vrom.errors import StorageError
from vrom.store import sqlite_keyword
from vrom.store.records import Sidecar, StoreState
from vrom.store.schema import CONSISTENCY_CHECKS, FTS_TOKENIZER
from vrom.store.sql_dialect import Statements
from vrom.store.sql_store import SqlStore
from vrom.store.sqlite_database import BUSY_TIMEOUT_SECONDS, Database
from vrom.store.sqlite_documents import SQLiteDocuments
from vrom.store.sqlite_memories import SQLiteMemories
from vrom.store.sqlite_vectors import SQLiteChunkVectors


class SQLiteStore(SqlStore[SQLiteDocuments, SQLiteChunkVectors, SQLiteMemories]):
    """A store in one SQLite file (or in memory); see the module docstring."""

    def __init__(
        self,
        path: Path | None,
        *,
        create: bool = True,
        key: str | None = None,
        read_only: bool = False,
    ) -> None:
        """Open the store at ``path`` (a missing file is created unless ``create`` is False; see
        `Database` for ``None``, ``key`` and ``read_only``)."""
        self._db = Database(path, create=create, key=key, read_only=read_only)
        vectors = SQLiteChunkVectors(self._db)
        documents = SQLiteDocuments(self._db, vectors)
        memories = SQLiteMemories(self._db, documents.keyword_tokens)
        super().__init__(self._db, documents, vectors, memories)

    @property
    def path(self) -> Path | None:
        """The database file, or None for a store in memory."""
        return self._db.path

    def state(self) -> StoreState:
        with self._db.guard("reading the store's state"):
            return sqlite_keyword.state(self._db)

    def close(self) -> None:
        self._documents.close_tokenizer()
        self._db.close()

    def sidecar(self, suffix: str) -> Sidecar | None:
        """Return ``<database file><suffix>`` with the database's permission bits, or None."""
        path = self._db.path
        if path is None or self._db.encrypted:
            return None
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError as exc:
            raise StorageError(f"cannot read the permissions of {path}: {exc}") from exc
        return Sidecar(path.with_name(path.name + suffix), mode)

    def compact_copy(self, target: Path) -> None:
        """Write a compact, self-contained copy of the store (no WAL, no free pages) to ``target``.

        The copy uses the rollback journal, so it can be opened read-only as an immutable file.
        """
        with self._db.guard("copying the store"):
            self._db.conn.execute("VACUUM INTO ?", (str(target),))
        try:
            copy = self._db.driver.connect(str(target))
            try:
                copy.execute("PRAGMA journal_mode = DELETE")
            finally:
                copy.close()
        except self._db.driver.Error as exc:
            raise StorageError(f"cannot finish the copy of {self.location}: {exc}") from exc

    def size(self, run: Statements) -> int:
        """Return the bytes of the database file and its WAL."""
        files = () if self._db.path is None else (self._db.path, Path(f"{self._db.path}-wal"))
        return sum(p.stat().st_size for p in files if p.exists())

    def describe(self) -> dict[str, Any]:
        with self._db.guard("describing the backend"):
            return {
                "backend": "sqlite",
                "store_path": self._db.location,
                "schema_version": self._db.stored_version(),
                # notes, chunks and the FTS5 index are written first, in one transaction, and
                # are the truth; an ANN graph is a cache rebuilt from them
                "index_write_mode": "sqlite-fts5-primary",
                "fts_tokenizers": [FTS_TOKENIZER, "cjk-bigram (applied before indexing)"],
                "capabilities": [
                    "keyword-bm25",
                    "cjk-keyword",
                    "metadata-filter",
                    "transactions",
                    "concurrent-readers",
                ],
                "details": {
                    "sqlite_version": self._db.driver.sqlite_version,
                    "journal_mode": self._db.scalar("PRAGMA journal_mode"),
                    "encrypted": self._db.encrypted,
                    "busy_timeout_seconds": BUSY_TIMEOUT_SECONDS,
                },
            }

    def integrity_problems(self) -> list[str]:
        with self.documents.sql.reading("checking integrity") as run:
            problems = [row[0] for row in run.rows("PRAGMA integrity_check") if row[0] != "ok"]
            problems += self.failed_checks(run, CONSISTENCY_CHECKS)
            try:
                run.run("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
            except self._db.driver.DatabaseError as exc:
                problems.append(f"keyword index: {exc}")
            return problems
