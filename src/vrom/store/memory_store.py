"""Agent memories in the SQLite store: the rows, their keyword index and their vectors.

Memories live in the same database file as the notes (schema migration 5), so they share its
transactions, its WAL and its crash safety. `SQLiteMemoryStore` works on an open `SQLiteStore`
and uses its connection; every write runs inside that store's transaction.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from vrom.errors import StorageError
from vrom.store import (
    KeywordQuery,
    MemoryCounts,
    MemoryFilter,
    MemoryKeywordRow,
    MemoryRecord,
    MemoryStore,
    Store,
)
from vrom.store.fts_text import segment
from vrom.store.sqlite import SQLiteStore
from vrom.store.sqlite_query import match_expression

# memory_id (unindexed), title, content, tags: the title says most, then a tag, then the text
MEMORY_BM25_WEIGHTS = (0.0, 4.0, 1.0, 2.0)

_COLUMNS = (
    "m.id, m.created_unix, m.updated_unix, m.project, m.type, m.title, m.content, m.tags,"
    " m.related, m.source, m.status, m.superseded_by"
)


def _memory(row: Sequence[Any]) -> MemoryRecord:
    values = list(row)
    values[7] = tuple(json.loads(values[7]))
    values[8] = tuple(json.loads(values[8]))
    return MemoryRecord(*values)


def _filter_sql(where: MemoryFilter) -> tuple[str, list[Any]]:
    """Return `` AND ...`` clauses on memory ``m`` for a filter, and their parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("project", where.project),
        ("type", where.type),
        ("status", where.status),
    ):
        if value is not None:
            clauses.append(f" AND m.{column} = ?")
            params.append(value)
    return "".join(clauses), params


def _index_text(memory: MemoryRecord) -> tuple[str, str, str, str]:
    return (
        memory.id,
        segment(memory.title),
        segment(memory.content),
        segment(" ".join(memory.tags)),
    )


def memory_store_for(store: Store) -> MemoryStore:
    """Return the memories kept in ``store``; `StorageError` for a backend without them."""
    if isinstance(store, SQLiteStore):
        return SQLiteMemoryStore(store)
    raise StorageError(
        f"store {store.location} ({type(store).__name__}) cannot keep memories: use a SQLite store"
    )


