"""The in-memory keyword index ranks exactly as SQLite's FTS5 does, and the search core uses it
only while it is current.

The reference is always the store's own ``keyword_search`` (FTS5 ``bm25()`` in SQL): the copy
must return the same chunk ids, in the same order (ties by chunk id), with the same scores, on
generated notes (titles, headings, stemming, diacritics, CJK, duplicates), with filters, after
another process changed the store, from a read-only pack, and on BEIR data when it is present.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path

import pytest
from vrom_cli import run_vrom

from vrom import Collection, Embedder, Vault
from vrom.evaluation.beir import corpus_documents, load_beir
from vrom.index.keyword import KeywordIndex
from vrom.search import keyword_copy as keyword_module
from vrom.search.keyword import KeywordRanker, rank_keyword
from vrom.search.query import parse_query, parse_where
from vrom.state import store_path
from vrom.store import KeywordQuery, KeywordRow, Where
from vrom.store.sqlite import SQLiteStore

WORDS = tuple(
    [
        "river",
        "harbour",
        "lantern",
        "orchard",
        "glacier",
        "meadow",
        "copper",
        "violet",
        "signal",
        "archive",
        "budget",
        "network",
        "garden",
        "switch",
        "ledger",
        "beacon",
        "canyon",
        "falcon",
        "marble",
        "quartz",
        "ember",
        "willow",
        "summit",
        "harbor",
    ]
)
STEMMED = ("running", "runs", "ran", "runner", "connection", "connected", "connects")
ACCENTED = ("café", "cafe", "Zürich", "zurich", "naïve", "résumé", "resume")
CJK = ("東京都", "京都", "東京", "大阪", "日本語")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir" / "scifact"


def _note(rng: random.Random, title: str) -> str:
    vocabulary = WORDS + STEMMED + ACCENTED + CJK
    tags = " ".join(f"#{rng.choice(('alpha', 'beta', 'gamma'))}" for _ in range(rng.randint(0, 2)))
    sections = []
    for _ in range(rng.randint(1, 4)):
        heading = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 3)))
        # a fifth of the words from the named vocabulary, so each is in well under half the
        # chunks; "everywhere" is in every chunk: at FTS5's floor IDF, left out of the copy
        words = [
            rng.choice(vocabulary) if rng.random() < 0.2 else f"w{rng.randrange(3000)}"
            for _ in range(rng.randint(5, 120))
        ]
        body = " ".join(words) + " everywhere"
        sections.append(f"## {heading}\n\n{body}\n")
    return f"# {title}\n\n{tags}\n\n" + "\n".join(sections)


def _write_vault(root: Path, notes: int, seed: int) -> None:
    rng = random.Random(seed)
    for number in range(notes):
        folder = root / rng.choice(("Projects", "Daily", "Areas/Deep"))
        folder.mkdir(parents=True, exist_ok=True)
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        (folder / f"note-{number:04d}.md").write_text(_note(rng, title), encoding="utf-8")
    # the same text under three names: equal scores, ordered by chunk id
    twin = _note(random.Random(seed + 1), "twin beacon")
    for name in ("twin-a", "twin-b", "twin-c"):
        (root / f"{name}.md").write_text(twin, encoding="utf-8")


def _queries(rng: random.Random, count: int) -> list[str]:
    vocabulary = WORDS + STEMMED + ACCENTED + CJK + ("absentword", "RIVER", "Harbour", "the")
    vocabulary += ("everywhere",)
    return [
        " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 4))) for _ in range(count)
    ]


def _same(copied: list[KeywordRow], stored: list[KeywordRow], what: str) -> None:
    assert [row.chunk_id for row in copied] == [row.chunk_id for row in stored], what
    for mine, theirs in zip(copied, stored, strict=True):
        assert (mine.document_id, mine.human_relevance_score) == (
            theirs.document_id,
            theirs.human_relevance_score,
        ), what
        assert mine.bm25 == pytest.approx(theirs.bm25, abs=1e-6), what


def _compare(
    store: SQLiteStore, index: KeywordIndex, queries: list[str], wheres: list[Where | None]
) -> int:
    """Compare the copy with the store on every query, limit and filter; return how many
    comparisons the copy could answer (plain terms)."""
    ranker = KeywordRanker(store.documents)
    answered = 0
    for query in queries:
        parsed = parse_query(query)
        tokens = ranker._plain_tokens(parsed)
        if tokens is None:
            continue
        for where in wheres:
            allowed = None if where is None else store.documents.chunk_ids_matching(where)
            for limit in (1, 7, 50, 1000):
                stored = store.documents.keyword_search(parsed, limit, where)
                _same(index.rank(tokens, limit, allowed), stored, f"{query!r} {where} {limit}")
                answered += 1
    return answered


def _copied(db: Path, target: Path) -> Path:
    """Return ``target`` holding a compact copy of the store at ``db``."""
    source = SQLiteStore(db)
    try:
        source.compact_copy(target)
    finally:
        source.close()
    return target


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("vault")
    state = tmp_path_factory.mktemp("state")
    _write_vault(root, 160, seed=7)
    with Vault.open(root, embedder=None, state_dir=state) as vault:
        vault.index()
    return root, store_path(root.resolve(), state)


def test_the_copy_ranks_exactly_as_fts5(indexed: tuple[Path, Path]) -> None:
    _, db = indexed
    store = SQLiteStore(db)
    try:
        index = KeywordIndex(store.documents.keyword_postings())
        queries = _queries(random.Random(11), 150)
        wheres = [None, parse_where(None, path="Projects"), parse_where(None, tags="beta")]
        answered = _compare(store, index, queries, wheres)
    finally:
        store.close()
    # stems, case, diacritics and CJK bigram terms all reach the copy; a query it cannot
    # answer is one whose term the tokenizer splits into a phrase
    assert answered >= 0.8 * len(queries) * len(wheres) * 4


def test_the_copy_ranks_with_the_prior_as_the_store_does(indexed: tuple[Path, Path]) -> None:
    """`KeywordRanker.ranked` (prior, order and one chunk a document in numpy) returns what
    `rank_keyword` makes of the store's rows: scores, ids, ties and widened pools alike."""
    _, db = indexed
    store = SQLiteStore(db)
    try:
        ranker = KeywordRanker(store.documents)
        ranker._index = KeywordIndex(store.documents.keyword_postings())
        wheres = [None, parse_where(None, path="Projects")]
        compared = 0
        for query in [*_queries(random.Random(5), 60), "twin beacon", "everywhere"]:
            parsed = parse_query(query)
            for where, k, per_document in itertools.product(wheres, (1, 10, 100), (True, False)):
                with store.snapshot():
                    copied = ranker.ranked(parsed, k, where, per_document=per_document)
                stored = rank_keyword(
                    store.documents.keyword_search, parsed, k, where, per_document=per_document
                )
                what = f"{query!r} {where} {k} {per_document}"
                assert [s for s, _ in copied] == pytest.approx([s for s, _ in stored]), what
                _same([row for _, row in copied], [row for _, row in stored], what)
                compared += bool(stored)
    finally:
        store.close()
    assert compared >= 500


