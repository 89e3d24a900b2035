"""One namespace of a PostgreSQL database and the connections to it: opening, creating,
transactions, snapshots, the meta table and error messages.

`PgDatabase` is what every role of `PostgresStore` works through. It keeps a small pool of
connections (psycopg_pool); a thread inside `transaction` or `snapshot` keeps one connection for
the whole block, other reads take any connection for one statement. Every connection's
``search_path`` is the namespace's schema, so the roles' SQL names plain tables.

Many processes on many machines share a namespace. A write transaction first takes the
namespace's advisory lock (``pg_advisory_xact_lock``), so writers go one at a time, like SQLite's
``BEGIN IMMEDIATE``, and a write never works from a state another writer is changing; readers
take no lock and are never blocked. A snapshot is a ``REPEATABLE READ`` transaction: every read
in it sees one committed state.

Nothing here shows the URL's password: errors name the server (`vrom.store.urls.server_of`) and
the URL masked (`vrom.store.urls.mask_url`), and a driver's message is scrubbed of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector
from psycopg import errors, sql

from vrom.errors import NotFoundError, StorageError, ValidationError
from vrom.store.migration import migrate, pending, statements, stored_version
from vrom.store.postgres_migrations import HAS_META, MIGRATIONS
from vrom.store.postgres_schema import (
    BOOTSTRAP,
    LOCK_CLASS,
    NAMESPACE_SCHEMA_PREFIX,
    REGISTRY_LOCK,
    REGISTRY_SCHEMA,
    TEXT_SEARCH,
)
from vrom.store.urls import credentials_problem, mask_url, scrub, server_of

CONNECT_TIMEOUT_SECONDS = 10
"""How long opening a connection waits for the server before the store gives up."""
POOL_TIMEOUT_SECONDS = 30.0
"""How long a read or write waits for a free (or re-opened) connection."""
POOL_SIZE = 4
"""Connections a store keeps at most: a search, a writer and a background embedder at once."""
PROBE_EVERY_SECONDS = 2.0
"""While no pooled connection comes, the server is probed this often: a server that is down
is reported at once instead of after `POOL_TIMEOUT_SECONDS`."""
MAX_NAMESPACE_CHARS = 200
_UNREACHABLE = (
    "connection failed",
    "connection refused",
    "could not connect",
    "server closed the connection",
    "terminating connection",
    "connection is closed",
    "the connection is lost",
    "consuming input failed",
    "no such file or directory",
    "timeout expired",
    "couldn't get a connection",
    "failed to resolve host",
    "could not translate host name",
)
_REFUSED_LOGIN = (
    ("password authentication failed", "check the password in the URL"),
    ("no password supplied", "add the password to the URL, after the user and a colon"),
    ("authentication failed", "check the user and password in the URL"),
    ("does not exist", "check the user and database the URL names"),
    (
        "pg_hba.conf",
        "the server's pg_hba.conf lets this user in from elsewhere only: ask its"
        " administrator, or connect as another user",
    ),
    ("permission denied for database", "grant this user CONNECT on the database, or use another"),
)
"""Why a server turns a login away (the driver's words, lower-cased), and what to do; the first
that matches is said."""

Connection = psycopg.Connection[Any]

# the pool retries a lost server in the background and logs each attempt as a warning; the
# store reports an unreachable server itself, once, as a `StorageError` (an application that
# configures logging still sees the pool's records: they propagate)
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if it can name one (any text of 1 to 200 characters, no NUL)."""
    if not isinstance(namespace, str) or not namespace or "\x00" in namespace:
        raise ValidationError("a namespace must be non-empty text without NUL characters")
    if len(namespace) > MAX_NAMESPACE_CHARS:
        raise ValidationError(f"a namespace has at most {MAX_NAMESPACE_CHARS} characters")
    return namespace


class PgDatabase:
    """The connections to one namespace of a PostgreSQL database; see the module docstring."""

    def __init__(self, url: str, namespace: str, *, create: bool = True) -> None:
        """Open ``namespace`` in the database at ``url``, creating it unless ``create`` is False.

        The first open of a database installs what vrom needs there (the ``vector`` extension,
        a ``vrom`` schema with the namespace registry and a text-search configuration); the
        first open of a namespace creates its tables; one of an older schema is upgraded
        (`vrom.store.postgres_migrations`), one of a newer schema refused.
        """
        problem = credentials_problem(url)
        if problem is not None:
            raise ValidationError(
                f"the user or password in the PostgreSQL URL {problem}, which a URL cannot"
                " hold as it is: percent-encode them (% as %25, @ as %40,"
                " / as %2F, ? as %3F, # as %23, : as %3A)"
            )
        self.url = url
        self.namespace = check_namespace(namespace)
        self.shown_url = mask_url(url)
        self.location = f"{self.shown_url} (namespace {namespace!r})"
        self._closed = False
        self._local = threading.local()
        with self._direct() as conn:
            self.namespace_id, self.schema, self.extension_schema = self._prepare(conn, create)
            self._upgrade(conn)
            self.server_version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            self.pgvector_version = str(row.fetchone()[0])  # type: ignore[index]
        self._pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            open=False,
            timeout=POOL_TIMEOUT_SECONDS,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS},
            configure=self._configure,
            check=psycopg_pool.ConnectionPool.check_connection,
            name=f"vrom-{self.namespace_id}",
        )
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT_SECONDS)
        except psycopg.Error as exc:
            self._pool.close()
            raise self.error("opening", exc) from exc

    # -- opening ---------------------------------------------------------------------------

    @contextmanager
    def _direct(self) -> Iterator[Connection]:
        """Yield one connection of its own (opening, before the pool exists)."""
        try:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
        except psycopg.Error as exc:
            raise self.error("connecting", exc) from exc
        try:
            yield conn
        except psycopg.Error as exc:
            raise self.error("opening", exc) from exc
        finally:
            conn.close()

    def _prepare(self, conn: Connection, create: bool) -> tuple[int, str, str]:
        """Return (namespace number, its schema, pgvector's schema), creating what is missing."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, REGISTRY_LOCK))
            registry = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (f"{REGISTRY_SCHEMA}.namespaces",)
            ).fetchone()
            if not (registry and registry[0]) and not create:  # nothing is created then
                raise NotFoundError(f"no vrom namespace {self.namespace!r} at {self.shown_url}")
            self._install_pgvector(conn)
            if not (registry and registry[0]):
                for statement in statements(BOOTSTRAP):
                    conn.execute(statement)
            has_config = conn.execute(
                "SELECT count(*) FROM pg_ts_config c JOIN pg_namespace n"
                " ON n.oid = c.cfgnamespace WHERE n.nspname = %s AND c.cfgname = 'english'",
                (REGISTRY_SCHEMA,),
            ).fetchone()
            if not (has_config and has_config[0]):
                for statement in statements(TEXT_SEARCH):
                    conn.execute(statement)
            extension = conn.execute(
                "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            extension_schema = str(extension[0]).strip('"') if extension else "public"
            row = conn.execute(
                f"SELECT id FROM {REGISTRY_SCHEMA}.namespaces WHERE name = %s", (self.namespace,)
            ).fetchone()
            if row is None:
                if not create:
                    raise NotFoundError(f"no vrom namespace {self.namespace!r} at {self.shown_url}")
                row = conn.execute(
                    f"INSERT INTO {REGISTRY_SCHEMA}.namespaces(name, created_unix)"
                    " VALUES (%s, %s) RETURNING id",
                    (self.namespace, time.time()),
                ).fetchone()
                assert row is not None
                schema = f"{NAMESPACE_SCHEMA_PREFIX}{row[0]}"
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
                self._use_schema(conn, schema, extension_schema, local=True)
                migrate(
                    conn, MIGRATIONS, HAS_META, self.location, "%s"
                )  # nobody sees the namespace before this commits
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('created_unix', %s)", (repr(time.time()),)
                )
                return int(row[0]), schema, extension_schema
            return int(row[0]), f"{NAMESPACE_SCHEMA_PREFIX}{row[0]}", extension_schema

    def _upgrade(self, conn: Connection) -> None:
        """Apply the migrations the namespace lacks, holding its write lock (a writer of an
        older vrom finishes first; a second process opening it meanwhile waits, then finds it
        upgraded)."""
        self._use_schema(conn, self.schema, self.extension_schema, local=False)
        if not pending(MIGRATIONS, stored_version(conn, HAS_META), self.location):
            return
        with conn.transaction():
            self._lock(conn)
            migrate(conn, MIGRATIONS, HAS_META, self.location, "%s")

    def _install_pgvector(self, conn: Connection) -> None:
        """Create the ``vector`` extension if the database lacks it, or say how to."""
        present = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
        if (present.fetchone() or (0,))[0]:
            return
        try:
            with conn.transaction():  # a savepoint: the failure is reported, not the abort
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except (
            errors.UndefinedFile,
            errors.FeatureNotSupported,
            errors.InsufficientPrivilege,
        ) as exc:
            why = (
                "is not installed on the server"
                if not isinstance(exc, errors.InsufficientPrivilege)
                else "is not enabled in this database, and this user may not enable it"
            )
            raise StorageError(
                f"the pgvector extension {why} ({server_of(self.url)}): install pgvector on the"
                " server, then run 'CREATE EXTENSION vector;' in the database as a superuser"
            ) from exc

    @staticmethod
    def _use_schema(conn: Connection, schema: str, extension_schema: str, *, local: bool) -> None:
        statement = "SET LOCAL search_path TO {}, {}" if local else "SET search_path TO {}, {}"
        conn.execute(
            sql.SQL(statement).format(sql.Identifier(schema), sql.Identifier(extension_schema))
        )

    def _configure(self, conn: Connection) -> None:
        """Set up a new pooled connection: the namespace's tables, pgvector's types."""
        self._use_schema(conn, self.schema, self.extension_schema, local=False)
        register_vector(conn)

    # -- errors ----------------------------------------------------------------------------

    def error(self, action: str, exc: Exception) -> StorageError:
        """Return the one-line `StorageError` for a driver error, without the URL's password."""
        text = scrub(" ".join(str(exc).split()), self.url)
        lowered = text.lower()
        refused = (
            _refused_login(str(exc), self.url)
            if isinstance(exc, psycopg.OperationalError)
            else None
        )
        if refused is not None:  # before the unreachable server: its text says "failed" too
            gist, advice = refused
            return StorageError(
                f"PostgreSQL at {server_of(self.url)} refused the login while {action}"
                f" ({gist}): {advice}"
            )
        if isinstance(exc, psycopg.OperationalError) and any(s in lowered for s in _UNREACHABLE):
            reason = _reason(text)
            return StorageError(
                f"cannot reach PostgreSQL at {server_of(self.url)} while {action}"
                f"{': ' + reason if reason else ''}: is the server running, and the URL right?"
            )
        if isinstance(exc, errors.LockNotAvailable | errors.DeadlockDetected):
            return StorageError(
                f"store {self.location} is busy while {action} (another process holds it for"
                " writing): try again"
            )
        if isinstance(exc, errors.SerializationFailure):
            return StorageError(
                f"store {self.location} changed under a read while {action}: try again"
            )
        return StorageError(f"store {self.location} failed while {action}: {text}")

    @contextmanager
    def guard(self, action: str) -> Iterator[None]:
        """Convert driver errors raised inside the block into `StorageError`."""
        self.check_open()
        try:
            yield
        except psycopg.Error as exc:
            raise self.error(action, exc) from exc

    def check_open(self) -> None:
        """Raise `StorageError` if the store was closed."""
        if self._closed:
            raise StorageError(f"store {self.location} is closed")

    # -- connections and transactions ------------------------------------------------------

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """Yield the connection of this thread's transaction or snapshot, or a pooled one."""
        self.check_open()
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        conn = self._checkout()
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    def _checkout(self) -> Connection:
        """Return a pooled connection; raise at once if the server cannot be reached."""
        deadline = time.monotonic() + POOL_TIMEOUT_SECONDS
        while True:
            wait = min(PROBE_EVERY_SECONDS, deadline - time.monotonic())
            try:
                return self._pool.getconn(timeout=max(wait, 0.01))
            except psycopg_pool.PoolTimeout:
                if time.monotonic() >= deadline:
                    raise
                # busy, or the server is gone: a connection of our own tells which
                psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_SECONDS).close()

    @property
    def writing(self) -> bool:
        """True inside a write transaction of this thread."""
        return bool(getattr(self._local, "writing", False))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the block's writes as one transaction, holding the namespace's write lock.

        Re-entrant: inner blocks join the outer one. A write inside a snapshot takes the lock
        there (a conflicting concurrent update then fails instead of being lost).
        """
        self.check_open()
        current = getattr(self._local, "conn", None)
        if current is not None:
            if not self.writing:
                with self.guard("starting a write"):
                    self._lock(current)
                self._local.writing, self._local.held = True, None
            yield
            return
        with self._own_transaction("starting a write") as conn:
            self._local.conn, self._local.writing = conn, True
            try:
                self._lock(conn)
                yield
            finally:
                self._local.conn, self._local.writing = None, False

    @contextmanager
    def _own_transaction(self, action: str) -> Iterator[Connection]:
        """Yield a pooled connection inside a new transaction.

        Driver errors of opening and committing it become `StorageError` naming ``action`` or
        the commit; those of the block pass through untouched, for the caller's own `guard` to
        name what it was doing.
        """
        with self.guard(action):
            conn = self._checkout()
        phase = action
        try:
            with conn.transaction():
                phase = ""
                yield conn
                phase = "committing"
        except psycopg.Error as exc:
            if not phase:
                raise
            raise self.error(phase, exc) from exc
        finally:
            self._pool.putconn(conn)

    def _lock(self, conn: Connection) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, self.namespace_id))

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside the block see one committed state (a REPEATABLE READ transaction)."""
        self.check_open()
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._own_transaction("reading") as conn:
            with self.guard("reading"):
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self._local.conn, self._local.writing, self._local.held = conn, False, {}
            try:
                yield
            finally:
                self._local.conn, self._local.writing, self._local.held = None, False, None

    @contextmanager
    def local_transaction(self) -> Iterator[Connection]:
        """Yield a connection inside a transaction (this thread's, or a new one), for settings
        that last until it ends (``SET LOCAL``)."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self._own_transaction("reading") as conn:
            yield conn

    def close(self) -> None:
        """Close the pool; later calls raise `StorageError`."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    # -- meta and helpers ------------------------------------------------------------------

    def scalar(self, conn: Connection, query: str, params: Sequence[Any] = ()) -> Any:
        """Return the first column of the first row of ``query`` (None without a row)."""
        row = conn.execute(query, params).fetchone()
        return None if row is None else row[0]

    def meta_value(self, conn: Connection, key: str) -> str | None:
        """Return a ``meta`` value read on ``conn``."""
        value = self.scalar(conn, "SELECT value FROM meta WHERE key = %s", (key,))
        return None if value is None else str(value)

    def put_meta(self, conn: Connection, key: str, value: str) -> None:
        """Set a ``meta`` value on ``conn`` (inside the caller's transaction)."""
        (getattr(self._local, "held", None) or {}).pop(key, None)
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def get_meta(self, key: str) -> str | None:
        """Return a value of the ``meta`` table, or None (read once in a snapshot)."""
        held = getattr(self._local, "held", None)  # a snapshot nothing has written in
        if held is not None and key in held:
            return held[key]  # type: ignore[no-any-return]
        with self.guard("reading meta"), self.connection() as conn:
            value = self.meta_value(conn, key)
        if held is not None:
            held[key] = value
        return value

    def hold(self, values: Mapping[str, str | None]) -> None:
        """Keep ``meta`` values read in this thread's snapshot to answer `get_meta` until it
        ends (outside a snapshot, nothing is kept)."""
        held = getattr(self._local, "held", None)
        if held is not None:
            held.update(values)

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        with self.guard("writing meta"), self.transaction(), self.connection() as conn:
            self.put_meta(conn, key, value)


def _refused_login(text: str, url: str) -> tuple[str, str] | None:
    """Return (the server's reason, scrubbed of the URL's password, and what to do) when a
    driver's ``text`` says a login was turned away."""
    gist = " ".join(text.split()).rsplit(" failed: ", 1)[-1]
    gist = gist.split("FATAL:", 1)[-1].removeprefix("fe_sendauth:").strip()
    lowered = gist.lower()
    for words, advice in _REFUSED_LOGIN:
        if words in lowered:
            return scrub(gist, url), advice
    return None


def _reason(text: str) -> str:
    """Return the gist of a connection error (``Connection refused``), or ''."""
    lowered = text.lower()
    for gist in ("connection refused", "no such file or directory", "timeout expired"):
        if gist in lowered:
            return gist.capitalize()
    if "server closed the connection" in lowered or "terminating connection" in lowered:
        return "the server closed the connection"
    return ""
