"""The vector side of `SQLiteStore`: vectors by chunk, their generation and change log.

A vector belongs to a chunk and goes when the chunk goes. Triggers number every change in the
``vector_changes`` log so an ANN index (a cache, rebuildable from these rows) can catch up by
replaying it; the log is pruned once replaying would cost more than a rebuild.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from vrom.store import ChunkRecord, StoredChunk, VectorChanges
from vrom.store.sqlite_reading import _CHUNK_COLUMNS, _chunk

VECTOR_CHANGES_KEPT = 10_000
"""The vector change log keeps at least this many entries (more when there are more vectors)."""


class SQLiteVectorsMixin:
    """Vector reads and writes of `SQLiteStore`, over the connection and helpers it provides."""

    _conn: sqlite3.Connection

    if TYPE_CHECKING:

        def transaction(self) -> AbstractContextManager[None]: ...
        def _guard(self, action: str) -> AbstractContextManager[None]: ...
        def _snapshot(self) -> AbstractContextManager[None]: ...
        def _get_meta(self, key: str) -> str | None: ...
        def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        def _select_in(self, sql: str, ids: Sequence[Any]) -> Iterator[Sequence[Any]]: ...

    def chunks_missing_vectors(self, limit: int, after: int = 0) -> list[StoredChunk]:
        """Return up to ``limit`` chunks with ids above ``after`` that have no vector, by id."""
        with self._guard("reading chunks to embed"):
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.id > ? AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id)"
                " ORDER BY c.id LIMIT ?",
                (after, limit),
            )
            return [_chunk(row) for row in rows]

    def put_vectors(self, vectors: Sequence[tuple[int, bytes]]) -> int:
        """Store vectors by chunk id; chunks deleted meanwhile are skipped. Returns how many."""
        with self._guard("writing vectors"), self.transaction():
            before = self._conn.total_changes
            self._conn.executemany(
                "INSERT OR REPLACE INTO vectors(chunk_id, data)"
                " SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM chunks WHERE id = ?1)",
                vectors,
            )
            written = self._conn.total_changes - before
            if written:
                self._bump_vector_generation()
                self._prune_vector_changes()
            return written

    def clear_vectors(self) -> None:
        """Remove every vector (before re-embedding with another model)."""
        with self._guard("clearing vectors"), self.transaction():
            self._conn.execute("DELETE FROM vectors")
            self._bump_vector_generation()
            self._prune_vector_changes()

    def _prune_vector_changes(self) -> None:
        # Past as many changes as there are vectors, rebuilding an index is as cheap as
        # replaying the log, so older entries are of no use. The highest chunk id bounds the
        # vector count from above and, unlike count(*), costs one index lookup.
        keep = max(VECTOR_CHANGES_KEPT, self._scalar("SELECT coalesce(max(id), 0) FROM chunks"))
        horizon = self._latest_vector_change() - keep
        oldest = self._scalar("SELECT min(seq) FROM vector_changes")
        if oldest is not None and oldest <= horizon:
            self._conn.execute("DELETE FROM vector_changes WHERE seq <= ?", (horizon,))

    def vector_change_number(self) -> int:
        """Return the number of the latest vector change (0 before any)."""
        with self._guard("reading vector changes"):
            return self._latest_vector_change()

    def _latest_vector_change(self) -> int:
        row = self._conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'vector_changes'"
        ).fetchone()
        return 0 if row is None else int(row[0])

    def vector_changes(self, after: int) -> VectorChanges | None:
        """Return the chunks whose vector changed after ``after``; None if that is forgotten."""
        with self._guard("reading vector changes"), self._snapshot():
            latest = self._latest_vector_change()
            if after >= latest:
                return VectorChanges(latest, ())
            oldest = self._scalar("SELECT min(seq) FROM vector_changes")
            if oldest is None or oldest > after + 1:
                return None
            rows = self._conn.execute(
                "SELECT DISTINCT chunk_id FROM vector_changes WHERE seq > ? AND seq <= ?"
                " ORDER BY chunk_id",
                (after, latest),
            )
            return VectorChanges(latest, tuple(row[0] for row in rows))

    def vectors_for_hashes(self, content_hashes: Sequence[str]) -> dict[str, bytes]:
        """Return a stored vector for each of these chunk text hashes that has one."""
        with self._guard("reading vectors"):
            found: dict[str, bytes] = {}
            sql = (
                "SELECT c.content_hash, v.data FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
                " WHERE c.content_hash IN ({marks})"
            )
            for content_hash, data in self._select_in(sql, list(dict.fromkeys(content_hashes))):
                found.setdefault(content_hash, data)
            return found

    def vector_rows(self) -> list[tuple[int, bytes]]:
        """Return (chunk id, vector bytes) for every stored vector, by chunk id."""
        with self._guard("reading vectors"):
            return self._conn.execute(
                "SELECT chunk_id, data FROM vectors ORDER BY chunk_id"
            ).fetchall()

    def has_vectors(self) -> bool:
        """Return True when at least one chunk has a vector."""
        with self._guard("reading vectors"):
            return bool(self._scalar("SELECT EXISTS (SELECT 1 FROM vectors)"))

    def vector_generation(self) -> int:
        """Return a number that changes whenever any vector is added or removed."""
        with self._guard("reading meta"):
            return int(self._get_meta("vector_generation") or 0)

    def vectors_of(self, chunk_ids: Sequence[int]) -> dict[int, bytes]:
        """Return the stored vector bytes of these chunks, by chunk id, where they exist."""
        with self._guard("reading vectors"):
            sql = "SELECT chunk_id, data FROM vectors WHERE chunk_id IN ({marks})"
            return {row[0]: row[1] for row in self._select_in(sql, chunk_ids)}

    def chunk_document_ids(self) -> list[tuple[int, int]]:
        """Return (chunk id, note id) for every chunk that has a vector, by chunk id."""
        with self._guard("reading chunks"):
            return self._conn.execute(
                "SELECT c.id, c.document_id FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
                " ORDER BY c.id"
            ).fetchall()

    # -- vectors kept across a note's rewrite ----------------------------------------------

    def _vectors_by_hash(self, document_id: int | None) -> dict[str, bytes]:
        """Return the vectors a note holds now, by chunk text hash (kept across a rewrite)."""
        if document_id is None:
            return {}
        rows = self._conn.execute(
            "SELECT c.content_hash, v.data FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
            " WHERE c.document_id = ?",
            (document_id,),
        )
        return dict(rows.fetchall())

    def _reuse_vectors(
        self, new_chunks: Iterator[tuple[int, ChunkRecord]], reusable: dict[str, bytes]
    ) -> None:
        """Give new chunks the vectors of identical text this or another note already has."""
        any_vectors = self._scalar("SELECT EXISTS (SELECT 1 FROM vectors)")
        if not any_vectors and not reusable:
            return
        rows = []
        for chunk_id, chunk in new_chunks:
            data = reusable.get(chunk.content_hash)
            if data is None and any_vectors:
                row = self._conn.execute(
                    "SELECT v.data FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
                    " WHERE c.content_hash = ? LIMIT 1",
                    (chunk.content_hash,),
                ).fetchone()
                data = None if row is None else row[0]
            if data is not None:
                rows.append((chunk_id, data))
        if rows:
            self._conn.executemany("INSERT INTO vectors(chunk_id, data) VALUES (?, ?)", rows)
            self._bump_vector_generation()

    def _bump_vector_generation(self) -> None:
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES ('vector_generation', '1') ON CONFLICT(key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
