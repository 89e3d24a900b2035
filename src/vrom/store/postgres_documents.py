"""Documents in PostgreSQL: notes (or collection documents), their chunks, links, tags and fields.

As in SQLite (`vrom.store.sqlite_documents`): writing a document replaces its chunks, links,
tags and metadata fields in one transaction, chunks whose text is unchanged keep their vectors,
and a collection's document keeps its whole text once, its chunks reading their slices of it.
Keyword search is PostgreSQL full text: each chunk's ``search`` vector weighs its note's title
(A), its heading path (B) and its text (C), ranked by ``ts_rank`` (see `postgres_query`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from vrom.store.postgres_batch import chunk_rows, put_many
from vrom.store.postgres_database import Connection, PgDatabase
from vrom.store.postgres_query import (
    escape_like,
    field_rows,
    text_search,
    weighted_vector_sql,
    where_sql,
)
from vrom.store.postgres_vectors import PgChunkVectors
from vrom.store.records import (
    ChunkRecord,
    DocumentRecord,
    DocumentState,
    DocumentWrite,
    KeywordQuery,
    KeywordRow,
    LinkRecord,
    StoredChunk,
    StoredDocument,
    Where,
)
from vrom.store.rows import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    chunks_from_rows,
    document_from_row,
)
from vrom.store.storable import check_document

_SOURCE_TURNS = (
    " FROM fields f JOIN documents d ON d.id = f.document_id"
    " JOIN document_texts t ON t.document_id = f.document_id"
    " WHERE f.key = 'source' AND f.kind = 'text' AND f.text_value = %s"
    " AND jsonb_typeof(d.frontmatter::jsonb -> 'source') = 'string'"
)
"""The documents whose metadata ``source`` is a given text (through the fields index; a list
holding it is none), stored with their text: a conversation's turns, in either direction."""


