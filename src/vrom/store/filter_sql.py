"""Compile a filter of the one grammar (`vrom.filters`) to SQL, for both backends.

One compiler: a backend passes a `FilterDialect` (its placeholder, its ``IN`` list, the columns of
its ``fields`` table, how it reads a field's instant and a JSON list), and gets back
`` AND ...`` clauses and their parameters. Every user value is a bound parameter; field names
are parameters too. The SQL gives a filter the meaning `vrom.filters.matches` gives it (the
tests compare the two on both backends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vrom.filters import COMPARISONS, AllOf, AnyOf, Condition, Filter, Instant, Scalar, kind_of
from vrom.store.records import MEMORY_FIELDS, MemoryFilter, MemoryRecord, Where
from vrom.store.sql_dialect import escape_like

_OPERATORS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_NOTHING = "(1 = 0)"


@dataclass(frozen=True)
class FilterDialect:
    """What differs between the backends' SQL for a filter."""

    mark: str
    """The parameter placeholder: ``?`` or ``%s``."""
    text_value: str
    """The ``fields`` column holding a text field's value."""
    number_value: str
    """The ``fields`` column holding a number's or a boolean's (0 or 1) value."""
    instant: str
    """An expression over a ``fields`` row: the Unix time its text names (NULL if none)."""
    path_prefix: str
    """A test that ``d.path`` starts with the second of two parameters (the first: its length)."""
    in_list: Callable[[str, Sequence[Any], str], tuple[str, list[Any]]]
    """``(column, values, kind)`` -> a test that the column is one of the values, and params."""
    json_items: Callable[[str], str]
    """A JSON list column -> a FROM item ``j`` whose ``j.value`` is each of its text items."""
    number: Callable[[int | float], Any] = lambda value: value
    """A number as the database compares it exactly."""


def where_sql(where: Where | None, dialect: FilterDialect) -> tuple[str, list[Any]]:
    """Return `` AND ...`` clauses testing document ``d`` against a filter, and parameters."""
    if where is None:
        return "", []
    mark = dialect.mark
    clauses: list[str] = []
    params: list[Any] = []
    if where.path_prefix:
        clauses.append(dialect.path_prefix)
        params += [len(where.path_prefix), where.path_prefix]
    for tag in where.tags:
        clauses.append(
            "EXISTS (SELECT 1 FROM tags t WHERE t.document_id = d.id"
            f" AND (t.tag = {mark} OR t.tag LIKE {mark} ESCAPE '\\'))"
        )
        params += [tag, escape_like(tag) + "/%"]
    for part in where.conditions:
        clause, values = filter_sql(part, dialect, _document_test)
        clauses.append(clause)
        params += values
    return "".join(f" AND {c}" for c in clauses), params


def memory_filter_sql(where: MemoryFilter, dialect: FilterDialect) -> tuple[str, list[Any]]:
    """Return `` AND ...`` clauses testing memory ``m`` against a filter, and parameters."""
    if where.where is None:
        return "", []
    clause, params = filter_sql(where.where, dialect, _memory_test)
    return f" AND {clause}", params


Test = Callable[[Condition, FilterDialect], tuple[str, list[Any]]]


def filter_sql(where: Filter, dialect: FilterDialect, test: Test) -> tuple[str, list[Any]]:
    """Return one SQL boolean for a filter tree, each field test made by ``test``."""
    if isinstance(where, (AllOf, AnyOf)):
        parts = [filter_sql(part, dialect, test) for part in where.parts]
        joiner = " AND " if isinstance(where, AllOf) else " OR "
        return "(" + joiner.join(sql for sql, _ in parts) + ")", [p for _, ps in parts for p in ps]
    return test(where, dialect)


def _wanted(condition: Condition) -> tuple[Scalar, ...]:
    value = condition.value
    assert not isinstance(value, Instant)
    return value if isinstance(value, tuple) else (value,)


def _document_test(condition: Condition, dialect: FilterDialect) -> tuple[str, list[Any]]:
    """Return the SQL test of one condition on document ``d`` and its parameters.

    It looks the values up in the ``fields`` table (a document's scalar metadata values, a list
    field's items one by one), so a filter costs index lookups, not a parse of every
    document's JSON. A list field passes when any of its items does.
    """
    op, value, mark = condition.op, condition.value, dialect.mark
    select = f"SELECT document_id FROM fields WHERE key = {mark}"
    if op in COMPARISONS:
        if isinstance(value, Instant):
            test, operand = f"kind = 'text' AND {dialect.instant}", value.unix
        else:
            assert isinstance(value, (int, float))
            test, operand = f"kind = 'number' AND {dialect.number_value}", dialect.number(value)
        sql = f"d.id IN ({select} AND {test} {_OPERATORS[op]} {mark})"
        return sql, [condition.field, operand]
    by_kind: dict[str, list[Any]] = {}
    for one in _wanted(condition):
        by_kind.setdefault(kind_of(one), []).append(one)
    tests, params = [], [condition.field]
    for kind, group in by_kind.items():
        if kind == "text":
            sql, values = dialect.in_list(dialect.text_value, group, kind)
        else:
            numbers = [int(v) if kind == "bool" else dialect.number(v) for v in group]
            sql, values = dialect.in_list(dialect.number_value, numbers, kind)
        tests.append(f"(kind = '{kind}' AND {sql})")
        params += values
    subquery = f"{select} AND ({' OR '.join(tests)})"
    if op in ("ne", "nin"):
        return f"d.id NOT IN ({subquery})", params
    return f"d.id IN ({subquery})", params


_MEMORY_COLUMNS = {
    "project": "m.project",
    "type": "m.type",
    "status": "m.status",
    "source": "m.source",
    "tags": "m.tags",
    "created": "m.created_unix",
    "updated": "m.updated_unix",
}
assert set(_MEMORY_COLUMNS) == set(MEMORY_FIELDS)


def memory_values(memory: MemoryRecord) -> dict[str, list[Scalar | Instant]]:
    """Return a memory's fields as `vrom.filters.holds` reads them: what the SQL above tests
    in its columns (a missing project or source is no value)."""
    values: dict[str, list[Scalar | Instant]] = {
        "type": [memory.type],
        "status": [memory.status],
        "tags": list(memory.tags),
        "created": [Instant(memory.created_unix)],
        "updated": [Instant(memory.updated_unix)],
    }
    for key, value in (("project", memory.project), ("source", memory.source)):
        values[key] = [] if value is None else [value]
    return values


def _memory_test(condition: Condition, dialect: FilterDialect) -> tuple[str, list[Any]]:
    """Return the SQL test of one condition on memory ``m`` (its columns, by `MEMORY_FIELDS`)."""
    column, kind, value = (
        _MEMORY_COLUMNS[condition.field],
        MEMORY_FIELDS[condition.field],
        condition.value,
    )
    if kind == "date":  # the parser lets only comparisons with dates reach a date field
        assert isinstance(value, Instant) and condition.op in COMPARISONS
        return f"{column} {_OPERATORS[condition.op]} {dialect.mark}", [value.unix]
    texts = [v for v in _wanted(condition) if isinstance(v, str)]
    params: list[Any] = []
    if not texts:
        held = _NOTHING
    elif kind == "list":
        test, params = dialect.in_list("j.value", texts, "text")
        held = f"EXISTS (SELECT 1 FROM {dialect.json_items(column)} WHERE {test})"
    else:
        test, params = dialect.in_list(column, texts, "text")
        held = f"({column} IS NOT NULL AND {test})"
    return (f"NOT {held}" if condition.op in ("ne", "nin") else held), params
