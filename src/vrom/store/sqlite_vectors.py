"""Vectors in SQLite: the shared reads (`vrom.store.sql_vectors`), with writes numbered by
triggers.

Triggers number every change in a log table (its sequence in ``sqlite_sequence`` is the latest
change number); the log is pruned once replaying it would cost more than a rebuild.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from vrom.store.sql_dialect import Statements
from vrom.store.sql_vectors import (
    SqlChunkVectors,
    SqlMemoryVectors,
    SqlVectors,
)
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_dialect import SQLiteDialect
from vrom.store.sqlite_rows import chunk_columns


class _Writes(SqlVectors):
    """SQLite's writes, change numbers and generation, for chunk and memory vectors."""

    _db: Database

    def identity(self) -> str:  # a re-created store's counters start again
        return self._db.get_meta("created_unix") or ""

    def latest_change(self, run: Statements) -> int:
        seq = run.scalar("SELECT seq FROM sqlite_sequence WHERE name = ?", (self._t.changes,))
        return int(seq or 0)

    def _put(self, sql: str, rows: Sequence[tuple[object, ...]]) -> int:
        """Run ``sql`` for each row and return how many vectors it wrote.

        The cursor's row count, not the connection's ``total_changes``: that one also counts
        the rows the change-log triggers insert, one more per vector.
        """
        with self._sql.writing("writing vectors") as run:
            written = self._db.conn.executemany(sql, rows).rowcount
            if written > 0:
                self.counted(run, self.latest_change(run))
            return max(written, 0)

    def clear(self) -> None:
        with self._sql.writing("clearing vectors") as run:
            run.run(f"DELETE FROM {self._t.vectors}")
            self.counted(run, self.latest_change(run))

    @contextmanager
    def loading(self) -> Iterator[None]:  # one transaction: SQLite needs nothing more
        with self._db.transaction():
            yield


class SQLiteChunkVectors(SqlChunkVectors, _Writes):
    """The chunks' vectors (`vrom.store.VectorStore`)."""

    def __init__(self, db: Database) -> None:
        super().__init__(SQLiteDialect(db), chunk_columns(db.stored_version()))
        self._db = db

    def put(self, vectors: Sequence[tuple[int, bytes]], inputs: Sequence[str] | None = None) -> int:
        hashes: Sequence[str | None] = [None] * len(vectors) if inputs is None else inputs
        return self._put(
            "INSERT OR REPLACE INTO vectors(chunk_id, data, input_hash)"
            " SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM chunks WHERE id = ?1)",
            [(key, data, h) for (key, data), h in zip(vectors, hashes, strict=True)],
        )

    # -- `vrom.store.sql_document_writes.KeptVectors` --------------------------------------

    def reuse(
        self, run: Statements, new: Sequence[tuple[int, str | None]], reusable: dict[str, bytes]
    ) -> None:
        rows = self.reused(run, new, reusable)
        if rows:
            run.many("INSERT INTO vectors(chunk_id, data, input_hash) VALUES (?, ?, ?)", rows)
            run.count_up(self._t.generation_meta)

    def delete_of(self, run: Statements, document_id: int) -> None:
        if run.run(
            "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)",
            (document_id,),
        ):
            run.count_up(self._t.generation_meta)


class SQLiteMemoryVectors(SqlMemoryVectors, _Writes):
    """The memories' vectors (`vrom.store.MemoryVectors`), float32, keyed by memory key."""

    def __init__(self, db: Database) -> None:
        super().__init__(SQLiteDialect(db))
        self._db = db

    def put(self, vectors: Sequence[tuple[str, bytes]]) -> int:
        return self._put(
            "INSERT OR REPLACE INTO memory_vectors(key, data)"
            " SELECT m.key, ?2 FROM memories m WHERE m.id = ?1",
            vectors,
        )
