"""The reads of the vector roles (`vrom.store.VectorStore`, `vrom.store.MemoryVectors`),
written once over a `Dialect`: one table of (integer key, bytes) per kind, with a generation in
``meta`` and a numbered change log.

Chunk vectors are keyed by chunk id and go with their chunk; memory vectors are keyed by each
memory's integer key and go with their memory. A vector index (a cache, rebuildable from these
rows) catches up by replaying the change log, pruned once replaying would cost more than a
rebuild. A backend adds how vectors are written and numbered (SQLite: triggers; PostgreSQL: a
counter under its write lock, and a pgvector copy of each vector it searches itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar

from vrom.store.records import (
    VECTOR_ENCODING_META_KEY,
    MemoryRecord,
    StoredChunk,
    VectorChanges,
)
from vrom.store.rows import CHUNK_COLUMNS, MEMORY_COLUMNS, chunks_from_rows, memory_from_row
from vrom.store.sql_dialect import Dialect, Statements

VECTOR_CHANGES_KEPT = 10_000
"""A change log keeps at least this many entries (more when there are more vectors)."""


@dataclass(frozen=True)
class VectorTables:
    """Where one kind of vectors lives."""

    vectors: str  # (key column, data, ...)
    key: str
    changes: str  # (seq, key)
    generation_meta: str
    change_meta: str  # the latest change number (PostgreSQL; SQLite's is its sequence)
    dims_meta: str  # the vectors' dimensions (PostgreSQL)
    index: str  # the HNSW index (PostgreSQL)
    largest_owner_sql: str  # an upper bound on the number of vectors, from one index lookup


CHUNK_VECTORS = VectorTables(
    "vectors",
    "chunk_id",
    "vector_changes",
    "vector_generation",
    "vector_change_number",
    "vector_dims",
    "vectors_hnsw",
    "SELECT max(id) FROM chunks",
)
MEMORY_VECTORS = VectorTables(
    "memory_vectors",
    "key",
    "memory_vector_changes",
    "memory_vector_generation",
    "memory_vector_change_number",
    "memory_vector_dims",
    "memory_vectors_hnsw",
    "SELECT max(key) FROM memories",
)


class SqlVectors:
    """Vectors by integer key, numbered changes included: what a vector index is built from
    (`vrom.store.VectorSource`).

    Keys are chunk ids (`SqlChunkVectors`) or memory keys (`SqlMemoryVectors`). The source is
    the truth; an index over it is a cache that catches up by replaying `changes`. The reads
    are shared; a backend adds `latest_change` and its writes.
    """

    change_key: ClassVar[str | None] = None
    """The change log's key column (None: the vectors' own key column's name)."""

    def __init__(self, dialect: Dialect, tables: VectorTables) -> None:
        self._sql = dialect
        self._t = tables

    def latest_change(self, run: Statements) -> int:
        """Return the number of the latest vector change, read with ``run``."""
        raise NotImplementedError

    def counted(self, run: Statements, latest: int) -> None:
        """Count a new generation after a write whose last change is ``latest``, and forget the
        changes a replay would not use: past as many as there are vectors, rebuilding an index
        costs what replaying the log does."""
        t = self._t
        run.count_up(t.generation_meta)
        keep = max(VECTOR_CHANGES_KEPT, int(run.scalar(t.largest_owner_sql) or 0))
        run.run(f"DELETE FROM {t.changes} WHERE seq <= ?", (latest - keep,))

    def identity(self) -> str:
        """Return a stamp of the store these vectors live in (a re-created store differs)."""
        raise NotImplementedError

    def clear(self) -> None:
        """Remove every vector of this kind."""
        raise NotImplementedError

    def loading(self) -> AbstractContextManager[None]:
        """Run the block's `put` calls as one transaction, written as fast as the backend can
        (PostgreSQL builds its HNSW index once at the end when the store held no vectors)."""
        raise NotImplementedError

    def encoding(self) -> str:
        """Return how the vectors are encoded: ``float32`` or ``int8``."""
        return "float32"

    def rows(self) -> list[tuple[int, bytes]]:
        """Return (key, vector bytes) for every vector, by key."""
        t = self._t
        with self._sql.reading("reading vectors") as run:
            rows = run.rows(f"SELECT {t.key}, data FROM {t.vectors} ORDER BY {t.key}")
            return [(row[0], bytes(row[1])) for row in rows]

    def of(self, keys: Sequence[int]) -> dict[int, bytes]:
        """Return the vector bytes of these keys, where they exist."""
        t = self._t
        with self._sql.reading("reading vectors") as run:
            sql = f"SELECT {t.key}, data FROM {t.vectors} WHERE {t.key} {{in}}"
            return {row[0]: bytes(row[1]) for row in run.rows_in(sql, [int(k) for k in keys])}

    def count(self) -> int:
        """Return how many vectors there are."""
        with self._sql.reading("counting vectors") as run:
            return int(run.scalar(f"SELECT count(*) FROM {self._t.vectors}"))

    def generation(self) -> int:
        """Return a number that changes whenever any vector is added or removed."""
        with self._sql.reading("reading meta") as run:
            value = run.meta(self._t.generation_meta)
            return int(value or 0)

    def change_number(self) -> int:
        """Return the number of the latest vector change (0 before any)."""
        with self._sql.reading("reading vector changes") as run:
            return self.latest_change(run)

    def changes(self, after: int) -> VectorChanges | None:
        """Return the keys whose vector changed after change number ``after``; None when the
        log no longer reaches back that far (an index then rebuilds)."""
        t = self._t
        with self._sql.snapshot("reading vector changes") as run:
            latest = self.latest_change(run)
            if after >= latest:
                return VectorChanges(latest, ())
            oldest = run.scalar(f"SELECT min(seq) FROM {t.changes}")
            if oldest is None or oldest > after + 1:
                return None
            key = self.change_key or t.key
            rows = run.rows(
                f"SELECT DISTINCT {key} FROM {t.changes} WHERE seq > ? AND seq <= ? ORDER BY {key}",
                (after, latest),
            )
            return VectorChanges(latest, tuple(row[0] for row in rows))


