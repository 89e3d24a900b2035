"""Keyword ranking: BM25 over the store's full-text index, with the human-relevance prior; hits.

`KeywordRanker` answers the search core's keyword candidates from an in-memory copy of the
store's index (`vrom.index.keyword`) when the store offers one, the copy is current and the
query is plain terms, common words included; otherwise from the store's own `keyword_search`
(phrases, prefixes and exclusions always go there). Both give the same rows in the same order.
`KeywordRanker.ranked` gives the search core's keyword ranking (the prior applied, one chunk a
document if asked): from the copy's arrays when it answers, else `rank_keyword` over those rows.

When to copy the index is a rent-or-buy choice: a copy costs about as much as a few dozen
store searches, and a store that changes between every two searches (an agent adding and
asking in turn) would throw each copy away. So after the index changes, searches go to the
store until the CPU time they took there adds up to what the last copy cost (an estimate
before the first), and then the copy is made: never more than twice the time the better choice
in hindsight would have spent, and a one-shot command never pays for a copy. The copy is made
beside the searches, never inside one (`vrom.index.background`): a thread reads the index on a
connection of its own while searches go on to the store, and the first search after it is done
takes it. A store with no second connection (one in memory) is copied only when asked
(`KeywordRanker.copy_index`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from vrom.errors import ValidationError, shown
from vrom.index.background import BackgroundBuild
from vrom.ingest.okf import stale_after
from vrom.results import Hit, deferred, new_hit
from vrom.search.excerpt import excerpt
from vrom.search.fusion import MAX_K, first_k, first_pool, widen
from vrom.store import (
    DocumentStore,
    KeywordPostingsSource,
    KeywordQuery,
    KeywordRow,
    StoredChunk,
    Where,
)
from vrom.store.fts_text import segment_query_term

if TYPE_CHECKING:
    from vrom.index.keyword import KeywordIndex

# the prior scales BM25 by 0.75 (system notes) .. 1.25 (notes written for people); 0.5 → 1.0
PRIOR_SPREAD = 0.5


def check_k(k: object) -> None:
    """Raise `ValidationError` unless ``k`` is an integer from 1 to `MAX_K`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, not {shown(k)}")


def prior_factor(human_relevance_score: float) -> float:
    """Return the multiplier the human-relevance prior applies to a text score."""
    return 1.0 + PRIOR_SPREAD * (human_relevance_score - 0.5)


def make_hit(
    chunk: StoredChunk,
    score: float,
    scores: Mapping[str, float],
    words: list[str],
    *,
    kind: str,
    fresh: bool | None = None,
) -> Hit:
    """Return the `Hit` for a stored chunk, with an excerpt around ``words``; ``kind`` says what
    ``score`` is (`Hit.score_kind`), ``fresh`` whether its file still holds it (`Hit.fresh`).

    A note whose ``stale_after`` (OKF v0.2 §5.5) has passed gives a hit marked ``stale``: it is
    decided now, at search time, since a note goes stale without changing.
    """
    expires = stale_after(chunk.metadata)
    return new_hit(
        chunk_id=chunk.chunk_id,
        path=chunk.path,
        title=chunk.title,
        heading_path=chunk.heading_path,
        excerpt=deferred(excerpt, chunk.text, tuple(words)),
        score=round(score, 6),
        content_hash=chunk.content_hash,
        modified_unix=chunk.mtime,
        human_relevance_score=chunk.human_relevance_score,
        note_id=chunk.document_id,
        position=chunk.position,
        char_start=chunk.char_start,
        char_end=chunk.char_end,
        text=chunk.text,
        scores={k: round(v, 6) for k, v in scores.items()},
        id=chunk.path,
        metadata=chunk.metadata,
        prev_chunk_id=chunk.prev_id,
        next_chunk_id=chunk.next_id,
        score_kind=kind,
        stale=expires is not None and dt.datetime.now(dt.timezone.utc) >= expires,
        stale_after=None if expires is None else expires.isoformat(),
        fresh=fresh,
    )


KeywordSearch = Callable[[KeywordQuery, int, "Where | None"], list[KeywordRow]]
"""A keyword retriever: (query, limit, filter) → rows, best BM25 first."""
COPY_SECONDS_PER_CHUNK = 175e-6
"""What copying a keyword index is taken to cost, in CPU seconds, before a copy was timed: the
most a chunk was seen to cost (a 1,063-note vault of link-heavy notes; 30-50 µs a chunk on the
obsidian-hub vault and SciFact). Too high only defers a copy; the first copy's own cost decides
from then on."""


