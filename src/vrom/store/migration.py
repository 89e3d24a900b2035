"""Named schema migrations, the same shape on both backends.

A store's schema is the list of its backend's migrations applied in order: ``m001_...`` builds
version 1 from nothing, ``m00N_...`` brings version N-1 to N. A new store runs them all, an
older one the ones it lacks, so a store upgraded from any version has the tables, columns and
indexes of one created today. Each backend's runner applies the missing migrations in one
transaction under the store's write lock, together with the ``schema_version`` it records in
``meta``: a crash leaves the old version or the new, and a second process opening the store
meanwhile waits, then finds it upgraded. A store of a newer schema than this vrom knows is
refused (`pending`).

To add a migration: append ``Migration("m010_what_it_adds", script)`` to the backend's list
(`vrom.store.schema.MIGRATIONS`, `vrom.store.postgres_migrations.MIGRATIONS`) and never edit
one that shipped: a store already past it would not run the change.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from vrom.errors import StorageError

_NAME = re.compile(r"m(\d{3})_[a-z0-9_]+")


@dataclass(frozen=True)
class Migration:
    """One step of a store's schema: its name (``m009_vector_input_hash``), the SQL script that
    makes it, and what must be done in Python after the script, if anything (given the open
    connection, inside the migration's transaction)."""

    name: str
    script: str
    then: Callable[[Any], None] | None = None

    @property
    def version(self) -> int:
        """The schema version this migration brings a store to (its name's number)."""
        match = _NAME.fullmatch(self.name)
        if match is None:
            raise ValueError(f"a migration is named m<3 digits>_<words>, not {self.name!r}")
        return int(match.group(1))


def checked(*migrations: Migration) -> tuple[Migration, ...]:
    """Return ``migrations`` if they are numbered 1, 2, 3... in order (else `ValueError`)."""
    for position, migration in enumerate(migrations, start=1):
        if migration.version != position:
            raise ValueError(f"migration {migration.name} is listed at place {position}")
    return tuple(migrations)


def pending(migrations: Sequence[Migration], stored: int, location: str) -> Sequence[Migration]:
    """Return the migrations a store at version ``stored`` lacks, in order; refuse a newer one."""
    if stored > len(migrations):
        raise StorageError(
            f"store {location} has schema version {stored}, newer than this vrom understands"
            f" ({len(migrations)}): upgrade vrom"
        )
    return migrations[stored:]


def stored_version(conn: Any, has_meta: str) -> int:
    """Return the schema version the store on ``conn`` records (0: none yet); ``has_meta`` is
    the backend's query of whether its ``meta`` table exists."""
    row = conn.execute(has_meta).fetchone()
    if not (row and row[0]):
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(
    conn: Any, migrations: Sequence[Migration], has_meta: str, location: str, mark: str
) -> None:
    """Apply the migrations the store on ``conn`` lacks, each with the ``schema_version`` it
    records (``mark`` is the driver's placeholder), inside the caller's transaction."""
    for migration in pending(migrations, stored_version(conn, has_meta), location):
        for statement in statements(migration.script):
            conn.execute(statement)
        if migration.then is not None:
            migration.then(conn)
        conn.execute(
            f"INSERT INTO meta(key, value) VALUES ('schema_version', {mark})"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(migration.version),),
        )


def statements(script: str) -> Iterator[str]:
    """Yield the statements of an SQL script one by one (a trigger body holds ``;`` too).

    ``executescript`` would run them all, but it commits first: a migration must stay inside
    the transaction that also records its version.
    """
    pending = ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                yield pending
            pending = ""
