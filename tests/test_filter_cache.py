"""What a SQLite store keeps between searches: the chunk ids passing a filter, until the store
changes. Kept answers must equal a fresh store's (one that keeps nothing yet) after adds,
deletes and edits, whether this process or another one wrote them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from store_records import note_record

from vrom import Collection, Embedder
from vrom.store import ChunkRecord, Condition, Where
from vrom.store.sqlite import SQLiteStore
from vrom.store.sqlite_documents import KEPT_FILTERS

FILTERS = [
    Where(conditions=(Condition("bucket", "eq", 1),)),
    Where(conditions=(Condition("bucket", "lt", 3),)),
    Where(conditions=(Condition("bucket", "ne", 2),)),
    Where(tags=("x",)),
    Where(path_prefix="f/"),
    Where(path_prefix="f/", conditions=(Condition("bucket", "in", (1, 2)),)),
]


def _chunks(*texts: str) -> list[ChunkRecord]:
    return [ChunkRecord(i, "H", t, 0, len(t), f"c-{t}") for i, t in enumerate(texts)]


def _put(store: SQLiteStore, path: str, bucket: int, tags: tuple[str, ...] = (), n: int = 1) -> int:
    chunks = _chunks(*(f"{path} part {i}" for i in range(n)))
    state = store.documents.state(path)
    document_id = None if state is None else state.document_id
    return store.documents.put(
        note_record(path, bucket=bucket), chunks, [], list(tags), document_id
    )


def _fresh(path: Path, where: Where) -> list[int]:
    """Return the ids a store that has kept nothing yet gives for ``where``."""
    store = SQLiteStore(path)
    try:
        return list(store.documents.chunk_ids_matching(where))
    finally:
        store.close()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(path)
    _put(s, "a.md", 1, ("x",))
    _put(s, "f/b.md", 2, n=3)
    _put(s, "f/c.md", 3, ("x", "y"))
    yield s
    s.close()


def _check(store: SQLiteStore, path: Path) -> None:
    for where in FILTERS:
        assert list(store.documents.chunk_ids_matching(where)) == _fresh(path, where), where


def test_kept_ids_follow_adds_deletes_and_edits(store: SQLiteStore, path: Path) -> None:
    _check(store, path)  # every filter's ids are kept from here on
    steps = [
        lambda: _put(store, "f/d.md", 1),  # a new document passing some filters
        lambda: _put(store, "e.md", 9),  # one passing only the negation
        lambda: _put(store, "a.md", 2, ("x",)),  # a field edited: leaves bucket = 1
        lambda: _put(store, "f/c.md", 3),  # a tag removed
        lambda: _put(store, "f/b.md", 2, n=5),  # rewritten with more chunks (new chunk ids)
        lambda: store.documents.delete(store.documents.find("f/d")[0].document_id),
        lambda: _put(store, "f/a.md", 1, ("x",)),  # a path that now passes the prefix
    ]
    for step in steps:
        step()
        _check(store, path)


def test_an_unchanged_store_answers_a_filter_again_without_reading(
    store: SQLiteStore, path: Path
) -> None:
    statements: list[str] = []
    store._db.conn.set_trace_callback(statements.append)
    where = FILTERS[1]
    first = store.documents.chunk_ids_matching(where)
    assert any("FROM chunks c JOIN documents d" in s for s in statements)
    statements.clear()
    store.documents.touch(store.documents.find("a")[0].document_id, 5.0, 11)  # not a change
    assert store.documents.chunk_ids_matching(where) is first
    assert not any("FROM chunks c JOIN documents d" in s for s in statements)
    _put(store, "f/g.md", 1)
    assert list(store.documents.chunk_ids_matching(where)) == _fresh(path, where) != list(first)


def test_writes_by_another_process_are_seen(store: SQLiteStore, path: Path) -> None:
    _check(store, path)
    writer = textwrap.dedent(
        f"""
        from store_records import note_record
        from vrom.store import ChunkRecord
        from vrom.store.sqlite import SQLiteStore

        store = SQLiteStore({str(path)!r})
        chunk = [ChunkRecord(0, "H", "other text", 0, 10, "c-other")]
        store.documents.put(note_record("f/other.md", bucket=1), chunk, [], ["x"])
        gone = store.documents.find("a")[0].document_id
        store.documents.delete(gone)
        state = store.documents.state("f/c.md")
        store.documents.put(note_record("f/c.md", bucket=1), chunk, [], [], state.document_id)
        store.close()
        """
    )
    subprocess.run(
        [sys.executable, "-c", writer], check=True, cwd=Path(__file__).parent, timeout=120
    )
    _check(store, path)


def test_true_and_one_are_different_filters(store: SQLiteStore, path: Path) -> None:
    # Python's True == 1 (and their hashes agree); the store's fields keep them apart
    store.documents.put(note_record("t.md", flag=True), _chunks("t"), [], [])
    store.documents.put(note_record("o.md", flag=1), _chunks("o"), [], [])
    for value in (True, 1, True, 1.0, 1):
        where = Where(conditions=(Condition("flag", "eq", value),))
        assert list(store.documents.chunk_ids_matching(where)) == _fresh(path, where)
        assert len(store.documents.chunk_ids_matching(where)) == 1


def test_a_rolled_back_write_leaves_nothing_kept(store: SQLiteStore, path: Path) -> None:
    where = FILTERS[0]
    before = list(store.documents.chunk_ids_matching(where))
    with pytest.raises(RuntimeError), store.transaction():
        _put(store, "f/h.md", 1)
        inside = list(store.documents.chunk_ids_matching(where))
        assert len(inside) == len(before) + 1  # the transaction sees its own write
        raise RuntimeError("roll back")
    _put(store, "f/i.md", 2)  # the next write takes the generation the rolled back one had
    assert list(store.documents.chunk_ids_matching(where)) == before == _fresh(path, where)


def test_ids_are_read_only_and_only_the_last_filters_are_kept(store: SQLiteStore) -> None:
    ids = store.documents.chunk_ids_matching(FILTERS[1])
    assert np.asarray(ids).dtype == np.int64 and not np.asarray(ids).flags.writeable
    with pytest.raises(TypeError):
        ids[0] = 1  # type: ignore[index]
    for bucket in range(3 * KEPT_FILTERS):
        store.documents.chunk_ids_matching(Where(conditions=(Condition("bucket", "eq", bucket),)))
    assert len(store.documents._filtered) == KEPT_FILTERS


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_filtered_searches_follow_another_process(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "docs.db"
    docs = Collection.open("docs", embedder=Embedder.fake(), storage=path)
    topics = ["harbour", "glacier", "orchard", "lantern", "meadow"]
    docs.add(
        {
            "id": f"d{i}",
            "text": f"a note about {topics[i % 5]} number {i}",
            "metadata": {"b": i % 3},
        }
        for i in range(30)
    )
    where = {"b": {"$lt": 2}}
    docs.search("harbour note", k=5, where=where, mode=mode)  # the filter's ids are kept
    writer = textwrap.dedent(
        f"""
        from vrom import Collection, Embedder

        docs = Collection.open("docs", embedder=Embedder.fake(), storage={str(path)!r})
        docs.add([{{"id": f"n{{i}}", "text": f"harbour note {{i}}", "metadata": {{"b": 0}}}}
                  for i in range(4)])
        docs.add([{{"id": "d0", "text": "a note about harbour number 0", "metadata": {{"b": 2}}}}])
        docs.remove("d3")
        docs.close()
        """
    )
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=120)
    fresh = Collection.open("docs", embedder=Embedder.fake(), storage=path)
    try:
        for query in ("harbour note", "glacier", "a note about meadow"):
            seen = docs.search(query, k=8, where=where, mode=mode)
            expected = fresh.search(query, k=8, where=where, mode=mode)
            assert [(h.id, h.score) for h in seen] == [(h.id, h.score) for h in expected]
        assert {"n0", "n1", "n2", "n3"} <= {
            h.id for h in docs.search("harbour note", k=8, where=where, mode=mode)
        }
    finally:
        fresh.close()
        docs.close()
