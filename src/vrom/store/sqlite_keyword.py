"""What an in-memory keyword index needs from SQLite's FTS5 index, read exactly as FTS5 has it.

FTS5 stays the durable keyword index (and the one that answers phrases, prefixes and exclusions);
`vrom.index.keyword` ranks plain terms in memory from the postings read here, with the numbers
FTS5's own ``bm25()`` uses, so both give the same scores:

* `postings`: every (term, chunk) pair with the term's weighted frequency in the chunk (title,
  heading path and body counted with `BM25_WEIGHTS`), each chunk's length in tokens, and the
  row and token totals FTS5 keeps in its "averages" record (rows without a token count too);
  the same for another FTS5 table given as an `FtsTable` (the memories' index, each of its
  rows its own owner);
* `version`: the FTS5 structure and averages records, which change with every write that
  touches the index (each write adds a segment and bumps the structure's write counter), so an
  index built from older postings knows it is stale;
* `QueryTokenizer`: a query term turned into index tokens by FTS5's own tokenizer, in a private
  in-memory database, so stemming and case folding match the index exactly.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from vrom.errors import StorageError
from vrom.store.records import STATUS_WRITES_META_KEY, KeywordPostings, StoreState
from vrom.store.schema import FTS_TOKENIZER

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from vrom.store.sqlite_database import Database

BM25_WEIGHTS = (4.0, 2.0, 1.0)
"""title, heading_path, body: a match in the title or a heading says more than one in the body."""
_AVERAGES_ROWID, _STRUCTURE_ROWID = 1, 10  # FTS5's fixed rows in its ``_data`` table
_VERSION_ROWS = (_AVERAGES_ROWID, _STRUCTURE_ROWID)
_TOKENS_CACHED = 4096
_BATCH_CHARACTERS = 1_000_000
"""Characters of ``chunk*4+column`` lists parsed at a time (~125k tokens, ~10 MB of arrays)."""


@dataclass(frozen=True)
class FtsTable:
    """An FTS5 table a keyword copy is read from: its name, its indexed columns with their
    bm25() weights (in FTS5's column order), and a query giving each row's (row id, owner
    id, prior) by row id (the rows a copy ranks)."""

    name: str
    columns: tuple[str, ...]
    weights: tuple[float, ...]
    owners: str


CHUNKS_FTS = FtsTable(
    "chunks_fts",
    ("title", "heading_path", "body"),
    BM25_WEIGHTS,
    "SELECT c.id, c.document_id, d.human_relevance_score FROM chunks c"
    " JOIN documents d ON d.id = c.document_id ORDER BY c.id",
)


def version(db: Database, table: FtsTable = CHUNKS_FTS) -> bytes:
    """Return the keyword index's version: its structure and averages records, joined; inside
    a read snapshot, read once (by `state`, or by the first call) and held until it ends."""
    key = held_version_key(table.name)
    if db.held is not None and key in db.held:
        return db.held[key]  # type: ignore[no-any-return]
    rows = db.conn.execute(
        f"SELECT block FROM {table.name}_data WHERE id IN (?, ?) ORDER BY id",
        (_AVERAGES_ROWID, _STRUCTURE_ROWID),
    ).fetchall()
    found = _joined(row[0] for row in rows)
    if db.held is not None:
        db.held[key] = found
    return found


def _joined(blocks: Iterable[Any]) -> bytes:
    """Return an index's version from its averages and structure records (those present)."""
    return b"\0".join(bytes(block) for block in blocks if block is not None)


def held_version_key(table: str) -> str:
    """Return the key of FTS5 table ``table``'s version among the values a read snapshot
    holds (no write joins a read snapshot: a transaction cannot begin inside one)."""
    return f"{table} version"


_GENERATIONS = ("vector_generation", "memory_vector_generation")


def state(db: Database) -> StoreState:
    """Return the store's `StoreState` from one statement; inside a read snapshot the values
    are held (`Database.held`) and answer the generation and version reads until it ends."""
    row = db.conn.execute(
        "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT value FROM meta WHERE key = ?),"
        " (SELECT block FROM chunks_fts_data WHERE id = ?),"
        " (SELECT block FROM chunks_fts_data WHERE id = ?),"
        " (SELECT coalesce(max(key), 0) FROM memories), (SELECT value FROM meta WHERE key = ?),"
        " (SELECT block FROM memories_fts_data WHERE id = ?),"
        " (SELECT block FROM memories_fts_data WHERE id = ?)",
        (*_GENERATIONS, *_VERSION_ROWS, STATUS_WRITES_META_KEY, *_VERSION_ROWS),
    ).fetchone()
    chunk_generation, memory_generation, averages, structure, newest, status_writes = row[:6]
    keyword = _joined((averages, structure))
    if db.held is not None:
        db.held.update(
            {
                _GENERATIONS[0]: None if chunk_generation is None else str(chunk_generation),
                _GENERATIONS[1]: None if memory_generation is None else str(memory_generation),
                held_version_key(CHUNKS_FTS.name): keyword,
                # held for the memories' keyword search, not part of the state
                STATUS_WRITES_META_KEY: None if status_writes is None else str(status_writes),
                held_version_key("memories_fts"): _joined(row[6:]),
            }
        )
    return StoreState(int(chunk_generation or 0), int(memory_generation or 0), keyword, int(newest))


def postings(db: Database, table: FtsTable = CHUNKS_FTS) -> KeywordPostings:
    """Return the keyword index's postings, read in one snapshot (the caller's transaction).

    ``fts5vocab`` lists every token of every row in term order; grouping per term in SQL and
    parsing each term's ``chunk*4+column`` list with numpy (``fromstring``: no Python object a
    token) keeps Python out of the per-token work. The pair arrays are sized first (the ``row``
    vocabulary counts them) and filled as terms are read in batches of about
    `_BATCH_CHARACTERS`, so the memory beyond them stays bounded.

    Terms held by half the rows or more (``the``, ``obsidian`` in a vault about Obsidian: FTS5
    gives them its floor IDF, 1e-6) are the longest posting lists by far: each is read as one
    dense array of weighted frequencies by chunk (`KeywordPostings.floor_frequencies`), its
    narrowest integer type (a byte a chunk, mostly) instead of 12 bytes a posting. A chunk's
    length comes from FTS5's own column sizes (its ``docsize`` table).
    """
    import numpy as np  # only an in-memory keyword index needs it

    vocabulary, term_rows = f"temp.vrom_{table.name}_instances", f"temp.vrom_{table.name}_terms"
    for name, kind in ((vocabulary, "instance"), (term_rows, "row")):
        db.conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name}"
            f" USING fts5vocab(main, '{table.name}', '{kind}')"
        )
    rows_total, tokens_total = _averages(db, table)
    chunks = db.conn.execute(table.owners).fetchall()
    chunk_ids = np.fromiter((row[0] for row in chunks), dtype=np.int64, count=len(chunks))
    pairs = int(
        db.scalar(f"SELECT coalesce(sum(doc), 0) FROM {term_rows} WHERE 2 * doc < ?", (rows_total,))
    )
    weights = np.asarray(table.weights, dtype=np.float64)
    # each instance as ``row*4 + column``, the column numbered by its weight's place
    *named, _ = table.columns
    column = " ".join(f"WHEN '{name}' THEN {number}" for number, name in enumerate(named))
    listed = f"group_concat(doc * 4 + (CASE col {column} ELSE {len(named)} END), ',')"
    terms: list[str] = []
    pairs_per_term: list[Any] = []
    pair_chunks = np.empty(pairs, dtype=np.int32)
    pair_frequencies = np.empty(pairs, dtype=np.float64)
    filled = 0

    def flush(batch: list[str]) -> None:
        nonlocal filled
        term_of, chunk_of, frequencies = _pairs(batch, weights)
        end = filled + len(chunk_of)
        pair_chunks[filled:end] = chunk_of
        pair_frequencies[filled:end] = frequencies
        pairs_per_term.append(np.bincount(term_of, minlength=len(batch)))
        filled = end

    batch: list[str] = []
    size = 0
    cursor = db.conn.execute(
        f"SELECT term, {listed} FROM {vocabulary}"
        f" WHERE term NOT IN (SELECT term FROM {term_rows} WHERE 2 * doc >= ?) GROUP BY term",
        (rows_total,),
    )
    for term, instances in cursor:
        terms.append(term)
        batch.append(instances)
        size += len(instances)
        if size >= _BATCH_CHARACTERS:
            flush(batch)
            batch, size = [], 0
    if batch:
        flush(batch)
    floor_terms, floor_frequencies = [], []
    cursor = db.conn.execute(
        f"SELECT term, {listed} FROM {vocabulary}"
        f" WHERE term IN (SELECT term FROM {term_rows} WHERE 2 * doc >= ?) GROUP BY term",
        (rows_total,),
    )
    for term, instances in cursor:  # one term at a time: the longest lists
        _, chunk_of, frequencies = _pairs([instances], weights)
        at = np.minimum(np.searchsorted(chunk_ids, chunk_of), max(len(chunk_ids) - 1, 0))
        held = chunk_ids[at] == chunk_of if len(chunk_ids) else np.zeros(0, dtype=bool)
        # the weighted counts are whole numbers (weights 4, 2, 1): the narrowest type is exact
        widest = int(frequencies.max()) if len(frequencies) else 0
        dense = np.zeros(len(chunk_ids), dtype=np.min_scalar_type(widest))
        dense[at[held]] = frequencies[held]  # a row whose chunk is gone is never returned
        floor_terms.append(term)
        floor_frequencies.append(dense)
    sizes = dict(db.conn.execute(f"SELECT id, sz FROM {table.name}_docsize"))
    per_term = np.concatenate(pairs_per_term) if pairs_per_term else np.zeros(0, dtype=np.int64)
    if filled != pairs:  # the two vocabularies are read in one snapshot: they agree
        raise StorageError(f"the keyword index read {filled:,} postings where it counted {pairs:,}")
    return KeywordPostings(
        version=version(db, table),
        rows=rows_total,
        tokens=tokens_total,
        terms=terms,
        term_starts=np.concatenate(([0], np.cumsum(per_term))),
        pair_chunks=pair_chunks,
        pair_frequencies=pair_frequencies,
        chunk_ids=chunk_ids,
        document_ids=np.fromiter((row[1] for row in chunks), dtype=np.int64, count=len(chunks)),
        human_relevance=np.fromiter(
            (row[2] for row in chunks), dtype=np.float64, count=len(chunks)
        ),
        # a chunk's length is its number of tokens (FTS5's column sizes, summed)
        chunk_lengths=np.fromiter(
            (sum(_varints(bytes(sizes.get(i, b"")))) for i in chunk_ids.tolist()),
            dtype=np.float64,
            count=len(chunk_ids),
        ),
        floor_terms=floor_terms,
        floor_frequencies=floor_frequencies,
    )


