"""PostgreSQL rows into store records: the columns each read selects and how a row becomes a
record (the same records the SQLite store returns)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vrom.store.records import MemoryRecord, StoredDocument

CHUNK_COLUMNS = """
    c.id, c.document_id, c.position, c.heading_path,
    coalesce(nullif(c.text, ''), (SELECT substr(t.text, c.char_start + 1, c.char_end - c.char_start)
        FROM document_texts t WHERE t.document_id = c.document_id), ''),
    c.char_start, c.char_end, c.prev_id, c.next_id, c.content_hash, d.path, d.title, d.mtime,
    d.human_relevance_score, d.frontmatter
"""
"""A chunk ``c`` joined with its document ``d``; a chunk stored without text is its slice of
the document's text (``substr`` counts characters, as Python does)."""
DOCUMENT_COLUMNS = """
    id, path, path_key, name_key, title, frontmatter, content_hash, mtime, size,
    human_relevance_score, chunk_count, indexed_at
"""
MEMORY_COLUMNS = (
    "m.id, m.created_unix, m.updated_unix, m.project, m.type, m.title, m.content, m.tags,"
    " m.related, m.source, m.status, m.superseded_by"
)
"""A memory ``m``."""


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
