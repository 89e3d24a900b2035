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
        """Return ``<count> <label>`` for each of ``checks`` (label -> SQL counting violations)
        that finds any."""
        return [f"{count} {label}" for label, sql in checks.items() if (count := run.scalar(sql))]
