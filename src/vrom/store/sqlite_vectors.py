"""Vectors in SQLite: one table of (integer key, bytes) per kind, with a generation and a change log.

Chunk vectors are keyed by chunk id and go with their chunk; memory vectors are keyed by each
memory's integer key and go with their memory. Triggers number every change in a log table so a
vector index (a cache, rebuildable from these rows) can catch up by replaying it; the log is
pruned once replaying would cost more than a rebuild. Both kinds share this code: only table
names and the owning rows differ.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from vrom.store.records import (
    VECTOR_ENCODING_META_KEY,
    MemoryRecord,
    StoredChunk,
    VectorChanges,
)
from vrom.store.rows import MEMORY_COLUMNS, chunks_from_rows, memory_from_row
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_rows import chunk_columns

VECTOR_CHANGES_KEPT = 10_000
"""A change log keeps at least this many entries (more when there are more vectors)."""


@dataclass(frozen=True)
class _Tables:
    vectors: str  # (key column, data)
    key: str
    changes: str  # (seq, key column): filled by triggers
    generation_meta: str
    largest_owner_sql: str  # an upper bound on the number of vectors, from one index lookup


_CHUNKS = _Tables(
    "vectors", "chunk_id", "vector_changes", "vector_generation", "SELECT max(id) FROM chunks"
)
_MEMORIES = _Tables(
    "memory_vectors",
    "key",
    "memory_vector_changes",
    "memory_vector_generation",
    "SELECT max(key) FROM memories",
)


class _VectorTable:
    """The reads, change log and generation shared by chunk and memory vectors."""

    def __init__(self, db: Database, tables: _Tables) -> None:
        self._db = db
        self._t = tables

    def identity(self) -> str:
        """Return the store's creation stamp (a re-created store's counters start again)."""
        return self._db.get_meta("created_unix") or ""

    def encoding(self) -> str:
        """Return how the vectors are encoded: ``float32`` or ``int8``."""
        return "float32"

    def rows(self) -> list[tuple[int, bytes]]:
        """Return (key, vector bytes) for every vector, by key."""
        t = self._t
        with self._db.guard("reading vectors"):
            return self._db.conn.execute(
                f"SELECT {t.key}, data FROM {t.vectors} ORDER BY {t.key}"
            ).fetchall()

    def of(self, keys: Sequence[int]) -> dict[int, bytes]:
        """Return the vector bytes of these keys, where they exist."""
        t = self._t
        with self._db.guard("reading vectors"):
            sql = f"SELECT {t.key}, data FROM {t.vectors} WHERE {t.key} IN ({{marks}})"
            return {row[0]: row[1] for row in self._db.select_in(sql, keys)}

    def count(self) -> int:
        """Return how many vectors there are."""
        with self._db.guard("counting vectors"):
            return int(self._db.scalar(f"SELECT count(*) FROM {self._t.vectors}"))

    def generation(self) -> int:
        """Return a number that changes whenever any vector is added or removed."""
        with self._db.guard("reading meta"):
            return int(self._db.meta_value(self._t.generation_meta) or 0)

    def change_number(self) -> int:
        """Return the number of the latest vector change (0 before any)."""
        with self._db.guard("reading vector changes"):
            return self._latest_change()

    def changes(self, after: int) -> VectorChanges | None:
        """Return the keys whose vector changed after ``after``; None if that is forgotten."""
        t = self._t
        with self._db.guard("reading vector changes"), self._db.read_snapshot():
            latest = self._latest_change()
            if after >= latest:
                return VectorChanges(latest, ())
            oldest = self._db.scalar(f"SELECT min(seq) FROM {t.changes}")
            if oldest is None or oldest > after + 1:
                return None
            rows = self._db.conn.execute(
                f"SELECT DISTINCT {t.key} FROM {t.changes} WHERE seq > ? AND seq <= ?"
                f" ORDER BY {t.key}",
                (after, latest),
            )
            return VectorChanges(latest, tuple(row[0] for row in rows))

    def _latest_change(self) -> int:
        row = self._db.conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (self._t.changes,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def bump_generation(self) -> None:
        """Count one more change of the vectors (inside the caller's transaction)."""
        self._db.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (self._t.generation_meta,),
        )

    def _after_write(self) -> None:
        self.bump_generation()
        # Past as many changes as there are vectors, rebuilding an index is as cheap as
        # replaying the log, so older entries are of no use.
        t = self._t
        keep = max(VECTOR_CHANGES_KEPT, self._db.scalar(t.largest_owner_sql) or 0)
        horizon = self._latest_change() - keep
        oldest = self._db.scalar(f"SELECT min(seq) FROM {t.changes}")
        if oldest is not None and oldest <= horizon:
            self._db.conn.execute(f"DELETE FROM {t.changes} WHERE seq <= ?", (horizon,))

    def _put(self, sql: str, rows: Sequence[tuple[object, ...]]) -> int:
        """Run ``sql`` for each row and return how many vectors it wrote.

        The cursor's row count, not the connection's ``total_changes``: that one also counts
        the rows the change-log triggers insert, one more per vector.
        """
        with self._db.guard("writing vectors"), self._db.transaction():
            written = self._db.conn.executemany(sql, rows).rowcount
            if written > 0:
                self._after_write()
            return max(written, 0)

    def clear(self) -> None:
        """Remove every vector of this kind."""
        with self._db.guard("clearing vectors"), self._db.transaction():
            self._db.conn.execute(f"DELETE FROM {self._t.vectors}")
            self._after_write()

    @contextmanager
    def loading(self) -> Iterator[None]:
        """Run the block's writes as one transaction (SQLite needs nothing more)."""
        with self._db.transaction():
            yield


