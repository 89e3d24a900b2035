"""Agent memories in PostgreSQL: the shared `SqlMemories` with a full-text ``search`` vector,
and (through `PgMemoryVectors`) their vectors.

Keyword search weighs the title (A), the tags (B) and the content (C) 4 : 2 : 1, ranked as
`PgDocuments.keyword_search` ranks chunks.
"""

from __future__ import annotations

import builtins
from typing import Any

from vrom.store.filter_sql import memory_filter_sql
from vrom.store.postgres_database import PgDatabase
from vrom.store.postgres_dialect import PgDialect
from vrom.store.postgres_query import fold, text_search, weighted_vector_sql
from vrom.store.postgres_vectors import PgMemoryVectors
from vrom.store.records import KeywordQuery, MemoryFilter, MemoryKeywordRow, MemoryRecord
from vrom.store.rows import MEMORY_COLUMNS, memory_from_row
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

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: MemoryFilter
    ) -> builtins.list[MemoryKeywordRow]:
        with self._sql.reading("searching memories") as run:
            if query.is_empty:
                return []
            search = text_search(query, "memories")
            filter_sql, params = memory_filter_sql(where, self._sql.filters)
            rows = run.rows(
                f"WITH {search.terms} SELECT {MEMORY_COLUMNS}, {search.score('m.search')} AS score"
                f" FROM memories m WHERE m.search @@ ({search.match}){filter_sql}"
                " ORDER BY score DESC, m.id LIMIT %s",
                [*search.terms_params, *search.match_params, *params, limit],
            )
            return [MemoryKeywordRow(memory_from_row(row[:-1]), float(row[-1])) for row in rows]
