"""Turn the engines' query records into SQLite's dialects: FTS5 MATCH and SQL filters.

No user string reaches SQLite unquoted: terms and phrases become FTS5 strings, filter values and
field names become bound parameters.
"""

from __future__ import annotations

from typing import Any

from vrom.store.fts_text import segment_query_term
from vrom.store.records import Condition, KeywordQuery, Scalar, Where
from vrom.store.sql_dialect import escape_like


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


def where_sql(where: Where | None) -> tuple[str, list[Any]]:
    if where is None:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []
    if where.path_prefix:
        clauses.append("substr(d.path, 1, ?) = ?")
        params += [len(where.path_prefix), where.path_prefix]
    for tag in where.tags:
        clauses.append(
            "EXISTS (SELECT 1 FROM tags t WHERE t.document_id = d.id"
            " AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
        )
        params += [tag, escape_like(tag) + "/%"]
    for condition in where.conditions:
        clause, values = _condition_sql(condition)
        clauses.append(clause)
        params += values
    return "".join(f" AND {c}" for c in clauses), params


_COMPARISONS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _kind(value: Scalar) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else "text"


def _condition_sql(condition: Condition) -> tuple[str, list[Any]]:
    """Return the SQL test of one condition on document ``d`` and its parameters.

    It looks the values up in the ``fields`` table (a document's scalar metadata values, a list
    field's items one by one), so a filter costs index lookups, not a parse of every
    document's JSON. A list field passes when any of its items does.
    """
    op, value = condition.op, condition.value
    if op in _COMPARISONS and isinstance(value, str):
        # an ISO 8601 date or datetime: text fields holding one, compared as instants (julianday
        # applies their UTC offsets); the GLOB keeps out text julianday would read as a day
        # number ("2026")
        return (
            "d.id IN (SELECT document_id FROM fields WHERE key = ? AND kind = 'text'"
            " AND value GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'"
            f" AND julianday(value) {_COMPARISONS[op]} julianday(?))",
            [condition.field, value],
        )
    if op in _COMPARISONS:
        # numbers only: SQLite would order any text above any number
        return (
            "d.id IN (SELECT document_id FROM fields WHERE key = ? AND kind = 'number'"
            f" AND value {_COMPARISONS[op]} ?)",
            [condition.field, value],
        )
    values: tuple[Scalar, ...] = value if isinstance(value, tuple) else (value,)
    by_kind: dict[str, list[Any]] = {}
    for one in values:
        by_kind.setdefault(_kind(one), []).append(int(one) if isinstance(one, bool) else one)
    tests, params = [], [condition.field]
    for kind, group in by_kind.items():
        tests.append(f"(kind = ? AND value IN ({', '.join('?' for _ in group)}))")
        params += [kind, *group]
    subquery = f"SELECT document_id FROM fields WHERE key = ? AND ({' OR '.join(tests)})"
    if op in ("ne", "nin"):
        return f"d.id NOT IN ({subquery})", params
    return f"d.id IN ({subquery})", params
