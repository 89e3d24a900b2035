"""Turn the engines' query records into PostgreSQL: full-text queries, filters, field rows.

No user string reaches PostgreSQL as SQL or as ``tsquery`` syntax: words and phrases go through
``phraseto_tsquery`` (which parses no operators) as bound parameters, a prefix is one quoted
lexeme, and filter values are bound parameters too.

Text is folded the same way before it is indexed and before it is searched, so PostgreSQL sees
what SQLite's FTS5 sees: CJK runs cut into bigrams (`vrom.store.fts_text`) and Latin-script
diacritics removed (SQLite's ``remove_diacritics 2``; PostgreSQL's ``unaccent`` is an
extension a server may lack).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vrom.filters import Scalar, field_values, instant_of
from vrom.store.filter_sql import FilterDialect
from vrom.store.fts_text import segment, segment_query_term
from vrom.store.postgres_schema import TEXT_SEARCH_CONFIG
from vrom.store.records import KeywordQuery

CONFIG = f"'{TEXT_SEARCH_CONFIG}'::regconfig"
RANK_WEIGHTS = "'{0.1, 0.25, 0.5, 1.0}'::float4[]"
"""``ts_rank`` weights of D, C, B, A: body (C), headings (B) and title (A) count 1 : 2 : 4, the
SQLite store's BM25 column weights."""
RANK_NORMALIZATION = 1
"""``ts_rank`` normalisation 1: the rank is divided by 1 + the log of the document's length, so
a long chunk does not win by repeating a word (BM25's length normalisation, roughly)."""


def fold(text: str) -> str:
    """Return ``text`` as both index and query see it: CJK bigrams, Latin diacritics removed."""
    return without_marks(segment(text))


def without_marks(text: str) -> str:
    """Return ``text`` without Latin-script diacritics (and without NUL, which PostgreSQL
    text cannot hold); CJK text is left as it is."""
    text = text.replace("\x00", " ")
    if text.isascii():
        return text
    return _MARKED.sub(_plain_match, text)


_MARKED = re.compile("[\u0080-\u2fff]")  # below CJK: the characters that may carry a mark


def _plain_match(match: re.Match[str]) -> str:
    return _plain(match.group())


@functools.lru_cache(maxsize=4096)
def _plain(char: str) -> str:
    decomposed = unicodedata.normalize("NFD", char)
    if len(decomposed) == 1:
        return char
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
    )


def weighted_vector_sql(parts: int, texts: Sequence[str] = ()) -> str:
    """Return SQL building one ``tsvector`` from ``parts`` texts weighted A, B, C, D in turn:
    the SQL ``texts`` (column names), or as many parameters."""
    texts = texts or ["%s"] * parts
    return " || ".join(
        f"setweight(to_tsvector({CONFIG}, {text}), '{weight}')"
        for text, weight in zip(texts, "ABCD"[:parts], strict=True)
    )