def test_equal_scores_come_in_chunk_id_order(indexed: tuple[Path, Path]) -> None:
    _, db = indexed
    store = SQLiteStore(db)
    try:
        index = KeywordIndex(store.documents.keyword_postings())
        ranker = KeywordRanker(store.documents)
        parsed = parse_query("twin beacon")
        tokens = ranker._plain_tokens(parsed)
        assert tokens is not None
        copied = index.rank(tokens, 20)
        _same(copied, store.documents.keyword_search(parsed, 20), "ties")
    finally:
        store.close()
    tied = [row for row in copied if row.bm25 == copied[0].bm25]
    assert len(tied) >= 3, "the three twins tie"
    assert [row.chunk_id for row in tied] == sorted(row.chunk_id for row in tied)


def test_a_word_in_half_the_chunks_is_ranked_by_the_copy_as_fts5_ranks_it(
    indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term held by half the rows or more gets FTS5's floor IDF; the copy holds it as dense
    frequencies by chunk and ranks a query holding it in memory, with FTS5's scores and ties."""
    _, db = indexed
    store = SQLiteStore(db)
    try:
        postings = store.documents.keyword_postings()
        assert "everywher" in postings.floor_terms  # porter's stem of "everywhere"
        assert "everywher" not in postings.terms
        index = KeywordIndex(postings)
        ranker = KeywordRanker(store.documents)
        ranker._index = index
        calls: list[object] = []
        stored_search = store.documents.keyword_search
        monkeypatch.setattr(
            store.documents,
            "keyword_search",
            lambda *args: calls.append(args) or stored_search(*args),
        )
        for query in ("everywhere", "everywhere river", "river everywhere harbour"):
            parsed = parse_query(query)
            tokens = ranker._plain_tokens(parsed)
            assert tokens is not None and "everywher" in tokens
            for limit in (1, 10, 1000):
                with store.snapshot():
                    copied = ranker.search(parsed, limit, None)
                assert not calls, f"{query!r} went to FTS5"
                _same(copied, stored_search(parsed, limit, None), f"a floor term: {query!r}")
    finally:
        store.close()


def test_phrases_prefixes_and_exclusions_are_left_to_the_store(
    indexed: tuple[Path, Path],
) -> None:
    _, db = indexed
    store = SQLiteStore(db)
    try:
        ranker = KeywordRanker(store.documents)
        for query in ('"river harbour"', "harb*", "river -harbour", "東", "well_known"):
            assert ranker._plain_tokens(parse_query(query)) is None, query
        assert ranker._plain_tokens(parse_query("Running CAFÉ 東京")) == ["run", "cafe", "東京"]
    finally:
        store.close()


def test_a_read_only_pack_is_copied_too(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    _, db = indexed
    store = SQLiteStore(_copied(db, tmp_path / "pack.db"), create=False, read_only=True)
    try:
        index = KeywordIndex(store.documents.keyword_postings())
        assert _compare(store, index, _queries(random.Random(3), 30), [None]) > 0
    finally:
        store.close()


def test_the_search_core_copies_after_searches_have_cost_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, state = tmp_path / "vault", tmp_path / "state"
    _write_vault(root, 40, seed=5)
    with Vault.open(root, embedder=None, state_dir=state) as vault:
        vault.index()
        ranker = vault.corpus.keyword
        # a copy priced beyond any search: every search goes to the store, none copies
        monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", 1e6)
        for _ in range(20):
            vault.search("river harbour", k=5, mode="keyword")
        assert ranker.index is None
        # priced at nothing: the first search has it made beside it, and later ones use it
        monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", 0.0)
        before = vault.search("river harbour", k=5, mode="keyword")
        assert ranker.wait_for_copy() is not None
        assert vault.search("river harbour", k=5, mode="keyword") == before


def test_searches_stay_exact_while_another_process_changes_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", 0.0)
    root, state = tmp_path / "vault", tmp_path / "state"
    _write_vault(root, 60, seed=9)
    queries = _queries(random.Random(21), 40)
    with Vault.open(root, embedder=None, state_dir=state) as vault:
        vault.index()
        store = vault.corpus.store
        ranker = vault.corpus.keyword
        ranker.search(parse_query("river"), 5, None)
        first = ranker.wait_for_copy()
        assert first is not None
        # another process adds a note, edits one and deletes one
        (root / "Projects" / "added.md").write_text(
            "# glacier lantern\n\nrunning glacier lantern café\n", encoding="utf-8"
        )
        edited = sorted((root / "Daily").glob("*.md"))[0]
        edited.write_text("# river\n\nriver river harbour\n", encoding="utf-8")
        sorted((root / "Areas" / "Deep").glob("*.md"))[0].unlink()
        done = run_vrom(state, "index", str(root), "--quiet")
        assert done.returncode == 0, done.stderr
        assert store.documents.keyword_version() != first.version
        # the last copy's measured cost, not the price per chunk, now decides when to copy:
        # priced at nothing, the first stale search makes a new one
        monkeypatch.setattr(ranker, "_copy_seconds", 0.0)
        for query in queries:
            parsed = parse_query(query)
            with store.snapshot():
                _same(
                    ranker.search(parsed, 30, None),
                    store.documents.keyword_search(parsed, 30, None),
                    query,
                )
        # the stale copy was replaced, not used
        assert ranker.wait_for_copy() is not None and ranker.index is not first
        assert ranker.index.version == store.documents.keyword_version()


def test_a_collection_searches_alike_with_and_without_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keyword, hybrid and rerank searches (whose vector-only candidates take their document
    and prior from the copy when it is current) give the same hits either way."""
    rng = random.Random(17)
    documents = [
        {
            "id": f"d{n}",
            "text": " ".join(rng.choice(WORDS + STEMMED) for _ in range(rng.randint(5, 400))),
            "metadata": {"bucket": n % 5},
        }
        for n in range(300)
    ]
    queries = _queries(random.Random(2), 30)
    results = {}
    for price in (1e6, 0.0):  # never copied, then copied at once
        monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", price)
        storage = tmp_path / str(price)
        with Collection.open("docs", embedder=Embedder.fake(), storage=storage) as docs:
            docs.add(documents)
            if price == 0.0:  # the first search has the copy made; the others use it
                docs.search(queries[0], k=3, mode="keyword")
                docs._corpus.keyword.wait_for_copy()
            results[price] = [
                [
                    (hit.id, hit.chunk_id, hit.score, hit.scores, hit.excerpt)
                    for hit in docs.search(query, k=k, where=where, mode=mode)
                ]
                for query in queries
                for where in (None, {"bucket": 2})
                for mode in ("keyword", "hybrid", "rerank")
                for k in (3, 25)
            ]
            copied = docs._corpus.keyword.index
            assert (copied is None) == (price == 1e6)
    assert results[0.0] == results[1e6]


@pytest.mark.skipif(not SHARED.is_dir(), reason="BEIR SciFact is not in ../shared/data")
def test_the_copy_ranks_beir_scifact_exactly_as_fts5(tmp_path: Path) -> None:
    with Collection.open("scifact", embedder=None, storage=tmp_path) as docs:
        docs.add(itertools.islice(corpus_documents(SHARED), 1500))
    queries = [text for _, text in load_beir(SHARED, "train").queries[:300]]
    store = SQLiteStore(tmp_path / "scifact.db")
    try:
        index = KeywordIndex(store.documents.keyword_postings())
        assert _compare(store, index, queries, [None]) >= 0.9 * len(queries) * 4
    finally:
        store.close()


@pytest.mark.skipif(not SHARED.is_dir(), reason="BEIR SciFact is not in ../shared/data")
def test_the_copy_ranks_scifact_queries_holding_its_common_words_as_fts5(tmp_path: Path) -> None:
    """SciFact's words in half its chunks or more ("the", "of", "and"...) kept in its queries
    (a query parser would drop them as stopwords) are ranked by the copy with FTS5's scores."""
    with Collection.open("scifact", embedder=None, storage=tmp_path) as docs:
        docs.add(itertools.islice(corpus_documents(SHARED), 1500))
    texts = [text for _, text in load_beir(SHARED, "train").queries[:60]]
    store = SQLiteStore(tmp_path / "scifact.db")
    try:
        postings = store.documents.keyword_postings()
        common = set(postings.floor_terms)
        assert {"the", "of", "and"} <= common
        index = KeywordIndex(postings)
        compared = 0
        for text in texts:
            words = tuple(word.strip(".,;:()?'\"").lower() for word in text.split())
            terms = tuple(w for w in words if w.isalpha())
            tokens = [store.documents.keyword_tokens(term) for term in terms]
            if not any(common & set(found) for found in tokens):
                continue
            query = KeywordQuery(terms=terms)
            flat = [found[0] for found in tokens if len(found) == 1]
            if len(flat) != len(terms):
                continue
            for limit in (1, 10, 100, 5000):
                _same(index.rank(flat, limit), store.documents.keyword_search(query, limit), text)
                compared += 1
    finally:
        store.close()
    assert compared >= 100


def test_a_store_without_postings_keeps_its_own_ranking() -> None:
    class Documents:
        """A document store that cannot be read whole (PostgreSQL's): searches pass through."""

        def keyword_search(self, query: object, limit: int, where: object) -> list[KeywordRow]:
            return [KeywordRow(1, 1, 0.5, 2.0)][:limit]

    ranker = KeywordRanker(Documents())  # type: ignore[arg-type]
    assert ranker.search(parse_query("river"), 5, None) == [KeywordRow(1, 1, 0.5, 2.0)]
    assert ranker.copy_index() is None and ranker.index is None


def test_a_keyword_row_without_its_chunk_counts_for_idf_and_is_never_returned(
    indexed: tuple[Path, Path], tmp_path: Path
) -> None:
    """FTS5 counts every row it holds in a term's IDF; the SQL joins chunks, so a row whose
    chunk is gone (a broken store: `integrity_problems` names it) is never returned. The copy
    does both alike. (Compared with every match returned: the store's SQL cuts its limit
    before the join, so there it returns one row fewer when the orphan ranks within it.)"""
    _, db = indexed
    broken = _copied(db, tmp_path / "broken.db")
    connection = sqlite3.connect(broken)
    with connection:
        connection.execute(
            "INSERT INTO chunks_fts(rowid, title, heading_path, body)"
            " VALUES (99999999, 'river', 'river', 'river harbour lantern')"
        )
    connection.close()
    store = SQLiteStore(broken)
    try:
        index = KeywordIndex(store.documents.keyword_postings())
        ranker = KeywordRanker(store.documents)
        for query in ("river", "river harbour", "lantern glacier"):
            parsed = parse_query(query)
            tokens = ranker._plain_tokens(parsed)
            assert tokens is not None
            copied = index.rank(tokens, 1000)
            _same(copied, store.documents.keyword_search(parsed, 1000, None), query)
            assert 99999999 not in {row.chunk_id for row in copied}
    finally:
        store.close()
