"""Documents in SQLite: the shared `SqlDocuments` with an FTS5 keyword index (BM25), and a
cache of the chunk ids that pass a filter.

Every write of a document counts one more document generation in ``meta``, in the writer's
transaction, so every process sees it move with the write it counts: the chunk ids of the last
few filters are kept by (filter, generation), and a filtered search reads them once per change
of the store instead of once per query.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from vrom.errors import ValidationError
from vrom.store import sqlite_keyword
from vrom.store.filter_sql import where_sql
from vrom.store.fts_text import segment
from vrom.store.records import (
    KeywordPostings,
    KeywordQuery,
    Where,
)
from vrom.store.sql_dialect import Statements
from vrom.store.sql_document_writes import (
    CHUNK_WRITE_COLUMNS,
    DOCUMENT_GENERATION_META_KEY,
    PlacedWrite,
)
from vrom.store.sql_documents import SqlDocuments
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_dialect import SQLiteDialect
from vrom.store.sqlite_keyword import BM25_WEIGHTS, QueryTokenizer
from vrom.store.sqlite_query import match_expression
from vrom.store.sqlite_rows import chunk_columns
from vrom.store.sqlite_vectors import SQLiteChunkVectors
from vrom.store.storable import as_json_reads_it

"""The ``meta`` key counting writes of documents (their chunks, links, tags and fields)."""
KEPT_FILTERS = 8
"""How many filters' chunk ids are kept (the most recently used): 8 bytes per chunk each, so at
most 6.4 MB at 100k chunks."""
FilterKey = tuple[str, tuple[Any, ...]]
_INT64 = range(-(2**63), 2**63)


def field_rows(frontmatter: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """Return (key, kind, value) for each row the ``field_values`` view reads from a document's
    frontmatter JSON (`vrom.store.schema`), in the view's order (its five parts one after the
    other, each in the JSON's order), so ``INSERT OR IGNORE`` keeps the same row of two equal
    ones: a scalar, each scalar item of a list, a mapping's scalar members (``a.b``), the items
    of a mapping's lists, the members of a list's mappings. Numbers as SQLite's JSON reads them:
    an integer past 64 bits is a float."""
    data = as_json_reads_it(frontmatter)  # the stored JSON's types
    parts: tuple[list[tuple[str, Any]], ...] = ([], [], [], [], [])
    for key, value in data.items():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    parts[4].extend((f"{key}.{m}", inner) for m, inner in item.items())
                else:
                    parts[1].append((key, item))
        elif isinstance(value, dict):
            for member, inner in value.items():
                if isinstance(inner, list):
                    parts[3].extend((f"{key}.{member}", item) for item in inner)
                else:
                    parts[2].append((f"{key}.{member}", inner))
        else:
            parts[0].append((key, value))
    rows: list[tuple[str, str, Any]] = []
    for part in parts:
        for key, value in part:
            if isinstance(value, str):
                rows.append((key, "text", value))
            elif isinstance(value, bool):
                rows.append((key, "bool", int(value)))
            elif isinstance(value, int):
                rows.append((key, "number", value if value in _INT64 else float(value)))
            elif isinstance(value, float):
                if not math.isfinite(value):  # JSON has none: the view could not read it
                    raise ValidationError(f"frontmatter field {key!r} is not a finite number")
                rows.append((key, "number", value))
    return rows


class SQLiteDocuments(SqlDocuments):
    """The documents of one store (`vrom.store.DocumentStore`); chunk vectors follow their chunk."""

    child_tables: ClassVar[tuple[str, ...]] = (*SqlDocuments.child_tables, "fields")

    def __init__(self, db: Database, vectors: SQLiteChunkVectors) -> None:
        super().__init__(SQLiteDialect(db), vectors)
        self._db = db
        version = db.stored_version()
        self._chunk_columns = chunk_columns(version)
        self._has_texts = version >= 8  # a pack opened read-only may be older
        self._tokenizer: QueryTokenizer | None = None
        # filter SQL and parameters -> (document generation, the chunk ids passing it)
        self._filtered: OrderedDict[FilterKey, tuple[int, Sequence[int]]] = OrderedDict()
        self._filtered_lock = threading.Lock()  # the store is shared by threads

    # -- writing ---------------------------------------------------------------------------

    def next_ids(self, run: Statements, table: str, count: int) -> list[int]:
        first = run.scalar(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),"
            f" coalesce((SELECT max(id) FROM {table}), 0))",
            (table,),
        )
        return list(range(int(first) + 1, int(first) + 1 + count))

    def _unindex(self, run: Statements, document_id: int) -> None:
        run.run(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE document_id = ?)",
            (document_id,),
        )

    def _insert_chunks(self, run: Statements, placed: Sequence[PlacedWrite]) -> None:
        run.many(
            f"INSERT INTO chunks({CHUNK_WRITE_COLUMNS}) VALUES ({', '.join('?' * 10)})",
            [row for p in placed for row in p.chunk_rows()],
        )
        rows = []
        for p in placed:
            title = segment(p.write.document.title)
            rows += [
                (i, title, segment(chunk.heading_path), segment(chunk.text))
                for i, chunk in zip(p.chunk_ids, p.write.chunks, strict=True)
            ]
        run.many(
            "INSERT INTO chunks_fts(rowid, title, heading_path, body) VALUES (?, ?, ?, ?)", rows
        )

    def _derived(self, run: Statements, placed: Sequence[PlacedWrite]) -> None:
        run.many(
            "INSERT OR IGNORE INTO fields(key, kind, value, document_id) VALUES (?, ?, ?, ?)",
            [
                (*row, p.document_id)
                for p in placed
                for row in field_rows(p.write.document.frontmatter)
            ],
        )

    def _generation(self) -> int:
        """Return the document generation: it moves with every write of a document (its chunks,
        links, tags or fields), by this process or another; a `touch` leaves it."""
        return int(self._db.meta_value(DOCUMENT_GENERATION_META_KEY) or 0)

    # -- reading ---------------------------------------------------------------------------

    def chunk_ids_matching(self, where: Where) -> Sequence[int]:
        # read-only 64-bit integers (numpy reads them without a copy), kept for the last
        # `KEPT_FILTERS` filters until `_generation` moves: a filtered search asks every query
        filter_sql, params = where_sql(where, self._sql.filters)
        # keyed by the SQL that runs, not by `where`: Python's True == 1, a filter's is not
        key: FilterKey = (filter_sql, tuple(params))
        with self._db.guard("filtering"):
            generation = self._generation()
            with self._filtered_lock:
                kept = self._filtered.get(key)
                if kept is not None and kept[0] == generation:
                    self._filtered.move_to_end(key)
                    return kept[1]
            with self._db.read_snapshot():  # the generation of the state the ids come from
                generation = self._generation()
                ids = memoryview(array("q", super().chunk_ids_matching(where))).toreadonly()
            if not self._db.writing:  # a write transaction's state may still roll back
                with self._filtered_lock:
                    self._filtered[key] = (generation, ids)
                    self._filtered.move_to_end(key)
                    while len(self._filtered) > KEPT_FILTERS:
                        self._filtered.popitem(last=False)
            return ids

    # -- `vrom.store.KeywordPostingsSource` ------------------------------------------------

    def keyword_version(self) -> bytes:
        with self._db.guard("reading the keyword index"):
            return sqlite_keyword.version(self._db)

    def keyword_postings(self) -> KeywordPostings:
        with self._db.guard("reading the keyword index"), self._db.read_snapshot():
            return sqlite_keyword.postings(self._db)

    def keyword_postings_apart(self) -> KeywordPostings | None:
        return sqlite_keyword.postings_apart(self._db)

    def keyword_tokens(self, text: str) -> tuple[str, ...]:
        if self._tokenizer is None:
            self._tokenizer = QueryTokenizer(self._db.driver)
        return self._tokenizer.tokens(text)

    def close_tokenizer(self) -> None:
        """Close the query tokenizer's private database, if it was opened."""
        if self._tokenizer is not None:
            self._tokenizer.close()
            self._tokenizer = None

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, list[Any]]:
        # FTS5's BM25 is lower for better: the score is its negation
        score = f"-bm25(chunks_fts, {', '.join(str(w) for w in BM25_WEIGHTS)})"
        if not filter_sql:  # rank inside the index first; only the ranked rows join the rest
            return (
                f"SELECT c.id, c.document_id, d.human_relevance_score, f.score FROM"
                f" (SELECT rowid, {score} AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
                " ORDER BY score DESC LIMIT ?) f JOIN chunks c ON c.id = f.rowid"
                " JOIN documents d ON d.id = c.document_id ORDER BY f.score DESC, c.id"
            ), [match_expression(query)]
        # the filter applies before the limit, so matching hits are not cut off
        return (
            f"SELECT c.id, c.document_id, d.human_relevance_score, {score} AS score"
            " FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid"
            " JOIN documents d ON d.id = c.document_id"
            f" WHERE chunks_fts MATCH ?{filter_sql} ORDER BY score DESC, c.id LIMIT ?"
        ), [match_expression(query)]
