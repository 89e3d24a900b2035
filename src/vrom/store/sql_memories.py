"""Agent memories (`vrom.store.MemoryStore`), written once over a `Dialect`.

Each memory has an integer ``key`` besides its id, which its vector is stored under, so memory
vectors are searched by the same vector indexes as chunk vectors; a changed title or content
drops the vector. A backend adds only its keyword index (`SqlMemories._search_value`,
`SqlMemories._indexed`, `keyword_search`) and how a dropped vector is counted
(`SqlMemories._dropped`).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from vrom.filters import Condition
from vrom.store.filter_sql import memory_filter_sql
from vrom.store.records import (
    MEMORY_STATUSES,
    MOST_FAILING,
    STATUS_WRITES_META_KEY,
    KeywordQuery,
    MemoryCounts,
    MemoryFilter,
    MemoryHead,
    MemoryKeywordCopy,
    MemoryKeywordRow,
    MemoryRecord,
)
from vrom.store.rows import MEMORY_COLUMNS, MEMORY_HEAD_COLUMNS, memory_from_row
from vrom.store.sql_dialect import AFTER_EVERY_KEY, Dialect, Statements
from vrom.store.sql_vectors import SqlMemoryVectors
from vrom.store.storable import check_memory

_WRITE_COLUMNS = tuple(f.name for f in fields(MemoryRecord) if f.name != "id")
"""A memory's columns besides its id and key: its record's fields (tuples as JSON lists)."""


def with_ties(found: Sequence[MemoryKeywordRow], limit: int) -> list[MemoryKeywordRow]:
    """Return the first ``limit`` of matches ranked best first, and those tied with the last."""
    if limit < 1:
        return []
    if len(found) <= limit:
        return list(found)
    last = found[limit - 1].bm25
    return [row for row in found if row.bm25 >= last]


class SqlMemories:
    """Agent memories: rows, their keyword index, and their vectors (``vectors``): the memories
    role of a store, over its dialect; a backend adds its keyword index."""

    def __init__(self, dialect: Dialect, vectors: SqlMemoryVectors) -> None:
        self._sql = dialect
        self._vectors = vectors
        # the statuses left out -> (status writes counted then, the keys holding them)
        self._failing: dict[tuple[str, ...], tuple[str | None, frozenset[int]]] = {}

    @property
    def vectors(self) -> SqlMemoryVectors:
        """The memories' vectors."""
        return self._vectors

    # -- what a backend adds ---------------------------------------------------------------

    def _search_value(self, memory: MemoryRecord) -> tuple[str, list[Any]] | None:
        """Return the SQL (and parameters) of the memory's ``search`` column, if it has one."""
        return None

    def _indexed(self, run: Statements, memory: MemoryRecord, replaced: bool) -> None:
        """Index a memory just written (``replaced``: it held an older text)."""

    def _dropped(self, run: Statements, key: int) -> None:
        """Count the vector of memory ``key`` removed (the vector indexes catch up)."""

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, builtins.list[Any]]:
        """Return the statement ranking the memories ``m`` that match ``query`` and pass
        ``filter_sql`` (whose parameters follow the query's, and the limit last), giving
        `MEMORY_HEAD_COLUMNS` and a score (higher is better) best first, ties by memory id;
        and the query's parameters."""
        raise NotImplementedError

    def keyword_search(
        self,
        query: KeywordQuery,
        limit: int,
        where: MemoryFilter,
        copy: MemoryKeywordCopy | None = None,
    ) -> builtins.list[MemoryKeywordRow]:
        """Return the ``limit`` memories best matching the query and passing the filter (their
        heads: `by_keys` reads them whole), and every one tied with the last, best first, ties
        by memory id (a caller ordering ties otherwise sees the whole tie at its cut). A
        backend whose keyword index can be copied into memory may rank the matches by the
        ``copy`` (`MemoryKeywordCopy`); this one leaves it unused."""
        if limit < 1:
            return []
        filtered = memory_filter_sql(where, self._sql.filters)
        asked = limit + 1
        while True:  # one more than the limit: whether the tie at the cut goes on
            rows = self._sql.keyword_rows(
                "searching memories", query, self._keyword_sql, filtered, asked
            )
            if len(rows) < asked or rows[-1][3] != rows[limit - 1][3]:
                break
            asked *= 2
        found = [MemoryKeywordRow(MemoryHead(*row[:3]), float(row[3])) for row in rows]
        return with_ties(found, limit)

    # -- writing ---------------------------------------------------------------------------

    def put(self, memory: MemoryRecord) -> None:
        """Add a memory, or replace the one with its id (whose vector goes if its text changed)."""
        check_memory(memory)
        values: list[Any] = [
            json.dumps(list(value), ensure_ascii=False) if isinstance(value, tuple) else value
            for value in (getattr(memory, name) for name in _WRITE_COLUMNS)
        ]
        search = self._search_value(memory)
        columns, marks = ", ".join(_WRITE_COLUMNS), ", ".join("?" * len(values))
        if search is not None:
            columns, marks = f"{columns}, search", f"{marks}, {search[0]}"
            values += search[1]
        with self._sql.writing("writing a memory") as run:
            old = run.one("SELECT key, title, content FROM memories WHERE id = ?", (memory.id,))
            if old is None:
                run.run(
                    f"INSERT INTO memories(id, key, {columns}) VALUES"
                    f" (?, (SELECT coalesce(max(key), 0) + 1 FROM memories), {marks})",
                    (memory.id, *values),
                )
            else:
                run.run(
                    f"UPDATE memories SET ({columns}) = ({marks}) WHERE id = ?",
                    (*values, memory.id),
                )
                if (old[1], old[2]) != (memory.title, memory.content) and run.run(
                    "DELETE FROM memory_vectors WHERE key = ?", (old[0],)
                ):
                    self._dropped(run, old[0])
            self._indexed(run, memory, old is not None)
            run.count_up(STATUS_WRITES_META_KEY)

    def set_status(
        self, memory_id: str, status: str, superseded_by: str | None, updated_unix: float
    ) -> bool:
        """Set a memory's status (and successor); False when no memory has that id."""
        with self._sql.writing("changing a memory's status") as run:
            changed = run.run(
                "UPDATE memories SET status = ?, superseded_by = ?, updated_unix = ? WHERE id = ?",
                (status, superseded_by, updated_unix, memory_id),
            )
            if changed:
                run.count_up(STATUS_WRITES_META_KEY)
            return changed > 0

    # -- reading ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord | None:
        """Return a memory by id, or None."""
        with self._sql.reading("reading a memory") as run:
            row = run.one(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,))
            return None if row is None else memory_from_row(row)

    def by_keys(self, keys: Sequence[int]) -> dict[int, MemoryRecord]:
        """Return the memories with these integer keys (those that still exist), by key."""
        with self._sql.reading("reading memories") as run:
            rows = run.rows_in(
                f"SELECT m.key, {MEMORY_COLUMNS} FROM memories m WHERE m.key {{in}}",
                [int(key) for key in keys],
            )
            return {row[0]: memory_from_row(row[1:]) for row in rows}

    def heads(self, keys: Sequence[int]) -> dict[int, MemoryHead]:
        """Return the heads of the memories with these integer keys (those that exist), by key."""
        with self._sql.reading("reading memories") as run:
            rows = run.rows_in(
                f"SELECT {MEMORY_HEAD_COLUMNS} FROM memories m WHERE m.key {{in}}",
                [int(key) for key in keys],
            )
            return {row[0]: MemoryHead(*row) for row in rows}

    def newest_key(self) -> int:
        """Return the largest integer key (0 without memories): keys only grow, and memories
        are never deleted, so it moves exactly when a memory is added."""
        with self._sql.reading("reading memories") as run:
            return int(run.scalar("SELECT coalesce(max(key), 0) FROM memories") or 0)

    def keys_matching(self, where: MemoryFilter) -> builtins.list[int]:
        """Return the integer keys of the memories passing the filter, by key."""
        filter_sql, params = memory_filter_sql(where, self._sql.filters)
        with self._sql.reading("filtering memories") as run:
            rows = run.rows(
                f"SELECT m.key FROM memories m WHERE 1 = 1{filter_sql} ORDER BY m.key", params
            )
            return [row[0] for row in rows]

    def keys_failing(self, where: MemoryFilter, limit: int) -> frozenset[int] | None:
        """Return the integer keys of the memories failing a filter of status alone (the
        default, ``status = 'active'``; no filter: none fail), if at most ``limit`` fail;
        None for any other filter, or when more fail (`keys_matching` then).

        It reads the other statuses through the status index, so it costs the memories that
        fail (the few archived or superseded), not all of them as `keys_matching` does; and
        it keeps what it read until a write counts a status write (`STATUS_WRITES_META_KEY`),
        in this process or another: then a recall costs one ``meta`` read.
        """
        others = other_statuses(where)
        if not others:
            return None if others is None else frozenset()
        with self._sql.reading("filtering memories") as run:
            writes = run.meta(STATUS_WRITES_META_KEY)
            held = self._failing.get(tuple(others))
            if held is not None and held[0] == writes:
                keys = held[1]
            else:
                rows = run.rows_in(
                    f"SELECT m.key FROM memories m WHERE m.status {{in}} LIMIT {MOST_FAILING + 1}",
                    others,
                )
                keys = frozenset(row[0] for row in rows)
                self._failing[tuple(others)] = (writes, keys)
        return None if len(keys) > limit else keys

    def preceding(
        self, source: str, memory_id: str | None, count: int
    ) -> builtins.list[MemoryRecord]:
        """Return the last ``count`` memories from ``source`` stored before memory
        ``memory_id`` (before any new one: None, or an id not stored), oldest first."""
        with self._sql.reading("reading memories") as run:
            rows = run.rows(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.source = ?"
                " AND m.key < coalesce((SELECT key FROM memories WHERE id = ?), ?)"
                " ORDER BY m.key DESC LIMIT ?",
                (source, memory_id, AFTER_EVERY_KEY, count),
            )
            return [memory_from_row(row) for row in rows][::-1]

    def list(self, where: MemoryFilter, limit: int) -> builtins.list[MemoryRecord]:
        """Return up to ``limit`` memories passing the filter, newest first."""
        filter_sql, params = memory_filter_sql(where, self._sql.filters)
        with self._sql.reading("listing memories") as run:
            rows = run.rows(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE 1 = 1{filter_sql}"
                " ORDER BY m.created_unix DESC, m.id DESC LIMIT ?",
                [*params, limit],
            )
            return [memory_from_row(row) for row in rows]

    def count(self) -> int:
        """Return how many memories there are."""
        with self._sql.reading("counting memories") as run:
            return int(run.scalar("SELECT count(*) FROM memories"))

    def counts(self) -> MemoryCounts:
        """Return how many memories there are, by status, type and project."""
        with self._sql.snapshot("counting memories") as run:

            def grouped(column: str) -> dict[str, int]:
                rows = run.rows(
                    f"SELECT {column}, count(*) FROM memories WHERE {column} IS NOT NULL"
                    f" GROUP BY {column} ORDER BY count(*) DESC, {column}"
                )
                return {row[0]: row[1] for row in rows}

            return MemoryCounts(
                total=int(run.scalar("SELECT count(*) FROM memories")),
                by_status=grouped("status"),
                by_type=grouped("type"),
                by_project=grouped("project"),
                embedded=int(run.scalar("SELECT count(*) FROM memory_vectors")),
            )


def other_statuses(where: MemoryFilter) -> builtins.list[str] | None:
    """Return the statuses a filter of status alone leaves out (none, without a filter), or
    None for any other filter."""
    test = where.where
    if test is None:
        return []
    if not (isinstance(test, Condition) and test.field == "status" and test.op in ("eq", "in")):
        return None
    kept = test.value if isinstance(test.value, tuple) else (test.value,)
    return [status for status in MEMORY_STATUSES if status not in kept]
