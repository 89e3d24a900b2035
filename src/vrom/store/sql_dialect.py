"""What differs between the SQL of SQLite and of PostgreSQL, for the roles written once.

`vrom.store.sql_documents` and `vrom.store.sql_memories` hold one SQL implementation of the
documents and memories roles. They write their statements in the SQL both databases speak, with
``?`` placeholders, and ask a `Dialect` for the rest: how a block runs on the backend's current
connection (its guard, its transaction), ``IN`` lists, a string search function, JSON pieces.
Each backend gives its own dialect and keeps only what truly differs (its connections and
locks, FTS5 or ``tsvector``, vector storage and nearest search).

This module imports no database driver: the dialects live beside their backends.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from vrom.store.filter_sql import FilterDialect
    from vrom.store.records import KeywordQuery

Row = tuple[Any, ...]

IN_BATCH = 500
"""How many values one ``IN`` list holds at most (SQLite caps the parameters of a statement)."""
AFTER_EVERY_KEY = 1 << 62
"""A key larger than any stored one: "before it" is "before any new one"."""
_PERCENT = re.compile(r"%(?!s)")


@functools.lru_cache(maxsize=512)
def pyformat(sql: str) -> str:
    """Return ``sql`` with ``?`` placeholders as ``%s`` and a literal ``%`` doubled (psycopg's
    style); a ``%s`` already there (from a backend's own SQL piece) is kept."""
    return _PERCENT.sub("%%", sql).replace("?", "%s")


def escape_like(text: str) -> str:
    """Return ``text`` with LIKE's wildcards escaped (for ``LIKE ... ESCAPE '\\'``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class Statements:
    """The statements of one block, on the connection it runs on (a DB-API connection)."""

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self.conn = conn
        self._dialect = dialect

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Return the rows of ``sql``."""
        rows: list[Row] = self.conn.execute(self._dialect.sql(sql), params).fetchall()
        return rows

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """Return the first row of ``sql``, or None."""
        row: Row | None = self.conn.execute(self._dialect.sql(sql), params).fetchone()
        return row

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Return the first column of the first row of ``sql`` (None without a row)."""
        row = self.one(sql, params)
        return None if row is None else row[0]

    def meta(self, key: str) -> str | None:
        """Return a ``meta`` value (inside a snapshot, the one the store's `state` holds)."""
        return self._dialect.meta(self, key)

    def count_up(self, key: str) -> None:
        """Add one to the ``meta`` counter ``key`` (which starts at 1)."""
        self.run(
            "INSERT INTO meta(key, value) VALUES (?, '1')"
            " ON CONFLICT (key) DO UPDATE SET value = CAST(meta.value AS BIGINT) + 1",
            (key,),
        )

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run ``sql``; return how many rows it changed."""
        return int(self.conn.execute(self._dialect.sql(sql), params).rowcount)

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run ``sql`` once per row of parameters."""
        rows = list(rows)
        if rows:
            cursor = self.conn.cursor()
            try:
                cursor.executemany(self._dialect.sql(sql), rows)
            finally:
                cursor.close()

    def rows_in(self, sql: str, values: Sequence[Any]) -> list[Row]:
        """Return the rows of ``sql`` whose ``{in}`` (after a column) takes ``values``: one
        array parameter, or ``IN`` lists of at most `IN_BATCH` values."""
        if not values:
            return []
        if self._dialect.arrays:
            return self.rows(sql.format(**{"in": "= ANY(?)"}), (list(values),))
        found: list[Row] = []
        for start in range(0, len(values), IN_BATCH):
            batch = list(values[start : start + IN_BATCH])
            found += self.rows(sql.format(**{"in": f"IN ({', '.join('?' * len(batch))})"}), batch)
        return found


class Dialect:
    """One backend's SQL where SQLite and PostgreSQL differ, and how its blocks run."""

    arrays: ClassVar[bool] = False
    """True when a parameter may be an array (``= ANY(?)``), else ``IN`` lists."""
    instr: ClassVar[str] = "instr"
    """The function giving where a string starts in another (1-based, 0 when absent)."""
    field_text: ClassVar[str] = "value"
    """The ``fields`` column holding a text value."""
    filters: ClassVar[FilterDialect]
    """The backend's dialect of filter SQL (`vrom.store.filter_sql`)."""

    def sql(self, text: str) -> str:
        """Return a statement written with ``?`` placeholders in the driver's style."""
        return text

    def json_text(self, column: str, key: str) -> tuple[str, str]:
        """Return a test that member ``key`` of the JSON object text ``column`` is a string
        (with one ``?``), and its parameter."""
        return f"json_type({column}, ?) = 'text'", '$."' + key.replace('"', '\\"') + '"'

    def text_list(self, expr: str) -> str:
        """Return an aggregate of ``expr`` as the text of a JSON array."""
        return f"json_group_array({expr})"

    def meta(self, run: Statements, key: str) -> str | None:
        """Return a ``meta`` value read by ``run``, or inside a snapshot the one its `state`
        read holds."""
        raise NotImplementedError

    def keyword_rows(
        self,
        action: str,
        query: KeywordQuery,
        statement: Callable[[KeywordQuery, str], tuple[str, list[Any]]],
        where: tuple[str, list[Any]],
        limit: int,
    ) -> list[Row]:
        """Return the rows of a keyword search (none for a query with nothing to match):
        ``statement(query, filter SQL)`` gives its SQL and the query's parameters, which the
        filter's and ``limit`` follow."""
        with self.reading(action) as run:
            if query.is_empty:
                return []
            sql, params = statement(query, where[0])
            return run.rows(sql, [*params, *where[1], limit])

    def reading(self, action: str) -> AbstractContextManager[Statements]:
        """Run the block's reads on the current connection; driver errors name ``action``."""
        raise NotImplementedError

    def snapshot(self, action: str) -> AbstractContextManager[Statements]:
        """As `reading`, every read of the block seeing one state of the store."""
        raise NotImplementedError

    def writing(self, action: str) -> AbstractContextManager[Statements]:
        """Run the block's statements as one write transaction (joining an outer one)."""
        raise NotImplementedError
