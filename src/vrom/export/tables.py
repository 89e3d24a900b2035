"""The export's tables and how a store's records become their rows.

Each table is a list of (column, DuckDB type). Rows are tuples in that order; `json_lines`
turns them into the newline-delimited JSON the export loads into DuckDB. Nothing here reads the
store: `vrom.export` reads it through the store's roles and hands the records over.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from vrom.store import LinkRecord, MemoryRecord, StoredChunk, StoredDocument

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Column = tuple[str, str]
Row = tuple[Any, ...]

TABLES: dict[str, tuple[Column, ...]] = {
    "notes": (
        ("note_id", "BIGINT"),
        ("path", "VARCHAR"),
        ("title", "VARCHAR"),
        ("content_hash", "VARCHAR"),
        ("modified_unix", "DOUBLE"),
        ("size", "BIGINT"),
        ("chunk_count", "INTEGER"),
        ("human_relevance_score", "DOUBLE"),
        ("frontmatter", "JSON"),
        ("indexed_unix", "DOUBLE"),
    ),
    "chunks": (
        ("chunk_id", "BIGINT"),
        ("note_id", "BIGINT"),
        ("path", "VARCHAR"),
        ("position", "INTEGER"),
        ("heading_path", "VARCHAR"),
        ("char_start", "INTEGER"),
        ("char_end", "INTEGER"),
        ("prev_chunk_id", "BIGINT"),
        ("next_chunk_id", "BIGINT"),
        ("content_hash", "VARCHAR"),
        ("text", "VARCHAR"),
    ),
    "links": (
        ("source_note_id", "BIGINT"),
        ("source_path", "VARCHAR"),
        ("position", "INTEGER"),
        ("kind", "VARCHAR"),
        ("target", "VARCHAR"),
        ("heading", "VARCHAR"),
        ("alias", "VARCHAR"),
        ("target_key", "VARCHAR"),
        ("resolved_path", "VARCHAR"),
    ),
    "tags": (("note_id", "BIGINT"), ("path", "VARCHAR"), ("tag", "VARCHAR")),
    "fields": (
        ("note_id", "BIGINT"),
        ("path", "VARCHAR"),
        ("key", "VARCHAR"),
        ("value", "JSON"),
        ("value_type", "VARCHAR"),
    ),
    "memories": (
        ("id", "VARCHAR"),
        ("created_unix", "DOUBLE"),
        ("updated_unix", "DOUBLE"),
        ("project", "VARCHAR"),
        ("type", "VARCHAR"),
        ("title", "VARCHAR"),
        ("content", "VARCHAR"),
        ("tags", "VARCHAR[]"),
        ("related", "VARCHAR[]"),
        ("source", "VARCHAR"),
        ("status", "VARCHAR"),
        ("superseded_by", "VARCHAR"),
    ),
    "vectors": (("chunk_id", "BIGINT"), ("fingerprint", "VARCHAR"), ("vector", "FLOAT[]")),
}
"""Every table an export can hold, its columns and their DuckDB types."""
SCRATCH_TABLES: dict[str, tuple[Column, ...]] = {
    "relinked": (
        ("source_path", "VARCHAR"),
        ("target_key", "VARCHAR"),
        ("resolved_path", "VARCHAR"),
    ),
}
"""Tables an export fills while it writes and drops before it saves: ``relinked`` holds the
new targets of links an added or removed note resolves differently."""
COLUMNS = {**TABLES, **SCRATCH_TABLES}
PER_NOTE = ("chunks", "links", "tags")
"""The tables whose rows come from a note's chunks, links and tags, read from the store again
only for the notes that changed (``notes`` and ``fields`` come from the notes themselves, read
whole; ``memories`` is rewritten whole)."""
NOTE_COLUMN = {"chunks": "path", "links": "source_path", "tags": "path", "fields": "path"}


def note_row(doc: StoredDocument) -> Row:
    """Return a note's row of ``notes``."""
    return (
        doc.document_id,
        doc.path,
        doc.title,
        doc.content_hash,
        doc.mtime,
        doc.size,
        doc.chunk_count,
        doc.human_relevance_score,
        _json(doc.frontmatter),
        doc.indexed_at,
    )


def field_rows(doc: StoredDocument) -> list[Row]:
    """Return a note's rows of ``fields``: one per frontmatter key, its value as JSON."""
    return [
        (doc.document_id, doc.path, key, _json(value), _json_type(value))
        for key, value in doc.frontmatter.items()
    ]


def chunk_rows(chunks: Sequence[StoredChunk]) -> list[Row]:
    """Return the rows of ``chunks`` for one note's chunks."""
    return [
        (
            c.chunk_id,
            c.document_id,
            c.path,
            c.position,
            c.heading_path,
            c.char_start,
            c.char_end,
            c.prev_id,
            c.next_id,
            c.content_hash,
            c.text,
        )
        for c in chunks
    ]


def link_rows(
    doc: StoredDocument, links: Sequence[LinkRecord], resolved: Sequence[str | None]
) -> list[Row]:
    """Return the rows of ``links`` for the links written in one note, each with the path of
    the note it resolves to (None: no note matches)."""
    return [
        (
            doc.document_id,
            doc.path,
            link.position,
            link.kind,
            link.target,
            link.heading,
            link.alias,
            link.target_key,
            target,
        )
        for link, target in zip(links, resolved, strict=True)
    ]


def tag_rows(doc: StoredDocument, tags: Sequence[str]) -> list[Row]:
    """Return the rows of ``tags`` for one note."""
    return [(doc.document_id, doc.path, tag) for tag in tags]


def memory_rows(memories: Iterable[MemoryRecord]) -> list[Row]:
    """Return the rows of ``memories``."""
    return [
        (
            m.id,
            m.created_unix,
            m.updated_unix,
            m.project,
            m.type,
            m.title,
            m.content,
            list(m.tags),
            list(m.related),
            m.source,
            m.status,
            m.superseded_by,
        )
        for m in memories
    ]


def json_lines(table: str, rows: Iterable[Row]) -> Iterator[str]:
    """Yield each row of ``table`` as one line of JSON keyed by column name."""
    names = [name for name, _ in COLUMNS[table]]
    for row in rows:
        yield json.dumps(dict(zip(names, row, strict=True)), ensure_ascii=False)


def vector_lines(
    chunk_ids: Sequence[int], matrix: npt.NDArray[np.float32], fingerprint: str
) -> Iterator[str]:
    """Yield a ``vectors`` row as JSON per chunk id and row of ``matrix``.

    Each value is written with 9 significant digits, which reads back as the same float32,
    in one formatting call a row (several times faster than `json.dumps` of the floats).
    """
    if not len(chunk_ids):
        return
    template = "[" + ",".join(["%.9g"] * matrix.shape[1]) + "]"
    head = '{"fingerprint": ' + json.dumps(fingerprint) + ', "chunk_id": '
    for chunk_id, values in zip(chunk_ids, matrix.tolist(), strict=True):
        yield f'{head}{int(chunk_id)}, "vector": {template % tuple(values)}}}'


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _json_type(value: Any) -> str:
    """Return a JSON value's kind: text, number, bool, null, list or object."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "text"
    return "list" if isinstance(value, list) else "object"