class KeywordRanker:
    """Keyword candidates for one store; see the module docstring."""

    def __init__(self, documents: DocumentStore) -> None:
        self._documents = documents
        self._source = documents if isinstance(documents, KeywordPostingsSource) else None
        self._index: KeywordIndex | None = None
        self._copy_seconds: float | None = None  # what the last copy took, in CPU seconds
        self._chunks_counted: int | None = None  # for the first copy's estimate
        self._owed = 0.0  # CPU seconds spent in the store's search since the copy went stale
        self._copying: BackgroundBuild[KeywordIndex | None] = BackgroundBuild("the keyword copy")
        self._failures_seen = 0  # a failed copy (logged) is tried again once paid for again

    @property
    def index(self) -> KeywordIndex | None:
        """The in-memory copy, current or not (None before the first)."""
        return self._index

    def search(self, query: KeywordQuery, limit: int, where: Where | None) -> list[KeywordRow]:
        """Return what the store's `keyword_search` returns for these arguments.

        Call it inside a store snapshot when chunks are read afterwards.
        """
        tokens = self._plain_tokens(query)
        if tokens is None or self._source is None:
            return self._documents.keyword_search(query, limit, where)
        index = self._current()
        if index is None:
            started = time.thread_time()
            rows = self._documents.keyword_search(query, limit, where)
            self._owed += time.thread_time() - started
            if self._owed >= self._expected_copy_seconds():
                self._copying.start(self._copy_apart)
            return rows
        allowed = None if where is None else self._documents.chunk_ids_matching(where)
        return index.rank(tokens, limit, allowed)

    def ranked(
        self, query: KeywordQuery, k: int, where: Where | None, *, per_document: bool
    ) -> list[tuple[float, KeywordRow]]:
        """Return what `rank_keyword` returns over this ranker's `search`; from the copy's
        arrays when it answers the query (prior, order and one chunk a document in numpy).

        Call it inside a store snapshot when chunks are read afterwards.
        """
        tokens = self._plain_tokens(query)
        index = None if tokens is None else self._current()
        if tokens is None or index is None:
            return rank_keyword(self.search, query, k, where, per_document=per_document)
        allowed = None if where is None else self._documents.chunk_ids_matching(where)

        def rank(pool: int) -> tuple[list[tuple[float, KeywordRow]], bool]:
            return index.rank_with_prior(
                tokens, k, pool, allowed, per_document=per_document, spread=PRIOR_SPREAD
            )

        return widen(rank, k, first_pool(k))

    def version(self) -> bytes | None:
        """Return the store's keyword index version (None: the store has none to read)."""
        return None if self._source is None else self._source.keyword_version()

    def owners(self, chunk_ids: list[int]) -> dict[int, tuple[int, float]] | None:
        """Return chunk id → (document id, human relevance) from a current copy, or None
        when there is none (read the chunks instead). Chunks not held are left out."""
        index = self._current()
        return None if index is None else index.owners(chunk_ids)

    def copy_index(self) -> KeywordIndex | None:
        """Copy the store's keyword index into memory now, in this thread (None if the store
        has none); searches do not call it (they have it copied beside them)."""
        if self._source is None:
            return None
        from vrom.index.keyword import KeywordIndex  # numpy: only with a copy

        started = time.thread_time()
        index = KeywordIndex(self._source.keyword_postings())
        self._adopt(index, time.thread_time() - started)
        return index

    def prepare(self) -> bool:
        """Have the copy made beside the searches now, before any search paid for it: for a
        process that is there to search (the MCP server, once its vault is indexed). True if
        this started one; searches answer from FTS5 until it is taken."""
        if self._source is None or self._current() is not None:
            return False
        return self._copying.start(self._copy_apart)

    def wait_for_copy(self) -> KeywordIndex | None:
        """Wait for a copy being made beside the searches, if one is, and return the copy
        held then, current or not (for tests and benches: searches never wait)."""
        self._copying.wait()
        self._current()
        return self._index

    def _copy_apart(self) -> KeywordIndex | None:
        """Return a copy read on a connection of its own (run in the background thread)."""
        assert self._source is not None
        postings = self._source.keyword_postings_apart()
        if postings is None:
            return None
        from vrom.index.keyword import KeywordIndex  # numpy: only with a copy

        return KeywordIndex(postings)

    def _current(self) -> KeywordIndex | None:
        """Return the copy if it reflects the store's index now, taking one just made."""
        if self._source is None:
            return None
        if self._copying.failures != self._failures_seen:
            self._failures_seen, self._owed = self._copying.failures, 0.0
        done = self._copying.take()
        if done is not None:
            made, seconds = done
            if made is None:  # no second connection: never copied beside the searches
                self._copy_seconds = float("inf")
            else:
                self._adopt(made, seconds)
        index = self._index
        if index is None or index.version != self._source.keyword_version():
            return None
        return index

    def _adopt(self, index: KeywordIndex, seconds: float) -> None:
        self._index, self._copy_seconds, self._owed = index, seconds, 0.0

    def _expected_copy_seconds(self) -> float:
        if self._copy_seconds is not None:
            return self._copy_seconds
        if self._chunks_counted is None:  # once: counting chunks reads their whole index
            self._chunks_counted = self._documents.chunk_count()
        return self._chunks_counted * COPY_SECONDS_PER_CHUNK

    def _plain_tokens(self, query: KeywordQuery) -> list[str] | None:
        """Return one index token per query term, or None when only the store can rank the
        query: a phrase, a prefix, an exclusion, or a term the tokenizer splits (a phrase)."""
        if self._source is None or query.phrases or query.excluded or not query.terms:
            return None
        tokens = []
        for term in query.terms:
            if term.endswith("*"):
                return None
            text, prefix = segment_query_term(term)
            found = self._source.keyword_tokens(text)
            if prefix or len(found) != 1:
                return None
            tokens.append(found[0])
        return tokens


def rank_keyword(
    search: KeywordSearch, query: KeywordQuery, k: int, where: Where | None, *, per_document: bool
) -> list[tuple[float, KeywordRow]]:
    """Return the ``k`` best (score, row) keyword matches: BM25 scaled by the prior, best first.

    ``search`` returns keyword rows as `DocumentStore.keyword_search` does (a store's, or a
    `KeywordRanker`'s). ``per_document`` keeps each document's best chunk only, widening the
    pool as needed. Call it inside a store snapshot when whole chunks are read afterwards.
    """

    def rank(pool: int) -> tuple[list[tuple[float, KeywordRow]], bool]:
        rows = search(query, pool, where)
        scored = sorted(
            ((row.bm25 * prior_factor(row.human_relevance_score), row) for row in rows),
            key=lambda pair: (-pair[0], pair[1].chunk_id),
        )
        return first_k(scored, k, document_of if per_document else None), len(rows) == pool

    return widen(rank, k, first_pool(k))


def document_of(pair: tuple[float, KeywordRow]) -> int:
    """Return the document of a (score, keyword row) pair."""
    return pair[1].document_id
