"""Vectors in PostgreSQL: the stored bytes, a pgvector copy, an HNSW index, and a change log.

Each vector is kept twice in one row: ``data``, the bytes the embedder's encoding made (what
`VectorSource.rows` returns, as on SQLite), and ``embedding``, the same vector as pgvector's
``vector`` for the database to search. The first vectors of a store fix the column's
dimensions and create its HNSW index (cosine; ``m`` and ``ef_construction`` as the usearch
graph's); clearing the vectors (a new model) drops both again.

`nearest` answers a search by meaning in the database (`vrom.store.roles.NearestVectors`), so
the search core builds no index of its own from these rows: HNSW with ``hnsw.ef_search`` per
query and pgvector's iterative scan, so a filtered search still finds ``k`` vectors whenever
``k`` pass the filter; or exact (a sequential scan), when asked or when the filter leaves few.

Changes are numbered in a log, as on SQLite, so a reader can tell what changed; the numbers come
from a counter row updated under the namespace's write lock, so they are in commit order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from psycopg import sql

from vrom.errors import StorageError, ValidationError
from vrom.store.postgres_copy import copy_vectors
from vrom.store.postgres_database import Connection, PgDatabase
from vrom.store.postgres_dialect import PgDialect
from vrom.store.postgres_schema import (
    HNSW_EF_CONSTRUCTION,
    HNSW_EF_SEARCH,
    HNSW_M,
    HNSW_MAX_EF_SEARCH,
)
from vrom.store.records import VECTOR_ENCODING_META_KEY
from vrom.store.rows import CHUNK_COLUMNS
from vrom.store.sql_dialect import Statements
from vrom.store.sql_vectors import (
    CHUNK_VECTORS,
    MEMORY_VECTORS,
    SqlChunkVectors,
    SqlMemoryVectors,
    SqlVectors,
    VectorTables,
)

EXACT_FILTER_ROWS = 2_000
"""A filter leaving at most this many vectors is searched exactly: scoring them all is cheaper
than walking the graph past the others."""
Inserter = Callable[[Connection, Sequence[Any]], list[int]]
ITERATIVE_SCAN = "strict_order"
"""pgvector 0.8's ``hnsw.iterative_scan``: a filtered search goes on scanning the graph until
``k`` rows pass, keeping the results in distance order."""


def floats(data: bytes, encoding: str) -> npt.NDArray[np.float32]:
    """Return the float32 vector stored as ``data``: ``float32`` bytes, or ``int8`` values
    followed by their float32 scale (re-normalised, as the index's decoder does)."""
    if encoding == "int8":
        values = np.frombuffer(data[:-4], dtype=np.int8).astype(np.float32)
        scaled = values * np.frombuffer(data[-4:], dtype="<f4")[0]
        norm = max(float(np.linalg.norm(scaled)), 1e-12)
        unit: npt.NDArray[np.float32] = (scaled / norm).astype(np.float32)
        return unit
    stored: npt.NDArray[np.float32] = np.frombuffer(data, dtype="<f4").astype(np.float32)
    return stored


def similarity(distance: float, metric: str) -> float:
    """Return the score of a cosine distance in ``metric`` (vectors are unit length): the cosine
    for ``cosine`` and ``dot``, minus the euclidean distance for ``euclidean``."""
    if metric == "euclidean":
        return -float(np.sqrt(max(0.0, 2.0 * distance)))
    return 1.0 - distance


class _PgVectorTable(SqlVectors):
    """The writes, change log and search shared by chunk and memory vectors."""

    change_key: ClassVar[str | None] = "key"

    def __init__(self, db: PgDatabase, tables: VectorTables) -> None:
        super().__init__(PgDialect(db), tables)
        self._db = db
        self._iterative = tuple(int(p) for p in db.pgvector_version.split(".")[:2]) >= (0, 8)
        self._index_deferred = False

    def identity(self) -> str:  # a re-created namespace differs
        return f"{self._db.namespace_id}:{self._db.get_meta('created_unix') or ''}"

    def latest_change(self, run: Statements) -> int:
        return int(run.scalar("SELECT value FROM meta WHERE key = ?", (self._t.change_meta,)) or 0)

    # -- writing (inside the namespace's write lock) -----------------------------------------

    def log(self, run: Statements, keys: Sequence[int]) -> None:
        """Number the changes of these keys' vectors and count a new generation."""
        if not keys:
            return
        latest = int(
            run.scalar(
                "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key)"
                " DO UPDATE SET value = (meta.value::bigint + ?)::text RETURNING value",
                (self._t.change_meta, str(len(keys)), len(keys)),
            )
        )
        run.run(
            f"INSERT INTO {self._t.changes}(seq, key)"
            " SELECT ? + n - 1, k FROM unnest(?::bigint[]) WITH ORDINALITY AS u(k, n)",
            (latest - len(keys) + 1, list(keys)),
        )
        self.counted(run, latest)

    def _dims(self, conn: Connection) -> int | None:
        value = self._db.meta_value(conn, self._t.dims_meta)
        return None if value is None else int(value)

    def fit(self, conn: Connection, dims: int) -> None:
        """Make the table hold vectors of ``dims`` dimensions, with its HNSW index."""
        t = self._t
        stored = self._dims(conn)
        if stored == dims:
            return
        if stored is not None:
            raise StorageError(
                f"store {self._db.location} holds vectors of {stored} dimensions, not {dims}:"
                " rebuild the vectors ('vrom embed --rebuild') to change the model"
            )
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN embedding TYPE vector({})").format(
                sql.Identifier(t.vectors), sql.Literal(dims)
            )
        )
        if not self._index_deferred:
            self._create_index(conn)
        self._db.put_meta(conn, t.dims_meta, str(dims))

    def _create_index(self, conn: Connection) -> None:
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops)"
                " WITH (m = {}, ef_construction = {})"
            ).format(
                sql.Identifier(self._t.index),
                sql.Identifier(self._t.vectors),
                sql.Literal(HNSW_M),
                sql.Literal(HNSW_EF_CONSTRUCTION),
            )
        )

    @contextmanager
    def loading(self) -> Iterator[None]:
        # into a table holding no vectors, the HNSW index is built once at the end rather than
        # row by row (many times faster; a failed block rolls back to the index as it was)
        t = self._t
        with self._sql.writing("loading vectors") as run:
            conn = run.conn
            empty = not self._db.scalar(conn, f"SELECT EXISTS (SELECT 1 FROM {t.vectors})")
            if empty:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(t.index)))
                conn.execute("ANALYZE documents, chunks")  # the notes a sync just wrote
            self._index_deferred = empty
            try:
                yield
            finally:
                self._index_deferred = False
            if empty and self._dims(conn) is not None:
                self._create_index(conn)

    def write(self, rows: Sequence[Any], dims: int, insert: Inserter) -> int:
        """Write ``rows`` of vectors of ``dims`` dimensions with ``insert`` (which returns the
        keys it wrote) in one transaction, and log what it wrote."""
        with self._db.guard("writing vectors"):
            if not rows:
                return 0
            with self._sql.writing("writing vectors") as run:
                self.fit(run.conn, dims)
                written = insert(run.conn, rows)
                self.log(run, written)
                return len(written)

    def clear(self) -> None:  # the index goes too: the next model may differ
        t = self._t
        with self._sql.writing("clearing vectors") as run:
            conn = run.conn
            gone = [row[0] for row in conn.execute(f"DELETE FROM {t.vectors} RETURNING {t.key}")]
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(t.index)))
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN embedding TYPE vector").format(
                    sql.Identifier(t.vectors)
                )
            )
            conn.execute("DELETE FROM meta WHERE key = %s", (t.dims_meta,))
            self.log(run, gone)
            run.count_up(t.generation_meta)

    # -- searching -------------------------------------------------------------------------

    def search_engine(self) -> dict[str, Any]:
        return {
            "kind": "pgvector-hnsw",
            "pgvector_version": self._db.pgvector_version,
            "distance": "cosine",
            "m": HNSW_M,
            "ef_construction": HNSW_EF_CONSTRUCTION,
            "ef_search": HNSW_EF_SEARCH,
            "iterative_scan": ITERATIVE_SCAN if self._iterative else "off",
        }

    def nearest(
        self,
        vector: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None = None,
        *,
        ef_search: int | None = None,
        exact: bool = False,
        metric: str = "cosine",
    ) -> list[tuple[int, float]]:
        t = self._t
        if allowed is not None and not len(allowed):
            return []
        query = np.asarray(vector, dtype=np.float32)
        with self._db.guard("searching vectors"), self._db.local_transaction() as conn:
            dims = self._dims(conn)
            if dims is None:
                return []
            if query.shape[-1] != dims:
                raise ValidationError(f"query has {query.shape[-1]} dimensions, the index {dims}")
            where = "" if allowed is None else f" WHERE {t.key} = ANY(%s)"
            keys: list[Any] = [] if allowed is None else [list(allowed)]
            rows: list[tuple[Any, ...]] = []
            use_index = not exact and (allowed is None or len(allowed) > EXACT_FILTER_ROWS)
            if use_index:
                ef = min(max(ef_search or HNSW_EF_SEARCH, k), HNSW_MAX_EF_SEARCH)
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
                if self._iterative:
                    conn.execute(
                        "SELECT set_config('hnsw.iterative_scan', %s, true)", (ITERATIVE_SCAN,)
                    )
                rows = conn.execute(
                    f"SELECT {t.key}, embedding <=> %s FROM {t.vectors}{where}"
                    " ORDER BY embedding <=> %s LIMIT %s",
                    [query, *keys, query, k],
                ).fetchall()
                wanted = k if allowed is None else min(k, len(allowed))
                if len(rows) < wanted:  # the graph gave up early: is there more to find?
                    available = self._db.scalar(
                        conn, f"SELECT count(*) FROM {t.vectors}{where}", keys
                    )
                    use_index = len(rows) >= min(wanted, int(available or 0))
            if not use_index:
                # "+ 0": the index serves only "ORDER BY embedding <=> q": this scores every row
                rows = conn.execute(
                    f"SELECT {t.key}, embedding <=> %s AS distance FROM {t.vectors}{where}"
                    f" ORDER BY (embedding <=> %s) + 0, {t.key} LIMIT %s",
                    [query, *keys, query, k],
                ).fetchall()
            return [(int(key), similarity(float(distance), metric)) for key, distance in rows]