def _pairs(lists: list[str], weights: Any) -> tuple[Any, Any, Any]:
    """Return (term number, chunk id, weighted frequency) per (term, chunk) pair of the terms'
    ``chunk*4+column`` instance lists, by term then chunk."""
    import numpy as np

    parsed = [np.fromstring(instances, dtype=np.int64, sep=",") for instances in lists]
    counts = np.fromiter(map(len, parsed), dtype=np.int64, count=len(parsed))
    instances = np.concatenate(parsed)
    term_of = np.repeat(np.arange(len(parsed), dtype=np.int32), counts)
    chunk_of = instances >> 2
    # instances come by term, then chunk: a (term, chunk) pair starts where either changes
    starts = np.flatnonzero(
        np.concatenate(([True], (term_of[1:] != term_of[:-1]) | (chunk_of[1:] != chunk_of[:-1])))
    )
    return term_of[starts], chunk_of[starts], np.add.reduceat(weights[instances & 3], starts)


def postings_apart(
    db: Database, table: FtsTable = CHUNKS_FTS, also: Callable[[Database], None] | None = None
) -> KeywordPostings | None:
    """Return the keyword index's postings read on a second connection to ``db``'s file (safe
    in another thread while ``db`` is used), or None for a store in memory (it has none);
    ``also`` reads more on that connection, in the same snapshot."""
    reader = db.reader()
    if reader is None:
        return None
    try:
        with reader.guard("reading the keyword index"), reader.read_snapshot():
            found = postings(reader, table)
            if also is not None:
                also(reader)
            return found
    finally:
        reader.close()


