"""Documents in PostgreSQL: the shared `SqlDocuments` with a full-text ``search`` vector per
chunk, the ``fields`` rows of each document's metadata, and batched writes.

Keyword search is PostgreSQL full text: each chunk's ``search`` vector weighs its note's title
(A), its heading path (B) and its text (C), ranked by ``ts_rank`` (see `postgres_query`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from vrom.store.postgres_batch import SEARCH_VECTORS, put_many, search_texts
from vrom.store.postgres_database import PgDatabase
from vrom.store.postgres_dialect import PgDialect
from vrom.store.postgres_query import field_rows, text_search, weighted_vector_sql
from vrom.store.postgres_vectors import PgChunkVectors
from vrom.store.records import (
    DocumentWrite,
    KeywordQuery,
)
from vrom.store.sql_dialect import Statements
from vrom.store.sql_document_writes import CHUNK_WRITE_COLUMNS, PlacedWrite
from vrom.store.sql_documents import SqlDocuments

FIELD_COLUMNS = "document_id, key, kind, text_value, number_value, instant"


class PgDocuments(SqlDocuments):
    """The documents of one namespace (`vrom.store.DocumentStore`)."""

    child_tables: ClassVar[tuple[str, ...]] = (*SqlDocuments.child_tables, "fields")

    def __init__(self, db: PgDatabase, vectors: PgChunkVectors) -> None:
        super().__init__(PgDialect(db), vectors)
        self._db = db
        self._pg_vectors = vectors

    def next_ids(self, run: Statements, table: str, count: int) -> list[int]:
        if not count:
            return []
        rows = run.rows(f"SELECT nextval('{table}_id_seq') FROM generate_series(1, ?)", (count,))
        return [int(row[0]) for row in rows]

    def _insert_chunks(self, run: Statements, placed: Sequence[PlacedWrite]) -> None:
        run.many(
            f"INSERT INTO chunks({CHUNK_WRITE_COLUMNS}, search)"
            f" VALUES ({', '.join('?' * 10)}, {weighted_vector_sql(3)})",
            [
                (*row, *texts)
                for p in placed
                for row, texts in zip(
                    p.chunk_rows(), search_texts(p.write.document, p.write.chunks), strict=True
                )
            ],
        )

    def _derived(self, run: Statements, placed: Sequence[PlacedWrite]) -> None:
        run.many(
            f"INSERT INTO fields({FIELD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (p.document_id, *row)
                for p in placed
                for row in field_rows(p.write.document.frontmatter)
            ],
        )

    def search_vectors(self, writes: Sequence[DocumentWrite]) -> list[str]:
        """Return the text form of the search vector of each chunk of ``writes``, in order,
        computed on a pooled connection (outside this thread's transaction: `put_many` asks
        for them from a thread of its own)."""
        texts = [t for w in writes for t in search_texts(w.document, w.chunks)]
        if not texts:
            return []
        with self._db.guard("computing search vectors"), self._db.connection() as conn:
            rows = conn.execute(
                SEARCH_VECTORS, [list(column) for column in zip(*texts, strict=True)]
            )
            return [str(row[0]) for row in rows.fetchall()]

    def put_many(self, writes: Sequence[DocumentWrite]) -> list[int]:  # in a few statements
        return put_many(self, self._pg_vectors, writes)

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, list[Any]]:
        # each query term's IDF times its ts_rank, summed (`postgres_query.TextSearch.score`)
        return text_search(query, "chunks").ranked(
            "c.id, c.document_id, d.human_relevance_score",
            "chunks c JOIN documents d ON d.id = c.document_id",
            "c",
            filter_sql,
        )
