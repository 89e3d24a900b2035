"""SQLite's `Dialect`: statements run on the store's one connection (`Database`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vrom.store.sql_dialect import Dialect, Statements
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_query import DIALECT as FILTERS


class SQLiteDialect(Dialect):
    """SQLite's SQL (the defaults of `Dialect`) over one `Database`."""

    filters = FILTERS

    def __init__(self, db: Database) -> None:
        self.db = db

    def meta(self, run: Statements, key: str) -> str | None:
        return self.db.meta_value(key)  # held inside a snapshot's state

    @contextmanager
    def reading(self, action: str) -> Iterator[Statements]:
        with self.db.guard(action):
            yield Statements(self.db.conn, self)

    @contextmanager
    def snapshot(self, action: str) -> Iterator[Statements]:
        with self.db.guard(action), self.db.read_snapshot():
            yield Statements(self.db.conn, self)

    @contextmanager
    def writing(self, action: str) -> Iterator[Statements]:
        with self.db.guard(action), self.db.transaction():
            yield Statements(self.db.conn, self)