def _averages(db: Database, table: FtsTable) -> tuple[int, int]:
    """Return (rows, tokens) from FTS5's averages record: its row count, then one token total
    per column, as SQLite varints."""
    row = db.conn.execute(
        f"SELECT block FROM {table.name}_data WHERE id = ?", (_AVERAGES_ROWID,)
    ).fetchone()
    numbers = _varints(bytes(row[0])) if row is not None else []
    return (numbers[0], sum(numbers[1:])) if numbers else (0, 0)


def _varints(data: bytes) -> list[int]:
    """Return the SQLite varints in ``data``: big-endian 7-bit groups, a set high bit meaning
    more follow, the ninth byte holding a whole 8 bits."""
    numbers, value, length = [], 0, 0
    for byte in data:
        length += 1
        if length == 9:
            numbers.append((value << 8) | byte)
            value, length = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            numbers.append((value << 7) | byte)
            value, length = 0, 0
    return numbers


class QueryTokenizer:
    """Query terms as the keyword index's tokens, by FTS5's own tokenizer (in memory)."""

    def __init__(self, driver: ModuleType = sqlite3) -> None:
        self._conn = driver.connect(":memory:", check_same_thread=False)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE terms USING fts5(term, tokenize = '{FTS_TOKENIZER}')"
        )
        self._conn.execute("CREATE VIRTUAL TABLE term_tokens USING fts5vocab(terms, instance)")
        self._known: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()  # one private connection, shared by the store's threads

    def tokens(self, text: str) -> tuple[str, ...]:
        """Return the tokens FTS5 makes of ``text``, in order (a phrase when more than one)."""
        with self._lock:
            return self._tokens(text)

    def _tokens(self, text: str) -> tuple[str, ...]:
        known = self._known.get(text)
        if known is not None:
            self._known.move_to_end(text)
            return known
        with self._conn:
            self._conn.execute("DELETE FROM terms")
            self._conn.execute("INSERT INTO terms(rowid, term) VALUES (1, ?)", (text,))
            found = tuple(
                row[0] for row in self._conn.execute("SELECT term FROM term_tokens ORDER BY offset")
            )
        self._known[text] = found
        if len(self._known) > _TOKENS_CACHED:
            self._known.popitem(last=False)
        return found

    def close(self) -> None:
        with self._lock:
            self._conn.close()
