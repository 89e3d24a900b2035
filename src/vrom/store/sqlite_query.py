"""Turn the engines' query records into SQLite's dialects: FTS5 MATCH, and the `FilterDialect` the
one filter compiler (`vrom.store.filter_sql`) writes SQLite's filters in.

No user string reaches SQLite unquoted: terms and phrases become FTS5 strings, filter values and
field names become bound parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from vrom.filters import instant_of
from vrom.store.filter_sql import FilterDialect
from vrom.store.fts_text import segment_query_term
from vrom.store.records import KeywordQuery

INSTANT_FUNCTION = "vrom_instant"


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def match_expression(query: KeywordQuery) -> str:
    """Return the FTS5 MATCH expression for a parsed query; every user string is quoted."""

    def phrase(text: str, prefix: bool) -> str:
        body, cjk_prefix = segment_query_term(text)
        return _quote(body) + ("*" if prefix or cjk_prefix else "")

    positives = [phrase(t[:-1], True) if t.endswith("*") else phrase(t, False) for t in query.terms]
    positives += [phrase(p, False) for p in query.phrases]
    expression = " OR ".join(positives)
    if query.excluded:
        negatives = " OR ".join(phrase(x, False) for x in query.excluded)
        expression = f"({expression}) NOT ({negatives})"
    return expression


def _in_list(column: str, values: Sequence[Any], kind: str) -> tuple[str, list[Any]]:
    return f"{column} IN ({', '.join('?' for _ in values)})", list(values)


DIALECT = FilterDialect(
    mark="?",
    text_value="value",
    number_value="value",
    instant=f"{INSTANT_FUNCTION}(value)",
    path_prefix="substr(d.path, 1, ?) = ?",
    in_list=_in_list,
    json_items=lambda column: f"json_each({column}) j",
)
"""SQLite's filter SQL: a field's instant is read by `vrom.filters.instant_of`, registered on
every connection (`register_functions`), so both backends and the reference read a date alike."""


def register_functions(conn: Any) -> None:
    """Give a connection the functions filter SQL calls."""
    conn.create_function(INSTANT_FUNCTION, 1, _instant, deterministic=True)


@functools.lru_cache(maxsize=1 << 16)
def _instant(value: object) -> float | None:
    # cached: a store's date values repeat from search to search, and parsing one in Python
    # costs ~10 us, three times what julianday costs in C
    return instant_of(value) if isinstance(value, str) else None
