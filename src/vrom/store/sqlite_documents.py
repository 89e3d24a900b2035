"""Documents in SQLite: notes (or collection documents), their chunks, links and tags.

Writing a document replaces its chunks, links, tags and keyword-index rows in one transaction;
chunks whose embedded input is unchanged keep their vectors. Reading covers lookups by id, path
or name, links and backlinks, tags, folders, filters, and keyword search (FTS5 BM25).

A document given with its whole text (a collection's) keeps it in ``document_texts``, and its
chunks that are exact slices of it store no text of their own: they are read back as slices, so
the text is stored once, not once more per overlapping chunk.

Every write of a document counts one more document generation in ``meta``, in the writer's
transaction, so every process sees it move with the write it counts: the chunk ids of the last
few filters are kept by (filter, generation), and a filtered search reads them once per change
of the store instead of once per query.
"""

from __future__ import annotations

import json
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from vrom.store import sqlite_keyword
from vrom.store.fts_text import segment
from vrom.store.records import (
    ChunkRecord,
    DocumentRecord,
    DocumentState,
    DocumentWrite,
    KeywordPostings,
    KeywordQuery,
    KeywordRow,
    LinkRecord,
    StoredChunk,
    StoredDocument,
    Where,
)
from vrom.store.rows import DOCUMENT_COLUMNS, chunks_from_rows, document_from_row
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_keyword import BM25_WEIGHTS, QueryTokenizer
from vrom.store.sqlite_query import escape_like, match_expression, where_sql
from vrom.store.sqlite_rows import chunk_columns
from vrom.store.sqlite_vectors import SQLiteChunkVectors
from vrom.store.storable import check_document

_DOCUMENT_WRITE_COLUMNS = """
    path, path_key, name_key, title, frontmatter, content_hash, mtime, size,
    human_relevance_score, chunk_strategy, chunk_count, indexed_at
"""
DOCUMENT_GENERATION_META_KEY = "document_generation"
"""The ``meta`` key counting writes of documents (their chunks, links, tags and fields)."""
KEPT_FILTERS = 8
"""How many filters' chunk ids are kept (the most recently used): 8 bytes per chunk each, so at
most 6.4 MB at 100k chunks."""
FilterKey = tuple[str, tuple[Any, ...]]


_SOURCE_TURNS = (
    " FROM fields f JOIN documents d ON d.id = f.document_id"
    " JOIN document_texts t ON t.document_id = f.document_id"
    " WHERE f.key = 'source' AND f.kind = 'text' AND f.value = ?"
    " AND json_type(d.frontmatter, '$.source') = 'text'"
)
"""The documents whose metadata ``source`` is a given text (through the fields index; a list
holding it is none), stored with their text: a conversation's turns, in either direction."""


