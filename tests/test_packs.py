"""Knowledge packs end to end: build, publish, pull, mount, search, hot-swap, format_context."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from vrom import Embedder
from vrom.agent_memory import AgentMemory
from vrom.errors import ModelError, PackError, ValidationError
from vrom.pack_builder import build_pack, publish_pack
from vrom.packs.manifest import PackManifest, file_sha256
from vrom.results import SearchResult

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_VAULT = REPO / "examples" / "vault"
# unsigned packs with no trusted keys: each pull warns (tests/test_pack_signing.py covers that)
pytestmark = pytest.mark.filterwarnings("ignore::vrom.packs.signing.UnverifiedPackWarning")


def _corpus(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    """A registry folder holding the example vault as 'handbook' (fake model, 64 d)."""
    pack = tmp_path / "built" / "handbook"
    build_pack(
        EXAMPLE_VAULT,
        pack,
        pack_id="handbook",
        version="1.0.0",
        embedder=Embedder.fake(),
        description="The example vault",
        tags=["example"],
        url_base="https://example.org/notes/",
    )
    registry = tmp_path / "registry"
    publish_pack(pack, registry)
    return registry


@pytest.fixture
def memory(registry: Path, tmp_path: Path) -> Any:
    memory = AgentMemory(registry_url=str(registry), cache_dir=tmp_path / "cache")
    memory.init()
    yield memory
    memory.destroy()


def test_a_built_pack_has_a_complete_manifest(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    manifest = build_pack(
        EXAMPLE_VAULT, pack, pack_id="notes", version="0.1.0", embedder=Embedder.fake()
    )
    on_disk = json.loads((pack / "manifest.json").read_text())
    for key in (
        "vrom_id",
        "version",
        "description",
        "source",
        "embedding_spec",
        "hnsw_config",
        "vector_count",
        "total_tokens",
        "total_chunks",
        "corpus_hash",
        "created_at",
        "chunk_strategy",
        "files",
    ):
        assert key in on_disk, key
    spec = on_disk["embedding_spec"]
    assert spec["model"] == "fake-hashed-words" and spec["dimensions"] == 64
    assert spec["distance_metric"] == "cosine" and spec["normalized"] is True
    assert set(on_disk["hnsw_config"]) == {"M", "ef_construction", "ef_search"}
    assert manifest.vector_count == manifest.total_chunks == 16
    assert manifest.corpus_hash.startswith("sha256:") and len(manifest.corpus_hash) == 23
    assert on_disk["created_at"].endswith("Z")
    for file in manifest.files.values():
        assert (pack / file.path).stat().st_size == file.size
        assert file_sha256(pack / file.path) == file.sha256
    assert sorted(p.name for p in pack.iterdir()) == ["index.usearch", "manifest.json", "store.db"]
    again = build_pack(
        EXAMPLE_VAULT,
        tmp_path / "again",
        pack_id="notes",
        version="0.1.0",
        embedder=Embedder.fake(),
    )
    assert again.corpus_hash == manifest.corpus_hash, "the corpus hash depends on the text only"


def test_build_refuses_bad_ids_versions_and_sources(tmp_path: Path) -> None:
    for pack_id, version in (("Bad Id", "1.0.0"), ("ok", "1.0"), ("../x", "1.0.0")):
        with pytest.raises(ValidationError):
            build_pack(
                EXAMPLE_VAULT,
                tmp_path / "p",
                pack_id=pack_id,
                version=version,
                embedder=Embedder.fake(),
            )
    with pytest.raises(ValidationError):
        build_pack(
            tmp_path / "missing",
            tmp_path / "p",
            pack_id="x",
            version="1.0.0",
            embedder=Embedder.fake(),
        )
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    with pytest.raises(ValidationError, match="not an empty folder"):
        build_pack(
            EXAMPLE_VAULT, tmp_path / "full", pack_id="x", version="1.0.0", embedder=Embedder.fake()
        )


def test_publish_writes_a_registry_entry(registry: Path, tmp_path: Path) -> None:
    data = json.loads((registry / "registry.json").read_text())
    (entry,) = data["packs"]
    assert entry["id"] == "handbook" and entry["version"] == "1.0.0"
    assert entry["vectors"] == 16 and entry["dimensions"] == 64
    assert entry["files"] == {
        "manifest": "handbook/1.0.0/manifest.json",
        "index": "handbook/1.0.0/index.usearch",
        "chunks": "handbook/1.0.0/store.db",
    }
    for name in ("manifest", "index", "chunks"):
        assert (registry / entry["files"][name]).is_file()
    # a new version replaces the entry; another pack is added beside it
    pack = tmp_path / "v2"
    build_pack(EXAMPLE_VAULT, pack, pack_id="handbook", version="1.1.0", embedder=Embedder.fake())
    publish_pack(pack, registry, base_url="https://packs.example.org/")
    other = tmp_path / "other"
    corpus = _corpus(tmp_path / "c.jsonl", [{"_id": "d1", "title": "T", "text": "body text"}])
    build_pack(corpus, other, pack_id="other", version="0.0.1", embedder=Embedder.fake())
    publish_pack(other, registry)
    packs = {p["id"]: p for p in json.loads((registry / "registry.json").read_text())["packs"]}
    assert set(packs) == {"handbook", "other"}
    assert packs["handbook"]["version"] == "1.1.0"
    assert packs["handbook"]["files"]["manifest"] == (
        "https://packs.example.org/handbook/1.1.0/manifest.json"
    )


def test_publish_refuses_a_tampered_pack(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    build_pack(EXAMPLE_VAULT, pack, pack_id="notes", version="0.1.0", embedder=Embedder.fake())
    with open(pack / "index.usearch", "r+b") as file:
        file.seek(100)
        file.write(b"\xff\xff")
    with pytest.raises(PackError, match="SHA-256"):
        publish_pack(pack, tmp_path / "registry")


def test_mount_search_and_status(memory: AgentMemory) -> None:
    assert not memory.is_ready and memory.get_mount_status().ready is False
    status = memory.mount("hub://handbook")
    assert (status.active_vrom, status.version, status.ready) == ("handbook", "1.0.0", True)
    assert (status.vectors, status.dim, status.model) == (16, 64, "fake-hashed-words")
    assert memory.is_cached("handbook")
    results = memory.search("network switch", top_k=3)
    assert len(results) == 3
    first = results[0]
    assert first.metadata["source_file"] == "Projects/Project Atlas.md"
    assert first.metadata["doc_title"] == "Project Atlas"
    assert first.metadata["url"] == "https://example.org/notes/Projects/Project Atlas"
    assert [r.distance for r in results] == sorted(r.distance for r in results)
    assert all(0.0 <= r.distance <= 2.0 for r in results)
    for key in ("chunk_id", "section_heading", "prev_chunk_id", "next_chunk_id"):
        assert key in first.metadata
    assert first.id == first.metadata["chunk_id"]


def test_distances_are_one_minus_the_cosine(memory: AgentMemory) -> None:
    memory.mount("handbook")
    embedder = Embedder.fake()
    query = "alerts that name the room and rack"
    for result in memory.search(query, top_k=5, ef_search=64):
        title, text = result.metadata["doc_title"], result.text
        embedded = text if text.lstrip("# ").startswith(title) else f"{title}\n\n{text}"
        vector = embedder.embed_documents([embedded])[0]  # notes are embedded with their title
        expected = 1.0 - float(embedder.embed_query(query) @ vector)
        assert result.distance == pytest.approx(expected, abs=2e-3)  # the graph stores f16


def test_expanded_results_join_their_neighbours(memory: AgentMemory) -> None:
    memory.mount("handbook")
    plain = memory.search("SQLite first version decision", top_k=1)[0]
    expanded = memory.search("SQLite first version decision", top_k=1, expand_context=True)[0]
    assert expanded.metadata["_expanded"] is True
    assert expanded.metadata["_context_chunks"] >= 2, "a count of the chunks joined"
    assert expanded.id == plain.id and expanded.metadata["text"] == plain.text
    assert plain.text in expanded.text and len(expanded.text) > len(plain.text)


def test_search_arguments_are_checked(memory: AgentMemory) -> None:
    with pytest.raises(PackError, match="nothing is mounted"):
        memory.search("x")
    memory.mount("handbook")
    with pytest.raises(ValidationError, match="ef_search"):
        memory.search("x", top_k=10, ef_search=5)
    for bad in (0, -1, True, "3"):
        with pytest.raises(ValidationError):
            memory.search("x", top_k=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        memory.search("  ")


def test_format_context_respects_the_budget() -> None:
    results = [
        SearchResult(
            f"passage {i} " + "a" * 30,
            {"section_heading": f"H{i}", "url": f"https://x.org/{i}"},
            0.1 * i,
            i,
        )
        for i in range(5)
    ]
    full = AgentMemory.format_context(results)
    blocks = full.split("\n\n---\n\n")
    assert len(blocks) == 5
    assert blocks[0] == "## H0\n\npassage 0 " + "a" * 30 + "\n\n[Source: https://x.org/0]"
    assert "[Source:" not in AgentMemory.format_context(results, include_sources=False)
    first_block_tokens = math.ceil(len(blocks[0]) / 4)
    two = AgentMemory.format_context(results, max_tokens=first_block_tokens + 30)
    assert two.count("## H") == 2, "the third block would pass the budget"
    assert AgentMemory.format_context(results, max_tokens=first_block_tokens - 1) == ""
    assert math.ceil(len(two) / 4) <= first_block_tokens + 30


def test_errors_name_what_is_wrong(registry: Path, tmp_path: Path) -> None:
    memory = AgentMemory(registry_url=str(registry), cache_dir=tmp_path / "cache")
    with pytest.raises(PackError, match="not initialised"):
        memory.mount("handbook")
    memory.init()
    memory.init()  # idempotent
    with pytest.raises(PackError, match="nope"):
        memory.mount("nope")
    memory.destroy()
    with pytest.raises(PackError, match="destroyed"):
        memory.mount("handbook")


def test_hot_swap_keeps_a_loaded_model_and_loads_another(tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    corpus_a = _corpus(tmp_path / "a.jsonl", [{"_id": "a1", "text": "apples and pears"}])
    corpus_b = _corpus(tmp_path / "b.jsonl", [{"_id": "b1", "text": "boats and harbours"}])
    for pack_id, corpus, dims in (
        ("fruit", corpus_a, 64),
        ("boats", corpus_b, 64),
        ("boats-wide", corpus_b, 32),
    ):
        build_pack(
            corpus,
            tmp_path / pack_id,
            pack_id=pack_id,
            version="1.0.0",
            embedder=Embedder.fake(dims),
        )
        publish_pack(tmp_path / pack_id, registry)
    events: list[dict[str, Any]] = []
    with AgentMemory(registry_url=str(registry), cache_dir=tmp_path / "cache") as memory:
        memory.init()
        memory.on_progress(lambda event: events.append(dict(event)))
        memory.mount("fruit")
        assert memory.model_loads == 1
        assert memory.search("pears", top_k=1)[0].metadata["source_file"] == "a1"
        memory.mount("boats")  # same model: no load
        assert memory.model_loads == 1
        assert memory.search("harbours", top_k=1)[0].metadata["source_file"] == "b1"
        memory.mount("boats-wide")  # a 32-d model: loaded
        assert memory.model_loads == 2
        assert memory.get_mount_status().dim == 32
        memory.unmount()
        assert not memory.is_ready and memory.is_cached("boats-wide"), "unmount keeps the cache"
    assert [e["status"] for e in events] == ["loading", "ready", "loading", "ready"]


def test_a_pack_needing_an_unavailable_model_names_it(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    build_pack(EXAMPLE_VAULT, pack, pack_id="exotic", version="1.0.0", embedder=Embedder.fake())
    manifest = json.loads((pack / "manifest.json").read_text())
    manifest["embedding_spec"]["model"] = "acme/embed-9000"
    manifest["embedding_spec"]["fingerprint"]["model"] = "acme/embed-9000"
    (pack / "manifest.json").write_text(json.dumps(manifest))
    publish_pack(pack, tmp_path / "registry")
    with AgentMemory(registry_url=str(tmp_path / "registry"), cache_dir=tmp_path / "c") as memory:
        memory.init()
        with pytest.raises(ModelError, match="acme/embed-9000"):
            memory.mount("exotic")


def test_a_pack_store_is_never_written(memory: AgentMemory) -> None:
    memory.mount("handbook")
    pack_dir = memory._mounted.cached.directory if memory._mounted else None
    assert pack_dir is not None
    memory.search("network", top_k=2)
    memory.unmount()
    PackManifest.read(pack_dir).verify(pack_dir)  # still byte-identical to the manifest
    assert sorted(p.name for p in pack_dir.iterdir()) == [
        "index.usearch",
        "manifest.json",
        "store.db",
        "verified.json",
    ], "no -wal, -shm or graph cache beside it"
    assert memory.mount("handbook").ready, "reading left the files as verified (same mtimes)"


def test_beir_corpus_pack(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    beir.mkdir()
    _corpus(
        beir / "corpus.jsonl",
        [
            {
                "_id": "d1",
                "title": "Solar panels",
                "text": "Panels turn sunlight into power.",
                "url": "https://example.org/d1",
            },
            {"_id": "d2", "title": "Wind", "text": "Turbines turn wind into power."},
        ],
    )
    build_pack(beir, tmp_path / "pack", pack_id="energy", version="1.0.0", embedder=Embedder.fake())
    publish_pack(tmp_path / "pack", tmp_path / "registry")
    with AgentMemory(registry_url=str(tmp_path / "registry"), cache_dir=tmp_path / "c") as memory:
        memory.init()
        memory.mount("energy")
        first = memory.search("sunlight panels", top_k=1)[0]
        assert first.metadata["source_file"] == "d1"
        assert first.metadata["doc_title"] == "Solar panels"
        assert first.metadata["url"] == "https://example.org/d1"


def test_a_pack_is_built_plain_when_the_storage_key_variable_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$VROM_STORAGE_KEY encrypts a user's collections, never a pack's work store: a pack is
    a plain file every client reads (the build failed: "corpus.db is not a vrom store")."""
    pytest.importorskip("sqlcipher3")  # the key is refused without SQLCipher: nothing to test
    monkeypatch.setenv("VROM_STORAGE_KEY", "a user's collection key")
    beir = tmp_path / "beir"
    beir.mkdir()
    _corpus(beir / "corpus.jsonl", [{"_id": "d1", "title": "Wind", "text": "Turbines turn."}])
    build_pack(beir, tmp_path / "pack", pack_id="wind", version="1.0.0", embedder=Embedder.fake())
    publish_pack(tmp_path / "pack", tmp_path / "registry")
    with AgentMemory(registry_url=str(tmp_path / "registry"), cache_dir=tmp_path / "c") as memory:
        memory.init()
        memory.mount("wind")
        assert memory.search("turbines", top_k=1)[0].metadata["source_file"] == "d1"


