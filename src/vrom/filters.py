"""The one filter grammar (Chroma's) of every face, parsed into a small tree, and its meaning.

A filter is a JSON object:

    {"status": "done"}                           equality (a list field: it holds the value)
    {"year": {"$gte": 2020, "$lt": 2025}}        $eq $ne $gt $gte $lt $lte (several: all hold)
    {"lang": {"$in": ["en", "fr"]}}              $in $nin: any of / none of a list
    {"tags": {"$contains": "ml"}}                a list field holds the value
    {"$and": [{...}, {...}]}, {"$or": [...]}     all / any of several filters

Several keys in one object must all hold. Values are strings, numbers and booleans; ``$gt``,
``$gte``, ``$lt`` and ``$lte`` take a number (only number fields pass) or an ISO 8601 date or
datetime (only fields holding one pass, compared as instants: a date is its midnight UTC, a
datetime without an offset is UTC). ``$ne`` and ``$nin`` pass a document without the field.
A key ``a.b`` names member ``b`` of a mapping ``a`` (or of the mappings in a list ``a``).

`parse_filter` turns the object into a `Filter` (frozen dataclasses) or raises a one-line
`ValidationError` naming the key; `matches` is the reference meaning of a `Filter` over a
document's fields, which the stores compile to SQL (`vrom.store.filter_sql`) and the tests
compare against. docs/filters.md is the user's page.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vrom.dates import parse_instant
from vrom.errors import ValidationError, check_unicode, shown

Scalar = str | int | float | bool
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The integers a filter value may be: what SQLite (and a note's frontmatter field) holds."""
MAX_VALUES = 1_000
"""The most values an ``$in`` or ``$nin`` list (or a vault's ``tags``) may hold."""
MAX_DEPTH = 8
"""How deep ``$and`` and ``$or`` may nest."""
MAX_CONDITIONS = 200
"""The most field tests one filter may hold."""
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains")
COMPARISONS = ("gt", "gte", "lt", "lte")
_FIELD_NAME = re.compile(r"^[^\x00-\x1f$][^\x00-\x1f]{0,127}$")


@dataclass(frozen=True)
class Instant:
    """A date operand of a comparison: the Unix time an ISO 8601 date or datetime names."""

    unix: float

    @classmethod
    def of(cls, text: str) -> Instant:
        """Return the instant an ISO 8601 date or datetime names (`ValidationError` if none)."""
        unix = instant_of(text)
        if unix is None:
            raise ValidationError(f"{shown(text)} is not an ISO 8601 date or datetime")
        return cls(unix)


@dataclass(frozen=True)
class Condition:
    """A test of one field: ``op`` is ``eq``, ``ne``, ``in``, ``nin``, ``contains``, ``gt``,
    ``gte``, ``lt`` or ``lte`` (the operator without its ``$``).

    ``value`` is a scalar, a tuple of scalars (``in``, ``nin``), or, for a comparison, a number
    or an `Instant`.
    """

    field: str
    op: str
    value: Scalar | tuple[Scalar, ...] | Instant