class SQLiteDocuments:
    """The documents of one store (`vrom.store.DocumentStore`); chunk vectors follow their chunk."""

    def __init__(self, db: Database, vectors: SQLiteChunkVectors) -> None:
        self._db = db
        self._vectors = vectors
        version = db.stored_version()
        self._chunk_columns = chunk_columns(version)
        self._has_texts = version >= 8  # a pack opened read-only may be older
        self._tokenizer: QueryTokenizer | None = None
        # filter SQL and parameters -> (document generation, the chunk ids passing it)
        self._filtered: OrderedDict[FilterKey, tuple[int, Sequence[int]]] = OrderedDict()
        self._filtered_lock = threading.Lock()  # the store is shared by threads

    # -- writing notes ---------------------------------------------------------------------

    def states(self, paths: Sequence[str] | None = None) -> dict[str, DocumentState]:
        """Return path → state for every stored note, or for those at ``paths`` (one read)."""
        sql = "SELECT path, id, content_hash, mtime, size, chunk_strategy FROM documents"
        with self._db.guard("reading note states"):
            rows = (
                self._db.conn.execute(sql)
                if paths is None
                else self._db.select_in(sql + " WHERE path IN ({marks})", paths)
            )
            return {row[0]: DocumentState(*row[1:]) for row in rows}

    def state(self, path: str) -> DocumentState | None:
        """Return the state of one stored note, or None."""
        with self._db.guard("reading a note state"):
            row = self._db.conn.execute(
                "SELECT id, content_hash, mtime, size, chunk_strategy FROM documents WHERE path = ?",
                (path,),
            ).fetchone()
            return None if row is None else DocumentState(*row)

    def _delete_children(self, document_id: int) -> None:
        self._db.conn.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE document_id = ?)",
            (document_id,),
        )
        self._vectors.delete_of(document_id)
        for table in ("chunks", "links", "tags", "document_texts"):
            self._db.conn.execute(f"DELETE FROM {table} WHERE document_id = ?", (document_id,))

    def _claim_path(self, path: str, document_id: int | None) -> int | None:
        """Return the id to write a note under, clearing the path if another note holds it."""
        if document_id is not None and not self._db.scalar(
            "SELECT count(*) FROM documents WHERE id = ?", (document_id,)
        ):
            document_id = None  # deleted by another writer since the caller looked
        holder = self._db.conn.execute(
            "SELECT id FROM documents WHERE path = ?", (path,)
        ).fetchone()
        if holder is None or holder[0] == document_id:
            return document_id
        if document_id is None:
            return int(holder[0])  # added by another writer since the caller looked
        self._delete_children(holder[0])  # a note moved onto a path another note still held
        self._db.conn.execute("DELETE FROM documents WHERE id = ?", (holder[0],))
        return document_id

    def _next_id(self, table: str) -> int:
        row = self._db.conn.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),"
            f" coalesce((SELECT max(id) FROM {table}), 0))",
            (table,),
        ).fetchone()
        return int(row[0]) + 1

    def put(
        self,
        document: DocumentRecord,
        chunks: Sequence[ChunkRecord],
        links: Sequence[LinkRecord],
        tags: Sequence[str],
        document_id: int | None = None,
    ) -> int:
        """Write a note with its chunks, links and tags, replacing what ``document_id`` held.

        Another process may have added or removed the same note since the caller looked: a note
        already holding this path is replaced, and a vanished ``document_id`` is added anew.
        """
        check_document(document, chunks, links, tags)
        with self._db.guard("writing a note"):
            values = (
                document.path,
                document.path_key,
                document.name_key,
                document.title,
                json.dumps(document.frontmatter, ensure_ascii=False),
                document.content_hash,
                document.mtime,
                document.size,
                document.human_relevance_score,
                document.chunk_strategy,
                len(chunks),
                time.time(),
            )
            with self._db.transaction():
                self._count_change()
                document_id = self._claim_path(document.path, document_id)
                reusable = self._vectors.by_input_of(document_id)
                if document_id is None:
                    document_id = self._next_id("documents")
                    self._db.conn.execute(
                        f"INSERT INTO documents(id, {_DOCUMENT_WRITE_COLUMNS})"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (document_id, *values),
                    )
                else:
                    self._delete_children(document_id)
                    self._db.conn.execute(
                        "UPDATE documents SET path = ?, path_key = ?, name_key = ?, title = ?,"
                        " frontmatter = ?, content_hash = ?, mtime = ?, size = ?,"
                        " human_relevance_score = ?, chunk_strategy = ?, chunk_count = ?,"
                        " indexed_at = ? WHERE id = ?",
                        (*values, document_id),
                    )
                whole = document.text
                if whole is not None:
                    self._db.conn.execute(
                        "INSERT INTO document_texts(document_id, text) VALUES (?, ?)",
                        (document_id, whole),
                    )
                first = self._next_id("chunks")
                ids = range(first, first + len(chunks))
                self._db.conn.executemany(
                    "INSERT INTO chunks(id, document_id, position, heading_path, text, char_start,"
                    " char_end, prev_id, next_id, content_hash)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            chunk_id,
                            document_id,
                            chunk.position,
                            chunk.heading_path,
                            ""
                            if whole is not None
                            and whole[chunk.char_start : chunk.char_end] == chunk.text
                            else chunk.text,
                            chunk.char_start,
                            chunk.char_end,
                            chunk_id - 1 if i > 0 else None,
                            chunk_id + 1 if i < len(chunks) - 1 else None,
                            chunk.content_hash,
                        )
                        for i, (chunk_id, chunk) in enumerate(zip(ids, chunks, strict=False))
                    ],
                )
                self._vectors.reuse(
                    [(i, c.input_hash) for i, c in zip(ids, chunks, strict=True)], reusable
                )
                title = segment(document.title)
                self._db.conn.executemany(
                    "INSERT INTO chunks_fts(rowid, title, heading_path, body) VALUES (?, ?, ?, ?)",
                    [
                        (chunk_id, title, segment(chunk.heading_path), segment(chunk.text))
                        for chunk_id, chunk in zip(ids, chunks, strict=False)
                    ],
                )
                self._db.conn.executemany(
                    "INSERT INTO links(document_id, kind, target, target_key, heading, alias, position)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
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
                self._db.conn.executemany(
                    "INSERT OR IGNORE INTO tags(document_id, tag) VALUES (?, ?)",
                    [(document_id, tag) for tag in tags],
                )
            return document_id

    def put_many(self, writes: Sequence[DocumentWrite]) -> list[int]:
        """Write several documents in one transaction, each as `put` does; return their ids."""
        with self._db.transaction():
            return [self.put(w.document, w.chunks, w.links, w.tags, w.document_id) for w in writes]

    def _count_change(self) -> None:
        """Count one more document generation, first thing in the writer's transaction (so a
        read inside it, after any of its writes, sees a generation no kept filter has)."""
        self._db.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (DOCUMENT_GENERATION_META_KEY,),
        )

    def _generation(self) -> int:
        """Return the document generation: it moves with every write of a document (its chunks,
        links, tags or fields), by this process or another; a `touch` leaves it."""
        return int(self._db.meta_value(DOCUMENT_GENERATION_META_KEY) or 0)

    def touch(self, document_id: int, mtime: float, size: int) -> None:
        """Record a new mtime and size for a note whose content did not change."""
        with self._db.guard("updating a note's time"), self._db.transaction():
            self._db.conn.execute(
                "UPDATE documents SET mtime = ?, size = ? WHERE id = ?",
                (mtime, size, document_id),
            )

    def delete(self, document_id: int) -> None:
        """Remove a note and everything derived from it."""
        with self._db.guard("deleting a note"), self._db.transaction():
            self._count_change()
            self._delete_children(document_id)
            self._db.conn.execute("DELETE FROM documents WHERE id = ?", (document_id,))

    def count(self) -> int:
        """Return how many documents (notes) the store holds."""
        with self._db.guard("counting"):
            return int(self._db.scalar("SELECT count(*) FROM documents"))

    def chunk_count(self) -> int:
        """Return how many chunks there are."""
        with self._db.guard("counting"):
            return int(self._db.scalar("SELECT count(*) FROM chunks"))

    def unresolved_link_count(self) -> int:
        """Return how many links point to no stored note (same rules as `find_documents`)."""
        with self._db.guard("counting unresolved links"):
            return int(
                self._db.scalar(
                    "SELECT count(*) FROM links l WHERE l.target_key != ''"
                    " AND l.target_key NOT IN (SELECT path_key FROM documents)"
                    " AND l.target_key NOT IN (SELECT name_key FROM documents)"
                    " AND (instr(l.target_key, '/') = 0 OR NOT EXISTS (SELECT 1 FROM documents d"
                    "      WHERE d.path_key LIKE '%/' || replace(replace(replace(l.target_key,"
                    " '\\', '\\\\'), '%', '\\%'), '_', '\\_') ESCAPE '\\'))"
                )
            )

    # -- reading ----------------------------------------------------------------------

    def get(self, document_id: int) -> StoredDocument | None:
        """Return a note by id."""
        with self._db.guard("reading a note"):
            row = self._db.conn.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = ?", (document_id,)
            ).fetchone()
            return None if row is None else document_from_row(row)

    def find(self, key: str) -> list[StoredDocument]:
        """Return notes whose path key or stem matches ``key``, exact path first."""
        with self._db.guard("finding notes"):
            if "/" in key:
                condition, params = (
                    "path_key = ? OR path_key LIKE ? ESCAPE '\\'",
                    [key, "%/" + escape_like(key)],
                )
            else:
                condition, params = "path_key = ? OR name_key = ?", [key, key]
            rows = self._db.conn.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE {condition}"
                " ORDER BY path_key = ? DESC, length(path), path",
                (*params, key),
            )
            return [document_from_row(row) for row in rows]

    def chunks_of(self, document_id: int) -> list[StoredChunk]:
        """Return a note's chunks in order."""
        with self._db.guard("reading chunks"):
            rows = self._db.conn.execute(
                f"SELECT {self._chunk_columns} FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.document_id = ? ORDER BY c.position",
                (document_id,),
            )
            return chunks_from_rows(rows)

    def texts(self, document_ids: Sequence[int]) -> dict[int, str]:
        """Return id → whole text of the documents stored with one (a collection's)."""
        if not self._has_texts:
            return {}
        with self._db.guard("reading document texts"):
            sql = "SELECT document_id, text FROM document_texts WHERE document_id IN ({marks})"
            return {row[0]: row[1] for row in self._db.select_in(sql, list(document_ids))}

    def turns_before(self, source: str, document_id: int | None, count: int) -> list[str]:
        """Return the whole texts of the last ``count`` documents whose metadata ``source`` is
        ``source`` (a string), stored before document ``document_id`` (None: before any new
        one), oldest first; documents stored without their text are left out."""
        if not self._has_texts:
            return []
        with self._db.guard("reading document texts"):
            rows = self._db.conn.execute(
                "SELECT t.text" + _SOURCE_TURNS + " AND f.document_id < coalesce(?, 1 << 62)"
                " ORDER BY f.document_id DESC LIMIT ?",
                (source, document_id, count),
            )
            return [row[0] for row in rows][::-1]

    def turns_after(self, source: str, document_id: int, count: int) -> list[int]:
        """Return the ids of the first ``count`` documents whose metadata ``source`` is
        ``source`` (a string), stored after document ``document_id``, oldest first: the
        documents whose `turns_before` it is among. Documents without their text are left out."""
        if not self._has_texts:
            return []
        with self._db.guard("reading documents"):
            rows = self._db.conn.execute(
                "SELECT f.document_id" + _SOURCE_TURNS + " AND f.document_id > ?"
                " ORDER BY f.document_id LIMIT ?",
                (source, document_id, count),
            )
            return [row[0] for row in rows]

    def has_shared_source(self) -> bool:
        """True if two documents or more have the same metadata ``source`` (a string; or
        one held in a list, which errs towards True)."""
        with self._db.guard("reading documents"):
            row = self._db.conn.execute(
                "SELECT 1 FROM fields WHERE key = 'source' AND kind = 'text'"
                " GROUP BY value HAVING count(*) > 1 LIMIT 1"
            ).fetchone()
            return row is not None

    def links_of(self, document_id: int) -> list[LinkRecord]:
        """Return the links written in a note, in order."""
        with self._db.guard("reading links"):
            rows = self._db.conn.execute(
                "SELECT kind, target, target_key, heading, alias, position FROM links"
                " WHERE document_id = ? ORDER BY position",
                (document_id,),
            )
            return [LinkRecord(*row) for row in rows]

    def links_to_keys(self, keys: Sequence[str]) -> list[tuple[int, LinkRecord]]:
        """Return (source note id, link) for links whose target key is one of ``keys``."""
        with self._db.guard("reading backlinks"):
            if not keys:
                return []
            marks = ", ".join("?" for _ in keys)
            rows = self._db.conn.execute(
                "SELECT document_id, kind, target, target_key, heading, alias, position FROM links"
                f" WHERE target_key IN ({marks}) ORDER BY document_id, position",
                list(keys),
            )
            return [(row[0], LinkRecord(*row[1:])) for row in rows]

    def tags_of(self, document_id: int) -> list[str]:
        """Return a note's tags, sorted."""
        with self._db.guard("reading tags"):
            rows = self._db.conn.execute(
                "SELECT tag FROM tags WHERE document_id = ? ORDER BY tag", (document_id,)
            )
            return [row[0] for row in rows]

    def sharing_tags(self, document_id: int, limit: int) -> list[tuple[int, list[str]]]:
        """Return (note id, shared tags) for other notes sharing tags, most shared first."""
        with self._db.guard("reading shared tags"):
            rows = self._db.conn.execute(
                "SELECT o.document_id, json_group_array(o.tag) FROM tags t"
                " JOIN tags o ON o.tag = t.tag AND o.document_id != t.document_id"
                " WHERE t.document_id = ? GROUP BY o.document_id"
                " ORDER BY count(*) DESC, o.document_id LIMIT ?",
                (document_id, limit),
            )
            return [(row[0], sorted(json.loads(row[1]))) for row in rows]

    def tag_counts(self) -> list[tuple[str, int]]:
        """Return (tag, number of notes) for every tag, most used first, then by name."""
        with self._db.guard("counting tags"):
            rows = self._db.conn.execute(
                "SELECT tag, count(*) AS n FROM tags GROUP BY tag ORDER BY n DESC, tag"
            )
            return [(row[0], row[1]) for row in rows]

    def with_tag(self, tag: str) -> list[StoredDocument]:
        """Return the notes tagged ``tag`` or a tag nested under it (``tag/...``), by path."""
        with self._db.guard("finding tagged notes"):
            rows = self._db.conn.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE EXISTS (SELECT 1 FROM tags t"
                " WHERE t.document_id = d.id AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
                " ORDER BY d.path",
                (tag, escape_like(tag) + "/%"),
            )
            return [document_from_row(row) for row in rows]

    def in_folder(self, folder: str) -> list[StoredDocument]:
        """Return the notes directly in ``folder`` ("" for the root, no trailing /), by path."""
        prefix = f"{folder}/" if folder else ""
        with self._db.guard("listing a folder"):
            rows = self._db.conn.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE path LIKE ? ESCAPE '\\'"
                " AND instr(substr(path, ?), '/') = 0 ORDER BY path",
                (escape_like(prefix) + "%", len(prefix) + 1),
            )
            return [document_from_row(row) for row in rows]

    def after_path(self, after: str, limit: int) -> list[StoredDocument]:
        """Return up to ``limit`` notes whose paths sort after ``after``, by path (a page of a
        listing that stays in step when notes are added or removed between pages)."""
        with self._db.guard("listing notes"):
            rows = self._db.conn.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE path > ? ORDER BY path LIMIT ?",
                (after, limit),
            )
            return [document_from_row(row) for row in rows]

    def chunk_ids_matching(self, where: Where) -> Sequence[int]:
        """Return the ids of the chunks whose note passes the filter, by id.

        They are a read-only sequence of 64-bit integers (numpy reads it without a copy), kept
        for the last `KEPT_FILTERS` filters until the store changes (`_generation`): a filtered
        search asks for the same ids on every query.
        """
        filter_sql, params = where_sql(where)
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
                rows = self._db.conn.execute(
                    "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id"
                    f" WHERE 1{filter_sql} ORDER BY c.id",
                    params,
                )
                ids = memoryview(array("q", [row[0] for row in rows])).toreadonly()
            if not self._db.writing:  # a write transaction's state may still roll back
                with self._filtered_lock:
                    self._filtered[key] = (generation, ids)
                    self._filtered.move_to_end(key)
                    while len(self._filtered) > KEPT_FILTERS:
                        self._filtered.popitem(last=False)
            return ids

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[StoredChunk]:
        """Return the chunks with these ids (those that still exist), in the order given, from
        one read (a statement per 500 ids)."""
        with self._db.guard("reading chunks"):
            sql = (
                f"SELECT {self._chunk_columns} FROM chunks c"
                " JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})"
            )
            found = {c.chunk_id: c for c in chunks_from_rows(self._db.select_in(sql, chunk_ids))}
            return [found[i] for i in chunk_ids if i in found]

    def chunk_owners(self, chunk_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        """Return chunk id → (note id, human-relevance prior) for the chunks that still exist."""
        with self._db.guard("reading chunks"):
            sql = (
                "SELECT c.id, c.document_id, d.human_relevance_score FROM chunks c"
                " JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})"
            )
            return {row[0]: (row[1], row[2]) for row in self._db.select_in(sql, chunk_ids)}

    # -- search ----------------------------------------------------------------------------

    def keyword_version(self) -> bytes:
        """Return a value that changes whenever the keyword index changes."""
        with self._db.guard("reading the keyword index"):
            return sqlite_keyword.version(self._db)

    def keyword_postings(self) -> KeywordPostings:
        """Return the whole keyword index (`vrom.store.KeywordPostingsSource`)."""
        with self._db.guard("reading the keyword index"), self._db.read_snapshot():
            return sqlite_keyword.postings(self._db)

    def keyword_postings_apart(self) -> KeywordPostings | None:
        """Return the whole keyword index read on a connection of its own, safe to call from
        another thread while this store is used (None in memory: the store has no other)."""
        return sqlite_keyword.postings_apart(self._db)

    def keyword_tokens(self, text: str) -> tuple[str, ...]:
        """Return the index tokens ``text`` becomes as a quoted query string, in order."""
        if self._tokenizer is None:
            self._tokenizer = QueryTokenizer(self._db.driver)
        return self._tokenizer.tokens(text)

    def close_tokenizer(self) -> None:
        """Close the query tokenizer's private database, if it was opened."""
        if self._tokenizer is not None:
            self._tokenizer.close()
            self._tokenizer = None

    def keyword_search(
        self, query: KeywordQuery, limit: int, where: Where | None = None
    ) -> list[KeywordRow]:
        """Return up to ``limit`` chunks matching the query and filter, best BM25 first."""
        with self._db.guard("searching"):
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
            rows = self._db.conn.execute(sql, params)
            return [KeywordRow(row[0], row[1], row[2], -float(row[3])) for row in rows]