class PgDocuments:
    """The documents of one namespace (`vrom.store.DocumentStore`)."""

    def __init__(self, db: PgDatabase, vectors: PgChunkVectors) -> None:
        self._db = db
        self._vectors = vectors

    # -- writing ---------------------------------------------------------------------------

    def states(self, paths: Sequence[str] | None = None) -> dict[str, DocumentState]:
        """Return path → state for every stored document, or for those at ``paths``."""
        sql = "SELECT path, id, content_hash, mtime, size, chunk_strategy FROM documents"
        with self._db.guard("reading note states"), self._db.connection() as conn:
            rows = (
                conn.execute(sql)
                if paths is None
                else conn.execute(sql + " WHERE path = ANY(%s)", (list(paths),))
            )
            return {row[0]: DocumentState(*row[1:]) for row in rows}

    def state(self, path: str) -> DocumentState | None:
        """Return the state of one stored document, or None."""
        with self._db.guard("reading a note state"), self._db.connection() as conn:
            row = conn.execute(
                "SELECT id, content_hash, mtime, size, chunk_strategy FROM documents"
                " WHERE path = %s",
                (path,),
            ).fetchone()
            return None if row is None else DocumentState(*row)

    def _delete_children(self, conn: Connection, document_id: int) -> None:
        self._vectors.delete_of(conn, document_id)
        for table in ("chunks", "links", "tags", "fields", "document_texts"):
            conn.execute(f"DELETE FROM {table} WHERE document_id = %s", (document_id,))

    def _claim_path(self, conn: Connection, path: str, document_id: int | None) -> int | None:
        """Return the id to write a document under, clearing the path if another holds it."""
        if document_id is not None and not self._db.scalar(
            conn, "SELECT count(*) FROM documents WHERE id = %s", (document_id,)
        ):
            document_id = None  # deleted by another writer since the caller looked
        holder = self._db.scalar(conn, "SELECT id FROM documents WHERE path = %s", (path,))
        if holder is None or holder == document_id:
            return document_id
        if document_id is None:
            return int(holder)  # added by another writer since the caller looked
        self._delete_children(conn, holder)  # moved onto a path another document still held
        conn.execute("DELETE FROM documents WHERE id = %s", (holder,))
        return document_id

    def put(
        self,
        document: DocumentRecord,
        chunks: Sequence[ChunkRecord],
        links: Sequence[LinkRecord],
        tags: Sequence[str],
        document_id: int | None = None,
    ) -> int:
        """Write a document with its chunks, links, tags and fields, replacing what
        ``document_id`` held (safe against another writer that added or removed it meanwhile)."""
        check_document(document, chunks, links, tags)
        frontmatter = json.dumps(document.frontmatter, ensure_ascii=False)
        values = (
            document.path,
            document.path_key,
            document.name_key,
            document.title,
            frontmatter,
            document.content_hash,
            document.mtime,
            document.size,
            document.human_relevance_score,
            document.chunk_strategy,
            len(chunks),
            time.time(),
        )
        with (
            self._db.guard("writing a note"),
            self._db.transaction(),
            self._db.connection() as conn,
        ):
            document_id = self._claim_path(conn, document.path, document_id)
            reusable = self._vectors.by_input_of(conn, document_id)
            if document_id is None:
                document_id = int(self._db.scalar(conn, "SELECT nextval('documents_id_seq')"))
                conn.execute(
                    "INSERT INTO documents(id, path, path_key, name_key, title, frontmatter,"
                    " content_hash, mtime, size, human_relevance_score, chunk_strategy,"
                    " chunk_count, indexed_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (document_id, *values),
                )
            else:
                self._delete_children(conn, document_id)
                conn.execute(
                    "UPDATE documents SET path = %s, path_key = %s, name_key = %s, title = %s,"
                    " frontmatter = %s, content_hash = %s, mtime = %s, size = %s,"
                    " human_relevance_score = %s, chunk_strategy = %s, chunk_count = %s,"
                    " indexed_at = %s WHERE id = %s",
                    (*values, document_id),
                )
            whole = document.text
            if whole is not None:
                conn.execute(
                    "INSERT INTO document_texts(document_id, text) VALUES (%s, %s)",
                    (document_id, whole),
                )
            ids = [
                int(row[0])
                for row in conn.execute(
                    "SELECT nextval('chunks_id_seq') FROM generate_series(1, %s)", (len(chunks),)
                )
            ]
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO chunks(id, document_id, position, heading_path, text, char_start,"
                    " char_end, prev_id, next_id, content_hash, search)"
                    f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {weighted_vector_sql(3)})",
                    chunk_rows(document_id, ids, chunks, document),
                )
                cursor.executemany(
                    "INSERT INTO links(document_id, kind, target, target_key, heading, alias,"
                    " position) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [
                        (
                            document_id,
                            link.kind,
                            link.target,
                            link.target_key,
                            link.heading,
                            link.alias,
                            link.position,
                        )
                        for link in links
                    ],
                )
                cursor.executemany(
                    "INSERT INTO tags(document_id, tag) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    [(document_id, tag) for tag in tags],
                )
                cursor.executemany(
                    "INSERT INTO fields(document_id, key, kind, text_value, number_value, instant)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [(document_id, *row) for row in field_rows(document.frontmatter)],
                )
            self._vectors.reuse(
                conn, [(i, c.input_hash) for i, c in zip(ids, chunks, strict=True)], reusable
            )
            return document_id

    def put_many(self, writes: Sequence[DocumentWrite]) -> list[int]:
        """Write several documents in one transaction, each as `put` does, in a few statements
        (`vrom.store.postgres_batch`); return their ids."""
        return put_many(
            self._db,
            self._vectors,
            writes,
            self._delete_children,
            lambda w: self.put(w.document, w.chunks, w.links, w.tags, w.document_id),
        )

    def touch(self, document_id: int, mtime: float, size: int) -> None:
        """Record a new mtime and size for a document whose content did not change."""
        with (
            self._db.guard("updating a note's time"),
            self._db.transaction(),
            self._db.connection() as conn,
        ):
            conn.execute(
                "UPDATE documents SET mtime = %s, size = %s WHERE id = %s",
                (mtime, size, document_id),
            )

    def delete(self, document_id: int) -> None:
        """Remove a document and everything derived from it."""
        with (
            self._db.guard("deleting a note"),
            self._db.transaction(),
            self._db.connection() as conn,
        ):
            self._delete_children(conn, document_id)
            conn.execute("DELETE FROM documents WHERE id = %s", (document_id,))

    # -- counting --------------------------------------------------------------------------

    def _count(self, query: str, action: str = "counting") -> int:
        with self._db.guard(action), self._db.connection() as conn:
            return int(self._db.scalar(conn, query) or 0)

    def count(self) -> int:
        """Return how many documents there are."""
        return self._count("SELECT count(*) FROM documents")

    def chunk_count(self) -> int:
        """Return how many chunks there are."""
        return self._count("SELECT count(*) FROM chunks")

    def unresolved_link_count(self) -> int:
        """Return how many links point to no stored document (same rules as `find`)."""
        return self._count(
            "SELECT count(*) FROM links l WHERE l.target_key != ''"
            " AND l.target_key NOT IN (SELECT path_key FROM documents)"
            " AND l.target_key NOT IN (SELECT name_key FROM documents)"
            " AND (strpos(l.target_key, '/') = 0 OR NOT EXISTS (SELECT 1 FROM documents d"
            "      WHERE d.path_key LIKE '%%/' || replace(replace(replace(l.target_key,"
            " '\\', '\\\\'), '%%', '\\%%'), '_', '\\_') ESCAPE '\\'))",
            "counting unresolved links",
        )

    # -- reading ---------------------------------------------------------------------------

    def _documents(self, action: str, query: str, params: Sequence[Any]) -> list[StoredDocument]:
        with self._db.guard(action), self._db.connection() as conn:
            return [document_from_row(row) for row in conn.execute(query, params)]

    def get(self, document_id: int) -> StoredDocument | None:
        """Return a document by id."""
        found = self._documents(
            "reading a note",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = %s",
            (document_id,),
        )
        return found[0] if found else None

    def find(self, key: str) -> list[StoredDocument]:
        """Return documents whose path key or stem matches ``key``, exact path first."""
        if "/" in key:
            condition, params = (
                "path_key = %s OR path_key LIKE %s ESCAPE '\\'",
                [key, "%/" + escape_like(key)],
            )
        else:
            condition, params = "path_key = %s OR name_key = %s", [key, key]
        return self._documents(
            "finding notes",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE {condition}"
            " ORDER BY path_key = %s DESC, length(path), path",
            (*params, key),
        )

    def chunks_of(self, document_id: int) -> list[StoredChunk]:
        """Return a document's chunks in order."""
        with self._db.guard("reading chunks"), self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.document_id = %s ORDER BY c.position",
                (document_id,),
            )
            return chunks_from_rows(rows)

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[StoredChunk]:
        """Return the chunks with these ids (those that still exist), in the order given."""
        if not chunk_ids:
            return []
        with self._db.guard("reading chunks"), self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.id = ANY(%s)",
                (list(chunk_ids),),
            )
            found = {chunk.chunk_id: chunk for chunk in chunks_from_rows(rows)}
            return [found[i] for i in chunk_ids if i in found]

    def chunk_owners(self, chunk_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        """Return chunk id → (document id, human-relevance prior) for the chunks that still
        exist."""
        if not chunk_ids:
            return {}
        with self._db.guard("reading chunks"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT c.id, c.document_id, d.human_relevance_score FROM chunks c"
                " JOIN documents d ON d.id = c.document_id WHERE c.id = ANY(%s)",
                ([int(i) for i in chunk_ids],),
            )
            return {row[0]: (row[1], row[2]) for row in rows}

    def texts(self, document_ids: Sequence[int]) -> dict[int, str]:
        """Return id → whole text of the documents stored with one (a collection's)."""
        if not document_ids:
            return {}
        with self._db.guard("reading document texts"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT document_id, text FROM document_texts WHERE document_id = ANY(%s)",
                (list(document_ids),),
            )
            return {row[0]: row[1] for row in rows}

    def turns_before(self, source: str, document_id: int | None, count: int) -> list[str]:
        """Return the whole texts of the last ``count`` documents whose metadata ``source`` is
        ``source`` (a string), stored before document ``document_id`` (None: before any new
        one), oldest first; documents stored without their text are left out."""
        with self._db.guard("reading document texts"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT t.text"
                + _SOURCE_TURNS
                + " AND f.document_id < coalesce(%s, 1::bigint << 62)"
                " ORDER BY f.document_id DESC LIMIT %s",
                (source, document_id, count),
            )
            return [row[0] for row in rows][::-1]

    def turns_after(self, source: str, document_id: int, count: int) -> list[int]:
        """Return the ids of the first ``count`` documents whose metadata ``source`` is
        ``source`` (a string), stored after document ``document_id``, oldest first: the
        documents whose `turns_before` it is among. Documents without their text are left out."""
        with self._db.guard("reading documents"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT f.document_id" + _SOURCE_TURNS + " AND f.document_id > %s"
                " ORDER BY f.document_id LIMIT %s",
                (source, document_id, count),
            )
            return [row[0] for row in rows]

    def has_shared_source(self) -> bool:
        """True if two documents or more have the same metadata ``source`` (a string; or
        one held in a list, which errs towards True)."""
        with self._db.guard("reading documents"), self._db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM fields WHERE key = 'source' AND kind = 'text'"
                " GROUP BY text_value HAVING count(*) > 1 LIMIT 1"
            ).fetchone()
            return row is not None

    def links_of(self, document_id: int) -> list[LinkRecord]:
        """Return the links written in a document, in order."""
        with self._db.guard("reading links"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT kind, target, target_key, heading, alias, position FROM links"
                " WHERE document_id = %s ORDER BY position",
                (document_id,),
            )
            return [LinkRecord(*row) for row in rows]

    def links_to_keys(self, keys: Sequence[str]) -> list[tuple[int, LinkRecord]]:
        """Return (source document id, link) for links whose target key is one of ``keys``."""
        if not keys:
            return []
        with self._db.guard("reading backlinks"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT document_id, kind, target, target_key, heading, alias, position"
                " FROM links WHERE target_key = ANY(%s) ORDER BY document_id, position",
                (list(keys),),
            )
            return [(row[0], LinkRecord(*row[1:])) for row in rows]

    def tags_of(self, document_id: int) -> list[str]:
        """Return a document's tags, sorted."""
        with self._db.guard("reading tags"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT tag FROM tags WHERE document_id = %s ORDER BY tag", (document_id,)
            )
            return [row[0] for row in rows]

    def sharing_tags(self, document_id: int, limit: int) -> list[tuple[int, list[str]]]:
        """Return (document id, shared tags) for others sharing tags, most shared first."""
        with self._db.guard("reading shared tags"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT o.document_id, array_agg(o.tag ORDER BY o.tag) FROM tags t"
                " JOIN tags o ON o.tag = t.tag AND o.document_id != t.document_id"
                " WHERE t.document_id = %s GROUP BY o.document_id"
                " ORDER BY count(*) DESC, o.document_id LIMIT %s",
                (document_id, limit),
            )
            return [(row[0], list(row[1])) for row in rows]

    def tag_counts(self) -> list[tuple[str, int]]:
        """Return (tag, number of documents) for every tag, most used first, then by name."""
        with self._db.guard("counting tags"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT tag, count(*) AS n FROM tags GROUP BY tag ORDER BY n DESC, tag"
            )
            return [(row[0], row[1]) for row in rows]

    def with_tag(self, tag: str) -> list[StoredDocument]:
        """Return the documents tagged ``tag`` or a tag nested under it (``tag/...``), by path."""
        return self._documents(
            "finding tagged notes",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE EXISTS (SELECT 1 FROM tags t"
            " WHERE t.document_id = d.id AND (t.tag = %s OR t.tag LIKE %s ESCAPE '\\'))"
            " ORDER BY d.path",
            (tag, escape_like(tag) + "/%"),
        )

    def in_folder(self, folder: str) -> list[StoredDocument]:
        """Return the documents directly in ``folder`` ("" for the root), by path."""
        prefix = f"{folder}/" if folder else ""
        return self._documents(
            "listing a folder",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE path LIKE %s ESCAPE '\\'"
            " AND strpos(substr(path, %s), '/') = 0 ORDER BY path",
            (escape_like(prefix) + "%", len(prefix) + 1),
        )

    def after_path(self, after: str, limit: int) -> list[StoredDocument]:
        """Return up to ``limit`` documents whose paths sort after ``after``, by path."""
        return self._documents(
            "listing notes",
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE path > %s ORDER BY path LIMIT %s",
            (after, limit),
        )

    def chunk_ids_matching(self, where: Where) -> list[int]:
        """Return the ids of the chunks whose document passes the filter, by id."""
        filter_sql, params = where_sql(where)
        with self._db.guard("filtering"), self._db.connection() as conn:
            rows = conn.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id"
                f" WHERE true{filter_sql} ORDER BY c.id",
                params,
            )
            return [row[0] for row in rows]

    # -- search ----------------------------------------------------------------------------

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: Where | None = None
    ) -> list[KeywordRow]:
        """Return up to ``limit`` chunks matching the query and filter, best first: each query
        term's IDF times its ``ts_rank`` (title, headings and text weighted 4 : 2 : 1, longer
        chunks normalised), summed (see `postgres_query.TextSearch.score`)."""
        if query.is_empty:
            with self._db.guard("searching"):
                return []
        search = text_search(query, "chunks")
        filter_sql, filter_params = where_sql(where)
        with self._db.guard("searching"), self._db.connection() as conn:
            rows = conn.execute(
                f"WITH {search.terms} SELECT c.id, c.document_id, d.human_relevance_score,"
                f" {search.score('c.search')} AS score FROM chunks c"
                " JOIN documents d ON d.id = c.document_id"
                f" WHERE c.search @@ ({search.match}){filter_sql}"
                " ORDER BY score DESC, c.id LIMIT %s",
                [*search.terms_params, *search.match_params, *filter_params, limit],
            )
            return [KeywordRow(row[0], row[1], row[2], float(row[3])) for row in rows]