_ANY_CHUNK_VECTOR = "SELECT EXISTS (SELECT 1 FROM vectors)"
"""Whether the store holds a chunk vector: `has_any`, and `reused` before it looks any up."""


class SqlChunkVectors(SqlVectors):
    """The chunks' vectors (`vrom.store.VectorStore`): one per chunk, gone with its chunk."""

    def __init__(self, dialect: Dialect, chunk_columns: str = CHUNK_COLUMNS) -> None:
        super().__init__(dialect, CHUNK_VECTORS)
        self._chunk_columns = chunk_columns

    def put(self, vectors: Sequence[tuple[int, bytes]], inputs: Sequence[str] | None = None) -> int:
        """Store encoded vectors by chunk id (chunks deleted meanwhile are skipped); return
        how many were written.

        ``inputs``: the hash of the text each vector was embedded from, in the same order
        (`vrom.ingest.embedding.input_hash`). A vector stored without one serves its own
        chunk only: it is never reused for another (`for_inputs`, a note written again).
        """
        raise NotImplementedError

    def encoding(self) -> str:
        with self._sql.reading("reading meta") as run:
            return run.meta(VECTOR_ENCODING_META_KEY) or "float32"

    def missing(self, limit: int, after: int = 0) -> list[StoredChunk]:
        """Return up to ``limit`` chunks with ids above ``after`` that have no vector, by id."""
        with self._sql.reading("reading chunks to embed") as run:
            rows = run.rows(
                f"SELECT {self._chunk_columns} FROM chunks c"
                " JOIN documents d ON d.id = c.document_id WHERE c.id > ? AND NOT EXISTS"
                " (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.chunk_id > ?)"
                " ORDER BY c.id LIMIT ?",  # "> ?" twice: else the anti join reads every vector
                (after, after, limit),
            )
            return chunks_from_rows(rows)

    def for_inputs(self, input_hashes: Sequence[str]) -> dict[str, bytes]:
        """Return a stored vector (the first chunk's) for each of these embedded-input hashes
        that has one."""
        with self._sql.reading("reading vectors") as run:
            return self.found(run, list(dict.fromkeys(input_hashes)))

    def found(self, run: Statements, input_hashes: Sequence[str]) -> dict[str, bytes]:
        """Return `for_inputs`, read with ``run``."""
        rows = run.rows_in(
            "SELECT input_hash, data, chunk_id FROM vectors WHERE input_hash {in}", input_hashes
        )
        rows.sort(key=lambda row: -row[2])  # the first chunk's last: it is the one kept
        return {row[0]: bytes(row[1]) for row in rows}

    def has_any(self) -> bool:
        """Return True when at least one chunk has a vector."""
        with self._sql.reading("reading vectors") as run:
            return bool(run.scalar(_ANY_CHUNK_VECTOR))

    def document_ids(self) -> list[tuple[int, int]]:
        """Return (chunk id, document id) for every chunk that has a vector, by chunk id."""
        with self._sql.reading("reading chunks") as run:
            rows = run.rows(
                "SELECT c.id, c.document_id FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
                " ORDER BY c.id"
            )
            return [(row[0], row[1]) for row in rows]

    def by_input_of(self, run: Statements, document_id: int | None) -> dict[str, bytes]:
        """Return the vectors a document holds now, by the hash of their embedded input
        (inside the writer's transaction, before the document is rewritten)."""
        if document_id is None:
            return {}
        rows = run.rows(
            "SELECT v.input_hash, v.data FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
            " WHERE c.document_id = ? AND v.input_hash IS NOT NULL",
            (document_id,),
        )
        return {row[0]: bytes(row[1]) for row in rows}

    def reused(
        self, run: Statements, new_chunks: Sequence[tuple[int, str | None]], own: dict[str, bytes]
    ) -> list[tuple[int, bytes, str]]:
        """Return (chunk id, vector, embedded-input hash) for each new chunk (id, hash or None)
        whose input has a stored vector: in ``own`` (the rewritten documents', read before
        their rewrite), else any chunk's (`found`: one read for all); each backend writes them
        in its `reuse`."""
        wanted = {h for _, h in new_chunks if h is not None}
        if not wanted:
            return []
        if not own and not run.scalar(_ANY_CHUNK_VECTOR):
            return []  # a keyword-only store: one probe, not a lookup per thousand hashes
        found = {**self.found(run, [h for h in wanted if h not in own]), **own}
        return [(key, found[h], h) for key, h in new_chunks if h is not None and h in found]