class SQLiteChunkVectors(_VectorTable):
    """The chunks' vectors (`vrom.store.VectorStore`)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db, _CHUNKS)
        self._chunk_columns = chunk_columns(db.stored_version())

    def encoding(self) -> str:
        """Return how the vectors are encoded: ``float32`` (the default) or ``int8``."""
        return self._db.get_meta(VECTOR_ENCODING_META_KEY) or "float32"

    def put(self, vectors: Sequence[tuple[int, bytes]], inputs: Sequence[str] | None = None) -> int:
        """Store vectors by chunk id, with the hash of the text each was embedded from (none:
        never reused for another chunk); chunks deleted meanwhile are skipped. Returns how
        many."""
        hashes: Sequence[str | None] = [None] * len(vectors) if inputs is None else inputs
        return self._put(
            "INSERT OR REPLACE INTO vectors(chunk_id, data, input_hash)"
            " SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM chunks WHERE id = ?1)",
            [(key, data, h) for (key, data), h in zip(vectors, hashes, strict=True)],
        )

    def missing(self, limit: int, after: int = 0) -> list[StoredChunk]:
        """Return up to ``limit`` chunks with ids above ``after`` that have no vector, by id."""
        with self._db.guard("reading chunks to embed"):
            rows = self._db.conn.execute(
                f"SELECT {self._chunk_columns} FROM chunks c"
                " JOIN documents d ON d.id = c.document_id"
                " WHERE c.id > ? AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id)"
                " ORDER BY c.id LIMIT ?",
                (after, limit),
            )
            return chunks_from_rows(rows)

    def for_inputs(self, input_hashes: Sequence[str]) -> dict[str, bytes]:
        """Return a stored vector for each of these embedded-input hashes that has one."""
        with self._db.guard("reading vectors"):
            sql = "SELECT input_hash, data FROM vectors WHERE input_hash IN ({marks})"
            rows = self._db.select_in(sql, list(dict.fromkeys(input_hashes)))
            return {row[0]: row[1] for row in rows}

    def has_any(self) -> bool:
        """Return True when at least one chunk has a vector."""
        with self._db.guard("reading vectors"):
            return bool(self._db.scalar("SELECT EXISTS (SELECT 1 FROM vectors)"))

    def document_ids(self) -> list[tuple[int, int]]:
        """Return (chunk id, document id) for every chunk that has a vector, by chunk id."""
        with self._db.guard("reading chunks"):
            return self._db.conn.execute(
                "SELECT c.id, c.document_id FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
                " ORDER BY c.id"
            ).fetchall()

    # -- vectors kept across a document's rewrite (inside the writer's transaction) ----------

    def by_input_of(self, document_id: int | None) -> dict[str, bytes]:
        """Return the vectors a document holds now, by the hash of their embedded input."""
        if document_id is None:
            return {}
        rows = self._db.conn.execute(
            "SELECT v.input_hash, v.data FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
            " WHERE c.document_id = ? AND v.input_hash IS NOT NULL",
            (document_id,),
        )
        return dict(rows.fetchall())

    def reuse(
        self, new_chunks: Sequence[tuple[int, str | None]], reusable: dict[str, bytes]
    ) -> None:
        """Give new chunks (id, embedded-input hash; None: unknown, none given) the vector
        stored for the same input: ``reusable`` (the document's own, read before its
        rewrite), else any chunk's."""
        any_vectors = self._db.scalar(
            "SELECT EXISTS (SELECT 1 FROM vectors WHERE input_hash IS NOT NULL)"
        )
        if not any_vectors and not reusable:
            return
        rows = []
        for chunk_id, wanted in new_chunks:
            if wanted is None:
                continue
            data = reusable.get(wanted)
            if data is None and any_vectors:
                row = self._db.conn.execute(
                    "SELECT data FROM vectors WHERE input_hash = ? LIMIT 1", (wanted,)
                ).fetchone()
                data = None if row is None else row[0]
            if data is not None:
                rows.append((chunk_id, data, wanted))
        if rows:
            self._db.conn.executemany(
                "INSERT INTO vectors(chunk_id, data, input_hash) VALUES (?, ?, ?)", rows
            )
            self.bump_generation()

    def delete_of(self, document_id: int) -> None:
        """Remove a document's chunk vectors (inside the writer's transaction)."""
        gone = self._db.conn.execute(
            "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)",
            (document_id,),
        ).rowcount
        if gone:
            self.bump_generation()


class SQLiteMemoryVectors(_VectorTable):
    """The memories' vectors (`vrom.store.MemoryVectors`), float32, keyed by memory key."""

    def __init__(self, db: Database) -> None:
        super().__init__(db, _MEMORIES)

    def put(self, vectors: Sequence[tuple[str, bytes]]) -> int:
        """Store vectors by memory id (memories gone meanwhile are skipped); return how many."""
        return self._put(
            "INSERT OR REPLACE INTO memory_vectors(key, data)"
            " SELECT m.key, ?2 FROM memories m WHERE m.id = ?1",
            vectors,
        )

    def missing(self, limit: int, after: str = "") -> list[MemoryRecord]:
        """Return up to ``limit`` memories with ids above ``after`` that have no vector, by id."""
        with self._db.guard("reading memories to embed"):
            rows = self._db.conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id > ? AND NOT EXISTS"
                " (SELECT 1 FROM memory_vectors v WHERE v.key = m.key) ORDER BY m.id LIMIT ?",
                (after, limit),
            )
            return [memory_from_row(row) for row in rows]
