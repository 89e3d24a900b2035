"""The default store backend: one SQLite database file (WAL mode, FTS5) per vault.

Readers and one writer work at the same time (WAL); a busy timeout makes a second writer wait
instead of failing. Every write happens inside `SQLiteStore.transaction`, so a process killed at
any moment leaves each note either fully written or not at all.

`SQLiteStore` opens, migrates and guards the connection and writes notes; its note lookups and
keyword search live in `sqlite_reading`, its vectors and their change log in `sqlite_vectors`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vrom.errors import NotFoundError, StorageError
from vrom.store import ChunkRecord, DocumentRecord, DocumentState, LinkRecord, StoreCounts
from vrom.store.fts_text import segment
from vrom.store.schema import CONSISTENCY_CHECKS, FTS_TOKENIZER, MIGRATIONS, SCHEMA_VERSION
from vrom.store.sqlite_connect import _checked_key, _driver, _statements
from vrom.store.sqlite_reading import SQLiteReadingMixin
from vrom.store.sqlite_vectors import SQLiteVectorsMixin

BUSY_TIMEOUT_SECONDS = 60.0
STALE_CREATION_SECONDS = 3600.0
_DOCUMENT_WRITE_COLUMNS = """
    path, path_key, name_key, title, frontmatter, content_hash, mtime, size,
    human_relevance_score, chunk_strategy, chunk_count, indexed_at