def test_an_unreadable_index_is_reported_after_download(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    build_pack(EXAMPLE_VAULT, pack, pack_id="broken", version="1.0.0", embedder=Embedder.fake())
    (pack / "index.usearch").write_bytes(b"not a usearch graph" * 50)
    manifest = json.loads((pack / "manifest.json").read_text())
    manifest["files"]["index"]["size"] = (pack / "index.usearch").stat().st_size
    manifest["files"]["index"]["sha256"] = file_sha256(pack / "index.usearch")
    (pack / "manifest.json").write_text(json.dumps(manifest))  # consistent, but not a graph
    publish_pack(pack, tmp_path / "registry")
    with AgentMemory(registry_url=str(tmp_path / "registry"), cache_dir=tmp_path / "c") as memory:
        memory.init()
        with pytest.raises(PackError, match="index is unreadable after download"):
            memory.mount("broken")
        assert not memory.is_ready


def test_a_pack_is_searched_by_keyword_hybrid_and_rerank(memory: AgentMemory) -> None:
    memory.mount("handbook")
    vector = memory.search("network switch", top_k=3)
    keyword = memory.search("network switch", top_k=3, mode="keyword")
    hybrid = memory.search("network switch", top_k=3, mode="hybrid")
    reranked = memory.search("network switch", top_k=3, mode="rerank")
    assert "score" not in vector[0].metadata, "vector mode keeps the seed's shape"
    for results, part, kind in (
        (keyword, "bm25", "bm25"),
        (hybrid, "fused", "fused"),
        (reranked, "fts", "rerank"),
    ):
        assert results[0].metadata["source_file"] == "Projects/Project Atlas.md"
        assert part in results[0].metadata["scores"]
        assert results[0].metadata["score_kind"] == kind
        assert results[0].distance == 0.0, "the best hit is at distance 0 outside vector mode"
        assert [r.distance for r in results] == sorted(r.distance for r in results)
        assert all(0.0 <= r.distance <= 1.0 for r in results)
        assert "switch" in results[0].metadata["text"].lower()
    assert {r.id for r in hybrid} >= {keyword[0].id, vector[0].id} - {None}
    with pytest.raises(ValidationError, match="mode must be one of"):
        memory.search("network switch", mode="fuzzy")


def test_keyword_search_of_a_pack_needs_no_model(registry: Path, tmp_path: Path) -> None:
    class Refusing(type(Embedder.fake())):  # type: ignore[misc]
        def _embed(self, texts: Any, kind: str) -> Any:
            raise AssertionError("keyword search embedded a text")

    with AgentMemory(
        registry_url=str(registry), cache_dir=tmp_path / "cache", embedder=Refusing(64)
    ) as memory:
        memory.init()
        memory.mount("handbook")
        hits = memory.search("network switch", top_k=2, mode="keyword")
        assert hits and hits[0].metadata["source_file"] == "Projects/Project Atlas.md"


def test_agent_memory_never_closes_the_callers_embedder(registry: Path, tmp_path: Path) -> None:
    closed: list[bool] = []

    class Tracked(type(Embedder.fake())):  # type: ignore[misc]
        def close(self) -> None:
            closed.append(True)

    mine = Tracked(64)
    with AgentMemory(registry_url=str(registry), cache_dir=tmp_path / "c", embedder=mine) as memory:
        memory.init()
        memory.mount("handbook")
        memory.search("network switch")
    assert closed == [], "destroy() left the caller's embedder open"
