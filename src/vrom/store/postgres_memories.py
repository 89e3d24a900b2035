"""Agent memories in PostgreSQL: the rows, their full-text vector, and (through
`PgMemoryVectors`) their vectors.

As on SQLite (`vrom.store.sqlite_memories`): each memory has an integer ``key`` its vector is
stored under, a changed text drops its vector, and keyword search weighs the title (A), the
tags (B) and the content (C) 4 : 2 : 1.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any

from vrom.store.filter_sql import memory_filter_sql
from vrom.store.postgres_database import PgDatabase
from vrom.store.postgres_query import (
    DIALECT,
    fold,
    text_search,
    weighted_vector_sql,
)
from vrom.store.postgres_vectors import PgMemoryVectors
from vrom.store.records import (
    KeywordQuery,
    MemoryCounts,
    MemoryFilter,
    MemoryKeywordRow,
    MemoryRecord,
)
from vrom.store.rows import MEMORY_COLUMNS, memory_from_row
from vrom.store.storable import check_memory


def _filter_sql(where: MemoryFilter) -> tuple[str, list[Any]]:
    """Return `` AND ...`` clauses on memory ``m`` for a filter, and their parameters."""
    return memory_filter_sql(where, DIALECT)


class PgMemories:
    """The memories of one namespace (`vrom.store.MemoryStore`)."""

    def __init__(self, db: PgDatabase) -> None:
        self._db = db
        self._vectors = PgMemoryVectors(db)

    @property
    def vectors(self) -> PgMemoryVectors:
        """The memories' vectors."""
        return self._vectors

    # -- writing ---------------------------------------------------------------------------

    def put(self, memory: MemoryRecord) -> None:
        """Add a memory, or replace the one with its id (whose vector goes if its text changed)."""
        check_memory(memory)
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
            fold(memory.title),
            fold(" ".join(memory.tags)),
            fold(memory.content),
        )
        search = weighted_vector_sql(3)
        with (
            self._db.guard("writing a memory"),
            self._db.transaction(),
            self._db.connection() as conn,
        ):
            old = conn.execute(
                "SELECT key, title, content FROM memories WHERE id = %s", (memory.id,)
            ).fetchone()
            if old is None:
                conn.execute(
                    "INSERT INTO memories(id, key, created_unix, updated_unix, project, type,"
                    " title, content, tags, related, source, status, superseded_by, search)"
                    " VALUES (%s, (SELECT coalesce(max(key), 0) + 1 FROM memories),"
                    f" %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {search})",
                    (memory.id, *values),
                )
                return
            conn.execute(
                "UPDATE memories SET created_unix = %s, updated_unix = %s, project = %s,"
                " type = %s, title = %s, content = %s, tags = %s, related = %s, source = %s,"
                f" status = %s, superseded_by = %s, search = {search} WHERE id = %s",
                (*values, memory.id),
            )
            if (old[1], old[2]) != (memory.title, memory.content):
                gone = conn.execute(
                    "DELETE FROM memory_vectors WHERE key = %s RETURNING key", (old[0],)
                ).fetchall()
                self._vectors.log(conn, [row[0] for row in gone])

    def set_status(
        self, memory_id: str, status: str, superseded_by: str | None, updated_unix: float
    ) -> bool:
        """Set a memory's status (and successor); False when no memory has that id."""
        with (
            self._db.guard("changing a memory's status"),
            self._db.transaction(),
            self._db.connection() as conn,
        ):
            changed = conn.execute(
                "UPDATE memories SET status = %s, superseded_by = %s, updated_unix = %s"
                " WHERE id = %s",
                (status, superseded_by, updated_unix, memory_id),
            ).rowcount
            return changed > 0

    # -- reading ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord | None:
        """Return a memory by id, or None."""
        with self._db.guard("reading a memory"), self._db.connection() as conn:
            row = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = %s", (memory_id,)
            ).fetchone()
            return None if row is None else memory_from_row(row)

    def by_keys(self, keys: Sequence[int]) -> dict[int, MemoryRecord]:
        """Return the memories with these integer keys (those that still exist), by key."""
        if not keys:
            return {}
        with self._db.guard("reading memories"), self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT m.key, {MEMORY_COLUMNS} FROM memories m WHERE m.key = ANY(%s)",
                (list(keys),),
            )
            return {row[0]: memory_from_row(row[1:]) for row in rows}

    def newest_key(self) -> int:
        """Return the largest integer key (0 without memories)."""
        with self._db.guard("reading memories"), self._db.connection() as conn:
            row = conn.execute("SELECT coalesce(max(key), 0) FROM memories").fetchone()
            return 0 if row is None else int(row[0])

    def keys_matching(self, where: MemoryFilter) -> builtins.list[int]:
        """Return the integer keys of the memories passing the filter, by key."""
        filter_sql, params = _filter_sql(where)
        with self._db.guard("filtering memories"), self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT m.key FROM memories m WHERE true{filter_sql} ORDER BY m.key", params
            )
            return [row[0] for row in rows]

    def preceding(
        self, source: str, memory_id: str | None, count: int
    ) -> builtins.list[MemoryRecord]:
        """Return the last ``count`` memories from ``source`` stored before memory
        ``memory_id`` (before any new one: None, or an id not stored), oldest first."""
        with self._db.guard("reading memories"), self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.source = %s"
                " AND m.key < coalesce((SELECT key FROM memories WHERE id = %s), 1::bigint << 62)"
                " ORDER BY m.key DESC LIMIT %s",
                (source, memory_id, count),
            )
            return [memory_from_row(row) for row in rows][::-1]

    def list(self, where: MemoryFilter, limit: int) -> builtins.list[MemoryRecord]:
        """Return up to ``limit`` memories passing the filter, newest first."""
        filter_sql, params = _filter_sql(where)
        with self._db.guard("listing memories"), self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE true{filter_sql}"
                " ORDER BY m.created_unix DESC, m.id DESC LIMIT %s",
                [*params, limit],
            )
            return [memory_from_row(row) for row in rows]

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: MemoryFilter
    ) -> builtins.list[MemoryKeywordRow]:
        """Return up to ``limit`` memories matching the query and filter, best first (as
        `PgDocuments.keyword_search` ranks)."""
        if query.is_empty:
            with self._db.guard("searching memories"):
                return []
        search = text_search(query, "memories")
        filter_sql, params = _filter_sql(where)
        with self._db.guard("searching memories"), self._db.connection() as conn:
            rows = conn.execute(
                f"WITH {search.terms} SELECT {MEMORY_COLUMNS}, {search.score('m.search')} AS score"
                f" FROM memories m WHERE m.search @@ ({search.match}){filter_sql}"
                " ORDER BY score DESC, m.id LIMIT %s",
                [*search.terms_params, *search.match_params, *params, limit],
            )
            return [MemoryKeywordRow(memory_from_row(row[:-1]), float(row[-1])) for row in rows]

    def counts(self) -> MemoryCounts:
        """Return how many memories there are, by status, type and project."""
        with (
            self._db.guard("counting memories"),
            self._db.snapshot(),
            self._db.connection() as conn,
        ):

            def grouped(column: str) -> dict[str, int]:
                rows = conn.execute(
                    f"SELECT {column}, count(*) FROM memories WHERE {column} IS NOT NULL"
                    f" GROUP BY {column} ORDER BY count(*) DESC, {column}"
                )
                return {row[0]: row[1] for row in rows}

            return MemoryCounts(
                total=int(self._db.scalar(conn, "SELECT count(*) FROM memories")),
                by_status=grouped("status"),
                by_type=grouped("type"),
                by_project=grouped("project"),
                embedded=int(self._db.scalar(conn, "SELECT count(*) FROM memory_vectors")),
            )
