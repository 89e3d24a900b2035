"""PostgreSQL's `Dialect`: ``%s`` placeholders, arrays, ``jsonb``; statements run on this
thread's transaction or snapshot connection, or a pooled one (`PgDatabase.connection`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from vrom.store.postgres_database import PgDatabase
from vrom.store.postgres_query import DIALECT as FILTERS
from vrom.store.sql_dialect import Dialect, Statements, pyformat


class PgDialect(Dialect):
    """PostgreSQL's SQL over one `PgDatabase`."""

    arrays: ClassVar[bool] = True
    instr: ClassVar[str] = "strpos"
    field_text: ClassVar[str] = "text_value"
    filters = FILTERS

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def sql(self, text: str) -> str:
        return pyformat(text)

    def json_text(self, column: str, key: str) -> tuple[str, str]:
        return f"jsonb_typeof({column}::jsonb -> ?) = 'string'", key

    def text_list(self, expr: str) -> str:
        return f"json_agg({expr})::text"

    def meta(self, run: Statements, key: str) -> str | None:
        return self.db.get_meta(key)  # read once in a snapshot

    @contextmanager
    def reading(self, action: str) -> Iterator[Statements]:
        with self.db.guard(action), self.db.connection() as conn:
            yield Statements(conn, self)

    @contextmanager
    def snapshot(self, action: str) -> Iterator[Statements]:
        with self.db.guard(action), self.db.snapshot(), self.db.connection() as conn:
            yield Statements(conn, self)

    @contextmanager
    def writing(self, action: str) -> Iterator[Statements]:
        with self.db.guard(action), self.db.transaction(), self.db.connection() as conn:
            yield Statements(conn, self)
