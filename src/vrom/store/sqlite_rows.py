"""SQLite's own chunk columns: a pack opened read-only may hold an older schema.

The columns and row readers both backends share are in `vrom.store.rows`.
"""

from __future__ import annotations

from vrom.store.rows import CHUNK_COLUMNS

_CHUNK_COLUMNS_BEFORE_8 = """
    c.id, c.document_id, c.position, c.heading_path, c.text, c.char_start, c.char_end,
    c.prev_id, c.next_id, c.content_hash, d.path, d.title, d.mtime, d.human_relevance_score,
    d.content_hash, d.size, d.frontmatter
"""


def chunk_columns(schema_version: int) -> str:
    """Return `CHUNK_COLUMNS` for a store of this schema (a pack opened read-only may be older:
    before 8 there are no document texts, and every chunk has its own)."""
    return CHUNK_COLUMNS if schema_version >= 8 else _CHUNK_COLUMNS_BEFORE_8
