"""Agent memories in SQLite: the shared `SqlMemories` with an FTS5 keyword index, and (through
`SQLiteMemoryVectors`) their vectors.

Memories live in the same database file as the notes, so they share its transactions, its WAL
and its crash safety. Their keyword index can be read whole (`vrom.store.KeywordPostingsSource`,
by `vrom.store.sqlite_keyword` as the chunks' is), for a copy that ranks plain-term queries in
memory exactly as FTS5 does (`vrom.store.MemoryKeywordCopy`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from vrom.store import sqlite_keyword
from vrom.store.fts_text import segment
from vrom.store.records import (
    MOST_FAILING,
    STATUS_WRITES_META_KEY,
    KeywordPostings,
    KeywordQuery,
    MemoryFilter,
    MemoryHead,
    MemoryKeywordCopy,
    MemoryKeywordRow,
    MemoryRecord,
    failing_windows,
)
from vrom.store.rows import MEMORY_HEAD_COLUMNS
from vrom.store.sql_dialect import Statements
from vrom.store.sql_memories import SqlMemories, with_ties
from vrom.store.sql_vectors import MEMORY_VECTORS
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_dialect import SQLiteDialect
from vrom.store.sqlite_query import match_expression
from vrom.store.sqlite_vectors import SQLiteMemoryVectors

# memory_id (unindexed), title, content, tags: the title says most, then a tag, then the text
MEMORY_BM25_WEIGHTS = (0.0, 4.0, 1.0, 2.0)
_WEIGHTS = ", ".join(str(w) for w in MEMORY_BM25_WEIGHTS)
_SCORE = f"-bm25(memories_fts, {_WEIGHTS})"
_RANKED = (
    f"SELECT rowid, {_SCORE} AS score FROM memories_fts WHERE memories_fts MATCH ?"
    " ORDER BY score DESC, rowid LIMIT ?"
)
_TIED = f"SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND {_SCORE} = ?"
MEMORIES_FTS = sqlite_keyword.FtsTable(
    "memories_fts",
    ("title", "content", "tags"),
    MEMORY_BM25_WEIGHTS[1:],
    # each row its own owner, with no prior: rank() orders by score, then row
    "SELECT rowid, rowid, 0.5 FROM memories_fts ORDER BY rowid",
)
# FTS5 rows' memories, read from FTS5's content table (its first column the memory id):
# through the FTS5 table each row's whole text was read, for its id alone
_EVERY_HEAD = (
    f"SELECT {MEMORY_HEAD_COLUMNS}, f.id FROM memories_fts_content f JOIN memories m ON m.id = f.c0"
)
_MATCHED = _EVERY_HEAD + " WHERE f.id {in}"
MOST_ROW_HEADS = 100_000
"""At most this many FTS5 rows' memory heads are kept (~20 MB) before they are read again."""


class _StoredMatches:
    """`RankedMatches` read from FTS5, in the caller's snapshot."""

    def __init__(self, run: Statements, query: KeywordQuery) -> None:
        self._run, self._match = run, match_expression(query)

    def best(self, limit: int) -> list[tuple[int, float]]:
        return [(row[0], row[1]) for row in self._run.rows(_RANKED, [self._match, limit])]

    def tied(self, score: float) -> list[int]:
        return [row[0] for row in self._run.rows(_TIED, [self._match, score])]


