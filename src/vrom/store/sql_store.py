"""What a store is on either backend besides its roles' own SQL: one database and its three
roles (`vrom.store.Store`): documents, vectors and memories, with metadata, transactions, counts
and consistency checks. Each method's contract is the protocol's (`vrom.store.roles.Store`); a
backend's own methods say only what differs."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Generic, Protocol, TypeVar

from vrom.store.records import StoreCounts
from vrom.store.sql_dialect import Statements
from vrom.store.sql_documents import SqlDocuments
from vrom.store.sql_memories import SqlMemories

D = TypeVar("D", bound=SqlDocuments)
V = TypeVar("V")
M = TypeVar("M", bound=SqlMemories)

CHECKS: dict[str, str] = {
    "notes whose chunk count is wrong": "SELECT count(*) FROM documents d WHERE d.chunk_count !="
    " (SELECT count(*) FROM chunks c WHERE c.document_id = d.id)",
    "chunks with broken prev/next links": "SELECT count(*) FROM chunks c WHERE"
    " (c.next_id IS NOT NULL AND NOT EXISTS"
    " (SELECT 1 FROM chunks n WHERE n.id = c.next_id AND n.prev_id = c.id))"
    " OR ((c.prev_id IS NULL) != (c.position = 0))",
    "superseded memories whose successor is missing": "SELECT count(*) FROM memories"
    " WHERE superseded_by IS NOT NULL AND superseded_by NOT IN (SELECT id FROM memories)",
}
"""What a sound store satisfies on either backend (each adds its own): label -> SQL counting
violations."""


class Database(Protocol):
    """A backend's database, as the store uses it."""

    @property
    def location(self) -> str: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def snapshot(self) -> AbstractContextManager[None]: ...


class SqlStore(Generic[D, V, M]):
    """A store's roles over one database (a backend adds its state, size, checks, copies...)."""

    def __init__(self, db: Database, documents: D, vectors: V, memories: M) -> None:
        self._base = db
        self._documents, self._vectors, self._memories = documents, vectors, memories

    @property
    def documents(self) -> D:
        return self._documents

    @property
    def vectors(self) -> V:
        return self._vectors

    @property
    def memories(self) -> M:
        return self._memories

    @property
    def location(self) -> str:
        return self._base.location

    def get_meta(self, key: str) -> str | None:
        return self._base.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        self._base.set_meta(key, value)

    def transaction(self) -> AbstractContextManager[None]:
        return self._base.transaction()

    def snapshot(self) -> AbstractContextManager[None]:
        return self._base.snapshot()

    def counts(self) -> StoreCounts:
        with self._documents.sql.snapshot("counting") as run:
            rows = {
                name: int(run.scalar(f"SELECT count({what}) FROM {table}"))
                for name, what, table in (
                    ("documents", "*", "documents"),
                    ("chunks", "*", "chunks"),
                    ("links", "*", "links"),
                    ("vectors", "*", "vectors"),
                    ("tags", "DISTINCT tag", "tags"),
                )
            }
            return StoreCounts(**rows, bytes=self.size(run))

    def size(self, run: Statements) -> int:
        """Return the bytes the store takes (on disk, or on the server)."""
        raise NotImplementedError

    @staticmethod
    def failed_checks(run: Statements, checks: dict[str, str]) -> list[str]:
        """Return ``<count> <label>`` for each of `CHECKS` and a backend's ``checks`` that finds
        any."""
        both = {**CHECKS, **checks}
        return [f"{count} {label}" for label, sql in both.items() if (count := run.scalar(sql))]
