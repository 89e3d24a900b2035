"""The shared store backend: one namespace of a PostgreSQL database with pgvector.

Many vaults and collections share one database, each in its own namespace, read and written by
many processes on many machines at once (see `vrom.store.postgres_database` for transactions,
the write lock and snapshots). `PostgresStore` is made of the same roles as `SQLiteStore`, over
one `PgDatabase`: `PgDocuments` (documents, chunks, links, tags, fields, full-text search),
`PgChunkVectors` and `PgMemories` (with its `PgMemoryVectors`). The vector roles also search
themselves (`vrom.store.roles.NearestVectors`): pgvector's HNSW index answers in the database.

It has no files beside it: `sidecar` is None (no cached graph, no embedding-claim file), and a
compact copy (a pack) is made from a SQLite store, not from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vrom.errors import StorageError
from vrom.store.postgres_database import POOL_SIZE, PgDatabase
from vrom.store.postgres_documents import PgDocuments
from vrom.store.postgres_memories import PgMemories
from vrom.store.postgres_migrations import SCHEMA_VERSION
from vrom.store.postgres_query import RANK_NORMALIZATION
from vrom.store.postgres_schema import (
    CONSISTENCY_CHECKS,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    TEXT_SEARCH_CONFIG,
)
from vrom.store.postgres_vectors import PgChunkVectors
from vrom.store.records import STATUS_WRITES_META_KEY, Sidecar, StoreState
from vrom.store.sql_dialect import Statements
from vrom.store.sql_document_writes import DOCUMENT_GENERATION_META_KEY
from vrom.store.sql_store import SqlStore
from vrom.store.sql_vectors import CHUNK_VECTORS, MEMORY_VECTORS

DEFAULT_NAMESPACE = "default"
_STATE_KEYS = (
    CHUNK_VECTORS.generation_meta,
    MEMORY_VECTORS.generation_meta,
    DOCUMENT_GENERATION_META_KEY,
    STATUS_WRITES_META_KEY,  # held for `keys_failing`, not part of the state
)
_STATE = (
    "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT value FROM meta WHERE key = ?),"
    " (SELECT value FROM meta WHERE key = ?), (SELECT value FROM meta WHERE key = ?),"
    " (SELECT coalesce(max(key), 0) FROM memories)"
)


class PostgresStore(SqlStore[PgDocuments, PgChunkVectors, PgMemories]):
    """A store in one namespace of a PostgreSQL database; see the module docstring."""

    def __init__(self, url: str, namespace: str | None = None, *, create: bool = True) -> None:
        """Open ``namespace`` (default ``default``) of the database at ``url``, creating it
        unless ``create`` is False (see `PgDatabase`)."""
        self._db = PgDatabase(url, namespace or DEFAULT_NAMESPACE, create=create)
        vectors = PgChunkVectors(self._db)
        super().__init__(self._db, PgDocuments(self._db, vectors), vectors, PgMemories(self._db))

    def state(self) -> StoreState:
        # one statement; inside a snapshot its meta values are held, and answer the generation
        # reads until it ends. The keyword version is the document generation: the tsvectors
        # change only with a write of their document.
        with self._documents.sql.reading("reading the store's state") as run:
            row = run.one(_STATE, _STATE_KEYS)
        assert row is not None
        *values, newest = row
        self._db.hold(dict(zip(_STATE_KEYS, values, strict=True)))
        chunks, memories, documents = (int(value or 0) for value in values[:3])
        return StoreState(chunks, memories, str(documents).encode(), int(newest))

    def close(self) -> None:
        self._db.close()

    def sidecar(self, suffix: str) -> Sidecar | None:
        return None

    def compact_copy(self, target: Path) -> None:
        raise StorageError(
            f"store {self.location} is on PostgreSQL: a compact copy (a pack) is made from a"
            " SQLite store; copy this one to a SQLite file first"
        )

    def size(self, run: Statements) -> int:
        """Return the bytes the namespace's tables and indexes take."""
        size = run.scalar(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = ? AND c.relkind IN ('r', 'm')",
            (self._db.schema,),
        )
        return int(size)

    def describe(self) -> dict[str, Any]:
        # with the server and pgvector versions and the vector index, the URL's password masked
        with self._db.guard("describing the backend"):
            engine = self._vectors.search_engine()
            return {
                "backend": "postgresql",
                "store_path": self._db.location,
                "schema_version": SCHEMA_VERSION,
                # notes, chunks and their full-text vectors are written first, in one
                # transaction, with the vectors and their HNSW index in the same database
                "index_write_mode": "postgresql-primary",
                "fts_tokenizers": [
                    f"{TEXT_SEARCH_CONFIG} (Snowball English, no stop words)",
                    "cjk-bigram (applied before indexing)",
                ],
                "capabilities": [
                    "keyword-idf-ts-rank",
                    "cjk-keyword",
                    "metadata-filter",
                    "transactions",
                    "concurrent-readers",
                    "concurrent-writers",
                    "pgvector-hnsw",
                    "shared-namespaces",
                ],
                "details": {
                    "url": self._db.shown_url,
                    "namespace": self._db.namespace,
                    "server_version": self._db.server_version,
                    "pgvector_version": self._db.pgvector_version,
                    "vector_index": engine["kind"],
                    "hnsw_m": HNSW_M,
                    "hnsw_ef_construction": HNSW_EF_CONSTRUCTION,
                    "iterative_scan": engine["iterative_scan"],
                    "keyword_rank": "sum over query terms of BM25 IDF x ts_rank (weights"
                    f" A=1 B=0.5 C=0.25, normalization {RANK_NORMALIZATION})",
                    "pool_size": POOL_SIZE,
                },
            }

    def integrity_problems(self) -> list[str]:
        with self.documents.sql.snapshot("checking integrity") as run:
            return self.failed_checks(run, CONSISTENCY_CHECKS)
