"""Read what a user typed as a keyword query, and a ``where`` mapping as a filter.

Query syntax (parsing never raises on any string; `check_query` refuses what cannot be searched):
    word            a term; notes with more of the terms rank higher (any term may match)
    "two words"     a phrase
    -word, -"a b"   must not appear (ignored when nothing positive is left)
    pre*            a prefix
Everything else, operators and stray punctuation included, is taken literally as words.
Common English words (`STOPWORDS`) are dropped from the terms when other terms remain: they
match nearly every note, so ranking them costs time and adds nothing to the order. So are the
words that make a question a question ("When did Melanie paint a sunrise?" asks about
Melanie, painting and a sunrise): an agent asks its memory in sentences.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from vrom.dates import parse_instant
from vrom.errors import ValidationError, shown
from vrom.store import CONDITION_OPS, Condition, KeywordQuery, Where

_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w", re.UNICODE)
_TERM_SPLIT = re.compile(r"[^\w*]+", re.UNICODE)
_FIELD_NAME = re.compile(r"^[^\x00-\x1f]{1,128}$")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The integers a ``where`` value may be: what SQLite (and a note's frontmatter field) holds."""
MAX_WHERE_VALUES = 1_000
"""The most values an ``$in`` or ``$nin`` list, or the tags of a ``where``, may hold."""
Scalar = str | int | float | bool
# the classic English stop list of Lucene's StandardAnalyzer (bm25s's "en" list too)
_ENGLISH_STOP_LIST = (
    "a an and are as at be but by for if in into is it no not of on or such that the their"
    " then there these they this to was will with"
)
# what, when, did...: a question's form, not its subject. On LoCoMo's dialogue questions
# keyword nDCG@10 rose 0.436 -> 0.477 and hybrid 0.512 -> 0.532; SciFact's claims and
# NFCorpus's titles moved by -0.001 to +0.002 (docs/benchmarks.md)
_QUESTION_WORDS = "what when where who whom whose which why how did do does"
STOPWORDS = frozenset(_ENGLISH_STOP_LIST.split()) | frozenset(_QUESTION_WORDS.split())


def check_query(query: object) -> str:
    """Return ``query`` if it is a string with something to search for, else raise
    `ValidationError`.

    A blank query matches nothing by keyword and ranks by meaning against the embedding of
    nothing (noise), so every search refuses it instead of answering it.
    """
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, not {type(query).__name__}")
    if not query.strip():
        raise ValidationError("query is blank: say what to search for")
    return check_unicode(query, "query")


def check_unicode(text: str, what: str) -> str:
    """Return ``text`` if it is valid Unicode, else raise `ValidationError` naming ``what``.

    A lone surrogate (``\\udcff``) is what Python makes of bytes that are not UTF-8 in a
    command-line argument or a file name; it cannot be stored, matched or embedded, so it is
    refused where it comes in rather than failing deep inside SQLite or a tokenizer.
    """
    found = _LONE_SURROGATE.search(text)
    if found is not None:
        raise ValidationError(
            f"{what} is not valid Unicode: it holds a lone surrogate ({found.group()!a} at"
            f" character {found.start()}), as bytes that are not UTF-8 become; pass UTF-8 text"
        )
    return text


def parse_query(text: str) -> KeywordQuery:
    """Return the parsed form of a keyword query."""
    terms: list[str] = []
    phrases: list[str] = []
    excluded: list[str] = []
    for match in _TOKEN.finditer(text):
        negated, quoted, bare = match.group(1), match.group(2), match.group(3)
        if quoted is not None:
            words = " ".join(w for w in _TERM_SPLIT.split(quoted.replace("*", " ")) if w)
            if _WORD.search(words):
                (excluded if negated else phrases).append(words)
            continue
        negated_bare = bare.startswith("-") and len(bare) > 1
        for word in _TERM_SPLIT.split(bare[1:] if negated_bare else bare):
            prefix = word.endswith("*")
            word = word.replace("*", "")
            if not _WORD.search(word):
                continue
            if negated_bare:
                excluded.append(word)
            else:
                terms.append(word + ("*" if prefix else ""))
    content = [t for t in terms if t.lower() not in STOPWORDS]
    if content or phrases:
        terms = content
    return KeywordQuery(
        tuple(dict.fromkeys(terms)), tuple(dict.fromkeys(phrases)), tuple(dict.fromkeys(excluded))
    )


