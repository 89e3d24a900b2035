"""An in-memory copy of a store's keyword index, made when the searches have paid for it.

A `KeywordCopy` keeps a copy (`vrom.index.keyword.KeywordIndex`) of one keyword index a store
can read whole (`vrom.store.KeywordPostingsSource`: SQLite's FTS5 for chunks, and the one for
memories), answers whether it is current, and turns a query into the copy's tokens when the copy
can rank it (plain terms; phrases, prefixes and exclusions always go to the store). The chunks'
`vrom.search.keyword.KeywordRanker` and the memories' `vrom.search.recall.MemoryKeyword` rank
from it.

When to copy the index is a rent-or-buy choice: a copy costs about as much as a few dozen
store searches, and a store that changes between every two searches (an agent adding and
asking in turn) would throw each copy away. So after the index changes, searches go to the
store until the CPU time they took there adds up to what the last copy cost (an estimate
before the first), and then the copy is made: never more than twice the time the better choice
in hindsight would have spent, and a one-shot command never pays for a copy. The copy is made
beside the searches, never inside one (`vrom.index.background`): a thread reads the index on a
connection of its own while searches go on to the store, and the first search after it is done
takes it. A store with no second connection (one in memory) is copied only when asked
(`KeywordCopy.copy_index`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from vrom.index.background import BackgroundBuild
from vrom.store import KeywordPostingsSource, KeywordQuery
from vrom.store.fts_text import segment_query_term

if TYPE_CHECKING:
    from vrom.index.keyword import KeywordIndex

COPY_SECONDS_PER_CHUNK = 175e-6
"""What copying a keyword index is taken to cost, in CPU seconds a row, before a copy was
timed: the most a chunk was seen to cost (a 1,063-note vault of link-heavy notes; 30-50 µs a
chunk on the obsidian-hub vault and SciFact). Too high only defers a copy; the first copy's own
cost decides from then on."""


class KeywordCopy:
    """The in-memory copy of one keyword index; see the module docstring.

    ``source`` is the index (None: a store whose index cannot be read whole, never copied);
    ``rows`` counts its rows, for the cost of a first copy.
    """

    def __init__(self, source: KeywordPostingsSource | None, rows: Callable[[], int]) -> None:
        self._source = source
        self._rows = rows
        self._index: KeywordIndex | None = None
        self._copy_seconds: float | None = None  # what the last copy took, in CPU seconds
        self._rows_counted: int | None = None  # for the first copy's estimate
        self._owed = 0.0  # CPU seconds spent in the store's search since the copy went stale
        self._copying: BackgroundBuild[KeywordIndex | None] = BackgroundBuild("the keyword copy")
        self._failures_seen = 0  # a failed copy (logged) is tried again once paid for again

    @property
    def index(self) -> KeywordIndex | None:
        """The in-memory copy, current or not (None before the first)."""
        return self._index

    def version(self) -> bytes | None:
        """Return the store's keyword index version (None: the store has none to read)."""
        return None if self._source is None else self._source.keyword_version()

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
        this started one; searches answer from the store until it is taken."""
        if self._source is None or self._current() is not None:
            return False
        return self._copying.start(self._copy_apart)

    def wait_for_copy(self) -> KeywordIndex | None:
        """Wait for a copy being made beside the searches, if one is, and return the copy
        held then, current or not (for tests and benches: searches never wait)."""
        self._copying.wait()
        self._current()
        return self._index

    def _charge(self, seconds: float) -> None:
        """Count ``seconds`` of CPU a search spent in the store for want of a current copy,
        and have the copy made once they add up to what it costs."""
        self._owed += seconds
        if self._owed >= self._expected_copy_seconds():
            self._copying.start(self._copy_apart)

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
        if self._rows_counted is None:  # once: counting may read a whole index
            self._rows_counted = self._rows()
        return self._rows_counted * COPY_SECONDS_PER_CHUNK

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