@dataclass(frozen=True)
class AllOf:
    """Every part holds (``$and``, or several keys of one object)."""

    parts: tuple[Filter, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one part holds (``$or``)."""

    parts: tuple[Filter, ...]


Filter = Condition | AllOf | AnyOf


def parse_filter(
    where: object, *, fields: Mapping[str, str] | None = None, what: str = "where"
) -> Filter | None:
    """Return the `Filter` a filter object describes (None for None or ``{}``).

    ``fields`` limits the keys to a fixed set of fields (a memory's), each ``text``, ``list``
    or ``date``: a ``date`` field takes only comparisons with dates, a ``list`` field no
    comparisons. ``what`` names the filter in messages (``where``, ``--where``).
    """
    if where is None or (isinstance(where, Mapping) and not where):
        return None
    counter = [0]
    return _parse_object(where, fields, what, 0, counter)


def all_of(*parts: Filter | None) -> Filter | None:
    """Return a filter that holds when every given one does (None when none is given)."""
    given = tuple(part for part in parts if part is not None)
    if not given:
        return None
    return given[0] if len(given) == 1 else AllOf(given)


def _parse_object(
    where: object, fields: Mapping[str, str] | None, what: str, depth: int, counter: list[int]
) -> Filter:
    if not isinstance(where, Mapping):
        raise ValidationError(
            f"{what} must be an object of field to value, not {type(where).__name__}"
        )
    if not where:
        raise ValidationError(f"{what}: an empty object inside $and/$or tests nothing")
    if depth > MAX_DEPTH:
        raise ValidationError(f"{what}: $and/$or nest deeper than {MAX_DEPTH} levels")
    parts: list[Filter] = []
    for key, value in where.items():
        if isinstance(key, str) and key in ("$and", "$or"):
            if not isinstance(value, (list, tuple)) or not value:
                raise ValidationError(f"{what}: {key} takes a non-empty list of filter objects")
            inner = tuple(_parse_object(v, fields, what, depth + 1, counter) for v in value)
            parts.append(AllOf(inner) if key == "$and" else AnyOf(inner))
        elif isinstance(key, str) and key.startswith("$"):
            raise ValidationError(
                f"{what}: unknown operator {shown(key)} at the top of a filter: use $and or $or,"
                " or a field name"
            )
        else:
            parts += _field_conditions(_field_name(key, what), value, fields, what, counter)
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _field_conditions(
    key: str, value: Any, fields: Mapping[str, str] | None, what: str, counter: list[int]
) -> list[Condition]:
    kind = None
    if fields is not None:
        kind = fields.get(key)
        if kind is None:
            raise ValidationError(
                f"{what}: unknown field {shown(key)}: filter on {', '.join(fields)}"
            )
    if _is_scalar(value):
        operators: Mapping[Any, Any] = {"$eq": value}
    elif isinstance(value, Mapping) and value:
        operators = value
    else:
        raise ValidationError(
            f"{what}: value for {shown(key)} must be a string, number, boolean or an object of "
            f"operators ({', '.join(OPERATORS)}), not {_type_name(value)}"
        )
    conditions = []
    for name, operand in operators.items():
        if not isinstance(name, str) or name not in OPERATORS:
            raise ValidationError(
                f"{what}: unknown operator {shown(name)} for {shown(key)}: use one of"
                f" {', '.join(OPERATORS)}"
            )
        op = name[1:]
        counter[0] += 1
        if counter[0] > MAX_CONDITIONS:
            raise ValidationError(f"{what}: more than {MAX_CONDITIONS} field tests")
        if kind == "date" and op not in COMPARISONS:
            raise ValidationError(
                f"{what}: {shown(key)} is a date: compare it with $gt, $gte, $lt or $lte"
            )
        if kind in ("text", "list") and op in COMPARISONS:
            raise ValidationError(f"{what}: {name} does not apply to {shown(key)} (a {kind})")
        if op in ("in", "nin"):
            if not isinstance(operand, (list, tuple)) or not all(map(_is_scalar, operand)):
                raise ValidationError(f"{what}: {name} for {shown(key)} takes a list of scalars")
            if not operand:
                raise ValidationError(f"{what}: {name} for {shown(key)} needs at least one value")
            if len(operand) > MAX_VALUES:
                raise ValidationError(
                    f"{what}: {name} for {shown(key)} holds {len(operand):,} values; the limit"
                    f" is {MAX_VALUES:,}"
                )
            values = tuple(_checked_scalar(key, v, what) for v in operand)
            conditions.append(Condition(key, op, values))
        elif op in ("eq", "ne", "contains"):
            if not _is_scalar(operand):
                raise ValidationError(
                    f"{what}: {name} for {shown(key)} takes a string, number or boolean, not"
                    f" {_type_name(operand)}"
                )
            conditions.append(Condition(key, op, _checked_scalar(key, operand, what)))
        else:
            conditions.append(Condition(key, op, _comparand(key, name, operand, kind, what)))
    return conditions


def _comparand(key: str, name: str, operand: Any, kind: str | None, what: str) -> float | Instant:
    if isinstance(operand, str):
        instant = parse_instant(operand)
        if instant is None:
            raise ValidationError(
                f"{what}: {name} for {shown(key)} takes a number or an ISO 8601 date or"
                f" datetime ('2026-09-23', '2026-09-23T00:00:00Z'), not {shown(operand)}"
            )
        return Instant(instant.timestamp())
    if kind == "date" or isinstance(operand, bool) or not isinstance(operand, (int, float)):
        wanted = "an ISO 8601 date" if kind == "date" else "a number or an ISO 8601 date"
        raise ValidationError(
            f"{what}: {name} for {shown(key)} takes {wanted}, not {shown(operand)}"
        )
    return _checked_scalar(key, operand, what)  # type: ignore[return-value]


def _type_name(value: object) -> str:
    return "an empty object" if isinstance(value, Mapping) else type(value).__name__


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _field_name(key: object, what: str) -> str:
    if not isinstance(key, str) or not _FIELD_NAME.match(key):
        raise ValidationError(f"{what}: field name {shown(key)} is not valid")
    return check_unicode(key, f"{what}: field name {shown(key)}")


def _checked_scalar(key: str, value: Scalar, what: str) -> Scalar:
    """Return a value a field can hold, or raise `ValidationError` naming ``key``."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(f"{what}: the value for {shown(key)} holds a NUL character")
        return check_unicode(value, f"{what}: the value for {shown(key)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(f"{what}: the value for {shown(key)} must be a finite number")
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:  # (a bool is in range)
        bits = value.bit_length()  # str() of an int past 4,300 digits is refused
        text = str(value) if bits <= 128 else f"an integer of {bits:,} bits"
        raise ValidationError(
            f"{what}: the value for {shown(key)} is {text}, beyond the 64-bit integers a field"
            f" holds ({INT64_MIN} to {INT64_MAX})"
        )
    return value


# -- meaning ---------------------------------------------------------------------------------


def kind_of(value: Scalar) -> str:
    """Return a scalar's kind as the stores keep it apart: ``bool``, ``number`` or ``text``."""
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else "text"


def instant_of(text: str) -> float | None:
    """Return the Unix time a field's text names if it is an ISO 8601 date or datetime."""
    instant = parse_instant(text)
    return None if instant is None else instant.timestamp()


def field_values(metadata: Mapping[str, Any]) -> Iterator[tuple[str, Scalar]]:
    """Yield (key, value) for every scalar a filter can test in a document's metadata.

    A scalar field, each scalar item of a list field, and one level into mappings (``a.b``), a
    mapping in a list included; null, and lists or mappings deeper, are not fields. What the
    stores' ``fields`` tables hold (SQLite's ``field_values`` view reads the same JSON).
    """
    data = json.loads(json.dumps(metadata, ensure_ascii=False))  # the stored JSON's types
    for key, value in data.items():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    for member, inner in item.items():
                        if _is_scalar(inner):
                            yield f"{key}.{member}", inner
                elif _is_scalar(item):
                    yield key, item
        elif isinstance(value, dict):
            for member, inner in value.items():
                if isinstance(inner, list):
                    yield from ((f"{key}.{member}", i) for i in inner if _is_scalar(i))
                elif _is_scalar(inner):
                    yield f"{key}.{member}", inner
        elif _is_scalar(value):
            yield key, value


def matches(where: Filter | None, metadata: Mapping[str, Any]) -> bool:
    """Return whether a document whose metadata is ``metadata`` passes ``where``: the meaning
    every store's SQL gives a filter (a list field passes a test when any item does)."""
    if where is None:
        return True
    values: dict[str, list[Scalar | Instant]] = {}
    for key, value in field_values(metadata):
        values.setdefault(key, []).append(value)
    return holds(where, values)


def holds(where: Filter, values: Mapping[str, Sequence[Scalar | Instant]]) -> bool:
    """Return whether ``where`` holds over a record's fields given as key -> the values it
    holds (one for a scalar field, the items of a list; an `Instant` is a date field's)."""
    if isinstance(where, AllOf):
        return all(holds(part, values) for part in where.parts)
    if isinstance(where, AnyOf):
        return any(holds(part, values) for part in where.parts)
    items = values.get(where.field, ())
    op, value = where.op, where.value
    if op in COMPARISONS:
        if isinstance(value, Instant):
            instants = [
                i.unix if isinstance(i, Instant) else instant_of(i)
                for i in items
                if isinstance(i, (str, Instant))
            ]
            return any(_compares(op, i, value.unix) for i in instants if i is not None)
        numbers = [i for i in items if not isinstance(i, Instant) and kind_of(i) == "number"]
        return any(_compares(op, i, value) for i in numbers)  # type: ignore[arg-type]
    wanted = value if isinstance(value, tuple) else (value,)
    held = any(
        kind_of(i) == kind_of(w) and i == w
        for i in items
        if not isinstance(i, Instant)
        for w in wanted
        if not isinstance(w, Instant)
    )
    return not held if op in ("ne", "nin") else held


def _compares(op: str, left: float, right: float) -> bool:
    if op == "gt":
        return left > right
    if op == "gte":
        return left >= right
    if op == "lt":
        return left < right
    return left <= right