def query_words(query: KeywordQuery) -> list[str]:
    """Return the positive words of a query (for excerpts and highlighting), longest first."""
    words = [t.rstrip("*") for t in query.terms]
    for phrase in query.phrases:
        words.append(phrase)
        words.extend(phrase.split())
    return sorted(set(words), key=len, reverse=True)


def parse_where(where: Mapping[str, Any] | None) -> Where | None:
    """Return the filter a ``where`` mapping describes.

    Keys: ``path`` (a folder or path prefix), ``tag`` / ``tags`` (a tag or list of tags, all
    required; ``project`` also matches ``project/alpha``); any other key is a frontmatter field
    that must equal the given scalar (a list field matches when it holds the value), or pass a
    mapping of operators (see `field_conditions`).
    """
    if not where:
        return None
    if not isinstance(where, Mapping):
        raise ValidationError(
            f"where must be a mapping of field to value, not {type(where).__name__}"
        )
    path_prefix: str | None = None
    tags: list[str] = []
    conditions: list[Condition] = []
    for key, value in where.items():
        _check_field_name(key)
        if key == "path":
            if not isinstance(value, str) or not value.strip("/"):
                raise ValidationError("where: 'path' must be a non-empty folder or path prefix")
            check_unicode(value, "where: 'path'")
            path_prefix = value.strip().removeprefix("./").lstrip("/")
        elif key in ("tag", "tags"):
            values = value if isinstance(value, (list, tuple)) else [value]
            if len(tags) + len(values) > MAX_WHERE_VALUES:
                raise ValidationError(f"where: more than {MAX_WHERE_VALUES:,} tags")
            for tag in values:
                if not isinstance(tag, str) or not tag.strip("# "):
                    raise ValidationError(f"where: tag {shown(tag)} must be a non-empty string")
                check_unicode(tag, f"where: tag {shown(tag)}")
                tags.append(tag.strip().lstrip("#").lower())
        else:
            conditions += field_conditions(key, value)
    return Where(path_prefix=path_prefix, tags=tuple(tags), conditions=tuple(conditions))


def as_filter(where: Mapping[str, Any] | Where | None) -> Where | None:
    """Return ``where`` if it is a parsed filter already, else what `parse_where` makes of it."""
    return where if isinstance(where, Where) else parse_where(where)


def parse_metadata_where(where: Mapping[str, Any] | None) -> Where | None:
    """Return the filter a ``where`` mapping over document metadata describes.

    Every key is a metadata field (a collection has no paths or tags of its own); each value is
    a scalar to equal or a mapping of operators, as in `field_conditions`. All must hold.
    """
    if not where:
        return None
    if not isinstance(where, Mapping):
        raise ValidationError(
            f"where must be a mapping of field to value, not {type(where).__name__}"
        )
    conditions: list[Condition] = []
    for key, value in where.items():
        _check_field_name(key)
        conditions += field_conditions(key, value)
    return Where(conditions=tuple(conditions))


_OPERATORS = {f"${op}": op for op in CONDITION_OPS}


