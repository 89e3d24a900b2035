"""Turn the engines' query records into SQLite's dialects: FTS5 MATCH and SQL filters.

No user string reaches SQLite unquoted: terms and phrases become FTS5 strings, filter values and
field names become bound parameters.
"""

from __future__ import annotations

from typing import Any

from vrom.store import Condition, KeywordQuery, Scalar, Where
from vrom.store.fts_text import segment_query_term


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


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


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


def _condition_sql(condition: Condition) -> tuple[str, list[Any]]:
    """Return the SQL test of one condition on ``d.frontmatter`` and its parameters."""
    json_path = '$."' + condition.field.replace('"', '""') + '"'
    op, value = condition.op, condition.value
    if op in _COMPARISONS:
        # compare numbers only: SQLite orders any text above any number
        return (
            f"(json_type(d.frontmatter, ?) IN ('integer', 'real')"
            f" AND json_extract(d.frontmatter, ?) {_COMPARISONS[op]} ?)",
            [json_path, json_path, value],
        )
    values: tuple[Scalar, ...] = value if isinstance(value, tuple) else (value,)
    tests, params = [], []
    for one in values:
        if isinstance(one, bool):  # JSON true/false, not the numbers 1/0 SQLite reads them as
            tests.append(f"j.type = '{'true' if one else 'false'}'")
        else:
            tests.append("(j.type NOT IN ('true', 'false') AND j.value = ?)")
            params.append(one)
    # A scalar field equals a value, or a list field holds one: json_each yields a scalar
    # itself and a list's items, so one test covers both (an object field never matches).
    test = (
        "(json_type(d.frontmatter, ?) != 'object' AND EXISTS (SELECT 1 FROM"
        " json_each(d.frontmatter, ?) j WHERE j.type NOT IN ('object', 'array')"
        f" AND ({' OR '.join(tests)})))"
    )
    params = [json_path, json_path, *params]
    if op in ("ne", "nin"):
        return f"NOT coalesce({test}, 0)", params
    return test, params
