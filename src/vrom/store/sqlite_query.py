"""Turn the engines' query records into SQLite's dialects: FTS5 MATCH and SQL filters.

No user string reaches SQLite unquoted: terms and phrases become FTS5 strings, filter values and
field names become bound parameters.
"""

from __future__ import annotations

from typing import Any

from vrom.store import KeywordQuery, Where
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
    for key, value in where.fields:
        json_path = '$."' + key.replace('"', '""') + '"'
        clauses.append(
            "(json_extract(d.frontmatter, ?) = ? OR EXISTS (SELECT 1 FROM"
            " json_each(d.frontmatter, ?) j WHERE j.type != 'object' AND j.value = ?))"
        )
        params += [json_path, value, json_path, value]
    return "".join(f" AND {c}" for c in clauses), params