def field_conditions(key: str, value: Any) -> list[Condition]:
    """Return the conditions ``where[key] = value`` asks for.

    A scalar (string, number, boolean) must equal the field, or be held by a list field. A
    mapping of operators tests it otherwise: ``$eq``, ``$ne`` (a missing field passes), ``$in``
    and ``$nin`` (a list of scalars), ``$gt``, ``$gte``, ``$lt``, ``$lte`` (numbers: only
    numeric fields pass; or an ISO 8601 date or datetime: only fields holding one pass, compared
    as instants, a date as its midnight UTC and a datetime without an offset as UTC). Several
    operators must all hold: ``{"$gte": 2, "$lt": 5}``. A key ``a.b`` names the member ``b`` of
    a mapping ``a``, or of the mappings in a list ``a`` (``sources.resource``).
    Strings must be valid Unicode and integers within 64 bits (`INT64_MIN` to `INT64_MAX`),
    what a field can hold; anything else is a `ValidationError`.
    """
    if _is_scalar(value):
        return [Condition(key, "eq", _checked_scalar(key, value))]
    if not isinstance(value, Mapping) or not value:
        raise ValidationError(
            f"where: value for {shown(key)} must be a string, number, boolean or a mapping of "
            f"operators ({', '.join(_OPERATORS)}), not {type(value).__name__}"
        )
    conditions = []
    for name, operand in value.items():
        op = _OPERATORS.get(name) if isinstance(name, str) else None
        if op is None:
            raise ValidationError(
                f"where: unknown operator {shown(name)} for {shown(key)}: use one of"
                f" {', '.join(_OPERATORS)}"
            )
        if op in ("in", "nin"):
            if not isinstance(operand, (list, tuple)) or not all(map(_is_scalar, operand)):
                raise ValidationError(f"where: {name} for {shown(key)} takes a list of scalars")
            if not operand:
                raise ValidationError(f"where: {name} for {shown(key)} needs at least one value")
            if len(operand) > MAX_WHERE_VALUES:
                raise ValidationError(
                    f"where: {name} for {shown(key)} holds {len(operand):,} values; the limit is"
                    f" {MAX_WHERE_VALUES:,}"
                )
            conditions.append(Condition(key, op, tuple(_checked_scalar(key, v) for v in operand)))
        elif op in ("eq", "ne"):
            if not _is_scalar(operand):
                raise ValidationError(
                    f"where: {name} for {shown(key)} takes a string, number or boolean"
                )
            conditions.append(Condition(key, op, _checked_scalar(key, operand)))
        elif isinstance(operand, str):
            instant = parse_instant(operand)
            if instant is None:
                raise ValidationError(
                    f"where: {name} for {shown(key)} takes a number or an ISO 8601 date or"
                    f" datetime ('2026-09-23', '2026-09-23T00:00:00Z'), not {shown(operand)}"
                )
            conditions.append(Condition(key, op, instant.isoformat()))
        else:
            if isinstance(operand, bool) or not isinstance(operand, (int, float)):
                raise ValidationError(
                    f"where: {name} for {shown(key)} takes a number or an ISO 8601 date, not"
                    f" {shown(operand)}"
                )
            if operand != operand:  # NaN compares with nothing
                raise ValidationError(f"where: {name} for {shown(key)} takes a number, not NaN")
            conditions.append(Condition(key, op, _checked_scalar(key, operand)))
    return conditions


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _check_field_name(key: object) -> None:
    if not isinstance(key, str) or not _FIELD_NAME.match(key):
        raise ValidationError(f"where: field name {shown(key)} is not valid")
    check_unicode(key, f"where: field name {shown(key)}")


def _checked_scalar(key: str, value: Scalar) -> Scalar:
    """Return a ``where`` value a field can hold, or raise `ValidationError` naming ``key``."""
    if isinstance(value, str):
        return check_unicode(value, f"where: the value for {shown(key)}")
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:  # (a bool is in range)
        bits = value.bit_length()  # str() of an int past 4,300 digits is refused
        text = str(value) if bits <= 128 else f"an integer of {bits:,} bits"
        raise ValidationError(
            f"where: the value for {shown(key)} is {text}, beyond the 64-bit integers a field"
            f" holds ({INT64_MIN} to {INT64_MAX})"
        )
    return value
