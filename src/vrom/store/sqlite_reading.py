"""The read side of `SQLiteStore`: notes, chunks, links and tags, and keyword (BM25) search."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from vrom.store import KeywordQuery, KeywordRow, LinkRecord, StoredChunk, StoredDocument, Where
from vrom.store.sqlite_query import escape_like, match_expression, where_sql

# title, heading_path, body: a match in the title or a heading says more than one in the body
BM25_WEIGHTS = (4.0, 2.0, 1.0)

_CHUNK_COLUMNS = """
    c.id, c.document_id, c.position, c.heading_path, c.text, c.char_start, c.char_end,
    c.prev_id, c.next_id, c.content_hash, d.path, d.title, d.mtime, d.human_relevance_score,
    d.frontmatter
"""
_DOCUMENT_COLUMNS = """
    id, path, path_key, name_key, title, frontmatter, content_hash, mtime, size,
    human_relevance_score, chunk_count
"""


def _chunk(row: Sequence[Any]) -> StoredChunk:
    values = list(row)
    values[-1] = json.loads(values[-1])  # the note's frontmatter
    return StoredChunk(*values)


def _document(row: Sequence[Any]) -> StoredDocument:
    values = list(row)
    values[5] = json.loads(values[5])
    return StoredDocument(*values)


class SQLiteReadingMixin:
    """Note lookups and keyword search of `SQLiteStore`, over the connection it provides."""

    _conn: sqlite3.Connection

    if TYPE_CHECKING:

        def _guard(self, action: str) -> AbstractContextManager[None]: ...
        def _select_in(self, sql: str, ids: Sequence[Any]) -> Iterator[Sequence[Any]]: ...

    def get_document(self, document_id: int) -> StoredDocument | None:
        """Return a note by id."""
        with self._guard("reading a note"):
            row = self._conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE id = ?", (document_id,)
            ).fetchone()
            return None if row is None else _document(row)

    def find_documents(self, key: str) -> list[StoredDocument]:
        """Return notes whose path key or stem matches ``key``, exact path first."""
        with self._guard("finding notes"):
            if "/" in key:
                condition, params = (
                    "path_key = ? OR path_key LIKE ? ESCAPE '\\'",
                    [key, "%/" + escape_like(key)],
                )
            else:
                condition, params = "path_key = ? OR name_key = ?", [key, key]
            rows = self._conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE {condition}"
                " ORDER BY path_key = ? DESC, length(path), path",
                (*params, key),
            )
            return [_document(row) for row in rows]

    def chunks_of(self, document_id: int) -> list[StoredChunk]:
        """Return a note's chunks in order."""
        with self._guard("reading chunks"):
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.document_id = ? ORDER BY c.position",
                (document_id,),
            )
            return [_chunk(row) for row in rows]

    def links_of(self, document_id: int) -> list[LinkRecord]:
        """Return the links written in a note, in order."""
        with self._guard("reading links"):
            rows = self._conn.execute(
                "SELECT kind, target, target_key, heading, alias, position FROM links"
                " WHERE document_id = ? ORDER BY position",
                (document_id,),
            )
            return [LinkRecord(*row) for row in rows]

    def links_to_keys(self, keys: Sequence[str]) -> list[tuple[int, LinkRecord]]:
        """Return (source note id, link) for links whose target key is one of ``keys``."""
        with self._guard("reading backlinks"):
            if not keys:
                return []
            marks = ", ".join("?" for _ in keys)
            rows = self._conn.execute(
                "SELECT document_id, kind, target, target_key, heading, alias, position FROM links"
                f" WHERE target_key IN ({marks}) ORDER BY document_id, position",
                list(keys),
            )
            return [(row[0], LinkRecord(*row[1:])) for row in rows]

    def tags_of(self, document_id: int) -> list[str]:
        """Return a note's tags, sorted."""
        with self._guard("reading tags"):
            rows = self._conn.execute(
                "SELECT tag FROM tags WHERE document_id = ? ORDER BY tag", (document_id,)
            )
            return [row[0] for row in rows]

    def notes_sharing_tags(self, document_id: int, limit: int) -> list[tuple[int, list[str]]]:
        """Return (note id, shared tags) for other notes sharing tags, most shared first."""
        with self._guard("reading shared tags"):
            rows = self._conn.execute(
                "SELECT o.document_id, json_group_array(o.tag) FROM tags t"
                " JOIN tags o ON o.tag = t.tag AND o.document_id != t.document_id"
                " WHERE t.document_id = ? GROUP BY o.document_id"
                " ORDER BY count(*) DESC, o.document_id LIMIT ?",
                (document_id, limit),
            )
            return [(row[0], sorted(json.loads(row[1]))) for row in rows]

    def tag_counts(self) -> list[tuple[str, int]]:
        """Return (tag, number of notes) for every tag, most used first, then by name."""
        with self._guard("counting tags"):
            rows = self._conn.execute(
                "SELECT tag, count(*) AS n FROM tags GROUP BY tag ORDER BY n DESC, tag"
            )
            return [(row[0], row[1]) for row in rows]

    def documents_with_tag(self, tag: str) -> list[StoredDocument]:
        """Return the notes tagged ``tag`` or a tag nested under it (``tag/...``), by path."""
        with self._guard("finding tagged notes"):
            rows = self._conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM documents d WHERE EXISTS (SELECT 1 FROM tags t"
                " WHERE t.document_id = d.id AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
                " ORDER BY d.path",
                (tag, escape_like(tag) + "/%"),
            )
            return [_document(row) for row in rows]

    def documents_in_folder(self, folder: str) -> list[StoredDocument]:
        """Return the notes directly in ``folder`` ("" for the root, no trailing /), by path."""
        prefix = f"{folder}/" if folder else ""
        with self._guard("listing a folder"):
            rows = self._conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE path LIKE ? ESCAPE '\\'"
                " AND instr(substr(path, ?), '/') = 0 ORDER BY path",
                (escape_like(prefix) + "%", len(prefix) + 1),
            )
            return [_document(row) for row in rows]

    def chunk_ids_matching(self, where: Where) -> list[int]:
        """Return the ids of the chunks whose note passes the filter."""
        with self._guard("filtering"):
            filter_sql, params = where_sql(where)
            rows = self._conn.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id"
                f" WHERE 1{filter_sql} ORDER BY c.id",
                params,
            )
            return [row[0] for row in rows]

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[StoredChunk]:
        """Return the chunks with these ids (those that still exist), in the order given."""
        with self._guard("reading chunks"):
            sql = (
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c"
                " JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})"
            )
            found = {row[0]: _chunk(row) for row in self._select_in(sql, chunk_ids)}
            return [found[i] for i in chunk_ids if i in found]

    # -- search ----------------------------------------------------------------------------

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: Where | None = None
    ) -> list[KeywordRow]:
        """Return up to ``limit`` chunks matching the query and filter, best BM25 first."""
        with self._guard("searching"):
            if query.is_empty:
                return []
            score = f"bm25(chunks_fts, {', '.join(str(w) for w in BM25_WEIGHTS)})"
            match = match_expression(query)
            if where is None:
                # rank inside the index first; only the ranked rows join their chunk and note
                sql = (
                    f"SELECT c.id, c.document_id, d.human_relevance_score, f.score FROM"
                    f" (SELECT rowid, {score} AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
                    " ORDER BY score LIMIT ?) f JOIN chunks c ON c.id = f.rowid"
                    " JOIN documents d ON d.id = c.document_id ORDER BY f.score, c.id"
                )
                params: list[Any] = [match, limit]
            else:
                # the filter applies before the limit, so matching hits are not cut off
                filter_sql, filter_params = where_sql(where)
                sql = (
                    f"SELECT c.id, c.document_id, d.human_relevance_score, {score} AS score"
                    " FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid"
                    " JOIN documents d ON d.id = c.document_id"
                    f" WHERE chunks_fts MATCH ?{filter_sql} ORDER BY score, c.id LIMIT ?"
                )
                params = [match, *filter_params, limit]
            rows = self._conn.execute(sql, params)
            return [KeywordRow(row[0], row[1], row[2], -float(row[3])) for row in rows]
