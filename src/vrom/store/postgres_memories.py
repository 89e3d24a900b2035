"""Agent memories in PostgreSQL: the shared `SqlMemories` with a full-text ``search`` vector,
and (through `PgMemoryVectors`) their vectors.

Keyword search weighs the title (A), the tags (B) and the content (C) 4 : 2 : 1, ranked as
`PgDocuments.keyword_search` ranks chunks.
"""

from __future__ import annotations

from typing import Any

from vrom.store.postgres_database import PgDatabase
from vrom.store.postgres_dialect import PgDialect
from vrom.store.postgres_query import fold, text_search, weighted_vector_sql
from vrom.store.postgres_vectors import PgMemoryVectors
from vrom.store.records import KeywordQuery, MemoryRecord
from vrom.store.rows import MEMORY_HEAD_COLUMNS
from vrom.store.sql_dialect import Statements
from vrom.store.sql_memories import SqlMemories


class PgMemories(SqlMemories):
    """The memories of one namespace (`vrom.store.MemoryStore`)."""

    _vectors: PgMemoryVectors

    def __init__(self, db: PgDatabase) -> None:
        super().__init__(PgDialect(db), PgMemoryVectors(db))

    def _search_value(self, memory: MemoryRecord) -> tuple[str, list[Any]] | None:
        parts = [fold(memory.title), fold(" ".join(memory.tags)), fold(memory.content)]
        return weighted_vector_sql(3), parts

    def _dropped(self, run: Statements, key: int) -> None:
        self._vectors.log(run, [key])

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, list[Any]]:
        search = text_search(query, "memories")
        return search.ranked(MEMORY_HEAD_COLUMNS, "memories m", "m", filter_sql)
