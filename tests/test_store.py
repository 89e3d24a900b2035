"""The store contract, on both backends (SQLite and PostgreSQL: the ``store`` fixture), and the
SQLite store's own schema, migrations, files and errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from postgres_server import StoreSpot
from store_records import note_record

from vrom.errors import NotFoundError, StorageError
from vrom.store import (
    ChunkRecord,
    Condition,
    KeywordQuery,
    LinkRecord,
    Store,
    Where,
)
from vrom.store.schema import SCHEMA_VERSION
from vrom.store.sqlite import SQLiteStore
from vrom.store.sqlite_database import Database
from vrom.store.sqlite_query import match_expression


def _chunks(*texts: str) -> list[ChunkRecord]:
    return [ChunkRecord(i, "H", t, 0, len(t), f"c{i}") for i, t in enumerate(texts)]


@pytest.fixture
def store(store_spot: StoreSpot) -> Store:
    """A new store on each backend."""
    s = store_spot.open()
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "s" / "store.db")
    yield s
    s.close()


def test_new_store_is_migrated_and_in_wal_mode(sqlite_store: SQLiteStore) -> None:
    assert sqlite_store.get_meta("schema_version") == str(SCHEMA_VERSION)
    facts = sqlite_store.describe()
    assert facts["schema_version"] == SCHEMA_VERSION
    assert facts["details"]["journal_mode"] == "wal"
    assert sqlite_store.integrity_problems() == []


def test_reopening_keeps_data_and_does_not_remigrate(store_spot: StoreSpot) -> None:
    first = store_spot.open()
    first.documents.put(note_record("a.md"), _chunks("alpha"), [], ["t"])
    created = first.get_meta("created_unix")
    assert created is not None
    first.close()
    second = store_spot.open(create=False)
    assert list(second.documents.states()) == ["a.md"]
    assert second.get_meta("created_unix") == created
    assert second.integrity_problems() == []
    second.close()


def test_a_new_store_appears_only_once_its_schema_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.db"

    def crash(self: Database) -> None:
        raise StorageError("simulated crash while creating the schema")

    monkeypatch.setattr(Database, "_migrate", crash)
    with pytest.raises(StorageError, match="simulated"):
        SQLiteStore(path)
    assert list(tmp_path.iterdir()) == [], "no store file and no temporary left behind"
    monkeypatch.undo()
    SQLiteStore(path).close()
    assert [p.name for p in tmp_path.iterdir()] == ["store.db"]


def test_an_empty_or_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    for name, make in {
        "empty.db": lambda p: p.write_bytes(b""),
        "other.db": lambda p: sqlite3.connect(p).execute("CREATE TABLE users (id INTEGER)"),
    }.items():
        path = tmp_path / name
        make(path)
        before = path.read_bytes()
        with pytest.raises(StorageError, match="not a vrom store"):
            SQLiteStore(path)
        assert path.read_bytes() == before


def test_put_document_survives_another_writer_adding_or_removing_the_note(
    store: Store,
) -> None:
    first = store.documents.put(note_record("a.md"), _chunks("one"), [], [])
    # a writer that did not see a.md yet adds it again: the stored note is replaced, not doubled
    assert store.documents.put(note_record("a.md"), _chunks("two"), [], []) == first
    assert [c.text for c in store.documents.chunks_of(first)] == ["two"]
    # a writer that saw a.md updates it after another writer deleted it: it is added anew
    store.documents.delete(first)
    again = store.documents.put(note_record("a.md"), _chunks("three"), [], [], first)
    assert [c.text for c in store.documents.chunks_of(again)] == ["three"]
    # a rename onto a path another note still holds: the path's old note gives way
    other = store.documents.put(note_record("b.md"), _chunks("bee"), [], [])
    assert store.documents.put(note_record("b.md"), _chunks("moved"), [], [], again) == again
    assert store.documents.get(other) is None
    assert list(store.documents.states()) == ["b.md"]
    assert store.integrity_problems() == []


def test_missing_store_without_create_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="index the vault first"):
        SQLiteStore(tmp_path / "nope.db", create=False)


def test_a_store_from_a_newer_vrom_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StorageError, match="schema version 99, newer than"):
        SQLiteStore(path)


def test_a_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StorageError, match="not a vrom store"):
        SQLiteStore(path)


def test_put_links_chunks_and_replacing_removes_old_rows(store: Store) -> None:
    doc_id = store.documents.put(
        note_record("a.md"),
        _chunks("one", "two", "three"),
        [LinkRecord("wikilink", "B", "b", None, None, 3)],
        ["x", "y"],
    )
    chunks = store.documents.chunks_of(doc_id)
    assert [c.text for c in chunks] == ["one", "two", "three"]
    assert [c.prev_id for c in chunks] == [None, chunks[0].chunk_id, chunks[1].chunk_id]
    assert [c.next_id for c in chunks] == [chunks[1].chunk_id, chunks[2].chunk_id, None]
    old_ids = {c.chunk_id for c in chunks}

    assert store.documents.put(note_record("a.md"), _chunks("four"), [], ["z"], doc_id) == doc_id
    new = store.documents.chunks_of(doc_id)
    assert [c.text for c in new] == ["four"]
    assert not old_ids & {c.chunk_id for c in new}, "chunk ids are never reused"
    assert store.documents.links(sources=[doc_id]) == []
    assert store.documents.tags_of(doc_id) == ["z"]
    assert store.documents.keyword_search(KeywordQuery(terms=("one",)), 10) == []
    assert len(store.documents.keyword_search(KeywordQuery(terms=("four",)), 10)) == 1
    assert store.integrity_problems() == []


def test_delete_removes_everything_derived(store: Store) -> None:
    doc_id = store.documents.put(note_record("a.md"), _chunks("alpha beta"), [], ["t"])
    store.documents.delete(doc_id)
    assert store.documents.states() == {}
    assert store.documents.keyword_search(KeywordQuery(terms=("alpha",)), 10) == []
    counts = store.counts()
    assert (counts.documents, counts.chunks, counts.links, counts.tags) == (0, 0, 0, 0)
    assert store.integrity_problems() == []


def test_a_failed_transaction_writes_nothing(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.documents.put(note_record("a.md"), _chunks("alpha"), [], [])
        raise RuntimeError("crash in the middle")
    assert store.documents.states() == {}
    assert store.integrity_problems() == []


def test_integrity_problems_detects_damage(sqlite_store: SQLiteStore) -> None:
    doc_id = sqlite_store.documents.put(note_record("a.md"), _chunks("one", "two"), [], [])
    assert sqlite_store.path is not None
    with sqlite3.connect(sqlite_store.path) as conn:
        conn.execute("DELETE FROM chunks WHERE document_id = ? AND position = 1", (doc_id,))
    problems = sqlite_store.integrity_problems()
    assert any("chunk count is wrong" in p for p in problems)
    assert any("keyword index rows without a chunk" in p for p in problems)


def test_find_documents_prefers_exact_path_then_shortest(store: Store) -> None:
    store.documents.put(note_record("deep/folder/note.md"), [], [], [])
    store.documents.put(note_record("folder/note.md"), [], [], [])
    store.documents.put(note_record("note.md"), [], [], [])
    assert [d.path for d in store.documents.find("note")] == [
        "note.md",
        "folder/note.md",
        "deep/folder/note.md",
    ]
    assert [d.path for d in store.documents.find("folder/note")] == [
        "folder/note.md",
        "deep/folder/note.md",
    ]
    assert store.documents.find("older/note") == [], "a path suffix matches whole segments"


def test_where_filters_apply_inside_the_query(store: Store) -> None:
    for i in range(30):
        store.documents.put(
            note_record(
                f"f{i % 3}/n{i}.md", status="done" if i % 2 else "open", aliases=[f"al{i}"]
            ),
            _chunks(f"common word {i}"),
            [],
            ["project/atlas" if i % 5 == 0 else "other"],
        )
    query = KeywordQuery(terms=("common",))
    assert len(store.documents.keyword_search(query, 5, Where(path_prefix="f1/"))) == 5
    rows = store.documents.keyword_search(query, 50, Where(path_prefix="f1/"))
    assert all(
        c.path.startswith("f1/") for c in store.documents.get_chunks([r.chunk_id for r in rows])
    )
    tagged = store.documents.keyword_search(query, 50, Where(tags=("project",)))
    assert len(tagged) == 6
    done = store.documents.keyword_search(
        query, 50, Where(conditions=(Condition("status", "eq", "done"),))
    )
    assert len(done) == 15
    assert (
        len(
            store.documents.keyword_search(
                query, 50, Where(conditions=(Condition("aliases", "eq", "al7"),))
            )
        )
        == 1
    )
    assert (
        store.documents.keyword_search(
            query, 50, Where(conditions=(Condition('we"ird', "eq", "x"),))
        )
        == []
    )


def test_match_expression_quotes_every_user_string() -> None:
    expression = match_expression(
        KeywordQuery(terms=('a"b', "pre*", "NOT"), phrases=("x y",), excluded=("z",))
    )
    assert expression == '("a""b" OR "pre"* OR "NOT" OR "x y") NOT ("z")'
    assert match_expression(KeywordQuery(terms=("東京都",))) == '"東京 京都"'
    assert match_expression(KeywordQuery(terms=("猫",))) == '"猫"*'


def test_closed_store_raises_storage_error(store: Store) -> None:
    store.close()
    with pytest.raises(StorageError, match="closed"):
        store.documents.states()


def test_an_older_store_is_migrated_and_its_field_index_filled(tmp_path: Path) -> None:
    """A store made by an earlier vrom (schema 2) gains the change log and the field index."""
    import sqlite3

    from vrom.store.filter_sql import where_sql
    from vrom.store.migration import statements
    from vrom.store.schema import MIGRATIONS
    from vrom.store.sqlite_query import DIALECT

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:2]:
        for statement in statements(migration.script):
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.execute(
        "INSERT INTO documents(id, path, path_key, name_key, title, frontmatter, content_hash,"
        " mtime, size, human_relevance_score, chunk_count, chunk_strategy, indexed_at)"
        " VALUES (1, 'a.md', 'a', 'a', 'A', ?, 'h', 1, 1, 0.5, 0, 's', 1)",
        ('{"status": "done", "n": 3, "ok": true, "tags": ["x", "y"], "deep": {"k": 1}}',),
    )
    conn.close()

    store = SQLiteStore(path, create=False)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert store.integrity_problems() == []
    for condition, matches in [
        (Condition("status", "eq", "done"), True),
        (Condition("n", "gte", 3), True),
        (Condition("n", "eq", "3"), False),  # text is not a number
        (Condition("ok", "eq", True), True),
        (Condition("ok", "eq", 1), False),  # true is not 1
        (Condition("tags", "in", ("y", "z")), True),
        (Condition("deep", "eq", 1), False),  # objects are not searched into
        (Condition("status", "ne", "done"), False),
    ]:
        sql, params = where_sql(Where(conditions=(condition,)), DIALECT)
        rows = store._db.conn.execute(f"SELECT count(*) FROM documents d WHERE 1{sql}", params)
        assert bool(rows.fetchone()[0]) is matches, condition
    store.close()