class PgChunkVectors(SqlChunkVectors, _PgVectorTable):
    """The chunks' vectors (`vrom.store.VectorStore`)."""

    def __init__(self, db: PgDatabase) -> None:
        _PgVectorTable.__init__(self, db, CHUNK_VECTORS)
        self._chunk_columns = CHUNK_COLUMNS

    def put(self, vectors: Sequence[tuple[int, bytes]], inputs: Sequence[str] | None = None) -> int:
        encoding = self.encoding()
        hashes: Sequence[str | None] = [None] * len(vectors) if inputs is None else inputs
        latest = {  # a chunk given twice keeps the last
            key: (data, made_from) for (key, data), made_from in zip(vectors, hashes, strict=True)
        }
        rows = [
            (key, data, floats(data, encoding), made_from)
            for key, (data, made_from) in latest.items()
        ]
        return self.write(rows, len(rows[0][2]) if rows else 0, copy_vectors)

    # -- `vrom.store.sql_document_writes.KeptVectors` --------------------------------------

    def reuse(
        self, run: Statements, new_chunks: Sequence[tuple[int, str | None]], own: dict[str, bytes]
    ) -> None:
        rows_in = self.reused(run, new_chunks, own)
        if not rows_in:
            return
        conn = run.conn
        encoding = self._db.meta_value(conn, VECTOR_ENCODING_META_KEY) or "float32"
        self.fit(conn, len(floats(rows_in[0][1], encoding)))
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO vectors(chunk_id, data, embedding, input_hash)"
                " VALUES (%s, %s, %s, %s)",
                [(key, data, floats(data, encoding), wanted) for key, data, wanted in rows_in],
            )
        self.log(run, [key for key, _, _ in rows_in])

    def delete_of(self, run: Statements, document_id: int) -> None:
        gone = run.rows(
            "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)"
            " RETURNING chunk_id",
            (document_id,),
        )
        self.log(run, [row[0] for row in gone])


class PgMemoryVectors(SqlMemoryVectors, _PgVectorTable):
    """The memories' vectors (`vrom.store.MemoryVectors`), float32, keyed by memory key."""

    def __init__(self, db: PgDatabase) -> None:
        _PgVectorTable.__init__(self, db, MEMORY_VECTORS)

    def put(self, vectors: Sequence[tuple[str, bytes]]) -> int:
        return self.write(
            [(data, floats(data, "float32"), memory_id) for memory_id, data in vectors],
            len(vectors[0][1]) // 4 if vectors else 0,
            _insert_memory_vectors,
        )


def _insert_memory_vectors(conn: Connection, rows: Sequence[Any]) -> list[int]:
    """Insert (data, embedding, memory id) rows; return the keys of the memories still there."""
    written: list[int] = []
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO memory_vectors(key, data, embedding)"
            " SELECT m.key, %s, %s FROM memories m WHERE m.id = %s"
            " ON CONFLICT (key) DO UPDATE SET data = excluded.data,"
            " embedding = excluded.embedding RETURNING key",
            rows,
            returning=True,
        )
        while True:
            written += [row[0] for row in cursor.fetchall()]
            if not cursor.nextset():
                return written
