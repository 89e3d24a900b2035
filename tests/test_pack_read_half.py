"""Issue 28 items 1 and 2: a pack is the read half (`vrom.Pack`), and `AgentMemory`'s search
and context are the seed's views of it (`vrom.seed_views`), not a second search.

A real pack built from the example vault with the fake model, served over HTTP on 127.0.0.1
(tests/pack_server.py) and mounted through `AgentMemory`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from pack_server import PackServer, pack_server_fixture  # noqa: F401 (the pack_server fixture)

from vrom import Embedder, Pack, SearchReport, ValidationError
from vrom.agent_memory import AgentMemory
from vrom.embed.rerank import FakeReranker
from vrom.pack_builder import build_pack, publish_pack
from vrom.packs.cache import VromCache
from vrom.seed_views import pack_context, search_results

EXAMPLE_VAULT = Path(__file__).resolve().parents[1] / "examples" / "vault"
pytestmark = pytest.mark.filterwarnings("ignore::vrom.packs.signing.UnverifiedPackWarning")
QUERY = "network switch"


@pytest.fixture
def registry(pack_server: PackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("VROM_REGISTRY_URL", "VROM_CACHE_DIR", "VROM_CACHE_QUOTA", "VROM_TRUSTED_KEYS"):
        monkeypatch.delenv(name, raising=False)
    built = tmp_path / "built"
    build_pack(
        EXAMPLE_VAULT, built, pack_id="handbook", version="1.0.0", embedder=Embedder.fake(64)
    )
    publish_pack(built, pack_server.root)
    return pack_server.url_for("registry.json")


@pytest.fixture
def memory(registry: str, tmp_path: Path) -> Iterator[AgentMemory]:
    with AgentMemory(registry_url=registry, cache_dir=tmp_path / "cache") as memory:
        memory.init()
        memory.mount("handbook")
        yield memory


def test_agent_memory_search_is_the_seed_view_of_the_pack_s_read_half(
    memory: AgentMemory, registry: str, tmp_path: Path
) -> None:
    cached = VromCache(registry, tmp_path / "cache").load_index("handbook")
    with Pack.open(cached, Embedder.fake(64)) as pack:
        for mode in ("vector", "keyword", "hybrid", "rerank"):
            report = pack.search(QUERY, 5, mode=mode, expand_context=True)
            assert isinstance(report, SearchReport) and report.mode == mode and report
            seen = memory.search(QUERY, top_k=5, mode=mode, expand_context=True)
            url_base = pack.manifest.source.get("url_base")
            assert seen == search_results(report, mode, url_base), mode
        context = pack.context(QUERY, max_tokens=400)
        assert context.sources and "Sources:" in context.text
        assert pack.search(QUERY, 5, where={"no-such-field": "x"}) == []


def test_agent_memory_format_context_is_the_one_engine_s_pack_rendering(
    memory: AgentMemory,
) -> None:
    results = memory.search(QUERY, top_k=5, expand_context=True)
    text = memory.format_context(results, max_tokens=300)
    assert text == pack_context(results, True, 300)
    assert text.startswith("#") and "[Source: " in text and len(text) <= 300 * 4
    assert "[Source: " not in memory.format_context(results, include_sources=False)


def test_a_pack_searched_with_rerank_needs_a_reranker(
    memory: AgentMemory, registry: str, tmp_path: Path
) -> None:
    cached = VromCache(registry, tmp_path / "cache").load_index("handbook")
    with Pack.open(cached, Embedder.fake(64)) as pack:
        with pytest.raises(ValidationError, match=r"none is configured: AgentMemory\(reranker="):
            pack.search(QUERY, 5, rerank=True)
        assert pack.search(QUERY, 5, rerank=False) == pack.search(QUERY, 5)
    with pytest.raises(ValidationError, match="none is configured"):
        memory.search(QUERY, top_k=3, rerank=True)


def test_agent_memory_reranks_a_mounted_pack_with_its_reranker(
    registry: str, tmp_path: Path
) -> None:
    reranker = FakeReranker()
    with AgentMemory(registry_url=registry, cache_dir=tmp_path / "c", reranker=reranker) as memory:
        memory.init()
        memory.mount("handbook")
        plain = memory.search("network switch vlan", top_k=5, mode="keyword")
        results = memory.search("network switch vlan", top_k=5, mode="keyword", rerank=True)
        scores = reranker.score(
            "network switch vlan",
            [f"{r.metadata['doc_title']}\n{r.metadata['text']}" for r in plain],
        )
        by_score = sorted(range(len(plain)), key=lambda i: -scores[i])  # stable: ties keep order
        assert by_score != list(range(len(plain)))  # the reranker moves something
        assert [r.id for r in results] == [plain[i].id for i in by_score]
        for result in results:
            assert result.metadata["score_kind"] == "reranker"
            expected = 1.0 - 1.0 / (1.0 + math.exp(-result.metadata["score"]))
            assert result.distance == pytest.approx(expected, abs=1e-6)


def test_a_reranked_pack_context_keeps_results_whatever_their_logits(
    registry: str, tmp_path: Path
) -> None:
    # the fake reranker's scores are shares of the query's words: some under 0.4 of the best,
    # which a relative cut-off would drop, as it would drop negative logits
    with AgentMemory(
        registry_url=registry, cache_dir=tmp_path / "c", reranker=FakeReranker()
    ) as memory:
        memory.init()
        memory.mount("handbook")
        results = memory.search("network switch vlan", top_k=5, mode="keyword", rerank=True)
        scores = [r.metadata["score"] for r in results]
        assert min(scores) < 0.4 * max(scores)  # else the test proves nothing
        kept = memory.format_context(results)
        assert kept == memory.format_context(results, relative_cutoff=None)
        unkinded = [  # the same scores, not said to be a reranker's: the cut-off drops some
            dataclasses.replace(r, metadata={**r.metadata, "score_kind": "bm25"}) for r in results
        ]
        assert len(memory.format_context(unkinded)) < len(kept)
