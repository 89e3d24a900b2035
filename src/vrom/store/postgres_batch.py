"""Many documents written to PostgreSQL at once: `PgDocuments.put_many`'s few round trips.

Writing one note costs about fifteen statements (its row, its text, its chunks, links, tags and
fields, the vectors it keeps), each a round trip to the server; a sync of thousands of notes
spent most of its time waiting on them. A batch is written in a handful of statements instead:
the paths claimed with one query, the ids drawn from their sequences at once, the rows of plain
tables streamed with ``COPY`` (`vrom.store.postgres_copy`), the chunks inserted from arrays (``unnest``) so their full-text
vectors are still computed by the server. The result is what `PgDocuments.put` writes, note by
note: a batch whose documents would claim one path or id twice is written by it, one by one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from vrom.store.postgres_copy import copy_rows
from vrom.store.postgres_database import Connection, PgDatabase
from vrom.store.postgres_query import CONFIG, field_rows, fold
from vrom.store.postgres_vectors import PgChunkVectors
from vrom.store.records import ChunkRecord, DocumentRecord, DocumentWrite
from vrom.store.storable import check_document

_DOCUMENT_COLUMNS = (
    "id, path, path_key, name_key, title, frontmatter, content_hash, mtime, size,"
    " human_relevance_score, chunk_strategy, chunk_count, indexed_at"
)
_CHUNKS_FROM_ARRAYS = (
    "INSERT INTO chunks(id, document_id, position, heading_path, text, char_start, char_end,"
    " prev_id, next_id, content_hash, search)"
    " SELECT u.id, u.document_id, u.position, u.heading_path, u.text, u.char_start, u.char_end,"
    " u.prev_id, u.next_id, u.content_hash,"
    f" setweight(to_tsvector({CONFIG}, u.title), 'A')"
    f" || setweight(to_tsvector({CONFIG}, u.heading), 'B')"
    f" || setweight(to_tsvector({CONFIG}, u.body), 'C')"
    " FROM unnest(%s::bigint[], %s::bigint[], %s::integer[], %s::text[], %s::text[],"
    " %s::integer[], %s::integer[], %s::bigint[], %s::bigint[], %s::text[], %s::text[],"
    " %s::text[], %s::text[]) AS u(id, document_id, position, heading_path, text, char_start,"
    " char_end, prev_id, next_id, content_hash, title, heading, body)"
)

DeleteChildren = Callable[[Connection, int], None]
PutOne = Callable[[DocumentWrite], int]


def put_many(
    db: PgDatabase,
    vectors: PgChunkVectors,
    writes: Sequence[DocumentWrite],
    delete_children: DeleteChildren,
    put_one: PutOne,
) -> list[int]:
    """Write ``writes`` in one transaction as `PgDocuments.put` (``put_one``) writes each;
    return their ids.

    ``delete_children`` removes what a replaced document held (its vectors first).
    """
    for write in writes:
        check_document(write.document, write.chunks, write.links, write.tags)
    if not writes:
        return []
    with db.guard("writing notes"), db.transaction(), db.connection() as conn:
        claims = _claim_paths(conn, writes)
        if claims is None:
            return [put_one(write) for write in writes]
        claimed, taken_over = claims
        for held in taken_over:  # moved onto a path another document still held
            delete_children(conn, held)
            conn.execute("DELETE FROM documents WHERE id = %s", (held,))
        replaced = [document_id for document_id in claimed if document_id is not None]
        reusable: dict[str, bytes] = {}  # by input: any replaced note's vector of it serves
        for document_id in replaced:
            reusable.update(vectors.by_input_of(conn, document_id))
        for document_id in replaced:
            delete_children(conn, document_id)
        fresh = iter(_next_ids(conn, "documents_id_seq", claimed.count(None)))
        ids = [next(fresh) if document_id is None else document_id for document_id in claimed]
        _write_rows(conn, writes, ids, set(replaced))
        chunk_ids = _write_chunks(conn, writes, ids)
        vectors.reuse(
            conn,
            [
                (i, c.input_hash)
                for write, new_ids in zip(writes, chunk_ids, strict=True)
                for i, c in zip(new_ids, write.chunks, strict=True)
            ],
            reusable,
        )
        return ids


def _claim_paths(
    conn: Connection, writes: Sequence[DocumentWrite]
) -> tuple[list[int | None], list[int]] | None:
    """Return the id to write each document under (None: a new one) and the documents to
    delete first, as `PgDocuments._claim_path` decides for one (a vanished id is dropped, a
    path another document holds is taken over); None when two would claim one path or id."""
    paths = [w.document.path for w in writes]
    given = [w.document_id for w in writes if w.document_id is not None]
    rows = conn.execute(
        "SELECT id, path FROM documents WHERE path = ANY(%s) OR id = ANY(%s)", (paths, given)
    ).fetchall()
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


def _next_ids(conn: Connection, sequence: str, count: int) -> list[int]:
    if not count:
        return []
    rows = conn.execute(
        f"SELECT nextval('{sequence}') FROM generate_series(1, %s)", (count,)
    ).fetchall()
    return [int(row[0]) for row in rows]


def _write_rows(
    conn: Connection, writes: Sequence[DocumentWrite], ids: Sequence[int], replaced: set[int]
) -> None:
    """Write the documents' rows (new ones by ``COPY``), texts, links, tags and fields."""
    now = time.time()
    rows: list[tuple[Any, ...]] = []
    for write, document_id in zip(writes, ids, strict=True):
        d = write.document
        rows.append(
            (
                document_id,
                d.path,
                d.path_key,
                d.name_key,
                d.title,
                json.dumps(d.frontmatter, ensure_ascii=False),
                d.content_hash,
                d.mtime,
                d.size,
                d.human_relevance_score,
                d.chunk_strategy,
                len(write.chunks),
                now,
            )
        )
    with conn.cursor() as cursor:
        cursor.executemany(
            "UPDATE documents SET path = %s, path_key = %s, name_key = %s, title = %s,"
            " frontmatter = %s, content_hash = %s, mtime = %s, size = %s,"
            " human_relevance_score = %s, chunk_strategy = %s, chunk_count = %s,"
            " indexed_at = %s WHERE id = %s",
            [(*row[1:], row[0]) for row in rows if row[0] in replaced],
        )
    copy_rows(conn, f"documents({_DOCUMENT_COLUMNS})", [r for r in rows if r[0] not in replaced])
    pairs = list(zip(writes, ids, strict=True))
    copy_rows(
        conn,
        "document_texts(document_id, text)",
        [(i, w.document.text) for w, i in pairs if w.document.text is not None],
    )
    copy_rows(
        conn,
        "links(document_id, kind, target, target_key, heading, alias, position)",
        [
            (i, k.kind, k.target, k.target_key, k.heading, k.alias, k.position)
            for w, i in pairs
            for k in w.links
        ],
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


def chunk_rows(
    document_id: int, ids: Sequence[int], chunks: Sequence[ChunkRecord], document: DocumentRecord
) -> list[tuple[Any, ...]]:
    """Return the rows `PgDocuments.put` and `put_many` insert for a document's chunks, in the
    chunks table's order: id, document, position, heading path, text ("" where the document's
    whole text holds it), offsets, prev/next ids, content hash, then the folded title, heading
    path and text the search vector is computed from."""
    whole, title = document.text, fold(document.title)
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
            title,
            fold(chunk.heading_path),
            fold(chunk.text),
        )
        for i, (chunk_id, chunk) in enumerate(zip(ids, chunks, strict=True))
    ]


def _write_chunks(
    conn: Connection, writes: Sequence[DocumentWrite], ids: Sequence[int]
) -> list[list[int]]:
    """Insert every document's chunks in one statement; return each document's chunk ids."""
    drawn = iter(_next_ids(conn, "chunks_id_seq", sum(len(w.chunks) for w in writes)))
    chunk_ids = [[next(drawn) for _ in w.chunks] for w in writes]
    columns: list[list[Any]] = [[] for _ in range(13)]
    for write, document_id, own in zip(writes, ids, chunk_ids, strict=True):
        for values in chunk_rows(document_id, own, write.chunks, write.document):
            for column, value in zip(columns, values, strict=True):
                column.append(value)
    if columns[0]:
        conn.execute(_CHUNKS_FROM_ARRAYS, columns)
    return chunk_ids