class SQLiteMemoryStore:
    """The memories of one `SQLiteStore`, read and written through its connection."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    @property
    def location(self) -> str:
        """The database file's path (``:memory:`` for a store in memory)."""
        return self._store.location

    def get_meta(self, key: str) -> str | None:
        """Return a value of the ``meta`` table, or None."""
        return self._store.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        self._store.set_meta(key, value)

    def transaction(self) -> AbstractContextManager[None]:
        """Return the store's transaction: the block's writes commit together or not at all."""
        return self._store.transaction()

    # -- writing ---------------------------------------------------------------------------

    def put(self, memory: MemoryRecord) -> None:
        """Add a memory, or replace the one with its id (whose vector goes if its text changed)."""
        store = self._store
        with store._guard("writing a memory"), store.transaction():
            conn = store._conn
            old = conn.execute(
                "SELECT title, content FROM memories WHERE id = ?", (memory.id,)
            ).fetchone()
            values = (
                memory.created_unix,
                memory.updated_unix,
                memory.project,
                memory.type,
                memory.title,
                memory.content,
                json.dumps(list(memory.tags), ensure_ascii=False),
                json.dumps(list(memory.related), ensure_ascii=False),
                memory.source,
                memory.status,
                memory.superseded_by,
            )
            if old is None:
                conn.execute(
                    "INSERT INTO memories(id, created_unix, updated_unix, project, type, title,"
                    " content, tags, related, source, status, superseded_by)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (memory.id, *values),
                )
            else:
                conn.execute(
                    "UPDATE memories SET created_unix = ?, updated_unix = ?, project = ?,"
                    " type = ?, title = ?, content = ?, tags = ?, related = ?, source = ?,"
                    " status = ?, superseded_by = ? WHERE id = ?",
                    (*values, memory.id),
                )
                conn.execute("DELETE FROM memories_fts WHERE memory_id = ?", (memory.id,))
                if tuple(old) != (memory.title, memory.content):
                    conn.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory.id,))
            conn.execute(
                "INSERT INTO memories_fts(memory_id, title, content, tags) VALUES (?, ?, ?, ?)",
                _index_text(memory),
            )

    def set_status(
        self, memory_id: str, status: str, superseded_by: str | None, updated_unix: float
    ) -> bool:
        """Set a memory's status (and successor); False when no memory has that id."""
        store = self._store
        with store._guard("changing a memory's status"), store.transaction():
            changed = store._conn.execute(
                "UPDATE memories SET status = ?, superseded_by = ?, updated_unix = ? WHERE id = ?",
                (status, superseded_by, updated_unix, memory_id),
            ).rowcount
            return changed > 0

    def put_vectors(self, vectors: Sequence[tuple[str, bytes]]) -> int:
        """Store vectors by memory id (memories gone meanwhile are skipped); return how many."""
        store = self._store
        with store._guard("writing memory vectors"), store.transaction():
            before = store._conn.total_changes
            store._conn.executemany(
                "INSERT OR REPLACE INTO memory_vectors(memory_id, data)"
                " SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?1)",
                vectors,
            )
            return store._conn.total_changes - before

    def clear_vectors(self) -> None:
        """Remove every memory vector (before embedding with another model)."""
        store = self._store
        with store._guard("clearing memory vectors"), store.transaction():
            store._conn.execute("DELETE FROM memory_vectors")

    # -- reading ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord | None:
        """Return a memory by id, or None."""
        store = self._store
        with store._guard("reading a memory"):
            row = store._conn.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)
            ).fetchone()
            return None if row is None else _memory(row)

    def list(self, where: MemoryFilter, limit: int) -> builtins.list[MemoryRecord]:
        """Return up to ``limit`` memories passing the filter, newest first."""
        store = self._store
        with store._guard("listing memories"):
            filter_sql, params = _filter_sql(where)
            rows = store._conn.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE 1{filter_sql}"
                " ORDER BY m.created_unix DESC, m.id DESC LIMIT ?",
                [*params, limit],
            )
            return [_memory(row) for row in rows]

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: MemoryFilter
    ) -> builtins.list[MemoryKeywordRow]:
        """Return up to ``limit`` memories matching the query and filter, best BM25 first."""
        store = self._store
        with store._guard("searching memories"):
            if query.is_empty:
                return []
            weights = ", ".join(str(w) for w in MEMORY_BM25_WEIGHTS)
            filter_sql, params = _filter_sql(where)
            rows = store._conn.execute(
                f"SELECT {_COLUMNS}, bm25(memories_fts, {weights}) AS score FROM memories_fts"
                " JOIN memories m ON m.id = memories_fts.memory_id"
                f" WHERE memories_fts MATCH ?{filter_sql} ORDER BY score, m.id LIMIT ?",
                [match_expression(query), *params, limit],
            )
            return [MemoryKeywordRow(_memory(row[:-1]), -float(row[-1])) for row in rows]

    def missing_vectors(self, limit: int, after: str = "") -> builtins.list[MemoryRecord]:
        """Return up to ``limit`` memories with ids above ``after`` that have no vector, by id."""
        store = self._store
        with store._guard("reading memories to embed"):
            rows = store._conn.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE m.id > ? AND NOT EXISTS"
                " (SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id) ORDER BY m.id LIMIT ?",
                (after, limit),
            )
            return [_memory(row) for row in rows]

    def vectors(self, where: MemoryFilter) -> builtins.list[tuple[str, bytes]]:
        """Return (memory id, vector bytes) for the memories passing the filter, by id."""
        store = self._store
        with store._guard("reading memory vectors"):
            filter_sql, params = _filter_sql(where)
            return store._conn.execute(
                "SELECT v.memory_id, v.data FROM memory_vectors v"
                f" JOIN memories m ON m.id = v.memory_id WHERE 1{filter_sql} ORDER BY m.id",
                params,
            ).fetchall()

    def counts(self) -> MemoryCounts:
        """Return how many memories there are, by status, type and project."""
        store = self._store
        with store._guard("counting memories"), store._snapshot():
            conn = store._conn

            def grouped(column: str) -> dict[str, int]:
                rows = conn.execute(
                    f"SELECT {column}, count(*) FROM memories WHERE {column} IS NOT NULL"
                    f" GROUP BY {column} ORDER BY count(*) DESC, {column}"
                )
                return {row[0]: row[1] for row in rows}

            return MemoryCounts(
                total=store._scalar("SELECT count(*) FROM memories"),
                by_status=grouped("status"),
                by_type=grouped("type"),
                by_project=grouped("project"),
                embedded=store._scalar("SELECT count(*) FROM memory_vectors"),
            )