def _prefix_lexeme(text: str) -> str:
    """Return a ``tsquery`` of one quoted prefix lexeme (quotes and backslashes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "':*"


@dataclass(frozen=True)
class TextSearch:
    """A keyword query as SQL pieces (see `text_search`); each piece has its own parameters."""

    terms: str
    """``WITH terms AS (...)``: one row per query term or phrase, its ``tsquery`` and its IDF."""
    terms_params: list[Any]
    match: str
    """A ``tsquery`` expression: any term or phrase, and none of the exclusions."""
    match_params: list[Any]

    def score(self, vector: str) -> str:
        """Return the score of the ``tsvector`` column ``vector``: the sum, over the query's
        terms, of the term's IDF times its ``ts_rank`` (BM25's shape: a rare word counts more
        than a common one, and ``ts_rank`` weighs fields and normalises for length)."""
        return (
            f"(SELECT sum(t.idf * ts_rank({RANK_WEIGHTS}, {vector}, t.query,"
            f" {RANK_NORMALIZATION})) FROM terms t)"
        )

    def ranked(self, columns: str, rows: str, alias: str, filter_sql: str) -> tuple[str, list[Any]]:
        """Return a statement giving ``columns`` and the `score` of the ``rows`` (their table
        aliased ``alias``) that match and pass ``filter_sql`` (whose parameters follow these,
        then the limit), best first; and its parameters."""
        return (
            f"WITH {self.terms} SELECT {columns}, {self.score(alias + '.search')} AS score"
            f" FROM {rows} WHERE {alias}.search @@ ({self.match}){filter_sql}"
            f" ORDER BY score DESC, {alias}.id LIMIT ?"
        ), [*self.terms_params, *self.match_params]


def text_search(query: KeywordQuery, table: str) -> TextSearch:
    """Return the SQL pieces that match and rank a parsed query over ``table``'s ``search``.

    Terms and phrases are ORed (any may match, as on SQLite); ``excluded`` ones must not match;
    ``word*`` is a prefix; a single CJK character is the prefix of a bigram. Each term's IDF is
    BM25's, ``ln(1 + (N - n + 0.5) / (n + 0.5))`` over the rows of ``table``.
    """
    positives: list[tuple[str, list[Any]]] = []
    negatives: list[tuple[str, list[Any]]] = []

    def add(text: str, prefix: bool, into: list[tuple[str, list[Any]]]) -> None:
        body, cjk_prefix = segment_query_term(text)  # segmented already: only marks go
        body = without_marks(body)
        words = body.split()
        if (prefix or cjk_prefix) and words:
            if len(words) > 1:  # "state machine*": the phrase, its last word a prefix
                into.append(
                    (
                        f"tsquery_phrase(phraseto_tsquery({CONFIG}, %s), to_tsquery({CONFIG}, %s))",
                        [" ".join(words[:-1]), _prefix_lexeme(words[-1])],
                    )
                )
            else:
                into.append((f"to_tsquery({CONFIG}, %s)", [_prefix_lexeme(words[0])]))
            return
        # phraseto_tsquery parses no operators: any text is safe
        into.append((f"phraseto_tsquery({CONFIG}, %s)", [body]))

    for term in query.terms:
        add(term[:-1] if term.endswith("*") else term, term.endswith("*"), positives)
    for phrase in query.phrases:
        add(phrase, False, positives)
    for text in query.excluded:
        add(text, False, negatives)
    rows = ", ".join(f"({sql})" for sql, _ in positives)
    terms = (
        "terms AS MATERIALIZED (SELECT t.query, ln(1 + (n.total - d.df + 0.5) / (d.df + 0.5)) AS idf"
        f" FROM (VALUES {rows}) AS t(query),"
        f" (SELECT count(*)::float8 AS total FROM {table}) n,"
        f" LATERAL (SELECT count(*)::float8 AS df FROM {table} WHERE search @@ t.query) d)"
    )
    match = " || ".join(sql for sql, _ in positives)
    match_params = [p for _, params in positives for p in params]
    if negatives:
        match = f"({match}) && !!({' || '.join(sql for sql, _ in negatives)})"
        match_params += [p for _, params in negatives for p in params]
    return TextSearch(terms, [p for _, params in positives for p in params], match, match_params)


# -- metadata fields -------------------------------------------------------------------------


def _number(value: int | float) -> Decimal | int:
    """Return a number as PostgreSQL's ``numeric`` holds it exactly (a float by its repr)."""
    return value if isinstance(value, int) else Decimal(repr(value))


def _field(key: str, value: Scalar) -> tuple[str, str, str | None, Any, float | None]:
    """Return the ``fields`` row of one scalar value."""
    if isinstance(value, bool):
        return (key, "bool", None, int(value), None)
    if isinstance(value, (int, float)):
        return (key, "number", None, _number(value), None)
    return (key, "text", value, None, instant_of(value))


def field_rows(frontmatter: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None, Any, Any]]:
    """Yield (key, kind, text, number, instant) for every scalar a filter can test
    (`vrom.filters.field_values`), each once."""
    seen: set[tuple[str, str, Any]] = set()
    for key, value in field_values(frontmatter):
        row = _field(key, value)
        if (marker := (row[0], row[1], row[2] or row[3])) not in seen:
            seen.add(marker)
            yield row


def _in_list(column: str, values: Sequence[Any], kind: str) -> tuple[str, list[Any]]:
    if kind == "text":
        return f"{column} = ANY(%s)", [list(values)]
    # one type for the whole array: psycopg dumps no list of ints and Decimals mixed
    numbers = [Decimal(v) if isinstance(v, int) else v for v in values]
    return f"{column} = ANY(%s::numeric[])", [numbers]


DIALECT = FilterDialect(
    mark="%s",
    text_value="text_value",
    number_value="number_value",
    instant="instant",
    path_prefix="left(d.path, %s) = %s",
    in_list=_in_list,
    json_items=lambda column: f"jsonb_array_elements_text({column}::jsonb) AS j(value)",
    number=_number,
)
"""PostgreSQL's filter SQL: a field's instant is the ``instant`` column `field_rows` fills."""
