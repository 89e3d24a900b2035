"""Rows streamed into PostgreSQL with ``COPY``: one round trip for a batch, not one a row.

`vrom.store.postgres_batch` copies a batch of notes' plain rows so; the chunk vectors' role
copies vectors into a temporary table and upserts them from there in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vrom.store.postgres_database import Connection


def copy_vectors(conn: Connection, rows: Sequence[tuple[int, bytes, Any, str | None]]) -> list[int]:
    """Write (chunk id, bytes, pgvector value, embedded-input hash or None) rows over the
    chunks' vectors in two statements
    (``COPY`` into a temporary table, then one upsert of the chunks that still exist); return
    the chunk ids written."""
    conn.execute(
        "CREATE TEMPORARY TABLE IF NOT EXISTS incoming_vectors"
        " (chunk_id bigint, data bytea, embedding vector, input_hash text)"
        " ON COMMIT DELETE ROWS"
    )
    conn.execute("TRUNCATE incoming_vectors")
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY incoming_vectors(chunk_id, data, embedding, input_hash)"
            " FROM STDIN WITH (FORMAT BINARY)"
        ) as copy,
    ):
        copy.set_types(["int8", "bytea", "vector", "text"])
        for row in rows:
            copy.write_row(row)
    written = conn.execute(
        "INSERT INTO vectors(chunk_id, data, embedding, input_hash)"
        " SELECT i.chunk_id, i.data, i.embedding, i.input_hash FROM incoming_vectors i"
        " WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.id = i.chunk_id)"
        " ON CONFLICT (chunk_id) DO UPDATE SET data = excluded.data,"
        " embedding = excluded.embedding, input_hash = excluded.input_hash RETURNING chunk_id"
    ).fetchall()
    return [int(row[0]) for row in written]


def copy_rows(conn: Connection, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Stream ``rows`` into ``table`` (``name(columns)``) with ``COPY``."""
    if not rows:
        return
    with conn.cursor() as cursor, cursor.copy(f"COPY {table} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
