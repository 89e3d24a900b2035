"""The HNSW index: recall against exact search, its cache file beside the store, and filters."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from vrom import Embedder, ValidationError
from vrom.corpus import Corpus
from vrom.embed import EmbedderBinding
from vrom.index.exact import ExactIndex
from vrom.index.hnsw import HnswIndex, _prefers_exact
from vrom.ingest.embedding import FINGERPRINT_META_KEY
from vrom.search import vector as vector_module
from vrom.search.vector import EXACT_CEILING, HNSW_THRESHOLD
from vrom.store import ChunkRecord, DocumentRecord, Where
from vrom.store.sqlite import SQLiteStore

DIMS = 32
NOTES = 30
CHUNKS_PER_NOTE = 100  # 3,000 vectors


def _doc(path: str) -> DocumentRecord:
    key = path.lower().removesuffix(".md")
    return DocumentRecord(
        path=path,
        path_key=key,
        name_key=key.rsplit("/", 1)[-1],
        title=path,
        frontmatter={},
        content_hash="h-" + path,
        mtime=1.0,
        size=10,
        human_relevance_score=0.5,
        chunk_strategy="s1",
    )


def _unit_vectors(count: int, seed: int) -> npt.NDArray[np.float32]:
    vectors = np.random.default_rng(seed).standard_normal((count, DIMS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _add_note(store: SQLiteStore, path: str, vectors: npt.NDArray[np.float32]) -> list[int]:
    """Write a note with one chunk per vector, then the vectors; return the chunk ids."""
    chunks = [ChunkRecord(i, "H", f"chunk {i}", 0, 7, f"{path}-{i}") for i in range(len(vectors))]
    document_id = store.documents.put(_doc(path), chunks, [], [])
    ids = [c.chunk_id for c in store.documents.chunks_of(document_id)]
    store.vectors.put([(i, v.tobytes()) for i, v in zip(ids, vectors, strict=True)])
    return ids


def _fill(store: SQLiteStore, seed: int = 1) -> dict[int, npt.NDArray[np.float32]]:
    """Fill a store with seeded unit vectors: notes ``a/0.md`` .. ``b/29.md``; id → vector."""
    vectors = _unit_vectors(NOTES * CHUNKS_PER_NOTE, seed)
    by_id: dict[int, npt.NDArray[np.float32]] = {}
    for n in range(NOTES):
        part = vectors[n * CHUNKS_PER_NOTE : (n + 1) * CHUNKS_PER_NOTE]
        folder = "a" if n < 3 else "b"
        by_id.update(zip(_add_note(store, f"{folder}/{n}.md", part), part, strict=True))
    return by_id


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "store.db"
    store = SQLiteStore(path)
    _fill(store)
    store.close()
    return path


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(db, create=False)
    yield s
    s.close()


def _queries(count: int = 50) -> npt.NDArray[np.float32]:
    return _unit_vectors(count, seed=99)


def _ids(hits: list[tuple[int, float]]) -> list[int]:
    return [i for i, _ in hits]


def test_recall_at_10_against_exact_search(store: SQLiteStore) -> None:
    hnsw, exact = HnswIndex.for_chunks(store), ExactIndex(store.vectors)
    assert len(hnsw) == NOTES * CHUNKS_PER_NOTE
    found = sum(
        len(set(_ids(exact.search(q, 10))) & set(_ids(hnsw.search(q, 10)))) for q in _queries()
    )
    assert found / (10 * len(_queries())) >= 0.95


@pytest.mark.parametrize("metric", ["cosine", "dot", "euclidean"])
def test_scores_follow_the_exact_index(store: SQLiteStore, metric: str) -> None:
    hnsw, exact = HnswIndex.for_chunks(store, metric), ExactIndex(store.vectors, metric)
    for query in _queries(10) * 1.5:  # not unit length: dot and euclidean differ from cosine
        approximate = hnsw.search(query, 5, ef_search=256)
        truth = dict(exact.search(query, 5))
        assert [s for _, s in approximate] == sorted((s for _, s in approximate), reverse=True)
        assert approximate[0][0] in truth
        for chunk_id, score in approximate:
            if chunk_id in truth:
                assert score == pytest.approx(truth[chunk_id], abs=0.01)  # f16 storage


def test_the_graph_is_cached_beside_the_database_and_reused(db: Path) -> None:
    db.chmod(0o640)
    store = SQLiteStore(db, create=False)
    first = HnswIndex.for_chunks(store)
    answer = first.search(_queries(1)[0], 10)
    assert first.build_count == 1
    cache = db.with_name("store.db.hnsw.usearch")
    assert first.path == cache and cache.is_file()
    sidecar = json.loads(db.with_name("store.db.hnsw.json").read_text())
    assert sidecar["changes"] == store.vectors.change_number()
    assert sidecar["count"] == NOTES * CHUNKS_PER_NOTE and sidecar["dims"] == DIMS
    assert not [p for p in db.parent.iterdir() if p.name.endswith(".tmp")]
    assert cache.stat().st_mode == db.stat().st_mode, "as private as the database"
    written = os.stat(cache)
    store.close()

    reopened = SQLiteStore(db, create=False)
    second = HnswIndex.for_chunks(reopened)
    assert second.search(_queries(1)[0], 10) == answer
    assert second.build_count == 0, "a current cache is opened, not rebuilt"
    assert second.refresh() is False
    again = os.stat(cache)
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    reopened.close()


def test_a_stale_cache_catches_up_and_deleted_chunks_never_return(db: Path) -> None:
    reader, writer = SQLiteStore(db, create=False), SQLiteStore(db, create=False)
    live = HnswIndex.for_chunks(reader)
    assert len(live) == NOTES * CHUNKS_PER_NOTE
    builds = live.build_count
    victim = writer.documents.find("b/7")[0]
    gone = [c.chunk_id for c in writer.documents.chunks_of(victim.document_id)]
    gone_queries = [np.frombuffer(v, dtype=np.float32) for v in writer.vectors.of(gone).values()]
    writer.documents.delete(victim.document_id)
    added = _add_note(writer, "b/new.md", _unit_vectors(CHUNKS_PER_NOTE, seed=7))

    fresh = HnswIndex.for_chunks(writer)
    for query in gone_queries[:20]:
        assert not set(_ids(fresh.search(query, 10))) & set(gone)
    assert fresh.build_count == 0, "a cache 200 changes behind is caught up, not rebuilt"
    assert len(fresh) == NOTES * CHUNKS_PER_NOTE
    assert fresh.search(_unit_vectors(CHUNKS_PER_NOTE, seed=7)[0], 1)[0][0] == added[0]
    # The index that was open in another connection while the store changed notices it too.
    assert live.refresh() is True and live.build_count == builds
    for query in gone_queries[:20]:
        assert not set(_ids(live.search(query, 10))) & set(gone)
    assert live.search(_unit_vectors(CHUNKS_PER_NOTE, seed=7)[0], 1)[0][0] == added[0]
    reader.close()
    writer.close()


def test_caught_up_changes_are_saved_on_close(db: Path) -> None:
    store = SQLiteStore(db, create=False)
    first = HnswIndex.for_chunks(store)
    len(first)
    added = _add_note(store, "c/new.md", _unit_vectors(10, seed=9))
    probe = _unit_vectors(10, seed=9)[3]
    assert first.search(probe, 1)[0][0] == added[3]
    first.close()  # 10 unsaved changes: written now
    sidecar = json.loads(db.with_name("store.db.hnsw.json").read_text())
    assert sidecar["changes"] == store.vectors.change_number()
    assert sidecar["count"] == NOTES * CHUNKS_PER_NOTE + 10
    second = HnswIndex.for_chunks(store)
    assert second.search(probe, 1)[0][0] == added[3]
    assert second.build_count == 0
    store.close()


def test_more_changes_than_the_replay_limit_rebuild(db: Path) -> None:
    store = SQLiteStore(db, create=False)
    index = HnswIndex.for_chunks(store)
    len(index)
    builds = index.build_count
    for n in range(20):  # 2,000 chunks removed: more than half of 3,000
        folder = "a" if n < 3 else "b"
        store.documents.delete(store.documents.find(f"{folder}/{n}")[0].document_id)
    assert len(index) == NOTES * CHUNKS_PER_NOTE - 2_000
    assert index.build_count == builds + 1
    store.close()


def test_a_forgotten_change_log_means_a_rebuild(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vrom.store.sql_vectors as vectors_module

    store = SQLiteStore(db, create=False)
    after = store.vectors.change_number()
    monkeypatch.setattr(vectors_module, "VECTOR_CHANGES_KEPT", 0)
    ids = [
        c.chunk_id for c in store.documents.chunks_of(store.documents.find("b/5")[0].document_id)
    ]
    for _ in range(NOTES * CHUNKS_PER_NOTE // len(ids) + 1):  # more changes than vectors
        store.vectors.put([(i, _unit_vectors(1, seed=i)[0].tobytes()) for i in ids])
    assert store.vectors.changes(after) is None, "pruned: that far back is forgotten"
    latest = store.vectors.changes(store.vectors.change_number() - 1)
    assert latest is not None and len(latest.keys) == 1
    store.close()


def test_a_replaced_vector_is_searched_by_its_new_value(store: SQLiteStore) -> None:
    hnsw = HnswIndex.for_chunks(store)
    chunk_id, old = next(iter(store.vectors.rows()))
    target = _unit_vectors(1, seed=5)[0]
    store.vectors.put([(chunk_id, target.tobytes())])
    assert hnsw.search(target, 1)[0][0] == chunk_id
    assert chunk_id not in _ids(hnsw.search(np.frombuffer(old, dtype=np.float32), 3))


@pytest.mark.parametrize("damage", ["truncated", "truncated, sidecar updated", "garbage sidecar"])
def test_a_damaged_cache_is_rebuilt(db: Path, damage: str) -> None:
    store = SQLiteStore(db, create=False)
    # A beam as wide as the graph scores every vector the graph holds: the rebuilt graph must
    # hold the store's vectors exactly. (Two builds on all threads link their graphs
    # differently, so their narrower searches may differ at the 10th hit.)
    whole = NOTES * CHUNKS_PER_NOTE
    answer = HnswIndex.for_chunks(store).search(_queries(1)[0], 10, ef_search=whole)
    cache, sidecar = db.with_name("store.db.hnsw.usearch"), db.with_name("store.db.hnsw.json")
    if damage.startswith("truncated"):
        cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])
    if damage == "truncated, sidecar updated":  # the file passes the sidecar's check: usearch
        meta = json.loads(sidecar.read_text())  # itself must refuse it
        stat = cache.stat()
        meta["file"] = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        sidecar.write_text(json.dumps(meta))
    if damage == "garbage sidecar":
        sidecar.write_text("{not json")
    again = HnswIndex.for_chunks(store)
    assert again.search(_queries(1)[0], 10, ef_search=whole) == answer
    assert again.build_count == 1
    assert HnswIndex.for_chunks(store).refresh() and HnswIndex.for_chunks(store).build_count == 0, (
        "repaired"
    )
    store.close()


def test_an_unwritable_cache_only_warns(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    hnsw = HnswIndex.for_chunks(store)
    with pytest.warns(RuntimeWarning, match="cannot save the vector index cache"):
        assert len(hnsw) == NOTES * CHUNKS_PER_NOTE
    assert len(hnsw.search(_queries(1)[0], 10)) == 10
    assert not list(store.path.parent.glob("*.hnsw.*")), "no cache and no temporary left"


def test_narrow_and_broad_filters(store: SQLiteStore) -> None:
    hnsw, exact = HnswIndex.for_chunks(store), ExactIndex(store.vectors)
    ids = [i for i, _ in store.vectors.rows()]
    narrow = [*ids[100:150], 10**9]  # an id without a vector is ignored
    broad = ids[: len(ids) - 300]  # 2,700 of 3,000: the graph, post-filtered
    assert _prefers_exact(len(narrow), len(ids), 10)
    assert not _prefers_exact(len(broad), len(ids), 10)
    for allowed in (narrow, broad):
        found = 0
        for query in _queries(20):
            hits = hnsw.search(query, 10, allowed)
            assert len(hits) == 10 and set(_ids(hits)) <= set(allowed)
            found += len(set(_ids(hits)) & set(_ids(exact.search(query, 10, allowed))))
        assert found / 200 >= (1.0 if allowed is narrow else 0.95)
    query = _queries(1)[0]
    assert _ids(hnsw.search(query, 10, ids[:3])) == _ids(exact.search(query, 10, ids[:3]))
    assert hnsw.search(query, 10, []) == []
    assert hnsw.search(query, 10, [10**9]) == []


def test_a_broad_filter_far_from_the_query_falls_back_to_exact(store: SQLiteStore) -> None:
    hnsw, exact = HnswIndex.for_chunks(store), ExactIndex(store.vectors)
    query = _queries(1)[0]
    by_distance = _ids(exact.search(query, NOTES * CHUNKS_PER_NOTE))
    allowed = by_distance[-2_500:]  # the graph's candidates near the query are all filtered out
    assert not _prefers_exact(len(allowed), len(by_distance), 10)
    assert _ids(hnsw.search(query, 10, allowed)) == _ids(exact.search(query, 10, allowed))


def test_ef_search_is_a_per_query_knob(store: SQLiteStore) -> None:
    hnsw, exact = HnswIndex.for_chunks(store), ExactIndex(store.vectors)
    query = _queries(1)[0]
    assert len(hnsw.search(query, 10, ef_search=10)) == 10
    # the graph holds f16 vectors: near-tied neighbours may swap places, so compare membership
    wide = hnsw.search(query, 10, ef_search=3_000)
    assert sorted(_ids(wide)) == sorted(_ids(exact.search(query, 10)))
    assert exact.search(query, 10, ef_search=5) == exact.search(query, 10)
    for bad in (0, -1):
        with pytest.raises(ValidationError, match="ef_search"):
            hnsw.search(query, 10, ef_search=bad)
    with pytest.raises(ValidationError, match="dimensions"):
        hnsw.search(np.ones(DIMS + 1, dtype=np.float32), 10)
    with pytest.raises(ValidationError, match="metric"):
        HnswIndex.for_chunks(store, "manhattan")


def test_an_empty_store_has_no_graph(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "empty.db")
    hnsw = HnswIndex.for_chunks(store)
    assert len(hnsw) == 0 and hnsw.search(_queries(1)[0], 10) == []
    assert not list(tmp_path.glob("*.hnsw.*"))
    store.close()


def test_the_searcher_switches_to_hnsw_at_the_threshold(store: SQLiteStore) -> None:
    total = NOTES * CHUNKS_PER_NOTE
    model = EmbedderBinding.of(Embedder.fake(DIMS))
    store.set_meta(FINGERPRINT_META_KEY, Embedder.fake(DIMS).fingerprint.to_json())
    assert isinstance(Corpus(store, model).index.current, ExactIndex)
    built = Corpus(store, model, hnsw_threshold=total).index.wait_for_graph()
    assert isinstance(built, HnswIndex)
    growing = Corpus(store, model, hnsw_threshold=total + 50)
    assert isinstance(growing.index.current, ExactIndex)
    index = growing.index.current
    assert growing.index.current is index, "kept while the store is unchanged"
    _add_note(store, "c/more.md", _unit_vectors(50, seed=3))
    assert isinstance(growing.index.wait_for_graph(), HnswIndex)
    hits = growing.search("chunk", k=5, where=Where(path_prefix="c/"), mode="vector")
    assert len(hits) == 5 and all(h.path == "c/more.md" for h in hits)


def test_below_the_exact_ceiling_a_graph_is_built_only_once_searching_paid_for_it(
    store: SQLiteStore, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the default threshold but under `EXACT_CEILING`, a search never waits for a graph
    build: it searches exactly until exact searches have cost what a build would, uses a saved
    graph a few changes behind at once, and goes exact again when the saved one is far behind
    (as another process re-indexing leaves it)."""
    _add_note(store, "c/more.md", _unit_vectors(2_100, seed=7))  # 5,100 vectors
    assert HNSW_THRESHOLD <= 5_100 < EXACT_CEILING
    store.set_meta(FINGERPRINT_META_KEY, Embedder.fake(DIMS).fingerprint.to_json())
    model = EmbedderBinding.of(Embedder.fake(DIMS))
    graph = db.with_name("store.db.hnsw.usearch")

    monkeypatch.setattr(vector_module, "BUILD_SECONDS_PER_VECTOR", 10.0)  # never paid here
    one_shot = Corpus(store, model)
    for _ in range(3):
        assert len(one_shot.search("chunk", k=5, mode="vector")) == 5
    assert isinstance(one_shot.index.current, ExactIndex)
    assert one_shot.index.mode() == "exact-float32" and not graph.exists()

    monkeypatch.setattr(vector_module, "BUILD_SECONDS_PER_VECTOR", 1e-12)  # paid by one search
    long_lived = Corpus(store, model)
    exact = long_lived.search("chunk", k=5, mode="vector")
    assert isinstance(long_lived.index.wait_for_graph(), HnswIndex), "its first search paid"
    found = long_lived.search("chunk", k=5, mode="vector")  # float16 graph: ids, not scores
    assert [h.chunk_id for h in found] == [h.chunk_id for h in exact]
    long_lived.close()
    assert graph.exists()

    monkeypatch.setattr(vector_module, "BUILD_SECONDS_PER_VECTOR", 10.0)
    store = SQLiteStore(db, create=False)
    later = Corpus(store, model)
    assert later.index.mode() == "usearch-hnsw", "a saved, current graph is used at once"
    later.search("chunk", k=5, mode="vector")
    index = later.index.current
    assert isinstance(index, HnswIndex) and index.build_count == 0
    later.close()

    store = SQLiteStore(db, create=False)
    _add_note(store, "d/rewritten.md", _unit_vectors(2_600, seed=8))  # past the replay limit
    behind = Corpus(store, model)
    assert behind.index.graph()["state"] == "rebuild"
    assert len(behind.search("chunk", k=5, mode="vector")) == 5
    assert isinstance(behind.index.current, ExactIndex), "far behind: exact, not a rebuild"
    behind.close()
