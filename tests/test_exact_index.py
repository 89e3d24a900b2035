"""The exact index's matrix file beside the store: it answers exactly as the store's own
vectors do, catches up with other processes' writes, and is rebuilt, never trusted, when it is
damaged or another store's; BLAS runs on one thread while it scores."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from matrix_writer import CHUNKS_PER_NOTE, NOTES, add_note, chunk_ids, fill, unit_vectors

from vrom import Embedder
from vrom.corpus import Corpus
from vrom.embed import EmbedderBinding
from vrom.index import exact
from vrom.index.cache_files import STALE_TEMPORARY_SECONDS
from vrom.index.exact import ExactIndex
from vrom.index.matrix_file import MatrixHeader, read_matrix, write_matrix
from vrom.index.scoring import best_rows, one_blas_thread
from vrom.ingest.embedding import FINGERPRINT_META_KEY
from vrom.store import Sidecar
from vrom.store.sqlite import SQLiteStore

WRITER = Path(__file__).with_name("matrix_writer.py")
TOTAL = NOTES * CHUNKS_PER_NOTE


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "store.db"
    store = SQLiteStore(path)
    fill(store)
    store.close()
    return path


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(db, create=False)
    yield s
    s.close()


def _matrix_file(db: Path) -> Path:
    return db.with_name(db.name + ".matrix")


def _queries(count: int = 20) -> list[np.ndarray]:
    return list(unit_vectors(count, seed=99))


def _same_answers(fast: ExactIndex, durable: ExactIndex, allowed: list[int] | None = None) -> None:
    """The two indexes give the same ids in the same order, with scores equal to 1e-6."""
    for query in _queries():
        for k in (1, 10, 50):
            got, expected = fast.search(query, k, allowed), durable.search(query, k, allowed)
            assert [i for i, _ in got] == [i for i, _ in expected]
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_the_matrix_file_answers_as_the_store_does(db: Path, store: SQLiteStore) -> None:
    db.chmod(0o640)
    first = ExactIndex.for_chunks(store)
    assert len(first) == TOTAL
    matrix = _matrix_file(db)
    assert matrix.is_file() and matrix.stat().st_mode == db.stat().st_mode, "as private as it"
    assert not [p for p in db.parent.iterdir() if p.name.endswith(".tmp")]
    durable = ExactIndex(store.vectors)  # no file: every vector decoded from the store
    _same_answers(first, durable)

    assert first.load_count == 1, "read from the store once, and the file written"
    opened = ExactIndex.for_chunks(store)
    _same_answers(opened, durable)
    ids = [i for i, _ in store.vectors.rows()]
    _same_answers(opened, durable, allowed=[*ids[100:150], 10**9])  # an id without a vector
    _same_answers(opened, durable, allowed=ids[: TOTAL - 300])
    assert opened.search(_queries(1)[0], 10, []) == []
    assert opened.load_count == 0, "the file was opened, not the store read"


def test_other_processes_writes_are_replayed(db: Path, store: SQLiteStore) -> None:
    reader = ExactIndex.for_chunks(store)
    assert len(reader) == TOTAL
    deleted = chunk_ids(store, "n/3")
    rewritten = chunk_ids(store, "n/5")
    subprocess.run([sys.executable, str(WRITER), str(db)], check=True, timeout=120)

    durable = ExactIndex(store.vectors)
    _same_answers(reader, durable)
    assert reader.load_count == 1, "the changes were replayed, the store not read again"
    assert len(reader) == TOTAL - 100 + 60 - 100 + 40
    gone = set(deleted) | set(rewritten)
    for query in [*unit_vectors(100, seed=1)[300:320], *unit_vectors(100, seed=1)[500:520]]:
        assert not {i for i, _ in reader.search(query, 10)} & gone, "removed, never answered"
    edited = chunk_ids(store, "n/4")[0]
    assert reader.search(unit_vectors(25, 102)[0], 1)[0][0] == edited, "by its new vector"
    _same_answers(reader, durable, allowed=chunk_ids(store, "n/4") + chunk_ids(store, "n/5"))

    fresh = ExactIndex.for_chunks(SQLiteStore(db, create=False))
    _same_answers(fresh, durable)
    assert fresh.load_count == 0, "the file opened and caught up"
    reader.close()  # the replayed changes are written to the file
    stored = read_matrix(_matrix_file(db))
    assert stored is not None and stored.header.changes == store.vectors.change_number()
    assert len(stored.ids) == len(durable)


def test_many_changes_are_merged_into_the_file(db: Path, store: SQLiteStore) -> None:
    index = ExactIndex.for_chunks(store)
    assert len(index) == TOTAL
    for n in range(11, 22):  # 1,100 vectors replaced: more than `COMPACT_CHANGES`
        ids = chunk_ids(store, f"n/{n}")
        store.vectors.put(
            [(i, v.tobytes()) for i, v in zip(ids, unit_vectors(100, n), strict=True)]
        )
        _same_answers(index, ExactIndex(store.vectors))
        if n == 20:  # 1,000 replayed: merged and written
            merged_at = store.vectors.change_number()
    stored = read_matrix(_matrix_file(db))
    assert stored is not None and stored.header.changes == merged_at
    index.close()  # the last 100 are written on close
    stored = read_matrix(_matrix_file(db))
    assert stored is not None and stored.header.changes == store.vectors.change_number()


DAMAGE = [
    "truncated",
    "a flipped bit in a vector",
    "a flipped bit in an id",
    "a header that is not JSON",
    "another magic",
    "empty",
    "another store's file",
    "newer than the store",
]


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_or_foreign_file_is_rebuilt(
    db: Path, store: SQLiteStore, damage: str, tmp_path: Path
) -> None:
    len(ExactIndex.for_chunks(store))
    matrix = _matrix_file(db)
    data = bytearray(matrix.read_bytes())
    start = data.index(b"}") + 1  # the header's end: the data follows the padding
    start += -start % 64
    if damage == "truncated":
        del data[len(data) // 2 :]
    elif damage == "a flipped bit in a vector":
        data[start + TOTAL * 8 + 12_345] ^= 0x10
    elif damage == "a flipped bit in an id":
        data[start + 8 * 17] ^= 0x01
    elif damage == "a header that is not JSON":
        data[20] = ord("{")
    elif damage == "another magic":
        data[:8] = b"NOTVROM\x00"
    elif damage == "empty":
        data.clear()
    elif damage == "another store's file":  # the same notes and vectors, another store
        other = SQLiteStore(tmp_path / "other.db")
        fill(other)
        len(ExactIndex.for_chunks(other))
        other.close()
        data = bytearray((tmp_path / "other.db.matrix").read_bytes())
    elif damage == "newer than the store":  # the store is a backup restored over a newer one
        newer = tmp_path / "newer.db"
        shutil.copy(db, newer)
        grown = SQLiteStore(newer, create=False)
        add_note(grown, "new/later.md", unit_vectors(5, seed=7))
        len(ExactIndex.for_chunks(grown))
        grown.close()
        data = bytearray((tmp_path / "newer.db.matrix").read_bytes())
    matrix.write_bytes(bytes(data))

    again = ExactIndex.for_chunks(store)
    _same_answers(again, ExactIndex(store.vectors))
    assert again.load_count == 1, "the file was refused: the store was read"
    repaired = read_matrix(matrix)
    assert repaired is not None and len(repaired.ids) == TOTAL, "and written again"
    assert repaired.header.changes == store.vectors.change_number()


def test_a_matrix_file_written_in_uneven_blocks_reads_back_whole(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    ids = np.sort(rng.choice(10**6, size=45, replace=False)).astype(np.int64)
    matrix = rng.standard_normal((45, 7)).astype(np.float32)  # 7 floats: rows end mid-word
    cache = Sidecar(tmp_path / "odd.matrix", 0o600)
    header = MatrixHeader("store-1", 12, "int8")
    bounds = [0, 3, 8, 9, 30, 45]
    write_matrix(cache, header, ids, (matrix[a:b] for a, b in itertools.pairwise(bounds)))
    stored = read_matrix(cache.path)
    assert stored is not None and stored.header == header
    assert np.array_equal(stored.ids, ids) and np.array_equal(stored.matrix, matrix)
    with pytest.raises(ValueError, match="rows written"):
        write_matrix(cache, header, ids, [matrix[:44]])
    assert read_matrix(cache.path) is not None, "a failed write leaves the file it replaces"
    data = bytearray(cache.path.read_bytes())
    data[-5] ^= 0x01  # the last float's last byte
    cache.path.write_bytes(bytes(data))
    assert read_matrix(cache.path) is None


def test_a_small_store_keeps_no_file_and_a_store_in_memory_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = SQLiteStore(tmp_path / "small.db")
    add_note(small, "a.md", unit_vectors(50, seed=1))
    assert len(ExactIndex.for_chunks(small)) == 50
    assert not _matrix_file(tmp_path / "small.db").exists(), "read from the store: a few ms"
    small.close()

    monkeypatch.setattr(exact, "MATRIX_FILE_MIN", 10)
    shrinking = SQLiteStore(tmp_path / "shrinking.db")
    add_note(shrinking, "a.md", unit_vectors(5, seed=1))
    add_note(shrinking, "b.md", unit_vectors(15, seed=2))
    index = ExactIndex.for_chunks(shrinking)
    assert len(index) == 20 and _matrix_file(tmp_path / "shrinking.db").exists()
    shrinking.documents.delete(shrinking.documents.find("b")[0].document_id)
    assert len(index) == 5
    index.close()
    assert not _matrix_file(tmp_path / "shrinking.db").exists(), "too few: removed"
    shrinking.close()

    memory = SQLiteStore(None)
    add_note(memory, "a.md", unit_vectors(20, seed=1))
    in_memory = ExactIndex.for_chunks(memory)
    assert len(in_memory) == 20
    assert in_memory.search(unit_vectors(20, seed=1)[3], 1)[0][1] == pytest.approx(1.0)
    memory.close()


def test_a_current_file_counts_the_vectors_for_the_choice_of_index(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.set_meta(FINGERPRINT_META_KEY, Embedder.fake(32).fingerprint.to_json())
    model = EmbedderBinding.of(Embedder.fake(32))
    first = Corpus(store, model).index
    assert len(first.current) == TOTAL  # reads the store, has the file written beside
    first.wait_for_graph()

    def counted() -> int:
        raise AssertionError("the store's vectors were counted")

    monkeypatch.setattr(store.vectors, "count", counted)
    assert isinstance(Corpus(store, model).index.current, ExactIndex)
    add_note(store, "new.md", unit_vectors(1, seed=5))
    with pytest.raises(AssertionError, match="counted"):  # the file is a change behind now
        len(Corpus(store, model).index.current)


def test_changes_far_from_the_threshold_are_not_counted_again(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.set_meta(FINGERPRINT_META_KEY, Embedder.fake(32).fingerprint.to_json())
    model = EmbedderBinding.of(Embedder.fake(32))
    far, near = Corpus(store, model), Corpus(store, model, hnsw_threshold=TOTAL + 20)
    assert len(far.index.current) == TOTAL  # counted (as the file was not there yet)
    counts: list[int] = []
    real = store.vectors.count
    monkeypatch.setattr(store.vectors, "count", lambda: counts.append(1) or real())

    add_note(store, "new/a.md", unit_vectors(10, seed=5))  # the file is 10 changes behind
    assert isinstance(near.index.current, ExactIndex) and counts == [1], "3,010 < 3,020"
    add_note(store, "new/b.md", unit_vectors(10, seed=6))
    assert isinstance(far.index.current, ExactIndex)
    assert counts == [1], "3,020 at most: far below the default threshold, not counted"
    assert not isinstance(near.index.wait_for_graph(), ExactIndex), "3,010 + 10: counted"
    assert counts == [1, 1]


def test_an_unwritable_file_only_warns(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    index = ExactIndex.for_chunks(store)
    with pytest.warns(RuntimeWarning, match="cannot save the vector matrix cache"):
        assert len(index) == TOTAL
    assert len(index.search(_queries(1)[0], 10)) == 10
    assert not list(store.path.parent.glob("*.matrix*")), "no file and no temporary left"


def test_temporaries_a_killed_save_left_are_removed_when_the_file_opens(
    db: Path, store: SQLiteStore
) -> None:
    matrix = _matrix_file(db)
    stale = matrix.with_name(matrix.name + ".k1ll3d.tmp")
    in_progress = matrix.with_name(matrix.name + ".s4v1ng.tmp")  # another process's, right now
    for leftover in (stale, in_progress):
        leftover.write_bytes(b"\0" * 1024)
    long_ago = time.time() - 2 * STALE_TEMPORARY_SECONDS
    os.utime(stale, (long_ago, long_ago))
    assert len(ExactIndex.for_chunks(store)) == TOTAL
    assert not stale.exists() and in_progress.exists()


def test_equal_scores_go_by_id_whatever_order_they_come_in() -> None:
    ids = np.array([40, 10, 30, 20, 50, 60], dtype=np.int64)
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.5], dtype=np.float32)
    for order in (np.arange(6), np.array([5, 4, 3, 2, 1, 0]), np.array([2, 0, 5, 1, 3, 4])):
        best = best_rows(ids[order], scores[order], 3)
        assert ids[order][best].tolist() == [10, 20, 30], "the tie at the cut goes by id too"
    assert ids[best_rows(ids, scores, 10)].tolist() == [10, 20, 30, 40, 60, 50]
    assert best_rows(ids, scores, 0).tolist() == []


def test_blas_runs_on_one_thread_while_scoring_and_is_restored() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def numpy_blas_threads() -> list[int]:
        info = threadpoolctl.threadpool_info()
        return [lib["num_threads"] for lib in info if "numpy" in lib["filepath"]]

    if not numpy_blas_threads():
        pytest.skip("numpy's BLAS is not one threadpoolctl can limit here")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = numpy_blas_threads()
        first, second = one_blas_thread(), one_blas_thread()
        first.__enter__()
        assert numpy_blas_threads() == [1]
        second.__enter__()  # another thread's search, overlapping the first
        first.__exit__(None, None, None)
        assert numpy_blas_threads() == [1], "still one while the second scores"
        second.__exit__(None, None, None)
        assert numpy_blas_threads() == before, "restored once both are done"
