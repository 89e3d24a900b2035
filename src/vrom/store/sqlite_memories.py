"""Agent memories in SQLite: the shared `SqlMemories` with an FTS5 keyword index, and (through
`SQLiteMemoryVectors`) their vectors.

Memories live in the same database file as the notes, so they share its transactions, its WAL
and its crash safety.
"""

from __future__ import annotations

from typing import Any

from vrom.store.fts_text import segment
from vrom.store.records import KeywordQuery, MemoryRecord
from vrom.store.rows import MEMORY_COLUMNS
from vrom.store.sql_dialect import Statements
from vrom.store.sql_memories import SqlMemories
from vrom.store.sql_vectors import MEMORY_VECTORS
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_dialect import SQLiteDialect
from vrom.store.sqlite_query import match_expression
from vrom.store.sqlite_vectors import SQLiteMemoryVectors

# memory_id (unindexed), title, content, tags: the title says most, then a tag, then the text
MEMORY_BM25_WEIGHTS = (0.0, 4.0, 1.0, 2.0)


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

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, list[Any]]:
        # ranked on ids and scores alone; only the rows kept are read whole (a memory's text
        # carried through the sort cost a fifth of the time on SciFact's abstracts)
        weights = ", ".join(str(w) for w in MEMORY_BM25_WEIGHTS)
        return (
            f"SELECT {MEMORY_COLUMNS}, r.score FROM (SELECT m.id AS id,"
            f" -bm25(memories_fts, {weights}) AS score FROM memories_fts"
            " JOIN memories m ON m.id = memories_fts.memory_id"
            f" WHERE memories_fts MATCH ?{filter_sql} ORDER BY score DESC, m.id LIMIT ?) r"
            " JOIN memories m ON m.id = r.id ORDER BY r.score DESC, m.id"
        ), [match_expression(query)]
