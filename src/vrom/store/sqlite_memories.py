"""Agent memories in SQLite: the shared `SqlMemories` with an FTS5 keyword index, and (through
`SQLiteMemoryVectors`) their vectors.

Memories live in the same database file as the notes, so they share its transactions, its WAL
and its crash safety.
"""

from __future__ import annotations

from typing import Any

from vrom.store.filter_sql import memory_filter_sql
from vrom.store.fts_text import segment
from vrom.store.records import (
    MOST_FAILING,
    KeywordQuery,
    MemoryFilter,
    MemoryKeywordRow,
    MemoryRecord,
)
from vrom.store.rows import MEMORY_COLUMNS, memory_from_row
from vrom.store.sql_dialect import Statements
from vrom.store.sql_memories import SqlMemories
from vrom.store.sql_vectors import MEMORY_VECTORS
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_dialect import SQLiteDialect
from vrom.store.sqlite_query import match_expression
from vrom.store.sqlite_vectors import SQLiteMemoryVectors

# memory_id (unindexed), title, content, tags: the title says most, then a tag, then the text
MEMORY_BM25_WEIGHTS = (0.0, 4.0, 1.0, 2.0)
_WEIGHTS = ", ".join(str(w) for w in MEMORY_BM25_WEIGHTS)


class SQLiteMemories(SqlMemories):
    """The memories of one store (`vrom.store.MemoryStore`), over its database connection."""

    def __init__(self, db: Database) -> None:
        super().__init__(SQLiteDialect(db), SQLiteMemoryVectors(db))

    def _indexed(self, run: Statements, memory: MemoryRecord, replaced: bool) -> None:
        if replaced:
            run.run("DELETE FROM memories_fts WHERE memory_id = ?", (memory.id,))
        run.run(
            "INSERT INTO memories_fts(memory_id, title, content, tags) VALUES (?, ?, ?, ?)",
            (
                memory.id,
                segment(memory.title),
                segment(memory.content),
                segment(" ".join(memory.tags)),
            ),
        )

    def _dropped(self, run: Statements, key: int) -> None:
        run.count_up(MEMORY_VECTORS.generation_meta)

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: MemoryFilter
    ) -> list[MemoryKeywordRow]:
        """Return up to ``limit`` memories matching the query and filter, best first.

        Under a filter of status alone (the default: active) FTS5's matches are ranked without
        joining each to its memory row (a third of the time at 100k memories): the best
        ``limit`` plus as many as fail the filter (`keys_failing`; at most twice ``limit`` at
        first) are ranked, and the filter is applied to those. The rows are the ones the
        joined ranking gives: a passing match among the best ``limit`` has fewer than ``limit``
        passing and fewer than all the failing ones ahead of it.
        """
        with self._sql.snapshot("searching memories") as run:  # the failing counted, then ranked
            failing = None if query.is_empty else self.keys_failing(where, MOST_FAILING)
            if failing is None:  # another filter, or many failing
                return super().keyword_search(query, limit, where)
            filter_sql, params = memory_filter_sql(where, self._sql.filters)
            sql = (
                f"SELECT {MEMORY_COLUMNS}, r.score FROM (SELECT memory_id AS id,"
                f" -bm25(memories_fts, {_WEIGHTS}) AS score FROM memories_fts"
                " WHERE memories_fts MATCH ? ORDER BY score DESC, memory_id LIMIT ?) r"
                f" JOIN memories m ON m.id = r.id WHERE 1 = 1{filter_sql}"
                " ORDER BY r.score DESC, m.id LIMIT ?"
            )
            for ranked in dict.fromkeys((limit + min(len(failing), limit), limit + len(failing))):
                # the second window holds at least ``limit`` passing, if that many match
                rows = run.rows(sql, [match_expression(query), ranked, *params, limit])
                if len(rows) >= limit:
                    break
        return [MemoryKeywordRow(memory_from_row(row[:-1]), float(row[-1])) for row in rows]

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, list[Any]]:
        # ranked on ids and scores alone; only the rows kept are read whole (a memory's text
        # carried through the sort cost a fifth of the time on SciFact's abstracts)
        return (
            f"SELECT {MEMORY_COLUMNS}, r.score FROM (SELECT m.id AS id,"
            f" -bm25(memories_fts, {_WEIGHTS}) AS score FROM memories_fts"
            " JOIN memories m ON m.id = memories_fts.memory_id"
            f" WHERE memories_fts MATCH ?{filter_sql} ORDER BY score DESC, m.id LIMIT ?) r"
            " JOIN memories m ON m.id = r.id ORDER BY r.score DESC, m.id"
        ), [match_expression(query)]