class SQLiteMemories(SqlMemories):
    """The memories of one store (`vrom.store.MemoryStore`), over its database connection."""

    def __init__(self, db: Database, tokens: Callable[[str], tuple[str, ...]]) -> None:
        """``tokens``: the store's query tokenizer (`SQLiteDocuments.keyword_tokens`: both
        indexes are tokenized alike)."""
        super().__init__(SQLiteDialect(db), SQLiteMemoryVectors(db))
        self._db = db
        self.keyword_tokens = tokens
        # (the index's version and status writes, FTS5 row -> its memory's head) while both
        # stand: one value, which a background read of the index may replace whole
        self._row_heads: tuple[tuple[bytes, str | None] | None, dict[int, MemoryHead]] = (None, {})

    # -- `vrom.store.KeywordPostingsSource` ------------------------------------------------

    def keyword_version(self) -> bytes:
        with self._db.guard("reading the memories' keyword index"):
            return sqlite_keyword.version(self._db, MEMORIES_FTS)

    def keyword_postings(self) -> KeywordPostings:
        with self._db.guard("reading the memories' keyword index"), self._db.read_snapshot():
            postings = sqlite_keyword.postings(self._db, MEMORIES_FTS)
            self._read_every_head(self._db)
            return postings

    def keyword_postings_apart(self) -> KeywordPostings | None:
        """As `keyword_postings`, on a connection of its own."""
        return sqlite_keyword.postings_apart(self._db, MEMORIES_FTS, self._read_every_head)

    def _read_every_head(self, db: Database) -> None:
        """Keep every FTS5 row's memory head (`_heads_of_rows`), read in the snapshot its
        postings were (for a copy of the index): searches with the copy then read none."""
        at = (sqlite_keyword.version(db, MEMORIES_FTS), db.meta_value(STATUS_WRITES_META_KEY))
        rows = db.conn.execute(
            f"{_EVERY_HEAD} LIMIT {MOST_ROW_HEADS + 1}"  # past it, heads are read as needed
        ).fetchall()
        if len(rows) <= MOST_ROW_HEADS:
            self._row_heads = (at, {row[3]: MemoryHead(*row[:3]) for row in rows})

    def _indexed(self, run: Statements, memory: MemoryRecord, replaced: bool) -> None:
        if replaced:
            run.run("DELETE FROM memories_fts WHERE memory_id = ?", (memory.id,))
        run.run(
            "INSERT INTO memories_fts(memory_id, title, content, tags) VALUES (?, ?, ?, ?)",
            (
                memory.id,
                segment(memory.title),
                segment(memory.content),
                segment(" ".join(memory.tags)),
            ),
        )

    def _dropped(self, run: Statements, key: int) -> None:
        run.count_up(MEMORY_VECTORS.generation_meta)

    def keyword_search(
        self,
        query: KeywordQuery,
        limit: int,
        where: MemoryFilter,
        copy: MemoryKeywordCopy | None = None,
    ) -> list[MemoryKeywordRow]:
        """Return the ``limit`` memories best matching the query and filter, and those tied
        with the last, best first (`SqlMemories.keyword_search`); the matches ranked by the
        ``copy`` when it answers (the same rows FTS5 ranks), else by FTS5.

        Under a filter of status alone (the default: active) FTS5 ranks its matches by score
        and rowid alone: reading each match's memory id and joining it to its memory row cost
        half the time at 100k memories. The best ``limit`` plus as many as may fail the filter
        (`keys_failing`; a quarter of ``limit`` more at first: `failing_windows`) are taken,
        with every match tied with the last of them (twice as many are ranked, so that a tie
        across the cut is seen whole; else one more pass reads it); only those memories'
        heads are read (or kept: `_heads_of_rows`), the failing dropped and the rest ordered
        by score and id. The rows are the ones the joined ranking gives: a passing match
        among the best ``limit`` has fewer than ``limit`` passing and fewer than all the
        failing ones ahead of it, and every match scoring at least the window's cut is read,
        so the tie with the last is whole. The ``copy``, when current, ranks the matches in
        memory instead of FTS5, with its scores.
        """
        with self._sql.snapshot("searching memories") as run:  # the failing counted, then ranked
            failing = None if query.is_empty else self.keys_failing(where, MOST_FAILING)
            if failing is None:  # another filter, or many failing
                return super().keyword_search(query, limit, where)
            matches = (None if copy is None else copy()) or _StoredMatches(run, query)
            for ranked in failing_windows(limit, len(failing)):
                # twice the window: a tie across its cut most often ends inside
                best = matches.best(2 * ranked + 1)
                cut = best[min(ranked, len(best)) - 1][1] if best else 0.0
                scores: dict[int, float] = {row[0]: row[1] for row in best if row[1] >= cut}
                if len(best) > 2 * ranked and best[-1][1] == cut:  # it did not: all of it
                    scores.update((row_id, cut) for row_id in matches.tied(cut))
                heads = self._heads_of_rows(run, scores)
                found = [
                    MemoryKeywordRow(head, score)
                    for row_id, score in scores.items()
                    if (head := heads.get(row_id)) is not None and head.key not in failing
                ]
                found.sort(key=lambda hit: (-hit.bm25, hit.head.id))
                if len(found) >= limit or len(best) <= ranked:  # enough, or every match
                    return with_ties(found, limit)
        return with_ties(found, limit)

    def _heads_of_rows(self, run: Statements, rows: Iterable[int]) -> dict[int, MemoryHead]:
        """Return the heads of the memories of FTS5 rows (those still held), by row.

        A row's memory, and that memory's head, change only when a memory is written (its FTS5
        row deleted and another added, perhaps under the same rowid): which moves the index's
        version and counts a status write. So the heads read are kept while both stand, in
        this process or another, and a search reads only the rows it has not seen since.
        """
        at = (sqlite_keyword.version(self._db, MEMORIES_FTS), run.meta(STATUS_WRITES_META_KEY))
        held_at, heads = self._row_heads
        if held_at != at or len(heads) > MOST_ROW_HEADS:
            heads = {}
            self._row_heads = (at, heads)
        unseen = [row for row in rows if row not in heads]
        for row in run.rows_in(_MATCHED, unseen):
            heads[row[3]] = MemoryHead(*row[:3])
        return heads

    def _keyword_sql(self, query: KeywordQuery, filter_sql: str) -> tuple[str, list[Any]]:
        return (
            f"SELECT {MEMORY_HEAD_COLUMNS}, {_SCORE} AS score FROM memories_fts"
            " JOIN memories m ON m.id = memories_fts.memory_id"
            f" WHERE memories_fts MATCH ?{filter_sql} ORDER BY score DESC, m.id LIMIT ?"
        ), [match_expression(query)]
