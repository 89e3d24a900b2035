"""The search core's parts: store locations, embedder ownership, fusion and widening, and
stores written by older vroms."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vrom import Collection, Embedder, Vault
from vrom.embed import EmbedderBinding, resolve_embedder
from vrom.errors import ValidationError
from vrom.index.codec import encode
from vrom.search.fusion import MAX_POOL, reciprocal_rank_fusion, widen
from vrom.store import MemoryFilter, database_file, open_store
from vrom.store.schema import MIGRATIONS, SCHEMA_VERSION

FAKE = Embedder.fake(16)


class _Tracked(type(FAKE)):  # type: ignore[misc]
    """The fake model, counting its closes."""

    closes = 0

    def close(self) -> None:
        type(self).closes += 1


def test_store_locations(tmp_path: Path) -> None:
    assert database_file(None) is None and database_file("sqlite://") is None
    assert database_file(":memory:") is None and database_file("sqlite:///:memory:") is None
    assert database_file("sqlite:////abs/x.db") == Path("/abs/x.db")
    assert database_file(tmp_path / "a.db") == tmp_path / "a.db"
    for bad, match in (
        ("postgresql://me:hunter2@db/vrom", "PostgreSQL backend"),
        ("mysql://me:hunter2@db/vrom", "not supported"),
        ("sqlite:relative.db", "sqlite:///"),
        ("", "empty"),
    ):
        with pytest.raises(ValidationError, match=match) as caught:
            database_file(bad)
        assert "hunter2" not in str(caught.value)
    store = open_store(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert store.location == str(tmp_path / "b.db") and store.documents.count() == 0
        sidecar = store.sidecar(".graph")
        assert sidecar is not None and sidecar.path == tmp_path / "b.db.graph"
    finally:
        store.close()
    memory = open_store(None)
    assert memory.sidecar(".graph") is None, "nothing beside a store in memory"
    memory.close()


def test_embedder_choices_and_who_owns_them() -> None:
    assert resolve_embedder(None, "default") == (None, False)
    assert resolve_embedder(FAKE, "default") == (FAKE, False), "the caller's: never closed"
    made, owned = resolve_embedder("fake:8", "default")
    assert made is not None and made.dim == 8 and owned
    auto, owned = resolve_embedder("auto", "fake:12")
    assert auto is not None and auto.dim == 12 and owned
    assert resolve_embedder("none", "default") == (None, True)
    with pytest.raises(ValidationError, match="spec string"):
        resolve_embedder(3, "default")  # type: ignore[arg-type]
    lazy_calls: list[int] = []
    binding = EmbedderBinding.lazy(lambda: lazy_calls.append(1) or FAKE)
    assert lazy_calls == [] and binding.configured
    assert binding.get() is FAKE and binding.get() is FAKE and lazy_calls == [1]


def test_facades_never_close_an_embedder_they_were_given(tmp_path: Path) -> None:
    _Tracked.closes = 0
    mine = _Tracked(16)
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    with Vault.open(tmp_path / "v", tmp_path / "state", embedder=mine) as vault:
        vault.index()
    with Collection.open("c", embedder=mine) as docs:
        docs.add([{"id": "a", "text": "alpha"}])
    assert _Tracked.closes == 0
    assert mine.embed_query("still usable").shape == (16,)


def test_fusion_sums_reciprocal_ranks_and_keeps_each_part() -> None:
    fused = reciprocal_rank_fusion([("bm25", [("a", 9.0), ("b", 4.0)]), ("vector", [("b", 0.8)])])
    assert fused["a"] == {"bm25": 9.0, "rrf": pytest.approx(1 / 61)}
    assert fused["b"] == {"bm25": 4.0, "vector": 0.8, "rrf": pytest.approx(1 / 62 + 1 / 61)}


def test_a_candidate_a_ranking_could_not_see_stands_in_with_another_rank() -> None:
    rankings = [("bm25", [("a", 9.0), ("b", 5.0)]), ("vector", [("b", 0.9)])]
    fused = reciprocal_rank_fusion(rankings, unseen={"vector": {"a": 1}})
    assert fused["a"] == {"bm25": 9.0, "rrf": pytest.approx(2 / 61)}, "no vector part invented"
    assert fused["b"]["rrf"] == pytest.approx(1 / 62 + 1 / 61)


def test_hybrid_on_a_barely_embedded_store_leans_on_keyword(tmp_path: Path) -> None:
    notes = {f"n{i:03d}.md": f"# Note {i}\n\nplain words number {i}\n" for i in range(100)}
    notes["target.md"] = "# Target\n\nthe zebra crossing near the station\n"
    root = tmp_path / "vault"
    root.mkdir()
    for name, text in notes.items():
        (root / name).write_text(text, encoding="utf-8")
    with Vault.open(root, tmp_path / "state", embedder=FAKE) as vault:
        vault.index(embed=False)
        # one vector: the first chunk's, so the vector ranking sees 1 of 101 chunks
        vault.store.vectors.put(
            [
                (c.chunk_id, encode(FAKE.embed_documents([c.text]), "float32")[0])
                for c in vault.store.vectors.missing(1)
            ]
        )
        vault.corpus.refresh()
        report = vault.search("zebra crossing", k=3, mode="hybrid", fallback=True)
        assert (report.vectors, report.chunks) == (1, 101)
        assert report.results[0].path == "target.md", "the keyword match leads"
        assert report.results[0].score > 2 * report.results[1].score


def test_widening_grows_the_pool_only_while_it_must() -> None:
    asked: list[int] = []

    def crowded(pool: int) -> tuple[list[int], bool]:
        asked.append(pool)
        return list(range(min(pool // 100, 10))), True  # one document per 100 candidates

    assert widen(crowded, 10, 50) == list(range(10)) and asked == [50, 200, 800, 3200]
    asked.clear()
    assert widen(lambda pool: ([1], False), 10, 50) == [1], "nothing more to fetch"
    asked.clear()
    assert len(widen(crowded, 1000, 50)) == 10
    assert asked == [50, 200, 800, 3200, MAX_POOL], "never past MAX_POOL"


def _version_5_store(path: Path) -> None:
    raw = sqlite3.connect(path)
    for migration in MIGRATIONS[:5]:
        raw.executescript(migration.script)
    raw.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '5')")
    raw.execute(
        "INSERT INTO memories(id, created_unix, updated_unix, type, title, content)"
        " VALUES ('mem_1', 1.0, 1.0, 'fact', 'Coffee', 'Espresso, no sugar.')"
    )
    raw.execute(
        "INSERT INTO memories_fts(memory_id, title, content, tags)"
        " VALUES ('mem_1', 'Coffee', 'Espresso, no sugar.', '')"
    )
    raw.execute("INSERT INTO memory_vectors(memory_id, data) VALUES ('mem_1', ?)", (b"\0" * 64,))
    raw.commit()
    raw.close()


def test_a_version_5_store_keeps_its_memory_vectors_through_migration_6(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _version_5_store(path)
    store = open_store(path, create=False)
    try:
        assert store.describe()["schema_version"] == SCHEMA_VERSION == 10
        assert store.memories.vectors.count() == 1, "the vector moved under the memory's key"
        assert store.memories.keys_matching(MemoryFilter()) == [1]
        assert store.integrity_problems() == []
    finally:
        store.close()


def test_a_pack_store_of_schema_5_still_opens_read_only(tmp_path: Path) -> None:
    path = tmp_path / "pack.db"
    _version_5_store(path)
    store = open_store(path, read_only=True)
    try:
        assert store.documents.count() == 0 and store.vectors.count() == 0
    finally:
        store.close()
