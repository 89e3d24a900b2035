"""One SQLite database file and its connection: opening, creating, migrating, transactions.

`Database` is what every role of `SQLiteStore` works through: a connection opened in WAL mode
with a busy timeout (readers and one writer at once; a second writer waits), the store's
``meta`` table, named schema migrations (`vrom.store.schema`), and re-entrant transactions. A
new file is built under a temporary name and appears at its path only once its schema is
committed, so no process ever sees a half-made store.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vrom.errors import NotFoundError, StorageError, ValidationError
from vrom.store.migration import migrate, pending, stored_version
from vrom.store.schema import MIGRATIONS, READABLE_SCHEMAS
from vrom.store.sqlite_query import register_functions

BUSY_TIMEOUT_SECONDS = 60.0
STALE_CREATION_SECONDS = 3600.0
CACHE_KIB = 32 * 1024
"""The most page cache a connection keeps. SQLite's default, 2 MiB, is less than one batch of
`Collection.add` writes (vectors are 1.5 KiB a chunk, and rows and the keyword index come
with them): adding SciFact spent 6-12% more CPU with it (bench/write_speed.py --part add)."""
_HAS_META = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'"


def _checked_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or "\x00" in key:
        raise ValidationError("an encryption key must be a non-empty string without NUL")
    return key


def _driver(encrypted: bool) -> Any:
    """Return the DB-API module to open stores with: sqlite3, or SQLCipher's for a key."""
    if not encrypted:
        return sqlite3
    try:
        from sqlcipher3 import dbapi2
    except ImportError as exc:
        raise StorageError(
            "an encrypted store needs SQLCipher: pip install 'vrom[encrypted]'"
        ) from exc
    return dbapi2


