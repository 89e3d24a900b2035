"""Many documents written to PostgreSQL at once: `PgDocuments.put_many`'s few round trips.

Writing one note costs about fifteen statements (its row, its text, its chunks, links, tags and
fields, the vectors it keeps), each a round trip to the server; a sync of thousands of notes
spent most of its time waiting on them. A batch is written in a handful of statements instead:
the paths claimed with one query, the ids drawn from their sequences at once, the rows of plain
tables streamed with ``COPY`` (`vrom.store.postgres_copy`), the chunks inserted from arrays
(``unnest``). Their full-text vectors are computed by the server, on a second connection, a
slice of notes at a time while the batch's other rows are written (`_search_vectors`): the
server then works on two cores, not one; they come back as text and are inserted from it
(``::tsvector``), the same values the inserting statement would compute. The result is what
`SqlDocuments.put` writes, note by note: a batch whose documents would claim one path or id
twice is written by it, one by one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from vrom.store.postgres_copy import copy_rows
from vrom.store.postgres_query import field_rows, fold, weighted_vector_sql
from vrom.store.postgres_vectors import PgChunkVectors
from vrom.store.records import ChunkRecord, DocumentRecord, DocumentWrite
from vrom.store.sql_dialect import Statements
from vrom.store.sql_document_writes import (
    DOCUMENT_GENERATION_META_KEY,
    DOCUMENT_WRITE_COLUMNS,
    LINK_COLUMNS,
    chunk_rows,
    document_values,
    link_rows,
)
from vrom.store.storable import check_document

if TYPE_CHECKING:
    from vrom.store.postgres_documents import PgDocuments

_CHUNKS_FROM_ARRAYS = (
    "INSERT INTO chunks(id, document_id, position, heading_path, text, char_start, char_end,"
    " prev_id, next_id, content_hash, search)"
    " SELECT u.id, u.document_id, u.position, u.heading_path, u.text, u.char_start, u.char_end,"
    " u.prev_id, u.next_id, u.content_hash, u.search::tsvector"
    " FROM unnest(%b::bigint[], %b::bigint[], %b::integer[], %b::text[], %b::text[],"
    " %b::integer[], %b::integer[], %b::bigint[], %b::bigint[], %b::text[], %b::text[])"
    " AS u(id, document_id, position, heading_path, text, char_start, char_end, prev_id,"
    " next_id, content_hash, search)"
)
"""psycopg's own SQL (``%b``: the arrays are sent in binary; as text, quoting every element of
a batch's arrays cost the client more than the server's insert)."""
SEARCH_VECTORS = (
    f"SELECT ({weighted_vector_sql(3, ('u.title', 'u.heading', 'u.body'))})::text"
    " FROM unnest(%b::text[], %b::text[], %b::text[]) WITH ORDINALITY AS u(title, heading, body, n)"
    " ORDER BY u.n"
)
"""The text form of each chunk's search vector (``weighted_vector_sql``'s), in order."""
SLICE_NOTES = 64
"""Notes whose chunks' search vectors are computed, and whose chunks are inserted, per statement
(a batch of 256 notes is four: the first slice's vectors are computed while the batch's paths,
documents and links are written, the next ones while the one before is inserted)."""


def put_many(
    documents: PgDocuments, vectors: PgChunkVectors, writes: Sequence[DocumentWrite]
) -> list[int]:
    """Write ``writes`` in one transaction as `SqlDocuments.put` writes each; return their ids."""
    for write in writes:
        check_document(write.document, write.chunks, write.links, write.tags)
    if not writes:
        return []
    with documents.sql.writing("writing notes") as run:
        run.count_up(DOCUMENT_GENERATION_META_KEY)  # as `SqlDocuments._changing` does
        claims = _claim_paths(run, writes)
        if claims is None:
            return [
                documents.put(w.document, w.chunks, w.links, w.tags, w.document_id) for w in writes
            ]
        slices = [writes[s : s + SLICE_NOTES] for s in range(0, len(writes), SLICE_NOTES)]
        with ThreadPoolExecutor(1, thread_name_prefix="vrom-search-vectors") as side:
            searches = [side.submit(documents.search_vectors, part) for part in slices]
            try:
                return _write_claimed(documents, vectors, run, writes, claims, searches)
            finally:
                for search in searches:  # on an error, the slices not yet computed are not
                    search.cancel()


def _write_claimed(
    documents: PgDocuments,
    vectors: PgChunkVectors,
    run: Statements,
    writes: Sequence[DocumentWrite],
    claims: tuple[list[int | None], list[int]],
    searches: Sequence[Future[list[str]]],
) -> list[int]:
    """Write ``writes`` over the documents ``claims`` names (`_claim_paths`), their chunks'
    search vectors given a slice of notes at a time by ``searches``; return their ids."""
    claimed, taken_over = claims
    for held in taken_over:  # moved onto a path another document still held
        documents.delete_children(run, held)
        run.run("DELETE FROM documents WHERE id = ?", (held,))
    replaced = [document_id for document_id in claimed if document_id is not None]
    reusable: dict[str, bytes] = {}  # by input: any replaced note's vector of it serves
    for document_id in replaced:
        reusable.update(vectors.by_input_of(run, document_id))
    for document_id in replaced:
        documents.delete_children(run, document_id)
    fresh = iter(documents.next_ids(run, "documents", claimed.count(None)))
    ids = [next(fresh) if document_id is None else document_id for document_id in claimed]
    _write_rows(run, writes, ids, set(replaced))
    chunk_ids = _write_chunks(documents, run, writes, ids, searches)
    vectors.reuse(
        run,
        [
            (i, c.input_hash)
            for write, new_ids in zip(writes, chunk_ids, strict=True)
            for i, c in zip(new_ids, write.chunks, strict=True)
        ],
        reusable,
    )
    return ids


def search_texts(document: DocumentRecord, chunks: Sequence[ChunkRecord]) -> list[tuple[str, ...]]:
    """Return, per chunk, the folded title, heading path and text its search vector is
    computed from (by the server: ``weighted_vector_sql``)."""
    title = fold(document.title)
    return [(title, fold(chunk.heading_path), fold(chunk.text)) for chunk in chunks]


def _claim_paths(
    run: Statements, writes: Sequence[DocumentWrite]
) -> tuple[list[int | None], list[int]] | None:
    """Return the id to write each document under (None: a new one) and the documents to
    delete first, as `SqlDocuments._claim_path` decides for one (a vanished id is dropped, a
    path another document holds is taken over); None when two would claim one path or id."""
    paths = [w.document.path for w in writes]
    given = [w.document_id for w in writes if w.document_id is not None]
    rows = run.rows(
        "SELECT id, path FROM documents WHERE path = ANY(?) OR id = ANY(?)", (paths, given)
    )
    existing = {int(row[0]) for row in rows}
    holder = {str(row[1]): int(row[0]) for row in rows}
    claimed: list[int | None] = []
    taken_over: list[int] = []
    for write in writes:
        document_id = write.document_id if write.document_id in existing else None
        held = holder.get(write.document.path)
        if held is None or held == document_id:
            claimed.append(document_id)
        elif document_id is None:
            claimed.append(held)  # added by another writer since the caller looked
        else:
            taken_over.append(held)
            claimed.append(document_id)
    ids = [i for i in claimed if i is not None] + taken_over
    if len(set(paths)) < len(paths) or len(set(ids)) < len(ids):
        return None
    return claimed, taken_over


def _write_rows(
    run: Statements, writes: Sequence[DocumentWrite], ids: Sequence[int], replaced: set[int]
) -> None:
    """Write the documents' rows (new ones by ``COPY``), texts, links, tags and fields."""
    now = time.time()
    rows = [
        (document_id, *document_values(w.document, len(w.chunks), now))
        for w, document_id in zip(writes, ids, strict=True)
    ]
    run.many(
        f"UPDATE documents SET ({DOCUMENT_WRITE_COLUMNS}) = ({', '.join('?' * 12)}) WHERE id = ?",
        [(*row[1:], row[0]) for row in rows if row[0] in replaced],
    )
    conn = run.conn
    copy_rows(
        conn, f"documents(id, {DOCUMENT_WRITE_COLUMNS})", [r for r in rows if r[0] not in replaced]
    )
    pairs = list(zip(writes, ids, strict=True))
    copy_rows(
        conn,
        "document_texts(document_id, text)",
        [(i, w.document.text) for w, i in pairs if w.document.text is not None],
    )
    copy_rows(
        conn,
        f"links(document_id, {LINK_COLUMNS})",
        [row for w, i in pairs for row in link_rows(i, w.links)],
    )
    copy_rows(
        conn,
        "tags(document_id, tag)",
        [(i, tag) for w, i in pairs for tag in dict.fromkeys(w.tags)],
    )
    copy_rows(
        conn,
        "fields(document_id, key, kind, text_value, number_value, instant)",
        [(i, *row) for w, i in pairs for row in field_rows(w.document.frontmatter)],
    )


def _write_chunks(
    documents: PgDocuments,
    run: Statements,
    writes: Sequence[DocumentWrite],
    ids: Sequence[int],
    searches: Sequence[Future[list[str]]],
) -> list[list[int]]:
    """Insert every document's chunks, a statement per slice of `SLICE_NOTES` notes (with the
    search vectors ``searches`` gives each slice); return each document's chunk ids."""
    drawn = iter(documents.next_ids(run, "chunks", sum(len(w.chunks) for w in writes)))
    chunk_ids = [[next(drawn) for _ in w.chunks] for w in writes]
    for number, search in enumerate(searches):
        part = slice(number * SLICE_NOTES, (number + 1) * SLICE_NOTES)
        columns: list[list[Any]] = [[] for _ in range(10)]
        for write, document_id, own in zip(writes[part], ids[part], chunk_ids[part], strict=True):
            for row in chunk_rows(document_id, own, write.chunks, write.document.text):
                for column, value in zip(columns, row, strict=True):
                    column.append(value)
        columns.append(search.result())
        if columns[0]:
            run.conn.execute(_CHUNKS_FROM_ARRAYS, columns)
    return chunk_ids