class SqlMemoryVectors(SqlVectors):
    """The memories' vectors (`vrom.store.MemoryVectors`), keyed by each memory's key."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect, MEMORY_VECTORS)

    def put(self, vectors: Sequence[tuple[str, bytes]]) -> int:
        """Store vectors by memory id (memories gone meanwhile are skipped); return how many."""
        raise NotImplementedError

    def missing(
        self, limit: int, after: str = "", since: tuple[int, Sequence[int]] | None = None
    ) -> list[MemoryRecord]:
        """Return up to ``limit`` memories with ids above ``after`` that have no vector, by id.

        ``since`` (a key, and keys) looks only among the memories with a greater key or one of
        those keys: the ones added, and the ones whose vector changed, since a look that found
        none missing. It costs those, where a whole look costs a probe per memory (~0.5 s at
        100k, after every memory remembered).
        """
        lacking = "NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.key = m.key)"
        with self._sql.reading("reading memories to embed") as run:
            if since is None:
                rows = run.rows(
                    f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id > ? AND {lacking}"
                    " ORDER BY m.id LIMIT ?",
                    (after, limit),
                )
                return [memory_from_row(row) for row in rows]
            rows = run.rows(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.key > ? AND m.id > ?"
                f" AND {lacking} ORDER BY m.id LIMIT ?",
                (since[0], after, limit),
            )
            rows += run.rows_in(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {lacking} AND m.key {{in}}",
                sorted(set(since[1])),
            )
        found = {memory.id: memory for memory in map(memory_from_row, rows) if memory.id > after}
        return [found[memory_id] for memory_id in sorted(found)][:limit]
