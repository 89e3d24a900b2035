"""The writing half of `vrom.store.sql_documents`, over a `Dialect`: a document's row, text,
chunks, links, tags and derived rows, and what a backend adds to write them.

Writing a document replaces its chunks, links, tags and keyword-index rows in one transaction;
chunks whose embedded input is unchanged keep their vectors. Another writer may have added or
removed the same document since the caller looked: a document already holding the path is
replaced, and a vanished id is added anew. New documents given together (`put_many`) are
written together: ids drawn at once, one statement a table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import islice
from typing import Any, ClassVar, Protocol

from vrom.store.records import ChunkRecord, DocumentRecord, DocumentState, DocumentWrite, LinkRecord
from vrom.store.sql_dialect import Dialect, Statements
from vrom.store.storable import check_document

_RECORD_COLUMNS = tuple(f.name for f in fields(DocumentRecord) if f.name != "text")
DOCUMENT_WRITE_COLUMNS = ", ".join((*_RECORD_COLUMNS, "chunk_count", "indexed_at"))
"""A document's columns: its record's fields but ``text`` (kept apart), then its chunk count
and when it was written."""
_WRITE_PLACES = ", ".join("?" * (len(_RECORD_COLUMNS) + 2))
CHUNK_WRITE_COLUMNS = (
    "id, document_id, position, heading_path, text, char_start, char_end, prev_id, next_id,"
    " content_hash"
)
LINK_COLUMNS = "kind, target, target_key, heading, alias, position"
DOCUMENT_GENERATION_META_KEY = "document_generation"
"""The meta counter of document writes (`SqlDocuments._changing`)."""
_STATE = "SELECT path, id, content_hash, mtime, size, chunk_strategy FROM documents"


def document_values(document: DocumentRecord, chunk_count: int, now: float) -> tuple[Any, ...]:
    """Return a document's `DOCUMENT_WRITE_COLUMNS` values (its frontmatter as JSON)."""
    values = {name: getattr(document, name) for name in _RECORD_COLUMNS}
    values["frontmatter"] = json.dumps(document.frontmatter, ensure_ascii=False)
    return (*values.values(), chunk_count, now)


def chunk_rows(
    document_id: int, ids: Sequence[int], chunks: Sequence[ChunkRecord], whole: str | None
) -> list[tuple[Any, ...]]:
    """Return a document's chunks as `CHUNK_WRITE_COLUMNS` rows: their text "" where the
    document's ``whole`` text holds it, linked to their neighbours by id."""
    return [
        (
            chunk_id,
            document_id,
            chunk.position,
            chunk.heading_path,
            ""
            if whole is not None and whole[chunk.char_start : chunk.char_end] == chunk.text
            else chunk.text,
            chunk.char_start,
            chunk.char_end,
            ids[i - 1] if i > 0 else None,
            ids[i + 1] if i < len(ids) - 1 else None,
            chunk.content_hash,
        )
        for i, (chunk_id, chunk) in enumerate(zip(ids, chunks, strict=True))
    ]


def link_rows(document_id: int, links: Sequence[LinkRecord]) -> list[tuple[Any, ...]]:
    """Return a document's links as ``document_id, LINK_COLUMNS`` rows."""
    return [
        (document_id, k.kind, k.target, k.target_key, k.heading, k.alias, k.position) for k in links
    ]


@dataclass(frozen=True)
class PlacedWrite:
    """A document's write with the ids it is written under: its own and its chunks'."""

    document_id: int
    write: DocumentWrite
    chunk_ids: Sequence[int]

    def chunk_rows(self) -> list[tuple[Any, ...]]:
        """Return its chunks' `CHUNK_WRITE_COLUMNS` rows (`chunk_rows`)."""
        w = self.write
        return chunk_rows(self.document_id, self.chunk_ids, w.chunks, w.document.text)


class KeptVectors(Protocol):
    """What a document's rewrite asks of the chunk vectors (inside the writer's transaction):
    the vectors it holds by embedded input (`SqlChunkVectors.by_input_of`); to ``reuse`` them,
    giving each new chunk (id, embedded-input hash or None) the vector stored for its input
    (`SqlChunkVectors.reused`); and to ``delete_of`` its chunks' vectors."""

    def by_input_of(self, run: Statements, document_id: int | None) -> dict[str, bytes]: ...
    def reuse(
        self, run: Statements, new: Sequence[tuple[int, str | None]], reusable: dict[str, bytes]
    ) -> None: ...
    def delete_of(self, run: Statements, document_id: int) -> None: ...


