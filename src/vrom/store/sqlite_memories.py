"""Agent memories in SQLite: the rows, their keyword index, and (through `SQLiteMemoryVectors`)
their vectors.

Memories live in the same database file as the notes, so they share its transactions, its WAL
and its crash safety. Each memory has an integer ``key`` besides its id, which its vector is
stored under, so memory vectors are searched by the same vector indexes as chunk vectors.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any

from vrom.store.filter_sql import memory_filter_sql
from vrom.store.fts_text import segment
from vrom.store.records import (
    KeywordQuery,
    MemoryCounts,
    MemoryFilter,
    MemoryKeywordRow,
    MemoryRecord,
)
from vrom.store.rows import MEMORY_COLUMNS, memory_from_row
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_query import DIALECT, match_expression
from vrom.store.sqlite_vectors import SQLiteMemoryVectors
from vrom.store.storable import check_memory

# memory_id (unindexed), title, content, tags: the title says most, then a tag, then the text
MEMORY_BM25_WEIGHTS = (0.0, 4.0, 1.0, 2.0)


def _filter_sql(where: MemoryFilter) -> tuple[str, list[Any]]:
    """Return `` AND ...`` clauses on memory ``m`` for a filter, and their parameters."""
    return memory_filter_sql(where, DIALECT)


def _index_text(memory: MemoryRecord) -> tuple[str, str, str, str]:
    return (
        memory.id,
        segment(memory.title),
        segment(memory.content),
        segment(" ".join(memory.tags)),
    )


class SQLiteMemories:
    """The memories of one store (`vrom.store.MemoryStore`), over its database connection."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._vectors = SQLiteMemoryVectors(db)

    @property
    def vectors(self) -> SQLiteMemoryVectors:
        """The memories' vectors."""
        return self._vectors

    # -- writing ---------------------------------------------------------------------------

    def put(self, memory: MemoryRecord) -> None:
        """Add a memory, or replace the one with its id (whose vector goes if its text changed)."""
        check_memory(memory)
        with self._db.guard("writing a memory"), self._db.transaction():
            conn = self._db.conn
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
                    " content, tags, related, source, status, superseded_by, key)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                    " (SELECT coalesce(max(key), 0) + 1 FROM memories))",
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
                    conn.execute(
                        "DELETE FROM memory_vectors"
                        " WHERE key = (SELECT key FROM memories WHERE id = ?)",
                        (memory.id,),
                    )
                    self._vectors.bump_generation()
            conn.execute(
                "INSERT INTO memories_fts(memory_id, title, content, tags) VALUES (?, ?, ?, ?)",
                _index_text(memory),
            )

    def set_status(
        self, memory_id: str, status: str, superseded_by: str | None, updated_unix: float
    ) -> bool:
        """Set a memory's status (and successor); False when no memory has that id."""
        with self._db.guard("changing a memory's status"), self._db.transaction():
            changed = self._db.conn.execute(
                "UPDATE memories SET status = ?, superseded_by = ?, updated_unix = ? WHERE id = ?",
                (status, superseded_by, updated_unix, memory_id),
            ).rowcount
            return changed > 0

    # -- reading ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord | None:
        """Return a memory by id, or None."""
        with self._db.guard("reading a memory"):
            row = self._db.conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)
            ).fetchone()
            return None if row is None else memory_from_row(row)

    def by_keys(self, keys: Sequence[int]) -> dict[int, MemoryRecord]:
        """Return the memories with these integer keys (those that still exist), by key."""
        with self._db.guard("reading memories"):
            sql = f"SELECT m.key, {MEMORY_COLUMNS} FROM memories m WHERE m.key IN ({{marks}})"
            return {row[0]: memory_from_row(row[1:]) for row in self._db.select_in(sql, keys)}

    def newest_key(self) -> int:
        """Return the largest integer key (0 without memories)."""
        with self._db.guard("reading memories"):
            return int(self._db.scalar("SELECT coalesce(max(key), 0) FROM memories"))

    def keys_matching(self, where: MemoryFilter) -> builtins.list[int]:
        """Return the integer keys of the memories passing the filter, by key."""
        with self._db.guard("filtering memories"):
            filter_sql, params = _filter_sql(where)
            rows = self._db.conn.execute(
                f"SELECT m.key FROM memories m WHERE 1{filter_sql} ORDER BY m.key", params
            )
            return [row[0] for row in rows]

    def preceding(
        self, source: str, memory_id: str | None, count: int
    ) -> builtins.list[MemoryRecord]:
        """Return the last ``count`` memories from ``source`` stored before memory
        ``memory_id`` (before any new one: None, or an id not stored), oldest first."""
        with self._db.guard("reading memories"):
            rows = self._db.conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.source = ?"
                " AND m.key < coalesce((SELECT key FROM memories WHERE id = ?), 1 << 62)"
                " ORDER BY m.key DESC LIMIT ?",
                (source, memory_id, count),
            )
            return [memory_from_row(row) for row in rows][::-1]

    def list(self, where: MemoryFilter, limit: int) -> builtins.list[MemoryRecord]:
        """Return up to ``limit`` memories passing the filter, newest first."""
        with self._db.guard("listing memories"):
            filter_sql, params = _filter_sql(where)
            rows = self._db.conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE 1{filter_sql}"
                " ORDER BY m.created_unix DESC, m.id DESC LIMIT ?",
                [*params, limit],
            )
            return [memory_from_row(row) for row in rows]

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: MemoryFilter
    ) -> builtins.list[MemoryKeywordRow]:
        """Return up to ``limit`` memories matching the query and filter, best BM25 first."""
        with self._db.guard("searching memories"):
            if query.is_empty:
                return []
            weights = ", ".join(str(w) for w in MEMORY_BM25_WEIGHTS)
            filter_sql, params = _filter_sql(where)
            # ranked on ids and scores alone; only the rows kept are read whole (a memory's
            # text carried through the sort cost a fifth of the time on SciFact's abstracts)
            rows = self._db.conn.execute(
                f"SELECT {MEMORY_COLUMNS}, r.score FROM (SELECT m.id AS id,"
                f" bm25(memories_fts, {weights}) AS score FROM memories_fts"
                " JOIN memories m ON m.id = memories_fts.memory_id"
                f" WHERE memories_fts MATCH ?{filter_sql} ORDER BY score, m.id LIMIT ?) r"
                " JOIN memories m ON m.id = r.id ORDER BY r.score, m.id",
                [match_expression(query), *params, limit],
            )
            return [MemoryKeywordRow(memory_from_row(row[:-1]), -float(row[-1])) for row in rows]

    def counts(self) -> MemoryCounts:
        """Return how many memories there are, by status, type and project."""
        with self._db.guard("counting memories"), self._db.read_snapshot():
            conn = self._db.conn

            def grouped(column: str) -> dict[str, int]:
                rows = conn.execute(
                    f"SELECT {column}, count(*) FROM memories WHERE {column} IS NOT NULL"
                    f" GROUP BY {column} ORDER BY count(*) DESC, {column}"
                )
                return {row[0]: row[1] for row in rows}

            return MemoryCounts(
                total=self._db.scalar("SELECT count(*) FROM memories"),
                by_status=grouped("status"),
                by_type=grouped("type"),
                by_project=grouped("project"),
                embedded=self._db.scalar("SELECT count(*) FROM memory_vectors"),
            )
