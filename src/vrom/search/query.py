"""Read what a user typed as a keyword query, and a search's filter parts as one `Where`.

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
from collections.abc import Mapping, Sequence
from typing import Any

from vrom.errors import ValidationError, check_unicode, shown
from vrom.filters import MAX_VALUES, parse_filter
from vrom.store import KeywordQuery, Where

_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w", re.UNICODE)
_TERM_SPLIT = re.compile(r"[^\w*]+", re.UNICODE)
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


def parse_where(
    where: Mapping[str, Any] | None,
    *,
    path: str | None = None,
    tags: str | Sequence[str] | None = None,
) -> Where | None:
    """Return the filter a vault search asks for (None when it asks for none).

    ``where`` is a filter of the one grammar over the notes' frontmatter (`vrom.filters`; a
    field named ``path`` or ``tags`` is a frontmatter field like any other). ``path`` keeps
    the notes under a folder or path prefix; ``tags`` (a tag or a list) keeps the notes
    holding every one of them, inline or in frontmatter (``project`` also matches
    ``project/alpha``).
    """
    path_prefix: str | None = None
    if path is not None:
        if not isinstance(path, str) or not path.strip().strip("/"):
            raise ValidationError("'path' must be a non-empty folder or path prefix")
        check_unicode(path, "'path'")
        path_prefix = path.strip().removeprefix("./").lstrip("/")
    wanted: list[str] = []
    if tags is not None:
        values = [tags] if isinstance(tags, str) else tags
        if not isinstance(values, (list, tuple)):
            raise ValidationError(f"'tags' must be a list of tags, not {type(tags).__name__}")
        if len(values) > MAX_VALUES:
            raise ValidationError(f"'tags': more than {MAX_VALUES:,} tags")
        for tag in values:
            if not isinstance(tag, str) or not tag.strip("# "):
                raise ValidationError(f"'tags': tag {shown(tag)} must be a non-empty string")
            check_unicode(tag, f"'tags': tag {shown(tag)}")
            wanted.append(tag.strip().lstrip("#").lower())
    fields = parse_filter(where)
    if fields is None and path_prefix is None and not wanted:
        return None
    return Where(
        path_prefix=path_prefix,
        tags=tuple(wanted),
        conditions=() if fields is None else (fields,),
    )


def as_filter(where: Mapping[str, Any] | Where | None) -> Where | None:
    """Return ``where`` if it is a parsed filter already, else what `parse_metadata_where`
    makes of it."""
    return where if isinstance(where, Where) else parse_metadata_where(where)


def parse_metadata_where(where: Mapping[str, Any] | None) -> Where | None:
    """Return the filter a ``where`` object of the one grammar (`vrom.filters`) over document
    metadata describes (a collection has no paths or tags of its own)."""
    fields = parse_filter(where)
    return None if fields is None else Where(conditions=(fields,))