"""


class SQLiteStore(SQLiteReadingMixin, SQLiteVectorsMixin):
    """A vault's store in one SQLite file; see the module docstring for the guarantees."""

    def __init__(
        self,
        path: Path | None,
        *,
        create: bool = True,
        key: str | None = None,
        read_only: bool = False,
    ) -> None:
        """Open the store at ``path``; a missing file is created unless ``create`` is False.

        A new store is built under a temporary name and appears at ``path`` only once its schema
        is committed, so no process ever sees a half-made store. An existing file must hold a
        vrom schema: another program's database is refused before anything is written to it.
        ``path=None`` keeps the store in memory (gone when closed). With ``key`` the file is
        encrypted with SQLCipher (the ``encrypted`` extra): every page, the WAL included, is
        unreadable without the key, and a wrong key is a `StorageError`. ``read_only`` opens an
        existing file as immutable (a verified pack: nothing, not even a WAL switch, is written;
        its schema must be this vrom's).
        """
        self._path = None if path is None else Path(path)
        self._depth = 0
        self._closed = False
        self._key = _checked_key(key)
        self._driver = _driver(self._key is not None)
        if self._path is None:
            self._connect(None, require_schema=False)
            return
        if read_only:
            self._connect_read_only(self._path)
            return
        if not self._path.exists():
            if not create:
                raise NotFoundError(
                    f"no store at {self._path}: index the vault first ('vrom index')"
                )
            self._create_file(self._path)
        self._connect(self._path, require_schema=True)

    def _connect(self, path: Path | None, *, require_schema: bool) -> None:
        try:
            self._conn: sqlite3.Connection = self._driver.connect(
                ":memory:" if path is None else str(path),
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
        except self._driver.Error as exc:
            raise StorageError(f"cannot open store {self.location}: {exc}") from exc
        try:
            if self._key is not None:
                # PRAGMA takes no bound parameters: the key is quoted as an SQL string literal
                self._conn.execute("PRAGMA key = '" + self._key.replace("'", "''") + "'")
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
            if require_schema and self._stored_version() == 0:
                raise StorageError(f"{self.location} is not a vrom store (it has no vrom schema)")
            self._configure()
            self._migrate()
        except self._driver.Error as exc:
            self._conn.close()
            raise self._error("opening", exc) from exc
        except StorageError:
            self._conn.close()
            raise

    def _connect_read_only(self, path: Path) -> None:
        if not path.is_file():
            raise NotFoundError(f"no store at {path}")
        uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
        try:
            self._conn = self._driver.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False
            )
            version = self._stored_version()
        except self._driver.Error as exc:
            raise self._error("opening", exc) from exc
        if version != SCHEMA_VERSION:
            self._conn.close()
            raise StorageError(
                f"{path} has store schema {version} but this vrom reads {SCHEMA_VERSION} "
                "read-only: rebuild it with this vrom (or upgrade vrom)"
            )

    def _create_file(self, path: Path) -> None:
        folder, name = path.parent, path.name
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for stale in folder.glob(f"{name}.creating-*"):  # left by a process killed meanwhile
                try:
                    if time.time() - stale.stat().st_mtime > STALE_CREATION_SECONDS:
                        stale.unlink()
                except FileNotFoundError:
                    continue  # another process cleaned it up first
        except OSError as exc:
            raise StorageError(f"cannot create store {path}: {exc}") from exc
        temporary = folder / f"{name}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            self._connect(temporary, require_schema=False)
            self._conn.close()  # the last connection folds the WAL into the file
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process published its store first: use that one
            except OSError:  # a filesystem without hard links
                if not path.exists():
                    os.replace(temporary, path)
        except OSError as exc:
            raise StorageError(f"cannot create store {path}: {exc}") from exc
        finally:
            for leftover in (temporary, Path(f"{temporary}-wal"), Path(f"{temporary}-shm")):
                leftover.unlink(missing_ok=True)

    # -- connection ------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """The database file's path (``:memory:`` for a store in memory)."""
        return ":memory:" if self._path is None else str(self._path)

    @property
    def path(self) -> Path | None:
        """The database file, or None for a store in memory."""
        return self._path

    @property
    def encrypted(self) -> bool:
        """True when the database file is encrypted (opened with a key)."""
        return self._key is not None

    def _error(self, action: str, exc: Exception) -> StorageError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StorageError(
                f"store {self.location} is busy while {action} (another process holds it "
                "for writing): try again"
            )
        if isinstance(exc, self._driver.DatabaseError) and "not a database" in text:
            if self._key is not None:
                return StorageError(
                    f"cannot open store {self.location}: the key is wrong, or the file is not "
                    "an encrypted vrom store"
                )
            return StorageError(
                f"{self.location} is not a vrom store (not a SQLite database; if it is an "
                "encrypted store, give its key)"
            )
        return StorageError(f"store {self.location} failed while {action}: {text}")

    def _configure(self) -> None:
        if (
            self._path is not None
            and self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
        ):
            self._enable_wal()
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("PRAGMA foreign_keys = ON")

    def _enable_wal(self) -> None:
        """Switch to WAL, waiting out another process's lock (the pragma does not wait by itself).

        A filesystem without WAL support keeps the rollback journal: slower, still correct.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except self._driver.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _stored_version(self) -> int:
        has_meta = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        if not has_meta:
            return 0
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        version = self._stored_version()
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"store {self.location} has schema version {version}, newer than this vrom "
                f"understands ({SCHEMA_VERSION}): upgrade vrom"
            )
        if version == SCHEMA_VERSION:
            return
        with self.transaction():
            version = self._stored_version()  # another process may have migrated meanwhile
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _statements(MIGRATIONS[number - 1]):
                    self._conn.execute(statement)
                self._put_meta("schema_version", str(number))
            if self._get_meta("created_unix") is None:
                self._put_meta("created_unix", repr(time.time()))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the block's writes as one transaction (re-entrant: inner blocks join the outer)."""
        self._check_open()
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except self._driver.Error as exc:
            raise self._error("starting a write", exc) from exc
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._conn.rollback()
            raise
        self._depth = 0
        try:
            self._conn.commit()
        except self._driver.Error as exc:
            self._conn.rollback()
            raise self._error("committing", exc) from exc

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Convert sqlite3 errors raised inside the block into `StorageError`."""
        self._check_open()
        try:
            yield
        except self._driver.Error as exc:
            raise self._error(action, exc) from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside the block see one state of the store: a search that reads twice (rank
        first, whole chunks after) never finds a chunk gone that another process rewrote."""
        with self._guard("reading"), self._snapshot():
            yield

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Run the block's reads against one snapshot of the database (a read transaction)."""
        if self._depth or self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"store {self.location} is closed")

    def close(self) -> None:
        """Close the connection; later calls raise `StorageError`."""
        if not self._closed:
            self._closed = True
            self._conn.close()

    # -- meta ------------------------------------------------------------------------------

    def _get_meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _put_meta(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def get_meta(self, key: str) -> str | None:
        """Return a value of the ``meta`` table, or None."""
        with self._guard("reading meta"):
            return self._get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        with self._guard("writing meta"), self.transaction():
            self._put_meta(key, value)

    # -- writing notes ---------------------------------------------------------------------

    def document_states(self) -> dict[str, DocumentState]:
        """Return path → state for every stored note."""
        with self._guard("reading note states"):
            rows = self._conn.execute(
                "SELECT path, id, content_hash, mtime, size, chunk_strategy FROM documents"
            )
            return {row[0]: DocumentState(*row[1:]) for row in rows}

    def document_state(self, path: str) -> DocumentState | None:
        """Return the state of one stored note, or None."""
        with self._guard("reading a note state"):
            row = self._conn.execute(
                "SELECT id, content_hash, mtime, size, chunk_strategy FROM documents WHERE path = ?",
                (path,),
            ).fetchone()
            return None if row is None else DocumentState(*row)

    def _delete_children(self, document_id: int) -> None:
        self._conn.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE document_id = ?)",
            (document_id,),
        )
        gone = self._conn.execute(
            "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)",
            (document_id,),
        ).rowcount
        if gone:
            self._bump_vector_generation()
        for table in ("chunks", "links", "tags"):
            self._conn.execute(f"DELETE FROM {table} WHERE document_id = ?", (document_id,))

    def _claim_path(self, path: str, document_id: int | None) -> int | None:
        """Return the id to write a note under, clearing the path if another note holds it."""
        if document_id is not None and not self._scalar(
            "SELECT count(*) FROM documents WHERE id = ?", (document_id,)
        ):
            document_id = None  # deleted by another writer since the caller looked
        holder = self._conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
        if holder is None or holder[0] == document_id:
            return document_id
        if document_id is None:
            return int(holder[0])  # added by another writer since the caller looked
        self._delete_children(holder[0])  # a note moved onto a path another note still held
        self._conn.execute("DELETE FROM documents WHERE id = ?", (holder[0],))
        return document_id

    def _next_id(self, table: str) -> int:
        row = self._conn.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),"
            f" coalesce((SELECT max(id) FROM {table}), 0))",
            (table,),
        ).fetchone()
        return int(row[0]) + 1

    def put_document(
        self,
        document: DocumentRecord,
        chunks: Sequence[ChunkRecord],
        links: Sequence[LinkRecord],
        tags: Sequence[str],
        document_id: int | None = None,
    ) -> int:
        """Write a note with its chunks, links and tags, replacing what ``document_id`` held.

        Another process may have added or removed the same note since the caller looked: a note
        already holding this path is replaced, and a vanished ``document_id`` is added anew.
        """
        with self._guard("writing a note"):
            values = (
                document.path,
                document.path_key,
                document.name_key,
                document.title,
                json.dumps(document.frontmatter, ensure_ascii=False),
                document.content_hash,
                document.mtime,
                document.size,
                document.human_relevance_score,
                document.chunk_strategy,
                len(chunks),
                time.time(),
            )
            with self.transaction():
                document_id = self._claim_path(document.path, document_id)
                reusable = self._vectors_by_hash(document_id)
                if document_id is None:
                    document_id = self._next_id("documents")
                    self._conn.execute(
                        f"INSERT INTO documents(id, {_DOCUMENT_WRITE_COLUMNS})"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (document_id, *values),
                    )
                else:
                    self._delete_children(document_id)
                    self._conn.execute(
                        "UPDATE documents SET path = ?, path_key = ?, name_key = ?, title = ?,"
                        " frontmatter = ?, content_hash = ?, mtime = ?, size = ?,"
                        " human_relevance_score = ?, chunk_strategy = ?, chunk_count = ?,"
                        " indexed_at = ? WHERE id = ?",
                        (*values, document_id),
                    )
                first = self._next_id("chunks")
                ids = range(first, first + len(chunks))
                self._conn.executemany(
                    "INSERT INTO chunks(id, document_id, position, heading_path, text, char_start,"
                    " char_end, prev_id, next_id, content_hash, metadata)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            chunk_id,
                            document_id,
                            chunk.position,
                            chunk.heading_path,
                            chunk.text,
                            chunk.char_start,
                            chunk.char_end,
                            chunk_id - 1 if i > 0 else None,
                            chunk_id + 1 if i < len(chunks) - 1 else None,
                            chunk.content_hash,
                            json.dumps(dict(chunk.metadata), ensure_ascii=False),
                        )
                        for i, (chunk_id, chunk) in enumerate(zip(ids, chunks, strict=False))
                    ],
                )
                self._reuse_vectors(zip(ids, chunks, strict=True), reusable)
                title = segment(document.title)
                self._conn.executemany(
                    "INSERT INTO chunks_fts(rowid, title, heading_path, body) VALUES (?, ?, ?, ?)",
                    [
                        (chunk_id, title, segment(chunk.heading_path), segment(chunk.text))
                        for chunk_id, chunk in zip(ids, chunks, strict=False)
                    ],
                )
                self._conn.executemany(
                    "INSERT INTO links(document_id, kind, target, target_key, heading, alias, position)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            document_id,
                            link.kind,
                            link.target,
                            link.target_key,
                            link.heading,
                            link.alias,
                            link.position,
                        )
                        for link in links
                    ],
                )
                self._conn.executemany(
                    "INSERT OR IGNORE INTO tags(document_id, tag) VALUES (?, ?)",
                    [(document_id, tag) for tag in tags],
                )
            return document_id

    def touch_document(self, document_id: int, mtime: float, size: int) -> None:
        """Record a new mtime and size for a note whose content did not change."""
        with self._guard("updating a note's time"), self.transaction():
            self._conn.execute(
                "UPDATE documents SET mtime = ?, size = ? WHERE id = ?",
                (mtime, size, document_id),
            )

    def delete_document(self, document_id: int) -> None:
        """Remove a note and everything derived from it."""
        with self._guard("deleting a note"), self.transaction():
            self._delete_children(document_id)
            self._conn.execute("DELETE FROM documents WHERE id = ?", (document_id,))

    # -- facts -----------------------------------------------------------------------------

    def _select_in(self, sql: str, ids: Sequence[Any]) -> Iterator[Sequence[Any]]:
        """Yield the rows of ``sql`` whose ``{marks}`` takes the ids, a few hundred at a time."""
        for start in range(0, len(ids), 500):  # SQLite caps the parameters of one statement
            batch = list(ids[start : start + 500])
            yield from self._conn.execute(sql.format(marks=", ".join("?" * len(batch))), batch)

    def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(sql, params).fetchone()[0]

    def counts(self) -> StoreCounts:
        """Return row counts and the store's size on disk (database plus WAL)."""
        with self._guard("counting"):
            files = () if self._path is None else (self._path, Path(f"{self._path}-wal"))
            size = sum(p.stat().st_size for p in files if p.exists())
            return StoreCounts(
                documents=self._scalar("SELECT count(*) FROM documents"),
                chunks=self._scalar("SELECT count(*) FROM chunks"),
                links=self._scalar("SELECT count(*) FROM links"),
                vectors=self._scalar("SELECT count(*) FROM vectors"),
                tags=self._scalar("SELECT count(DISTINCT tag) FROM tags"),
                bytes=size,
            )

    def document_count(self) -> int:
        """Return how many documents (notes) the store holds."""
        with self._guard("counting"):
            return int(self._scalar("SELECT count(*) FROM documents"))

    def unresolved_link_count(self) -> int:
        """Return how many links point to no stored note (same rules as `find_documents`)."""
        with self._guard("counting unresolved links"):
            return int(
                self._scalar(
                    "SELECT count(*) FROM links l WHERE l.target_key != ''"
                    " AND l.target_key NOT IN (SELECT path_key FROM documents)"
                    " AND l.target_key NOT IN (SELECT name_key FROM documents)"
                    " AND (instr(l.target_key, '/') = 0 OR NOT EXISTS (SELECT 1 FROM documents d"
                    "      WHERE d.path_key LIKE '%/' || replace(replace(replace(l.target_key,"
                    " '\\', '\\\\'), '%', '\\%'), '_', '\\_') ESCAPE '\\'))"
                )
            )

    def describe(self) -> dict[str, Any]:
        """Return backend facts: name, schema version, tokenizers, capabilities."""
        with self._guard("describing the backend"):
            return {
                "backend": "sqlite",
                "store_path": self.location,
                "schema_version": self._stored_version(),
                "fts_tokenizers": [FTS_TOKENIZER, "cjk-bigram (applied before indexing)"],
                "capabilities": [
                    "keyword-bm25",
                    "cjk-keyword",
                    "metadata-filter",
                    "transactions",
                    "concurrent-readers",
                ],
                "details": {
                    "sqlite_version": self._driver.sqlite_version,
                    "journal_mode": self._scalar("PRAGMA journal_mode"),
                    "encrypted": self.encrypted,
                    "busy_timeout_seconds": BUSY_TIMEOUT_SECONDS,
                },
            }

    def integrity_problems(self) -> list[str]:
        """Return what is inconsistent in the store (empty when it is sound)."""
        with self._guard("checking integrity"):
            problems = [
                row[0] for row in self._conn.execute("PRAGMA integrity_check") if row[0] != "ok"
            ]
            for label, sql in CONSISTENCY_CHECKS.items():
                count = self._scalar(sql)
                if count:
                    problems.append(f"{count} {label}")
            try:
                self._conn.execute(
                    "INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)"
                )
            except self._driver.DatabaseError as exc:
                problems.append(f"keyword index: {exc}")
            return problems
