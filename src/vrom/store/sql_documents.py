"""Documents (`vrom.store.DocumentStore`), written once over a `Dialect`: notes or collection
documents, their chunks, links, tags and metadata fields; how they are written is
`vrom.store.sql_document_writes`, what this module adds is reading them and keyword search.

A document given with its whole text (a collection's) keeps it in ``document_texts``, and its
chunks that are exact slices of it store no text of their own: they are read back as slices
(`vrom.store.rows.CHUNK_COLUMNS`).

A backend adds what truly differs: how ids are drawn, its keyword index (FTS5 rows or a
``tsvector`` column) and keyword search, how it finds a document's vectors, and any rows it
derives itself (the ``fields`` of its metadata).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vrom.store.filter_sql import where_sql
from vrom.store.records import (
    KeywordQuery,
    KeywordRow,
    LinkRecord,
    StoredChunk,
    StoredDocument,
    Where,
    path_ends,
)
from vrom.store.rows import CHUNK_COLUMNS, DOCUMENT_COLUMNS, chunks_from_rows, document_from_row
from vrom.store.sql_dialect import AFTER_EVERY_KEY, Dialect, escape_like
from vrom.store.sql_document_writes import LINK_COLUMNS, KeptVectors, SqlDocumentWrites

_UNMATCHED = (
    "SELECT target_key FROM links WHERE target_key != '' AND target_key NOT IN"
    " (SELECT path_key FROM documents UNION SELECT name_key FROM documents)"
)
_CHUNKS = "SELECT {columns} FROM chunks c JOIN documents d ON d.id = c.document_id"


class SqlDocuments(SqlDocumentWrites):
    """Documents (notes), their chunks, links and tags, keyword search and filters: the
    documents role of a store, over its dialect; a backend adds what differs."""

    def __init__(self, dialect: Dialect, vectors: KeptVectors) -> None:
        super().__init__(dialect, vectors)
        self._chunk_columns = CHUNK_COLUMNS
        self._has_texts = True

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, list[Any]]:
        """Return the statement ranking the chunks that match ``query`` and pass ``filter_sql``
        (whose parameters follow the query's, and the limit last), giving chunk id, document
        id, prior and score (higher is better) best first; and the query's parameters."""
        raise NotImplementedError

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: Where | None = None
    ) -> list[KeywordRow]:
        """Return up to ``limit`` chunks matching the query and filter, best first."""
        filtered = where_sql(where, self._sql.filters)
        rows = self._sql.keyword_rows("searching", query, self._keyword_sql, filtered, limit)
        return [KeywordRow(row[0], row[1], row[2], float(row[3])) for row in rows]

    # -- counting --------------------------------------------------------------------------

    def _count(self, query: str, action: str = "counting") -> int:
        with self._sql.reading(action) as run:
            return int(run.scalar(query) or 0)

    def count(self) -> int:
        """Return how many documents there are."""
        return self._count("SELECT count(*) FROM documents")

    def chunk_count(self) -> int:
        """Return how many chunks there are."""
        return self._count("SELECT count(*) FROM chunks")

    def unresolved_link_count(self) -> int:
        """Return how many links point to no stored document (as `find` resolves them); the end
        of a path is matched in Python (a LIKE per target read every document: 0.8 s, the hub)."""
        with self._sql.reading("counting unresolved links") as run:
            targets = [key for (key,) in run.rows(_UNMATCHED)]
            paths = run.rows("SELECT path_key FROM documents") if "/" in "".join(targets) else []
        ends = set().union(*(path_ends(path) for (path,) in paths))
        return sum(1 for key in targets if "/" not in key or key not in ends)

    # -- reading ---------------------------------------------------------------------------

    def _documents(self, action: str, query: str, params: Sequence[Any]) -> list[StoredDocument]:
        with self._sql.reading(action) as run:
            return [document_from_row(row) for row in run.rows(query, params)]

    def get(self, document_id: int) -> StoredDocument | None:
        """Return a document by id."""
        found = self._documents(
            "reading a note",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = ?",
            (document_id,),
        )
        return found[0] if found else None

    def find(self, key: str) -> list[StoredDocument]:
        """Return documents whose path key or stem matches ``key``, exact path first."""
        if "/" in key:
            condition = "path_key = ? OR path_key LIKE ? ESCAPE '\\'"
            params = [key, "%/" + escape_like(key)]
        else:
            condition, params = "path_key = ? OR name_key = ?", [key, key]
        return self._documents(
            "finding notes",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE {condition}"
            " ORDER BY path_key = ? DESC, length(path), path",
            (*params, key),
        )

    def chunks_of(self, document_id: int) -> list[StoredChunk]:
        """Return a document's chunks in order."""
        with self._sql.reading("reading chunks") as run:
            sql = _CHUNKS.format(columns=self._chunk_columns)
            rows = run.rows(sql + " WHERE c.document_id = ? ORDER BY c.position", (document_id,))
            return chunks_from_rows(rows)

    def chunk_ids_of(self, document_ids: Sequence[int]) -> dict[int, dict[int, int]]:
        """Return document id → {chunk position: chunk id}, from one read (a writer's, to give
        the chunks it wrote their vectors without reading them back whole)."""
        found: dict[int, dict[int, int]] = {}
        with self._sql.reading("reading chunk ids") as run:
            sql = "SELECT document_id, position, id FROM chunks WHERE document_id {in}"
            for document_id, position, chunk_id in run.rows_in(sql, list(document_ids)):
                found.setdefault(document_id, {})[position] = chunk_id
        return found

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[StoredChunk]:
        """Return the chunks with these ids (those that still exist), in the order given, from
        one read (a statement per 500 ids on SQLite)."""
        with self._sql.reading("reading chunks") as run:
            sql = _CHUNKS.format(columns=self._chunk_columns) + " WHERE c.id {in}"
            rows = run.rows_in(sql, [int(i) for i in chunk_ids])
            found = {chunk.chunk_id: chunk for chunk in chunks_from_rows(rows)}
            return [found[i] for i in chunk_ids if i in found]

    def chunk_owners(self, chunk_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        """Return chunk id → (document id, human-relevance prior) for the chunks that still
        exist."""
        with self._sql.reading("reading chunks") as run:
            sql = _CHUNKS.format(columns="c.id, c.document_id, d.human_relevance_score")
            rows = run.rows_in(sql + " WHERE c.id {in}", [int(i) for i in chunk_ids])
            return {row[0]: (row[1], row[2]) for row in rows}

    def chunk_ids_matching(self, where: Where) -> Sequence[int]:
        """Return the ids of the chunks whose document passes the filter, by id.

        The sequence may be shared with later calls (a backend may keep it while the store is
        unchanged): read it, never change it.
        """
        filter_sql, params = where_sql(where, self._sql.filters)
        with self._sql.reading("filtering") as run:
            sql = _CHUNKS.format(columns="c.id") + f" WHERE 1 = 1{filter_sql} ORDER BY c.id"
            return [row[0] for row in run.rows(sql, params)]

    def texts(self, document_ids: Sequence[int]) -> dict[int, str]:
        """Return id → whole text of the documents stored with one (a collection's)."""
        if not self._has_texts:
            return {}
        with self._sql.reading("reading document texts") as run:
            sql = "SELECT document_id, text FROM document_texts WHERE document_id {in}"
            return {row[0]: row[1] for row in run.rows_in(sql, [int(i) for i in document_ids])}

    def field_texts(
        self,
        key: str,
        value: str,
        *,
        before: int | None = None,
        after: int | None = None,
        limit: int,
    ) -> list[tuple[int, str]]:
        """Return (id, whole text) of the documents whose metadata ``key`` is the string
        ``value`` (a list holding it is none), stored with their text, oldest first: the
        ``limit`` first with ids after ``after`` when it is given, else the ``limit`` last
        before ``before`` (None: before any new one)."""
        if not self._has_texts:
            return []
        last, upper = after is None, AFTER_EVERY_KEY if before is None else before
        is_text, path = self._sql.json_text("d.frontmatter", key)
        with self._sql.reading("reading document texts") as run:
            rows = run.rows(
                "SELECT f.document_id, t.text FROM fields f"
                " JOIN documents d ON d.id = f.document_id"
                " JOIN document_texts t ON t.document_id = f.document_id"
                f" WHERE f.key = ? AND f.kind = 'text' AND f.{self._sql.field_text} = ?"
                f" AND {is_text} AND f.document_id > ? AND f.document_id < ?"
                f" ORDER BY f.document_id{' DESC' if last else ''} LIMIT ?",
                (key, value, path, after or 0, upper, limit),
            )
            return rows[::-1] if last else rows

    def has_shared_value(self, key: str) -> bool:
        """True if two documents or more have the same string as metadata ``key`` (or one
        held in a list, which errs towards True)."""
        with self._sql.reading("reading documents") as run:
            column = self._sql.field_text
            row = run.one(
                "SELECT 1 FROM fields WHERE key = ? AND kind = 'text'"
                f" GROUP BY {column} HAVING count(*) > 1 LIMIT 1",
                (key,),
            )
            return row is not None

    def links(
        self, *, sources: Sequence[int] | None = None, targets: Sequence[str] | None = None
    ) -> list[tuple[int, LinkRecord]]:
        """Return (source document id, link) for the links written in the documents ``sources``,
        or for those whose target key is one of ``targets``, by source and position."""
        column, values = ("document_id", sources) if targets is None else ("target_key", targets)
        with self._sql.reading("reading links") as run:
            rows = run.rows_in(
                f"SELECT document_id, {LINK_COLUMNS} FROM links WHERE {column} {{in}}",
                list(values or ()),
            )
            rows.sort(key=lambda row: (row[0], row[-1]))  # by document, then position
            return [(row[0], LinkRecord(*row[1:])) for row in rows]

    def tags_of(self, document_id: int) -> list[str]:
        """Return a document's tags, sorted."""
        with self._sql.reading("reading tags") as run:
            rows = run.rows(
                "SELECT tag FROM tags WHERE document_id = ? ORDER BY tag", (document_id,)
            )
            return [row[0] for row in rows]

    def sharing_tags(self, document_id: int, limit: int) -> list[tuple[int, list[str]]]:
        """Return (document id, shared tags) for others sharing tags, most shared first."""
        with self._sql.reading("reading shared tags") as run:
            rows = run.rows(
                f"SELECT o.document_id, {self._sql.text_list('o.tag')} FROM tags t"
                " JOIN tags o ON o.tag = t.tag AND o.document_id != t.document_id"
                " WHERE t.document_id = ? GROUP BY o.document_id"
                " ORDER BY count(*) DESC, o.document_id LIMIT ?",
                (document_id, limit),
            )
            return [(row[0], sorted(json.loads(row[1]))) for row in rows]

    def tag_counts(self) -> list[tuple[str, int]]:
        """Return (tag, number of documents) for every tag, most used first, then by name."""
        with self._sql.reading("counting tags") as run:
            rows = run.rows("SELECT tag, count(*) AS n FROM tags GROUP BY tag ORDER BY n DESC, tag")
            return [(row[0], row[1]) for row in rows]

    def with_tag(self, tag: str) -> list[StoredDocument]:
        """Return the documents tagged ``tag`` or a tag nested under it (``tag/...``), by path."""
        filter_sql, params = where_sql(Where(tags=(tag,)), self._sql.filters)
        return self._documents(
            "finding tagged notes",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE 1 = 1{filter_sql} ORDER BY d.path",
            params,
        )

    def in_folder(self, folder: str) -> list[StoredDocument]:
        """Return the documents directly in ``folder`` ("" for the root, no trailing /), by path."""
        prefix = f"{folder}/" if folder else ""
        return self._documents(
            "listing a folder",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE path LIKE ? ESCAPE '\\'"
            f" AND {self._sql.instr}(substr(path, ?), '/') = 0 ORDER BY path",
            (escape_like(prefix) + "%", len(prefix) + 1),
        )

    def after_path(self, after: str, limit: int) -> list[StoredDocument]:
        """Return up to ``limit`` documents whose paths sort after ``after``, by path (a page
        of a listing that stays in step when documents are added or removed between pages)."""
        return self._documents(
            "listing notes",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE path > ? ORDER BY path LIMIT ?",
            (after, limit),
        )