class Database:
    """A connection to one store file (or an in-memory store); see the module docstring."""

    def __init__(
        self,
        path: Path | None,
        *,
        create: bool = True,
        key: str | None = None,
        read_only: bool = False,
    ) -> None:
        """Open the store at ``path``; a missing file is created unless ``create`` is False.

        An existing file must hold a vrom schema: another program's database is refused before
        anything is written to it. ``path=None`` keeps the store in memory (gone when closed).
        With ``key`` the file is encrypted with SQLCipher (the ``encrypted`` extra): every page,
        the WAL included, is unreadable without the key, and a wrong key is a `StorageError`.
        ``read_only`` opens an existing file as immutable (a verified pack: nothing, not even a
        WAL switch, is written; its schema must be this vrom's).
        """
        self.path = None if path is None else Path(path)
        # the database file's path (``:memory:`` for a store in memory)
        self.location = ":memory:" if self.path is None else str(self.path)
        self._depth = 0
        # inside a read snapshot, the values `state` read (meta keys, the keyword version)
        self.held: dict[str, Any] | None = None
        self._closed = False
        self._key = _checked_key(key)
        self.encrypted = self._key is not None
        self._read_only = read_only
        self.driver = _driver(self._key is not None)
        if self.path is None:
            self._connect(None, require_schema=False)
            return
        if read_only:
            self._connect_read_only(self.path)
            return
        if not self.path.exists():
            if not create:
                raise NotFoundError(
                    f"no store at {self.path}: index the vault first ('vrom index')"
                )
            self._create_file(self.path)
        self._connect(self.path, require_schema=True)

    def _connect(self, path: Path | None, *, require_schema: bool) -> None:
        try:
            self.conn: sqlite3.Connection = self.driver.connect(
                ":memory:" if path is None else str(path),
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
        except self.driver.Error as exc:
            raise StorageError(f"cannot open store {self.location}: {exc}") from exc
        register_functions(self.conn)
        try:
            if self._key is not None:
                # PRAGMA takes no bound parameters: the key is quoted as an SQL string literal
                self.conn.execute("PRAGMA key = '" + self._key.replace("'", "''") + "'")
            self.conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
            if require_schema and self.stored_version() == 0:
                raise StorageError(f"{self.location} is not a vrom store (it has no vrom schema)")
            self._configure()
            self._migrate()
        except self.driver.Error as exc:
            self.conn.close()
            raise self.error("opening", exc) from exc
        except StorageError:
            self.conn.close()
            raise

    def _connect_read_only(self, path: Path) -> None:
        if not path.is_file():
            raise NotFoundError(f"no store at {path}")
        uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
        try:
            self.conn = self.driver.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False
            )
            register_functions(self.conn)
            version = self.stored_version()
        except self.driver.Error as exc:
            raise self.error("opening", exc) from exc
        if version not in READABLE_SCHEMAS:
            self.conn.close()
            raise StorageError(
                f"{path} has store schema {version} but this vrom reads schemas "
                f"{READABLE_SCHEMAS[0]}-{READABLE_SCHEMAS[-1]} read-only: rebuild it with this "
                "vrom (or upgrade vrom)"
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
            self.conn.close()  # the last connection folds the WAL into the file
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

    def error(self, action: str, exc: Exception) -> StorageError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StorageError(
                f"store {self.location} is busy while {action} (another process holds it "
                "for writing): try again"
            )
        if isinstance(exc, self.driver.DatabaseError) and "not a database" in text:
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
            self.path is not None
            and self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
        ):
            self._enable_wal()
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")  # negative: KiB, not pages

    def _enable_wal(self) -> None:
        """Switch to WAL, waiting out another process's lock (the pragma does not wait by itself).

        A filesystem without WAL support keeps the rollback journal: slower, still correct.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except self.driver.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stored_version(self) -> int:
        """Return the schema version the store records (0: none yet)."""
        return stored_version(self.conn, _HAS_META)

    def _migrate(self) -> None:
        """Apply the migrations the store lacks (`vrom.store.migration`), under the write lock."""
        if not pending(MIGRATIONS, self.stored_version(), self.location):
            return
        with self.transaction():  # BEGIN IMMEDIATE: a second opener waits here, then reads
            migrate(self.conn, MIGRATIONS, _HAS_META, self.location, "?")
            if self.meta_value("created_unix") is None:
                self.put_meta("created_unix", repr(time.time()))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the block's writes as one transaction (re-entrant: inner blocks join the outer)."""
        self.check_open()
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except self.driver.Error as exc:
            raise self.error("starting a write", exc) from exc
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self.conn.rollback()
            raise
        self._depth = 0
        try:
            self.conn.commit()
        except self.driver.Error as exc:
            self.conn.rollback()
            raise self.error("committing", exc) from exc

    @property
    def writing(self) -> bool:
        """True inside `transaction` (its writes may still roll back)."""
        return self._depth > 0

    @contextmanager
    def guard(self, action: str) -> Iterator[None]:
        """Convert sqlite3 errors raised inside the block into `StorageError`."""
        self.check_open()
        try:
            yield
        except self.driver.Error as exc:
            raise self.error(action, exc) from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside the block see one state of the store: a search that reads twice (rank
        first, whole chunks after) never finds a chunk gone that another process rewrote."""
        with self.guard("reading"), self.read_snapshot():
            yield

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Run the block's reads against one snapshot of the database (a read transaction)."""
        if self._depth or self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        self.held = {}
        try:
            yield
        finally:
            self.held = None
            self.conn.execute("COMMIT")

    def reader(self) -> Database | None:
        """Return a connection of its own to this store's file, for reading it from another
        thread (a background build): its transactions are its own, so it never reads inside
        this connection's, nor ends one. None in memory (there is no file to open again)."""
        self.check_open()
        if self.path is None:
            return None
        return Database(self.path, create=False, key=self._key, read_only=self._read_only)

    def check_open(self) -> None:
        """Raise `StorageError` if the store was closed."""
        if self._closed:
            raise StorageError(f"store {self.location} is closed")

    def close(self) -> None:
        """Close the connection; later calls raise `StorageError`."""
        if not self._closed:
            self._closed = True
            self.conn.close()

    # -- meta ------------------------------------------------------------------------------

    def meta_value(self, key: str) -> str | None:
        """Return a ``meta`` value, without a guard (inside another guarded block); inside a
        read snapshot (which no write joins), read once (by `state`, or by the first call)
        and `held` until it ends."""
        if self.held is not None and key in self.held:
            return self.held[key]  # type: ignore[no-any-return]
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        value = None if row is None else str(row[0])
        if self.held is not None:
            self.held[key] = value
        return value

    def put_meta(self, key: str, value: str) -> None:
        """Set a ``meta`` value, inside the caller's transaction."""
        if self.held is not None:
            self.held.pop(key, None)
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def get_meta(self, key: str) -> str | None:
        """Return a value of the ``meta`` table, or None."""
        with self.guard("reading meta"):
            return self.meta_value(key)

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        with self.guard("writing meta"), self.transaction():
            self.put_meta(key, value)

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Return the first column of the first row of ``sql``."""
        return self.conn.execute(sql, params).fetchone()[0]
