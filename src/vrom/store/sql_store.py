"""What a store is on either backend besides its roles' own SQL: one database and its three
roles (`vrom.store.Store`): documents, vectors and memories, with metadata and transactions."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Generic, Protocol, TypeVar

from vrom.store.sql_dialect import Statements
from vrom.store.sql_documents import SqlDocuments
from vrom.store.sql_memories import SqlMemories

D = TypeVar("D", bound=SqlDocuments)
V = TypeVar("V")
M = TypeVar("M", bound=SqlMemories)


class Database(Protocol):
    """A backend's database, as the store uses it."""

    @property
    def location(self) -> str: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def snapshot(self) -> AbstractContextManager[None]: ...


class SqlStore(Generic[D, V, M]):
    """A store's roles over one database (a backend adds counts, checks, copies, ...)."""

    def __init__(self, db: Database, documents: D, vectors: V, memories: M) -> None:
        self._base = db
        self._documents, self._vectors, self._memories = documents, vectors, memories

    @property
    def documents(self) -> D:
        """Documents, chunks, links, tags and keyword search."""
        return self._documents

    @property
    def vectors(self) -> V:
        """The chunks' vectors."""
        return self._vectors

    @property
    def memories(self) -> M:
        """Agent memories."""
        return self._memories

    @property
    def location(self) -> str:
        """Where the store lives (a file path, ``:memory:``, or a URL without its password)."""
        return self._base.location

    def get_meta(self, key: str) -> str | None:
        """Return a value of the ``meta`` table, or None."""
        return self._base.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        self._base.set_meta(key, value)

    def transaction(self) -> AbstractContextManager[None]:
        """Run the block's writes as one transaction (re-entrant: inner blocks join the outer;
        on PostgreSQL, under the namespace's write lock)."""
        return self._base.transaction()

    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside the block see one committed state of the store."""
        return self._base.snapshot()

    @staticmethod
    def row_counts(run: Statements) -> dict[str, int]:
        """Return how many documents, chunks, links, vectors and tags the store holds."""
        return {
            name: int(run.scalar(f"SELECT count({what}) FROM {table}"))
            for name, what, table in (
                ("documents", "*", "documents"),
                ("chunks", "*", "chunks"),
                ("links", "*", "links"),
                ("vectors", "*", "vectors"),
                ("tags", "DISTINCT tag", "tags"),
            )
        }