class SqlDocumentWrites:
    """How a store's documents role writes (`SqlDocuments` adds the reading); a backend adds
    what differs."""

    child_tables: ClassVar[tuple[str, ...]] = ("chunks", "links", "tags", "document_texts")
    """The tables of rows a document owns, deleted with it (after its vectors)."""

    def __init__(self, dialect: Dialect, vectors: KeptVectors) -> None:
        self._sql = dialect
        self._vectors = vectors

    @property
    def sql(self) -> Dialect:
        """The dialect its statements run in."""
        return self._sql

    # -- what a backend adds ---------------------------------------------------------------

    def next_ids(self, run: Statements, table: str, count: int) -> list[int]:
        """Return ``count`` fresh ids of ``table``, in order."""
        raise NotImplementedError

    def _changing(self, run: Statements) -> None:
        """Count one more document generation, first thing in the writer's transaction (so a
        read inside it, after any of its writes, sees a generation no kept filter has): it
        moves with every write of a document (chunks, links, tags, fields), not a `touch`."""
        run.count_up(DOCUMENT_GENERATION_META_KEY)

    def _unindex(self, run: Statements, document_id: int) -> None:
        """Remove a document's chunks from a keyword index kept apart from them."""

    def _insert_chunks(self, run: Statements, placed: Sequence[PlacedWrite]) -> None:
        """Insert the documents' chunks (`PlacedWrite.chunk_rows`) and index them for keyword
        search."""
        raise NotImplementedError

    def _derived(self, run: Statements, placed: Sequence[PlacedWrite]) -> None:
        """Write the rows a backend derives from the documents themselves (their fields)."""

    # -- writing ---------------------------------------------------------------------------

    def states(self, paths: Sequence[str] | None = None) -> dict[str, DocumentState]:
        """Return path → state for every stored document, or for those at ``paths``."""
        with self._sql.reading("reading note states") as run:
            rows = (
                run.rows(_STATE)
                if paths is None
                else run.rows_in(_STATE + " WHERE path {in}", paths)
            )
            return {row[0]: DocumentState(*row[1:]) for row in rows}

    def state(self, path: str) -> DocumentState | None:
        """Return the state of one stored document, or None."""
        return self.states([path]).get(path)

    def delete_children(self, run: Statements, document_id: int) -> None:
        """Remove what a document owns: its vectors, chunks, links, tags, fields, text."""
        self._vectors.delete_of(run, document_id)
        self._unindex(run, document_id)
        for table in self.child_tables:
            run.run(f"DELETE FROM {table} WHERE document_id = ?", (document_id,))

    def _claim_path(self, run: Statements, path: str, document_id: int | None) -> int | None:
        """Return the id to write a document under, clearing the path if another holds it."""
        if document_id is not None and not run.scalar(
            "SELECT count(*) FROM documents WHERE id = ?", (document_id,)
        ):
            document_id = None  # deleted by another writer since the caller looked
        holder = run.scalar("SELECT id FROM documents WHERE path = ?", (path,))
        if holder is None or holder == document_id:
            return document_id
        if document_id is None:
            return int(holder)  # added by another writer since the caller looked
        self.delete_children(run, holder)  # moved onto a path another document still held
        run.run("DELETE FROM documents WHERE id = ?", (holder,))
        return document_id

    def put(
        self,
        document: DocumentRecord,
        chunks: Sequence[ChunkRecord],
        links: Sequence[LinkRecord],
        tags: Sequence[str],
        document_id: int | None = None,
    ) -> int:
        """Write a document with its chunks, links and tags, replacing what ``document_id`` held.

        Safe against another writer that added or removed the same document meanwhile: one
        that already holds ``document.path`` is replaced, and a vanished ``document_id`` is
        re-added. Chunks whose text another chunk already has a vector for get that vector.
        Returns the document's id.
        """
        check_document(document, chunks, links, tags)
        values = document_values(document, len(chunks), time.time())
        with self._sql.writing("writing a note") as run:
            self._changing(run)
            document_id = self._claim_path(run, document.path, document_id)
            reusable = self._vectors.by_input_of(run, document_id)
            if document_id is None:
                document_id = self.next_ids(run, "documents", 1)[0]
                run.run(
                    f"INSERT INTO documents(id, {DOCUMENT_WRITE_COLUMNS})"
                    f" VALUES (?, {_WRITE_PLACES})",
                    (document_id, *values),
                )
            else:
                self.delete_children(run, document_id)
                run.run(
                    f"UPDATE documents SET ({DOCUMENT_WRITE_COLUMNS}) = ({_WRITE_PLACES})"
                    " WHERE id = ?",
                    (*values, document_id),
                )
            write = DocumentWrite(document, chunks, links, tags)
            placed = PlacedWrite(document_id, write, self.next_ids(run, "chunks", len(chunks)))
            self._write_children(run, [placed], reusable)
            return document_id

    def put_many(self, writes: Sequence[DocumentWrite]) -> list[int]:
        """Write several documents in one transaction, each as `put` writes it (a backend may
        do it in fewer round trips); return their ids in order. Raises `ValidationError` before
        writing anything when one holds text no store holds (`vrom.store.storable`).

        New documents at paths no document holds (nor another of the batch) are written
        together: their ids drawn at once, each table's rows in one statement. A batch that
        replaces a document is written one `put` at a time.
        """
        for w in writes:
            check_document(w.document, w.chunks, w.links, w.tags)
        if not writes:
            return []
        paths = [w.document.path for w in writes]
        with self._sql.writing("writing notes") as run:
            if (
                any(w.document_id is not None for w in writes)
                or len(set(paths)) < len(paths)
                or run.rows_in("SELECT id FROM documents WHERE path {in}", paths)
            ):
                return [
                    self.put(w.document, w.chunks, w.links, w.tags, w.document_id) for w in writes
                ]
            self._changing(run)
            now = time.time()
            ids = self.next_ids(run, "documents", len(writes))
            run.many(
                f"INSERT INTO documents(id, {DOCUMENT_WRITE_COLUMNS}) VALUES (?, {_WRITE_PLACES})",
                [
                    (i, *document_values(w.document, len(w.chunks), now))
                    for i, w in zip(ids, writes, strict=True)
                ],
            )
            chunk_ids = iter(self.next_ids(run, "chunks", sum(len(w.chunks) for w in writes)))
            placed = [
                PlacedWrite(i, w, list(islice(chunk_ids, len(w.chunks))))
                for i, w in zip(ids, writes, strict=True)
            ]
            self._write_children(run, placed, {})
            return ids

    def _write_children(
        self, run: Statements, placed: Sequence[PlacedWrite], reusable: dict[str, bytes]
    ) -> None:
        """Write what the placed documents own (their text, chunks, links, tags, derived rows)
        and give their chunks the stored vectors of their inputs (``reusable``: the vectors
        the rewritten document held)."""
        run.many(
            "INSERT INTO document_texts(document_id, text) VALUES (?, ?)",
            [
                (p.document_id, p.write.document.text)
                for p in placed
                if p.write.document.text is not None
            ],
        )
        self._insert_chunks(run, placed)
        self._vectors.reuse(
            run,
            [
                (i, c.input_hash)
                for p in placed
                for i, c in zip(p.chunk_ids, p.write.chunks, strict=True)
            ],
            reusable,
        )
        run.many(
            f"INSERT INTO links(document_id, {LINK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [row for p in placed for row in link_rows(p.document_id, p.write.links)],
        )
        run.many(
            "INSERT INTO tags(document_id, tag) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(p.document_id, tag) for p in placed for tag in p.write.tags],
        )
        self._derived(run, placed)

    def touch(self, document_id: int, mtime: float, size: int) -> None:
        """Record a new mtime and size for a document whose content did not change."""
        with self._sql.writing("updating a note's time") as run:
            run.run(
                "UPDATE documents SET mtime = ?, size = ? WHERE id = ?", (mtime, size, document_id)
            )

    def delete(self, document_id: int) -> None:
        """Remove a document and everything derived from it."""
        with self._sql.writing("deleting a note") as run:
            self._changing(run)
            self.delete_children(run, document_id)
            run.run("DELETE FROM documents WHERE id = ?", (document_id,))
