"""Store rows into records, for both backends: the columns every read of chunks, documents and
memories selects (the same SQL in SQLite and PostgreSQL) and how such a row becomes a record."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from vrom.results import built
from vrom.store.records import MemoryRecord, StoredChunk, StoredDocument

CHUNK_COLUMNS = """
    c.id, c.document_id, c.position, c.heading_path,
    coalesce(nullif(c.text, ''), (SELECT substr(t.text, c.char_start + 1, c.char_end - c.char_start)
        FROM document_texts t WHERE t.document_id = c.document_id), ''),
    c.char_start, c.char_end, c.prev_id, c.next_id, c.content_hash, d.path, d.title, d.mtime,
    d.human_relevance_score, d.content_hash, d.size, d.frontmatter
"""
"""A chunk ``c`` joined with its document ``d``; a chunk stored without text (SQLite schema 8)
is its slice of the document's text (``substr`` counts characters in both, as Python does)."""
DOCUMENT_COLUMNS = """
    id, path, path_key, name_key, title, frontmatter, content_hash, mtime, size,
    human_relevance_score, chunk_count, indexed_at
"""
MEMORY_COLUMNS = (
    "m.id, m.created_unix, m.updated_unix, m.project, m.type, m.title, m.content, m.tags,"
    " m.related, m.source, m.status, m.superseded_by"
)
"""A memory ``m``."""
MEMORY_HEAD_COLUMNS = "m.key, m.id, m.created_unix"
"""A memory ``m``'s `vrom.store.MemoryHead`."""


_CHUNK_FIELDS = tuple(f.name for f in dataclasses.fields(StoredChunk))


def chunks_from_rows(rows: Iterable[Sequence[Any]]) -> list[StoredChunk]:
    """Return the chunks a backend's chunk rows hold (`StoredChunk`'s fields in order, the
    metadata as JSON text last), in order.

    A document's metadata JSON is parsed once, however many of its chunks the rows hold: its
    chunks share one mapping (read-only, like the rest of a `StoredChunk`).
    """
    metadata: dict[int, Any] = {}
    chunks = []
    for row in rows:
        values = list(row)
        document_id = values[1]
        parsed = metadata.get(document_id)
        if parsed is None:
            text = values[-1]  # most collection documents have no metadata: skip the parser
            parsed = metadata[document_id] = {} if text == "{}" else json.loads(text)
        values[-1] = parsed
        chunks.append(built(StoredChunk, dict(zip(_CHUNK_FIELDS, values, strict=True))))
    return chunks


def document_from_row(row: Sequence[Any]) -> StoredDocument:
    """Return the document a `DOCUMENT_COLUMNS` row holds."""
    values = list(row)
    values[5] = json.loads(values[5])
    return StoredDocument(*values)


def memory_from_row(row: Sequence[Any]) -> MemoryRecord:
    """Return the memory a `MEMORY_COLUMNS` row holds."""
    values = list(row)
    values[7] = tuple(json.loads(values[7]))
    values[8] = tuple(json.loads(values[8]))
    return MemoryRecord(*values)
